/* Suite gm_callbacks: send callbacks and alarm callbacks run only inside
 * gm_unknown, in the caller's thread, and may send, provide buffers and set
 * alarms; alarms fire no earlier than asked, can be cancelled and
 * rescheduled, and wake blocking receives (gm-api.md sections 1, 2, 5). */
#include "gmt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct gmt_pair pr;

/* ---- send callbacks ---------------------------------------------------- */

struct cb_probe {
    int calls;
    int outside_unknown;
    int wrong_thread;
    int wrong_port;
    gm_status_t status;
    pthread_t thread;
    struct gm_port *port;
};

static void probe_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct cb_probe *c = ctx;
    c->calls++;
    c->status = st;
    if (!gmt_in_unknown) c->outside_unknown++;
    if (!pthread_equal(c->thread, pthread_self())) c->wrong_thread++;
    if (p != c->port) c->wrong_port++;
}

static void test_callback_only_in_unknown(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    char *sbuf = gm_dma_malloc(pr.a, 64);
    char *rbuf = gm_dma_malloc(pr.b, gm_max_length_for_size(7) + 8);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf && rbuf);
    gm_provide_receive_buffer(pr.b, rbuf, 7, GM_LOW_PRIORITY);
    struct cb_probe c = {.thread = pthread_self(), .port = pr.a};
    gm_send_with_callback(pr.a, sbuf, 7, 64, GM_LOW_PRIORITY, pr.node_b, pr.port_b, probe_cb, &c);
    GMT_EQ("callback not run inside gm_send_with_callback", c.calls, 0);
    struct gmt_msg m;
    /* Wait for delivery polling only b; a's library may need progress
     * (libfabric manual progress), which gm_receive_pending gives without
     * consuming an event. */
    int delivered = 0;
    uint64_t until = gmt_now_us() + GMT_WAIT_US;
    while (!delivered && gmt_now_us() < until) {
        (void)gm_receive_pending(pr.a);
        delivered = gmt_poll_once(pr.b, &m) == 1;
    }
    GMT_TRUE("message delivered", delivered);
    /* Peek calls must not run callbacks either. */
    for (int i = 0; i < 100; i++) {
        (void)gm_receive_pending(pr.a);
        gm_u16_t sender;
        (void)gm_next_event_peek(pr.a, &sender);
    }
    GMT_EQ("callback not run by gm_receive_pending/gm_next_event_peek", c.calls, 0);
    /* Poll the sender; every event but NO_RECV goes to gm_unknown, and the
     * callback must not have run before that. */
    uint64_t deadline = gmt_now_us() + GMT_WAIT_US;
    int before_unknown_ok = 1;
    while (c.calls == 0 && gmt_now_us() < deadline) {
        gm_recv_event_t *e = gm_receive(pr.a);
        unsigned t = GM_RECV_EVENT_TYPE(e);
        if (t == GM_NO_RECV_EVENT) continue;
        if (c.calls != 0) before_unknown_ok = 0;
        gmt_unknown(pr.a, e);
    }
    GMT_TRUE("callback not run by gm_receive itself", before_unknown_ok);
    GMT_EQ("callback ran once", c.calls, 1);
    GMT_EQ("callback status", c.status, GM_SUCCESS);
    GMT_EQ("callback ran inside gm_unknown", c.outside_unknown, 0);
    GMT_EQ("callback ran in the polling thread", c.wrong_thread, 0);
    GMT_EQ("callback got the sending port", c.wrong_port, 0);
    /* No second run later. */
    gmt_drain(pr.a, pr.b, 100000);
    GMT_EQ("callback still ran once", c.calls, 1);
    gm_dma_free(pr.a, sbuf);
    gm_dma_free(pr.b, rbuf);
    gmt_pair_close(&pr);
}

/* Callbacks that send again and provide buffers (OMPI, Charm++). */
enum { CHAIN_N = 300, CHAIN_SIZE = 9 };
struct chain {
    struct gm_port *from, *to;
    unsigned to_node, to_port;
    char *sbuf;
    int sent, completed, errors;
};

static void chain_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct chain *c = ctx;
    c->completed++;
    if (st != GM_SUCCESS || !gmt_in_unknown) c->errors++;
    if (c->sent < CHAIN_N) {
        /* The buffer is ours again: rewrite it and send the next one. */
        uint32_t seq = (uint32_t)c->sent;
        memcpy(c->sbuf, &seq, 4);
        gm_send_with_callback(p, c->sbuf, CHAIN_SIZE, 200, GM_LOW_PRIORITY, c->to_node, c->to_port,
                              chain_cb, c);
        c->sent++;
    }
}

struct provider {
    struct gm_port *port;
    char *buf;
    int provided;
};

