/*
 * libFuzzer target for CoRudpRoute's datagram handling: the input is a sequence of datagrams
 * (each prefixed by a 2-byte little-endian length) fed through the parser, the acknowledgement
 * logic of a send window with datagrams in flight, the receive window and reassembly, as the
 * route's receive path does (the cookie and address checks are skipped so the fuzzer reaches
 * the deeper logic); a PING the parser let through must be a header-only ACK. Built by `make fuzz`
 * (tests/fuzz), run by tests/fuzz/run.sh.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "udp_reasm.h"
#include "udp_window.h"
#include "udp_wire.h"

#define FUZZ_FRAME_MAX ((1u << 20) + 4096)

static void nop_release(void *ctx, struct udp_sslot *s)
{
    (void)ctx;
    (void)s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct udp_swin sw;
    struct udp_rwin rw;
    struct udp_reasm ra = {0};
    if (udp_swin_init(&sw, 64, 1000000, 100000, 10000000) != 0) return 0;
    if (udp_rwin_init(&rw, 64, 1u << 20) != 0) {
        udp_swin_free(&sw);
        return 0;
    }
    for (int i = 0; i < 40; i++)
        udp_swin_add(&sw, NULL, (uint32_t)i * 100, 100, 1, 1000);
    uint64_t now = 2000;
    size_t pos = 0;
    while (pos + 2 <= size) {
        size_t len = (size_t)data[pos] | ((size_t)data[pos + 1] << 8);
        pos += 2;
        if (len > size - pos) len = size - pos;
        /* Copy so ASan sees the datagram's exact bounds. */
        uint8_t *dg = malloc(len ? len : 1);
        if (!dg) break;
        memcpy(dg, data + pos, len);
        pos += len;
        now += 1000;
        struct udp_hdr h;
        if (udp_wire_parse(dg, len, FUZZ_FRAME_MAX, &h) != UDP_W_OK) {
            free(dg);
            continue;
        }
        /* What the parser accepts is consistent: a PING (answer me) is a header-only ACK. */
        if ((h.flags & UDP_F_PING) && (h.type != UDP_T_ACK || h.len)) abort();
        const uint8_t *payload = dg + UDP_HDR_LEN;
        udp_swin_ack(&sw, h.ack, h.sack, now, nop_release, NULL);
        uint32_t seqs[16];
        udp_swin_fast(&sw, now, seqs, 16);
        udp_swin_timeout(&sw, now, seqs, 16);
        if (h.type == UDP_T_DATA) {
            int c = udp_rwin_classify(&rw, h.seq);
            if (c == UDP_RX_STORE) {
                udp_rwin_store(&rw, &h, payload);
            } else if (c == UDP_RX_NEXT) {
                struct udp_hdr cur = h;
                const uint8_t *cp = payload;
                uint8_t *owned = NULL;
                for (;;) {
                    uint8_t *frame = NULL;
                    size_t flen = 0;
                    int r = udp_reasm_feed(&ra, &cur, cp, &frame, &flen);
                    if (r == UDP_RA_BAD || r == UDP_RA_NOMEM) {
                        udp_reasm_reset(&ra);
                        free(owned);
                        break;
                    }
                    if (r == UDP_RA_DONE) free(frame);
                    free(owned);
                    owned = NULL;
                    udp_rwin_advance(&rw);
                    struct udp_rslot *s = udp_rwin_ready(&rw);
                    if (!s) break;
                    cur = s->hdr;
                    cp = s->data;
                    owned = s->data;
                    s->data = NULL;
                }
            }
            (void)udp_rwin_sack(&rw);
        }
        free(dg);
    }
    udp_reasm_reset(&ra);
    udp_rwin_free(&rw);
    udp_swin_free(&sw);
    return 0;
}
