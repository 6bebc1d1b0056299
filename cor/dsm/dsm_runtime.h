/*
 * The DSM runtime's shared state and types (dsm.c, dsm_sync.c, dsm_cached.c,
 * dsm_service.c): the resources homed here, copies, barriers, the service's mailbox and
 * outboxes, all in one struct dsm_runtime dsm__rt. Who guards what: the comment at the top of
 * dsm.c.
 */
#ifndef COR_DSM_RUNTIME_H
#define COR_DSM_RUNTIME_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsm_internal.h"

#define DSM__SVC_NAME "cor.dsm"
#define DSM__BAR_NAME "cor.dsm.barrier"
#define DSM__RES_MAX COR_MAX_INDEX /* resource indices 1..65535 per domain */
#define DSM__DIR_BUCKETS 256
#define DSM__GONE_RING 1024      /* destroyed objects remembered (dsm__rt.gone) */
#define DSM__QERR_MAX 65536      /* tasks with unreported add errors kept by a service */
#define DSM__WAIT_SLICE_US 20000 /* the service looks at deaths and stop at least this often */
#define DSM__SHM_WAIT_US 2000    /* a domain waiting on shared memory polls this long first */
#define DSM__SHM_SPIN_LOOKS 256  /* and before that looks this often without polling */

enum dsm__res_kind { DSM__RES_OBJ = 1, DSM__RES_LOCK = 2 };

/*
 * A domain's copy of a cached object (the region handle). Away from the home it lives in
 * dsm__rt.copies until cor_dsm_finalize; at the home it is part of the object (struct dsm__res) and
 * its data is the object's memory.
 */
struct dsm__copy {
    struct dsm__copy *next; /* dsm__rt.copies bucket (dsm__rt.lock) */
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
    _Atomic uint64_t last_use; /* dsm__rt.tick at the last section end: LRU eviction */
    _Atomic int maps;
    _Atomic uint64_t fast; /* the read fast path of a copy homed elsewhere (FAST_*) */
    unsigned char *data;
    struct dsm__res *x; /* at the home: the object */
    /* A grant's data coming straight into `data` (DSM_DIRECT_MIN bytes and more): the receive
     * posted before the request, in dsm__rt.direct meanwhile. Set by the requesting task, taken
     * back by the thread holding the service's turn (*mu both). */
    cor_req_t dreq;
    struct dsm__copy *dnext; /* dsm__rt.direct (dsm__rt.direct_mu) */
    uint8_t dmode;           /* the grant's header came: the mode granted */
    bool dlanded;            /* the data came (dland_err: how) */
    int dland_err;
    bool dinv; /* an invalidation came after the header, before the data (or the task's) */
    bool dinv_keep;
    uint32_t dinv_seq;
    /* A smaller grant coming as the data alone into `data`: the receive of the task that
     * asked (its own; *mu), which lands it. */
    cor_req_t sreq;
    uint8_t smode;   /* the mode asked for, granted by the data's arrival */
    bool scanceled;  /* the service took the receive back (the grant came as a message) */
    bool supgrade;   /* it asked for an upgrade: the grant is an empty message */
    uint32_t grants; /* grants got (*mu), numbered as the home's invalidations name them */
    /* Where a deferred invalidation's acknowledgment goes: -1 the home, else a C_FACK to the
     * writer of a write in three hops (inv_to: c->st.inv's; dinv_to: dinv's). */
    int inv_to, dinv_to;
    /* A write in three hops, at the writer (*mu): the upgrade's grant lands in fbuf
     * (dsm_fgrant_size bytes); it takes effect once every reader it names (fwant) sent its
     * C_FACK of round fseq (facked; they may come first) or died (fwaiting meanwhile). */
    unsigned char *fbuf;
    uint64_t *fwant, *facked;
    uint32_t fseq;
    bool fseq_set;
    bool fwaiting;
    uint8_t fmode;
    bool retired; /* dsm__rt.lock and *mu: in dsm__rt.retired (its object was destroyed) */
    int claims;   /* *mu: non-blocking starts waiting for it (evict() leaves it alone) */
};

struct dsm__res {
    enum dsm__res_kind kind;
    unsigned index;
    _Atomic int refs; /* one for the table, one per user of the moment */
    char name[COR_NAME_MAX];
    cor_dsm_protocol_t protocol;
    pthread_mutex_t mu;   /* guards obj */
    struct dsm_obj obj;   /* RES_OBJ (no data when shm: it is there) */
    struct dsm_shm *shm;  /* a home-only object shared with the host's domains, or NULL */
    struct dsm_lock lock; /* RES_LOCK; the service thread only */
    struct dsm_dir dir;   /* COR_DSM_CACHED: the directory (mu) */
    struct dsm__copy hc;  /* COR_DSM_CACHED: the home's copy (hc.mu = &mu) */
};

