/*
 * The request lifecycle through the public API: test, wait, waitany, waitall, cancel, and
 * handles that are invalid once completed (or never existed).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cor/cor.h"
#include "../ctest.h"
#include "one_domain.h"

static int send_int(int tag, int v)
{
    return cor_send(me, COR_CTX_WORLD, tag, COR_INT, &v, 1);
}

static void test_test_then_wait(void)
{
    int v = 0, done = 7;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_OK);
    EXPECT_NE(r, COR_REQ_NULL);
    cor_req_t copy = r;
    for (int i = 0; i < 3; i++) {
        EXPECT_ERR(cor_test(&r, &done, NULL), COR_OK);
        EXPECT_EQ(done, 0);
        EXPECT_EQ(r, copy); /* a pending handle stays as it is */
    }
    EXPECT_ERR(send_int(1, 5), COR_OK);
    cor_status_t st;
    EXPECT_ERR(cor_test(&r, &done, &st), COR_OK);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(r, COR_REQ_NULL);
    EXPECT_EQ(v, 5);
    EXPECT_EQ(st.tag, 1);
    /* the completed handle is dead everywhere */
    EXPECT_ERR(cor_test(&copy, &done, NULL), COR_EINVAL);
    EXPECT_ERR(cor_wait(&copy, NULL), COR_EINVAL);
    EXPECT_ERR(cor_cancel(&copy), COR_EINVAL);
    EXPECT_ERR(cor_test(&r, &done, NULL), COR_EINVAL);
    EXPECT_ERR(cor_wait(&r, NULL), COR_EINVAL);
    EXPECT_ERR(cor_test(NULL, &done, NULL), COR_EINVAL);
    EXPECT_ERR(cor_test(&copy, NULL, NULL), COR_EINVAL);
    EXPECT_ERR(cor_wait(NULL, NULL), COR_EINVAL);
    EXPECT_ERR(cor_cancel(NULL), COR_EINVAL);
}

/* A recycled request slot does not revive an old handle. */
static void test_stale_after_reuse(void)
{
    enum { N = 50 };
    cor_req_t old[N];
    int v;
    for (int i = 0; i < N; i++) {
        cor_req_t r;
        EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 2, COR_INT, &v, 1, &r), COR_OK);
        old[i] = r;
        EXPECT_ERR(send_int(2, i), COR_OK);
        EXPECT_ERR(cor_wait(&r, NULL), COR_OK);
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < i; j++)
            EXPECT_NE(old[i], old[j]);
        cor_req_t h = old[i];
        EXPECT_ERR(cor_wait(&h, NULL), COR_EINVAL);
    }
    /* a live request does not answer to its slot's old handles */
    cor_req_t live;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 3, COR_INT, &v, 1, &live), COR_OK);
    for (int i = 0; i < N; i++) {
        cor_req_t h = old[i];
        EXPECT_ERR(cor_cancel(&h), COR_EINVAL);
    }
    EXPECT_ERR(cor_cancel(&live), COR_OK);
    EXPECT_ERR(cor_wait(&live, NULL), COR_ECANCELED);
}

static void test_forged(void)
{
    const cor_req_t forged[] = {1,
                                2,
                                0xffffffffull,
                                0x100000000ull,
                                0x123456789abcdefull,
                                ~0ull,
                                0xffffffff00000000ull,
                                (cor_req_t)1 << 40 | 7};
    for (size_t i = 0; i < sizeof forged / sizeof *forged; i++) {
        cor_req_t h = forged[i];
        int done = 3;
        EXPECT_ERR(cor_test(&h, &done, NULL), COR_EINVAL);
        EXPECT_EQ(done, 3);
        EXPECT_ERR(cor_wait(&h, NULL), COR_EINVAL);
        EXPECT_ERR(cor_cancel(&h), COR_EINVAL);
        EXPECT_EQ(h, forged[i]);
        size_t idx;
        EXPECT_ERR(cor_waitany(1, &h, &idx, NULL), COR_EINVAL);
        EXPECT_ERR(cor_waitall(1, &h, NULL), COR_EINVAL);
    }
}

