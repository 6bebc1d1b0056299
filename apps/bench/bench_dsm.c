/*
 * cor-bench dsm: what libcordsm's operations cost, each beside R, the task API's 8-byte round
 * trip between the main tasks of domains 0 and 1 measured in the same run (the machine is
 * noisy: only ratios within one run mean much). Runs on 2 or more domains:
 *
 *   cor-run -n N --route gm cor-bench dsm [--count N] [--tasks T] [--sizes LIST] [--csv FILE]
 *
 * Domain 0 homes every object and the lock, domain 1 is the usual client; the write at a third
 * domain needs 3 or more domains (readers at domains 2, 3, ... then the home), and comes with
 * its floor: the same messages relayed by the main tasks over the task API. Each measure is
 * taken by one domain, which sends its row to domain 0; domain 0 prints every row (with its
 * ratio to R and the issue's goal) and writes the CSV.
 *
 * The operations domain 1 times against the home (the 64 B miss, fetch-add, CAS, the lock)
 * and the barrier of 2 domains take an R round trip before each one, timed apart, and their
 * ratio is to that R: on a shared machine R moved by 2x between the start and the end of one
 * run (the speed of two cores' cache transfers changes with the neighbours), so an R of other
 * seconds made ratios of 0.8-1.8 for the same operation. Not the barrier of more domains than
 * cores: an R taken right after it waits for the domains still finishing it (26 us against
 * 1.4 us alone on 3 domains), which would flatter the ratio.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cor/cor.h"
#include "cor/dsm.h"

#define HIT_BATCH 1000 /* read hits and rwlock pairs are timed per batch: ns-scale */
#define PUT_BYTES_PER_SIZE ((size_t)1 << 30) /* caps the count of large puts */
#define BIG_MISS_BYTES ((size_t)1 << 20)     /* the large read miss: a 1 MiB cached object */
#define BIG_MISS_COUNT 1000

/* One result. Times are in `unit`; goals, when set, apply to the median (and the p99). */
struct dsm_row {
    char key[40];  /* stable CSV name */
    char what[96]; /* label of the table */
    char unit[8];  /* "us", "ns", "Mops/s", "x" */
    long count;    /* operations (or batches) behind the median */
    double median;
    double p99;      /* < 0: none (rates, ratios) */
    double goal_R;   /* median <= goal_R x R, 0: none */
    double goal_max; /* median <= goal_max, 0: none */
    double goal_min; /* median >= goal_min, 0: none */
    double goal_p99; /* p99 <= goal_p99, 0: none */
    int with_R;      /* print the median's ratio to R */
    double R_us;     /* the R taken between its operations (paced rows), else 0: the run's */
};

struct dsm_ctx {
    struct bench *b;
    int rank, ndom;
    unsigned me; /* the main task's index, the same in every domain */
    double R_us; /* domain 0: the median round trip */
    long n;      /* --count */
    cor_idp_t ho, put, cached, big, lock, ctr;
    cor_dsm_barrier_t all;
    double *v;      /* n samples */
    double *vR;     /* n samples of R, paced rows */
    int gm;         /* route is gm (its goals differ from udp's) */
    char label[32]; /* the CSV's route column: "gm", or "gm+shm" (COR_DSM_SHM not 0) */
};

