/*
 * CoRudpRoute internals shared by its files: knobs, frames, peers and the hard port.
 *
 * Per peer, a port keeps 24 bytes from add_peer on (struct udp_dest: where the peer is, and
 * whether it is up) and makes the protocol state (struct udp_peer: windows, queues, acks) at
 * the first datagram sent to it or accepted from it; the windows then grow with use
 * (udp_window.h). A peer this domain never talks to costs the 24 bytes and a pointer.
 *
 * Locking: one mutex per port (`lock`) guards every peer's windows, frame queues, the timer
 * and the socket's send side. progress() receives without the lock (the receive buffers and
 * the callback lists belong to the one thread running progress()), takes the lock to apply
 * what arrived, and drops it before making callbacks, so a callback may call send().
 */
#ifndef UDP_PORT_H
#define UDP_PORT_H

#include <pthread.h>

#include "cor/route.h"
#include "rutil.h"
#include "udp_reasm.h"
#include "udp_sock.h"
#include "udp_window.h"
#include "udp_wire.h"

/* Frames up to 1 MiB of payload plus a core header of up to 4 KiB (the core's rendezvous
 * chunks are 1 MiB). */
#define UDP_FRAME_MAX ((1u << 20) + 4096)
/* iovecs kept by reference; a frame given in more pieces is copied into one buffer. */
#define UDP_IOV_INLINE 6
/* Datagrams per sendmmsg/recvmmsg batch. */
#define UDP_BATCH_MAX 64

/* Environment knobs, read at open (the table: udp_knobs.h; README.md explains them). */
struct udp_knobs {
    int sndbuf, rcvbuf;
    uint32_t window;       /* datagrams in flight per peer (power of two) */
    size_t window_bytes;   /* payload bytes in flight per peer */
    size_t queue_bytes;    /* bytes accepted but not yet sent, per peer, before EAGAIN */
    uint32_t queue_frames; /* frames accepted and not completed, per peer, before EAGAIN */
    uint64_t rto_init_ns, rto_min_ns, rto_max_ns;
    uint64_t dead_ns;      /* silence with data outstanding before a peer is given up */
    uint64_t probe_ns;     /* silence with nothing outstanding before a probe (0: none) */
    uint32_t dgram;        /* datagram size override (0 = by interface) */
    uint64_t ack_delay_ns; /* how long an idle receiver waits to piggy-back an ack */
    uint32_t ack_every;    /* datagrams received before an ack is sent at once */
    uint32_t batch;        /* datagrams per recvmmsg */
    size_t eager_limit;
    const char *bind;   /* COR_UDP_BIND */
    const char *faults; /* COR_UDP_FAULTS */
    int stats;          /* COR_UDP_STATS set: counters printed at close */
};
/* Fills k from the environment; returns 0 or -1 (a value out of range, logged). */
int udp_knobs_read(struct udp_knobs *k);
/* The knob table (udp_knobs.h's rows), which the ops table points to. */
extern const cor_knob_t udp_knob_table[];

/* A frame accepted by send(), until its last datagram is acknowledged. */
struct udp_frame {
    struct udp_frame *next; /* the peer's queue, or the free list */
    struct rutil_done done; /* the send's cookie; its status once finished (the done list) */
    uint32_t len;           /* frame length */
    uint32_t sent;          /* bytes already put into datagrams */
    int iovcnt;
    const struct iovec *iov; /* iov_inline, or one entry over `flat` */
    struct iovec iov_inline[UDP_IOV_INLINE];
    uint8_t *flat; /* private copy when the caller gave too many pieces */
};

enum udp_peer_state { UDP_PEER_NONE = 0, UDP_PEER_UP, UDP_PEER_DEAD };

/* A member of the session, from add_peer on. */
struct udp_dest {
    struct sockaddr_in sa;
    uint32_t dgram; /* largest datagram towards this peer, header included */
    int state;      /* enum udp_peer_state */
    int awaited;    /* waits of the core for its answer under way (atomic: udp_await.c) */
};

