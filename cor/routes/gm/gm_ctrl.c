/*
 * The gm route's control messages (BYE, CREDIT, PING, PONG) and data frame headers as bytes:
 * the layouts are in gm_ctrl.h. Checking one needs no port state but the session cookie and
 * the incarnations (ours, and the sender's as its address gave it), so the checks are
 * functions of their own, which tests/conformance/fuzz_gmctrl.c and fuzz_gmdata.c feed
 * arbitrary bytes.
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

void gmr_data_encode(char *m, uint32_t cookie32, uint32_t credits, uint32_t from_inc,
                     uint32_t to_inc)
{
    memcpy(m, &cookie32, 4);
    memcpy(m + 4, &credits, 4);
    memcpy(m + 8, &from_inc, 4);
    memcpy(m + 12, &to_inc, 4);
}

enum gmr_ctrl_verdict gmr_data_parse(const void *buf, size_t len, uint32_t cookie32,
                                     uint32_t my_inc, uint32_t peer_inc, uint32_t *credits)
{
    const char *m = buf;
    uint32_t c, from_inc, to_inc;
    if (!m || len < GMR_HDR) return GMR_CTRL_BAD;
    memcpy(&c, m, 4);
    memcpy(credits, m + 4, 4);
    memcpy(&from_inc, m + 8, 4);
    memcpy(&to_inc, m + 12, 4);
    if (c != cookie32) return GMR_CTRL_BAD;
    if ((peer_inc && from_inc != peer_inc) || (to_inc && to_inc != my_inc)) return GMR_CTRL_STALE;
    return GMR_CTRL_OK;
}
