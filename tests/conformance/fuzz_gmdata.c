/*
 * libFuzzer target: the gm route's data frame header check (cor/routes/gm/gm_ctrl.c). Input:
 * our port's incarnation and the sender's (4 bytes each), then the received frame. Checks
 * that a frame accepted is at least a header long, has the session's cookie and both
 * incarnations right, that one of another incarnation is called stale, and that an accepted
 * header encodes back to the same bytes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gm_ctrl.h"

#define COOKIE32 0x55667788u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) return 0;
    uint32_t my_inc, peer_inc, credits = 0;
    memcpy(&my_inc, data, 4);
    memcpy(&peer_inc, data + 4, 4);
    const uint8_t *m = data + 8;
    size_t len = size - 8;
    enum gmr_ctrl_verdict v = gmr_data_parse(m, len, COOKIE32, my_inc, peer_inc, &credits);
    if (v == GMR_CTRL_BAD) return 0;
    if (len < GMR_HDR) abort();
    uint32_t cookie32, from, to;
    memcpy(&cookie32, m, 4);
    memcpy(&from, m + 8, 4);
    memcpy(&to, m + 12, 4);
    if (cookie32 != COOKIE32) abort();
    bool stale = (peer_inc && from != peer_inc) || (to && to != my_inc);
    if ((v == GMR_CTRL_STALE) != stale) abort();
    if (v != GMR_CTRL_OK) return 0;
    char back[GMR_HDR];
    gmr_data_encode(back, COOKIE32, credits, from, to);
    if (memcmp(back, m, GMR_HDR)) abort();
    return 0;
}
