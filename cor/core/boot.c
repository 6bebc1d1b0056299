/*
 * The bootstrap's front: picks the backend the environment names, the one-domain session,
 * the calls that go through a backend's ops table, and what the backends share.
 *
 * Order (first match wins):
 *   1. COR_BOOT set                 -> cor-run (cor-run sets it for the domains it starts; it
 *                                      wins over PMIx variables a cor-run started by srun or
 *                                      mpirun passes on to its domains)
 *   2. PMIX_NAMESPACE, PMIX_RANK or a PMIX_SERVER_URI* variable set
 *                                   -> PMIx (COR_EBOOT if this libcor was built without it)
 *   3. a launcher that started several copies without PMIx (SLURM_STEP_NUM_TASKS or
 *      OMPI_COMM_WORLD_SIZE above 1): COR_EBOOT naming it (`srun` without `--mpi=pmix` would
 *      otherwise run N unrelated one-domain sessions)
 *   4. otherwise                    -> a one-domain session
 */
#include "boot.h"
#include "knobs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void cor__boot_log(const struct cor_boot *b, const char *backend, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cor[%d]: bootstrap (%s): %s\n", b ? b->rank : -1, backend, msg);
}

int cor__boot_timeout_s(void)
{
    return (int)cor__knob_long(COR_K_BOOT_TIMEOUT);
}

uint64_t cor__boot_random_cookie(void)
{
    uint64_t c = 0;
    if (getrandom(&c, sizeof c, 0) != (ssize_t)sizeof c || c == 0) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        c ^= ((uint64_t)t.tv_nsec << 32) ^ (uint64_t)t.tv_sec ^ ((uint64_t)getpid() << 16);
    }
    return c ? c : 1;
}

int cor__boot_route_name_ok(const char *s)
{
    _Static_assert(sizeof(((struct cor_boot_addr *)0)->route) == COR_BOOT_ROUTE_MAX,
                   "route names differ in size from the bootstrap lines'");
    return cor__bootline_route_ok(s); /* one rule for every backend and cor-run */
}

int cor__boot_check_addrs(const struct cor_boot *b, const char *backend, int n,
                          const struct cor_boot_addr *mine)
{
    if (n < 1 || n > COR_BOOT_MAX_ADDRS || !mine) {
        cor__boot_log(b, backend, "exchange: %d addresses (1..%d allowed)", n, COR_BOOT_MAX_ADDRS);
        return COR_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (strnlen(mine[i].route, sizeof mine[i].route) == sizeof mine[i].route ||
            !cor__boot_route_name_ok(mine[i].route) ||
            strnlen(mine[i].addr, sizeof mine[i].addr) == sizeof mine[i].addr ||
            mine[i].port_index < -1000000 || mine[i].port_index > 1000000) {
            cor__boot_log(b, backend, "exchange: address %d is malformed", i);
            return COR_EINVAL;
        }
    }
    return COR_OK;
}

/* ---- the address blob (boot.h) ------------------------------------------------------------ */

#define BLOB_MAGIC 'C'
#define BLOB_VERSION 1

int cor__boot_blob_encode(int n, const struct cor_boot_addr *mine, unsigned char **blob,
                          size_t *len)
{
    *blob = NULL;
    *len = 0;
    if (n < 1 || n > COR_BOOT_MAX_ADDRS) return COR_EINVAL;
    size_t cap = 3 + (size_t)n * (1 + sizeof mine->route + 4 + 2 + COR_ADDR_MAX), k = 0;
    unsigned char *p = malloc(cap);
    if (!p) return COR_ENOMEM;
    p[k++] = BLOB_MAGIC;
    p[k++] = BLOB_VERSION;
    p[k++] = (unsigned char)n;
    for (int i = 0; i < n; i++) {
        size_t rl = strnlen(mine[i].route, sizeof mine[i].route);
        size_t al = strnlen(mine[i].addr, sizeof mine[i].addr);
        if (rl == 0 || rl == sizeof mine[i].route || al == sizeof mine[i].addr) {
            free(p);
            return COR_EINVAL;
        }
        uint32_t pi = (uint32_t)mine[i].port_index;
        p[k++] = (unsigned char)rl;
        memcpy(p + k, mine[i].route, rl);
        k += rl;
        for (int s = 24; s >= 0; s -= 8)
            p[k++] = (unsigned char)(pi >> s);
        p[k++] = (unsigned char)(al >> 8);
        p[k++] = (unsigned char)al;
        memcpy(p + k, mine[i].addr, al);
        k += al;
    }
    *blob = p;
    *len = k;
    return COR_OK;
}

