/*
 * CoRgmRoute internals: one GM port per hard port (see README.md for the design).
 *
 * Threads: send(), put() and progress() come from the port's one owner at a time (route.h),
 * so the send and receive state in struct cor_rport has no lock: those calls and the GM
 * callbacks inside gm_unknown() (which only record completions) touch it from one thread at a
 * time. Upcalls into the core are made where that state is consistent, as a callback may call
 * send() again. What other threads do reaches the owner without a lock too: peer_dead() and a
 * closing port of this process leave notes (`notes`, taken at the owner's next call), the
 * listener's wait() and timeout_ms() read the hints the owner publishes after each call, and
 * counters() reads atomics. `mem_lock` guards only the registration cache and add_peer().
 */
#ifndef GM_PORT_H
#define GM_PORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gm.h"
#include "gm_compat.h"
#include "gm_ctrl.h"
#include "cor/route.h"
#include "rutil.h"

/* Every GM message starts with a header: data frames (low priority, GMR_HDR bytes) and
 * control messages (high priority) are laid out in gm_ctrl.h. */
#define GMR_CTRL_SLOTS 4  /* our control messages in flight per peer: one of each op */
#define GMR_RX_TOKENS 252 /* receive buffers we provide at most (GM has 254 tokens) */
#define GMR_RX_BATCH 16   /* data frames one progress() delivers at most, in a stream */

/* Tunables, read once per open from the environment (table: gm_knobs.h; gm_env.c). */
struct gmr_knobs {
    unsigned data_class;    /* GM size class of the large data frame buffers */
    unsigned small_class;   /* GM size class of the small ones; 0 = none (all frames large) */
    unsigned credits;       /* large data buffers per peer (receive credits), at most */
    unsigned small_credits; /* small ones per peer, at most */
    size_t eager;           /* caps.eager_limit */
    size_t tx_bytes;        /* send ring: DMA memory for copied frames */
    unsigned tx_frames;     /* send descriptors (frames accepted, not yet completed) */
    unsigned regcache;      /* cached user registrations kept after deregister */
    int stats;              /* print counters at close */
    unsigned dead_ms;       /* silent peer holding our frames for lack of credits: dead */
    const char *node_id;    /* COR_GM_NODE_ID as set (NULL: unset) */
    const char *provider;   /* COR_GM_PROVIDER as set */
};
/* Reads the table of gm_knobs.h; -1 (logged) on a bad value. */
int gmr_knobs_read(struct gmr_knobs *k);
/* The knob table (gm_knobs.h's rows), which the ops table points to. */
extern const cor_knob_t gmr_knob_table[];
/* Logs a message prefixed "cor route gm:" to stderr (the route layer's logger). */
#define GMR_LOG_WHO "cor route gm"
#define gmr_log(...) rutil_log(GMR_LOG_WHO, __VA_ARGS__)

/* Session setup of libgm-compat before the first gm_init (gm_env.c). */
int gmr_session_init(const struct cor_route_config *cfg, const struct gmr_knobs *k);
/* The shm namespace of a session: a hash of its cookie, so file names do not show it. */
uint64_t gmr_namespace_hash(uint64_t cookie);
/* "ip:port_base" of our node when peers are learnt at run time over TCP, else NULL. */
const char *gmr_tcp_address(void);
void gmr_session_fini(void);
/* 1: every domain's GM node id is its rank + 1 (our node map, or COR_GM_NODE_ID=rank). */
int gmr_nodes_are_ranks(void);
/* Ports of this process: a port that closes tells the others directly (no GM message: GM
 * sends to a port closed in the same process are not safe on every provider). */
void gmr_local_add(struct cor_rport *p);
void gmr_local_remove_and_notify(struct cor_rport *p);
int gmr_local_is(unsigned node, unsigned port);

