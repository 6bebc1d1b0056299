/*
 * CoR public API: domains, tasks, ports and asynchronous typed messages.
 *
 * A program is a session of N domains (processes). cor_init() joins the session that
 * cor-run started (environment COR_*), or makes a one-domain session when the program runs
 * alone. Inside a domain, tasks are threads scheduled by the domain core; any task can send to
 * any task of any domain. Every call returns COR_OK (0) or a negative cor_err code;
 * cor_strerror() names it. No call aborts the process on bad input.
 *
 * Thread safety: every call may be made from any task concurrently, except cor_init and
 * cor_finalize, which the program's main thread calls once each.
 */
#ifndef COR_COR_H
#define COR_COR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define COR_API __attribute__((visibility("default")))
#else
#define COR_API
#endif

/* ---- Errors ---------------------------------------------------------------------------- */

/* X(name, value, text): the one list of error codes; generates the enum and cor_strerror.
 * A bad, stale or forged handle of any kind is COR_EINVAL (-4 is no longer used). */
#define COR_ERRNO_MAP(X)                                                                           \
    X(OK, 0, "success")                                                                            \
    X(EAGAIN, -1, "resource temporarily unavailable, try again")                                   \
    X(EINVAL, -2, "invalid argument")                                                              \
    X(ENOMEM, -3, "out of memory")                                                                 \
    X(ETRUNC, -5, "message truncated: receive buffer too small")                                   \
    X(ETYPE, -6, "data type of message and receive differ")                                        \
    X(ECANCELED, -7, "operation canceled")                                                         \
    X(EPEERDEAD, -8, "peer domain died or is unreachable")                                         \
    X(ENOTFOUND, -9, "no such resource or name")                                                   \
    X(EROUTE, -10, "route plugin missing or broken")                                               \
    X(ECLOSED, -11, "port closed")                                                                 \
    X(EBUSY, -12, "resource busy (exclusive or in use)")                                           \
    X(ESTATE, -13, "call not valid in this state (not initialized, already joined...)")            \
    X(ELIMIT, -14, "a configured limit was reached")                                               \
    X(EBOOT, -15, "cannot join the session (bootstrap failed)")                                    \
    X(EIO, -16, "system call failed")                                                              \
    X(EPROTO, -17, "protocol violation from a peer")                                               \
    X(ETIMEDOUT, -18, "timed out")                                                                 \
    X(EEXIST, -19, "name already exists")                                                          \
    X(ENOTSUP, -20, "not supported by this system")

#define COR_ERR_ENUM_(name, value, text) COR_##name = value,
enum cor_err { COR_ERRNO_MAP(COR_ERR_ENUM_) };
#undef COR_ERR_ENUM_

COR_API const char *cor_strerror(int err);

/* ---- Identifiers ----------------------------------------------------------------------- */

/*
 * An idp names any resource universally: the high 32 bits (macro part) say which session it
 * belongs to; the low 32 bits (micro part) say which resource: kind (4 bits), domain number
 * (12 bits) and local index within that domain (16 bits).
 */
typedef uint64_t cor_idp_t;

enum cor_kind {
    COR_KIND_NONE = 0,
    COR_KIND_DOMAIN = 1,
    COR_KIND_TASK = 2,
    COR_KIND_PORT = 3,
    COR_KIND_LDOMAIN = 4, /* logical domain (group) */
    COR_KIND_OBJECT = 5,  /* data object (DSM) */
    COR_KIND_CONTEXT = 6, /* user-made context */
};

/* No resource: what lookups (cor_task_idp, cor_domain_idp, cor_task_self) return on error.
 * As a source or destination of a message it is COR_EINVAL, never a wildcard. */
#define COR_IDP_NULL ((cor_idp_t)0)
#define COR_MAX_DOMAINS 4096
#define COR_MAX_INDEX 65535

