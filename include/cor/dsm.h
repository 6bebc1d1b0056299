/*
 * libcordsm: distributed shared memory on libcor (link with -lcordsm -lcor).
 *
 * Objects are typed vectors (cor_type_t x count) created by any task in its domain, which
 * becomes the object's *home*. They are named, looked up by name from any domain, queried and
 * operated on by idp (kind COR_KIND_OBJECT, domain = the home), and destroyed by the home.
 * Every operation on an object is atomic at the home with respect to every other operation
 * on that object: get, put, swap, fetch-add, compare-and-swap, FIFO append, non-fetching add.
 * Locks (FIFO across all tasks of all domains) and barriers (dissemination between domains)
 * are named resources too.
 *
 * Progress: each domain runs a DSM service (a reserved task of libcor, named "cor.dsm") that
 * receives requests in a private context. They are served in whichever thread of the domain
 * brings them in (a task waiting in libcor, or libcor's listener while every task computes;
 * cor_task_on_arrival), and by a thread of the service's own otherwise, so remote operations
 * progress while every task of the home computes; nobody polls.
 *
 * Thread safety: every call may be made from any task concurrently, except cor_dsm_init and
 * cor_dsm_finalize (the main thread, once each, collective over all domains).
 *
 * Errors: every call returns COR_OK or a negative code: cor.h's (COR_EINVAL, COR_ETYPE,
 * COR_ENOTFOUND, COR_EEXIST, COR_EPEERDEAD, ...) or one of COR_DSM_ERRNO_MAP below;
 * cor_dsm_strerror names both kinds. An operation toward a home (or lock home, or barrier
 * member) that died returns COR_EPEERDEAD within the core's detection time, never hangs.
 *
 * Two protocols, chosen per object at creation: home-only (every access is an operation at the
 * home; the home keeps the object in shared memory, /dev/shm, and the domains of its host
 * run their operations on it themselves, without a message: COR_DSM_SHM=0 turns that off) and
 * cached (CRL's regions: copies cached in the domains that use them, accessed inside
 * read and write sections, kept coherent by the home's directory). See cor/dsm/README.md.
 */
#ifndef COR_DSM_H
#define COR_DSM_H

#include <cor/cor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ---------------------------------------------------------------------------- */

/* X(name, value, text): errors of the DSM layer, below cor.h's codes. */
#define COR_DSM_ERRNO_MAP(X)                                                                       \
    X(DSM_ERANGE, -64, "offset or count outside the object")                                       \
    X(DSM_EOWNERDEAD, -65, "lock acquired, but its previous holder's domain died holding it")      \
    X(DSM_ESECTION, -66,                                                                           \
      "section misuse: end without start, or a second section of one task on one object")          \
    X(DSM_EPROTOCOL, -67,                                                                          \
      "the object's protocol does not allow this (sections on a home-only object)")

#define COR_DSM_ERR_ENUM_(name, value, text) COR_##name = value,
enum cor_dsm_err { COR_DSM_ERRNO_MAP(COR_DSM_ERR_ENUM_) };
#undef COR_DSM_ERR_ENUM_

/* Names DSM codes and cor.h's codes alike. */
COR_API const char *cor_dsm_strerror(int err);

/* ---- Setup ----------------------------------------------------------------------------- */

/*
 * Starts this domain's DSM service. Collective: every domain's main thread calls it once,
 * after cor_init, and it returns when every domain's service is up (it ends with
 * cor_barrier). It reserves two tasks (the service, "cor.dsm", and the barrier mailbox,
 * "cor.dsm.barrier"): tasks spawned afterwards get indices two higher than they would have
 * (the same in every domain).
 * COR_ESTATE if called twice or before cor_init.
 */
COR_API int cor_dsm_init(void);
/*
 * Collective, before cor_finalize: waits for every domain (cor_barrier, so no service stops
 * while a peer may still send to it), stops the service, frees every object homed here.
 * Objects, locks and barriers must no longer be used by any task.
 */
COR_API int cor_dsm_finalize(void);

/* libcordsm's knobs (COR_DSM_*, read at cor_dsm_init): the table and its length, as
 * cor_knobs() gives the core's (cor-info lists them). */
COR_API const cor_knob_t *cor_dsm_knobs(size_t *n);

/* ---- Objects --------------------------------------------------------------------------- */

