/* The gm route's control messages as bytes (gm_ctrl.c); no other header needed, for the fuzz
 * target. */
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

#endif