struct dsm__dir_entry {
    struct dsm__dir_entry *next;
    enum dsm__res_kind kind;
    char name[COR_NAME_MAX];
    cor_idp_t idp;
    cor_type_t type;
    uint64_t count;
    cor_dsm_protocol_t protocol;
};

struct dsm__qerr {
    struct dsm__qerr *next;
    cor_idp_t who;
    int err;
};

/* A task's adds to cached objects homed here that still wait for their directory turn, and
 * its QUIET, held back until they are applied (dsm__rt.qmu). */
struct dsm__addq {
    struct dsm__addq *next;
    cor_idp_t who;
    uint32_t pending;
    bool quiet;        /* a QUIET came meanwhile: answer it when pending reaches 0 */
    uint32_t quiet_id; /* its request id */
};

struct dsm__pend {
    cor_req_t req;
    void *buf;            /* ours (freed when the send completes), or the memory of: */
    struct dsm__res *obj; /* an object the send reads from; a reference held until it completes */
};

/* The sends made as one reserved task: the core takes one call at a time per task (mu, also
 * held for its receives), and each buffer stays ours until its send completes (pend). */
struct dsm__outbox {
    pthread_mutex_t mu;
    struct dsm__pend *pend;
    size_t n, cap;
};

struct cor_dsm_barrier {
    struct cor_dsm_barrier *next; /* dsm__rt.bars */
    uint64_t id;                  /* hash of the name */
    bool created;                 /* by a local cor_dsm_barrier_create (else only messages) */
    int *members;                 /* domain ranks, ascending */
    int err;                      /* COR_EPEERDEAD once a member died */
    int inside;                   /* tasks in cor_dsm_barrier_wait: no destroy meanwhile */
    int napping;                  /* of them, testers asleep in dsm__bar_nap */
    uint64_t handle;              /* its cor_dsm_barrier_t, once created (dsm__rt.lock) */
    struct dsm_bar st;
    struct dsm_shm_bar *sb; /* its file on this host, if joined */
    bool shm_checked;       /* after the first episode: */
    bool shm;               /* every member joined the file: episodes meet there */
};

/* A task's episode of a barrier, from its arrival to its end. */
struct dsm__bar_entry {
    struct cor_dsm_barrier *b; /* stays while the task is inside (b->inside) */
    uint64_t epoch;
    bool meet; /* the domain's last arrival, to meet the others in the barrier's file */
    bool met;
    uint32_t gen; /* the file's generation it waits for */
};

/* How many times a barrier name was created here: the same count in every member domain,
 * so it names the creation's file (dsm_shm_bar_join). */
struct dsm__bar_gen {
    struct dsm__bar_gen *next;
    uint64_t id;
    unsigned gen;
};

struct dsm_runtime {
    _Atomic int up;
    _Atomic int stopping;
    int rank, size;
    uint32_t session;
    cor_idp_t svc, ctx;
    cor_idp_t dctx; /* grants' data sent straight into copies (no application uses it either) */
    long poll_us;   /* how long a task waiting for a protocol message polls the routes */
    bool shm;       /* home-only objects shared with the host's domains (COR_DSM_SHM) */
    bool lock_keep; /* the locks homed here grant kept locks (COR_DSM_LOCK_KEEP) */
    /* [size] the domains that share this host's memory (cor_domain_local: the bootstrap's
     * answer); shared memory is used with these only, never with a file that another host's
     * domain made in a /dev/shm that happens to be shared (network namespaces) */
    unsigned char *local;
    bool any_local;           /* another domain shares the host: home-only objects get a segment */
    struct dsm_shm_bar *host; /* the session's file, where each domain of the host counts itself */
    bool all_here;            /* every domain did (after init): locks live in shared memory */
    int ncpus;                /* online CPUs: whether a shared-memory wait looks before polling */
    pthread_t thread;
    _Atomic cor_idp_t *svcs; /* [size] services, looked up on first use */
    _Atomic bool *dead;      /* [size] */
    _Atomic int deaths_pending;

