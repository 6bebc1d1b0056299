/*
 * lu: blocked right-looking LU factorization on libcordsm's cached objects.
 *
 * The N x N matrix is cut into B x B blocks; block (I, J) is a COR_DSM_CACHED object of B*B
 * doubles (row-major), homed at and updated only by its owner, domain (I + J) % D, and there
 * by one task for its whole life. This "diagonal-cyclic" layout gives every domain an equal
 * share of each step's trailing blocks, of its pivot column and of its pivot row (a 1-D
 * cyclic layout would leave the whole column to one domain). Step K:
 *   1. the owner of (K,K) factors it (unblocked LU);
 *   2. the owners of row K and column K solve them against it:
 *      U(K,J) = L(K,K)^-1 A(K,J), L(I,K) = A(I,K) U(K,K)^-1
 *   3. the owners of the trailing blocks update them: A(I,J) -= L(I,K) U(K,J), reading the
 *      pivot row and column blocks (every domain reads them in read sections, its copy
 *      fetched once).
 * No barrier between steps: a block is read elsewhere only once final, and its writer holds
 * a write section on it until then, so a read request simply waits at the home (see
 * the epochs below). Each domain does step K+1's panel as soon as its own inputs are updated
 * (lookahead), and the next diagonal block before the rest of step K when it can.
 * Every block a domain writes is homed there and read elsewhere only after it is final, so
 * the coherence protocol moves each remote panel block once per reading domain and
 * invalidates nothing.
 *
 * No pivoting: the matrix is generated strictly diagonally dominant by rows (off-diagonal
 * entries uniform in [-1, 1), diagonal N), for which LU without pivoting exists and is
 * backward stable. Every element is a function of (i, j) alone, so owners generate their
 * blocks without communication.
 *
 * Check: domain 0 gathers the factors, solves A x = b with them and compares with a
 * sequential unblocked LU solve of the same system (max relative difference of x, and the
 * relative residual |A x - b| / (|A| |x|), infinity norms); exit status 1 beyond tolerance.
 *
 *   cor-run -n 2 --route gm lu [-n N] [-b B] [-t TASKS]
 *   lu --baseline [-n N] [-b B]      the same blocked program, plain arrays, no DSM
 */
#include <dirent.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cor/cor.h>
#include <cor/dsm.h>

#include "app.h"

#define PROG "lu"
#define MAX_N 4096
#define MAX_NB 128 /* blocks per dimension: 16384 objects, within a domain's 65535 */
#define MAX_TASKS 64
#define TOL_X 1e-9      /* max |x - x_ref| / max |x_ref| */
#define TOL_RESID 1e-13 /* |A x - b| / (|A| |x|): a few ulps times log N here */

typedef struct block {
    cor_idp_t obj;
    cor_dsm_region_t rgn;
    double *data; /* B*B, row-major: the domain's copy (DSM) or plain memory (baseline) */
} block_t;

static uint64_t n = 1024, bs = 128, ntasks = 1;
static int nb; /* blocks per dimension */
static int baseline, perturb, rank, ndom = 1;
static block_t *blocks;
static cor_dsm_barrier_t bar;
static double t_start, t_end, cpu_start, cpu_end; /* task 0 of domain 0 */

static inline block_t *blk(int i, int j)
{
    return &blocks[(size_t)i * nb + j];
}

static inline int owner(int i, int j)
{
    return (i + j) % ndom;
}

/* ---- The matrix and the right-hand side ------------------------------------------------- */

static double unit(uint64_t key) /* uniform in [-1, 1) */
{
    return (double)(app_mix64(key) >> 11) * 0x1p-52 - 1.0;
}

static double a_elem(uint64_t i, uint64_t j)
{
    return i == j ? (double)n : unit(i * n + j + 1);
}

static double b_elem(uint64_t i)
{
    return unit(APP_GOLDEN ^ (i + 1)) * (double)n;
}