static void test_waitany(void)
{
    cor_req_t r[4];
    int v[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++)
        EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 10 + i, COR_INT, &v[i], 1, &r[i]), COR_OK);
    cor_req_t keep[4];
    memcpy(keep, r, sizeof r);
    EXPECT_ERR(send_int(12, 120), COR_OK);
    size_t idx = 99;
    cor_status_t st;
    EXPECT_ERR(cor_waitany(4, r, &idx, &st), COR_OK);
    EXPECT_EQ(idx, 2);
    EXPECT_EQ(r[2], COR_REQ_NULL);
    EXPECT_EQ(v[2], 120);
    EXPECT_EQ(st.tag, 12);
    for (int i = 0; i < 4; i++)
        if (i != 2) EXPECT_EQ(r[i], keep[i]);
    /* NULL entries are skipped */
    EXPECT_ERR(send_int(10, 100), COR_OK);
    EXPECT_ERR(cor_waitany(4, r, &idx, NULL), COR_OK);
    EXPECT_EQ(idx, 0);
    /* an error result comes back with its index */
    EXPECT_ERR(cor_cancel(&r[3]), COR_OK);
    EXPECT_ERR(cor_waitany(4, r, &idx, &st), COR_ECANCELED);
    EXPECT_EQ(idx, 3);
    EXPECT_ERR(st.error, COR_ECANCELED);
    /* completion from another task wakes the waiter */
    EXPECT_ERR(send_int(11, 110), COR_OK);
    EXPECT_ERR(cor_waitany(4, r, &idx, NULL), COR_OK);
    EXPECT_EQ(idx, 1);
    /* nothing left: an error at once, not a hang */
    idx = 5;
    EXPECT_ERR(cor_waitany(4, r, &idx, NULL), COR_EINVAL);
    EXPECT_EQ(idx, (size_t)-1);
    EXPECT_ERR(cor_waitany(0, NULL, &idx, NULL), COR_EINVAL);
    EXPECT_ERR(cor_waitany(4, r, NULL, NULL), COR_EINVAL);
    EXPECT_ERR(cor_waitany(4, NULL, &idx, NULL), COR_EINVAL);
}

struct delayed {
    int tag, v, delay_ms;
};

static int delayed_sender(void *p)
{
    struct delayed *d = p;
    usleep((useconds_t)d->delay_ms * 1000);
    return send_int(d->tag, d->v);
}

static void test_wait_blocks_until_other_task(void)
{
    int v = 0;
    cor_req_t r;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 20, COR_INT, &v, 1, &r), COR_OK);
    /* me is main's idp: the delayed task sends as itself, so match any source */
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_ERR(cor_wait(&r, NULL), COR_ECANCELED);
    EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 20, COR_INT, &v, 1, &r), COR_OK);
    struct delayed d = {20, 77, 50};
    cor_idp_t t;
    REQUIRE(cor_task_spawn("late", delayed_sender, &d, &t) == COR_OK);
    double t0 = ct_now();
    cor_status_t st;
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    double dt = ct_now() - t0;
    EXPECT_EQ(v, 77);
    EXPECT_EQ(st.source, t);
    EXPECT_GE(dt * 1000, 40); /* it really waited for the sender */
    EXPECT_LE(dt, 10);
    int s = -1;
    EXPECT_ERR(cor_task_join(t, &s), COR_OK);
    EXPECT_EQ(s, 0);
}

