/*
 * libcordsm's private header: the wire format of requests and replies (dsm_wire.c), the
 * operations on an object's memory (dsm_obj.c), a lock's FIFO queue (dsm_lock.c), a
 * barrier's dissemination rounds (dsm_barrier.c) and the cached protocol's directory and copy
 * state machines (dsm_dir.c). These parts are pure (no libcor calls, no
 * locks of their own): the caller holds whatever lock protects the state, and the unit tests
 * and the fuzzer link them alone. The runtime on top: dsm.c (client calls, setup),
 * dsm_sync.c (locks, barriers), dsm_cached.c (copies and sections), dsm_service.c (the
 * service), their state in dsm_runtime.h.
 */
#ifndef COR_DSM_INTERNAL_H
#define COR_DSM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cor/cor.h"
#include "cor/dsm.h"

/* ---- Handles (dsm_handle.c; thread-safe, unlike the pure parts below) ------------------
 *
 * What the API hands out as cor_dsm_req_t, cor_dsm_region_t and cor_dsm_barrier_t is a
 * handle of this table cast to the pointer type: slot + generation + kind, so a stale,
 * forged or other-kind handle is found out (COR_EINVAL) instead of dereferenced.
 */
enum dsm_handle_kind { DSM_H_REQ = 1, DSM_H_REGION = 2, DSM_H_BARRIER = 3 };
/* A new handle for obj, or 0 (out of memory, or 2^24 handles live). */
uint64_t dsm_handle_put(enum dsm_handle_kind kind, void *obj);
/* The object of a live handle, or NULL. */
void *dsm_handle_get(enum dsm_handle_kind kind, uint64_t h);
/* Takes a live handle for the caller alone (get, put and claim fail meanwhile): the object,
 * or NULL. Ended by dsm_handle_unclaim or dsm_handle_take(.., true). */
void *dsm_handle_claim(enum dsm_handle_kind kind, uint64_t h);
void dsm_handle_unclaim(enum dsm_handle_kind kind, uint64_t h);
/* Ends a handle (claimed by the caller or not): its object, or NULL if it was not live. */
void *dsm_handle_take(enum dsm_handle_kind kind, uint64_t h, bool claimed);
/* Ends every handle (cor_dsm_finalize: what they named is gone). */
void dsm_handle_clear(void);

/* ---- Wire format ----------------------------------------------------------------------
 *
 * Every DSM message travels as COR_BYTE data in the DSM context, between a client task and
 * a domain's service task (or between services, for barriers). Integers are little-endian.
 *
 * Request (40-byte header, then name_len bytes of name, then data):
 *   0 u32 magic "CDS1"   4 u8 op   5 u8 type   6 u16 name_len   8 u32 id (the reply's tag)
 *   12 u32 flags (DIR_PUT: protocol)   16 u64 obj   24 u64 offset   32 u64 count
 * Reply (24-byte header, then data):
 *   0 u32 magic "CDR1"   4 u8 op   5 u8 type   6 u16 zero   8 i32 status   12 u32 id
 *   16 u64 value (append: slot; lookups, lock open: idp)
 * Data of a request: PUT/APPEND count elements; SWAP/FADD/ADD one element; CAS two
 * (expected, desired); nothing for the others. Data of a reply with status COR_OK: GET
 * count elements; SWAP/FADD/CAS the old element; QUERY/DIR_GET an info record
 * (0 u8 type, 1 u8 protocol, 2 u16 name_len, 4 u32 home, 8 u64 count, 16 u64 appended,
 * 24 name); nothing for the others, nor for any error reply.
 */
#define DSM_REQ_MAGIC 0x31534443u /* "CDS1" */
#define DSM_REP_MAGIC 0x31524443u /* "CDR1" */
#define DSM_REQ_HDR 40
#define DSM_REP_HDR 24
#define DSM_INFO_HDR 24
#define DSM_ID_MAX 0x7fffffffu /* ids are tags: nonnegative ints */
#define DSM_MAX_ROUNDS 12      /* barrier rounds: ceil(log2(COR_MAX_DOMAINS)) */

