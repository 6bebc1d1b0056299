/*
 * Route conformance suite: the same CUnit cases against any route plugin, through its
 * operations table only (route.h): addresses, argument errors, frames of every size from 0 B
 * to frame_max, order under load, all pairs of three ports, backpressure, close with frames
 * pending, peer death (one port closed), foreign data, and the RMA slots when present.
 *
 *   route_conf ROUTE        (or COR_CONF_ROUTE=ROUTE route_conf)
 * COR_TEST_SCALE=small shrinks the loads. the conformance scripts run it per route and provider.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_harness.h"
#include "conf_inject.h"

static const struct cor_route_ops *ops;
static struct cor_route_caps caps;

/* A frame size cap no larger than what the route accepts. */
static size_t cap(size_t n)
{
    return n < caps.frame_max ? n : caps.frame_max;
}

static uint64_t scaled(uint64_t normal, uint64_t small)
{
    return h_small() ? small : normal;
}

static void test_address(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    CU_ASSERT(strlen(p[0].addr) > 0 && strlen(p[0].addr) < COR_ADDR_MAX);
    CU_ASSERT(strcmp(p[0].addr, p[1].addr) != 0); /* two ports, two addresses */
    char small[2];
    CU_ASSERT_EQUAL(ops->address(p[0].port, small, sizeof small), COR_EINVAL);
    CU_ASSERT(ops->wait_fd(p[0].port) >= -1);
    int t = ops->timeout_ms(p[0].port);
    CU_ASSERT(t >= -1);
    /* With no fd to poll and no wait() the core can only sleep timeout_ms: it must be
     * short. A route with wait() blocks there and may have no timer at all (-1). */
    if (ops->wait_fd(p[0].port) < 0 && !ops->wait) CU_ASSERT(t >= 0 && t <= 10);
    ops->caps(p[0].port, &caps);
    CU_ASSERT(caps.frame_max >= 4096);
    CU_ASSERT(caps.eager_limit > 0 && caps.eager_limit < caps.frame_max);
    CU_ASSERT_EQUAL(ops->progress(p[0].port), 0); /* idle */
    h_close(p, 2);
}

static void test_errors(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    char *big = calloc(1, caps.frame_max + 1);
    CU_ASSERT_FATAL(big != NULL);
    struct iovec iov = {big, caps.frame_max + 1};
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, &iov, 1, NULL), COR_EINVAL); /* too large */
    iov.iov_len = 10;
    CU_ASSERT_EQUAL(ops->send(p[0].port, 5, &iov, 1, NULL), COR_EINVAL); /* no such peer */
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, NULL, 1, NULL), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->send(p[0].port, 1, &iov, -1, NULL), COR_EINVAL);
    /* A known peer at another address is refused; at its own address it may be accepted
     * again (idempotent) or refused. */
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, p[0].addr), COR_EEXIST);
    int again = ops->add_peer(p[0].port, 1, p[1].addr);
    CU_ASSERT(again == COR_OK || again == COR_EEXIST);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 7, p[1].addr), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, "localhost"), COR_EINVAL);
    /* Nothing was accepted, so nothing completes. */
    for (int i = 0; i < 100; i++)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(p[0].done_ok + p[0].done_err, 0);
    CU_ASSERT_EQUAL(p[1].rx_next[0], 0);
    free(big);
    h_close(p, 2);

    /* add_peer checks what it parses (a fresh port has no peers yet). */
    struct h_port q[1];
    CU_ASSERT_EQUAL_FATAL(h_open(q, 1, h_cookie()), COR_OK);
    again = ops->add_peer(q[0].port, 0, q[0].addr);
    CU_ASSERT(again == COR_OK || again == COR_EEXIST);
    CU_ASSERT_EQUAL(ops->add_peer(q[0].port, 1, q[0].addr), COR_EINVAL); /* rank >= npeers */
    h_close(q, 1);
}

/* Frames at every interesting size, in both directions, as separate iovec pieces. */
static size_t sizes[64];
static int nsizes;
static uint64_t got_sizes_ok;

