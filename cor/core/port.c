/*
 * Soft-ports: a task's end of communication, bound to a hard port of a route (explicitly,
 * shared or exclusive) or mapped by the core to the least-used one.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PORT_MAGIC 0x50524f54434f5221ull

static struct cor_route *route_or_default(const char *name)
{
    if (!name) {
        const char *env = getenv("COR_ROUTE");
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
    struct cor_port *p = calloc(1, sizeof *p);
    if (!p) return COR_ENOMEM;

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
        free(p);
        return COR_EBUSY;
    }
    *p = (struct cor_port){.magic = PORT_MAGIC, .route = r, .hp = r->ports[h], .hard_index = h,
                           .exclusive = a.exclusive != 0, .owner = cor__task_self()};
    COR_LOCK(&g.lock);
    p->next = g.ports;
    if (g.ports) g.ports->prev = p;
    g.ports = p;
    COR_UNLOCK(&g.lock);
    *port = p;
    return COR_OK;
}

static bool valid(cor_port_t p)
{
    return p && p->magic == PORT_MAGIC;
}

COR_API int cor_port_close(cor_port_t p)
{
    if (!valid(p)) return COR_EINVAL;
    struct cor_task *t = cor__task_self();
    if (t && t->port == p) t->port = NULL;
    COR_LOCK(&g.lock);
    p->route->soft_count[p->hard_index]--;
    if (p->exclusive) p->route->exclusive[p->hard_index] = false;
    if (p->prev) p->prev->next = p->next;
    else g.ports = p->next;
    if (p->next) p->next->prev = p->prev;
    COR_UNLOCK(&g.lock);
    p->magic = 0;
    free(p);
    return COR_OK;
}

COR_API int cor_port_use(cor_port_t p)
{
    if (!valid(p)) return COR_EINVAL;
    struct cor_task *t = cor__task_self();
    if (!t) return COR_ESTATE;
    t->port = p;
    return COR_OK;
}

COR_API int cor_port_info(cor_port_t p, const char **route, int *hard_port)
{
    if (!valid(p)) return COR_EINVAL;
    if (route) *route = p->route->name;
    if (hard_port) *hard_port = p->hard_index;
    return COR_OK;
}

struct cor_port *cor__task_port(struct cor_task *t)
{
    if (!t->port && g.nroutes > 0) cor_port_open(NULL, &t->port);
    return t->port;
}

COR_API int cor_setTransport(const char *route)
{
    int err = cor__check_init();
    if (err) return err;
    struct cor_task *t = cor__task_self();
    if (!t || !route) return COR_EINVAL;
    cor_port_t p;
    cor_port_attr_t a = {route, COR_HARD_PORT_ANY, 0};
    err = cor_port_open(&a, &p);
    if (err) return err;
    /* Order across the switch is kept by the per-task message numbers (proto.c). */
    t->port = p;
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

/* At finalize: soft-ports nobody closed (the ones mapped for tasks among them). */
void cor__ports_free_all(void)
{
    COR_LOCK(&g.lock);
    struct cor_port *p = g.ports;
    g.ports = NULL;
    COR_UNLOCK(&g.lock);
    while (p) {
        struct cor_port *next = p->next;
        p->magic = 0;
        free(p);
        p = next;
    }
}