enum dsm_op {
    DSM_OP_GET = 1,
    DSM_OP_PUT,
    DSM_OP_SWAP,
    DSM_OP_FADD,
    DSM_OP_CAS,
    DSM_OP_APPEND,
    DSM_OP_ADD,       /* non-fetching: no reply; errors kept for the sender's QUIET */
    DSM_OP_QUIET,     /* replies once the sender's earlier ADDs are applied */
    DSM_OP_QUERY,     /* info of an object homed at the receiver */
    DSM_OP_DIR_PUT,   /* register name -> object (at the name's directory domain) */
    DSM_OP_DIR_GET,   /* look a name up */
    DSM_OP_DIR_DEL,   /* unregister (from the home only) */
    DSM_OP_LOCK_OPEN, /* find or create a lock by name (at the name's directory domain) */
    DSM_OP_LOCK_ACQ,  /* reply when granted */
    DSM_OP_LOCK_TRY,  /* reply at once: granted or COR_EBUSY */
    DSM_OP_LOCK_REL,  /* no reply (the releasing task knows it holds the lock); offset = the
                         grant's number (a kept lock: from any task or the service of its domain) */
    DSM_OP_BARRIER,   /* obj = barrier id, offset = round, count = epoch; no reply */
    /* Cached protocol, service to service only (see dsm_dir.c): */
    DSM_OP_C_REQ,       /* copy holder -> home: flags = mode | DSM_CF_HAVE (upgrade) or
                           DSM_CF_DIRECT or DSM_CF_TASK (offset: the task) */
    DSM_OP_C_GRANT,     /* home -> holder: flags = mode (| DSM_CF_DIRECT), or DSM_CF_ERR; data: the
                           copy or none */
    DSM_OP_C_INV,       /* home -> holder: offset = round seq, id = the number of the grant it
                           revokes (dsm_dir granted, & DSM_ID_MAX); flags DSM_CF_WRITEBACK */
    DSM_OP_C_ACK,       /* holder -> home: offset = seq; data: the dirty copy or none */
    DSM_OP_C_FLUSH,     /* holder -> home: the copy was dropped; data: the dirty copy or none */
    DSM_OP_ADDV,        /* a batch of non-fetching adds: count entries (below); no reply */
    DSM_OP_C_GONE,      /* home -> every other domain: the cached object was destroyed; its copies
                           go (its index will name another object one day) */
    DSM_OP_LOCK_RECALL, /* home -> the service of the domain that keeps a lock: release it
                           (offset = the grant's number); no reply */
    DSM_OP_C_FACK,      /* reader -> the writer of a write in three hops (a C_INV with
                           DSM_CF_FWD): offset = seq; no data */
    DSM_OP_END
};

/* Flags of the cached protocol's messages. */
#define DSM_CF_MODE 0x3u /* DSM_MODE_READ or DSM_MODE_WRITE */
#define DSM_CF_HAVE 0x4u /* C_REQ: the requester holds a read copy (upgrade) */
/* C_REQ: send the data alone, straight into the posted copy; C_GRANT: it was (the header) */
#define DSM_CF_DIRECT 0x8u
/* C_REQ: a copy under DSM_DIRECT_MIN bytes; its requesting task (offset, a task of the
 * requester's domain) posted the receive of the data alone (dsm__rt.dctx), which is the grant;
 * with DSM_CF_HAVE (an upgrade, any size) the receive of an empty message, the grant unless the
 * home must send the data (then a C_GRANT message) */
#define DSM_CF_TASK 0x10u
#define DSM_CF_WRITEBACK 0x1u /* C_INV: the holder has the only valid copy */
#define DSM_CF_KEEP 0x2u      /* C_INV (with WRITEBACK): it keeps a read copy (downgrade) */
#define DSM_CF_ERR 0xff00u    /* C_GRANT refused: -status << 8 */
#define DSM_CF_ERR_SHIFT 8
/* C_INV of a write in three hops (never with WRITEBACK): acknowledge with C_FACK to the
 * writing domain, whose rank is in the bits DSM_CF_TO, not to the home */
