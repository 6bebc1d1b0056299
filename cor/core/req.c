/*
 * Requests and their handles. A handle is a slot index plus a generation, so a stale or
 * forged handle (from a user or from the wire) is recognised instead of touching freed memory:
 * request structs are recycled, never returned to malloc.
 *
 * Completion happens exactly once (CAS on state); the owner task's condvar is signalled under
 * its lock when one of its threads sleeps (counted before it looks at the state), so a waiter
 * cannot miss it, and a completion nobody sleeps for takes no lock.
 */
#include <sched.h>
#include <sys/prctl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hport.h"
#include "internal.h"
#include "tcache.h"

#define CHUNK 1024
#define CHUNKS 1024 /* up to 1M requests alive at once */

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cor_req *_Atomic chunks[CHUNKS]; /* written under req_lock, read lock-free */
static uint32_t nslots;                        /* req_lock */
static struct cor_req *free_list;              /* req_lock; linked through ->next */

/* Each thread keeps a few freed requests of its own: a message used to take req_lock twice
 * on each side (new and free). The one reader of other threads' requests is the peer-death
 * scan, which must not see one recycled between its look and its completion: it raises
 * `scanning` under req_lock, and a recycle that sees it waits for req_lock. The free's store
 * of a zero handle comes before the recycle's look at `scanning` (both sequentially
 * consistent), so a scan that saw the old handle has raised the flag by then, and one that
 * did not skips the request. */
#define LINK offsetof(struct cor_req, next)
static _Thread_local struct cor_tcache cache;
static _Atomic int scanning;

/* A thread ends: its cached requests go back to everyone. */
static void cache_retire(void *arg)
{
    struct cor_tcache *c = arg;
    COR_LOCK(&req_lock);
    struct cor_req *r;
    while ((r = cor__tcache_pop(c, LINK))) {
        r->next = free_list;
        free_list = r;
    }
    c->registered = false;
    COR_UNLOCK(&req_lock);
}
static struct cor_tcache_kind cache_kind = {.max = 64, .retire = cache_retire};

/* A free request, or a new slot; req_lock held. */
static struct cor_req *slot_take(void)
{
    struct cor_req *r = free_list;
    if (r) {
        free_list = r->next;
        return r;
    }
    if (nslots >= CHUNK * CHUNKS) return NULL;
    if (nslots % CHUNK == 0) {
        struct cor_req *c = calloc(CHUNK, sizeof *c);
        if (!c) return NULL;
        atomic_store(&chunks[nslots / CHUNK], c);
    }
    r = &atomic_load(&chunks[nslots / CHUNK])[nslots % CHUNK];
    r->slot = nslots++;
    return r;
}

/* Gives r a new identity; the handle last, so a scan that sees it sees the rest. */
static void req_init(struct cor_req *r, enum req_kind kind, struct cor_task *owner)
{
    size_t keep = offsetof(struct cor_req, gen) + sizeof r->gen;
    memset((char *)r + keep, 0, sizeof *r - keep);
    if (++r->gen == 0) r->gen = 1;
    r->kind = kind;
    r->remote_rank = -1;
    r->owner = owner;
    atomic_store_explicit(&r->handle, ((cor_req_t)r->gen << 32) | r->slot, memory_order_release);
}

struct cor_req *cor__req_new(enum req_kind kind, struct cor_task *owner)
{
    struct cor_req *r = cor__tcache_pop(&cache, LINK);
    if (r) {
        if (atomic_load(&scanning) == 0) {
            req_init(r, kind, owner);
            return r;
        }
    }
    COR_LOCK(&req_lock);
    if (!r) r = slot_take();
    if (r) req_init(r, kind, owner);
    COR_UNLOCK(&req_lock);
    return r;
}

struct cor_req *cor__req_lookup(cor_req_t h)
{
    uint32_t index = (uint32_t)h;
    if (h == COR_REQ_NULL || index >= CHUNK * CHUNKS) return NULL;
    struct cor_req *c = atomic_load(&chunks[index / CHUNK]);
    if (!c) return NULL;
    struct cor_req *r = &c[index % CHUNK];
    return atomic_load(&r->handle) == h ? r : NULL;
}