static void test_waitall(void)
{
    enum { N = 6 };
    cor_req_t r[N + 1];
    int v[N];
    int small[1];
    for (int i = 0; i < N; i++)
        EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 30 + i, COR_INT, &v[i], 1, &r[i]), COR_OK);
    r[N] = COR_REQ_NULL; /* skipped */
    for (int i = N - 1; i >= 0; i--)
        EXPECT_ERR(send_int(30 + i, i * 3), COR_OK);
    cor_status_t st[N + 1];
    EXPECT_ERR(cor_waitall(N + 1, r, st), COR_OK);
    for (int i = 0; i < N; i++) {
        EXPECT_EQ(r[i], COR_REQ_NULL);
        EXPECT_EQ(v[i], i * 3);
        EXPECT_EQ(st[i].tag, 30 + i);
        EXPECT_ERR(st[i].error, COR_OK);
    }
    /* the first error is returned, all complete, each status has its own result */
    int two[2] = {1, 2};
    cor_req_t q[3];
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 40, COR_INT, &v[0], 1, &q[0]), COR_OK);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 41, COR_INT, small, 1, &q[1]), COR_OK);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 42, COR_INT, &v[2], 1, &q[2]), COR_OK);
    EXPECT_ERR(cor_cancel(&q[2]), COR_OK);
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 41, COR_INT, two, 2), COR_OK);
    EXPECT_ERR(send_int(40, 400), COR_OK);
    EXPECT_ERR(cor_waitall(3, q, st), COR_ETRUNC);
    EXPECT_ERR(st[0].error, COR_OK);
    EXPECT_ERR(st[1].error, COR_ETRUNC);
    EXPECT_ERR(st[2].error, COR_ECANCELED);
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(q[i], COR_REQ_NULL);
    /* all NULL: nothing to do */
    EXPECT_ERR(cor_waitall(3, q, NULL), COR_OK);
    EXPECT_ERR(cor_waitall(0, NULL, NULL), COR_OK);
    EXPECT_ERR(cor_waitall(2, NULL, NULL), COR_EINVAL);
}

static void test_cancel(void)
{
    int v = -1;
    cor_req_t r;
    cor_status_t st;
    /* pending: canceled, and a later message is not eaten by it */
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 50, COR_INT, &v, 1, &r), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_NE(r, COR_REQ_NULL);         /* completed by test/wait, not by cancel */
    EXPECT_ERR(cor_cancel(&r), COR_OK); /* twice is harmless */
    EXPECT_ERR(cor_wait(&r, &st), COR_ECANCELED);
    EXPECT_ERR(st.error, COR_ECANCELED);
    EXPECT_EQ(v, -1);
    EXPECT_ERR(send_int(50, 5), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 50, COR_INT, &v, 1, NULL), COR_OK);
    EXPECT_EQ(v, 5);
    /* already matched: completes normally */
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 51, COR_INT, &v, 1, &r), COR_OK);
    EXPECT_ERR(send_int(51, 6), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    EXPECT_EQ(v, 6);
    /* matched from the unexpected queue at post time: the same */
    EXPECT_ERR(send_int(52, 7), COR_OK);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 52, COR_INT, &v, 1, &r), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_ERR(cor_wait(&r, NULL), COR_OK);
    EXPECT_EQ(v, 7);
    /* a large send that waits for its receive cannot be canceled */
    size_t n = 1 << 20;
    char *big = calloc(1, n);
    REQUIRE(big != NULL);
    cor_req_t s;
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, 53, COR_BYTE, big, n, &s), COR_OK);
    EXPECT_ERR(cor_cancel(&s), COR_EINVAL);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 53, COR_BYTE, big, n, NULL), COR_OK);
    EXPECT_ERR(cor_wait(&s, NULL), COR_OK);
    free(big);
    cor_stats_t sts;
    EXPECT_ERR(cor_stats_get(&sts), COR_OK);
    EXPECT_EQ(sts.unexpected_now, 0);
}

/* Cancel racing a sender task: each receive completes exactly once, either way. */
#define RACE_N 300
static int race_sender(void *p)
{
    (void)p;
    int err = 0;
    for (int i = 0; i < RACE_N && !err; i++)
        err = send_int(60, i);
    return err;
}

