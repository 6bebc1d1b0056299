/*
 * libcordsm's API in a one-domain session: objects (create, lookup, query, destroy, every
 * operation, blocking and not, errors), non-fetching adds and quiet, locks and barriers
 * served by the domain's own DSM service, from 8 tasks at once. Tasks record what they saw;
 * the main thread asserts (CUnit is not thread-safe).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "cor/cor.h"
#include "cor/dsm.h"
#include "../ctest.h"

#define NT 8
#define SCALE_ITERS 4000

static int iters = SCALE_ITERS;

static int run_tasks(int (*fn)(void *), void *arg)
{
    cor_idp_t t[NT];
    int bad = 0;
    for (int i = 0; i < NT; i++)
        if (cor_task_spawn("w", fn, arg, &t[i]) != COR_OK) return -1;
    for (int i = 0; i < NT; i++) {
        int st = -1;
        if (cor_task_join(t[i], &st) != COR_OK || st != 0) bad++;
    }
    return bad;
}

static void test_before_init(void)
{
    cor_idp_t o;
    EXPECT_ERR(cor_dsm_create("x", COR_INT, 1, COR_DSM_HOME_ONLY, &o), COR_ESTATE);
    EXPECT_ERR(cor_dsm_finalize(), COR_ESTATE);
    EXPECT_ERR(cor_dsm_init(), COR_ESTATE); /* before cor_init */
}

static int init_core(void)
{
    if (cor_init(NULL, NULL) != COR_OK) return 1;
    return cor_dsm_init() == COR_OK ? 0 : 1;
}

static void test_init(void)
{
    EXPECT_ERR(cor_dsm_init(), COR_ESTATE);
    /* the service is a reserved task; tasks spawned after it take the next indices */
    cor_idp_t svc;
    EXPECT_ERR(cor_task_lookup(0, "cor.dsm", 0, &svc), COR_OK);
    EXPECT_EQ(cor_idp_kind(svc), COR_KIND_TASK);
}

static int nop(void *arg)
{
    return 0;
}

static void test_task_index(void)
{
    cor_idp_t svc, bar, t;
    REQUIRE(cor_task_lookup(0, "cor.dsm", 0, &svc) == COR_OK);
    REQUIRE(cor_task_lookup(0, "cor.dsm.barrier", 0, &bar) == COR_OK);
    EXPECT_EQ(cor_idp_index(bar), cor_idp_index(svc) + 1);
    REQUIRE(cor_task_spawn("idx", nop, NULL, &t) == COR_OK);
    EXPECT_EQ(cor_idp_index(t), cor_idp_index(bar) + 1);
    cor_task_join(t, NULL);
}