void cor__req_free(struct cor_req *r)
{
    atomic_store(&r->handle, 0);
    if (cor__tcache_push(&cache, &cache_kind, r, LINK)) return;
    COR_LOCK(&req_lock);
    r->next = free_list;
    free_list = r;
    COR_UNLOCK(&req_lock);
}

static inline bool req_done(struct cor_req *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == RS_DONE;
}

/* Requests of other tasks this thread completed, and when the first of them was: a spinner
 * yields its core once a few are ready, so those tasks run now rather than at the scheduler's
 * next tick (the spinners of two domains would otherwise hold both cores of a small machine).
 * Not after each one: waiting tasks take turns yielding, and each turn that finds its request
 * still pending is a wasted switch (16 task pairs made ~8 of them per message). */
static _Thread_local unsigned woke_tasks;
static _Thread_local uint64_t woke_since;
#define WOKE_BATCH 8
#define WOKE_WAIT_NS 50000

/* Wake-ups a polling loop (a spinner, a listener) defers: a task asleep on one message is
 * woken once for the batch that came meanwhile, not once per message, when the loop yields,
 * finds the ports idle a while (WAKE_IDLE_POLLS) or stops (16 task pairs made one wake-up, a futex
 * call and a thread switch per message). Task slots live as long as the domain, so the pointers
 * stay valid. */
#define DEFER_MAX 16
/* Idle polls in a row before a spinner wakes the tasks it completed: in a stream the ports go
 * idle between two frames for a poll or two, and a wake-up at each such gap woke a sleeper
 * per message or two; 16 polls are a few microseconds. */
#define WAKE_IDLE_POLLS 16
static _Thread_local bool defer_wakes;
static _Thread_local int ndeferred;
static _Thread_local struct cor_task *deferred[DEFER_MAX];

static void wake(struct cor_task *t)
{
    COR_LOCK(&t->lock);
    pthread_cond_broadcast(&t->cond);
    COR_UNLOCK(&t->lock);
}

void cor__wakes_flush(void)
{
    int n = ndeferred;
    ndeferred = 0;
    for (int i = 0; i < n; i++)
        wake(deferred[i]);
}

void cor__wakes_defer(bool on)
{
    if (!on) cor__wakes_flush();
    defer_wakes = on;
}

/* Whether t's wake-up was deferred (or already is). `flush`: a full list may be woken now
 * (not while a task's lock is held: waking takes the others'). */
static bool defer_wake(struct cor_task *t, bool flush)
{
    if (!defer_wakes) return false;
    for (int i = 0; i < ndeferred; i++)
        if (deferred[i] == t) return true;
    if (ndeferred == DEFER_MAX) {
        if (!flush) return false;
        cor__wakes_flush();
    }
    deferred[ndeferred++] = t;
    return true;
}

/* `locked`: publish under the owner's lock even when nobody sleeps, for a completion from
 * another thread than the data path's (peer death): data copies into a matched receive run
 * under that lock and check the state first, so the caller never frees a buffer one of them
 * still writes into. */
static bool complete(struct cor_req *r, int err, bool locked)
{
    int s = atomic_load(&r->state);
    /* RS_DONE+16 = "completing": whoever set it owns the status until it publishes RS_DONE,
     * so a second completer (the data path beside the peer-death scan) backs off then too. */
    do {
        if (s == RS_DONE || s == RS_DONE + 16) return false;
    } while (!atomic_compare_exchange_weak(&r->state, &s, RS_DONE + 16));
    r->status.error = err;
    if (atomic_load_explicit(&r->awaits, memory_order_relaxed)) cor__await_end(r);
    /* a send whose RTS_GET named its buffer: its registration goes with it, whoever completes
     * it (the receiver's F_GOT, the peer's death) */
    if (r->kind == REQ_SEND && r->getting && r->mr) cor__req_mr_release(r);
    struct cor_task *t = r->owner; /* r may be freed and reused once it is DONE */
    /* The owner's lock only when someone sleeps: a sleeper counts itself (seq_cst) before it
     * looks at the state, and we publish the state before we look at the count, so either it
     * sees DONE or we see it and wake it under the lock it waits with. */
    if (locked) {
        COR_LOCK(&t->lock);
        atomic_store(&r->state, RS_DONE);
        if (atomic_load(&t->sleepers) > 0) pthread_cond_broadcast(&t->cond);
        COR_UNLOCK(&t->lock);
    } else {
        atomic_store(&r->state, RS_DONE);
        if (atomic_load(&t->sleepers) > 0 && !defer_wake(t, true)) wake(t);
    }
    if (t != cor__task_current() && woke_tasks++ == 0) woke_since = 0; /* spin() times it */
    return true;
}