/* The protocol of an object, chosen at creation. */
typedef enum cor_dsm_protocol {
    COR_DSM_HOME_ONLY = 0, /* never cached: every access is an operation at the home (or, from
                              a domain of the home's host, in the memory the home shares) */
    COR_DSM_CACHED = 1,    /* copies cached under sections (below); the home keeps a directory */
} cor_dsm_protocol_t;

#define COR_DSM_MAX_BYTES ((size_t)1 << 32) /* largest object: 4 GiB */
#define COR_DSM_MAX_SECTIONS 256            /* sections one task has open at once */

typedef struct cor_dsm_info {
    cor_type_t type;
    size_t count; /* elements */
    size_t bytes; /* count x cor_type_size(type) */
    int home;     /* domain rank of the home */
    cor_dsm_protocol_t protocol;
    uint64_t appended; /* FIFO slots taken by cor_dsm_append so far */
    char name[COR_NAME_MAX];
} cor_dsm_info_t;

/*
 * A call that fails leaves what it would have given defined: COR_IDP_NULL in *obj
 * (cor_dsm_create, cor_dsm_lookup) and *lock (cor_dsm_lock_open), a record of zeros in *info
 * (cor_dsm_query: count 0, name "").
 *
 * Creates an object of `count` elements of `type`, zero-filled, homed in the calling domain,
 * registered under `name` (1..COR_NAME_MAX-1 bytes, unique in the session among objects).
 * COR_EEXIST if the name is taken, COR_ELIMIT if larger than COR_DSM_MAX_BYTES or if the
 * domain has 65535 objects and locks, COR_ENOMEM.
 */
COR_API int cor_dsm_create(const char *name, cor_type_t type, size_t count,
                           cor_dsm_protocol_t protocol, cor_idp_t *obj);
/* Finds an object by name from any domain (asks the domain that keeps the name's directory
 * entry: hash(name) % domain count). COR_ENOTFOUND. */
COR_API int cor_dsm_lookup(const char *name, cor_idp_t *obj);
/* Size, type, home, name of an object, by idp (asks the home). COR_ENOTFOUND. */
COR_API int cor_dsm_query(cor_idp_t obj, cor_dsm_info_t *info);
/* Destroys an object. Only a task of the home may (else COR_EINVAL); operations that reach
 * the home afterwards get COR_ENOTFOUND. */
COR_API int cor_dsm_destroy(cor_idp_t obj);

/* ---- Operations -------------------------------------------------------------------------
 *
 * `type` is the caller's view of the data and must be the object's type (else COR_ETYPE).
 * Offsets and indices count elements; out of range is COR_DSM_ERANGE. Atomic operations
 * (swap, fetch_add, add, cas) act on one element; fetch_add and add take every type but
 * COR_BYTE and COR_CHAR (integers wrap around; floats add), and cas compares bit patterns.
 * On a home that is the caller's own domain, operations run in the calling thread, and so do
 * operations on a home-only object homed by another domain of the same host (in the memory
 * that home shares). A domain that dies inside an operation that writes such an object leaves
 * it possibly torn: every later operation on it returns COR_EPEERDEAD.
 */

/* Copies elements [offset, offset+count) of the object into buf. */
COR_API int cor_dsm_get(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf);
/* Copies count elements from buf into the object at offset. */
COR_API int cor_dsm_put(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                        const void *buf);
/* Writes *value into element index; *old (may be NULL) gets the previous value. */
COR_API int cor_dsm_swap(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                         void *old);
/* Adds *value to element index; *old (may be NULL) gets the previous value. */
COR_API int cor_dsm_fetch_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                              void *old);
/* If element index equals *expected, writes *desired; *old (may be NULL) gets the value it
 * had, so the exchange happened iff *old equals *expected. */
COR_API int cor_dsm_cas(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                        const void *desired, void *old);
/* FIFO append: writes count elements at the object's next free slot; *slot (may be NULL)
 * gets the index of the first. Appends from all tasks are totally ordered at the home.
 * COR_ELIMIT when the object has no room for count more elements (nothing is written). */
COR_API int cor_dsm_append(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                           uint64_t *slot);

