/*
 * Who makes progress on the hard ports, and when.
 *
 * Per hard port a listener thread polls (receives, completes) when no task is doing it. The
 * latency path needs no thread: a task sends inline on an idle port (hport.c) and polls the
 * ports itself while it waits (req.c), and while a task spins the listeners stay off the
 * sockets so the reply is not stolen by a thread that must first be woken. A hard port itself
 * (its owner, inbox, queue, dispatcher and credits) is hport.c's.
 */
#include <poll.h>
#include <sched.h>
#include <time.h>

#include "internal.h"

int cor__progress_all(void)
{
    int n = 0;
    for (int i = 0; i < g.nroutes; i++) {
        struct cor_route *r = g.routes[i];
        for (int k = 0; k < r->nports; k++)
            n += cor__hport_poll(r->ports[k]);
    }
    return n;
}

/* A spinner looks at the clock every few microseconds; one that has not for this long lost
 * its CPU to other threads, and the ports would wait for it as long: the listeners serve
 * them meanwhile. Not shorter: with more task threads than cores a spinner is often
 * preempted for a few hundred microseconds by the tasks whose requests it completed, and a
 * listener that stepped in then competed with it for the port (16 gm pairs at 8 B: 0.07-0.15
 * M msg/s with 100 us, 0.26-0.34 with 1 ms; the DSM's round trip over gm on 2 domains:
 * 3.9-4.0 us with 100 us, 1.7-3.5 us with 1 ms). */
#define SPINNER_STALE_NS 1000000
/* Parked listeners look again this often. The cost: a task that fell asleep while a spinner
 * polled waits up to this long if that spinner leaves with its own reply and nobody spins
 * after it (waking the listeners at each such exit, or every 200 us, cost 16 gm pairs half
 * their rate and the DSM's round trip 20-40x: a domain's service thread always sleeps). */
#define LISTENER_PARK_NS (2 * SPINNER_STALE_NS)
/* A listener whose port had no work and no polling task for this long is idle: a route
 * without a descriptor may then keep it in wait() up to the port's timeout (50 ms at most),
 * its messages still wake it (gm's shm doorbell). */
#define LISTENER_IDLE_NS 100000000u
/* How long one wait() of an idle port's listener lasts at most when the route can wake it
 * (its wake slot: to stop) and has no timer of its own sooner: messages wake it anyway (gm's
 * shm doorbell). Otherwise 50 ms, to notice a stop request: 20 wake-ups a second were most of
 * what an idle PVM task on gm still did (0.06 s of CPU per 10 s under TSan on a busy
 * machine). */
#define LISTENER_IDLE_WAIT_MS 1000

/* Whether a task polls the ports now, or did so a moment ago and probably will again: then
 * the listeners keep off the sockets, where a wake-up per frame would compete with it. */
static bool tasks_polling(void)
{
    if (atomic_load(&g.raw_users) > 0) return true;
    if (atomic_load(&g.spinners) > 0) /* unless it was preempted (computing threads) */
        return cor__now_ns() - atomic_load_explicit(&g.spin_seen, memory_order_relaxed) <
               SPINNER_STALE_NS;
    if (atomic_load(&g.blocked) > 0) return false; /* sleeping tasks wait on us */
    uint64_t end = atomic_load(&g.last_spin_end);
    return end && cor__now_ns() - end < (uint64_t)g.linger_ns;
}

void cor__listeners_resume(void)
{
    if (atomic_load(&g.listeners_parked) == 0) return;
    COR_LOCK(&g.spin_lock);
    pthread_cond_broadcast(&g.spin_cond);
    COR_UNLOCK(&g.spin_lock);
}

_Thread_local bool cor__listener_thread;

void *cor__listener_main(void *arg)
{
    struct cor_hport *hp = arg;
    cor__thread_name("cor-lis-%s%d", hp->route->name, hp->index);
    cor_thread_attentive();
    cor__listener_thread = true;
    const struct cor_route_ops *ops = hp->route->ops;
    /* pfd[1]: cor__hport_stop's wake-up, so that stopping does not wait out the poll (up to
     * 50 ms: every cor_finalize over udp took 50 ms before it). */
    struct pollfd pfds[2] = {{.fd = ops->wait_fd(hp->rp), .events = POLLIN},
                             {.fd = hp->stop_fd, .events = POLLIN}};
    struct pollfd pfd = pfds[0];
    bool has_wait = cor__route_has_wait(ops), has_wake = cor__route_has_wake(ops);
    uint64_t busy_ns = cor__now_ns(); /* when the port last had work or polling tasks */
    while (!atomic_load(&hp->stop)) {
        if (tasks_polling()) {
            busy_ns = cor__now_ns();
            /* Counted as parked before the second look: a task that starts to sleep after
             * that look sees the count and wakes us (cor__listeners_resume). */
            COR_LOCK(&g.spin_lock);
            atomic_fetch_add(&g.listeners_parked, 1);
            if (tasks_polling() && !atomic_load(&hp->stop))
                cor__cond_wait_ns(&g.spin_cond, &g.spin_lock, LISTENER_PARK_NS);
            atomic_fetch_sub(&g.listeners_parked, 1);
            COR_UNLOCK(&g.spin_lock);
            continue;
        }
        int timeout = ops->timeout_ms(hp->rp);
        int most = pfd.fd < 0 && has_wake ? LISTENER_IDLE_WAIT_MS : 50; /* notice stops */
        if (timeout < 0 || timeout > most) timeout = most;
        /* A route without a descriptor naps inside wait(): come back often enough to park
         * when a task starts polling, rather than compete with it; but not while the domain
         * is idle (LISTENER_IDLE_NS without traffic or polling tasks): 1000 wake-ups a
         * second were most of an idle PVM task's CPU time (0.12-0.23 s per 10 s on gm). */
        uint64_t now = cor__now_ns();
        if (pfd.fd < 0 && has_wait && timeout > 1 && now - busy_ns < LISTENER_IDLE_NS) timeout = 1;
        if (pfd.fd >= 0) {
            int k = poll(pfds, hp->stop_fd >= 0 ? 2 : 1, timeout);
            pfd.revents = pfds[0].revents;
            if (k < 0) continue;
        } else if (has_wait) {
            ops->wait(hp->rp, timeout);
        } else {
            struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
        int budget = 64, n;
        cor__wakes_defer(true);
        while (budget-- > 0 && (n = cor__hport_poll(hp)) > 0)
            ;
        cor__wakes_defer(false);
        if (budget < 63) busy_ns = cor__now_ns();
        if (pfd.revents && budget == 63) sched_yield(); /* someone else holds progress */
    }
    return NULL;
}