static void test_objects(void)
{
    cor_idp_t a, b, c;
    EXPECT_ERR(cor_dsm_create("a", COR_INT, 100, COR_DSM_HOME_ONLY, &a), COR_OK);
    EXPECT_EQ(cor_idp_kind(a), COR_KIND_OBJECT);
    EXPECT_EQ(cor_idp_domain(a), 0);
    EXPECT_ERR(cor_dsm_create("a", COR_DOUBLE, 5, COR_DSM_HOME_ONLY, &b), COR_EEXIST);
    EXPECT_ERR(cor_dsm_create("", COR_INT, 1, COR_DSM_HOME_ONLY, &b), COR_EINVAL);
    EXPECT_ERR(cor_dsm_create("z", COR_INT, 0, COR_DSM_HOME_ONLY, &b), COR_EINVAL);
    EXPECT_ERR(cor_dsm_create("z", COR_TYPE_COUNT, 1, COR_DSM_HOME_ONLY, &b), COR_EINVAL);
    EXPECT_ERR(cor_dsm_create("z", COR_INT, 1, (cor_dsm_protocol_t)7, &b), COR_EINVAL);
    EXPECT_ERR(cor_dsm_create("z", COR_DOUBLE, COR_DSM_MAX_BYTES, COR_DSM_HOME_ONLY, &b),
               COR_ELIMIT);
    EXPECT_ERR(cor_dsm_lookup("a", &b), COR_OK);
    EXPECT_EQ(b, a);
    EXPECT_ERR(cor_dsm_lookup("nope", &b), COR_ENOTFOUND);
    cor_dsm_info_t info;
    EXPECT_ERR(cor_dsm_query(a, &info), COR_OK);
    EXPECT_EQ(info.type, COR_INT);
    EXPECT_EQ(info.count, 100);
    EXPECT_EQ(info.bytes, 400);
    EXPECT_EQ(info.home, 0);
    EXPECT_EQ(strcmp(info.name, "a"), 0);

    int v[5] = {5, 6, 7, 8, 9}, out[5] = {0};
    EXPECT_ERR(cor_dsm_put(a, 95, 5, COR_INT, v), COR_OK);
    EXPECT_ERR(cor_dsm_get(a, 95, 5, COR_INT, out), COR_OK);
    EXPECT_EQ(memcmp(v, out, sizeof v), 0);
    EXPECT_ERR(cor_dsm_put(a, 96, 5, COR_INT, v), COR_DSM_ERANGE);
    EXPECT_ERR(cor_dsm_get(a, 0, 5, COR_FLOAT, out), COR_ETYPE);
    EXPECT_ERR(cor_dsm_get(a, 0, 5, COR_INT, NULL), COR_EINVAL);
    EXPECT_ERR(cor_dsm_get(COR_IDP_NULL, 0, 1, COR_INT, out), COR_EINVAL);
    int one = 1, old = -1;
    EXPECT_ERR(cor_dsm_swap(a, 99, COR_INT, &one, &old), COR_OK);
    EXPECT_EQ(old, 9);
    int exp = 1, des = 50;
    EXPECT_ERR(cor_dsm_cas(a, 99, COR_INT, &exp, &des, &old), COR_OK);
    EXPECT_EQ(old, 1);
    EXPECT_ERR(cor_dsm_cas(a, 99, COR_INT, &exp, &des, &old), COR_OK);
    EXPECT_EQ(old, 50); /* no exchange this time */
    EXPECT_ERR(cor_dsm_fetch_add(a, 100, COR_INT, &one, &old), COR_DSM_ERANGE);
    char ch = 1;
    cor_idp_t bytes;
    REQUIRE(cor_dsm_create("bytes", COR_CHAR, 8, COR_DSM_HOME_ONLY, &bytes) == COR_OK);
    EXPECT_ERR(cor_dsm_fetch_add(bytes, 0, COR_CHAR, &ch, NULL), COR_EINVAL);

    /* destroy: later operations and lookups fail; the name can be taken again */
    EXPECT_ERR(cor_dsm_destroy(a), COR_OK);
    EXPECT_ERR(cor_dsm_get(a, 0, 1, COR_INT, out), COR_ENOTFOUND);
    EXPECT_ERR(cor_dsm_query(a, &info), COR_ENOTFOUND);
    EXPECT_ERR(cor_dsm_lookup("a", &b), COR_ENOTFOUND);
    EXPECT_ERR(cor_dsm_destroy(a), COR_ENOTFOUND);
    EXPECT_ERR(cor_dsm_create("a", COR_LONG, 3, COR_DSM_HOME_ONLY, &c), COR_OK);
    EXPECT_NE(c, a);
    EXPECT_ERR(cor_dsm_query(c, &info), COR_OK);
    EXPECT_EQ(info.type, COR_LONG);
    EXPECT_ERR(cor_dsm_destroy(c), COR_OK);
    EXPECT_ERR(cor_dsm_destroy(bytes), COR_OK);
}

/* 64 MiB: put a pattern, read it back in pieces and whole. */
/* A failed call leaves its outputs defined (dsm.h): no idp, a record of zeros (a caller that
 * reads them after a failure, like dsm_proc once did, prints 0, not garbage). */
static void test_failure_outputs(void)
{
    cor_idp_t o;
    cor_dsm_info_t info;
    memset(&o, 0xa5, sizeof o);
    EXPECT_ERR(cor_dsm_lookup("nobody", &o), COR_ENOTFOUND);
    EXPECT_EQ(o, COR_IDP_NULL);
    memset(&o, 0xa5, sizeof o);
    EXPECT_ERR(cor_dsm_create("", COR_INT, 1, COR_DSM_HOME_ONLY, &o), COR_EINVAL);
    EXPECT_EQ(o, COR_IDP_NULL);
    memset(&o, 0xa5, sizeof o);
    EXPECT_ERR(cor_dsm_lock_open("", &o), COR_EINVAL);
    EXPECT_EQ(o, COR_IDP_NULL);
    memset(&info, 0xa5, sizeof info);
    EXPECT_ERR(cor_dsm_query(COR_IDP_NULL, &info), COR_EINVAL);
    EXPECT_EQ(info.count, 0);
    EXPECT_EQ(info.bytes, 0);
    EXPECT_EQ(info.name[0], '\0');
    cor_idp_t gone;
    REQUIRE(cor_dsm_create("gone", COR_INT, 3, COR_DSM_HOME_ONLY, &gone) == COR_OK);
    REQUIRE(cor_dsm_destroy(gone) == COR_OK);
    memset(&info, 0xa5, sizeof info);
    EXPECT_ERR(cor_dsm_query(gone, &info), COR_ENOTFOUND);
    EXPECT_EQ(info.count, 0);
    EXPECT_EQ(info.appended, 0);
}