/*
 * Non-fetching add, for pipelining: queues the add in the calling task's batch for the home
 * and returns without waiting (on the caller's own domain a home-only object's add is applied
 * at once; a batch toward a home of the same host is applied from the calling task, in the
 * memory that home shares, when it leaves). A batch (up to 128 adds, one message) leaves when full,
 * at cor_dsm_quiet, or before any other operation of the same task toward that home; adds from one
 * task to one home are applied in the order issued, and before that task's later operations there.
 * Their errors are reported by the caller's next cor_dsm_quiet, which waits until every add
 * the calling task issued has been applied. On a cached object (even from the home's own
 * tasks, whose adds then go through the home's service in a batch too) an add waits for its
 * turn in the home's directory like a fetch-add: copies are invalidated first, waiting for
 * open sections (counted in cor_dsm_stats_t.recalls); so call cor_dsm_quiet outside any
 * section on an object the task added to, or it waits for that section forever.
 */
COR_API int cor_dsm_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value);
/* Waits until the calling task's earlier cor_dsm_add calls are applied at their homes.
 * Returns the first error any of them met (COR_EPEERDEAD if a home died), else COR_OK. */
COR_API int cor_dsm_quiet(void);

/*
 * Non-blocking forms (the paper's sendI naming): they start the operation and return a handle
 * at once; cor_dsm_test/cor_dsm_wait complete it and return its result. Output pointers
 * (buf, old, slot) and input buffers must stay valid until then (inputs are copied into
 * the request before the call returns, so only outputs matter). A cor_dsm_req_t is not a
 * cor_req_t: it is completed only by these calls, from any task, exactly once.
 */
/* libcordsm's handles (requests, regions, barriers) are opaque: slot + generation + kind in a
 * pointer type, never an address, so a stale, forged or other-kind one is COR_EINVAL. */
typedef struct cor_dsm_op *cor_dsm_req_t; /* NULL after completion */

COR_API int cor_dsm_getI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf,
                         cor_dsm_req_t *req);
COR_API int cor_dsm_putI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                         const void *buf, cor_dsm_req_t *req);
COR_API int cor_dsm_swapI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                          void *old, cor_dsm_req_t *req);
COR_API int cor_dsm_fetch_addI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                               void *old, cor_dsm_req_t *req);
COR_API int cor_dsm_casI(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                         const void *desired, void *old, cor_dsm_req_t *req);
COR_API int cor_dsm_appendI(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                            uint64_t *slot, cor_dsm_req_t *req);

/* *done = 1 and the operation's result when it completed (the handle becomes NULL), else
 * *done = 0 and COR_OK. COR_EINVAL for a NULL, completed or forged handle. A test of a
 * pending operation polls the routes once (as cor_test, cor_progress): a task that computes
 * and tests now and then moves its messages itself. A loop of tests gives its CPU away now
 * and then (as cor_test's, see cor_polled): more looping tasks than CPUs do not starve the
 * threads they wait for. A test of a barrier episode that finds nothing right after another
 * one did (a loop: 20 us apart at most) sleeps until the episode moves, 200 us at most, while
 * another task of its domain inside the episode is awake to move it, as cor_dsm_wait's tasks
 * sleep; a task that computes between its tests never sleeps there. */
COR_API int cor_dsm_test(cor_dsm_req_t *req, int *done);
/* Waits for completion; returns the operation's result; the handle becomes NULL. */
COR_API int cor_dsm_wait(cor_dsm_req_t *req);

/* ---- Sections on cached objects (CRL's regions) ------------------------------------------
 *
 * A task maps a COR_DSM_CACHED object to get a region: the domain's copy of the object,
 * shared by all tasks of the domain (one copy per domain, whoever maps it; at the home the
 * copy is the object's memory). The data is read between cor_dsm_start_read and
 * cor_dsm_end_read, written between cor_dsm_start_write and cor_dsm_end_write, through the
 * pointer cor_dsm_region_data gives (stable while mapped). Each section is one indivisible
 * step: sections on an object are sequentially consistent across all tasks of all domains
 * (many readers or one writer at any time). A start that misses asks the home (one request
 * per copy at a time; the home invalidates the other domains' copies in parallel, and a
 * domain with a section open defers its invalidation until the section ends); a hit sends
 * nothing and allocates nothing. After a section the copy stays cached, within the domain's
 * byte budget (COR_DSM_CACHE_BYTES, default 256 MiB, or cor_dsm_set_cache_bytes; the least
 * recently used idle copies are flushed first).
 *
 * Rules (COR_DSM_ESECTION otherwise): a task has at most one section open per object (no
 * write inside read, no nesting) and at most COR_DSM_MAX_SECTIONS at once (COR_ELIMIT; a
 * non-blocking start counts from the moment its section has started); it ends what it
 * started, with the matching end; it does not flush or unmap a region it has a section on.
 * Sections on several objects must be taken in one global order (as with locks).
 * Remote operations (get, put, swap, fetch_add, cas, append) on a cached object are allowed:
 * at the home they first recall the write copy (get) or invalidate every copy (the others),
 * waiting for open sections to end (counted in cor_dsm_stats_t.recalls); so do
 * non-fetching adds (cor_dsm_add), applied before the adding task's cor_dsm_quiet returns.
 * Failure: a start toward a dead home, or on an object whose write copy died with its
 * domain, returns COR_EPEERDEAD, and so does every later start on it.
 */
