/* unstick.c - frees a shm provider call from a spin lock a killed peer holds.
 *
 * libfabric 1.17's shm provider takes the target's region lock (a pthread spin lock in the
 * target's shared memory) for every send, and the target takes it while it reads its queue.
 * A target killed while it held that lock leaves it held for good: every later send to it
 * spins forever inside the provider, holding our port lock (the caller's core at 100%, the
 * port dead).  The lock file cannot close that window: a peer alive at our check may die
 * holding its lock before our send reaches the provider.
 *
 * So each shm port says which peer its provider call is for (gmx_guard_enter/leave: a
 * sequence number, odd while inside).  A watchdog thread, running while shm ports are open,
 * looks every GMX_UNSTICK_MS (GMX_UNSTICK_IDLE_MS after a look at no call): a call that has not
 * returned since its last look, toward a peer whose lock file nobody holds (its process is gone),
 * gets a signal; the handler, if the thread is spinning in glibc's pthread_spin_lock, releases that
 * lock (stores 1, as pthread_spin_unlock does).  The send then lands in the dead peer's queue,
 * harmless, and the usual checks (lock file) fail what was sent to it.
 *
 * A sender also takes its target's lock, so a peer killed while sending leaves a *live*
 * target's lock held: every later send to that target spins.  Such a lock is freed the same
 * way once the call has spun GMX_ORPHAN_MS and this process saw a peer go away (a lock file
 * nobody holds, or a client dropping sends to a peer it was told died) within
 * GMX_LOSS_WINDOW_MS before: the provider holds the lock for a few copies, so a live holder
 * does not keep it for seconds, and a merely overloaded machine, where nobody died, never
 * sees a live lock touched.  Until then the spinning thread naps GMX_PAUSE_MS at each look
 * (the handler sleeps), so a wait on a stuck lock does not burn a core.  x86_64 glibc only (the
 * handler reads the lock's address from the spinning frame); elsewhere the watchdog does nothing.
 */
#define _GNU_SOURCE /* REG_RIP, REG_RDI */
#include "gm_internal.h"

#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#define GMX_UNSTICK_MS 50
/* After a look that found no provider call since the previous one, the next look comes this
 * much later: a stuck call is then seen up to this late once, and then looked at every
 * GMX_UNSTICK_MS as before. 20 looks a second were a third of what an idle gm task still did
 * (TSan: 3.4 ms of CPU per 5 s). */
#define GMX_UNSTICK_IDLE_MS 250
#define GMX_PAUSE_MS 45 /* a spinner sleeps this long at each look meanwhile */

static uintptr_t spin_lock_pc; /* glibc's pthread_spin_lock; set before the handler */
static int unstick_signal;     /* 0 until installed; only the watchdog thread */
/* The call the watchdog asks the handler to free: whoever of the two takes the port out
 * first owns it, so the handler never touches a port the watchdog gave up on (and that may
 * close afterwards). */
static _Atomic(struct gm_port *) unstick_port;
static _Atomic uint64_t unstick_seq;
static _Atomic int unstick_release;   /* what the handler does: 1 release the lock, 0 pause */
static _Atomic uint64_t last_loss_ns; /* when this process last saw a peer go away; 0: never */

void gmx_note_peer_lost(void)
{
    atomic_store_explicit(&last_loss_ns, gmx_coarse_ns(), memory_order_relaxed);
}

int gmx_peer_loss_recent(void)
{
    uint64_t lost = atomic_load_explicit(&last_loss_ns, memory_order_relaxed);
    return lost &&
           gmx_coarse_ns() - lost < (uint64_t)(GMX_LOSS_WINDOW_MS + GMX_ORPHAN_MS) * 1000000u;
}

/* A live target's lock that the call found stuck has held for GMX_ORPHAN_MS, soon after a
 * peer went away: its holder is that peer. */