/* The protocol state toward one peer, made at first contact (udp_peer_get). */
struct udp_peer {
    cor_peer_t rank;
    struct udp_dest *dest; /* &port->dests[rank] */
    int heard;             /* a datagram from the peer was accepted (COR_UDP_STATS) */
    uint64_t refused_ns;   /* its host refused a datagram of ours then (0: not since the
                            * peer last acknowledged something): udp_rx.c, refusals_in */
    uint64_t heard_ns;     /* last datagram accepted from it (or the state's birth) */
    uint64_t probed_ns;    /* last probe sent to it (0: none): udp_rx.c, probe_due */
    /* While the core awaits its answer (udp_await.c): when that wait's silence began (0: not
     * awaited), the first PING of this silence still unanswered and the last PING sent (0:
     * none). */
    uint64_t await_ns, ping_first_ns, ping_last_ns;
    int pong_owed; /* it sent us a PING: an ACK goes back at the end of this batch */
    struct udp_swin sw;
    struct udp_rwin rw;
    struct udp_reasm ra;
    struct udp_frame *head, *tail; /* accepted frames, oldest first */
    struct udp_frame *unsent;      /* first frame with bytes not yet in a datagram */
    size_t queued_bytes;           /* bytes of frames not yet in a datagram */
    uint32_t nframes;              /* frames accepted and not completed */
    uint32_t ack_owed;             /* data datagrams received since our last ack */
    size_t ack_owed_bytes;         /* and their payload bytes */
    int ack_now;                   /* send an ack at the end of this batch */
    uint64_t ack_due;              /* a delayed ack is due then (0 = none) */
    int touched;                   /* in the current batch's touched list */
    uint32_t ts_echo;              /* tsval to echo in our next datagram to this peer */
    int ts_echo_valid;
};

/* Callbacks collected under the lock and made after it is released. */
struct udp_delivery {
    cor_peer_t peer;
    const void *frame;
    size_t len;
    void *to_free;
};

struct cor_rport {
    /* First: the route base (callbacks, cookie, self/npeers, port index; closing, the failed
     * peers and the done list are guarded by `lock`; dropped is atomic). */
    struct rutil_port base;
    struct udp_knobs k;
    uint32_t dgram_local, dgram_iface; /* datagram sizes for same-host and other peers */

    pthread_mutex_t lock;
    struct udp_sock sock;    /* send side: lock */
    struct udp_dest *dests;  /* [npeers]; lock */
    struct udp_peer **peers; /* [npeers], NULL until first contact; lock */
    uint32_t *active;        /* ranks that have a udp_peer, for timer scans; lock */
    uint32_t nactive;        /* lock */
    /* Members no add_peer named yet (atomic; written under lock): while some are left, a
     * batch's datagrams from them are offered to the core's need_peer first (udp_rx.c). */
    uint32_t unadded;
    uint64_t timer_ns;     /* earliest time a timer may fire (atomic; only lowered, but by
                            * run_timers, under the lock) */
    uint64_t retransmits;  /* lock */
    uint64_t dups, beyond; /* duplicates and early-beyond-window datagrams; lock */
    uint64_t timeouts;     /* retransmission timer expiries; lock */
    uint64_t probes;       /* probes sent to silent peers (udp_rx.c); lock */
    uint64_t pings, pongs; /* PINGs sent to awaited peers, answers to theirs; lock */
    int await_kick;        /* a wait began since run_timers looked (atomic: udp_await.c) */
    /* The sweep over peers never talked to (udp_rx.c, sweep): the next rank to look at, when
     * its next probe is due, and the probes it sent. lock */
    uint32_t sweep_rank;
    uint64_t sweep_ns, sweeps;
    /* Longest wait for an acknowledgement with data outstanding, toward a peer that had not
     * answered yet ([0]: start-up) and one that had ([1]); COR_UDP_STATS prints them. lock */
    uint64_t silence_max[2];
    /* Round trips toward all peers (udp_rtt_feed): a new peer's first timeout (lock) */
    uint64_t srtt, rttvar, rto_hint;

    /* Send scratch (lock). */
    struct mmsghdr tx_msg[UDP_BATCH_MAX];
    struct iovec tx_iov[UDP_BATCH_MAX][UDP_IOV_INLINE + 1];
    uint8_t tx_hdr[UDP_BATCH_MAX][UDP_HDR_LEN];

