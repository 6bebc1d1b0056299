/*
 * libcor internals shared across the core's files (prefix cor__). Nothing here is exported.
 *
 * Lock order (outer first): task->lock, g.req_lock / g.lock. A port's ownership (hport.c)
 * is no lock: it is only ever tried, except by a raw port's own calls (raw.c) and at close;
 * port->disp_lock is a leaf, held only around the dispatcher's sleep and its signal.
 */
#ifndef COR_INTERNAL_H
#define COR_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cor/cor.h"
#include "boot.h"
#include "cor/route.h"

#define COR_ROUTES_MAX 4
#define COR_HPORTS_MAX 8      /* per route */
#define COR_DEATH_LISTENERS 8 /* cor_domain_on_death_add */

/* ---- logging and lock wrappers (abort only on broken invariants of our own) ---- */
void cor__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define COR_LOCK(m)                                                                                \
    do {                                                                                           \
        if (pthread_mutex_lock(m) != 0) cor__fatal("mutex lock", __FILE__, __LINE__);              \
    } while (0)
#define COR_UNLOCK(m)                                                                              \
    do {                                                                                           \
        if (pthread_mutex_unlock(m) != 0) cor__fatal("mutex unlock", __FILE__, __LINE__);          \
    } while (0)
void cor__fatal(const char *what, const char *file, int line) __attribute__((noreturn));
uint64_t cor__now_ns(void);
void cor__cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *lock, long ns);
void cor__thread_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- buffers (getBuffer): a header before the data says what they hold ---- */
struct cor_bufhdr {
    _Atomic uint64_t magic; /* BUF_MAGIC while live; BUF_DEAD released (buffer.c) */
    cor_type_t type;
    size_t n;              /* elements */
    size_t bytes;          /* n * type size */
    void *base;            /* what the allocator returned */
    struct cor_hport *dma; /* route memory (mem_alloc) to give back with mem_free, or NULL */
};
void *cor__buf_alloc(cor_type_t type, size_t n);
struct cor_bufhdr *cor__buf_hdr(const void *data); /* NULL if not a live core buffer */
void cor__buf_forget_dma(void);

/* ---- requests ---- */
enum req_kind { REQ_SEND, REQ_RECV, REQ_SVC };
enum req_state { RS_PENDING = 0, RS_MATCHED = 1, RS_DONE = 2 };

struct cor_task;
struct cor_hport;

struct cor_req {
    _Atomic cor_req_t handle; /* index | generation << 32 while alive; 0 while free */
    uint32_t slot, gen;       /* survive recycling (req.c) */
    /* everything below is cleared when the request is created */
    enum req_kind kind;
    _Atomic int state;           /* enum req_state; PENDING->MATCHED->DONE by CAS */
    struct cor_task *owner;      /* whose condvar to signal */
    cor_status_t status;         /* written before state becomes DONE */
    struct cor_req *next, *prev; /* posted list (owner task's lock) */

    /* matching criteria (receives) or envelope (sends) */
    cor_idp_t peer; /* source filter (recv) or destination (send) */
    cor_idp_t ctx;
    int tag;
    cor_type_t type;
    size_t count;
    void *buf;          /* user buffer or core buffer */
    size_t cap;         /* bytes available in buf (recv) / message bytes (send) */
    bool core_alloc;    /* recvI with a core buffer: buf allocated at match */
    _Atomic bool eager; /* send: went eager (the route may hold buf until send_done) */
    void **out_ptr;     /* where test/wait stores buf for core_alloc receives */

    _Atomic int remote_rank; /* the domain whose death fails this request, -1 none */

    /* rendezvous state */
    struct cor_hport *hp; /* port the message travels on */
    uint32_t peer_rank;
    uint64_t remote_req;        /* the other side's request handle */
    size_t expect;              /* receiver: bytes to arrive; sender: bytes to send */
    _Atomic size_t done_bytes;  /* receiver: bytes arrived; sender: bytes the route finished
                                   (frames of one message may travel on several ports) */
    bool rma;                   /* data moves by remote write (route put), then F_FIN */
    bool getting;               /* sender: an RTS_GET is out (its F_GOT completes the send);
                                   receiver: the route reads the data (OP_GET), then F_GOT */
    _Atomic bool awaiting_data; /* receiver: CTS sent, data frames or F_FIN to come */
    _Atomic bool awaits;        /* the route was told we wait for peer_rank (cor__await_*) */
    uint64_t raddr, rkey;       /* sender: where to put */
    struct cor_route_mr *mr;    /* registration of buf for the transfer */
    _Atomic int chunks_out;     /* sender: data jobs, frames and puts naming this request */
    _Atomic int send_err;       /* sender: the first error one of them saw */