static void fill_block(double *d, int bi, int bj)
{
    for (uint64_t r = 0; r < bs; r++)
        for (uint64_t c = 0; c < bs; c++)
            d[r * bs + c] = a_elem((uint64_t)bi * bs + r, (uint64_t)bj * bs + c);
}

/* ---- Block kernels (B x B, row-major); the same in both modes --------------------------- */

/* In-place LU without pivoting: unit lower L below the diagonal, U on and above it. */
static void factor_diag(double *restrict a)
{
    size_t b = bs;
    for (size_t k = 0; k < b; k++) {
        double inv = 1.0 / a[k * b + k];
        for (size_t i = k + 1; i < b; i++) {
            double l = a[i * b + k] *= inv;
            for (size_t j = k + 1; j < b; j++)
                a[i * b + j] -= l * a[k * b + j];
        }
    }
}

/* x := L^-1 x, L the unit lower triangle of the factored diagonal block (a row block). */
static void solve_lower(const double *restrict lu, double *restrict x)
{
    size_t b = bs;
    for (size_t i = 1; i < b; i++)
        for (size_t p = 0; p < i; p++) {
            double l = lu[i * b + p];
            for (size_t j = 0; j < b; j++)
                x[i * b + j] -= l * x[p * b + j];
        }
}

/* x := x U^-1, U the upper triangle of the factored diagonal block (a column block). */
static void solve_upper(const double *restrict lu, double *restrict x)
{
    size_t b = bs;
    for (size_t r = 0; r < b; r++) {
        double *xr = x + r * b;
        for (size_t p = 0; p < b; p++) {
            double v = xr[p] /= lu[p * b + p];
            for (size_t q = p + 1; q < b; q++)
                xr[q] -= v * lu[p * b + q];
        }
    }
}

/* c -= a b, four rows of c at a time so each row of b loaded serves four. */
static void gemm_sub(double *restrict c, const double *restrict a, const double *restrict b)
{
    size_t m = bs, i = 0;
    for (; i + 4 <= m; i += 4) {
        double *c0 = c + i * m, *c1 = c0 + m, *c2 = c1 + m, *c3 = c2 + m;
        for (size_t p = 0; p < m; p++) {
            double a0 = a[i * m + p], a1 = a[(i + 1) * m + p];
            double a2 = a[(i + 2) * m + p], a3 = a[(i + 3) * m + p];
            const double *bp = b + p * m;
            for (size_t j = 0; j < m; j++) {
                c0[j] -= a0 * bp[j];
                c1[j] -= a1 * bp[j];
                c2[j] -= a2 * bp[j];
                c3[j] -= a3 * bp[j];
            }
        }
    }
    for (; i < m; i++)
        for (size_t p = 0; p < m; p++) {
            double ai = a[i * m + p];
            for (size_t j = 0; j < m; j++)
                c[i * m + j] -= ai * b[p * m + j];
        }
}

/* ---- Block access: sections on the domain's copy, or nothing in the baseline ------------ */

static void dsm_check(int err, const char *what, int i, int j)
{
    if (err)
        app_die(PROG ": domain %d: %s (block %d,%d): %s", rank, what, i, j, cor_dsm_strerror(err));
}

/* --trace: where a task's time went (its own counters; task 0 of each domain prints). */
static int trace;
static __thread struct {
    double bar, miss, pre; /* waiting in barriers, blocking read misses, prefetches */
    long nbar, nmiss, npre;
} tr;

static double *read_begin(int i, int j)
{
    double t0 = trace ? app_now() : 0;
    if (!baseline) dsm_check(cor_dsm_start_read(blk(i, j)->rgn), "cor_dsm_start_read", i, j);
    if (trace && owner(i, j) != rank) { /* a hit costs ~20 ns: the sum is the misses' wait */
        tr.miss += app_now() - t0;
        tr.nmiss++;
    }
    return blk(i, j)->data;
}

static void read_end(int i, int j)
{
    if (!baseline) dsm_check(cor_dsm_end_read(blk(i, j)->rgn), "cor_dsm_end_read", i, j);
}