int cor__boot_blob_decode(const unsigned char *blob, size_t len, int n, struct cor_boot_addr *out)
{
    size_t k = 3;
    if (!blob || len < 3 || blob[0] != BLOB_MAGIC || blob[1] != BLOB_VERSION || blob[2] != n ||
        n < 1 || n > COR_BOOT_MAX_ADDRS)
        return COR_EINVAL;
    for (int i = 0; i < n; i++) {
        struct cor_boot_addr *a = &out[i];
        memset(a, 0, sizeof *a);
        if (len - k < 1) return COR_EINVAL;
        size_t rl = blob[k++];
        if (rl == 0 || rl >= sizeof a->route || len - k < rl + 4 + 2) return COR_EINVAL;
        memcpy(a->route, blob + k, rl);
        k += rl;
        if (!cor__boot_route_name_ok(a->route)) return COR_EINVAL;
        uint32_t pi = 0;
        for (int s = 0; s < 4; s++)
            pi = pi << 8 | blob[k++];
        a->port_index = (int)(int32_t)pi;
        if (a->port_index < -1000000 || a->port_index > 1000000) return COR_EINVAL;
        size_t al = (size_t)blob[k] << 8 | blob[k + 1];
        k += 2;
        if (al >= sizeof a->addr || len - k < al || memchr(blob + k, 0, al)) return COR_EINVAL;
        memcpy(a->addr, blob + k, al);
        k += al;
    }
    return k == len ? COR_OK : COR_EINVAL;
}

/* ---- the one-domain session --------------------------------------------------------------- */

static int none_exchange(struct cor_boot *b, int n, const struct cor_boot_addr *mine,
                         struct cor_boot_addr **all)
{
    int rc = cor__boot_check_addrs(b, "none", n, mine);
    if (rc) return rc;
    *all = malloc((size_t)n * sizeof **all);
    if (!*all) return COR_ENOMEM;
    memcpy(*all, mine, (size_t)n * sizeof **all);
    return COR_OK;
}

static int none_barrier(struct cor_boot *b)
{
    (void)b;
    return COR_OK;
}

static void none_lost(struct cor_boot *b, int rank)
{
    (void)b;
    (void)rank;
}

static void none_on_death(struct cor_boot *b, cor_boot_death_fn fn, void *arg)
{
    (void)b;
    (void)fn;
    (void)arg;
}

static void none_finish(struct cor_boot *b)
{
    free(b);
}

static const struct cor_boot_ops none_ops = {
    .name = "none",
    .exchange = none_exchange,
    .barrier = none_barrier,
    .lost = none_lost,
    .on_death = none_on_death,
    .finish = none_finish,
};

static int none_init(struct cor_boot **bootp)
{
    struct cor_boot *b = calloc(1, sizeof *b);
    if (!b) return COR_ENOMEM;
    *b = (struct cor_boot){
        .ops = &none_ops, .rank = 0, .size = 1, .cookie = cor__boot_random_cookie()};
    *bootp = b;
    return COR_OK;
}

/* ---- choosing ------------------------------------------------------------------------------ */

static int set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

/* The name of a PMIx variable in the environment that says a PMIx server started us, or NULL. */
static const char *pmix_variable(void)
{
    if (set("PMIX_NAMESPACE")) return "PMIX_NAMESPACE";
    if (set("PMIX_RANK")) return "PMIX_RANK";
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "PMIX_SERVER_URI", 15) == 0) return "PMIX_SERVER_URI";
    return NULL;
}

