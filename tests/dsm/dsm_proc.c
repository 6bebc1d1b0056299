/*
 * dsm_proc: libcordsm across real domains (started by cor-run). Modes below; every mode
 * takes -H HOSTS: the domains run round robin on that many hosts of their own host names
 * (tests/hosts: rank r on host r mod HOSTS), so only domains r, r + HOSTS, ... may share
 * memory (mix and counts check where their operations ran).
 *
 *   dsm_proc mix DIR [-t TASKS] [-i ITERS]
 *     Every domain d homes "ctr.d" (8 longs), "fifo.d" (a FIFO of longs) and "blob.d"
 *     (16 checksummed 4 KiB blocks). Each task, ITERS times, does on every domain's objects:
 *     fetch-add, non-fetching add, a compare-and-swap increment loop, a non-blocking
 *     fetch-add, an append, a lock-protected get+put increment (lock "L"), a checksummed
 *     block put and a block get whose checksum must hold (no torn read). Then every home
 *     checks exact final values: each counter = domains x tasks x ITERS, the FIFO holds
 *     every value once and in each task's order.
 *   dsm_proc cache DIR [-t TASKS] [-i ITERS] [-b CACHE_BYTES] [-B LONGS]
 *     First, alone in each domain, one copy's sections and the statistics each moves, exactly
 *     (run_cache_steps: kept within the budget, evicted at every section's end with 0).
 *     Every domain d homes cached objects "cblk.d" (512 longs: element 0 is the sum of the
 *     others, which all move together) and "cctr.d" (counters). Each task, ITERS times, on
 *     every domain's objects: a write section incrementing the block (checking it first), a
 *     read section (blocking or prefetched) that must see it whole, a counter increment in a
 *     write section, a remote fetch-add on the same cached counter (recalls copies), now and
 *     then a get of the whole block (not torn) and a flush. The homes check exact finals.
 *     -b sets the cache budget (0: every idle copy is evicted at once).
 *     Then non-fetching adds to a cached object homed at domain 0 ("cadd") that every domain
 *     holds a read copy of: each task adds ITERS times to the common counter and to a slot of
 *     its own, whose value it reads back before its quiet (its adds come first); after quiet
 *     and a barrier every domain reads the exact totals in a read section, domain 0 counts
 *     recalls; after its destruction an add reports COR_ENOTFOUND at quiet.
 *   dsm_proc lockfair DIR [-t TASKS] [-i TOTAL]
 *     All tasks of all domains take lock "F" until TOTAL acquisitions were made (counted in
 *     an object under the lock: the sum must be TOTAL exactly); prints max/min acquisitions
 *     per task, which must stay within -f RATIO (FIFO grants).
 *   dsm_proc barrier DIR [-t TASKS] [-i EPISODES]
 *     Barrier episodes over all domains (each task fetch-adds a counter at domain 0 before,
 *     the counter must show every arrival after), then over the logical domain of the even
 *     domains only.
 *   dsm_proc kill DIR [-t TASKS]
 *     The last domain (the victim) homes an object and a lock, holds that lock and a lock
 *     homed at domain 0; the survivors operate on its object, wait for both locks and for an
 *     all-domain barrier. The script kills the victim (SIGKILL) after DIR/ready.RANK marks:
 *     every survivor call must end with COR_EPEERDEAD (the lock homed at domain 0 with
 *     COR_DSM_EOWNERDEAD: granted), the survivors still work together and exit 42.
 *     Cached objects too: the victim dies inside a write section on "kw" (homed at domain 0:
 *     its dirty copy is lost, survivors' sections on it get COR_EPEERDEAD), inside a read
 *     section on "kr" (a survivor's write waiting for it is granted after the death) and
 *     inside a write section on "kh", homed at the victim (survivors' reads fail).
 *   dsm_proc lockkeep DIR [-i ROUNDS]   (COR_DSM_SHM=0: locks over messages)
 *     Kept locks (a lock granted while nobody waited, to the domain that had it last, stays
 *     with that domain): domain 1 takes lock "K" (homed at domain 0) ROUNDS times with three
 *     requests in all (lock_retakes, remote_ops); a recall while held (domain 0 asks while
 *     domain 1 holds it: granted only after domain 1's release, which it sees in the
 *     object); two tasks of domain 1 (the second asks while the first holds the kept lock: it
 *     waits for the first's unlock); then every domain in turn takes it twice, ROUNDS turns
 *     (the second grant is kept, the next domain's first recalls it): a holder mark swapped
 *     in and out under the lock and an exact counter.
 *   dsm_proc counts DIR
 *     cor_dsm_stats_t tells where operations ran: each domain adds to the next domain's
 *     home-only object and to its own; the counters must say shm_ops (one host, COR_DSM_SHM=1)
 *     or remote_ops (COR_DSM_SHM=0, or -H: the next domain runs on another host) for the
 *     first, never both, and local_ops for the second.
 *   dsm_proc reuse DIR
 *     A destroyed object's index reused (cached, then home-only): domain 0's "ra" (4 longs),
 *     read by every domain, is destroyed, and domain 0 creates objects until one gets its idp
 *     back (~65535 creations; the others watch its count of them, "rp", and fail if it stops
 *     for 30 s); every domain must see that one, "rb" (64 longs), with its own
 *     size and data, and its writes must reach the home. Then 300 cached objects made, read
 *     everywhere and destroyed, and 300 more destroyed while the other domains' tasks map,
 *     read and unmap them under a cache budget of 0 (only COR_ENOTFOUND may end a step):
 *     afterwards no domain keeps a copy (cor_dsm_stats_t.copies).
 *
 * Every domain prints "domain R: PASS ..." or "domain R: FAIL ..."; exit status 0 on pass
 * (kill: 42 for survivors). A watchdog ends a domain that makes no progress for 60 s.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cor/cor.h"
#include "cor/dsm.h"
#include "../proc/proc_util.h"

#define BLOCKS 16
#define BLOCK 4096
#define PASS_KILLED 42
#define STALL_S 60

static int rank, ndom, ntasks = 4;
static long iters = 200;
static double max_ratio = 1.5;
static const char *dir;
static _Atomic long ticks;
static atomic_int finished;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int e_ = (call);                                                                           \
        atomic_fetch_add(&ticks, 1);                                                               \
        if (e_ != COR_OK) pt_fail("%s: %s (line %d)", #call, cor_dsm_strerror(e_), __LINE__);      \
    } while (0)

static void write_mark(const char *name)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    rename(tmp, path);
}

static int spawn_all(int (*fn)(void *))
{
    cor_idp_t t[256];
    for (int i = 0; i < ntasks; i++)
        if (cor_task_spawn("dsm", fn, (void *)(intptr_t)i, &t[i]) != COR_OK) {
            pt_fail("spawn");
            return 1;
        }
    for (int i = 0; i < ntasks; i++) {
        int st = 0;
        if (cor_task_join(t[i], &st) != COR_OK || st != 0) pt_fail("task %d ended with %d", i, st);
    }
    return 0;
}

static cor_idp_t lookup(const char *name)
{
    cor_idp_t o = COR_IDP_NULL;
    CHECK(cor_dsm_lookup(name, &o));
    return o;
}

static cor_idp_t lookup_n(const char *prefix, int d)
{
    char name[COR_NAME_MAX];
    snprintf(name, sizeof name, "%s.%d", prefix, d);
    return lookup(name);
}

/* ---- mix ---- */

static cor_idp_t *ctr, *fifo, *blob, lockL;
static cor_dsm_barrier_t all_bar;

/* ---- counts ---- */

/* -H K: the domains run on K hosts of their own host names (tests/hosts), rank r on host
 * r mod K; 1 (the default): all on this one. Says which operations may run in shared memory. */
static int nhosts = 1;

static int same_host(int a, int b)
{
    return a % nhosts == b % nhosts;
}

/* K adds to the next domain's home-only object, then K to our own: with COR_DSM_SHM=1 (one
 * host) the first K are shm_ops and no remote_ops (they were counted as both), with
 * COR_DSM_SHM=0, or with the next domain on another host (-H) even if that host shares our
 * /dev/shm (network namespaces), K + 1 remote_ops (the adds and the quiet) and no shm_ops;
 * our own are local_ops only. Then every home checks its values. */
static void run_counts(void)
{
    enum { K = 100 };
    char name[COR_NAME_MAX];
    snprintf(name, sizeof name, "cnt.%d", rank);
    cor_idp_t own = COR_IDP_NULL;
    CHECK(cor_dsm_create(name, COR_LONG, 2, COR_DSM_HOME_ONLY, &own));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    CHECK(cor_dsm_barrier_wait(all_bar)); /* every object exists */
    cor_idp_t other = lookup_n("cnt", (rank + 1) % ndom);
    const char *shm = getenv("COR_DSM_SHM");
    int shm_on = !(shm && !strcmp(shm, "0")) && same_host(rank, (rank + 1) % ndom);
    cor_dsm_stats_t a, b, c;
    long one = 1;
    CHECK(cor_dsm_stats_get(&a));
    for (int i = 0; i < K; i++)
        CHECK(cor_dsm_add(other, 0, COR_LONG, &one));
    CHECK(cor_dsm_quiet());
    CHECK(cor_dsm_stats_get(&b));
    for (int i = 0; i < K; i++)
        CHECK(cor_dsm_add(own, 1, COR_LONG, &one));
    CHECK(cor_dsm_quiet());
    CHECK(cor_dsm_stats_get(&c));
    unsigned long long rem = b.remote_ops - a.remote_ops, sh = b.shm_ops - a.shm_ops;
    unsigned long long want_rem = shm_on ? 0 : K + 1, want_sh = shm_on ? K : 0;
    if (rem != want_rem || sh != want_sh)
        pt_fail("%d adds to domain %d: remote_ops +%llu, shm_ops +%llu; expected +%llu, +%llu", K,
                (rank + 1) % ndom, rem, sh, want_rem, want_sh);
    unsigned long long loc = c.local_ops - b.local_ops;
    if (loc != K || c.remote_ops != b.remote_ops || c.shm_ops != b.shm_ops)
        pt_fail("%d adds to our own object: local_ops +%llu, remote_ops +%llu, shm_ops +%llu", K,
                loc, (unsigned long long)(c.remote_ops - b.remote_ops),
                (unsigned long long)(c.shm_ops - b.shm_ops));
    CHECK(cor_dsm_barrier_wait(all_bar)); /* every add is in */
    long v[2] = {0, 0};
    CHECK(cor_dsm_get(own, 0, 2, COR_LONG, v));
    if (v[0] != K || v[1] != K)
        pt_fail("cnt.%d = {%ld, %ld}, expected {%d, %d}", rank, v[0], v[1], K, K);
    printf("domain %d: %s counts: %d adds to domain %d: remote_ops +%llu, shm_ops +%llu; %d to "
           "our own: local_ops +%llu\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", K, (rank + 1) % ndom, rem, sh, K,
           loc);
    CHECK(cor_dsm_barrier_wait(all_bar)); /* nobody destroys while others read */
    CHECK(cor_dsm_destroy(own));
}