static double *write_begin(int i, int j)
{
    if (!baseline) dsm_check(cor_dsm_start_write(blk(i, j)->rgn), "cor_dsm_start_write", i, j);
    return blk(i, j)->data;
}

static void write_end(int i, int j)
{
    if (!baseline) dsm_check(cor_dsm_end_write(blk(i, j)->rgn), "cor_dsm_end_write", i, j);
}

static void sync_domains(void)
{
    double t0 = trace ? app_now() : 0;
    if (!baseline) dsm_check(cor_dsm_barrier_wait(bar), "cor_dsm_barrier_wait", -1, -1);
    if (trace) {
        tr.bar += app_now() - t0;
        tr.nbar++;
    }
}

/* ---- The factorization: every task of every domain runs this ---------------------------- */

/* Every block has one task for its whole life, the writer of all its updates: the domain's
 * blocks are dealt round-robin to its tasks along the rows. */
static unsigned task_of(int i, int j)
{
    return (unsigned)(((size_t)i * nb + (size_t)j) / (size_t)ndom % ntasks);
}

static int mine(int i, int j, unsigned task)
{
    return owner(i, j) == rank && task_of(i, j) == task;
}

/*
 * Dataflow instead of a barrier per step. Iteration Q updates the trailing blocks with panel
 * Q-1 (step Q-1), factors diagonal block (Q,Q) and solves panel Q (row and column Q against
 * it) as soon as their own updates are done, before the rest of the trailing update
 * (lookahead): the next iteration's inputs are final early, and their transfers overlap that
 * rest. A block is read by others only once final (panel Q in iteration Q+1, (Q,Q) in
 * iteration Q), so its writer holds a write section on it from before anyone could ask until
 * it is final: a reader's request waits in the home's directory and the data leaves the
 * moment the section ends. The iterations are cut into epochs of W; all tasks of all domains
 * meet at the start of each, after taking the sections on their blocks read within the epoch
 * (the diagonal blocks of its iterations, and the panels whose readers are in it too). A
 * block final in an earlier epoch needs no section. W is the largest that keeps every task's
 * held sections within COR_DSM_MAX_SECTIONS, so one epoch (no barrier but the first and
 * the last) at the usual sizes.
 */
static int epoch_len = 1; /* W */

static int in_panel(int i, int j, int q) /* (i,j) is in row or column q, not the diagonal */
{
    return (i == q && j > q) || (j == q && i > q);
}

/* Does the writer hold (i,j) during the epoch starting at iteration e0? */
static int held_in_epoch(int i, int j, int e0)
{
    int p = i < j ? i : j, e1 = e0 + epoch_len; /* final in iteration p */
    if (i == j) return p >= e0 && p < e1;       /* read in iteration p */
    return p >= e0 && p + 1 < e1;               /* read in iteration p + 1 */
}

/* Adds `delta` to each writer's count of the sections it holds in the epoch starting at e0
 * (the blocks held_in_epoch names); returns the largest count after. Writers are numbered
 * domain * ntasks + task. */
static int epoch_count(int *cnt, int e0, int delta)
{
    int worst = 0, e1 = e0 + epoch_len;
    for (int p = e0; p < e1 && p < nb; p++)
        for (int x = p; x < nb; x++)
            for (int side = 0; side < 2; side++) {
                int i = side ? x : p, j = side ? p : x;
                if ((x == p && side) || !held_in_epoch(i, j, e0)) continue;
                int *c = &cnt[(size_t)owner(i, j) * ntasks + task_of(i, j)];
                *c += delta;
                if (*c > worst) worst = *c;
            }
    return worst;
}

/* The largest W whose epochs hold at most `budget` sections for every task of every domain:
 * all domains compute the same W (their barriers must match). */
static void choose_epoch_len(void)
{
    int budget = COR_DSM_MAX_SECTIONS - 8; /* a few reads open beside */
    int *cnt = calloc((size_t)ndom * ntasks, sizeof *cnt);
    if (!cnt) app_die(PROG ": out of memory");
    for (epoch_len = nb; epoch_len > 1; epoch_len--) {
        int worst = 0;
        for (int e0 = 0; e0 < nb && worst <= budget; e0 += epoch_len) {
            int w = epoch_count(cnt, e0, 1);
            epoch_count(cnt, e0, -1);
            if (w > worst) worst = w;
        }
        if (worst <= budget) break;
    }
    free(cnt);
}

