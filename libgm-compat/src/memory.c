/* memory.c - "DMA-able" memory and registrations.  On libfabric nothing needs
 * pinning for messages; the table says which memory other ports may put to
 * or get from. */
#include "gm_internal.h"

#include <stdlib.h>
#include <string.h>

static int region_add(struct gm_port *p, uintptr_t base, size_t len, int dma)
{
    for (unsigned i = 0; i < p->nregions; i++) {
        struct gmx_region *g = &p->regions[i];
        if (g->base == base && g->len == len && g->dma == dma) {
            g->refs++;
            return 0;
        }
    }
    if (p->nregions == p->regions_cap) {
        unsigned cap = p->regions_cap ? p->regions_cap * 2 : 16;
        struct gmx_region *grown = realloc(p->regions, cap * sizeof *grown);
        if (!grown) return -1;
        p->regions = grown;
        p->regions_cap = cap;
    }
    p->regions[p->nregions++] = (struct gmx_region){base, len, 1, dma, NULL, 0};
    return 0;
}

/* The live registration table that writers on this host check (keytab.c); NULL where there
 * is none (other providers check keys at the target; a port whose lock file is not mapped
 * exports nothing). */
static struct gmx_keytab *own_keytab(struct gm_port *p)
{
    return p->addr_is_str && p->bell != &p->own_bell ? gmx_keytab_of(p->bell) : NULL;
}

/* Withdraws our key for g: out of the live table first, which returns once no put or get
 * from this host is inside g under it (so the memory may go when we return), then the
 * provider's registration (the target-side check of providers that have one), then every
 * port that learnt the key hears it is gone (it then puts by messages, checked here). */
static void unexport(struct gm_port *p, struct gmx_region *g)
{
    if (!g->exported) return;
    struct gmx_keytab *kt = own_keytab(p);
    if (kt) gmx_keytab_remove(kt, g->key);
    if (g->mr) fi_close(&g->mr->fid);
    g->mr = NULL;
    g->exported = 0;
    struct gmx_hdr h = {.kind = GMX_K_UNKEY, .addr = g->base, .len = g->len};
    for (unsigned n = 0; n < p->peers_rows; n++) {
        if (!p->peers[n]) continue;
        for (unsigned q = 0; q < GMX_NUM_PORTS; q++) {
            struct gmx_peer *peer = p->peers[n][q];
            if (peer && peer->keyed) gmx_send_ctl(p, peer, &h);
        }
    }
}

void gmx_regions_unexport_all(struct gm_port *p)
{
    for (unsigned i = 0; i < p->nregions; i++)
        unexport(p, &p->regions[i]);
}

/* Registers g with the provider for remote access (once); 0 or -1. */
int gmx_region_export(struct gm_port *p, struct gmx_region *g)
{
    if (g->exported) return 0;
    uint64_t want = p->mr_prov_key ? 0 : ++p->next_key;
    struct gmx_keytab *kt = own_keytab(p);
    if (p->addr_is_str && !kt) return -1; /* writers here could not check the key */
    if (p->shm) { /* the rings' RMA copies between processes by address (shmring.c) */
        if (gmx_keytab_add(kt, want, g->base, g->len) != 0) {
            gmx_log("registration table full: puts into %zu bytes stay messages\n", g->len);
            return -1;
        }
        g->key = want;
        g->exported = 1;
        return 0;
    }
    int rc = fi_mr_reg(p->domain, (void *)g->base, g->len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                       want, 0, &g->mr, NULL);
    if (rc != 0) {
        gmx_log("fi_mr_reg(%zu bytes): %s; puts there stay messages\n", g->len, fi_strerror(-rc));
        g->mr = NULL;
        return -1;
    }
    g->key = fi_mr_key(g->mr);
    if (g->key == FI_KEY_NOTAVAIL || (kt && gmx_keytab_add(kt, g->key, g->base, g->len) != 0)) {
        gmx_log("no key for %zu bytes (or registration table full): puts there stay messages\n",
                g->len);
        fi_close(&g->mr->fid);
        g->mr = NULL;
        return -1;
    }
    g->exported = 1;
    return 0;
}

/* Drops one reference; for dma regions only base must match. */
static int region_del(struct gm_port *p, uintptr_t base, size_t len, int dma)
{
    for (unsigned i = 0; i < p->nregions; i++) {
        struct gmx_region *g = &p->regions[i];
        if (g->base == base && g->dma == dma && (dma || g->len == len)) {
            if (--g->refs == 0) {
                struct gmx_region gone = *g;
                p->regions[i] = p->regions[--p->nregions]; /* puts arriving now are refused */
                unexport(p, &gone);
                gmx_putdata_settle(p, gone.base, gone.len);
            }
            return 0;
        }
    }
    return -1;
}

struct gmx_region *gmx_region_find(struct gm_port *p, uint64_t addr, uint64_t len)
{
    if (addr + len < addr) return NULL;
    for (unsigned i = 0; i < p->nregions; i++) {
        struct gmx_region *g = &p->regions[i];
        if (addr >= g->base && addr + len <= (uint64_t)g->base + g->len) return g;
    }
    return NULL;
}

