/*
 * multiport and multitask: P task pairs stream at once; domain 0 reports the aggregate rate
 * (all bytes received after each pair's first message, over the time from the earliest first
 * to the latest last arrival).
 *
 * For each pair count and size, both domains spawn P tasks in the same order and join them, so
 * task k of domain 0 and task k of domain 1 get the same local index and find each other with
 * cor_task_idp(peer_rank, own_index). multiport binds task k's soft-port to hard port k,
 * exclusively; multitask lets the core map the soft-ports.
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
    if (++g->waiting >= g->expected)
        g->open = 1;
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

struct pair_task {
    struct bench *b;
    struct start_gate *start;
    int multiport;
    int index;  /* pair number, = hard port in multiport */
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
    if (err)
        return bench_fail("cor_port_open", err);
    if ((err = cor_port_use(*port))) {
        cor_port_close(*port);
        return bench_fail("cor_port_use", err);
    }
    return COR_OK;
}

static int pair_run(struct pair_task *t)
{
    struct bench *b = t->b;
    cor_port_t port = NULL;
    void *sbuf = NULL, *rbufs[MULTI_WINDOW_MAX] = {0};
    size_t alloc = t->size ? t->size : 1;
    int err;

    if (t->multiport)
        err = open_port(t, &port);
    else if ((err = cor_setTransport(b->route)))
        bench_fail("cor_setTransport", err);
    gate_wait(t->start);
    if (err)
        return err;

    cor_idp_t peer = cor_task_idp(1 - b->rank, cor_idp_index(cor_task_self()));
    if (b->rank == 1) {
        if (!(sbuf = cor_getBuffer(COR_BYTE, alloc)))
            err = bench_fail("cor_getBuffer", COR_ENOMEM);
        else {
            bench_fill(sbuf, t->size);
            err = bench_stream_send(b, peer, sbuf, t->size, t->total);
        }
    } else {
        for (int i = 0; !err && i < bench_rbufs(b); i++)
            if (!(rbufs[i] = cor_getBuffer(COR_BYTE, alloc)))
                err = bench_fail("cor_getBuffer", COR_ENOMEM);
        if (!err)
            err = bench_stream_recv(b, peer, rbufs, t->size, t->total, t->warm, &t->res);
    }
    if (sbuf)
        cor_releaseBuffer(sbuf);
    for (int i = 0; i < MULTI_WINDOW_MAX; i++)
        if (rbufs[i])
            cor_releaseBuffer(rbufs[i]);
    if (port) {
        int cerr = cor_port_close(port);
        if (cerr && !err)
            err = bench_fail("cor_port_close", cerr);
    }
    return err;
}

static int pair_main(void *arg)
{
    struct pair_task *t = arg;
    t->err = pair_run(t);
    return t->err;
}

/* One measurement: P pairs, one size. Domain 0 prints the aggregate row. */
static int run_pairs(struct bench *b, int multiport, int pairs, int ports, size_t size)
{
    struct pair_task tasks[BENCH_MAX_PAIRS];
    cor_idp_t ids[BENCH_MAX_PAIRS];
    /* Each pair streams long enough (16 windows) that filling and draining its pipeline,
     * and the skew of spawning the pairs, stay small beside the steady state measured. */
    long total = bench_iters_stream(b, size) / pairs;
    if (total < 16L * b->window)
        total = 16L * b->window;
    long warm = bench_warmup(total);
    int err, spawned = 0;
    struct start_gate start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, pairs, 0};

    /* Both domains start each measurement together (the bootstrap channel, not a port). */
    if ((err = cor_barrier()))
        return bench_fail("cor_barrier", err);
    for (int i = 0; i < pairs; i++) {
        tasks[i] = (struct pair_task){
            .b = b, .start = &start, .multiport = multiport, .index = i, .size = size,
            .total = total + warm, .warm = warm,
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
        if (jerr && !err)
            err = bench_fail("cor_task_join", jerr);
        if (!err && tasks[i].err)
            err = tasks[i].err;
    }
    if (err || b->rank != 0)
        return err;

    struct bench_stream_result sum = {.t0_ns = UINT64_MAX};
    for (int i = 0; i < pairs; i++) {
        const struct bench_stream_result *r = &tasks[i].res;
        sum.t0_ns = r->t0_ns < sum.t0_ns ? r->t0_ns : sum.t0_ns;
        sum.t1_ns = r->t1_ns > sum.t1_ns ? r->t1_ns : sum.t1_ns;
        sum.bytes += r->bytes;
        sum.msgs += r->msgs;
    }
    bench_stream_row(b, b->route, multiport ? "multiport" : "multitask", size, ports, pairs,
                     &sum);
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
    if (b->window > MULTI_WINDOW_MAX)
        b->window = MULTI_WINDOW_MAX;
    if (multiport && b->nports == 0)
        for (int p = 1; p <= BENCH_MAX_PORTS && p <= have; p++)
            b->ports[b->nports++] = p;
    int rounds = multiport ? b->nports : b->npairs;
    for (int r = 0; r < rounds; r++) {
        int pairs = multiport ? b->ports[r] : b->pairs[r];
        int ports = multiport ? pairs : have;
        if (multiport && pairs > have) {
            fprintf(stderr,
                    "cor-bench: %d ports asked, route '%s' has %d: start with cor-run --ports %d\n",
                    pairs, b->route, have, pairs);
            return COR_EINVAL;
        }
        for (int i = 0; i < b->nsizes; i++) {
            int err = run_pairs(b, multiport, pairs, ports, b->sizes[i]);
            if (err)
                return err;
        }
    }
    return COR_OK;
}
