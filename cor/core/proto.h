/*
 * The wire protocol between domain cores, carried in route frames: a fixed header, then the
 * payload. Every field is checked on arrival (proto.c): frames come from peers of the session
 * but are still not trusted.
 */
#ifndef COR_PROTO_H
#define COR_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cor/cor.h"

enum frame_type {
    F_EAGER = 1, /* header + the whole message */
    F_RTS,       /* rendezvous: request to send `len` bytes */
    F_CTS,       /* clear to send `len` bytes into request `rreq` */
    F_DATA,      /* rendezvous data at `offset` for `rreq` */
    F_CREDIT,    /* credits only */
    F_SVC_REQ,   /* service call (names, logical domains) */
    F_SVC_REP,
    F_FIN,       /* rendezvous by remote write: the data of `rreq` is in place */
    F_TYPE_END
};

struct frame_hdr {
    uint8_t type;
    uint8_t dtype;     /* cor_type_t of the message */
    uint16_t credits;  /* eager credits returned to the receiver of this frame */
    uint16_t src_task; /* sender's task index */
    uint16_t dst_task; /* receiver's task index */
    uint32_t seq;      /* EAGER/RTS: per (sender task, receiving domain) message number */
    int32_t tag;
    uint64_t ctx;
    uint64_t count; /* elements */
    uint64_t len;   /* message bytes (EAGER/RTS), bytes allowed (CTS), payload bytes (DATA) */
    uint64_t sreq;  /* sender's request handle */
    uint64_t rreq;  /* receiver's request handle */
    uint64_t offset;
};

#define FRAME_HDR_SIZE sizeof(struct frame_hdr)

/* An RTS may carry the message's last bytes (at most RTS_TAIL_MAX; offset = where they start);
 * the CTS then asks only for the bytes before them. */
#define RTS_TAIL_MAX 1024

/* Eager credits are units of CREDIT_UNIT bytes of the receiver's memory. A peer's budget is
 * COR_CREDITS slots, a slot being what the largest eager message costs (its record plus its
 * payload). A small message (up to CREDIT_UNIT bytes) costs only its memory, 2 units, so a
 * stream of small messages keeps up to ~32 times more in flight (it fell back to rendezvous
 * after 31); a larger one costs a whole slot, as every message did before: charged by its
 * size, hundreds of 4 KiB frames went into the udp route at once and the 16-pair 4 KiB stream
 * lost a third of its rate. Charged by size with a floor of half or a quarter slot (at most
 * 64 or 128 in flight), one gm pair at 512 B-1 KiB made 3x the messages, but 16 udp pairs lost
 * 15-35% again at 512 B-4 KiB (2026-11-25): what costs the udp route so much with more frames
 * in flight is the thing to find first. The sender writes the cost in the EAGER frame
 * (`offset`) and the receiver returns exactly that, so both agree whatever their eager limits. */
#define CREDIT_UNIT 256
static inline int cor__credit_cost(size_t payload, size_t eager_limit)
{
    if (payload <= CREDIT_UNIT || eager_limit <= CREDIT_UNIT) return 2;
    return 1 + (int)((eager_limit + CREDIT_UNIT - 1) / CREDIT_UNIT);
}

/* A CTS with count == CTS_RMA asks for a remote write: offset = target address, ctx = key. */
#define CTS_RMA 1

/* ---- checks that need no state (used by proto.c; fuzzed by tests/core/fuzz_frame.c) ---- */

/* Copies the header of a len-byte frame into *h: 0, -1 if the frame is shorter than a header,
 * -2 if its type is unknown. */
static inline int cor__frame_hdr(const void *frame, size_t len, struct frame_hdr *h)
{
    if (len < FRAME_HDR_SIZE) return -1;
    memcpy(h, frame, sizeof *h);
    if (h->type == 0 || h->type >= F_TYPE_END) return -2;
    return 0;
}

/* 1 if an EAGER or RTS header agrees with its plen payload bytes (element type, count and
 * bytes, the eager size limit, the tail an RTS carries, tag), else 0. The caller checks the
 * task it names. */
static inline int cor__frame_msg_ok(const struct frame_hdr *h, size_t plen, size_t eager_limit)
{
    size_t es = cor_type_size((cor_type_t)h->dtype);
    /* len / es, not count * es: the product wraps around for a count near 2^64 / es */
    if (!es || h->len % es || h->count != h->len / es || h->tag < 0) return 0;
    if (h->type == F_EAGER && (plen != h->len || h->len > eager_limit)) return 0;
    if (h->type == F_RTS && plen &&
        (plen > RTS_TAIL_MAX || plen >= h->len || h->offset != h->len - plen))
        return 0;
    return 1;
}

#endif
