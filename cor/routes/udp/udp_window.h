/*
 * Per-peer sliding windows of CoRudpRoute, pure logic (no sockets, no locks, time passed in
 * as nanoseconds). The caller (udp_tx.c, udp_rx.c) holds the port lock around every call.
 *
 * Send window: datagrams [una, nxt) are in flight; each slot remembers its fragment, when it
 * was last sent and whether the peer acknowledged it selectively. Acknowledgements are
 * cumulative (ack = next seq the peer expects) plus a 64-bit selective bitmap above it. The
 * retransmission timeout adapts to the measured round-trip time (smoothed RTT and variance,
 * fed with udp_swin_rtt from echoed timestamps, so retransmissions and datagrams that waited
 * behind a hole give true samples), doubles on each timeout, and stays within
 * [rto_min, rto_max].
 *
 * Receive window: the next expected seq plus room for `limit` datagrams that arrived early;
 * duplicates and datagrams beyond the window are recognised so they can be dropped.
 *
 * Both grow with use, so that a peer costs little until it is busy (docs/scale.md): the send
 * window's ring starts at UDP_SWIN_FIRST slots and doubles when the datagrams in flight fill
 * it, up to `limit` (COR_UDP_WINDOW); the receive window has no ring at all while datagrams
 * arrive in order (the common case), and one as large as the farthest early datagram needs
 * (a power of two, at least UDP_RWIN_FIRST, at most `limit`) once one must be kept.
 */
#ifndef UDP_WINDOW_H
#define UDP_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "udp_wire.h"

/* Slots a send window starts with, and the smallest ring a receive window makes. */
#define UDP_SWIN_FIRST 16
#define UDP_RWIN_FIRST 16

struct udp_sslot {
    void *frame;       /* owning frame record (opaque here) */
    uint32_t off, len; /* fragment position in the frame */
    uint64_t sent_ns;  /* last (re)transmission */
    uint16_t tx;       /* transmissions so far */
    uint8_t sacked;    /* selectively acknowledged */
    uint8_t last;      /* last fragment of its frame */
};

struct udp_swin {
    uint32_t una, nxt;   /* oldest unacknowledged, next to assign */
    uint32_t limit;      /* datagrams in flight at most */
    uint32_t size, mask; /* slots allocated now (a power of two <= limit) */
    struct udp_sslot *slot;
    size_t bytes;          /* payload bytes in flight */
    uint64_t srtt, rttvar; /* ns; srtt == 0: no sample yet */
    uint64_t rto, rto_min, rto_max;
    uint64_t last_progress_ns; /* last time the peer acknowledged something new */
    int in_recovery;           /* after a timeout, until una passes `recover` */
    uint32_t recover;          /* nxt when the timer fired */
    uint64_t recover_ns;       /* when it fired: older datagrams still need a resend */
    uint64_t rto_before;       /* rto before the timeout's backoff */
    uint64_t spurious;         /* timeouts found needless */
    uint64_t retransmits;
};

/* limit: power of two, 2..65536. Returns 0 or -1 (bad limit / out of memory). */
int udp_swin_init(struct udp_swin *sw, uint32_t limit, uint64_t rto_init, uint64_t rto_min,
                  uint64_t rto_max);
void udp_swin_free(struct udp_swin *sw);
static inline uint32_t udp_swin_inflight(const struct udp_swin *sw)
{
    return sw->nxt - sw->una;
}
static inline uint32_t udp_swin_room(const struct udp_swin *sw)
{
    return sw->limit - udp_swin_inflight(sw);
}
/* Makes room in the ring for `want` more datagrams (want <= room), growing it; returns how
 * many fit now: want, or fewer when memory ran out (at least one whenever the ring is not
 * full). Call before sending what udp_swin_add will record. */
uint32_t udp_swin_reserve(struct udp_swin *sw, uint32_t want);
/* The slot of an in-flight seq, or NULL. */
struct udp_sslot *udp_swin_at(struct udp_swin *sw, uint32_t seq);
/* Takes seq nxt for a fragment sent at `now`; NULL when the window is full (or the ring is
 * and cannot grow: see udp_swin_reserve). */
struct udp_sslot *udp_swin_add(struct udp_swin *sw, void *frame, uint32_t off, uint32_t len,
                               int last, uint64_t now);
/* Records a retransmission of seq at `now`. */
void udp_swin_resent(struct udp_swin *sw, uint32_t seq, uint64_t now);

