/*
 * The route contract: what a transport plugin gives the CoR core.
 *
 * A route is a shared object cor_route_<name>.so exporting exactly one symbol,
 * `cor_route_<name>` (see COR_ROUTE_DECLARE), a constant struct cor_route_ops. The core loads it
 * with dlopen from COR_ROUTE_PATH or the installed plugin folder, checks size/abi and the
 * mandatory slots once, and then drives it through these operations only.
 *
 * A route provides *reliable, ordered frames* between hard ports: a frame given to send() on
 * port P for peer Q is delivered exactly once, in order with P's other frames to Q, to the
 * deliver() callback of Q's port. Everything above (matching, eager/rendezvous, credits, task
 * order) is the core's job.
 *
 * Threads and locks
 * - One owner per port: send(), put() and progress() of one port are never called at once;
 *   the core makes them only from the thread that owns the port at that moment (which thread
 *   that is changes). A route may thus keep its port's send and receive state without a lock,
 *   as long as nothing else touches it.
 * - The other calls (timeout_ms(), wait(), the memory calls, add_peer(), peer_dead(),
 *   counters()) may come from any thread, also while the owner works: the route locks what
 *   they share with send and progress.
 * - Callbacks (deliver, send_done, peer_failed) are made only from inside progress(), in the
 *   thread that called it. The route must hold none of its locks while it calls them: a
 *   callback may call send() on the same port. One exception: peer_failed(COR_ETIMEDOUT)
 *   may come from a thread of the route's own while the port's owner is held inside a call
 *   by that peer (gm: a peer stopped holding its shm queue lock), the only way to have it
 *   given up then; the core takes it from any thread.
 * - No call blocks for long: send() returns COR_EAGAIN when its window is full (nothing
 *   taken); progress() does a bounded amount of work.
 */
#ifndef COR_ROUTE_H
#define COR_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cor/cor.h"

#define COR_ROUTE_ABI 1

/* Opaque to the core: a route's hard port. */
struct cor_rport;

/* A peer is named by the core's small integer (its domain rank); addresses are strings. */
typedef uint32_t cor_peer_t;

#define COR_ADDR_MAX 256

/* Upcalls from the route into the core, given at open. */
struct cor_route_upcalls {
    void *core; /* passed back as the first argument */
    /* A frame from `peer` arrived; `frame` is valid only during the call. */
    void (*deliver)(void *core, cor_peer_t peer, const void *frame, size_t len);
    /* send() no longer needs the memory of the frame tagged `cookie`; status is COR_OK, or
     * COR_EPEERDEAD when the peer was given up (the frame may not have arrived). */
    void (*send_done)(void *core, void *cookie, int status);
    /* The route gave up on `peer`: every later send to it fails. err: COR_ETIMEDOUT when it
     * stayed silent for the route's dead time (the core then tells the launcher it is lost:
     * cor-run stops it for the whole session), else why (COR_EPEERDEAD: refused, closed). */
    void (*peer_failed)(void *core, cor_peer_t peer, int err);
    /* Appended later (a route reads it only when its table says lazy_peers, and when it is
     * not NULL): a frame came from session member `peer` that no add_peer named yet. The
     * core looks the peer's addresses up (its launcher) and calls add_peer on this port (and
     * its others) before it returns COR_OK; anything else (COR_ENOTSUP when the core gave
     * every peer at init: COR_LAZY_PEERS=0, a route without lazy_peers, dynamic sessions):
     * the route drops the frame, as one from a stranger. Made from inside progress() like
     * the other callbacks (no lock of the route held). */
    int (*need_peer)(void *core, cor_peer_t peer);
};

/* What the core tells a port when it opens it. */
struct cor_route_config {
    uint64_t session_cookie; /* random per session: every datagram/frame carries it */
    uint32_t self;           /* this domain's rank */
    uint32_t npeers;         /* domains in the session (peers are 0..npeers-1, self included) */
    int port_index;          /* which hard port of this route in the domain (0..) */
    const char *bind_hint;   /* "loopback", "auto" or an IP address; NULL = "loopback" */
};

