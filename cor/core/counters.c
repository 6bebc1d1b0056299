/*
 * The domain's message counters (cor_stats_get), kept per thread: every message bumps several
 * of them, and one shared set bounced its cache lines between the cores of all the threads
 * that send and make progress. Each thread that counts gets a block of its own (one writer, so
 * a relaxed load and store, no atomic read-modify-write); a reader sums the live blocks and
 * what the threads that ended left. Gauges (unexpected messages now) are sums of increments
 * and decrements made in different threads, modulo 2^64.
 */
#include <stdlib.h>

#include "internal.h"

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cor_counter_block *blocks; /* live threads' blocks (blocks_lock) */
static uint64_t retired[COR_COUNTERS];   /* counts of threads that ended (blocks_lock) */
static pthread_key_t block_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
_Thread_local struct cor_counter_block *cor__counters_mine;

/* A thread ends: its counts go to `retired` and its block away. */
static void block_retire(void *p)
{
    struct cor_counter_block *b = p;
    COR_LOCK(&blocks_lock);
    for (struct cor_counter_block **pp = &blocks; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    for (int i = 0; i < COR_COUNTERS; i++)
        retired[i] += atomic_load(&b->v[i]);
    COR_UNLOCK(&blocks_lock);
    free(b);
    cor__counters_mine = NULL; /* a later count in this thread's exit starts a new block */
}

static void key_create(void)
{
    if (pthread_key_create(&block_key, block_retire) != 0)
        cor__fatal("pthread_key_create", __FILE__, __LINE__);
}

static struct cor_counter_block *block_adopt(void)
{
    pthread_once(&key_once, key_create);
    struct cor_counter_block *b = aligned_alloc(64, sizeof *b);
    if (!b) return NULL;
    for (int i = 0; i < COR_COUNTERS; i++)
        atomic_init(&b->v[i], 0);
    COR_LOCK(&blocks_lock);
    b->next = blocks;
    blocks = b;
    COR_UNLOCK(&blocks_lock);
    pthread_setspecific(block_key, b);
    return cor__counters_mine = b;
}

/* The thread's first count (internal.h's cor__count counts inline after it). */
void cor__count_first(enum cor_counter c, int64_t n)
{
    struct cor_counter_block *b = cor__counters_mine ? cor__counters_mine : block_adopt();
    if (!b) { /* out of memory for a block: count where ended threads' counts go */
        COR_LOCK(&blocks_lock);
        retired[c] += (uint64_t)n;
        COR_UNLOCK(&blocks_lock);
        return;
    }
    uint64_t v = atomic_load_explicit(&b->v[c], memory_order_relaxed);
    atomic_store_explicit(&b->v[c], v + (uint64_t)n, memory_order_relaxed);
}

void cor__counters_sum(uint64_t sum[COR_COUNTERS])
{
    COR_LOCK(&blocks_lock);
    for (int i = 0; i < COR_COUNTERS; i++)
        sum[i] = retired[i];
    for (struct cor_counter_block *b = blocks; b; b = b->next)
        for (int i = 0; i < COR_COUNTERS; i++)
            sum[i] += atomic_load_explicit(&b->v[i], memory_order_relaxed);
    COR_UNLOCK(&blocks_lock);
}
