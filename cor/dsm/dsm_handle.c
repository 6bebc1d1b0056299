/*
 * The handles libcordsm gives out (requests, regions, barriers): a slot of a table plus a
 * generation bumped at each reuse plus the kind, never a pointer. A stale, forged or
 * other-kind handle names no live slot and is COR_EINVAL; the slots themselves are never
 * freed, so checking a handle reads valid memory whatever the caller passes.
 *
 * Layout of a handle: generation (32 bits) | busy (1) | kind (7) | slot (24). Never 0 (the
 * generation starts at 1), so NULL stays "no handle".
 */
#include "dsm_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SLOT_BITS 24
#define CHUNK 1024
#define CHUNKS ((1u << SLOT_BITS) / CHUNK)
#define BUSY ((uint64_t)1 << 31)

struct hslot {
    _Atomic uint64_t handle; /* the live handle (BUSY while claimed), or 0 when free */
    _Atomic(void *) obj;
    uint32_t gen;       /* table lock */
    uint32_t next_free; /* table lock; slot + 1, 0 ends the list */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct hslot *) chunks[CHUNKS];
static _Atomic uint32_t nslots;
static uint32_t free_head; /* slot + 1 */

static struct hslot *slot_at(uint32_t i)
{
    return &atomic_load_explicit(&chunks[i / CHUNK], memory_order_acquire)[i % CHUNK];
}

/* Puts an ended slot on the free list. */
static void recycle(uint32_t i)
{
    pthread_mutex_lock(&table_lock);
    slot_at(i)->next_free = free_head;
    free_head = i + 1;
    pthread_mutex_unlock(&table_lock);
}

uint64_t dsm_handle_put(enum dsm_handle_kind kind, void *obj)
{
    pthread_mutex_lock(&table_lock);
    struct hslot *s = NULL;
    uint32_t i = 0;
    if (free_head) {
        i = free_head - 1;
        s = slot_at(i);
        free_head = s->next_free;
    } else if ((i = atomic_load(&nslots)) < CHUNKS * CHUNK) {
        if (i % CHUNK == 0) {
            struct hslot *c = calloc(CHUNK, sizeof *c);
            if (!c) {
                pthread_mutex_unlock(&table_lock);
                return 0;
            }
            atomic_store_explicit(&chunks[i / CHUNK], c, memory_order_release);
        }
        s = slot_at(i);
        atomic_store(&nslots, i + 1);
    }
    uint64_t h = 0;
    if (s) {
        if (++s->gen == 0) s->gen = 1;
        h = (uint64_t)s->gen << 32 | (uint64_t)kind << SLOT_BITS | i;
        atomic_store_explicit(&s->obj, obj, memory_order_relaxed);
        atomic_store_explicit(&s->handle, h, memory_order_release);
    }
    pthread_mutex_unlock(&table_lock);
    return h;
}

/* The slot a handle of this kind names, or NULL (out of range, wrong kind). */
static struct hslot *slot_of(enum dsm_handle_kind kind, uint64_t h)
{
    uint32_t i = (uint32_t)h & ((1u << SLOT_BITS) - 1);
    if (h & BUSY || (h >> SLOT_BITS & 0x7f) != kind || i >= atomic_load(&nslots)) return NULL;
    return slot_at(i);
}

void *dsm_handle_get(enum dsm_handle_kind kind, uint64_t h)
{
    struct hslot *s = slot_of(kind, h);
    if (!s || atomic_load_explicit(&s->handle, memory_order_acquire) != h) return NULL;
    void *obj = atomic_load_explicit(&s->obj, memory_order_relaxed);
    /* still the same handle after reading obj: obj belongs to it */
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&s->handle, memory_order_relaxed) == h ? obj : NULL;
}

void *dsm_handle_claim(enum dsm_handle_kind kind, uint64_t h)
{
    struct hslot *s = slot_of(kind, h);
    uint64_t want = h;
    if (!s || !atomic_compare_exchange_strong(&s->handle, &want, h | BUSY)) return NULL;
    return atomic_load_explicit(&s->obj, memory_order_relaxed);
}

void dsm_handle_unclaim(enum dsm_handle_kind kind, uint64_t h)
{
    atomic_store_explicit(&slot_of(kind, h)->handle, h, memory_order_release);
}

void *dsm_handle_take(enum dsm_handle_kind kind, uint64_t h, bool claimed)
{
    struct hslot *s = slot_of(kind, h);
    uint64_t want = claimed ? h | BUSY : h;
    if (!s || !atomic_compare_exchange_strong(&s->handle, &want, 0)) return NULL;
    void *obj = atomic_load_explicit(&s->obj, memory_order_relaxed);
    recycle((uint32_t)h & ((1u << SLOT_BITS) - 1));
    return obj;
}

void dsm_handle_clear(void)
{
    uint32_t n = atomic_load(&nslots);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h = atomic_exchange(&slot_at(i)->handle, 0);
        if (h) recycle(i);
    }
}