void cor__await_begin(struct cor_req *r)
{
    struct cor_hport *hp = r->hp;
    if (!hp || !hp->await_peer) return;
    atomic_store(&r->awaits, true);
    hp->route->ops->await_peer(hp->rp, r->peer_rank, 1);
}

void cor__await_end(struct cor_req *r)
{
    /* Not once cor_finalize is past its barrier: its teardown closes and frees the ports
     * one by one, and a route's close may still fail requests that waited on another. */
    if (atomic_exchange(&r->awaits, false) && atomic_load(&g.initialized) != 3)
        r->hp->route->ops->await_peer(r->hp->rp, r->peer_rank, 0);
}

bool cor__req_complete(struct cor_req *r, int err)
{
    return complete(r, err, false);
}

/* The handle is not its owner's yet, so nobody waits on it, and no other completion can come
 * (the peer-death scan leaves eager sends to the route, which has let go of this one): no
 * CAS, no sequentially consistent store, no look at sleepers. Saves two locked instructions
 * per eager send on a copying route. */
void cor__req_complete_unseen(struct cor_req *r, int err)
{
    r->status.error = err;
    atomic_store_explicit(&r->state, RS_DONE, memory_order_release);
}

void cor__req_complete_held(struct cor_req *r, int err)
{
    struct cor_task *t = r->owner;
    r->status.error = err;
    atomic_store_explicit(&r->state, RS_DONE, memory_order_release);
    if (atomic_load_explicit(&t->sleepers, memory_order_relaxed) > 0 && !defer_wake(t, false))
        pthread_cond_broadcast(&t->cond); /* (we hold the lock it waits with) */
    if (t != cor__task_current() && woke_tasks++ == 0) woke_since = 0;
}

/*
 * Waiting. Spin first (one task per domain at a time), polling the ports ourselves so the
 * reply is processed in this thread; then block on the task's condvar and let the listener
 * threads make progress. COR_SPIN_US sets the budget, spent spinning or, while another task
 * spins, yielding to it.
 */
typedef bool (*pred_fn)(void *arg);

/* A spinner that found nothing for this long yields its core now and then: with more
 * runnable threads than cores (two domains and their tasks on 2 cores), the thread whose
 * work we wait for may be queued behind us, and the scheduler would let us spin a whole
 * time slice first. Short enough to matter, long enough to stay off the latency path. */
#define SPIN_IDLE_YIELD_NS 10000

/* How a spinner that found nothing lets other threads run: it yields, which puts it behind
 * the threads queued on its core (tasks that wait for each other, another domain's). But a
 * computing thread picked after a yield keeps the core for its whole slice (milliseconds:
 * the scheduler runs a picked thread to parity), and a domain whose spinner waits that long
 * answers nobody meanwhile: its listeners are parked for the spinner. So once a yield came
 * back that late, the thread sleeps instead for a while (its wake-up preempts the computing
 * thread), and tries a yield again after LATE_YIELD_MODE_NS. The sleep is a microsecond,
 * which on a virtual machine ends before the kernel switches away (the core stays ours),
 * unless more threads are runnable than there are CPUs (cor_cpus_busy): then it is
 * BUSY_NAP_NS, long enough that the core does go to another thread. Spinners of several
 * domains that each kept their core would otherwise wait out one another's spins: 4 domains
 * on 2 cores relaying a message took 2-4 ms a hop with the microsecond, ~50 us with the nap. */
#define LATE_YIELD_NS 200000
#define LATE_YIELD_MODE_NS 100000000
#define BUSY_NAP_NS 20000
static __thread uint64_t pause_until;
static __thread bool slack_set;