static void size_hook(struct h_port *hp, cor_peer_t peer, const void *frame, size_t len)
{
    (void)peer;
    uint64_t i = hp->rx_next[peer];
    if (i >= (uint64_t)nsizes || len != sizes[i]) return;
    const uint8_t *f = frame;
    for (size_t k = 0; k < len; k++)
        if (f[k] != (uint8_t)(k * 31 + i + hp->rank)) return;
    got_sizes_ok++;
}

static int sizes_done(void *arg)
{
    struct h_port *p = arg;
    return p[0].rx_next[1] == (uint64_t)nsizes && p[1].rx_next[0] == (uint64_t)nsizes &&
           p[0].done_ok + p[0].done_err == (uint64_t)nsizes &&
           p[1].done_ok + p[1].done_err == (uint64_t)nsizes;
}

static void test_sizes(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    size_t fm = caps.frame_max;
    /* around GM class sizes (2^n - 8) less an 8- or 16-byte route header, e.g. the gm
     * route's small class 11 (2024/2025) and large class 15 (32744) */
    size_t cand[] = {0,     1,     7,     8,     9,      63,     64,     65,    247,
                     248,   249,   1008,  1009,  1016,   2024,   2025,   2032,  2033,
                     2040,  4080,  4081,  4088,  4096,   8184,   9000,   16376, 16384,
                     32760, 65520, 65528, 65536, 131064, 262136, fm - 1, fm};
    nsizes = 0;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (cand[i] <= fm) sizes[nsizes++] = cand[i];
    got_sizes_ok = 0;
    uint8_t *buf[2][64];
    for (int s = 0; s < 2; s++) {
        p[s].check = 0;
        p[s].hook = size_hook;
        for (int i = 0; i < nsizes; i++) {
            buf[s][i] = malloc(sizes[i] + 1);
            CU_ASSERT_FATAL(buf[s][i] != NULL);
            /* what port 1-s expects: k*31 + i + its rank */
            for (size_t k = 0; k < sizes[i]; k++)
                buf[s][i][k] = (uint8_t)(k * 31 + (size_t)i + (size_t)(1 - s));
        }
    }
    for (int i = 0; i < nsizes; i++)
        for (int s = 0; s < 2; s++) {
            size_t len = sizes[i], a = len / 3, b = len / 2;
            struct iovec iov[3] = {
                {buf[s][i], a}, {buf[s][i] + a, b - a}, {buf[s][i] + b, len - b}};
            int rc;
            double t0 = h_seconds();
            while ((rc = ops->send(p[s].port, (cor_peer_t)(1 - s), iov, 3, NULL)) == COR_EAGAIN &&
                   h_seconds() - t0 < 10)
                h_progress(p, 2);
            CU_ASSERT_EQUAL(rc, COR_OK);
        }
    CU_ASSERT(h_progress_until(p, 2, sizes_done, p, 20));
    CU_ASSERT_EQUAL(got_sizes_ok, 2 * (uint64_t)nsizes);
    CU_ASSERT_EQUAL(p[0].done_err + p[1].done_err, 0);
    printf("\n  %d sizes 0..%zu each way: %llu intact\n", nsizes, fm,
           (unsigned long long)got_sizes_ok);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < nsizes; i++)
            free(buf[s][i]);
    h_close(p, 2);
}

static void test_order_load(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    uint64_t frames = scaled(20000, 4000);
    double t0 = h_seconds();
    int rc = h_exchange(p, 2, frames, caps.frame_max, 120.0);
    double dt = h_seconds() - t0;
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(h_exchanged(p, 2, frames), 0);
    if (ops->counters) {
        uint64_t dropped = 99, retx = 0;
        ops->counters(p[0].port, &dropped, &retx);
        CU_ASSERT_EQUAL(dropped, 0);
    }
    printf("\n  %llu mixed frames each way (0..%zu B), %.1f MB, %.2f s\n",
           (unsigned long long)frames, caps.frame_max, (p[0].rx_bytes + p[1].rx_bytes) / 1e6, dt);
    h_close(p, 2);
}

static void test_three(void)
{
    struct h_port p[3];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 3, h_cookie()), COR_OK);
    CU_ASSERT_EQUAL(h_exchange(p, 3, scaled(3000, 600), cap(70000), 60.0), 0);
    h_close(p, 3);
}

static int backlog_done(void *arg)
{
    struct h_port *p = arg;
    return p[1].rx_next[0] >= p[0].tx_next[1] && p[0].done_ok >= p[0].tx_next[1];
}