#define DSM_CF_FWD 0x4u
#define DSM_CF_TO 0xffff0000u
#define DSM_CF_TO_SHIFT 16

/*
 * The grant of a write in three hops (an upgrade whose readers acknowledge to the writer):
 * the data of the message into the writing task's receive (otherwise empty):
 *   0 u32 seq (the round: the C_FACKs carry it)   4 u32 n (domains of the session)
 *   8 u64 x ceil(n / 64): the domains whose C_FACK the writer waits for (bit d of word d/64)
 */
#define DSM_FGRANT_HDR 8
static inline size_t dsm_fgrant_size(int n)
{
    return DSM_FGRANT_HDR + ((size_t)n + 63) / 64 * 8;
}
/* Encodes into buf (dsm_fgrant_size(n) bytes); `wait`: ceil(n / 64) words. */
void dsm_fgrant_encode(void *buf, uint32_t seq, int n, const uint64_t *wait);
/* Decodes len bytes for a session of n domains, in which `self` writes and `home` homes the
 * object: COR_OK, *seq, and `wait` (ceil(n / 64) words), or COR_EPROTO (length, n, a bit at
 * or beyond n, or for self or the home: a wait that would never end). */
int dsm_fgrant_decode(const void *buf, size_t len, int n, int self, int home, uint32_t *seq,
                      uint64_t *wait);

struct dsm_req {
    uint8_t op;
    uint8_t type;
    uint32_t id;
    uint32_t flags;
    uint64_t obj, offset, count;
    const char *name; /* not NUL-terminated on the wire: name_len bytes */
    size_t name_len;
    const void *data;
    size_t data_len;
};

struct dsm_rep {
    uint8_t op;
    uint8_t type;
    int32_t status;
    uint32_t id;
    uint64_t value;
    const void *data;
    size_t data_len;
};

/* The data a request of this op must carry, or SIZE_MAX if op/type/count are inconsistent. */
size_t dsm_req_data_len(uint8_t op, uint8_t type, uint64_t count);
/* Bytes dsm_req_encode writes (0 if the request is not well formed). */
size_t dsm_req_size(const struct dsm_req *r);
/* Writes the request into buf (cap bytes); returns its length, 0 if malformed or too long. */
size_t dsm_req_encode(void *buf, size_t cap, const struct dsm_req *r);
/* Parses len bytes; COR_OK, or COR_EPROTO for anything malformed (every length checked).
 * r->name/r->data point into buf. */
int dsm_req_decode(const void *buf, size_t len, struct dsm_req *r);

size_t dsm_rep_encode(void *buf, size_t cap, const struct dsm_rep *r);
int dsm_rep_decode(const void *buf, size_t len, struct dsm_rep *r);

/* Object information as a reply carries it (DSM_INFO_HDR + name). */
size_t dsm_info_encode(void *buf, size_t cap, const cor_dsm_info_t *info);
int dsm_info_decode(const void *buf, size_t len, cor_dsm_info_t *info);

/*
 * A batch of non-fetching adds (DSM_OP_ADDV, type 0, count = entries, 1..DSM_ADDV_MAX): each
 * entry is DSM_ADDV_ENTRY bytes: 0 u64 obj, 8 u64 index, 16 u8 type, 17..23 zero, 24 the
 * value (cor_type_size(type) bytes, the rest of 8 zero). Applied in order, as single adds.
 */
#define DSM_ADDV_ENTRY 32
#define DSM_ADDV_MAX 128
/* Writes one entry at e. */
void dsm_addv_put(unsigned char *e, uint64_t obj, uint64_t index, cor_type_t type,
                  const void *value);
/* Entry i of a decoded ADDV request as a single ADD request (data points into r); COR_EPROTO
 * if the entry is malformed. */
int dsm_addv_get(const struct dsm_req *r, size_t i, struct dsm_req *add);