    /* service calls */
    void *svc_reply;
    size_t svc_reply_len;
};

/* owner: the task the request belongs to (the caller's own, or a reserved one) */
struct cor_req *cor__req_new(enum req_kind kind, struct cor_task *owner);
struct cor_req *cor__req_lookup(cor_req_t h); /* NULL if stale */
void cor__req_free(struct cor_req *r);
/* Completes r with `err` exactly once (from PENDING or MATCHED); returns false if it was
 * already done. Wakes the owner. */
bool cor__req_complete(struct cor_req *r, int err);
/* Completes a request no other thread can know yet (a send done inside its own cor_sendI). */
void cor__req_complete_unseen(struct cor_req *r, int err);
/* Completes a receive the caller took off its owner's posted list, still holding the owner's
 * lock (nobody else can complete it: not cancel, not the peer-death scan): no read-modify-
 * write, the sleepers' count read under the lock they change it under. */
void cor__req_complete_held(struct cor_req *r, int err);
void cor__wakes_defer(bool on); /* a polling loop's completions wake sleepers in batches */
void cor__wakes_flush(void);
/* Waits until r is DONE, making progress meanwhile (spin, then block). */
void cor__req_block(struct cor_req *r);
/* Fails pending requests toward domain `rank`. */
void cor__req_fail_peer(unsigned rank, int err);
/* r (r->hp, r->peer_rank set) now waits for an answer of its peer that nothing the route
 * holds stands for: a rendezvous' clear-to-send or data, a service reply. The route is told
 * (await_peer, route.h), so that it can find a peer that stopped; the wait ends once, at
 * cor__await_end or at r's completion, whichever comes first. */
void cor__await_begin(struct cor_req *r);
void cor__await_end(struct cor_req *r);

/* ---- messages waiting for a receive (unexpected) ---- */
enum umsg_kind { UM_EAGER, UM_RNDV, UM_LOCAL };
struct cor_umsg {
    struct cor_umsg *next, *prev;
    enum umsg_kind kind;
    cor_idp_t src, ctx;
    int tag;
    cor_type_t type;
    size_t count, bytes;
    void *data;           /* UM_EAGER: core buffer holding the payload; UM_RNDV: the tail */
    size_t tail;          /* UM_RNDV: bytes ending the message that came with the RTS */
    int credit;           /* UM_EAGER: credit units to return when it is consumed */
    struct cor_hport *hp; /* where to return the credit / send CTS */
    uint32_t peer_rank;
    uint64_t sreq; /* UM_RNDV: sender's request; UM_LOCAL: sender req handle */
    bool readable; /* UM_RNDV from F_RTS_GET: the data lies at (raddr, rkey) */
    uint64_t raddr, rkey;
    struct cor_req *lsend; /* UM_LOCAL: the local sender's request */
};

/* ---- tasks ---- */
struct cor_task {
    unsigned index;
    bool used;     /* slot taken (g.lock) */
    bool reserved; /* cor_task_reserve: no thread, any thread acts for it */
    char name[COR_NAME_MAX];
    unsigned name_index;
    pthread_t thread;
    bool has_thread, joined;
    cor_task_fn fn;
    void *arg;
    int exit_status;
    _Atomic bool finished;

    pthread_mutex_t lock; /* protects posted, unexpected, waiting */
    pthread_cond_t cond;  /* signalled when one of its requests completes */
    _Atomic int sleepers; /* threads waiting on cond (changed under lock) */
    struct cor_req *posted_head, *posted_tail;
    struct cor_umsg *unexp_head, *unexp_tail;

    cor_port_t port;    /* current soft-port (whoever acts for the task) */
    uint32_t *send_seq; /* per destination domain (g.size entries; task itself) */
    uint32_t local_seq;
    /* Dynamic sessions: this task's sends between their look at the peer and their frame's
     * number (cor__send_start), which cor__peer_reset waits out. */
    _Atomic unsigned numbering;

    /* cor_task_on_arrival (reserved tasks): run where a message for the task landed */
    void (*_Atomic on_arrival)(void *arg, int flags);
    void *on_arrival_arg;
};