static int dsm_fail(const char *what, int err)
{
    fprintf(stderr, "cor-bench dsm: %s: %s\n", what, cor_dsm_strerror(err));
    return err;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int e_ = (call);                                                                           \
        if (e_ != COR_OK) return dsm_fail(#call, e_);                                              \
    } while (0)

static double now_us(void)
{
    return (double)bench_now_ns() / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void row_stats(struct dsm_row *r, double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    r->count = n;
    r->median = v[n / 2];
    r->p99 = v[n * 99 / 100];
}

/* A paced row: also the median of the R samples taken between its operations. */
static void row_stats_R(struct dsm_row *r, double *v, double *vR, long n)
{
    row_stats(r, v, n);
    qsort(vR, (size_t)n, sizeof *vR, cmp_double);
    r->R_us = vR[n / 2];
    size_t len = strlen(r->what);
    snprintf(r->what + len, sizeof r->what - len, " [R %.2f]", r->R_us);
}

static void row_init(struct dsm_row *r, const char *key, const char *unit, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void row_init(struct dsm_row *r, const char *key, const char *unit, const char *fmt, ...)
{
    memset(r, 0, sizeof *r);
    snprintf(r->key, sizeof r->key, "%s", key);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
    r->p99 = -1;
    r->with_R = !strcmp(unit, "us");
}

static cor_idp_t main_of(const struct dsm_ctx *c, int rank)
{
    return cor_task_idp(rank, c->me);
}

/* The R a row's ratio is to: its own (paced), else the run's. */
static double row_R(const struct dsm_ctx *c, const struct dsm_row *r)
{
    return r->R_us > 0 ? r->R_us : c->R_us;
}

/* "met", "NOT met" or "" (no goal); the goal's text goes to `goal`. */
static const char *row_goal(const struct dsm_ctx *c, const struct dsm_row *r, char *goal,
                            size_t len)
{
    int ok = 1, any = 0;
    size_t o = 0;
    double R = row_R(c, r);
    goal[0] = 0;
#define GOAL(cond, ...)                                                                            \
    do {                                                                                           \
        any = 1;                                                                                   \
        ok &= (cond);                                                                              \
        if (o < len) o += (size_t)snprintf(goal + o, len - o, __VA_ARGS__);                        \
    } while (0)
    if (r->goal_R > 0) GOAL(r->median <= r->goal_R * R, "%s<=%.1fR", o ? " " : "", r->goal_R);
    if (r->goal_max > 0)
        GOAL(r->median <= r->goal_max, "%s<=%g%s", o ? " " : "", r->goal_max, r->unit);
    if (r->goal_min > 0)
        GOAL(r->median >= r->goal_min, "%s>=%g%s", o ? " " : "", r->goal_min, r->unit);
    if (r->goal_p99 > 0)
        GOAL(r->p99 <= r->goal_p99, "%sp99<=%g%s", o ? " " : "", r->goal_p99, r->unit);
#undef GOAL
    return !any ? "" : ok ? "met" : "NOT met";
}

static void row_print(struct dsm_ctx *c, const struct dsm_row *r)
{
    char goal[96], p99[32] = "-", perR[16] = "-";
    const char *met = row_goal(c, r, goal, sizeof goal);
    double R = row_R(c, r);
    if (r->p99 >= 0) snprintf(p99, sizeof p99, "%.2f", r->p99);
    if (r->with_R && R > 0) snprintf(perR, sizeof perR, "%.2f", r->median / R);
    if (!c->b->quiet) {
        printf("%-58s %8ld %10.2f %10s %-6s %6s  %s%s%s\n", r->what, r->count, r->median, p99,
               r->unit, perR, goal, *met ? ": " : "", met);
        fflush(stdout);
    }
    if (c->b->csv) {
        fprintf(c->b->csv, "%s,%d,%s,%ld,%.4f,%s,%s,%s,%s,%s\n", c->label, c->ndom, r->key,
                r->count, r->median, r->p99 >= 0 ? p99 : "", r->unit,
                r->with_R && R > 0 ? perR : "", goal, met);
        fflush(c->b->csv);
    }
}

/* Every domain calls this at the same point: the measuring domain `from` hands its row to
 * domain 0, which prints it. */
static int publish(struct dsm_ctx *c, int from, struct dsm_row *r)
{
    if (c->rank == from && from != 0)
        TRY(cor_send(main_of(c, 0), COR_CTX_WORLD, BENCH_TAG_DSM_ROW, COR_BYTE, r, sizeof *r));
    if (c->rank == 0 && from != 0)
        TRY(cor_recv(main_of(c, from), COR_CTX_WORLD, BENCH_TAG_DSM_ROW, COR_BYTE, r, sizeof *r,
                     NULL));
    if (c->rank == 0 && !strcmp(r->key, "R")) c->R_us = r->median; /* the reference row */
    if (c->rank == 0) row_print(c, r);
    return COR_OK;
}

/* An 8-byte token between main tasks, not timed: orders the steps of two domains. */
static int token_send(struct dsm_ctx *c, int to)
{
    long t = 0;
    return cor_send(main_of(c, to), COR_CTX_WORLD, BENCH_TAG_DSM_TOKEN, COR_BYTE, &t, 8);
}

static int token_recv(struct dsm_ctx *c, int from)
{
    long t;
    cor_idp_t src = from < 0 ? COR_ANY_SOURCE : main_of(c, from);
    return cor_recv(src, COR_CTX_WORLD, BENCH_TAG_DSM_TOKEN, COR_BYTE, &t, 8, NULL);
}

/* Pacing: a paced row's measuring domain takes one R round trip with the other of domains 0
 * and 1 before each operation (r_sample), while that one's main task answers (r_answer,
 * until told to stop; r_answer_one for a single ping). */
static int r_ping(struct dsm_ctx *c, int to, long v)
{
    return cor_send(main_of(c, to), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &v, 8);
}

static int r_sample(struct dsm_ctx *c, int peer, double *us)
{
    long v = 0;
    double t = now_us();
    TRY(r_ping(c, peer, v));
    TRY(cor_recv(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &v, 8, NULL));
    *us = now_us() - t;
    return COR_OK;
}

static int r_stop(struct dsm_ctx *c, int peer)
{
    return r_ping(c, peer, -1);
}

/* Answers one ping from `peer`; *stop when it was the stop. */
static int r_answer_one(struct dsm_ctx *c, int peer, bool *stop)
{
    long v;
    TRY(cor_recv(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &v, 8, NULL));
    *stop = v < 0;
    return *stop ? COR_OK : r_ping(c, peer, v);
}

static int r_answer(struct dsm_ctx *c, int peer)
{
    bool stop = false;
    while (!stop)
        TRY(r_answer_one(c, peer, &stop));
    return COR_OK;
}

/* One paced operation of domain 1 against the home: `prep` (untimed, may be NULL), then `op`. */
struct paced_op {
    int (*prep)(struct dsm_ctx *c, void *arg);
    int (*op)(struct dsm_ctx *c, void *arg);
    void *arg;
};

/* Domain 1: times o->op c->n times (after a tenth more as warm-up), each after an R round trip
 * with domain 0 taken apart, into r (the samples and their R). */
static int paced_row(struct dsm_ctx *c, struct dsm_row *r, const struct paced_op *o)
{
    for (long i = -c->n / 10; i < c->n; i++) {
        if (o->prep) TRY(o->prep(c, o->arg));
        double rt;
        TRY(r_sample(c, 0, &rt));
        double t = now_us();
        TRY(o->op(c, o->arg));
        if (i >= 0) {
            c->v[i] = now_us() - t;
            c->vR[i] = rt;
        }
    }
    row_stats_R(r, c->v, c->vR, c->n);
    return COR_OK;
}

/* Opens locks "NAME.k" until one is homed at domain `home` (the name decides the home). */
static int lock_at(const char *name, int home, cor_idp_t *lock)
{
    char n[COR_NAME_MAX];
    for (int k = 0; k < 10000; k++) {
        snprintf(n, sizeof n, "%s.%d", name, k);
        TRY(cor_dsm_lock_open(n, lock));
        if ((int)cor_idp_domain(*lock) == home) return COR_OK;
    }
    return dsm_fail("no lock name homed at domain 0", COR_ENOTFOUND);
}

static int setup(struct dsm_ctx *c)
{
    size_t put_max = 64;
    for (int i = 0; i < c->b->nsizes; i++)
        if (c->b->sizes[i] > put_max) put_max = c->b->sizes[i];
    if (c->rank == 0) {
        TRY(cor_dsm_create("bench.ho", COR_LONG, 8, COR_DSM_HOME_ONLY, &c->ho));
        TRY(cor_dsm_create("bench.put", COR_BYTE, put_max, COR_DSM_HOME_ONLY, &c->put));
        TRY(cor_dsm_create("bench.cached", COR_LONG, 8, COR_DSM_CACHED, &c->cached)); /* 64 B */
        TRY(cor_dsm_create("bench.big", COR_BYTE, BIG_MISS_BYTES, COR_DSM_CACHED, &c->big));
        TRY(cor_dsm_create("bench.ctr", COR_LONG, 4, COR_DSM_HOME_ONLY, &c->ctr));
    }
    TRY(cor_dsm_barrier_create("bench.all", COR_IDP_NULL, 1, &c->all));
    TRY(cor_dsm_barrier_wait(c->all));
    TRY(cor_dsm_lookup("bench.ho", &c->ho));
    TRY(cor_dsm_lookup("bench.put", &c->put));
    TRY(cor_dsm_lookup("bench.cached", &c->cached));
    TRY(cor_dsm_lookup("bench.big", &c->big));
    TRY(cor_dsm_lookup("bench.ctr", &c->ctr));
    TRY(lock_at("bench.lock", 0, &c->lock));
    return cor_dsm_barrier_wait(c->all);
}

/* R: the task API's 8 B round trip, domain 1 to domain 0 and back, on the route under test.
 * Taken first (the reference of every ratio) and again last ("R_end"): when the two differ
 * much, the machine's load changed during the run and the ratios are rough. */
static int bench_R(struct dsm_ctx *c, int at_end)
{
    struct dsm_row r;
    if (at_end)
        row_init(&r, "R_end", "us", "R again, at the end of the run (load check)");
    else
        row_init(&r, "R", "us", "R: task API 8 B round trip, domains 1<->0");
    if (c->rank == 1 || c->rank == 0) {
        int peer = !c->rank;
        long buf = 0;
        for (long i = -c->n / 10; i < c->n; i++) {
            double t = now_us();
            if (c->rank == 1) {
                TRY(cor_send(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf,
                             8));
                TRY(cor_recv(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf, 8,
                             NULL));
            } else {
                TRY(cor_recv(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf, 8,
                             NULL));
                TRY(cor_send(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf,
                             8));
            }
            if (i >= 0) c->v[i] = now_us() - t;
        }
        if (c->rank == 1) row_stats(&r, c->v, c->n);
    }
    return publish(c, 1, &r);
}

/* The flush is a one-way message: a query of the object (a round trip to its home's service
 * over the same connection, not timed) lets it be served first, so the miss alone is timed
 * (else ~0.6 R more: both in a row). */
static int miss_prep(struct dsm_ctx *c, void *rg)
{
    cor_dsm_info_t info;
    TRY(cor_dsm_flush(*(cor_dsm_region_t *)rg));
    return cor_dsm_query(c->cached, &info);
}

static int read_section(struct dsm_ctx *c, void *rg)
{
    (void)c;
    TRY(cor_dsm_start_read(*(cor_dsm_region_t *)rg));
    return cor_dsm_end_read(*(cor_dsm_region_t *)rg);
}

/* Read hit on a copy homed elsewhere, beside a pthread_rwlock read pair; then a 64 B miss. */
static int bench_read(struct dsm_ctx *c, cor_dsm_region_t rg)
{
    struct dsm_row hit, rw, ratio, miss;
    row_init(&hit, "read_hit", "ns", "read section hit, start+end (copy homed elsewhere)");
    row_init(&rw, "rwlock_read", "ns", "pthread_rwlock read lock+unlock, same run");
    row_init(&ratio, "read_hit_per_rwlock", "x", "read hit / rwlock pair");
    row_init(&miss, "read_miss_64", "us", "read miss, 64 B (copy flushed, flush served)");
    hit.goal_max = 100;
    ratio.goal_max = 3;
    miss.goal_R = 1.3;
    if (c->rank == 1) {
        long batches = c->n / 50 > 100 ? c->n / 50 : 100;
        if (batches > c->n) batches = c->n;
        TRY(cor_dsm_start_read(rg));
        TRY(cor_dsm_end_read(rg));
        for (long b = 0; b < batches; b++) {
            double t = now_us();
            for (int i = 0; i < HIT_BATCH; i++) {
                TRY(cor_dsm_start_read(rg));
                TRY(cor_dsm_end_read(rg));
            }
            c->v[b] = (now_us() - t) * 1e3 / HIT_BATCH;
        }
        row_stats(&hit, c->v, batches);
        pthread_rwlock_t lk = PTHREAD_RWLOCK_INITIALIZER;
        for (long b = 0; b < batches; b++) {
            double t = now_us();
            for (int i = 0; i < HIT_BATCH; i++) {
                pthread_rwlock_rdlock(&lk);
                pthread_rwlock_unlock(&lk);
            }
            c->v[b] = (now_us() - t) * 1e3 / HIT_BATCH;
        }
        row_stats(&rw, c->v, batches);
        ratio.count = batches;
        ratio.median = hit.median / rw.median;
        TRY(paced_row(c, &miss, &(struct paced_op){miss_prep, read_section, &rg}));
        TRY(r_stop(c, 0));
    }
    if (c->rank == 0) TRY(r_answer(c, 1));
    TRY(publish(c, 1, &hit));
    TRY(publish(c, 1, &rw));
    TRY(publish(c, 1, &ratio));
    return publish(c, 1, &miss);
}

/* A read miss on a 1 MiB copy: the grant's data goes straight into the copy (the core's
 * rendezvous; over gm the route's remote write); put 1 MiB is the neighbour to compare. */
static int bench_read_big(struct dsm_ctx *c)
{
    struct dsm_row miss;
    row_init(&miss, "read_miss_1M", "us", "read miss, 1 MiB (data straight into the copy)");
    long n = c->n < BIG_MISS_COUNT ? c->n : BIG_MISS_COUNT;
    if (c->rank == 1) {
        cor_dsm_region_t rg;
        TRY(cor_dsm_map(c->big, &rg));
        for (long i = -n / 10; i < n; i++) {
            TRY(cor_dsm_flush(rg));
            double t = now_us();
            TRY(cor_dsm_start_read(rg));
            TRY(cor_dsm_end_read(rg));
            if (i >= 0) c->v[i] = now_us() - t;
        }
        TRY(cor_dsm_unmap(rg));
        row_stats(&miss, c->v, n);
    }
    return publish(c, 1, &miss);
}

/* A write at the home (domain 0) invalidating domain 1's read copy: domain 1 reads, hands a
 * token over (not timed), domain 0 times its write section. */
static int bench_write_home(struct dsm_ctx *c, cor_dsm_region_t rg)
{
    struct dsm_row r;
    row_init(&r, "write_inval_home_1", "us", "write at the home invalidating 1 reader");
    r.goal_R = 2.2;
    for (long i = -c->n / 10; c->rank <= 1 && i < c->n; i++) {
        if (c->rank == 1) {
            TRY(cor_dsm_start_read(rg));
            TRY(cor_dsm_end_read(rg));
            TRY(token_send(c, 0));
            TRY(token_recv(c, 0));
        } else {
            TRY(token_recv(c, 1));
            double t = now_us();
            TRY(cor_dsm_start_write(rg));
            TRY(cor_dsm_end_write(rg));
            if (i >= 0) c->v[i] = now_us() - t;
            TRY(token_send(c, 1));
        }
    }
    if (c->rank == 0) row_stats(&r, c->v, c->n);
    return publish(c, 0, &r);
}

/* The k-th reader of the third-party write: domains 2, 3, ... first, the home last. */
static int reader_rank(const struct dsm_ctx *c, int k)
{
    return k + 2 < c->ndom ? k + 2 : 0;
}

/* The write at a third domain and its floor alternate in blocks: on a shared machine the
 * speed of a hop moved by 2x within a run, and a write row taken minutes before its relay row
 * compared other seconds. */
#define THIRD_BLOCKS 4

/* One block of the floor of the write at a third domain invalidating k readers: its one-way
 * messages (1 -> 0, 0 -> each reader away from the home and back, 0 -> 1) relayed by the main
 * tasks, no DSM, the domains left out waiting in a barrier as they do for the write. With more
 * domains than cores a hop may wait for its domain to get a CPU, which no protocol avoids:
 * this row says how much of the write's time that is. Domain 1 times `per` relays into v
 * (after per / 10 untimed). */
static int relay_block(struct dsm_ctx *c, int k, long per, double *v)
{
    int away = 0; /* readers away from the home: domains 2 .. away+1 */
    bool in = c->rank <= 1;
    for (int j = 0; j < k; j++)
        if (reader_rank(c, j) != 0) {
            away++;
            in |= reader_rank(c, j) == c->rank;
        }
    for (long i = -per / 10; in && i < per; i++) {
        if (c->rank == 1) {
            double t = now_us();
            TRY(token_send(c, 0));
            TRY(token_recv(c, 0));
            if (i >= 0) v[i] = now_us() - t;
        } else if (c->rank == 0) {
            TRY(token_recv(c, 1));
            for (int d = 2; d < away + 2; d++)
                TRY(token_send(c, d));
            for (int d = 2; d < away + 2; d++)
                TRY(token_recv(c, -1));
            TRY(token_send(c, 1));
        } else {
            TRY(token_recv(c, 0));
            TRY(token_send(c, 0));
        }
    }
    return COR_OK;
}

/* One block of writes at domain 1 (home 0) invalidating k readers: each round the readers take
 * a read section and send a token (not timed); the writer times its write section into v,
 * then releases them. */
static int write_block(struct dsm_ctx *c, cor_dsm_region_t rg, int k, long per, double *v)
{
    int reads = 0;
    for (int j = 0; j < k; j++)
        reads |= reader_rank(c, j) == c->rank;
    if (!reads && c->rank != 1) return COR_OK;
    for (long i = -per / 10; i < per; i++) {
        if (reads) {
            TRY(cor_dsm_start_read(rg));
            TRY(cor_dsm_end_read(rg));
            TRY(token_send(c, 1));
            TRY(token_recv(c, 1));
        } else {
            for (int j = 0; j < k; j++)
                TRY(token_recv(c, -1));
            double t = now_us();
            TRY(cor_dsm_start_write(rg));
            TRY(cor_dsm_end_write(rg));
            if (i >= 0) v[i] = now_us() - t;
            for (int j = 0; j < k; j++)
                TRY(token_send(c, reader_rank(c, j)));
        }
    }
    return COR_OK;
}

/* 3+ domains: the write at domain 1 invalidating k readers, k = 1 .. ndom-1, beside its relay
 * (alternating blocks), their ratio (issue 34: <= 1.2 for one reader), then the added cost per
 * reader beyond the first. */
static int bench_write_third(struct dsm_ctx *c, cor_dsm_region_t rg)
{
    int kmax = c->ndom - 1;
    double first = 0, last = 0, relay_first = 0, relay_last = 0;
    long per = c->n / THIRD_BLOCKS, n = per * THIRD_BLOCKS;
    for (int k = 1; k <= kmax; k++) {
        struct dsm_row r, rr, ratio;
        char key[40], who[64] = "";
        snprintf(key, sizeof key, "write_inval_3rd_%d", k);
        for (int j = 0; j < k; j++)
            snprintf(who + strlen(who), sizeof who - strlen(who), "%s%d", j ? "," : "",
                     reader_rank(c, j));
        row_init(&r, key, "us", "write at a 3rd domain invalidating %d reader%s (at %s)", k,
                 k > 1 ? "s" : "", who);
        if (k == 1) r.goal_R = 2.2;
        snprintf(key, sizeof key, "relay_3rd_%d", k);
        row_init(&rr, key, "us", "  reference: its messages relayed by main tasks (task API)");
        snprintf(key, sizeof key, "write_3rd_%d_per_relay", k);
        row_init(&ratio, key, "x", "  write / its relay (alternating blocks)");
        if (k == 1) ratio.goal_max = 1.2;
        for (int b = 0; b < 2 * THIRD_BLOCKS; b++) {
            TRY(cor_dsm_barrier_wait(c->all));
            if (b & 1)
                TRY(relay_block(c, k, per, c->vR + (b / 2) * per));
            else
                TRY(write_block(c, rg, k, per, c->v + (b / 2) * per));
        }
        if (c->rank == 1) {
            row_stats(&r, c->v, n);
            row_stats(&rr, c->vR, n);
            ratio.count = n;
            ratio.median = r.median / rr.median;
            if (k == 1) first = r.median, relay_first = rr.median;
            last = r.median;
            relay_last = rr.median;
        }
        TRY(publish(c, 1, &r));
        TRY(publish(c, 1, &rr));
        TRY(publish(c, 1, &ratio));
    }
    if (kmax < 2) return COR_OK;
    struct dsm_row per_r, per_relay;
    row_init(&per_r, "write_inval_per_extra_reader", "us",
             "  added cost per reader beyond the first ((%d)-(1))/%d", kmax, kmax - 1);
    per_r.goal_R = 0.3;
    per_r.count = n;
    per_r.median = (last - first) / (kmax - 1);
    TRY(publish(c, 1, &per_r));
    row_init(&per_relay, "relay_per_extra_reader", "us", "  reference: the same of the relays");
    per_relay.count = n;
    per_relay.median = (relay_last - relay_first) / (kmax - 1);
    return publish(c, 1, &per_relay);
}

static int fetch_add_one(struct dsm_ctx *c, void *arg)
{
    (void)arg;
    long one = 1, old;
    return cor_dsm_fetch_add(c->ho, 0, COR_LONG, &one, &old);
}

static int cas_zero(struct dsm_ctx *c, void *arg)
{
    (void)arg;
    long expect = 0, desired = 0, old;
    return cor_dsm_cas(c->ho, 1, COR_LONG, &expect, &desired, &old);
}

static int bench_atomics(struct dsm_ctx *c)
{
    struct dsm_row fa, cas;
    row_init(&fa, "fetch_add", "us", "remote fetch-add (domain 1 -> home 0)");
    row_init(&cas, "cas", "us", "remote compare-and-swap");
    fa.goal_R = cas.goal_R = 1.2;
    if (c->rank == 1) {
        TRY(paced_row(c, &fa, &(struct paced_op){NULL, fetch_add_one, NULL}));
        TRY(paced_row(c, &cas, &(struct paced_op){NULL, cas_zero, NULL}));
        TRY(r_stop(c, 0));
    }
    if (c->rank == 0) TRY(r_answer(c, 1));
    TRY(publish(c, 1, &fa));
    return publish(c, 1, &cas);
}

struct adds_arg {
    struct dsm_ctx *c;
    long adds;
    int err;
};

static int adds_task(void *arg)
{
    struct adds_arg *a = arg;
    long one = 1;
    for (long i = 0; i < a->adds && a->err == COR_OK; i++)
        a->err = cor_dsm_add(a->c->ctr, 0, COR_LONG, &one);
    int q = cor_dsm_quiet();
    if (a->err == COR_OK) a->err = q;
    return 0;
}

/* Spawns `tasks` tasks running fn(args[i]) and joins them. */
static int run_tasks(int tasks, int (*fn)(void *), void *args, size_t arg_size)
{
    cor_idp_t t[BENCH_MAX_PAIRS];
    int spawned = 0, err = COR_OK;
    for (; spawned < tasks; spawned++) {
        err =
            cor_task_spawn("bench.dsm", fn, (char *)args + (size_t)spawned * arg_size, &t[spawned]);
        if (err != COR_OK) break;
    }
    for (int i = 0; i < spawned; i++)
        cor_task_join(t[i], NULL);
    return err;
}

/* Pipelined non-fetching adds to domain 0: one task of domain 1, then `tasks` tasks in every
 * other domain at once (aggregate, timed by domain 0 between two barriers). The counter must
 * end exact. */
static int bench_adds(struct dsm_ctx *c)
{
    struct dsm_row one, agg;
    long per = c->n * 10;
    row_init(&one, "adds_1task", "Mops/s", "pipelined non-fetching adds, 1 task (%ld + quiet)",
             per);
    row_init(&agg, "adds_aggregate", "Mops/s",
             "pipelined adds, aggregate of %d domain%s x %d tasks", c->ndom - 1,
             c->ndom > 2 ? "s" : "", c->b->tasks);
    one.goal_min = agg.goal_min = c->gm ? 1.0 : 0.3;
    struct adds_arg a[BENCH_MAX_PAIRS];
    if (c->rank == 1) {
        a[0] = (struct adds_arg){c, per, COR_OK};
        double t = now_us();
        adds_task(&a[0]);
        t = now_us() - t;
        if (a[0].err != COR_OK) return dsm_fail("cor_dsm_add", a[0].err);
        one.count = per;
        one.median = (double)per / t;
    }
    TRY(publish(c, 1, &one));
    TRY(cor_dsm_barrier_wait(c->all));
    double t0 = now_us();
    if (c->rank != 0) {
        for (int i = 0; i < c->b->tasks; i++)
            a[i] = (struct adds_arg){c, per / c->b->tasks, COR_OK};
        TRY(run_tasks(c->b->tasks, adds_task, a, sizeof a[0]));
        for (int i = 0; i < c->b->tasks; i++)
            if (a[i].err != COR_OK) return dsm_fail("cor_dsm_add (tasks)", a[i].err);
    }
    TRY(cor_dsm_barrier_wait(c->all));
    if (c->rank == 0) {
        long total = (long)(c->ndom - 1) * (per / c->b->tasks) * c->b->tasks, got = 0;
        agg.count = total;
        agg.median = (double)total / (now_us() - t0);
        TRY(cor_dsm_get(c->ctr, 0, 1, COR_LONG, &got));
        if (got != total + per) {
            fprintf(stderr, "cor-bench dsm: pipelined adds: counter %ld, expected %ld\n", got,
                    total + per);
            return COR_EPROTO;
        }
    }
    return publish(c, 0, &agg);
}

/* arg: where to store the release's time (one-way: no reply awaited), us. */
static int lock_unlock(struct dsm_ctx *c, void *arg)
{
    TRY(cor_dsm_lock(c->lock));
    double t = now_us();
    int err = cor_dsm_unlock(c->lock);
    *(double *)arg = now_us() - t;
    return err;
}

/* The release times of the paced lock row, by operation (the warm-up's first). */
struct lock_split {
    double *rel;
    long i;
};

static int lock_unlock_split(struct dsm_ctx *c, void *arg)
{
    struct lock_split *s = arg;
    double t = 0;
    int err = lock_unlock(c, &t);
    if (++s->i >= 0) s->rel[s->i] = t;
    return err;
}

static int bench_lock(struct dsm_ctx *c)
{
    struct dsm_row r;
    struct dsm_row rr;
    row_init(&r, "lock", "us", "remote lock acquire+release, uncontended");
    row_init(&rr, "lock_release", "us", "  of it the release (none while the lock is kept)");
    r.goal_R = 1.3;
    if (c->rank == 1) {
        double *rel = malloc((size_t)c->n * sizeof *rel);
        if (!rel) return dsm_fail("lock", COR_ENOMEM);
        struct lock_split s = {rel, -c->n / 10 - 1};
        int err = paced_row(c, &r, &(struct paced_op){NULL, lock_unlock_split, &s});
        if (err == COR_OK) row_stats(&rr, rel, c->n);
        free(rel);
        if (err) return err;
        TRY(r_stop(c, 0));
    }
    if (c->rank == 0) TRY(r_answer(c, 1));
    TRY(publish(c, 1, &r));
    return publish(c, 1, &rr);
}

/* The lock in turns: domain 1 takes and releases it, then hands the turn to domain 0 (an 8 B
 * message), which takes and releases it and hands the turn back; each acquisition finds the
 * lock with the other domain (kept: recalled from it). A round's time, beside 2 R (its two
 * turn messages are one R). */
static int bench_lock_turns(struct dsm_ctx *c)
{
    struct dsm_row r;
    row_init(&r, "lock_turns", "us", "lock in turns, 2 domains: round of 2 acq.");
    long n = c->n / 10 > 0 ? c->n / 10 : 1;
    if (c->rank == 1) {
        for (long i = -n / 10 - 1; i < n; i++) {
            double rt;
            TRY(r_sample(c, 0, &rt)); /* an R apart */
            double t = now_us();
            TRY(cor_dsm_lock(c->lock));
            TRY(cor_dsm_unlock(c->lock));
            TRY(r_ping(c, 0, 1));
            long v;
            TRY(cor_recv(main_of(c, 0), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &v, 8, NULL));
            if (i >= 0) {
                c->v[i] = now_us() - t;
                c->vR[i] = rt;
            }
        }
        row_stats_R(&r, c->v, c->vR, n);
        TRY(r_stop(c, 0));
    }
    if (c->rank == 0) {
        for (;;) {
            long v;
            TRY(cor_recv(main_of(c, 1), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &v, 8, NULL));
            if (v < 0) break;
            if (v == 1) { /* a turn (0: an R sample) */
                TRY(cor_dsm_lock(c->lock));
                TRY(cor_dsm_unlock(c->lock));
            }
            TRY(r_ping(c, 1, v));
        }
    }
    return publish(c, 1, &r);
}

#define FAIR_TASKS 2

struct fair_arg {
    struct dsm_ctx *c;
    cor_dsm_barrier_t start; /* every task of every domain, so that all contend from the start */
    long acquired;           /* in all */
    long contended;          /* once every task had taken the lock once (fairness counts these) */
    int err;
};

/* Takes the lock until the session made --count acquisitions once every task took the lock
 * once (ctr[2] counts those that did, ctr[1] the acquisitions since): until then the tasks
 * that got a CPU first, milliseconds before the others on a machine with fewer cores than
 * threads, take a lock that nobody else asked for yet. Fairness counts those --count. */
static int fair_task(void *arg)
{
    struct fair_arg *a = arg;
    long one = 1, zero = 0, old = -1, joined = 0, all = (long)a->c->ndom * FAIR_TASKS;
    a->err = cor_dsm_barrier_wait(a->start);
    while (a->err == COR_OK) {
        a->err = cor_dsm_lock(a->c->lock);
        if (a->err != COR_OK) break;
        if (joined < all) {
            a->err = cor_dsm_fetch_add(a->c->ctr, 2, COR_LONG, a->acquired ? &zero : &one, &joined);
            joined += !a->acquired;
        }
        if (a->err == COR_OK && joined == all)
            a->err = cor_dsm_fetch_add(a->c->ctr, 1, COR_LONG, &one, &old);
        int u = cor_dsm_unlock(a->c->lock);
        if (a->err == COR_OK) a->err = u;
        if (old >= a->c->n) break;
        a->acquired++;
        a->contended += old >= 0;
    }
    return 0;
}

/* Contended lock: every domain x 2 tasks; fairness = max/min acquisitions per task once all
 * contend. */
static int bench_lock_contended(struct dsm_ctx *c)
{
    enum { TASKS = FAIR_TASKS };
    struct dsm_row fair, each;
    row_init(&fair, "lock_fairness", "x",
             "contended lock, %d domains x %d tasks: max/min acq. (all contending)", c->ndom,
             TASKS);
    row_init(&each, "lock_contended", "us", "  time per contended acquisition");
    each.with_R = 1;
    cor_dsm_barrier_t start;
    TRY(cor_dsm_barrier_create("cor-bench.lock.start", COR_IDP_NULL, TASKS, &start));
    struct fair_arg a[TASKS];
    for (int i = 0; i < TASKS; i++)
        a[i] = (struct fair_arg){c, start, 0, 0, COR_OK};
    TRY(cor_dsm_barrier_wait(c->all));
    double t0 = now_us();
    TRY(run_tasks(TASKS, fair_task, a, sizeof a[0]));
    TRY(cor_dsm_barrier_destroy(start));
    for (int i = 0; i < TASKS; i++)
        if (a[i].err != COR_OK) return dsm_fail("contended lock", a[i].err);
    /* per task: acquisitions in all, then those made while every task contended */
    long counts[2 * TASKS], sum = 0, fair_sum = 0, mn = -1, mx = 0;
    for (int i = 0; i < TASKS; i++) {
        counts[i] = a[i].acquired;
        counts[TASKS + i] = a[i].contended;
    }
    if (c->rank != 0)
        TRY(cor_send(main_of(c, 0), COR_CTX_WORLD, BENCH_TAG_DSM_ROW, COR_LONG, counts, 2 * TASKS));
    TRY(cor_dsm_barrier_wait(c->all));
    double el = now_us() - t0;
    if (c->rank == 0) {
        for (int d = 0; d < c->ndom; d++) {
            if (d > 0)
                TRY(cor_recv(main_of(c, d), COR_CTX_WORLD, BENCH_TAG_DSM_ROW, COR_LONG, counts,
                             2 * TASKS, NULL));
            for (int i = 0; i < TASKS; i++) {
                long f = counts[TASKS + i];
                mn = mn < 0 || f < mn ? f : mn;
                mx = f > mx ? f : mx;
                sum += counts[i];
                fair_sum += f;
            }
        }
        if (fair_sum != c->n) {
            fprintf(stderr, "cor-bench dsm: contended lock: %ld acquisitions, expected %ld\n",
                    fair_sum, c->n);
            return COR_EPROTO;
        }
        fair.count = fair_sum;
        each.count = sum;
        fair.median = mn > 0 ? (double)mx / (double)mn : 1e9;
        each.median = el / (double)sum;
    }
    TRY(publish(c, 0, &fair));
    return publish(c, 0, &each);
}

/* The floor of a barrier of more domains than 2: the same dissemination rounds (round k: a
 * token to rank + 2^k, one from rank - 2^k) between the main tasks over the task API. */
static int bench_barrier_floor(struct dsm_ctx *c)
{
    struct dsm_row r;
    row_init(&r, "barrier_relay", "us", "  reference: its rounds of messages between main tasks");
    TRY(cor_dsm_barrier_wait(c->all));
    for (long i = -c->n / 10; i < c->n; i++) {
        double t = now_us();
        for (int d = 1; d < c->ndom; d *= 2) {
            TRY(token_send(c, (c->rank + d) % c->ndom));
            TRY(token_recv(c, (c->rank - d + c->ndom) % c->ndom));
        }
        if (i >= 0 && c->rank == 0) c->v[i] = now_us() - t;
    }
    if (c->rank == 0) row_stats(&r, c->v, c->n);
    return publish(c, 0, &r);
}

static int bench_barrier(struct dsm_ctx *c)
{
    struct dsm_row r;
    row_init(&r, "barrier", "us", "barrier over %d domains", c->ndom);
    r.goal_R = c->ndom == 2 ? 1.2 : c->ndom == 4 ? 2.5 : 0;
    TRY(cor_dsm_barrier_wait(c->all));
    /* paced on 2 domains: domain 0 takes an R round trip with domain 1 before each barrier */
    bool paced = c->ndom == 2;
    for (long i = -c->n / 10; i < c->n; i++) {
        double rt = 0;
        bool stop;
        if (paced && c->rank == 0) TRY(r_sample(c, 1, &rt));
        if (paced && c->rank == 1) TRY(r_answer_one(c, 0, &stop));
        double t = now_us();
        TRY(cor_dsm_barrier_wait(c->all));
        if (i >= 0 && c->rank == 0) {
            c->v[i] = now_us() - t;
            c->vR[i] = rt;
        }
    }
    if (c->rank == 0 && paced) row_stats_R(&r, c->v, c->vR, c->n);
    if (c->rank == 0 && !paced) row_stats(&r, c->v, c->n);
    TRY(publish(c, 0, &r));
    return paced ? COR_OK : bench_barrier_floor(c);
}

/* Polling against waiting: `tasks` tasks in every domain go through barrier episodes, all by
 * cor_dsm_wait (the reference) or all by cor_dsm_barrier_waitI and a cor_dsm_test loop that
 * never yields itself, in alternating blocks. With more tasks than CPUs the loop must not
 * starve the threads it waits for (other tasks, listeners, services); with the CPUs to itself
 * (1 task, 2 domains on 2 cores) it must not be slower than the wait. The round trip R by
 * cor_test loops beside R by cor_recv, alternating too, is the same for the core's test.
 * Timed by task 0 of domain 0 (domain 1 for R) per episode. */
#define POLL_TASKS 4
#define POLL_BLOCKS 4 /* blocks of each mode, alternating */

struct poll_arg {
    cor_dsm_barrier_t bar;
    bool test;  /* poll with cor_dsm_test, else cor_dsm_wait */
    long n;     /* episodes timed, after n / 10 untimed */
    double *v;  /* per episode (task 0 of domain 0), else NULL */
    long polls; /* cor_dsm_test calls that found the episode still running */
    int err;
};

static int poll_task(void *arg)
{
    struct poll_arg *a = arg;
    for (long i = -a->n / 10; i < a->n && a->err == COR_OK; i++) {
        double t = now_us();
        if (a->test) {
            cor_dsm_req_t rq;
            int done = 0;
            a->err = cor_dsm_barrier_waitI(a->bar, &rq);
            while (a->err == COR_OK && !done) {
                a->err = cor_dsm_test(&rq, &done);
                a->polls += !done;
            }
        } else {
            a->err = cor_dsm_barrier_wait(a->bar);
        }
        if (i >= 0 && a->v) a->v[i] = now_us() - t;
    }
    return 0;
}

/* The three rows of one comparison: wait, test loop, their ratio (goal `goal`, 0: none). */
static int poll_publish(struct dsm_ctx *c, struct dsm_row *wr, struct dsm_row *tr, double *vw,
                        double *vt, long n, const char *key, double goal)
{
    struct dsm_row ratio;
    row_init(&ratio, key, "x", "  test loop / wait (alternating blocks)");
    ratio.goal_max = goal;
    if (c->rank == 0) {
        ratio.count = n;
        ratio.median = tr->median / wr->median;
    }
    TRY(publish(c, 0, wr));
    TRY(publish(c, 0, tr));
    return publish(c, 0, &ratio);
}

static int poll_barrier(struct dsm_ctx *c, int tasks, double *vw, double *vt, long per)
{
    struct dsm_row wr, tr;
    char key[40];
    snprintf(key, sizeof key, "barrier_tasks%d_wait", tasks);
    row_init(&wr, key, "us", "barrier, %d domains x %d task%s, cor_dsm_wait", c->ndom, tasks,
             tasks > 1 ? "s" : "");
    snprintf(key, sizeof key, "barrier_tasks%d_test", tasks);
    row_init(&tr, key, "us", "  the same, cor_dsm_test loop");
    long n = per * POLL_BLOCKS, polls = 0;
    cor_dsm_barrier_t bar;
    snprintf(key, sizeof key, "cor-bench.poll%d", tasks);
    int err = cor_dsm_barrier_create(key, COR_IDP_NULL, tasks, &bar);
    for (int b = 0; b < 2 * POLL_BLOCKS && err == COR_OK; b++) {
        bool test = b & 1;
        struct poll_arg a[POLL_TASKS];
        double *v = (test ? vt : vw) + (b / 2) * per;
        for (int i = 0; i < tasks; i++)
            a[i] = (struct poll_arg){bar, test, per, i == 0 && c->rank == 0 ? v : NULL, 0, COR_OK};
        err = cor_dsm_barrier_wait(c->all);
        if (err == COR_OK) err = run_tasks(tasks, poll_task, a, sizeof a[0]);
        for (int i = 0; i < tasks && err == COR_OK; i++) {
            err = a[i].err;
            polls += a[i].polls;
        }
    }
    if (err == COR_OK) err = cor_dsm_barrier_wait(c->all);
    if (err == COR_OK) err = cor_dsm_barrier_destroy(bar);
    if (err != COR_OK) return dsm_fail("barrier episodes, polling and waiting", err);
    if (c->rank == 0) {
        row_stats(&wr, vw, n);
        row_stats(&tr, vt, n);
        size_t len = strlen(tr.what);
        long episodes = (long)tasks * POLL_BLOCKS * (per + per / 10);
        snprintf(tr.what + len, sizeof tr.what - len, " [%.0f misses/ep]",
                 (double)polls / (double)episodes);
    }
    snprintf(key, sizeof key, "barrier_tasks%d_test_per_wait", tasks);
    /* 1 task: no goal; on 2 domains the barrier meets in shared memory in 0.1-0.2 us, where
     * the request of cor_dsm_barrier_waitI alone costs as much as the wait */
    return poll_publish(c, &wr, &tr, vw, vt, n, key, tasks > 1 ? 2 : 0);
}

/* One 8 B round trip between the main tasks of domains 1 and 0, each waiting for its message
 * by cor_recv or by a cor_test loop. */
static int poll_round_trip(struct dsm_ctx *c, bool test)
{
    int peer = !c->rank;
    long buf = 0;
    for (int step = 0; step < 2; step++) {
        if ((step == 0) == (c->rank == 1)) {
            TRY(cor_send(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf, 8));
        } else if (!test) {
            TRY(cor_recv(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf, 8,
                         NULL));
        } else {
            cor_req_t rq;
            int done = 0;
            TRY(cor_recvI_into(main_of(c, peer), COR_CTX_WORLD, BENCH_TAG_DSM_RTT, COR_BYTE, &buf,
                               8, &rq));
            while (!done)
                TRY(cor_test(&rq, &done, NULL));
        }
    }
    return COR_OK;
}

static int poll_R(struct dsm_ctx *c, double *vw, double *vt, long per)
{
    struct dsm_row wr, tr;
    row_init(&wr, "R_wait", "us", "R, domains 1<->0, cor_recv");
    row_init(&tr, "R_test", "us", "  the same, cor_recvI_into + cor_test loop");
    per *= 10; /* microseconds each */
    for (int b = 0; b < 2 * POLL_BLOCKS && c->rank <= 1; b++) {
        bool test = b & 1;
        double *v = (test ? vt : vw) + (b / 2) * per;
        for (long i = -per / 10; i < per; i++) {
            double t = now_us();
            TRY(poll_round_trip(c, test));
            if (i >= 0) v[i] = now_us() - t;
        }
    }
    long n = per * POLL_BLOCKS;
    if (c->rank == 1) {
        row_stats(&wr, vw, n);
        row_stats(&tr, vt, n);
    }
    /* measured at domain 1: its rows go to domain 0, which makes the ratio */
    TRY(publish(c, 1, &wr));
    TRY(publish(c, 1, &tr));
    struct dsm_row ratio;
    row_init(&ratio, "R_test_per_wait", "x", "  test loop / wait (alternating blocks)");
    ratio.goal_max = 1.2;
    if (c->rank == 0) {
        ratio.count = n;
        ratio.median = tr.median / wr.median;
    }
    return publish(c, 0, &ratio);
}

static int bench_polling(struct dsm_ctx *c)
{
    long per = c->n / 10 / POLL_BLOCKS; /* episodes per block: a slow loop takes milliseconds */
    if (per < 5) per = 5;
    double *vw = malloc((size_t)per * 10 * POLL_BLOCKS * sizeof *vw);
    double *vt = malloc((size_t)per * 10 * POLL_BLOCKS * sizeof *vt);
    int err = vw && vt ? COR_OK : dsm_fail("samples", COR_ENOMEM);
    if (err == COR_OK) err = poll_barrier(c, POLL_TASKS, vw, vt, per);
    if (err == COR_OK) err = poll_barrier(c, 1, vw, vt, per);
    if (err == COR_OK) err = cor_dsm_barrier_wait(c->all);
    if (err == COR_OK) err = poll_R(c, vw, vt, per);
    free(vw);
    free(vt);
    return err;
}

static atomic_int computing;

static int compute_task(void *arg)
{
    volatile double x = 1;
    while (atomic_load_explicit(&computing, memory_order_relaxed))
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
    return arg != NULL;
}

/* Attentiveness: domain 1's fetch-adds while the home runs one computing task per CPU (its
 * main task waits in the barrier): the home's service must answer without anyone polling.
 * 200 us between operations, so the service is idle (not spinning) when each arrives. */
static int bench_attentive(struct dsm_ctx *c)
{
    struct dsm_row r;
    row_init(&r, "fetch_add_home_computing", "us",
             "remote fetch-add while every home task computes");
    r.goal_max = 60;
    r.goal_p99 = c->gm ? 200 : 250;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int ncomp = cpus < 1 ? 1 : cpus > BENCH_MAX_PAIRS ? BENCH_MAX_PAIRS : (int)cpus;
    cor_idp_t t[BENCH_MAX_PAIRS];
    int spawned = 0, err = COR_OK;
    if (c->rank == 0) {
        atomic_store(&computing, 1);
        for (; spawned < ncomp && err == COR_OK; spawned++)
            err = cor_task_spawn("bench.compute", compute_task, NULL, &t[spawned]);
        if (err != COR_OK) spawned--;
    }
    if (err == COR_OK) err = cor_dsm_barrier_wait(c->all);
    if (err == COR_OK && c->rank == 1) {
        long one = 1, old;
        for (long i = 0; i < c->n && err == COR_OK; i++) {
            double t0 = now_us();
            err = cor_dsm_fetch_add(c->ho, 2, COR_LONG, &one, &old);
            c->v[i] = now_us() - t0;
            usleep(200);
        }
    }
    if (err == COR_OK) err = cor_dsm_barrier_wait(c->all);
    atomic_store(&computing, 0);
    for (int i = 0; i < spawned; i++)
        cor_task_join(t[i], NULL);
    if (err != COR_OK) return dsm_fail("fetch-add while the home computes", err);
    if (c->rank == 1) row_stats(&r, c->v, c->n);
    return publish(c, 1, &r);
}

/* cor_dsm_put returns once the home applied the data: the put + quiet of OpenSHMEM. */
static int bench_put(struct dsm_ctx *c)
{
    unsigned char *buf = NULL;
    if (c->rank == 1) {
        size_t max = 64;
        for (int i = 0; i < c->b->nsizes; i++)
            max = c->b->sizes[i] > max ? c->b->sizes[i] : max;
        buf = malloc(max);
        if (!buf) return dsm_fail("put buffer", COR_ENOMEM);
        bench_fill(buf, max);
    }
    int err = COR_OK;
    for (int s = 0; s < c->b->nsizes && err == COR_OK; s += c->b->reps) {
        size_t size = c->b->sizes[s];
        long n = c->n; /* large puts: at most 1 GiB per size, but 100 operations if --count */
        if ((double)n * (double)size > (double)PUT_BYTES_PER_SIZE) {
            n = (long)(PUT_BYTES_PER_SIZE / (size ? size : 1));
            n = n < 100 ? (c->n < 100 ? c->n : 100) : n;
        }
        struct dsm_row r;
        char key[40];
        snprintf(key, sizeof key, "put_%zu", size);
        row_init(&r, key, "us", "put %zu B (returns when applied: put+quiet)", size);
        for (long i = -n / 10; c->rank == 1 && i < n && err == COR_OK; i++) {
            double t = now_us();
            err = cor_dsm_put(c->put, 0, size, COR_BYTE, buf);
            if (i >= 0) c->v[i] = now_us() - t;
        }
        if (err == COR_OK && c->rank == 1) row_stats(&r, c->v, n);
        if (err == COR_OK) err = publish(c, 1, &r);
    }
    free(buf);
    return err == COR_OK ? COR_OK : dsm_fail("cor_dsm_put", err);
}

static int bench_locks(struct dsm_ctx *c)
{
    TRY(bench_lock(c));
    TRY(bench_lock_turns(c));
    return bench_lock_contended(c);
}

/* The measures by group (--only): R and R_end always run. */
static const char *const dsm_groups[] = {"sections", "atomics", "adds",      "lock",
                                         "barrier",  "polling", "attentive", "put"};

/* Whether `name` is an item of the comma-separated list. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

int bench_dsm_only_ok(const char *list)
{
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        bool known = false;
        for (size_t g = 0; g < sizeof dsm_groups / sizeof *dsm_groups; g++)
            known |= strlen(dsm_groups[g]) == len && !strncmp(p, dsm_groups[g], len);
        if (!known) return 0;
        p = end ? end + 1 : p + len;
    }
    return *list != 0;
}

static bool want(const struct dsm_ctx *c, const char *group)
{
    return !c->b->only || in_list(c->b->only, group);
}

/* Read hit and miss, write invalidations, the 1 MiB miss. */
static int bench_sections(struct dsm_ctx *c)
{
    cor_dsm_region_t rg;
    TRY(cor_dsm_map(c->cached, &rg));
    int err = bench_read(c, rg);
    if (err == COR_OK) err = cor_dsm_barrier_wait(c->all);
    if (err == COR_OK) err = bench_write_home(c, rg);
    if (err == COR_OK && c->ndom >= 3) err = bench_write_third(c, rg);
    if (err == COR_OK) err = cor_dsm_barrier_wait(c->all);
    int e = cor_dsm_unmap(rg);
    if (err != COR_OK) return err;
    TRY(e);
    return bench_read_big(c);
}

static int run_all(struct dsm_ctx *c)
{
    TRY(setup(c));
    TRY(bench_R(c, 0));
    static int (*const run[])(struct dsm_ctx *) = {bench_sections,  bench_atomics, bench_adds,
                                                   bench_locks,     bench_barrier, bench_polling,
                                                   bench_attentive, bench_put};
    for (size_t g = 0; g < sizeof run / sizeof *run; g++) {
        if (!want(c, dsm_groups[g])) continue;
        TRY(run[g](c));
        TRY(cor_dsm_barrier_wait(c->all));
    }
    TRY(bench_R(c, 1));
    TRY(cor_dsm_barrier_wait(c->all));
    if (c->rank == 0) {
        TRY(cor_dsm_destroy(c->ho));
        TRY(cor_dsm_destroy(c->put));
        TRY(cor_dsm_destroy(c->cached));
        TRY(cor_dsm_destroy(c->big));
        TRY(cor_dsm_destroy(c->ctr));
    }
    return cor_dsm_barrier_destroy(c->all);
}

int bench_dsm(struct bench *b)
{
    struct dsm_ctx c = {.b = b, .rank = b->rank, .ndom = cor_domain_count(), .n = b->count};
    c.me = cor_idp_index(cor_task_self());
    c.gm = !strcmp(b->route, "gm");
    const char *shm = getenv("COR_DSM_SHM");
    int msgs = shm && !strcmp(shm, "0");
    snprintf(c.label, sizeof c.label, "%s%s", b->route, msgs ? "" : "+shm");
    c.v = malloc((size_t)c.n * sizeof *c.v);
    c.vR = malloc((size_t)c.n * sizeof *c.vR);
    if (!c.v || !c.vR) {
        free(c.v);
        free(c.vR);
        return dsm_fail("samples", COR_ENOMEM);
    }
    int err = cor_dsm_init();
    if (err != COR_OK) {
        free(c.v);
        free(c.vR);
        return dsm_fail("cor_dsm_init", err);
    }
    if (c.rank == 0 && !b->quiet) {
        printf("cor-bench dsm: route %s, %d domains; medians and p99 over --count %ld "
               "operations; /R = median over R of this run, or for rows with [R ...] over the R "
               "taken between their operations\n",
               b->route, c.ndom, c.n);
        printf("home-only objects of a home on this host: %s\n",
               msgs ? "requests over the route (COR_DSM_SHM=0)"
                    : "operated on in the memory the home shares (COR_DSM_SHM=0: requests)");
        printf("%-58s %8s %10s %10s %-6s %6s  %s\n", "what", "count", "median", "p99", "unit", "/R",
               "goal");
        fflush(stdout);
    }
    err = run_all(&c);
    free(c.v);
    free(c.vR);
    if (err != COR_OK) return err; /* the caller leaves without finalizing */
    return cor_dsm_finalize();
}
