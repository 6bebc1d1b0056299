/*
 * The DSM runtime's shared state and types (dsm.c, dsm_sync.c, dsm_cached.c,
 * dsm_service.c): the resources homed here, copies, barriers, the service's mailbox and
 * outboxes, all in one struct dsm_runtime D. Who guards what: the comment at the top of dsm.c.
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

#define SVC_NAME "cor.dsm"
#define BAR_NAME "cor.dsm.barrier"
#define RES_MAX COR_MAX_INDEX /* resource indices 1..65535 per domain */
#define DIR_BUCKETS 256
#define GONE_RING 1024      /* destroyed objects remembered (D.gone) */
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
    bool dinv; /* an invalidation came after the header, before the data (or the task's) */
    bool dinv_keep;
    uint32_t dinv_seq;
    /* A smaller grant coming as the data alone into `data`: the receive of the task that
     * asked (its own; *mu), which lands it. */
    cor_req_t sreq;
    uint8_t smode;   /* the mode asked for, granted by the data's arrival */
    bool scanceled;  /* the service took the receive back (the grant came as a message) */
    uint32_t grants; /* grants got (*mu), numbered as the home's invalidations name them */
    bool retired;    /* D.lock and *mu: in D.retired (its object was destroyed) */
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
    struct dsm_shm_bar *sb; /* its file on this host, if joined */
    bool shm_checked;       /* after the first episode: */
    bool shm;               /* every member joined the file: episodes meet there */
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

struct dsm_runtime {
    _Atomic int up;
    _Atomic int stopping;
    int rank, size;
    uint32_t session;
    cor_idp_t svc, ctx;
    cor_idp_t dctx; /* grants' data sent straight into copies (no application uses it either) */
    long poll_us;   /* how long a task waiting for a protocol message polls the routes */
    bool shm;       /* home-only objects shared with the host's domains (COR_DSM_SHM) */
    struct dsm_shm_bar *host; /* the session's file, where each domain of the host counts itself */
    bool all_here;            /* every domain did (after init): locks live in shared memory */
    int ncpus;                /* online CPUs: whether a shared-memory wait looks before polling */
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

    struct outbox svc_out; /* calls as the service task (cor_sendI_as, cor_recvI_as) */
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
    struct copy *retired;             /* copies of objects destroyed since (lock), kept while
                                         something involves them (copy_retire) */
    _Atomic int evicting;             /* evict() calls working on copies they listed */
    /* The last GONE_RING objects destroyed elsewhere, in order (lock): a map whose query was
     * answered before the news came must not keep a copy of it (cor_dsm_map). */
    cor_idp_t gone[GONE_RING];
    uint64_t ngone;
    pthread_mutex_t direct_mu; /* direct (a leaf: nothing is taken under it) */
    struct copy *direct;       /* copies whose grant's data is on its way */
    _Atomic int ndirect;
    _Atomic uint64_t grants_direct;
    _Atomic uint64_t grants_task;
    _Atomic size_t cache_budget, cached_bytes;
    _Atomic size_t copy_bytes; /* data allocated for copies homed elsewhere */
    _Atomic uint64_t invalidations, recalls, evictions;
    _Atomic uint64_t tick; /* messages served: a cheap clock for LRU stamps */

    pthread_mutex_t ready_mu;
    pthread_cond_t ready_cv;
    int ready; /* 0 starting, 1 up, <0 failed */

    _Atomic uint64_t served, dropped, local_ops, remote_ops, shm_ops;
};
extern struct dsm_runtime D;

/* struct copy's `fast` word (dsm_cached.c: the read fast path): */
#define FAST_OPEN (1ull << 63)
#define FAST_COUNT 0xffffffull
#define FAST_HIT (1ull << 24)

#define DEFAULT_CACHE_BYTES ((size_t)256 << 20)
#define SECTION_WAIT_NS 10000000L /* waiters look at deaths at least this often */

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

/* The non-blocking forms' start: the operation and its handle, taken before it runs. */
#define NB_ALLOC(o, req)                                                                           \
    if (!(req)) return COR_EINVAL;                                                                 \
    struct cor_dsm_op *o = nb_alloc();                                                             \
    if (!o) return COR_ENOMEM

/* How many of our mutexes the thread holds: an arrival it polls in meanwhile is left to the
 * service thread (serving it here could want one of them again). */
extern __thread int tls_locks;