/* Per task: its pending prefetches, the remote blocks it has read (final, copies valid), the
 * write sections it holds. Per domain: which of its blocks are final. */
static __thread cor_dsm_req_t *pre;
static __thread unsigned char *have, *held;
static _Atomic unsigned char *final_here;

static size_t bidx(int i, int j)
{
    return (size_t)i * nb + j;
}

/* Prefetch: requests a read section on a block homed elsewhere, early; if it is not final
 * yet, the request waits at its home until it is. */
static void prefetch(int i, int j)
{
    size_t b = bidx(i, j);
    if (baseline || owner(i, j) == rank || have[b] || pre[b]) return;
    dsm_check(cor_dsm_start_readI(blk(i, j)->rgn, &pre[b]), "cor_dsm_start_readI", i, j);
}

/* Completes the prefetch of (i, j), if any, and ends its section at once: the copy stays
 * valid (nothing writes a final block), so the read section that follows is a hit. */
static void prefetched(int i, int j)
{
    size_t b = bidx(i, j);
    if (baseline || owner(i, j) == rank) return;
    if (pre[b]) {
        double t0 = trace ? app_now() : 0;
        dsm_check(cor_dsm_wait(&pre[b]), "cor_dsm_wait (prefetch)", i, j);
        pre[b] = NULL;
        dsm_check(cor_dsm_end_read(blk(i, j)->rgn), "cor_dsm_end_read (prefetch)", i, j);
        if (trace) {
            tr.pre += app_now() - t0;
            tr.npre++;
        }
    }
    have[b] = 1;
}

/* The writer's access to its own block: the held section, or a section of its own. */
static double *own_begin(int i, int j)
{
    return held[bidx(i, j)] ? blk(i, j)->data : write_begin(i, j);
}

static void own_end(int i, int j)
{
    if (!held[bidx(i, j)]) write_end(i, j);
}

/* (i,j) is final: readers waiting at its home get it now. */
static void final(int i, int j)
{
    size_t b = bidx(i, j);
    if (held[b]) write_end(i, j);
    held[b] = 0;
    atomic_store_explicit(&final_here[b], 1, memory_order_release);
}

static int is_final_here(int i, int j)
{
    return atomic_load_explicit(&final_here[bidx(i, j)], memory_order_acquire);
}

/* Is final block (i,j) readable without waiting? A remote one: its prefetch completed. */
static int ready(int i, int j)
{
    size_t b = bidx(i, j);
    if (baseline || owner(i, j) == rank) return is_final_here(i, j);
    if (have[b]) return 1;
    int done = 0;
    if (!pre[b] || cor_dsm_test(&pre[b], &done) || !done) return 0;
    pre[b] = NULL; /* its section started: prefetched() would end it */
    dsm_check(cor_dsm_end_read(blk(i, j)->rgn), "cor_dsm_end_read (prefetch)", i, j);
    have[b] = 1;
    return 1;
}

/* A trailing update of step k: A(i,j) -= L(i,k) U(k,j). */
static void update(int k, int i, int j)
{
    prefetched(k, j);
    prefetched(i, k);
    const double *u = read_begin(k, j);
    const double *l = read_begin(i, k);
    gemm_sub(own_begin(i, j), l, u);
    own_end(i, j);
    read_end(i, k);
    read_end(k, j);
}

/* Step k's updates of this task's blocks of row and column c, the diagonal block first
 * (unless it is final already: done early). */
static void update_cross(int k, int c, unsigned task)
{
    if (mine(c, c, task) && !is_final_here(c, c)) update(k, c, c);
    for (int x = c + 1; x < nb; x++) {
        if (mine(c, x, task)) update(k, c, x);
        if (mine(x, c, task)) update(k, x, c);
    }
}