static int orphaned(const struct gm_port *q)
{
    uint64_t lost = atomic_load_explicit(&last_loss_ns, memory_order_relaxed);
    uint64_t now = gmx_coarse_ns();
    return q->guard_looks >= GMX_ORPHAN_MS / GMX_UNSTICK_MS && lost &&
           now - lost < (uint64_t)(GMX_LOSS_WINDOW_MS + GMX_ORPHAN_MS) * 1000000u;
}

#if defined(__x86_64__) && defined(__GLIBC__)
static void on_unstick(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ctx;
    struct gm_port *q = atomic_exchange(&unstick_port, NULL);
    /* Still inside the very call found stuck (this thread made it: only the caller inside
     * a call changes its sequence number)? */
    if (!q || atomic_load(&q->guard_seq) != atomic_load(&unstick_seq)) return;
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    /* The whole function is 25 bytes; its spin loop keeps the lock's address in rdi. */
    if (!spin_lock_pc || pc - spin_lock_pc >= 32) return;
    if (atomic_load(&unstick_release)) {
        __atomic_store_n((int *)uc->uc_mcontext.gregs[REG_RDI], 1, __ATOMIC_RELEASE);
    } else {
        struct timespec nap = {0, GMX_PAUSE_MS * 1000000L};
        nanosleep(&nap, NULL); /* async-signal-safe */
    }
}

/* Takes sig for the handler if nobody handles it; 0 or -1. */
static int claim(int sig)
{
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_unstick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) return -1;
    unstick_signal = sig;
    return 0;
}

/* Installs the handler once; 0 or -1. SIGSYS first: ThreadSanitizer runs its handler at once,
 * as for a fault, where it defers other signals until the thread leaves its interceptor (and
 * the stuck thread never leaves pthread_spin_lock's). Else a real-time signal nobody handles. */
static int install(void)
{
    if (unstick_signal) return 0;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *fn = libc ? dlsym(libc, "pthread_spin_lock") : NULL;
    if (libc) dlclose(libc);
    if (!fn) return -1;
    spin_lock_pc = (uintptr_t)fn;
    if (claim(SIGSYS) == 0) return 0;
    for (int sig = SIGRTMIN + 4; sig <= SIGRTMAX; sig++)
        if (claim(sig) == 0) return 0;
    return -1;
}
#else
static int install(void)
{
    return -1;
}
#endif

/* One look at every open shm port (gmx_lock held by the caller). Returns 0 if no port made
 * a provider call since the last look nor is in one (the watchdog may then look less
 * often), else 1. */