/* FNV-1a of a name: the directory domain of a name is dsm_hash % domain count. */
uint64_t dsm_hash(const char *name, size_t len);

/* ---- Objects ------------------------------------------------------------------------- */

struct dsm_obj {
    cor_type_t type;
    size_t tsize;
    size_t count;
    uint64_t appended; /* next FIFO slot */
    unsigned char *data;
};

/* Bytes of output dsm_obj_apply writes for this request (GET: count elements; SWAP, FADD,
 * CAS: one element; 0 for the others). */
size_t dsm_obj_out_len(const struct dsm_req *r);
/*
 * Applies a decoded object request (GET, PUT, SWAP, FADD, ADD, CAS, APPEND) to o, whose
 * lock the caller holds. out gets dsm_obj_out_len bytes; *value the slot of an APPEND.
 * COR_ETYPE, COR_DSM_ERANGE, COR_ELIMIT (append without room), COR_EINVAL (other op, add on
 * bytes/chars).
 */
int dsm_obj_apply(struct dsm_obj *o, const struct dsm_req *r, void *out, uint64_t *value);

/* ---- Same-host objects, barriers and locks (dsm_shm.c; thread-safe, unlike the pure parts)
 *
 * A home-only object's home keeps its memory in a file of /dev/shm named after its idp
 * (cor-<session>-dsm-<home>-<index>: cor-run removes a session's cor-<session>-* files), so
 * that the other domains of the host operate on it themselves, under a robust process-shared
 * mutex in the file, without a message. Barriers whose members all share the host meet in a
 * file of their own, and so do the locks of a session whose domains all do. See dsm_shm.c.
 */
#define DSM_SHM_NONE 1 /* dsm_shm_views_apply: no segment here, send the request */
struct dsm_shm;
struct dsm_shm_bar;
/* The file's path for object idp (COR_EINVAL if it does not fit cap). */
int dsm_shm_path(char *buf, size_t cap, cor_idp_t idp);
/* A new zero-filled segment for count elements of type, not yet visible to other domains;
 * NULL if it cannot be had (no /dev/shm, no room): the object then stays private. */
struct dsm_shm *dsm_shm_create(cor_type_t type, size_t count);
/* Gives the segment its name: other domains of the host can open it from now on. */
int dsm_shm_publish(struct dsm_shm *s, cor_idp_t idp);
/* Whether the len bytes of a segment file (mapped) hold object idp: COR_OK and *obj (its
 * data pointing into file), or COR_EPROTO. Reads nothing beyond the header's page before
 * it knows the file holds the count it claims. */
int dsm_shm_check(const void *file, size_t len, cor_idp_t idp, struct dsm_obj *obj);
/* Maps the segment of object idp that its home published on this host, or NULL. */
struct dsm_shm *dsm_shm_open(cor_idp_t idp);
/* Applies r as dsm_obj_apply does, under the segment's mutex; COR_ENOTFOUND once the home
 * destroyed the object, COR_EPEERDEAD once a domain died writing it. */
int dsm_shm_apply(struct dsm_shm *s, const struct dsm_req *r, void *out, uint64_t *value);
/* FIFO slots taken (COR_ENOTFOUND, COR_EPEERDEAD as dsm_shm_apply). */
int dsm_shm_appended(struct dsm_shm *s, uint64_t *appended);
/* The home destroys the object: every later operation gets COR_ENOTFOUND; the name goes. */
void dsm_shm_retire(struct dsm_shm *s);
/* Unmaps (the home retires first). */
void dsm_shm_close(struct dsm_shm *s);
/* Applies r (r->obj homed in another domain) on that object's segment, mapped at the first
 * call: the operation's result, or DSM_SHM_NONE if the object has no segment here. */
int dsm_shm_views_apply(const struct dsm_req *r, void *out, uint64_t *value);
/* The same for n requests on one object (r[i].obj all r->obj), in one hold of its mutex:
 * COR_OK, the first error among them, or DSM_SHM_NONE (none applied). */