/* Capabilities, filled by the route at load (constant) or per port. */
struct cor_route_caps {
    size_t frame_max;   /* largest frame send() accepts, header included */
    size_t eager_limit; /* default eager threshold measured on this route */
    int has_rma;        /* mem_register and put are provided */
    int zero_copy_send; /* send() keeps a reference to the iov until send_done, no copy */
    size_t frame_pref;  /* frames up to this size travel in one piece, without reassembly;
                         * the core cuts rendezvous data to fit (0: no preference) */
};

struct cor_route_mr; /* a registered memory region */

struct cor_route_ops {
    size_t size;      /* sizeof(struct cor_route_ops) as built */
    unsigned abi;     /* COR_ROUTE_ABI */
    const char *name; /* "udp", "gm" */

    /* --- mandatory --- */

    /* Opens hard port; returns COR_OK and *port, or an error (logged with the cause). */
    int (*open)(const struct cor_route_config *cfg, const struct cor_route_upcalls *up,
                struct cor_rport **port);
    /* Closes the port; pending sends complete (send_done) with COR_ECLOSED first. */
    void (*close)(struct cor_rport *port);
    /* The address other domains give to add_peer, NUL-terminated, < COR_ADDR_MAX. */
    int (*address)(struct cor_rport *port, char *buf, size_t len);
    /* Resolves and records peer `peer` at `addr` (as returned by its address()). Called again
     * for a peer the route gave up or was told dead (peer_dead), it is the rank's new
     * occupant (dynamic sessions: cor_domain_connect re-admits it): the route forgets the
     * earlier one's state (windows, credits, connection, a failure not reported yet) and
     * reaches the new one at `addr`, which may equal the earlier one's. Frames of the
     * earlier occupant that arrive later may reach deliver(): the core drops them. */
    int (*add_peer)(struct cor_rport *port, cor_peer_t peer, const char *addr);
    /* Sends one frame: the concatenation of iov[0..iovcnt). COR_OK = accepted, send_done
     * (cookie) will follow from some progress() call; COR_EAGAIN = window full, retry after
     * progress(); COR_EPEERDEAD, COR_EINVAL (too large) = refused. The iov memory must stay
     * valid until send_done unless the route copies (caps.zero_copy_send == 0 means it copied
     * before returning; send_done still follows). */
    int (*send)(struct cor_rport *port, cor_peer_t peer, const struct iovec *iov, int iovcnt,
                void *cookie);
    /* Does bounded work: receives, acknowledges, retransmits, makes callbacks. Returns the
     * number of frames delivered or sends completed (0 = nothing happened). */
    int (*progress)(struct cor_rport *port);
    /* A file descriptor that becomes readable when progress() has work, for poll(); -1 if
     * the route has none (then it should provide wait(), else the core polls every
     * timeout_ms). */
    int (*wait_fd)(struct cor_rport *port);
    /* Milliseconds the core may sleep before progress() must run again (timers); -1 = none. */
    int (*timeout_ms)(struct cor_rport *port);
    /* Capabilities of this port. */
    void (*caps)(struct cor_rport *port, struct cor_route_caps *caps);

    /* --- optional (NULL: the core copies through frames instead) --- */

    /* Counters for introspection and tests: dropped = foreign/malformed datagrams. */
    void (*counters)(struct cor_rport *port, uint64_t *dropped, uint64_t *retransmits);
    /* Registers memory for RMA; *key is what a peer needs to put into it. */
    int (*mem_register)(struct cor_rport *port, void *addr, size_t len, struct cor_route_mr **mr,
                        uint64_t *key);
    void (*mem_deregister)(struct cor_rport *port, struct cor_route_mr *mr);
    /* Writes len bytes from local (inside mr) into peer memory (raddr, rkey); ordered before
     * any later send() to that peer on this port; completion via send_done(cookie). */
    int (*put)(struct cor_rport *port, cor_peer_t peer, const void *local, size_t len,
               struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie);
    /* Allocates/free memory the route can send without a copy (DMA memory). */
    void *(*mem_alloc)(struct cor_rport *port, size_t len);
    void (*mem_free)(struct cor_rport *port, void *ptr);

