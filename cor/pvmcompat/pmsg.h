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

#define LP_MM_PACK 1 /* being packed: fragment lengths need pmsg_setlen */
/* Ours: marks a message that came over a CoR route (3.4.6 uses bits 1, 2, 4 and, on CSPP
 * only, 256; its unpackers keep the others). */
#define LP_MM_ROUTED 0x4000

/* Once per task, lock held: true if libpvm3's messages look as mirrored. */
bool cpvm_layout_check(void);

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

/* Builds the routed form of message `mid` (sent to tid with tag, in ctx); PVM status. */
int cpvm_out_message(int mid, int tid, int tag, int ctx, struct cpvm_out *o);
/* The same for len bytes at data (pvm_psend), as a native-encoded message. */
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
/* Queues it (or runs its handler), as a message read from PVM's sockets would be. */
void cpvm_in_deliver(struct lp_msg *m);
void cpvm_in_discard(struct lp_msg *m);
/* Whether message mid came over a CoR route (for the counters). Lock held. */
bool cpvm_msg_routed(int mid);

/* True if libpvm3's receive queue holds a message that pvm_nrecv(tid, tag) would take now,
 * by libpvm3's own matching rule (also when the program set its own with pvm_recvf: then
 * every message counts). Looking costs nothing, unlike pvm_nrecv, which reads PVM's sockets
 * (a select) whenever nothing matches. Lock held. */
bool cpvm_queued(int tid, int tag);
extern bool cpvm_custom_match; /* pvm_recvf installed a matcher of the program's */

#endif
