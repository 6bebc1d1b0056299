/*
 * Waiting for messages without holding the big lock, so a thread blocked in pvm_recv does
 * not block the others' calls.
 *
 * One waiter at a time is the spinner: it polls the CoR route (cor_test on the head routed
 * receive) and, less often, PVM's sockets; the others sleep on a condition variable until a
 * pvm_* call that may have queued something for them leaves (generation count), or the
 * spinner leaves. A receive call spins COR_PVM_SPIN_US (default 2000 us, as the core's waits)
 * in all; then the spinner sleeps in poll() on PVM's sockets and a bell the routes ring
 * (sleep_on): a task blocked in pvm_recv uses no CPU, and wakes for either path at once.
 */
#define _GNU_SOURCE /* ppoll */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "route.h"

static pthread_cond_t arrived = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t arrived_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t generation; /* bumped whenever waiters should look again */
static _Atomic int nwaiters;        /* asleep on `arrived` */
static _Atomic int nyielders;       /* yielding to the spinner */
static _Atomic bool spinner_busy;
/* Threads in cpvm_wait_activity, counted from before they let the big lock go (their last
 * look at the queue) until they take it back: a call that queues a message between that
 * release and the waiter's spinner_busy or nwaiters found nobody waiting (lock.c then
 * neither looks at the queue nor wakes), and the waiter slept with its message queued. */
static _Atomic int nleaving;
static long spin_ns = -1;

uint64_t cpvm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpvm_realtime_ns(void) /* (condition variables time out on this clock) */
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cpvm_waiters(void)
{
    return atomic_load_explicit(&nwaiters, memory_order_relaxed) +
           atomic_load_explicit(&nyielders, memory_order_relaxed) +
           atomic_load_explicit(&nleaving, memory_order_relaxed) +
           atomic_load_explicit(&spinner_busy, memory_order_relaxed);
}

static void ring(void);

void cpvm_wake_waiters(void)
{
    atomic_fetch_add(&generation, 1);
    ring();
    if (!atomic_load(&nwaiters)) return;
    pthread_mutex_lock(&arrived_lock);
    pthread_cond_broadcast(&arrived);
    pthread_mutex_unlock(&arrived_lock);
}

#define MAX_FDS 64

/* PVM's sockets as the last locked wait saw them, for waits without the lock. */
static pthread_mutex_t fds_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pollfd fds_seen[MAX_FDS]; /* fds_lock */
static int nfds_seen = -1;              /* fds_lock; -1: never read */

