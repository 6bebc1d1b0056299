/*
 * Telling the routes where the peers are (boot.h's addresses into each hard port's add_peer).
 *
 * Two ways, chosen once at cor_init:
 * - at first contact (COR_LAZY_PEERS=1, the default, when every route opened says lazy_peers,
 *   route.h): cor_init only publishes this domain's addresses (cor__boot_publish). A peer's
 *   addresses are looked up (cor__boot_lookup: under PMIx one get from the node's server)
 *   and given to every hard port the first time this domain sends to it (cor__peer_ready,
 *   from the send paths), posts a receive from it, or a route hears from it (the need_peer
 *   upcall: udp and gm). A domain that talks
 *   to k peers does k lookups and k add_peer per port, whatever the session's size; cor_init's
 *   own work per domain no longer grows with it (but for cor-run's table, which still comes
 *   whole to every domain: bootstrap.c).
 * - all at cor_init (COR_LAZY_PEERS=0, or a route that does not say lazy_peers): the table of
 *   every domain's addresses (cor__boot_exchange), then add_peer for every peer on every
 *   port.
 * Either way every domain must open the same routes and ports: a peer that publishes others
 * is refused (COR_EBOOT) when it is connected.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "internal.h"
#include "knobs.h"

static struct {
    int n;                      /* hard ports (raw ones included) */
    struct cor_hport **hps;     /* [n] */
    struct cor_boot_addr *mine; /* [n]: ours, to compare a peer's routes and ports with */
    pthread_mutex_t mu;         /* one lookup at a time: each peer is added once */
    unsigned char *awaited;     /* [size]: the barrier's watch told the routes we await it */
} lz = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Peer's addresses a[n] given to each of our ports. */
static int add_to_ports(int peer, const struct cor_boot_addr *a)
{
    for (int k = 0; k < lz.n; k++) {
        if (strcmp(a[k].route, lz.mine[k].route) || a[k].port_index != lz.mine[k].port_index) {
            cor__log("domain %d publishes %s port %d where we have %s port %d: all domains "
                     "must open the same routes and ports",
                     peer, a[k].route, a[k].port_index, lz.mine[k].route, lz.mine[k].port_index);
            return COR_EBOOT;
        }
        int err = lz.hps[k]->route->ops->add_peer(lz.hps[k]->rp, (cor_peer_t)peer, a[k].addr);
        if (err) {
            cor__log("route '%s': cannot reach domain %d at %s: %s", a[k].route, peer, a[k].addr,
                     cor_strerror(err));
            return err;
        }
    }
    return COR_OK;
}

static bool lazy_wanted(void)
{
    if (!cor__knob_long(COR_K_LAZY_PEERS)) return false;
    for (int i = 0; i < g.nroutes; i++)
        if (!cor__route_lazy_peers(g.routes[i]->ops)) return false;
    return true;
}

/* The first hard port of route i when the route can be told what we await, else NULL. */
static struct cor_hport *await_port(int i)
{
    struct cor_route *r = g.routes[i];
    return r->nports && r->ports[0]->await_peer ? r->ports[0] : NULL;
}

/* The watch of a slow barrier's peers (boot.h, cor_boot_watch_fn). on = 1: every peer not
 * known yet is looked up and given to the ports (so the routes' own checks cover it: udp
 * probes the peers it never talked to, and a closed port gives one up), and the first port of
 * each route that can is told we await every live peer (await_peer: a stopped one is given up
 * after the route's dead time). on = 0 ends those waits. Costs nothing for a barrier that
 * ends within COR_BARRIER_WATCH_MS; a slower one looks up the peers this domain never dealt
 * with, once for the session. Called only from a barrier's thread (one barrier at a time). */
static void barrier_watch(void *arg, int on)
{
    (void)arg;
    int looked = 0, watched = 0;
    for (int peer = 0; peer < g.size; peer++) {
        if (peer == g.rank) continue;
        if (!on) {
            if (!lz.awaited[peer]) continue;
            lz.awaited[peer] = 0;
            for (int i = 0; i < g.nroutes; i++)
                if (await_port(i)) g.routes[i]->ops->await_peer(await_port(i)->rp, peer, 0);
            continue;
        }
        if (atomic_load(&g.dead[peer])) continue;
        if (g.peer_conn &&
            atomic_load_explicit(&g.peer_conn[peer], memory_order_acquire) == PEER_UNKNOWN) {
            looked++;
            if (cor__peer_resolve((unsigned)peer)) continue; /* dead, or logged */
        }
        lz.awaited[peer] = 1;
        watched++;
        for (int i = 0; i < g.nroutes; i++)
            if (await_port(i)) g.routes[i]->ops->await_peer(await_port(i)->rp, peer, 1);
    }
    if (on && cor__knob_long(COR_K_BOOT_STATS))
        cor__log("a barrier waited %ld ms: the routes watch %d peers (%d looked up for it)",
                 cor__knob_long(COR_K_BARRIER_WATCH_MS), watched, looked);
}