int dsm_shm_views_apply_all(const struct dsm_req *r, size_t n, void *out, uint64_t *value);
/* Whether object idp has a segment here (mapped now if it was not). */
bool dsm_shm_views_has(cor_idp_t idp);
/* Unmaps every view (cor_dsm_finalize: no operation runs). */
void dsm_shm_views_clear(void);
/* A barrier's file on this host (cor-<session>-bar-<id>-<gen>: gen counts the creations of
 * the name, the same in every member), mapped and joined; NULL if it cannot be had. */
struct dsm_shm_bar *dsm_shm_bar_join(uint32_t session, uint64_t id, unsigned gen);
/* After an episode went by messages: whether all n members joined the file (every member
 * sees the same answer). */
bool dsm_shm_bar_all_here(const struct dsm_shm_bar *s, int n);
/* This domain arrives (n members in all): true if it was the last, else *gen is what the
 * episode's end changes (dsm_shm_bar_passed). */
bool dsm_shm_bar_arrive(struct dsm_shm_bar *s, int n, uint32_t *gen);
bool dsm_shm_bar_passed(const struct dsm_shm_bar *s, uint32_t gen);
/* Sleeps in the kernel until the episode ends or a few milliseconds passed. */
void dsm_shm_bar_sleep(struct dsm_shm_bar *s, uint32_t gen);
/* Unlinks the file and unmaps it (NULL: nothing). */
void dsm_shm_bar_leave(struct dsm_shm_bar *s);
/* A lock's ticket lock in shared memory (for a session whose domains all share the host),
 * mapped at the first call for that lock (made if it is the first anywhere); NULL if it
 * cannot be mapped. Kept until dsm_shm_lock_views_clear. */
struct dsm_shm_lock;
struct dsm_shm_lock *dsm_shm_lock_view(cor_idp_t lock);
/* Takes the next ticket for a task of domain `rank`. */
uint32_t dsm_shm_lock_ticket(struct dsm_shm_lock *k, int rank);
/* Takes a ticket only if the lock is free (then it holds at once): COR_OK or COR_EBUSY. */
int dsm_shm_lock_try(struct dsm_shm_lock *k, int rank, uint32_t *ticket);
/* 1 when ticket t holds the lock (*status: COR_OK, or COR_DSM_EOWNERDEAD if the holder
 * before died holding it), else 0. Passes over the ticket being served if its taker's domain
 * is dead (dead(rank, arg)). */
int dsm_shm_lock_turn(struct dsm_shm_lock *k, uint32_t t, int rank, bool (*dead)(int, void *),
                      void *arg, int *status);
/* Sleeps until the ticket served changes or a few milliseconds passed. */
void dsm_shm_lock_sleep(struct dsm_shm_lock *k, uint32_t t);
void dsm_shm_lock_release(struct dsm_shm_lock *k);
/* Unmaps every lock and unlinks its file (cor_dsm_finalize: the session's locks are done). */
void dsm_shm_lock_views_clear(void);

/* ---- Locks: a FIFO queue at the lock's home ------------------------------------------ */

struct dsm_waiter {
    cor_idp_t who; /* task */
    uint32_t id;   /* its request, the tag of the grant */
};

/*
 * A grant made while nobody waits, to the domain the last grant went to, is *kept*: the
 * holder's domain may keep the lock after the release, and its tasks retake it with no
 * message, until the home recalls it (another domain asks, or a task of the holding domain
 * asks the home). Grants are numbered (gen), so
 * that a recall and the release it brings name the grant they concern.
 */
struct dsm_lock {
    cor_idp_t holder;     /* COR_IDP_NULL when free */
    bool owner_died;      /* the holder's domain died holding it: the next grant says so */
    bool kept;            /* the holder's domain keeps it (its grant said so) */
    bool recalled;        /* kept, and the recall went out */
    bool never_keep;      /* no grant is kept (COR_DSM_LOCK_KEEP=0) */
    unsigned last_domain; /* the domain of the last grant + 1 (0: none yet) */
    uint32_t gen;         /* number of the last grant (& DSM_ID_MAX) */
    struct dsm_waiter *q;
    size_t head, len, cap; /* ring */
};

