/*
 * Locks and barriers, the client side: a task's record of the locks it holds, acquisition by
 * message or in shared memory, and the barriers' episodes (dissemination rounds over the
 * routes, carried on by whichever waiting task drives, or a meeting in the barrier's file).
 * The locks' queues at their home are dsm_lock.c's, served by dsm_service.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dsm_runtime.h"

/* ---- Locks ----------------------------------------------------------------------------- */

COR_API int cor_dsm_lock_open(const char *name, cor_idp_t *lock)
{
    if (lock) *lock = COR_IDP_NULL; /* what a failure leaves (dsm.h) */
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__name_ok(name) || !lock) return COR_EINVAL;
    struct dsm_req r = {
        .op = DSM_OP_LOCK_OPEN, .id = dsm__next_id(), .name = name, .name_len = strlen(name)};
    struct cor_dsm_op o;
    dsm__op_init(&o, &r);
    o.idp_out = lock;
    return dsm__call(dsm__dir_home(name), &r, &o, 0);
}

/*
 * Each task keeps a record of the locks it holds or is acquiring, so that a release needs
 * no reply: misuse (a release without holding) is answered here, and the release travels as
 * a one-way message that the home applies before the task's next request to it (one FIFO
 * channel per task and home). A task holds at most DSM_LOCKS_HELD locks at once.
 */
#define DSM_LOCKS_HELD 64

static __thread struct {
    cor_idp_t lock;
    bool granted;
    bool kept;    /* its grant is kept by the domain (below) */
    uint32_t gen; /* the grant's number */
} tls_held[DSM_LOCKS_HELD];
static __thread int tls_nheld;

static int held_find(cor_idp_t lock)
{
    for (int i = 0; i < tls_nheld; i++)
        if (tls_held[i].lock == lock) return i;
    return -1;
}

static void held_drop(int i)
{
    tls_held[i] = tls_held[--tls_nheld];
}

/*
 * Locks this domain keeps. The home grants a lock *kept* when nobody else waits for it: after
 * the release it stays here, free, and a task of this domain takes it again with no message
 * (an uncontended lock costs a round trip the first time only). When another task asks the
 * home for it (of another domain, or of ours while one of ours holds it), the home recalls
 * the grant: the service sends the release at once if no task holds it, or the holder's
 * unlock does; tasks that ask from then on ask the home. A recall may come before the task
 * that was granted the lock has settled its acquisition (the grant goes to the task, the
 * recall to the service): it is noted (`early`) and that grant is then an ordinary one.
 * Under kept_mu; both lists stay short (one entry per lock kept, one per recall overtaking
 * its grant).
 */
struct kept {
    struct kept *next;
    cor_idp_t lock;
    uint32_t gen;  /* the grant kept */
    bool held;     /* a task of ours holds it */
    bool recalled; /* the holder's unlock sends it home */
};

#define KEPT_BUCKETS 64
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept_tab[KEPT_BUCKETS], *kept_early;
static atomic_uint_fast64_t kept_retakes;

static struct kept **kept_slot(struct kept **head, cor_idp_t lock)
{
    struct kept **p = head;
    while (*p && (*p)->lock != lock)
        p = &(*p)->next;
    return p;
}

static struct kept **kept_bucket(cor_idp_t lock)
{
    return &kept_tab[(lock ^ lock >> 17) % KEPT_BUCKETS];
}

static void kept_unlink(struct kept **p)
{
    struct kept *e = *p;
    *p = e->next;
    free(e);
}

enum { KEPT_ASK, KEPT_DONE };

/* An acquisition by a task of ours of a lock homed at `home`: taken here if we keep it free
 * (KEPT_DONE, o->result COR_OK), refused here if it is a try and one of ours holds it
 * (KEPT_DONE, COR_EBUSY), KEPT_ASK: the home decides. */
static int kept_take(struct cor_dsm_op *o, cor_idp_t lock, int home, bool try)
{
    int how = KEPT_ASK;
    dsm__lock_or_die(&kept_mu);
    struct kept **p = kept_slot(kept_bucket(lock), lock);
    struct kept *e = *p;
    if (e && !e->held) { /* free (a recall of a free lock sent it home at once) */
        if (atomic_load(&dsm__rt.dead[home])) {
            kept_unlink(p);
            o->result = COR_EPEERDEAD;
        } else {
            e->held = true;
            o->result = COR_OK;
            o->grant = (uint64_t)e->gen << 1 | 1u;
            atomic_fetch_add(&kept_retakes, 1);
        }
        how = KEPT_DONE;
    } else if (e && try) {
        o->result = COR_EBUSY;
        how = KEPT_DONE;
    }
    dsm__unlock_or_die(&kept_mu);
    return how;
}