static void idle_pause(uint64_t now)
{
    if (now < pause_until) {
        if (!slack_set) { /* or the microsecond would be the default 50 us timer slack */
            slack_set = true;
            prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        }
        struct timespec ts = {0, cor_cpus_busy() ? BUSY_NAP_NS : 1000};
        nanosleep(&ts, NULL);
        if (cor__now_ns() - now > LATE_YIELD_NS) pause_until = now + LATE_YIELD_MODE_NS;
        return;
    }
    sched_yield();
    if (cor__now_ns() - now > LATE_YIELD_NS) pause_until = now + LATE_YIELD_MODE_NS;
}

/*
 * A loop of tests (cor_test, or a library's own test reporting through cor_polled) is a
 * spinner the core does not see: with more such loops than CPUs they held the CPUs for whole
 * time slices while the threads they wait for (other tasks, the listeners, a library's
 * service) queued behind them (3 domains x 4 tasks testing a DSM barrier on 2 cores: 24-120
 * ms an episode against ~50 us waiting), as MPI and OpenSHMEM programs that test in a loop
 * on an oversubscribed node do unless told to yield when idle. So a thread whose tests have
 * found nothing for POLL_FREE_NS in a row yields its CPU. A yield that came back later than
 * POLL_CROWDED_NS let another thread run: the CPUs are crowded, and the thread yields at each
 * further miss (as dsm__shm_wait's polling does) until a yield comes back at once (nobody
 * else wanted the CPU: POLL_FREE_NS of free looks again). A loop with the CPUs to itself so
 * yields once per 10 us, a system call; among a dozen loops on 2 cores each hands its CPU on
 * after one look (yielding every 2-10 us instead made an episode 1.3-25x the wait's; naps of
 * 5-20 us 8-450x, each loop noticing the end a nap late). Misses further apart than
 * POLL_LOOP_GAP_NS are no loop (a task that computes between its tests): a new count.
 */
#define POLL_FREE_NS 10000
#define POLL_CROWDED_NS 4000
#define POLL_LOOP_GAP_NS 20000
static __thread uint64_t miss_since, miss_last; /* the thread's misses in a row: 0, none */
static __thread bool crowded;                   /* its last yield let another thread run */

COR_API void cor_polled(int found)
{
    if (found) {
        miss_since = 0;
        return;
    }
    uint64_t now = cor__now_ns();
    if (!miss_since || now - miss_last > POLL_LOOP_GAP_NS) miss_since = now;
    miss_last = now;
    if (!crowded && now - miss_since < POLL_FREE_NS) return;
    sched_yield();
    uint64_t after = cor__now_ns();
    crowded = after - now > POLL_CROWDED_NS;
    miss_since = miss_last = after;
}

/* Polls every port until done(arg) or the spin budget from `start` is spent; `now`: the
 * clock at the call. Returns the clock's last reading. */
static uint64_t spin(pred_fn done, void *arg, uint64_t start, uint64_t now, long spin_ns)
{
    unsigned n = 0, busy = 0, idle = 0;
    uint64_t idle_since = now;
    cor__wakes_defer(true);
    while (!done(arg)) {
        if (cor__progress_all() > 0) { /* more may be ready: drain before handing over */
            idle_since = 0;
            idle = 0;
            if ((++busy & 63) == 0) cor__wakes_flush();
            continue;
        }
        if (++idle >= WAKE_IDLE_POLLS) cor__wakes_flush();
        if (woke_tasks >= WOKE_BATCH) {
            woke_tasks = 0; /* let the tasks whose requests we completed run now */
            sched_yield();
        } else if ((++n & 63) == 0) {
            /* The clock only every 64 idle polls: a read costs 20+ ns on a virtual machine,
             * more than an idle poll of the shm route, and read at each poll it slowed the
             * detection of the next message. */
            now = cor__now_ns();
            atomic_store_explicit(&g.spin_seen, now, memory_order_relaxed);
            if (woke_tasks && !woke_since) woke_since = now;
            if (woke_tasks && now - woke_since >= WOKE_WAIT_NS) {
                woke_tasks = 0;
                sched_yield();
                continue;
            }
            if (now - start > (uint64_t)spin_ns) break;
            if (!idle_since) {
                idle_since = now;
            } else if (now - idle_since > SPIN_IDLE_YIELD_NS) {
                idle_since = now;
                idle_pause(now);
            }
        }
    }
    cor__wakes_defer(false);
    return now;
}

/* The polling part of a wait: spins (one task per domain at a time; the others yield to it)
 * for at most spin_ns. Returns whether done(arg) came true. */