/* A launcher that started several copies of us but gave no way to reach it, or NULL. */
static const char *launcher_without_pmix(char *why, size_t len)
{
    static const struct {
        const char *var, *launcher, *hint;
    } known[] = {
        {"SLURM_STEP_NUM_TASKS", "Slurm (srun)", "run it with srun --mpi=pmix"},
        {"OMPI_COMM_WORLD_SIZE", "Open MPI (mpirun)", "its PMIx server did not set PMIX_*"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const char *v = getenv(known[i].var);
        if (v && atol(v) > 1) {
            snprintf(why, len, "%s started %s copies of this program (%s=%s) without PMIx: %s",
                     known[i].launcher, v, known[i].var, v, known[i].hint);
            return known[i].launcher;
        }
    }
    return NULL;
}

int cor__boot_init(struct cor_boot **bootp, int *rank, int *size, uint64_t *cookie)
{
    if (!bootp || !rank || !size || !cookie) return COR_EINVAL;
    *bootp = NULL;
    int rc;
    const char *pmix = pmix_variable();
    char why[256];
    if (set(cor__knob_name(COR_K_BOOT))) {
        rc = cor__boot_corrun_init(bootp);
    } else if (pmix) {
#ifdef COR_HAVE_PMIX
        rc = cor__boot_pmix_init(bootp);
#else
        cor__boot_log(NULL, "pmix",
                      "%s is set: a PMIx launcher (srun --mpi=pmix, mpirun) started this "
                      "program, but this libcor was built without PMIx (configure found no "
                      "libpmix-dev, or --without-pmix)",
                      pmix);
        rc = COR_EBOOT;
#endif
    } else if (launcher_without_pmix(why, sizeof why)) {
        cor__boot_log(NULL, "none", "%s", why);
        rc = COR_EBOOT;
    } else {
        rc = none_init(bootp);
    }
    if (rc) return rc;
    *rank = (*bootp)->rank;
    *size = (*bootp)->size;
    *cookie = (*bootp)->cookie;
    return COR_OK;
}

/* This host's name as the domains publish it: the UTS node name ("" if there is none). */
static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len - 1) != 0) buf[0] = 0;
    buf[len - 1] = 0;
}

int cor__boot_exchange(struct cor_boot *b, int n, const struct cor_boot_addr *mine,
                       struct cor_boot_addr **all)
{
    if (!b || !all || n < 0 || n >= COR_BOOT_MAX_ADDRS || (n && !mine)) return COR_EINVAL;
    *all = NULL;
    int m = n + 1; /* our addresses, then our host name */
    struct cor_boot_addr *ext = calloc((size_t)m, sizeof *ext), *got = NULL;
    if (!ext) return COR_ENOMEM;
    if (n) memcpy(ext, mine, (size_t)n * sizeof *ext);
    snprintf(ext[n].route, sizeof ext[n].route, "%s", COR_BOOT_HOST_ROUTE);
    host_name(ext[n].addr, sizeof ext[n].addr);
    int rc = b->ops->exchange(b, m, ext, &got);
    if (rc) goto out;
    rc = COR_ENOMEM;
    unsigned char *local = b->local ? NULL : calloc((size_t)b->size, 1);
    struct cor_boot_addr *table = malloc((size_t)b->size * (size_t)(n ? n : 1) * sizeof *table);
    if ((!b->local && !local) || !table) {
        free(local);
        free(table);
        goto out;
    }
    for (int r = 0; r < b->size; r++) {
        const struct cor_boot_addr *h = &got[(size_t)r * (size_t)m + (size_t)n];
        if (strcmp(h->route, COR_BOOT_HOST_ROUTE) != 0) {
            cor__boot_log(b, b->ops->name,
                          "domain %d published no host name (a libcor of another "
                          "version?)",
                          r);
            free(local);
            free(table);
            rc = COR_EBOOT;
            goto out;
        }
        if (local) local[r] = r == b->rank || strcmp(h->addr, ext[n].addr) == 0;
        if (n)
            memcpy(&table[(size_t)r * (size_t)n], &got[(size_t)r * (size_t)m],
                   (size_t)n * sizeof *table);
    }
    if (local) b->local = local;
    *all = table;
    rc = COR_OK;
out:
    free(ext);
    free(got);
    return rc;
}