/* Sending while the receiver makes no progress ends in COR_EAGAIN; nothing is lost. */
static void test_backpressure(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    int rc = COR_OK;
    for (int i = 0; i < 200000 && rc == COR_OK; i++)
        rc = h_send_next(p, 0, 1, cap(65536));
    CU_ASSERT_EQUAL(rc, COR_EAGAIN);
    uint64_t accepted = p[0].tx_next[1];
    CU_ASSERT(accepted > 0);
    CU_ASSERT(h_progress_until(p, 2, backlog_done, p, 30));
    CU_ASSERT_EQUAL(p[1].rx_next[0], accepted);
    CU_ASSERT_EQUAL(p[0].done_ok, accepted);
    CU_ASSERT_EQUAL(p[1].rx_bad, 0);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, cap(65536)), COR_OK);
    printf("\n  %llu frames accepted before EAGAIN\n", (unsigned long long)accepted);
    h_close(p, 2);
}

/* Closing with frames accepted: each gets exactly one send_done (OK if it had been sent,
 * else COR_ECLOSED), all before close returns. */
static void test_close_pending(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    int sent = 0;
    for (int i = 0; i < 50; i++)
        if (h_send_next(p, 0, 1, 1000) == COR_OK) sent++;
    CU_ASSERT_EQUAL(sent, 50);
    h_close_one(&p[0]);
    CU_ASSERT_EQUAL(p[0].done_ok + p[0].done_err, 50);
    CU_ASSERT(p[0].done_err == 0 || p[0].last_err == COR_ECLOSED);
    CU_ASSERT_EQUAL(p[0].done_late, 0);
    /* The survivor still works and sees at most what was sent, in order. */
    for (int i = 0; i < 200; i++)
        h_progress(p, 2);
    CU_ASSERT(p[1].rx_next[0] <= 50);
    CU_ASSERT_EQUAL(p[1].rx_bad, 0);
    h_close(p, 2);
}

static int death_seen(void *arg)
{
    struct h_port *p = arg;
    if (p[0].failures == 0 || p[0].done_err == 0) {
        int rc = h_send_next(p, 0, 1, 1000);
        if (rc == COR_EPEERDEAD && p[0].failures > 0) return 1;
    }
    return p[0].failures > 0 && p[0].done_err > 0;
}

/* Port 1 goes away: port 0's sends to it fail (send_done or send() with COR_EPEERDEAD) and
 * peer_failed names it, once; port 0 still talks to port 2. */
static void test_peer_death(void)
{
    struct h_port p[3];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 3, h_cookie()), COR_OK);
    CU_ASSERT_EQUAL_FATAL(h_exchange(p, 3, 100, 2000, 20.0), 0);
    h_close_one(&p[1]);
    double t0 = h_seconds();
    int seen = h_progress_until(p, 3, death_seen, p, 30);
    double dt = h_seconds() - t0;
    CU_ASSERT(seen);
    CU_ASSERT_EQUAL(p[0].failures, 1);
    CU_ASSERT_EQUAL(p[0].failed_peer, 1);
    /* closed (a route that says so: EPEERDEAD) or silent for the dead time (ETIMEDOUT) */
    CU_ASSERT(p[0].failed_err == COR_EPEERDEAD || p[0].failed_err == COR_ETIMEDOUT);
    CU_ASSERT(p[0].done_err == 0 || p[0].last_err == COR_EPEERDEAD);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 100), COR_EPEERDEAD);
    /* 0 <-> 2 still work. */
    p[2].check = 0;
    uint64_t before = p[2].rx_next[0];
    int rc = COR_EAGAIN;
    for (int i = 0; i < 1000 && rc == COR_EAGAIN; i++) {
        rc = h_send_next(p, 0, 2, 100);
        h_progress(p, 3);
    }
    CU_ASSERT_EQUAL(rc, COR_OK);
    for (int i = 0; i < 100000 && p[2].rx_next[0] == before; i++)
        h_progress(p, 3);
    CU_ASSERT(p[2].rx_next[0] > before);
    printf("\n  death noticed in %.2f s\n", dt);
    h_close(p, 3);
}

