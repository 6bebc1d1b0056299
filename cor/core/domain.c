/*
 * The domain: joining the session, opening the routes' hard ports, the domain tree, deaths,
 * barriers and finalization.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <inttypes.h>
#include <unistd.h>
#include <sys/random.h>

#include "internal.h"
#include "knobs.h"

/* cor_domain_address's pseudo-route that carries the domain's incarnation. */
#define EPOCH_WORD "epoch"

struct cor_global cor__g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .spin_lock = PTHREAD_MUTEX_INITIALIZER,
    .spin_cond = PTHREAD_COND_INITIALIZER,
};

int cor__check_init(void)
{
    return atomic_load(&g.initialized) == 1 ? COR_OK : COR_ESTATE;
}

COR_API int cor_initialized(void)
{
    return atomic_load(&g.initialized) == 1;
}

static void read_knobs(void)
{
    g.max_tasks = (int)cor__knob_long(COR_K_MAX_TASKS);
    g.spin_ns = cor__knob_long(COR_K_SPIN_US) * 1000;
    g.yielders_max = (int)cor__knob_long(COR_K_YIELDERS); /* -1: by the routes */
    g.linger_ns = cor__knob_long(COR_K_LINGER_US) * 1000;
    g.service_slice_us = cor__knob_long(COR_K_SERVICE_SLICE_US);
    g.credits = (int)cor__knob_long(COR_K_CREDITS);
    g.credit_threshold =
        (int)cor__knob_long_in(COR_K_CREDIT_THRESHOLD, g.credits / 2, g.credits - 1);
    g.eager_override = cor__knob_long(COR_K_EAGER_LIMIT);
    g.stripe_min = cor__knob_long(COR_K_STRIPE_MIN);
    g.get_max = cor__knob_long(COR_K_GET_MAX);
    const char *raw = cor__knob_str(COR_K_RAW);
    g.raw_enabled = raw && *raw && strcmp(raw, "0") != 0;
}

/* The routes to open: COR_ROUTES, else COR_ROUTE, else NULL (then udp, if it loads). */
static const char *routes_asked(void)
{
    const char *list = cor__knob_str(COR_K_ROUTES);
    if (!list || !*list) list = cor__knob_str(COR_K_ROUTE);
    return list && *list ? list : NULL;
}

/* Opens every configured route (COR_ROUTES, else COR_ROUTE, else "udp") with COR_PORTS hard
 * ports each, plus a raw port when COR_RAW is set, once the routes' preparation is over. */
