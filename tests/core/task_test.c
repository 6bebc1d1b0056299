/*
 * Tasks of a one-domain session: spawn, join, self, local names with indices, lookup, and at
 * least 64 tasks alive at once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cor/cor.h"
#include "../ctest.h"
#include "one_domain.h"

struct seen {
    cor_idp_t self;
    int arg;
};

static int record_self(void *arg)
{
    struct seen *s = arg;
    s->self = cor_task_self();
    return 40 + s->arg;
}

static void test_spawn_join(void)
{
    struct seen s = {0, 2};
    cor_idp_t t = 0;
    REQUIRE(cor_task_spawn("rec", record_self, &s, &t) == COR_OK);
    EXPECT_EQ(cor_idp_kind(t), COR_KIND_TASK);
    EXPECT_EQ(cor_idp_domain(t), 0);
    EXPECT_EQ(cor_idp_macro(t), cor_session());
    EXPECT_NE(cor_idp_index(t), 0); /* 0 is main */
    int status = -1;
    EXPECT_ERR(cor_task_join(t, &status), COR_OK);
    EXPECT_EQ(status, 42);
    EXPECT_EQ(s.self, t);
    EXPECT_EQ(cor_task_idp(0, cor_idp_index(t)), t);
    /* joined once only */
    EXPECT_ERR(cor_task_join(t, &status), COR_ESTATE);
    /* spawn without an idp out-parameter, join by name */
    struct seen s2 = {0, 0};
    REQUIRE(cor_task_spawn("anon-out", record_self, &s2, NULL) == COR_OK);
    cor_idp_t t2 = 0;
    EXPECT_ERR(cor_task_lookup(0, "anon-out", 0, &t2), COR_OK);
    EXPECT_ERR(cor_task_join(t2, NULL), COR_OK);
    EXPECT_EQ(s2.self, t2);
}

/* What the task's thread is called (top -H, perf, gdb show it). */
static int read_name(void *arg)
{
    char *name = arg;
    return prctl(PR_GET_NAME, name, 0, 0, 0);
}

static void test_thread_names(void)
{
    char name[17] = {0};
    cor_idp_t t;
    REQUIRE(cor_task_spawn("solver", read_name, name, &t) == COR_OK);
    int status = -1;
    EXPECT_ERR(cor_task_join(t, &status), COR_OK);
    EXPECT_EQ(status, 0);
    EXPECT_STR_EQ(name, "t:solver");
    /* the kernel keeps 15 characters: a long task name is cut, not refused */
    memset(name, 0, sizeof name);
    REQUIRE(cor_task_spawn("a-task-name-of-30-characters-x", read_name, name, &t) == COR_OK);
    EXPECT_ERR(cor_task_join(t, &status), COR_OK);
    EXPECT_STR_EQ(name, "t:a-task-name-o");
}

static int join_self(void *arg)
{
    (void)arg;
    return cor_task_join(cor_task_self(), NULL);
}

static void test_spawn_bad(void)
{
    cor_idp_t t;
    char longname[COR_NAME_MAX + 8];
    memset(longname, 'n', sizeof longname);
    longname[sizeof longname - 1] = 0;
    EXPECT_ERR(cor_task_spawn("x", NULL, NULL, &t), COR_EINVAL);
    EXPECT_ERR(cor_task_spawn(longname, record_self, NULL, &t), COR_EINVAL);
    /* main joining itself: refused (it was never spawned, and it is the caller) */
    int mj = cor_task_join(cor_task_self(), NULL);
    EXPECT_TRUE(mj == COR_EINVAL || mj == COR_ENOTFOUND);
    /* a task joining itself would wait forever */
    cor_idp_t selfjoin;
    REQUIRE(cor_task_spawn("selfjoin", join_self, NULL, &selfjoin) == COR_OK);
    int st = 0;
    EXPECT_ERR(cor_task_join(selfjoin, &st), COR_OK);
    EXPECT_ERR(st, COR_EINVAL);
    EXPECT_ERR(cor_task_join(cor_domain_self(), NULL), COR_EINVAL); /* not a task */
    EXPECT_ERR(cor_task_join(cor_idp_make(cor_session() + 1, COR_KIND_TASK, 0, 1), NULL),
               COR_EINVAL); /* other session */
    EXPECT_ERR(cor_task_join(cor_idp_make(cor_session(), COR_KIND_TASK, 1, 1), NULL),
               COR_EINVAL); /* other domain */
    EXPECT_ERR(cor_task_join(cor_task_idp(0, 999), NULL), COR_ENOTFOUND);
    EXPECT_ERR(cor_task_join(cor_task_idp(0, COR_MAX_INDEX), NULL), COR_ENOTFOUND);
    cor_name_t nm;
    EXPECT_ERR(cor_task_name(cor_task_idp(0, 998), &nm), COR_ENOTFOUND);
    EXPECT_ERR(cor_task_name(cor_task_self(), NULL), COR_EINVAL);
    EXPECT_ERR(cor_task_name(cor_domain_self(), &nm), COR_EINVAL);
    EXPECT_ERR(cor_task_lookup(0, "no-such-task", 0, &t), COR_ENOTFOUND);
    EXPECT_ERR(cor_task_lookup(0, "main", 1, &t), COR_ENOTFOUND);
    EXPECT_ERR(cor_task_lookup(1, "main", 0, &t), COR_EINVAL);
    EXPECT_ERR(cor_task_lookup(-1, "main", 0, &t), COR_EINVAL);
    EXPECT_ERR(cor_task_lookup(0, NULL, 0, &t), COR_EINVAL);
    EXPECT_ERR(cor_task_lookup(0, "main", 0, NULL), COR_EINVAL);
    EXPECT_ERR(cor_task_lookup(0, longname, 0, &t), COR_EINVAL);
    EXPECT_ERR(cor_task_lookup(0, "main", 0, &t), COR_OK);
    EXPECT_EQ(t, cor_task_self());
}

