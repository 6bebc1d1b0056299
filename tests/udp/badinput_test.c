/* CoRudpRoute against a stranger's datagrams, and against a peer that dies. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf_harness.h"
#include "udp_wire.h"

#define COOKIE 0xfeedc0de12345678ull

static int parse_addr(const char *s, struct sockaddr_in *sa)
{
    char ip[64];
    unsigned port;
    if (sscanf(s, "%63[0-9.]:%u", ip, &port) != 2) return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static uint64_t dropped_of(struct h_port *p)
{
    uint64_t d = 0, r = 0;
    h_route()->counters(p->port, &d, &r);
    return d;
}

static void put_hdr(uint8_t *b, uint64_t cookie, uint32_t src, uint32_t dst, uint32_t seq,
                    uint32_t frame_len, uint32_t off, uint32_t len)
{
    struct udp_hdr h = {.type = UDP_T_DATA,
                        .cookie = cookie,
                        .src = src,
                        .dst = dst,
                        .seq = seq,
                        .frame_len = frame_len,
                        .frag_off = off,
                        .len = len};
    udp_wire_put(b, &h);
}

static void test_stranger(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(h_open(p, 2, COOKIE), COR_OK);
    CU_ASSERT_EQUAL_FATAL(h_exchange(p, 2, 200, 70000, 30), 0);
    struct sockaddr_in to;
    CU_ASSERT_EQUAL_FATAL(parse_addr(p[0].addr, &to), 0);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CU_ASSERT_FATAL(fd >= 0);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&lo, sizeof(lo)), 0);
    uint64_t before = dropped_of(&p[0]);
    static uint8_t b[65507];
    int sent = 0;
    srand(99);
#define SEND(len)                                                                                  \
    do {                                                                                           \
        if (sendto(fd, b, (len), 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)(len)) sent++; \
    } while (0)
    /* Random bytes of random lengths, including empty datagrams. */
    for (int i = 0; i < 200; i++) {
        size_t len = (size_t)(rand() % 2000);
        for (size_t j = 0; j < len; j++)
            b[j] = (uint8_t)rand();
        SEND(len);
    }
    /* Well-formed but with the wrong cookie. */
    put_hdr(b, COOKIE ^ 1, 1, 0, 0, 10, 0, 10);
    SEND(UDP_HDR_LEN + 10);
    /* Right cookie, but from an address that is not peer 1's (a stranger's socket). */
    put_hdr(b, COOKIE, 1, 0, p[0].rx_next[1] * 0 + 1000, 10, 0, 10);
    SEND(UDP_HDR_LEN + 10);
    /* Rank outside the session; wrong destination rank. */
    put_hdr(b, COOKIE, 9, 0, 0, 10, 0, 10);
    SEND(UDP_HDR_LEN + 10);
    put_hdr(b, COOKIE, 1, 1, 0, 10, 0, 10);
    SEND(UDP_HDR_LEN + 10);
    /* Truncated: header cut short, and a len field promising more than came. */
    put_hdr(b, COOKIE, 1, 0, 0, 10, 0, 10);
    SEND(UDP_HDR_LEN - 1);
    SEND(UDP_HDR_LEN + 5);
    /* Absurd lengths: a 4 GB frame, a fragment past its frame's end, a huge len field. */
    put_hdr(b, COOKIE, 1, 0, 0, 0xffffffffu, 0, 10);
    SEND(UDP_HDR_LEN + 10);
    put_hdr(b, COOKIE, 1, 0, 0, 100, 95, 10);
    SEND(UDP_HDR_LEN + 10);
    put_hdr(b, COOKIE, 1, 0, 0, 100, 0xfffffff0u, 0x20);
    SEND(UDP_HDR_LEN + 0x20);
    put_hdr(b, COOKIE, 1, 0, 0, 100, 0, 0xffffffffu);
    SEND(UDP_HDR_LEN + 10);
    /* A maximal datagram of garbage. */
    memset(b, 0xa5, sizeof(b));
    SEND(sizeof(b));
    close(fd);
    CU_ASSERT(sent > 200);
    /* Let the port read them all, then check every one was counted and the session goes on. */
    double t0 = h_seconds();
    while (dropped_of(&p[0]) - before < (uint64_t)sent && h_seconds() - t0 < 10)
        h_progress(p, 2);
    uint64_t got = dropped_of(&p[0]) - before;
    if (got != (uint64_t)sent)
        fprintf(stderr, "dropped counter rose by %llu, expected %d\n", (unsigned long long)got,
                sent);
    CU_ASSERT_EQUAL(got, (uint64_t)sent);
    CU_ASSERT_EQUAL(p[0].failures, 0);
    CU_ASSERT_EQUAL(h_exchange(p, 2, 400, 70000, 30), 0);
    CU_ASSERT_EQUAL(p[0].rx_bad + p[1].rx_bad, 0);
    h_close(p, 2);
}

/* A peer whose port closed (its process ended) is refused by its host: given up at once,
 * with COR_EPEERDEAD, long before the dead time (30 s here). */