static bool poll_phase(pred_fn done, void *arg, long spin_ns)
{
    /* One clock reading serves the start, the spinner's first sign of life and, when the
     * spin is short, its end (the listeners' linger): a wait read it three times. */
    uint64_t start = cor__now_ns(), now = start;
    while (g.nroutes > 0 && spin_ns > 0) {
        if (atomic_fetch_add(&g.spinners, 1) != 0) {
            /* Another task polls the ports and completes our requests too: stay runnable
             * and hand the core over, which costs far less than a sleep and a wake-up. But
             * only a few at a time (COR_YIELDERS): dozens of waiters yielding to each other
             * starve the spinner; the rest sleep and are woken in batches (defer_wake). */
            atomic_fetch_sub(&g.spinners, 1);
            if (atomic_fetch_add(&g.yielders, 1) >= g.yielders_max) {
                atomic_fetch_sub(&g.yielders, 1);
                break;
            }
            sched_yield();
            atomic_fetch_sub(&g.yielders, 1);
            if (done(arg)) return true;
            if ((now = cor__now_ns()) - start > (uint64_t)spin_ns) break;
            continue;
        }
        atomic_store_explicit(&g.spin_seen, now, memory_order_relaxed);
        now = spin(done, arg, start, now, spin_ns);
        bool ok = done(arg);
        /* A spinner that succeeded will likely spin again soon: the listeners linger off the
         * sockets a while instead of being woken for nothing. One that gives up is about to
         * sleep and needs them at once. A listener polling in a hook (cor_poll_until) is no
         * such task: it goes back to the ports itself, and must not park the listeners. */
        if (!cor__listener_thread)
            atomic_store_explicit(&g.last_spin_end, ok ? now : 0, memory_order_release);
        if (atomic_fetch_sub(&g.spinners, 1) == 1 && !ok) cor__listeners_resume();
        return ok;
    }
    return false;
}

/* `foreign`: some awaited request belongs to another task, whose completion signals that
 * task rather than us, so we look again every millisecond. */
/* Waits until done(arg). `sleeper`: whose condvar to block on (NULL: the caller's task);
 * `deadline` (0: none): done(arg) turns true by then, so blocking stops there. */
static void wait_until(pred_fn done, void *arg, bool foreign, struct cor_task *sleeper,
                       long spin_ns, uint64_t deadline)
{
    if (done(arg) || poll_phase(done, arg, spin_ns)) return;
    struct cor_task *t = sleeper ? sleeper : cor__task_self();
    COR_LOCK(&t->lock);
    atomic_fetch_add(&t->sleepers, 1); /* before done() looks: see cor__req_complete */
    atomic_thread_fence(memory_order_seq_cst);
    atomic_fetch_add(&g.blocked, 1);
    /* Listeners parked for a spinner that has since left would otherwise sleep out their
     * linger while we wait on them. */
    if (atomic_load(&g.spinners) == 0) cor__listeners_resume();
    while (!done(arg)) {
        long ns = foreign ? 1000000 : 100000000;
        uint64_t now = deadline ? cor__now_ns() : 0;
        if (deadline && now >= deadline)
            ns = 0; /* (deadline - now would wrap) */
        else if (deadline && deadline - now < (uint64_t)ns)
            ns = (long)(deadline - now);
        if (ns > 0) cor__cond_wait_ns(&t->cond, &t->lock, ns);
    }
    atomic_fetch_sub(&g.blocked, 1);
    atomic_fetch_sub(&t->sleepers, 1);
    COR_UNLOCK(&t->lock);
}

static bool one_done(void *arg)
{
    return req_done(arg);
}

void cor__req_block(struct cor_req *r)
{
    /* A reserved task has no thread: whoever waits for its request sleeps on its condvar. */
    bool shared = r->owner->reserved; /* (a thread waiting for it needs no task of its own) */
    wait_until(one_done, r, !shared && r->owner != cor__task_self(), shared ? r->owner : NULL,
               g.spin_ns, 0);
}

static bool any_foreign(size_t n, const cor_req_t *reqs)
{
    struct cor_task *me = cor__task_self();
    for (size_t i = 0; i < n; i++) {
        struct cor_req *r = cor__req_lookup(reqs[i]);
        if (r && r->owner != me) return true;
    }
    return false;
}