extern _Thread_local struct cor_task *cor__task_mine; /* the calling thread's task, or NULL */
struct cor_task *cor__task_adopt_thread(void);        /* makes a task of the calling thread */
static inline struct cor_task *cor__task_self(void)   /* the calling thread's task (main = 0) */
{
    struct cor_task *t = cor__task_mine;
    return __builtin_expect(t != NULL, 1) ? t : cor__task_adopt_thread();
}
struct cor_task *cor__task_current(void);           /* the same, or NULL: never adopts the thread */
struct cor_task *cor__task_reserved(cor_idp_t idp); /* a cor_task_reserve task, or NULL */
void cor__task_adopt_main(void);
void cor__task_forget_self(void);
void cor__task_join_all(void);
int cor__task_find(const char *name, unsigned index, unsigned *out);
struct cor_task *cor__task_get(unsigned index); /* slot, created lazily; NULL out of range */
/* A message for t arrived (queued, matched, or its rendezvous completed): t's arrival hook,
 * if it has one, runs at the thread's next cor__arrivals_run, once it holds no core lock. */
void cor__arrival_note(struct cor_task *t);
void cor__arrivals_run(void);
extern _Thread_local bool cor__listener_thread; /* for the hooks' flags */

/* ---- matching (match.c): pure list operations, caller holds task->lock ---- */
bool cor__match(cor_idp_t want_src, cor_idp_t want_ctx, int want_tag, cor_idp_t src, cor_idp_t ctx,
                int tag);
struct cor_req *cor__posted_take(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag);
/* The same, leaving the state PENDING: the caller completes it before it lets the lock go. */
struct cor_req *cor__posted_unlink(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag);
void cor__posted_append(struct cor_task *t, struct cor_req *r);
bool cor__posted_remove(struct cor_task *t, struct cor_req *r);
struct cor_umsg *cor__unexp_take(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag);
void cor__unexp_append(struct cor_task *t, struct cor_umsg *m);
/* Unlinks every message domain `peer` sent that waits in t (a list through next). */
struct cor_umsg *cor__unexp_take_peer(struct cor_task *t, uint32_t peer);

/* ---- hard ports and routes ---- */
struct peer_link {        /* per (hard port, peer) flow-control state (hport.c) */
    _Atomic int credits;  /* eager credit units we may still spend (proto.h: cor__credit_cost) */
    _Atomic int owed;     /* units we owe the peer, noted by threads that do not own the port */
    _Atomic int owed_own; /* and by its owner: changed only by it (loads and stores, relaxed) */
};

struct send_op; /* a frame queued for or owned by the route (hport.h) */

struct cor_route {
    const struct cor_route_ops *ops;
    char name[32];
    void *dl;
    int nports;
    struct cor_hport *ports[COR_HPORTS_MAX];
    struct cor_hport *raw; /* COR_RAW: the extra port for cor_raw_* */
    unsigned next_map;     /* round-robin for mapped soft-ports */
    int soft_count[COR_HPORTS_MAX];
    bool exclusive[COR_HPORTS_MAX];
};

#define COPY_CACHE 32 /* eager copy blocks kept per hard port */

struct cor_hport {
    struct cor_route *route;
    struct cor_rport *rp;
    int index; /* -1 = raw */
    struct cor_route_caps caps;
    size_t eager_limit;   /* payload bytes */
    size_t chunk;         /* rendezvous data bytes per frame */
    int credit_units;     /* per peer: COR_CREDITS eager messages of eager_limit bytes */
    int credit_threshold; /* units owed that trigger a credit-only frame */
    bool rma;             /* the route offers mem_register + put: rendezvous by remote write */
    bool await_peer;      /* the route has await_peer (route.h): told what we wait for */
    bool get;             /* rma, and the route reads remote memory (get): rendezvous up to
                             COR_GET_MAX bytes are read by their receiver (F_RTS_GET) */

    /* One owner at a time (hport.c): the thread that set `owned` (a listener, a spinning
     * task, the dispatcher, a sender) is the only one that calls the route's send, put and
     * progress on this port, and the only one that touches q_head/q_tail. Another thread's
     * frame goes into `inbox`, lock-free; the owner sends it before letting go. */
    _Atomic bool owned;
    _Atomic(const void *) owner;     /* the owning thread's mark (cor__port_mine) */
    struct send_op *_Atomic inbox;   /* frames of non-owners, newest first */
    struct send_op *q_head, *q_tail; /* the owner's: frames the route pushed back, in order */
    _Atomic bool backlog;            /* q_head != NULL, for the dispatcher and the flush */
    bool dispatching;                /* the owner is pushing the queue */
    pthread_mutex_t disp_lock;       /* the dispatcher sleeps on send_cond under it */
    pthread_cond_t send_cond;        /* backlog appeared */
    struct peer_link *links;         /* [g.size] */
    _Atomic long inflight;           /* send ops the route still holds */

