/*
 * A peer that holds one of our sends inside libgm (shm): given up from another thread.
 *
 * libfabric 1.17's shm provider takes the target's region lock for every send, and the target
 * takes it while it reads its queue. A target stopped while it held that lock (SIGSTOP, a
 * debugger, a machine so loaded that a stop lands inside the short hold) keeps our next send to
 * it spinning inside the provider, in the port's owner, until it runs again or dies. The owner
 * is also the only thread that runs the port's dead-time check (gm_tx.c, starving()), so that
 * check never ran and the peer was never given up (tests/proc/starve.sh: "not given up within
 * 20 s" on a busy machine). libgm-compat frees such a call only once the holder is gone.
 *
 * So one thread per process (`cor-gm-watch`, while gm ports are open) sleeps on a condition
 * variable until libgm-compat's watchdog finds a call of one of our ports stuck toward a live
 * peer, or (since libgm looks at a target's lock before it calls, and leaves the send in its
 * backlog while the lock is held) sends of a port waiting for a held lock
 * (gm_compat_set_stuck_notify: every 50 ms while it lasts), then asks each port how long
 * (gm_compat_port_stuck). A call stuck COR_GM_DEAD_MS toward a peer we know gives that peer up
 * from here with peer_failed(COR_ETIMEDOUT), which the core takes from any thread (route.h):
 * it tells the launcher the peer is lost (cor-run declares it dead and kills it) and every route
 * port that it died (peer_dead: notes their owners take when they are free). Once the holder is
 * gone, libgm-compat's watchdog releases its lock, the stuck send returns and the owner abandons
 * what it held for the peer. The notify only wakes this thread: it runs under libgm's registry
 * lock, and the upcall may block (a death listener sending on the stuck port), which must never
 * hold up the watchdog that frees the call.
 *
 * The lock names no holder: a third process stopped while *sending* to the target holds it
 * too, and then the target is given up although it is not the one stopped.
 */
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

#include "gm_port.h"

static struct {
    pthread_mutex_t lock; /* everything below but life */
    pthread_cond_t cond;  /* kick or stop */
    pthread_cond_t idle;  /* busy cleared */
    struct cor_rport *ports;
    struct cor_rport *busy; /* the port whose peer this thread is giving up (lock not held) */
    int kick, stop;
} w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* Starting and joining the thread: held across pthread_create/join, never by the thread. */
static pthread_mutex_t life = PTHREAD_MUTEX_INITIALIZER;
static pthread_t watcher;
static int running; /* under life */

/* libgm-compat's watchdog (its registry lock held): only wake the thread. */
static void on_stuck(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&w.lock);
    w.kick = 1;
    pthread_cond_signal(&w.cond);
    pthread_mutex_unlock(&w.lock);
}

/* w.lock held; returns with it held. 1 if it gave a peer of p up (the list may have moved). */
static int check(struct cor_rport *p)
{
    unsigned node, port;
    unsigned ms = gm_compat_port_stuck(p->gp, &node, &port);
    uint32_t r;
    if (ms < p->k.dead_ms || gmr_lookup(p, node, port, &r) || r >= p->base.npeers ||
        r == p->base.self)
        return 0;
    struct gmr_peer *q = &p->peers[r];
    if (atomic_load(&q->gone) || atomic_exchange(&q->held_lost, 1)) return 0;
    w.busy = p;
    pthread_mutex_unlock(&w.lock);
    gmr_log("domain %u was silent for %u ms while our send waited inside libgm for its lock: "
            "giving up",
            r, ms);
    p->base.up.peer_failed(p->base.up.core, r, COR_ETIMEDOUT); /* the core reports it lost */
    pthread_mutex_lock(&w.lock);
    w.busy = NULL;
    pthread_cond_broadcast(&w.idle);
    return 1;
}

static void *watch_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "cor-gm-watch", 0, 0, 0);
    pthread_mutex_lock(&w.lock);
    for (;;) {
        while (!w.stop && !w.kick)
            pthread_cond_wait(&w.cond, &w.lock);
        if (w.stop) break;
        w.kick = 0;
        for (struct cor_rport *p = w.ports; p; p = p->watch_next)
            check(p); /* p stays listed meanwhile: gmr_watch_remove waits while it is busy */
    }
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

void gmr_watch_add(struct cor_rport *p)
{
    pthread_mutex_lock(&life);
    if (!running) {
        pthread_mutex_lock(&w.lock);
        w.stop = w.kick = 0;
        pthread_mutex_unlock(&w.lock);
        /* no signal meant for the program's threads comes here */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        running = pthread_create(&watcher, NULL, watch_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!running) gmr_log("no watch thread: a peer stopped holding its shm lock stays ours");
    }
    pthread_mutex_lock(&w.lock);
    p->watch_next = w.ports;
    w.ports = p;
    pthread_mutex_unlock(&w.lock);
    pthread_mutex_unlock(&life);
    gm_compat_set_stuck_notify(p->gp, on_stuck, NULL);
}

void gmr_watch_remove(struct cor_rport *p)
{
    gm_compat_set_stuck_notify(p->gp, NULL, NULL);
    pthread_mutex_lock(&life);
    pthread_mutex_lock(&w.lock);
    while (w.busy == p)
        pthread_cond_wait(&w.idle, &w.lock);
    for (struct cor_rport **l = &w.ports; *l; l = &(*l)->watch_next)
        if (*l == p) {
            *l = p->watch_next;
            break;
        }
    int last = !w.ports && running;
    if (last) {
        w.stop = 1;
        pthread_cond_signal(&w.cond);
    }
    pthread_mutex_unlock(&w.lock);
    if (last) {
        pthread_join(watcher, NULL);
        running = 0;
    }
    pthread_mutex_unlock(&life);
}