    pthread_mutex_t lock;  /* res, next_index, bars (and each barrier's state) */
    struct dsm__res **res; /* [DSM__RES_MAX + 1] */
    unsigned next_index;
    struct cor_dsm_barrier *bars;
    struct dsm__bar_gen *bar_gens;
    pthread_cond_t bar_cv; /* an episode ended or failed, or the driver's turn ended */

    /* the barrier mailbox: one waiting task at a time (the driver) receives on it */
    cor_idp_t bar_box;
    _Atomic cor_idp_t *bar_boxes; /* [size] looked up on first use */
    bool bar_driving;             /* under lock: a task or a pump receives on it */
    int bar_role_waiters;         /* under lock: blocked waiters that would drive */
    _Atomic uint64_t bar_events;  /* bar_wake calls */
    _Atomic int bar_pending;      /* a barrier message came: the mailbox's hook pumps it */
    cor_req_t bar_rr;             /* the driver's */
    void *bar_msg;
    /* Barrier messages leave as the mailbox's task, not the service's: a completion signals
     * its task's sleepers, and as the service's each one woke the service thread, whose short
     * slice preempted the driver (two switches per message on 2 cores). */
    struct dsm__outbox bar_out; /* calls as the mailbox's task */

    /* the service thread's own */
    struct dsm__dir_entry *dir[DSM__DIR_BUCKETS];
    pthread_mutex_t qmu; /* qerrs, nqerrs, addqs: a cached add completes in any thread */
    struct dsm__qerr *qerrs;
    size_t nqerrs;
    struct dsm__addq *addqs;
    bool *death_done; /* [size] */

    struct dsm__outbox svc_out; /* calls as the service task (cor_sendI_as, cor_recvI_as) */
    /* Who receives on the service task: one thread at a time, the one holding turn_mu (see
     * drain). `pending`: something came that nobody has looked at yet. */
    pthread_mutex_t turn_mu;
    _Atomic int pending;
    cor_req_t rr; /* the service task's receive (turn_mu) */
    bool closed;  /* (turn_mu) cor_dsm_finalize took the receive back */
    void *msg;
    pthread_mutex_t svc_mu; /* the service thread sleeps on svc_cv */
    pthread_cond_t svc_cv;
    struct dsm__copy *copies[DSM__DIR_BUCKETS]; /* copies of objects homed elsewhere (lock) */
    struct dsm__copy *retired; /* copies of objects destroyed since (lock), kept while
                             something involves them (copy_retire) */
    _Atomic int evicting;      /* evict() calls working on copies they listed */
    /* The last GONE_RING objects destroyed elsewhere, in order (lock): a map whose query was
     * answered before the news came must not keep a copy of it (cor_dsm_map). */
    cor_idp_t gone[DSM__GONE_RING];
    uint64_t ngone;
    pthread_mutex_t direct_mu; /* direct (a leaf: nothing is taken under it) */
    struct dsm__copy *direct;  /* copies whose grant's data is on its way */
    _Atomic int ndirect;
    _Atomic uint64_t grants_direct;
    _Atomic uint64_t grants_task;
    _Atomic uint64_t writes_3hop; /* upgrades whose readers acknowledged to this domain */
    bool forward;                 /* COR_DSM_FORWARD: this home's directories forward */
    _Atomic size_t cache_budget, cached_bytes;
    _Atomic size_t copy_bytes; /* data allocated for copies homed elsewhere */
    _Atomic uint64_t invalidations, recalls, evictions;
    _Atomic uint64_t tick; /* messages served: a cheap clock for LRU stamps */

    pthread_mutex_t ready_mu;
    pthread_cond_t ready_cv;
    int ready; /* 0 starting, 1 up, <0 failed */

    _Atomic uint64_t served, dropped, local_ops, remote_ops, shm_ops;
};
extern struct dsm_runtime dsm__rt;

/* n operations went by request to `home`'s service: remote_ops when that is another domain's
 * (cor_dsm_stats_t), local_ops when it is ours (a cached object's or lock's turn comes through
 * our own service). Operations run in shared memory are shm_ops, never these. */
static inline void dsm__count_requests(int home, uint64_t n)
{
    atomic_fetch_add(home == dsm__rt.rank ? &dsm__rt.local_ops : &dsm__rt.remote_ops, n);
}

/* struct dsm__copy's `fast` word (dsm_cached.c: the read fast path): */
#define DSM__FAST_OPEN (1ull << 63)
#define DSM__FAST_COUNT 0xffffffull
#define DSM__FAST_HIT (1ull << 24)