static void provide_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct provider *pv = ctx;
    (void)p;
    (void)st;
    gm_provide_receive_buffer(pv->port, pv->buf, CHAIN_SIZE, GM_LOW_PRIORITY);
    pv->provided++;
}

static void test_callbacks_send_and_provide(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    struct chain c = {.from = pr.a, .to = pr.b, .to_node = pr.node_b, .to_port = pr.port_b};
    c.sbuf = gm_dma_malloc(pr.a, 200);
    enum { NB = 4 };
    char *rbuf[NB];
    GMT_TRUE_FATAL("gm_dma_malloc", c.sbuf != NULL);
    for (int i = 0; i < NB; i++) {
        rbuf[i] = gm_dma_malloc(pr.b, gm_max_length_for_size(CHAIN_SIZE) + 8);
        GMT_TRUE_FATAL("gm_dma_malloc", rbuf[i] != NULL);
        gm_provide_receive_buffer(pr.b, rbuf[i], CHAIN_SIZE, GM_LOW_PRIORITY);
    }
    uint32_t zero = 0;
    memcpy(c.sbuf, &zero, 4);
    gm_send_with_callback(pr.a, c.sbuf, CHAIN_SIZE, 200, GM_LOW_PRIORITY, pr.node_b, pr.port_b,
                          chain_cb, &c);
    c.sent = 1;
    /* The receiver re-provides each buffer from a callback of its own: a
     * tiny send from b to a whose completion provides the buffer. */
    char *ping = gm_dma_malloc(pr.b, 8);
    char *pong[NB];
    for (int i = 0; i < NB; i++) {
        pong[i] = gm_dma_malloc(pr.a, gm_max_length_for_size(4) + 8);
        gm_provide_receive_buffer(pr.a, pong[i], 4, GM_HIGH_PRIORITY);
    }
    struct provider pv[CHAIN_N];
    int recv = 0, out_of_order = 0, pongs = 0, provided = 0;
    uint64_t deadline = gmt_now_us() + GMT_WAIT_US;
    while ((recv < CHAIN_N || c.completed < CHAIN_N || provided < recv) &&
           gmt_now_us() < deadline) {
        struct gmt_msg m;
        if (gmt_poll_once(pr.b, &m) == 1) {
            uint32_t seq;
            memcpy(&seq, m.data, 4);
            if (seq != (uint32_t)recv) out_of_order++;
            pv[recv] = (struct provider){.port = pr.b, .buf = m.buffer};
            gm_send_with_callback(pr.b, ping, 4, 8, GM_HIGH_PRIORITY, pr.node_a, pr.port_a,
                                  provide_cb, &pv[recv]);
            recv++;
        }
        if (gmt_poll_once(pr.a, &m) == 1) {
            pongs++;
            gm_provide_receive_buffer(pr.a, m.buffer, 4, GM_HIGH_PRIORITY);
        }
        provided = 0;
        for (int i = 0; i < recv; i++)
            provided += pv[i].provided;
    }
    GMT_EQ("messages chained from callbacks received", recv, CHAIN_N);
    GMT_EQ("chained messages out of order", out_of_order, 0);
    GMT_EQ("chain callbacks", c.completed, CHAIN_N);
    GMT_EQ("chain callback errors or outside gm_unknown", c.errors, 0);
    GMT_EQ("buffers re-provided from callbacks", provided, recv);
    gmt_drain(pr.a, pr.b, 20000);
    gmt_pair_close(&pr);
}

/* ---- alarms ------------------------------------------------------------ */

struct alarm_probe {
    int fired;
    int outside_unknown;
    uint64_t at_us;
    int rearm; /* times left to re-arm from the callback */
    struct gm_port *port;
    gm_alarm_t *alarm;
    gm_u64_t period;
};

static void alarm_cb(void *ctx)
{
    struct alarm_probe *a = ctx;
    a->fired++;
    a->at_us = gmt_now_us();
    if (!gmt_in_unknown) a->outside_unknown++;
    if (a->rearm > 0) {
        a->rearm--;
        gm_set_alarm(a->port, a->alarm, a->period, alarm_cb, a);
    }
}

/* Poll p until cond or timeout; every non-receive event goes to gm_unknown. */
static void poll_for(struct gm_port *p, const int *counter, int want, uint64_t us)
{
    uint64_t deadline = gmt_now_us() + us;
    while ((counter == NULL || *counter < want) && gmt_now_us() < deadline)
        gmt_poll_once(p, NULL);
}

