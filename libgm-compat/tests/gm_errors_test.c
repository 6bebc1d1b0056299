/* Suite gm_errors: sends to a closed port and to unknown nodes complete with
 * the GM status (in bounded time), bad arguments are reported through the
 * callback and never crash, gm_drop_sends completes queued sends with
 * GM_SEND_DROPPED and gm_resume_sending re-enables the target (gm-api.md
 * sections 2, 4, 5.3).  The suite sets GM_SEND_TIMEOUT_MS=300 (gmt.c). */
#include "gmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gmt_pair pr;

/* A port that was never opened, and one that closed. */
static void test_closed_port(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    char *sbuf = gm_dma_malloc(pr.a, 100);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf != NULL);
    unsigned closed_id = pr.port_b;
    gm_close(pr.b);
    pr.b = NULL;
    struct gmt_send s = {0};
    uint64_t t0 = gmt_now_us();
    gm_send_with_callback(pr.a, sbuf, 7, 100, GM_LOW_PRIORITY, pr.node_b, closed_id, gmt_send_cb,
                          &s);
    gmt_wait_sent(pr.a, NULL, &s.calls, 1, 15000000);
    uint64_t el = gmt_now_us() - t0;
    GMT_EQ("send to a closed port: callback ran", s.calls, 1);
    GMT_EQ("send to a closed port: status", s.status, GM_SEND_TARGET_PORT_CLOSED);
    GMT_EQ("send to a closed port: callback inside gm_unknown", s.outside_unknown, 0);
    GMT_TRUE("send to a closed port: completes within 10 s", el < 10000000);
    printf("\n  closed port reported after %.0f ms\n", el / 1000.0);

    /* After the error, resume, then a port id nobody ever opened. */
    struct gmt_send r = {0};
    gm_resume_sending(pr.a, GM_LOW_PRIORITY, pr.node_b, closed_id, gmt_send_cb, &r);
    gmt_wait_sent(pr.a, NULL, &r.calls, 1, GMT_WAIT_US);
    GMT_EQ("gm_resume_sending callback status", r.status, GM_SUCCESS);
    unsigned never = gm_num_ports(NULL) - 1;
    if (never == pr.port_a) never--;
    struct gmt_send s2 = {0};
    gm_send_with_callback(pr.a, sbuf, 7, 100, GM_HIGH_PRIORITY, pr.node_a, never, gmt_send_cb, &s2);
    gmt_wait_sent(pr.a, NULL, &s2.calls, 1, 15000000);
    GMT_EQ("send to a never-opened port: callback ran", s2.calls, 1);
    GMT_EQ("send to a never-opened port: status", s2.status, GM_SEND_TARGET_PORT_CLOSED);
    gm_dma_free(pr.a, sbuf);
    gmt_pair_close(&pr);
}