static inline cor_idp_t cor_idp_make(uint32_t macro, enum cor_kind kind, unsigned domain,
                                     unsigned index)
{
    return ((cor_idp_t)macro << 32) | ((cor_idp_t)(kind & 0xf) << 28) |
           ((cor_idp_t)(domain & 0xfff) << 16) | (index & 0xffff);
}
static inline uint32_t cor_idp_macro(cor_idp_t i)
{
    return (uint32_t)(i >> 32);
}
static inline uint32_t cor_idp_micro(cor_idp_t i)
{
    return (uint32_t)i;
}
static inline enum cor_kind cor_idp_kind(cor_idp_t i)
{
    return (enum cor_kind)((i >> 28) & 0xf);
}
static inline unsigned cor_idp_domain(cor_idp_t i)
{
    return (unsigned)((i >> 16) & 0xfff);
}
static inline unsigned cor_idp_index(cor_idp_t i)
{
    return (unsigned)(i & 0xffff);
}

/* Writes "macro:kind:domain.index" into buf; returns buf. */
COR_API char *cor_idp_format(cor_idp_t idp, char *buf, size_t len);

/* A local name: a string plus an index, relative to the ascendant domain. */
#define COR_NAME_MAX 64
typedef struct cor_name {
    char name[COR_NAME_MAX];
    unsigned index;
    cor_idp_t ascendant; /* the domain the name is relative to */
} cor_name_t;

/* ---- Session and domains --------------------------------------------------------------- */

/* Joins the session (or makes a one-domain session). argc/argv may be NULL. In a process
 * whose dynamic session a library already joined (a PVM task under libcorpvm), it shares
 * that session: each cor_init then needs its cor_finalize, and the last one ends it. */
COR_API int cor_init(int *argc, char ***argv);
/* Waits for every domain to reach cor_finalize, then stops the core. Tasks still running
 * are joined first. */
COR_API int cor_finalize(void);
COR_API int cor_initialized(void);

COR_API cor_idp_t cor_domain_self(void);    /* this domain's idp */
COR_API int cor_domain_rank(void);          /* this domain's number, 0..size-1 */
COR_API int cor_domain_count(void);         /* domains in the session */
COR_API cor_idp_t cor_domain_idp(int rank); /* idp of domain `rank` */
/* The macro part of every idp here. A library's files in /dev/shm for a session are named
 * cor-<session as %08x>-...: cor-run removes them when the session ends. */
COR_API uint32_t cor_session(void);

/* 1 if domain `rank` runs on this host (it shares this host's memory: /dev/shm), 0 if it
 * runs on another or rank is out of range; this domain is local. The bootstrap's answer, the
 * same in every domain of the session: the launcher's local peers (PMIx), else the domains
 * whose host name (gethostname) is ours. Sessions made with cor_init_join count every domain
 * as local. */
COR_API int cor_domain_local(int rank);

/* The domain tree: domain 0 is the root; domain d's ascendant is (d-1)/2. */
COR_API int cor_domain_parent(int rank);                           /* -1 for the root */
COR_API int cor_domain_children(int rank, int *children, int max); /* returns how many */

/* A notification when a peer domain dies: called from a core thread, must not block. */
typedef void (*cor_death_fn)(int rank, int err, void *arg);
COR_API int cor_domain_on_death(cor_death_fn fn, void *arg);
/* The same for libraries (libcordsm): adds a listener beside the one cor_domain_on_death sets,
 * so neither replaces the other. Listeners run before that one, in the order added; adding the
 * same (fn, arg) again does nothing. COR_EINVAL for a NULL fn, COR_ELIMIT beyond 8. */
COR_API int cor_domain_on_death_add(cor_death_fn fn, void *arg);

/*
 * Dynamic sessions (domains that join a running session, as PVM spawns them): instead of
 * cor_init, a domain calls cor_init_join with the session cookie every member shares, a rank
 * unique in the session, and the capacity (largest rank + 1 any member may have; every member
 * passes the same). No launcher is involved: peers learn each other's route addresses from
 * an exchange of their own (cor_domain_address on one side, cor_domain_connect on the other)
 * before any message flows between them; cor_barrier is not available.
 */
