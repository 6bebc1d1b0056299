/*
 * multiport, multitask and rate: P task pairs stream at once; domain 0 reports the aggregate rate
 * (all bytes received after each pair's first message, over the time from the earliest first
 * to the latest last arrival).
 *
 * For each pair count and size, both domains spawn P tasks in the same order and join them, so
 * task k of domain 0 and task k of domain 1 get the same local index and find each other with
 * cor_task_idp(peer_rank, own_index). multiport binds task k's soft-port to hard port k,
 * exclusively; multitask lets the core map the soft-ports.
 *
 * The pairs of a domain send from one buffer and receive into one, as a single pair does:
 * with a buffer pair each, 16 pairs at 64 KiB touch 2 MiB per domain, the size of a core's
 * L2 on the reference machine, and the aggregate would measure the caches rather than the
 * runtime (the rate fell by a quarter). Receives then write into the one buffer at once, as
 * in osu_bw's window; nobody reads it (--verify implies --distinct-buffers, which gives every
 * pair its own).
 *
 * rate is multitask with small messages, a window of 64 and an ack after each window
 * (osu_mbw_mr's message rate); its rows count messages, one_way_us being the time per message.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cor/cor.h"

#define MULTI_WINDOW_MAX 4 /* 16 pairs x 4 x 1 MiB in flight is enough */

/* The pairs of a domain start streaming together, once all are set up: spawning them one by
 * one would otherwise skew the aggregate. `open` lets them go early when a spawn failed. */
struct start_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int waiting, expected, open;
};

