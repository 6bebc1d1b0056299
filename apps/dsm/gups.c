/*
 * gups: a GUPS-style histogram on libcordsm. A table of SLOTS counters (COR_LONG) is split
 * into one home-only object per domain (domain d homes slots [SLOTS*d/D, SLOTS*(d+1)/D));
 * every task of every domain draws UPDATES random slots from a fixed-seed stream of its own
 * and adds 1 to each with non-fetching remote adds (cor_dsm_add, batched per home, then
 * cor_dsm_quiet). After a barrier each domain replays every stream of every domain and checks
 * that its slice holds exactly the expected counts. Domain 0 prints the aggregate rate.
 *
 *   cor-run -n 2 --route gm gups [-T SLOTS] [-u UPDATES] [-t TASKS] [-s SEED]
 *   gups --baseline [-d DOMAINS] [-T SLOTS] [-u UPDATES] [-t TASKS] [-s SEED]
 *
 * --baseline is the same program without DSM: one process, the table in plain memory, one
 * thread per stream (DOMAINS x TASKS streams, the same ones a DSM run of DOMAINS domains
 * draws), atomic increments when there are several threads. Exit status 0 only if every
 * count is exact.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cor/cor.h>
#include <cor/dsm.h>

#include "app.h"

#define PROG "gups"
#define MAX_TASKS 64
#define MAX_SLOTS ((uint64_t)1 << 30)
#define MAX_UPDATES ((uint64_t)1 << 36)

static uint64_t slots = 1 << 20, updates = 1 << 20, ntasks = 1, seed = 1, emulated = 1;
static int baseline, rank, ndom = 1;
static int drop_one;         /* --drop-one: domain 0's task 0 skips one add (the check must fail) */
static cor_idp_t *slice_obj; /* per domain: the object holding its slice (DSM mode) */
static cor_idp_t failed_obj; /* at domain 0: how many domains found wrong counts */
static uint64_t *slice_lo;   /* per domain: its first slot (DSM mode) */
static long *table;          /* the whole table (baseline mode) */
static cor_dsm_barrier_t bar;  /* over all domains, ntasks local tasks */
static double t_start, t_end;  /* set by task 0 of domain 0 (or thread 0 of the baseline) */
static pthread_barrier_t pbar; /* baseline: the threads start together */

/* Stream s's generator: SplitMix64 from a start that depends on (seed, s) only. */
typedef struct stream {
    uint64_t state;
} stream_t;

static stream_t stream_open(uint64_t s)
{
    stream_t st = {app_mix64(seed * APP_GOLDEN + s + 1)};
    return st;
}

static inline uint64_t stream_slot(stream_t *st)
{
    st->state += APP_GOLDEN;
    return (uint64_t)(((unsigned __int128)app_mix64(st->state) * slots) >> 64);
}

static uint64_t slice_base(uint64_t d)
{
    return slots * d / (uint64_t)ndom;
}

/* The domain d with slice_base(d) <= slot < slice_base(d+1). */
static inline unsigned home_of(uint64_t slot)
{
    return (unsigned)(((slot + 1) * (uint64_t)ndom - 1) / slots);
}

static int dsm_updater(void *arg)
{
    unsigned k = (unsigned)(uintptr_t)arg;
    stream_t st = stream_open((uint64_t)rank * ntasks + k);
    const long one = 1;
    const uint64_t *base = slice_lo;

    int err = cor_dsm_barrier_wait(bar);
    if (err) app_die(PROG ": domain %d: cor_dsm_barrier_wait: %s", rank, cor_dsm_strerror(err));
    if (rank == 0 && k == 0) t_start = app_now();
    for (uint64_t u = 0; u < updates; u++) {
        uint64_t slot = stream_slot(&st);
        unsigned h = home_of(slot);
        if (drop_one && rank == 0 && k == 0 && u == updates / 2) continue;
        err = cor_dsm_add(slice_obj[h], slot - base[h], COR_LONG, &one);
        if (err)
            app_die(PROG ": domain %d task %u: cor_dsm_add: %s", rank, k, cor_dsm_strerror(err));
    }
    err = cor_dsm_quiet(); /* every add of this task is applied at its home */
    if (err) app_die(PROG ": domain %d task %u: cor_dsm_quiet: %s", rank, k, cor_dsm_strerror(err));
    err = cor_dsm_barrier_wait(bar); /* ... and so are everyone's */
    if (err) app_die(PROG ": domain %d: cor_dsm_barrier_wait: %s", rank, cor_dsm_strerror(err));
    if (rank == 0 && k == 0) t_end = app_now();
    return 0;
}