typedef struct cor_join {
    uint64_t session; /* nonzero; its low 32 bits become the idp macro part */
    int rank;         /* 0 .. capacity-1 */
    int capacity;     /* 1 .. COR_MAX_DOMAINS */
} cor_join_t;
COR_API int cor_init_join(const cor_join_t *join);
/* This domain's hard ports as one string ("route index address ..."), for a peer's connect.
 * COR_ELIMIT if len is too small. */
COR_API int cor_domain_address(char *buf, size_t len);
/* Makes domain `rank`, whose cor_domain_address is `addresses`, reachable. Every hard port of
 * ours must find its counterpart (else COR_EROUTE: the peer opened other routes). Calling it
 * again with the same addresses is harmless. COR_ESTATE outside dynamic sessions.
 * A rank that left (cor_domain_leave) is re-admitted when `addresses` name another
 * incarnation (each domain's address carries its own): everything kept for the earlier
 * occupant is forgotten (message numbers, credits, its unexpected messages, the routes' peer
 * state), and frames of the earlier one, or meant for our earlier view of the rank, are
 * dropped and counted (cor_stats_t.frames_dropped). The earlier occupant's address again:
 * COR_EPEERDEAD; another occupant while the rank has not left: COR_EEXIST. */
COR_API int cor_domain_connect(int rank, const char *addresses);
/* Domain `rank` is gone: err 0 means it left normally (nobody is notified), else it died (the
 * cor_domain_on_death callback runs). Either way operations toward it fail with
 * COR_EPEERDEAD from now on, until a new occupant of the rank is connected
 * (cor_domain_connect).
 * cor_domain_connect and cor_domain_leave may come from any thread, also while another one is
 * in cor_finalize: once that one tears the routes down they return COR_ESTATE, and it waits
 * for calls already under way. */
COR_API int cor_domain_leave(int rank, int err);

/* Barrier of all domains (the main threads' tasks call it; any one task per domain). */
COR_API int cor_barrier(void);

/* ---- Logical domains (named, ordered groups of resources) ------------------------------- */

/* A logical domain's idp is a handle: its index is a slot of the registry and its domain
 * field a generation, so an idp of a destroyed group (or one never created) is COR_EINVAL in
 * every call below; a missing member or rank is COR_ENOTFOUND. */
COR_API int cor_ldomain_create(const char *name, cor_idp_t *ldom); /* COR_EEXIST if taken */
/* Forgets the group (its name may be created again); its idp is invalid from now on. */
COR_API int cor_ldomain_destroy(cor_idp_t ldom);
COR_API int cor_ldomain_lookup(const char *name, cor_idp_t *ldom);
COR_API int cor_ldomain_join(cor_idp_t ldom, cor_idp_t member, int *rank);
COR_API int cor_ldomain_leave(cor_idp_t ldom, cor_idp_t member);
COR_API int cor_ldomain_rank(cor_idp_t ldom, cor_idp_t member, int *rank); /* ENOTFOUND */
COR_API int cor_ldomain_size(cor_idp_t ldom, int *size);
COR_API int cor_ldomain_member(cor_idp_t ldom, int rank, cor_idp_t *member);

/* ---- Tasks ----------------------------------------------------------------------------- */

typedef int (*cor_task_fn)(void *arg);

/*
 * Spawns a task in this domain running fn(arg). Its local name is (name, k) where k counts
 * earlier tasks of the same name in this domain. The main thread is task index 0 "main";
 * spawned tasks get indices 1, 2, ... in spawn order, so SPMD programs can name peers by
 * cor_task_idp(rank, index). At least 64 tasks per domain (COR_MAX_TASKS, default 1024).
 */
