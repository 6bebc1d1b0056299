/* gmt: helpers shared by the libgm-compat CUnit suites (see gmt.h). */
#define _GNU_SOURCE
#include "gmt.h"

#include <CUnit/Basic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Thread_local int gmt_in_unknown;

uint64_t gmt_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void gmt_setup_env(void)
{
    /* Each suite gets its own shm namespace (suites run in parallel under
     * make -j) and a short port-closed timeout so error tests stay quick.
     * GM_TEST_PROVIDER=tcp runs the same suites over tcp;ofi_rxm on
     * loopback with a one-node map and a per-process port base. */
    char buf[128];
    snprintf(buf, sizeof buf, "gmt%ld", (long)getpid());
    setenv("GM_SHM_NAMESPACE", buf, 0);
    setenv("GM_SEND_TIMEOUT_MS", "300", 0);
    const char *prov = getenv("GM_TEST_PROVIDER");
    if (prov && strcmp(prov, "tcp") == 0) {
        snprintf(buf, sizeof buf, "1 gmt-node 127.0.0.1:%ld", 20000 + (long)(getpid() % 600) * 20);
        setenv("GM_NODES", buf, 1);
        setenv("GM_PROVIDER", "tcp;ofi_rxm", 1);
        unsetenv("GM_NODE_MAP");
        setenv("GM_NODE_ID", "1", 1);
    } else {
        unsetenv("GM_NODES");
        unsetenv("GM_NODE_MAP");
        unsetenv("GM_NODE_ID");
        setenv("GM_PROVIDER", prov && *prov ? prov : "shm", 1);
    }
}

