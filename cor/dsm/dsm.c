/*
 * libcordsm's runtime, on libcor's public API only.
 *
 * Each domain runs a service: a reserved task ("cor.dsm") whose mailbox receives every DSM
 * request sent to this domain, in a context of its own. Its messages are served where they
 * land: the task's arrival hook (on_arrival) drains the mailbox in whatever thread polled the
 * message in (a task waiting in the core, a listener), one thread at a time (the turn,
 * D.turn_mu); a thread of the service only takes what a thread holding one of our mutexes
 * left, and deaths. Served here: operations on objects homed here, the directory entries of
 * the names that hash here and the locks that live here. Barrier messages go to a second
 * reserved task ("cor.dsm.barrier"), received by a task waiting in the barrier.
 *
 * Who owns what:
 * - D.lock guards the resource table (objects and locks homed here, by index), the barrier
 *   list and every barrier's state. An object's data is guarded by its own mutex, so the
 *   home's tasks operate on it directly (no message) while the service serves remote ones.
 * - Only the thread holding the turn touches the directory, the locks' queues, the errors
 *   kept for QUIET and the list of its pending reply sends; none of them needs another lock.
 * - A client's request is two core requests of the calling task: a receive of the reply
 *   (posted first, tag = the request id) and the send of the request.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "dsm_internal.h"

#define SVC_NAME "cor.dsm"
#define BAR_NAME "cor.dsm.barrier"
#define RES_MAX COR_MAX_INDEX /* resource indices 1..65535 per domain */
#define DIR_BUCKETS 256
#define QERR_MAX 65536      /* tasks with unreported add errors kept by a service */
#define WAIT_SLICE_US 20000 /* the service looks at deaths and stop at least this often */
#define SHM_WAIT_US 2000    /* a domain waiting on shared memory polls this long first */
#define SHM_SPIN_LOOKS 256  /* and before that looks this often without polling */

enum res_kind { RES_OBJ = 1, RES_LOCK = 2 };

/*
 * A domain's copy of a cached object (the region handle). Away from the home it lives in
 * D.copies until cor_dsm_finalize; at the home it is part of the object (struct res) and its
 * data is the object's memory.
 */
struct copy {
    struct copy *next; /* D.copies bucket (D.lock) */
    cor_idp_t idp;
    int home;
    cor_type_t type;
    size_t count, bytes;
    pthread_mutex_t *mu; /* &own_mu, or the home object's mu */
    pthread_mutex_t own_mu;
    pthread_cond_t cv;         /* grants, invalidations, section ends, deaths (under *mu) */
    _Atomic unsigned gen;      /* counts the broadcasts of cv: a driving task watches it */
    struct dsm_copy st;        /* *mu */
    uint64_t hits, misses;     /* *mu */
    _Atomic uint64_t last_use; /* D.tick at the last section end: LRU eviction */
    _Atomic int maps;
    _Atomic uint64_t fast; /* the read fast path of a copy homed elsewhere (FAST_*) */
    unsigned char *data;
    struct res *x; /* at the home: the object */
    /* A grant's data coming straight into `data` (DSM_DIRECT_MIN bytes and more): the receive
     * posted before the request, in D.direct meanwhile. Set by the requesting task, taken back
     * by the thread holding the service's turn (*mu both). */
    cor_req_t dreq;
    struct copy *dnext; /* D.direct (D.direct_mu) */
    uint8_t dmode;      /* the grant's header came: the mode granted */
    bool dlanded;       /* the data came (dland_err: how) */
    int dland_err;
    bool dinv; /* an invalidation came after the header, before the data */
    bool dinv_keep;
    uint32_t dinv_seq;
};

struct res {
    enum res_kind kind;
    unsigned index;
    _Atomic int refs; /* one for the table, one per user of the moment */
    char name[COR_NAME_MAX];
    cor_dsm_protocol_t protocol;
    pthread_mutex_t mu;   /* guards obj */
    struct dsm_obj obj;   /* RES_OBJ (no data when shm: it is there) */
    struct dsm_shm *shm;  /* a home-only object shared with the host's domains, or NULL */
    struct dsm_lock lock; /* RES_LOCK; the service thread only */
    struct dsm_dir dir;   /* COR_DSM_CACHED: the directory (mu) */
    struct copy hc;       /* COR_DSM_CACHED: the home's copy (hc.mu = &mu) */
};

struct dir_entry {
    struct dir_entry *next;
    enum res_kind kind;
    char name[COR_NAME_MAX];
    cor_idp_t idp;
    cor_type_t type;
    uint64_t count;
    cor_dsm_protocol_t protocol;
};

struct qerr {
    struct qerr *next;
    cor_idp_t who;
    int err;
};

/* A task's adds to cached objects homed here that still wait for their directory turn, and
 * its QUIET, held back until they are applied (D.qmu). */
struct addq {
    struct addq *next;
    cor_idp_t who;
    uint32_t pending;
    bool quiet;        /* a QUIET came meanwhile: answer it when pending reaches 0 */
    uint32_t quiet_id; /* its request id */
};

struct pend {
    cor_req_t req;
    void *buf;       /* ours (freed when the send completes), or the memory of: */
    struct res *obj; /* an object the send reads from; a reference held until it completes */
};

/* The sends made as one reserved task: the core takes one call at a time per task (mu, also
 * held for its receives), and each buffer stays ours until its send completes (pend). */
struct outbox {
    pthread_mutex_t mu;
    struct pend *pend;
    size_t n, cap;
};

struct cor_dsm_barrier {
    struct cor_dsm_barrier *next; /* D.bars */
    uint64_t id;                  /* hash of the name */
    bool created;                 /* by a local cor_dsm_barrier_create (else only messages) */
    int *members;                 /* domain ranks, ascending */
    int err;                      /* COR_EPEERDEAD once a member died */
    int inside;                   /* tasks in cor_dsm_barrier_wait: no destroy meanwhile */
    uint64_t handle;              /* its cor_dsm_barrier_t, once created (D.lock) */
    struct dsm_bar st;
    struct dsm_shm_bar *sb;       /* its file on this host, if joined */
    bool shm_checked;             /* after the first episode: */
    bool shm;                     /* every member joined the file: episodes meet there */
};

/* A task's episode of a barrier, from its arrival to its end. */
struct bar_entry {
    struct cor_dsm_barrier *b; /* stays while the task is inside (b->inside) */
    uint64_t epoch;
    bool meet; /* the domain's last arrival, to meet the others in the barrier's file */
    bool met;
    uint32_t gen; /* the file's generation it waits for */
};

/* How many times a barrier name was created here: the same count in every member domain,
 * so it names the creation's file (dsm_shm_bar_join). */
struct bar_gen {
    struct bar_gen *next;
    uint64_t id;
    unsigned gen;
};

static struct {
    _Atomic int up;
    _Atomic int stopping;
    int rank, size;
    uint32_t session;
    cor_idp_t svc, ctx;
    cor_idp_t dctx; /* grants' data sent straight into copies (no application uses it either) */
    long poll_us; /* how long a task waiting for a protocol message polls the routes */
    bool shm;     /* home-only objects shared with the host's domains (COR_DSM_SHM) */
    struct dsm_shm_bar *host; /* the session's file, where each domain of the host counts itself */
    bool all_here;            /* every domain did (after init): locks live in shared memory */
    int ncpus;    /* online CPUs: whether a listener may linger (cpus_busy) */
    pthread_t thread;
    _Atomic cor_idp_t *svcs; /* [size] services, looked up on first use */
    _Atomic bool *dead;      /* [size] */
    _Atomic int deaths_pending;

    pthread_mutex_t lock; /* res, next_index, bars (and each barrier's state) */
    struct res **res;     /* [RES_MAX + 1] */
    unsigned next_index;
    struct cor_dsm_barrier *bars;
    struct bar_gen *bar_gens;
    pthread_cond_t bar_cv; /* an episode ended or failed, or the driver's turn ended */

    /* the barrier mailbox: one waiting task at a time (the driver) receives on it */
    cor_idp_t bar_box;
    _Atomic cor_idp_t *bar_boxes; /* [size] looked up on first use */
    bool bar_driving;             /* under lock: a task or a pump receives on it */
    _Atomic uint64_t bar_events;  /* bar_wake calls */
    _Atomic int bar_pending;      /* a barrier message came: the mailbox's hook pumps it */
    cor_req_t bar_rr;             /* the driver's */
    void *bar_msg;
    /* Barrier messages leave as the mailbox's task, not the service's: a completion signals
     * its task's sleepers, and as the service's each one woke the service thread, whose short
     * slice preempted the driver (two switches per message on 2 cores). */
    struct outbox bar_out; /* calls as the mailbox's task */

    /* the service thread's own */
    struct dir_entry *dir[DIR_BUCKETS];
    pthread_mutex_t qmu; /* qerrs, nqerrs, addqs: a cached add completes in any thread */
    struct qerr *qerrs;
    size_t nqerrs;
    struct addq *addqs;
    bool *death_done; /* [size] */

    struct outbox svc_out;            /* calls as the service task (cor_sendI_as, cor_recvI_as) */
    /* Who receives on the service task: one thread at a time, the one holding turn_mu (see
     * drain). `pending`: something came that nobody has looked at yet. */
    pthread_mutex_t turn_mu;
    _Atomic int pending;
    cor_req_t rr; /* the service task's receive (turn_mu) */
    bool closed;  /* (turn_mu) cor_dsm_finalize took the receive back */
    void *msg;
    pthread_mutex_t svc_mu; /* the service thread sleeps on svc_cv */
    pthread_cond_t svc_cv;
    struct copy *copies[DIR_BUCKETS]; /* copies of objects homed elsewhere (lock) */
    pthread_mutex_t direct_mu;        /* direct (a leaf: nothing is taken under it) */
    struct copy *direct;              /* copies whose grant's data is on its way */
    _Atomic int ndirect;
    _Atomic uint64_t grants_direct;
    _Atomic size_t cache_budget, cached_bytes;
    _Atomic size_t copy_bytes; /* data allocated for copies homed elsewhere */
    _Atomic uint64_t invalidations, recalls, evictions;
    _Atomic uint64_t tick; /* messages served: a cheap clock for LRU stamps */

    pthread_mutex_t ready_mu;
    pthread_cond_t ready_cv;
    int ready; /* 0 starting, 1 up, <0 failed */

    _Atomic uint64_t served, dropped, local_ops, remote_ops, shm_ops;
} D = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .svc_out.mu = PTHREAD_MUTEX_INITIALIZER,
       .direct_mu = PTHREAD_MUTEX_INITIALIZER,
       .qmu = PTHREAD_MUTEX_INITIALIZER,
       .bar_out.mu = PTHREAD_MUTEX_INITIALIZER,
       .turn_mu = PTHREAD_MUTEX_INITIALIZER,
       .svc_mu = PTHREAD_MUTEX_INITIALIZER,
       .svc_cv = PTHREAD_COND_INITIALIZER,
       .ready_mu = PTHREAD_MUTEX_INITIALIZER,
       .bar_cv = PTHREAD_COND_INITIALIZER,
       .ready_cv = PTHREAD_COND_INITIALIZER};

/* How many of our mutexes the thread holds: an arrival it polls in meanwhile is left to the
 * service thread (serving it here could want one of them again). */
static __thread int tls_locks;

static void lock_or_die(pthread_mutex_t *m)
{
    if (pthread_mutex_lock(m)) abort(); /* a broken invariant of ours, not bad input */
    tls_locks++;
}
static void unlock_or_die(pthread_mutex_t *m)
{
    tls_locks--;
    if (pthread_mutex_unlock(m)) abort();
}

COR_API const char *cor_dsm_strerror(int err)
{
#define DSM_STR_(name, value, text)                                                                \
    case value:                                                                                    \
        return text;
    switch (err) {
        COR_DSM_ERRNO_MAP(DSM_STR_)
    default:
        return cor_strerror(err);
    }
#undef DSM_STR_
}

static bool is_up(void)
{
    return atomic_load(&D.up) && !atomic_load(&D.stopping);
}

static bool name_ok(const char *name)
{
    if (!name) return false;
    size_t n = strnlen(name, COR_NAME_MAX);
    return n > 0 && n < COR_NAME_MAX;
}

static int dir_home(const char *name)
{
    return (int)(dsm_hash(name, strlen(name)) % (uint64_t)D.size);
}

static bool our_idp(cor_idp_t idp)
{
    return cor_idp_kind(idp) == COR_KIND_OBJECT && cor_idp_macro(idp) == D.session &&
           cor_idp_domain(idp) < (unsigned)D.size && cor_idp_index(idp) != 0;
}

/* ---- Resources homed here ------------------------------------------------------------ */

static void res_free(struct res *x)
{
    if (x->shm) {
        dsm_shm_retire(x->shm);
        dsm_shm_close(x->shm);
    } else if (x->kind == RES_OBJ) {
        free(x->obj.data);
    }
    if (x->protocol == COR_DSM_CACHED) {
        dsm_dir_free(&x->dir);
        pthread_cond_destroy(&x->hc.cv);
    }
    dsm_lock_free(&x->lock);
    pthread_mutex_destroy(&x->mu);
    free(x);
}

static void res_put(struct res *x)
{
    if (atomic_fetch_sub(&x->refs, 1) == 1) res_free(x);
}

static struct res *res_get(cor_idp_t idp, enum res_kind kind)
{
    if (!our_idp(idp) || cor_idp_domain(idp) != (unsigned)D.rank) return NULL;
    lock_or_die(&D.lock);
    struct res *x = D.res ? D.res[cor_idp_index(idp)] : NULL;
    if (x && x->kind == kind)
        atomic_fetch_add(&x->refs, 1);
    else
        x = NULL;
    unlock_or_die(&D.lock);
    return x;
}

/* Gives x an index (reused last: a stale idp meets ENOTFOUND for as long as possible). */
static int res_add(struct res *x)
{
    lock_or_die(&D.lock);
    for (unsigned k = 0; k < RES_MAX; k++) {
        unsigned i = (D.next_index + k) % RES_MAX + 1;
        if (!D.res[i]) {
            D.res[i] = x;
            x->index = i;
            D.next_index = i % RES_MAX;
            unlock_or_die(&D.lock);
            return COR_OK;
        }
    }
    unlock_or_die(&D.lock);
    return COR_ELIMIT;
}

/* Takes resource `index` of `kind` out of the table; returns it (with the table's
 * reference) or NULL. */
static struct res *res_remove(unsigned index, enum res_kind kind)
{
    if (index == 0 || index > RES_MAX) return NULL;
    lock_or_die(&D.lock);
    struct res *x = D.res[index];
    if (x && x->kind == kind)
        D.res[index] = NULL;
    else
        x = NULL;
    unlock_or_die(&D.lock);
    return x;
}

static struct res *res_new(enum res_kind kind, const char *name)
{
    struct res *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->kind = kind;
    atomic_init(&x->refs, 1);
    snprintf(x->name, sizeof x->name, "%s", name);
    pthread_mutex_init(&x->mu, NULL);
    return x;
}

/* Runs a request on a home-only object homed here, in the calling thread. */
static int obj_apply(struct res *x, const struct dsm_req *r, void *out, uint64_t *value)
{
    if (x->shm) return dsm_shm_apply(x->shm, r, out, value);
    lock_or_die(&x->mu);
    int err = dsm_obj_apply(&x->obj, r, out, value);
    unlock_or_die(&x->mu);
    return err;
}

/* ---- Services of other domains -------------------------------------------------------- */

/* The idp of a mailbox (a reserved task: SVC_NAME or BAR_NAME) of domain `rank`. */
static int mailbox_of(int rank, const char *name, cor_idp_t *out)
{
    if (rank < 0 || rank >= D.size) return COR_EINVAL;
    if (atomic_load(&D.dead[rank])) return COR_EPEERDEAD;
    bool bar = !strcmp(name, BAR_NAME);
    _Atomic cor_idp_t *cache = bar ? D.bar_boxes : D.svcs;
    cor_idp_t s = atomic_load(&cache[rank]);
    if (s == COR_IDP_NULL) {
        int err = COR_OK;
        if (rank == D.rank)
            s = bar ? D.bar_box : D.svc;
        else
            err = cor_task_lookup(rank, name, 0, &s);
        if (err) return err;
        atomic_store(&cache[rank], s);
    }
    *out = s;
    return COR_OK;
}

static int svc_of(int rank, cor_idp_t *svc)
{
    return mailbox_of(rank, SVC_NAME, svc);
}

static void svc_wake(void);

static void on_death(int rank, int err, void *arg)
{
    (void)err;
    (void)arg;
    /* Called from a core thread: no locks, just marks (the service does the rest). */
    if (!D.dead || rank < 0 || rank >= D.size) return;
    atomic_store(&D.dead[rank], true);
    atomic_store(&D.deaths_pending, 1);
    svc_wake();
}

/* ---- Client operations ---------------------------------------------------------------- */

struct cor_dsm_op {
    bool done;
    int result;
    uint8_t op;
    uint32_t id;
    cor_idp_t lock; /* an acquisition: settles the task's record of held locks */
    struct dsm_shm_lock *lk; /* an acquisition of a lock in shared memory: */
    uint32_t ticket;         /* its ticket */
    int lock_home;
    cor_req_t sreq, rreq;
    unsigned char *sbuf, *rbuf;
    size_t rcap;
    void *out; /* reply data (GET, old values) */
    size_t out_len;
    uint64_t *slot;       /* APPEND */
    cor_dsm_info_t *info; /* QUERY, DIR_GET */
    cor_idp_t *idp_out;   /* DIR_GET, LOCK_OPEN */
    struct copy *section; /* a non-blocking section start */
    int smode;
    bool bar_in; /* a non-blocking barrier episode: */
    struct bar_entry bar;
    unsigned char small[DSM_REQ_HDR + COR_NAME_MAX + 32];
    unsigned char rsmall[DSM_REP_HDR + DSM_INFO_HDR + COR_NAME_MAX];
    uint64_t handle; /* its cor_dsm_req_t (after small: op_init leaves it) */
};

/* The API's handle types carry dsm_handle.c's handles, never pointers. */
#define HANDLE(x) ((uint64_t)(uintptr_t)(x))
#define AS_HANDLE(type, h) ((type)(uintptr_t)(h))

static struct copy *region_of(cor_dsm_region_t rgn)
{
    return dsm_handle_get(DSM_H_REGION, HANDLE(rgn));
}