static uint64_t block_sum(const unsigned char *b)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 8; i < BLOCK; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void fill_block(unsigned char *b, uint64_t seed)
{
    for (int i = 8; i < BLOCK; i++)
        b[i] = (unsigned char)((seed * 31 + (uint64_t)i) >> 3);
    uint64_t s = block_sum(b);
    memcpy(b, &s, 8);
}

static int mix_task(void *arg)
{
    int k = (int)(intptr_t)arg;
    long me = (long)rank * 1000 + k; /* this task's tag in FIFO values */
    unsigned char *blk = malloc(BLOCK), *in = malloc(BLOCK);
    if (!blk || !in) return 1;
    long one = 1, old;
    for (long i = 0; i < iters; i++) {
        for (int j = 0; j < ndom; j++) {
            int d = (rank + k + j) % ndom; /* tasks start at different homes */
            CHECK(cor_dsm_fetch_add(ctr[d], 0, COR_LONG, &one, &old));
            CHECK(cor_dsm_add(ctr[d], 1, COR_LONG, &one));
            long cur = 0, want;
            CHECK(cor_dsm_get(ctr[d], 2, 1, COR_LONG, &cur));
            for (int n = 0; n < 100000; n++) {
                want = cur + 1;
                CHECK(cor_dsm_cas(ctr[d], 2, COR_LONG, &cur, &want, &old));
                if (old == cur) break;
                cur = old;
            }
            cor_dsm_req_t r;
            CHECK(cor_dsm_fetch_addI(ctr[d], 3, COR_LONG, &one, &old, &r));
            long v = me * 1000000 + i;
            uint64_t slot;
            CHECK(cor_dsm_append(fifo[d], COR_LONG, &v, 1, &slot));
            CHECK(cor_dsm_wait(&r));
            CHECK(cor_dsm_lock(lockL));
            long c = 0;
            CHECK(cor_dsm_get(ctr[d], 4, 1, COR_LONG, &c));
            c++;
            CHECK(cor_dsm_put(ctr[d], 4, 1, COR_LONG, &c));
            CHECK(cor_dsm_unlock(lockL));
            int b = (int)((i + k) % BLOCKS);
            fill_block(blk, (uint64_t)me * 7919 + (uint64_t)i);
            CHECK(cor_dsm_put(blob[d], (size_t)b * BLOCK, BLOCK, COR_BYTE, blk));
            CHECK(cor_dsm_get(blob[d], (size_t)((b + 5) % BLOCKS) * BLOCK, BLOCK, COR_BYTE, in));
            uint64_t s;
            memcpy(&s, in, 8);
            if (s != 0 && s != block_sum(in)) pt_fail("torn read in blob.%d", d);
        }
    }
    CHECK(cor_dsm_quiet());
    free(blk);
    free(in);
    return 0;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static void run_mix(void)
{
    ctr = calloc((size_t)ndom, sizeof *ctr);
    fifo = calloc((size_t)ndom, sizeof *fifo);
    blob = calloc((size_t)ndom, sizeof *blob);
    long per = (long)ndom * ntasks * iters; /* operations of each kind on each home */
    char name[COR_NAME_MAX];
    snprintf(name, sizeof name, "ctr.%d", rank);
    CHECK(cor_dsm_create(name, COR_LONG, 8, COR_DSM_HOME_ONLY, &ctr[rank]));
    snprintf(name, sizeof name, "fifo.%d", rank);
    CHECK(cor_dsm_create(name, COR_LONG, (size_t)per, COR_DSM_HOME_ONLY, &fifo[rank]));
    snprintf(name, sizeof name, "blob.%d", rank);
    CHECK(cor_dsm_create(name, COR_BYTE, BLOCKS * BLOCK, COR_DSM_HOME_ONLY, &blob[rank]));
    CHECK(cor_dsm_lock_open("L", &lockL));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    CHECK(cor_dsm_barrier_wait(all_bar)); /* every object exists */
    for (int d = 0; d < ndom; d++) {
        ctr[d] = lookup_n("ctr", d);
        fifo[d] = lookup_n("fifo", d);
        blob[d] = lookup_n("blob", d);
        cor_dsm_info_t info;
        CHECK(cor_dsm_query(fifo[d], &info));
        if (info.home != d || info.type != COR_LONG || info.count != (size_t)per)
            pt_fail("query fifo.%d: home %d type %d count %zu", d, info.home, info.type,
                    info.count);
    }
    double t0 = now();
    spawn_all(mix_task);
    double el = now() - t0;
    CHECK(cor_dsm_barrier_wait(all_bar)); /* every task of every domain is done */
    long c[8];
    CHECK(cor_dsm_get(ctr[rank], 0, 8, COR_LONG, c));
    for (int k = 0; k < 5; k++)
        if (c[k] != per) pt_fail("ctr.%d[%d] = %ld, expected %ld", rank, k, c[k], per);
    long *f = malloc((size_t)per * sizeof *f);
    CHECK(cor_dsm_get(fifo[rank], 0, (size_t)per, COR_LONG, f));
    /* each task's values in its own order, each once */
    long *last = malloc((size_t)ndom * 1000 * sizeof *last);
    for (long i = 0; i < (long)ndom * 1000; i++)
        last[i] = -1;
    for (long i = 0; i < per; i++) {
        long who = f[i] / 1000000, seq = f[i] % 1000000;
        if (who < 0 || who >= (long)ndom * 1000 || seq != last[who] + 1) {
            pt_fail("fifo.%d[%ld] = %ld out of order", rank, i, f[i]);
            break;
        }
        last[who] = seq;
    }
    qsort(f, (size_t)per, sizeof *f, cmp_long);
    for (long i = 1; i < per; i++)
        if (f[i] == f[i - 1]) pt_fail("fifo.%d holds %ld twice", rank, f[i]);
    free(f);
    free(last);
    cor_dsm_stats_t s;
    CHECK(cor_dsm_stats_get(&s));
    /* COR_DSM_SHM=0: every operation on another home is a request; else those on a home of
     * this host that shares its objects run here (every home does in these runs but the odd
     * domains of the run over both routes; with -H only those of our host) */
    const char *shm = getenv("COR_DSM_SHM");
    int shm_off = shm && !strcmp(shm, "0"), mates = 0;
    for (int r = 0; r < ndom; r++)
        mates += r != rank && same_host(r, rank);
    if (shm_off ? s.shm_ops != 0 : mates > 0 && s.shm_ops == 0)
        pt_fail("%llu operations in shared memory with COR_DSM_SHM=%s",
                (unsigned long long)s.shm_ops, shm ? shm : "(unset)");
    printf("domain %d: %s mix: %ld operations x 8 kinds on each of %d homes from %d tasks "
           "per domain in %.2f s; served %llu, dropped %llu, in shared memory %llu\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", per, ndom, ntasks, el,
           (unsigned long long)s.requests_served, (unsigned long long)s.requests_dropped,
           (unsigned long long)s.shm_ops);
    if (s.requests_dropped)
        pt_fail("%llu requests dropped", (unsigned long long)s.requests_dropped);
    CHECK(cor_dsm_barrier_wait(all_bar)); /* nobody destroys while others read */
    CHECK(cor_dsm_destroy(ctr[rank]));
    CHECK(cor_dsm_destroy(fifo[rank]));
    CHECK(cor_dsm_destroy(blob[rank]));
}

/* ---- cache ---- */

/* longs per cached block (-B): [0] the sum of the others, which all move together; from
 * 16 KiB on the home sends a grant's data straight into the copy (grants_direct), below it
 * to the receive of the task that asked (grants_task) */
static int CB = 512;
static int cb_given; /* -B: kill's cached objects have CB longs too (else 4) */
static cor_idp_t *cblk, *cctr;
static long cache_bytes = -1;

static int cblk_check(const long *v)
{
    long sum = 0;
    for (int k = 1; k < CB; k++) {
        if (v[k] != v[1]) return 0;
        sum += v[k];
    }
    return sum == v[0];
}

static cor_idp_t cadd; /* cached, homed at domain 0: [0] common, [1 + rank*ntasks + k] a task's */

static int cadd_task(void *arg)
{
    int k = (int)(intptr_t)arg;
    size_t mine = 1 + (size_t)rank * ntasks + k;
    long one = 1, got = -1;
    for (long i = 0; i < iters; i++) {
        CHECK(cor_dsm_add(cadd, 0, COR_LONG, &one));
        CHECK(cor_dsm_add(cadd, mine, COR_LONG, &one));
    }
    /* no quiet yet: the get goes after the task's adds, in the order issued */
    CHECK(cor_dsm_get(cadd, mine, 1, COR_LONG, &got));
    if (got != iters)
        pt_fail("task %d: own slot of cadd = %ld before quiet, expected %ld", k, got, iters);
    CHECK(cor_dsm_quiet());
    return 0;
}

static void run_cadd(void)
{
    size_t n = 1 + (size_t)ndom * ntasks;
    cadd = lookup("cadd");
    cor_dsm_region_t rg;
    long *v = NULL;
    CHECK(cor_dsm_map(cadd, &rg));
    CHECK(cor_dsm_region_data(rg, (void **)&v, NULL));
    CHECK(cor_dsm_start_read(rg)); /* every domain holds a read copy now */
    CHECK(cor_dsm_end_read(rg));
    cor_dsm_stats_t s0, s1;
    CHECK(cor_dsm_stats_get(&s0));
    CHECK(cor_dsm_barrier_wait(all_bar));
    spawn_all(cadd_task);
    CHECK(cor_dsm_barrier_wait(all_bar));
    long total = (long)ndom * ntasks * iters;
    CHECK(cor_dsm_start_read(rg));
    if (v[0] != total)
        pt_fail("cadd[0] = %ld in a read section after quiet, expected %ld", v[0], total);
    for (size_t i = 1; i < n; i++)
        if (v[i] != iters) pt_fail("cadd[%zu] = %ld, expected %ld", i, v[i], iters);
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_stats_get(&s1));
    if (rank == 0 && cache_bytes != 0 && ndom > 1 && s1.recalls <= s0.recalls)
        pt_fail("adds to cadd recalled no copy (recalls %llu -> %llu)",
                (unsigned long long)s0.recalls, (unsigned long long)s1.recalls);
    printf("domain %d: cadd %s: %ld adds from %d tasks per domain to a cached object read "
           "everywhere, exact; recalls here %llu -> %llu\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", total, ntasks,
           (unsigned long long)s0.recalls, (unsigned long long)s1.recalls);
    CHECK(cor_dsm_unmap(rg));
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) CHECK(cor_dsm_destroy(cadd));
    CHECK(cor_dsm_barrier_wait(all_bar));
    long one = 1;
    CHECK(cor_dsm_add(cadd, 0, COR_LONG, &one));
    int err = cor_dsm_quiet();
    if (err != COR_ENOTFOUND)
        pt_fail("an add to destroyed cadd: quiet %s, expected COR_ENOTFOUND",
                cor_dsm_strerror(err));
}

