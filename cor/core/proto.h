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
    F_FIN,     /* rendezvous by remote write: the data of `rreq` is in place */
    F_RTS_GET, /* rendezvous the receiver reads: an RTS (no tail) whose data lies at `offset`
                * under the sender's route key `rreq` (route get) */
    F_GOT,     /* the receiver read `len` bytes of send `sreq` (F_RTS_GET): the send is done */
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
    uint32_t src_epoch; /* the sender's incarnation (0 in static sessions) */
    uint32_t dst_epoch; /* the receiver's incarnation the sender knew (0: unknown) */
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
 * payload), so the receiver's memory per peer and port stays bounded by COR_CREDITS x (eager
 * limit + CREDIT_UNIT). A message costs what it occupies: one unit for its record and its
 * payload rounded up to units (2 for up to CREDIT_UNIT bytes). Charged a whole slot each,
 * messages above CREDIT_UNIT fell back to rendezvous after 31 in flight: a window of 64
 * 512 B messages over gm made 0.45-0.49 M msg/s against 1.7 at 256 B. Charged by size
 * (2026-11-26, alternating builds): 512 B 1.69-1.72 and 1 KiB 1.53-1.56 M msg/s over gm, udp
 * 10-60% up at 512 B-4 KiB with 1 and 16 pairs, multitask 1-4 KiB up on both routes. On
 * 2026-11-25 the same rule had cost 16 udp pairs 15-35% at 512 B-4 KiB; that was before a
 * port had one owner (a sender then waited on the port's send lock, and the udp route's lock
 * under it, behind whoever held them). The sender writes the cost in the EAGER frame
 * (`offset`) and the receiver returns exactly that, so both agree whatever their eager limits. */
#define CREDIT_UNIT 256
static inline int cor__credit_cost(size_t payload, size_t eager_limit)
{
    if (payload <= CREDIT_UNIT || eager_limit <= CREDIT_UNIT) return 2;
    return 1 + (int)((payload + CREDIT_UNIT - 1) / CREDIT_UNIT);
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

/* A message's first frame: matched in order against the receives. */
static inline int cor__frame_is_msg(unsigned type)
{
    return type == F_EAGER || type == F_RTS || type == F_RTS_GET;
}

/* 1 if an EAGER, RTS or RTS_GET header agrees with its plen payload bytes (element type, count and
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
    /* the sender's memory is [offset, offset + len): it must not wrap around */
    if (h->type == F_RTS_GET && (plen || h->len == 0 || h->offset + h->len < h->offset)) return 0;
    return 1;
}

#endif