/* Keeps the table of cor__boot_exchange compact for cor__boot_lookup: one blob per domain. */
static int keep_table(struct cor_boot *b, int n, const struct cor_boot_addr *all)
{
    size_t *at = malloc(((size_t)b->size + 1) * sizeof *at), cap = 0, used = 0;
    unsigned char *kept = NULL;
    if (!at) return COR_ENOMEM;
    for (int r = 0; r < b->size; r++) {
        unsigned char *blob;
        size_t len;
        int rc = cor__boot_blob_encode(n, &all[(size_t)r * (size_t)n], &blob, &len);
        if (rc == COR_OK && used + len > cap) {
            size_t ncap = cap ? 2 * cap : (size_t)b->size * (len + 8);
            while (ncap < used + len)
                ncap *= 2;
            unsigned char *k = realloc(kept, ncap);
            if (!k) {
                free(blob);
                rc = COR_ENOMEM;
            } else {
                kept = k;
                cap = ncap;
            }
        }
        if (rc) {
            free(kept);
            free(at);
            return rc;
        }
        at[r] = used;
        memcpy(kept + used, blob, len);
        used += len;
        free(blob);
    }
    at[b->size] = used;
    b->kept = kept;
    b->kept_at = at;
    return COR_OK;
}

int cor__boot_publish(struct cor_boot *b, int n, const struct cor_boot_addr *mine)
{
    if (!b || n < 1 || n >= COR_BOOT_MAX_ADDRS || !mine || b->published) return COR_EINVAL;
    int rc = COR_ENOTSUP;
    if (b->ops->publish) {
        int m = n + 1; /* as cor__boot_exchange: our addresses, then our host name */
        struct cor_boot_addr *ext = calloc((size_t)m, sizeof *ext);
        if (!ext) return COR_ENOMEM;
        memcpy(ext, mine, (size_t)n * sizeof *ext);
        snprintf(ext[n].route, sizeof ext[n].route, "%s", COR_BOOT_HOST_ROUTE);
        host_name(ext[n].addr, sizeof ext[n].addr);
        rc = b->ops->publish(b, m, ext);
        free(ext);
    }
    if (rc == COR_ENOTSUP) {
        struct cor_boot_addr *all = NULL;
        rc = cor__boot_exchange(b, n, mine, &all);
        if (rc == COR_OK) rc = keep_table(b, n, all);
        free(all);
    }
    if (rc == COR_OK) b->published = n;
    return rc;
}

int cor__boot_lookup(struct cor_boot *b, int rank, int n, struct cor_boot_addr *out)
{
    if (!b || rank < 0 || rank >= b->size || n != b->published || !out) return COR_EINVAL;
    int rc;
    __atomic_fetch_add(&b->lookups, 1, __ATOMIC_RELAXED);
    if (b->kept) {
        size_t at = b->kept_at[rank], len = b->kept_at[rank + 1] - at;
        rc = cor__boot_blob_decode(b->kept + at, len, n, out);
    } else {
        int m = n + 1;
        struct cor_boot_addr *ext = calloc((size_t)m, sizeof *ext);
        if (!ext) return COR_ENOMEM;
        rc = b->ops->lookup(b, rank, m, ext);
        if (rc == COR_OK && strcmp(ext[n].route, COR_BOOT_HOST_ROUTE) != 0) rc = COR_EINVAL;
        if (rc == COR_OK) memcpy(out, ext, (size_t)n * sizeof *out);
        free(ext);
    }
    if (rc == COR_EINVAL) {
        cor__boot_log(b, b->ops->name, "the addresses of domain %d are malformed", rank);
        rc = COR_EBOOT;
    }
    return rc;
}

