/* CoRudpRoute through its operations table: exchange, order, backpressure, errors, close. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_harness.h"

#define COOKIE 0x1234abcd5678ef01ull

static uint64_t frames_from_env(uint64_t def)
{
    const char *v = getenv("UDP_TEST_FRAMES");
    return v && atoll(v) > 0 ? (uint64_t)atoll(v) : def;
}

static void test_exchange_clean(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    uint64_t frames = frames_from_env(20000);
    double t0 = h_seconds();
    int rc = h_exchange(p, 2, frames, (size_t)-1, 120.0);
    double dt = h_seconds() - t0;
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(h_exchanged(p, 2, frames), 0);
    uint64_t dropped = 99, retx = 0;
    h_route()->counters(p[0].port, &dropped, &retx);
    CU_ASSERT_EQUAL(dropped, 0);
    printf("\n  %llu frames each way, %.1f MB received, %.2f s, %llu retransmits\n",
           (unsigned long long)frames, (p[0].rx_bytes + p[1].rx_bytes) / 1e6, dt,
           (unsigned long long)retx);
    h_close(p, 2);
}

static void test_exchange_three(void)
{
    struct h_port p[3];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 3, COOKIE), COR_OK);
    CU_ASSERT_EQUAL(h_exchange(p, 3, 2000, 70000, 60.0), 0);
    h_close(p, 3);
}

/* Sending without the receiver making progress fills the window: EAGAIN, nothing lost. */
static void test_backpressure(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    const struct cor_route_ops *ops = h_route();
    int rc = COR_OK, accepted = 0;
    for (int i = 0; i < 100000 && rc == COR_OK; i++) {
        rc = h_send_next(p, 0, 1, 65536);
        if (rc == COR_OK) accepted++;
    }
    CU_ASSERT_EQUAL(rc, COR_EAGAIN);
    CU_ASSERT(accepted > 0);
    /* Now let both sides run: every accepted frame arrives, then the window reopens. */
    double t0 = h_seconds();
    while ((p[1].rx_next[0] < (uint64_t)accepted || p[0].done_ok < (uint64_t)accepted) &&
           h_seconds() - t0 < 30)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(p[1].rx_next[0], (uint64_t)accepted);
    CU_ASSERT_EQUAL(p[0].done_ok, (uint64_t)accepted);
    CU_ASSERT_EQUAL(p[1].rx_bad, 0);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 65536), COR_OK);
    (void)ops;
    h_close(p, 2);
}

static void test_send_errors(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    const struct cor_route_ops *ops = h_route();
    struct cor_route_caps caps;
    ops->caps(p[0].port, &caps);
    CU_ASSERT(caps.frame_max >= (1u << 20));
    CU_ASSERT(caps.eager_limit > 0 && caps.eager_limit < caps.frame_max);
    char *big = calloc(1, caps.frame_max + 1);
    struct iovec iov = {big, caps.frame_max + 1};
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, &iov, 1, NULL), COR_EINVAL);
    iov.iov_len = caps.frame_max;
    CU_ASSERT_EQUAL(ops->send(p[0].port, 5, &iov, 1, NULL), COR_EINVAL); /* no such peer */
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, NULL, 1, NULL), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, &iov, -1, NULL), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, "127.0.0.1:1"), COR_EEXIST);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 7, p[1].addr), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, "localhost"), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, "1.2.3.4:99999"), COR_EINVAL);
    /* A maximal frame in many pieces (copied) and an empty frame both arrive. */
    struct iovec pieces[16];
    for (int i = 0; i < 16; i++)
        pieces[i] = (struct iovec){big + i * (caps.frame_max / 16), caps.frame_max / 16};
    for (size_t i = 0; i < caps.frame_max; i++)
        big[i] = (char)(i * 13);
    p[1].check = 0;
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, pieces, 16, NULL), COR_OK);
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, NULL, 0, NULL), COR_OK);
    double t0 = h_seconds();
    while (p[1].rx_next[0] < 2 && h_seconds() - t0 < 10)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(p[1].rx_next[0], 2);
    CU_ASSERT_EQUAL(p[1].rx_bytes, 16 * (caps.frame_max / 16));
    free(big);
    h_close(p, 2);
}

/* Closing with frames in flight completes them with COR_ECLOSED. */
static void test_close_pending(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    int sent = 0;
    for (int i = 0; i < 10; i++)
        if (h_send_next(p, 0, 1, 1000) == COR_OK) sent++;
    CU_ASSERT_EQUAL(sent, 10);
    struct cor_rport *port0 = p[0].port;
    p[0].port = NULL;
    h_route()->close(port0);
    CU_ASSERT_EQUAL(p[0].done_err, 10);
    CU_ASSERT_EQUAL(p[0].last_err, COR_ECLOSED);
    h_close(p, 2);
}

static void test_address(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    CU_ASSERT(strncmp(p[0].addr, "127.0.0.1:", 10) == 0);
    CU_ASSERT(strcmp(p[0].addr, p[1].addr) != 0);
    char small[4];
    CU_ASSERT_EQUAL(h_route()->address(p[0].port, small, sizeof(small)), COR_EINVAL);
    CU_ASSERT(h_route()->wait_fd(p[0].port) >= 0);
    /* Idle: no timer but the sweep of the peers never talked to (udp_rx.c), within
     * COR_UDP_PROBE_MS (1 s). */
    int t = h_route()->timeout_ms(p[0].port);
    CU_ASSERT(t >= 0 && t <= 1000);
    h_close(p, 2);
}