static void test_unknown_node(void)
{
    struct gm_port *p;
    unsigned id, node;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "errors") == GM_SUCCESS);
    gm_get_node_id(p, &node);
    char *sbuf = gm_dma_malloc(p, 100);
    static const unsigned bad_nodes[] = {GM_NO_SUCH_NODE_ID, 4000, 65535};
    for (int i = 0; i < 3; i++) {
        if (bad_nodes[i] == node) continue;
        struct gmt_send s = {0};
        uint64_t t0 = gmt_now_us();
        gm_send_with_callback(p, sbuf, 7, 100, GM_LOW_PRIORITY, bad_nodes[i], 2, gmt_send_cb, &s);
        gmt_wait_sent(p, NULL, &s.calls, 1, 15000000);
        char w[96];
        snprintf(w, sizeof w, "send to node %u: callback ran", bad_nodes[i]);
        GMT_EQ(w, s.calls, 1);
        snprintf(w, sizeof w, "send to node %u: status", bad_nodes[i]);
        GMT_EQ(w, s.status, GM_SEND_TARGET_NODE_UNREACHABLE);
        snprintf(w, sizeof w, "send to node %u: reported within 2 s", bad_nodes[i]);
        GMT_TRUE(w, gmt_now_us() - t0 < 2000000);
        /* A put and a get to the unknown node fail the same way. */
        struct gmt_send pu = {0}, ge = {0};
        gm_put(p, sbuf, 4096, 8, GM_LOW_PRIORITY, bad_nodes[i], 2, gmt_send_cb, &pu);
        gm_get(p, 4096, sbuf, 8, GM_HIGH_PRIORITY, bad_nodes[i], 2, gmt_send_cb, &ge);
        gmt_wait_sent(p, NULL, &pu.calls, 1, 15000000);
        gmt_wait_sent(p, NULL, &ge.calls, 1, 15000000);
        snprintf(w, sizeof w, "put to node %u: status", bad_nodes[i]);
        GMT_EQ(w, pu.status, GM_SEND_TARGET_NODE_UNREACHABLE);
        snprintf(w, sizeof w, "get from node %u: status", bad_nodes[i]);
        GMT_EQ(w, ge.status, GM_SEND_TARGET_NODE_UNREACHABLE);
        struct gmt_send r = {0};
        gm_resume_sending(p, GM_LOW_PRIORITY, bad_nodes[i], 2, gmt_send_cb, &r);
        gmt_wait_sent(p, NULL, &r.calls, 1, GMT_WAIT_US);
    }
    GMT_EQ("gm_node_id_to_global_id(unknown) fails",
           gm_node_id_to_global_id(p, 4000, &id) != GM_SUCCESS, 1);
    gm_dma_free(p, sbuf);
    gm_close(p);
}

/* Bad arguments come back through the callback (gm.h: GM_INVALID_PARAMETER),
 * never as a crash or a silent truncation. */
static void test_bad_arguments(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    char *sbuf = gm_dma_malloc(pr.a, 4096);
    char *rbuf = gm_dma_malloc(pr.b, gm_max_length_for_size(6) + 8);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf && rbuf);
    gm_provide_receive_buffer(pr.b, rbuf, 6, GM_LOW_PRIORITY);
    static const struct {
        unsigned size;
        size_t len;
        unsigned prio;
        const char *what;
    } bad[] = {
        {6, 57, GM_LOW_PRIORITY, "length above gm_max_length_for_size(size)"},
        {2, 0, GM_LOW_PRIORITY, "size class 2"},
        {6, 10, 2, "priority 2"},
        {64, 10, GM_LOW_PRIORITY, "size class 64"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gmt_send s = {0};
        gm_send_with_callback(pr.a, sbuf, bad[i].size, bad[i].len, bad[i].prio, pr.node_b,
                              pr.port_b, gmt_send_cb, &s);
        gmt_wait_sent(pr.a, pr.b, &s.calls, 1, 5000000);
        char w[128];
        snprintf(w, sizeof w, "%s: callback ran once", bad[i].what);
        GMT_EQ(w, s.calls, 1);
        snprintf(w, sizeof w, "%s: status", bad[i].what);
        GMT_EQ(w, s.status, GM_INVALID_PARAMETER);
    }
    GMT_EQ("no bad message was delivered", gmt_drain(pr.b, pr.a, 100000), 0);
    /* The provided buffer is still usable by a good message. */
    struct gmt_send ok = {0};
    gm_send_with_callback(pr.a, sbuf, 6, 56, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                          &ok);
    struct gmt_msg m;
    GMT_TRUE("good message after bad ones delivered",
             gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL));
    gmt_wait_sent(pr.a, pr.b, &ok.calls, 1, GMT_WAIT_US);
    GMT_EQ("good message status", ok.status, GM_SUCCESS);
    /* Providing a bad buffer is ignored (gm.h), not a crash. */
    gm_provide_receive_buffer(pr.b, NULL, 6, GM_LOW_PRIORITY);
    gm_provide_receive_buffer(pr.b, rbuf, 2, GM_LOW_PRIORITY);
    gm_provide_receive_buffer(pr.b, rbuf, 6, 7);
    GMT_EQ("gm_set_acceptable_sizes(bad priority)",
           gm_set_acceptable_sizes(pr.b, (enum gm_priority)5, 0xff), GM_INVALID_PARAMETER);
    GMT_TRUE("gm_register_memory(NULL, 0) fails", gm_register_memory(pr.a, NULL, 0) != GM_SUCCESS);
    GMT_TRUE("gm_deregister_memory of unregistered memory fails",
             gm_deregister_memory(pr.a, &ok, sizeof ok) != GM_SUCCESS);
    gm_dma_free(pr.a, sbuf);
    gmt_pair_close(&pr);
}