static __thread uint32_t tls_id;

static uint32_t next_id(void)
{
    tls_id = (tls_id + 1) & DSM_ID_MAX;
    if (tls_id == 0) tls_id = 1;
    return tls_id;
}

static void op_release(struct cor_dsm_op *o)
{
    if (o->sbuf && o->sbuf != o->small) free(o->sbuf);
    if (o->rbuf && o->rbuf != o->rsmall) free(o->rbuf);
    o->sbuf = o->rbuf = NULL;
}

static void op_init(struct cor_dsm_op *o, const struct dsm_req *r)
{
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->op = r->op;
    o->id = r->id;
}

/* Sends the request to domain `home`'s service, the reply (rep_data bytes of data at most)
 * to be received into o->rbuf. */
static void adds_flush_home(int home);
static bool adds_pending(int home);
static void adds_settle_home(int home);

static int op_start(struct cor_dsm_op *o, int home, const struct dsm_req *r, size_t rep_data)
{
    adds_flush_home(home);
    cor_idp_t svc;
    int err = svc_of(home, &svc);
    if (err) return err;
    size_t n = dsm_req_size(r);
    if (n == 0) return COR_EINVAL;
    o->sbuf = n <= sizeof o->small ? o->small : malloc(n);
    o->rcap = DSM_REP_HDR + rep_data;
    o->rbuf = o->rcap <= sizeof o->rsmall ? o->rsmall : malloc(o->rcap);
    if (!o->sbuf || !o->rbuf) {
        op_release(o);
        return COR_ENOMEM;
    }
    dsm_req_encode(o->sbuf, n, r);
    err = cor_recvI_into(svc, D.ctx, (int)r->id, COR_BYTE, o->rbuf, o->rcap, &o->rreq);
    if (err) goto fail;
    err = cor_sendI_typed(svc, D.ctx, (int)r->id, COR_BYTE, o->sbuf, n, &o->sreq);
    if (err) {
        cor_cancel(&o->rreq);
        cor_wait(&o->rreq, NULL);
        goto fail;
    }
    atomic_fetch_add(&D.remote_ops, 1);
    return COR_OK;
fail:
    op_release(o);
    return err;
}

/* Checks the reply (it comes from a peer: untrusted) and delivers its results. */
static int op_finish(struct cor_dsm_op *o, size_t len)
{
    struct dsm_rep rep;
    if (dsm_rep_decode(o->rbuf, len, &rep) || rep.op != o->op || rep.id != o->id) return COR_EPROTO;
    if (rep.status != COR_OK) return rep.status;
    switch (o->op) {
    case DSM_OP_GET:
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_CAS:
        if (rep.data_len != o->out_len) return COR_EPROTO;
        if (o->out && o->out_len) memcpy(o->out, rep.data, o->out_len);
        return COR_OK;
    case DSM_OP_APPEND:
        if (rep.data_len) return COR_EPROTO;
        if (o->slot) *o->slot = rep.value;
        return COR_OK;
    case DSM_OP_QUERY:
    case DSM_OP_DIR_GET: {
        cor_dsm_info_t info;
        if (dsm_info_decode(rep.data, rep.data_len, &info) || !our_idp(rep.value) ||
            cor_idp_domain(rep.value) != (unsigned)info.home)
            return COR_EPROTO;
        if (o->info) *o->info = info;
        if (o->idp_out) *o->idp_out = rep.value;
        return COR_OK;
    }
    case DSM_OP_LOCK_OPEN:
        if (rep.data_len || !our_idp(rep.value)) return COR_EPROTO;
        if (o->idp_out) *o->idp_out = rep.value;
        return COR_OK;
    default:
        return rep.data_len ? COR_EPROTO : COR_OK;
    }
}

/* The send failed: the reply cannot come; take the receive back. */
static int op_abort(struct cor_dsm_op *o, int err)
{
    if (o->rreq != COR_REQ_NULL) {
        cor_cancel(&o->rreq);
        cor_wait(&o->rreq, NULL);
    }
    return err;
}

static void held_settle(struct cor_dsm_op *o);
static int section_begin(struct copy *c, int mode, bool block);

/* A wait on shared memory (a barrier's file, a lock's ticket): until met(arg), polls the
 * routes (this domain's DSM requests are served as in any wait) and yields between looks for
 * SHM_WAIT_US (or COR_DSM_SPIN_US), so that the domains being waited for get a CPU when
 * domains outnumber cores (polling alone: 2 ms per barrier of 4 domains on 2 cores,
 * yielding: 7 us); then nap(arg), a sleep in the kernel of a few milliseconds at most. */
static void shm_wait(int (*met)(void *), void (*nap)(void *), void *arg, int domains)
{
    /* With a core for each domain waited with, first a few looks alone: a peer on another core
     * ends the wait within a microsecond, and a poll of the routes between looks adds its own
     * (2-domain barrier 0.12-0.41 us -> 0.13-0.31); with fewer cores they only keep the CPU
     * from the domains still to come (4-domain barrier on 2 cores: 5.7 -> 18 us). */
    for (int i = 0; domains <= D.ncpus && i < SHM_SPIN_LOOKS; i++) {
        if (met(arg)) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long spin_us = D.poll_us < 0 ? SHM_WAIT_US : D.poll_us;
    for (unsigned i = 1; !met(arg); i++) {
        cor_progress();
        sched_yield();
        if (i % 16) continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < spin_us) continue;
        while (!met(arg))
            nap(arg);
        return;
    }
}

static bool domain_dead(int rank, void *arg)
{
    (void)arg;
    return rank >= 0 && rank < D.size && atomic_load(&D.dead[rank]);
}

/* Whether an acquisition in shared memory is over (o->result then says how). */
static int lock_turn(void *arg)
{
    struct cor_dsm_op *o = arg;
    int status;
    if (o->done) return 1; /* asked again: the holder's news was taken already */
    if (atomic_load(&D.dead[o->lock_home]))
        o->result = COR_EPEERDEAD; /* as a request to a dead home would */
    else if (dsm_shm_lock_turn(o->lk, o->ticket, D.rank, domain_dead, NULL, &status))
        o->result = status;
    else if (atomic_load(&D.stopping))
        o->result = COR_ESTATE;
    else
        return 0;
    o->done = true;
    return 1;
}

static void lock_nap(void *arg)
{
    struct cor_dsm_op *o = arg;
    dsm_shm_lock_sleep(o->lk, o->ticket);
}

static int bar_step(struct bar_entry *e, bool block, int *done);

static int op_wait(struct cor_dsm_op *o)
{
    if (!o->done && o->bar_in) {
        o->result = bar_step(&o->bar, true, NULL);
        o->done = true;
    }
    if (!o->done && o->lk) shm_wait(lock_turn, lock_nap, o, D.size);
    if (!o->done && o->section) {
        o->result = section_begin(o->section, o->smode, true);
        o->done = true;
    }
    if (!o->done) {
        int err = o->sreq != COR_REQ_NULL ? cor_wait(&o->sreq, NULL) : COR_OK;
        if (err) {
            o->result = op_abort(o, err);
        } else {
            cor_status_t st;
            err = cor_wait(&o->rreq, &st);
            o->result = err ? err : op_finish(o, st.count);
        }
        o->done = true;
    }
    held_settle(o);
    op_release(o);
    return o->result;
}

static int op_test(struct cor_dsm_op *o, int *done)
{
    *done = 0;
    if (!o->done && o->bar_in) {
        int d = 0;
        int err = bar_step(&o->bar, false, &d);
        if (!d) return COR_OK;
        o->result = err;
        o->done = true;
    }
    if (!o->done && o->lk && !lock_turn(o)) {
        cor_progress();
        return COR_OK;
    }
    if (!o->done && o->section) {
        int err = section_begin(o->section, o->smode, false);
        if (err == COR_EAGAIN) {
            cor_progress(); /* the grant's rendezvous moves, as a cor_test would move it */
            return COR_OK;
        }
        o->result = err;
        o->done = true;
    }
    if (!o->done) {
        int d = 0, err;
        if (o->sreq != COR_REQ_NULL) {
            err = cor_test(&o->sreq, &d, NULL);
            if (d && err) {
                o->result = op_abort(o, err);
                o->done = true;
            }
            if (!d) return COR_OK;
        }
        if (!o->done) {
            cor_status_t st;
            err = cor_test(&o->rreq, &d, &st);
            if (!d) return COR_OK;
            o->result = err ? err : op_finish(o, st.count);
            o->done = true;
        }
    }
    held_settle(o);
    op_release(o);
    *done = 1;
    return o->result;
}

/* Runs an operation on an object of another home of this host on the home's segment, in
 * the calling thread: its result, or DSM_SHM_NONE if the object has no segment here (a cached
 * object, one of another host, or COR_DSM_SHM=0). */
static int shm_op(int home, const struct dsm_req *r, void *out, uint64_t *slot)
{
    if (!D.shm) return DSM_SHM_NONE;
    if (atomic_load(&D.dead[home])) return COR_EPEERDEAD;
    if (adds_pending(home)) {
        /* only for an object with a segment: a request would follow the adds anyway */
        if (!dsm_shm_views_has(r->obj)) return DSM_SHM_NONE;
        adds_settle_home(home);
    }
    uint64_t value = 0;
    int err = dsm_shm_views_apply(r, out, &value);
    if (err == DSM_SHM_NONE) return err;
    atomic_fetch_add(&D.shm_ops, 1);
    if (!err && slot) *slot = value;
    return err;
}

/* Fills o for an operation on an object and runs it here (home = this domain: o->done) or
 * starts it at the home. */
static int obj_op(struct cor_dsm_op *o, cor_idp_t obj, uint8_t op, size_t offset, size_t count,
                  cor_type_t type, const void *data, size_t data_len, void *out, uint64_t *slot)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || (unsigned)type >= COR_TYPE_COUNT) return COR_EINVAL;
    if (data_len && !data) return COR_EINVAL;
    struct dsm_req r = {.op = op,
                        .type = (uint8_t)type,
                        .id = next_id(),
                        .obj = obj,
                        .offset = offset,
                        .count = count,
                        .data = data,
                        .data_len = data_len};
    if (dsm_req_size(&r) == 0) {
        size_t ts = cor_type_size(type);
        return ts && count > COR_DSM_MAX_BYTES / ts ? COR_ELIMIT : COR_EINVAL;
    }
    op_init(o, &r);
    o->out = out;
    o->out_len = dsm_obj_out_len(&r);
    o->slot = slot;
    if (op == DSM_OP_GET && o->out_len && !out) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home != D.rank) {
        int err = shm_op(home, &r, out, slot);
        if (err == DSM_SHM_NONE) return op_start(o, home, &r, o->out_len);
        o->result = err;
        o->done = true;
        return COR_OK;
    }

    struct res *x = res_get(obj, RES_OBJ);
    if (x && x->protocol == COR_DSM_CACHED) {
        /* its turn comes through the directory, which the service keeps moving */
        res_put(x);
        return op_start(o, home, &r, o->out_len);
    }
    atomic_fetch_add(&D.local_ops, 1);
    if (!x) {
        o->result = COR_ENOTFOUND;
    } else {
        uint64_t value = 0;
        o->result = obj_apply(x, &r, out, &value);
        res_put(x);
        if (!o->result && slot) *slot = value;
    }
    o->done = true;
    return COR_OK;
}

/* A blocking request of any kind to domain `home`. */
static int call(int home, const struct dsm_req *r, struct cor_dsm_op *o, size_t rep_data)
{
    int err = op_start(o, home, r, rep_data);
    return err ? err : op_wait(o);
}

static int run_blocking(struct cor_dsm_op *o, int err)
{
    return err ? err : op_wait(o);
}

static int run_nb(struct cor_dsm_op *o, int err, cor_dsm_req_t *req)
{
    if (err) {
        dsm_handle_take(DSM_H_REQ, o->handle, false);
        free(o);
        *req = NULL;
        return err;
    }
    *req = AS_HANDLE(cor_dsm_req_t, o->handle);
    return COR_OK;
}

/* An operation with its handle taken before it starts (none can fail once it runs). */
static struct cor_dsm_op *nb_alloc(void)
{
    struct cor_dsm_op *o = malloc(sizeof *o);
    if (o && !(o->handle = dsm_handle_put(DSM_H_REQ, o))) {
        free(o);
        o = NULL;
    }
    return o;
}

#define NB_ALLOC(o, req)                                                                           \
    if (!(req)) return COR_EINVAL;                                                                 \
    struct cor_dsm_op *o = nb_alloc();                                                             \
    if (!o) return COR_ENOMEM

static size_t tsz(cor_type_t type)
{
    return (unsigned)type < COR_TYPE_COUNT ? cor_type_size(type) : 0;
}

/* Bytes of `count` elements, or SIZE_MAX (dsm_req_size then refuses the request). */
static size_t nbytes(cor_type_t type, size_t count)
{
    size_t ts = tsz(type);
    if (!ts || count > COR_DSM_MAX_BYTES / ts) return SIZE_MAX;
    return count * ts;
}

COR_API int cor_dsm_get(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf)
{
    struct cor_dsm_op o;
    return run_blocking(&o, obj_op(&o, obj, DSM_OP_GET, offset, count, type, NULL, 0, buf, NULL));
}

COR_API int cor_dsm_getI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf,
                         cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, obj_op(o, obj, DSM_OP_GET, offset, count, type, NULL, 0, buf, NULL), req);
}

COR_API int cor_dsm_put(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                        const void *buf)
{
    struct cor_dsm_op o;
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    return run_blocking(&o, obj_op(&o, obj, DSM_OP_PUT, offset, count, type, buf, n, NULL, NULL));
}

COR_API int cor_dsm_putI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                         const void *buf, cor_dsm_req_t *req)
{
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    NB_ALLOC(o, req);
    return run_nb(o, obj_op(o, obj, DSM_OP_PUT, offset, count, type, buf, n, NULL, NULL), req);
}

/* One-element operations: value (and desired, for CAS) travel as the request's data. */
static int elem_op(struct cor_dsm_op *o, cor_idp_t obj, uint8_t op, size_t index, cor_type_t type,
                   const void *value, const void *desired, void *old)
{
    size_t ts = tsz(type);
    if (!ts || !value || (op == DSM_OP_CAS && !desired)) return COR_EINVAL;
    unsigned char in[32];
    memcpy(in, value, ts);
    if (op == DSM_OP_CAS) memcpy(in + ts, desired, ts);
    return obj_op(o, obj, op, index, 1, type, in, op == DSM_OP_CAS ? 2 * ts : ts, old, NULL);
}

COR_API int cor_dsm_swap(cor_idp_t obj, size_t index, cor_type_t type, const void *value, void *old)
{
    struct cor_dsm_op o;
    return run_blocking(&o, elem_op(&o, obj, DSM_OP_SWAP, index, type, value, NULL, old));
}

COR_API int cor_dsm_swapI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                          void *old, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, elem_op(o, obj, DSM_OP_SWAP, index, type, value, NULL, old), req);
}

COR_API int cor_dsm_fetch_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                              void *old)
{
    struct cor_dsm_op o;
    return run_blocking(&o, elem_op(&o, obj, DSM_OP_FADD, index, type, value, NULL, old));
}

COR_API int cor_dsm_fetch_addI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                               void *old, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, elem_op(o, obj, DSM_OP_FADD, index, type, value, NULL, old), req);
}

COR_API int cor_dsm_cas(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                        const void *desired, void *old)
{
    struct cor_dsm_op o;
    return run_blocking(&o, elem_op(&o, obj, DSM_OP_CAS, index, type, expected, desired, old));
}

COR_API int cor_dsm_casI(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                         const void *desired, void *old, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, elem_op(o, obj, DSM_OP_CAS, index, type, expected, desired, old), req);
}

COR_API int cor_dsm_append(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                           uint64_t *slot)
{
    struct cor_dsm_op o;
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    return run_blocking(&o, obj_op(&o, obj, DSM_OP_APPEND, 0, count, type, data, n, NULL, slot));
}

COR_API int cor_dsm_appendI(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                            uint64_t *slot, cor_dsm_req_t *req)
{
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    NB_ALLOC(o, req);
    return run_nb(o, obj_op(o, obj, DSM_OP_APPEND, 0, count, type, data, n, NULL, slot), req);
}

/* A test or wait has the handle to itself (claimed), so two tasks completing one handle at
 * once cannot both free it: the second gets COR_EINVAL. */
COR_API int cor_dsm_test(cor_dsm_req_t *req, int *done)
{
    if (!req || !done) return COR_EINVAL;
    uint64_t h = HANDLE(*req);
    struct cor_dsm_op *o = dsm_handle_claim(DSM_H_REQ, h);
    if (!o) return COR_EINVAL;
    int err = op_test(o, done);
    if (!*done) {
        dsm_handle_unclaim(DSM_H_REQ, h);
        return err;
    }
    dsm_handle_take(DSM_H_REQ, h, true);
    free(o);
    *req = NULL;
    return err;
}

COR_API int cor_dsm_wait(cor_dsm_req_t *req)
{
    if (!req) return COR_EINVAL;
    uint64_t h = HANDLE(*req);
    struct cor_dsm_op *o = dsm_handle_claim(DSM_H_REQ, h);
    if (!o) return COR_EINVAL;
    int err = op_wait(o);
    dsm_handle_take(DSM_H_REQ, h, true);
    free(o);
    *req = NULL;
    return err;
}

/* ---- Non-fetching adds and quiet -------------------------------------------------------
 *
 * A task's adds toward a home are gathered into a batch (an ADDV request of up to
 * DSM_ADDV_MAX entries), sent when it is full, at cor_dsm_quiet, or before any other
 * operation of the task toward that home, so they still arrive in the order issued and before
 * what the task does next there. A few batches (one per recent home) and the sends in flight
 * belong to the task (thread-local, freed when the thread ends).
 */

#define ADD_BATCHES 4 /* homes with a batch open at once, per task */
#define ADD_INFLIGHT 16

struct add_batch {
    int home; /* -1: none */
    uint32_t n;
    unsigned char e[DSM_ADDV_MAX * DSM_ADDV_ENTRY];
};

struct add_state {
    struct add_batch b[ADD_BATCHES];
    struct {
        cor_req_t req;
        unsigned char *buf;
    } fl[ADD_INFLIGHT];
    unsigned next;
};

static pthread_key_t add_key;
static pthread_once_t add_once = PTHREAD_ONCE_INIT;
static __thread struct add_state *tls_as;
static __thread int tls_add_err;
static __thread uint64_t tls_homes[COR_MAX_DOMAINS / 64];