int gmx_region_covers(struct gm_port *p, uint64_t addr, uint64_t len)
{
    return gmx_region_find(p, addr, len) != NULL;
}

void gmx_regions_free(struct gm_port *p)
{
    gmx_deferred_free(p, 1);
    for (unsigned i = 0; i < p->nregions; i++)
        if (p->regions[i].dma) free((void *)p->regions[i].base);
    free(p->regions);
    p->regions = NULL;
    p->nregions = p->regions_cap = 0;
}

GMX_EXPORT void *gm_dma_malloc(struct gm_port *p, gm_size_t length)
{
    void *mem = NULL;
    if (!p || length > (gm_size_t)1 << 46) return NULL;
    if (length == 0) length = 1; /* malloc-like: a valid pointer (a size-3 buffer holds 0 bytes) */
    if (posix_memalign(&mem, GM_RDMA_GRANULARITY, length) != 0) return NULL;
    gmx_port_lock(p);
    int rc = region_add(p, (uintptr_t)mem, length, 1);
    gmx_port_unlock(p);
    if (rc != 0) {
        free(mem);
        return NULL;
    }
    return mem;
}

GMX_EXPORT void *gm_dma_calloc(struct gm_port *p, gm_size_t count, gm_size_t length)
{
    if (count && length > ((gm_size_t)-1) / count) return NULL;
    void *mem = gm_dma_malloc(p, count * length);
    if (mem) memset(mem, 0, count * length);
    return mem;
}

void gmx_deferred_free(struct gm_port *p, int all)
{
    if (!all) {
        uint64_t now = gmx_coarse_ns();
        if (now - p->deferred_ns < 1000000u)
            return; /* a scan of every send request: at most once per clock tick */
        p->deferred_ns = now;
    }
    for (unsigned i = 0; i < p->ndeferred;) {
        struct gmx_deferred *d = &p->deferred[i];
        if (all || !gmx_sreq_uses(p, (uintptr_t)d->mem, d->len)) {
            free(d->mem);
            *d = p->deferred[--p->ndeferred];
        } else {
            i++;
        }
    }
    if (all) {
        free(p->deferred);
        p->deferred = NULL;
        p->deferred_cap = 0;
    }
}

/* GM's pinned pool kept DMA memory valid until the sends from it completed, and clients
 * free right after their last send: memory a send still uses is freed later (by the
 * progress rounds, or at close). */
GMX_EXPORT void gm_dma_free(struct gm_port *p, void *addr)
{
    if (!p || !addr) return;
    gmx_port_lock(p);
    size_t len = 0;
    for (unsigned i = 0; i < p->nregions; i++)
        if (p->regions[i].dma && p->regions[i].base == (uintptr_t)addr) len = p->regions[i].len;
    int rc = region_del(p, (uintptr_t)addr, 0, 1);
    int later = 0;
    if (rc == 0 && gmx_sreq_uses(p, (uintptr_t)addr, len)) {
        if (p->ndeferred == p->deferred_cap) {
            unsigned cap = p->deferred_cap ? p->deferred_cap * 2 : 8;
            struct gmx_deferred *grown = realloc(p->deferred, cap * sizeof *grown);
            if (grown) {
                p->deferred = grown;
                p->deferred_cap = cap;
            }
        }
        if (p->ndeferred < p->deferred_cap) {
            p->deferred[p->ndeferred++] = (struct gmx_deferred){addr, len};
            later = 1;
        }
        /* (out of memory: freed now, as before) */
    }
    gmx_port_unlock(p);
    if (rc == 0 && !later)
        free(addr);
    else if (rc != 0)
        fprintf(stderr, "libgm: gm_dma_free(%p): not from gm_dma_malloc; ignored\n", addr);
}

GMX_EXPORT gm_status_t gm_register_memory(struct gm_port *p, void *ptr, gm_size_t length)
{
    if (!p || !ptr || length == 0 || (uintptr_t)ptr + length < (uintptr_t)ptr)
        return GM_INVALID_PARAMETER;
    gmx_port_lock(p);
    int rc = region_add(p, (uintptr_t)ptr, length, 0);
    gmx_port_unlock(p);
    return rc ? GM_OUT_OF_MEMORY : GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_register_memory_ex(struct gm_port *p, void *ptr, gm_size_t length,
                                             void *pvma)
{
    (void)pvma;
    return gm_register_memory(p, ptr, length);
}

GMX_EXPORT gm_status_t gm_deregister_memory(struct gm_port *p, void *ptr, gm_size_t length)
{
    if (!p || !ptr) return GM_INVALID_PARAMETER;
    gmx_port_lock(p);
    int rc = region_del(p, (uintptr_t)ptr, length, 0);
    gmx_port_unlock(p);
    return rc ? GM_INVALID_PARAMETER : GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_allow_remote_memory_access(struct gm_port *p)
{
    if (!p) return GM_INVALID_PARAMETER;
    gmx_port_lock(p);
    p->remote_access = 1;
    gmx_port_unlock(p);
    return GM_SUCCESS;
}