static inline void lock_or_die(pthread_mutex_t *m)
{
    if (pthread_mutex_lock(m)) abort(); /* a broken invariant of ours, not bad input */
    tls_locks++;
}
static inline void unlock_or_die(pthread_mutex_t *m)
{
    tls_locks--;
    if (pthread_mutex_unlock(m)) abort();
}

/* Waits on cv (mu held) for SECTION_WAIT_NS at most: waiters look at deaths that often. */
static inline void wait_a_while(pthread_cond_t *cv, pthread_mutex_t *mu)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += SECTION_WAIT_NS;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    int rc = pthread_cond_timedwait(cv, mu, &t);
    if (rc && rc != ETIMEDOUT) abort();
}

static inline bool is_up(void)
{
    return atomic_load(&D.up) && !atomic_load(&D.stopping);
}

static inline bool name_ok(const char *name)
{
    if (!name) return false;
    size_t n = strnlen(name, COR_NAME_MAX);
    return n > 0 && n < COR_NAME_MAX;
}

/* The domain that keeps a name's directory entry. */
static inline int dir_home(const char *name)
{
    return (int)(dsm_hash(name, strlen(name)) % (uint64_t)D.size);
}

static inline bool our_idp(cor_idp_t idp)
{
    return cor_idp_kind(idp) == COR_KIND_OBJECT && cor_idp_macro(idp) == D.session &&
           cor_idp_domain(idp) < (unsigned)D.size && cor_idp_index(idp) != 0;
}

/* dsm.c */
struct cor_dsm_op *nb_alloc(void);
void res_free(struct res *x);
void res_put(struct res *x);
struct res *res_get(cor_idp_t idp, enum res_kind kind);
int res_add(struct res *x);
struct res *res_new(enum res_kind kind, const char *name);
int obj_apply(struct res *x, const struct dsm_req *r, void *out, uint64_t *value);
int mailbox_of(int rank, const char *name, cor_idp_t *out);
int svc_of(int rank, cor_idp_t *svc);
struct copy *region_of(cor_dsm_region_t rgn);
int call(int home, const struct dsm_req *r, struct cor_dsm_op *o, size_t rep_data);
int run_nb(struct cor_dsm_op *o, int err, cor_dsm_req_t *req);
void local_info(struct res *x, cor_dsm_info_t *info);
uint32_t next_id(void);
void op_init(struct cor_dsm_op *o, const struct dsm_req *r);
int op_start(struct cor_dsm_op *o, int home, const struct dsm_req *r, size_t rep_data);
void shm_wait(int (*met)(void *), void (*nap)(void *), void *arg, int domains);
int lock_turn(void *arg);
int run_blocking(struct cor_dsm_op *o, int err);
void adds_flush_home(int home);

/* dsm_sync.c */
unsigned bar_gen_next(uint64_t id);
void bar_resolve(const struct cor_dsm_barrier *b, struct dsm_bar_msg *m, int n);
void bar_wake(void);
void bar_pump(void);
void held_settle(struct cor_dsm_op *o);
void bar_free(struct cor_dsm_barrier *b);
void bar_on_arrival(void *arg, int flags);
int bar_step(struct bar_entry *e, bool block, int *done);

/* dsm_cached.c */
void sbuf_put(void *b);
void sbuf_clear(void);
int cached_setup(struct res *x);
void copy_free(struct copy *c);
void direct_reap(void);
int section_begin(struct copy *c, int mode, bool block);
void serve_cached_home(int from, const struct dsm_req *r, cor_idp_t src);
void serve_cached_copy(const struct dsm_req *r);
void serve_cached_op(struct res *x, cor_idp_t src, const struct dsm_req *r);
void cached_destroy(struct res *x);
void cached_peer_dead(int d);

/* dsm_service.c */
void outbox_send_in(struct outbox *o, cor_idp_t as, cor_idp_t to, cor_idp_t ctx, uint32_t tag,
                    struct pend p, size_t n);
void outbox_clear(struct outbox *o);
void svc_send(cor_idp_t to, uint32_t tag, void *buf, size_t n);
void reply_buf(cor_idp_t to, uint8_t op, uint8_t type, uint32_t id, int status, uint64_t value,
               unsigned char *buf, size_t dlen);
void reply(cor_idp_t to, const struct dsm_req *r, int status, uint64_t value, const void *data,
           size_t dlen);
void grant(const struct dsm_grant *g);
int qerr_take(cor_idp_t who);
void add_done(cor_idp_t who, int err);
int bar_send(uint64_t id, const struct dsm_bar_msg *m, int n);
void svc_wake(void);
void on_arrival(void *arg, int flags);
void *service(void *arg);

#endif