static int open_routes(bool required)
{
    cor__route_prepare_wait();
    const char *list = routes_asked();
    bool explicit_route = list != NULL;
    if (!explicit_route) list = "udp";
    int nports = (int)cor__knob_long(COR_K_PORTS);
    char names[256];
    snprintf(names, sizeof names, "%s", list);
    for (char *save, *name = strtok_r(names, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (g.nroutes == COR_ROUTES_MAX) {
            cor__log("more than %d routes in '%s'", COR_ROUTES_MAX, list);
            return COR_ELIMIT;
        }
        struct cor_route *r;
        int err = cor__route_load(name, !required && !explicit_route, &r);
        if (err) {
            if (!required && !explicit_route) return COR_OK; /* one domain needs no route */
            return err;
        }
        g.routes[g.nroutes++] = r;
        for (int k = 0; k < nports; k++) {
            err = cor__hport_open(r, k, &r->ports[k]);
            if (err) return err;
            r->nports++;
        }
        if (g.raw_enabled &&
            ((err = cor__hport_open(r, -1, &r->raw)) || (err = cor__raw_attach(r->raw))))
            return err;
    }
    return COR_OK;
}

/* How many waiting tasks may yield to the spinner rather than sleep (COR_YIELDERS unset). Where
 * an idle poll of the ports is a system call (a route with a descriptor: udp), more: 16 task
 * pairs at 4 KiB over udp made 0.59-0.60 of one pair with 2 and 0.75-0.90 with 16 (three
 * alternating runs; 64 KiB, 1 MiB and 8 B rates unchanged). Over gm, whose idle poll reads
 * shared memory, 16 cost 16 pairs' 8 B rate a third (1.30-1.39 -> 0.89-0.98 M msg/s). */
#define YIELDERS_SHARED_MEMORY 2
#define YIELDERS_SOCKETS 16

static int yielders_for_routes(void)
{
    for (int i = 0; i < g.nroutes; i++)
        for (int k = 0; k < g.routes[i]->nports; k++)
            if (g.routes[i]->ops->wait_fd(g.routes[i]->ports[k]->rp) >= 0) return YIELDERS_SOCKETS;
    return YIELDERS_SHARED_MEMORY;
}

static void on_boot_death(void *arg, int rank, const char *why)
{
    if (rank >= 0 && rank < g.size) {
        cor__log("domain %d died (%s)", rank, why ? why : "no reason given");
        cor__peer_died((unsigned)rank, COR_EPEERDEAD);
    }
}

void cor__peer_died(unsigned rank, int err)
{
    cor__peer_gone(rank, err, true);
}

/* A peer left (notify = false: it exited normally, nobody is told) or died. */
void cor__peer_gone(unsigned rank, int err, bool notify)
{
    if (rank == (unsigned)g.rank || atomic_exchange(&g.dead[rank], true)) return;
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        if (!cor__route_has_peer_dead(r->ops)) continue;
        for (int k = 0; k < r->nports; k++)
            r->ops->peer_dead(r->ports[k]->rp, rank);
        if (r->raw) r->ops->peer_dead(r->raw->rp, rank);
    }
    cor__req_fail_peer(rank, err);
    if (!notify) return;
    cor__boot_died(g.boot, (int)rank);
    COR_LOCK(&g.lock);
    cor_death_fn fn = g.death_fn;
    void *arg = g.death_arg;
    int nl = g.ndeath_listeners;
    cor_death_fn lfn[COR_DEATH_LISTENERS];
    void *larg[COR_DEATH_LISTENERS];
    for (int i = 0; i < nl; i++) {
        lfn[i] = g.death_listeners[i].fn;
        larg[i] = g.death_listeners[i].arg;
    }
    COR_UNLOCK(&g.lock);
    for (int i = 0; i < nl; i++)
        lfn[i]((int)rank, err, larg[i]);
    if (fn) fn((int)rank, err, arg);
}

static void stop_listeners(void)
{
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        for (int k = 0; k < r->nports; k++)
            cor__hport_stop(r->ports[k]);
        if (r->raw) cor__hport_stop(r->raw);
    }
}

/* Messages no receive took (no listener running to add more): their buffers may be a route's
 * memory (gm: gm_dma_malloc), which goes when the route's ports close, so they go first. */
static void drop_unexpected(void)
{
    for (int i = 0; g.tasks && i < g.max_tasks; i++) {
        struct cor_task *t = g.tasks[i];
        while (t && t->unexp_head) {
            struct cor_umsg *m = t->unexp_head;
            t->unexp_head = m->next;
            cor__umsg_free(m);
        }
    }
}

static void teardown(void)
{
    cor__ports_free_all();
    stop_listeners();
    drop_unexpected();
    if (g.dma_port) {
        g.dma_port = NULL;
        cor__buf_forget_dma();
    }
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        for (int k = 0; k < r->nports; k++)
            cor__hport_close(r->ports[k]);
        if (r->raw) {
            cor__raw_detach(r->raw);
            cor__hport_close(r->raw);
        }
        cor__route_unload(r);
        g.routes[i] = NULL;
    }
    g.nroutes = 0;
    g.one_port = false;
    cor__connect_fini();
    if (g.peers) {
        for (int i = 0; i < g.size; i++) {
            free(g.peers[i].recv_seq);
            pthread_mutex_destroy(&g.peers[i].lock);
        }
    }
    free(g.peers);
    g.peers = NULL;
    free((void *)g.dead);
    g.dead = NULL;
    free((void *)g.peer_epoch);
    g.peer_epoch = NULL;
    if (g.tasks) {
        for (int i = 0; i < g.max_tasks; i++) {
            struct cor_task *t = g.tasks[i];
            if (!t) continue;
            free(t->send_seq);
            pthread_mutex_destroy(&t->lock);
            pthread_cond_destroy(&t->cond);
            free(t);
        }
    }
    free(g.tasks);
    g.tasks = NULL;
    cor__resources_fini();
    cor__task_forget_self();
}