static uint64_t dropped_now(struct h_port *hp)
{
    uint64_t d = 0, r = 0;
    ops->counters(hp->port, &d, &r);
    return d;
}

static void inject_pump(void *arg)
{
    h_progress(arg, 2);
}

static void test_foreign(void)
{
    if (!ops->counters) {
        printf("\n  no counters: skipped\n");
        return;
    }
    struct h_port p[2];
    uint64_t cookie = h_cookie();
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, cookie), COR_OK);
    int n = conf_inject(h_route_name, p[0].addr, cookie, inject_pump, p);
    if (n < 0) {
        printf("\n  this build cannot inject into route %s: skipped\n", h_route_name);
        h_close(p, 2);
        return;
    }
    double t0 = h_seconds();
    while (dropped_now(&p[0]) < (uint64_t)n && h_seconds() - t0 < 5)
        h_progress(p, 2);
    uint64_t d = dropped_now(&p[0]);
    CU_ASSERT(d >= (uint64_t)n * 9 / 10);
    CU_ASSERT_EQUAL(p[0].rx_next[1], 0); /* nothing foreign was delivered */
    CU_ASSERT_EQUAL(p[0].rx_bytes, 0);
    /* and the port still works */
    CU_ASSERT_EQUAL(h_exchange(p, 2, 200, 5000, 20.0), 0);
    printf("\n  %d foreign messages, %llu dropped and counted\n", n, (unsigned long long)d);
    h_close(p, 2);
}

/* gm: a rank re-admitted for a new occupant (dynamic sessions: often at the same GM node and
 * port) takes no BYE or CREDIT of the earlier one, nor one meant for our earlier port: they
 * are dropped and counted. Port 1 closes; port 0 hears it died and re-admits rank 1 at the
 * same GM port with another incarnation (its address's "#N"); a GM port of the test's own
 * at that port id then sends, as the earlier occupant, a BYE and a CREDIT (port 0 has a
 * frame out to rank 1, so the credit would fit), and a BYE meant for port 0's earlier
 * incarnation: all three dropped, and a send to rank 1 is still accepted. Then a BYE of the
 * new occupant is taken: the next send fails. */
static uint32_t inc_of(const char *addr)
{
    const char *h = strrchr(addr, '#');
    return h ? (uint32_t)strtoul(h + 1, NULL, 10) : 0;
}

static void test_stale_control(void)
{
    if (strcmp(h_route_name, "gm") || !ops->peer_dead || !ops->counters) {
        printf("\n  not the gm route: skipped\n");
        return;
    }
    struct h_port p[2];
    uint64_t cookie = h_cookie();
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, cookie), COR_OK);
    CU_ASSERT_EQUAL(h_exchange(p, 2, 20, 100, 20.0), 0);
    char old[COR_ADDR_MAX], fresh[COR_ADDR_MAX + 16];
    strcpy(old, p[1].addr);
    uint32_t inc_old = inc_of(old), inc0 = inc_of(p[0].addr),
             inc_new = inc_old + 1 ? inc_old + 1 : 1;
    const char *hash = strrchr(old, '#');
    unsigned node, port;
    CU_ASSERT_FATAL(hash && inc_old && inc0 && sscanf(old, "%u:%u:", &node, &port) == 2);
    ops->peer_dead(p[0].port, 1);
    h_progress(p, 2);
    h_close_one(&p[1]);
    struct conf_gm_ctrl *g = conf_gm_ctrl_open(port); /* its GM port, for the test's messages */
    if (!g) {
        printf("\n  cannot open GM port %u here: skipped\n", port);
        h_close(p, 2);
        return;
    }
    snprintf(fresh, sizeof fresh, "%.*s#%u", (int)(hash - old), old, inc_new);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, fresh), COR_OK);
    for (int i = 0; i < 10; i++)
        h_progress(p, 2);
    p[0].check = 0;
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 100), COR_OK); /* takes a credit of rank 1 */
    for (int i = 0; i < 10; i++)
        h_progress(p, 2);
    uint64_t d0 = dropped_now(&p[0]);
    const uint32_t stale[3][4] = {{1 /* BYE */, 0, inc_old, inc0},
                                  {2 /* CREDIT */, 1, inc_old, inc0},
                                  {1, 0, inc_new, inc0 + 1 ? inc0 + 1 : 2}};
    CU_ASSERT_EQUAL(conf_gm_ctrl_send(g, p[0].addr, cookie, stale, 3, inject_pump, p), 0);
    for (int i = 0; i < 100; i++)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(dropped_now(&p[0]) - d0, 3);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 100), COR_OK); /* the stale BYE was not taken */
    const uint32_t bye[1][4] = {{1, 0, inc_new, inc0}};
    CU_ASSERT_EQUAL(conf_gm_ctrl_send(g, p[0].addr, cookie, bye, 1, inject_pump, p), 0);
    for (int i = 0; i < 100; i++)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(dropped_now(&p[0]) - d0, 3);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 100), COR_EPEERDEAD); /* the new one's BYE was */
    printf("\n  %llu stale control messages dropped\n",
           (unsigned long long)(dropped_now(&p[0]) - d0));
    h_close(p, 2);
    conf_gm_ctrl_close(g);
}