/* ---- many tasks at once ---- */

#define NTASKS 80
static atomic_int arrived;
static atomic_int go;
static struct seen crowd[NTASKS];

/* Stays alive until every task of the crowd arrived (bounded): proves they coexist. */
static int crowd_task(void *arg)
{
    struct seen *s = arg;
    s->self = cor_task_self();
    atomic_fetch_add(&arrived, 1);
    double end = ct_now() + 20;
    while (!atomic_load(&go) && ct_now() < end)
        usleep(1000);
    return atomic_load(&go) ? s->arg : -1;
}

static void test_many_tasks(void)
{
    static cor_idp_t ids[NTASKS];
    atomic_store(&arrived, 0);
    atomic_store(&go, 0);
    int spawned = 0;
    for (int i = 0; i < NTASKS; i++) {
        crowd[i] = (struct seen){0, i};
        int err = cor_task_spawn("worker", crowd_task, &crowd[i], &ids[i]);
        EXPECT_ERR(err, COR_OK);
        if (err) break;
        spawned++;
    }
    double end = ct_now() + 20;
    while (atomic_load(&arrived) < spawned && ct_now() < end)
        usleep(1000);
    EXPECT_EQ(atomic_load(&arrived), NTASKS); /* all alive at the same time */

    /* names: ("worker", k) in spawn order, found by lookup, distinct idps */
    for (int i = 0; i < spawned; i++) {
        cor_name_t nm;
        EXPECT_ERR(cor_task_name(ids[i], &nm), COR_OK);
        EXPECT_EQ(strcmp(nm.name, "worker"), 0);
        EXPECT_EQ(nm.index, i);
        EXPECT_EQ(nm.ascendant, cor_domain_self());
        cor_idp_t found = 0;
        EXPECT_ERR(cor_task_lookup(0, "worker", (unsigned)i, &found), COR_OK);
        EXPECT_EQ(found, ids[i]);
        if (i > 0) EXPECT_EQ(cor_idp_index(ids[i]), cor_idp_index(ids[i - 1]) + 1);
    }
    cor_idp_t none;
    EXPECT_ERR(cor_task_lookup(0, "worker", NTASKS, &none), COR_ENOTFOUND);

    atomic_store(&go, 1);
    for (int i = 0; i < spawned; i++) {
        int st = -2;
        EXPECT_ERR(cor_task_join(ids[i], &st), COR_OK);
        EXPECT_EQ(st, i);
        EXPECT_EQ(crowd[i].self, ids[i]);
    }
}

/* Tasks spawning tasks concurrently still get unique indices and name indices. */
#define NSPAWNERS 4
#define PER_SPAWNER 8
static cor_idp_t grand[NSPAWNERS][PER_SPAWNER];

static int child_task(void *arg)
{
    (void)arg;
    return 7;
}

static int spawner_task(void *arg)
{
    int k = (int)(intptr_t)arg, bad = 0;
    for (int i = 0; i < PER_SPAWNER; i++)
        if (cor_task_spawn("grandchild", child_task, NULL, &grand[k][i]) != COR_OK) bad++;
    for (int i = 0; i < PER_SPAWNER; i++) {
        int st = 0;
        if (cor_task_join(grand[k][i], &st) != COR_OK || st != 7) bad++;
    }
    return bad;
}

