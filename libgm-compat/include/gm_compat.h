/*
 * gm_compat.h - libgm-compat's own configuration call, outside GM's API
 * (gm.h mirrors GM and stays as GM had it).
 *
 * GM learnt its node map from the mapper; libgm-compat reads it, and its other
 * settings, from environment variables at the gm_init() that starts GM in the
 * process (README.md, "Knobs").  A program that must not change its
 * environment (setenv races with every thread that reads it) gives the same
 * settings here instead:
 *
 *     gm_compat_config_t c;
 *     gm_compat_config_init(&c);
 *     c.nodes = "1 alpha; 2 beta";
 *     c.node_id = 2;
 *     if (gm_compat_configure(&c) != GM_SUCCESS || gm_init() != GM_SUCCESS) ...
 *
 * A field left unset (NULL or 0) falls back to its environment variable, and
 * that to the built-in default, exactly as without the call.
 */
#ifndef GM_COMPAT_H
#define GM_COMPAT_H

#include <gm.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2 added send_timeout_ms; gm_compat_configure still takes version 1 (without it). */
#define GM_COMPAT_CONFIG_VERSION 2

typedef struct gm_compat_config {
    unsigned version;          /* GM_COMPAT_CONFIG_VERSION (gm_compat_config_init sets it) */
    const char *nodes;         /* the node map, GM_NODES syntax ("1 a; 2 b 10.0.0.2");
                                  NULL: GM_NODE_MAP, else GM_NODES */
    unsigned node_id;          /* this process's node; 0: GM_NODE_ID, else by host name */
    const char *provider;      /* libfabric provider ("shm", "tcp;ofi_rxm"); NULL: GM_PROVIDER */
    const char *shm_namespace; /* prefix of shm names and lock files (<= 40 chars, no '/',
                                  ':' or space); NULL: GM_SHM_NAMESPACE */
    unsigned port_base;        /* TCP port of GM port 0 for map entries without one;
                                  0: GM_PORT_BASE */
    unsigned send_timeout_ms;  /* how long a send to a port not open yet is retried (at most
                                  3600000); 0: GM_SEND_TIMEOUT_MS, else 60000 */
} gm_compat_config_t;

/* Fills *cfg with "nothing set": version, NULL strings, zero numbers. */
GM_ENTRY_POINT void gm_compat_config_init(gm_compat_config_t *cfg);

/* Settings for the next gm_init() that starts GM in this process (the first one, or the
 * first after the last gm_finalize()); they stay until the next call.  The strings are
 * copied.  cfg NULL forgets earlier settings (environment only).  A node map with errors
 * makes that gm_init fail, as GM_NODES would.  Thread-safe; never reads or changes the
 * environment.
 * Returns GM_SUCCESS; GM_BUSY while GM is initialized in this process (nothing changes);
 * GM_INVALID_PARAMETER for an unknown version, a node id above 65535, a port base above
 * 65519, a send timeout above an hour or a bad namespace; GM_OUT_OF_MEMORY. */
GM_ENTRY_POINT gm_status_t gm_compat_configure(const gm_compat_config_t *cfg);

/* libgm-compat's knobs: the environment variables it reads (README.md, "Knobs"), one row
 * each, the table it reads them with. A NUMBER is a whole number in [lo, hi], def when unset
 * or bad; a STRING is used as it is. `shown` is the default as people read it ("" = def).
 * gm_compat_knobs gives the table and sets *n to its length; cor-info lists it. */
typedef enum gm_compat_knob_type {
    GM_COMPAT_KNOB_NUMBER,
    GM_COMPAT_KNOB_STRING
} gm_compat_knob_type_t;

typedef struct gm_compat_knob {
    const char *name; /* "GM_PROVIDER" */
    gm_compat_knob_type_t type;
    long long def, lo, hi;
    const char *shown;
    const char *meaning; /* one line */
} gm_compat_knob_t;

GM_ENTRY_POINT const gm_compat_knob_t *gm_compat_knobs(unsigned *n);