COR_API int cor_task_spawn(const char *name, cor_task_fn fn, void *arg, cor_idp_t *task);
COR_API int cor_task_join(cor_idp_t task, int *exit_status);
COR_API cor_idp_t cor_task_self(void);
COR_API cor_idp_t cor_task_idp(int domain_rank, unsigned index);
COR_API int cor_task_name(cor_idp_t task, cor_name_t *name); /* local tasks only */
/* Finds a task by local name in any domain (remote domains are asked over the route). */
COR_API int cor_task_lookup(int domain_rank, const char *name, unsigned index, cor_idp_t *task);
/*
 * A task slot without a thread: a mailbox that a library's threads share (libcorpvm's inbound
 * queue). Messages to it are received with cor_recvI_as and sent from it with cor_sendI_as by
 * any thread; the caller serializes the receives, and the sends to one domain (threads may
 * send to different domains at once: each destination domain has its own message order).
 */
COR_API int cor_task_reserve(const char *name, cor_idp_t *task);
/*
 * Runs fn(arg, flags) in whichever thread brought a message to reserved task `task` (a poll of
 * the routes that matched or queued it, the end of its rendezvous, a local send to it), once
 * that thread holds no lock of the core: a library serves its mailbox where the message
 * landed, in a thread that is running anyway, instead of waking a thread of its own for it.
 * fn must not block; it may receive and send as the task (and so poll, which can call it
 * again from within). fn serializes itself: calls may come from several threads at once, and
 * also after fn was replaced by another or NULL. At most 8 tasks of a domain have one
 * (COR_ELIMIT). flags: COR_ARRIVAL_LISTENER when the thread is one of the core's listeners,
 * which serve the routes only while no task of the domain polls them.
 */
#define COR_ARRIVAL_LISTENER 1
COR_API int cor_task_on_arrival(cor_idp_t task, void (*fn)(void *arg, int flags), void *arg);
/*
 * Asks the scheduler to run the calling thread soon after it wakes, ahead of threads that
 * compute: a short time slice (COR_SERVICE_SLICE_US, default 100 us; 0 leaves threads alone).
 * For threads that serve other domains: the core's listeners and dispatchers call it, and so
 * does libcordsm's service thread. COR_ENOTSUP where the kernel has no per-thread slice
 * (Linux before 6.12); real-time and batch threads are left as they are.
 */
COR_API int cor_thread_attentive(void);
/*
 * Whether more threads are runnable on this host right now than it has CPUs (the kernel's
 * count, /proc/loadavg's fourth field, this thread included): 1 if so, 0 if not or unknown.
 * About a microsecond: for a thread choosing between polling on and giving its CPU away.
 */
COR_API int cor_cpus_busy(void);

/* ---- Ports and transports -------------------------------------------------------------- */

/*
 * A soft-port is a task's end of communication. It is bound to a hard port (an endpoint of a
 * route, served by a listener and a dispatcher thread) explicitly, shared or exclusive, or
 * mapped by the core to the least-used hard port of the route. A task's messages leave through
 * its current soft-port; the first send opens a mapped one on the default route.
 */
typedef uint64_t cor_port_t; /* a handle: slot + generation, never a pointer */
#define COR_PORT_NULL ((cor_port_t)0)

#define COR_HARD_PORT_ANY (-1)
typedef struct cor_port_attr {
    const char *route; /* "udp", "gm"...; NULL = COR_ROUTE or the first loaded */
    int hard_port;     /* 0..ports-1, or COR_HARD_PORT_ANY: mapped by the core */
    int exclusive;     /* nonzero: no other soft-port may bind that hard port */
} cor_port_attr_t;

/* A closed, stale or forged handle is COR_EINVAL in every call; a task whose current soft-port
 * was closed (by any task) gets a mapped one at its next send. */
COR_API int cor_port_open(const cor_port_attr_t *attr, cor_port_t *port);
COR_API int cor_port_close(cor_port_t port);
COR_API int cor_port_use(cor_port_t port); /* make it the calling task's current soft-port */
COR_API int cor_port_info(cor_port_t port, const char **route, int *hard_port);
/* The paper's setTransport: the calling task's messages go over `route` from now on
 * (opens a mapped soft-port on it). Order per peer task is kept across the switch. */
COR_API int cor_setTransport(const char *route);
/* Number of hard ports the domain opened on `route` (COR_PORTS). */
COR_API int cor_route_ports(const char *route);
/* The published address of this domain's hard port (for tests and diagnostics). */
COR_API int cor_route_address(const char *route, int hard_port, char *buf, size_t len);