/* The task's acquisition of `lock` by message was granted as kept (grant number gen): keeps
 * it, unless its recall came already. Whether it is kept. */
static bool kept_granted(cor_idp_t lock, uint32_t gen)
{
    bool keep = true;
    dsm__lock_or_die(&kept_mu);
    for (struct kept **p = &kept_early; *p;) {
        if ((*p)->lock != lock) {
            p = &(*p)->next;
            continue;
        }
        if ((*p)->gen == gen) keep = false;
        kept_unlink(p); /* an older grant's is stale: its release went home before this grant */
    }
    struct kept **p = kept_slot(kept_bucket(lock), lock);
    if (keep && !*p) *p = calloc(1, sizeof **p);
    if (!*p) {
        keep = false; /* without memory: an ordinary grant (its release goes home) */
    } else if (keep) {
        **p = (struct kept){(*p)->next, lock, gen, true, false};
    }
    dsm__unlock_or_die(&kept_mu);
    return keep;
}

/* The task's unlock of kept grant gen: COR_OK if the lock stays here (free), else COR_EAGAIN
 * (recalled, or not kept any more: the release goes home). */
static int kept_release(cor_idp_t lock, uint32_t gen, int home)
{
    int err = COR_EAGAIN;
    dsm__lock_or_die(&kept_mu);
    struct kept **p = kept_slot(kept_bucket(lock), lock);
    if (*p && (*p)->gen == gen) {
        if (!(*p)->recalled && !atomic_load(&dsm__rt.dead[home])) {
            (*p)->held = false;
            err = COR_OK;
        } else {
            kept_unlink(p);
        }
    }
    dsm__unlock_or_die(&kept_mu);
    return err;
}

void dsm__lock_recalled(cor_idp_t lock, uint32_t gen)
{
    bool send = false;
    dsm__lock_or_die(&kept_mu);
    struct kept **p = kept_slot(kept_bucket(lock), lock);
    if (*p && (*p)->gen == gen) {
        if ((*p)->held) {
            (*p)->recalled = true;
        } else {
            kept_unlink(p);
            send = true;
        }
    } else {
        struct kept *e = malloc(sizeof *e);
        if (!e) abort(); /* the lock would stay kept here for good: no way to recover */
        *e = (struct kept){kept_early, lock, gen, false, true};
        kept_early = e;
    }
    dsm__unlock_or_die(&kept_mu);
    if (send) dsm__lock_msg((int)cor_idp_domain(lock), DSM_OP_LOCK_REL, lock, gen);
}

uint64_t dsm__lock_retakes(void)
{
    return atomic_load(&kept_retakes);
}

/* cor_dsm_finalize (after its barrier: nobody asks for a lock any more). */
void dsm__locks_kept_clear(void)
{
    dsm__lock_or_die(&kept_mu);
    for (int k = 0; k < KEPT_BUCKETS; k++)
        while (kept_tab[k])
            kept_unlink(&kept_tab[k]);
    while (kept_early)
        kept_unlink(&kept_early);
    dsm__unlock_or_die(&kept_mu);
}

/* An acquisition ended: the lock is held (also when its last holder died), or not at all. */
void dsm__held_settle(struct cor_dsm_op *o)
{
    if (o->lock == COR_IDP_NULL) return;
    int i = held_find(o->lock);
    if (i >= 0) {
        if (o->result == COR_OK || o->result == COR_DSM_EOWNERDEAD) {
            tls_held[i].granted = true;
            tls_held[i].gen = (uint32_t)(o->grant >> 1);
            tls_held[i].kept = (o->grant & 1) && !o->lk &&
                               (o->kept_local || kept_granted(o->lock, tls_held[i].gen));
        } else {
            held_drop(i);
        }
    }
    o->lock = COR_IDP_NULL;
}

