/*
 * getBuffer: typed buffers allocated by the core. A header in front of the data records type
 * and size, so sendI needs no type argument. Live buffers (and small blocks kept for reuse,
 * marked released) are kept in a hash set, so a foreign or freed pointer is recognised before
 * any of its memory is read.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BUF_MAGIC 0xC0B0FFE5C0B0FFE5ull
#define BUF_DEAD 0xDEADC0B0DEADC0B0ull

/* Open-addressing set of live data pointers; TOMB marks a removed slot. Every send and
 * receive with a core buffer looks its pointer up, so lookups take no lock: a slot changes
 * by one atomic store (a pointer in, or TOMB), which a lookup sees or not; only a rebuild
 * moves entries, and it happens in a new table (published whole) or, to clear tombstones,
 * in place with `set_seq` odd, which makes lookups meanwhile try again. Replaced tables are
 * kept, as a lookup may still be reading one: tables only double, so they add up to no more
 * than the current one. */
#define TOMB ((uintptr_t)1)
struct set_table {
    size_t cap;
    struct set_table *older; /* replaced tables, kept (set_lock) */
    _Atomic uintptr_t slot[];
};
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static struct set_table *_Atomic set_cur; /* written under set_lock */
static _Atomic unsigned set_seq;          /* odd while a table is rebuilt in place */
static size_t set_used, set_live;         /* slots not empty (tombstones too); entries */

static size_t slot_of(uintptr_t p, size_t cap)
{
    return (size_t)((p >> 6) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

/* Puts p in the first free slot of its run; whether that slot was empty (not a tombstone). */
static bool table_put(struct set_table *t, uintptr_t p)
{
    size_t k = slot_of(p, t->cap);
    uintptr_t v;
    while ((v = atomic_load_explicit(&t->slot[k], memory_order_relaxed)) > TOMB)
        k = (k + 1) & (t->cap - 1);
    atomic_store_explicit(&t->slot[k], p, memory_order_release);
    return v == 0;
}

/* Room for one more entry: tombstones cleared where the live entries fill at most a quarter
 * of the table (message after message of cor_recvI's core buffers would otherwise double it
 * again and again), else a table twice as large. set_lock held. */
static bool set_make_room(void)
{
    struct set_table *t = atomic_load_explicit(&set_cur, memory_order_relaxed);
    if (t && (set_used + 1) * 2 <= t->cap) return true;
    if (t && (set_live + 1) * 4 <= t->cap) {
        uintptr_t *live = malloc(set_live * sizeof *live + 1);
        if (!live) return false;
        size_t n = 0;
        for (size_t i = 0; i < t->cap; i++) {
            uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (v > TOMB) live[n++] = v;
        }
        atomic_fetch_add(&set_seq, 1); /* odd: lookups wait for the rebuild */
        for (size_t i = 0; i < t->cap; i++)
            atomic_store_explicit(&t->slot[i], 0, memory_order_relaxed);
        for (size_t i = 0; i < n; i++)
            table_put(t, live[i]);
        atomic_fetch_add(&set_seq, 1);
        free(live);
        set_used = n;
        return true;
    }
    size_t cap = t ? t->cap * 2 : 1024;
    struct set_table *n = calloc(1, sizeof *n + cap * sizeof n->slot[0]);
    if (!n) return false;
    n->cap = cap;
    n->older = t;
    for (size_t i = 0; t && i < t->cap; i++) {
        uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (v > TOMB) table_put(n, v);
    }
    atomic_store_explicit(&set_cur, n, memory_order_release);
    set_used = set_live;
    return true;
}

static bool set_add(uintptr_t p)
{
    COR_LOCK(&set_lock);
    bool ok = set_make_room();
    if (ok) {
        /* tombstones already count as used */
        if (table_put(atomic_load_explicit(&set_cur, memory_order_relaxed), p)) set_used++;
        set_live++;
    }
    COR_UNLOCK(&set_lock);
    return ok;
}

/* The slot holding p in t, or NULL. */
static _Atomic uintptr_t *table_find(struct set_table *t, uintptr_t p)
{
    if (!t) return NULL;
    for (size_t k = slot_of(p, t->cap), n = 0; n < t->cap; k = (k + 1) & (t->cap - 1), n++) {
        uintptr_t v = atomic_load_explicit(&t->slot[k], memory_order_acquire);
        if (v == p) return &t->slot[k];
        if (!v) break;
    }
    return NULL;
}

static bool set_has(uintptr_t p)
{
    for (;;) {
        unsigned seq = atomic_load_explicit(&set_seq, memory_order_acquire);
        if (seq & 1) {
            sched_yield(); /* a rebuild: microseconds, once per many allocations */
            continue;
        }
        bool found = table_find(atomic_load_explicit(&set_cur, memory_order_acquire), p);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&set_seq, memory_order_relaxed) == seq) return found;
    }
}

/* Removes p; whether it was there. */
static bool set_take(uintptr_t p)
{
    COR_LOCK(&set_lock);
    _Atomic uintptr_t *slot = table_find(atomic_load_explicit(&set_cur, memory_order_relaxed), p);
    if (slot) {
        atomic_store_explicit(slot, TOMB, memory_order_release);
        set_live--;
    }
    COR_UNLOCK(&set_lock);
    return slot != NULL;
}

/* Small buffers come and go with every message (cor_recvI's core buffers, the DSM's
 * requests): some are kept for reuse rather than given back to the route's allocator (a lock,
 * an aligned allocation and a region record each way). A kept block stays in the set, its
 * header marked BUF_DEAD (lookups and releases refuse it), so neither its release nor its
 * reuse updates the set; kept blocks are freed only under small_lock, which a release holds
 * while it checks a pointer, so a double release never reads freed memory. */