/* A grant to send: task `who`, tag `id`, result `status` (COR_OK or COR_DSM_EOWNERDEAD),
 * its number `gen` and whether the domain may keep the lock (`keep`). */
struct dsm_grant {
    cor_idp_t who;
    uint32_t id;
    int status;
    uint32_t gen;
    bool keep;
};

/* A grant's reply value: its number and whether it is kept; and back. */
static inline uint64_t dsm_grant_value(const struct dsm_grant *g)
{
    return (uint64_t)g->gen << 1 | (g->keep ? 1u : 0u);
}

enum { DSM_LOCK_GRANTED = 1, DSM_LOCK_QUEUED = 2 };
/* Acquire (try = no queueing): DSM_LOCK_GRANTED (g->status is the result), DSM_LOCK_QUEUED,
 * COR_EBUSY (try, held), COR_ESTATE (who holds it already or waits for it), COR_ENOMEM.
 * *recall: the holder's domain keeps the lock and must now be sent a recall of grant l->gen
 * (once per grant; also for a refused try, so that a retry finds it free). A task of the
 * domain that keeps the lock is queued (its domain released it meanwhile, or will). */
int dsm_lock_acquire(struct dsm_lock *l, cor_idp_t who, uint32_t id, bool try, struct dsm_grant *g,
                     bool *recall);
/* Release of grant `gen` by who: COR_OK (then *granted says whether g names the next holder)
 * or COR_ESTATE (who does not hold it: not the holder, nor, for a kept lock, a task or the
 * service of its domain releasing that grant). */
int dsm_lock_release(struct dsm_lock *l, cor_idp_t who, uint32_t gen, struct dsm_grant *g,
                     bool *granted);
/* Domain `rank` died: its waiters leave the queue; if it held the lock, the next waiter gets
 * it with COR_DSM_EOWNERDEAD (*granted), or the next acquirer will. */
void dsm_lock_peer_dead(struct dsm_lock *l, unsigned rank, struct dsm_grant *g, bool *granted);
void dsm_lock_free(struct dsm_lock *l);

/* ---- Barriers: dissemination rounds --------------------------------------------------- */

struct dsm_bar {
    int n;           /* member domains (0 until the local create: messages may come first) */
    int pos;         /* our position among them */
    int rounds;      /* ceil(log2 n) */
    int local_tasks; /* arrivals per episode in this domain */
    int arrived;     /* local arrivals in the current episode */
    bool running;    /* all local tasks arrived: exchanging */
    int round;       /* current round while running */
    bool sent;       /* sent the current round's message */
    uint64_t epoch;  /* completed episodes */
    uint64_t recvd[DSM_MAX_ROUNDS]; /* messages received per round, all episodes */
};

/* A message to send: to the member at position `to`, for `round` of episode `epoch`. */
struct dsm_bar_msg {
    int to;
    int round;
    uint64_t epoch;
};

void dsm_bar_setup(struct dsm_bar *b, int n, int pos, int local_tasks);
/* A local task arrives: returns true if it was the last one (the exchange starts). */
bool dsm_bar_arrive(struct dsm_bar *b);
/* The episode is complete (the exchange's last round, or the domains met otherwise). */
void dsm_bar_done(struct dsm_bar *b);
/* A round's message arrived; COR_EPROTO if round is out of range. */
int dsm_bar_recv(struct dsm_bar *b, uint64_t round);
/* Moves the exchange on as far as received messages allow: writes the messages to send into
 * out (at most DSM_MAX_ROUNDS), returns how many; *completed says whether the episode ended
 * (b->epoch counts it). */
int dsm_bar_advance(struct dsm_bar *b, struct dsm_bar_msg *out, bool *completed);