static int lock_op(struct cor_dsm_op *o, cor_idp_t lock, uint8_t op)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__our_idp(lock)) return COR_EINVAL;
    if (held_find(lock) >= 0) return COR_ESTATE; /* held, or being acquired */
    if (tls_nheld == DSM_LOCKS_HELD) return COR_ELIMIT;
    struct dsm_req r = {.op = op, .id = dsm__next_id(), .obj = lock};
    dsm__op_init(o, &r);
    int home = (int)cor_idp_domain(lock);
    if (dsm__rt.all_here) { /* a ticket in shared memory (dsm_shm.c) instead of a request */
        if (atomic_load(&dsm__rt.dead[home])) return COR_EPEERDEAD;
        o->lk = dsm_shm_lock_view(lock);
        if (!o->lk) return COR_ENOMEM; /* never requests: the others' tickets would not see them */
        o->lock_home = home;
        if (op == DSM_OP_LOCK_TRY) {
            o->result = dsm_shm_lock_try(o->lk, dsm__rt.rank, &o->ticket);
            if (o->result == COR_OK) dsm__lock_turn(o); /* holds at once; was its holder dead? */
            o->done = true;
        } else {
            o->ticket = dsm_shm_lock_ticket(o->lk, dsm__rt.rank);
        }
    } else if (kept_take(o, lock, home, op == DSM_OP_LOCK_TRY) == KEPT_DONE) {
        o->kept_local = true;
        o->done = true;
    } else {
        int err = dsm__op_start(o, home, &r, 0);
        if (err) return err;
    }
    tls_held[tls_nheld].lock = lock;
    tls_held[tls_nheld++].granted = false;
    o->lock = lock;
    return COR_OK;
}

COR_API int cor_dsm_lock(cor_idp_t lock)
{
    struct cor_dsm_op o;
    return dsm__run_blocking(&o, lock_op(&o, lock, DSM_OP_LOCK_ACQ));
}

COR_API int cor_dsm_lockI(cor_idp_t lock, cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, lock_op(o, lock, DSM_OP_LOCK_ACQ), req);
}

COR_API int cor_dsm_trylock(cor_idp_t lock)
{
    struct cor_dsm_op o;
    return dsm__run_blocking(&o, lock_op(&o, lock, DSM_OP_LOCK_TRY));
}

COR_API int cor_dsm_unlock(cor_idp_t lock)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__our_idp(lock)) return COR_EINVAL;
    int i = held_find(lock);
    if (i < 0 || !tls_held[i].granted) return COR_ESTATE;
    int home = (int)cor_idp_domain(lock);
    if (dsm__rt.all_here) {
        struct dsm_shm_lock *k = dsm_shm_lock_view(lock); /* mapped when it was acquired */
        if (!k) return COR_ENOMEM;
        held_drop(i);
        dsm_shm_lock_release(k);
        return atomic_load(&dsm__rt.dead[home]) ? COR_EPEERDEAD : COR_OK;
    }
    uint32_t gen = tls_held[i].gen;
    bool kept = tls_held[i].kept;
    held_drop(i);
    if (kept && kept_release(lock, gen, home) == COR_OK) return COR_OK; /* stays here, free */
    dsm__adds_flush_home(home);
    cor_idp_t svc;
    int err = dsm__svc_of(home, &svc);
    if (err) return err;
    struct dsm_req r = {.op = DSM_OP_LOCK_REL, .id = dsm__next_id(), .obj = lock, .offset = gen};
    unsigned char buf[DSM_REQ_HDR];
    size_t n = dsm_req_encode(buf, sizeof buf, &r);
    cor_req_t sreq;
    err = cor_sendI_typed(svc, dsm__rt.ctx, (int)r.id, COR_BYTE, buf, n, &sreq);
    if (!err) err = cor_wait(&sreq, NULL);
    if (!err) dsm__count_requests(home, 1);
    return err;
}

/* ---- Barriers --------------------------------------------------------------------------- */

/* Under dsm__rt.lock. */
static struct cor_dsm_barrier *bar_find(uint64_t id, bool make)
{
    for (struct cor_dsm_barrier *b = dsm__rt.bars; b; b = b->next)
        if (b->id == id) return b;
    if (!make) return NULL;
    struct cor_dsm_barrier *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->id = id;
    b->next = dsm__rt.bars;
    dsm__rt.bars = b;
    return b;
}

void dsm__bar_free(struct cor_dsm_barrier *b)
{
    dsm_shm_bar_leave(b->sb);
    free(b->members);
    free(b);
}