/* gm: data frames carry both ports' incarnations too. As in the case above, rank 1 is
 * re-admitted at the same GM port with another incarnation and port 0 has one frame out to
 * it (a credit back would fit); from that port the test then sends data frames: one of the
 * earlier occupant returning a credit, and one meant for port 0's earlier incarnation: both
 * dropped and counted, not delivered. Then one of the new occupant returning a credit (taken
 * only if the stale one's credit was not: a second would exceed what port 0 has out) and
 * one that does not know port 0's incarnation: both delivered. */
static void test_stale_data(void)
{
    if (strcmp(h_route_name, "gm") || !ops->peer_dead || !ops->counters) {
        printf("\n  not the gm route: skipped\n");
        return;
    }
    struct h_port p[2];
    uint64_t cookie = h_cookie();
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, cookie), COR_OK);
    CU_ASSERT_EQUAL(h_exchange(p, 2, 20, 100, 20.0), 0);
    char old[COR_ADDR_MAX], fresh[COR_ADDR_MAX + 16];
    strcpy(old, p[1].addr);
    uint32_t inc_old = inc_of(old), inc0 = inc_of(p[0].addr),
             inc_new = inc_old + 1 ? inc_old + 1 : 1;
    const char *hash = strrchr(old, '#');
    unsigned node, port;
    CU_ASSERT_FATAL(hash && inc_old && inc0 && sscanf(old, "%u:%u:", &node, &port) == 2);
    ops->peer_dead(p[0].port, 1);
    h_progress(p, 2);
    h_close_one(&p[1]);
    struct conf_gm_ctrl *g = conf_gm_ctrl_open(port);
    if (!g) {
        printf("\n  cannot open GM port %u here: skipped\n", port);
        h_close(p, 2);
        return;
    }
    snprintf(fresh, sizeof fresh, "%.*s#%u", (int)(hash - old), old, inc_new);
    CU_ASSERT_EQUAL(ops->add_peer(p[0].port, 1, fresh), COR_OK);
    for (int i = 0; i < 10; i++)
        h_progress(p, 2);
    p[0].check = 0;
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 100), COR_OK); /* takes a credit of rank 1 */
    for (int i = 0; i < 10; i++)
        h_progress(p, 2);
    uint64_t d0 = dropped_now(&p[0]), r0 = p[0].rx_next[1];
    const uint32_t one = 1; /* a small buffer's credit, as the frame out to rank 1 took */
    const uint32_t stale[2][3] = {{one, inc_old, inc0}, {0, inc_new, inc0 + 1 ? inc0 + 1 : 2}};
    CU_ASSERT_EQUAL(conf_gm_data_send(g, p[0].addr, cookie, stale, 2, inject_pump, p), 0);
    for (int i = 0; i < 100; i++)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(dropped_now(&p[0]) - d0, 2);
    CU_ASSERT_EQUAL(p[0].rx_next[1] - r0, 0);
    const uint32_t fine[2][3] = {{one, inc_new, inc0}, {0, inc_new, 0}};
    CU_ASSERT_EQUAL(conf_gm_data_send(g, p[0].addr, cookie, fine, 2, inject_pump, p), 0);
    for (int i = 0; i < 100; i++)
        h_progress(p, 2);
    CU_ASSERT_EQUAL(dropped_now(&p[0]) - d0, 2);
    CU_ASSERT_EQUAL(p[0].rx_next[1] - r0, 2);
    printf("\n  %llu stale data frames dropped, %llu delivered\n",
           (unsigned long long)(dropped_now(&p[0]) - d0),
           (unsigned long long)(p[0].rx_next[1] - r0));
    h_close(p, 2);
    conf_gm_ctrl_close(g);
}