/* ---- Cached protocol: the home's directory and a domain's copy (dsm_dir.c) -----------
 *
 * Every domain that uses a cached object keeps one copy of it, shared by its tasks; the home's
 * copy is the object's memory. The home keeps a directory: which domains hold a read copy
 * (sharers) and which one, if any, holds the write copy (owner); initially the home owns it.
 * Requests to the directory are served one at a time in arrival order: a request that
 * conflicts with copies held elsewhere sends invalidations to all their holders at once (a
 * round, numbered) and is granted when every holder acknowledged (the owner's acknowledgment
 * carries its data back). A reader's request only downgrades the owner: it writes its data
 * back and keeps a read copy (CRL's downgrade), so a producer reads on without a miss. A
 * holder with a section open defers the acknowledgment until the section ends. Remote
 * operations on a cached object are directory requests too (kind OP): reads recall the write
 * copy, writes invalidate every copy, the home's included, then the operation runs on the
 * home's memory. A voluntary flush releases a copy without a request.
 * Messages between two domains' services arrive in the order sent, which the protocol needs
 * (a grant is never overtaken by the next invalidation of the same copy).
 * A write in three hops (forward): an upgrade asked by a task of another domain while only
 * readers hold copies sends the readers' invalidations with the writer's rank (finv); the
 * directory forgets them at once, and the grant (sent when the home's own copy, if it reads,
 * is invalidated) names them (fwd): the writer waits for their acknowledgments itself (or
 * their deaths). Every later request conflicts with the writer, which answers only once it
 * has them all, so nothing the readers did is overtaken.
 */

enum { DSM_MODE_NONE = 0, DSM_MODE_READ = 1, DSM_MODE_WRITE = 2 };
enum { DSM_DREQ_SECTION = 0, DSM_DREQ_OP = 1 };

struct dsm_dreq {
    int who;        /* requesting domain (OP: the home) */
    uint8_t mode;   /* DSM_MODE_READ or DSM_MODE_WRITE */
    uint8_t kind;   /* DSM_DREQ_SECTION or DSM_DREQ_OP */
    bool have_copy; /* SECTION: the requester says it holds a read copy (upgrade) */
    bool recalled;  /* set by the directory: copies had to be invalidated first */
    bool direct;    /* SECTION: the data goes alone into the copy the requester posted */
    bool forwarded; /* set by the directory: a write in three hops (dsm_dir fwd) */
    uint64_t task;  /* SECTION: the task whose receive of the data alone is the grant, or 0 */
    void *op;       /* OP: the runtime's pending operation */
};

struct dsm_dir_cb {
    /* Invalidate domain dom's copy (round seq; writeback: it is the owner; keep: it keeps a
     * read copy after writing back, a downgrade). Returns true if done at once (the home's own
     * copy, no section open): no acknowledgment will come. */
    bool (*inv)(void *ctx, int dom, uint32_t seq, bool writeback, bool keep);
    /* Grant request r. data: the grant must carry the object's data (the requester has no
     * valid copy). status: COR_OK, or COR_EPEERDEAD when the data was lost (an owner died). */
    void (*grant)(void *ctx, const struct dsm_dreq *r, bool data, int status);
    /* Optional (dsm_dir forward): invalidate reader dom's copy for a write in three hops by
     * domain `to` (round seq): dom acknowledges to `to`, not to the home. */
    void (*finv)(void *ctx, int dom, uint32_t seq, int to);
};

struct dsm_dir {
    int n; /* domains */
    int home;
    uint64_t *sharers; /* bit per domain holding a read copy */
    uint64_t *waiting; /* bit per domain whose acknowledgment the round waits for */
    uint64_t *keeping; /* of those, the owner downgraded to a read copy */
    uint64_t *dead;    /* bit per domain known dead */
    uint32_t *granted; /* per domain: section grants sent to it, the last one's number */
    uint64_t *fwd;     /* the current round's readers that acknowledge to the writer */
    bool forward;      /* writes in three hops (set by the caller; needs cb->finv) */
    int owner;         /* domain holding the write copy, or -1 */
    int nwait;
    bool busy;    /* a round is in progress for cur */
    bool lost;    /* an owner died: the data is gone, every request fails */
    int fail;     /* nonzero: every request fails with it (the object was destroyed) */
    uint32_t seq; /* current round */
    struct dsm_dreq cur;
    struct dsm_dreq *q; /* ring of requests waiting their turn */
    size_t head, len, cap;
    const struct dsm_dir_cb *cb;
    void *ctx;
    uint64_t rounds, invals; /* statistics */
};