/* What cor_init and cor_init_join share once rank, size and cookie are known. */
static int init_domain(void)
{
    int err = COR_ENOMEM;
    g.macro = (uint32_t)g.cookie ? (uint32_t)g.cookie : 1;
    g.tasks = calloc((size_t)g.max_tasks, sizeof *g.tasks);
    g.dead = calloc((size_t)g.size, sizeof *g.dead);
    g.peers = calloc((size_t)g.size, sizeof *g.peers);
    g.peer_epoch = calloc((size_t)g.size, sizeof *g.peer_epoch);
    if (!g.tasks || !g.dead || !g.peers || !g.peer_epoch) return err;
    /* recv_seq comes with the peer's first message (proto.c, in_order) */
    for (int i = 0; i < g.size; i++)
        pthread_mutex_init(&g.peers[i].lock, NULL);
    cor__task_adopt_main();
    err = open_routes(g.size > 1);
    if (err) return err;
    g.one_port = g.nroutes == 1 && g.routes[0]->nports == 1;
    if (g.yielders_max < 0) g.yielders_max = yielders_for_routes();
    if (!g.dynamic && (err = cor__connect_peers())) return err;
    /* getBuffer memory: the first route that can send from its own memory without a copy */
    for (int i = 0; i < g.nroutes && !g.dma_port; i++)
        if (cor__route_has_mem(g.routes[i]->ops) && g.routes[i]->nports &&
            cor__knob_long(COR_K_DMA_BUFFERS))
            g.dma_port = g.routes[i]->ports[0];
    if (g.boot) cor__boot_on_death(g.boot, on_boot_death, NULL);
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        for (int k = 0; k < r->nports; k++)
            if ((err = cor__hport_start(r->ports[k]))) return err;
        if (r->raw && (err = cor__hport_start(r->raw))) return err;
    }
    return COR_OK;
}

/* The end of a failed cor_init and of cor_finalize: no death callback may run once teardown
 * frees g.dead and the ports, then the bootstrap is let go and the domain is down. */
static int domain_down(int err)
{
    if (g.boot) cor__boot_on_death(g.boot, NULL, NULL);
    teardown();
    if (g.boot) cor__boot_finish(g.boot);
    g.boot = NULL;
    atomic_store(&g.initialized, 0);
    return err;
}

static int init_failed(int err)
{
    cor__route_prepare_wait();
    cor__log("cor_init failed: %s", cor_strerror(err));
    return domain_down(err);
}

COR_API int cor_init(int *argc, char ***argv)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g.initialized, &expected, 2)) {
        /* A library (libcorpvm) joined a dynamic session for this process: the program's
         * own cor_init shares it, and the last cor_finalize ends it. */
        if (expected == 1 && g.dynamic) {
            atomic_fetch_add(&g.init_refs, 1);
            return COR_OK;
        }
        return COR_ESTATE;
    }
    atomic_store(&g.init_refs, 1);
    read_knobs();
    g.ntasks = 0;
    g.dynamic = false;
    g.epoch = 0;                              /* static sessions: ranks are never reused */
    cor__route_prepare_start(routes_asked()); /* while the launcher answers */
    int err = cor__boot_init(&g.boot, &g.rank, &g.size, &g.cookie);
    if (!err) err = init_domain();
    if (err) return init_failed(err);
    atomic_store(&g.initialized, 1);
    (void)argc;
    (void)argv;
    return COR_OK;
}

COR_API int cor_init_join(const cor_join_t *join)
{
    if (!join || join->capacity < 1 || join->capacity > COR_MAX_DOMAINS || join->rank < 0 ||
        join->rank >= join->capacity || join->session == 0)
        return COR_EINVAL;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g.initialized, &expected, 2)) return COR_ESTATE;
    read_knobs();
    g.ntasks = 0;
    g.dynamic = true;
    g.boot = NULL;
    g.rank = join->rank;
    g.size = join->capacity;
    g.cookie = join->session;
    /* Our incarnation: a rank of a dynamic session is reused once its task is gone. */
    g.epoch = 0;
    while (!g.epoch)
        if (getrandom(&g.epoch, sizeof g.epoch, 0) != sizeof g.epoch)
            g.epoch = (uint32_t)cor__now_ns() ^ (uint32_t)getpid() << 16;
    atomic_store(&g.init_refs, 1);
    int err = init_domain();
    if (err) return init_failed(err);
    atomic_store(&g.initialized, 1);
    return COR_OK;
}

