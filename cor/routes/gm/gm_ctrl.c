/*
 * The gm route's control messages (BYE, CREDIT, PING, PONG) as bytes: the layout is in
 * gm_port.h. Checking one needs no port state but the session cookie and the incarnations
 * (ours, and the sender's as its address gave it), so the check is a function of its own,
 * which tests/fuzz/fuzz_gmctrl.c feeds arbitrary bytes.
 */
#include <string.h>

#include "gm_ctrl.h"

void gmr_ctrl_encode(char *m, uint64_t cookie, uint32_t op, uint32_t arg, uint32_t from_inc,
                     uint32_t to_inc)
{
    memcpy(m, &cookie, 8);
    memcpy(m + 8, &op, 4);
    memcpy(m + 12, &arg, 4);
    memcpy(m + 16, &from_inc, 4);
    memcpy(m + 20, &to_inc, 4);
}

enum gmr_ctrl_verdict gmr_ctrl_parse(const void *buf, size_t len, uint64_t cookie, uint32_t my_inc,
                                     uint32_t peer_inc, uint32_t *op, uint32_t *arg)
{
    const char *m = buf;
    uint64_t c;
    uint32_t from_inc, to_inc;
    if (!m || len != GMR_CTRL_LEN) return GMR_CTRL_BAD;
    memcpy(&c, m, 8);
    memcpy(op, m + 8, 4);
    memcpy(arg, m + 12, 4);
    memcpy(&from_inc, m + 16, 4);
    memcpy(&to_inc, m + 20, 4);
    if (c != cookie) return GMR_CTRL_BAD;
    /* The rank's earlier occupant (re-admitted since), or meant for our earlier port. (0: an
     * address without an incarnation: not checked.) */
    if ((peer_inc && from_inc != peer_inc) || (to_inc && to_inc != my_inc)) return GMR_CTRL_STALE;
    if (*op < GMR_OP_BYE || *op > GMR_OP_PONG) return GMR_CTRL_BAD;
    if (*op == GMR_OP_CREDIT ? *arg == 0 : *arg != 0) return GMR_CTRL_BAD;
    return GMR_CTRL_OK;
}