/* libfabric's one-time initialization of the process, ahead of the first
 * gm_open: the first query of a process initializes every provider libfabric
 * has built in, which costs 0.05-0.2 s of CPU (libfabric 1.17's verbs provider
 * reads /proc/kallsyms twice), more when several processes start at once.  A
 * program that will open ports can call this from a thread of its own while
 * it waits for something else; gm_open then finds libfabric ready.  Safe from
 * any thread, at any time, any number of times (the work is done once); not
 * needed for anything to work. */
GM_ENTRY_POINT void gm_compat_prepare(void);

/* Sleeping for a port's events without polling (GM itself only had
 * gm_blocking_receive, which cannot be woken by another thread nor bounded).
 *
 * gm_compat_wait sleeps until an event is ready on p (gm_receive would return
 * one), another thread calls gm_compat_wake(p), the port's next alarm, or
 * timeout_us; it may return earlier.  Returns 1 if an event is ready, else 0.
 * A gm_compat_wake just before the sleep is not lost: the wait returns at once.
 * On shm, any message, ack, put or get that a process on this host sends to
 * the port wakes it (a doorbell in shared memory; a sender pays a system call
 * only when the port sleeps); gm_compat_wakes_on_arrival(p) says so.  Other
 * providers bring messages from other hosts, which cannot ring: there give
 * short timeouts.  Thread-safe, like every call on a port. */
GM_ENTRY_POINT int gm_compat_wait(struct gm_port *p, unsigned long timeout_us);
GM_ENTRY_POINT void gm_compat_wake(struct gm_port *p);
GM_ENTRY_POINT int gm_compat_wakes_on_arrival(struct gm_port *p);

/* Whether a port of this host is still open, for senders that wait for a
 * peer's answer with nothing of theirs in flight to it: on shm a message to a
 * process killed with SIGKILL lands in its shared memory and completes, and
 * nothing ever fails.  GM_SEND_TARGET_PORT_CLOSED if no process holds port
 * `port` of node `node` (its owner closed it or died: the flock on its lock
 * file, which the kernel drops with the process, is the proof; a dead owner's
 * files are removed on the way); GM_SUCCESS if one does, or where the provider
 * keeps no lock files (tcp: its own errors tell).  A few system calls, no
 * message; thread-safe. */
GM_ENTRY_POINT gm_status_t gm_compat_port_probe(struct gm_port *p, unsigned int node,
                                                unsigned int port);

/* A provider call stuck behind a peer's lock.  On shm, libfabric 1.17's
 * provider takes the target's region lock for every send, and the target
 * takes it while it reads its queue: a target stopped (SIGSTOP, a debugger)
 * while it held that lock would keep our send spinning inside the provider,
 * with the port's lock and the calling thread, until it runs again or dies.
 * libgm looks at that lock first and leaves such sends waiting in the port's
 * backlog instead (README, "Stopped shm peers"; a call that got inside all
 * the same still spins, and the watchdog frees calls whose target died:
 * "Killed shm peers").  A program that wants to give such a peer up must do
 * it from another thread.
 *
 * gm_compat_port_stuck gives how long (ms, at least 1) the watchdog has seen
 * the provider call that port p is in now stay inside, or, with no such
 * call, how long p's sends have waited for a target's held lock, and that
 * target in *node and *port; 0 when neither (or a call was not looked at
 * twice yet: the watchdog looks every 50 ms, every 250 ms when idle, so a
 * stuck call shows after 50-300 ms).  Lock-free, any thread, never waits for p.
 *
 * gm_compat_set_stuck_notify has the watchdog call fn(arg) from its own
 * thread at each look that finds a call of p stuck toward a live peer, or its
 * sends waiting for a held lock (every 50 ms while it lasts), so a thread can
 * sleep until then instead of polling.
 * fn runs under libgm's registry lock: it must return at once and must not
 * call libgm (wake a thread, which then calls gm_compat_port_stuck).  fn NULL
 * stops it; not a signal handler context.  Both do nothing off shm. */