struct gmr_peer {
    unsigned node, port;
    int added;
    int dead;            /* sends refused with COR_EPEERDEAD */
    int closed;          /* it said BYE: the next send to it declares it dead */
    int reported;        /* peer_failed made (or queued) */
    int local;           /* a port of this process */
    unsigned credits[2]; /* per class (0 small, 1 large): frames we may still send it */
    unsigned owed[2];    /* its frames whose buffers we provided again, not yet told */
    int ctrl_busy;       /* our control message to it is with GM */
    int credit_wanted;   /* a CREDIT message is due once ctrl_busy clears */
    int blocked;         /* pump: no credit for it in this pass */
    unsigned nqueued;    /* its frames/puts waiting in the software queue */
    int core_dead;       /* the core said it died: its frames still arriving are dropped */
    int ctrl_abandoned;  /* its CREDIT was given up (peer dead): ignore the late callback */
    struct cor_rport *port_of;
    int heard; /* something arrived from it, or it took a send of ours, since the last look */
    uint64_t starved_since;  /* ns: frames wait for its credits and it is silent */
    _Atomic int dead_note;   /* peer_dead() from another thread: abandon it (gmr_take_notes) */
    _Atomic int closed_note; /* a port of this process closed: as if it said BYE */
    int probed_closed;       /* the last liveness probe found its port closed (gmr_probe) */
    /* Waits of the core for it (await_peer; gm_live.c): how many (any thread), and the
     * owner's view: something arrived from it since the last look, since when it is silent
     * while awaited, when our unanswered PING left (0: none), PING and PONG with GM, a PONG
     * owed (no token or slot when the PING came), and their GM callbacks to ignore (the
     * peer was given up, their tokens came back then). */
    _Atomic int awaited;
    int spoke;
    uint64_t quiet_ns, ping_ns;
    int ping_busy, pong_busy, pong_wanted, ping_abandoned, pong_abandoned;
    /* Re-admission (a new occupant of the rank, add_peer after the peer was given up): gone
     * is set when it is given up (any thread); add_peer leaves the new address in re_* and
     * readmit_note, which the owner applies (gmr_take_notes) after any dead_note. */
    _Atomic int gone;
    _Atomic int held_lost; /* given up by the watch thread (gm_watch.c); 0 again at readmit */
    _Atomic int readmit_note;
    unsigned re_node, re_port;
    int re_local;
    uint32_t inc, re_inc; /* its port's incarnation (its address; 0: not given), the next one */
};

/* Pieces of a frame the core gives send() that send_direct passes on (the core's header and
 * payload); a frame in more pieces is copied. */
#define GMR_DIRECT_IOV 3

enum gmr_tx_state { TX_FREE = 0, TX_QUEUED, TX_INFLIGHT, TX_DONE };
enum gmr_tx_kind { TX_SEND = 0, TX_PUT, TX_GET };

/* One accepted send, put or get, in a FIFO ring of descriptors (order of acceptance). */
struct gmr_tx {
    uint64_t seq;           /* descriptor number; the GM callback context (a late callback of a
                             * descriptor given up and reused must not complete the new one) */
    struct rutil_done done; /* the send's cookie; its status once TX_DONE (the done list) */
    uint32_t peer;
    uint8_t kind, state, cls; /* cls: TX_SEND's buffer class, 0 small / 1 large */
    char *buf;                /* TX_SEND: the copy in the byte ring (NULL: sent direct, no
                               * copy); TX_PUT: the local source; TX_GET: the local target */
    size_t len;               /* bytes on the wire (header included for TX_SEND) */
    size_t end;               /* TX_SEND: byte ring offset after this frame (reclaim point) */
    uint64_t raddr;           /* TX_PUT, TX_GET */
    uint64_t rkey;            /* TX_PUT, TX_GET: the peer's key (gm_compat_export), 0 = unknown */
};

/* A data frame received: handed to the core, then its buffer goes back to GM. */
struct gmr_rx_item {
    uint32_t peer;
    char *buf;
    size_t len;
    int c; /* buffer class */
};

struct cor_route_mr {
    char *addr;
    size_t len;
    unsigned refs;
    uint64_t used; /* LRU stamp */
    struct cor_route_mr *next;
};

struct gmr_hslot {
    _Atomic uint32_t key;  /* node << 8 | port, 0 = empty; set after rank (add_peer) */
    _Atomic uint32_t rank; /* re-pointed when a new domain takes a gone one's GM port */
};

struct cor_rport {
    /* First: the route base (callbacks, cookie, self/npeers, port index; `closing` is set under
     * mem_lock and read by the owner; the failed peers and the done list belong to the owner;
     * dropped is atomic, counters() reads it from any thread). */
    struct rutil_port base;
    pthread_mutex_t mem_lock; /* the registration cache; add_peer(); `closing` is set under it */
    struct gm_port *gp;
    struct gmr_knobs k;
    unsigned node_id, port_id;
    char host[GM_MAX_HOST_NAME_LEN + 1];
    int joined;                   /* gmr_session_init done */
    struct cor_rport *local_next; /* list of this process's ports (gm_env.c) */
    struct cor_rport *watch_next; /* list of the watch thread's ports (gm_watch.c) */

    struct gmr_peer *peers;
    struct gmr_hslot *hash; /* (node, port) -> rank */
    unsigned hash_mask;