static void add_note(int err)
{
    if (err && !tls_add_err) tls_add_err = err;
}

static void add_state_free(void *p)
{
    struct add_state *a = p;
    for (int i = 0; i < ADD_INFLIGHT; i++) {
        if (a->fl[i].req != COR_REQ_NULL) cor_wait(&a->fl[i].req, NULL);
        free(a->fl[i].buf);
    }
    free(a);
}

static void add_key_make(void)
{
    if (pthread_key_create(&add_key, add_state_free)) abort();
}

static struct add_state *add_state(void)
{
    if (tls_as) return tls_as;
    pthread_once(&add_once, add_key_make);
    struct add_state *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    for (int i = 0; i < ADD_BATCHES; i++)
        a->b[i].home = -1;
    pthread_setspecific(add_key, a);
    return tls_as = a;
}

/* Applies the adds of batch b that it can in the memory its home shares, in runs on one
 * object under one hold of the object's mutex (per add, the mutex's cache line bounced
 * between the domains of a GUPS run: half the rate of batches sent as messages). Stops at
 * the first add of an object without a segment: that one and the rest go as a message, in
 * order. Returns how many were applied. */
static uint32_t batch_apply_here(struct add_batch *b, const struct dsm_req *all)
{
    struct dsm_req run[DSM_ADDV_MAX];
    uint32_t i = 0;
    while (i < b->n) {
        size_t n = 0;
        while (i + n < b->n && dsm_addv_get(all, i + n, &run[n]) == COR_OK &&
               (n == 0 || run[n].obj == run[0].obj))
            n++;
        if (n == 0) break; /* malformed: the home refuses it */
        int err = dsm_shm_views_apply_all(run, n, NULL, NULL);
        if (err == DSM_SHM_NONE) break;
        add_note(err);
        atomic_fetch_add(&D.shm_ops, n);
        i += (uint32_t)n;
    }
    return i;
}

/* Sends batch b to its home (an error goes to the task's next quiet). */
static void batch_send(struct add_state *a, struct add_batch *b)
{
    if (b->home < 0 || b->n == 0) return;
    int home = b->home;
    struct dsm_req r = {.op = DSM_OP_ADDV,
                        .id = next_id(),
                        .count = b->n,
                        .data = b->e,
                        .data_len = (size_t)b->n * DSM_ADDV_ENTRY};
    uint32_t here = D.shm && !atomic_load(&D.dead[home]) ? batch_apply_here(b, &r) : 0;
    r.count -= here;
    r.data = b->e + (size_t)here * DSM_ADDV_ENTRY;
    r.data_len -= (size_t)here * DSM_ADDV_ENTRY;
    b->home = -1;
    b->n = 0;
    if (r.count == 0) return;
    cor_idp_t svc;
    int err = svc_of(home, &svc);
    size_t n = dsm_req_size(&r);
    unsigned char *buf = err ? NULL : malloc(n);
    if (!buf) {
        add_note(err ? err : COR_ENOMEM);
        return;
    }
    dsm_req_encode(buf, n, &r);
    unsigned k = a->next++ % ADD_INFLIGHT;
    if (a->fl[k].req != COR_REQ_NULL) add_note(cor_wait(&a->fl[k].req, NULL));
    free(a->fl[k].buf);
    a->fl[k].buf = buf;
    err = cor_sendI_typed(svc, D.ctx, (int)r.id, COR_BYTE, buf, n, &a->fl[k].req);
    if (err) {
        add_note(err);
        a->fl[k].req = COR_REQ_NULL;
        return;
    }
    tls_homes[home / 64] |= 1ull << (home % 64);
}

/* Before another operation of this task toward `home`: its adds go first. */
static void adds_flush_home(int home)
{
    if (!tls_as) return;
    for (int i = 0; i < ADD_BATCHES; i++)
        if (tls_as->b[i].home == home) batch_send(tls_as, &tls_as->b[i]);
}

/* Whether the task has adds toward `home` batched or sent since its last quiet there. */
static bool adds_pending(int home)
{
    for (int i = 0; tls_as && i < ADD_BATCHES; i++)
        if (tls_as->b[i].home == home && tls_as->b[i].n) return true;
    return (tls_homes[home / 64] >> (home % 64)) & 1;
}

/* Before an operation of this task that runs here on a segment of `home` (shm_op): its adds
 * toward that home are applied first: those batched, here if they can be, and those sent
 * (a QUIET there), as the messages' order would have it. */
static void adds_settle_home(int home)
{
    adds_flush_home(home);
    uint64_t bit = 1ull << (home % 64);
    if (!(tls_homes[home / 64] & bit)) return;
    struct dsm_req r = {.op = DSM_OP_QUIET, .id = next_id()};
    struct cor_dsm_op q;
    op_init(&q, &r);
    add_note(call(home, &r, &q, 0));
    tls_homes[home / 64] &= ~bit;
}

COR_API int cor_dsm_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value)
{
    if (!is_up()) return COR_ESTATE;
    size_t ts = tsz(type);
    if (!our_idp(obj) || !ts || !value) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    struct dsm_req r = {.op = DSM_OP_ADD,
                        .type = (uint8_t)type,
                        .obj = obj,
                        .offset = index,
                        .count = 1,
                        .data = value,
                        .data_len = ts};
    if (home == D.rank) {
        struct res *x = res_get(obj, RES_OBJ);
        if (!x || x->protocol != COR_DSM_CACHED) {
            atomic_fetch_add(&D.local_ops, 1);
            if (!x) {
                add_note(COR_ENOTFOUND);
                return COR_OK;
            }
            add_note(obj_apply(x, &r, NULL, NULL));
            res_put(x);
            return COR_OK;
        }
        /* A cached object's add waits for its directory turn (copies elsewhere are recalled
         * first): it goes through our own service in the task's batch, as a remote task's
         * does, and cor_dsm_quiet asks that service too. */
        res_put(x);
    } else if (atomic_load(&D.dead[home])) {
        return COR_EPEERDEAD;
    }
    struct add_state *a = add_state();
    if (!a) return COR_ENOMEM;
    struct add_batch *b = NULL;
    for (int i = 0; i < ADD_BATCHES && !b; i++)
        if (a->b[i].home == home) b = &a->b[i];
    if (!b) {
        b = &a->b[home % ADD_BATCHES];
        batch_send(a, b); /* another home's batch had that place */
        b->home = home;
    }
    dsm_addv_put(b->e + (size_t)b->n * DSM_ADDV_ENTRY, obj, index, type, value);
    b->n++;
    atomic_fetch_add(&D.remote_ops, 1);
    if (b->n == DSM_ADDV_MAX) batch_send(a, b);
    return COR_OK;
}

COR_API int cor_dsm_quiet(void)
{
    if (!is_up()) return COR_ESTATE;
    if (tls_as) {
        for (int i = 0; i < ADD_BATCHES; i++)
            batch_send(tls_as, &tls_as->b[i]);
        for (int i = 0; i < ADD_INFLIGHT; i++) {
            if (tls_as->fl[i].req != COR_REQ_NULL) add_note(cor_wait(&tls_as->fl[i].req, NULL));
            free(tls_as->fl[i].buf); /* nothing stays allocated after a quiet */
            tls_as->fl[i].buf = NULL;
        }
    }
    int nh = 0;
    for (int h = 0; h < D.size; h++)
        nh += (tls_homes[h / 64] >> (h % 64)) & 1;
    if (nh) {
        struct cor_dsm_op *ops = calloc((size_t)nh, sizeof *ops);
        int *started = calloc((size_t)nh, sizeof *started);
        if (!ops || !started) {
            free(ops);
            free(started);
            return COR_ENOMEM;
        }
        int k = 0;
        for (int h = 0; h < D.size; h++) {
            if (!((tls_homes[h / 64] >> (h % 64)) & 1)) continue;
            struct dsm_req r = {.op = DSM_OP_QUIET, .id = next_id()};
            op_init(&ops[k], &r);
            int err = op_start(&ops[k], h, &r, 0);
            if (err)
                add_note(err);
            else
                started[k] = 1;
            k++;
        }
        for (int i = 0; i < k; i++)
            if (started[i]) add_note(op_wait(&ops[i]));
        free(ops);
        free(started);
        memset(tls_homes, 0, sizeof tls_homes);
    }
    int err = tls_add_err;
    tls_add_err = COR_OK;
    return err;
}

/* ---- Cached protocol: copies, sections, the home's directory ---------------------------
 *
 * The state machines are in dsm_dir.c; here they meet messages and threads. Every message of
 * the protocol goes between two domains' services, sent as the service task under the
 * directory's or the copy's mutex, so each pair of domains sees them in the order the state
 * changed (the protocol needs a grant never to be overtaken by the next invalidation). A home
 * task's request goes to the directory directly (no message); a remote domain's goes as
 * C_REQ from any of its tasks, sent as its service.
 */

/* Large send buffers (a grant's or a write-back's data) are kept for the next ones instead
 * of going back to malloc, which returns them to the system (munmap, or a trimmed arena) and
 * hands out fresh pages the next time: a page fault per page while the data is encoded.
 * SBUF_MIN_BYTES and up, at most SBUF_KEEP buffers and SBUF_KEEP_BYTES in all. */
#define SBUF_MIN_BYTES (64u << 10)
#define SBUF_KEEP 16
#define SBUF_KEEP_BYTES (16u << 20)
static struct {
    pthread_mutex_t mu;
    void *buf[SBUF_KEEP];
    size_t n, bytes;
} sbufs = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A buffer of at least n bytes, from the kept ones if one is large enough. */
static void *sbuf_get(size_t n)
{
    if (n >= SBUF_MIN_BYTES) {
        void *b = NULL;
        lock_or_die(&sbufs.mu);
        for (size_t i = 0; i < sbufs.n; i++) {
            size_t cap = malloc_usable_size(sbufs.buf[i]);
            if (cap >= n && cap / 2 <= n) { /* no more than twice what is needed */
                b = sbufs.buf[i];
                sbufs.buf[i] = sbufs.buf[--sbufs.n];
                sbufs.bytes -= cap;
                break;
            }
        }
        unlock_or_die(&sbufs.mu);
        if (b) return b;
    }
    return malloc(n);
}

/* Frees a send buffer (from malloc or sbuf_get), or keeps it for sbuf_get. */
static void sbuf_put(void *b)
{
    if (!b) return;
    size_t cap = malloc_usable_size(b);
    if (cap >= SBUF_MIN_BYTES) {
        lock_or_die(&sbufs.mu);
        bool keep = sbufs.n < SBUF_KEEP && sbufs.bytes + cap <= SBUF_KEEP_BYTES;
        if (keep) {
            sbufs.buf[sbufs.n++] = b;
            sbufs.bytes += cap;
        }
        unlock_or_die(&sbufs.mu);
        if (keep) return;
    }
    free(b);
}

static void sbuf_clear(void)
{
    lock_or_die(&sbufs.mu);
    while (sbufs.n)
        free(sbufs.buf[--sbufs.n]);
    sbufs.bytes = 0;
    unlock_or_die(&sbufs.mu);
}

static void svc_send(cor_idp_t to, uint32_t tag, void *buf, size_t n);
static void copy_wake(struct copy *c);
static void reply_buf(cor_idp_t to, uint8_t op, uint8_t type, uint32_t id, int status,
                      uint64_t value, unsigned char *buf, size_t dlen);

#define DEFAULT_CACHE_BYTES ((size_t)256 << 20)
#define SECTION_WAIT_NS 10000000L /* waiters look at deaths at least this often */

/* The sections the calling task has open. Initial-exec TLS: the hit path reads these, and
 * the general-dynamic model of a shared library would cost a call per access. libcordsm is
 * linked, not dlopen'ed, so the few bytes come from the static TLS block. */
#define TLS_FAST __attribute__((tls_model("initial-exec")))
static __thread TLS_FAST struct {
    struct copy *c;
    int mode;
    bool fast; /* started on the fast path */
} tls_sec[COR_DSM_MAX_SECTIONS];
static __thread TLS_FAST int tls_nsec;

static int tls_find(const struct copy *c)
{
    for (int i = 0; i < tls_nsec; i++)
        if (tls_sec[i].c == c) return i;
    return -1;
}

/* Copies of this size and more take their grant's data straight into their memory (below). */
#define DSM_DIRECT_MIN ((size_t)16 << 10)

/* The tag of an object's data sent straight into a copy (in D.dctx). */
static int direct_tag(cor_idp_t obj)
{
    return (int)cor_idp_index(obj);
}

/* An operation on a cached object, waiting for its directory turn at the home. */
struct pop {
    cor_idp_t src;
    struct dsm_req r;
    unsigned char data[];
};

/* A protocol message (service to service) carrying the copy's data if `data`. */
static void cmsg(int dom, uint8_t op, const struct copy *c, uint64_t seq, uint32_t flags,
                 const void *data)
{
    cor_idp_t svc;
    if (svc_of(dom, &svc)) return; /* dead: its death is handled on its own */
    struct dsm_req r = {.op = op,
                        .type = (uint8_t)c->type,
                        .flags = flags,
                        .obj = c->idp,
                        .offset = seq,
                        .count = data ? c->count : 0,
                        .data = data,
                        .data_len = data ? c->bytes : 0};
    size_t n = dsm_req_size(&r);
    unsigned char *buf = n ? sbuf_get(n) : NULL;
    if (!buf) return; /* the peer sees no answer: as from a slow domain */
    dsm_req_encode(buf, n, &r);
    svc_send(svc, 0, buf, n);
}

static bool copy_valid(const struct copy *c)
{
    return c->st.state != DSM_MODE_NONE;
}

/* Accounting of the valid bytes of copies homed elsewhere, around a state change. */
static void copy_account(const struct copy *c, bool was_valid)
{
    if (c->x || was_valid == copy_valid(c)) return;
    if (was_valid)
        atomic_fetch_sub(&D.cached_bytes, c->bytes);
    else
        atomic_fetch_add(&D.cached_bytes, c->bytes);
}

/* Directory callbacks, at the home under x->mu. */
static bool dir_inv(void *ctx, int dom, uint32_t seq, bool writeback, bool keep)
{
    struct res *x = ctx;
    atomic_fetch_add(&D.invalidations, 1);
    if (dom == D.rank) {
        bool dirty;
        bool now = dsm_copy_inv(&x->hc.st, seq, keep, &dirty);
        if (!now) copy_wake(&x->hc); /* new sections must wait now */
        return now; /* the home's copy is the memory: nothing to write back */
    }
    uint32_t flags = (writeback ? DSM_CF_WRITEBACK : 0) | (keep ? DSM_CF_KEEP : 0);
    cmsg(dom, DSM_OP_C_INV, &x->hc, seq, flags, NULL);
    return false; /* a dead one counts as acknowledged when its death is handled */
}

static void add_done(cor_idp_t who, int err);

static void op_run(struct res *x, struct pop *p, int status)
{
    if (p->r.op == DSM_OP_ADD) { /* non-fetching: no reply; the sender's QUIET waits for it */
        if (status == COR_OK) status = dsm_obj_apply(&x->obj, &p->r, NULL, NULL);
        add_done(p->src, status);
        free(p);
        return;
    }
    size_t olen = dsm_obj_out_len(&p->r);
    unsigned char *buf = malloc(DSM_REP_HDR + olen);
    uint64_t value = 0;
    if (!buf) {
        free(p);
        return;
    }
    if (status == COR_OK) status = dsm_obj_apply(&x->obj, &p->r, buf + DSM_REP_HDR, &value);
    reply_buf(p->src, p->r.op, p->r.type, p->r.id, status, value, buf, olen);
    free(p);
}

static void outbox_send_in(struct outbox *o, cor_idp_t as, cor_idp_t to, cor_idp_t ctx,
                           uint32_t tag, struct pend p, size_t n);

/* Under x->mu: a grant with data to a copy that posted its receive: the object's memory
 * alone, read in place until the send completes (no write reaches it before the grantee
 * acknowledges an invalidation, which it does only once the data landed). */
static void direct_send(struct res *x, int dom)
{
    cor_idp_t svc;
    if (svc_of(dom, &svc)) return; /* dead: its death is handled on its own */
    atomic_fetch_add(&x->refs, 1);
    lock_or_die(&D.svc_out.mu);
    outbox_send_in(&D.svc_out, D.svc, svc, D.dctx, (uint32_t)direct_tag(x->hc.idp),
                   (struct pend){.buf = x->obj.data, .obj = x}, x->hc.bytes);
    unlock_or_die(&D.svc_out.mu);
}

static void dir_grant(void *ctx, const struct dsm_dreq *r, bool data, int status)
{
    struct res *x = ctx;
    if (r->kind == DSM_DREQ_OP) {
        if (r->recalled) atomic_fetch_add(&D.recalls, 1);
        op_run(x, r->op, status);
        /* the operation changed the memory under nobody's copy: the home's is current */
        return;
    }
    if (r->who == D.rank) {
        dsm_copy_grant(&x->hc.st, r->mode, status);
        copy_wake(&x->hc);
        return;
    }
    if (status) {
        uint32_t flags = (uint32_t)(-status) << DSM_CF_ERR_SHIFT;
        cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, flags & DSM_CF_ERR, NULL);
        return;
    }
    if (data && r->direct) {
        direct_send(x, r->who);
        cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, r->mode | DSM_CF_DIRECT, NULL);
    } else {
        cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, r->mode, data ? x->obj.data : NULL);
    }
}

static const struct dsm_dir_cb dir_cbs = {.inv = dir_inv, .grant = dir_grant};

static int cached_setup(struct res *x)
{
    int err = dsm_dir_init(&x->dir, D.size, D.rank, &dir_cbs, x);
    if (err) return err;
    struct copy *c = &x->hc;
    c->home = D.rank;
    c->type = x->obj.type;
    c->count = x->obj.count;
    c->bytes = x->obj.count * x->obj.tsize;
    c->mu = &x->mu;
    pthread_cond_init(&c->cv, NULL);
    c->st.state = DSM_MODE_WRITE; /* the directory starts with the home as owner */
    c->data = x->obj.data;
    c->x = x;
    return COR_OK;
}

static struct copy *copy_find(cor_idp_t idp)
{
    lock_or_die(&D.lock);
    struct copy *c = D.copies[idp % DIR_BUCKETS];
    while (c && c->idp != idp)
        c = c->next;
    unlock_or_die(&D.lock);
    return c;
}