/* PVM's sockets, read under the lock. */
static int pvm_fds(struct pollfd *pfd)
{
    int *fds = NULL;
    int n = REAL(pvm_getfds, &fds);
    if (n < 0 || !fds) n = 0;
    if (n > MAX_FDS) n = MAX_FDS;
    for (int i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    pthread_mutex_lock(&fds_lock);
    memcpy(fds_seen, pfd, (size_t)n * sizeof *pfd);
    nfds_seen = n;
    pthread_mutex_unlock(&fds_lock);
    return n;
}

/* The same without the lock: -1 if no locked wait read them yet. */
static int pvm_fds_seen(struct pollfd *pfd)
{
    pthread_mutex_lock(&fds_lock);
    int n = nfds_seen;
    if (n > 0) memcpy(pfd, fds_seen, (size_t)n * sizeof *pfd);
    pthread_mutex_unlock(&fds_lock);
    return n;
}

static _Atomic bool sockets_readable;

static bool sockets_ready(struct pollfd *pfd, int n, int timeout_ms)
{
    if (n == 0) {
        if (timeout_ms > 0) {
            struct timespec ts = {0, timeout_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
        return false;
    }
    if (poll(pfd, (nfds_t)n, timeout_ms) <= 0) return false;
    atomic_store(&sockets_readable, true);
    return true;
}

/* What ends a wait besides a routed message: another thread queued something, or PVM's
 * sockets have data. A poll is a system call, so they are looked at every 20 us, the first
 * time 10 us into the wait (most routed waits are over by then). While the wait spins, the
 * clock is read at every 16th call only: a clock read costs more than a turn of the spin on
 * some virtual machines (half the 8 B latency here). Once the sockets had data the answer
 * stays yes for the rest of the wait: the core asks again before it believes a stop (its spin
 * ends, then it looks once more), and a no then kept a task's first message, which comes
 * PVM's way, waiting for the rest of the spin (2 ms). */
#define POLL_FIRST_NS 10000
#define POLL_GAP_NS 20000
struct watch {
    uint64_t gen0;
    struct pollfd *pfd;
    int nfd;
    uint64_t next_poll;
    unsigned calls, skip;  /* skip: 15 while spinning, 0 when the wait only blocks */
    uint64_t sockets_seen; /* when the sockets had data (0: not yet): the wait is over */
    unsigned asked_after;  /* calls since then */
};

static int something_else(void *arg)
{
    struct watch *w = arg;
    if (w->sockets_seen) {
        w->asked_after++;
        return 1;
    }
    if (atomic_load(&generation) != w->gen0) return 1;
    if (w->calls++ & w->skip) return 0;
    uint64_t now = cpvm_now_ns();
    if (now < w->next_poll) return 0;
    w->next_poll = now + POLL_GAP_NS;
    if (!sockets_ready(w->pfd, w->nfd, 0)) return 0;
    w->sockets_seen = now;
    return 1;
}

/* A spin that went on after it saw PVM's sockets readable: asked again and again (the core
 * asks once more before it believes a stop, a yes ends it), over 1 ms. Counted in
 * cpvm_stats.late_wakes: never, unless the answer turned back to no. */
#define LATE_WAKE_NS 1000000
static void check_spin_end(const struct watch *w)
{
    if (w->sockets_seen && w->asked_after >= 3 && cpvm_now_ns() - w->sockets_seen > LATE_WAKE_NS)
        atomic_fetch_add_explicit(&cpvm_stats.late_wakes, 1, memory_order_relaxed);
}

/* libpvm3 reads its sockets (a select: microseconds) in every receive call that finds nothing
 * queued; routed messages never need that. A waiting receive lets it read them only when a
 * waiter's poll saw data there (waiters poll every 20 us); a non-blocking one (pvm_nrecv,
 * pvm_probe in a loop) also when SOCKETS_GAP_NS passed since the last read. */
#define SOCKETS_GAP_NS 20000
static _Atomic uint64_t sockets_read_ns; /* (written under the lock) */

bool cpvm_sockets_due(bool waiting)
{
    uint64_t now = cpvm_now_ns();
    if (!atomic_exchange(&sockets_readable, false) &&
        (waiting || now - atomic_load(&sockets_read_ns) < SOCKETS_GAP_NS))
        return false;
    atomic_store(&sockets_read_ns, now);
    return true;
}

bool cpvm_sockets_flagged(void)
{
    return atomic_load(&sockets_readable);
}

bool cpvm_sockets_stale(uint64_t now)
{
    return now - atomic_load(&sockets_read_ns) >= SOCKETS_GAP_NS;
}

/* The spin budget of a wait (COR_PVM_SPIN_US, default 2000 us, as the core's waits). */
static long spin_budget_ns(void)
{
    if (spin_ns < 0) {
        spin_ns = (long)cpvm_knob(CPVM_K_SPIN_US) * 1000L;
    }
    return spin_ns;
}

uint64_t cpvm_spin_end(void)
{
    return cpvm_now_ns() + (uint64_t)spin_budget_ns();
}

/* ---- sleeping ------------------------------------------------------------------------
 * Once a wait has spun its budget it sleeps in poll() on PVM's sockets and on an eventfd
 * (`bell`) that rings when something else may end the wait: a routed message reached the
 * task's inbox (the core's arrival hook, run by whichever thread brought it: a listener while
 * nobody polls), or another thread queued something or handled a control message
 * (cpvm_wake_waiters). The bell is rung only while somebody sleeps on it, so the fast paths
 * make no system call. A sleeper counts itself before it looks a last time, and a ringer
 * makes its news visible before it looks at the count: no wake-up is lost. */
static int bell = -1;             /* eventfd; made once (bell_once) */
static _Atomic int sleepers;      /* threads in poll() on the bell */
static _Atomic uint64_t arrivals; /* routed arrivals seen by the hook */
static pthread_once_t bell_once = PTHREAD_ONCE_INIT;

static void make_bell(void)
{
    bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (bell < 0) cpvm_log("eventfd: %s; waits poll instead of sleeping", strerror(errno));
}

static void ring(void)
{
    if (!atomic_load(&sleepers) || bell < 0) return;
    uint64_t one = 1;
    ssize_t n = write(bell, &one, sizeof one); /* EAGAIN: it rings already */
    (void)n;
}

/* The inbox's arrival hook: must not block. */
void cpvm_arrival(void *arg, int flags)
{
    (void)arg;
    (void)flags;
    atomic_fetch_add(&arrivals, 1);
    ring();
}

/* A sleeper whose oldest routed message waits for its detached pieces: nothing rings the bell
 * when they complete (a rendezvous ends in whichever thread progresses it, a core listener
 * while nobody polls), and a sleep on the bell alone lasted until the receive's deadline, or
 * for ever in pvm_recv, with the message complete (8 thread pairs streaming 64 KiB and 1 MiB:
 * every thread of the receiving task asleep, the sender's waiting for its answer; the routes
 * gave the pair up 5 s later). It waits for them in the core instead, which blocks until they
 * complete, at most IN_FLIGHT_WAIT_US at a time: the caller looks at the sockets and the
 * queues between two such waits. */
#define IN_FLIGHT_WAIT_US 1000

static int news_since(void *arg)
{
    return atomic_load(&generation) != *(const uint64_t *)arg;
}

static void wait_in_flight(uint64_t gen0, uint64_t deadline_ns)
{
    long us = IN_FLIGHT_WAIT_US;
    if (deadline_ns) {
        uint64_t now = cpvm_now_ns();
        if (now >= deadline_ns) return;
        if ((deadline_ns - now) / 1000 < (uint64_t)us) us = (long)((deadline_ns - now) / 1000);
    }
    cpvm_routed_wait(0, us, news_since, &gen0);
}

/* Sleeps until PVM's sockets have data, the bell rings or `deadline_ns` (0: none) passes,
 * unless something arrived since the caller's last look (gen0, arrivals0). No lock held. */
static void sleep_on(struct pollfd *pfd, int nfd, uint64_t gen0, uint64_t arrivals0,
                     uint64_t deadline_ns)
{
    pthread_once(&bell_once, make_bell);
    int n = nfd;
    if (bell >= 0) pfd[n++] = (struct pollfd){.fd = bell, .events = POLLIN};
    atomic_fetch_add(&sleepers, 1);
    atomic_thread_fence(memory_order_seq_cst);
    bool idle = atomic_load(&generation) == gen0 && atomic_load(&arrivals) == arrivals0 &&
                !cpvm_routed_arrived();
    if (idle && cpvm_rt.joined && cpvm_routed_in_flight()) {
        wait_in_flight(gen0, deadline_ns);
        idle = false;
    }
    if (idle) {
        struct timespec ts, *tsp = NULL;
        if (deadline_ns) {
            uint64_t now = cpvm_now_ns(), left = deadline_ns > now ? deadline_ns - now : 0;
            ts = (struct timespec){(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
            tsp = &ts;
        }
        /* Without a bell, or a route that does not ring it, look every millisecond. */
        bool deaf = bell < 0 || (cpvm_rt.joined && !cpvm_rt.hooked);
        if (deaf && (!tsp || ts.tv_sec > 0 || ts.tv_nsec > 1000000))
            ts = (struct timespec){0, 1000000}, tsp = &ts;
        if (ppoll(pfd, (nfds_t)n, tsp, NULL) > 0) {
            for (int i = 0; i < nfd; i++)
                if (pfd[i].revents) atomic_store(&sockets_readable, true);
        }
    }
    atomic_fetch_sub(&sleepers, 1);
    if (bell >= 0) {
        uint64_t v;
        ssize_t r = read(bell, &v, sizeof v); /* reset; other sleepers woke already */
        (void)r;
    }
}

/* The spinner's spin; no lock held. Inside the core (which polls the routes, with the
 * listeners parked) until a routed message arrived, something_else() saw news or the spin
 * ends; without a route, PVM's sockets are polled. */
static void spin(struct watch *w, uint64_t deadline_ns, uint64_t spin_end_ns)
{
    uint64_t now = cpvm_now_ns(), end = spin_end_ns;
    if (deadline_ns && deadline_ns < end) end = deadline_ns;
    long us = end > now ? (long)((end - now) / 1000) : 0;
    if (cpvm_rt.joined) {
        cpvm_routed_wait(us, us, something_else, w);
        return;
    }
    while (!something_else(w) && cpvm_now_ns() < end)
        ;
}

/* Sleeps on `arrived` (counted in nwaiters, so cpvm_wake_waiters wakes us) until the
 * generation moves from gen0 or deadline_ns (cpvm_now_ns; 0: none) passes, and with
 * while_spinner also when the spinner leaves. No lock held. */
static void sleep_until_news(uint64_t gen0, uint64_t deadline_ns, bool while_spinner)
{
    atomic_fetch_add(&nwaiters, 1);
    pthread_mutex_lock(&arrived_lock);
    while (atomic_load(&generation) == gen0 && (!while_spinner || atomic_load(&spinner_busy))) {
        if (!deadline_ns) {
            pthread_cond_wait(&arrived, &arrived_lock);
            continue;
        }
        uint64_t now_rt = cpvm_realtime_ns(), now = cpvm_now_ns();
        if (now >= deadline_ns) break;
        uint64_t at = now_rt + (deadline_ns - now);
        struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
        if (pthread_cond_timedwait(&arrived, &arrived_lock, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&arrived_lock);
    atomic_fetch_sub(&nwaiters, 1);
}

/* The wait itself, without the lock: one waiter spins (or sleeps on the sockets and the
 * bell), the others yield to it, then sleep until the queue changes or it leaves. */
static void wait_body(struct pollfd *pfd, int nfd, uint64_t gen0, uint64_t arr0,
                      uint64_t deadline_ns, uint64_t spin_end_ns)
{
    bool spinning = cpvm_now_ns() < spin_end_ns;
    bool expected = false;
    if (atomic_compare_exchange_strong(&spinner_busy, &expected, true)) {
        if (spinning) {
            struct watch w = {.gen0 = gen0,
                              .pfd = pfd,
                              .nfd = nfd,
                              .next_poll = cpvm_now_ns() + POLL_FIRST_NS,
                              .skip = spin_budget_ns() > 0 ? 15 : 0};
            spin(&w, deadline_ns, spin_end_ns);
            check_spin_end(&w);
        } else {
            sleep_on(pfd, nfd, gen0, arr0, deadline_ns);
        }
        atomic_store(&spinner_busy, false);
        /* A waiter asleep below may have to take over. */
        if (atomic_load(&nwaiters)) cpvm_wake_waiters();
        return;
    }
    /* Another thread spins (or sleeps on the sockets) and queues our messages too: stay
     * runnable and hand the core over while it spins (far cheaper than a sleep and a
     * wake-up, with more threads than cores); then sleep until the queue changes or the
     * spinner leaves (it wakes us then). */
    atomic_fetch_add(&nyielders, 1);
    uint64_t until = spin_end_ns;
    if (deadline_ns && deadline_ns < until) until = deadline_ns;
    while (atomic_load(&generation) == gen0 && atomic_load(&spinner_busy) && cpvm_now_ns() < until)
        sched_yield();
    atomic_fetch_sub(&nyielders, 1);
    if (atomic_load(&generation) != gen0 || !atomic_load(&spinner_busy) ||
        (deadline_ns && cpvm_now_ns() >= deadline_ns))
        return;
    sleep_until_news(gen0, deadline_ns, true);
}

void cpvm_wait_activity(uint64_t deadline_ns, uint64_t spin_end_ns)
{
    /* Control messages that libpvm3 read during the caller's own calls (a send reads what
     * came in meanwhile) wait for cpvm_run_deferred, and no socket or bell will tell. */
    if (cpvm_has_deferred()) return;
    struct pollfd pfd[MAX_FDS + 1];
    int nfd = pvm_fds(pfd);
    uint64_t gen0 = atomic_load(&generation), arr0 = atomic_load(&arrivals);
    bool spinning = cpvm_now_ns() < spin_end_ns;
    if (cpvm_nested()) {
        /* Inside a group call that keeps the lock: wait without releasing it. */
        if (!spinning) {
            sleep_on(pfd, nfd, gen0, arr0, deadline_ns);
            return;
        }
        struct watch w = {.gen0 = gen0, .pfd = pfd, .nfd = nfd, .next_poll = cpvm_now_ns()};
        spin(&w, deadline_ns, spin_end_ns);
        return;
    }
    /* Counted before the lock goes (its release records the queue we saw, lock.c), until we
     * have it back: whoever queues something meanwhile then wakes us (generation). */
    atomic_fetch_add(&nleaving, 1);
    int depth = cpvm_unlock_all();
    wait_body(pfd, nfd, gen0, arr0, deadline_ns, spin_end_ns);
    atomic_fetch_sub(&nleaving, 1);
    cpvm_relock_all(depth);
}

void cpvm_note_fds(void)
{
    struct pollfd pfd[MAX_FDS + 1];
    (void)pvm_fds(pfd);
}

void cpvm_watch_begin(void)
{
    atomic_fetch_add(&nleaving, 1);
}

void cpvm_watch_end(void)
{
    atomic_fetch_sub(&nleaving, 1);
}

uint64_t cpvm_generation(void)
{
    return atomic_load(&generation);
}

uint64_t cpvm_arrivals(void)
{
    return atomic_load(&arrivals);
}

bool cpvm_sockets_known(void)
{
    pthread_mutex_lock(&fds_lock);
    bool known = nfds_seen >= 0;
    pthread_mutex_unlock(&fds_lock);
    return known;
}

/* Callers make sure a locked wait read PVM's sockets first (cpvm_sockets_known): a wait that
 * did not watch them would see a message coming PVM's way (a task's first, pvmd's) only when
 * its sleep ends, up to 20 ms later. */
void cpvm_wait_unlocked(uint64_t gen0, uint64_t arr0, uint64_t deadline_ns, uint64_t spin_end_ns)
{
    struct pollfd pfd[MAX_FDS + 1];
    int nfd = pvm_fds_seen(pfd);
    if (nfd < 0) nfd = 0;
    wait_body(pfd, nfd, gen0, arr0, deadline_ns, spin_end_ns);
}

void cpvm_wait_news(uint64_t gen0, uint64_t deadline_ns)
{
    sleep_until_news(gen0, deadline_ns, false);
}