    /* receive buffers: one DMA block holding the small pool, the large pool, then the
     * control buffers. Class c (0 small, 1 large) is GM size class cls[c]; each peer gets
     * allot[c] buffers of it (its credits); allot[0] = 0 when there is no small class. */
    char *rx_mem;
    size_t rx_len;
    unsigned cls[2], allot[2], pool_bufs[2];
    size_t pool_off[2], stride[2], small_max; /* small_max: largest frame+header in a small */
    unsigned ctrl_bufs;
    uint32_t cookie32;
    uint32_t inc;        /* this port's incarnation (random, nonzero; in its address) */
    uint64_t stale_ctrl; /* control messages of another incarnation, dropped (and counted) */
    uint64_t stale_data; /* data frames of another incarnation, dropped (and counted) */
    int swept;           /* owner: the core was asked about every member (gm_rx.c, stranger) */
    int rank_nodes;      /* node ids are ranks + 1 (gmr_nodes_are_ranks, at open) */
    struct gmr_rx_item returns[GMR_RX_BATCH]; /* delivered, buffer not yet provided again */
    unsigned nreturns;
    int credit_due;      /* some peer has credit_wanted set */
    int pump_dirty;      /* tokens or credits came back, or a peer died: the queue may move */
    uint64_t pump_ns;    /* last timed pump (the starvation check needs one every 50 ms) */
    unsigned busy_polls; /* progress() calls that found events (the clock: 1 in 64 or 8) */
    int was_busy;        /* the last progress() found events */
    int stamp_due;       /* active_ns to be read at the next progress() */
    int deferred;        /* the last progress() delivered and left after_events() for us */

    /* send side */
    unsigned tokens; /* GM send tokens left */
    char *tx_mem;    /* byte ring (DMA memory) */
    size_t tx_head, tx_tail;
    struct gmr_tx *tx;                /* descriptor ring, k.tx_frames entries */
    uint64_t d_head, d_tail, d_queue; /* alloc, oldest live, first not yet given to GM */
    /* completed descriptors (TX_DONE) wait on base's done list until reported; reclaimed
     * after */
    uint32_t *blocked; /* pump scratch */
    char *ctrl_tx;     /* DMA memory for outgoing control messages */

    struct cor_route_mr *mrs; /* registration cache */
    unsigned nmrs, nunused;   /* regions; of them with no reference (cached) */
    uint64_t mr_clock;

    /* counters (dropped: in base) */
    uint64_t frames_in, frames_out, queued_max, puts, gets, abandoned, from_dead, small_out;
    uint64_t pings, pongs;      /* liveness probes sent, and answers to the peers' (gm_live.c) */
    uint64_t direct_out;        /* frames of frames_out sent direct (gm_tx.c, send_direct) */
    int direct;                 /* frames may go direct: libgm's shm (gm_compat_sendv_now) */
    _Atomic int notes;          /* some peer has a dead_note or closed_note set */
    _Atomic int work_hint;      /* for wait(): the owner left work that GM shows no event for */
    _Atomic int queue_hint;     /* for timeout_ms(): frames wait in the software queue */
    _Atomic uint64_t active_ns; /* last progress() that did something, by any thread: wait()
                                 * naps in proportion to the time since */
    int rings;                  /* a message to our port wakes wait() (libgm's doorbell, shm) */
    _Atomic int woken;          /* gmr_wake: wait() returns (the core's listener stops) */
    _Atomic int kick;           /* else: a send since wait() began to nap; its reply comes soon */
    _Atomic uint64_t probe_ns;  /* shm: the last liveness probe of the peers' ports */
    _Atomic int probe_due;      /* wait() saw GMR_PROBE_MS pass: the owner probes (gmr_probe) */
    _Atomic int awaiting;       /* the peers' awaited counts summed: the liveness check runs */
    uint64_t live_ns;           /* owner: its last run (gmr_liveness) */
};

/* The plugin's thread-local variables.  The plugin is dlopen'ed, so by default its __thread
 * variables are dynamic TLS: glibc mallocs a block per thread on first use and frees it when a
 * later thread reuses the ended thread's cached stack, a hand-over ThreadSanitizer cannot see
 * (it reported the free as racing with the ended thread's last access: gmr_cb_port,
 * slack_set in conformance/gm-proc.sh, more often once cor_init's prepare thread loaded the
 * plugin).  initial-exec puts them in the static TLS block glibc reserves room in for
 * dlopen'ed libraries (a few bytes here): part of each thread's stack area, never freed,
 * reset by TSan at thread start, and read without a __tls_get_addr call. */
