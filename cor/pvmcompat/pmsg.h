/*
 * libpvm3 3.4.6's messages from the inside: a routed message is read straight from the send
 * buffer's fragments and rebuilt straight into fragments at the receiver, instead of going
 * through pvm_pkmesg/pvm_upkmesg (two extra copies and a dozen calls each way).
 *
 * The layouts below mirror libpvm3's private `struct pmsg` and `struct frag` (pmsg.h and
 * pvmfrag.h of PVM 3.4.6) field for field. cpvm_layout_check proves the mirror against the
 * running library once; a task whose libpvm3 fails it takes no CoR route (PVM's path only).
 */
#ifndef CPVM_PMSG_H
#define CPVM_PMSG_H
#include "pvmcompat.h"
#include "wire.h"

struct lp_frag {
    struct lp_frag *link, *rlink; /* list; the master frag heads it */
    char *buf;                    /* 0 in the master */
    char *dat;                    /* the data, inside buf after some headroom */
    int max, len;
    struct {
        unsigned ref : 16, dab : 1, spr : 1;
    } u;
    int csz, lnc, seq, src, rip;
};

struct lp_msg {
    struct lp_msg *link, *rlink;
    void *codef;
    struct lp_frag *frag, *cfrag;
    int ref, mid, len, ctx, tag, wid, src, dst, enc, flag, cpos, crc;
    /* an XDR stream follows: never touched here */
};

/* libpvm3's `struct encvec`: per encoding, its init, then encoder and decoder of each type
 * (byte, short, int, long, ushort, uint, ulong, float, double, cplx, dcplx), alternating. */
typedef int (*lp_coder)(struct lp_msg *m, void *data, int cnt, int std, int size);
struct lp_codec {
    void *init[2];
    lp_coder code[22];
};
enum lp_type {
    LP_BYTE,
    LP_SHORT,
    LP_INT,
    LP_LONG,
    LP_USHORT,
    LP_UINT,
    LP_ULONG,
    LP_FLOAT,
    LP_DOUBLE,
    LP_CPLX,
    LP_DCPLX
};
#define LP_DECODER(m, type) (((const struct lp_codec *)(m)->codef)->code[2 * (type) + 1])

#define LP_MM_PACK 1  /* being packed: fragment lengths need pmsg_setlen */
#define LP_MM_UPACK 2 /* being unpacked: pvm_setrbuf keeps its read position */
/* Ours: marks a message that came over a CoR route (3.4.6 uses bits 1, 2, 4 and, on CSPP
 * only, 256; its unpackers keep the others). */
#define LP_MM_ROUTED 0x4000
/* Ours: a receive spare filled by the pump, its decoding set up already (cpvm_in_deliver). */
#define LP_MM_READY 0x2000
/* Ours: a receive spare not yet filled: no program knows its id (cpvm_mid_hidden). */
#define LP_MM_SPARE 0x1000

/* Once per task, lock held: true if libpvm3's messages look as mirrored. */
bool cpvm_layout_check(void);

/* ---- packing and unpacking without the big lock (pack.c) ---- */

/* A pack of the calling thread's send buffer whose copy can be made without the lock: a large
 * contiguous PvmDataRaw pack (a fragment of its own, allocated under the lock). */
struct cpvm_pack_job {
    struct lp_msg *msg;
    struct lp_frag *frag; /* for what does not fit in the last fragment; NULL if all does */
    const char *src;
    int room, bytes; /* room left in the last fragment; bytes in all */
};
/* Lock held: true (and *job) if the pack of cnt items of size bytes at data with stride std
 * into the active send buffer can copy without the lock; false: libpvm3 packs it. */
bool cpvm_pack_prepare(const void *data, int cnt, int std, int size, struct cpvm_pack_job *job);
void cpvm_pack_finish(const struct cpvm_pack_job *job); /* without the lock */
/* Lock held: the active send buffer if the thread can pack and send it without the lock
 * (native data: Raw being packed, or InPlace; no tracing), else NULL; and its mid (0: none). */
struct lp_msg *cpvm_pack_target(void);
int cpvm_sbuf_mid(void);
/* Without the lock, into the thread's own send buffer m (cpvm_own_sbuf): true if the pack of
 * cnt items of `size` bytes at data (stride std) was copied into the room of its last
 * fragment (a Raw message) or, InPlace, added as a fragment over the data (a frame of the
 * thread's, cpvm_frame_take); false: the caller takes the locked path. */
bool cpvm_pack_unlocked(struct lp_msg *m, const void *data, int cnt, int std, int size);
/* Lock held: a new message of encoding enc (PvmDataRaw or PvmDataInPlace) for a pvm_initsend
 * without the lock: a Raw one with an empty fragment of `room` bytes to pack into. NULL if
 * libpvm3 could not make it. */
struct lp_msg *cpvm_spare_make(int enc, int room);
/* The bytes in m's fragments (its body as sent). */
long cpvm_msg_body(const struct lp_msg *m);
/* Lock held: the active receive buffer if it can be unpacked without the lock (native data:
 * libpvm3's decoders only read its fragments then), else NULL. lock.c keeps what it was when
 * the thread last left the lock (cpvm_own_rbuf): the thread's own until its next call. */
struct lp_msg *cpvm_unpack_target(void);
/* Without the lock: unpacks like pvm_upk<type> (`name`, for libpvm3's error report). */
int cpvm_unpack(struct lp_msg *m, enum lp_type type, void *data, int cnt, int std, int size,
                const char *name);

/* ---- sending ---- */

/* A routed message ready to go: the image (header, inline fragments, the lengths of the
 * detached ones) and the detached pieces, each sent as a message of its own after it. */
