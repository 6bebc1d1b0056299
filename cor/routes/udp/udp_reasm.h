/*
 * Reassembly of frames from in-order fragments (pure logic). The receive window hands
 * fragments over in sequence order, so a frame is simply its fragments appended one after
 * the other; anything else (a gap, a changed frame length) is a protocol violation.
 * Lengths come from a header udp_wire_parse() accepted, so frame_len <= frame_max.
 */
#ifndef UDP_REASM_H
#define UDP_REASM_H

#include <stddef.h>
#include <stdint.h>

#include "udp_wire.h"

struct udp_reasm {
    uint8_t *buf;       /* frame being assembled (malloc'd), NULL when idle */
    uint32_t frame_len; /* its total length */
    uint32_t have;      /* bytes assembled so far */
};

enum udp_ra_result {
    UDP_RA_MORE,   /* fragment taken, frame not complete */
    UDP_RA_SINGLE, /* the fragment is a whole frame: *frame points into payload */
    UDP_RA_DONE,   /* frame complete: *frame is malloc'd, now owned by the caller */
    UDP_RA_BAD,    /* inconsistent with the frame in progress: nothing taken */
    UDP_RA_NOMEM,  /* could not allocate the frame: nothing taken */
};

/* Feeds the next in-order DATA fragment (header h, payload h->len bytes). */
int udp_reasm_feed(struct udp_reasm *r, const struct udp_hdr *h, const uint8_t *payload,
                   uint8_t **frame, size_t *len);
/* Drops a partial frame. */
void udp_reasm_reset(struct udp_reasm *r);

#endif