typedef struct cor_dsm_region *cor_dsm_region_t;

/* Maps a cached object (COR_DSM_EPROTOCOL for a home-only one; asks the home the first time
 * this domain maps it). Every map is matched by an unmap. */
COR_API int cor_dsm_map(cor_idp_t obj, cor_dsm_region_t *rgn);
/* *data = the domain's copy (count elements of the object's type), to be touched only inside
 * sections; *count (may be NULL) = its elements. COR_EINVAL for a NULL, unmapped or forged
 * region. */
COR_API int cor_dsm_region_data(cor_dsm_region_t rgn, void **data, size_t *count);
/* The copy stays cached (within the budget) after the last unmap. */
COR_API int cor_dsm_unmap(cor_dsm_region_t rgn);
COR_API int cor_dsm_start_read(cor_dsm_region_t rgn);
COR_API int cor_dsm_end_read(cor_dsm_region_t rgn);
COR_API int cor_dsm_start_write(cor_dsm_region_t rgn);
COR_API int cor_dsm_end_write(cor_dsm_region_t rgn);
/* Non-blocking starts (prefetch): the copy is requested at once; the section starts when
 * cor_dsm_test/cor_dsm_wait completes the handle, and belongs to the task that completes it. */
COR_API int cor_dsm_start_readI(cor_dsm_region_t rgn, cor_dsm_req_t *req);
COR_API int cor_dsm_start_writeI(cor_dsm_region_t rgn, cor_dsm_req_t *req);
/* Drops the domain's copy (a dirty one goes back to the home first); waits for the domain's
 * open sections on it to end. The next section misses. */
COR_API int cor_dsm_flush(cor_dsm_region_t rgn);
/* The cached-copy budget of this domain, in bytes. */
COR_API int cor_dsm_set_cache_bytes(size_t bytes);

/* ---- Locks ----------------------------------------------------------------------------- */

/*
 * A lock is named; its home is the domain that keeps the name's directory entry. The first
 * open of a name creates it. Acquisitions are granted first come, first served at the home
 * across all tasks of all domains (when every domain of the session shares one host, by a
 * ticket each task takes in shared memory, in the order the tasks asked). A lock is held by a
 * task (the one that acquired it) and is not recursive. Over messages, a lock granted while
 * nobody else waited for it, to the domain that had it last, stays with that domain after
 * its release (*kept*): the domain's tasks take it again with no message until someone else
 * asks its home, which then recalls it (the release goes home at once if no task of that domain
 * holds it, else at the holder's unlock). A domain that dies keeping a lock, held or not, passes it
 * on with COR_DSM_EOWNERDEAD: the home cannot tell a kept free lock from a held one.
 */
COR_API int cor_dsm_lock_open(const char *name, cor_idp_t *lock);
/* Blocks until the calling task holds the lock. COR_DSM_EOWNERDEAD: it holds the lock, and
 * the previous holder's domain died holding it (what it protected may be half-updated).
 * COR_ESTATE if the caller already holds it. COR_EPEERDEAD if the lock's home died. */
COR_API int cor_dsm_lock(cor_idp_t lock);
/* The same without blocking the caller: the handle completes when the lock is granted. */
COR_API int cor_dsm_lockI(cor_idp_t lock, cor_dsm_req_t *req);
/* Takes the lock if free, else COR_EBUSY at once (no queueing). A lock another domain keeps
 * (above) is busy too; the try recalls it, so a later try finds it free unless retaken. */
COR_API int cor_dsm_trylock(cor_idp_t lock);
/* Releases it; the longest waiting task gets it. COR_ESTATE if the caller does not hold it.
 * A kept lock not recalled stays with the domain (no message). Otherwise it returns once the
 * release is on its way (no round trip): the home applies it before any later request of the
 * same task to that home. A task holds (or is acquiring) at most 64 locks at
 * once: one more lock, lockI or trylock is COR_ELIMIT. A lockI handle is completed by the task
 * that started it. */