static void copy_lock(struct copy *c);
static void copy_unlock(struct copy *c);

/* The data of a copy homed elsewhere: allocated when a region first maps it, given back once
 * no region maps it and it is invalid and idle (copy_data_release), allocated again by the
 * next map. A program that maps objects one after the other kept every copy's data until
 * cor_dsm_finalize; now what stays allocated unmapped is at most the valid copies, which the
 * cache budget bounds. Every page is written at once (calloc maps large ones lazily): the
 * first grant then copies into resident memory instead of taking a page fault per page in the
 * service thread (about 25 us each on a paravirtualized guest: 0.8 ms for a 128 KiB block).
 * The stores are volatile, or the compiler would drop them. */
static size_t copy_data_size(const struct copy *c)
{
    return (size_t)(c->count ? c->count : 1) * cor_type_size(c->type);
}

static int copy_data_alloc(struct copy *c)
{
    size_t n = copy_data_size(c);
    if (!(c->data = calloc(1, n))) return COR_ENOMEM;
    for (size_t o = 0; o < n; o += 4096)
        ((volatile unsigned char *)c->data)[o] = 0;
    atomic_fetch_add(&D.copy_bytes, n);
    return COR_OK;
}

/* Under *c->mu. A valid copy keeps its data (the cache); so does one that a region maps (its
 * owner holds the pointer) or on which anything is under way (a request, a receive posted
 * into the data, an invalidation, a waiter). */
static void copy_data_release(struct copy *c)
{
    const struct dsm_copy *s = &c->st;
    if (c->x || !c->data || atomic_load(&c->maps) > 0 || copy_valid(c) || s->readers ||
        s->writers || s->pending || s->inv || s->waiters || c->dreq != COR_REQ_NULL || c->dlanded)
        return;
    free(c->data);
    c->data = NULL;
    atomic_fetch_sub(&D.copy_bytes, copy_data_size(c));
}

static void copy_free(struct copy *c)
{
    if (c->dreq != COR_REQ_NULL) { /* cor_dsm_finalize: the service has stopped */
        cor_cancel(&c->dreq);
        cor_wait(&c->dreq, NULL);
    }
    pthread_mutex_destroy(&c->own_mu);
    pthread_cond_destroy(&c->cv);
    if (c->data) atomic_fetch_sub(&D.copy_bytes, copy_data_size(c));
    free(c->data);
    free(c);
}

/* One map of c, counted in c->maps already: a handle of its own (the unmap ends it). */
static int map_handle(struct copy *c, cor_dsm_region_t *rgn)
{
    uint64_t h = dsm_handle_put(DSM_H_REGION, c);
    if (!h) {
        atomic_fetch_sub(&c->maps, 1);
        if (c->x) res_put(c->x);
        return COR_ENOMEM;
    }
    *rgn = AS_HANDLE(cor_dsm_region_t, h);
    return COR_OK;
}

COR_API int cor_dsm_map(cor_idp_t obj, cor_dsm_region_t *rgn)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || !rgn) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home == D.rank) {
        struct res *x = res_get(obj, RES_OBJ);
        if (!x) return COR_ENOTFOUND;
        if (x->protocol != COR_DSM_CACHED) {
            res_put(x);
            return COR_DSM_EPROTOCOL;
        }
        atomic_fetch_add(&x->hc.maps, 1);
        return map_handle(&x->hc, rgn); /* the reference is the map's */
    }
    struct copy *c = copy_find(obj);
    if (!c) {
        cor_dsm_info_t info;
        int err = cor_dsm_query(obj, &info);
        if (err) return err;
        if (info.protocol != COR_DSM_CACHED) return COR_DSM_EPROTOCOL;
        struct copy *n = calloc(1, sizeof *n);
        if (!n) return COR_ENOMEM;
        n->idp = obj;
        n->home = home;
        n->type = info.type;
        n->count = info.count;
        n->bytes = info.bytes;
        if (copy_data_alloc(n)) {
            free(n);
            return COR_ENOMEM;
        }
        n->mu = &n->own_mu;
        pthread_mutex_init(&n->own_mu, NULL);
        pthread_cond_init(&n->cv, NULL);
        lock_or_die(&D.lock);
        c = D.copies[obj % DIR_BUCKETS];
        while (c && c->idp != obj)
            c = c->next;
        if (!c) {
            n->next = D.copies[obj % DIR_BUCKETS];
            D.copies[obj % DIR_BUCKETS] = c = n;
            n = NULL;
        }
        unlock_or_die(&D.lock);
        if (n) copy_free(n); /* another task mapped it first */
    }
    /* Counted before the look at the data: a release sees the map, or we see its NULL. */
    atomic_fetch_add(&c->maps, 1);
    copy_lock(c);
    int err = c->data ? COR_OK : copy_data_alloc(c);
    copy_unlock(c);
    if (err) {
        atomic_fetch_sub(&c->maps, 1);
        return err;
    }
    return map_handle(c, rgn);
}

COR_API int cor_dsm_region_data(cor_dsm_region_t rgn, void **data, size_t *count)
{
    struct copy *c = region_of(rgn);
    if (!c || !data) return COR_EINVAL;
    *data = c->data;
    if (count) *count = c->count;
    return COR_OK;
}

COR_API int cor_dsm_unmap(cor_dsm_region_t rgn)
{
    struct copy *c = region_of(rgn);
    if (!c) return COR_EINVAL;
    if (tls_find(c) >= 0) return COR_DSM_ESECTION;
    if (!dsm_handle_take(DSM_H_REGION, HANDLE(rgn), false)) return COR_EINVAL; /* a racing unmap */
    if (c->x) {
        atomic_fetch_sub(&c->maps, 1);
        res_put(c->x);
    } else if (atomic_fetch_sub(&c->maps, 1) == 1) {
        copy_lock(c);
        copy_data_release(c); /* an invalid copy nobody maps any more */
        copy_unlock(c);
    }
    return COR_OK;
}

/*
 * The read fast path (copies homed elsewhere): while c->fast has FAST_OPEN, a read section
 * starts and ends with one atomic operation each, without the mutex. FAST_OPEN is set under
 * the mutex only when a read could start there without waiting and nobody waits, and only
 * while no fast reader is counted; every critical section on the copy begins by closing it
 * (copy_lock), turning the fast readers of the moment into readers of the state machine: a
 * fast reader that ends after that sees FAST_OPEN gone and ends through the mutex. The bits
 * above the count total the fast hits (for the statistics), free of charge.
 */
#define FAST_OPEN (1ull << 63)
#define FAST_COUNT 0xffffffull
#define FAST_HIT (1ull << 24)

static bool fast_read_start(struct copy *c)
{
    uint64_t v = atomic_load_explicit(&c->fast, memory_order_relaxed);
    while ((v & FAST_OPEN) && (v & FAST_COUNT) != FAST_COUNT)
        if (atomic_compare_exchange_weak_explicit(&c->fast, &v, v + 1 + FAST_HIT,
                                                  memory_order_acquire, memory_order_relaxed))
            return true;
    return false;
}

/* true: ended; false: the fast path closed meanwhile, end through the mutex. */
static bool fast_read_end(struct copy *c)
{
    return atomic_fetch_sub_explicit(&c->fast, 1, memory_order_release) & FAST_OPEN;
}

/* Under *c->mu: opens the fast path if a read could start now and nobody waits. */
static void fast_reopen(struct copy *c)
{
    const struct dsm_copy *s = &c->st;
    if (!s->err && !s->inv && !s->fresh && s->state >= DSM_MODE_READ && !s->writers &&
        s->pending != DSM_MODE_WRITE && !s->waiters &&
        (atomic_load_explicit(&c->fast, memory_order_relaxed) & FAST_COUNT) == 0)
        atomic_fetch_or_explicit(&c->fast, FAST_OPEN, memory_order_release);
}

/* Under *c->mu: closes it; its readers of the moment join the state machine's. */
static void fast_close(struct copy *c)
{
    uint64_t old = atomic_fetch_and_explicit(&c->fast, ~FAST_OPEN, memory_order_acq_rel);
    if (old & FAST_OPEN) c->st.readers += (int)(old & FAST_COUNT);
}

static void copy_lock(struct copy *c)
{
    lock_or_die(c->mu);
    if (!c->x) fast_close(c);
}

static void copy_unlock(struct copy *c)
{
    if (!c->x) fast_reopen(c);
    unlock_or_die(c->mu);
}

/* Under *c->mu: wakes the tasks waiting on c (and a task driving the service for c). */
static void copy_wake(struct copy *c)
{
    atomic_fetch_add_explicit(&c->gen, 1, memory_order_release);
    pthread_cond_broadcast(&c->cv);
}

/*
 * Grants straight into the copy. A copy of DSM_DIRECT_MIN bytes or more that has no valid
 * data posts the receive of the data into c->data before it asks (as the service task, in
 * D.dctx, tagged with the object's index: one request per copy at a time). The home sends the
 * object's memory alone, which over the core's rendezvous (gm: the route's remote write)
 * lands in the copy with no staging buffer or copy on either side, then the grant's header
 * (DSM_CF_DIRECT) over D.ctx, in order with its invalidations. The grant takes effect when
 * both came; an invalidation after the header waits for the data, one before it concerns a
 * copy this domain dropped already (acknowledged at once, as always). The thread holding the
 * service's turn sees the receive complete (the arrival hook also runs for it). Smaller
 * copies take the grant inline, one message with its header.
 */

static void evict(void);

/* Under *c->mu: posts the receive; false if it could not (the grant then comes inline). */
static bool direct_post(struct copy *c)
{
    cor_idp_t home_svc;
    if (c->x || c->bytes < DSM_DIRECT_MIN || svc_of(c->home, &home_svc)) return false;
    lock_or_die(&D.svc_out.mu);
    int err = cor_recvI_into_as(D.svc, home_svc, D.dctx, direct_tag(c->idp), COR_BYTE, c->data,
                                c->bytes, &c->dreq);
    unlock_or_die(&D.svc_out.mu);
    if (err) return false;
    lock_or_die(&D.direct_mu);
    c->dnext = D.direct;
    D.direct = c;
    atomic_fetch_add(&D.ndirect, 1);
    unlock_or_die(&D.direct_mu);
    return true;
}

static void direct_unlink(struct copy *c)
{
    lock_or_die(&D.direct_mu);
    for (struct copy **p = &D.direct; *p; p = &(*p)->dnext)
        if (*p == c) {
            *p = c->dnext;
            atomic_fetch_sub(&D.ndirect, 1);
            break;
        }
    unlock_or_die(&D.direct_mu);
}

static void direct_reset(struct copy *c)
{
    c->dmode = DSM_MODE_NONE;
    c->dlanded = c->dinv = false;
    c->dland_err = COR_OK;
}

/* Under *c->mu, holding the turn: no data will come (a grant refused or inline, the home's
 * death, finalize): takes the receive back. */
static void direct_cancel(struct copy *c)
{
    direct_reset(c);
    if (c->dreq == COR_REQ_NULL) return;
    direct_unlink(c);
    lock_or_die(&D.svc_out.mu);
    cor_cancel(&c->dreq);
    cor_wait(&c->dreq, NULL);
    unlock_or_die(&D.svc_out.mu);
    c->dreq = COR_REQ_NULL;
}

/* Under *c->mu, holding the turn: the grant takes effect once its header and data both came. */
static void direct_finish(struct copy *c)
{
    if (!c->dmode || !c->dlanded) return;
    int err = c->dland_err;
    if (c->st.pending) {
        dsm_copy_grant(&c->st, c->dmode, err);
        if (!err) atomic_fetch_add(&D.grants_direct, 1);
        bool dirty;
        if (c->dinv && !err && dsm_copy_inv(&c->st, c->dinv_seq, c->dinv_keep, &dirty))
            cmsg(c->home, DSM_OP_C_ACK, c, c->dinv_seq, 0, dirty ? c->data : NULL);
        copy_wake(c);
    }
    direct_reset(c);
}

/* Holding the turn: c's data came (or its receive failed). */
static void direct_land(struct copy *c)
{
    copy_lock(c);
    bool was = copy_valid(c);
    cor_status_t st;
    int done = 0;
    int err = cor_test(&c->dreq, &done, &st);
    c->dreq = COR_REQ_NULL;
    if (!err && !done) err = COR_EPROTO; /* cor_peek said done: not reached */
    if (!err && st.count * cor_type_size(st.type) != c->bytes) err = COR_EPROTO;
    c->dlanded = true;
    c->dland_err = err;
    direct_finish(c);
    copy_account(c, was);
    copy_unlock(c);
}

/* Holding the turn: lands the copies whose data came. */
static void direct_reap(void)
{
    struct copy *landed = NULL;
    lock_or_die(&D.direct_mu);
    for (struct copy **p = &D.direct; *p;) {
        struct copy *c = *p;
        int done = 0;
        if (cor_peek(c->dreq, &done) == COR_OK && !done) {
            p = &c->dnext;
            continue;
        }
        *p = c->dnext;
        atomic_fetch_sub(&D.ndirect, 1);
        c->dnext = landed;
        landed = c;
    }
    unlock_or_die(&D.direct_mu);
    while (landed) {
        struct copy *c = landed;
        landed = c->dnext;
        direct_land(c);
    }
    evict();
}

/* Under *c->mu: asks the home for `mode`. */
static int copy_request(struct copy *c, int mode, bool have)
{
    c->misses++;
    if (c->x) {
        struct dsm_dreq r = {
            .who = D.rank, .mode = (uint8_t)mode, .kind = DSM_DREQ_SECTION, .have_copy = have};
        int err = dsm_dir_request(&c->x->dir, &r);
        if (err) c->st.pending = DSM_MODE_NONE;
        return err;
    }
    if (atomic_load(&D.dead[c->home])) {
        c->st.pending = DSM_MODE_NONE;
        return COR_EPEERDEAD;
    }
    uint32_t flags = (uint32_t)mode | (have ? DSM_CF_HAVE : 0);
    if (!have && direct_post(c)) flags |= DSM_CF_DIRECT;
    cmsg(c->home, DSM_OP_C_REQ, c, 0, flags, NULL);
    return COR_OK;
}

/* Under *c->mu: a section of the domain on c ended or the copy was dropped for a flush:
 * acknowledges a due invalidation (round seq) to the home. */
static void copy_ack(struct copy *c, uint32_t seq)
{
    bool was = copy_valid(c);
    bool dirty = dsm_copy_drop(&c->st);
    copy_account(c, was);
    if (c->x)
        dsm_dir_ack(&c->x->dir, D.rank, seq);
    else
        cmsg(c->home, DSM_OP_C_ACK, c, seq, 0, dirty ? c->data : NULL);
}

static void timed_wait(struct copy *c)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += SECTION_WAIT_NS;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    if (!c->x) fast_reopen(c); /* stays shut while this task waits; for form's sake */
    int rc = pthread_cond_timedwait(&c->cv, c->mu, &t);
    if (rc && rc != ETIMEDOUT) abort();
    if (!c->x) fast_close(c);
}

struct copy_watch {
    struct copy *c;
    unsigned gen;
};

static int copy_changed(void *arg)
{
    const struct copy_watch *w = arg;
    return atomic_load_explicit(&w->c->gen, memory_order_acquire) != w->gen ||
           atomic_load(&D.stopping);
}

/*
 * Under *c->mu: waits for c to change (a grant, an acknowledgment, a section's end). The
 * message that changes it is served by whichever thread of the domain polls the routes when
 * it comes (the service task's arrival hook), so the task polls them itself, for
 * COR_DSM_SPIN_US at most: the message then wakes no thread (a wake-up from the copy's
 * condvar cost 8-70 us on the shared 2-core machine). After one poll that saw no change
 * (*sleep set) it sleeps on the condvar: a long wait costs no core.
 */
static void wait_change(struct copy *c, bool *sleep)
{
    if (!*sleep) {
        struct copy_watch w = {c, atomic_load_explicit(&c->gen, memory_order_relaxed)};
        if (!c->x) fast_reopen(c); /* stays shut while this task waits; for form's sake */
        unlock_or_die(c->mu);
        *sleep = !cor_poll_until(copy_changed, &w, D.poll_us);
        lock_or_die(c->mu);
        if (!c->x) fast_close(c);
        if (!*sleep || atomic_load_explicit(&c->gen, memory_order_relaxed) != w.gen) return;
    }
    timed_wait(c);
}

/* Tries to start a section (blocking: until it starts or fails). COR_EAGAIN: not yet (the
 * copy is requested). */
static int section_start(struct copy *c, int mode, bool block, bool *fast)
{
    *fast = false;
    if (mode == DSM_MODE_READ && !c->x && fast_read_start(c)) {
        *fast = true;
        return COR_OK;
    }
    copy_lock(c);
    if (dsm_copy_can_start(&c->st, mode)) { /* the hit: no message, no allocation */
        dsm_copy_start(&c->st, mode);
        c->hits++;
        copy_unlock(c);
        return COR_OK;
    }
    int err = COR_OK;
    bool sleep = false;
    c->st.waiters++;
    for (;;) {
        if (dsm_copy_can_start(&c->st, mode)) {
            dsm_copy_start(&c->st, mode);
            break;
        }
        if (!c->st.err && !c->x && atomic_load(&D.dead[c->home])) c->st.err = COR_EPEERDEAD;
        bool have;
        int m = dsm_copy_miss(&c->st, mode, &have);
        if (m < 0) {
            err = m;
            break;
        }
        if (m > 0) {
            err = copy_request(c, m, have);
            if (err) break;
            if (dsm_copy_can_start(&c->st, mode)) continue; /* granted at once (home) */
        }
        if (!block) {
            err = COR_EAGAIN;
            break;
        }
        wait_change(c, &sleep);
    }
    c->st.waiters--;
    copy_unlock(c);
    return err;
}

static int section_begin(struct copy *c, int mode, bool block)
{
    if (!is_up()) return COR_ESTATE;
    if (!c) return COR_EINVAL;
    if (tls_find(c) >= 0) return COR_DSM_ESECTION;
    if (tls_nsec == COR_DSM_MAX_SECTIONS) return COR_ELIMIT;
    bool fast;
    int err = section_start(c, mode, block, &fast);
    if (err == COR_OK) {
        tls_sec[tls_nsec].c = c;
        tls_sec[tls_nsec].mode = mode;
        tls_sec[tls_nsec].fast = fast;
        tls_nsec++;
    }
    return err;
}

