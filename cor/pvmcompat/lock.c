/*
 * The big lock and the per-thread PVM state.
 *
 * libpvm3 keeps one active send buffer, one receive buffer and one context per process. Each
 * thread here has its own: the lock's holder finds its own installed in libpvm3. Installing
 * is lazy: a program with one thread never pays for it; when the lock changes hands between
 * threads, the previous owner's state is read back and the new one's set. A receive without
 * the lock (rxq.c) gives the thread its new receive buffer at once: installed here at the
 * thread's next call (pending), the one it replaced freed by the next holder (trash).
 */
#include <stdlib.h>

#include "pmsg.h"

_Thread_local int cpvm_in_real;
_Thread_local int cpvm_in_send;
_Thread_local int cpvm_in_recv;

struct pvm_thread {
    int sbuf, rbuf, ctx;
    struct cpvm_spares *spares; /* ready-made send buffers (sbuf.c) */
};

static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int depth;      /* how often this thread holds big */
static struct pvm_thread *installed; /* whose state libpvm3 holds now (big) */
static struct pvm_thread orphan;     /* state left by a thread that ended (big) */
static int base_ctx;                 /* context of new threads (big) */
static bool base_known;              /* big */
static _Thread_local struct pvm_thread *me;
static _Thread_local struct lp_msg *own_rbuf; /* cpvm_unpack_target at the last leave */
/* What the thread's calls without the lock need (valid once own_known): its context and
 * receive buffer as it left the lock, and the receive buffer a receive without the lock gave
 * it (pending: installed in libpvm3 at its next call). */
static _Thread_local bool own_known, pending;
static _Thread_local int own_ctx, own_rbuf_mid, pending_rbuf;
/* The same for the send buffer: the thread's own, packed and sent without the lock (sbuf.c),
 * and the one a pvm_initsend without the lock made active (installed at its next call). */
static _Thread_local struct lp_msg *own_sbuf;
static _Thread_local bool pending_s;
static _Thread_local int own_sbuf_mid, pending_sbuf;
/* Bumped by pvm_exit: buffers known before belong to the task that left. */
static _Atomic unsigned buffers_epoch = 1;
static _Thread_local unsigned own_epoch;
static _Atomic int threads_seen;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* A thread ends (its thread-locals still readable here): what only it knew of goes back to
 * libpvm3, under the lock. Its spares and their frames (sbuf.c), and the buffers a call
 * without the lock made its own but never installed in libpvm3 (pending: a lock-free
 * pvm_initsend's spare, a lock-free receive's message); the buffers installed stay, as
 * libpvm3's active ones (orphan) or in its table, as before. */
static void thread_gone(void *p)
{
    struct pvm_thread *t = p;
    pthread_mutex_lock(&big);
    if (installed == t) {
        orphan = *t;
        orphan.spares = NULL;
        installed = &orphan;
    }
    cpvm_spares_drop(t->spares);
    t->spares = NULL;
    if (own_epoch == cpvm_buffers_epoch()) {
        if (pending_s && pending_sbuf > 0) REAL(pvm_freebuf, pending_sbuf);
        if (pending && pending_rbuf > 0) REAL(pvm_freebuf, pending_rbuf);
    }
    pending = pending_s = false;
    pthread_mutex_unlock(&big);
    free(t);
}

static void make_key(void)
{
    pthread_key_create(&key, thread_gone);
}

int cpvm_base_context(void)
{
    return base_ctx;
}