    /* Blocks of eager_limit bytes for eager copies on zero-copy routes, kept for reuse:
     * malloc/free of 32-64 KiB per message made glibc trim and refault its heap (8% of a
     * 32 KiB stream's time went to page faults). */
    pthread_mutex_t copy_lock;
    void *copies[COPY_CACHE];
    int ncopies;

    pthread_t listener, dispatcher;
    bool threads;
    _Atomic bool stop;
    int stop_fd; /* eventfd the listener polls beside the route's descriptor (-1: none) */
    void (*raw_deliver)(struct cor_hport *hp, cor_peer_t peer, const void *f, size_t len);
    void *raw_state;
};

int cor__route_load(const char *name, bool quiet, struct cor_route **out);
int cor__route_has_rma(const struct cor_route_ops *ops);
int cor__route_has_get(const struct cor_route_ops *ops);
int cor__route_has_mem(const struct cor_route_ops *ops);
int cor__route_has_peer_dead(const struct cor_route_ops *ops);
int cor__route_lazy_peers(const struct cor_route_ops *ops); /* takes peers at first contact */
int cor__route_has_wait(const struct cor_route_ops *ops);
int cor__route_has_wake(const struct cor_route_ops *ops);
int cor__route_has_await(const struct cor_route_ops *ops);
int cor__route_has_counters(const struct cor_route_ops *ops);
void cor__route_unload(struct cor_route *r);
/* Loads the plugins of `list` (comma-separated route names) and calls their prepare() in a
 * thread of its own (unless COR_PREPARE=0); cor__route_prepare_wait joins it (no-op if none). */
void cor__route_prepare_start(const char *list);
void cor__route_prepare_wait(void);
struct cor_route *cor__route_find(const char *name); /* NULL: not opened */
int cor__hport_open(struct cor_route *r, int index, struct cor_hport **out);
void cor__hport_close(struct cor_hport *hp);
/* A hard port (hport.c): open, its threads (the listener is progress.c's), close. */
int cor__hport_start(struct cor_hport *hp); /* listener and dispatcher threads */
void cor__hport_stop(struct cor_hport *hp);
/* Port ownership: take it if nobody holds it; give it back, sending what others left in the
 * inbox meanwhile; whether this thread holds it (a callback inside its own progress). */
bool cor__port_own(struct cor_hport *hp);
void cor__port_own_wait(struct cor_hport *hp); /* raw ports' calls, close: owners leave soon */
void cor__port_release(struct cor_hport *hp);
bool cor__port_mine(struct cor_hport *hp);
/* Runs route progress if nobody else is; returns events handled (0 if busy or idle). */
int cor__hport_poll(struct cor_hport *hp);
/* Sends the frame hdr+payload to a peer through hp (inline or queued), with an optional
 * request to complete; used by the protocol and the service calls. */
int cor__frame_send(struct cor_hport *hp, uint32_t peer, const void *hdr, size_t hlen,
                    const void *payload, size_t plen, struct cor_req *complete_on_done);
/* The same with the payload copied first (small control payloads). */
int cor__frame_send_copy(struct cor_hport *hp, uint32_t peer, const void *hdr, size_t hlen,
                         const void *payload, size_t plen);
void cor__upcall_send_done(void *core, void *cookie, int status);
void cor__dispatch_queue(struct cor_hport *hp); /* owner: push the queue (the dispatcher's job) */
void cor__queue_discard(struct cor_hport *hp);  /* closing: what the route never took fails */
/* A message from `peer` that came through hp was consumed: its credit units are owed back. */
void cor__return_credit(struct cor_hport *hp, uint32_t peer, int units);
void *cor__listener_main(void *hp);                /* progress.c: a port's listener thread */
int cor__progress_all(void);                       /* one poll of every hard port */
void cor__listeners_resume(void);                  /* parked listeners go back to the ports now */
void *cor__copy_get(struct cor_hport *hp);         /* an eager_limit-byte block, or NULL */
void cor__copy_put(struct cor_hport *hp, void *b); /* back to the cache, or freed */