static void test_large(void)
{
    size_t n = (size_t)64 << 20;
    cor_idp_t big;
    REQUIRE(cor_dsm_create("big", COR_BYTE, n, COR_DSM_HOME_ONLY, &big) == COR_OK);
    unsigned char *p = malloc(n), *q = malloc(n);
    REQUIRE(p && q);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 2654435761u >> 13);
    EXPECT_ERR(cor_dsm_put(big, 0, n, COR_BYTE, p), COR_OK);
    memset(q, 0, n);
    EXPECT_ERR(cor_dsm_get(big, 0, n, COR_BYTE, q), COR_OK);
    EXPECT_EQ(memcmp(p, q, n), 0);
    EXPECT_ERR(cor_dsm_get(big, n - 10, 10, COR_BYTE, q), COR_OK);
    EXPECT_EQ(memcmp(p + n - 10, q, 10), 0);
    free(p);
    free(q);
    EXPECT_ERR(cor_dsm_destroy(big), COR_OK);
}

static cor_idp_t counters, fifo;
static _Atomic long task_errors;

static void terr(int err)
{
    if (err) {
        fprintf(stderr, "task error: %s\n", cor_dsm_strerror(err));
        atomic_fetch_add(&task_errors, 1);
    }
}

/* counters: [0] fetch-add, [1] cas loop, [2] non-fetching add, [3] fetch_addI; the FIFO gets
 * each task's 100 appends. */
static int atomics_task(void *arg)
{
    long one = 1, old;
    for (int i = 0; i < iters; i++) {
        terr(cor_dsm_fetch_add(counters, 0, COR_LONG, &one, &old));
        long cur = 0, want;
        terr(cor_dsm_get(counters, 1, 1, COR_LONG, &cur));
        for (int k = 0; k < 100000; k++) {
            want = cur + 1;
            terr(cor_dsm_cas(counters, 1, COR_LONG, &cur, &want, &old));
            if (old == cur) break;
            cur = old;
        }
        terr(cor_dsm_add(counters, 2, COR_LONG, &one));
        cor_dsm_req_t r;
        terr(cor_dsm_fetch_addI(counters, 3, COR_LONG, &one, &old, &r));
        int done = 0;
        for (int k = 0; k < 1000000 && !done; k++)
            terr(cor_dsm_test(&r, &done));
        if (!done) terr(cor_dsm_wait(&r));
    }
    terr(cor_dsm_quiet());
    long me = (long)cor_idp_index(cor_task_self());
    for (int i = 0; i < 100; i++) {
        long v = me * 1000 + i;
        uint64_t slot;
        terr(cor_dsm_append(fifo, COR_LONG, &v, 1, &slot));
    }
    return 0;
}

static void test_atomics(void)
{
    REQUIRE(cor_dsm_create("counters", COR_LONG, 4, COR_DSM_HOME_ONLY, &counters) == COR_OK);
    REQUIRE(cor_dsm_create("fifo", COR_LONG, NT * 100, COR_DSM_HOME_ONLY, &fifo) == COR_OK);
    atomic_store(&task_errors, 0);
    EXPECT_EQ(run_tasks(atomics_task, NULL), 0);
    EXPECT_EQ(atomic_load(&task_errors), 0);
    long c[4];
    EXPECT_ERR(cor_dsm_get(counters, 0, 4, COR_LONG, c), COR_OK);
    for (int k = 0; k < 4; k++)
        EXPECT_EQ(c[k], (long)NT * iters);
    /* the FIFO: full, each task's values in its own order, none lost */
    long *f = malloc(NT * 100 * sizeof *f);
    REQUIRE(f);
    EXPECT_ERR(cor_dsm_get(fifo, 0, NT * 100, COR_LONG, f), COR_OK);
    long next[1024] = {0}, seen = 0;
    for (int i = 0; i < NT * 100; i++) {
        long t = f[i] / 1000, k = f[i] % 1000;
        if (t > 0 && t < 1024 && next[t] == k) {
            next[t]++;
            seen++;
        }
    }
    EXPECT_EQ(seen, NT * 100);
    long first = f[0];
    free(f);
    cor_dsm_info_t info;
    EXPECT_ERR(cor_dsm_query(fifo, &info), COR_OK);
    EXPECT_EQ(info.appended, NT * 100);
    long v = 0;
    EXPECT_ERR(cor_dsm_append(fifo, COR_LONG, &v, 1, NULL), COR_ELIMIT);
    cor_dsm_req_t r = NULL;
    int done;
    EXPECT_ERR(cor_dsm_test(&r, &done), COR_EINVAL);
    EXPECT_ERR(cor_dsm_wait(&r), COR_EINVAL);
    EXPECT_ERR(cor_dsm_getI(fifo, 0, 1, COR_LONG, &v, &r), COR_OK);
    cor_dsm_req_t stale = r;
    EXPECT_ERR(cor_dsm_wait(&r), COR_OK);
    EXPECT_TRUE(r == NULL);
    /* a completed request's handle (kept by mistake) is stale, even once its slot is reused */
    EXPECT_ERR(cor_dsm_wait(&stale), COR_EINVAL);
    EXPECT_ERR(cor_dsm_getI(fifo, 0, 1, COR_LONG, &v, &r), COR_OK);
    EXPECT_ERR(cor_dsm_test(&stale, &done), COR_EINVAL);
    EXPECT_ERR(cor_dsm_wait(&r), COR_OK);
    EXPECT_EQ(v, first);
    /* errors of non-fetching adds come out of quiet */
    long one = 1;
    EXPECT_ERR(cor_dsm_add(counters, 4, COR_LONG, &one), COR_OK);
    EXPECT_ERR(cor_dsm_quiet(), COR_DSM_ERANGE);
    EXPECT_ERR(cor_dsm_quiet(), COR_OK);
    EXPECT_ERR(cor_dsm_destroy(counters), COR_OK);
    EXPECT_ERR(cor_dsm_destroy(fifo), COR_OK);
    EXPECT_ERR(cor_dsm_add(counters, 0, COR_LONG, &one), COR_OK);
    EXPECT_ERR(cor_dsm_quiet(), COR_ENOTFOUND);
}