COR_API int cor_dsm_unlock(cor_idp_t lock);

/* ---- Barriers -------------------------------------------------------------------------- */

typedef struct cor_dsm_barrier *cor_dsm_barrier_t;

/*
 * A barrier over the domains of logical domain `ldom` (the distinct domains of its members,
 * taken when this is called: every member domain must call it with the same name and see
 * the same membership), or over all domains for COR_IDP_NULL. In each member domain
 * `local_tasks` tasks (>= 1) call cor_dsm_barrier_wait per episode; the last of them takes
 * the domain into a dissemination exchange with the other member domains (ceil(log2 n)
 * rounds of messages over the routes, carried on by the DSM services); all return when every
 * member domain arrived. When every member domain is on one host, episodes after the first
 * meet in shared memory instead (COR_DSM_SHM=0 in any member: messages always).
 * COR_EINVAL if this domain is not a member.
 */
COR_API int cor_dsm_barrier_create(const char *name, cor_idp_t ldom, int local_tasks,
                                   cor_dsm_barrier_t *bar);
/* COR_EPEERDEAD (now and for every later episode) if a member domain died. */
COR_API int cor_dsm_barrier_wait(cor_dsm_barrier_t bar);
/* Non-blocking form (MPI_Ibarrier): arrives now and returns; cor_dsm_test / cor_dsm_wait tell
 * when the episode ended, with cor_dsm_barrier_wait's result. The domain answers the other
 * members' rounds meanwhile without being asked (the DSM's hooks take the barrier's messages
 * in whatever thread polls the routes), so the task may compute before it tests. Each of the
 * barrier's local_tasks arrivals per episode may be either form; destroy is COR_EBUSY until
 * the request completed. */
COR_API int cor_dsm_barrier_waitI(cor_dsm_barrier_t bar, cor_dsm_req_t *req);
/* COR_EBUSY while a task of this domain is still in cor_dsm_barrier_wait on it. */
COR_API int cor_dsm_barrier_destroy(cor_dsm_barrier_t bar);

/* ---- Introspection --------------------------------------------------------------------- */

typedef struct cor_dsm_stats {
    uint64_t requests_served;  /* requests this domain's service handled */
    uint64_t requests_dropped; /* malformed requests dropped (wire data is untrusted) */
    uint64_t local_ops;        /* operations on objects and locks of this domain (home = own
                                  domain): in the caller's thread, or by its own service */
    uint64_t remote_ops;       /* operations sent to another domain's service (not those run
                                  in shared memory: shm_ops) */
    uint64_t shm_ops;          /* operations run here on a home-only object of another domain
                                  of this host, in the memory it shares (no message) */
    uint64_t section_hits;     /* sections started on a valid copy, without a message */
    uint64_t section_misses;   /* sections that had to ask the home */
    uint64_t invalidations;    /* copies invalidated by this domain's directories */
    uint64_t recalls;          /* remote operations that invalidated copies first */
    uint64_t evictions;        /* copies flushed to stay within the cache budget */
    uint64_t cached_bytes;     /* bytes of valid copies of objects homed elsewhere */
    uint64_t grants_direct;    /* copies (16 KiB and more) whose data the home sent straight
                                  into this domain's copy: no staging buffer on either side */
    uint64_t grants_task;      /* smaller copies whose grant was their data alone, received
                                  straight into the copy by the task that asked, and
                                  upgrades (read copy to write) granted by an empty message
                                  to the task that asked */
    uint64_t copy_bytes;       /* memory held for copies of objects homed elsewhere: those
                                  mapped, and the valid ones nobody maps (the cache) */
    uint64_t copies;           /* copies of objects homed elsewhere this domain keeps track
                                  of (~300 bytes each without their data); those of destroyed
                                  objects go once nothing maps them */
    uint64_t lock_retakes;     /* lock acquisitions answered by a lock this domain kept since
                                  an uncontended grant: no message (counted since init) */
    uint64_t writes_3hop;      /* upgrades of this domain whose grant came while the other
                                  readers' acknowledgments came to it straight (a write in
                                  three hops; also counted in grants_task) */
} cor_dsm_stats_t;
COR_API int cor_dsm_stats_get(cor_dsm_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif /* COR_DSM_H */