/* The creation number of barrier name `id` here (1, 2, ...), or 0 without memory; dsm__rt.lock. */
unsigned dsm__bar_gen_next(uint64_t id)
{
    struct dsm__bar_gen *g = dsm__rt.bar_gens;
    while (g && g->id != id)
        g = g->next;
    if (!g && (g = calloc(1, sizeof *g))) {
        g->id = id;
        g->next = dsm__rt.bar_gens;
        dsm__rt.bar_gens = g;
    }
    return g ? ++g->gen : 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

COR_API int cor_dsm_barrier_create(const char *name, cor_idp_t ldom, int local_tasks,
                                   cor_dsm_barrier_t *bar)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__name_ok(name) || local_tasks < 1 || !bar) return COR_EINVAL;
    int n = 0, *members = malloc((size_t)dsm__rt.size * sizeof *members);
    if (!members) return COR_ENOMEM;
    int err = COR_OK;
    if (ldom == COR_IDP_NULL) {
        for (int r = 0; r < dsm__rt.size; r++)
            members[n++] = r;
    } else {
        int size = 0;
        err = cor_ldomain_size(ldom, &size);
        bool *seen = calloc((size_t)dsm__rt.size, sizeof *seen);
        if (!err && !seen) err = COR_ENOMEM;
        for (int i = 0; !err && i < size; i++) {
            cor_idp_t m;
            err = cor_ldomain_member(ldom, i, &m);
            if (err) break;
            unsigned d = cor_idp_domain(m);
            if (cor_idp_macro(m) != dsm__rt.session || d >= (unsigned)dsm__rt.size) continue;
            if (!seen[d]) members[n++] = (int)d;
            seen[d] = true;
        }
        free(seen);
        qsort(members, (size_t)n, sizeof *members, cmp_int);
    }
    int pos = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == dsm__rt.rank) pos = i;
    if (!err && pos < 0) err = COR_EINVAL;
    if (err) {
        free(members);
        return err;
    }
    uint64_t id = dsm_hash(name, strlen(name));
    dsm__lock_or_die(&dsm__rt.lock);
    struct cor_dsm_barrier *b = bar_find(id, true);
    if (!b)
        err = COR_ENOMEM;
    else if (b->created)
        err = COR_EEXIST;
    if (!err) {
        b->created = true;
        b->members = members;
        dsm_bar_setup(&b->st, n, pos, local_tasks);
        unsigned gen = dsm__bar_gen_next(id);
        bool members_local = true; /* the same answer in every member (cor_domain_local) */
        for (int i = 0; i < n; i++)
            members_local = members_local && dsm__rt.local[members[i]];
        if (gen && dsm__rt.shm && n > 1 && members_local)
            b->sb = dsm_shm_bar_join(dsm__rt.session, id, gen);
        for (int i = 0; i < n; i++)
            if (atomic_load(&dsm__rt.dead[members[i]])) b->err = COR_EPEERDEAD;
        b->handle = dsm_handle_put(DSM_H_BARRIER, b);
        if (!b->handle) {
            b->created = false;
            b->members = NULL;
            dsm_shm_bar_leave(b->sb);
            b->sb = NULL;
            err = COR_ENOMEM;
        }
        *bar = DSM__AS_HANDLE(cor_dsm_barrier_t, b->handle);
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    if (err) free(members);
    return err;
}

/* Sends barrier messages as the barrier mailbox's task, from whichever thread calls. */

/* Under dsm__rt.lock: turns the messages' member positions into domain ranks, so they can be sent
 * after the lock is released without touching b (once an episode completed, a task of this
 * domain may destroy the barrier). */
void dsm__bar_resolve(const struct cor_dsm_barrier *b, struct dsm_bar_msg *m, int n)
{
    for (int i = 0; i < n; i++)
        m[i].to = b->members[m[i].to];
}

/* Wakes the barrier waiters; dsm__rt.lock held. A driver polling the routes sees bar_events move.
 */
void dsm__bar_wake(void)
{
    atomic_fetch_add(&dsm__rt.bar_events, 1);
    pthread_cond_broadcast(&dsm__rt.bar_cv);
}

/* Whether episode `epoch` of b ended or failed; dsm__rt.lock held. */
static bool bar_over(struct cor_dsm_barrier *b, uint64_t epoch)
{
    if (b->st.epoch != epoch || b->err) return true;
    for (int i = 0; i < b->st.n; i++)
        if (atomic_load(&dsm__rt.dead[b->members[i]])) {
            b->err = COR_EPEERDEAD;
            dsm__bar_wake();
            return true;
        }
    return false;
}

/* Counts a message received on the barrier mailbox toward its barrier and sends what that
 * barrier's next rounds need. A malformed one is dropped and counted. */