    /* The core learnt (from the launcher) that `peer` died: frames to it that the route still
     * holds must finish (send_done with COR_EPEERDEAD) at the next progress(), and later
     * sends are refused (until add_peer re-admits the rank). Makes no upcall itself. */
    void (*peer_dead)(struct cor_rport *port, cor_peer_t peer);
    /* For routes without a file descriptor (wait_fd() returns -1): blocks until progress()
     * may have work or timeout_ms passed; returns at once if work is pending. The core's
     * listener calls it with no lock held. */
    int (*wait)(struct cor_rport *port, int timeout_ms);

    /* --- description (no call) --- */

    /* The route's knobs: the environment variables it reads at open, one row each (name,
     * type, default, range, meaning; cor.h), in a const table of the plugin. cor-info lists
     * them from here and the route's README table is generated from them; the route should
     * read its knobs with the same table (cor/routes/util's rutil_knobs_read does). NULL/0:
     * none declared. */
    const cor_knob_t *knobs;
    size_t nknobs;

    /* --- optional, once per process --- */

    /* The route's slow process-wide setup (loading and initializing its libraries), done
     * ahead of open(): cor_init calls it from a thread of its own while the launcher
     * answers, and waits for it to return before its first open(). It must be safe to
     * call from any thread, more than once, and may do nothing; open() must work without
     * it. */
    void (*prepare)(void);

    /* --- optional, appended later (the table's size says whether a plugin has them) --- */

    /* For routes with wait(): makes a wait() under way return soon. Any thread may call it,
     * no lock held. With it, the core's listener of an idle port sleeps longer in one wait()
     * (it is woken to stop, and returns when work comes, as wait() must). */
    void (*wake)(struct cor_rport *port);

    /* The core waits for an answer from `peer` that nothing held in this port stands for
     * (on = 1: a rendezvous' clear-to-send or its data; on = 0: that wait ended; calls
     * nest, one 0 per 1). While some wait lasts, a route that can tell a peer that stopped
     * (SIGSTOP, a debugger) from one that is only slow should find out, without waking the
     * peer's tasks, and give a stopped one up with peer_failed(COR_ETIMEDOUT): nothing else
     * would (its timers run only for frames it holds). Any thread may call it, no lock held;
     * it must be cheap (every rendezvous calls it twice) and never block or make an upcall. */
    void (*await_peer)(struct cor_rport *port, cor_peer_t peer, int on);

    /* --- description, appended later --- */

    /* 1: the route takes peers at first contact. The core may then call add_peer for a peer
     * only when it first sends to it, and a frame from a member not added yet makes the route
     * call up->need_peer (when set) and take the frame if that returns COR_OK. Such a route
     * must not need the whole session's addresses at once, and must tell from a frame which
     * member to ask about (udp: the rank in its header; gm: the sender's GM node id, the
     * rank + 1). 0: the core adds every peer at cor_init. */
    int lazy_peers;

    /* --- optional, appended later --- */

    /* Reads len bytes of peer memory (raddr, rkey: a key the peer's mem_register gave) into
     * local (inside mr, a registration of ours); ordered after the earlier sends and puts to
     * that peer on this port; completion via send_done(cookie): COR_OK once the bytes are in
     * local, COR_EPEERDEAD when the peer was given up, another error when the peer's memory
     * could not be read (a stale key). The route writes into local only until that
     * send_done. Provided only with mem_register (has_rma). */
    int (*get)(struct cor_rport *port, cor_peer_t peer, void *local, size_t len,
               struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie);
};

/* A route defines its table with this, the only exported symbol of the plugin. */
#define COR_ROUTE_DECLARE(rname)                                                                   \
    __attribute__((visibility("default"))) const struct cor_route_ops cor_route_##rname

#endif /* COR_ROUTE_H */