/* ---- optional slots: wait, peer_dead ------------------------------------------------- */

/* wait(): an idle port blocks about timeout_ms (bounded), and a frame sent to it ends the
 * wait early. */
static void test_wait(void)
{
    if (!ops->wait) {
        printf("\n  no wait slot: skipped\n");
        return;
    }
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    CU_ASSERT_EQUAL_FATAL(h_exchange(p, 2, 10, 100, 10.0), 0);
    for (int i = 0; i < 100; i++)
        h_progress(p, 2); /* let acknowledgements settle */
    double t0 = h_seconds();
    ops->wait(p[0].port, 60);
    double idle = h_seconds() - t0;
    CU_ASSERT(idle < 1.0); /* expected ~0.06 s; never much longer than asked */
    /* A frame for port 0: wait returns long before its 2 s timeout. */
    CU_ASSERT_EQUAL(h_send_next(p, 1, 0, 100), COR_OK);
    t0 = h_seconds();
    int woke = 0;
    for (int i = 0; i < 10 && !woke; i++) { /* a route may wake for its own work first */
        ops->wait(p[0].port, 2000);
        woke = ops->progress(p[0].port) > 0 && p[0].rx_next[1] == p[1].tx_next[0];
        ops->progress(p[1].port);
    }
    double wake = h_seconds() - t0;
    CU_ASSERT(woke);
    CU_ASSERT(wake < 0.5); /* expected well under 10 ms */
    printf("\n  idle wait(60 ms) took %.1f ms; a frame ended wait(2 s) after %.2f ms\n", idle * 1e3,
           wake * 1e3);
    h_close(p, 2);
}

/* peer_dead(): the core says port 1's domain died. Frames port 0 still holds for it (port 1
 * makes no progress, so they pile up) finish at port 0's next progress(), with COR_OK or
 * COR_EPEERDEAD; later sends to it are refused; port 0 <-> 2 still work. */
static void test_peer_dead_slot(void)
{
    if (!ops->peer_dead) {
        printf("\n  no peer_dead slot: skipped\n");
        return;
    }
    struct h_port p[3];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 3, h_cookie()), COR_OK);
    CU_ASSERT_EQUAL_FATAL(h_exchange(p, 3, 20, 1000, 10.0), 0);
    uint64_t done0 = p[0].done_ok + p[0].done_err;
    int rc = COR_OK, accepted = 0;
    for (int i = 0; i < 5000 && rc == COR_OK; i++) {
        rc = h_send_next(p, 0, 1, 4000);
        accepted += rc == COR_OK;
        if (i % 64 == 0) ops->progress(p[0].port); /* port 1 never progresses */
    }
    CU_ASSERT(accepted > 0);
    ops->peer_dead(p[0].port, 1);
    ops->progress(p[0].port);
    uint64_t finished = p[0].done_ok + p[0].done_err - done0;
    CU_ASSERT_EQUAL(finished, (uint64_t)accepted);
    CU_ASSERT(p[0].done_err == 0 || p[0].last_err == COR_EPEERDEAD);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 100), COR_EPEERDEAD);
    /* 0 <-> 2 still work (port 1 is left alone: its domain is "dead"). */
    p[2].check = 0;
    uint64_t before = p[2].rx_next[0];
    rc = COR_EAGAIN;
    for (int i = 0; i < 1000 && rc == COR_EAGAIN; i++) {
        rc = h_send_next(p, 0, 2, 100);
        ops->progress(p[0].port);
        ops->progress(p[2].port);
    }
    CU_ASSERT_EQUAL(rc, COR_OK);
    for (int i = 0; i < 100000 && p[2].rx_next[0] == before; i++) {
        ops->progress(p[0].port);
        ops->progress(p[2].port);
    }
    CU_ASSERT(p[2].rx_next[0] > before);
    printf("\n  %d frames held for the dead peer, %llu finished at the next progress\n", accepted,
           (unsigned long long)finished);
    h_close(p, 3);
}