/* Hands a completed request's results to the caller and frees it. */
static int finish(cor_req_t *h, struct cor_req *r, cor_status_t *status)
{
    int err = r->status.error;
    if (status) *status = r->status;
    if (r->out_ptr) {
        bool keep = err == COR_OK || err == COR_ETRUNC;
        *r->out_ptr = keep ? r->buf : NULL;
        if (!keep && r->buf) cor_releaseBuffer(r->buf); /* a core buffer nobody will get */
    }
    cor__req_free(r);
    *h = COR_REQ_NULL;
    return err;
}

COR_API int cor_test(cor_req_t *req, int *done, cor_status_t *status)
{
    if (!req || !done) return COR_EINVAL;
    struct cor_req *r = cor__req_lookup(*req);
    if (!r) return COR_EINVAL;
    if (!req_done(r)) {
        cor__progress_all();
        if (!req_done(r)) {
            cor_polled(0);
            *done = 0;
            return COR_OK;
        }
    }
    cor_polled(1);
    *done = 1;
    return finish(req, r, status);
}

COR_API int cor_progress(void)
{
    int err = cor__check_init();
    if (err) return err;
    if (atomic_load_explicit(&g.spinners, memory_order_relaxed) > 0) return 0;
    return cor__progress_all();
}

struct poll_stop {
    int (*stop)(void *arg);
    void *arg;
    bool stopped;
};

/* A listener polling in an arrival hook gives way to a task that starts to wait (a yielder):
 * that one polls for itself, the listener parks. */
static bool poll_stopped(void *arg)
{
    struct poll_stop *p = arg;
    if (cor__listener_thread && atomic_load_explicit(&g.yielders, memory_order_relaxed) > 0)
        return true;
    return p->stopped = p->stop(p->arg) != 0;
}

COR_API int cor_poll_until(int (*stop)(void *arg), void *stop_arg, long spin_us)
{
    int err = cor__check_init();
    if (err) return err;
    if (!stop) return COR_EINVAL;
    struct poll_stop p = {stop, stop_arg, false};
    if (!poll_stopped(&p)) poll_phase(poll_stopped, &p, spin_us < 0 ? g.spin_ns : spin_us * 1000);
    return p.stopped;
}

COR_API int cor_peek(cor_req_t req, int *done)
{
    if (!done) return COR_EINVAL;
    struct cor_req *r = cor__req_lookup(req);
    if (!r) return COR_EINVAL;
    *done = req_done(r);
    return COR_OK;
}

COR_API int cor_wait(cor_req_t *req, cor_status_t *status)
{
    if (!req) return COR_EINVAL;
    struct cor_req *r = cor__req_lookup(*req);
    if (!r) return COR_EINVAL;
    cor__req_block(r);
    return finish(req, r, status);
}

struct timed {
    struct cor_req *r;
    uint64_t deadline;
    int (*stop)(void *arg);
    void *stop_arg;
    unsigned looks;
};

/* Called at every turn of a spin: the clock is read every 8th time only (a clock read costs
 * more than a whole turn on some virtual machines). A blocked wait passes the deadline to its
 * timed sleeps itself, so a late look costs a few immediate wake-ups at most. */
static bool timed_out_or_done(void *arg)
{
    struct timed *t = arg;
    if (req_done(t->r)) return true;
    if ((t->looks++ & 7) == 0 && cor__now_ns() >= t->deadline) return true;
    return t->stop && t->stop(t->stop_arg);
}

COR_API int cor_wait_timeout(cor_req_t *req, long spin_us, long timeout_us, int (*stop)(void *arg),
                             void *stop_arg, int *done, cor_status_t *status)
{
    if (!req || !done || timeout_us < 0) return COR_EINVAL;
    struct cor_req *r = cor__req_lookup(*req);
    if (!r) return COR_EINVAL;
    struct timed t = {r, cor__now_ns() + (uint64_t)timeout_us * 1000u, stop, stop_arg};
    bool shared = r->owner->reserved;
    wait_until(timed_out_or_done, &t, !shared && r->owner != cor__task_self(),
               shared ? r->owner : NULL, spin_us < 0 ? g.spin_ns : spin_us * 1000, t.deadline);
    if (!req_done(r)) {
        *done = 0;
        return COR_OK;
    }
    *done = 1;
    return finish(req, r, status);
}

