/* Frame reassembly for CoRudpRoute (see udp_reasm.h). */
#include <stdlib.h>
#include <string.h>

#include "udp_reasm.h"

int udp_reasm_feed(struct udp_reasm *r, const struct udp_hdr *h, const uint8_t *payload,
                   uint8_t **frame, size_t *len)
{
    /* Re-check what the parser guarantees: this function is also fed directly by tests. */
    if (h->type != UDP_T_DATA || (uint64_t)h->frag_off + h->len > h->frame_len ||
        (h->len == 0 && h->frame_len != 0))
        return UDP_RA_BAD;
    if (!r->buf) {
        if (h->frag_off != 0) return UDP_RA_BAD;
        if (h->len == h->frame_len) {
            *frame = (uint8_t *)payload;
            *len = h->len;
            return UDP_RA_SINGLE;
        }
        r->buf = malloc(h->frame_len);
        if (!r->buf) return UDP_RA_NOMEM;
        r->frame_len = h->frame_len;
        r->have = 0;
    } else if (h->frame_len != r->frame_len || h->frag_off != r->have) {
        return UDP_RA_BAD;
    }
    memcpy(r->buf + r->have, payload, h->len);
    r->have += h->len;
    if (r->have < r->frame_len) return UDP_RA_MORE;
    *frame = r->buf;
    *len = r->frame_len;
    r->buf = NULL;
    r->frame_len = r->have = 0;
    return UDP_RA_DONE;
}

void udp_reasm_reset(struct udp_reasm *r)
{
    free(r->buf);
    r->buf = NULL;
    r->frame_len = r->have = 0;
}