/* ---- Cached objects at their home: sections from 8 tasks, operations between them ------ */

#define CW 64 /* longs per cached block: [0..CW-2] values, [CW-1] their sum */
static cor_idp_t cobj;
static _Atomic long torn, writes_done;

static int cached_task(void *arg)
{
    (void)arg;
    cor_dsm_region_t rg;
    terr(cor_dsm_map(cobj, &rg));
    long *v = NULL;
    size_t count = 0;
    terr(cor_dsm_region_data(rg, (void **)&v, &count));
    if (count != CW) terr(COR_EINVAL);
    long one = 1;
    for (int i = 0; i < iters / 4; i++) {
        if (i % 3 == 0) {
            terr(cor_dsm_start_write(rg));
            long sum = 0;
            for (int k = 0; k < CW - 1; k++)
                sum += v[k] += k + 1;
            v[CW - 1] = sum;
            terr(cor_dsm_end_write(rg));
            atomic_fetch_add(&writes_done, 1);
        } else if (i % 7 == 0) {
            /* an operation on the cached object: it waits for the sections, then adds;
             * every other one a non-fetching add (through the directory too) */
            if (i % 14 == 0)
                terr(cor_dsm_add(cobj, 0, COR_LONG, &one));
            else
                terr(cor_dsm_fetch_add(cobj, 0, COR_LONG, &one, NULL));
        } else {
            cor_dsm_req_t r;
            terr(cor_dsm_start_readI(rg, &r));
            terr(cor_dsm_wait(&r));
            /* values k >= 1 move together: v[k] = (k+1) * writes so far */
            for (int k = 2; k < CW - 1; k++)
                if (v[k] / (k + 1) != v[1] / 2 || v[k] % (k + 1)) atomic_fetch_add(&torn, 1);
            terr(cor_dsm_end_read(rg));
        }
    }
    terr(cor_dsm_quiet()); /* outside sections: its adds may wait for them */
    terr(cor_dsm_unmap(rg));
    return 0;
}

static void test_cached_home(void)
{
    REQUIRE(cor_dsm_create("cached", COR_LONG, CW, COR_DSM_CACHED, &cobj) == COR_OK);
    cor_dsm_info_t info;
    EXPECT_ERR(cor_dsm_query(cobj, &info), COR_OK);
    EXPECT_EQ(info.protocol, COR_DSM_CACHED);
    cor_idp_t found;
    EXPECT_ERR(cor_dsm_lookup("cached", &found), COR_OK);
    EXPECT_EQ(found, cobj);
    atomic_store(&task_errors, 0);
    atomic_store(&torn, 0);
    atomic_store(&writes_done, 0);
    EXPECT_EQ(run_tasks(cached_task, NULL), 0);
    EXPECT_EQ(atomic_load(&task_errors), 0);
    EXPECT_EQ(atomic_load(&torn), 0);
    /* exact: every write section added k+1 to element k, every fetch-add 1 to element 0 */
    long w = 0, f = 0;
    for (int i = 0; i < iters / 4; i++) {
        w += i % 3 == 0;
        f += i % 3 != 0 && i % 7 == 0;
    }
    long v[CW];
    EXPECT_ERR(cor_dsm_get(cobj, 0, CW, COR_LONG, v), COR_OK);
    EXPECT_EQ(v[0], NT * (w + f));
    EXPECT_EQ(v[5], NT * w * 6);
    cor_dsm_stats_t st;
    EXPECT_ERR(cor_dsm_stats_get(&st), COR_OK);
    EXPECT_TRUE(st.section_hits > 0);
    EXPECT_TRUE(st.recalls > 0);
}