/* gm_drop_sends after an error: b closes, a's send fails with PORT_CLOSED,
 * GM then holds later sends to that (node, port, priority); b's port id is
 * opened again; gm_drop_sends completes the held sends with GM_SEND_DROPPED
 * (nothing arrives); gm_resume_sending lets new sends through. */
static void test_drop_sends(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    enum { HELD = 5 };
    char *sbuf = gm_dma_malloc(pr.a, 100);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf != NULL);
    unsigned target = pr.port_b;
    gm_close(pr.b);
    pr.b = NULL;
    struct gmt_send first = {0};
    gm_send_with_callback(pr.a, sbuf, 7, 100, GM_LOW_PRIORITY, pr.node_b, target, gmt_send_cb,
                          &first);
    gmt_wait_sent(pr.a, NULL, &first.calls, 1, 15000000);
    GMT_EQ("first send to the closed port: status", first.status, GM_SEND_TARGET_PORT_CLOSED);

    /* Same port id opens again (the peer restarted). */
    gm_status_t st = gm_open(&pr.b, 0, target, "reborn", (enum gm_api_version)GM_API_VERSION_2_0);
    GMT_EQ("reopen the target port id", st, GM_SUCCESS);
    if (st != GM_SUCCESS) {
        pr.b = NULL;
        gmt_pair_close(&pr);
        return;
    }
    char *rbuf[HELD + 1];
    for (int i = 0; i <= HELD; i++) {
        rbuf[i] = gm_dma_malloc(pr.b, gm_max_length_for_size(7) + 8);
        gm_provide_receive_buffer(pr.b, rbuf[i], 7, GM_LOW_PRIORITY);
    }
    /* Sends after the error are held until drop or resume. */
    struct gmt_send held[HELD];
    memset(held, 0, sizeof held);
    for (int i = 0; i < HELD; i++)
        gm_send_with_callback(pr.a, sbuf, 7, 100, GM_LOW_PRIORITY, pr.node_b, target, gmt_send_cb,
                              &held[i]);
    unsigned early = gmt_drain(pr.b, pr.a, 200000);
    GMT_EQ("sends after an error are held (none delivered before drop/resume)", early, 0);
    struct gmt_send drop = {0};
    gm_drop_sends(pr.a, GM_LOW_PRIORITY, pr.node_b, target, gmt_send_cb, &drop);
    gmt_wait_sent(pr.a, pr.b, &drop.calls, 1, GMT_WAIT_US);
    for (int i = 0; i < HELD; i++)
        gmt_wait_sent(pr.a, pr.b, &held[i].calls, 1, GMT_WAIT_US);
    GMT_EQ("gm_drop_sends callback ran once", drop.calls, 1);
    GMT_EQ("gm_drop_sends callback status", drop.status, GM_SUCCESS);
    int dropped = 0, once = 0;
    for (int i = 0; i < HELD; i++) {
        dropped += held[i].status == GM_SEND_DROPPED;
        once += held[i].calls == 1;
    }
    GMT_EQ("held sends completed with GM_SEND_DROPPED", dropped, HELD);
    GMT_EQ("held sends completed exactly once", once, HELD);
    GMT_EQ("dropped sends never arrive", gmt_drain(pr.b, pr.a, 200000), 0);

    struct gmt_send res = {0}, after = {0};
    gm_resume_sending(pr.a, GM_LOW_PRIORITY, pr.node_b, target, gmt_send_cb, &res);
    gmt_wait_sent(pr.a, pr.b, &res.calls, 1, GMT_WAIT_US);
    GMT_EQ("gm_resume_sending callback status", res.status, GM_SUCCESS);
    gmt_fill(sbuf, 100, 77);
    gm_send_with_callback(pr.a, sbuf, 7, 100, GM_LOW_PRIORITY, pr.node_b, target, gmt_send_cb,
                          &after);
    struct gmt_msg m;
    int got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
    GMT_TRUE("send after gm_resume_sending delivered", got);
    if (got) GMT_EQ("payload after resume (first bad byte)", gmt_check(m.data, 100, 77), -1);
    gmt_wait_sent(pr.a, pr.b, &after.calls, 1, GMT_WAIT_US);
    GMT_EQ("send after resume: status", after.status, GM_SUCCESS);
    gm_dma_free(pr.a, sbuf);
    gmt_pair_close(&pr);
}

