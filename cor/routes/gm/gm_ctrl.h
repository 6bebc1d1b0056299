/* The gm route's headers as bytes (gm_ctrl.c): control messages and the header of data frames;
 * no other header needed, for the fuzz targets. */
#ifndef GM_CTRL_H
#define GM_CTRL_H

#include <stddef.h>
#include <stdint.h>

/* Control messages (high priority, GMR_CTRL_LEN bytes): the whole session cookie (0), an
 * opcode (8), an argument (12), the sender port's incarnation (16) and the receiver's as the
 * sender knows it (20). A port's incarnation (random, nonzero, per open) is in its address:
 * a rank re-admitted for a new domain (dynamic sessions reuse ranks, often at the same GM
 * node and port) must not take a BYE or CREDIT of its earlier occupant, nor one meant for our
 * own earlier port. */
#define GMR_CTRL_LEN 24
#define GMR_CTRL_CLASS 6 /* 56-byte buffers for control messages */
#define GMR_OP_BYE 1     /* the sender closed its port: sends to it will fail */
#define GMR_OP_CREDIT 2  /* arg = data buffers the sender provided again for us */
#define GMR_OP_PING 3    /* are you there? (we wait for you): answer PONG, arg 0 */
#define GMR_OP_PONG 4    /* the answer to a PING, from whichever thread polls */

/* Data frames (low priority) start with GMR_HDR bytes: 32 bits of the session cookie (0), the
 * receive credits the sender returns, small | large << 16 (4), the sender port's incarnation
 * (8) and the receiver's as the sender knows it (12); the core's frame follows. The
 * incarnations are checked as on control messages: a data frame of a rank's earlier occupant
 * must not add its credits to the new occupant's. */
#define GMR_HDR 16

enum gmr_ctrl_verdict {
    GMR_CTRL_OK,    /* *op and *arg are valid (a CREDIT's amount still to check) */
    GMR_CTRL_BAD,   /* malformed, another session's, or an unknown opcode */
    GMR_CTRL_STALE, /* another incarnation's, of either end */
};

void gmr_ctrl_encode(char *m, uint64_t cookie, uint32_t op, uint32_t arg, uint32_t from_inc,
                     uint32_t to_inc);
/* Checks a received control message; peer_inc 0: the sender's address gave none. */
enum gmr_ctrl_verdict gmr_ctrl_parse(const void *buf, size_t len, uint64_t cookie, uint32_t my_inc,
                                     uint32_t peer_inc, uint32_t *op, uint32_t *arg);

/* A data frame's header; the credits are written again as the frame leaves (gm_tx.c). */
void gmr_data_encode(char *m, uint32_t cookie32, uint32_t credits, uint32_t from_inc,
                     uint32_t to_inc);
/* Checks a received data frame's header (len: the whole frame, at least GMR_HDR); *credits
 * as packed (their amounts still to check against what the sender has out). OK, BAD (short,
 * another session's) or STALE, by the rules of gmr_ctrl_parse. */
enum gmr_ctrl_verdict gmr_data_parse(const void *buf, size_t len, uint32_t cookie32,
                                     uint32_t my_inc, uint32_t peer_inc, uint32_t *credits);

#endif
