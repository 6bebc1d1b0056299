/*
 * Hard ports and the core threads that serve them.
 *
 * Per hard port, a listener makes progress (receives, completes) when no task is doing it,
 * and a dispatcher pushes frames the route could not take at once. The latency path needs
 * neither: a task sends inline on an idle port and polls the ports itself while it waits
 * (req.c), and while a task spins the listeners stay off the sockets so the reply is not
 * stolen by a thread that must first be woken.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "knobs.h"
#include "proto.h"

/* COR_BIND as the routes get it. "auto" is resolved here, once for every route: our end of
 * the TCP connection to cor-run (the address toward the other hosts), else the first IPv4
 * interface that is up, running and not loopback, else loopback. */
static const char *bind_hint(char *buf, size_t cap)
{
    const char *bind = cor__knob_str(COR_K_BIND);
    if (!bind || !*bind) return "loopback";
    if (strcmp(bind, "auto") != 0) return bind;
    if (g.boot && g.boot->local_addr[0]) {
        snprintf(buf, cap, "%s", g.boot->local_addr);
        return buf;
    }
    struct ifaddrs *ifs = NULL;
    const char *pick = "loopback";
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
                (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) ||
                !(i->ifa_flags & IFF_RUNNING))
                continue;
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(a.s_addr) >> 24) == 127) continue;
            if (inet_ntop(AF_INET, &a, buf, (socklen_t)cap)) pick = buf;
            break;
        }
        freeifaddrs(ifs);
    }
    return pick;
}

int cor__hport_open(struct cor_route *r, int index, struct cor_hport **out)
{
    struct cor_hport *hp = calloc(1, sizeof *hp);
    if (!hp) return COR_ENOMEM;
    hp->route = r;
    hp->index = index;
    hp->links = calloc((size_t)g.size, sizeof *hp->links);
    if (!hp->links) {
        free(hp);
        return COR_ENOMEM;
    }
    pthread_mutex_init(&hp->disp_lock, NULL);
    pthread_mutex_init(&hp->copy_lock, NULL);
    pthread_cond_init(&hp->send_cond, NULL);

    char bind_buf[64];
    const char *bind = bind_hint(bind_buf, sizeof bind_buf);
    struct cor_route_config cfg = {.session_cookie = g.cookie,
                                   .self = (uint32_t)g.rank,
                                   .npeers = (uint32_t)g.size,
                                   .port_index = index,
                                   .bind_hint = bind};
    struct cor_route_upcalls up = {.core = hp,
                                   .deliver = cor__upcall_deliver,
                                   .send_done = cor__upcall_send_done,
                                   .peer_failed = cor__upcall_peer_failed};
    int err = r->ops->open(&cfg, &up, &hp->rp);
    if (err) {
        cor__log("route '%s': cannot open hard port %d: %s", r->name, index, cor_strerror(err));
        free(hp->links);
        free(hp);
        return err;
    }
    memset(&hp->caps, 0, sizeof hp->caps); /* fields a route does not know stay 0 */
    r->ops->caps(hp->rp, &hp->caps);
    if (hp->caps.frame_max <= FRAME_HDR_SIZE + 64) {
        cor__log("route '%s': frame_max %zu is too small", r->name, hp->caps.frame_max);
        r->ops->close(hp->rp);
        free(hp->links);
        free(hp);
        return COR_EROUTE;
    }
    size_t room = hp->caps.frame_max - FRAME_HDR_SIZE;
    hp->eager_limit = g.eager_override >= 0 ? (size_t)g.eager_override : hp->caps.eager_limit;
    if (hp->eager_limit > room) hp->eager_limit = room;
    hp->chunk = room;
    long units = (long)g.credits * cor__credit_cost(hp->eager_limit, hp->eager_limit);
    hp->credit_units = units > INT32_MAX / 2 ? INT32_MAX / 2 : (int)units;
    hp->credit_threshold = (int)(units * g.credit_threshold / g.credits);
    for (int i = 0; i < g.size; i++)
        hp->links[i].credits = hp->credit_units;
    if (hp->caps.frame_pref > FRAME_HDR_SIZE + 4096 && hp->caps.frame_pref < hp->caps.frame_max)
        hp->chunk = hp->caps.frame_pref - FRAME_HDR_SIZE;
    const struct cor_route_ops *ops = r->ops;
    hp->rma = hp->caps.has_rma && cor__route_has_rma(ops) && cor__knob_long(COR_K_RMA) == 1;
    *out = hp;
    return COR_OK;
}

void *cor__copy_get(struct cor_hport *hp)
{
    COR_LOCK(&hp->copy_lock);
    void *b = hp->ncopies ? hp->copies[--hp->ncopies] : NULL;
    COR_UNLOCK(&hp->copy_lock);
    return b ? b : malloc(hp->eager_limit ? hp->eager_limit : 1);
}

void cor__copy_put(struct cor_hport *hp, void *b)
{
    COR_LOCK(&hp->copy_lock);
    if (hp->ncopies < COPY_CACHE) {
        hp->copies[hp->ncopies++] = b;
        b = NULL;
    }
    COR_UNLOCK(&hp->copy_lock);
    free(b);
}