/* Factors (q,q), then solves this task's blocks of panel q against it. */
static void panel(int q, unsigned task)
{
    if (mine(q, q, task) && !is_final_here(q, q)) {
        factor_diag(own_begin(q, q));
        own_end(q, q);
        final(q, q);
    }
    for (int x = q + 1; x < nb; x++)
        for (int side = 0; side < 2; side++) {
            int i = side ? x : q, j = side ? q : x;
            if (!mine(i, j, task)) continue;
            prefetched(q, q);
            const double *d = read_begin(q, q);
            if (side)
                solve_upper(d, own_begin(i, j));
            else
                solve_lower(d, own_begin(i, j));
            own_end(i, j);
            read_end(q, q);
            final(i, j);
        }
}

/* The remote blocks this task reads in iteration q: panel q-1 for its updates, (q,q) for its
 * panel solves. */
static void prefetch_iteration(int q, unsigned task)
{
    for (int i = q; i < nb; i++)
        for (int j = q; j < nb; j++) {
            if (!mine(i, j, task)) continue;
            if (q > 0) {
                prefetch(q - 1, j);
                prefetch(i, q - 1);
            }
            if (in_panel(i, j, q)) prefetch(q, q);
        }
}

/* Epoch start: the sections on this task's blocks read within it, then all tasks meet. */
static void epoch_begin(int e0, unsigned task)
{
    if (!baseline)
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < nb; j++)
                if (mine(i, j, task) && held_in_epoch(i, j, e0) && !held[bidx(i, j)] &&
                    !is_final_here(i, j)) {
                    write_begin(i, j);
                    held[bidx(i, j)] = 1;
                }
    sync_domains();
}

/* Deeper lookahead for the next diagonal block, the head of the critical path: its last
 * update (step q) and its factorization at once, if the blocks of panel q it needs are
 * here (without waiting: they may still be in flight). */
static void early_diag(int q, unsigned task)
{
    int d = q + 1;
    if (d >= nb || !mine(d, d, task) || is_final_here(d, d) || !ready(q, d) || !ready(d, q)) return;
    update(q, d, d);
    factor_diag(own_begin(d, d));
    own_end(d, d);
    final(d, d);
}

static void factor(unsigned task)
{
    size_t nblk = (size_t)nb * nb;
    pre = calloc(nblk, sizeof *pre);
    have = calloc(nblk, 1);
    held = calloc(nblk, 1);
    if (!pre || !have || !held) app_die(PROG ": out of memory");
    sync_domains(); /* every block is generated and mapped */
    if (rank == 0 && task == 0) {
        t_start = app_now();
        cpu_start = app_cpu_now();
    }
    for (int q = 0; q < nb; q++) {
        if (q % epoch_len == 0) epoch_begin(q, task);
        if (!baseline) {
            prefetch_iteration(q, task);
            if ((q + 1) % epoch_len) prefetch_iteration(q + 1, task); /* held: safe to ask */
        }
        /* row and column q first (the diagonal block, unless done early, first of all), then
         * panel q; then row and column q + 1 and perhaps the next diagonal block; then the
         * rest, the blocks whose inputs are here before those waiting for prefetches */
        int r = q + 1;
        if (q > 0) update_cross(q - 1, q, task);
        panel(q, task);
        if (r == nb) break;
        if (q > 0) update_cross(q - 1, r, task);
        early_diag(q, task);
        for (int pass = 0; q > 0 && pass < 2; pass++)
            for (int i = r + 1; i < nb; i++)
                for (int j = r + 1; j < nb; j++) {
                    if (!mine(i, j, task)) continue;
                    int local = owner(q - 1, j) == rank && owner(i, q - 1) == rank;
                    if (pass == !local) update(q - 1, i, j);
                }
    }
    sync_domains(); /* every block is final */
    if (rank == 0 && task == 0) {
        t_end = app_now();
        cpu_end = app_cpu_now();
    }
    free(pre);
    free(have);
    free(held);
}

/* --trace: records the CPU time of each thread of the process (record), or prints what each
 * used since (its tid: threads have no names; the compute task is the newest). */