static int cache_task(void *arg)
{
    int k = (int)(intptr_t)arg;
    cor_dsm_region_t *rb = calloc((size_t)ndom, sizeof *rb), *rc = calloc((size_t)ndom, sizeof *rc);
    long *in = malloc(CB * sizeof *in);
    if (!rb || !rc || !in) return 1;
    for (int d = 0; d < ndom; d++) {
        CHECK(cor_dsm_map(cblk[d], &rb[d]));
        CHECK(cor_dsm_map(cctr[d], &rc[d]));
    }
    long one = 1, old;
    for (long i = 0; i < iters; i++) {
        for (int j = 0; j < ndom; j++) {
            int d = (rank + k + j) % ndom;
            long *v = NULL, *c = NULL;
            CHECK(cor_dsm_region_data(rb[d], (void **)&v, NULL));
            CHECK(cor_dsm_region_data(rc[d], (void **)&c, NULL));
            /* a write section: every element moves, the sum follows */
            CHECK(cor_dsm_start_write(rb[d]));
            if (!cblk_check(v)) pt_fail("torn block cblk.%d at write start", d);
            for (int e = 1; e < CB; e++)
                v[e]++;
            v[0] += CB - 1;
            CHECK(cor_dsm_end_write(rb[d]));
            /* a read section, blocking or prefetched */
            if ((i + k) % 2) {
                CHECK(cor_dsm_start_read(rb[d]));
            } else {
                cor_dsm_req_t r;
                CHECK(cor_dsm_start_readI(rb[d], &r));
                CHECK(cor_dsm_wait(&r));
            }
            if (!cblk_check(v)) pt_fail("torn read of cblk.%d", d);
            CHECK(cor_dsm_end_read(rb[d]));
            /* a counter under a write section, another by remote fetch-add (recalls) */
            CHECK(cor_dsm_start_write(rc[d]));
            c[0]++;
            CHECK(cor_dsm_end_write(rc[d]));
            CHECK(cor_dsm_fetch_add(cctr[d], 1, COR_LONG, &one, &old));
            /* a get of the whole block: recalls the write copy, must not be torn */
            if ((i + k) % 4 == 0) {
                CHECK(cor_dsm_get(cblk[d], 0, CB, COR_LONG, in));
                if (!cblk_check(in)) pt_fail("torn get of cblk.%d", d);
            }
            if ((i + k) % 5 == 0) CHECK(cor_dsm_flush(rb[d]));
        }
    }
    for (int d = 0; d < ndom; d++) {
        CHECK(cor_dsm_unmap(rb[d]));
        CHECK(cor_dsm_unmap(rc[d]));
    }
    free(rb);
    free(rc);
    free(in);
    return 0;
}

/* The statistics a step of run_cache_steps moves, and how far. */
struct moves {
    long hits, misses, task, direct, evictions;
};

static void expect_moves(const char *step, const cor_dsm_stats_t *a, const cor_dsm_stats_t *b,
                         struct moves want, size_t cached)
{
    struct moves got = {
        (long)(b->section_hits - a->section_hits), (long)(b->section_misses - a->section_misses),
        (long)(b->grants_task - a->grants_task), (long)(b->grants_direct - a->grants_direct),
        (long)(b->evictions - a->evictions)};
    if (got.hits != want.hits || got.misses != want.misses || got.task != want.task ||
        got.direct != want.direct || got.evictions != want.evictions)
        pt_fail("cache steps, %s: hits +%ld, misses +%ld, grants to the task +%ld, straight into "
                "the copy +%ld, evictions +%ld; expected +%ld, +%ld, +%ld, +%ld, +%ld",
                step, got.hits, got.misses, got.task, got.direct, got.evictions, want.hits,
                want.misses, want.task, want.direct, want.evictions);
    if (b->cached_bytes != cached)
        pt_fail("cache steps, %s: %llu bytes of valid copies, expected %zu", step,
                (unsigned long long)b->cached_bytes, cached);
}

/* What the cache keeps, and how a grant comes, counted exactly (the workload's counts depend on
 * how its tasks interleave: under TSan domain 1 once evicted nothing in a whole run with a
 * budget of 0). Before the workload, alone in its domain, each domain reads the copy of "ev.d"
 * (homed at the next domain d, CB longs), reads it again, writes it, reads it and reads it
 * once more through a prefetch that only cor_dsm_test completes. Within the budget the copy
 * stays after every section: one miss, then hits, and the write upgrades the read copy (an
 * empty grant to the task). With a budget of 0 every section's end evicts it, so every start
 * misses, and the read after the write gets its data back from the home (the eviction took it
 * there). A grant with data comes to the asking task under 16 KiB, straight into the copy from
 * there on; a prefetch's small grant comes as a message (neither), and the test that finds it
 * granted counts a hit. Before 2026-11-28 a budget of 0 evicted only at the next grant to come
 * as a message (never, here), and took a prefetch's copy as it came: the tests asked again for
 * good. Then each home checks what the write left in its object. */
static void run_cache_steps(void)
{
    cor_idp_t own = COR_IDP_NULL, ev;
    char name[COR_NAME_MAX];
    snprintf(name, sizeof name, "ev.%d", rank);
    CHECK(cor_dsm_create(name, COR_LONG, (size_t)CB, COR_DSM_CACHED, &own));
    CHECK(cor_dsm_barrier_wait(all_bar));
    int home = (rank + 1) % ndom;
    ev = lookup_n("ev", home);
    size_t bytes = CB * sizeof(long);
    long big = bytes >= 16384, zero = cache_bytes == 0, mark = 1000 + rank;
    size_t kept = zero ? 0 : bytes;
    /* a miss that brings the data (blocking: to the task or straight into the copy) */
    struct moves miss = {0, 1, !big, big, zero}, hit = {1, 0, 0, 0, 0};
    struct moves upgrade = {0, 1, 1, 0, 0}, prefetch = {1, 1, 0, big, zero};
    cor_dsm_region_t rg;
    long *p = NULL;
    cor_dsm_stats_t a, b;
    CHECK(cor_dsm_map(ev, &rg));
    CHECK(cor_dsm_region_data(rg, (void **)&p, NULL));
    CHECK(cor_dsm_stats_get(&a));
    CHECK(cor_dsm_start_read(rg));
    if (p[0] != 0) pt_fail("cache steps: ev.%d[0] = %ld before any write", home, p[0]);
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_stats_get(&b));
    expect_moves("first read", &a, &b, miss, kept);
    a = b;
    CHECK(cor_dsm_start_read(rg));
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_stats_get(&b));
    expect_moves("second read", &a, &b, zero ? miss : hit, kept);
    a = b;
    CHECK(cor_dsm_start_write(rg));
    p[0] = mark;
    CHECK(cor_dsm_end_write(rg));
    CHECK(cor_dsm_stats_get(&b));
    expect_moves("write", &a, &b, zero ? miss : upgrade, kept);
    a = b;
    CHECK(cor_dsm_start_read(rg));
    if (p[0] != mark) pt_fail("cache steps: read %ld after our write of %ld", p[0], mark);
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_stats_get(&b));
    expect_moves("read after the write", &a, &b, zero ? miss : hit, kept);
    a = b;
    cor_dsm_req_t r;
    int done = 0;
    CHECK(cor_dsm_start_readI(rg, &r));
    double t0 = now();
    for (long n = 0; !done && n < 1000000 && now() - t0 < 20; n++) {
        CHECK(cor_dsm_test(&r, &done));
        if (!done) usleep(n < 1000 ? 0 : 1000);
    }
    if (!done) {
        pt_fail("cache steps: a prefetched read did not start within 20 s of cor_dsm_test");
        CHECK(cor_dsm_wait(&r));
    }
    if (p[0] != mark) pt_fail("cache steps: prefetched read %ld, expected %ld", p[0], mark);
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_stats_get(&b));
    expect_moves("prefetched read", &a, &b, zero ? prefetch : hit, kept);
    CHECK(cor_dsm_unmap(rg));
    CHECK(cor_dsm_barrier_wait(all_bar));
    long v = -1, want = 1000 + (rank + ndom - 1) % ndom;
    CHECK(cor_dsm_get(own, 0, 1, COR_LONG, &v));
    if (v != want) pt_fail("cache steps: ev.%d[0] = %ld at its home, expected %ld", rank, v, want);
    printf("domain %d: cache steps %s: a copy of %zu bytes %s\n", rank,
           atomic_load(&pt_failures) ? "FAIL" : "PASS", bytes,
           zero ? "evicted at every section's end, each start a miss"
                : "kept between sections, one miss and the write's upgrade");
    CHECK(cor_dsm_barrier_wait(all_bar));
    CHECK(cor_dsm_destroy(own));
}

/* An upgrade's grant goes to the task that asks, as an empty message (grants_task counts it,
 * at any size): domain 1 and the others read an object homed at domain 0, then domain 1
 * writes it, invalidating the others' copies, and the home and the others see the write. */
static void run_upgrade(void)
{
    cor_idp_t up = COR_IDP_NULL;
    if (rank == 0) CHECK(cor_dsm_create("up", COR_LONG, (size_t)CB, COR_DSM_CACHED, &up));
    CHECK(cor_dsm_barrier_wait(all_bar));
    up = lookup("up");
    cor_dsm_region_t rg;
    CHECK(cor_dsm_map(up, &rg));
    long *p = NULL;
    CHECK(cor_dsm_region_data(rg, (void **)&p, NULL));
    CHECK(cor_dsm_start_read(rg));
    if (p[0] != 0) pt_fail("upgrade: read %ld before the write, expected 0", p[0]);
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 1) {
        cor_dsm_stats_t a, b;
        CHECK(cor_dsm_stats_get(&a));
        CHECK(cor_dsm_start_write(rg)); /* holds a read copy: an upgrade */
        p[0] = 5151;
        CHECK(cor_dsm_end_write(rg));
        CHECK(cor_dsm_stats_get(&b));
        /* with a budget of 0 the read copy went as the read ended: the write brings the data,
         * straight into the copy from 16 KiB on */
        unsigned long long task = cache_bytes == 0 && CB * sizeof(long) >= 16384 ? 0 : 1;
        if (b.grants_task - a.grants_task != task || b.section_misses - a.section_misses != 1)
            pt_fail("upgrade: %llu grants to the asking task in %llu misses, expected %llu in 1",
                    (unsigned long long)(b.grants_task - a.grants_task),
                    (unsigned long long)(b.section_misses - a.section_misses), task);
        /* readers besides the home (domains 2, ...) acknowledge to domain 1: three hops,
         * unless the home says otherwise (COR_DSM_FORWARD=0); with a budget of 0 they hold
         * no copy */
        const char *fwd = getenv("COR_DSM_FORWARD");
        uint64_t want = ndom > 2 && cache_bytes != 0 && !(fwd && strcmp(fwd, "0") == 0);
        if (b.writes_3hop - a.writes_3hop != want)
            pt_fail("upgrade: %llu writes in three hops, expected %llu",
                    (unsigned long long)(b.writes_3hop - a.writes_3hop), (unsigned long long)want);
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    CHECK(cor_dsm_start_read(rg));
    if (p[0] != 5151) pt_fail("upgrade: read %ld after domain 1's write, expected 5151", p[0]);
    CHECK(cor_dsm_end_read(rg));
    CHECK(cor_dsm_unmap(rg));
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) CHECK(cor_dsm_destroy(up));
}