/* ---- Typed buffers --------------------------------------------------------------------- */

typedef enum cor_type {
    COR_BYTE = 0,
    COR_CHAR,
    COR_SHORT,
    COR_INT,
    COR_LONG,
    COR_FLOAT,
    COR_DOUBLE,
    COR_INT64,
    COR_UINT64,
    COR_TYPE_COUNT
} cor_type_t;

COR_API size_t cor_type_size(cor_type_t type); /* 0 for an invalid type */

/*
 * getBuffer: memory for n elements of `type`, allocated by the core where the routes can send
 * it without a copy. A buffer may be sent many times; release it when done. Also used for
 * buffers the core allocates for cor_recvI.
 */
COR_API void *cor_getBuffer(cor_type_t type, size_t n);
COR_API int cor_releaseBuffer(void *buf);
COR_API int cor_buffer_info(const void *buf, cor_type_t *type, size_t *n);

/* ---- Requests -------------------------------------------------------------------------- */

typedef uint64_t cor_req_t; /* a handle; COR_REQ_NULL after it completes */
#define COR_REQ_NULL ((cor_req_t)0)

/* Any sender: kind 15 names no resource, so no lookup returns this value (a failed one returns
 * COR_IDP_NULL, which is COR_EINVAL as a source). */
#define COR_ANY_SOURCE ((cor_idp_t)UINT64_MAX)
#define COR_ANY_TAG (-1)

typedef struct cor_status {
    cor_idp_t source; /* sending task */
    cor_idp_t context;
    int tag;
    cor_type_t type;
    size_t count; /* elements in the message (even when truncated) */
    int error;    /* COR_OK, COR_ETRUNC, COR_ECANCELED, COR_EPEERDEAD... */
} cor_status_t;

/*
 * sendI: sends `count` elements of a getBuffer buffer to task `dest` in context `ctx` with
 * tag `tag` (>= 0). The buffer must stay untouched until the request completes.
 * The context is any idp both sides agree on (a domain's, a logical domain's, or
 * COR_CTX_WORLD); a message is only received in its own context.
 */
#define COR_CTX_WORLD ((cor_idp_t)1)
COR_API int cor_sendI(cor_idp_t dest, cor_idp_t ctx, int tag, const void *buf, size_t count,
                      cor_req_t *req);
/* The same from any user memory, with the type given. */
COR_API int cor_sendI_typed(cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type,
                            const void *data, size_t count, cor_req_t *req);

/*
 * recvI: receives a message matching (src or COR_ANY_SOURCE, ctx, tag or COR_ANY_TAG).
 * With a core buffer: when the request completes (test/wait), *ptr points to a buffer of the
 * message's type and count, to be released with cor_releaseBuffer.
 */
COR_API int cor_recvI(cor_idp_t src, cor_idp_t ctx, int tag, void **ptr, cor_req_t *req);
/* Into user memory of `count` elements of `type` (COR_BYTE accepts any type, count in bytes).
 * A larger message completes with COR_ETRUNC, the buffer filled up to its size. */
COR_API int cor_recvI_into(cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type, void *buf,
                           size_t count, cor_req_t *req);

/* test/wait complete a request: the handle becomes COR_REQ_NULL and status (may be NULL) is
 * filled. The return value is the request's own result (status->error). */
COR_API int cor_test(cor_req_t *req, int *done, cor_status_t *status);
COR_API int cor_wait(cor_req_t *req, cor_status_t *status);
/* Whether a request has completed, without completing it or making progress: cheap enough
 * for a cor_wait_timeout stop hook watching other requests. */
COR_API int cor_peek(cor_req_t req, int *done);
/* cor_wait for at most timeout_us, or until stop(stop_arg) returns nonzero (stop may be NULL;
 * it is called often while polling, and at wake-ups while blocked): *done says whether the
 * request completed (then as cor_wait), else it stays pending. It polls the routes for at
 * most spin_us (-1: COR_SPIN_US), then blocks. A request of a reserved task
 * (cor_task_reserve) wakes whichever thread waits for it. */