static int section_end(struct copy *c, int mode)
{
    if (!c) return COR_EINVAL;
    int i = tls_find(c);
    if (i < 0 || tls_sec[i].mode != mode) return COR_DSM_ESECTION;
    bool fast = tls_sec[i].fast;
    tls_sec[i] = tls_sec[--tls_nsec];
    /* the LRU stamp: the service's tick, written only when it moved (no shared-line writes
     * on every hit; a clock read would cost as much as the rest of the hit) */
    uint64_t tick = atomic_load_explicit(&D.tick, memory_order_relaxed);
    if (atomic_load_explicit(&c->last_use, memory_order_relaxed) != tick)
        atomic_store_explicit(&c->last_use, tick, memory_order_relaxed);
    if (fast && fast_read_end(c)) return COR_OK;
    copy_lock(c);
    if (dsm_copy_end(&c->st, mode)) copy_ack(c, c->st.inv_seq);
    if (c->st.waiters) copy_wake(c);
    copy_unlock(c);
    return COR_OK;
}

COR_API int cor_dsm_start_read(cor_dsm_region_t rgn)
{
    return section_begin(region_of(rgn), DSM_MODE_READ, true);
}
COR_API int cor_dsm_end_read(cor_dsm_region_t rgn)
{
    return section_end(region_of(rgn), DSM_MODE_READ);
}
COR_API int cor_dsm_start_write(cor_dsm_region_t rgn)
{
    return section_begin(region_of(rgn), DSM_MODE_WRITE, true);
}
COR_API int cor_dsm_end_write(cor_dsm_region_t rgn)
{
    return section_end(region_of(rgn), DSM_MODE_WRITE);
}

COR_API int cor_dsm_flush(cor_dsm_region_t rgn)
{
    if (!is_up()) return COR_ESTATE;
    struct copy *c = region_of(rgn);
    if (!c) return COR_EINVAL;
    if (tls_find(c) >= 0) return COR_DSM_ESECTION;
    if (c->x) return COR_OK; /* the home's copy is the object itself */
    copy_lock(c);
    c->st.waiters++;
    while ((c->st.readers || c->st.writers || c->st.pending) && !c->st.err &&
           !atomic_load(&D.dead[c->home]))
        timed_wait(c);
    c->st.waiters--;
    if (copy_valid(c) && !c->st.err) {
        if (c->st.inv) {
            c->st.inv_keep = false; /* flushed: a due downgrade keeps nothing either */
            copy_ack(c, c->st.inv_seq);
        } else {
            bool was = copy_valid(c);
            bool dirty = dsm_copy_drop(&c->st);
            copy_account(c, was);
            cmsg(c->home, DSM_OP_C_FLUSH, c, 0, 0, dirty ? c->data : NULL);
        }
    }
    int err = c->st.err;
    copy_unlock(c);
    return err;
}

COR_API int cor_dsm_set_cache_bytes(size_t bytes)
{
    atomic_store(&D.cache_budget, bytes);
    return COR_OK;
}

/* Flushes idle copies, least recently used first, until the valid ones fit the budget. The
 * copies are never freed before cor_dsm_finalize, so pointers taken under D.lock stay good. */
static int cmp_lru(const void *a, const void *b)
{
    uint64_t x = atomic_load(&(*(struct copy *const *)a)->last_use);
    uint64_t y = atomic_load(&(*(struct copy *const *)b)->last_use);
    return x < y ? -1 : x > y;
}

static void evict(void)
{
    if (atomic_load(&D.cached_bytes) <= atomic_load(&D.cache_budget)) return;
    size_t n = 0, cap = 64;
    struct copy **v = malloc(cap * sizeof *v);
    if (!v) return;
    lock_or_die(&D.lock);
    for (int k = 0; k < DIR_BUCKETS; k++)
        for (struct copy *c = D.copies[k]; c; c = c->next) {
            if (n == cap) {
                struct copy **w = realloc(v, 2 * cap * sizeof *v);
                if (!w) break;
                v = w;
                cap *= 2;
            }
            v[n++] = c;
        }
    unlock_or_die(&D.lock);
    qsort(v, n, sizeof *v, cmp_lru);
    for (size_t i = 0; i < n && atomic_load(&D.cached_bytes) > atomic_load(&D.cache_budget); i++) {
        struct copy *c = v[i];
        copy_lock(c);
        struct dsm_copy *s = &c->st;
        if (copy_valid(c) && !s->readers && !s->writers && !s->pending && !s->inv && !s->waiters &&
            !s->err) {
            bool dirty = dsm_copy_drop(s);
            copy_account(c, true);
            cmsg(c->home, DSM_OP_C_FLUSH, c, 0, 0, dirty ? c->data : NULL);
            atomic_fetch_add(&D.evictions, 1);
            copy_data_release(c);
        }
        copy_unlock(c);
    }
    free(v);
}

/* The service: protocol messages. src is the sending domain's service. */
static void serve_cached_home(int from, const struct dsm_req *r, cor_idp_t src)
{
    struct res *x = res_get(r->obj, RES_OBJ);
    if (!x || x->protocol != COR_DSM_CACHED) {
        if (r->op == DSM_OP_C_REQ) {
            int err = x ? COR_DSM_EPROTOCOL : COR_ENOTFOUND;
            struct dsm_req g = {.op = DSM_OP_C_GRANT,
                                .type = r->type,
                                .obj = r->obj,
                                .flags = ((uint32_t)(-err) << DSM_CF_ERR_SHIFT) & DSM_CF_ERR};
            size_t n = dsm_req_size(&g);
            unsigned char *buf = malloc(n);
            if (buf && dsm_req_encode(buf, n, &g))
                svc_send(src, 0, buf, n);
            else
                free(buf);
        }
        if (x) res_put(x);
        return;
    }
    size_t bytes = x->hc.bytes;
    lock_or_die(&x->mu);
    switch (r->op) {
    case DSM_OP_C_REQ: {
        struct dsm_dreq q = {.who = from,
                             .mode = (uint8_t)(r->flags & DSM_CF_MODE),
                             .kind = DSM_DREQ_SECTION,
                             .have_copy = (r->flags & DSM_CF_HAVE) != 0,
                             .direct = (r->flags & DSM_CF_DIRECT) != 0};
        int err = dsm_dir_request(&x->dir, &q);
        if (err) dir_grant(x, &q, false, err);
        break;
    }
    case DSM_OP_C_ACK:
        if (!dsm_dir_ack_expected(&x->dir, from, (uint32_t)r->offset)) break; /* stale */
        if (dsm_dir_holds(&x->dir, from) == DSM_MODE_WRITE) {
            if (r->data_len == bytes && r->type == (uint8_t)x->obj.type)
                memcpy(x->obj.data, r->data, bytes);
            else
                atomic_fetch_add(&D.dropped, 1); /* an owner's ack without its data */
        }
        dsm_dir_ack(&x->dir, from, (uint32_t)r->offset);
        break;
    case DSM_OP_C_FLUSH:
        if (dsm_dir_holds(&x->dir, from) == DSM_MODE_WRITE && r->data_len == bytes &&
            r->type == (uint8_t)x->obj.type)
            memcpy(x->obj.data, r->data, bytes);
        dsm_dir_release(&x->dir, from);
        break;
    }
    unlock_or_die(&x->mu);
    res_put(x);
}

static void serve_cached_copy(const struct dsm_req *r)
{
    struct copy *c = copy_find(r->obj);
    if (!c) {
        if (r->op == DSM_OP_C_INV) { /* we never had it: nothing to give back */
            struct copy none = {
                .idp = r->obj, .home = (int)cor_idp_domain(r->obj), .type = (cor_type_t)r->type};
            cmsg(none.home, DSM_OP_C_ACK, &none, r->offset, 0, NULL);
        } else {
            atomic_fetch_add(&D.dropped, 1);
        }
        return;
    }
    copy_lock(c);
    bool was = copy_valid(c);
    if (r->op == DSM_OP_C_INV && c->dmode) {
        c->dinv = true; /* it overtook the grant's data: due once that landed */
        c->dinv_seq = (uint32_t)r->offset;
        c->dinv_keep = (r->flags & DSM_CF_KEEP) != 0;
        copy_unlock(c);
        return;
    }
    if (r->op == DSM_OP_C_GRANT && (r->flags & DSM_CF_DIRECT)) {
        if (c->dreq == COR_REQ_NULL && !c->dlanded) {
            atomic_fetch_add(&D.dropped, 1); /* no data was asked for */
        } else {
            c->dmode = (uint8_t)(r->flags & DSM_CF_MODE);
            direct_finish(c);
        }
        copy_account(c, was);
        copy_unlock(c);
        evict();
        return;
    }
    if (r->op == DSM_OP_C_GRANT) {
        int mode = (int)(r->flags & DSM_CF_MODE);
        int err = -(int)((r->flags & DSM_CF_ERR) >> DSM_CF_ERR_SHIFT);
        direct_cancel(c); /* a grant in a message: no data comes alone */
        if (!c->st.pending) {
            atomic_fetch_add(&D.dropped, 1); /* nobody asked */
        } else {
            if (!err && r->data_len) {
                if (r->data_len == c->bytes && r->type == (uint8_t)c->type)
                    memcpy(c->data, r->data, c->bytes);
                else
                    err = COR_EPROTO;
            } else if (!err && !copy_valid(c)) {
                err = COR_EPROTO; /* the home thought we had the data */
            }
            dsm_copy_grant(&c->st, mode, err);
            copy_wake(c);
        }
    } else if (r->op == DSM_OP_C_INV) {
        bool dirty;
        if (dsm_copy_inv(&c->st, (uint32_t)r->offset, (r->flags & DSM_CF_KEEP) != 0, &dirty))
            cmsg(c->home, DSM_OP_C_ACK, c, r->offset, 0, dirty ? c->data : NULL);
        else
            copy_wake(c);
    }
    copy_account(c, was);
    copy_data_release(c); /* invalidated while nobody maps it */
    copy_unlock(c);
    if (r->op == DSM_OP_C_GRANT) evict();
}

/* An operation on a cached object homed here: its turn comes through the directory. */
static void serve_cached_op(struct res *x, cor_idp_t src, const struct dsm_req *r)
{
    struct pop *p = malloc(sizeof *p + r->data_len);
    if (!p && r->op == DSM_OP_ADD) {
        add_done(src, COR_ENOMEM);
        return;
    }
    if (!p) {
        struct dsm_req q = *r;
        reply_buf(src, q.op, q.type, q.id, COR_ENOMEM, 0, malloc(DSM_REP_HDR), 0);
        return;
    }
    p->src = src;
    p->r = *r;
    if (r->data_len) memcpy(p->data, r->data, r->data_len); /* a GET has no data */
    p->r.data = p->data;
    p->r.name = NULL;
    p->r.name_len = 0;
    struct dsm_dreq q = {.who = D.rank,
                         .mode = r->op == DSM_OP_GET ? DSM_MODE_READ : DSM_MODE_WRITE,
                         .kind = DSM_DREQ_OP,
                         .op = p};
    lock_or_die(&x->mu);
    int err = dsm_dir_request(&x->dir, &q);
    if (err) op_run(x, p, err);
    unlock_or_die(&x->mu);
}

/* A cached object is destroyed: the copies elsewhere are invalidated (their data goes
 * nowhere), requests waiting in the directory and later ones get COR_ENOTFOUND. */
static void destroy_inv(void *ctx, int dom)
{
    struct res *x = ctx;
    if (dom != D.rank) cmsg(dom, DSM_OP_C_INV, &x->hc, 0, 0, NULL);
}

static void cached_destroy(struct res *x)
{
    lock_or_die(&x->mu);
    dsm_dir_fail(&x->dir, COR_ENOTFOUND, destroy_inv, x);
    if (!x->hc.st.err) x->hc.st.err = COR_ENOTFOUND;
    copy_wake(&x->hc);
    unlock_or_die(&x->mu);
}

/* Domain d died: directories forget its copies (a dirty one's data is lost), copies homed
 * there fail. */
static void cached_peer_dead(int d)
{
    size_t n = 0;
    struct res **xs = malloc((RES_MAX + 1) * sizeof *xs);
    lock_or_die(&D.lock);
    for (unsigned i = 1; xs && i <= RES_MAX; i++) {
        struct res *x = D.res[i];
        if (x && x->kind == RES_OBJ && x->protocol == COR_DSM_CACHED) {
            atomic_fetch_add(&x->refs, 1);
            xs[n++] = x;
        }
    }
    unlock_or_die(&D.lock);
    for (size_t i = 0; i < n; i++) {
        struct res *x = xs[i];
        lock_or_die(&x->mu);
        dsm_dir_peer_dead(&x->dir, d);
        if (x->dir.lost && !x->hc.st.err) x->hc.st.err = COR_EPEERDEAD;
        copy_wake(&x->hc);
        unlock_or_die(&x->mu);
        res_put(x);
    }
    free(xs);
    lock_or_die(&D.lock);
    for (int k = 0; k < DIR_BUCKETS; k++)
        for (struct copy *c = D.copies[k]; c; c = c->next) {
            if (c->home != d) continue;
            copy_lock(c); /* D.lock -> copy mutex: nowhere the other way round */
            bool was = copy_valid(c);
            direct_cancel(c);
            c->st.err = COR_EPEERDEAD;
            c->st.pending = DSM_MODE_NONE;
            if (!c->st.readers && !c->st.writers) dsm_copy_drop(&c->st);
            copy_account(c, was);
            copy_wake(c);
            copy_unlock(c);
        }
    unlock_or_die(&D.lock);
}

/* Non-blocking starts: a cor_dsm_op of kind section. */
static int section_op(struct cor_dsm_op *o, cor_dsm_region_t rgn, int mode)
{
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->section = region_of(rgn);
    o->smode = mode;
    int err = section_begin(o->section, mode, false);
    if (err == COR_EAGAIN) return COR_OK;
    o->done = true;
    o->result = err;
    return err == COR_DSM_ESECTION || err == COR_EINVAL || err == COR_ELIMIT ? err : COR_OK;
}

COR_API int cor_dsm_start_readI(cor_dsm_region_t rgn, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, section_op(o, rgn, DSM_MODE_READ), req);
}

COR_API int cor_dsm_start_writeI(cor_dsm_region_t rgn, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, section_op(o, rgn, DSM_MODE_WRITE), req);
}

/* ---- Objects: create, lookup, query, destroy ------------------------------------------ */