/* gm_drop_sends with nothing queued: its callback gets GM_SUCCESS, other
 * priorities and targets are unaffected. */
static void test_drop_sends_idle(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    char *sbuf = gm_dma_malloc(pr.a, 16);
    char *rbuf = gm_dma_malloc(pr.b, gm_max_length_for_size(5) + 8);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf && rbuf);
    struct gmt_send drop = {0};
    gm_drop_sends(pr.a, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb, &drop);
    gmt_wait_sent(pr.a, pr.b, &drop.calls, 1, GMT_WAIT_US);
    GMT_EQ("idle gm_drop_sends: callback", drop.calls, 1);
    GMT_EQ("idle gm_drop_sends: status", drop.status, GM_SUCCESS);
    GMT_EQ("idle gm_drop_sends: callback inside gm_unknown", drop.outside_unknown, 0);
    gm_provide_receive_buffer(pr.b, rbuf, 5, GM_HIGH_PRIORITY);
    struct gmt_send s = {0};
    gm_send_with_callback(pr.a, sbuf, 5, 16, GM_HIGH_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                          &s);
    struct gmt_msg m;
    GMT_TRUE("high-priority send after a low-priority drop delivered",
             gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL));
    gmt_wait_sent(pr.a, pr.b, &s.calls, 1, GMT_WAIT_US);
    GMT_EQ("status", s.status, GM_SUCCESS);
    gmt_pair_close(&pr);
}

static int stale_alarm_runs;
static void stale_alarm(void *ctx)
{
    (void)ctx;
    stale_alarm_runs++;
}

/* Closing a port with sends in flight and buffers provided must not crash
 * or leak (ASan); the peer keeps working. */