static void gate_wait(struct start_gate *g)
{
    pthread_mutex_lock(&g->lock);
    if (++g->waiting >= g->expected) g->open = 1;
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void gate_open(struct start_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* A domain's buffers for one measurement; NULL entries: each pair allocates its own. */
struct pair_bufs {
    void *send;
    void *recv[BENCH_WINDOW_MAX];
};

struct pair_task {
    struct bench *b;
    struct start_gate *start;
    const struct pair_bufs *shared;
    int multiport;
    int index; /* pair number, = hard port in multiport */
    size_t size;
    long total, warm;
    struct bench_stream_result res; /* receiver side; read by main after cor_task_join */
    int err;
};

static int open_port(struct pair_task *t, cor_port_t *port)
{
    cor_port_attr_t attr = {.route = t->b->route, .hard_port = t->index, .exclusive = 1};
    int err = cor_port_open(&attr, port);
    if (err == COR_EBUSY) {
        /* Another soft-port of this domain already sits on that hard port: share it. */
        fprintf(stderr, "cor-bench: hard port %d busy, sharing it\n", t->index);
        attr.exclusive = 0;
        err = cor_port_open(&attr, port);
    }
    if (err) return bench_fail("cor_port_open", err);
    if ((err = cor_port_use(*port))) {
        cor_port_close(*port);
        return bench_fail("cor_port_use", err);
    }
    return COR_OK;
}

/* Allocates what `shared` does not provide; `own` (which may be `use`) records it for
 * pair_bufs_release, also after a failure. */
static int pair_bufs_get(const struct bench *b, size_t size, int sender,
                         const struct pair_bufs *shared, struct pair_bufs *use,
                         struct pair_bufs *own)
{
    size_t alloc = size ? size : 1;
    *use = shared ? *shared : (struct pair_bufs){0};
    *own = (struct pair_bufs){0};
    if (sender) {
        if (!use->send) {
            if (!(use->send = own->send = cor_getBuffer(COR_BYTE, alloc)))
                return bench_fail("cor_getBuffer", COR_ENOMEM);
            bench_fill(own->send, size);
        }
        return COR_OK;
    }
    for (int i = 0; i < bench_rbufs(b); i++)
        if (!use->recv[i] && !(use->recv[i] = own->recv[i] = cor_getBuffer(COR_BYTE, alloc)))
            return bench_fail("cor_getBuffer", COR_ENOMEM);
    return COR_OK;
}

static void pair_bufs_release(struct pair_bufs *own)
{
    if (own->send) cor_releaseBuffer(own->send);
    for (int i = 0; i < BENCH_WINDOW_MAX; i++)
        if (own->recv[i]) cor_releaseBuffer(own->recv[i]);
    *own = (struct pair_bufs){0};
}

static int pair_run(struct pair_task *t)
{
    struct bench *b = t->b;
    cor_port_t port = COR_PORT_NULL;
    struct pair_bufs use, own;
    int err;

    if (t->multiport)
        err = open_port(t, &port);
    else if ((err = cor_setTransport(b->route)))
        bench_fail("cor_setTransport", err);
    if (!err) err = pair_bufs_get(b, t->size, b->rank == 1, t->shared, &use, &own);
    gate_wait(t->start);
    if (!err) {
        cor_idp_t peer = cor_task_idp(1 - b->rank, cor_idp_index(cor_task_self()));
        if (b->rank == 1)
            err = bench_stream_send(b, peer, use.send, t->size, t->total);
        else
            err = bench_stream_recv(b, peer, use.recv, t->size, t->total, t->warm, &t->res);
    }
    pair_bufs_release(&own);
    if (port) {
        int cerr = cor_port_close(port);
        if (cerr && !err) err = bench_fail("cor_port_close", cerr);
    }
    return err;
}

static int pair_main(void *arg)
{
    struct pair_task *t = arg;
    t->err = pair_run(t);
    return t->err;
}

/* Messages per pair for one measurement, `*total` in all; the receiver's clock starts at
 * message number `*warm`. */
static void pair_budget(const struct bench *b, int pairs, size_t size, long *total, long *warm)
{
    /* Each pair streams long enough (16 windows) that filling and draining its pipeline,
     * and the skew of spawning the pairs, stay small beside the steady state measured. */
    long n = bench_iters_stream(b, size) / pairs;
    if (n < 16L * b->window) n = 16L * b->window;
    if (b->ack_window) {
        bench_rate_budget(b, n, total, warm);
        return;
    }
    *warm = bench_warmup(n);
    *total = n + *warm;
}

/* One measurement: P pairs, one size. Domain 0 prints the aggregate row. */
static int run_pairs(struct bench *b, int multiport, int pairs, int ports, size_t size)
{
    struct pair_task tasks[BENCH_MAX_PAIRS];
    cor_idp_t ids[BENCH_MAX_PAIRS];
    long total, warm;
    pair_budget(b, pairs, size, &total, &warm);
    int err, spawned = 0;
    struct start_gate start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, pairs, 0};

    struct pair_bufs shared = {0};
    if (!b->distinct && (err = pair_bufs_get(b, size, b->rank == 1, NULL, &shared, &shared))) {
        pair_bufs_release(&shared);
        return err;
    }

    /* Both domains start each measurement together (the bootstrap channel, not a port). */
    if ((err = cor_barrier())) {
        pair_bufs_release(&shared);
        return bench_fail("cor_barrier", err);
    }
    for (int i = 0; i < pairs; i++) {
        tasks[i] = (struct pair_task){
            .b = b,
            .start = &start,
            .shared = b->distinct ? NULL : &shared,
            .multiport = multiport,
            .index = i,
            .size = size,
            .total = total,
            .warm = warm,
        };
        if ((err = cor_task_spawn("bench-pair", pair_main, &tasks[i], &ids[i]))) {
            bench_fail("cor_task_spawn", err);
            gate_open(&start);
            break;
        }
        spawned++;
    }
    for (int i = 0; i < spawned; i++) {
        int status, jerr = cor_task_join(ids[i], &status);
        if (jerr && !err) err = bench_fail("cor_task_join", jerr);
        if (!err && tasks[i].err) err = tasks[i].err;
    }
    pair_bufs_release(&shared);
    if (err || b->rank != 0) return err;

    struct bench_stream_result sum = {.t0_ns = UINT64_MAX};
    for (int i = 0; i < pairs; i++) {
        const struct bench_stream_result *r = &tasks[i].res;
        sum.t0_ns = r->t0_ns < sum.t0_ns ? r->t0_ns : sum.t0_ns;
        sum.t1_ns = r->t1_ns > sum.t1_ns ? r->t1_ns : sum.t1_ns;
        sum.bytes += r->bytes;
        sum.msgs += r->msgs;
    }
    const char *mode = multiport ? "multiport" : b->ack_window ? "rate" : "multitask";
    bench_stream_row(b, b->route, mode, size, ports, pairs, &sum);
    return COR_OK;
}

int bench_multi(struct bench *b, int multiport)
{
    int have = cor_route_ports(b->route);
    if (have <= 0) {
        fprintf(stderr, "cor-bench: route '%s' has no hard port: %s\n", b->route,
                have < 0 ? cor_strerror(have) : "none opened");
        return have < 0 ? have : COR_ENOTFOUND;
    }
    if (!b->ack_window && b->window > MULTI_WINDOW_MAX) b->window = MULTI_WINDOW_MAX;
    if (multiport && b->nports == 0)
        for (int p = 1; p <= BENCH_MAX_PORTS && p <= have; p++)
            b->ports[b->nports++] = p;
    int rounds = multiport ? b->nports : b->npairs;
    b->nphases = rounds;
    for (int r = 0; r < rounds; r++) {
        b->phase = r;
        int pairs = multiport ? b->ports[r] : b->pairs[r];
        int ports = multiport ? pairs : have;
        if (multiport && pairs > have) {
            fprintf(stderr,
                    "cor-bench: %d ports asked, route '%s' has %d: start with cor-run --ports %d\n",
                    pairs, b->route, have, pairs);
            return COR_EINVAL;
        }
        for (int i = 0; i < b->nsizes; i++) {
            bench_progress(b, i, b->nsizes, b->sizes[i]);
            int err = run_pairs(b, multiport, pairs, ports, b->sizes[i]);
            if (err) return err;
        }
    }
    return COR_OK;
}

int bench_task_rate(struct bench *b)
{
    b->ack_window = 1;
    return bench_multi(b, 0);
}