COR_API int cor_dsm_create(const char *name, cor_type_t type, size_t count,
                           cor_dsm_protocol_t protocol, cor_idp_t *obj)
{
    if (!is_up()) return COR_ESTATE;
    size_t ts = tsz(type);
    if (!name_ok(name) || !ts || count == 0 || !obj ||
        (protocol != COR_DSM_HOME_ONLY && protocol != COR_DSM_CACHED))
        return COR_EINVAL;
    if (count > COR_DSM_MAX_BYTES / ts) return COR_ELIMIT;
    struct res *x = res_new(RES_OBJ, name);
    if (!x) return COR_ENOMEM;
    x->protocol = protocol;
    x->obj.type = type;
    x->obj.tsize = ts;
    x->obj.count = count;
    if (protocol == COR_DSM_HOME_ONLY && D.shm && D.size > 1) x->shm = dsm_shm_create(type, count);
    if (!x->shm && !(x->obj.data = calloc(count, ts))) {
        res_free(x);
        return COR_ENOMEM;
    }
    if (protocol == COR_DSM_CACHED) {
        int e = cached_setup(x);
        if (e) {
            x->protocol = COR_DSM_HOME_ONLY; /* nothing of the cached state to free */
            res_free(x);
            return e;
        }
    }
    int err = res_add(x);
    if (err) {
        res_free(x);
        return err;
    }
    cor_idp_t idp = cor_idp_make(D.session, COR_KIND_OBJECT, (unsigned)D.rank, x->index);
    x->hc.idp = idp;
    /* unpublished, the segment still serves this domain; the others send requests */
    if (x->shm) dsm_shm_publish(x->shm, idp);
    struct dsm_req r = {.op = DSM_OP_DIR_PUT,
                        .type = (uint8_t)type,
                        .id = next_id(),
                        .flags = protocol,
                        .obj = idp,
                        .count = count,
                        .name = name,
                        .name_len = strlen(name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    err = call(dir_home(name), &r, &o, 0);
    if (err) {
        struct res *y = res_remove(x->index, RES_OBJ);
        if (y) res_put(y);
        return err;
    }
    *obj = idp;
    return COR_OK;
}

COR_API int cor_dsm_lookup(const char *name, cor_idp_t *obj)
{
    if (!is_up()) return COR_ESTATE;
    if (!name_ok(name) || !obj) return COR_EINVAL;
    struct dsm_req r = {
        .op = DSM_OP_DIR_GET, .id = next_id(), .name = name, .name_len = strlen(name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    o.idp_out = obj;
    return call(dir_home(name), &r, &o, DSM_INFO_HDR + COR_NAME_MAX);
}

static void local_info(struct res *x, cor_dsm_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->type = x->obj.type;
    info->count = x->obj.count;
    info->bytes = x->obj.count * x->obj.tsize;
    if (x->shm) {
        dsm_shm_appended(x->shm, &info->appended);
    } else {
        lock_or_die(&x->mu);
        info->appended = x->obj.appended;
        unlock_or_die(&x->mu);
    }
    info->home = D.rank;
    info->protocol = x->protocol;
    snprintf(info->name, sizeof info->name, "%s", x->name);
}

COR_API int cor_dsm_query(cor_idp_t obj, cor_dsm_info_t *info)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || !info) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home == D.rank) {
        struct res *x = res_get(obj, RES_OBJ);
        if (!x) return COR_ENOTFOUND;
        local_info(x, info);
        res_put(x);
        return COR_OK;
    }
    struct dsm_req r = {.op = DSM_OP_QUERY, .id = next_id(), .obj = obj};
    struct cor_dsm_op o;
    op_init(&o, &r);
    o.info = info;
    return call(home, &r, &o, DSM_INFO_HDR + COR_NAME_MAX);
}

COR_API int cor_dsm_destroy(cor_idp_t obj)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || cor_idp_domain(obj) != (unsigned)D.rank) return COR_EINVAL;
    struct res *x = res_remove(cor_idp_index(obj), RES_OBJ);
    if (!x) return COR_ENOTFOUND;
    if (x->protocol == COR_DSM_CACHED) cached_destroy(x);
    if (x->shm) dsm_shm_retire(x->shm); /* other domains' operations end here too */
    struct dsm_req r = {.op = DSM_OP_DIR_DEL,
                        .id = next_id(),
                        .obj = obj,
                        .name = x->name,
                        .name_len = strlen(x->name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    int err = call(dir_home(x->name), &r, &o, 0);
    res_put(x); /* freed when the last operation in progress on it ends */
    return err;
}

/* ---- Locks ----------------------------------------------------------------------------- */

COR_API int cor_dsm_lock_open(const char *name, cor_idp_t *lock)
{
    if (!is_up()) return COR_ESTATE;
    if (!name_ok(name) || !lock) return COR_EINVAL;
    struct dsm_req r = {
        .op = DSM_OP_LOCK_OPEN, .id = next_id(), .name = name, .name_len = strlen(name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    o.idp_out = lock;
    return call(dir_home(name), &r, &o, 0);
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

/* An acquisition ended: the lock is held (also when its last holder died), or not at all. */
static void held_settle(struct cor_dsm_op *o)
{
    if (o->lock == COR_IDP_NULL) return;
    int i = held_find(o->lock);
    if (i >= 0) {
        if (o->result == COR_OK || o->result == COR_DSM_EOWNERDEAD)
            tls_held[i].granted = true;
        else
            held_drop(i);
    }
    o->lock = COR_IDP_NULL;
}

static int lock_op(struct cor_dsm_op *o, cor_idp_t lock, uint8_t op)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(lock)) return COR_EINVAL;
    if (held_find(lock) >= 0) return COR_ESTATE; /* held, or being acquired */
    if (tls_nheld == DSM_LOCKS_HELD) return COR_ELIMIT;
    struct dsm_req r = {.op = op, .id = next_id(), .obj = lock};
    op_init(o, &r);
    int home = (int)cor_idp_domain(lock);
    if (D.all_here) { /* a ticket in shared memory (dsm_shm.c) instead of a request */
        if (atomic_load(&D.dead[home])) return COR_EPEERDEAD;
        o->lk = dsm_shm_lock_view(lock);
        if (!o->lk) return COR_ENOMEM; /* never requests: the others' tickets would not see them */
        o->lock_home = home;
        if (op == DSM_OP_LOCK_TRY) {
            o->result = dsm_shm_lock_try(o->lk, D.rank, &o->ticket);
            if (o->result == COR_OK) lock_turn(o); /* holds at once; was its holder dead? */
            o->done = true;
        } else {
            o->ticket = dsm_shm_lock_ticket(o->lk, D.rank);
        }
    } else {
        int err = op_start(o, home, &r, 0);
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
    return run_blocking(&o, lock_op(&o, lock, DSM_OP_LOCK_ACQ));
}

COR_API int cor_dsm_lockI(cor_idp_t lock, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, lock_op(o, lock, DSM_OP_LOCK_ACQ), req);
}

COR_API int cor_dsm_trylock(cor_idp_t lock)
{
    struct cor_dsm_op o;
    return run_blocking(&o, lock_op(&o, lock, DSM_OP_LOCK_TRY));
}

COR_API int cor_dsm_unlock(cor_idp_t lock)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(lock)) return COR_EINVAL;
    int i = held_find(lock);
    if (i < 0 || !tls_held[i].granted) return COR_ESTATE;
    int home = (int)cor_idp_domain(lock);
    if (D.all_here) {
        struct dsm_shm_lock *k = dsm_shm_lock_view(lock); /* mapped when it was acquired */
        if (!k) return COR_ENOMEM;
        held_drop(i);
        dsm_shm_lock_release(k);
        return atomic_load(&D.dead[home]) ? COR_EPEERDEAD : COR_OK;
    }
    held_drop(i);
    adds_flush_home(home);
    cor_idp_t svc;
    int err = svc_of(home, &svc);
    if (err) return err;
    struct dsm_req r = {.op = DSM_OP_LOCK_REL, .id = next_id(), .obj = lock};
    unsigned char buf[DSM_REQ_HDR];
    size_t n = dsm_req_encode(buf, sizeof buf, &r);
    cor_req_t sreq;
    err = cor_sendI_typed(svc, D.ctx, (int)r.id, COR_BYTE, buf, n, &sreq);
    if (!err) err = cor_wait(&sreq, NULL);
    if (!err) atomic_fetch_add(&D.remote_ops, 1);
    return err;
}

/* ---- Barriers --------------------------------------------------------------------------- */

/* Under D.lock. */
static struct cor_dsm_barrier *bar_find(uint64_t id, bool make)
{
    for (struct cor_dsm_barrier *b = D.bars; b; b = b->next)
        if (b->id == id) return b;
    if (!make) return NULL;
    struct cor_dsm_barrier *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->id = id;
    b->next = D.bars;
    D.bars = b;
    return b;
}

static void bar_free(struct cor_dsm_barrier *b)
{
    dsm_shm_bar_leave(b->sb);
    free(b->members);
    free(b);
}

/* The creation number of barrier name `id` here (1, 2, ...), or 0 without memory; D.lock. */
static unsigned bar_gen_next(uint64_t id)
{
    struct bar_gen *g = D.bar_gens;
    while (g && g->id != id)
        g = g->next;
    if (!g && (g = calloc(1, sizeof *g))) {
        g->id = id;
        g->next = D.bar_gens;
        D.bar_gens = g;
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
    if (!is_up()) return COR_ESTATE;
    if (!name_ok(name) || local_tasks < 1 || !bar) return COR_EINVAL;
    int n = 0, *members = malloc((size_t)D.size * sizeof *members);
    if (!members) return COR_ENOMEM;
    int err = COR_OK;
    if (ldom == COR_IDP_NULL) {
        for (int r = 0; r < D.size; r++)
            members[n++] = r;
    } else {
        int size = 0;
        err = cor_ldomain_size(ldom, &size);
        bool *seen = calloc((size_t)D.size, sizeof *seen);
        if (!err && !seen) err = COR_ENOMEM;
        for (int i = 0; !err && i < size; i++) {
            cor_idp_t m;
            err = cor_ldomain_member(ldom, i, &m);
            if (err) break;
            unsigned d = cor_idp_domain(m);
            if (cor_idp_macro(m) != D.session || d >= (unsigned)D.size) continue;
            if (!seen[d]) members[n++] = (int)d;
            seen[d] = true;
        }
        free(seen);
        qsort(members, (size_t)n, sizeof *members, cmp_int);
    }
    int pos = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == D.rank) pos = i;
    if (!err && pos < 0) err = COR_EINVAL;
    if (err) {
        free(members);
        return err;
    }
    uint64_t id = dsm_hash(name, strlen(name));
    lock_or_die(&D.lock);
    struct cor_dsm_barrier *b = bar_find(id, true);
    if (!b)
        err = COR_ENOMEM;
    else if (b->created)
        err = COR_EEXIST;
    if (!err) {
        b->created = true;
        b->members = members;
        dsm_bar_setup(&b->st, n, pos, local_tasks);
        unsigned gen = bar_gen_next(id);
        if (gen && D.shm && n > 1) b->sb = dsm_shm_bar_join(D.session, id, gen);
        for (int i = 0; i < n; i++)
            if (atomic_load(&D.dead[members[i]])) b->err = COR_EPEERDEAD;
        b->handle = dsm_handle_put(DSM_H_BARRIER, b);
        if (!b->handle) {
            b->created = false;
            b->members = NULL;
            dsm_shm_bar_leave(b->sb);
            b->sb = NULL;
            err = COR_ENOMEM;
        }
        *bar = AS_HANDLE(cor_dsm_barrier_t, b->handle);
    }
    unlock_or_die(&D.lock);
    if (err) free(members);
    return err;
}

/* Sends barrier messages as the barrier mailbox's task, from whichever thread calls. */
static int bar_send(uint64_t id, const struct dsm_bar_msg *m, int n);

/* Under D.lock: turns the messages' member positions into domain ranks, so they can be sent
 * after the lock is released without touching b (once an episode completed, a task of this
 * domain may destroy the barrier). */
static void bar_resolve(const struct cor_dsm_barrier *b, struct dsm_bar_msg *m, int n)
{
    for (int i = 0; i < n; i++)
        m[i].to = b->members[m[i].to];
}

/* Wakes the barrier waiters; D.lock held. A driver polling the routes sees bar_events move. */
static void bar_wake(void)
{
    atomic_fetch_add(&D.bar_events, 1);
    pthread_cond_broadcast(&D.bar_cv);
}

/* Whether episode `epoch` of b ended or failed; D.lock held. */
static bool bar_over(struct cor_dsm_barrier *b, uint64_t epoch)
{
    if (b->st.epoch != epoch || b->err) return true;
    for (int i = 0; i < b->st.n; i++)
        if (atomic_load(&D.dead[b->members[i]])) {
            b->err = COR_EPEERDEAD;
            bar_wake();
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
        atomic_fetch_add(&D.dropped, 1);
        return;
    }
    struct dsm_bar_msg msgs[DSM_MAX_ROUNDS];
    int nmsg = 0;
    bool completed = false;
    lock_or_die(&D.lock);
    struct cor_dsm_barrier *b = bar_find(r.obj, true);
    if (b && dsm_bar_recv(&b->st, r.offset) == COR_OK && b->created && !b->err) {
        nmsg = dsm_bar_advance(&b->st, msgs, &completed);
        bar_resolve(b, msgs, nmsg);
        if (completed) bar_wake();
    } else if (!b || b->st.n > 0) {
        atomic_fetch_add(&D.dropped, 1);
    }
    unlock_or_die(&D.lock);
    if (nmsg) bar_send(r.obj, msgs, nmsg);
}

struct bar_meeting {
    struct cor_dsm_barrier *b;
    uint32_t gen;
    int err;
};

/* Whether a domain waiting in a barrier's file may stop: the episode ended, a member died,
 * or we stop. Reads no state under D.lock (b stays while a task is inside). */