/* ---- one owner per hard port ----
 * A port has one owner at a time, whoever set `owned`: it alone calls the route's send, put
 * and progress there (route.h promises the routes as much), so a route's calls on a port never
 * run at once and its own locks are never contended. A thread that finds the port owned does
 * not wait: it leaves its frame in the inbox (proto.c) and goes on; the owner sends it before
 * it lets go. A sender used to block on the port's send lock while a thread holding it was
 * preempted, and the route's and libgm's locks inside it were contended as well. Taking and
 * leaving are one exchange each, with no fence besides: cheaper than the mutex and the
 * fence they replace, which an idle poll paid each time. */
static _Thread_local char owner_mark; /* its address names this thread */

bool cor__port_own(struct cor_hport *hp)
{
    /* seq_cst, as the inbox's push and the release's look: see cor__port_release */
    if (atomic_load(&hp->owned) || atomic_exchange(&hp->owned, true)) return false;
    atomic_store_explicit(&hp->owner, &owner_mark, memory_order_relaxed);
    return true;
}

void cor__port_own_wait(struct cor_hport *hp)
{
    while (!cor__port_own(hp))
        sched_yield();
}

bool cor__port_mine(struct cor_hport *hp)
{
    return atomic_load_explicit(&hp->owner, memory_order_relaxed) == &owner_mark;
}

void cor__port_release(struct cor_hport *hp)
{
    /* A frame pushed while we owned the port, whose sender then found it owned: these four
     * steps are sequentially consistent (push, look at `owned`; leave, look at the inbox),
     * so either we see the frame here or its sender saw the port free and sends it itself.
     * No frame stays behind unsent. */
    do {
        cor__port_drain(hp);
        atomic_store_explicit(&hp->owner, NULL, memory_order_relaxed);
        atomic_exchange(&hp->owned, false);
    } while (atomic_load(&hp->inbox) && cor__port_own(hp));
}

int cor__hport_poll(struct cor_hport *hp)
{
    if (!cor__port_own(hp)) return 0;
    int n = hp->route->ops->progress(hp->rp);
    cor__port_release(hp);
    cor__arrivals_run();
    return n;
}

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

static void *listener(void *arg)
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

/* Pushes frames the route refused for lack of window, when nobody else makes progress. */
static void *dispatcher(void *arg)
{
    struct cor_hport *hp = arg;
    cor__thread_name("cor-dsp-%s%d", hp->route->name, hp->index);
    cor_thread_attentive();
    COR_LOCK(&hp->disp_lock);
    while (!atomic_load(&hp->stop)) {
        if (!atomic_load(&hp->backlog)) {
            pthread_cond_wait(&hp->send_cond, &hp->disp_lock);
            continue;
        }
        COR_UNLOCK(&hp->disp_lock);
        if (cor__port_own(hp)) {
            cor__dispatch_queue(hp);
            cor__port_release(hp);
        }
        /* Still refused (or another thread owns the port): let acknowledgements in, then try
         * again. */
        if (atomic_load(&hp->backlog) && cor__hport_poll(hp) == 0) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        COR_LOCK(&hp->disp_lock);
    }
    COR_UNLOCK(&hp->disp_lock);
    return NULL;
}

static int stop_fd_close(struct cor_hport *hp)
{
    if (hp->stop_fd >= 0) close(hp->stop_fd);
    hp->stop_fd = -1;
    return COR_ENOMEM;
}

int cor__hport_start(struct cor_hport *hp)
{
    hp->stop_fd = hp->route->ops->wait_fd(hp->rp) >= 0 ? eventfd(0, EFD_CLOEXEC) : -1;
    if (pthread_create(&hp->listener, NULL, listener, hp) != 0) return stop_fd_close(hp);
    if (pthread_create(&hp->dispatcher, NULL, dispatcher, hp) != 0) {
        atomic_store(&hp->stop, true);
        pthread_join(hp->listener, NULL);
        return stop_fd_close(hp);
    }
    hp->threads = true;
    return COR_OK;
}

void cor__hport_stop(struct cor_hport *hp)
{
    if (!hp->threads) return;
    atomic_store(&hp->stop, true);
    if (hp->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(hp->stop_fd, &one, sizeof one);
        (void)w; /* a full counter wakes the listener as well */
    }
    if (cor__route_has_wake(hp->route->ops)) hp->route->ops->wake(hp->rp);
    COR_LOCK(&hp->disp_lock);
    pthread_cond_broadcast(&hp->send_cond);
    COR_UNLOCK(&hp->disp_lock);
    COR_LOCK(&g.spin_lock);
    pthread_cond_broadcast(&g.spin_cond);
    COR_UNLOCK(&g.spin_lock);
    pthread_join(hp->listener, NULL);
    pthread_join(hp->dispatcher, NULL);
    hp->threads = false;
    stop_fd_close(hp);
}

void cor__hport_close(struct cor_hport *hp)
{
    if (!hp) return;
    cor__hport_stop(hp);
    hp->route->ops->close(hp->rp);
    cor__queue_discard(hp);
    for (int i = 0; i < hp->ncopies; i++)
        free(hp->copies[i]);
    free(hp->links);
    free(hp);
}