/* "epoch 0 <incarnation>", then "route port_index address" per hard port, separated by
 * spaces: what a peer's cor_domain_connect takes. (The incarnation is written as a port of a
 * route named "epoch", which no domain opens.) Raw ports are not published in dynamic
 * sessions. */
COR_API int cor_domain_address(char *buf, size_t len)
{
    int err = cor__check_init();
    if (err) return err;
    if (!buf || len == 0) return COR_EINVAL;
    int w0 = snprintf(buf, len, "%s 0 %" PRIu32, EPOCH_WORD, g.epoch);
    if (w0 < 0 || (size_t)w0 >= len) return COR_ELIMIT;
    size_t used = (size_t)w0;
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        for (int k = 0; k < r->nports; k++) {
            char addr[COR_ADDR_MAX];
            if ((err = r->ops->address(r->ports[k]->rp, addr, sizeof addr))) return err;
            int w =
                snprintf(buf + used, len - used, "%s%s %d %s", used ? " " : "", r->name, k, addr);
            if (w < 0 || (size_t)w >= len - used) return COR_ELIMIT;
            used += (size_t)w;
        }
    }
    return COR_OK;
}

/* The hard port of ours that `route`/`index` names, or NULL. */
static struct cor_hport *hport_named(const char *route, int index)
{
    for (int i = 0; i < g.nroutes; i++)
        if (!strcmp(g.routes[i]->name, route) && index >= 0 && index < g.routes[i]->nports)
            return g.routes[i]->ports[index];
    return NULL;
}

/* The incarnation "epoch 0 N" names in a cor_domain_address string; 0 if none, -1 if
 * malformed. */
static long epoch_of(const char *addresses)
{
    char copy[1024];
    if (strlen(addresses) >= sizeof copy) return -1;
    strcpy(copy, addresses);
    char *save, *route = strtok_r(copy, " ", &save);
    while (route) {
        char *index = strtok_r(NULL, " ", &save), *addr = strtok_r(NULL, " ", &save), *end;
        if (!index || !addr) return -1;
        if (!strcmp(route, EPOCH_WORD)) {
            unsigned long v = strtoul(addr, &end, 10);
            return *end || addr[0] == '-' || v == 0 || v > UINT32_MAX ? -1 : (long)v;
        }
        route = strtok_r(NULL, " ", &save);
    }
    return 0;
}

/* cor_domain_connect and cor_domain_leave come from whichever thread learns of a peer (libcorpvm:
 * a thread reading PVM's exit notices while the main thread is in cor_finalize). They use the
 * routes and the peer tables, which teardown frees: each call counts itself in g.peer_calls
 * before it checks the state, and cor_finalize, once it set the state to finalizing, waits
 * until none is under way. (Both sides are sequentially consistent: a call either sees the
 * state change and returns COR_ESTATE, or cor_finalize sees the call and waits for it.) */
static bool peer_call_begin(void)
{
    atomic_fetch_add(&g.peer_calls, 1);
    if (cor__check_init() == COR_OK) return true;
    atomic_fetch_sub(&g.peer_calls, 1);
    return false;
}

static void peer_call_end(void)
{
    atomic_fetch_sub(&g.peer_calls, 1);
}

