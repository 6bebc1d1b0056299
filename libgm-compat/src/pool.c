/* pool.c - send and receive request records, from free lists that grow in
 * chunks, so the hot path never calls malloc once warmed up. */
#include "gm_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GMX_CHUNK 64

static void *chunk_new(void ***chunks, unsigned *n, unsigned *cap, size_t size)
{
    if (*n == *cap) {
        unsigned ncap = *cap ? *cap * 2 : 16;
        void **grown = realloc(*chunks, ncap * sizeof *grown);
        if (!grown) return NULL;
        *chunks = grown;
        *cap = ncap;
    }
    void *c = calloc(GMX_CHUNK, size);
    if (c) (*chunks)[(*n)++] = c;
    return c;
}

struct gmx_sreq *gmx_sreq_get(struct gm_port *p)
{
    if (!p->sfree) {
        struct gmx_sreq *c = chunk_new(&p->chunks, &p->nchunks, &p->chunks_cap, sizeof *c);
        if (!c) return NULL;
        for (unsigned i = 0; i < GMX_CHUNK; i++) {
            c[i].next = p->sfree;
            p->sfree = &c[i];
        }
    }
    struct gmx_sreq *s = p->sfree;
    p->sfree = s->next;
    memset(s, 0, sizeof *s);
    s->in_use = 1;
    return s;
}

void gmx_sreq_put(struct gm_port *p, struct gmx_sreq *s)
{
    s->in_use = 0;
    s->next = p->sfree;
    p->sfree = s;
}

/* 1 if a send request not yet back in the pool reads or writes [base, base + len): its
 * callback has not run, or the provider may still hold it.  A scan of every request, for
 * gm_dma_free only. */
int gmx_sreq_uses(struct gm_port *p, uintptr_t base, size_t len)
{
    for (unsigned c = 0; c < p->nchunks; c++) {
        struct gmx_sreq *chunk = p->chunks[c];
        for (unsigned i = 0; i < GMX_CHUNK; i++) {
            const struct gmx_sreq *s = &chunk[i];
            uintptr_t b = (uintptr_t)s->buf;
            if (s->in_use && s->buf && b < base + len && b + (s->len ? s->len : 1) > base) return 1;
        }
    }
    return 0;
}

struct gmx_rreq *gmx_rreq_get(struct gm_port *p)
{
    if (!p->rfree) {
        struct gmx_rreq *c = chunk_new(&p->rchunks, &p->nrchunks, &p->rchunks_cap, sizeof *c);
        if (!c) return NULL;
        for (unsigned i = 0; i < GMX_CHUNK; i++) {
            c[i].next = p->rfree;
            p->rfree = &c[i];
        }
    }
    struct gmx_rreq *r = p->rfree;
    p->rfree = r->next;
    memset(r, 0, sizeof *r);
    r->is_recv = 1;
    return r;
}

/* A refused put's sink on libfabric's shm provider (recv.c, refused_sink) goes with it. */
static void sink_unmap(struct gmx_rreq *r)
{
    if (!r->sink_map) return;
    munmap(r->sink_map, r->sink_len);
    r->sink_map = NULL;
}

void gmx_rreq_put(struct gm_port *p, struct gmx_rreq *r)
{
    sink_unmap(r);
    r->next = p->rfree;
    p->rfree = r;
}

void gmx_pool_free(struct gm_port *p)
{
    for (unsigned i = 0; i < p->nchunks; i++)
        free(p->chunks[i]);
    free(p->chunks);
    p->chunks = NULL;
    p->nchunks = p->chunks_cap = 0;
    for (unsigned i = 0; i < p->nrchunks; i++) {
        struct gmx_rreq *c = p->rchunks[i];
        for (unsigned k = 0; k < GMX_CHUNK; k++)
            sink_unmap(&c[k]); /* a receive the port closed with */
        free(c);
    }
    free(p->rchunks);
    p->rchunks = NULL;
    p->nrchunks = p->rchunks_cap = 0;
    p->sfree = NULL;
    p->rfree = NULL;
}

/* Takes back every receive still posted (before memory it points to goes). */
void gmx_rreq_cancel_all(struct gm_port *p)
{
    for (unsigned i = 0; i < p->nrchunks; i++) {
        struct gmx_rreq *c = p->rchunks[i];
        for (unsigned k = 0; k < GMX_CHUNK; k++)
            if (c[k].posted) gmx_tp_cancel(p, &c[k]);
    }
}