static void *local_updater(void *arg)
{
    uint64_t s = (uint64_t)(uintptr_t)arg;
    stream_t st = stream_open(s);
    int shared = emulated * ntasks > 1;
    pthread_barrier_wait(&pbar);
    if (s == 0) t_start = app_now();
    if (shared) {
        for (uint64_t u = 0; u < updates; u++)
            __atomic_fetch_add(&table[stream_slot(&st)], 1, __ATOMIC_RELAXED);
    } else {
        for (uint64_t u = 0; u < updates; u++)
            table[stream_slot(&st)]++;
    }
    return NULL;
}

/* Replays every stream of every domain and compares slice d (got[0..n)) with what it
 * drew. Returns 0 if exact, else prints the first difference and returns -1. */
static int check_slice(unsigned d, const long *got, long *sum)
{
    uint64_t lo = slice_base(d), n = slice_base(d + 1) - lo;
    long *want = calloc(n, sizeof *want);
    if (!want) app_die(PROG ": out of memory for the expected counts (%" PRIu64 " slots)", n);
    for (uint64_t s = 0; s < (uint64_t)ndom * ntasks; s++) {
        stream_t st = stream_open(s);
        for (uint64_t u = 0; u < updates; u++) {
            uint64_t slot = stream_slot(&st);
            if (slot - lo < n) want[slot - lo]++;
        }
    }
    int rc = 0;
    *sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        *sum += got[i];
        if (got[i] != want[i] && rc == 0) {
            fprintf(stderr, PROG ": slot %" PRIu64 " holds %ld, expected %ld\n", lo + i, got[i],
                    want[i]);
            rc = -1;
        }
    }
    free(want);
    return rc;
}

static void report(double secs)
{
    double total = (double)ndom * (double)ntasks * (double)updates;
    printf(PROG ": %s, %d domain%s x %" PRIu64 " task%s, %" PRIu64 " slots, %.0f updates in "
                "%.4f s: %.3f M updates/s (counts exact in every domain)\n",
           baseline ? "baseline (plain memory)" : "dsm", ndom, ndom > 1 ? "s" : "", ntasks,
           ntasks > 1 ? "s" : "", slots, total, secs, total / secs / 1e6);
}

static int run_baseline(void)
{
    ndom = (int)emulated;
    table = calloc(slots, sizeof *table);
    uint64_t nthreads = emulated * ntasks;
    pthread_t *th = calloc(nthreads, sizeof *th);
    if (!table || !th) app_die(PROG ": out of memory for %" PRIu64 " slots", slots);
    if (pthread_barrier_init(&pbar, NULL, (unsigned)nthreads))
        app_die(PROG ": pthread_barrier_init failed");
    for (uint64_t s = 0; s < nthreads; s++)
        if (pthread_create(&th[s], NULL, local_updater, (void *)(uintptr_t)s))
            app_die(PROG ": pthread_create failed");
    for (uint64_t s = 0; s < nthreads; s++)
        pthread_join(th[s], NULL);
    t_end = app_now();
    int bad = 0;
    long sum, all = 0;
    for (unsigned d = 0; d < emulated; d++) {
        if (check_slice(d, table + slice_base(d), &sum)) bad = 1;
        all += sum;
    }
    if (bad || all != (long)(nthreads * updates)) {
        printf(PROG ": baseline: FAIL: counts differ from the streams (sum %ld)\n", all);
        return 1;
    }
    report(t_end - t_start);
    pthread_barrier_destroy(&pbar);
    free(th);
    free(table);
    return 0;
}

static void dsm_check(int err, const char *what)
{
    if (err) app_die(PROG ": domain %d: %s: %s", rank, what, cor_dsm_strerror(err));
}