/* A reader downgrades the owner (CRL): domain 1 writes an object homed at domain 0, domain 0
 * reads it (and sees the write), then domain 1 reads it again without a miss (with a budget of
 * 0: with one, its write copy went home as the write ended). */
static void run_downgrade(void)
{
    cor_idp_t dg = COR_IDP_NULL;
    if (rank == 0) CHECK(cor_dsm_create("dg", COR_LONG, (size_t)CB, COR_DSM_CACHED, &dg));
    CHECK(cor_dsm_barrier_wait(all_bar));
    dg = lookup("dg");
    cor_dsm_region_t rg;
    CHECK(cor_dsm_map(dg, &rg));
    long *p = NULL;
    CHECK(cor_dsm_region_data(rg, (void **)&p, NULL));
    if (rank == 1) {
        CHECK(cor_dsm_start_write(rg));
        p[0] = 4242;
        CHECK(cor_dsm_end_write(rg));
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) {
        CHECK(cor_dsm_start_read(rg));
        if (p[0] != 4242) pt_fail("downgrade: the home read %ld, expected the owner's 4242", p[0]);
        CHECK(cor_dsm_end_read(rg));
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 1) {
        cor_dsm_stats_t a, b;
        CHECK(cor_dsm_stats_get(&a));
        CHECK(cor_dsm_start_read(rg));
        if (p[0] != 4242) pt_fail("downgrade: the old owner read %ld, expected 4242", p[0]);
        CHECK(cor_dsm_end_read(rg));
        CHECK(cor_dsm_stats_get(&b));
        if (cache_bytes != 0 && b.section_misses != a.section_misses)
            pt_fail("downgrade: the old owner's read missed (it should have kept a read copy)");
        if (cache_bytes == 0 && b.section_misses != a.section_misses + 1)
            pt_fail("downgrade: the old owner's read hit with a budget of 0 (its copy was kept)");
    }
    CHECK(cor_dsm_unmap(rg));
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) CHECK(cor_dsm_destroy(dg));
}

/* A copy that no region maps gives its memory back once it is invalid: every domain reads
 * the others' 128 KiB objects and unmaps them (valid copies: the cache keeps them), then each
 * home writes its own, which invalidates the others' copies, and their memory must go. Before,
 * every copy kept its data until cor_dsm_finalize. */
#define MEM_LONGS 16384
static void run_copy_memory(void)
{
    cor_idp_t *mem = calloc((size_t)ndom, sizeof *mem);
    char name[COR_NAME_MAX];
    snprintf(name, sizeof name, "mem.%d", rank);
    CHECK(cor_dsm_create(name, COR_LONG, MEM_LONGS, COR_DSM_CACHED, &mem[rank]));
    CHECK(cor_dsm_barrier_wait(all_bar));
    size_t others = (size_t)(ndom - 1) * MEM_LONGS * sizeof(long);
    for (int d = 0; d < ndom; d++) {
        if (d != rank) mem[d] = lookup_n("mem", d);
        if (d == rank) continue;
        cor_dsm_region_t rg;
        CHECK(cor_dsm_map(mem[d], &rg));
        CHECK(cor_dsm_start_read(rg));
        CHECK(cor_dsm_end_read(rg));
        CHECK(cor_dsm_unmap(rg));
    }
    cor_dsm_stats_t s;
    CHECK(cor_dsm_stats_get(&s));
    if (cache_bytes < 0 && s.copy_bytes < others)
        pt_fail("copy memory: %llu bytes held after reading, expected the %zu of valid copies",
                (unsigned long long)s.copy_bytes, others);
    CHECK(cor_dsm_barrier_wait(all_bar));
    cor_dsm_region_t own;
    long *p;
    CHECK(cor_dsm_map(mem[rank], &own));
    CHECK(cor_dsm_region_data(own, (void **)&p, NULL));
    CHECK(cor_dsm_start_write(own)); /* invalidates the others' copies */
    p[0]++;
    CHECK(cor_dsm_end_write(own));
    CHECK(cor_dsm_unmap(own));
    CHECK(cor_dsm_barrier_wait(all_bar));
    /* our service may still be finishing the last invalidation it acknowledged */
    for (int i = 0; i < 500; i++) {
        CHECK(cor_dsm_stats_get(&s));
        if (s.copy_bytes < others) break;
        usleep(10000);
    }
    if (s.copy_bytes >= others)
        pt_fail("copy memory: %llu bytes still held after every copy was invalidated and unmapped",
                (unsigned long long)s.copy_bytes);
    CHECK(cor_dsm_barrier_wait(all_bar));
    CHECK(cor_dsm_destroy(mem[rank]));
    free(mem);
}

static void run_cache(void)
{
    cblk = calloc((size_t)ndom, sizeof *cblk);
    cctr = calloc((size_t)ndom, sizeof *cctr);
    if (cache_bytes >= 0) CHECK(cor_dsm_set_cache_bytes((size_t)cache_bytes));
    long per = (long)ndom * ntasks * iters;
    char name[COR_NAME_MAX];
    snprintf(name, sizeof name, "cblk.%d", rank);
    CHECK(cor_dsm_create(name, COR_LONG, CB, COR_DSM_CACHED, &cblk[rank]));
    snprintf(name, sizeof name, "cctr.%d", rank);
    CHECK(cor_dsm_create(name, COR_LONG, 4, COR_DSM_CACHED, &cctr[rank]));
    if (rank == 0)
        CHECK(cor_dsm_create("cadd", COR_LONG, 1 + (size_t)ndom * ntasks, COR_DSM_CACHED, &cadd));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    CHECK(cor_dsm_barrier_wait(all_bar));
    for (int d = 0; d < ndom; d++) {
        cblk[d] = lookup_n("cblk", d);
        cctr[d] = lookup_n("cctr", d);
    }
    if (ndom > 1) run_cache_steps();
    double t0 = now();
    spawn_all(cache_task);
    double el = now() - t0;
    CHECK(cor_dsm_barrier_wait(all_bar));
    long c[4], *v = malloc(CB * sizeof *v);
    CHECK(cor_dsm_get(cctr[rank], 0, 4, COR_LONG, c));
    if (c[0] != per || c[1] != per)
        pt_fail("cctr.%d = %ld (sections), %ld (fetch-adds), expected %ld", rank, c[0], c[1], per);
    CHECK(cor_dsm_get(cblk[rank], 0, CB, COR_LONG, v));
    if (!cblk_check(v) || v[1] != per) pt_fail("cblk.%d[1] = %ld, expected %ld", rank, v[1], per);
    free(v);
    cor_dsm_stats_t s;
    CHECK(cor_dsm_stats_get(&s));
    printf("domain %d: %s cache: %ld write+read sections on each of %d blocks and %ld counter "
           "sections and fetch-adds from %d tasks per domain in %.2f s; hits %llu, misses %llu, "
           "invalidations %llu, recalls %llu, evictions %llu, grants straight into the copy %llu, "
           "to the asking task %llu (writes in three hops %llu), dropped %llu\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", per, ndom, per, ntasks, el,
           (unsigned long long)s.section_hits, (unsigned long long)s.section_misses,
           (unsigned long long)s.invalidations, (unsigned long long)s.recalls,
           (unsigned long long)s.evictions, (unsigned long long)s.grants_direct,
           (unsigned long long)s.grants_task, (unsigned long long)s.writes_3hop,
           (unsigned long long)s.requests_dropped);
    if (s.requests_dropped)
        pt_fail("%llu requests dropped", (unsigned long long)s.requests_dropped);
    /* how many grants came which way depends on how the tasks interleaved: that each way is
     * taken where it should, run_cache_steps counts exactly; none may come straight into a
     * copy under 16 KiB */
    int big = CB * sizeof(long) >= 16384;
    if (!big && s.grants_direct > 0)
        pt_fail("%llu grants straight into the copy with blocks of %zu bytes",
                (unsigned long long)s.grants_direct, CB * sizeof(long));
    if (cache_bytes == 0 && s.evictions == 0 && ndom > 1) pt_fail("a budget of 0 evicted nothing");
    CHECK(cor_dsm_barrier_wait(all_bar));
    run_cadd();
    if (ndom > 1) run_downgrade();
    if (ndom > 1) run_upgrade();
    if (ndom > 1) run_copy_memory();
    CHECK(cor_dsm_destroy(cblk[rank]));
    CHECK(cor_dsm_destroy(cctr[rank]));
    CHECK(cor_dsm_barrier_wait(all_bar));
    /* the copies other domains still hold are invalidated and forgotten: a map that still
     * finds the copy (the news is on its way) gets its next sections refused, a later map is */
    if (ndom > 1) {
        int d = (rank + 1) % ndom, err = COR_OK;
        cor_dsm_region_t rg;
        err = cor_dsm_map(cblk[d], &rg);
        for (int i = 0; !err && i < 500; i++) {
            err = cor_dsm_start_read(rg);
            if (err) {
                CHECK(cor_dsm_unmap(rg));
                break;
            }
            CHECK(cor_dsm_end_read(rg));
            usleep(10000);
        }
        if (err != COR_ENOTFOUND)
            pt_fail("a section on destroyed cblk.%d: %s, expected COR_ENOTFOUND", d,
                    cor_dsm_strerror(err));
        err = cor_dsm_map(cblk[d], &rg);
        if (err != COR_ENOTFOUND)
            pt_fail("a map of destroyed cblk.%d: %s, expected COR_ENOTFOUND", d,
                    cor_dsm_strerror(err));
        if (!err) CHECK(cor_dsm_unmap(rg));
    }
}

/* ---- lockfair ---- */

static cor_idp_t lockF, fctr;
static long *acq, *acq_fair;         /* in all; while every task of every domain contended */
static cor_dsm_barrier_t fair_start; /* every task of every domain: all contend from the start */