static void test_alarm_fires(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "alarm") == GM_SUCCESS);
    gm_alarm_t al;
    gm_initialize_alarm(&al);
    struct alarm_probe a = {.port = p, .alarm = &al};
    uint64_t t0 = gmt_now_us();
    gm_set_alarm(p, &al, 20000, alarm_cb, &a);
    GMT_EQ("alarm not run inside gm_set_alarm", a.fired, 0);
    poll_for(p, &a.fired, 1, 5000000);
    GMT_EQ("alarm fired once", a.fired, 1);
    GMT_EQ("alarm ran inside gm_unknown", a.outside_unknown, 0);
    GMT_TRUE("alarm fired no earlier than 20 ms", a.fired == 0 || a.at_us - t0 >= 20000);
    GMT_TRUE("alarm fired within 2 s", a.fired == 0 || a.at_us - t0 < 2000000);
    poll_for(p, NULL, 0, 50000);
    GMT_EQ("alarm does not fire twice", a.fired, 1);
    gm_cancel_alarm(&al); /* fired: no-op */
    gm_close(p);
}

static void test_alarm_cancel_and_reschedule(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "alarm") == GM_SUCCESS);
    gm_alarm_t al, never;
    gm_initialize_alarm(&al);
    gm_initialize_alarm(&never);
    gm_cancel_alarm(&never); /* never set: no-op */
    struct alarm_probe a = {.port = p, .alarm = &al};
    gm_set_alarm(p, &al, 10000, alarm_cb, &a);
    gm_cancel_alarm(&al);
    poll_for(p, NULL, 0, 100000);
    GMT_EQ("cancelled alarm did not fire", a.fired, 0);

    /* Set far away, then reschedule close: fires once, at the new time. */
    uint64_t t0 = gmt_now_us();
    gm_set_alarm(p, &al, 30000000, alarm_cb, &a);
    gm_set_alarm(p, &al, 15000, alarm_cb, &a);
    poll_for(p, &a.fired, 1, 5000000);
    GMT_EQ("rescheduled alarm fired once", a.fired, 1);
    GMT_TRUE("rescheduled alarm used the new time (< 2 s)", a.at_us - t0 < 2000000);
    GMT_TRUE("rescheduled alarm not early (>= 15 ms)", a.at_us - t0 >= 15000);
    poll_for(p, NULL, 0, 50000);
    GMT_EQ("rescheduled alarm fired only once", a.fired, 1);

    /* Re-arm from the callback: periodic. */
    struct alarm_probe per = {.port = p, .alarm = &al, .rearm = 4, .period = 2000};
    gm_set_alarm(p, &al, 2000, alarm_cb, &per);
    poll_for(p, &per.fired, 5, 5000000);
    GMT_EQ("alarm re-armed from its callback fired 5 times", per.fired, 5);

    /* Two alarms fire in deadline order. */
    gm_alarm_t late, early;
    gm_initialize_alarm(&late);
    gm_initialize_alarm(&early);
    struct alarm_probe pl = {.port = p}, pe = {.port = p};
    gm_set_alarm(p, &late, 40000, alarm_cb, &pl);
    gm_set_alarm(p, &early, 10000, alarm_cb, &pe);
    poll_for(p, &pl.fired, 1, 5000000);
    GMT_EQ("early alarm fired", pe.fired, 1);
    GMT_EQ("late alarm fired", pl.fired, 1);
    GMT_TRUE("early alarm fired first", pe.at_us <= pl.at_us);
    gm_close(p);
}

/* A set alarm on a closed port must not run later (no use after close). */
static void test_alarm_pending_at_close(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "alarm") == GM_SUCCESS);
    static gm_alarm_t al;
    static struct alarm_probe a;
    gm_initialize_alarm(&al);
    memset(&a, 0, sizeof a);
    gm_set_alarm(p, &al, 1000, alarm_cb, &a);
    gm_close(p);
    struct gm_port *q;
    GMT_TRUE_FATAL("open another port", gmt_open_port(&q, &id, "alarm2") == GM_SUCCESS);
    poll_for(q, NULL, 0, 30000);
    GMT_EQ("alarm of a closed port never runs", a.fired, 0);
    gm_close(q);
}

/* gm_blocking_receive sleeps (via _GM_SLEEP_EVENT in gm_unknown) but an
 * alarm wakes it (orangefs times out blocking receives this way). */
