/*
 * Soft-ports: a task's end of communication, bound to a hard port of a route (explicitly,
 * shared or exclusive) or mapped by the core to the least-used one.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "knobs.h"

/*
 * Handles: a soft-port lives in a slot of a table whose memory is never returned (like
 * requests, req.c), and its handle is the slot plus a generation bumped at each reuse, with a
 * tag bit that no request handle carries. A closed, stale or forged handle then fails the
 * check instead of reaching freed memory.
 */
#define PORT_TAG 0x80000000u
#define PCHUNK 256
#define PCHUNKS 1024 /* up to 256K soft-ports open at once (a mapped one per sending task) */

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cor_port *_Atomic chunks[PCHUNKS]; /* written under slot_lock, read lock-free */
static uint32_t nslots;                          /* slot_lock */
static struct cor_port *free_slots;              /* slot_lock; through ->next_free */

static struct cor_port *slot_new(void)
{
    COR_LOCK(&slot_lock);
    struct cor_port *p = free_slots;
    if (p) {
        free_slots = p->next_free;
    } else if (nslots < PCHUNK * PCHUNKS) {
        if (nslots % PCHUNK == 0) {
            struct cor_port *c = calloc(PCHUNK, sizeof *c);
            if (!c) {
                COR_UNLOCK(&slot_lock);
                return NULL;
            }
            atomic_store(&chunks[nslots / PCHUNK], c);
        }
        p = &atomic_load(&chunks[nslots / PCHUNK])[nslots % PCHUNK];
        p->slot = nslots++;
    }
    if (p && ++p->gen == 0) p->gen = 1;
    COR_UNLOCK(&slot_lock);
    return p;
}

static void slot_free(struct cor_port *p)
{
    COR_LOCK(&slot_lock);
    p->next_free = free_slots;
    free_slots = p;
    COR_UNLOCK(&slot_lock);
}

/* The open soft-port named by h, or NULL. */
static struct cor_port *port_get(cor_port_t h)
{
    uint32_t low = (uint32_t)h, slot = low & ~PORT_TAG;
    if (!(low & PORT_TAG) || slot >= PCHUNK * PCHUNKS) return NULL;
    struct cor_port *c = atomic_load_explicit(&chunks[slot / PCHUNK], memory_order_acquire);
    if (!c) return NULL;
    struct cor_port *p = &c[slot % PCHUNK];
    return atomic_load_explicit(&p->handle, memory_order_acquire) == h ? p : NULL;
}

static struct cor_route *route_or_default(const char *name)
{
    if (!name) {
        const char *env = cor__knob_str(COR_K_ROUTE);
        struct cor_route *r = env && *env ? cor__route_find(env) : NULL;
        return r ? r : cor__route_find(NULL);
    }
    return cor__route_find(name);
}

COR_API int cor_port_open(const cor_port_attr_t *attr, cor_port_t *port)
{
    int err = cor__check_init();
    if (err) return err;
    if (!port) return COR_EINVAL;
    cor_port_attr_t a = attr ? *attr : (cor_port_attr_t){NULL, COR_HARD_PORT_ANY, 0};
    struct cor_route *r = route_or_default(a.route);
    if (!r) return a.route ? COR_ENOTFOUND : COR_EROUTE;
    if (a.hard_port != COR_HARD_PORT_ANY && (a.hard_port < 0 || a.hard_port >= r->nports))
        return COR_EINVAL;
    struct cor_port *p = slot_new();
    if (!p) return COR_ELIMIT;

    COR_LOCK(&g.lock);
    int h = a.hard_port;
    if (h == COR_HARD_PORT_ANY) {
        /* least-used shared hard port, starting after the last one mapped */
        int best = -1;
        for (int k = 0; k < r->nports; k++) {
            int c = (int)((r->next_map + (unsigned)k) % (unsigned)r->nports);
            if (r->exclusive[c]) continue;
            if (best < 0 || r->soft_count[c] < r->soft_count[best]) best = c;
        }
        h = best;
        r->next_map++;
    } else if (r->exclusive[h] || (a.exclusive && r->soft_count[h] > 0)) {
        h = -2;
    }
    if (h >= 0) {
        r->soft_count[h]++;
        r->exclusive[h] = a.exclusive != 0;
    }
    COR_UNLOCK(&g.lock);
    if (h < 0) {
        slot_free(p);
        return COR_EBUSY;
    }
    p->route = r;
    p->hp = r->ports[h];
    p->hard_index = h;
    p->exclusive = a.exclusive != 0;
    cor_port_t handle = ((cor_port_t)p->gen << 32) | PORT_TAG | p->slot;
    atomic_store_explicit(&p->handle, handle, memory_order_release);
    *port = handle;
    return COR_OK;
}