static int fair_task(void *arg)
{
    int k = (int)(intptr_t)arg;
    double deadline = now() + 300;
    CHECK(cor_dsm_barrier_wait(fair_start));
    /* fctr: [0] the lock-protected counter, [1] the sum of acquisitions (at the end), [2] the
     * tasks that took the lock at least once, [3] the acquisitions made once all did: those
     * are counted for fairness, `iters` of them (before, the tasks that got a CPU first took a
     * lock that the others, not yet running on a busy machine, had not asked for) */
    for (;;) {
        CHECK(cor_dsm_lock(lockF));
        long c[4] = {0};
        CHECK(cor_dsm_get(fctr, 0, 4, COR_LONG, c));
        int stop = c[3] >= iters;
        if (!stop) {
            c[0]++;
            c[2] += acq[k] == 0;
            int all = c[2] == (long)ndom * ntasks;
            c[3] += all;
            CHECK(cor_dsm_put(fctr, 0, 4, COR_LONG, c));
            acq[k]++;
            acq_fair[k] += all;
        }
        CHECK(cor_dsm_unlock(lockF));
        if (stop || atomic_load(&pt_failures) || now() > deadline) break;
    }
    return 0;
}

static void run_lockfair(void)
{
    acq = calloc((size_t)ntasks, sizeof *acq);
    acq_fair = calloc((size_t)ntasks, sizeof *acq_fair);
    if (rank == 0) CHECK(cor_dsm_create("fctr", COR_LONG, 4, COR_DSM_HOME_ONLY, &fctr));
    CHECK(cor_dsm_lock_open("F", &lockF));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    CHECK(cor_dsm_barrier_create("fair.start", COR_IDP_NULL, ntasks, &fair_start));
    CHECK(cor_dsm_barrier_wait(all_bar));
    fctr = lookup("fctr");
    double t0 = now();
    spawn_all(fair_task);
    double el = now() - t0;
    /* gather every task's count at domain 0: appended to column 1 as a sum, and min/max */
    long mine = 0, mn = -1, mx = 0;
    for (int k = 0; k < ntasks; k++) {
        mine += acq[k];
        if (mn < 0 || acq_fair[k] < mn) mn = acq_fair[k];
        if (acq_fair[k] > mx) mx = acq_fair[k];
    }
    long old;
    CHECK(cor_dsm_fetch_add(fctr, 1, COR_LONG, &mine, &old));
    CHECK(cor_dsm_barrier_wait(all_bar));
    long c[4];
    CHECK(cor_dsm_get(fctr, 0, 4, COR_LONG, c));
    if (c[0] != c[1] || c[3] != iters)
        pt_fail("lock-protected counter %ld, sum of acquisitions %ld, of those once all contended "
                "%ld, expected %ld",
                c[0], c[1], c[3], iters);
    double ratio = mn > 0 ? (double)mx / (double)mn : 1e9;
    printf("domain %d: %s lockfair: %ld acquisitions in %.2f s (%.1f us each), %ld once all "
           "contended; this domain's tasks took min %ld max %ld of those (max/min %.2f, limit "
           "%.2f)\n",
           rank, atomic_load(&pt_failures) || ratio > max_ratio ? "FAIL" : "PASS", c[0], el,
           el / (double)c[0] * 1e6, iters, mn, mx, ratio, max_ratio);
    if (ratio > max_ratio) pt_fail("unfair: max/min %.2f > %.2f", ratio, max_ratio);
    /* the ratio across domains: each domain adds its min and max at domain 0 */
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) CHECK(cor_dsm_destroy(fctr));
    CHECK(cor_dsm_barrier_destroy(fair_start));
}

/* ---- barrier ---- */

static cor_idp_t bctr;
static cor_dsm_barrier_t tbar, evenbar;

static int bar_task(void *arg)
{
    long one = 1, old;
    for (long e = 0; e < iters; e++) {
        CHECK(cor_dsm_fetch_add(bctr, 0, COR_LONG, &one, &old));
        CHECK(cor_dsm_barrier_wait(tbar));
        long c = 0;
        CHECK(cor_dsm_get(bctr, 0, 1, COR_LONG, &c));
        if (c < (long)ndom * ntasks * (e + 1))
            pt_fail("episode %ld: left the barrier with %ld arrivals counted, expected %ld", e, c,
                    (long)ndom * ntasks * (e + 1));
        CHECK(cor_dsm_barrier_wait(tbar));
    }
    return 0;
}

static int mark_seen(const char *name, int d)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, d);
    return access(path, F_OK) == 0;
}

/*
 * Non-blocking barrier episodes (cor_dsm_barrier_waitI): domain 1 arrives, then waits for
 * every other domain to say it left the episode (a file each) without calling CoR at all:
 * with 3+ domains the others' later rounds need domain 1's, which only its hooks can send.
 * The others alternate: test until done, or wait. Each checks that every domain had arrived.
 */
static void run_ibarrier(long eps)
{
    cor_dsm_barrier_t ib;
    CHECK(cor_dsm_barrier_create("ib", COR_IDP_NULL, 1, &ib));
    CHECK(cor_dsm_barrier_wait(all_bar));
    long one = 1, old, tests = 0;
    for (long e = 0; e < eps; e++) {
        char name[32];
        snprintf(name, sizeof name, "ib%ld", e);
        CHECK(cor_dsm_fetch_add(bctr, 2, COR_LONG, &one, &old));
        cor_dsm_req_t rq;
        CHECK(cor_dsm_barrier_waitI(ib, &rq));
        if (rank == 1) {
            for (int d = 0; d < ndom; d++)
                for (int i = 0; d != rank && !mark_seen(name, d); i++) {
                    if (i == 30000) { /* 30 s */
                        pt_fail("episode %ld: domain %d never left while domain 1 made no call", e,
                                d);
                        break;
                    }
                    usleep(1000);
                }
            CHECK(cor_dsm_wait(&rq));
        } else if (e % 2) {
            CHECK(cor_dsm_wait(&rq));
        } else {
            int done = 0;
            while (!done) {
                CHECK(cor_dsm_test(&rq, &done));
                tests++;
            }
            if (rq != NULL) pt_fail("a completed barrier request was not cleared");
        }
        long c = 0;
        CHECK(cor_dsm_get(bctr, 2, 1, COR_LONG, &c));
        if (c < (long)ndom * (e + 1))
            pt_fail("non-blocking episode %ld: left with %ld arrivals counted, expected %ld", e, c,
                    (long)ndom * (e + 1));
        atomic_fetch_add(&ticks, 1);
        write_mark(name);
    }
    cor_dsm_req_t rq;
    CHECK(cor_dsm_barrier_waitI(ib, &rq)); /* a last one, waited for after a destroy refused */
    int busy = cor_dsm_barrier_destroy(ib);
    if (busy != COR_EBUSY) pt_fail("destroy of a barrier with a request pending: %d", busy);
    CHECK(cor_dsm_wait(&rq));
    CHECK(cor_dsm_barrier_wait(all_bar));
    CHECK(cor_dsm_barrier_destroy(ib));
    printf("domain %d: non-blocking barrier %s: %ld episodes over %d domains (%ld tests)\n", rank,
           atomic_load(&pt_failures) ? "FAIL" : "PASS", eps, ndom, tests);
}

static void run_barrier(void)
{
    if (rank == 0) CHECK(cor_dsm_create("bctr", COR_LONG, 3, COR_DSM_HOME_ONLY, &bctr));
    CHECK(cor_dsm_barrier_create("tasks", COR_IDP_NULL, ntasks, &tbar));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    CHECK(cor_dsm_barrier_wait(all_bar));
    bctr = lookup("bctr");
    double t0 = now();
    spawn_all(bar_task);
    double el = now() - t0;
    /* the even domains only: a logical domain they join */
    cor_idp_t ld = COR_IDP_NULL;
    if (rank == 0) CHECK(cor_ldomain_create("evens", &ld));
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank != 0) CHECK(cor_ldomain_lookup("evens", &ld));
    int r;
    if (rank % 2 == 0) CHECK(cor_ldomain_join(ld, cor_domain_self(), &r));
    CHECK(cor_dsm_barrier_wait(all_bar));
    double t1 = now();
    long even_eps = 0;
    if (rank % 2 == 0) {
        CHECK(cor_dsm_barrier_create("evens", ld, 1, &evenbar));
        long one = 1, old;
        for (long e = 0; e < iters; e++) {
            CHECK(cor_dsm_fetch_add(bctr, 1, COR_LONG, &one, &old));
            CHECK(cor_dsm_barrier_wait(evenbar));
            long c = 0;
            CHECK(cor_dsm_get(bctr, 1, 1, COR_LONG, &c));
            if (c < ((long)ndom + 1) / 2 * (e + 1))
                pt_fail("evens episode %ld: %ld arrivals", e, c);
            CHECK(cor_dsm_barrier_wait(evenbar));
            even_eps++;
        }
        CHECK(cor_dsm_barrier_destroy(evenbar));
    } else {
        cor_dsm_barrier_t x;
        int e = cor_dsm_barrier_create("evens", ld, 1, &x);
        if (e != COR_EINVAL) pt_fail("an odd domain joined the evens' barrier: %d", e);
    }
    double el2 = now() - t1;
    CHECK(cor_dsm_barrier_wait(all_bar));
    run_ibarrier(iters < 20 ? iters : 20);
    printf("domain %d: %s barrier: %ld episodes x 2 over %d domains x %d tasks in %.2f s "
           "(%.1f us per barrier); %ld x 2 over the even domains in %.2f s\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", iters, ndom, ntasks, el,
           el / (double)(2 * iters) * 1e6, even_eps, el2);
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) CHECK(cor_dsm_destroy(bctr));
}

/* ---- kill ---- */

static cor_idp_t vobj, vlock, hlock, klock, d0obj;
static cor_idp_t kw, kr, kh; /* cached: written by the victim, read by it, homed at it */
static cor_dsm_barrier_t kbar;
static int victim;
#define KILL_KINDS 7
static _Atomic int ready_tasks;
static int want_ready;

static void task_ready(void)
{
    if (atomic_fetch_add(&ready_tasks, 1) + 1 == want_ready) write_mark("ready");
}

static char vlock_name[COR_NAME_MAX];

/* Opens locks "NAME.k" until one is homed at `home`; its name goes to n. */
static cor_idp_t lock_at(const char *name, int home, char *n)
{
    for (int k = 0; k < 10000; k++) {
        snprintf(n, COR_NAME_MAX, "%s.%d", name, k);
        cor_idp_t l;
        if (cor_dsm_lock_open(n, &l) != COR_OK) break;
        if ((int)cor_idp_domain(l) == home) return l;
    }
    pt_fail("no lock name homed at domain %d", home);
    return COR_IDP_NULL;
}

/* ---- lockkeep ---- */