static void test_cached_errors(void)
{
    cor_dsm_region_t rg, rg2;
    cor_idp_t ho;
    REQUIRE(cor_dsm_create("homeonly", COR_INT, 4, COR_DSM_HOME_ONLY, &ho) == COR_OK);
    EXPECT_ERR(cor_dsm_map(ho, &rg), COR_DSM_EPROTOCOL);
    REQUIRE(cor_dsm_map(cobj, &rg) == COR_OK);
    REQUIRE(cor_dsm_map(cobj, &rg2) == COR_OK);
    void *d1 = NULL, *d2 = NULL;
    EXPECT_ERR(cor_dsm_region_data(rg, &d1, NULL), COR_OK);
    EXPECT_ERR(cor_dsm_region_data(rg2, &d2, NULL), COR_OK);
    EXPECT_TRUE(rg != rg2 && d1 == d2);                 /* a handle per map, one copy */
    EXPECT_ERR(cor_dsm_end_read(rg), COR_DSM_ESECTION); /* end without start */
    EXPECT_ERR(cor_dsm_end_write(rg), COR_DSM_ESECTION);
    EXPECT_ERR(cor_dsm_start_read(rg), COR_OK);
    EXPECT_ERR(cor_dsm_start_write(rg), COR_DSM_ESECTION); /* write inside read */
    EXPECT_ERR(cor_dsm_start_read(rg), COR_DSM_ESECTION);  /* nested */
    EXPECT_ERR(cor_dsm_end_write(rg), COR_DSM_ESECTION);   /* wrong end */
    EXPECT_ERR(cor_dsm_flush(rg), COR_DSM_ESECTION);
    EXPECT_ERR(cor_dsm_unmap(rg), COR_DSM_ESECTION);
    EXPECT_ERR(cor_dsm_end_read(rg), COR_OK);
    EXPECT_ERR(cor_dsm_start_write(NULL), COR_EINVAL);
    void *p;
    EXPECT_ERR(cor_dsm_region_data(NULL, &p, NULL), COR_EINVAL);
    cor_dsm_req_t r;
    EXPECT_ERR(cor_dsm_start_writeI(rg, &r), COR_OK);
    int done = 0;
    EXPECT_ERR(cor_dsm_test(&r, &done), COR_OK);
    EXPECT_EQ(done, 1);
    EXPECT_ERR(cor_dsm_end_write(rg), COR_OK);
    EXPECT_ERR(cor_dsm_flush(rg), COR_OK); /* at the home: the copy is the object */
    /* non-fetching adds on a cached object go through its directory: an add issued inside a
     * read section waits for the section's end (the copy is recalled, counted), a later
     * operation of the same task sees it (applied in order), quiet waits for it */
    long one = 1, five = 5, before = -1, after = -1, seen = -1;
    cor_dsm_stats_t st0, st1;
    EXPECT_ERR(cor_dsm_stats_get(&st0), COR_OK);
    EXPECT_ERR(cor_dsm_get(cobj, 1, 1, COR_LONG, &before), COR_OK);
    EXPECT_ERR(cor_dsm_start_read(rg), COR_OK);
    EXPECT_ERR(cor_dsm_add(cobj, 1, COR_LONG, &five), COR_OK);
    cor_dsm_info_t ci;
    EXPECT_ERR(cor_dsm_query(cobj, &ci), COR_OK); /* sends the add: it waits for our section */
    EXPECT_ERR(cor_dsm_end_read(rg), COR_OK);
    EXPECT_ERR(cor_dsm_fetch_add(cobj, 1, COR_LONG, &one, &after), COR_OK);
    EXPECT_EQ(after, before + 5);
    for (int i = 0; i < 300; i++) /* 300 adds: more than one batch */
        EXPECT_ERR(cor_dsm_add(cobj, 1, COR_LONG, &one), COR_OK);
    EXPECT_ERR(cor_dsm_add(cobj, CW, COR_LONG, &one), COR_OK); /* out of range: at quiet */
    EXPECT_ERR(cor_dsm_add(cobj, 1, COR_LONG, &one), COR_OK);
    EXPECT_ERR(cor_dsm_quiet(), COR_DSM_ERANGE);
    EXPECT_ERR(cor_dsm_quiet(), COR_OK);
    EXPECT_ERR(cor_dsm_start_read(rg), COR_OK);
    seen = ((long *)d1)[1];
    EXPECT_ERR(cor_dsm_end_read(rg), COR_OK);
    EXPECT_EQ(seen, before + 5 + 1 + 301);
    EXPECT_ERR(cor_dsm_stats_get(&st1), COR_OK);
    EXPECT_TRUE(st1.recalls > st0.recalls);
    /* wrong type on an operation */
    int i1 = 1;
    EXPECT_ERR(cor_dsm_fetch_add(cobj, 0, COR_INT, &i1, NULL), COR_ETYPE);
    EXPECT_ERR(cor_dsm_unmap(rg), COR_OK);
    /* an unmapped region is stale: every call refuses it (ASan sees no use after free) */
    EXPECT_ERR(cor_dsm_unmap(rg), COR_EINVAL);
    EXPECT_ERR(cor_dsm_start_read(rg), COR_EINVAL);
    EXPECT_ERR(cor_dsm_end_read(rg), COR_EINVAL);
    EXPECT_ERR(cor_dsm_flush(rg), COR_EINVAL);
    EXPECT_ERR(cor_dsm_region_data(rg, &p, NULL), COR_EINVAL);
    EXPECT_ERR(cor_dsm_start_readI(rg, &r), COR_EINVAL);
    EXPECT_TRUE(r == NULL);
    EXPECT_ERR(cor_dsm_start_read(rg2), COR_OK); /* the other map still works */
    EXPECT_ERR(cor_dsm_end_read(rg2), COR_OK);
    /* a region is not a barrier, nor a request; a forged value is nothing */
    EXPECT_ERR(cor_dsm_barrier_wait((cor_dsm_barrier_t)rg2), COR_EINVAL);
    cor_dsm_req_t as_req = (cor_dsm_req_t)rg2;
    EXPECT_ERR(cor_dsm_wait(&as_req), COR_EINVAL);
    EXPECT_ERR(cor_dsm_start_read((cor_dsm_region_t)(uintptr_t)0x12345678abcdULL), COR_EINVAL);
    EXPECT_ERR(cor_dsm_start_read((cor_dsm_region_t)&one), COR_EINVAL);
    EXPECT_ERR(cor_dsm_destroy(ho), COR_OK);
    /* an add waiting in the directory (behind a read section) when the object is destroyed,
     * and one after: both COR_ENOTFOUND at quiet */
    EXPECT_ERR(cor_dsm_start_read(rg2), COR_OK);
    EXPECT_ERR(cor_dsm_add(cobj, 0, COR_LONG, &one), COR_OK);
    EXPECT_ERR(cor_dsm_query(cobj, &ci), COR_OK); /* sends the add first: it is queued now */
    EXPECT_ERR(cor_dsm_destroy(cobj), COR_OK);
    EXPECT_ERR(cor_dsm_quiet(), COR_ENOTFOUND);
    EXPECT_ERR(cor_dsm_end_read(rg2), COR_OK);
    EXPECT_ERR(cor_dsm_unmap(rg2), COR_OK);
    EXPECT_ERR(cor_dsm_add(cobj, 0, COR_LONG, &one), COR_OK);
    EXPECT_ERR(cor_dsm_quiet(), COR_ENOTFOUND);
    EXPECT_ERR(cor_dsm_map(cobj, &rg), COR_ENOTFOUND);
    EXPECT_TRUE(strcmp(cor_dsm_strerror(COR_DSM_ESECTION), cor_strerror(COR_EINVAL)) != 0);
}