#define SMALL_RAW (4096 + 128) /* raw bytes of every small block */
#ifdef __SANITIZE_ADDRESS__
#define SMALL_KEEP 1 /* (none kept: AddressSanitizer sees every use after release) */
#define SMALL_LIMIT 0
#else
#define SMALL_KEEP 64
#define SMALL_LIMIT SMALL_KEEP
#endif
static pthread_mutex_t small_lock = PTHREAD_MUTEX_INITIALIZER;
static char *small[SMALL_KEEP]; /* data pointers of kept blocks (small_lock) */
static int nsmall;

static struct cor_bufhdr *hdr_of(const void *data)
{
    return (struct cor_bufhdr *)data - 1;
}

/* Memory from the route that can send it without a copy (GM DMA memory), else the heap;
 * data is 64-byte aligned, the header sits right before it. */
static void *raw_alloc(size_t len, struct cor_hport **dma)
{
    struct cor_hport *hp = g.dma_port;
    *dma = NULL;
    if (hp) {
        void *p = hp->route->ops->mem_alloc(hp->rp, len + 64);
        if (p) {
            *dma = hp;
            return p;
        }
    }
    return malloc(len + 64);
}

static void raw_release(void *base, struct cor_hport *dma)
{
    if (dma)
        dma->route->ops->mem_free(dma->rp, base);
    else
        free(base);
}

/* The bytes a buffer of n elements, `bytes` in all, takes with its header and alignment. */
static size_t raw_size(size_t bytes, size_t n)
{
    return 64 + bytes + (n == 0);
}

static bool is_small(size_t raw)
{
    return raw <= SMALL_RAW;
}

/* A kept block from the current DMA port, or NULL. */
static char *small_take(void)
{
    char *data = NULL;
    COR_LOCK(&small_lock);
    if (nsmall && hdr_of(small[nsmall - 1])->dma == g.dma_port) data = small[--nsmall];
    COR_UNLOCK(&small_lock);
    return data;
}

void *cor__buf_alloc(cor_type_t type, size_t n)
{
    size_t es = cor_type_size(type);
    if (!es || n > (SIZE_MAX - 256) / es) return NULL;
    size_t raw = raw_size(n * es, n);
    char *data = is_small(raw) ? small_take() : NULL;
    bool fresh = !data;
    if (fresh) {
        struct cor_hport *dma;
        char *base = raw_alloc(is_small(raw) ? SMALL_RAW : raw, &dma);
        if (!base) return NULL;
        data = (char *)(((uintptr_t)base + 64 + 63) & ~(uintptr_t)63);
        hdr_of(data)->base = base;
        hdr_of(data)->dma = dma;
    }
    struct cor_bufhdr *h = hdr_of(data);
    h->type = type;
    h->n = n;
    h->bytes = n * es;
    atomic_store_explicit(&h->magic, BUF_MAGIC, memory_order_release);
    if (fresh && !set_add((uintptr_t)data)) {
        raw_release(h->base, h->dma);
        return NULL;
    }
    return data;
}

struct cor_bufhdr *cor__buf_hdr(const void *data)
{
    if (!data || ((uintptr_t)data & 63) || !set_has((uintptr_t)data)) return NULL;
    struct cor_bufhdr *h = hdr_of(data);
    return atomic_load_explicit(&h->magic, memory_order_acquire) == BUF_MAGIC ? h : NULL;
}

COR_API void *cor_getBuffer(cor_type_t type, size_t n)
{
    return cor__buf_alloc(type, n);
}

COR_API int cor_releaseBuffer(void *buf)
{
    if (!buf || ((uintptr_t)buf & 63)) return COR_EINVAL;
    COR_LOCK(&small_lock);
    struct cor_bufhdr *h = set_has((uintptr_t)buf) ? hdr_of(buf) : NULL;
    uint64_t live = BUF_MAGIC;
    if (!h || !atomic_compare_exchange_strong(&h->magic, &live, BUF_DEAD)) {
        COR_UNLOCK(&small_lock); /* foreign, or released already (and maybe kept) */
        return COR_EINVAL;
    }
    if (h->base && is_small(raw_size(h->bytes, h->n)) && h->dma == g.dma_port &&
        nsmall < SMALL_LIMIT) {
        small[nsmall++] = buf;
        COR_UNLOCK(&small_lock);
        return COR_OK;
    }
    set_take((uintptr_t)buf); /* before we let go: a second release must not find it */
    COR_UNLOCK(&small_lock);
    if (h->base) raw_release(h->base, h->dma);
    return COR_OK;
}

COR_API int cor_buffer_info(const void *buf, cor_type_t *type, size_t *n)
{
    struct cor_bufhdr *h = cor__buf_hdr(buf);
    if (!h) return COR_EINVAL;
    if (type) *type = h->type;
    if (n) *n = h->n;
    return COR_OK;
}

/* Before the routes close: route memory of buffers the program still holds goes away with
 * the port, so forget it here rather than free it into a closed port later. */
void cor__buf_forget_dma(void)
{
    COR_LOCK(&small_lock);
    while (nsmall > 0) {
        char *data = small[--nsmall];
        set_take((uintptr_t)data);
        raw_release(hdr_of(data)->base, hdr_of(data)->dma);
    }
    COR_UNLOCK(&small_lock);
    COR_LOCK(&set_lock);
    struct set_table *t = atomic_load_explicit(&set_cur, memory_order_relaxed);
    for (size_t i = 0; t && i < t->cap; i++) {
        uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (v <= TOMB) continue;
        struct cor_bufhdr *h = (struct cor_bufhdr *)v - 1;
        if (h->dma) {
            h->dma = NULL;
            h->base = NULL;
        }
    }
    COR_UNLOCK(&set_lock);
}