static void test_concurrent_spawn(void)
{
    cor_idp_t sp[NSPAWNERS];
    for (int k = 0; k < NSPAWNERS; k++)
        REQUIRE(cor_task_spawn("spawner", spawner_task, (void *)(intptr_t)k, &sp[k]) == COR_OK);
    for (int k = 0; k < NSPAWNERS; k++) {
        int st = -1;
        EXPECT_ERR(cor_task_join(sp[k], &st), COR_OK);
        EXPECT_EQ(st, 0);
    }
    /* every grandchild has its own index and its own name index */
    int seen_index[NSPAWNERS * PER_SPAWNER] = {0};
    for (int k = 0; k < NSPAWNERS; k++)
        for (int i = 0; i < PER_SPAWNER; i++) {
            for (int k2 = 0; k2 < NSPAWNERS; k2++)
                for (int i2 = 0; i2 < PER_SPAWNER; i2++)
                    if (k2 != k || i2 != i) EXPECT_NE(grand[k][i], grand[k2][i2]);
            cor_name_t nm;
            EXPECT_ERR(cor_task_name(grand[k][i], &nm), COR_OK);
            EXPECT_EQ(strcmp(nm.name, "grandchild"), 0);
            if (nm.index < NSPAWNERS * PER_SPAWNER)
                seen_index[nm.index]++;
            else
                EXPECT_LE(nm.index, NSPAWNERS * PER_SPAWNER - 1);
        }
    for (int j = 0; j < NSPAWNERS * PER_SPAWNER; j++)
        EXPECT_EQ(seen_index[j], 1);
}

/* A thread the program made itself becomes a task when it first calls the API. */
static void *plain_thread(void *arg)
{
    *(cor_idp_t *)arg = cor_task_self();
    return NULL;
}

static void test_foreign_thread(void)
{
    cor_idp_t got = 0;
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, plain_thread, &got) == 0);
    pthread_join(th, NULL);
    EXPECT_EQ(cor_idp_kind(got), COR_KIND_TASK);
    EXPECT_NE(got, cor_task_self());
    cor_name_t nm;
    EXPECT_ERR(cor_task_name(got, &nm), COR_OK);
}

/* The calling thread's time slice in ns, as the scheduler shows it (0 if it does not). */
static uint64_t own_slice(void)
{
    FILE *f = fopen("/proc/thread-self/sched", "r");
    char line[256];
    unsigned long long ns = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "se.slice : %llu", &ns) == 1) break;
    fclose(f);
    return ns;
}

static void *attentive_thread(void *arg)
{
    uint64_t *slice = arg;
    int rc = cor_thread_attentive();
    *slice = rc == COR_OK ? own_slice() : (uint64_t)rc;
    return NULL;
}

/* Linux 6.12+ gives a fair thread the slice it asks for (default 100 us); older kernels say
 * COR_ENOTSUP. In a thread of its own, so the test's main thread keeps its slice. */
static void test_attentive(void)
{
    struct utsname u;
    REQUIRE(uname(&u) == 0);
    int major = 0, minor = 0;
    sscanf(u.release, "%d.%d", &major, &minor);
    uint64_t slice = 0;
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, attentive_thread, &slice) == 0);
    pthread_join(th, NULL);
    if (major > 6 || (major == 6 && minor >= 12))
        EXPECT_EQ(slice, 100000);
    else
        EXPECT_EQ(slice, (uint64_t)COR_ENOTSUP);
}

static atomic_int spinning;

static void *spin_thread(void *arg)
{
    (void)arg;
    while (atomic_load_explicit(&spinning, memory_order_relaxed))
        ;
    return NULL;
}

/* With twice as many spinning threads as CPUs (and one more), the kernel counts more runnable
 * threads than CPUs: cor_cpus_busy must say so within a second. It answers 0 or 1 only. */
static void test_cpus_busy(void)
{
    int first = cor_cpus_busy();
    EXPECT_TRUE(first == 0 || first == 1);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus > 0 && cpus < 64 ? 2 * (int)cpus + 1 : 129;
    pthread_t th[129];
    atomic_store(&spinning, 1);
    int started = 0;
    while (started < n && pthread_create(&th[started], NULL, spin_thread, NULL) == 0)
        started++;
    int busy = 0;
    for (int i = 0; i < 100 && !busy; i++) {
        busy = cor_cpus_busy();
        if (!busy) usleep(10000);
    }
    atomic_store(&spinning, 0);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    EXPECT_EQ(started, n);
    EXPECT_EQ(busy, 1);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"a serving thread gets a short time slice", test_attentive},
        {"more runnable threads than CPUs: cor_cpus_busy says so", test_cpus_busy},
        {"spawn and join", test_spawn_join},
        {"a task's thread carries its name", test_thread_names},
        {"bad arguments", test_spawn_bad},
        {"80 tasks at once, names with index", test_many_tasks},
        {"tasks spawning tasks", test_concurrent_spawn},
        {"a foreign thread becomes a task", test_foreign_thread},
        {NULL, NULL},
    };
    return ct_main("task", init, clean, tests, 90);
}