COR_API int cor_port_close(cor_port_t h)
{
    struct cor_port *p = port_get(h);
    /* of two closes racing, one takes the handle and the other gets COR_EINVAL */
    if (!p || !atomic_compare_exchange_strong(&p->handle, &h, 0)) return COR_EINVAL;
    COR_LOCK(&g.lock);
    p->route->soft_count[p->hard_index]--;
    if (p->exclusive) p->route->exclusive[p->hard_index] = false;
    COR_UNLOCK(&g.lock);
    slot_free(p);
    return COR_OK;
}

COR_API int cor_port_use(cor_port_t h)
{
    if (!port_get(h)) return COR_EINVAL;
    struct cor_task *t = cor__task_self();
    if (!t) return COR_ESTATE;
    __atomic_store_n(&t->port, h, __ATOMIC_RELEASE);
    return COR_OK;
}

COR_API int cor_port_info(cor_port_t h, const char **route, int *hard_port)
{
    struct cor_port *p = port_get(h);
    if (!p) return COR_EINVAL;
    if (route) *route = p->route->name;
    if (hard_port) *hard_port = p->hard_index;
    return COR_OK;
}

/* A task's first send opens its port. Several threads may send as one task at once (a
 * reserved task used by libcorpvm's threads): the port is opened once, under a lock of its
 * own (cor_port_open takes g.lock). */
static pthread_mutex_t task_port_lock = PTHREAD_MUTEX_INITIALIZER;

struct cor_port *cor__task_port(struct cor_task *t)
{
    struct cor_port *p = port_get(__atomic_load_n(&t->port, __ATOMIC_ACQUIRE));
    if (p || g.nroutes <= 0) return p;
    pthread_mutex_lock(&task_port_lock);
    cor_port_t h = __atomic_load_n(&t->port, __ATOMIC_ACQUIRE);
    if (!(p = port_get(h)) && cor_port_open(NULL, &h) == COR_OK) {
        __atomic_store_n(&t->port, h, __ATOMIC_RELEASE);
        p = port_get(h);
    }
    pthread_mutex_unlock(&task_port_lock);
    return p;
}

COR_API int cor_setTransport(const char *route)
{
    int err = cor__check_init();
    if (err) return err;
    struct cor_task *t = cor__task_self();
    if (!t || !route) return COR_EINVAL;
    cor_port_t p = COR_PORT_NULL;
    cor_port_attr_t a = {route, COR_HARD_PORT_ANY, 0};
    err = cor_port_open(&a, &p);
    if (err) return err;
    /* Order across the switch is kept by the per-task message numbers (proto.c). */
    __atomic_store_n(&t->port, p, __ATOMIC_RELEASE);
    return COR_OK;
}

COR_API int cor_route_ports(const char *route)
{
    if (cor__check_init()) return 0;
    struct cor_route *r = route_or_default(route);
    return r ? r->nports : 0;
}

COR_API int cor_route_address(const char *route, int hard_port, char *buf, size_t len)
{
    int err = cor__check_init();
    if (err) return err;
    struct cor_route *r = route_or_default(route);
    if (!r) return COR_ENOTFOUND;
    if (hard_port < 0 || hard_port >= r->nports || !buf) return COR_EINVAL;
    return r->ops->address(r->ports[hard_port]->rp, buf, len);
}

/* At finalize: soft-ports nobody closed (the ones mapped for tasks among them) are closed; the
 * slots stay, so generations keep growing and a handle of this session is invalid in the next. */
void cor__ports_free_all(void)
{
    COR_LOCK(&slot_lock);
    for (uint32_t i = 0; i < nslots; i++) {
        struct cor_port *p = &atomic_load(&chunks[i / PCHUNK])[i % PCHUNK];
        if (atomic_exchange(&p->handle, 0) == 0) continue;
        p->next_free = free_slots;
        free_slots = p;
    }
    COR_UNLOCK(&slot_lock);
}