static void test_close_with_pending(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    char *sbuf = gm_dma_malloc(pr.a, 1000);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf != NULL);
    for (int i = 0; i < 4; i++) {
        char *r = gm_dma_malloc(pr.a, gm_max_length_for_size(12) + 8);
        gm_provide_receive_buffer(pr.a, r, 12, GM_LOW_PRIORITY);
    }
    struct gmt_send s[20];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 20; i++) /* b has no buffers: all wait */
        gm_send_with_callback(pr.a, sbuf, 10, 1000, GM_LOW_PRIORITY, pr.node_b, pr.port_b,
                              gmt_send_cb, &s[i]);
    gm_alarm_t al;
    gm_initialize_alarm(&al);
    gm_set_alarm(pr.a, &al, 1000, stale_alarm, NULL);
    gm_close(pr.a);
    pr.a = NULL;
    int calls = 0;
    for (int i = 0; i < 20; i++)
        calls += s[i].calls;
    GMT_EQ("no callbacks after gm_close", calls, 0);
    /* b still works: it can talk to itself. */
    char *rb = gm_dma_malloc(pr.b, gm_max_length_for_size(5) + 8);
    char *sb = gm_dma_malloc(pr.b, 8);
    gm_provide_receive_buffer(pr.b, rb, 5, GM_LOW_PRIORITY);
    struct gmt_send self = {0};
    gm_send_with_callback(pr.b, sb, 5, 8, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                          &self);
    struct gmt_msg m;
    int got = 0;
    uint64_t deadline = gmt_now_us() + GMT_WAIT_US;
    while (!got && gmt_now_us() < deadline) {
        int r = gmt_poll_once(pr.b, &m);
        if (r == 1 && m.length == 8) got = 1;
    }
    GMT_TRUE("surviving port still delivers to itself", got);
    GMT_EQ("alarm of the closed port never ran", stale_alarm_runs, 0);
    gmt_pair_close(&pr);
}

/* A sender port closed while its messages wait at the target (no buffer)
 * and opened again: the new incarnation's message is the one delivered,
 * its callback reports the delivery, and nothing of the predecessor's shows
 * up (GM drops a closed port's undelivered sends). */
static void test_sender_reopened(void)
{
    struct gmt_pair pr;
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    char old_msg[16], new_msg[16];
    memset(old_msg, 'o', sizeof old_msg);
    memset(new_msg, 'n', sizeof new_msg);
    struct gmt_send olds[3] = {{0}};
    for (int i = 0; i < 3; i++)
        gm_send_with_callback(pr.a, old_msg, 5, sizeof old_msg, GM_LOW_PRIORITY, pr.node_b,
                              pr.port_b, gmt_send_cb, &olds[i]);
    gmt_drain(pr.a, pr.b, 50000); /* they reach b and wait for a buffer */
    unsigned port_a = pr.port_a;
    gm_close(pr.a);
    GMT_EQ("reopen the sender's port id",
           gm_open(&pr.a, 0, port_a, "gmt-a2", (enum gm_api_version)GM_API_VERSION_2_0),
           GM_SUCCESS);
    struct gmt_send s = {0};
    gm_send_with_callback(pr.a, new_msg, 5, sizeof new_msg, GM_LOW_PRIORITY, pr.node_b, pr.port_b,
                          gmt_send_cb, &s);
    gmt_drain(pr.a, pr.b, 50000);
    char *bufs[4];
    for (int i = 0; i < 4; i++) {
        bufs[i] = gm_dma_malloc(pr.b, 32);
        GMT_TRUE_FATAL("gm_dma_malloc", bufs[i] != NULL);
        gm_provide_receive_buffer(pr.b, bufs[i], 5, GM_LOW_PRIORITY);
    }
    struct gmt_msg m;
    int got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
    GMT_TRUE("the new incarnation's message arrives", got);
    if (got)
        GMT_TRUE("it is the new message, not a predecessor's",
                 m.length == sizeof new_msg && memcmp(m.data, new_msg, sizeof new_msg) == 0);
    GMT_TRUE("its callback runs", gmt_wait_sent(pr.a, pr.b, &s.calls, 1, GMT_WAIT_US));
    GMT_EQ("its callback status", s.status, GM_SUCCESS);
    GMT_EQ("nothing else arrives", gmt_drain(pr.b, pr.a, 100000), 0);
    gmt_pair_close(&pr);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"send to a closed port", test_closed_port},
        {"send, put, get to unknown nodes", test_unknown_node},
        {"bad arguments reported, never a crash", test_bad_arguments},
        {"gm_drop_sends after an error, then resume", test_drop_sends},
        {"gm_drop_sends with nothing queued", test_drop_sends_idle},
        {"gm_close with sends and buffers pending", test_close_with_pending},
        {"a sender port reopened while its messages wait", test_sender_reopened},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_errors", tests);
}