#define DSM__SECTION_WAIT_NS 10000000L /* waiters look at deaths at least this often */

/* A client operation: a request to a home and its reply, or a lock, section or barrier
 * episode on its way. */
struct cor_dsm_op {
    bool done;
    int result;
    uint8_t op;
    uint32_t id;
    cor_idp_t lock;          /* an acquisition: settles the task's record of held locks */
    struct dsm_shm_lock *lk; /* an acquisition of a lock in shared memory: */
    uint32_t ticket;         /* its ticket */
    int lock_home;
    uint64_t grant;  /* an acquisition by message: the grant's value (dsm_grant_value) */
    bool kept_local; /* an acquisition the domain's kept lock answered (dsm_sync.c) */
    cor_req_t sreq, rreq;
    unsigned char *sbuf, *rbuf;
    size_t rcap;
    void *out; /* reply data (GET, old values) */
    size_t out_len;
    uint64_t *slot;            /* APPEND */
    cor_dsm_info_t *info;      /* QUERY, DIR_GET */
    cor_idp_t *idp_out;        /* DIR_GET, LOCK_OPEN */
    struct dsm__copy *section; /* a non-blocking section start */
    int smode;
    bool claimed; /* it waits for its copy: counted in section->claims */
    bool bar_in;  /* a non-blocking barrier episode: */
    struct dsm__bar_entry bar;
    unsigned char small[DSM_REQ_HDR + COR_NAME_MAX + 32];
    unsigned char rsmall[DSM_REP_HDR + DSM_INFO_HDR + COR_NAME_MAX];
    uint64_t handle; /* its cor_dsm_req_t (after small: op_init leaves it) */
};

/* The API's handle types carry dsm_handle.c's handles, never pointers. */
#define DSM__HANDLE(x) ((uint64_t)(uintptr_t)(x))
#define DSM__AS_HANDLE(type, h) ((type)(uintptr_t)(h))

/* The non-blocking forms' start: the operation and its handle, taken before it runs. */
#define DSM__NB_ALLOC(o, req)                                                                      \
    if (!(req)) return COR_EINVAL;                                                                 \
    struct cor_dsm_op *o = dsm__nb_alloc();                                                        \
    if (!o) return COR_ENOMEM

/* How many of our mutexes the thread holds: an arrival it polls in meanwhile is left to the
 * service thread (serving it here could want one of them again). */
extern __thread int dsm__tls_locks;

static inline void dsm__lock_or_die(pthread_mutex_t *m)
{
    if (pthread_mutex_lock(m)) abort(); /* a broken invariant of ours, not bad input */
    dsm__tls_locks++;
}
static inline void dsm__unlock_or_die(pthread_mutex_t *m)
{
    dsm__tls_locks--;
    if (pthread_mutex_unlock(m)) abort();
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t dsm__now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Waits on cv (mu held) for ns at most (under a second). */
static inline void dsm__wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += ns;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    int rc = pthread_cond_timedwait(cv, mu, &t);
    if (rc && rc != ETIMEDOUT) abort();
}

/* Waits on cv (mu held) for SECTION_WAIT_NS at most: waiters look at deaths that often. */
static inline void dsm__wait_a_while(pthread_cond_t *cv, pthread_mutex_t *mu)
{
    dsm__wait_ns(cv, mu, DSM__SECTION_WAIT_NS);
}

static inline bool dsm__is_up(void)
{
    return atomic_load(&dsm__rt.up) && !atomic_load(&dsm__rt.stopping);
}

static inline bool dsm__name_ok(const char *name)
{
    if (!name) return false;
    size_t n = strnlen(name, COR_NAME_MAX);
    return n > 0 && n < COR_NAME_MAX;
}

/* The domain that keeps a name's directory entry. */
static inline int dsm__dir_home(const char *name)
{
    return (int)(dsm_hash(name, strlen(name)) % (uint64_t)dsm__rt.size);
}

static inline bool dsm__our_idp(cor_idp_t idp)
{
    return cor_idp_kind(idp) == COR_KIND_OBJECT && cor_idp_macro(idp) == dsm__rt.session &&
           cor_idp_domain(idp) < (unsigned)dsm__rt.size && cor_idp_index(idp) != 0;
}

