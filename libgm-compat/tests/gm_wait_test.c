/* Suite gm_wait: gm_compat_wait sleeps until the port has an event and is
 * woken by what makes one (a message, an alarm), by gm_compat_wake from
 * another thread, or by its timeout; a port that owes acks still sends them
 * while its thread sleeps (gm_compat.h, bell.c).
 *
 * The sleeps asked for are far longer (30 s) than the bound checked (10 s):
 * a wait that nothing woke runs into the bound and fails, however slow the
 * machine. */
#include "gmt.h"

#include <gm_compat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LONG_SLEEP_US 30000000ul  /* what a test asks gm_compat_wait for */
#define WOKEN_WITHIN_US 10000000u /* what it must take at most */

static struct gmt_pair pr;

/* Calls gm_compat_wait(p, sleep_us) until it says an event is ready or the bound passes;
 * returns the microseconds it took (a sleep nothing ended lasts sleep_us), or UINT64_MAX. */
static uint64_t wait_for_event(struct gm_port *p, unsigned long sleep_us)
{
    uint64_t t0 = gmt_now_us();
    for (int calls = 0; calls < 100000 && gmt_now_us() - t0 < WOKEN_WITHIN_US; calls++)
        if (gm_compat_wait(p, sleep_us) == 1) return gmt_now_us() - t0;
    return UINT64_MAX;
}

/* ---- a message from another port ---------------------------------------- */

struct late {
    struct gm_port *from, *to;
    char *buf;
    unsigned node, port;
    struct gmt_send sent;
    _Atomic int done;
};

/* Sends one message from its own thread after 100 ms, waits for its callback (which needs
 * the target's ack), then wakes the target. */
static void *late_send(void *arg)
{
    struct late *l = arg;
    usleep(100000);
    gm_send_with_callback(l->from, l->buf, 5, 16, GM_LOW_PRIORITY, l->node, l->port, gmt_send_cb,
                          &l->sent);
    gmt_wait_sent(l->from, NULL, &l->sent.calls, 1, GMT_WAIT_US);
    atomic_store(&l->done, 1);
    gm_compat_wake(l->to); /* the target sleeps again once its ack went */
    return NULL;
}

static void test_message_wakes(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    /* Over tcp (gm-units-tcp.sh) arrivals cannot ring: the caller sleeps briefly there. */
    const char *prov = getenv("GM_TEST_PROVIDER");
    int rings = gm_compat_wakes_on_arrival(pr.b);
    GMT_EQ("woken by arrivals on shm, not on tcp", rings, !(prov && strcmp(prov, "tcp") == 0));
    unsigned long sleep_us = rings ? LONG_SLEEP_US : 1000;
    char *rbuf = gm_dma_malloc(pr.b, gm_max_length_for_size(5) + 8);
    struct late l = {.from = pr.a,
                     .to = pr.b,
                     .buf = gm_dma_malloc(pr.a, 16),
                     .node = pr.node_b,
                     .port = pr.port_b};
    GMT_TRUE_FATAL("gm_dma_malloc", rbuf && l.buf);
    gm_provide_receive_buffer(pr.b, rbuf, 5, GM_LOW_PRIORITY);
    pthread_t th;
    GMT_TRUE_FATAL("pthread_create", pthread_create(&th, NULL, late_send, &l) == 0);
    uint64_t took = wait_for_event(pr.b, sleep_us);
    GMT_TRUE("a message woke the sleeping port within 10 s", took < WOKEN_WITHIN_US);
    struct gmt_msg m;
    GMT_TRUE("and the event is that message", gmt_wait_msg(pr.b, NULL, &m, GMT_WAIT_US, NULL));
    GMT_EQ("its length", m.length, 16);
    /* The sender's callback needs our ack: it goes out while we sleep again. */
    uint64_t t0 = gmt_now_us();
    while (!atomic_load(&l.done) && gmt_now_us() - t0 < WOKEN_WITHIN_US)
        (void)gm_compat_wait(pr.b, sleep_us);
    pthread_join(th, NULL);
    GMT_EQ("the sender's callback ran once", l.sent.calls, 1);
    GMT_EQ("with success", l.sent.status, GM_SUCCESS);
    GMT_TRUE("while the target slept, within 10 s", gmt_now_us() - t0 < WOKEN_WITHIN_US);
    gm_dma_free(pr.a, l.buf);
    gm_dma_free(pr.b, rbuf);
    gmt_pair_close(&pr);
}

/* ---- gm_compat_wake ------------------------------------------------------- */

static void *late_wake(void *arg)
{
    usleep(100000);
    gm_compat_wake(arg);
    return NULL;
}

static void test_wake_from_another_thread(void)
{
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "wake") == GM_SUCCESS);
    pthread_t th;
    uint64_t t0 = gmt_now_us();
    GMT_TRUE_FATAL("pthread_create", pthread_create(&th, NULL, late_wake, p) == 0);
    int r = gm_compat_wait(p, LONG_SLEEP_US);
    uint64_t took = gmt_now_us() - t0;
    pthread_join(th, NULL);
    GMT_EQ("no event after a wake", r, 0);
    GMT_TRUE("gm_compat_wake ended the sleep within 10 s", took < WOKEN_WITHIN_US);
    gm_compat_wake(p); /* nobody asleep: nothing happens */
    gm_close(p);
}

/* ---- timeouts, alarms, events already there ------------------------------- */

static void alarm_cb(void *ctx)
{
    ++*(int *)ctx;
}

static void test_timeout_alarm_ready(void)
{
    GMT_EQ("a NULL port", gm_compat_wait(NULL, 1000), 0);
    GMT_EQ("a NULL port is not woken by arrivals", gm_compat_wakes_on_arrival(NULL), 0);
    struct gm_port *p;
    unsigned id;
    GMT_TRUE_FATAL("open a port", gmt_open_port(&p, &id, "timeouts") == GM_SUCCESS);
    uint64_t t0 = gmt_now_us();
    int r = gm_compat_wait(p, 20000);
    uint64_t took = gmt_now_us() - t0;
    GMT_EQ("nothing happened in 20 ms", r, 0);
    GMT_TRUE("and the sleep lasted (15 ms .. 10 s)", took >= 15000 && took < WOKEN_WITHIN_US);

    gm_alarm_t al;
    int fired = 0;
    gm_initialize_alarm(&al);
    gm_set_alarm(p, &al, 20000, alarm_cb, &fired);
    took = wait_for_event(p, LONG_SLEEP_US);
    GMT_TRUE("an alarm ended a 30 s sleep within 10 s", took < WOKEN_WITHIN_US);
    gm_recv_event_t *e = gm_receive(p);
    GMT_EQ("the event is the alarm", GM_RECV_EVENT_TYPE(e), GM_ALARM_EVENT);
    gm_unknown(p, e);
    GMT_EQ("which ran its callback", fired, 1);

    /* An event already there: at once (here, a due alarm). */
    gm_set_alarm(p, &al, 0, alarm_cb, &fired);
    usleep(1000);
    t0 = gmt_now_us();
    r = gm_compat_wait(p, LONG_SLEEP_US);
    GMT_EQ("a due alarm is an event", r, 1);
    GMT_TRUE("returned without sleeping long", gmt_now_us() - t0 < WOKEN_WITHIN_US);
    gm_unknown(p, gm_receive(p));
    gm_close(p);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"a message wakes gm_compat_wait; acks owed go out while asleep", test_message_wakes},
        {"gm_compat_wake from another thread", test_wake_from_another_thread},
        {"timeouts, alarms, events already there", test_timeout_alarm_ready},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_wait", tests);
}