static cor_idp_t lockK, kobj; /* kobj: [0] turn counter, [1] holder mark, [2] flag */
static _Atomic int kflag;     /* domain 1's second task: set by the first before its unlock */

/* Under lockK: nobody else is inside (a holder mark swapped in and out). */
static void k_enter(long me)
{
    long old = -1;
    CHECK(cor_dsm_swap(kobj, 1, COR_LONG, &me, &old));
    if (old != 0) pt_fail("lock K: %ld inside with %ld", old, me);
}

static void k_leave(long me)
{
    long zero = 0, old = -1;
    CHECK(cor_dsm_swap(kobj, 1, COR_LONG, &zero, &old));
    if (old != me) pt_fail("lock K: %ld inside when %ld left", old, me);
}

static int k_pair_task(void *arg)
{
    int k = (int)(intptr_t)arg;
    long me = 1000 + k;
    if (k == 0) {
        cor_dsm_stats_t a, b; /* domain 0 had it last: the second grant here is kept */
        CHECK(cor_dsm_stats_get(&a));
        for (int i = 0; i < 3; i++) {
            CHECK(cor_dsm_lock(lockK));
            if (i < 2) CHECK(cor_dsm_unlock(lockK));
        }
        CHECK(cor_dsm_stats_get(&b));
        if (b.lock_retakes - a.lock_retakes != 1)
            pt_fail("lock K: %llu retakes of 3 acquisitions, expected 1 (the third)",
                    (unsigned long long)(b.lock_retakes - a.lock_retakes));
        k_enter(me);
        atomic_store(&kflag, 1); /* the second task asks now */
        usleep(200000);
        atomic_store(&kflag, 2);
        k_leave(me);
        CHECK(cor_dsm_unlock(lockK));
    } else if (k == 1) {
        for (int i = 0; i < 20000 && atomic_load(&kflag) == 0; i++)
            usleep(100);
        double t0 = now();
        CHECK(cor_dsm_lock(lockK));
        if (atomic_load(&kflag) != 2)
            pt_fail("second task of the keeping domain took lock K while the first held it");
        k_enter(me);
        k_leave(me);
        CHECK(cor_dsm_unlock(lockK));
        printf("domain %d: second task waited %.3f s for the first's unlock\n", rank, now() - t0);
    }
    return 0;
}