/* A task holds up to COR_DSM_MAX_SECTIONS sections at once, blocking or not; one more is
 * COR_ELIMIT and changes nothing. */
static void test_section_limit(void)
{
    enum { N = COR_DSM_MAX_SECTIONS + 1 };
    static cor_idp_t objs[N];
    static cor_dsm_region_t rgs[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "limit%d", i);
        REQUIRE(cor_dsm_create(name, COR_INT, 1, COR_DSM_CACHED, &objs[i]) == COR_OK);
        REQUIRE(cor_dsm_map(objs[i], &rgs[i]) == COR_OK);
    }
    for (int i = 0; i < N - 2; i++)
        EXPECT_ERR(cor_dsm_start_read(rgs[i]), COR_OK);
    cor_dsm_req_t r;
    EXPECT_ERR(cor_dsm_start_readI(rgs[N - 2], &r), COR_OK);
    EXPECT_ERR(cor_dsm_wait(&r), COR_OK);
    EXPECT_ERR(cor_dsm_start_write(rgs[N - 1]), COR_ELIMIT);
    EXPECT_ERR(cor_dsm_start_readI(rgs[N - 1], &r), COR_ELIMIT);
    EXPECT_ERR(cor_dsm_end_read(rgs[0]), COR_OK);
    EXPECT_ERR(cor_dsm_start_write(rgs[N - 1]), COR_OK); /* room again */
    EXPECT_ERR(cor_dsm_end_write(rgs[N - 1]), COR_OK);
    for (int i = 1; i < N - 1; i++)
        EXPECT_ERR(cor_dsm_end_read(rgs[i]), COR_OK);
    for (int i = 0; i < N; i++) {
        EXPECT_ERR(cor_dsm_unmap(rgs[i]), COR_OK);
        EXPECT_ERR(cor_dsm_destroy(objs[i]), COR_OK);
    }
}

