/*
 * getBuffer: typed buffers allocated by the core. A header in front of the data records type
 * and size, so sendI needs no type argument. Live buffers are kept in a hash set, so a foreign
 * or released pointer is recognised before any of its memory is read.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BUF_MAGIC 0xC0B0FFE5C0B0FFE5ull
#define BUF_DEAD 0xDEADC0B0DEADC0B0ull

/* Open-addressing set of live data pointers; TOMB marks a removed slot. */
#define TOMB ((uintptr_t)1)
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *set; /* set_lock */
static size_t set_cap, set_used;

static size_t slot_of(uintptr_t p, size_t cap)
{
    return (size_t)((p >> 6) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

static bool set_grow(void)
{
    size_t cap = set_cap ? set_cap * 2 : 1024;
    uintptr_t *n = calloc(cap, sizeof *n);
    if (!n) return false;
    size_t used = 0;
    for (size_t i = 0; i < set_cap; i++) {
        if (set[i] <= TOMB) continue;
        size_t k = slot_of(set[i], cap);
        while (n[k])
            k = (k + 1) & (cap - 1);
        n[k] = set[i];
        used++;
    }
    free(set);
    set = n;
    set_cap = cap;
    set_used = used;
    return true;
}

static bool set_add(uintptr_t p)
{
    COR_LOCK(&set_lock);
    bool ok = (set_used + 1) * 2 <= set_cap || set_grow();
    if (ok) {
        size_t k = slot_of(p, set_cap);
        while (set[k] > TOMB)
            k = (k + 1) & (set_cap - 1);
        if (!set[k]) set_used++; /* tombstones already count as used */
        set[k] = p;
    }
    COR_UNLOCK(&set_lock);
    return ok;
}

/* Finds p; removes it too when `take`. */
static bool set_has(uintptr_t p, bool take)
{
    bool found = false;
    COR_LOCK(&set_lock);
    if (set_cap) {
        for (size_t k = slot_of(p, set_cap), n = 0; set[k] && n < set_cap;
             k = (k + 1) & (set_cap - 1), n++) {
            if (set[k] != p) continue;
            found = true;
            if (take) set[k] = TOMB;
            break;
        }
    }
    COR_UNLOCK(&set_lock);
    return found;
}

/* Small buffers come and go with every message (cor_recvI's core buffers): some are kept for
 * reuse rather than given back to the route's allocator (a lock, an aligned allocation and a
 * region record each way). */
#define SMALL_RAW (4096 + 128) /* raw bytes of every small block */
#ifdef __SANITIZE_ADDRESS__
#define SMALL_KEEP 1 /* (none kept: AddressSanitizer sees every use after release) */
#define SMALL_LIMIT 0
#else
#define SMALL_KEEP 64
#define SMALL_LIMIT SMALL_KEEP
#endif
static pthread_mutex_t small_lock = PTHREAD_MUTEX_INITIALIZER;
static struct small_block {
    void *base;
    struct cor_hport *dma;
} small[SMALL_KEEP]; /* small_lock */
static int nsmall;

/* Memory from the route that can send it without a copy (GM DMA memory), else the heap;
 * data is 64-byte aligned, the header sits right before it. */
static void *raw_alloc(size_t len, struct cor_hport **dma)
{
    struct cor_hport *hp = g.dma_port;
    *dma = NULL;
    if (len <= SMALL_RAW) {
        void *p = NULL;
        COR_LOCK(&small_lock);
        if (nsmall && small[nsmall - 1].dma == hp) {
            nsmall--;
            p = small[nsmall].base;
            *dma = small[nsmall].dma;
        }
        COR_UNLOCK(&small_lock);
        if (p) return p;
        len = SMALL_RAW;
    }
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

static void raw_free(struct cor_bufhdr *h)
{
    if (64 + h->bytes + (h->n == 0) <= SMALL_RAW) {
        COR_LOCK(&small_lock);
        bool kept = h->base && nsmall < SMALL_LIMIT && h->dma == g.dma_port;
        if (kept) small[nsmall++] = (struct small_block){h->base, h->dma};
        COR_UNLOCK(&small_lock);
        if (kept) return;
    }
    raw_release(h->base, h->dma);
}

void *cor__buf_alloc(cor_type_t type, size_t n)
{
    size_t es = cor_type_size(type);
    if (!es || n > (SIZE_MAX - 256) / es) return NULL;
    struct cor_hport *dma;
    char *base = raw_alloc(64 + n * es + (n == 0), &dma);
    if (!base) return NULL;
    char *data = (char *)(((uintptr_t)base + 64 + 63) & ~(uintptr_t)63);
    struct cor_bufhdr *h = (struct cor_bufhdr *)data - 1;
    h->magic = BUF_MAGIC;
    h->type = type;
    h->n = n;
    h->bytes = n * es;
    h->base = base;
    h->dma = dma;
    if (!set_add((uintptr_t)data)) {
        raw_free(h);
        return NULL;
    }
    return data;
}

struct cor_bufhdr *cor__buf_hdr(const void *data)
{
    if (!data || ((uintptr_t)data & 63) || !set_has((uintptr_t)data, false)) return NULL;
    struct cor_bufhdr *h = (struct cor_bufhdr *)data - 1;
    return h->magic == BUF_MAGIC ? h : NULL;
}

COR_API void *cor_getBuffer(cor_type_t type, size_t n)
{
    return cor__buf_alloc(type, n);
}

COR_API int cor_releaseBuffer(void *buf)
{
    if (!buf || ((uintptr_t)buf & 63) || !set_has((uintptr_t)buf, true)) return COR_EINVAL;
    struct cor_bufhdr *h = (struct cor_bufhdr *)buf - 1;
    h->magic = BUF_DEAD;
    raw_free(h);
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
        nsmall--;
        raw_release(small[nsmall].base, small[nsmall].dma);
    }
    COR_UNLOCK(&small_lock);
    COR_LOCK(&set_lock);
    for (size_t i = 0; i < set_cap; i++) {
        if (set[i] <= TOMB) continue;
        struct cor_bufhdr *h = (struct cor_bufhdr *)set[i] - 1;
        if (h->dma) {
            h->dma = NULL;
            h->base = NULL;
        }
    }
    COR_UNLOCK(&set_lock);
}