/* ---- soft-ports: slots of a table that is never freed, named by slot + generation ---- */
struct cor_port {
    _Atomic cor_port_t handle; /* tag | slot | generation << 32 while open; 0 while free */
    uint32_t slot, gen;        /* survive recycling (port.c) */
    struct cor_port *next_free;
    /* written before the handle is published, read after it was checked */
    struct cor_route *route;
    struct cor_hport *hp;
    int hard_index;
    bool exclusive;
};
/* The task's current soft-port, a mapped one opened when it has none or it was closed. */
struct cor_port *cor__task_port(struct cor_task *t);
void cor__ports_free_all(void); /* at finalize: every handle becomes invalid */

/* ---- protocol (proto.c) ---- */
int cor__send_start(struct cor_task *t, struct cor_req *r);
int cor__recv_start(struct cor_task *t, struct cor_req *r);
void cor__upcall_deliver(void *core, cor_peer_t peer, const void *frame, size_t len);
void cor__upcall_peer_failed(void *core, cor_peer_t peer, int err);
/* connect.c: the routes told where the peers are, all at cor_init or each at first contact. */
enum { PEER_UNKNOWN = 0, PEER_READY = 1, PEER_REFUSED = 2 };
int cor__connect_peers(void); /* cor_init: publishes ours (and adds all, when not lazy) */
int cor__peer_resolve(unsigned peer);
int cor__upcall_need_peer(void *core, cor_peer_t peer);
void cor__connect_fini(void); /* after the ports closed */
void cor__raw_upcall_send_done(struct cor_hport *hp, int status);
int cor__raw_attach(struct cor_hport *hp);
void cor__raw_detach(struct cor_hport *hp); /* dispatcher: push queued frames */
void cor__umsg_free(struct cor_umsg *m);
/* Forgets what this domain kept for rank `peer`'s earlier occupant (proto.c). */
void cor__peer_reset(uint32_t peer);

/* ---- service calls (resources.c): small requests answered by another domain's core ---- */
struct svc_msg {
    uint32_t op;
    int32_t status;
    uint64_t a, b;
    char name[COR_NAME_MAX];
};
int cor__svc_call(unsigned rank, struct svc_msg *m); /* m in/out */
void cor__svc_handle(struct svc_msg *m);             /* answers in place */
void cor__resources_fini(void);

/* Per peer domain: message order across hard ports. Frames from one peer may arrive on
 * several ports at once; messages are matched in the sender's order. */
struct held_frame;
struct peer_state {
    pthread_mutex_t lock; /* protects the fields below and orders matching */
    uint32_t *recv_seq;   /* [nrecv_seq]: next message number per sender task; NULL until
                           * the peer's first message, then as long as the highest task
                           * index heard from needs (proto.c, in_order) */
    uint32_t nrecv_seq;
    struct held_frame *held; /* frames that arrived ahead of their turn */
};

/* ---- counters for cor_stats_get (counters.c): per thread, summed when read ---- */
enum cor_counter {
    C_MSGS_SENT,
    C_MSGS_RECEIVED,
    C_BYTES_SENT,
    C_BYTES_RECEIVED,
    C_EAGER_SENT,
    C_RNDV_SENT,
    C_CREDIT_FRAMES,
    C_CREDIT_STALLS,
    C_FRAMES_DROPPED,
    C_UNEXPECTED_NOW,
    C_UNEXPECTED_BYTES_NOW,
    COR_COUNTERS
};
/* A thread's block (counters.c): one writer, so a relaxed load and store per count. Inline:
 * an 8 B message makes five counts on each side, and a call per count was ~20 instructions. */
struct cor_counter_block {
    _Atomic uint64_t v[COR_COUNTERS];
    struct cor_counter_block *next;
} __attribute__((aligned(64)));
extern _Thread_local struct cor_counter_block *cor__counters_mine; /* NULL until its first count */
void cor__count_first(enum cor_counter c, int64_t n); /* makes the thread's block, then counts */
static inline void cor__count(enum cor_counter c, int64_t n) /* adds n (negative for gauges) */
{
    struct cor_counter_block *b = cor__counters_mine;
    if (__builtin_expect(b == NULL, 0)) {
        cor__count_first(c, n);
        return;
    }
    uint64_t v = atomic_load_explicit(&b->v[c], memory_order_relaxed);
    atomic_store_explicit(&b->v[c], v + (uint64_t)n, memory_order_relaxed);
}
void cor__counters_sum(uint64_t sum[COR_COUNTERS]);