static cor_idp_t lk;
static long in_lock; /* touched only under the DSM lock */
static _Atomic int inside;

static int lock_task(void *arg)
{
    for (int i = 0; i < iters / 4; i++) {
        terr(cor_dsm_lock(lk));
        if (atomic_fetch_add(&inside, 1) != 0) terr(COR_EBUSY); /* two holders at once */
        in_lock++;
        atomic_fetch_sub(&inside, 1);
        terr(cor_dsm_unlock(lk));
    }
    return 0;
}

static void test_locks(void)
{
    cor_idp_t l2;
    REQUIRE(cor_dsm_lock_open("L", &lk) == COR_OK);
    EXPECT_ERR(cor_dsm_lock_open("L", &l2), COR_OK);
    EXPECT_EQ(l2, lk);
    EXPECT_ERR(cor_dsm_unlock(lk), COR_ESTATE);
    EXPECT_ERR(cor_dsm_trylock(lk), COR_OK);
    EXPECT_ERR(cor_dsm_lock(lk), COR_ESTATE);
    EXPECT_ERR(cor_dsm_unlock(lk), COR_OK);
    cor_dsm_req_t r;
    EXPECT_ERR(cor_dsm_lockI(lk, &r), COR_OK);
    EXPECT_ERR(cor_dsm_wait(&r), COR_OK);
    EXPECT_ERR(cor_dsm_unlock(lk), COR_OK);
    /* a lock is not an object, nor the reverse */
    long x;
    EXPECT_ERR(cor_dsm_get(lk, 0, 1, COR_LONG, &x), COR_ENOTFOUND);
    atomic_store(&task_errors, 0);
    in_lock = 0;
    EXPECT_EQ(run_tasks(lock_task, NULL), 0);
    EXPECT_EQ(atomic_load(&task_errors), 0);
    EXPECT_EQ(in_lock, (long)NT * (iters / 4));
}

static cor_dsm_barrier_t bar;
static _Atomic long arrived;
static _Atomic int nb_tasks; /* the first half of the tasks arrive with the non-blocking form */

static int barrier_task(void *arg)
{
    int nb = atomic_fetch_add(&nb_tasks, 1) < NT / 2;
    for (int e = 0; e < 200; e++) {
        atomic_fetch_add(&arrived, 1);
        if (nb) { /* arrives, then tests until every task of the domain did */
            cor_dsm_req_t rq = NULL;
            terr(cor_dsm_barrier_waitI(bar, &rq));
            int done = 0;
            while (!done)
                terr(cor_dsm_test(&rq, &done));
            if (rq) terr(COR_ESTATE);
        } else {
            terr(cor_dsm_barrier_wait(bar));
        }
        if (atomic_load(&arrived) < (long)NT * (e + 1)) terr(COR_ESTATE); /* left early */
        terr(cor_dsm_barrier_wait(bar)); /* so nobody arrives at e+1 before all checked */
    }
    return 0;
}

