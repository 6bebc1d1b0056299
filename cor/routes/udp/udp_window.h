/*
 * Per-peer sliding windows of CoRudpRoute, pure logic (no sockets, no locks, time passed in
 * as nanoseconds). The caller (udp_peer.c) holds the port lock around every call.
 *
 * Send window: datagrams [una, nxt) are in flight; each slot remembers its fragment, when it
 * was last sent and whether the peer acknowledged it selectively. Acknowledgements are
 * cumulative (ack = next seq the peer expects) plus a 64-bit selective bitmap above it. The
 * retransmission timeout adapts to the measured round-trip time (smoothed RTT and variance,
 * fed with udp_swin_rtt from echoed timestamps, so retransmissions and datagrams that waited
 * behind a hole give true samples), doubles on each timeout, and stays within
 * [rto_min, rto_max].
 *
 * Receive window: the next expected seq plus room for `size` datagrams that arrived early;
 * duplicates and datagrams beyond the window are recognised so they can be dropped.
 */
#ifndef UDP_WINDOW_H
#define UDP_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "udp_wire.h"

struct udp_sslot {
    void *frame;       /* owning frame record (opaque here) */
    uint32_t off, len; /* fragment position in the frame */
    uint64_t sent_ns;  /* last (re)transmission */
    uint16_t tx;       /* transmissions so far */
    uint8_t sacked;    /* selectively acknowledged */
    uint8_t last;      /* last fragment of its frame */
};

struct udp_swin {
    uint32_t una, nxt; /* oldest unacknowledged, next to assign */
    uint32_t size, mask;
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

/* size: power of two, 2..65536. Returns 0 or -1 (bad size / out of memory). */
int udp_swin_init(struct udp_swin *sw, uint32_t size, uint64_t rto_init, uint64_t rto_min,
                  uint64_t rto_max);
void udp_swin_free(struct udp_swin *sw);
static inline uint32_t udp_swin_inflight(const struct udp_swin *sw)
{
    return sw->nxt - sw->una;
}
static inline uint32_t udp_swin_room(const struct udp_swin *sw)
{
    return sw->size - udp_swin_inflight(sw);
}
/* The slot of an in-flight seq, or NULL. */
struct udp_sslot *udp_swin_at(struct udp_swin *sw, uint32_t seq);
/* Takes seq nxt for a fragment sent at `now`; NULL when the window is full. */
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

struct udp_rslot {
    uint8_t *data; /* malloc'd payload copy */
    struct udp_hdr hdr;
    uint8_t present;
};

struct udp_rwin {
    uint32_t next; /* next seq to deliver */
    uint32_t size, mask;
    struct udp_rslot *slot;
    uint32_t stored;                /* early datagrams kept */
    size_t stored_bytes, max_bytes; /* their payload bytes, and the budget */
};

enum udp_rx_class {
    UDP_RX_NEXT,   /* seq == next: process now */
    UDP_RX_STORE,  /* early, inside the window, not yet stored: keep it */
    UDP_RX_DUP,    /* already delivered or already stored */
    UDP_RX_BEYOND, /* too far ahead: drop (the sender will resend) */
};

int udp_rwin_init(struct udp_rwin *rw, uint32_t size, size_t max_bytes);
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