COR_API int cor_wait_timeout(cor_req_t *req, long spin_us, long timeout_us, int (*stop)(void *arg),
                             void *stop_arg, int *done, cor_status_t *status);
/* Polls every route once and runs what arrived (matches, rendezvous steps, completions)
 * in the calling thread; never blocks. For a task that computes for long stretches between
 * calls: the messages it expects, and the rendezvous steps its peers wait for, move at its
 * next call instead of when a core thread gets a CPU among computing ones (MPI programs call
 * MPI_Test in such loops for the same reason). cor_test of a pending request does the same.
 * Returns the number of events handled (0 also while another thread of the domain is
 * already polling), or COR_ESTATE before cor_init. */
COR_API int cor_progress(void);
/* What a test loop reports after each look at what it waits for (found: nonzero once it is
 * there). A thread whose looks found nothing for about 10 us in a row lets other threads run
 * a while (a yield, or a nap of microseconds when more threads are runnable than CPUs), so
 * that loops in more tasks than CPUs do not starve the threads they wait for; looks further
 * apart (computing in between) cost nothing. cor_test reports itself; a library's own test
 * (cor_dsm_test) calls this. */
COR_API void cor_polled(int found);
/* Polls the routes in the calling thread, as cor_wait does while it spins, until
 * stop(stop_arg) returns nonzero (then returns 1) or spin_us passed (returns 0; -1:
 * COR_SPIN_US). For a wait on something other than a request (a library's own state,
 * changed by an arrival hook); the caller provides the sleeping half. Never blocks; while
 * another thread of the domain polls, it yields to that one and may return 0 early; with no
 * route (a one-domain session) it looks once. In a core listener (an arrival hook called with
 * COR_ARRIVAL_LISTENER) it returns 0 as soon as a task of the domain starts to wait: the task
 * polls for itself then. */
COR_API int cor_poll_until(int (*stop)(void *arg), void *stop_arg, long spin_us);
/* Completes one of n; *index gets which (COR_REQ_NULL entries are skipped). */
COR_API int cor_waitany(size_t n, cor_req_t *reqs, size_t *index, cor_status_t *status);
/* Completes all; returns COR_OK or the first error (statuses may be NULL). */
COR_API int cor_waitall(size_t n, cor_req_t *reqs, cor_status_t *statuses);
/* Cancels a pending receive: it then completes with COR_ECANCELED, unless it already matched
 * (then it completes normally). Sends cannot be canceled (COR_EINVAL). */
COR_API int cor_cancel(cor_req_t *req);

/* The same on behalf of a local task made by cor_task_reserve (order per destination is that
 * task's, whichever thread calls). COR_EINVAL if `as` is not such a task of this domain. */
COR_API int cor_sendI_as(cor_idp_t as, cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type,
                         const void *data, size_t count, cor_req_t *req);
COR_API int cor_recvI_as(cor_idp_t as, cor_idp_t src, cor_idp_t ctx, int tag, void **ptr,
                         cor_req_t *req);
COR_API int cor_recvI_into_as(cor_idp_t as, cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type,
                              void *buf, size_t count, cor_req_t *req);

/* Blocking conveniences. */
COR_API int cor_send(cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type, const void *data,
                     size_t count);
COR_API int cor_recv(cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type, void *buf,
                     size_t count, cor_status_t *status);

/* ---- Introspection --------------------------------------------------------------------- */

typedef struct cor_stats {
    uint64_t msgs_sent, msgs_received, bytes_sent, bytes_received;
    uint64_t eager_sent, rndv_sent, credit_frames, credit_stalls;
    uint64_t frames_dropped; /* frames from outside the session or malformed */
    uint64_t unexpected_now, unexpected_bytes_now;
} cor_stats_t;
COR_API int cor_stats_get(cor_stats_t *stats);

/* The library's version ("0.1.0") and the installed plugin folder searched after
 * COR_ROUTE_PATH. */