static int bar_met(void *arg)
{
    struct bar_meeting *m = arg;
    if (dsm_shm_bar_passed(m->b->sb, m->gen)) return 1;
    if (atomic_load(&D.stopping)) m->err = COR_ESTATE;
    for (int i = 0; i < m->b->st.n && !m->err; i++)
        if (atomic_load(&D.dead[m->b->members[i]])) m->err = COR_EPEERDEAD;
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
 * core's send lock, which the cached protocol takes under a copy's mutex, and D.lock is held
 * while copies' mutexes are taken). Says only that something happened; bar_watch_over looks. */
static int bar_watch_stop(void *arg)
{
    struct bar_watch *w = arg;
    if (w->over || atomic_load(&D.stopping)) return 1;
    if (atomic_load(&D.bar_events) != w->events) return 1;
    for (int i = 0; i < w->b->st.n; i++)
        if (atomic_load(&D.dead[w->b->members[i]])) return 1;
    return 0;
}

/* Whether the driver's turn is over; outside the core's waits, so D.lock may be taken. */
static bool bar_watch_over(struct bar_watch *w)
{
    if (!bar_watch_stop(w)) return false;
    if (!w->over && !atomic_load(&D.stopping)) {
        w->events = atomic_load(&D.bar_events); /* before the look: no event is missed */
        lock_or_die(&D.lock);
        w->over = bar_over(w->b, w->epoch);
        unlock_or_die(&D.lock);
    }
    return w->over || atomic_load(&D.stopping);
}

/* Holding the driver's role: posts the mailbox's one receive if none is. */
static int bar_post(void)
{
    if (D.bar_rr != COR_REQ_NULL) return COR_OK;
    D.bar_msg = NULL;
    lock_or_die(&D.bar_out.mu);
    int err = cor_recvI_as(D.bar_box, COR_ANY_SOURCE, D.ctx, COR_ANY_TAG, &D.bar_msg, &D.bar_rr);
    unlock_or_die(&D.bar_out.mu);
    return err;
}

/* Holding the driver's role: the receive completed (rc): counts its message, frees it. */
static void bar_landed(int rc, const cor_status_t *st)
{
    if (rc == COR_OK && D.bar_msg) bar_take(D.bar_msg, st->count * cor_type_size(st->type));
    if (D.bar_msg) cor_releaseBuffer(D.bar_msg);
    D.bar_msg = NULL;
}

/* The driver's turn: receives barrier messages (for any barrier) with the mailbox's one
 * receive, polling the routes itself like any waiting task, until episode `epoch` of b is
 * over. The receive outlives the turn: the next driver waits on it. */
static void bar_drive(struct cor_dsm_barrier *b, uint64_t epoch)
{
    struct bar_watch w = {b, epoch, atomic_load(&D.bar_events) - 1, false};
    /* Polls only in the first slice: a long wait (a domain computing meanwhile) would else
     * poll again every WAIT_SLICE_US, and park the listeners for its poll each time. */
    long spin_us = D.poll_us;
    while (!bar_watch_over(&w)) {
        int err = bar_post();
        if (err) {
            lock_or_die(&D.lock);
            if (!b->err) b->err = err;
            unlock_or_die(&D.lock);
            return;
        }
        int done = 0;
        cor_status_t st;
        int rc =
            cor_wait_timeout(&D.bar_rr, spin_us, WAIT_SLICE_US, bar_watch_stop, &w, &done, &st);
        if (!done) {
            spin_us = 0;
            continue;
        }
        spin_us = D.poll_us; /* the episode's next rounds follow soon */
        bar_landed(rc, &st);
    }
}

/* Holding the driver's role: takes every barrier message that came, without waiting. */
static void bar_take_ready(void)
{
    for (;;) {
        if (bar_post()) return; /* the service thread tries again at its next look */
        int done = 0;
        if (cor_peek(D.bar_rr, &done) == COR_OK && !done) return;
        cor_status_t st;
        int rc = cor_test(&D.bar_rr, &done, &st);
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
 */
static void bar_pump(void)
{
    while (atomic_load(&D.bar_pending)) {
        lock_or_die(&D.lock);
        bool mine = !D.bar_driving && !atomic_load(&D.stopping);
        if (mine) D.bar_driving = true;
        unlock_or_die(&D.lock);
        if (!mine) return;
        atomic_store(&D.bar_pending, 0);
        bar_take_ready();
        lock_or_die(&D.lock);
        D.bar_driving = false;
        bar_wake();
        unlock_or_die(&D.lock);
    }
}

/* The barrier mailbox's arrival hook. A thread holding one of our mutexes leaves the message
 * to the service thread (the pump takes D.lock). */
static void bar_on_arrival(void *arg, int flags)
{
    (void)arg;
    (void)flags;
    atomic_store(&D.bar_pending, 1);
    if (tls_locks)
        svc_wake();
    else
        bar_pump();
}

/* The arrival: counts the task in, and if it is the domain's last, sends the first rounds or
 * arrives in the file. An error means the task is not inside. */
static int bar_enter(cor_dsm_barrier_t bar, struct bar_entry *e)
{
    if (!is_up()) return COR_ESTATE;
    struct dsm_bar_msg msgs[DSM_MAX_ROUNDS];
    int nmsg = 0;
    bool completed = false;
    lock_or_die(&D.lock); /* the handle is looked up under it: no destroy in between */
    struct cor_dsm_barrier *b = dsm_handle_get(DSM_H_BARRIER, HANDLE(bar));
    if (!b) {
        unlock_or_die(&D.lock);
        return COR_EINVAL;
    }
    *e = (struct bar_entry){.b = b, .epoch = b->st.epoch};
    int err = b->err;
    if (!err && dsm_bar_arrive(&b->st)) {
        if (b->shm)
            e->meet = true;
        else
            nmsg = dsm_bar_advance(&b->st, msgs, &completed);
    }
    bar_resolve(b, msgs, nmsg);
    uint64_t id = b->id;
    if (!err) b->inside++;
    if (completed) bar_wake();
    unlock_or_die(&D.lock);
    if (err) return err;
    if (e->meet) /* b stays: destroy waits for b->inside */
        e->met = dsm_shm_bar_arrive(b->sb, b->st.n, &e->gen);
    else
        err = bar_send(id, msgs, nmsg);
    lock_or_die(&D.lock);
    if (e->meet && e->met) {
        dsm_bar_done(&b->st);
        bar_wake();
    }
    if (err && !b->err) {
        b->err = err;
        bar_wake();
    }
    unlock_or_die(&D.lock);
    return COR_OK;
}

/* Waits for the episode's end (block), or looks once and moves it on (*done says whether it
 * ended); the episode's result once it did. */
static int bar_step(struct bar_entry *e, bool block, int *done)
{
    struct cor_dsm_barrier *b = e->b;
    if (e->meet && !e->met) {
        struct bar_meeting m = {b, e->gen, COR_OK};
        if (block) {
            shm_wait(bar_met, bar_nap, &m, b->st.n);
        } else if (!bar_met(&m)) {
            cor_progress();
            *done = 0;
            return COR_OK;
        }
        e->met = true;
        lock_or_die(&D.lock);
        if (!m.err)
            dsm_bar_done(&b->st);
        else if (!b->err)
            b->err = m.err;
        bar_wake();
        unlock_or_die(&D.lock);
    }
    lock_or_die(&D.lock);
    /* One waiting task at a time receives the barrier messages of the domain (the driver);
     * the others sleep until their episode ends or the driver's turn does. */
    while (!bar_over(b, e->epoch)) {
        if (!block) {
            unlock_or_die(&D.lock);
            atomic_store(&D.bar_pending, 1); /* messages may wait that no hook saw */
            bar_pump();
            cor_progress();
            lock_or_die(&D.lock);
            if (bar_over(b, e->epoch)) break;
            unlock_or_die(&D.lock);
            *done = 0;
            return COR_OK;
        }
        if (!D.bar_driving && !b->shm) {
            D.bar_driving = true;
            unlock_or_die(&D.lock);
            bar_drive(b, e->epoch);
            lock_or_die(&D.lock);
            D.bar_driving = false;
            bar_wake(); /* another waiter may drive now */
            unlock_or_die(&D.lock);
            bar_pump(); /* what came as the turn ended */
            lock_or_die(&D.lock);
            continue;
        }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += SECTION_WAIT_NS;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&D.bar_cv, &D.lock, &t);
        if (rc && rc != ETIMEDOUT) abort();
    }
    int err = b->st.epoch != e->epoch ? COR_OK : b->err;
    if (!err && b->sb && !b->shm_checked) { /* before any task of the domain arrives again */
        b->shm = dsm_shm_bar_all_here(b->sb, b->st.n);
        b->shm_checked = true;
    }
    b->inside--;
    unlock_or_die(&D.lock);
    if (done) *done = 1;
    return err;
}

COR_API int cor_dsm_barrier_wait(cor_dsm_barrier_t bar)
{
    struct bar_entry e;
    int err = bar_enter(bar, &e);
    return err ? err : bar_step(&e, true, NULL);
}

COR_API int cor_dsm_barrier_waitI(cor_dsm_barrier_t bar, cor_dsm_req_t *req)
{
    if (!req) return COR_EINVAL;
    *req = NULL;
    struct cor_dsm_op *o = nb_alloc();
    if (!o) return COR_ENOMEM;
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->bar_in = true;
    return run_nb(o, bar_enter(bar, &o->bar), req);
}

COR_API int cor_dsm_barrier_destroy(cor_dsm_barrier_t bar)
{
    if (!is_up()) return COR_ESTATE;
    lock_or_die(&D.lock);
    struct cor_dsm_barrier *b = dsm_handle_get(DSM_H_BARRIER, HANDLE(bar));
    if (!b || b->st.arrived > 0 || b->inside > 0) {
        unlock_or_die(&D.lock);
        return b ? COR_EBUSY : COR_EINVAL;
    }
    dsm_handle_take(DSM_H_BARRIER, b->handle, false);
    for (struct cor_dsm_barrier **p = &D.bars; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    unlock_or_die(&D.lock);
    bar_free(b);
    return COR_OK;
}

/* ---- The service ------------------------------------------------------------------------ */

enum reap_how { REAP_WAIT, REAP_PEEK /* makes no progress */ };

/* Gives back what a send of p held: its buffer (kept for reuse or freed), or its reference
 * on the object it read from. */
static void pend_free(const struct pend *p)
{
    if (p->obj)
        res_put(p->obj);
    else
        sbuf_put(p->buf);
}

/* Frees o's sends that completed (REAP_WAIT: waits for every one); o->mu held. */
static void outbox_reap(struct outbox *o, enum reap_how how)
{
    for (size_t i = 0; i < o->n;) {
        int done = 1;
        if (how == REAP_WAIT)
            cor_wait(&o->pend[i].req, NULL);
        else if (cor_peek(o->pend[i].req, &done) == COR_OK && done)
            cor_test(&o->pend[i].req, &done, NULL);
        if (!done) {
            i++;
            continue;
        }
        pend_free(&o->pend[i]);
        o->pend[i] = o->pend[--o->n];
    }
}

/* Sends p's buffer as task `as` to `to` in context ctx; o->mu held. p->buf is malloc'd and
 * ours until the send completes, or (p->obj) the memory of an object the caller holds a
 * reference to for the send, given back when it completes. */
static void outbox_send_in(struct outbox *o, cor_idp_t as, cor_idp_t to, cor_idp_t ctx,
                           uint32_t tag, struct pend p, size_t n)
{
    if (cor_sendI_as(as, to, ctx, (int)tag, COR_BYTE, p.buf, n, &p.req) != COR_OK) {
        pend_free(&p); /* the peer died or left: nobody waits for this any more */
        return;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        struct pend *more = realloc(o->pend, cap * sizeof *more);
        if (!more) {
            cor_wait(&p.req, NULL);
            pend_free(&p);
            return;
        }
        o->pend = more;
        o->cap = cap;
    }
    o->pend[o->n++] = p;
}

/* Sends buf (malloc'd, ours until the send completes) as task `as` to `to`; o->mu held. */
static void outbox_send(struct outbox *o, cor_idp_t as, cor_idp_t to, uint32_t tag, void *buf,
                        size_t n)
{
    outbox_send_in(o, as, to, D.ctx, tag, (struct pend){.buf = buf}, n);
}

/* Waits for o's sends and frees what it holds. */
static void outbox_clear(struct outbox *o)
{
    lock_or_die(&o->mu);
    outbox_reap(o, REAP_WAIT);
    free(o->pend);
    o->pend = NULL;
    o->n = o->cap = 0;
    unlock_or_die(&o->mu);
}

/* Sends buf (malloc'd, ours until the send completes) from the service to `to`. */
static void svc_send(cor_idp_t to, uint32_t tag, void *buf, size_t n)
{
    lock_or_die(&D.svc_out.mu);
    outbox_send(&D.svc_out, D.svc, to, tag, buf, n);
    unlock_or_die(&D.svc_out.mu);
}

/* all: waits for every send; else frees those that completed, without polling the routes (a
 * drain runs where they were just polled) */
static void reap(bool all)
{
    lock_or_die(&D.svc_out.mu);
    outbox_reap(&D.svc_out, all ? REAP_WAIT : REAP_PEEK);
    unlock_or_die(&D.svc_out.mu);
}

/* A reply whose data (dlen bytes) is already in place after the header in buf. */
static void reply_buf(cor_idp_t to, uint8_t op, uint8_t type, uint32_t id, int status,
                      uint64_t value, unsigned char *buf, size_t dlen)
{
    struct dsm_rep p = {.op = op,
                        .type = type,
                        .status = status,
                        .id = id,
                        .value = value,
                        .data_len = status ? 0 : dlen};
    size_t n = dsm_rep_encode(buf, DSM_REP_HDR + dlen, &p);
    if (n == 0) {
        free(buf);
        return;
    }
    svc_send(to, id, buf, n);
}

static void reply(cor_idp_t to, const struct dsm_req *r, int status, uint64_t value,
                  const void *data, size_t dlen)
{
    if (status) dlen = 0;
    unsigned char *buf = malloc(DSM_REP_HDR + dlen);
    if (!buf) return; /* the client sees its home as unresponsive; nothing better to do */
    if (dlen) memcpy(buf + DSM_REP_HDR, data, dlen);
    reply_buf(to, r->op, r->type, r->id, status, value, buf, dlen);
}

static void grant(const struct dsm_grant *g)
{
    struct dsm_req r = {.op = DSM_OP_LOCK_ACQ, .id = g->id};
    reply(g->who, &r, g->status, 0, NULL, 0);
}

static struct dir_entry **dir_slot(enum res_kind kind, const char *name, size_t len)
{
    struct dir_entry **p = &D.dir[dsm_hash(name, len) % DIR_BUCKETS];
    for (; *p; p = &(*p)->next)
        if ((*p)->kind == kind && strlen((*p)->name) == len && !memcmp((*p)->name, name, len))
            break;
    return p;
}

static void qerr_note_locked(cor_idp_t who, int err)
{
    for (struct qerr *q = D.qerrs; q; q = q->next)
        if (q->who == who) return; /* the first error is kept */
    if (D.nqerrs >= QERR_MAX) return;
    struct qerr *q = malloc(sizeof *q);
    if (!q) return;
    *q = (struct qerr){D.qerrs, who, err};
    D.qerrs = q;
    D.nqerrs++;
}

static int qerr_take_locked(cor_idp_t who)
{
    for (struct qerr **p = &D.qerrs; *p; p = &(*p)->next)
        if ((*p)->who == who) {
            struct qerr *q = *p;
            int err = q->err;
            *p = q->next;
            free(q);
            D.nqerrs--;
            return err;
        }
    return COR_OK;
}

static void qerr_note(cor_idp_t who, int err)
{
    lock_or_die(&D.qmu);
    qerr_note_locked(who, err);
    unlock_or_die(&D.qmu);
}

static int qerr_take(cor_idp_t who)
{
    lock_or_die(&D.qmu);
    int err = qerr_take_locked(who);
    unlock_or_die(&D.qmu);
    return err;
}

static struct addq **addq_slot(cor_idp_t who)
{
    struct addq **p = &D.addqs;
    while (*p && (*p)->who != who)
        p = &(*p)->next;
    return p;
}

/* An add of `who` to a cached object enters a directory (service thread). COR_ENOMEM if it
 * cannot be counted: then it is not applied either. */
static int add_begin(cor_idp_t who)
{
    lock_or_die(&D.qmu);
    struct addq **p = addq_slot(who);
    if (!*p && (*p = calloc(1, sizeof **p))) (*p)->who = who;
    int err = *p ? COR_OK : COR_ENOMEM; /* not after the unlock: add_done may free it then */
    if (*p) (*p)->pending++;
    unlock_or_die(&D.qmu);
    return err;
}

/* An add of `who` to a cached object was applied (or refused with err): in whatever thread
 * moved the directory, under the object's mutex. The last one answers a QUIET held back. */
static void add_done(cor_idp_t who, int err)
{
    struct dsm_req q = {.op = DSM_OP_QUIET};
    bool answer = false;
    int qerr = COR_OK;
    lock_or_die(&D.qmu);
    if (err) qerr_note_locked(who, err);
    struct addq **p = addq_slot(who);
    struct addq *a = *p;
    if (a && --a->pending == 0) {
        answer = a->quiet;
        q.id = a->quiet_id;
        if (answer) qerr = qerr_take_locked(who);
        *p = a->next;
        free(a);
    }
    unlock_or_die(&D.qmu);
    if (answer) reply(who, &q, qerr, 0, NULL, 0);
}

/* A QUIET from `who` (service thread): answered now unless adds of it to cached objects still
 * wait in a directory (add_done answers it then). */
static void quiet_serve(cor_idp_t who, const struct dsm_req *r)
{
    lock_or_die(&D.qmu);
    struct addq *a = *addq_slot(who);
    if (a) {
        a->quiet = true;
        a->quiet_id = r->id;
    }
    int err = a ? COR_OK : qerr_take_locked(who);
    unlock_or_die(&D.qmu);
    if (!a) reply(who, r, err, 0, NULL, 0);
}

static void serve_obj(cor_idp_t src, const struct dsm_req *r)
{
    struct res *x = res_get(r->obj, RES_OBJ);
    if (r->op == DSM_OP_ADD) {
        int err = COR_ENOTFOUND;
        if (x && x->protocol == COR_DSM_CACHED) {
            /* its turn comes through the directory; the sender's QUIET waits for it */
            err = add_begin(src);
            if (!err) serve_cached_op(x, src, r);
        } else if (x) {
            err = obj_apply(x, r, NULL, NULL);
        }
        if (err) qerr_note(src, err);
        if (x) res_put(x);
        return;
    }
    if (!x) {
        reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
        return;
    }
    if (x->protocol == COR_DSM_CACHED) {
        serve_cached_op(x, src, r);
        res_put(x);
        return;
    }
    size_t olen = dsm_obj_out_len(r);
    unsigned char *buf = malloc(DSM_REP_HDR + olen);
    if (!buf) {
        res_put(x);
        reply(src, r, COR_ENOMEM, 0, NULL, 0);
        return;
    }
    uint64_t value = 0;
    int err = obj_apply(x, r, buf + DSM_REP_HDR, &value);
    res_put(x);
    reply_buf(src, r->op, r->type, r->id, err, value, buf, olen);
}

static void serve_info(cor_idp_t src, const struct dsm_req *r, const cor_dsm_info_t *info,
                       cor_idp_t idp)
{
    unsigned char data[DSM_INFO_HDR + COR_NAME_MAX];
    size_t n = dsm_info_encode(data, sizeof data, info);
    reply(src, r, n ? COR_OK : COR_EPROTO, idp, data, n);
}

static void serve_dir(cor_idp_t src, const struct dsm_req *r)
{
    char name[COR_NAME_MAX];
    memcpy(name, r->name, r->name_len);
    name[r->name_len] = '\0';
    if (dir_home(name) != D.rank) {
        reply(src, r, COR_EINVAL, 0, NULL, 0); /* misrouted */
        return;
    }
    struct dir_entry **p =
        dir_slot(r->op == DSM_OP_LOCK_OPEN ? RES_LOCK : RES_OBJ, name, r->name_len);
    struct dir_entry *e = *p;
    switch (r->op) {
    case DSM_OP_DIR_PUT:
        /* Only the home registers its objects. */
        if (!our_idp(r->obj) || cor_idp_domain(r->obj) != cor_idp_domain(src) ||
            r->flags > COR_DSM_CACHED) {
            reply(src, r, COR_EINVAL, 0, NULL, 0);
            return;
        }
        if (e) {
            reply(src, r, COR_EEXIST, 0, NULL, 0);
            return;
        }
        e = calloc(1, sizeof *e);
        if (!e) {
            reply(src, r, COR_ENOMEM, 0, NULL, 0);
            return;
        }
        e->kind = RES_OBJ;
        memcpy(e->name, name, sizeof name);
        e->idp = r->obj;
        e->type = (cor_type_t)r->type;
        e->count = r->count;
        e->protocol = (cor_dsm_protocol_t)r->flags;
        *p = e;
        reply(src, r, COR_OK, 0, NULL, 0);
        return;
    case DSM_OP_DIR_GET: {
        if (!e) {
            reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
            return;
        }
        cor_dsm_info_t info = {.type = e->type,
                               .count = (size_t)e->count,
                               .home = (int)cor_idp_domain(e->idp),
                               .protocol = e->protocol};
        memcpy(info.name, e->name, sizeof info.name);
        serve_info(src, r, &info, e->idp);
        return;
    }
    case DSM_OP_DIR_DEL:
        if (!e || e->idp != r->obj) {
            reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
            return;
        }
        if (cor_idp_domain(e->idp) != cor_idp_domain(src)) {
            reply(src, r, COR_EINVAL, 0, NULL, 0);
            return;
        }
        *p = e->next;
        free(e);
        reply(src, r, COR_OK, 0, NULL, 0);
        return;
    case DSM_OP_LOCK_OPEN: {
        if (e) {
            reply(src, r, COR_OK, e->idp, NULL, 0);
            return;
        }
        struct res *x = res_new(RES_LOCK, name);
        e = calloc(1, sizeof *e);
        int err = !x || !e ? COR_ENOMEM : res_add(x);
        if (err) {
            if (x) res_free(x);
            free(e);
            reply(src, r, err, 0, NULL, 0);
            return;
        }
        e->kind = RES_LOCK;
        memcpy(e->name, name, sizeof name);
        e->idp = cor_idp_make(D.session, COR_KIND_OBJECT, (unsigned)D.rank, x->index);
        *p = e;
        reply(src, r, COR_OK, e->idp, NULL, 0);
        return;
    }
    }
}

static void serve_lock(cor_idp_t src, const struct dsm_req *r)
{
    struct res *x = res_get(r->obj, RES_LOCK);
    if (!x) {
        if (r->op == DSM_OP_LOCK_REL)
            atomic_fetch_add(&D.dropped, 1); /* one-way */
        else
            reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
        return;
    }
    struct dsm_grant g;
    bool granted = false;
    if (r->op == DSM_OP_LOCK_REL) {
        /* one-way: the releasing task checked that it holds the lock (cor_dsm_unlock) */
        if (dsm_lock_release(&x->lock, src, &g, &granted)) atomic_fetch_add(&D.dropped, 1);
        if (granted) grant(&g);
    } else if (atomic_load(&D.dead[cor_idp_domain(src)])) {
        /* a request that arrived after its domain's death was handled: never grant it */
    } else {
        int rc = dsm_lock_acquire(&x->lock, src, r->id, r->op == DSM_OP_LOCK_TRY, &g);
        if (rc == DSM_LOCK_GRANTED)
            reply(src, r, g.status, 0, NULL, 0);
        else if (rc != DSM_LOCK_QUEUED)
            reply(src, r, rc, 0, NULL, 0);
    }
    res_put(x);
}

/* Sends buf (malloc'd, ours until the send completes) as the barrier mailbox's task; first
 * frees the sends that completed, without making progress: it runs on the barrier's path. */
static void bar_send_one(cor_idp_t to, void *buf, size_t n)
{
    lock_or_die(&D.bar_out.mu);
    outbox_reap(&D.bar_out, REAP_PEEK);
    outbox_send(&D.bar_out, D.bar_box, to, 0, buf, n); /* a failure: the death fails it */
    unlock_or_die(&D.bar_out.mu);
}

/* Sends a barrier's messages to the members' barrier mailboxes, as the mailbox's task (not
 * waiting for the sends: over udp a send completes when acknowledged, up to
 * COR_UDP_ACK_DELAY_US later). Their order does not matter: messages are counted per round.
 * m[i].to is a domain rank (bar_resolve): the barrier itself is not touched. */
static int bar_send(uint64_t id, const struct dsm_bar_msg *m, int n)
{
    int err = COR_OK;
    for (int i = 0; i < n; i++) {
        struct dsm_req r = {
            .op = DSM_OP_BARRIER, .obj = id, .offset = (uint64_t)m[i].round, .count = m[i].epoch};
        cor_idp_t box;
        int e = mailbox_of(m[i].to, BAR_NAME, &box);
        unsigned char *buf = e ? NULL : malloc(DSM_REQ_HDR);
        if (!e && !buf) e = COR_ENOMEM;
        if (e) {
            err = err ? err : e;
            continue;
        }
        bar_send_one(box, buf, dsm_req_encode(buf, DSM_REQ_HDR, &r));
    }
    return err;
}

static void serve(const void *buf, size_t len, cor_idp_t src)
{
    struct dsm_req r;
    if (cor_idp_kind(src) != COR_KIND_TASK || cor_idp_domain(src) >= (unsigned)D.size ||
        dsm_req_decode(buf, len, &r) != COR_OK) {
        atomic_fetch_add(&D.dropped, 1);
        return;
    }
    atomic_fetch_add(&D.served, 1);
    switch (r.op) {
    case DSM_OP_GET:
    case DSM_OP_PUT:
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_CAS:
    case DSM_OP_APPEND:
    case DSM_OP_ADD:
        serve_obj(src, &r);
        return;
    case DSM_OP_ADDV:
        for (size_t i = 0; i < r.count; i++) {
            struct dsm_req add;
            if (dsm_addv_get(&r, i, &add) != COR_OK) {
                atomic_fetch_add(&D.dropped, 1);
                qerr_note(src, COR_EPROTO);
                return;
            }
            serve_obj(src, &add);
        }
        return;
    case DSM_OP_QUIET:
        quiet_serve(src, &r);
        return;
    case DSM_OP_QUERY: {
        struct res *x = res_get(r.obj, RES_OBJ);
        if (!x) {
            reply(src, &r, COR_ENOTFOUND, 0, NULL, 0);
            return;
        }
        cor_dsm_info_t info;
        local_info(x, &info);
        res_put(x);
        serve_info(src, &r, &info, r.obj);
        return;
    }
    case DSM_OP_DIR_PUT:
    case DSM_OP_DIR_GET:
    case DSM_OP_DIR_DEL:
    case DSM_OP_LOCK_OPEN:
        serve_dir(src, &r);
        return;
    case DSM_OP_LOCK_ACQ:
    case DSM_OP_LOCK_TRY:
    case DSM_OP_LOCK_REL:
        serve_lock(src, &r);
        return;
    case DSM_OP_BARRIER: /* to the barrier mailbox, not here */
        atomic_fetch_add(&D.dropped, 1);
        return;
    case DSM_OP_C_REQ:
    case DSM_OP_C_ACK:
    case DSM_OP_C_FLUSH:
        serve_cached_home((int)cor_idp_domain(src), &r, src);
        return;
    case DSM_OP_C_GRANT:
    case DSM_OP_C_INV:
        if (cor_idp_domain(r.obj) != cor_idp_domain(src)) { /* only the home speaks for it */
            atomic_fetch_add(&D.dropped, 1);
            return;
        }
        serve_cached_copy(&r);
        return;
    }
}

static void handle_deaths(void)
{
    atomic_store(&D.deaths_pending, 0);
    for (int d = 0; d < D.size; d++) {
        if (!atomic_load(&D.dead[d]) || D.death_done[d]) continue;
        D.death_done[d] = true;
        /* Locks homed here: the dead domain's waiters leave, a held lock passes on. The
         * grants are collected under D.lock and sent after. */
        size_t ng = 0, capg = 0;
        struct dsm_grant *gs = NULL;
        lock_or_die(&D.lock);
        for (unsigned i = 1; i <= RES_MAX; i++) {
            struct res *x = D.res[i];
            if (!x || x->kind != RES_LOCK) continue;
            struct dsm_grant g;
            bool granted;
            dsm_lock_peer_dead(&x->lock, (unsigned)d, &g, &granted);
            if (!granted) continue;
            if (ng == capg) {
                capg = capg ? capg * 2 : 16;
                struct dsm_grant *n = realloc(gs, capg * sizeof *n);
                if (!n) abort(); /* a lock would stay held by the dead: no way to recover */
                gs = n;
            }
            gs[ng++] = g;
        }
        for (struct cor_dsm_barrier *b = D.bars; b; b = b->next) {
            for (int i = 0; b->members && i < b->st.n; i++)
                if (b->members[i] == d && !b->err) {
                    b->err = COR_EPEERDEAD;
                    bar_wake();
                }
        }
        unlock_or_die(&D.lock);
        for (size_t i = 0; i < ng; i++)
            grant(&gs[i]);
        free(gs);
        cached_peer_dead(d);
        lock_or_die(&D.qmu);
        for (struct qerr **p = &D.qerrs; *p;) {
            if (cor_idp_domain((*p)->who) == (unsigned)d) {
                struct qerr *q = *p;
                *p = q->next;
                free(q);
                D.nqerrs--;
            } else {
                p = &(*p)->next;
            }
        }
        unlock_or_die(&D.qmu);
    }
}

/* Takes the next message off the service task's receive and serves it; false if none is
 * complete. Under the turn. */
static bool serve_next(void)
{
    if (D.rr == COR_REQ_NULL) {
        D.msg = NULL;
        lock_or_die(&D.svc_out.mu);
        int err = cor_recvI_as(D.svc, COR_ANY_SOURCE, D.ctx, COR_ANY_TAG, &D.msg, &D.rr);
        unlock_or_die(&D.svc_out.mu);
        if (err) return false; /* the service thread tries again at its next look */
    }
    int done = 0;
    if (cor_peek(D.rr, &done) != COR_OK) D.rr = COR_REQ_NULL;
    if (!done) return false;
    cor_status_t st;
    int rc = cor_test(&D.rr, &done, &st);
    void *msg = D.msg;
    D.msg = NULL;
    if (rc == COR_OK && msg) serve(msg, st.count * cor_type_size(st.type), st.source);
    if (msg) cor_releaseBuffer(msg);
    atomic_fetch_add_explicit(&D.tick, 1, memory_order_relaxed);
    return true;
}

static __thread bool tls_draining;

/*
 * Serves what came to the service task, and deaths, in the calling thread, unless another
 * thread is at it (the turn, taken without waiting): that one sees `pending` and serves it
 * too. Called by the arrival hook in whatever thread polled the message in (a task waiting
 * in the core or in a section start, a listener), so a protocol message is answered without
 * waking a thread; and by the service thread for what the hook left to it.
 */
static void drain(void)
{
    while (atomic_load(&D.pending)) {
        if (pthread_mutex_trylock(&D.turn_mu)) return;
        if (D.closed) { /* cor_dsm_finalize: the service task receives no more */
            pthread_mutex_unlock(&D.turn_mu);
            return;
        }
        tls_draining = true;
        while (atomic_exchange(&D.pending, 0)) {
            while (serve_next())
                ;
            if (atomic_load(&D.ndirect)) direct_reap();
            if (atomic_load(&D.deaths_pending)) handle_deaths();
            reap(false);
        }
        tls_draining = false;
        pthread_mutex_unlock(&D.turn_mu);
    }
}

static void svc_wake(void)
{
    atomic_store(&D.pending, 1);
    pthread_mutex_lock(&D.svc_mu);
    pthread_cond_signal(&D.svc_cv);
    pthread_mutex_unlock(&D.svc_mu);
}

/* A listener lingers only while the machine has a CPU for it: spinning beside computing
 * threads would use up its share of the CPUs, and the scheduler then keeps it off them for
 * milliseconds just when the next request comes (seen: 6 ms, for a request served in 0.2 us),
 * where a listener that sleeps between requests is woken in tens of microseconds. The kernel
 * tells how many threads are runnable right now (/proc/loadavg's fourth field), cheaply
 * enough to look before each linger and every LINGER_LOOK_CALLS polls of it. */
#define LINGER_LOOK_CALLS 256 /* ~100 us of polling */
#define LINGER_BUSY_LOOKS 2   /* in a row, so a thread woken for a moment does not count */

/* Whether more threads than CPUs are runnable now, this one included; false if unknown. */
static bool cpus_busy(void)
{
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    /* "0.52 0.58 0.59 3/467 12345": the fourth field, found by its spaces (the load averages'
     * decimal point is not the locale's) */
    const char *f = buf;
    for (int i = 0; i < 3 && f; i++)
        if ((f = strchr(f, ' '))) f++;
    char *end;
    long running = f ? strtol(f, &end, 10) : 0;
    return f && end != f && *end == '/' && running > D.ncpus;
}

struct linger {
    uint64_t mark; /* D.tick when the poll began */
    unsigned calls;
    int busy; /* looks in a row that found the CPUs busy */
};

static int served_since(void *arg)
{
    struct linger *l = arg;
    if (atomic_load_explicit(&D.tick, memory_order_relaxed) != l->mark || atomic_load(&D.stopping))
        return 1;
    if (++l->calls % LINGER_LOOK_CALLS) return 0;
    l->busy = cpus_busy() ? l->busy + 1 : 0;
    return l->busy >= LINGER_BUSY_LOOKS;
}

static __thread bool tls_lingering;

/* A listener brought a request: no task of the domain polls. Requests come in streams (a
 * remote task's next operation follows its reply within a round trip), so the listener polls
 * on until COR_DSM_SPIN_US pass without one, and serves the next at once instead of after its
 * own wake-up; unless the CPUs are busy (above). */
static void linger(void)
{
    if (cpus_busy()) return;
    tls_lingering = true;
    struct linger l = {0};
    do
        l.mark = atomic_load_explicit(&D.tick, memory_order_relaxed);
    while (cor_poll_until(served_since, &l, D.poll_us) == 1 && l.busy < LINGER_BUSY_LOOKS &&
           !atomic_load(&D.stopping));
    tls_lingering = false;
}

/* The service task's arrival hook (cor_task_on_arrival). A thread holding one of our
 * mutexes leaves the message to the service thread; one already draining, to itself. */
static void on_arrival(void *arg, int flags)
{
    (void)arg;
    atomic_store(&D.pending, 1);
    if (tls_draining) return;
    if (tls_locks) {
        svc_wake();
        return;
    }
    drain();
    if ((flags & COR_ARRIVAL_LISTENER) && !tls_lingering) linger();
}

static void set_ready(int v)
{
    lock_or_die(&D.ready_mu);
    D.ready = v;
    pthread_cond_broadcast(&D.ready_cv);
    unlock_or_die(&D.ready_mu);
}

/* The service thread: serves what the hook left to it (arrivals in threads holding our
 * mutexes, deaths), and looks anyway every WAIT_SLICE_US (a receive it could not post). */
static void *service(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "cor-dsm", 0, 0, 0); /* for top -H, perf, gdb */
    cor_thread_attentive(); /* what it serves, it serves while every task computes */
    set_ready(1);
    pthread_mutex_lock(&D.svc_mu);
    while (!atomic_load(&D.stopping)) {
        if (!atomic_load(&D.pending)) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += (long)WAIT_SLICE_US * 1000;
            while (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
            }
            int rc = pthread_cond_timedwait(&D.svc_cv, &D.svc_mu, &t);
            if (rc && rc != ETIMEDOUT) abort();
        }
        pthread_mutex_unlock(&D.svc_mu);
        atomic_store(&D.pending, 1);
        drain();
        bar_pump(); /* barrier messages a thread holding our mutexes left here */
        pthread_mutex_lock(&D.svc_mu);
    }
    pthread_mutex_unlock(&D.svc_mu);
    pthread_mutex_lock(&D.turn_mu);
    D.closed = true; /* hooks still to come do nothing */
    if (D.rr != COR_REQ_NULL) {
        cor_cancel(&D.rr);
        cor_status_t st;
        if (cor_wait(&D.rr, &st) == COR_OK && D.msg) atomic_fetch_add(&D.dropped, 1);
        if (D.msg) cor_releaseBuffer(D.msg);
        D.msg = NULL;
    }
    pthread_mutex_unlock(&D.turn_mu);
    reap(true);
    return NULL;
}

/* ---- Setup ------------------------------------------------------------------------------- */

COR_API int cor_dsm_init(void)
{
    if (!cor_initialized() || atomic_load(&D.up) || D.res) return COR_ESTATE;
    D.rank = cor_domain_rank();
    D.size = cor_domain_count();
    D.session = cor_session();
    /* A context no application message uses: kind "context", domain 4095, index 0xd5. */
    D.ctx = cor_idp_make(D.session, COR_KIND_CONTEXT, COR_MAX_DOMAINS - 1, 0xd5);
    D.dctx = cor_idp_make(D.session, COR_KIND_CONTEXT, COR_MAX_DOMAINS - 1, 0xd6);
    const char *budget = getenv("COR_DSM_CACHE_BYTES");
    atomic_store(&D.cache_budget,
                 budget && *budget ? (size_t)strtoull(budget, NULL, 10) : DEFAULT_CACHE_BYTES);
    const char *spin = getenv("COR_DSM_SPIN_US");
    D.poll_us = spin && *spin ? strtol(spin, NULL, 10) : -1; /* -1: the core's COR_SPIN_US */
    if (D.poll_us < -1) D.poll_us = 0;
    const char *shm = getenv("COR_DSM_SHM");
    D.shm = !(shm && !strcmp(shm, "0"));
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    D.ncpus = ncpus > 0 ? (int)ncpus : 1;
    D.svcs = calloc((size_t)D.size, sizeof *D.svcs);
    D.bar_boxes = calloc((size_t)D.size, sizeof *D.bar_boxes);
    D.dead = calloc((size_t)D.size, sizeof *D.dead);
    D.death_done = calloc((size_t)D.size, sizeof *D.death_done);
    D.res = calloc(RES_MAX + 1, sizeof *D.res);
    if (!D.svcs || !D.bar_boxes || !D.dead || !D.death_done || !D.res) return COR_ENOMEM;
    int err = cor_task_reserve(SVC_NAME, &D.svc);
    if (err) return err;
    err = cor_task_reserve(BAR_NAME, &D.bar_box);
    if (err) return err;
    err = cor_domain_on_death_add(on_death, NULL);
    if (err) return err;
    D.ready = 0;
    if (pthread_create(&D.thread, NULL, service, NULL)) return COR_EIO;
    lock_or_die(&D.ready_mu);
    while (D.ready == 0)
        pthread_cond_wait(&D.ready_cv, &D.ready_mu);
    err = D.ready < 0 ? D.ready : COR_OK;
    unlock_or_die(&D.ready_mu);
    if (err) {
        pthread_join(D.thread, NULL);
        return err;
    }
    /* served from now on where messages land (one that came before waits for the hook's
     * first call or the service thread's next look) */
    err = cor_task_on_arrival(D.svc, on_arrival, NULL);
    if (!err) err = cor_task_on_arrival(D.bar_box, bar_on_arrival, NULL);
    if (err) { /* another library took the last hook */
        cor_task_on_arrival(D.svc, NULL, NULL);
        atomic_store(&D.stopping, 1);
        svc_wake();
        pthread_join(D.thread, NULL);
        return err;
    }
    atomic_store(&D.up, 1);
    /* every domain counts itself in the session's file before the barrier: after it, the
     * count says whether all of them share this host */
    if (D.shm && D.size > 1) D.host = dsm_shm_bar_join(D.session, 0, 0);
    err = cor_barrier();
    D.all_here = !err && D.host && dsm_shm_bar_all_here(D.host, D.size);
    /* Every domain's service and barrier mailbox, looked up now that all are reserved: a
     * lookup asks the domain and waits for its answer, which the hooks that send to them
     * must never do (a listener that waited in a hook for an answer it was the one to bring
     * in hung two domains' barriers, each asking the other). A domain already dead is left. */
    for (int r = 0; !err && r < D.size; r++) {
        cor_idp_t x;
        svc_of(r, &x);
        mailbox_of(r, BAR_NAME, &x);
    }
    return err;
}

COR_API int cor_dsm_finalize(void)
{
    if (!atomic_load(&D.up) || atomic_load(&D.stopping)) return COR_ESTATE;
    int err = cor_barrier();
    atomic_store(&D.stopping, 1);
    svc_wake();
    pthread_join(D.thread, NULL);
    cor_task_on_arrival(D.bar_box, NULL, NULL);
    lock_or_die(&D.lock); /* a pump still under way (a hook called before) ends first */
    while (D.bar_driving) {
        unlock_or_die(&D.lock);
        sched_yield();
        lock_or_die(&D.lock);
    }
    D.bar_driving = true; /* for the rest of finalize: later hooks do nothing */
    unlock_or_die(&D.lock);
    if (D.bar_rr != COR_REQ_NULL) { /* no barrier waits now: take the receive back */
        cor_cancel(&D.bar_rr);
        cor_wait(&D.bar_rr, NULL);
        if (D.bar_msg) cor_releaseBuffer(D.bar_msg);
        D.bar_msg = NULL;
    }
    outbox_clear(&D.bar_out);
    for (unsigned i = 1; i <= RES_MAX; i++)
        if (D.res[i]) {
            res_put(D.res[i]);
            D.res[i] = NULL;
        }
    for (int k = 0; k < DIR_BUCKETS; k++)
        while (D.copies[k]) {
            struct copy *c = D.copies[k];
            D.copies[k] = c->next;
            copy_free(c);
        }
    D.direct = NULL;
    atomic_store(&D.ndirect, 0);
    atomic_store(&D.cached_bytes, 0);
    for (int k = 0; k < DIR_BUCKETS; k++)
        while (D.dir[k]) {
            struct dir_entry *e = D.dir[k];
            D.dir[k] = e->next;
            free(e);
        }
    while (D.qerrs)
        qerr_take(D.qerrs->who);
    while (D.addqs) { /* adds still queued in a directory are dropped (README) */
        struct addq *q = D.addqs;
        D.addqs = q->next;
        free(q);
    }
    while (D.bars) {
        struct cor_dsm_barrier *b = D.bars;
        D.bars = b->next;
        bar_free(b);
    }
    while (D.bar_gens) {
        struct bar_gen *g = D.bar_gens;
        D.bar_gens = g->next;
        free(g);
    }
    outbox_clear(&D.svc_out);
    dsm_shm_views_clear();
    dsm_shm_lock_views_clear();
    dsm_shm_bar_leave(D.host);
    D.host = NULL;
    D.all_here = false;
    sbuf_clear();
    dsm_handle_clear();
    D.bar_driving = false; /* (D.stopping keeps a late hook from pumping until the next init) */
    atomic_store(&D.bar_pending, 0);
    /* D.dead and D.svcs stay: the core may still report a death to on_death. */
    atomic_store(&D.up, 0);
    return err;
}

COR_API int cor_dsm_stats_get(cor_dsm_stats_t *stats)
{
    if (!stats) return COR_EINVAL;
    if (!atomic_load(&D.up)) return COR_ESTATE;
    stats->requests_served = atomic_load(&D.served);
    stats->requests_dropped = atomic_load(&D.dropped);
    stats->local_ops = atomic_load(&D.local_ops);
    stats->remote_ops = atomic_load(&D.remote_ops);
    stats->shm_ops = atomic_load(&D.shm_ops);
    stats->grants_direct = atomic_load(&D.grants_direct);
    stats->copy_bytes = atomic_load(&D.copy_bytes);
    uint64_t hits = 0, misses = 0;
    lock_or_die(&D.lock);
    for (int k = 0; k < DIR_BUCKETS; k++)
        for (struct copy *c = D.copies[k]; c; c = c->next) {
            lock_or_die(c->mu);
            hits += c->hits + ((atomic_load(&c->fast) & ~FAST_OPEN) >> 24);
            misses += c->misses;
            unlock_or_die(c->mu);
        }
    for (unsigned i = 1; i <= RES_MAX; i++) {
        struct res *x = D.res[i];
        if (!x || x->kind != RES_OBJ || x->protocol != COR_DSM_CACHED) continue;
        lock_or_die(&x->mu);
        hits += x->hc.hits;
        misses += x->hc.misses;
        unlock_or_die(&x->mu);
    }
    unlock_or_die(&D.lock);
    stats->section_hits = hits;
    stats->section_misses = misses;
    stats->invalidations = atomic_load(&D.invalidations);
    stats->recalls = atomic_load(&D.recalls);
    stats->evictions = atomic_load(&D.evictions);
    stats->cached_bytes = atomic_load(&D.cached_bytes);
    return COR_OK;
}