static unsigned long trace_tid[64], trace_cpu[64];
static int trace_n;

static void trace_threads(int record)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        unsigned long ut = 0, st = 0, tid = strtoul(e->d_name, NULL, 10), base = 0;
        char *c = f && fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
        if (f) fclose(f);
        if (!c ||
            sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
            continue;
        if (record) {
            if (trace_n < 64) {
                trace_tid[trace_n] = tid;
                trace_cpu[trace_n++] = ut + st;
            }
            continue;
        }
        for (int k = 0; k < trace_n; k++)
            if (trace_tid[k] == tid) base = trace_cpu[k];
        if (ut + st > base)
            fprintf(stderr, PROG ": trace: domain %d thread %lu: %.3f s of CPU\n", rank, tid,
                    (double)(ut + st - base) / (double)sysconf(_SC_CLK_TCK));
    }
    if (d) closedir(d);
}

static int factor_task(void *arg)
{
    unsigned task = (unsigned)(uintptr_t)arg;
    struct rusage r0, r1;
    double c0 = app_cpu_now();
    if (trace && task == 0) {
        getrusage(RUSAGE_SELF, &r0);
        trace_threads(1);
    }
    factor(task);
    if (trace && task == 0) {
        getrusage(RUSAGE_SELF, &r1);
        fprintf(stderr,
                PROG ": trace: domain %d task 0: epochs of %d steps; barriers %.4f s (%ld), "
                     "prefetch waits %.4f s (%ld), read starts on remote blocks %.4f s (%ld); "
                     "the process: %.4f s of CPU, %ld page faults\n",
                rank, epoch_len, tr.bar, tr.nbar, tr.pre, tr.npre, tr.miss, tr.nmiss,
                app_cpu_now() - c0, r1.ru_minflt - r0.ru_minflt);
        trace_threads(0);
    }
    return 0;
}

/* ---- The check -------------------------------------------------------------------------- */

/* Solves (L U) x = b in place, L unit lower and U upper packed in the N x N matrix lu. */
static void lu_solve(const double *lu, double *x)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            x[i] -= lu[i * n + j] * x[j];
    for (size_t i = n; i-- > 0;) {
        for (size_t j = i + 1; j < n; j++)
            x[i] -= lu[i * n + j] * x[j];
        x[i] /= lu[i * n + i];
    }
}

/* Gathers the blocked factors (read sections: domain 0's copies of remote blocks are
 * fetched here), solves with them and with a sequential unblocked LU; 0 if they agree. */
static int check(void)
{
    size_t nn = n * n;
    double *f = malloc(nn * sizeof *f), *ref = calloc(nn, sizeof *ref);
    double *x = malloc(n * sizeof *x), *xr = malloc(n * sizeof *xr);
    if (!f || !ref || !x || !xr) app_die(PROG ": out of memory for the check (N = %" PRIu64 ")", n);
    for (int bi = 0; bi < nb; bi++)
        for (int bj = 0; bj < nb; bj++) {
            const double *d = read_begin(bi, bj);
            for (size_t r = 0; r < bs; r++)
                memcpy(f + ((size_t)bi * bs + r) * n + (size_t)bj * bs, d + r * bs, bs * sizeof *d);
            read_end(bi, bj);
        }
    if (perturb) /* the check's own test: one wrong factor must be caught */
        f[(n / 2) * n + n / 3] += 1e-6;

    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            ref[i * n + j] = a_elem(i, j);
    for (size_t k = 0; k < n; k++) /* the reference: unblocked, row by row */
        for (size_t i = k + 1; i < n; i++) {
            double l = ref[i * n + k] /= ref[k * n + k];
            for (size_t j = k + 1; j < n; j++)
                ref[i * n + j] -= l * ref[k * n + j];
        }
    for (size_t i = 0; i < n; i++)
        x[i] = xr[i] = b_elem(i);
    lu_solve(f, x);
    lu_solve(ref, xr);

    double dmax = 0, xmax = 0, rmax = 0, amax = 0, xnorm = 0;
    for (size_t i = 0; i < n; i++) {
        dmax = fmax(dmax, fabs(x[i] - xr[i]));
        xmax = fmax(xmax, fabs(xr[i]));
        xnorm = fmax(xnorm, fabs(x[i]));
        double r = -b_elem(i), rowsum = 0;
        for (size_t j = 0; j < n; j++) {
            double a = a_elem(i, j);
            r += a * x[j];
            rowsum += fabs(a);
        }
        rmax = fmax(rmax, fabs(r));
        amax = fmax(amax, rowsum);
    }
    double dx = dmax / xmax, resid = rmax / (amax * xnorm);
    int ok = dx <= TOL_X && resid <= TOL_RESID && isfinite(dx) && isfinite(resid);
    printf(PROG ": check %s: max |x - x_ref| / max |x_ref| = %.2e (tolerance %.0e), "
                "|Ax - b| / (|A| |x|) = %.2e (tolerance %.0e)\n",
           ok ? "PASS" : "FAIL", dx, TOL_X, resid, TOL_RESID);
    free(f);
    free(ref);
    free(x);
    free(xr);
    return ok ? 0 : -1;
}

