/*
 * libFuzzer target: the gm route's control-message check (cor/routes/gm/gm_ctrl.c). Input:
 * our port's incarnation and the sender's (4 bytes each), then the received message. Checks
 * that a message accepted has the layout's length, the session's cookie, a known opcode with
 * a fitting argument and both incarnations right, that one of another incarnation is called
 * stale, and that an accepted one encodes back to the same bytes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gm_ctrl.h"

#define COOKIE 0x1122334455667788ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) return 0;
    uint32_t my_inc, peer_inc, op = 0, arg = 0;
    memcpy(&my_inc, data, 4);
    memcpy(&peer_inc, data + 4, 4);
    const uint8_t *m = data + 8;
    size_t len = size - 8;
    enum gmr_ctrl_verdict v = gmr_ctrl_parse(m, len, COOKIE, my_inc, peer_inc, &op, &arg);
    if (v == GMR_CTRL_BAD) return 0;
    if (len != GMR_CTRL_LEN) abort();
    uint64_t cookie;
    uint32_t from, to;
    memcpy(&cookie, m, 8);
    memcpy(&from, m + 16, 4);
    memcpy(&to, m + 20, 4);
    if (cookie != COOKIE) abort();
    bool stale = (peer_inc && from != peer_inc) || (to && to != my_inc);
    if ((v == GMR_CTRL_STALE) != stale) abort();
    if (v != GMR_CTRL_OK) return 0;
    if (op < GMR_OP_BYE || op > GMR_OP_PONG || (op == GMR_OP_CREDIT) != (arg != 0)) abort();
    char back[GMR_CTRL_LEN];
    gmr_ctrl_encode(back, COOKIE, op, arg, from, to);
    if (memcmp(back, m, GMR_CTRL_LEN)) abort();
    return 0;
}