/* ---- the domain (domain.c) ---- */
struct cor_global {
    _Atomic int initialized;
    int rank, size;
    uint64_t cookie;
    uint32_t macro;
    struct cor_boot *boot;
    int max_tasks;
    long spin_ns;
    int credits, credit_threshold;
    long eager_override; /* COR_EAGER_LIMIT, -1 = route default */
    long stripe_min;     /* COR_STRIPE_MIN: rendezvous data this large is striped over ports */
    long get_max;        /* COR_GET_MAX: rendezvous up to this size read by the receiver */
    bool raw_enabled;
    bool dynamic;          /* cor_init_join: peers connect at run time (cor_domain_connect) */
    _Atomic int init_refs; /* cor_init calls sharing a dynamic session, not yet finalized */
    /* cor_domain_connect/leave calls under way (any thread): teardown waits for them. */
    _Atomic int peer_calls;

    pthread_mutex_t lock;    /* tasks table growth, names, death callbacks */
    struct cor_task **tasks; /* [max_tasks] */
    unsigned ntasks;         /* next spawn index */
    int nroutes;
    struct cor_route *routes[COR_ROUTES_MAX];
    _Atomic bool *dead; /* [size] */
    /* [size]: which peers the routes were given (connect.c: PEER_*), when they get them at
     * first contact; NULL when every peer was given at cor_init. */
    _Atomic unsigned char *peer_conn;
    struct peer_state *peers; /* [size] */
    /* One hard port carries every message (one route, one port; raw ports aside): set once
     * the ports are open, before any poll. Its owner is then the only thread that delivers,
     * so frames are matched in order without the peers' locks (proto.c, in_order). */
    bool one_port;
    /* Incarnations (dynamic sessions): ours, random at join, and each rank's current
     * occupant's, learnt with its address (0: unknown, any accepted). Every frame carries
     * both (proto.h), so frames of a rank's earlier occupant, or meant for it, are dropped
     * once the rank is re-admitted (cor_domain_connect after cor_domain_leave). */
    uint32_t epoch;
    _Atomic uint32_t *peer_epoch; /* [size] */
    struct cor_hport *dma_port;   /* getBuffer memory comes from this route's mem_alloc */
    cor_death_fn death_fn;
    void *death_arg;
    /* Libraries' listeners (cor_domain_on_death_add), beside the application's one. */
    struct {
        cor_death_fn fn;
        void *arg;
    } death_listeners[COR_DEATH_LISTENERS];
    int ndeath_listeners;

    /* Adaptive waiting: one task at a time spins on the ports; listeners stay off the fds
     * while it does, so a wake-up doesn't cost a thread hand-off. */
    _Atomic int spinners;
    _Atomic int yielders;           /* waiters yielding to the spinner instead of sleeping */
    int yielders_max;               /* COR_YIELDERS */
    _Atomic uint64_t spin_seen;     /* the spinner's last look at the clock: stale when preempted */
    _Atomic int raw_users;          /* open raw ports: their owners poll, listeners keep off */
    _Atomic uint64_t last_spin_end; /* when the last successful spin ended (0: none lately) */
    long linger_ns;                 /* COR_LINGER_US: listeners stay parked this long after */
    long service_slice_us;          /* COR_SERVICE_SLICE_US: see cor_thread_attentive */
    _Atomic int blocked;            /* tasks asleep in a wait: they need the listeners */
    _Atomic int listeners_parked;   /* listeners waiting on spin_cond (under spin_lock) */
    pthread_mutex_t spin_lock;
    pthread_cond_t spin_cond;
};
extern struct cor_global cor__g;
#define g cor__g

/* Before a send to `peer`: COR_OK at once when the routes know it; else looks it up and
 * adds it to every port (COR_EROUTE/COR_EBOOT/COR_EPEERDEAD when it cannot). */
static inline int cor__peer_ready(unsigned peer)
{
    return !g.peer_conn ||
                   atomic_load_explicit(&g.peer_conn[peer], memory_order_acquire) == PEER_READY
               ? COR_OK
               : cor__peer_resolve(peer);
}

int cor__check_init(void);
void cor__peer_died(unsigned rank, int err);
void cor__peer_gone(unsigned rank, int err, bool notify);
cor_idp_t cor__task_idp(unsigned rank, unsigned index);

#endif