/* dsm.c */
struct cor_dsm_op *dsm__nb_alloc(void);
void dsm__res_free(struct dsm__res *x);
void dsm__res_put(struct dsm__res *x);
struct dsm__res *dsm__res_get(cor_idp_t idp, enum dsm__res_kind kind);
int dsm__res_add(struct dsm__res *x);
struct dsm__res *dsm__res_new(enum dsm__res_kind kind, const char *name);
int dsm__obj_apply(struct dsm__res *x, const struct dsm_req *r, void *out, uint64_t *value);
int dsm__mailbox_of(int rank, const char *name, cor_idp_t *out);
int dsm__svc_of(int rank, cor_idp_t *svc);
struct dsm__copy *dsm__region_of(cor_dsm_region_t rgn);
int dsm__call(int home, const struct dsm_req *r, struct cor_dsm_op *o, size_t rep_data);
int dsm__run_nb(struct cor_dsm_op *o, int err, cor_dsm_req_t *req);
void dsm__local_info(struct dsm__res *x, cor_dsm_info_t *info);
uint32_t dsm__next_id(void);
void dsm__op_init(struct cor_dsm_op *o, const struct dsm_req *r);
int dsm__op_start(struct cor_dsm_op *o, int home, const struct dsm_req *r, size_t rep_data);
void dsm__shm_wait(int (*met)(void *), void (*nap)(void *), void *arg, int domains);
int dsm__lock_turn(void *arg);
int dsm__run_blocking(struct cor_dsm_op *o, int err);
void dsm__adds_flush_home(int home);

/* dsm_sync.c */
unsigned dsm__bar_gen_next(uint64_t id);
void dsm__bar_resolve(const struct cor_dsm_barrier *b, struct dsm_bar_msg *m, int n);
void dsm__bar_wake(void);
void dsm__bar_pump(void);
void dsm__held_settle(struct cor_dsm_op *o);
void dsm__bar_free(struct cor_dsm_barrier *b);
void dsm__bar_on_arrival(void *arg, int flags);
int dsm__bar_step(struct dsm__bar_entry *e, bool block, int *done);
bool dsm__bar_nap(struct dsm__bar_entry *e, long nap_ns, long drive_ns);

/* dsm_cached.c */
void dsm__sbuf_put(void *b);
void dsm__sbuf_clear(void);
int dsm__cached_setup(struct dsm__res *x);
void dsm__copy_free(struct dsm__copy *c);
void dsm__direct_reap(void);
/* claim: a non-blocking start's (its cor_dsm_op's claimed), NULL for a blocking one. */
int dsm__section_begin(struct dsm__copy *c, int mode, bool block, bool *claim);
void dsm__serve_cached_home(int from, const struct dsm_req *r, cor_idp_t src);
void dsm__serve_cached_copy(const struct dsm_req *r);
/* A reader's acknowledgment of a write in three hops, from domain `from`, to this writer. */
void dsm__serve_cached_fack(int from, const struct dsm_req *r);
void dsm__serve_cached_op(struct dsm__res *x, cor_idp_t src, const struct dsm_req *r);
void dsm__cached_destroy(struct dsm__res *x);
void dsm__cached_peer_dead(int d);

/* dsm_service.c */
void dsm__outbox_send_in(struct dsm__outbox *o, cor_idp_t as, cor_idp_t to, cor_idp_t ctx,
                         uint32_t tag, struct dsm__pend p, size_t n);
void dsm__outbox_clear(struct dsm__outbox *o);
void dsm__svc_send(cor_idp_t to, uint32_t tag, void *buf, size_t n);
void dsm__reply_buf(cor_idp_t to, uint8_t op, uint8_t type, uint32_t id, int status, uint64_t value,
                    unsigned char *buf, size_t dlen);
void dsm__reply(cor_idp_t to, const struct dsm_req *r, int status, uint64_t value, const void *data,
                size_t dlen);
void dsm__grant(const struct dsm_grant *g);
void dsm__lock_msg(int to, uint8_t op, cor_idp_t lock, uint32_t gen);
/* The home recalls grant `gen` of `lock` kept by this domain (dsm_sync.c). */
void dsm__lock_recalled(cor_idp_t lock, uint32_t gen);
/* Acquisitions answered by a lock this domain kept (no message). */
uint64_t dsm__lock_retakes(void);
/* cor_dsm_finalize: forgets the locks kept. */
void dsm__locks_kept_clear(void);
int dsm__qerr_take(cor_idp_t who);
void dsm__add_done(cor_idp_t who, int err);
int dsm__bar_send(uint64_t id, const struct dsm_bar_msg *m, int n);
void dsm__svc_wake(void);
void dsm__on_arrival(void *arg, int flags);
void *dsm__service(void *arg);

#endif
