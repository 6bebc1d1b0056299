/*
 * Memory: DMA allocations (mem_alloc) and registrations of user buffers for puts, with a
 * cache: a region stays registered after its last deregister, so sending from or receiving
 * into the same buffer again costs no new GM registration. At most k.regcache unused
 * regions are kept; the least recently used goes first.
 *
 * GM names remote memory by virtual address alone; the key we return is the provider's key
 * for the region (gm_compat_export), which lets the peer's first put there be a remote write
 * (gm_compat_put_keyed), or 0 where there is none (then gm_put, by messages until libgm has
 * learnt the key).
 */
#include <stdlib.h>

#include "gm_port.h"

static void mr_drop(struct cor_rport *p, struct cor_route_mr **link)
{
    struct cor_route_mr *m = *link;
    *link = m->next;
    if (m->refs == 0) p->nunused--;
    gm_deregister_memory(p->gp, m->addr, m->len);
    free(m);
    p->nmrs--;
}

/* Evicts least recently used unreferenced regions until at most `keep` remain. */
static void evict(struct cor_rport *p, unsigned keep)
{
    while (p->nunused > keep) {
        struct cor_route_mr **victim = NULL;
        for (struct cor_route_mr **l = &p->mrs; *l; l = &(*l)->next)
            if ((*l)->refs == 0 && (!victim || (*l)->used < (*victim)->used)) victim = l;
        if (!victim) break;
        mr_drop(p, victim);
    }
}

int gmr_mem_register(struct cor_rport *p, void *addr, size_t len, struct cor_route_mr **mr,
                     uint64_t *key)
{
    if (!p || !addr || !len || !mr || (uintptr_t)addr + len < (uintptr_t)addr) return COR_EINVAL;
    char *a = addr;
    pthread_mutex_lock(&p->mem_lock);
    int rc = COR_OK;
    if (p->base.closing) {
        rc = COR_ECLOSED;
        goto out;
    }
    struct cor_route_mr *m;
    for (m = p->mrs; m; m = m->next)
        if (a >= m->addr && len <= m->len && (size_t)(a - m->addr) <= m->len - len) break;
    if (m && m->refs == 0) p->nunused--; /* a cached region in use again */
    if (!m) {
        m = calloc(1, sizeof *m);
        if (!m) {
            rc = COR_ENOMEM;
            goto out;
        }
        gm_status_t st = gm_register_memory(p->gp, addr, len);
        if (st != GM_SUCCESS) {
            free(m);
            rc = st == GM_OUT_OF_MEMORY ? COR_ENOMEM : COR_EINVAL;
            goto out;
        }
        m->addr = a;
        m->len = len;
        m->next = p->mrs;
        p->mrs = m;
        p->nmrs++;
    }
    m->refs++;
    m->used = ++p->mr_clock;
    *mr = m;
    gm_u64_t k = 0;
    if (key) *key = gm_compat_export(p->gp, m->addr, m->len, &k) == GM_SUCCESS ? k : 0;
out:
    pthread_mutex_unlock(&p->mem_lock);
    return rc;
}

void gmr_mem_deregister(struct cor_rport *p, struct cor_route_mr *mr)
{
    if (!p || !mr) return;
    pthread_mutex_lock(&p->mem_lock);
    for (struct cor_route_mr *m = p->mrs; m; m = m->next)
        if (m == mr && m->refs > 0) { /* ignore a stale or foreign handle */
            m->refs--;
            if (m->refs == 0) {
                p->nunused++;
                evict(p, p->k.regcache);
            }
            break;
        }
    pthread_mutex_unlock(&p->mem_lock);
}

void *gmr_mem_alloc(struct cor_rport *p, size_t len)
{
    if (!p || !len) return NULL;
    pthread_mutex_lock(&p->mem_lock);
    void *ptr = p->base.closing ? NULL : gm_dma_malloc(p->gp, len);
    pthread_mutex_unlock(&p->mem_lock);
    return ptr;
}

void gmr_mem_free(struct cor_rport *p, void *ptr)
{
    if (!p || !ptr) return;
    pthread_mutex_lock(&p->mem_lock);
    gm_dma_free(p->gp, ptr);
    pthread_mutex_unlock(&p->mem_lock);
}

/* Lock held; before gm_close. */
void gmr_mem_fini(struct cor_rport *p)
{
    while (p->mrs)
        mr_drop(p, &p->mrs);
}