/* Interface-MTU-sized datagrams (as towards another host): a 1 MiB frame is ~720 datagrams,
 * more than the window, so it also goes through the send queue in pieces. */
static void test_small_datagrams(void)
{
    setenv("COR_UDP_DGRAM", "1500", 1);
    struct h_port p[2];
    int rc = h_open(p, 2, COOKIE);
    unsetenv("COR_UDP_DGRAM");
    CU_ASSERT_EQUAL_FATAL(rc, COR_OK);
    CU_ASSERT_EQUAL(h_exchange(p, 2, frames_from_env(20000) / 10, (size_t)-1, 60.0), 0);
    h_close(p, 2);
}

/* Knobs with bad values make open() fail with COR_EINVAL, not a crash or a silent default. */
static void test_bad_knobs(void)
{
    const char *bad[][2] = {{"COR_UDP_WINDOW", "100"},       {"COR_UDP_WINDOW", "-1"},
                            {"COR_UDP_DEAD_MS", "x"},        {"COR_UDP_DGRAM", "100"},
                            {"COR_UDP_FAULTS", "drop=0.5,"}, {"COR_UDP_FAULTS", "drop=7"},
                            {"COR_UDP_BIND", "nowhere"},     {"COR_UDP_BATCH", "1000"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv(bad[i][0], bad[i][1], 1);
        struct h_port p[2];
        int rc = h_open(p, 2, COOKIE);
        unsetenv(bad[i][0]);
        if (rc == COR_OK) h_close(p, 2);
        if (rc != COR_EINVAL)
            fprintf(stderr, "%s=%s: open returned %d, expected COR_EINVAL\n", bad[i][0], bad[i][1],
                    rc);
        CU_ASSERT_EQUAL(rc, COR_EINVAL);
    }
}

/* The core's threading: a task thread sends on port 0 while another thread runs progress()
 * on it (callbacks there), and the main thread drives port 1 and sends back. */
struct thr {
    struct h_port *p;
    uint64_t frames;
    int stop; /* atomic */
    int rc;
};

static void *sender_main(void *arg)
{
    struct thr *t = arg;
    double t0 = h_seconds();
    while (t->p[0].tx_next[1] < t->frames && h_seconds() - t0 < 60) {
        if (t->p[0].tx_next[1] - __atomic_load_n(&t->p[0].done_ok, __ATOMIC_RELAXED) >= 1000) {
            sched_yield();
            continue;
        }
        int rc = h_send_next(t->p, 0, 1, 20000);
        if (rc == COR_EAGAIN)
            sched_yield();
        else if (rc != COR_OK) {
            t->rc = rc;
            break;
        }
    }
    return NULL;
}

static void *progress_main(void *arg)
{
    struct thr *t = arg;
    while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE))
        h_route()->progress(t->p[0].port);
    return NULL;
}

static void test_threads(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    p[0].rx_max = p[1].rx_max = 20000;
    struct thr t = {p, 3000, 0, 0};
    pthread_t ts, tp;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tp, NULL, progress_main, &t), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ts, NULL, sender_main, &t), 0);
    double t0 = h_seconds();
    uint64_t back = 0;
    while ((p[1].rx_next[0] < t.frames ||
            __atomic_load_n(&p[0].done_ok, __ATOMIC_RELAXED) < t.frames || p[1].done_ok < back) &&
           h_seconds() - t0 < 60) {
        if (back < 500 && h_send_next(p, 1, 0, 20000) == COR_OK) back++;
        h_route()->progress(p[1].port);
    }
    pthread_join(ts, NULL);
    /* Port 0's progress thread still runs: wait for the replies to land there. */
    while (p[1].done_ok < back && h_seconds() - t0 < 60)
        h_route()->progress(p[1].port);
    __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
    pthread_join(tp, NULL);
    CU_ASSERT_EQUAL(t.rc, COR_OK);
    CU_ASSERT_EQUAL(p[1].rx_next[0], t.frames);
    CU_ASSERT_EQUAL(p[0].done_ok, t.frames);
    CU_ASSERT_EQUAL(p[0].rx_next[1], back);
    CU_ASSERT_EQUAL(p[1].done_ok, back);
    CU_ASSERT_EQUAL(p[0].rx_bad + p[1].rx_bad, 0);
    h_close(p, 2);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("udp_route", NULL, NULL);
    CU_add_test(s, "address and idle state", test_address);
    CU_add_test(s, "send/add_peer argument errors, big and empty frames", test_send_errors);
    CU_add_test(s, "clean exchange, both directions, in order", test_exchange_clean);
    CU_add_test(s, "three ports, all pairs", test_exchange_three);
    CU_add_test(s, "backpressure: EAGAIN then everything arrives", test_backpressure);
    CU_add_test(s, "close completes pending sends with ECLOSED", test_close_pending);
    CU_add_test(s, "sender thread + progress thread on one port", test_threads);
    CU_add_test(s, "MTU-sized datagrams, frames larger than the window", test_small_datagrams);
    CU_add_test(s, "bad knob values refused", test_bad_knobs);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