/* ---- RMA: mem_register / put / mem_alloc ------------------------------------------------ */

#define RMA_LEN (2u << 20)
static uint8_t *rma_target;
static const uint8_t *rma_source;
static size_t rma_expect_off, rma_expect_len;
static int rma_checked, rma_bad;

/* A frame after a put must find the put's data in place (put is ordered before sends). */
static void rma_hook(struct h_port *hp, cor_peer_t peer, const void *frame, size_t len)
{
    (void)hp;
    (void)peer;
    (void)frame;
    (void)len;
    if (memcmp(rma_target + rma_expect_off, rma_source + rma_expect_off, rma_expect_len) != 0)
        rma_bad++;
    rma_checked++;
}

static uint64_t rma_want_done;

static int rma_step_done(void *arg)
{
    struct h_port *p = arg;
    return p[1].rx_next[0] == p[0].tx_next[1] && p[0].done_ok + p[0].done_err >= rma_want_done;
}

static void test_rma(void)
{
    if (!ops->mem_register || !ops->mem_deregister || !ops->put) {
        CU_ASSERT(!caps.has_rma);
        printf("\n  no RMA slots: skipped\n");
        return;
    }
    CU_ASSERT(caps.has_rma);
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, h_cookie()), COR_OK);
    uint8_t *src = malloc(RMA_LEN), *dst = calloc(1, RMA_LEN + 4096);
    CU_ASSERT_FATAL(src && dst);
    for (size_t i = 0; i < RMA_LEN; i++)
        src[i] = (uint8_t)(i * 7 + (i >> 12));
    rma_target = dst;
    rma_source = src;
    struct cor_route_mr *smr = NULL, *dmr = NULL, *again = NULL;
    uint64_t skey = 0, dkey = 0, key2 = 0;
    CU_ASSERT_EQUAL_FATAL(ops->mem_register(p[0].port, src, RMA_LEN, &smr, &skey), COR_OK);
    CU_ASSERT_EQUAL_FATAL(ops->mem_register(p[1].port, dst, RMA_LEN, &dmr, &dkey), COR_OK);
    /* The registration cache hands back the region that covers a sub-range. */
    CU_ASSERT_EQUAL(ops->mem_register(p[0].port, src + 4096, 8192, &again, &key2), COR_OK);
    CU_ASSERT(again == smr);
    ops->mem_deregister(p[0].port, again);
    /* Argument errors: source outside the region, no region. */
    /* The target's address and its key, as a clear-to-send carries them. */
    uint64_t daddr = (uint64_t)(uintptr_t)dst;
    CU_ASSERT_EQUAL(ops->put(p[0].port, 1, src + RMA_LEN - 10, 100, smr, daddr, dkey, NULL),
                    COR_EINVAL);
    CU_ASSERT_EQUAL(ops->put(p[0].port, 1, src, 100, NULL, daddr, dkey, NULL), COR_EINVAL);
    CU_ASSERT_EQUAL(ops->mem_register(p[0].port, NULL, 10, &again, &key2), COR_EINVAL);

    p[1].check = 0;
    p[1].hook = rma_hook;
    size_t lens[] = {1, 100, 4096, 4097, 65536, 300000, 1u << 20};
    size_t off = 0;
    rma_checked = rma_bad = 0;
    int puts = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t len = lens[i];
        rma_expect_off = off;
        rma_expect_len = len;
        int rc = ops->put(p[0].port, 1, src + off, len, smr, daddr + off, dkey, &lens[i]);
        CU_ASSERT_EQUAL(rc, COR_OK);
        puts++;
        char note[8] = "after";
        struct iovec iov = {note, sizeof note};
        CU_ASSERT_EQUAL(ops->send(p[0].port, 1, &iov, 1, NULL), COR_OK);
        p[0].tx_next[1]++;
        rma_want_done = p[0].tx_next[1] + (uint64_t)puts;
        CU_ASSERT(h_progress_until(p, 2, rma_step_done, p, 20));
        off += len + 64;
        if (off + (1u << 20) > RMA_LEN) off = 0;
    }
    CU_ASSERT_EQUAL(rma_checked, (int)(sizeof lens / sizeof lens[0]));
    CU_ASSERT_EQUAL(rma_bad, 0);
    CU_ASSERT_EQUAL(p[0].done_err, 0);
    CU_ASSERT_EQUAL(memcmp(dst + RMA_LEN, (uint8_t[4096]){0}, 4096), 0); /* nothing beyond */

    /* DMA memory from mem_alloc works as a put source. */
    if (ops->mem_alloc && ops->mem_free) {
        uint8_t *dma = ops->mem_alloc(p[0].port, 65536);
        CU_ASSERT_FATAL(dma != NULL);
        for (int i = 0; i < 65536; i++)
            dma[i] = (uint8_t)(i ^ 0x3c);
        struct cor_route_mr *amr = NULL;
        uint64_t akey;
        CU_ASSERT_EQUAL(ops->mem_register(p[0].port, dma, 65536, &amr, &akey), COR_OK);
        rma_source = dma;
        rma_expect_off = 0;
        rma_expect_len = 65536;
        CU_ASSERT_EQUAL(ops->put(p[0].port, 1, dma, 65536, amr, daddr, dkey, NULL), COR_OK);
        char note[8] = "dma";
        struct iovec iov = {note, sizeof note};
        CU_ASSERT_EQUAL(ops->send(p[0].port, 1, &iov, 1, NULL), COR_OK);
        p[0].tx_next[1]++;
        rma_want_done = p[0].tx_next[1] + (uint64_t)puts + 1;
        CU_ASSERT(h_progress_until(p, 2, rma_step_done, p, 20));
        CU_ASSERT_EQUAL(rma_bad, 0);
        ops->mem_deregister(p[0].port, amr);
        ops->mem_free(p[0].port, dma);
    }
    p[1].hook = NULL;
    ops->mem_deregister(p[0].port, smr);
    ops->mem_deregister(p[1].port, dmr);
    printf("\n  %d puts of 1 B..1 MiB, each seen before the frame sent after it\n", rma_checked);
    h_close(p, 2);
    free(src);
    free(dst);
}