static void report(void)
{
    double secs = t_end - t_start, flops = 2.0 / 3.0 * (double)n * (double)n * (double)n;
    /* The process's CPU time (every thread: tasks, DSM service, core) beside the wall time:
     * on a loaded machine the wall time also counts the time others had the cores. */
    printf(PROG ": %s, %d domain%s x %" PRIu64 " task%s, N = %" PRIu64 ", B = %" PRIu64
                ": %.4f s, %.3f GFLOP/s (domain 0 used %.4f s of CPU)\n",
           baseline ? "baseline (plain arrays)" : "dsm", ndom, ndom > 1 ? "s" : "", ntasks,
           ntasks > 1 ? "s" : "", n, bs, secs, flops / secs / 1e9, cpu_end - cpu_start);
}

/* ---- Setup ------------------------------------------------------------------------------ */

static int run_baseline(void)
{
    blocks = calloc((size_t)nb * nb, sizeof *blocks);
    final_here = calloc((size_t)nb * nb, sizeof *final_here);
    if (!blocks || !final_here) app_die(PROG ": out of memory");
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nb; j++) {
            if (!(blk(i, j)->data = malloc(bs * bs * sizeof(double))))
                app_die(PROG ": out of memory for the blocks");
            fill_block(blk(i, j)->data, i, j);
        }
    factor(0);
    int bad = check();
    report();
    for (int i = 0; i < nb * nb; i++)
        free(blocks[i].data);
    free(blocks);
    free((void *)final_here);
    return bad ? 1 : 0;
}

static void block_name(char *name, size_t len, int i, int j)
{
    snprintf(name, len, "lu.%d.%d", i, j);
}