int dsm_dir_init(struct dsm_dir *d, int n, int home, const struct dsm_dir_cb *cb, void *ctx);
void dsm_dir_free(struct dsm_dir *d);
/* Queues r and serves what can be served (callbacks run inside). COR_ENOMEM. */
int dsm_dir_request(struct dsm_dir *d, const struct dsm_dreq *r);
/* What domain dom holds: DSM_MODE_NONE, _READ or _WRITE. */
int dsm_dir_holds(const struct dsm_dir *d, int dom);
/* Whether an acknowledgment (dom, seq) is awaited by the current round. */
bool dsm_dir_ack_expected(const struct dsm_dir *d, int dom, uint32_t seq);
/* Acknowledgment of round seq by dom (the caller wrote an owner's data back first); stale ones
 * are ignored (returns false). */
bool dsm_dir_ack(struct dsm_dir *d, int dom, uint32_t seq);
/* dom dropped its copy by itself (the caller wrote an owner's data back first). */
void dsm_dir_release(struct dsm_dir *d, int dom);
/* The object is going away: each(ctx, dom) for every domain holding a copy (forgotten), then
 * the current and every queued request, and every later one, are refused with err. */
void dsm_dir_fail(struct dsm_dir *d, int err, void (*each)(void *ctx, int dom), void *ctx);
/* dom died: its requests leave the queue, its copy is forgotten (the data is lost if it owned
 * it), an acknowledgment awaited from it counts as given. */
void dsm_dir_peer_dead(struct dsm_dir *d, int dom);

/* A domain's copy (the holder's side), under the copy's mutex. */
struct dsm_copy {
    uint8_t state;   /* DSM_MODE_NONE (invalid), _READ (shared) or _WRITE (exclusive) */
    uint8_t pending; /* mode requested from the home and not granted yet, or NONE */
    bool inv;        /* an invalidation waits for the open sections to end */
    bool fresh;      /* granted while tasks waited, and no section started since */
    bool inv_keep;   /* the invalidation is a downgrade: a write copy becomes a read copy */
    uint32_t inv_seq;
    int readers, writers; /* open sections, all tasks of the domain */
    int waiters;          /* tasks waiting to start a section */
    int err;              /* sticky: COR_EPEERDEAD (home died, data lost) */
};

/* Whether a section of `mode` may start now without asking anyone. */
bool dsm_copy_can_start(const struct dsm_copy *c, int mode);
void dsm_copy_start(struct dsm_copy *c, int mode);
/* A section that cannot start: returns the mode to request from the home (and *have: the
 * request is an upgrade), DSM_MODE_NONE to just wait, or c->err. Marks the request pending. */
int dsm_copy_miss(struct dsm_copy *c, int mode, bool *have);
/* A section ends: true if a deferred invalidation is now due (call dsm_copy_drop). */
bool dsm_copy_end(struct dsm_copy *c, int mode);
/* The home granted `mode` (or refused with err < 0). */
void dsm_copy_grant(struct dsm_copy *c, int mode, int err);
/* The home invalidates the copy (round seq; keep: a write copy becomes a read copy): true if
 * it is dropped now (acknowledge it, with the data if *dirty), false if deferred until the
 * open sections end. */
bool dsm_copy_inv(struct dsm_copy *c, uint32_t seq, bool keep, bool *dirty);
/* Drops the copy (a due invalidation, or a flush): returns whether it was dirty. A due
 * downgrade (inv_keep) keeps a write copy readable; a flush clears inv_keep first. */
bool dsm_copy_drop(struct dsm_copy *c);

#endif