int gmx_unstick_scan(struct gm_port *registry)
{
    int busy = 0;
    for (struct gm_port *q = registry; q; q = q->reg_next) {
        uint64_t seq = atomic_load_explicit(&q->guard_seq, memory_order_acquire);
        uint64_t seen = q->guard_seen;
        q->guard_seen = seq;
        if ((seq & 1) || seq != seen) busy = 1;
        if (!(seq & 1) || seq != seen) {
            q->guard_looks = 0;
            q->guard_first_ns = gmx_coarse_ns();
            if (atomic_load_explicit(&q->stuck_seq, memory_order_relaxed))
                atomic_store_explicit(&q->stuck_seq, 0, memory_order_release);
            /* Sends waiting for a target's held lock (qlock.c) are stuck as well, outside. */
            if (gmx_qlock_report(q, NULL, NULL) * 1000000ull >= gmx_unstick_period_ns(1)) {
                busy = 1;
                if (q->stuck_fn) q->stuck_fn(q->stuck_arg);
            }
            continue; /* not inside a call, or a new one since the last look */
        }
        if (!q->guard_looks++) { /* stuck: say since when (gm_compat_port_stuck) */
            atomic_store_explicit(&q->stuck_ns, q->guard_first_ns, memory_order_relaxed);
            atomic_store_explicit(&q->stuck_seq, seq, memory_order_release);
        }
        unsigned node = atomic_load_explicit(&q->guard_node, memory_order_relaxed);
        unsigned port = atomic_load_explicit(&q->guard_port, memory_order_relaxed);
        pthread_t thread = (pthread_t)atomic_load_explicit(&q->guard_thread, memory_order_relaxed);
        if (atomic_load_explicit(&q->guard_seq, memory_order_acquire) != seq)
            continue; /* the call ended while we read */
        int dead = gmx_lock_unheld(node, port);
        int release = dead || orphaned(q);
        if (!dead && q->stuck_fn) q->stuck_fn(q->stuck_arg); /* outside any signal handler */
        if (dead)
            gmx_note_peer_lost();
        else if (!release && q->guard_looks < 2)
            continue; /* a live target and a live holder: it will let go */
        if (install() != 0) {
            gmx_log("port %u stuck on node %u port %u; cannot unstick here\n", q->port_id, node,
                    port);
            continue;
        }
        if (dead)
            gmx_log("port %u stuck on dead node %u port %u: releasing its lock\n", q->port_id, node,
                    port);
        else if (release)
            gmx_log("port %u stuck %u ms on node %u port %u, whose lock a vanished peer holds: "
                    "releasing it\n",
                    q->port_id, q->guard_looks * GMX_UNSTICK_MS, node, port);
        else if (q->guard_looks == 2)
            gmx_log("port %u stuck on node %u port %u: the call naps while it waits\n", q->port_id,
                    node, port);
        atomic_store(&unstick_release, release);
        atomic_store(&unstick_seq, seq);
        atomic_store(&unstick_port, q);
        if (pthread_kill(thread, unstick_signal) == 0) {
            /* Wait (bounded) for the handler: q stays open meanwhile (gmx_lock). */
            for (int i = 0; i < 100 && atomic_load(&unstick_port); i++) {
                struct timespec nap = {0, 100000};
                nanosleep(&nap, NULL);
            }
        }
        atomic_exchange(&unstick_port, NULL);
    }
    return busy;
}

void gmx_guard_enter(struct gm_port *p, const struct gmx_peer *peer)
{
    atomic_store_explicit(&p->guard_thread, (unsigned long)pthread_self(), memory_order_relaxed);
    atomic_store_explicit(&p->guard_node, peer->node, memory_order_relaxed);
    atomic_store_explicit(&p->guard_port, peer->port, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->guard_seq, 1, memory_order_release);
}

void gmx_guard_leave(struct gm_port *p)
{
    atomic_fetch_add_explicit(&p->guard_seq, 1, memory_order_release);
}

GMX_EXPORT unsigned gm_compat_port_stuck(struct gm_port *p, unsigned int *node, unsigned int *port)
{
    if (!p) return 0;
    uint64_t seq = atomic_load_explicit(&p->stuck_seq, memory_order_acquire);
    if (!seq) return gmx_qlock_report(p, node, port); /* no call inside: sends waiting? */
    uint64_t since = atomic_load_explicit(&p->stuck_ns, memory_order_relaxed);
    unsigned n = atomic_load_explicit(&p->guard_node, memory_order_relaxed);
    unsigned q = atomic_load_explicit(&p->guard_port, memory_order_relaxed);
    /* still that call (its target as read), and the watchdog still says so */
    if (atomic_load_explicit(&p->guard_seq, memory_order_acquire) != seq ||
        atomic_load_explicit(&p->stuck_seq, memory_order_acquire) != seq)
        return 0;
    uint64_t now = gmx_coarse_ns();
    uint64_t ms = now > since ? (now - since) / 1000000u : 0;
    if (node) *node = n;
    if (port) *port = q;
    return ms < 1 ? 1 : ms > UINT32_MAX ? UINT32_MAX : (unsigned)ms;
}

uint64_t gmx_unstick_period_ns(int busy)
{
    return (uint64_t)(busy ? GMX_UNSTICK_MS : GMX_UNSTICK_IDLE_MS) * 1000000u;
}