static int run_dsm(int *argc, char ***argv)
{
    dsm_check(cor_init(argc, argv), "cor_init");
    rank = cor_domain_rank();
    ndom = cor_domain_count();
    if (slots < (uint64_t)ndom)
        app_die(PROG ": -T %" PRIu64 " is fewer slots than the %d domains", slots, ndom);
    dsm_check(cor_dsm_init(), "cor_dsm_init");

    char name[COR_NAME_MAX];
    uint64_t lo = slice_base((uint64_t)rank), n = slice_base((uint64_t)rank + 1) - lo;
    slice_obj = calloc((size_t)ndom, sizeof *slice_obj);
    slice_lo = calloc((size_t)ndom, sizeof *slice_lo);
    if (!slice_obj || !slice_lo) app_die(PROG ": out of memory");
    for (int d = 0; d < ndom; d++)
        slice_lo[d] = slice_base((uint64_t)d);
    snprintf(name, sizeof name, "gups.slice.%d", rank);
    dsm_check(cor_dsm_create(name, COR_LONG, n, COR_DSM_HOME_ONLY, &slice_obj[rank]),
              "cor_dsm_create");
    if (rank == 0)
        dsm_check(cor_dsm_create("gups.failed", COR_LONG, 1, COR_DSM_HOME_ONLY, &failed_obj),
                  "cor_dsm_create");
    dsm_check(cor_barrier(), "cor_barrier"); /* every slice exists */
    dsm_check(cor_dsm_lookup("gups.failed", &failed_obj), "cor_dsm_lookup");
    for (int d = 0; d < ndom; d++) {
        snprintf(name, sizeof name, "gups.slice.%d", d);
        dsm_check(cor_dsm_lookup(name, &slice_obj[d]), "cor_dsm_lookup");
    }
    dsm_check(cor_dsm_barrier_create("gups", COR_IDP_NULL, (int)ntasks, &bar),
              "cor_dsm_barrier_create");

    cor_idp_t task[MAX_TASKS];
    for (uint64_t k = 0; k < ntasks; k++)
        dsm_check(cor_task_spawn("gups", dsm_updater, (void *)(uintptr_t)k, &task[k]),
                  "cor_task_spawn");
    for (uint64_t k = 0; k < ntasks; k++) {
        int status = 0;
        dsm_check(cor_task_join(task[k], &status), "cor_task_join");
        dsm_check(status, "updater task");
    }

    /* Every add of every domain is applied (quiet, then the barrier): check our slice. */
    long *got = malloc(n * sizeof *got), sum;
    if (!got) app_die(PROG ": out of memory");
    dsm_check(cor_dsm_get(slice_obj[rank], 0, n, COR_LONG, got), "cor_dsm_get");
    int bad = check_slice((unsigned)rank, got, &sum);
    free(got);
    printf("domain %d: %s: slots [%" PRIu64 ", %" PRIu64 ") hold %ld updates%s\n", rank,
           bad ? "FAIL" : "PASS", lo, lo + n, sum, bad ? ", not the counts the streams drew" : "");
    /* Domain 0 counts the domains whose slice failed, so its rate line speaks for all. */
    const long one = 1;
    if (bad) dsm_check(cor_dsm_fetch_add(failed_obj, 0, COR_LONG, &one, NULL), "cor_dsm_fetch_add");
    dsm_check(cor_barrier(), "cor_barrier");
    long failed = 0;
    if (rank == 0) {
        dsm_check(cor_dsm_get(failed_obj, 0, 1, COR_LONG, &failed), "cor_dsm_get");
        if (failed)
            printf(PROG ": FAIL: the counts of %ld of %d domains differ\n", failed, ndom);
        else
            report(t_end - t_start);
    }
    fflush(stdout);
    if (bad || failed) app_die(PROG ": domain %d: counts differ", rank);
    dsm_check(cor_dsm_barrier_destroy(bar), "cor_dsm_barrier_destroy");
    dsm_check(cor_dsm_finalize(), "cor_dsm_finalize");
    dsm_check(cor_finalize(), "cor_finalize");
    free(slice_obj);
    free(slice_lo);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: cor-run -n D [--route udp|gm] " PROG " [-T SLOTS] [-u UPDATES] [-t TASKS] "
            "[-s SEED]\n"
            "       " PROG " --baseline [-d DOMAINS] [-T SLOTS] [-u UPDATES] [-t TASKS] [-s SEED]\n"
            "  -T  table slots (default 1M; K, M, G suffixes)\n"
            "  -u  updates per task (default 1M)\n"
            "  -t  tasks per domain (default 1, at most %d)\n"
            "  -s  seed of the streams (default 1)\n"
            "  -d  baseline: draw the streams of this many domains (default 1)\n"
            "  --drop-one  test the check: one add of domain 0 is skipped (DSM mode)\n",
            MAX_TASKS);
}

int main(int argc, char **argv)
{
    const struct app_opt opts[] = {
        {"--baseline", &baseline, NULL, 0, 0},       {"--drop-one", &drop_one, NULL, 0, 0},
        {"-T", NULL, &slots, 1, MAX_SLOTS},          {"-u", NULL, &updates, 1, MAX_UPDATES},
        {"-t", NULL, &ntasks, 1, MAX_TASKS},         {"-s", NULL, &seed, 0, UINT64_MAX},
        {"-d", NULL, &emulated, 1, COR_MAX_DOMAINS}, {NULL, NULL, NULL, 0, 0},
    };
    int rc = app_parse_args(PROG, argc, argv, opts, usage);
    if (rc >= 0) return rc;
    if (baseline) {
        if (slots < emulated) {
            fprintf(stderr, PROG ": -T %" PRIu64 " is fewer slots than -d %" PRIu64 "\n", slots,
                    emulated);
            return 2;
        }
        return run_baseline();
    }
    return run_dsm(&argc, &argv);
}