static void wait_peer_calls(void)
{
    bool said = false;
    uint64_t t0 = cor__now_ns();
    while (atomic_load(&g.peer_calls) > 0) {
        if (!said && cor__now_ns() - t0 > 5000000000u) {
            cor__log("cor_finalize: waiting for a cor_domain_connect/leave in another thread "
                     "(a death callback that blocks?)");
            said = true;
        }
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

static int domain_connect(int rank, const char *addresses)
{
    int err;
    if (!g.dynamic) return COR_ESTATE;
    if (rank < 0 || rank >= g.size || rank == g.rank || !addresses) return COR_EINVAL;
    long epoch = epoch_of(addresses);
    if (epoch < 0) return COR_EINVAL;
    uint32_t known = atomic_load(&g.peer_epoch[rank]);
    bool readmit = atomic_load(&g.dead[rank]);
    if (readmit) {
        /* The rank left: only a new occupant (another incarnation) may take it again. */
        if (!epoch || (uint32_t)epoch == known) return COR_EPEERDEAD;
        cor__peer_reset((uint32_t)rank);
        atomic_store(&g.peer_epoch[rank], (uint32_t)epoch);
    } else if (epoch && known && (uint32_t)epoch != known) {
        return COR_EEXIST; /* another occupant while the rank's one has not left */
    } else if (epoch) {
        atomic_store(&g.peer_epoch[rank], (uint32_t)epoch);
    }
    char copy[1024];
    if (strlen(addresses) >= sizeof copy) return COR_EINVAL;
    strcpy(copy, addresses);
    int matched = 0;
    char *save, *route = strtok_r(copy, " ", &save);
    while (route) {
        char *index = strtok_r(NULL, " ", &save), *addr = strtok_r(NULL, " ", &save), *end;
        if (!index || !addr) return COR_EINVAL;
        long k = strtol(index, &end, 10);
        if (*end || k < 0 || k >= COR_HPORTS_MAX) return COR_EINVAL;
        struct cor_hport *hp = strcmp(route, EPOCH_WORD) ? hport_named(route, (int)k) : NULL;
        if (hp) {
            err = hp->route->ops->add_peer(hp->rp, (cor_peer_t)rank, addr);
            if (err) {
                cor__log("route '%s': cannot reach domain %d at %s: %s", route, rank, addr,
                         cor_strerror(err));
                return err;
            }
            matched++;
        }
        route = strtok_r(NULL, " ", &save);
    }
    /* Every hard port we might map a soft-port to must reach the peer. */
    int ours = 0;
    for (int i = 0; i < g.nroutes; i++)
        ours += g.routes[i]->nports;
    if (matched != ours) return COR_EROUTE;
    if (readmit) atomic_store(&g.dead[rank], false); /* the new occupant is reachable */
    return COR_OK;
}

COR_API int cor_domain_connect(int rank, const char *addresses)
{
    if (!peer_call_begin()) return COR_ESTATE;
    int err = domain_connect(rank, addresses);
    peer_call_end();
    return err;
}

COR_API int cor_domain_leave(int rank, int err)
{
    if (!peer_call_begin()) return COR_ESTATE;
    int e = COR_OK;
    if (rank < 0 || rank >= g.size || rank == g.rank)
        e = COR_EINVAL;
    else
        cor__peer_gone((unsigned)rank, err ? err : COR_EPEERDEAD, err != 0);
    peer_call_end();
    return e;
}

/* Waits (bounded) until the routes hold none of our frames, so peers got everything. */
static void flush_sends(void)
{
    uint64_t deadline = cor__now_ns() + 30ull * 1000000000u;
    for (;;) {
        long pending = 0;
        for (int i = 0; i < g.nroutes; i++)
            for (int k = 0; k < g.routes[i]->nports; k++) {
                struct cor_hport *hp = g.routes[i]->ports[k];
                pending += atomic_load(&hp->inflight) + atomic_load(&hp->backlog) +
                           (atomic_load(&hp->inbox) != NULL);
            }
        if (pending == 0 || cor__now_ns() > deadline) return;
        if (cor__progress_all() == 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

COR_API int cor_finalize(void)
{
    if (cor__check_init() == COR_OK && atomic_fetch_sub(&g.init_refs, 1) > 1) return COR_OK;
    int expected = 1;
    if (!atomic_compare_exchange_strong(&g.initialized, &expected, 3)) return COR_ESTATE;
    atomic_store(&g.initialized, 1); /* tasks still running may call the API */
    cor__task_join_all();
    flush_sends();
    int err = COR_OK;
    if (g.boot && g.size > 1) err = cor__boot_barrier(g.boot);
    /* Our ports stay open until every domain passed that barrier: a domain still in it would
     * take them closed for a death and fail its cor_finalize. */
    if (g.boot && g.size > 1 && err == COR_OK) cor__boot_leave(g.boot);
    atomic_store(&g.initialized, 3);
    wait_peer_calls();
    /* A death notice may still come (a peer given up late): domain_down stops it first. */
    return domain_down(err);
}

COR_API cor_idp_t cor_domain_self(void)
{
    return cor_domain_idp(g.rank);
}

COR_API int cor_domain_rank(void)
{
    return cor__check_init() ? -1 : g.rank;
}

COR_API int cor_domain_count(void)
{
    return cor__check_init() ? 0 : g.size;
}

COR_API cor_idp_t cor_domain_idp(int rank)
{
    if (cor__check_init() || rank < 0 || rank >= g.size) return COR_IDP_NULL;
    return cor_idp_make(g.macro, COR_KIND_DOMAIN, (unsigned)rank, 0);
}

COR_API uint32_t cor_session(void)
{
    return cor__check_init() ? 0 : g.macro;
}

COR_API int cor_domain_local(int rank)
{
    if (cor__check_init() || rank < 0 || rank >= g.size) return 0;
    return g.boot ? cor__boot_local(g.boot, rank) : 1;
}

COR_API int cor_domain_parent(int rank)
{
    if (cor__check_init() || rank <= 0 || rank >= g.size) return -1;
    return (rank - 1) / 2;
}

COR_API int cor_domain_children(int rank, int *children, int max)
{
    if (cor__check_init() || rank < 0 || rank >= g.size) return 0;
    int n = 0;
    for (int c = 2 * rank + 1; c <= 2 * rank + 2 && c < g.size; c++) {
        if (children && n < max) children[n] = c;
        n++;
    }
    return n;
}

COR_API int cor_domain_on_death(cor_death_fn fn, void *arg)
{
    int err = cor__check_init();
    if (err) return err;
    COR_LOCK(&g.lock);
    g.death_fn = fn;
    g.death_arg = arg;
    COR_UNLOCK(&g.lock);
    return COR_OK;
}

COR_API int cor_domain_on_death_add(cor_death_fn fn, void *arg)
{
    int err = cor__check_init();
    if (err) return err;
    if (!fn) return COR_EINVAL;
    COR_LOCK(&g.lock);
    for (int i = 0; i < g.ndeath_listeners; i++)
        if (g.death_listeners[i].fn == fn && g.death_listeners[i].arg == arg) {
            COR_UNLOCK(&g.lock);
            return COR_OK;
        }
    if (g.ndeath_listeners == COR_DEATH_LISTENERS) {
        COR_UNLOCK(&g.lock);
        return COR_ELIMIT;
    }
    g.death_listeners[g.ndeath_listeners].fn = fn;
    g.death_listeners[g.ndeath_listeners].arg = arg;
    g.ndeath_listeners++;
    COR_UNLOCK(&g.lock);
    return COR_OK;
}

COR_API int cor_barrier(void)
{
    int err = cor__check_init();
    if (err) return err;
    return g.boot && g.size > 1 ? cor__boot_barrier(g.boot) : COR_OK;
}

COR_API int cor_stats_get(cor_stats_t *s)
{
    int err = cor__check_init();
    if (err) return err;
    if (!s) return COR_EINVAL;
    uint64_t c[COR_COUNTERS];
    cor__counters_sum(c);
    *s = (cor_stats_t){
        .msgs_sent = c[C_MSGS_SENT],
        .msgs_received = c[C_MSGS_RECEIVED],
        .bytes_sent = c[C_BYTES_SENT],
        .bytes_received = c[C_BYTES_RECEIVED],
        .eager_sent = c[C_EAGER_SENT],
        .rndv_sent = c[C_RNDV_SENT],
        .credit_frames = c[C_CREDIT_FRAMES],
        .credit_stalls = c[C_CREDIT_STALLS],
        .frames_dropped = c[C_FRAMES_DROPPED],
        .unexpected_now = c[C_UNEXPECTED_NOW],
        .unexpected_bytes_now = c[C_UNEXPECTED_BYTES_NOW],
    };
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        if (!cor__route_has_counters(r->ops)) continue;
        for (int k = 0; k < r->nports; k++) {
            uint64_t dropped = 0, retx = 0;
            r->ops->counters(r->ports[k]->rp, &dropped, &retx);
            s->frames_dropped += dropped;
        }
    }
    return COR_OK;
}