#define GMR_THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))

/* The port whose gm_unknown() is running in this thread: GM callbacks get only the GM port
 * and a context (the descriptor number), so they find their route port here. */
extern GMR_THREAD_LOCAL struct cor_rport *gmr_cb_port;
void gmr_unknown(struct cor_rport *p, gm_recv_event_t *e); /* gm_unknown with gmr_cb_port */
void gmr_kick(struct cor_rport *p);                        /* a send: cut wait()'s nap short */

/* gm_watch.c: a peer that holds our send inside libgm (stopped holding its shm queue lock)
 * for COR_GM_DEAD_MS is given up from the process's watch thread (see there). add after the
 * port opened, remove before it closes (waits while the thread gives up a peer of it). */
void gmr_watch_add(struct cor_rport *p);
void gmr_watch_remove(struct cor_rport *p);

/* gm_tx.c */
int gmr_send(struct cor_rport *p, cor_peer_t peer, const struct iovec *iov, int iovcnt,
             void *cookie);
int gmr_get(struct cor_rport *p, cor_peer_t peer, void *local, size_t len, struct cor_route_mr *mr,
            uint64_t raddr, uint64_t rkey, void *cookie);
int gmr_put(struct cor_rport *p, cor_peer_t peer, const void *local, size_t len,
            struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie);
/* Owner: applies the notes other threads left (peer_dead, local ports closed). */
void gmr_take_notes(struct cor_rport *p);
/* Owner, at the end of its call: the hints for the listener's wait() and timeout_ms(). */
void gmr_publish(struct cor_rport *p);
/* Hands queued frames to GM. `now`: the clock, for the timed pump that checks
 * for silent peers (dead_ms) every 50 ms; 0 for one made because credits or tokens came back. */
void gmr_pump(struct cor_rport *p, uint64_t now);
void gmr_reclaim(struct cor_rport *p);
/* Owner, when wait() found a probe due (shm only): every live peer's port that no process
 * holds any more, two probes in a row (a peer that closed normally said BYE in between), is
 * given up with COR_EPEERDEAD. */
void gmr_probe(struct cor_rport *p);
#define GMR_PROBE_MS 250
/* err for peer_failed: COR_ETIMEDOUT when it went silent, else COR_EPEERDEAD. */
void gmr_peer_dead(struct cor_rport *p, uint32_t peer, int err);
/* The core says peer died: give up every frame held for it. */
void gmr_abandon_peer(struct cor_rport *p, uint32_t peer);
void gmr_credit_return(struct cor_rport *p, uint32_t peer); /* maybe send CREDIT */
/* Sends control message op to peer from its own slot; the caller checked that a token is
 * free and that op's last message left (CREDIT: ctrl_busy, PING, PONG: their busy flags). */
void gmr_send_ctrl(struct cor_rport *p, uint32_t peer, uint32_t op, uint32_t arg);

/* gm_live.c: peers the core waits for (await_peer), found stopped by a PING nobody answers. */
void gmr_await_peer(struct cor_rport *p, cor_peer_t peer, int on);
/* Owner, every 50 ms while some peer is awaited (after_events): pings awaited peers silent
 * for a quarter of COR_GM_DEAD_MS and gives up one whose PING got no answer for
 * COR_GM_DEAD_MS (COR_ETIMEDOUT). */
void gmr_liveness(struct cor_rport *p, uint64_t now);
/* Owner: a PING from peer came (answered now, or once a token is free: pong_wanted). */
void gmr_pong(struct cor_rport *p, uint32_t peer);
/* Owner: peer given up: the tokens of its PING and PONG with GM come back. */
void gmr_live_abandon(struct cor_rport *p, struct gmr_peer *q);
int gmr_tx_setup(struct cor_rport *p);

/* gm_rx.c */
int gmr_progress(struct cor_rport *p);
int gmr_rx_setup(struct cor_rport *p);
int gmr_lookup(struct cor_rport *p, unsigned node, unsigned port, uint32_t *rank);
/* Reports finished sends and failed peers to the core. Returns events. */
int gmr_report(struct cor_rport *p);

/* gm_mem.c */
int gmr_mem_register(struct cor_rport *p, void *addr, size_t len, struct cor_route_mr **mr,
                     uint64_t *key);
void gmr_mem_deregister(struct cor_rport *p, struct cor_route_mr *mr);
void *gmr_mem_alloc(struct cor_rport *p, size_t len);
void gmr_mem_free(struct cor_rport *p, void *ptr);
void gmr_mem_fini(struct cor_rport *p);

#endif