static void run_lockkeep(void)
{
    char name[COR_NAME_MAX];
    lockK = lock_at("K", 0, name);
    if (rank == 0) CHECK(cor_dsm_create("kobj", COR_LONG, 4, COR_DSM_HOME_ONLY, &kobj));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    CHECK(cor_dsm_barrier_wait(all_bar));
    kobj = lookup("kobj");
    long me = rank + 1;
    /* 1. Retakes: one request (the first acquisition), the rest answered here. */
    if (rank == 1) {
        cor_dsm_stats_t a, b;
        CHECK(cor_dsm_stats_get(&a));
        for (long i = 0; i < iters; i++) {
            CHECK(cor_dsm_lock(lockK));
            CHECK(cor_dsm_unlock(lockK));
            atomic_fetch_add(&ticks, 1);
        }
        CHECK(cor_dsm_stats_get(&b));
        uint64_t retakes = b.lock_retakes - a.lock_retakes, reqs = b.remote_ops - a.remote_ops;
        printf("domain 1: %ld uncontended acquisitions: %llu requests, %llu retakes\n", iters,
               (unsigned long long)reqs, (unsigned long long)retakes);
        /* the first grant (no domain had it) is not kept, the second is: acquire, release,
         * acquire by message, then retakes */
        if (retakes != (uint64_t)iters - 2 || reqs != 3)
            pt_fail("kept lock: %llu requests and %llu retakes for %ld acquisitions, expected 3 "
                    "and %ld",
                    (unsigned long long)reqs, (unsigned long long)retakes, iters, iters - 2);
        /* 2. A recall while held: domain 0 asks once we hold it. */
        CHECK(cor_dsm_lock(lockK));
        k_enter(me);
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 1) {
        usleep(300000); /* domain 0's request and its recall come meanwhile */
        long two = 2;
        CHECK(cor_dsm_put(kobj, 2, 1, COR_LONG, &two));
        k_leave(me);
        CHECK(cor_dsm_unlock(lockK));
    } else if (rank == 0) {
        double t0 = now();
        CHECK(cor_dsm_lock(lockK));
        long flag = 0;
        CHECK(cor_dsm_get(kobj, 2, 1, COR_LONG, &flag));
        if (flag != 2) pt_fail("lock K granted to domain 0 while domain 1 held it (kept)");
        k_enter(me);
        k_leave(me);
        CHECK(cor_dsm_unlock(lockK));
        printf("domain 0: lock K recalled from domain 1 (held) after %.3f s\n", now() - t0);
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    /* 3. Two tasks of domain 1: the second asks while the first holds the kept lock. */
    if (rank == 1) {
        int t = ntasks;
        ntasks = 2;
        spawn_all(k_pair_task);
        ntasks = t;
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    /* 4. Every domain in turn: each acquisition recalls the lock from the domain before. */
    double t0 = now();
    for (long i = 0; i < iters && !atomic_load(&pt_failures); i++) {
        long turn = -1;
        for (long w = 0; w < 200000; w++) {
            CHECK(cor_dsm_get(kobj, 0, 1, COR_LONG, &turn));
            if (turn % ndom == rank) break;
            usleep(20);
        }
        if (turn % ndom != rank) {
            pt_fail("lock K: no turn after 200000 looks (turn %ld)", turn);
            break;
        }
        /* twice: the second grant is kept, so the next domain's first recalls it */
        for (int j = 0; j < 2; j++) {
            CHECK(cor_dsm_lock(lockK));
            k_enter(me);
            long c = -1;
            CHECK(cor_dsm_get(kobj, 0, 1, COR_LONG, &c));
            c += j; /* the turn moves on at the second */
            CHECK(cor_dsm_put(kobj, 0, 1, COR_LONG, &c));
            k_leave(me);
            CHECK(cor_dsm_unlock(lockK));
        }
        atomic_fetch_add(&ticks, 1);
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    long c = -1;
    CHECK(cor_dsm_get(kobj, 0, 1, COR_LONG, &c));
    if (c != iters * ndom) pt_fail("lock K turns: counter %ld, expected %ld", c, iters * ndom);
    double el = now() - t0;
    cor_dsm_stats_t st;
    CHECK(cor_dsm_stats_get(&st));
    printf("domain %d: %s lockkeep: %ld turns in %.2f s (%.1f us a turn), %llu retakes here\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", c, el, el / (double)c * 1e6,
           (unsigned long long)st.lock_retakes);
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) CHECK(cor_dsm_destroy(kobj));
}

static void expect_err(const char *what, int got, int want, double t0)
{
    atomic_fetch_add(&ticks, 1);
    if (got != want)
        pt_fail("%s returned %s, expected %s", what, cor_dsm_strerror(got), cor_dsm_strerror(want));
    else
        printf("domain %d: %s -> %s after %.2f s\n", rank, what, cor_dsm_strerror(got), now() - t0);
}

static int kill_task(void *arg)
{
    int k = (int)(intptr_t)arg % KILL_KINDS;
    double t0 = now();
    cor_dsm_region_t rg = NULL;
    if (k >= 4) CHECK(cor_dsm_map(k == 4 ? kw : k == 5 ? kr : kh, &rg));
    if (rank == victim) {
        if (k == 0) {
            for (int i = 0; i < 2; i++) { /* over messages its domain keeps it (the second
                                           * grant to the same domain), free */
                CHECK(cor_dsm_lock(klock));
                CHECK(cor_dsm_unlock(klock));
            }
            CHECK(cor_dsm_lock(vlock));
            CHECK(cor_dsm_lock(hlock));
        }
        if (k == 4 || k == 6) { /* dies inside a write section: its copy is dirty */
            CHECK(cor_dsm_start_write(rg));
            long *p = NULL;
            CHECK(cor_dsm_region_data(rg, (void **)&p, NULL));
            p[0] = 42;
        }
        if (k == 5) CHECK(cor_dsm_start_read(rg)); /* dies inside a read section */
        task_ready();
        for (;;)
            pause(); /* killed here */
    }
    int err;
    switch (k) {
    case 0: { /* operations on the victim's object until they fail */
        long one = 1, old;
        task_ready();
        for (;;) {
            err = cor_dsm_fetch_add(vobj, 0, COR_LONG, &one, &old);
            atomic_fetch_add(&ticks, 1);
            if (err) break;
            usleep(1000);
        }
        expect_err("fetch-add on the dead home's object", err, COR_EPEERDEAD, t0);
        /* a lock the victim took and released: over messages its domain kept it, and the
         * home cannot tell a kept free lock from a held one: exactly one survivor is told its
         * holder died (the script counts); in shared memory nobody is */
        err = cor_dsm_lock(klock);
        printf("domain %d: lock kept by the dead domain -> %s\n", rank, cor_dsm_strerror(err));
        if (err == COR_DSM_EOWNERDEAD || err == COR_OK)
            CHECK(cor_dsm_unlock(klock));
        else
            pt_fail("lock kept by the dead domain: %s", cor_dsm_strerror(err));
        break;
    }
    case 1: /* waits for a lock homed at the victim (held there) */
        task_ready();
        err = cor_dsm_lock(vlock);
        expect_err("lock homed at the dead domain", err, COR_EPEERDEAD, t0);
        break;
    case 2: /* waits for a lock homed at domain 0, held by the victim: the first survivor
             * granted it hears of the death (the script counts those lines: exactly one) */
        task_ready();
        err = cor_dsm_lock(hlock);
        atomic_fetch_add(&ticks, 1);
        printf("domain %d: lock held by the dead domain -> %s after %.2f s\n", rank,
               cor_dsm_strerror(err), now() - t0);
        if (err == COR_DSM_EOWNERDEAD || err == COR_OK)
            CHECK(cor_dsm_unlock(hlock));
        else
            pt_fail("lock held by the dead domain: %s", cor_dsm_strerror(err));
        break;
    case 3: /* an all-domain barrier the victim never reaches */
        task_ready();
        err = cor_dsm_barrier_wait(kbar);
        expect_err("barrier with a dead member", err, COR_EPEERDEAD, t0);
        break;
    case 4: /* a write section on an object whose dirty copy dies with the victim */
        task_ready();
        err = cor_dsm_start_write(rg);
        expect_err("write section on a copy that died dirty", err, COR_EPEERDEAD, t0);
        if (!err) CHECK(cor_dsm_end_write(rg));
        expect_err("read section on it afterwards", cor_dsm_start_read(rg), COR_EPEERDEAD, t0);
        break;
    case 5: { /* a write section waiting for the victim's read section: the death releases it.
               * The others read first, so theirs is an upgrade, in three hops (the victim's
               * acknowledgment would go to them: its death must count instead); the home
               * writes after them. */
        cor_dsm_stats_t a, b;
        long *p = NULL;
        CHECK(cor_dsm_region_data(rg, (void **)&p, NULL));
        if (rank != 0) {
            CHECK(cor_dsm_start_read(rg));
            CHECK(cor_dsm_end_read(rg));
        }
        CHECK(cor_dsm_stats_get(&a));
        task_ready();
        for (int i = 0; rank == 0 && i < 6000; i++) { /* 60 s at most */
            CHECK(cor_dsm_start_read(rg));
            long seen = p[0];
            CHECK(cor_dsm_end_read(rg));
            if (seen >= ndom - 2) break;
            usleep(10000);
        }
        err = cor_dsm_start_write(rg);
        atomic_fetch_add(&ticks, 1);
        if (err) {
            pt_fail("write section after a reader died: %s", cor_dsm_strerror(err));
        } else {
            p[0]++;
            CHECK(cor_dsm_end_write(rg));
            CHECK(cor_dsm_stats_get(&b));
            const char *fwd = getenv("COR_DSM_FORWARD");
            int three = b.writes_3hop > a.writes_3hop;
            if (rank != 0 && three == (fwd && strcmp(fwd, "0") == 0 ? 1 : 0))
                pt_fail("write after a reader died: %s three hops", three ? "in" : "not in");
            printf("domain %d: write section after a reader died -> granted after %.2f s%s\n", rank,
                   now() - t0, three ? " (in three hops)" : "");
        }
        break;
    }
    case 6: /* a read section on an object homed at the victim, write-held there */
        task_ready();
        err = cor_dsm_start_read(rg);
        expect_err("read section homed at the dead domain", err, COR_EPEERDEAD, t0);
        if (!err) CHECK(cor_dsm_end_read(rg));
        break;
    }
    if (rg) CHECK(cor_dsm_unmap(rg));
    return 0;
}

/* A survivor that exits while another still asks it (kr's home, domain 0) fails that one's
 * requests with COR_EPEERDEAD: each tells the other survivors it is done and waits for their
 * word, or their exit (at most 10 s: a word sent just before its sender exited may be lost). */
static void survivors_done(void)
{
    const int tag = 4242;
    long word = rank, got = 0;
    for (int d = 0; d < ndom; d++)
        if (d != rank && d != victim)
            CHECK(cor_send(cor_task_idp(d, 0), COR_CTX_WORLD, tag, COR_LONG, &word, 1));
    for (int d = 0; d < ndom; d++) {
        if (d == rank || d == victim) continue;
        cor_req_t rq;
        int done = 0;
        int err = cor_recvI_into(cor_task_idp(d, 0), COR_CTX_WORLD, tag, COR_LONG, &got, 1, &rq);
        if (err == COR_EPEERDEAD) continue; /* it was done, and has exited already */
        CHECK(err);
        cor_wait_timeout(&rq, -1, 10000000, NULL, NULL, &done, NULL);
        if (!done) {
            cor_cancel(&rq);
            cor_wait(&rq, NULL);
        }
    }
}

static int run_kill(void)
{
    victim = ndom - 1;
    if (ntasks < KILL_KINDS) ntasks = KILL_KINDS;
    want_ready = ntasks;
    if (rank == victim) CHECK(cor_dsm_create("vobj", COR_LONG, 4, COR_DSM_HOME_ONLY, &vobj));
    if (rank == 0) CHECK(cor_dsm_create("d0obj", COR_LONG, 4, COR_DSM_HOME_ONLY, &d0obj));
    size_t kn = cb_given ? (size_t)CB : 4; /* -B 4096: grants straight into the copies */
    if (rank == 0) CHECK(cor_dsm_create("kw", COR_LONG, kn, COR_DSM_CACHED, &kw));
    if (rank == 0) CHECK(cor_dsm_create("kr", COR_LONG, kn, COR_DSM_CACHED, &kr));
    if (rank == victim) CHECK(cor_dsm_create("kh", COR_LONG, kn, COR_DSM_CACHED, &kh));
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    /* survivors' kill_task 3 (one per survivor domain) wait in kbar */
    int kb_local = 0;
    for (int i = 0; i < ntasks; i++)
        kb_local += i % KILL_KINDS == 3;
    CHECK(cor_dsm_barrier_create("kbar", COR_IDP_NULL, kb_local, &kbar));
    CHECK(cor_dsm_barrier_wait(all_bar));
    vobj = lookup("vobj");
    d0obj = lookup("d0obj");
    kw = lookup("kw");
    kr = lookup("kr");
    kh = lookup("kh");
    char hname[COR_NAME_MAX];
    vlock = lock_at("vlock", victim, vlock_name);
    hlock = lock_at("hlock", 0, hname);
    klock = lock_at("klock", 0, hname);
    CHECK(cor_dsm_barrier_wait(all_bar));
    pt_watchdog_start(&ticks, &finished, STALL_S, 3, "hang");
    if (rank == victim) {
        spawn_all(kill_task); /* never returns: killed */
        return 5;
    }
    /* the victim's locks must be taken before the survivors ask */
    for (int i = 0; i < 600; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/ready.%d", dir, victim);
        if (access(p, F_OK) == 0) break;
        usleep(100000);
    }
    spawn_all(kill_task);
    /* afterwards: the dead home stays dead, the others still work together */
    long one = 1, old;
    double t0 = now();
    expect_err("a new fetch-add on the dead home", cor_dsm_fetch_add(vobj, 1, COR_LONG, &one, &old),
               COR_EPEERDEAD, t0);
    cor_idp_t l;
    expect_err("lock_open of a name homed at the dead domain", cor_dsm_lock_open(vlock_name, &l),
               COR_EPEERDEAD, t0);
    for (int i = 0; i < 100; i++)
        CHECK(cor_dsm_fetch_add(d0obj, 0, COR_LONG, &one, &old));
    long v = 0;
    for (int i = 0; i < 600 && v < 100L * (ndom - 1); i++) {
        CHECK(cor_dsm_get(d0obj, 0, 1, COR_LONG, &v));
        usleep(10000);
    }
    if (v != 100L * (ndom - 1))
        pt_fail("survivors' counter %ld, expected %ld", v, 100L * (ndom - 1));
    /* the object the dead reader held is whole: one increment per surviving domain */
    long w = 0;
    for (int i = 0; i < 600 && w < ndom - 1; i++) {
        CHECK(cor_dsm_get(kr, 0, 1, COR_LONG, &w));
        usleep(10000);
    }
    if (w != ndom - 1) pt_fail("kr[0] = %ld after the reader's death, expected %d", w, ndom - 1);
    survivors_done();
    printf("domain %d: %s kill\n", rank, atomic_load(&pt_failures) ? "FAIL" : "PASS");
    fflush(stdout);
    return atomic_load(&pt_failures) ? 1 : PASS_KILLED;
}

/* ---- reuse ---- */

/* Fills or checks a cached object's copy in a section of `mode`: n elements, element i =
 * base + i; a write section also sets element `slot` to `mark` when slot >= 0. */
static void reuse_section(cor_idp_t o, int write, size_t n, long base, int slot, long mark)
{
    cor_dsm_region_t rg;
    CHECK(cor_dsm_map(o, &rg));
    long *v = NULL;
    size_t count = 0;
    CHECK(cor_dsm_region_data(rg, (void **)&v, &count));
    if (count != n)
        pt_fail("the copy of %#llx has %zu elements, the object %zu", (unsigned long long)o, count,
                n);
    CHECK(write ? cor_dsm_start_write(rg) : cor_dsm_start_read(rg));
    for (size_t i = 0; v && i < n && i < count; i++) {
        if (write && slot < 0) v[i] = base + (long)i;
        if (!write && i >= (size_t)ndom && v[i] != base + (long)i) {
            pt_fail("element %zu of %#llx is %ld, expected %ld", i, (unsigned long long)o, v[i],
                    base + (long)i);
            break;
        }
    }
    if (write && slot >= 0 && v && (size_t)slot < count) v[slot] = mark;
    CHECK(write ? cor_dsm_end_write(rg) : cor_dsm_end_read(rg));
    CHECK(cor_dsm_unmap(rg));
}

/* Fills (write) or checks object o of n longs, element i = base + i, through a section of a
 * cached object or get/put of a home-only one; slot >= 0: sets only element slot to mark. */
static void reuse_access(cor_idp_t o, int cached, int write, size_t n, long base, int slot,
                         long mark)
{
    if (cached) {
        reuse_section(o, write, n, base, slot, mark);
        return;
    }
    cor_dsm_info_t info;
    int e = cor_dsm_query(o, &info);
    CHECK(e);
    if (e == COR_OK && info.count != n)
        pt_fail("%#llx has %zu elements, expected %zu", (unsigned long long)o, (size_t)info.count,
                n);
    long v[64];
    if (n > 64) return;
    if (write && slot >= 0) {
        CHECK(cor_dsm_put(o, (size_t)slot, 1, COR_LONG, &mark));
    } else if (write) {
        for (size_t i = 0; i < n; i++)
            v[i] = base + (long)i;
        CHECK(cor_dsm_put(o, 0, n, COR_LONG, v));
    } else {
        CHECK(cor_dsm_get(o, 0, n, COR_LONG, v));
        for (size_t i = ndom; i < n; i++)
            if (v[i] != base + (long)i) {
                pt_fail("element %zu of %#llx is %ld, expected %ld", i, (unsigned long long)o, v[i],
                        base + (long)i);
                break;
            }
    }
}

static _Atomic long storm_read, storm_lost; /* storm sections read, steps that found rs gone */

/* Whether domain 0 still makes and destroys "rs" (its mark DIR/storm.0 says it is done). */
static int storm_running(void)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/storm.0", dir);
    return access(p, F_OK) != 0;
}

/* A task of the other domains: maps, reads and unmaps "rs" while domain 0 destroys it. */
static int storm_task(void *arg)
{
    (void)arg;
    while (storm_running()) {
        cor_idp_t o = COR_IDP_NULL;
        int e = cor_dsm_lookup("rs", &o);
        atomic_fetch_add(&ticks, 1);
        if (e == COR_ENOTFOUND) continue;
        if (e) {
            pt_fail("lookup rs: %s", cor_dsm_strerror(e));
            break;
        }
        cor_dsm_region_t rg;
        if ((e = cor_dsm_map(o, &rg)) == COR_OK) {
            if ((e = cor_dsm_start_read(rg)) == COR_OK) {
                e = cor_dsm_end_read(rg);
                atomic_fetch_add(&storm_read, 1);
            }
            CHECK(cor_dsm_unmap(rg));
        }
        if (e == COR_ENOTFOUND) atomic_fetch_add(&storm_lost, 1);
        if (e && e != COR_ENOTFOUND) pt_fail("a section on rs: %s", cor_dsm_strerror(e));
    }
    return 0;
}

/* Domain 0's progress while it creates objects to get ra's idp back, for the others to watch:
 * [0] its creations so far (all rounds), put every REUSE_EVERY creations, [1] the last round
 * it finished. Home-only and homed at domain 0, so its puts are local and do not slow it. */
static cor_idp_t reuse_progress;
enum { REUSE_EVERY = 1000 };

static void reuse_publish(long made_total, long round)
{
    long v[2] = {made_total, round};
    CHECK(cor_dsm_put(reuse_progress, 0, 2, COR_LONG, v));
}

/* The other domains, while domain 0 creates up to ~65535 objects (> 60 s under TSan on a
 * loaded machine): instead of a blocking barrier wait, which would let their watchdog kill
 * them, they read domain 0's progress twice a second and tick the watchdog only when it
 * advanced. A creator stalled for STALL_S / 2 s, or not done in 600 s, is a failure. */
static void reuse_wait_creator(long round)
{
    const double poll_s = 0.5, total_s = 600;
    double t0 = now(), moved = t0;
    long seen = -1, v[2] = {0, 0};
    for (;;) {
        int e = cor_dsm_get(reuse_progress, 0, 2, COR_LONG, v);
        if (e != COR_OK) pt_fail("get domain 0's progress: %s", cor_dsm_strerror(e));
        if (e == COR_OK && v[1] >= round) return;
        double t = now();
        if (e == COR_OK && v[0] != seen) {
            seen = v[0];
            moved = t;
            atomic_fetch_add(&ticks, 1);
        }
        if (t - moved > STALL_S / 2 || t - t0 > total_s) {
            pt_fail("domain 0's creations stuck at %ld for %.0f s (%.0f s in all, bounds %d and "
                    "%.0f s) while it looks for ra's idp",
                    seen, t - moved, t - t0, STALL_S / 2, total_s);
            fflush(stdout);
            fflush(stderr);
            _exit(3);
        }
        usleep((useconds_t)(poll_s * 1e6));
    }
}

/* A destroyed object's index reused, for each protocol: domain 0's object "ra" (4 longs) is
 * read by every domain, then destroyed, and domain 0 creates objects until one gets ra's idp
 * back (index reuse comes last: ~65535 creations); that one, "rb", has another size. Every
 * domain must see rb, not what it knew of ra: its size, its data, and its writes must reach
 * the home. */
static void run_reuse(void)
{
    CHECK(cor_dsm_barrier_create("all", COR_IDP_NULL, 1, &all_bar));
    enum { NA = 4, NB = 64 };
    if (rank == 0) {
        CHECK(cor_dsm_create("rp", COR_LONG, 2, COR_DSM_HOME_ONLY, &reuse_progress));
        reuse_publish(0, 0);
    }
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank) reuse_progress = lookup("rp");
    long made_total = 0;
    for (int cached = 1; cached >= 0; cached--) {
        long round = 2 - cached;
        cor_dsm_protocol_t proto = cached ? COR_DSM_CACHED : COR_DSM_HOME_ONLY;
        cor_idp_t a = COR_IDP_NULL, b = COR_IDP_NULL;
        if (rank == 0) {
            CHECK(cor_dsm_create("ra", COR_LONG, NA, proto, &a));
            reuse_access(a, cached, 1, NA, 100, -1, 0);
        }
        CHECK(cor_dsm_barrier_wait(all_bar));
        if (rank) a = lookup("ra");
        reuse_access(a, cached, 0, NA, 100, -1, 0);
        CHECK(cor_dsm_barrier_wait(all_bar));
        double t0 = now();
        long made = 0;
        if (rank == 0) {
            CHECK(cor_dsm_destroy(a));
            for (made = 1; made <= 70000; made++) {
                int e = cor_dsm_create("rb", COR_LONG, NB, proto, &b);
                if (e) {
                    pt_fail("create rb: %s", cor_dsm_strerror(e));
                    break;
                }
                atomic_fetch_add(&ticks, 1);
                if (++made_total % REUSE_EVERY == 0) reuse_publish(made_total, round - 1);
                if (b == a) break;
                CHECK(cor_dsm_destroy(b));
            }
            if (b != a) pt_fail("no object got ra's idp back in %ld creations", made);
            reuse_access(b, cached, 1, NB, 200, -1, 0);
            reuse_publish(made_total, round);
        } else {
            reuse_wait_creator(round);
        }
        CHECK(cor_dsm_barrier_wait(all_bar));
        if (rank) b = lookup("rb");
        if (b != a)
            pt_fail("rb's idp %#llx is not ra's %#llx", (unsigned long long)b,
                    (unsigned long long)a);
        reuse_access(b, cached, 0, NB, 200, -1, 0);
        reuse_access(b, cached, 1, NB, 200, rank, 1000 + rank);
        CHECK(cor_dsm_barrier_wait(all_bar));
        if (rank == 0) {
            long v[NB];
            CHECK(cor_dsm_get(b, 0, NB, COR_LONG, v));
            for (int d = 0; d < ndom; d++)
                if (v[d] != 1000 + d)
                    pt_fail("rb[%d] = %ld, expected domain %d's write %d", d, v[d], d, 1000 + d);
        }
        CHECK(cor_dsm_barrier_wait(all_bar));
        if (rank == 0) CHECK(cor_dsm_destroy(b));
        CHECK(cor_dsm_barrier_wait(all_bar));
        printf("domain %d: reuse (%s): ra's idp back after %ld creations (%.1f s)\n", rank,
               cached ? "cached" : "home-only", made, now() - t0);
    }
    if (rank == 0) CHECK(cor_dsm_destroy(reuse_progress)); /* the others are past their reads */
    /* Objects made, read everywhere and destroyed one after the other: the other domains'
     * copies of them go (each keeps ~300 bytes until nothing maps it, not until finalize). */
    enum { CHURN = 300 };
    for (int k = 0; k < CHURN; k++) {
        cor_idp_t o = COR_IDP_NULL;
        if (rank == 0) {
            CHECK(cor_dsm_create("rc", COR_LONG, 8, COR_DSM_CACHED, &o));
            reuse_access(o, 1, 1, 8, k, -1, 0);
        }
        CHECK(cor_dsm_barrier_wait(all_bar));
        if (rank) o = lookup("rc");
        reuse_access(o, 1, 0, 8, k, -1, 0);
        CHECK(cor_dsm_barrier_wait(all_bar));
        if (rank == 0) CHECK(cor_dsm_destroy(o));
        CHECK(cor_dsm_barrier_wait(all_bar));
    }
    /* The same without barriers, under a cache budget of 0 (every idle copy evicted): domain
     * 0 destroys "rs" while the other domains' tasks map, read and unmap it (COR_ENOTFOUND
     * from any step is the race lost, nothing else is), so copies retire while tasks map
     * them and evictions list them. */
    CHECK(cor_dsm_set_cache_bytes(0));
    CHECK(cor_dsm_barrier_wait(all_bar));
    if (rank == 0) {
        for (int k = 0; k < CHURN; k++) {
            cor_idp_t o = COR_IDP_NULL;
            CHECK(cor_dsm_create("rs", COR_LONG, 8, COR_DSM_CACHED, &o));
            usleep(500);
            CHECK(cor_dsm_destroy(o));
        }
        write_mark("storm");
    } else {
        spawn_all(storm_task);
    }
    CHECK(cor_dsm_barrier_wait(all_bar)); /* domain 0 is done: the others' tasks stop */
    cor_dsm_stats_t st = {0};
    for (int i = 0; i < 500; i++) { /* the homes' news of destruction are on their way */
        CHECK(cor_dsm_stats_get(&st));
        if (st.copies == 0) break;
        usleep(10000);
    }
    if (st.copies != 0)
        pt_fail("%llu copies kept after %d objects were read here and destroyed",
                (unsigned long long)st.copies, CHURN);
    printf("domain %d: %s reuse; %d objects read everywhere and destroyed, %d more destroyed "
           "while read (%ld sections, %ld found it gone): %llu copies left\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", CHURN, CHURN,
           atomic_load(&storm_read), atomic_load(&storm_lost), (unsigned long long)st.copies);
}

