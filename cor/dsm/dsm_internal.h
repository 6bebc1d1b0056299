/*
 * libcordsm's private header: the wire format of requests and replies (dsm_wire.c), the
 * operations on an object's memory (dsm_obj.c), a lock's FIFO queue (dsm_lock.c) and a
 * barrier's dissemination rounds (dsm_barrier.c). These parts are pure (no libcor calls, no
 * locks of their own): the caller holds whatever lock protects the state, and the unit tests
 * and the fuzzer link them alone. dsm.c is the runtime on top (service, client calls).
 */
#ifndef COR_DSM_INTERNAL_H
#define COR_DSM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cor/cor.h"
#include "cor/dsm.h"

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
    DSM_OP_LOCK_REL,
    DSM_OP_BARRIER, /* obj = barrier id, offset = round, count = epoch; no reply */
    DSM_OP_END
};

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

/* ---- Locks: a FIFO queue at the lock's home ------------------------------------------ */

struct dsm_waiter {
    cor_idp_t who; /* task */
    uint32_t id;   /* its request, the tag of the grant */
};

struct dsm_lock {
    cor_idp_t holder; /* COR_IDP_NULL when free */
    bool owner_died;  /* the holder's domain died holding it: the next grant says so */
    struct dsm_waiter *q;
    size_t head, len, cap; /* ring */
};

/* A grant to send: task `who`, tag `id`, result `status` (COR_OK or COR_DSM_EOWNERDEAD). */
struct dsm_grant {
    cor_idp_t who;
    uint32_t id;
    int status;
};

enum { DSM_LOCK_GRANTED = 1, DSM_LOCK_QUEUED = 2 };
/* Acquire (try = no queueing): DSM_LOCK_GRANTED (g->status is the result), DSM_LOCK_QUEUED,
 * COR_EBUSY (try, held), COR_ESTATE (who holds it already or waits for it), COR_ENOMEM. */
int dsm_lock_acquire(struct dsm_lock *l, cor_idp_t who, uint32_t id, bool try, struct dsm_grant *g);
/* Release by who: COR_OK (then *granted says whether g names the next holder) or
 * COR_ESTATE (who does not hold it). */
int dsm_lock_release(struct dsm_lock *l, cor_idp_t who, struct dsm_grant *g, bool *granted);
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
/* A round's message arrived; COR_EPROTO if round is out of range. */
int dsm_bar_recv(struct dsm_bar *b, uint64_t round);
/* Moves the exchange on as far as received messages allow: writes the messages to send into
 * out (at most DSM_MAX_ROUNDS), returns how many; *completed says whether the episode ended
 * (b->epoch counts it). */
int dsm_bar_advance(struct dsm_bar *b, struct dsm_bar_msg *out, bool *completed);

#endif