/* COR_CONF_ONLY=text runs only the cases whose name contains it. */
static void add(CU_pSuite s, const char *name, CU_TestFunc fn)
{
    const char *only = getenv("COR_CONF_ONLY");
    if (!only || !*only || strstr(name, only)) CU_add_test(s, name, fn);
}

int main(int argc, char **argv)
{
    const char *r = argc > 1 ? argv[1] : getenv("COR_CONF_ROUTE");
    if (r && *r) h_route_name = r;
    ops = h_route();
    if (!ops) return 1;
    struct h_port p[1];
    if (h_open(p, 1, h_cookie()) != COR_OK) return 1;
    ops->caps(p[0].port, &caps);
    h_close(p, 1);
    printf("route conformance: %s, frame_max %zu, eager_limit %zu, rma %d, zero-copy send %d\n",
           h_route_name, caps.frame_max, caps.eager_limit, caps.has_rma, caps.zero_copy_send);
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite(h_route_name, NULL, NULL);
    add(s, "address, caps and idle state", test_address);
    add(s, "argument errors refused, nothing sent", test_errors);
    add(s, "frames of 0 B..frame_max both ways, gathered from 3 pieces", test_sizes);
    add(s, "order under load: mixed frames both ways", test_order_load);
    add(s, "three ports, all pairs", test_three);
    add(s, "backpressure: EAGAIN, then everything arrives", test_backpressure);
    add(s, "wait: idle blocks, a frame wakes it", test_wait);
    add(s, "peer_dead: held frames finish at the next progress, later sends refused",
        test_peer_dead_slot);
    add(s, "close with frames pending: one send_done each", test_close_pending);
    add(s, "peer death: sends fail, peer_failed once, others unaffected", test_peer_death);
    add(s, "foreign data dropped and counted", test_foreign);
    add(s, "gm: stale BYE/CREDIT of a re-admitted rank dropped and counted", test_stale_control);
    add(s, "gm: stale data frames (and their credits) of a re-admitted rank dropped",
        test_stale_data);
    add(s, "RMA: register (cached), put ordered before later sends, DMA memory", test_rma);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