static void test_barrier(void)
{
    cor_dsm_barrier_t b2;
    EXPECT_ERR(cor_dsm_barrier_create("B", COR_IDP_NULL, 0, &bar), COR_EINVAL);
    REQUIRE(cor_dsm_barrier_create("B", COR_IDP_NULL, NT, &bar) == COR_OK);
    EXPECT_ERR(cor_dsm_barrier_create("B", COR_IDP_NULL, NT, &b2), COR_EEXIST);
    atomic_store(&task_errors, 0);
    atomic_store(&arrived, 0);
    atomic_store(&nb_tasks, 0);
    EXPECT_EQ(run_tasks(barrier_task, NULL), 0);
    EXPECT_EQ(atomic_load(&task_errors), 0);
    EXPECT_EQ(atomic_load(&arrived), (long)NT * 200);
    EXPECT_ERR(cor_dsm_barrier_destroy(bar), COR_OK);
    EXPECT_ERR(cor_dsm_barrier_destroy(bar), COR_EINVAL); /* destroyed: stale */
    EXPECT_ERR(cor_dsm_barrier_wait(bar), COR_EINVAL);
    EXPECT_ERR(cor_dsm_barrier_wait(NULL), COR_EINVAL);
    cor_dsm_req_t rq = (cor_dsm_req_t)1;
    EXPECT_ERR(cor_dsm_barrier_waitI(bar, &rq), COR_EINVAL);
    EXPECT_EQ(rq, NULL);
    EXPECT_ERR(cor_dsm_barrier_waitI(NULL, &rq), COR_EINVAL);
    EXPECT_ERR(cor_dsm_barrier_waitI(bar, NULL), COR_EINVAL);
    /* a logical domain without this domain: not a member */
    cor_idp_t ld;
    REQUIRE(cor_ldomain_create("empty", &ld) == COR_OK);
    EXPECT_ERR(cor_dsm_barrier_create("C", ld, 1, &b2), COR_EINVAL);
    int rank;
    REQUIRE(cor_ldomain_join(ld, cor_domain_self(), &rank) == COR_OK);
    EXPECT_ERR(cor_dsm_barrier_create("C", ld, 1, &b2), COR_OK);
    EXPECT_ERR(cor_dsm_barrier_wait(b2), COR_OK);
    /* the only arrival: over at once; destroy waits for the request to be completed */
    REQUIRE(cor_dsm_barrier_waitI(b2, &rq) == COR_OK);
    EXPECT_ERR(cor_dsm_barrier_destroy(b2), COR_EBUSY);
    EXPECT_ERR(cor_dsm_wait(&rq), COR_OK);
    EXPECT_EQ(rq, NULL);
    EXPECT_ERR(cor_dsm_barrier_destroy(b2), COR_OK);
}

static void death_nop(int rank, int err, void *arg) {}

static void test_death_listeners(void)
{
    static int args[8];
    EXPECT_ERR(cor_domain_on_death_add(NULL, NULL), COR_EINVAL);
    /* libcordsm holds one of the 8 slots */
    for (int i = 0; i < 7; i++)
        EXPECT_ERR(cor_domain_on_death_add(death_nop, &args[i]), COR_OK);
    EXPECT_ERR(cor_domain_on_death_add(death_nop, &args[0]), COR_OK); /* again: no slot */
    EXPECT_ERR(cor_domain_on_death_add(death_nop, &args[7]), COR_ELIMIT);
}

static void test_stats_strerror(void)
{
    cor_dsm_stats_t s;
    EXPECT_ERR(cor_dsm_stats_get(&s), COR_OK);
    EXPECT_GE(s.local_ops, (long long)NT * iters);
    /* each acquisition of the lock test is a request or a retake of the lock the domain kept */
    EXPECT_GE(s.requests_served + s.lock_retakes, (long long)NT * (iters / 4));
    EXPECT_EQ(s.requests_dropped, 0);
    EXPECT_EQ(strcmp(cor_dsm_strerror(COR_DSM_ERANGE), "offset or count outside the object"), 0);
    EXPECT_EQ(strcmp(cor_dsm_strerror(COR_EPEERDEAD), cor_strerror(COR_EPEERDEAD)), 0);
}

static void test_finalize(void)
{
    EXPECT_ERR(cor_dsm_finalize(), COR_OK);
    cor_idp_t o;
    EXPECT_ERR(cor_dsm_create("late", COR_INT, 1, COR_DSM_HOME_ONLY, &o), COR_ESTATE);
    EXPECT_ERR(cor_dsm_finalize(), COR_ESTATE);
    EXPECT_ERR(cor_finalize(), COR_OK);
}

int main(void)
{
    if (getenv("COR_TEST_SCALE") && !strcmp(getenv("COR_TEST_SCALE"), "small")) iters = 500;
    static const struct ct_test first[] = {{"before init", test_before_init}, {NULL, NULL}};
    alarm(300);
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s0 = CU_add_suite("dsm before init", NULL, NULL);
    CU_pSuite s = CU_add_suite("dsm api, one domain", init_core, NULL);
    if (!s0 || !s) return 2;
    for (const struct ct_test *t = first; t->name; t++)
        CU_add_test(s0, t->name, t->fn);
    static const struct ct_test tests[] = {
        {"init", test_init},
        {"task index after init", test_task_index},
        {"objects", test_objects},
        {"failures leave defined outputs", test_failure_outputs},
        {"64 MiB object", test_large},
        {"atomics from 8 tasks", test_atomics},
        {"cached object: sections from 8 tasks", test_cached_home},
        {"cached object: state errors", test_cached_errors},
        {"cached objects: open sections limit", test_section_limit},
        {"locks", test_locks},
        {"barrier", test_barrier},
        {"death listeners", test_death_listeners},
        {"stats and strerror", test_stats_strerror},
        {"finalize", test_finalize},
        {NULL, NULL}};
    for (const struct ct_test *t = tests; t->name; t++)
        CU_add_test(s, t->name, t->fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
                      CU_get_run_summary()->nSuitesFailed;
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