static void bar_take(const void *buf, size_t len)
{
    struct dsm_req r;
    if (dsm_req_decode(buf, len, &r) || r.op != DSM_OP_BARRIER) {
        atomic_fetch_add(&dsm__rt.dropped, 1);
        return;
    }
    struct dsm_bar_msg msgs[DSM_MAX_ROUNDS];
    int nmsg = 0;
    bool completed = false;
    dsm__lock_or_die(&dsm__rt.lock);
    struct cor_dsm_barrier *b = bar_find(r.obj, true);
    if (b && dsm_bar_recv(&b->st, r.offset) == COR_OK && b->created && !b->err) {
        nmsg = dsm_bar_advance(&b->st, msgs, &completed);
        dsm__bar_resolve(b, msgs, nmsg);
        if (completed) dsm__bar_wake();
    } else if (!b || b->st.n > 0) {
        atomic_fetch_add(&dsm__rt.dropped, 1);
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    if (nmsg) dsm__bar_send(r.obj, msgs, nmsg);
}

struct bar_meeting {
    struct cor_dsm_barrier *b;
    uint32_t gen;
    int err;
};

/* Whether a domain waiting in a barrier's file may stop: the episode ended, a member died,
 * or we stop. Reads no state under dsm__rt.lock (b stays while a task is inside). */
static int bar_met(void *arg)
{
    struct bar_meeting *m = arg;
    if (dsm_shm_bar_passed(m->b->sb, m->gen)) return 1;
    if (atomic_load(&dsm__rt.stopping)) m->err = COR_ESTATE;
    for (int i = 0; i < m->b->st.n && !m->err; i++)
        if (atomic_load(&dsm__rt.dead[m->b->members[i]])) m->err = COR_EPEERDEAD;
    return m->err != COR_OK;
}

static void bar_nap(void *arg)
{
    struct bar_meeting *m = arg;
    dsm_shm_bar_sleep(m->b->sb, m->gen);
}

struct bar_watch {
    struct cor_dsm_barrier *b;
    uint64_t epoch, events;
    bool over; /* sticky: the hook and the driver's loop both ask */
};

/* Called at every turn of a polling wait, and with the mailbox task's lock held while it
 * blocks: so no lock here (a send completing as the mailbox's task takes that lock under the
 * core's send lock, which the cached protocol takes under a copy's mutex, and dsm__rt.lock is held
 * while copies' mutexes are taken). Says only that something happened; bar_watch_over looks. */
static int bar_watch_stop(void *arg)
{
    struct bar_watch *w = arg;
    if (w->over || atomic_load(&dsm__rt.stopping)) return 1;
    if (atomic_load(&dsm__rt.bar_events) != w->events) return 1;
    for (int i = 0; i < w->b->st.n; i++)
        if (atomic_load(&dsm__rt.dead[w->b->members[i]])) return 1;
    return 0;
}

/* Whether the driver's turn is over; outside the core's waits, so dsm__rt.lock may be taken. */
static bool bar_watch_over(struct bar_watch *w)
{
    if (!bar_watch_stop(w)) return false;
    if (!w->over && !atomic_load(&dsm__rt.stopping)) {
        w->events = atomic_load(&dsm__rt.bar_events); /* before the look: no event is missed */
        dsm__lock_or_die(&dsm__rt.lock);
        w->over = bar_over(w->b, w->epoch);
        dsm__unlock_or_die(&dsm__rt.lock);
    }
    return w->over || atomic_load(&dsm__rt.stopping);
}

/* Holding the driver's role: posts the mailbox's one receive if none is. */
static int bar_post(void)
{
    if (dsm__rt.bar_rr != COR_REQ_NULL) return COR_OK;
    dsm__rt.bar_msg = NULL;
    dsm__lock_or_die(&dsm__rt.bar_out.mu);
    int err = cor_recvI_as(dsm__rt.bar_box, COR_ANY_SOURCE, dsm__rt.ctx, COR_ANY_TAG,
                           &dsm__rt.bar_msg, &dsm__rt.bar_rr);
    dsm__unlock_or_die(&dsm__rt.bar_out.mu);
    return err;
}

/* Holding the driver's role: the receive completed (rc): counts its message, frees it. */
static void bar_landed(int rc, const cor_status_t *st)
{
    if (rc == COR_OK && dsm__rt.bar_msg)
        bar_take(dsm__rt.bar_msg, st->count * cor_type_size(st->type));
    if (dsm__rt.bar_msg) cor_releaseBuffer(dsm__rt.bar_msg);
    dsm__rt.bar_msg = NULL;
}

/* The driver's turn: receives barrier messages (for any barrier) with the mailbox's one
 * receive, polling the routes itself like any waiting task, until episode `epoch` of b is
 * over or, if `end_ns` (CLOCK_MONOTONIC) is not 0, until then. The receive outlives the
 * turn: the next driver waits on it. */
static void bar_drive(struct cor_dsm_barrier *b, uint64_t epoch, uint64_t end_ns)
{
    struct bar_watch w = {b, epoch, atomic_load(&dsm__rt.bar_events) - 1, false};
    /* Polls only in the first slice: a long wait (a domain computing meanwhile) would else
     * poll again every WAIT_SLICE_US, and park the listeners for its poll each time. */
    long spin_us = dsm__rt.poll_us;
    while (!bar_watch_over(&w)) {
        long slice_us = DSM__WAIT_SLICE_US;
        if (end_ns) {
            uint64_t now = dsm__now_ns();
            if (now >= end_ns) break;
            if (end_ns - now < (uint64_t)slice_us * 1000)
                slice_us = (long)((end_ns - now) / 1000) + 1;
        }
        int err = bar_post();
        if (err) {
            dsm__lock_or_die(&dsm__rt.lock);
            if (!b->err) b->err = err;
            dsm__unlock_or_die(&dsm__rt.lock);
            return;
        }
        int done = 0;
        cor_status_t st;
        int rc =
            cor_wait_timeout(&dsm__rt.bar_rr, spin_us, slice_us, bar_watch_stop, &w, &done, &st);
        if (!done) {
            spin_us = 0;
            continue;
        }
        spin_us = dsm__rt.poll_us; /* the episode's next rounds follow soon */
        bar_landed(rc, &st);
    }
}

/* Holding the driver's role: takes every barrier message that came, without waiting. */
static void bar_take_ready(void)
{
    for (;;) {
        if (bar_post()) return; /* the service thread tries again at its next look */
        int done = 0;
        if (cor_peek(dsm__rt.bar_rr, &done) == COR_OK && !done) return;
        cor_status_t st;
        int rc = cor_test(&dsm__rt.bar_rr, &done, &st);
        if (!done) return;
        bar_landed(rc, &st);
    }
}

/*
 * Takes the barrier messages that came while no task drives, in the calling thread: the
 * mailbox's arrival hook (whatever thread polled them in), the service thread, a task testing
 * a non-blocking barrier. So a barrier moves on while every task of the domain computes (a
 * domain that entered with cor_dsm_barrier_waitI still answers the others' rounds), as
 * requests are served. A driver that holds the role takes them itself and pumps after its turn.
 * The waiters are woken only when a blocked waiter waits for the role (bar_take wakes them
 * when an episode ends): a loop of tests pumps at every test (dsm__bar_step), and each pump
 * woke every sleeper; then each message that did not end an episode still woke the napping
 * testers for nothing (2 a domain and episode on 3 domains).
 */
void dsm__bar_pump(void)
{
    while (atomic_load(&dsm__rt.bar_pending)) {
        dsm__lock_or_die(&dsm__rt.lock);
        bool mine = !dsm__rt.bar_driving && !atomic_load(&dsm__rt.stopping);
        if (mine) dsm__rt.bar_driving = true;
        dsm__unlock_or_die(&dsm__rt.lock);
        if (!mine) return;
        atomic_store(&dsm__rt.bar_pending, 0);
        bar_take_ready();
        dsm__lock_or_die(&dsm__rt.lock);
        dsm__rt.bar_driving = false;
        if (dsm__rt.bar_role_waiters) dsm__bar_wake();
        dsm__unlock_or_die(&dsm__rt.lock);
    }
}

/* The barrier mailbox's arrival hook. A thread holding one of our mutexes leaves the message
 * to the service thread (the pump takes dsm__rt.lock). */
void dsm__bar_on_arrival(void *arg, int flags)
{
    (void)arg;
    (void)flags;
    atomic_store(&dsm__rt.bar_pending, 1);
    if (dsm__tls_locks)
        dsm__svc_wake();
    else
        dsm__bar_pump();
}

/* The arrival: counts the task in, and if it is the domain's last, sends the first rounds or
 * arrives in the file. An error means the task is not inside. */
static int bar_enter(cor_dsm_barrier_t bar, struct dsm__bar_entry *e)
{
    if (!dsm__is_up()) return COR_ESTATE;
    struct dsm_bar_msg msgs[DSM_MAX_ROUNDS];
    int nmsg = 0;
    bool completed = false;
    dsm__lock_or_die(&dsm__rt.lock); /* the handle is looked up under it: no destroy in between */
    struct cor_dsm_barrier *b = dsm_handle_get(DSM_H_BARRIER, DSM__HANDLE(bar));
    if (!b) {
        dsm__unlock_or_die(&dsm__rt.lock);
        return COR_EINVAL;
    }
    *e = (struct dsm__bar_entry){.b = b, .epoch = b->st.epoch};
    int err = b->err;
    if (!err && dsm_bar_arrive(&b->st)) {
        if (b->shm)
            e->meet = true;
        else
            nmsg = dsm_bar_advance(&b->st, msgs, &completed);
    }
    dsm__bar_resolve(b, msgs, nmsg);
    uint64_t id = b->id;
    if (!err) b->inside++;
    if (completed) dsm__bar_wake();
    dsm__unlock_or_die(&dsm__rt.lock);
    if (err) return err;
    if (e->meet) /* b stays: destroy waits for b->inside */
        e->met = dsm_shm_bar_arrive(b->sb, b->st.n, &e->gen);
    else
        err = dsm__bar_send(id, msgs, nmsg);
    dsm__lock_or_die(&dsm__rt.lock);
    if (e->meet && e->met) {
        dsm_bar_done(&b->st);
        dsm__bar_wake();
    }
    if (err && !b->err) {
        b->err = err;
        dsm__bar_wake();
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    return COR_OK;
}

/* Waits for the episode's end (block), or looks once and moves it on (*done says whether it
 * ended); the episode's result once it did. */
int dsm__bar_step(struct dsm__bar_entry *e, bool block, int *done)
{
    struct cor_dsm_barrier *b = e->b;
    if (e->meet && !e->met) {
        struct bar_meeting m = {b, e->gen, COR_OK};
        if (block) {
            dsm__shm_wait(bar_met, bar_nap, &m, b->st.n);
        } else if (!bar_met(&m)) {
            cor_progress();
            *done = 0;
            return COR_OK;
        }
        e->met = true;
        dsm__lock_or_die(&dsm__rt.lock);
        if (!m.err)
            dsm_bar_done(&b->st);
        else if (!b->err)
            b->err = m.err;
        dsm__bar_wake();
        dsm__unlock_or_die(&dsm__rt.lock);
    }
    dsm__lock_or_die(&dsm__rt.lock);
    /* One waiting task at a time receives the barrier messages of the domain (the driver);
     * the others sleep until their episode ends or the driver's turn does. */
    while (!bar_over(b, e->epoch)) {
        if (!block) {
            dsm__unlock_or_die(&dsm__rt.lock);
            atomic_store(&dsm__rt.bar_pending, 1); /* messages may wait that no hook saw */
            dsm__bar_pump();
            cor_progress();
            dsm__lock_or_die(&dsm__rt.lock);
            if (bar_over(b, e->epoch)) break;
            dsm__unlock_or_die(&dsm__rt.lock);
            *done = 0;
            return COR_OK;
        }
        if (!dsm__rt.bar_driving && !b->shm) {
            dsm__rt.bar_driving = true;
            dsm__unlock_or_die(&dsm__rt.lock);
            bar_drive(b, e->epoch, 0);
            dsm__lock_or_die(&dsm__rt.lock);
            dsm__rt.bar_driving = false;
            dsm__bar_wake(); /* another waiter may drive now */
            dsm__unlock_or_die(&dsm__rt.lock);
            dsm__bar_pump(); /* what came as the turn ended */
            dsm__lock_or_die(&dsm__rt.lock);
            continue;
        }
        bool role = dsm__rt.bar_driving && !b->shm; /* woken when the role is free */
        dsm__rt.bar_role_waiters += role;
        dsm__wait_a_while(&dsm__rt.bar_cv, &dsm__rt.lock);
        dsm__rt.bar_role_waiters -= role;
    }
    int err = b->st.epoch != e->epoch ? COR_OK : b->err;
    if (!err && b->sb && !b->shm_checked) { /* before any task of the domain arrives again */
        b->shm = dsm_shm_bar_all_here(b->sb, b->st.n);
        b->shm_checked = true;
    }
    b->inside--;
    dsm__unlock_or_die(&dsm__rt.lock);
    if (done) *done = 1;
    return err;
}

/*
 * A test of episode e in a loop (dsm.c, test_looping): sleeps until the episode moves or nap_ns
 * pass, on the barrier's condvar, as cor_dsm_wait's tasks sleep (true), while another task of
 * the domain inside the episode stays awake to move it. The last one awake, while others
 * sleep, drives for drive_ns at most when the barrier goes over messages (true), as the wait's
 * driver does: it waits for the rounds in the core (the listeners keep off the port while it
 * spins, and wake it when it sleeps) instead of polling them in between tests, which left
 * them to the listener's wake-up or to its next test, 70-140 us after they were sent. Alone
 * in the episode, or when another task drives, it goes on polling (false): asleep, a
 * domain's rounds would wait for a listener's wake-up (3 domains x 1 task over gm messages:
 * 1.6-33x the wait against 0.6-17x polling). So does the task that meets the others in the
 * barrier's file: only it looks there, as the wait's does. Nothing else may wake these sleepers for
 * nothing: a pump that took no message broadcast on bar_cv at every fruitless test, and the testers
 * of a domain kept waking each other (about one broadcast per test, 9 naps in 10 cut short).
 * A tester of a barrier that meets in its file can do nothing for the episode (only the task
 * that meets looks there), so it sleeps until the end, looking at deaths every FILE_NAP_NS:
 * waking every nap_ns for a test that could not succeed, the sleepers of 3 domains x 4 tasks
 * took the CPUs from the tasks that meet whenever an episode outlasted nap_ns (test loop / wait
 * over udp 1.64-2.48x in 6 runs of 7, 22x once over gm, against 1.05-1.60x, same runs).
 */
#define FILE_NAP_NS 20000000L
bool dsm__bar_nap(struct dsm__bar_entry *e, long nap_ns, long drive_ns)
{
    struct cor_dsm_barrier *b = e->b;
    if (e->meet && !e->met) return false;
    bool nap = false;
    dsm__lock_or_die(&dsm__rt.lock);
    if (b->inside - b->napping > 1 && !bar_over(b, e->epoch)) {
        b->napping++;
        dsm__wait_ns(&dsm__rt.bar_cv, &dsm__rt.lock, b->shm ? FILE_NAP_NS : nap_ns);
        b->napping--;
        nap = true;
    } else if (b->napping > 0 && !b->shm && !dsm__rt.bar_driving && !bar_over(b, e->epoch)) {
        dsm__rt.bar_driving = true;
        dsm__unlock_or_die(&dsm__rt.lock);
        bar_drive(b, e->epoch, dsm__now_ns() + (uint64_t)drive_ns);
        dsm__lock_or_die(&dsm__rt.lock);
        dsm__rt.bar_driving = false;
        if (dsm__rt.bar_role_waiters) dsm__bar_wake();
        dsm__unlock_or_die(&dsm__rt.lock);
        dsm__bar_pump(); /* what came as the turn ended */
        return true;
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    return nap;
}

COR_API int cor_dsm_barrier_wait(cor_dsm_barrier_t bar)
{
    struct dsm__bar_entry e;
    int err = bar_enter(bar, &e);
    return err ? err : dsm__bar_step(&e, true, NULL);
}

COR_API int cor_dsm_barrier_waitI(cor_dsm_barrier_t bar, cor_dsm_req_t *req)
{
    if (!req) return COR_EINVAL;
    *req = NULL;
    struct cor_dsm_op *o = dsm__nb_alloc();
    if (!o) return COR_ENOMEM;
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->bar_in = true;
    return dsm__run_nb(o, bar_enter(bar, &o->bar), req);
}

COR_API int cor_dsm_barrier_destroy(cor_dsm_barrier_t bar)
{
    if (!dsm__is_up()) return COR_ESTATE;
    dsm__lock_or_die(&dsm__rt.lock);
    struct cor_dsm_barrier *b = dsm_handle_get(DSM_H_BARRIER, DSM__HANDLE(bar));
    if (!b || b->st.arrived > 0 || b->inside > 0) {
        dsm__unlock_or_die(&dsm__rt.lock);
        return b ? COR_EBUSY : COR_EINVAL;
    }
    dsm_handle_take(DSM_H_BARRIER, b->handle, false);
    for (struct cor_dsm_barrier **p = &dsm__rt.bars; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    dsm__unlock_or_die(&dsm__rt.lock);
    dsm__bar_free(b);
    return COR_OK;
}