/* Called for each datagram released by a cumulative ack, oldest first. */
typedef void (*udp_release_fn)(void *ctx, struct udp_sslot *slot);
/* Applies an acknowledgement. Returns the number of datagrams released, or -1 when ack lies
 * outside [una, nxt] (stale or forged: ignored). */
int udp_swin_ack(struct udp_swin *sw, uint32_t ack, uint64_t sack, uint64_t now,
                 udp_release_fn release, void *ctx);
/* Holes worth a fast retransmission after an ack (selectively acknowledged datagrams above
 * them, not resent within the last RTT). Writes up to max seqs; returns how many. */
int udp_swin_fast(struct udp_swin *sw, uint64_t now, uint32_t *out, int max);
/* When the retransmission timer fires (absolute ns), or 0 when nothing is in flight. */
uint64_t udp_swin_deadline(const struct udp_swin *sw);
/* If the timer fired: writes up to max seqs to resend, backs the timeout off, returns count. */
int udp_swin_timeout(struct udp_swin *sw, uint64_t now, uint32_t *out, int max);
/* After a timeout, each ack that moves una lets the next datagrams sent before the timeout
 * go again at once (up to max, growing with what the ack released), instead of one timeout
 * per lost batch. Returns the count written to out. */
int udp_swin_recovery(struct udp_swin *sw, int released, uint32_t *out, int max);
/* The peer echoed the timestamp of a datagram we sent at sent_ns. If that was an original
 * sent before the last timeout, the timeout was needless (the originals are getting
 * through): recovery stops and the backoff is undone (Eifel detection, RFC 3522). */
void udp_swin_echo(struct udp_swin *sw, uint64_t sent_ns);
/* Nonzero when datagrams are in flight and nothing was acknowledged for dead_ns. */
int udp_swin_dead(const struct udp_swin *sw, uint64_t now, uint64_t dead_ns);
/* Feeds one round-trip sample (ns) to the estimator. */
void udp_swin_rtt(struct udp_swin *sw, uint64_t sample);
/* The estimator itself (RFC 6298's smoothing, srtt == 0: no sample yet): feeds a sample and
 * returns srtt + 4 rttvar (at least srtt + a floor), unbounded. */
uint64_t udp_rtt_feed(uint64_t *srtt, uint64_t *rttvar, uint64_t sample);
/* A window with no sample of its own yet takes the timeout its port measured toward the other
 * peers, if longer (bounded by rto_max): a host too busy to answer within 10 ms answers no
 * new peer faster, and every timeout before the first answer is a needless resend. */
void udp_swin_rto_hint(struct udp_swin *sw, uint64_t rto);

/* An early datagram kept by the receive window (allocated when stored). */
struct udp_rslot {
    uint8_t *data; /* malloc'd payload copy; the caller may take it (set NULL) */
    struct udp_hdr hdr;
};

struct udp_rwin {
    uint32_t next;                  /* next seq to deliver */
    uint32_t limit;                 /* early datagrams are kept up to next + limit - 1 */
    uint32_t size, mask;            /* ring size now: 0 (no ring) until the first early datagram */
    struct udp_rslot **slot;        /* [size], NULL = nothing stored there */
    uint32_t stored;                /* early datagrams kept */
    size_t stored_bytes, max_bytes; /* their payload bytes, and the budget */
};

enum udp_rx_class {
    UDP_RX_NEXT,   /* seq == next: process now */
    UDP_RX_STORE,  /* early, inside the window, not yet stored: keep it */
    UDP_RX_DUP,    /* already delivered or already stored */
    UDP_RX_BEYOND, /* too far ahead: drop (the sender will resend) */
};

/* limit: power of two, 2..65536; allocates nothing. Returns 0 or -1 (bad limit). */
int udp_rwin_init(struct udp_rwin *rw, uint32_t limit, size_t max_bytes);
void udp_rwin_free(struct udp_rwin *rw); /* frees stored payloads too */
int udp_rwin_classify(const struct udp_rwin *rw, uint32_t seq);
/* Stores an early datagram (copies the payload). 0, or -1 when over budget / no memory. */
int udp_rwin_store(struct udp_rwin *rw, const struct udp_hdr *h, const uint8_t *payload);
/* The stored datagram at `next`, or NULL. */
struct udp_rslot *udp_rwin_ready(struct udp_rwin *rw);
/* Advances next past the datagram just processed; returns the payload stored for it (caller
 * frees) or NULL if it was not stored. */
uint8_t *udp_rwin_advance(struct udp_rwin *rw);
/* Selective-ack bitmap: bit i = seq next+1+i is stored. */
uint64_t udp_rwin_sack(const struct udp_rwin *rw);

#endif