static void test_peer_closed(void)
{
    setenv("COR_UDP_DEAD_MS", "30000", 1);
    struct h_port p[2];
    int rc = h_open(p, 2, COOKIE);
    unsetenv("COR_UDP_DEAD_MS");
    CU_ASSERT_EQUAL_FATAL(rc, COR_OK);
    CU_ASSERT_EQUAL_FATAL(h_exchange(p, 2, 100, 5000, 30), 0);
    struct cor_rport *gone = p[1].port;
    p[1].port = NULL;
    h_route()->close(gone);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 5000), COR_OK);
    double t0 = h_seconds();
    while (p[0].failures == 0 && h_seconds() - t0 < 5)
        h_progress(p, 1);
    double dt = h_seconds() - t0;
    CU_ASSERT_EQUAL(p[0].failures, 1);
    CU_ASSERT_EQUAL(p[0].failed_peer, 1);
    CU_ASSERT_EQUAL(p[0].failed_err, COR_EPEERDEAD); /* closed: the process is gone */
    CU_ASSERT(dt < 2.0);
    CU_ASSERT_EQUAL(p[0].done_err, 5);
    CU_ASSERT_EQUAL(p[0].last_err, COR_EPEERDEAD);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 5000), COR_EPEERDEAD);
    printf("\n  closed peer noticed after %.0f ms\n", dt * 1000);
    h_close(p, 2);
}

/* A peer that keeps its port but answers nothing (stopped, or starved of CPU) is given up
 * only after the dead time of silence (300 ms here), with COR_ETIMEDOUT. */
static void test_peer_silent(void)
{
    setenv("COR_UDP_DEAD_MS", "300", 1);
    struct h_port p[2];
    int rc = h_open(p, 2, COOKIE);
    unsetenv("COR_UDP_DEAD_MS");
    CU_ASSERT_EQUAL_FATAL(rc, COR_OK);
    CU_ASSERT_EQUAL_FATAL(h_exchange(p, 2, 100, 5000, 30), 0);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 5000), COR_OK);
    double t0 = h_seconds();
    while (p[0].failures == 0 && h_seconds() - t0 < 5)
        h_progress(p, 1); /* port 1 stays open and is never polled */
    double dt = h_seconds() - t0;
    CU_ASSERT_EQUAL(p[0].failures, 1);
    CU_ASSERT_EQUAL(p[0].failed_peer, 1);
    CU_ASSERT_EQUAL(p[0].failed_err, COR_ETIMEDOUT); /* silent: the core reports it lost */
    CU_ASSERT(dt >= 0.25 && dt < 3.0);
    CU_ASSERT_EQUAL(p[0].done_err, 5);
    CU_ASSERT_EQUAL(p[0].last_err, COR_EPEERDEAD);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 5000), COR_EPEERDEAD);
    printf("\n  silent peer given up after %.0f ms\n", dt * 1000);
    h_close(p, 2);
}

/* Two ports that exchanged frames until every one was acknowledged, then nothing more goes
 * from port 0 to port 1 (a domain that only waits for its peer's answer), with probes every
 * 100 ms and a dead time of 30 s. Returns with p open. */
static int quiet_pair(struct h_port *p)
{
    setenv("COR_UDP_DEAD_MS", "30000", 1);
    setenv("COR_UDP_PROBE_MS", "100", 1);
    int rc = h_open(p, 2, COOKIE);
    unsetenv("COR_UDP_DEAD_MS");
    unsetenv("COR_UDP_PROBE_MS");
    if (rc != COR_OK) return -1;
    if (h_exchange(p, 2, 100, 5000, 30) != 0) return -1;
    double t0 = h_seconds();
    while (h_seconds() - t0 < 0.05) /* the last acknowledgements */
        h_progress(p, 2);
    return 0;
}

/* A quiet peer whose port closed, with nothing of ours in flight toward it: only a probe can
 * meet its host's refusal. Given up with COR_EPEERDEAD within the probe interval and the
 * refusal's grace (without probes: never, before the 30 s dead time). */
static void test_quiet_peer_closed(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(quiet_pair(p), 0);
    struct cor_rport *gone = p[1].port;
    p[1].port = NULL;
    h_route()->close(gone);
    double t0 = h_seconds();
    while (p[0].failures == 0 && h_seconds() - t0 < 5)
        h_progress(p, 1);
    double dt = h_seconds() - t0;
    CU_ASSERT_EQUAL(p[0].failures, 1);
    CU_ASSERT_EQUAL(p[0].failed_peer, 1);
    CU_ASSERT_EQUAL(p[0].failed_err, COR_EPEERDEAD);
    CU_ASSERT(dt < 2.0);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 5000), COR_EPEERDEAD);
    printf("\n  quiet closed peer noticed after %.0f ms\n", dt * 1000);
    h_close(p, 2);
}

/* A quiet peer that keeps its port and answers nothing (stopped): probes go into its socket
 * and nobody refuses them, so it is never given up for them (1.5 s = 15 probe intervals). */
static void test_quiet_peer_stopped(void)
{
    struct h_port p[2];
    CU_ASSERT_EQUAL_FATAL(quiet_pair(p), 0);
    double t0 = h_seconds();
    while (h_seconds() - t0 < 1.5)
        h_progress(p, 1); /* port 1 stays open and is never polled */
    CU_ASSERT_EQUAL(p[0].failures, 0);
    CU_ASSERT_EQUAL(h_send_next(p, 0, 1, 5000), COR_OK);
    t0 = h_seconds();
    while (p[0].done_err + p[0].done_ok < 1 && h_seconds() - t0 < 5) /* it wakes up */
        h_progress(p, 2);
    CU_ASSERT_EQUAL(p[0].failures, 0);
    CU_ASSERT_EQUAL(p[1].failures, 0);
    h_close(p, 2);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("udp_badinput", NULL, NULL);
    CU_add_test(s, "stranger's datagrams are dropped and counted", test_stranger);
    CU_add_test(s, "closed peer: refused, given up at once (EPEERDEAD)", test_peer_closed);
    CU_add_test(s, "silent peer: given up after the dead time (ETIMEDOUT)", test_peer_silent);
    CU_add_test(s, "quiet peer, port closed: a probe finds it (EPEERDEAD)", test_quiet_peer_closed);
    CU_add_test(s, "quiet peer, stopped: probes never give it up", test_quiet_peer_stopped);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