COR_API const char *cor_version(void);
COR_API const char *cor_plugin_dir(void);
/* The bootstrap backends this libcor can use, in the order cor_init tries them,
 * space-separated: "cor-run pmix none", or "cor-run none" when PMIx is not available
 * (libcor built without it, or its plugin cor_boot_pmix.so missing or not loading). */
COR_API const char *cor_boot_backends(void);
/* Why a backend is not available: "pmix: <reason>", or "" when every one is. */
COR_API const char *cor_boot_unavailable(void);

/* What cor_route_probe learnt of a route plugin (cor-info shows it). */
typedef struct cor_route_probe {
    char path[4096];    /* the plugin file loaded, or the last one tried */
    char error[1024];   /* the loader's message, or why the port did not open; "" = none */
    int loaded;         /* found, loaded and its operations table checked */
    int opened;         /* a loopback port opened: the port capabilities below are set */
    size_t frame_max;   /* largest frame, header included */
    size_t eager_limit; /* the route's default eager threshold (COR_EAGER_LIMIT overrides) */
    size_t frame_pref;  /* frames up to this size travel in one piece (0: no preference) */
    int zero_copy_send; /* send() keeps the caller's memory until done */
    int rma;            /* remote writes (rendezvous by put) */
    int own_memory;     /* the route allocates memory it sends without a copy (getBuffer) */
    int counters;       /* drop and retransmission counters */
    int blocking_wait;  /* no file descriptor: the route has its own blocking wait */
    int ports_max;      /* hard ports a domain may open on one route (COR_PORTS) */
} cor_route_probe_t;
/* Loads route `name` as cor_init would (COR_ROUTE_PATH, then the plugin folder) and, if
 * `open_port`, opens one port on loopback, alone, to read its capabilities, and closes it
 * again. Needs no cor_init.
 * Returns COR_OK when the plugin loaded (out->opened says whether the port did; out->error
 * why not), COR_EROUTE when it did not (out->error holds the loader's message), COR_EINVAL
 * for a bad name. Not thread-safe with itself. */
COR_API int cor_route_probe(const char *name, int open_port, cor_route_probe_t *out);

/* ---- knobs: environment variables, declared once in a table the code reads ------------------
 * The core declares its own in one table (cor_knobs); each route plugin declares its own in
 * its operations table (struct cor_route_ops.knobs, include/cor/route.h); libcordsm and
 * libcorpvm give theirs with cor_dsm_knobs and cor_pvm_knobs. cor-info lists them all and
 * generates the READMEs' knob tables from them (cor-info --knobs-markdown). */
typedef enum cor_knob_type {
    COR_KNOB_INT, /* an integer in [lo, hi] */
    COR_KNOB_STR, /* a string, used as it is */
    COR_KNOB_SET  /* set or not (any value, even empty, sets it) */
} cor_knob_type_t;

typedef struct cor_knob {
    const char *name;      /* "COR_UDP_WINDOW" */
    cor_knob_type_t type;  /* how it is read */
    long long def, lo, hi; /* COR_KNOB_INT: the default and the accepted range */
    const char *shown;     /* the default as people read it ("" = the number def) */
    const char *meaning;   /* one line */
} cor_knob_t;

/* The core's knobs (libcor, read at cor_init): the table and its length. */
COR_API const cor_knob_t *cor_knobs(size_t *n);
/* Reads integer knob *k from the environment: its value, or k->def when it is unset, empty,
 * not a whole number or outside [k->lo, k->hi] (then reported on stderr, once per read).
 * 0 for a knob that is not COR_KNOB_INT. Libraries on libcor read their tables with it. */
COR_API long long cor_knob_int(const cor_knob_t *k);
/* Loads route `name` as cor_route_probe does and gives its knob table (*n = 0 when the plugin
 * declares none). The table stays valid for the life of the process. COR_EROUTE when the
 * plugin does not load, COR_EINVAL for a bad name or NULL arguments. */
COR_API int cor_route_knobs(const char *name, const cor_knob_t **knobs, size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* COR_COR_H */