struct cpvm_out {
    void *image;
    size_t image_len, image_cap;
    int npiece;
    struct cpvm_piece {
        const void *data;
        int len;
        void *owned; /* a gathered copy (cap in owned_cap), else NULL: data is the message's */
        size_t owned_cap;
    } piece[CPVM_DETACH_MAX];
};

/* Builds the routed form of message `mid` (sent to tid with tag, in ctx); PVM status. Lock
 * held. */
int cpvm_out_message(int mid, int tid, int tag, int ctx, struct cpvm_out *o);
/* The same in two steps, the second without the big lock: message mid ready to be read
 * (NULL: no such buffer), lock held; then its routed form, built by the thread that owns
 * the message (its send buffer: nobody else changes it meanwhile). */
struct lp_msg *cpvm_out_prepare(int mid);
int cpvm_out_build(const struct lp_msg *m, int tid, int tag, int ctx, struct cpvm_out *o);
/* Reads what the builders need (COR_PVM_DETACH_MIN) once; lock held. */
void cpvm_out_init(void);
/* The same for len bytes at data (pvm_psend), as a native-encoded message; no lock needed
 * once cpvm_out_init ran. */
int cpvm_out_bytes(const void *data, int len, int tid, int tag, int ctx, struct cpvm_out *o);
void cpvm_out_release(struct cpvm_out *o);
/* Gives back an image buffer taken out of a cpvm_out (for sends that outlive it). */
void cpvm_image_release(void *image, size_t cap);

/* ---- receiving ---- */

/* Builds the libpvm3 message of a checked image: inline fragments copied, detached ones
 * allocated (where each must be received: dst[i], len[i], i < *ndetached). Returns the
 * message, not yet queued; NULL out of memory. */
struct lp_msg *cpvm_in_message(const void *image, size_t len, char *dst[CPVM_DETACH_MAX],
                               int dlen[CPVM_DETACH_MAX], int *ndetached);
/* Queues it (or runs its handler), as a message read from PVM's sockets would be: in the
 * routed receive queue (rxq.c) when it can, else libpvm3's. Big lock. */
void cpvm_in_deliver(struct lp_msg *m);
/* Receive spares (messages made ahead for small images), big lock: whether a receive's wait
 * should make more (any lock), make a few, and open or close the pool (the route's inbound;
 * closing frees them). */
bool cpvm_in_spares_low(void);
void cpvm_in_spares_top_up(void);
void cpvm_in_spares_open(bool on);
/* Big lock: whether mid is a receive spare, which calls naming a buffer treat as no buffer
 * (libpvm3 knows it, the program does not). */
bool cpvm_mid_hidden(int mid);
void cpvm_in_discard(struct lp_msg *m);
/* Whether message mid came over a CoR route (for the counters). Lock held. */
bool cpvm_msg_routed(int mid);

/* True if libpvm3's receive queue holds a message that pvm_nrecv(tid, tag) would take now,
 * by libpvm3's own matching rule (also when the program set its own with pvm_recvf: then
 * every message counts). Looking costs nothing, unlike pvm_nrecv, which reads PVM's sockets
 * (a select) whenever nothing matches. Lock held. */
bool cpvm_queued(int tid, int tag);
extern bool cpvm_custom_match; /* pvm_recvf installed a matcher of the program's */
/* The mid of the active receive buffer, and the current context (libpvm3's). Lock held. */
int cpvm_rbuf_mid(void);
int cpvm_current_context(void);

/* ---- the routed receive queue (rxq.c) ---- */

extern int cpvm_user_handlers; /* message handlers of the program's (pvm_addmhf); big lock */
/* Big lock: the whole queue to the head of libpvm3's (then libpvm3 sees every message). */
void cpvm_rxq_flush(void);
/* Big lock: before a call that changes message mid: flushes the queue if mid is in it. */
void cpvm_rxq_release(int mid);
/* Any lock: the oldest message matching (tid, tag, ctx) by libpvm3's rule (-1: any), taken
 * out of the queue (CPVM_RXQ_TAKE; CPVM_RXQ_NATIVE: only if its data is native) or not
 * (CPVM_RXQ_PEEK); NULL if none. */
enum { CPVM_RXQ_PEEK, CPVM_RXQ_TAKE, CPVM_RXQ_NATIVE };
struct lp_msg *cpvm_rxq_take(int tid, int tag, int ctx, int how);
/* Big lock, at the outermost leave: what receives without the lock look at. */
void cpvm_rxq_publish(void);
/* A receive without the big lock: 1 = done (*rc: the buffer id, or 0), 0 = the caller takes
 * the locked path (libpvm3 has to look), -1 (CPVM_RX_LONG, blocking receives without precv
 * only) = nothing came for the spin and 20 ms: the caller looks once under the lock (libpvm3's
 * queue and sockets, recv_look in msgio.c) and calls again with CPVM_RX_AGAIN (blocking, no
 * spin). deadline_ns: 0 = none. */
#define CPVM_RX_LONG (-1)
enum { CPVM_RX_BLOCK, CPVM_RX_NONBLOCK, CPVM_RX_PROBE, CPVM_RX_AGAIN };
/* pvm_precv's arguments (size: the type's, not 0): a blocking receive that unpacks native data
 * into buf and frees the message (*rc: a PVM status). */
struct cpvm_precv {
    void *buf;
    int len, size;
    int *rtid, *rtag, *rlen;
};
int cpvm_recv_unlocked(int tid, int tag, int mode, uint64_t deadline_ns,
                       const struct cpvm_precv *precv, int *rc);

#endif