static void test_cancel_race(void)
{
    cor_idp_t t;
    REQUIRE(cor_task_spawn("racer", race_sender, NULL, &t) == COR_OK);
    int got = 0, canceled = 0, other = 0, last = -1, disorder = 0;
    double end = ct_now() + 30;
    while (got < RACE_N && ct_now() < end) {
        int v = -1;
        cor_req_t r;
        if (cor_recvI_into(t, COR_CTX_WORLD, 60, COR_INT, &v, 1, &r) != COR_OK) {
            other++;
            break;
        }
        if (got % 3 == 0) cor_cancel(&r);
        int err = cor_wait(&r, NULL);
        if (err == COR_OK) {
            if (v != last + 1) disorder++;
            last = v;
            got++;
        } else if (err == COR_ECANCELED) {
            canceled++;
        } else {
            other++;
        }
    }
    EXPECT_EQ(got, RACE_N); /* no message lost to a canceled receive */
    EXPECT_EQ(disorder, 0);
    EXPECT_EQ(other, 0);
    int s = -1;
    EXPECT_ERR(cor_task_join(t, &s), COR_OK);
    EXPECT_EQ(s, 0);
    printf("(%d canceled) ", canceled);
}

/* Handles of requests owned by one task can be completed by another. */
static cor_req_t handoff;
static int handoff_v;
static int completer(void *p)
{
    (void)p;
    return cor_wait(&handoff, NULL);
}

static void test_wait_in_other_task(void)
{
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 70, COR_INT, &handoff_v, 1, &handoff), COR_OK);
    cor_idp_t t;
    REQUIRE(cor_task_spawn("completer", completer, NULL, &t) == COR_OK);
    usleep(20000);
    EXPECT_ERR(send_int(70, 700), COR_OK);
    int s = -1;
    EXPECT_ERR(cor_task_join(t, &s), COR_OK);
    EXPECT_ERR(s, COR_OK);
    EXPECT_EQ(handoff_v, 700);
    EXPECT_EQ(handoff, COR_REQ_NULL);
}

/* ---- blocking waits woken by other tasks' completions: no spinning, so every wait sleeps,
 * and a completion takes the owner's lock only when it sees a sleeper ---- */

#define PAIRS 4
static atomic_int pp_errors, pp_slow;
static int pp_rounds;

/* One wait that sleeps at once (`spin`: or spins first, the default budget); a lost wake-up
 * would sleep until the core's 100 ms re-check. */
static int wait_asleep(cor_req_t *r, cor_status_t *st, bool spin)
{
    int done = 0;
    double t0 = ct_now();
    int err = cor_wait_timeout(r, spin ? -1 : 0, 10000000, NULL, NULL, &done, st);
    if (ct_now() - t0 > 0.09) atomic_fetch_add(&pp_slow, 1);
    return !err && !done ? COR_ETIMEDOUT : err;
}

/* Pair k: to the ponger on tag 200 + 2k, back on 201 + 2k; the ponger spins, so its answer
 * often completes the pinger's receive while the pinger is on its way to sleep. */
static int pp_play(int tag, bool ping, cor_idp_t peer)
{
    for (int i = 0; i < pp_rounds; i++) {
        int v = -1;
        cor_req_t r;
        cor_status_t st;
        int err = cor_recvI_into(ping ? peer : COR_ANY_SOURCE, COR_CTX_WORLD, tag + ping, COR_INT,
                                 &v, 1, &r);
        if (!err && ping) err = cor_send(peer, COR_CTX_WORLD, tag, COR_INT, &i, 1);
        if (!err) err = wait_asleep(&r, &st, !ping); /* the answer comes at once */
        if (!err && !ping) err = cor_send(st.source, COR_CTX_WORLD, tag + 1, COR_INT, &v, 1);
        if (err || v != i) {
            atomic_fetch_add(&pp_errors, 1);
            return 1;
        }
    }
    return 0;
}

static cor_idp_t pong_idp[PAIRS];

static int ponger(void *arg)
{
    return pp_play(200 + 2 * (int)(intptr_t)arg, false, COR_IDP_NULL);
}

static int pinger(void *arg)
{
    int k = (int)(intptr_t)arg;
    return pp_play(200 + 2 * k, true, pong_idp[k]);
}