/* Makes libpvm3's active state the calling thread's. */
static void install(void)
{
    if (!me) {
        pthread_once(&key_once, make_key);
        me = calloc(1, sizeof *me);
        if (!me) abort(); /* nothing sensible to do without 12 bytes */
        pthread_setspecific(key, me);
        atomic_fetch_add(&threads_seen, 1);
        if (!installed) { /* the first thread owns what libpvm3 has */
            installed = me;
            return;
        }
        me->ctx = base_ctx;
    }
    if (installed == me) {
        if (pending) REAL(pvm_setrbuf, pending_rbuf);
        if (pending_s) REAL(pvm_setsbuf, pending_sbuf);
        pending = pending_s = false;
        return;
    }
    if (pending) me->rbuf = pending_rbuf;
    if (pending_s) me->sbuf = pending_sbuf;
    pending = pending_s = false;
    struct pvm_thread *prev = installed;
    prev->sbuf = REAL(pvm_getsbuf);
    prev->rbuf = REAL(pvm_getrbuf);
    prev->ctx = REAL(pvm_getcontext);
    /* Detach first: a buffer cannot be the send and the receive buffer at once. */
    REAL(pvm_setsbuf, 0);
    REAL(pvm_setrbuf, 0);
    if (me->sbuf > 0 && REAL(pvm_setsbuf, me->sbuf) < 0) me->sbuf = 0;
    if (me->rbuf > 0 && REAL(pvm_setrbuf, me->rbuf) < 0) me->rbuf = 0;
    if (me->ctx != prev->ctx) REAL(pvm_setcontext, me->ctx);
    installed = me;
}

/* Takes big; a wait for another thread is counted (COR_PVM_STATS: how long threads wait for
 * each other's calls). */
static void lock_big(void)
{
    if (pthread_mutex_trylock(&big) == 0) return;
    uint64_t t0 = cpvm_now_ns();
    if (pthread_mutex_lock(&big) != 0) abort();
    uint64_t waited = cpvm_now_ns() - t0;
    atomic_fetch_add_explicit(&cpvm_stats.lock_waits, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpvm_stats.lock_wait_ns, waited, memory_order_relaxed);
    if (cpvm_in_send) {
        atomic_fetch_add_explicit(&cpvm_stats.send_lock_waits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&cpvm_stats.send_lock_wait_ns, waited, memory_order_relaxed);
    } else if (cpvm_in_recv) {
        atomic_fetch_add_explicit(&cpvm_stats.recv_lock_waits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&cpvm_stats.recv_lock_wait_ns, waited, memory_order_relaxed);
    }
}

/* Receive buffers that receives without the lock replaced (PVM frees the receive buffer at
 * every receive): freed by the next holder of the big lock. */
static pthread_mutex_t trash_lock = PTHREAD_MUTEX_INITIALIZER;
static int *trash;               /* trash_lock */
static size_t ntrash, trash_cap; /* trash_lock */
static _Atomic size_t trash_any;

/* Lock held, this thread's buffers installed. */
static void empty_trash(void)
{
    if (!atomic_load_explicit(&trash_any, memory_order_relaxed)) return;
    pthread_mutex_lock(&trash_lock);
    int *mids = trash;
    size_t n = ntrash;
    trash = NULL;
    ntrash = trash_cap = 0;
    atomic_store(&trash_any, 0);
    pthread_mutex_unlock(&trash_lock);
    for (size_t i = 0; i < n; i++)
        REAL(pvm_freebuf, mids[i]);
    free(mids);
}

static void enter(bool trash)
{
    cpvm_real_load();
    if (depth > 0) {
        depth++;
        return;
    }
    lock_big();
    depth = 1;
    install();
    if (trash) empty_trash();
}

void cpvm_enter(void)
{
    enter(true);
}

void cpvm_enter_to_pump(void)
{
    enter(false);
}

bool cpvm_own_context(int *ctx)
{
    if (depth > 0 || !own_known) return false;
    *ctx = own_ctx;
    return true;
}

void cpvm_adopt_rbuf(struct lp_msg *m, struct lp_msg *unpackable)
{
    int old = own_rbuf_mid;
    own_rbuf_mid = m ? m->mid : 0;
    own_rbuf = unpackable;
    pending = true;
    pending_rbuf = own_rbuf_mid;
    if (old > 0) cpvm_trash(old);
}

void cpvm_adopt_sbuf(struct lp_msg *m)
{
    int old = own_sbuf_mid;
    own_sbuf = m;
    own_sbuf_mid = m->mid;
    pending_s = true;
    pending_sbuf = m->mid;
    if (old > 0) cpvm_trash(old);
}

