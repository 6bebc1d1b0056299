/*
 * Waiting for messages without holding the big lock, so a thread blocked in pvm_recv does
 * not block the others' calls.
 *
 * One waiter at a time is the spinner: it polls the CoR route (cor_test on the head routed
 * receive) and, less often, PVM's sockets; the others sleep on a condition variable until a
 * pvm_* call that may have queued something for them leaves (generation count). The spinner
 * spins COR_PVM_SPIN_US (default 2000 us, as the core's waits) and then naps on PVM's
 * sockets 1 ms at a time, still checking the route between naps.
 */
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "route.h"

static pthread_cond_t arrived = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t arrived_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t generation; /* bumped whenever waiters should look again */
static _Atomic int nwaiters;        /* asleep on `arrived` */
static _Atomic int nyielders;       /* yielding to the spinner */
static _Atomic bool spinner_busy;
static long spin_ns = -1;

uint64_t cpvm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cpvm_waiters(void)
{
    return atomic_load_explicit(&nwaiters, memory_order_relaxed) +
           atomic_load_explicit(&nyielders, memory_order_relaxed) +
           atomic_load_explicit(&spinner_busy, memory_order_relaxed);
}

void cpvm_wake_waiters(void)
{
    atomic_fetch_add(&generation, 1);
    if (!atomic_load(&nwaiters)) return;
    pthread_mutex_lock(&arrived_lock);
    pthread_cond_broadcast(&arrived);
    pthread_mutex_unlock(&arrived_lock);
}

#define MAX_FDS 64

/* PVM's sockets, read under the lock. */
static int pvm_fds(struct pollfd *pfd)
{
    int *fds = NULL;
    int n = REAL(pvm_getfds, &fds);
    if (n < 0 || !fds) return 0;
    if (n > MAX_FDS) n = MAX_FDS;
    for (int i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
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
 * some virtual machines (half the 8 B latency here). */
#define POLL_FIRST_NS 10000
#define POLL_GAP_NS 20000
struct watch {
    uint64_t gen0;
    struct pollfd *pfd;
    int nfd;
    uint64_t next_poll;
    unsigned calls, skip; /* skip: 15 while spinning, 0 when the wait only blocks */
};

static int something_else(void *arg)
{
    struct watch *w = arg;
    if (atomic_load(&generation) != w->gen0) return 1;
    if (w->calls++ & w->skip) return 0;
    uint64_t now = cpvm_now_ns();
    if (now < w->next_poll) return 0;
    w->next_poll = now + POLL_GAP_NS;
    return sockets_ready(w->pfd, w->nfd, 0);
}

/* libpvm3 reads its sockets (a select: microseconds) in every receive call that finds nothing
 * queued; routed messages never need that. A waiting receive lets it read them only when a
 * waiter's poll saw data there (waiters poll every 20 us); a non-blocking one (pvm_nrecv,
 * pvm_probe in a loop) also when SOCKETS_GAP_NS passed since the last read. */
#define SOCKETS_GAP_NS 20000
static uint64_t sockets_read_ns; /* (lock) */

bool cpvm_sockets_due(bool waiting)
{
    uint64_t now = cpvm_now_ns();
    if (!atomic_exchange(&sockets_readable, false) &&
        (waiting || now - sockets_read_ns < SOCKETS_GAP_NS))
        return false;
    sockets_read_ns = now;
    return true;
}

/* The spinner's wait; no lock held. Inside the core (which polls the routes COR_PVM_SPIN_US,
 * default 2000 us, as its own waits do, with the listeners parked), then blocked for at most
 * a millisecond (the core's listeners deliver, the reserved task's condvar wakes us); PVM's
 * sockets are looked at in between. Returns when the caller should look under the lock. */
static long spin_budget_ns(void)
{
    if (spin_ns < 0) {
        spin_ns = (long)cpvm_knob(CPVM_K_SPIN_US) * 1000L;
    }
    return spin_ns;
}

static void spin(struct watch *w, uint64_t deadline_ns)
{
    spin_budget_ns();
    uint64_t now = cpvm_now_ns();
    long left_us = deadline_ns ? (long)((deadline_ns > now ? deadline_ns - now : 0) / 1000) : -1;
    long budget_us = spin_ns / 1000 + 1000;
    long timeout_us = left_us >= 0 && left_us < budget_us ? left_us : budget_us;
    if (cpvm_rt.joined) {
        cpvm_routed_wait(spin_ns / 1000, timeout_us, something_else, w);
        return;
    }
    /* No route: only PVM's sockets can bring anything. */
    sockets_ready(w->pfd, w->nfd, timeout_us > 1000 ? 1 : (int)(timeout_us / 1000));
}

void cpvm_wait_activity(uint64_t deadline_ns)
{
    if (cpvm_nested()) {
        /* Inside a group call that keeps the lock: poll briefly, without releasing. */
        struct pollfd pfd[MAX_FDS];
        int n = pvm_fds(pfd);
        if (!cpvm_routed_wait(20, 20, NULL, NULL)) sockets_ready(pfd, n, 0);
        return;
    }
    struct pollfd pfd[MAX_FDS];
    int nfd = pvm_fds(pfd);
    uint64_t gen0 = atomic_load(&generation);
    int depth = cpvm_unlock_all();
    bool expected = false;
    if (atomic_compare_exchange_strong(&spinner_busy, &expected, true)) {
        struct watch w = {
            gen0, pfd, nfd, cpvm_now_ns() + POLL_FIRST_NS, 0, spin_budget_ns() > 0 ? 15 : 0};
        spin(&w, deadline_ns);
        atomic_store(&spinner_busy, false);
    } else {
        /* Another thread spins and queues our messages too: stay runnable and hand the core
         * over (far cheaper than a sleep and a wake-up, with more threads than cores), for
         * as long as a spinner would spin; then sleep. */
        atomic_fetch_add(&nyielders, 1);
        uint64_t until = cpvm_now_ns() + (uint64_t)spin_budget_ns();
        if (deadline_ns && deadline_ns < until) until = deadline_ns;
        while (atomic_load(&generation) == gen0 && atomic_load(&spinner_busy) &&
               cpvm_now_ns() < until)
            sched_yield();
        atomic_fetch_sub(&nyielders, 1);
        if (atomic_load(&generation) != gen0 || !atomic_load(&spinner_busy) ||
            (deadline_ns && cpvm_now_ns() >= deadline_ns)) {
            cpvm_relock_all(depth);
            return;
        }
        atomic_fetch_add(&nwaiters, 1);
        pthread_mutex_lock(&arrived_lock);
        if (atomic_load(&generation) == gen0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 1000000; /* the spinner may leave: look again within 1 ms */
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&arrived, &arrived_lock, &ts);
        }
        pthread_mutex_unlock(&arrived_lock);
        atomic_fetch_sub(&nwaiters, 1);
    }
    cpvm_relock_all(depth);
}