GM_ENTRY_POINT unsigned gm_compat_port_stuck(struct gm_port *p, unsigned int *node,
                                             unsigned int *port);
GM_ENTRY_POINT void gm_compat_set_stuck_notify(struct gm_port *p, void (*fn)(void *arg), void *arg);

/* Sends whose receive buffers the caller's own flow control guarantees.  A
 * client that never sends a target more messages of a size than buffers of
 * that size the target provided it (credits it returns itself, as CoR's gm
 * route does) needs neither GM's per-target window nor the acks that make a
 * callback mean "delivered": gm_compat_sendv_now sends the concatenation of
 * iov[0..iovcnt) (at most 4 pieces) at once, as gm_send would at that size
 * and priority, and returns
 *   GM_SUCCESS   it left, and is in the target's memory already: the pieces
 *                may be reused at once; no token is taken, no callback runs,
 *                the target does not acknowledge it, gm_close does not wait
 *                for it, and a failure at the target (no such size) is not
 *                reported;
 *   GM_TRY_AGAIN nothing was sent: an earlier send or put to that target
 *                port at that priority still waits in the library, the
 *                provider is busy, the message is larger than one injected
 *                message, the target is unknown, not reachable or gone, or
 *                the port's transport is not this host's shared memory
 *                (elsewhere an injected message may still be on its way).
 *                Send it the usual way (gm_send_with_callback): order with
 *                the earlier sends holds either way;
 *   GM_INVALID_PARAMETER  bad arguments (as gm_send would report them).
 * It is a stream item like any send: later sends to that target port at that
 * priority are processed after it. */
GM_ENTRY_POINT gm_status_t gm_compat_sendv_now(struct gm_port *p, const struct iovec *iov,
                                               unsigned int iovcnt, unsigned int size,
                                               unsigned int priority, unsigned int target_node_id,
                                               unsigned int target_port_id);

/* Puts whose first transfer is already a remote write.  GM's gm_put names
 * remote memory by address alone; here the sender learns the target's key
 * only after a first put there went as messages (which needs the target's
 * and then the sender's attention again before it completes).  A target
 * that tells its peer where to put out of band (a clear-to-send) can send
 * the key with the address:
 *
 * gm_compat_export gives the key of [addr, addr + len), which must lie in
 * memory registered on p (gm_register_memory or gm_dma_malloc); GM_FAILURE
 * where the provider has no remote write by virtual address (then use
 * gm_put).  The key stays valid until that memory is deregistered.
 *
 * gm_compat_put_keyed is gm_put into memory of the target whose key it
 * exported: a remote write at once, the callback when it landed.  The key
 * is not kept (a later gm_put there learns it as before).  Without remote
 * write on this port it is gm_put.
 *
 * gm_compat_get_keyed is gm_get from memory of the target whose key it
 * exported: a remote read at once (on one host a copy by the caller), the
 * callback when the data is in local_buffer.  Without remote read on this
 * port, or with key 0, it is gm_get (the target answers when it polls). */
GM_ENTRY_POINT gm_status_t gm_compat_export(struct gm_port *p, void *addr, gm_size_t len,
                                            gm_u64_t *key);
GM_ENTRY_POINT void gm_compat_put_keyed(struct gm_port *p, void *local_buffer,
                                        gm_remote_ptr_t remote_buffer, gm_u64_t key, gm_size_t len,
                                        enum gm_priority priority, unsigned int target_node_id,
                                        unsigned int target_port_id,
                                        gm_send_completion_callback_t callback, void *context);
GM_ENTRY_POINT void gm_compat_get_keyed(struct gm_port *p, gm_remote_ptr_t remote_buffer,
                                        gm_u64_t key, void *local_buffer, gm_size_t len,
                                        enum gm_priority priority, unsigned int target_node_id,
                                        unsigned int target_port_id,
                                        gm_send_completion_callback_t callback, void *context);

#ifdef __cplusplus
}
#endif

#endif