static int run_dsm(int *argc, char ***argv)
{
    dsm_check(cor_init(argc, argv), "cor_init", -1, -1);
    rank = cor_domain_rank();
    ndom = cor_domain_count();
    dsm_check(cor_dsm_init(), "cor_dsm_init", -1, -1);
    blocks = calloc((size_t)nb * nb, sizeof *blocks);
    final_here = calloc((size_t)nb * nb, sizeof *final_here);
    if (!blocks || !final_here) app_die(PROG ": out of memory");

    /* Owners create and fill their blocks (a write section on the home's own copy). */
    char name[COR_NAME_MAX];
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nb; j++) {
            if (owner(i, j) != rank) continue;
            block_t *b = blk(i, j);
            block_name(name, sizeof name, i, j);
            dsm_check(cor_dsm_create(name, COR_DOUBLE, bs * bs, COR_DSM_CACHED, &b->obj),
                      "cor_dsm_create", i, j);
            dsm_check(cor_dsm_map(b->obj, &b->rgn), "cor_dsm_map", i, j);
            dsm_check(cor_dsm_region_data(b->rgn, (void **)&b->data, NULL), "cor_dsm_region_data",
                      i, j);
            fill_block(write_begin(i, j), i, j);
            write_end(i, j);
        }
    dsm_check(cor_barrier(), "cor_barrier", -1, -1); /* every block exists */
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nb; j++) {
            block_t *b = blk(i, j);
            if (owner(i, j) == rank) continue;
            block_name(name, sizeof name, i, j);
            dsm_check(cor_dsm_lookup(name, &b->obj), "cor_dsm_lookup", i, j);
            dsm_check(cor_dsm_map(b->obj, &b->rgn), "cor_dsm_map", i, j);
            dsm_check(cor_dsm_region_data(b->rgn, (void **)&b->data, NULL), "cor_dsm_region_data",
                      i, j);
        }
    dsm_check(cor_dsm_barrier_create("lu", COR_IDP_NULL, (int)ntasks, &bar),
              "cor_dsm_barrier_create", -1, -1);

    choose_epoch_len();
    cor_idp_t task[MAX_TASKS];
    for (uint64_t t = 0; t < ntasks; t++)
        dsm_check(cor_task_spawn("lu", factor_task, (void *)(uintptr_t)t, &task[t]),
                  "cor_task_spawn", -1, -1);
    for (uint64_t t = 0; t < ntasks; t++) {
        int status = 0;
        dsm_check(cor_task_join(task[t], &status), "cor_task_join", -1, -1);
        dsm_check(status, "factor task", -1, -1);
    }

    int bad = 0;
    if (rank == 0) {
        bad = check();
        report();
    }
    fflush(stdout);
    if (bad) app_die(PROG ": domain 0: the factors do not solve the system");
    dsm_check(cor_dsm_barrier_destroy(bar), "cor_dsm_barrier_destroy", -1, -1);
    for (int i = 0; i < nb * nb; i++)
        dsm_check(cor_dsm_unmap(blocks[i].rgn), "cor_dsm_unmap", i / nb, i % nb);
    dsm_check(cor_dsm_finalize(), "cor_dsm_finalize", -1, -1);
    dsm_check(cor_finalize(), "cor_finalize", -1, -1);
    free(blocks);
    free((void *)final_here);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: cor-run -n D [--route udp|gm] " PROG " [-n N] [-b B] [-t TASKS]\n"
            "       " PROG " --baseline [-n N] [-b B]\n"
            "  -n  matrix order (default 1024, at most %d; a multiple of B)\n"
            "  -b  block size (default 128; at most %d blocks per dimension)\n"
            "  -t  compute tasks per domain (default 1, at most %d)\n"
            "  --perturb  test the check: one factor is changed before the solve\n"
            "  --trace    per domain: time in barriers and waits, CPU time of each thread\n",
            MAX_N, MAX_NB, MAX_TASKS);
}

int main(int argc, char **argv)
{
    const struct app_opt opts[] = {
        {"--baseline", &baseline, NULL, 0, 0},
        {"--trace", &trace, NULL, 0, 0},
        {"--perturb", &perturb, NULL, 0, 0},
        {"-n", NULL, &n, 1, MAX_N},
        {"-b", NULL, &bs, 1, MAX_N},
        {"-t", NULL, &ntasks, 1, MAX_TASKS},
        {NULL, NULL, NULL, 0, 0},
    };
    int rc = app_parse_args(PROG, argc, argv, opts, usage);
    if (rc >= 0) return rc;
    if (n % bs) {
        fprintf(stderr,
                PROG ": the order %" PRIu64 " is not a multiple of the block size %" PRIu64 "\n", n,
                bs);
        return 2;
    }
    if (baseline && ntasks != 1) {
        fprintf(stderr, PROG ": the baseline runs one thread (no -t)\n");
        return 2;
    }
    if (n / bs > MAX_NB) {
        fprintf(stderr, PROG ": %" PRIu64 " / %" PRIu64 " is more than %d blocks per dimension\n",
                n, bs, MAX_NB);
        return 2;
    }
    nb = (int)(n / bs);
    return baseline ? run_baseline() : run_dsm(&argc, &argv);
}