static void test_alarm_wakes_blocking_receive(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "alarm") == GM_SUCCESS);
    gm_alarm_t al;
    gm_initialize_alarm(&al);
    struct alarm_probe a = {.port = p, .alarm = &al};
    uint64_t t0 = gmt_now_us();
    gm_set_alarm(p, &al, 30000, alarm_cb, &a);
    int sleeps = 0, loops = 0;
    while (a.fired == 0 && loops < 100000 && gmt_now_us() - t0 < 5000000) {
        gm_recv_event_t *e = gm_blocking_receive(p);
        unsigned t = GM_RECV_EVENT_TYPE(e);
        if (t == _GM_SLEEP_EVENT) sleeps++;
        gmt_unknown(p, e);
        loops++;
    }
    uint64_t el = gmt_now_us() - t0;
    GMT_EQ("alarm fired during blocking receives", a.fired, 1);
    GMT_TRUE("blocking receive woke within 1 s of a 30 ms alarm", el < 1030000);
    GMT_TRUE("blocking receive did not return before the alarm", el >= 30000);
    GMT_TRUE("gm_blocking_receive never returned NO_RECV in a busy loop", loops < 100000);

    /* The no-spin form too. */
    struct alarm_probe b = {.port = p, .alarm = &al};
    t0 = gmt_now_us();
    gm_set_alarm(p, &al, 20000, alarm_cb, &b);
    loops = 0;
    while (b.fired == 0 && loops < 100000 && gmt_now_us() - t0 < 5000000) {
        gm_recv_event_t *e = gm_blocking_receive_no_spin(p);
        gmt_unknown(p, e);
        loops++;
    }
    el = gmt_now_us() - t0;
    GMT_EQ("alarm fired during no-spin blocking receives", b.fired, 1);
    GMT_TRUE("no-spin blocking receive woke within 1 s", el < 1020000);
    (void)sleeps;
    gm_close(p);
}

/* A message wakes a blocking receive as well. */
static _Atomic uint64_t late_sent_us; /* when late_sender sent (opening its port may be slow) */

static void *late_sender(void *arg)
{
    struct gm_port *q = NULL;
    unsigned *target = arg, id, node;
    usleep(50000);
    if (gmt_open_port(&q, &id, "late") != GM_SUCCESS) return NULL;
    gm_get_node_id(q, &node);
    char *buf = gm_dma_malloc(q, 16);
    struct gmt_send s = {0};
    gmt_in_unknown = 0;
    atomic_store(&late_sent_us, gmt_now_us());
    gm_send_with_callback(q, buf, 5, 16, GM_LOW_PRIORITY, node, *target, gmt_send_cb, &s);
    gmt_wait_sent(q, NULL, &s.calls, 1, GMT_WAIT_US);
    gm_dma_free(q, buf);
    gm_close(q);
    return NULL;
}

static void test_message_wakes_blocking_receive(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "sleeper") == GM_SUCCESS);
    char *rbuf = gm_dma_malloc(p, gm_max_length_for_size(5) + 8);
    gm_provide_receive_buffer(p, rbuf, 5, GM_LOW_PRIORITY);
    pthread_t th;
    uint64_t t0 = gmt_now_us();
    GMT_TRUE_FATAL("pthread_create", pthread_create(&th, NULL, late_sender, &id) == 0);
    int got = 0, loops = 0;
    while (!got && loops < 100000 && gmt_now_us() - t0 < 10000000) {
        gm_recv_event_t *e = gm_blocking_receive(p);
        if (gmt_is_recv_type(GM_RECV_EVENT_TYPE(e))) {
            got = 1;
            GMT_EQ("length", gm_ntoh_u32(e->recv.length), 16);
        } else {
            gmt_unknown(p, e);
        }
        loops++;
    }
    uint64_t woke = gmt_now_us();
    pthread_join(th, NULL);
    uint64_t sent = atomic_load(&late_sent_us);
    GMT_TRUE("message received by blocking receive", got);
    GMT_TRUE("blocking receive woke within 2 s of the send", sent && woke - sent < 2000000);
    gm_dma_free(p, rbuf);
    gm_close(p);
}

static void test_ticks(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "ticks") == GM_SUCCESS);
    gm_u64_t a = gm_ticks(p);
    usleep(20000);
    gm_u64_t b = gm_ticks(p);
    GMT_TRUE("gm_ticks advances", b > a);
    /* 0.5 us ticks per gm.h: 20 ms is about 40000 ticks. */
    GMT_TRUE("gm_ticks over 20 ms in [38000, 400000]", b - a >= 38000 && b - a <= 400000);
    gm_close(p);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"send callbacks run only inside gm_unknown", test_callback_only_in_unknown},
        {"callbacks may send and provide buffers", test_callbacks_send_and_provide},
        {"alarm fires once, not early, inside gm_unknown", test_alarm_fires},
        {"alarm cancel, reschedule, re-arm, order", test_alarm_cancel_and_reschedule},
        {"alarm pending at gm_close never runs", test_alarm_pending_at_close},
        {"alarm wakes a blocking receive", test_alarm_wakes_blocking_receive},
        {"message wakes a blocking receive", test_message_wakes_blocking_receive},
        {"gm_ticks", test_ticks},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_callbacks", tests);
}