int cor__connect_peers(void)
{
    int n = 0;
    for (int i = 0; i < g.nroutes; i++)
        n += g.routes[i]->nports + (g.routes[i]->raw != NULL);
    if (n == 0) return g.size > 1 ? COR_EROUTE : COR_OK;
    lz.mine = calloc((size_t)n, sizeof *lz.mine);
    lz.hps = calloc((size_t)n, sizeof *lz.hps);
    if (!lz.mine || !lz.hps) return COR_ENOMEM;
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        for (int p = -1; p < r->nports; p++) {
            struct cor_hport *hp = p < 0 ? r->raw : r->ports[p];
            if (!hp) continue;
            struct cor_boot_addr *m = &lz.mine[lz.n];
            snprintf(m->route, sizeof m->route, "%s", r->name);
            m->port_index = p;
            int err = r->ops->address(hp->rp, m->addr, sizeof m->addr);
            if (err) return err;
            lz.hps[lz.n++] = hp;
        }
    }
    if (g.size == 1) return COR_OK;
    if (!(lz.awaited = calloc((size_t)g.size, 1))) return COR_ENOMEM;
    cor__boot_set_watch(g.boot, barrier_watch, NULL);
    if (lazy_wanted()) {
        g.peer_conn = calloc((size_t)g.size, sizeof *g.peer_conn);
        if (!g.peer_conn) return COR_ENOMEM;
        return cor__boot_publish(g.boot, n, lz.mine);
    }
    struct cor_boot_addr *all = NULL;
    int err = cor__boot_exchange(g.boot, n, lz.mine, &all);
    for (int peer = 0; peer < g.size && !err; peer++)
        if (peer != g.rank) err = add_to_ports(peer, &all[(size_t)peer * (size_t)n]);
    free(all);
    return err;
}

int cor__peer_resolve(unsigned peer)
{
    if (!g.peer_conn) return COR_OK; /* every peer added at cor_init (or none to add) */
    if (peer >= (unsigned)g.size || peer == (unsigned)g.rank) return COR_EINVAL;
    int err = COR_OK;
    pthread_mutex_lock(&lz.mu);
    unsigned char st = atomic_load_explicit(&g.peer_conn[peer], memory_order_relaxed);
    if (st == PEER_UNKNOWN && atomic_load(&g.dead[peer])) {
        err = COR_EPEERDEAD; /* added now, it would be re-admitted (route.h, add_peer) */
    } else if (st == PEER_UNKNOWN) {
        struct cor_boot_addr *a = calloc((size_t)lz.n, sizeof *a);
        err = a ? cor__boot_lookup(g.boot, (int)peer, lz.n, a) : COR_ENOMEM;
        if (!err) err = add_to_ports((int)peer, a);
        free(a);
        /* A death reported while we added it (cor__peer_gone marks it, then tells the ports,
         * which may have come before our add_peer re-admitted the rank): tell them again. */
        if (!err && atomic_load(&g.dead[peer]))
            for (int k = 0; k < lz.n; k++)
                if (cor__route_has_peer_dead(lz.hps[k]->route->ops))
                    lz.hps[k]->route->ops->peer_dead(lz.hps[k]->rp, peer);
        if (err != COR_ENOMEM)
            atomic_store_explicit(&g.peer_conn[peer], err ? PEER_REFUSED : PEER_READY,
                                  memory_order_release);
    } else if (st == PEER_REFUSED) {
        err = COR_EROUTE;
    }
    pthread_mutex_unlock(&lz.mu);
    return err;
}

int cor__upcall_need_peer(void *core, cor_peer_t peer)
{
    (void)core;
    if (!g.peer_conn) return COR_ENOTSUP;
    if (peer >= (cor_peer_t)g.size || atomic_load(&g.dead[peer])) return COR_EPEERDEAD;
    return cor__peer_resolve(peer);
}

void cor__connect_fini(void)
{
    free(lz.mine);
    free(lz.hps);
    free((void *)g.peer_conn);
    free(lz.awaited);
    lz.awaited = NULL;
    lz.mine = NULL;
    lz.hps = NULL;
    g.peer_conn = NULL;
    lz.n = 0;
}