void gmt_assert(int ok, int fatal, int line, const char *file, const char *fmt, ...)
{
    if (ok) {
        CU_assertImplementation(CU_TRUE, (unsigned)line, "", file, "", CU_FALSE);
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_report(fatal, file, line, msg);
}

gm_status_t gmt_open_port(struct gm_port **p, unsigned *port_id, const char *name)
{
    static const unsigned probe[] = {2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    gm_status_t st = GM_FAILURE;
    unsigned n = gm_num_ports(NULL);
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        if (probe[i] >= n) break;
        st = gm_open(p, 0, probe[i], name, (enum gm_api_version)GM_API_VERSION_2_0);
        if (st == GM_SUCCESS) {
            *port_id = probe[i];
            return st;
        }
    }
    return st;
}

int gmt_pair_open(struct gmt_pair *pr)
{
    memset(pr, 0, sizeof *pr);
    if (gmt_open_port(&pr->a, &pr->port_a, "gmt-a") != GM_SUCCESS) return -1;
    if (gmt_open_port(&pr->b, &pr->port_b, "gmt-b") != GM_SUCCESS) {
        gm_close(pr->a);
        pr->a = NULL;
        return -1;
    }
    if (gm_get_node_id(pr->a, &pr->node_a) != GM_SUCCESS ||
        gm_get_node_id(pr->b, &pr->node_b) != GM_SUCCESS) {
        gmt_pair_close(pr);
        return -1;
    }
    return 0;
}

int gmt_pair_open_or_stop(struct gmt_pair *pr)
{
    if (gmt_pair_open(pr) == 0) return 0;
    GMT_TRUE_FATAL("open two ports in one process", 0);
    return -1;
}

void gmt_pair_close(struct gmt_pair *pr)
{
    if (pr->a) gm_close(pr->a);
    if (pr->b) gm_close(pr->b);
    pr->a = pr->b = NULL;
}

int gmt_is_recv_type(unsigned t)
{
    return t >= GM_RECV_EVENT && t <= GM_FAST_HIGH_PEER_RECV_EVENT;
}

int gmt_is_fast_type(unsigned t)
{
    return t >= GM_FAST_RECV_EVENT && t <= GM_FAST_HIGH_PEER_RECV_EVENT;
}

unsigned gmt_prio_of_type(unsigned t)
{
    switch (t) {
    case GM_HIGH_RECV_EVENT:
    case GM_HIGH_PEER_RECV_EVENT:
    case GM_FAST_HIGH_RECV_EVENT:
    case GM_FAST_HIGH_PEER_RECV_EVENT:
        return GM_HIGH_PRIORITY;
    default:
        return GM_LOW_PRIORITY;
    }
}

void gmt_unknown(struct gm_port *p, gm_recv_event_t *e)
{
    gmt_in_unknown++;
    gm_unknown(p, e);
    gmt_in_unknown--;
}

int gmt_poll_once(struct gm_port *p, struct gmt_msg *m)
{
    gm_recv_event_t *e = gm_receive(p);
    if (!e) /* gm_receive must never return NULL; count it as a failure */
        return -1;
    unsigned t = GM_RECV_EVENT_TYPE(e);
    if (gmt_is_recv_type(t)) {
        if (m) {
            m->type = t;
            m->length = gm_ntoh_u32(e->recv.length);
            m->size = gm_ntoh_u8(e->recv.size);
            m->tag = gm_ntoh_u8(e->recv.tag);
            m->prio = gmt_prio_of_type(t);
            m->sender_node = gm_ntoh_u16(e->recv.sender_node_id);
            m->sender_port = gm_ntoh_u8(e->recv.sender_port_id);
            m->buffer = gm_ntohp(e->recv.buffer);
            m->data = gm_ntohp(e->recv.message);
        }
        return 1;
    }
    if (t != GM_NO_RECV_EVENT) gmt_unknown(p, e);
    return 0;
}

int gmt_wait_msg(struct gm_port *on, struct gm_port *other, struct gmt_msg *m, uint64_t timeout_us,
                 unsigned *stray)
{
    uint64_t deadline = gmt_now_us() + timeout_us;
    while (gmt_now_us() < deadline) {
        int r = gmt_poll_once(on, m);
        if (r < 0) {
            GMT_TRUE("gm_receive never returns NULL", r >= 0);
            return 0;
        }
        if (r == 1) return 1;
        if (other && gmt_poll_once(other, NULL) == 1 && stray) (*stray)++;
    }
    return 0;
}

unsigned gmt_drain(struct gm_port *a, struct gm_port *b, uint64_t us)
{
    unsigned n = 0;
    uint64_t deadline = gmt_now_us() + us;
    while (gmt_now_us() < deadline) {
        if (a && gmt_poll_once(a, NULL) == 1) n++;
        if (b && gmt_poll_once(b, NULL) == 1) n++;
    }
    return n;
}

void gmt_send_cb(struct gm_port *p, void *ctx, gm_status_t status)
{
    struct gmt_send *s = ctx;
    s->calls++;
    s->status = status;
    s->port = p;
    if (!gmt_in_unknown) s->outside_unknown++;
}

int gmt_wait_sent(struct gm_port *a, struct gm_port *b, const int *calls, int n,
                  uint64_t timeout_us)
{
    uint64_t deadline = gmt_now_us() + timeout_us;
    while (*calls < n && gmt_now_us() < deadline) {
        gmt_poll_once(a, NULL);
        if (b) gmt_poll_once(b, NULL);
    }
    return *calls >= n;
}

/* xorshift keeps the pattern cheap and position dependent, so a shifted or
 * truncated copy is caught. */
static uint8_t pattern_byte(uint32_t seed, size_t i)
{
    uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + 1u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return (uint8_t)(x ^ (x >> 8));
}

void gmt_fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *b = buf;
    for (size_t i = 0; i < len; i++)
        b[i] = pattern_byte(seed, i);
}

long gmt_check(const void *buf, size_t len, uint32_t seed)
{
    const uint8_t *b = buf;
    for (size_t i = 0; i < len; i++)
        if (b[i] != pattern_byte(seed, i)) return (long)i;
    return -1;
}

static int suite_init(void)
{
    return gm_init() == GM_SUCCESS ? 0 : -1;
}

static int suite_clean(void)
{
    gm_finalize();
    return 0;
}

int gmt_run_suite(const char *suite, const struct ct_test *tests)
{
    gmt_setup_env();
    const char *wd = getenv("GMT_WATCHDOG_S");
    return ct_main(suite, suite_init, suite_clean, tests, wd ? (unsigned)atoi(wd) : 600);
}