static void test_sleeping_waits_woken(void)
{
    const char *scale = getenv("COR_TEST_SCALE");
    pp_rounds = scale && !strcmp(scale, "small") ? 300 : 2000;
    cor_idp_t ping[PAIRS];
    for (int k = 0; k < PAIRS; k++)
        REQUIRE(cor_task_spawn("pong", ponger, (void *)(intptr_t)k, &pong_idp[k]) == COR_OK);
    for (int k = 0; k < PAIRS; k++)
        REQUIRE(cor_task_spawn("ping", pinger, (void *)(intptr_t)k, &ping[k]) == COR_OK);
    for (int k = 0; k < PAIRS; k++) {
        int s = -1;
        EXPECT_ERR(cor_task_join(ping[k], &s), COR_OK);
        EXPECT_EQ(s, 0);
        EXPECT_ERR(cor_task_join(pong_idp[k], &s), COR_OK);
        EXPECT_EQ(s, 0);
    }
    EXPECT_EQ(atomic_load(&pp_errors), 0);
    /* the pingers' waits sleep (4 x rounds of them); one that missed its wake-up took 100 ms.
     * A preempted thread may be that late too, rarely: allow 1% */
    int waits = PAIRS * pp_rounds;
    printf("(%d sleeping waits, %d took over 90 ms) ", waits, atomic_load(&pp_slow));
    EXPECT_LE(atomic_load(&pp_slow), waits / 100);
}

/* cor_progress polls without blocking: one domain has no route, so nothing to handle; a
 * pending receive stays pending, and one whose message came completes as before. */
static void test_progress(void)
{
    int v = 0, done = 0;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 9, COR_INT, &v, 1, &r), COR_OK);
    for (int i = 0; i < 100; i++)
        EXPECT_EQ(cor_progress(), 0);
    EXPECT_ERR(cor_peek(r, &done), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_ERR(send_int(9, 42), COR_OK);
    EXPECT_TRUE(cor_progress() >= 0);
    EXPECT_ERR(cor_wait(&r, NULL), COR_OK);
    EXPECT_EQ(v, 42);
}

/* A loop of cor_test gives its CPU away once it found nothing for a while: a thread that
 * computes on the same CPU runs within the loop's first 2000 tests (about 10 us of them
 * pass before the first yield), not a whole time slice (milliseconds) later when the
 * scheduler would take the CPU from the loop. */
static atomic_long worker_count;
static atomic_int worker_stop;

static void *worker(void *arg)
{
    cpu_set_t *one = arg;
    sched_setaffinity(0, sizeof *one, one);
    while (!atomic_load_explicit(&worker_stop, memory_order_relaxed))
        atomic_fetch_add_explicit(&worker_count, 1, memory_order_relaxed);
    return NULL;
}

static void test_loop_yields(void)
{
    cpu_set_t all, one;
    REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
    int cpu = sched_getcpu();
    REQUIRE(cpu >= 0);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, worker, &one) == 0);
    for (int i = 0; i < 2000 && atomic_load(&worker_count) == 0; i++)
        usleep(1000); /* until the worker runs on our CPU */
    int v = 0, done = 0;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 11, COR_INT, &v, 1, &r), COR_OK);
    long before = atomic_load(&worker_count), tests = 0;
    int err = COR_OK;
    while (err == COR_OK && tests < 1000000 && atomic_load(&worker_count) == before) {
        err = cor_test(&r, &done, NULL);
        tests++;
    }
    atomic_store(&worker_stop, 1);
    pthread_join(th, NULL);
    sched_setaffinity(0, sizeof all, &all);
    EXPECT_ERR(err, COR_OK);
    EXPECT_EQ(done, 0);
    if (tests >= 2000) printf("the worker ran after %ld tests, not within 2000\n", tests);
    EXPECT_TRUE(tests < 2000);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"test, then completion", test_test_then_wait},
        {"stale handles after reuse", test_stale_after_reuse},
        {"forged handles", test_forged},
        {"waitany", test_waitany},
        {"wait blocks until another task sends", test_wait_blocks_until_other_task},
        {"waitall", test_waitall},
        {"cancel", test_cancel},
        {"cancel racing a sender", test_cancel_race},
        {"wait from another task", test_wait_in_other_task},
        {"sleeping waits woken by other tasks' completions", test_sleeping_waits_woken},
        {"cor_progress", test_progress},
        {"a test loop yields its CPU", test_loop_yields},
        {NULL, NULL},
    };
    return ct_main("req", init, clean, tests, 90);
}