int cor__boot_local(const struct cor_boot *b, int rank)
{
    if (!b || rank < 0 || rank >= b->size) return 0;
    return b->local ? b->local[rank] != 0 : 1;
}

void cor__boot_on_death(struct cor_boot *b, cor_boot_death_fn fn, void *arg)
{
    if (b) b->ops->on_death(b, fn, arg);
}

void cor__boot_listener_set(struct cor_boot_listener *l, pthread_cond_t *cv, pthread_mutex_t *mu,
                            cor_boot_death_fn fn, void *arg)
{
    l->fn = fn;
    l->arg = arg;
    while (!fn && l->calls)
        pthread_cond_wait(cv, mu);
}

int cor__boot_listener_begin(struct cor_boot_listener *l, cor_boot_death_fn *fn, void **arg)
{
    if (!l->fn) return 0;
    *fn = l->fn;
    *arg = l->arg;
    l->calls++;
    return 1;
}

void cor__boot_listener_end(struct cor_boot_listener *l, pthread_cond_t *cv, pthread_mutex_t *mu)
{
    pthread_mutex_lock(mu);
    l->calls--;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}

void cor__boot_set_watch(struct cor_boot *b, cor_boot_watch_fn fn, void *arg)
{
    if (!b) return;
    b->watch = fn;
    b->watch_arg = arg;
}

void cor__boot_wait_begin(struct cor_boot *b, struct cor_boot_wait *w)
{
    w->watching = 0;
    w->timed = b->watch != NULL;
    if (!w->timed) return;
    long ms = cor__knob_long(COR_K_BARRIER_WATCH_MS);
    clock_gettime(CLOCK_MONOTONIC, &w->watch_at);
    w->watch_at.tv_sec += ms / 1000;
    w->watch_at.tv_nsec += (ms % 1000) * 1000000L;
    if (w->watch_at.tv_nsec >= 1000000000L) {
        w->watch_at.tv_sec++;
        w->watch_at.tv_nsec -= 1000000000L;
    }
}

void cor__boot_wait(struct cor_boot *b, struct cor_boot_wait *w, pthread_cond_t *cv,
                    pthread_mutex_t *mu)
{
    if (!w->timed || w->watching) {
        pthread_cond_wait(cv, mu);
        return;
    }
    if (pthread_cond_timedwait(cv, mu, &w->watch_at) != ETIMEDOUT) return;
    /* Slow: the routes watch every peer (the core looks the unknown ones up: no lock of
     * ours may be held, a death found meanwhile comes back through cor__boot_lost). */
    w->watching = 1;
    pthread_mutex_unlock(mu);
    b->watch(b->watch_arg, 1);
    pthread_mutex_lock(mu);
}

void cor__boot_wait_end(struct cor_boot *b, struct cor_boot_wait *w)
{
    if (w->watching) b->watch(b->watch_arg, 0);
    w->watching = 0;
}

int cor__boot_barrier(struct cor_boot *b)
{
    return b ? b->ops->barrier(b) : COR_EINVAL;
}

void cor__boot_leave(struct cor_boot *b)
{
    if (b && b->ops->leave) b->ops->leave(b);
}

void cor__boot_lost(struct cor_boot *b, int rank)
{
    if (b && rank >= 0 && rank < b->size && rank != b->rank) b->ops->lost(b, rank);
}

void cor__boot_died(struct cor_boot *b, int rank)
{
    if (b && b->ops->died && rank >= 0 && rank < b->size && rank != b->rank) b->ops->died(b, rank);
}

void cor__boot_finish(struct cor_boot *b)
{
    if (!b) return;
    if (b->published && cor__knob_long(COR_K_BOOT_STATS))
        cor__boot_log(b, b->ops->name, "finish: looked up the addresses of %u of %d peers",
                      __atomic_load_n(&b->lookups, __ATOMIC_RELAXED), b->size - 1);
    free(b->local);
    free(b->kept);
    free(b->kept_at);
    b->local = NULL;
    b->kept = NULL;
    b->kept_at = NULL;
    b->ops->finish(b);
}