struct lp_msg *cpvm_own_sbuf(void)
{
    bool current = own_epoch == atomic_load_explicit(&buffers_epoch, memory_order_acquire);
    return depth == 0 && own_known && current ? own_sbuf : NULL;
}

unsigned cpvm_buffers_epoch(void)
{
    return atomic_load_explicit(&buffers_epoch, memory_order_acquire);
}

void cpvm_buffers_forget(void)
{
    atomic_fetch_add_explicit(&buffers_epoch, 1, memory_order_release);
}

struct cpvm_spares **cpvm_own_spares(void)
{
    return me ? &me->spares : NULL;
}

void cpvm_trash(int old)
{
    pthread_mutex_lock(&trash_lock);
    if (ntrash == trash_cap) {
        size_t cap = trash_cap ? 2 * trash_cap : 64;
        int *t = realloc(trash, cap * sizeof *t);
        if (t) trash = t, trash_cap = cap;
    }
    bool kept = ntrash < trash_cap;
    if (kept) trash[ntrash++] = old;
    atomic_store(&trash_any, ntrash);
    pthread_mutex_unlock(&trash_lock);
    if (kept) return;
    cpvm_enter(); /* (out of memory: freed at once) */
    REAL(pvm_freebuf, old);
    cpvm_leave();
}

/* Waiters look again only when the receive queue changed since they last looked: a wake-up
 * at every release had every waiting thread retake the lock after each call of any thread
 * (8 receiving threads: most of the time went to that). Lock held, about to be released. */
static uint64_t seen_queue; /* big */

static void wake_if_queue_changed(void)
{
    if (!cpvm_waiters()) return;
    uint64_t sig = cpvm_queue_signature();
    if (sig == seen_queue) return;
    seen_queue = sig;
    cpvm_wake_waiters();
}

void cpvm_chores(void)
{
    if (depth > 0 || !me) return;
    if (!pending && !pending_s && !atomic_load_explicit(&trash_any, memory_order_relaxed) &&
        !cpvm_spares_low() && !cpvm_in_spares_low())
        return;
    if (!cpvm_try_enter()) return; /* (its holder empties the trash) */
    cpvm_spares_top_up();
    cpvm_in_spares_top_up();
    cpvm_leave();
}

bool cpvm_try_enter(void)
{
    if (depth > 0) {
        depth++;
        return true;
    }
    if (pthread_mutex_trylock(&big) != 0) return false;
    depth = 1;
    install();
    empty_trash();
    return true;
}

void cpvm_leave(void)
{
    if (depth == 1) {
        if (!cpvm_is_setup() && pvmmytid > 0) {
            if (!base_known) {
                base_ctx = REAL(pvm_getcontext);
                base_known = true;
            }
            cpvm_setup();
        }
        if (cpvm_has_deferred()) cpvm_run_deferred();
        /* Threads receiving without the lock leave pumping to its holder when it is busy. */
        if (cpvm_routed_arrived()) cpvm_pump();
        cpvm_rxq_publish();
        wake_if_queue_changed();
        /* The receive buffer is the thread's own until its next call changes it. */
        own_rbuf = cpvm_unpack_target();
        own_rbuf_mid = cpvm_rbuf_mid();
        own_sbuf = cpvm_pack_target();
        own_sbuf_mid = cpvm_sbuf_mid();
        own_epoch = cpvm_buffers_epoch();
        own_ctx = cpvm_current_context();
        own_known = true;
    }
    if (--depth == 0) {
        pthread_mutex_unlock(&big);
        cpvm_post_pieces();
    }
}

struct lp_msg *cpvm_own_rbuf(void)
{
    return depth == 0 ? own_rbuf : NULL;
}

bool cpvm_single_thread(void)
{
    return atomic_load(&threads_seen) <= 1;
}

bool cpvm_nested(void)
{
    return depth > 1;
}

int cpvm_unlock_all(void)
{
    int d = depth;
    wake_if_queue_changed();
    depth = 0;
    pthread_mutex_unlock(&big);
    cpvm_post_pieces();
    return d;
}

void cpvm_relock_all(int d)
{
    lock_big();
    depth = d;
    install();
    empty_trash();
}