struct many {
    size_t n;
    cor_req_t *reqs;
    bool all;
    size_t found;
};

static bool many_done(void *arg)
{
    struct many *m = arg;
    size_t live = 0, done = 0;
    for (size_t i = 0; i < m->n; i++) {
        struct cor_req *r = cor__req_lookup(m->reqs[i]);
        if (!r) continue;
        live++;
        if (req_done(r)) {
            done++;
            if (!m->all) {
                m->found = i;
                return true;
            }
        }
    }
    return m->all ? done == live : live == 0;
}

COR_API int cor_waitany(size_t n, cor_req_t *reqs, size_t *index, cor_status_t *status)
{
    if ((!reqs && n) || !index) return COR_EINVAL;
    struct many m = {n, reqs, false, (size_t)-1};
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        if (reqs[i] == COR_REQ_NULL) continue;
        if (!cor__req_lookup(reqs[i])) return COR_EINVAL;
        live++;
    }
    if (!live) {
        *index = (size_t)-1;
        return COR_EINVAL;
    }
    wait_until(many_done, &m, any_foreign(n, reqs), NULL, g.spin_ns, 0);
    *index = m.found;
    return finish(&reqs[m.found], cor__req_lookup(reqs[m.found]), status);
}

COR_API int cor_waitall(size_t n, cor_req_t *reqs, cor_status_t *statuses)
{
    if (!reqs && n) return COR_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (reqs[i] != COR_REQ_NULL && !cor__req_lookup(reqs[i])) return COR_EINVAL;
    struct many m = {n, reqs, true, 0};
    wait_until(many_done, &m, any_foreign(n, reqs), NULL, g.spin_ns, 0);
    int first = COR_OK;
    for (size_t i = 0; i < n; i++) {
        struct cor_req *r = cor__req_lookup(reqs[i]);
        if (!r) continue;
        int err = finish(&reqs[i], r, statuses ? &statuses[i] : NULL);
        if (err && first == COR_OK) first = err;
    }
    return first;
}

COR_API int cor_cancel(cor_req_t *req)
{
    if (!req) return COR_EINVAL;
    struct cor_req *r = cor__req_lookup(*req);
    if (!r) return COR_EINVAL;
    if (r->kind != REQ_RECV) return COR_EINVAL;
    struct cor_task *t = r->owner;
    COR_LOCK(&t->lock);
    bool removed = atomic_load(&r->state) == RS_PENDING && cor__posted_remove(t, r);
    COR_UNLOCK(&t->lock);
    if (removed) cor__req_complete(r, COR_ECANCELED);
    return COR_OK;
}

/* Fails what waits on a dead domain. No request is recycled under the scan (`scanning`, see
 * cor__req_new); completing takes only task locks, which are never held while req_lock is
 * wanted. */
void cor__req_fail_peer(unsigned rank, int err)
{
    COR_LOCK(&req_lock);
    atomic_fetch_add(&scanning, 1);
    for (uint32_t i = 0; i < nslots; i++) {
        struct cor_req *r = &atomic_load(&chunks[i / CHUNK])[i % CHUNK];
        if (!atomic_load(&r->handle) || req_done(r) || r->remote_rank != (int)rank) continue;
        /* A send whose data the route may still hold (eager, or rendezvous data under way)
         * is completed by the route's send_done, never before: the caller could free the
         * buffer while a retransmission reads it. */
        if (r->kind == REQ_SEND && (r->eager || atomic_load(&r->state) != RS_PENDING)) continue;
        if (r->kind == REQ_RECV) {
            /* Posted: take it off the list. Matched: only a rendezvous that waits for data
             * is ours to fail; an eager match is being completed by the data path. */
            struct cor_task *t = r->owner;
            COR_LOCK(&t->lock);
            bool ours = atomic_load(&r->state) == RS_PENDING ? cor__posted_remove(t, r)
                                                             : atomic_load(&r->awaiting_data);
            COR_UNLOCK(&t->lock);
            if (!ours) continue;
        }
        complete(r, err, true);
    }
    atomic_fetch_sub(&scanning, 1);
    COR_UNLOCK(&req_lock);
}