    /* Receive side: only the thread in progress(). */
    uint64_t errq_check_ns; /* next look at the error queue without an error reported */
    struct mmsghdr rx_msg[UDP_BATCH_MAX];
    struct iovec rx_iov[UDP_BATCH_MAX];
    struct sockaddr_in rx_from[UDP_BATCH_MAX];
    uint8_t *rx_buf;   /* batch * (UDP_DGRAM_MAX + 1) bytes */
    uint32_t *touched; /* [npeers] ranks that sent something in this batch */
    uint32_t ntouched;
    struct udp_delivery *dl; /* frames to deliver after unlocking */
    size_t ndl, cap_dl;

    /* Recycled frame records (lock). */
    struct udp_frame *free_frames;
    uint32_t nfree;
};

/* Wire timestamps: microseconds, wrapping; never 0 (0 = no timestamp). */
static inline uint32_t udp_ts(uint64_t now_ns)
{
    uint32_t t = (uint32_t)(now_ns / 1000);
    return t ? t : 1;
}

/* udp_peer.c (port lock held): the peer's protocol state, made at first contact; NULL when
 * the peer was not added, is dead, or memory ran out. */
struct udp_peer *udp_peer_get(struct cor_rport *p, cor_peer_t rank);
void udp_peer_free(struct udp_peer *peer);
/* A new occupant of a rank given up, at `sa`: the earlier one's state and pending failure
 * report go, the rank is up again (its protocol state is made afresh at first contact). */
void udp_peer_readmit(struct cor_rport *p, cor_peer_t rank, const struct sockaddr_in *sa,
                      uint32_t dgram);

/* udp_tx.c (port lock held) */
void udp_pump(struct cor_rport *p, struct udp_peer *peer, uint64_t now);
void udp_send_ack(struct cor_rport *p, struct udp_peer *peer, uint64_t now);
/* An ACK asking the peer for one back at once (udp_await.c). */
void udp_send_ping(struct cor_rport *p, struct udp_peer *peer, uint64_t now);
/* A header-only ACK to a peer we hold no state for (acknowledging nothing): the sweep's probe. */
void udp_send_sweep(struct cor_rport *p, cor_peer_t rank, uint64_t now);
void udp_resend(struct cor_rport *p, struct udp_peer *peer, const uint32_t *seqs, int n,
                uint64_t now);
/* Gives peer `rank` up (once): its frames finish with COR_EPEERDEAD, peer_failed(err)
 * (err 0: none, the core gave it up itself). */
void udp_fail_peer(struct cor_rport *p, cor_peer_t rank, int err);
/* Moves every frame of the peer to the done list with `status`. */
void udp_peer_flush(struct cor_rport *p, struct udp_peer *peer, int status);
/* Makes the send_done callbacks of a detached done list, then recycles the frames.
 * Called without the lock. Returns how many. */
int udp_done_run(struct cor_rport *p, struct rutil_done *list);
/* udp_tx.c: the send() op */
int udp_op_send(struct cor_rport *p, cor_peer_t peer, const struct iovec *iov, int iovcnt,
                void *cookie);
/* udp_rx.c: the progress() op */
int udp_op_progress(struct cor_rport *p);

/* udp_await.c: the await_peer() op (no lock), and its part of the timers (port lock held):
 * PINGs to an awaited, silent peer with nothing of ours in flight, and the give-up of one
 * that answers none for COR_UDP_DEAD_MS (only when `drained`: *gave_up is then set).
 * Returns when it must look again (0: no wait, no timer). */
void udp_op_await_peer(struct cor_rport *p, cor_peer_t peer, int on);
uint64_t udp_await_timer(struct cor_rport *p, struct udp_peer *peer, uint64_t now, int drained,
                         int *gave_up);
/* Gives state to the awaited peers this port never talked to (port lock held), so that the
 * timers see them. */
void udp_await_strangers(struct cor_rport *p);
/* Lowers the port's timer to t (any thread; 0: no change). */
void udp_timer_at(struct cor_rport *p, uint64_t t);

#endif