int main(int argc, char **argv)
{
    pt_name = "dsm_proc";
    if (argc < 3) {
        fprintf(stderr, "usage: dsm_proc mix|cache|lockfair|barrier|kill|reuse|counts|lockkeep DIR "
                        "[-t TASKS] [-i ITERS] [-f RATIO] [-b CACHE_BYTES] [-H HOSTS]\n");
        return 2;
    }
    const char *mode = argv[1];
    dir = argv[2];
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-t"))
            ntasks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-i"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-f"))
            max_ratio = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-b"))
            cache_bytes = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-B"))
            CB = atoi(argv[i + 1]), cb_given = 1;
        else if (!strcmp(argv[i], "-H"))
            nhosts = atoi(argv[i + 1]);
    }
    if (ntasks < 1 || ntasks > 256 || iters < 1 || CB < 2 || CB > (1 << 20) || nhosts < 1) return 2;
    int rc = cor_init(&argc, &argv);
    if (rc != COR_OK) {
        fprintf(stderr, "dsm_proc: cor_init: %s\n", cor_strerror(rc));
        return 1;
    }
    rank = pt_rank = cor_domain_rank();
    ndom = cor_domain_count();
    rc = cor_dsm_init();
    if (rc != COR_OK) {
        fprintf(stderr, "dsm_proc: cor_dsm_init: %s\n", cor_dsm_strerror(rc));
        return 1;
    }
    write_mark("pid");
    int status = 0;
    if (!strcmp(mode, "kill")) {
        if (ndom < 2) return 2;
        status = run_kill();
        atomic_store(&finished, 1);
        /* the session lost a domain: leave without the collective finalize calls */
        fflush(stdout);
        _exit(status);
    }
    pt_watchdog_start(&ticks, &finished, STALL_S, 3, "hang");
    if (!strcmp(mode, "mix"))
        run_mix();
    else if (!strcmp(mode, "cache"))
        run_cache();
    else if (!strcmp(mode, "lockfair"))
        run_lockfair();
    else if (!strcmp(mode, "barrier"))
        run_barrier();
    else if (!strcmp(mode, "reuse"))
        run_reuse();
    else if (!strcmp(mode, "counts"))
        run_counts();
    else if (!strcmp(mode, "lockkeep"))
        run_lockkeep();
    else
        return 2;
    atomic_store(&finished, 1);
    CHECK(cor_dsm_finalize());
    CHECK(cor_finalize());
    if (atomic_load(&pt_failures)) {
        printf("domain %d: FAIL (%ld pt_failures)\n", rank, atomic_load(&pt_failures));
        status = 1;
    }
    return status;
}
