/* send.c - the sending machinery under the client calls (calls.c):
 * messages, puts and gets are items of the per-(target, priority) ordered
 * stream on the eager channel (see gm_internal.h); sends the window or the
 * provider cannot take now wait in the target's backlog (FIFO, so order
 * holds) and are retried from the progress loop until GM_SEND_TIMEOUT_MS
 * runs out; acks complete stream items; the in-flight watchdog fails items
 * to dead or silent targets; transient provider errors are retried. */
#include "gm_internal.h"

#include <string.h>
#include <sys/uio.h>

/* ---- completion ------------------------------------------------------------ */

/* Queues a finished request for its callback (run by gm_unknown). */
void gmx_send_done(struct gm_port *p, struct gmx_sreq *s, gm_status_t st)
{
    if (s->kind == GMX_S_INTERNAL) {
        if (st != GM_SUCCESS && s->get_rreq && s->get_rreq->posted) {
            /* The GET request never got out: fail the get once its receive
             * is cancelled. */
            s->get_rreq->get->status = st;
            gmx_tp_cancel(p, s->get_rreq);
        }
        gmx_sreq_put(p, s);
        return;
    }
    s->status = st;
    s->next = NULL;
    if (p->done_tail)
        p->done_tail->next = s;
    else
        p->done = s;
    p->done_tail = s;
}

static void fail_unacked(struct gm_port *p, struct gmx_peer *peer, unsigned prio, gm_status_t st);

/* The provider is done with one part of s (its own send or its DATA).  A
 * stream item completes when its ack has come too. */
void gmx_send_local_done(struct gm_port *p, struct gmx_sreq *s)
{
    struct gmx_sreq *parent = s->parent;
    if (parent) {
        gmx_sreq_put(p, s);
        gmx_send_local_done(p, parent);
        return;
    }
    if (s->local_pending) s->local_pending--;
    if (!s->local_pending && (!s->stream || s->acked)) gmx_send_done(p, s, s->ack_status);
}

/* The target processed every stream item up to seq (acks come in order). */
void gmx_ack_arrived(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                     gm_status_t st)
{
    while (peer->unacked[prio]) {
        struct gmx_sreq *s = peer->unacked[prio];
        uint32_t d = (seq - s->seq) & GMX_SEQ_MASK;
        if (d & 0x200000u) break; /* s is after seq */
        peer->unacked[prio] = s->next;
        if (!peer->unacked[prio]) peer->unacked_tail[prio] = NULL;
        peer->inflight--;
        s->acked = 1;
        if (s->seq == seq && st != GM_SUCCESS) {
            s->ack_status = st;
            /* GM disables the target after an error until the client
             * drops or resumes. */
            if (s->kind == GMX_S_CLIENT) peer->disabled[prio] = 1;
        }
        if (!s->local_pending) gmx_send_done(p, s, s->ack_status);
    }
}

void gmx_ack_arrived_low(struct gm_port *p, struct gmx_peer *peer, unsigned prio, unsigned low)
{
    /* At most GMX_WINDOW items are in flight, consecutive but for failed ones, and acks come in
     * order: an ack older than the oldest in flight is at most a window behind, so 6 bits
     * name one item or none (an ack of items already acked). */
    for (struct gmx_sreq *u = peer->unacked[prio & 1]; u; u = u->next)
        if ((u->seq & 0x3f) == (low & 0x3f)) {
            gmx_ack_arrived(p, peer, prio & 1, u->seq, GM_SUCCESS);
            return;
        }
}

static void unacked_push(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s)
{
    if (!peer->in_watch) {
        peer->in_watch = 1;
        peer->next_watch = p->watch;
        p->watch = peer;
    }
    if (!s->first_try_ns) s->first_try_ns = gmx_coarse_ns();
    unsigned prio = s->prio;
    s->next = NULL;
    if (peer->unacked_tail[prio])
        peer->unacked_tail[prio]->next = s;
    else
        peer->unacked[prio] = s;
    peer->unacked_tail[prio] = s;
    peer->inflight++;
}

/* Items sent on (peer, prio) will not be acknowledged: fail them. */
static void fail_unacked(struct gm_port *p, struct gmx_peer *peer, unsigned prio, gm_status_t st)
{
    while (peer->unacked[prio]) {
        struct gmx_sreq *u = peer->unacked[prio];
        peer->unacked[prio] = u->next;
        peer->inflight--;
        u->acked = 1;
        u->ack_status = st;
        if (!u->local_pending) gmx_send_done(p, u, st);
    }
    peer->unacked_tail[prio] = NULL;
}

/* Reports s to the client now although the provider may still hold it (a
 * dead target never answers): a stand-in carries the callback, and s itself
 * becomes internal, freed if its completions ever come. */
static void abandon(struct gm_port *p, struct gmx_sreq *s, gm_status_t st)
{
    if (s->kind == GMX_S_CLIENT) {
        struct gmx_sreq *proxy = gmx_sreq_get(p);
        if (proxy) {
            proxy->kind = GMX_S_CLIENT;
            proxy->cb = s->cb;
            proxy->ctx = s->ctx;
            gmx_send_done(p, proxy, st);
        }
        s->kind = GMX_S_INTERNAL;
    }
}

/* Fails the items in flight to peer on both priorities (target gone). */
static void peer_dead(struct gm_port *p, struct gmx_peer *peer, gm_status_t st)
{
    for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++) {
        if (!peer->unacked[prio]) continue;
        if (peer->unacked[prio]->kind == GMX_S_CLIENT) peer->disabled[prio] = 1;
        for (struct gmx_sreq *u = peer->unacked[prio]; u; u = u->next)
            if (u->local_pending) abandon(p, u, st);
        fail_unacked(p, peer, prio, st);
    }
}

/* Looks (every 10 ms) at the oldest item in flight to each target: a shm
 * target whose lock is gone died or closed; any target that has not
 * processed an item for gmx_cfg.stuck_ms timed out. */
void gmx_watch_progress(struct gm_port *p)
{
    uint64_t now = gmx_coarse_ns();
    if (now - p->watch_ns < 10000000u) return;
    p->watch_ns = now;
    uint64_t limit = (uint64_t)gmx_cfg.stuck_ms * 1000000u;
    struct gmx_peer **link = &p->watch;
    while (*link) {
        struct gmx_peer *peer = *link;
        uint64_t oldest = 0;
        for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++) {
            struct gmx_sreq *u = peer->unacked[prio];
            if (u && (!oldest || u->first_try_ns < oldest)) oldest = u->first_try_ns;
        }
        if (oldest && now - oldest >= 50000000u) {
            if (p->addr_is_str && gmx_peer_closed(p, peer)) {
                gmx_log("node %u port %u closed with items in flight\n", peer->node, peer->port);
                peer_dead(p, peer, GM_SEND_TARGET_PORT_CLOSED);
            } else if (now - oldest >= limit) {
                gmx_log("node %u port %u processed nothing for %u ms\n", peer->node, peer->port,
                        (unsigned)((now - oldest) / 1000000u));
                peer_dead(p, peer, GM_SEND_TIMED_OUT);
            }
        }
        if (!peer->inflight) {
            peer->in_watch = 0;
            *link = peer->next_watch;
        } else {
            link = &peer->next_watch;
        }
    }
}

/* A send that never reached the provider failed: report it and hold that
 * stream (GM semantics); items sent before it are failed too. */
void gmx_stream_failed(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s, gm_status_t st)
{
    if (s->kind == GMX_S_CLIENT && peer && s->prio < GM_NUM_PRIORITIES) peer->disabled[s->prio] = 1;
    if (s->parent) {
        /* DATA of a sent header: the target waits for it in vain. */
        struct gmx_sreq *h = s->parent;
        if (h->stream && peer) fail_unacked(p, peer, h->prio, st);
        gmx_send_local_done(p, s);
        return;
    }
    if (s->child) {
        gmx_sreq_put(p, s->child);
        s->child = NULL;
    }
    s->local_pending = 0;
    s->acked = 1;
    gmx_send_done(p, s, st);
    if (peer && s->stream && s->prio < GM_NUM_PRIORITIES) fail_unacked(p, peer, s->prio, st);
}

/* The provider reported an error for a send it had taken. */
void gmx_send_failed(struct gm_port *p, struct gmx_sreq *s, gm_status_t st)
{
    struct gmx_peer *peer = s->peer;
    if (s->rma == 1 && peer && peer->rma_busy) peer->rma_busy--;
    if (s->parent) {
        gmx_stream_failed(p, peer, s, st);
        return;
    }
    if (s->stream && peer) {
        if (s->kind == GMX_S_CLIENT) peer->disabled[s->prio] = 1;
        fail_unacked(p, peer, s->prio, st); /* includes s */
    } else {
        s->ack_status = st;
    }
    gmx_send_local_done(p, s);
}

static void mark_backlogged(struct gm_port *p, struct gmx_peer *peer);

/* The provider failed s for a reason that may pass (a TCP connection being
 * set up, or both sides connecting at once): s goes back to be sent again,
 * in order (before the items not sent yet; failures come in send order),
 * until the backlog's timeout decides.  1 if it was requeued. */
int gmx_send_retry(struct gm_port *p, struct gmx_sreq *s)
{
    struct gmx_peer *peer = s->peer;
    if (!peer || (s->kind == GMX_S_INTERNAL && !s->parent && !s->stream && !s->tag)) return 0;
    uint64_t now = gmx_coarse_ns();
    if (s->retried && now - s->first_try_ns >= (uint64_t)gmx_cfg.send_timeout_ms * 1000000u)
        return 0; /* the provider never recovered: the caller fails it */
    if (s->rma == 1 && peer->rma_busy) peer->rma_busy--;
    if (s->stream) {
        /* Out of the unacked list: it was not delivered. */
        struct gmx_sreq **link = &peer->unacked[s->prio];
        struct gmx_sreq *prev = NULL;
        while (*link && *link != s) {
            prev = *link;
            link = &(*link)->next;
        }
        if (!*link) return 0; /* already failed or acked */
        *link = s->next;
        if (peer->unacked_tail[s->prio] == s) peer->unacked_tail[s->prio] = prev;
        peer->inflight--;
    }
    if (!s->first_try_ns) s->first_try_ns = gmx_coarse_ns();
    struct gmx_sreq **head = s->parent ? &peer->dataq : &peer->backlog;
    struct gmx_sreq **tail = s->parent ? &peer->dataq_tail : &peer->backlog_tail;
    /* After the ones requeued before it (they carry first_try_ns of an
     * earlier try and are not newer items). */
    struct gmx_sreq **link = head;
    while (*link && (*link)->retried && (*link)->first_try_ns <= s->first_try_ns)
        link = &(*link)->next;
    s->retried = 1;
    s->retry_ns = now;
    s->next = *link;
    *link = s;
    if (!s->next) *tail = s;
    mark_backlogged(p, peer);
    gmx_log("retrying a send to node %u port %u\n", peer->node, peer->port);
    return 1;
}

/* ---- handing requests to the provider -------------------------------------- */

/* Piggy-backs the acks we owe peer on a header going to it. */
void gmx_hdr_acks(struct gmx_peer *peer, struct gmx_hdr *h)
{
    h->acks = 0;
    h->aepoch = peer->rx_epoch;
    for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++) {
        if (peer->ack_pending[prio]) {
            h->acks |= (uint8_t)(1u << prio);
            h->ack[prio] = peer->ack_due[prio];
        }
    }
}

static void acks_sent(struct gmx_peer *peer, const struct gmx_hdr *h)
{
    for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++)
        if ((h->acks >> prio) & 1) peer->ack_pending[prio] = 0;
    if (!peer->ack_pending[0] && !peer->ack_pending[1]) peer->acks_owed = 0;
}

/* The short form of h (gmx_short) if this message may go in it, else 0. */
static uint64_t short_header(const struct gm_port *p, const struct gmx_peer *peer,
                             const struct gmx_hdr *h, size_t len)
{
    if (!p->short_form || h->kind != GMX_K_MSG || len > p->inject_size || !peer->knows_us ||
        p->node_id > 0xffff || p->port_id > 0xf)
        return 0;
    unsigned prio = h->prio & 1;
    if ((h->acks & ~(1u << prio)) || ((h->seq - h->base) & GMX_SEQ_MASK) > GMX_SHORT_BASE_MAX)
        return 0; /* an ack of the other priority, or a base too far back: the full header */
    struct gmx_short sh = {.node = p->node_id,
                           .port = p->port_id,
                           .prio = prio,
                           .size = h->size,
                           .seq = h->seq,
                           .base = h->base,
                           .has_ack = (h->acks >> prio) & 1,
                           .ack_low = h->ack[prio] & 0x3f};
    return gmx_short_pack(&sh);
}

/* Sends hdr + payload on the eager channel: 0, -FI_EAGAIN or an error.  Small
 * ones are injected (done at once, reported through *done), as are those that
 * go in the short form. */
static ssize_t eager_send(struct gm_port *p, struct gmx_peer *peer, struct gmx_hdr *h,
                          const void *buf, size_t len, void *ctx, int *done)
{
    ssize_t rc;
    gmx_hdr_acks(peer, h);
    h->epoch = p->epoch;
    size_t total = sizeof *h + len;
    *done = 0;
    struct iovec iov[2] = {{h, sizeof *h}, {(void *)buf, len}};
    uint64_t data = total > p->inject_size ? short_header(p, peer, h, len) : 0;
    if (data) {
        rc = gmx_tp_injectdata(p, peer, buf, len, data, GMX_TAG_EAGER);
        *done = rc == 0;
    } else if (total <= p->inject_size && total <= GMX_BOUNCE_LEN) {
        rc = gmx_tp_inject(p, peer, iov, len ? 2 : 1, GMX_TAG_EAGER);
        *done = rc == 0;
    } else {
        rc = gmx_tp_send(p, peer, iov, len ? 2 : 1, GMX_TAG_EAGER, ctx);
    }
    if (rc == 0) {
        acks_sent(peer, h);
        gmx_bell_ring(peer->bell); /* a target asleep on this host wakes */
    }
    return rc;
}

/* The oldest item of (peer, prio) the sender still waits for, seq if none (retries may have
 * put the unacked list out of order; it is at most a window long). */
static uint32_t stream_base(const struct gmx_peer *peer, unsigned prio, uint32_t seq)
{
    uint32_t base = seq;
    for (const struct gmx_sreq *u = peer->unacked[prio]; u; u = u->next)
        if (((base - u->seq) & GMX_SEQ_MASK) - 1 < 0x1fffffu) base = u->seq;
    return base;
}

static void dataq_push(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s);

static ssize_t send_now_raw_unguarded(struct gm_port *p, struct gmx_sreq *s);

/* shm: the watchdog frees a call stuck on a dead target's lock (unstick.c). */
static ssize_t send_now_raw(struct gm_port *p, struct gmx_sreq *s)
{
    if (!p->addr_is_str || p->shm) return send_now_raw_unguarded(p, s); /* rings never spin */
    if (gmx_qlock_busy(p, s->peer)) return -FI_EAGAIN; /* its lock held: the backlog waits */
    gmx_guard_enter(p, s->peer);
    ssize_t rc = send_now_raw_unguarded(p, s);
    gmx_guard_leave(p);
    return rc;
}

static ssize_t send_now_raw_unguarded(struct gm_port *p, struct gmx_sreq *s)
{
    ssize_t rc;
    struct gmx_peer *peer = s->peer;
    int done = 0;
    if (gmx_peer_gone(p, peer))
        return -FI_EAGAIN; /* the backlog decides (GM_SEND_TARGET_PORT_CLOSED) */
    if (s->eager) {
        if (s->stream) s->hdr.base = stream_base(peer, s->prio, s->seq);
        rc = eager_send(p, peer, &s->hdr, s->buf, s->len, s, &done);
    } else if (s->rma == 1) {
        /* The callback means "landed": shm's writes are synchronous copies
         * (or answered by the target); other providers must be asked for
         * delivery completion (which would slow shm down). */
        rc = gmx_tp_write(p, peer, s->buf, s->len, s->raddr, s->rkey, s);
        if (rc == 0) peer->rma_busy++;
    } else if (s->rma == 2) {
        rc = gmx_tp_read(p, peer, (void *)s->buf, s->len, s->raddr, s->rkey, s);
    } else {
        struct iovec iov = {(void *)s->buf, s->len};
        if (s->len <= p->inject_size) {
            rc = gmx_tp_inject(p, peer, &iov, 1, s->tag);
            done = rc == 0;
        } else {
            rc = gmx_tp_send(p, peer, &iov, 1, s->tag, s);
        }
    }
    if (rc == -FI_ENOTCONN && !p->addr_is_str)
        return -FI_EAGAIN; /* a connection being set up: the backlog retries */
    if (rc != 0) return rc;
    if (!s->eager)
        gmx_bell_ring(peer->bell); /* RMA and DATA too: the target's provider moves them */
    peer->reached |= done;
    struct gmx_sreq *child = s->child;
    s->child = NULL;
    if (s->stream) unacked_push(p, peer, s);
    if (done) gmx_send_local_done(p, s); /* may complete s: not touched after */
    if (child) {
        /* The DATA goes right behind its header, ahead of the backlog. */
        ssize_t crc = peer->dataq ? -FI_EAGAIN : send_now_raw_unguarded(p, child);
        if (crc == -FI_EAGAIN)
            dataq_push(p, peer, child);
        else if (crc != 0)
            gmx_stream_failed(p, peer, child, gmx_status_from_fi((int)crc, peer));
    }
    return 0;
}

/* Hands one request to the provider: 0, -FI_EAGAIN, or another error. */
static ssize_t send_now(struct gm_port *p, struct gmx_sreq *s)
{
    struct gmx_peer *peer = s->peer;
    if (s->stream && peer->inflight >= GMX_WINDOW) return -FI_EAGAIN;
    /* A put by fi_write must land before anything after it. */
    if (peer->rma_busy && (s->stream || s->rma == 1)) return -FI_EAGAIN;
    return send_now_raw(p, s);
}

static void mark_backlogged(struct gm_port *p, struct gmx_peer *peer)
{
    if (!peer->in_backlog_list) {
        peer->in_backlog_list = 1;
        if (!p->backlogged) atomic_fetch_add(&gmx_backlogged_ports, 1);
        peer->next_backlogged = p->backlogged;
        p->backlogged = peer;
    }
}

static void dataq_push(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s)
{
    s->next = NULL;
    if (!s->first_try_ns) s->first_try_ns = gmx_coarse_ns();
    if (peer->dataq_tail)
        peer->dataq_tail->next = s;
    else
        peer->dataq = s;
    peer->dataq_tail = s;
    mark_backlogged(p, peer);
}

static void backlog_push(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s)
{
    s->next = NULL;
    if (!s->first_try_ns) s->first_try_ns = gmx_coarse_ns();
    if (peer->backlog_tail)
        peer->backlog_tail->next = s;
    else
        peer->backlog = s;
    peer->backlog_tail = s;
    mark_backlogged(p, peer);
}

/* shm: a port of this process closed since we last looked: check that the
 * target is still the one we resolved (one atomic load otherwise). */
static void revalidate(struct gm_port *p, struct gmx_peer *peer)
{
    unsigned epoch = atomic_load_explicit(&gmx_close_epoch, memory_order_relaxed);
    if (peer->close_epoch == epoch) return;
    peer->close_epoch = epoch;
    if (peer->resolved && gmx_peer_closed(p, peer)) {
        gmx_tp_remove(p, peer);
        peer->resolved = 0;
        peer->shm_name[0] = '\0';
    }
}

/* Sends s now, or queues it behind earlier sends to the same target. */
void gmx_submit(struct gm_port *p, struct gmx_sreq *s)
{
    struct gmx_peer *peer = s->peer;
    if (p->addr_is_str) revalidate(p, peer);
    if (!peer->backlog && !peer->dataq && !peer->disabled[s->prio] &&
        (peer->resolved || gmx_peer_resolve(p, peer))) {
        ssize_t rc = send_now(p, s);
        /* Let the provider make room (or connect), then try a few times
         * more: a first send to a target often needs a setup round.  Not
         * when the window or a put holds it: that takes an ack. */
        int retries = peer->reached ? 1 : 16;
        for (int i = 0; rc == -FI_EAGAIN && i < retries; i++) {
            if ((s->stream && peer->inflight >= GMX_WINDOW) || peer->rma_busy) break;
            gmx_progress(p);
            if (peer->backlog || peer->dataq) break;
            rc = send_now(p, s);
        }
        if (rc == 0) return;
        if (rc != -FI_EAGAIN) {
            gmx_log("send to node %u port %u: %s\n", peer->node, peer->port, fi_strerror((int)-rc));
            gmx_stream_failed(p, peer, s, gmx_status_from_fi((int)rc, peer));
            return;
        }
    }
    backlog_push(p, peer, s);
}

/* tcp;ofi_rxm (any connection-based provider): the provider answers "try again" while it
 * sets up a connection, which completes only when both sides poll, and it puts no time limit on
 * that: a connection whose answer never comes (its request taken by a listener that never
 * answers, or lost in the set-up) stays "try again" for ever, although a new one would complete
 * at once.  So a first connection that has been "try again" for GMX_STALL_NS (then twice as
 * long each time) is dropped and made anew (the address leaves the AV and comes back: with
 * FI_AV_REMOVE_CLEANUP, fabric_load.c, that closes rxm's connection).  A target that is merely
 * slow finds both requests and answers the live one; one that is not open yet refuses both, as
 * before, so a send to it still waits for the send timeout (GM's semantics). */
static void renew_stalled(struct gm_port *p, struct gmx_peer *peer, const struct gmx_sreq *s,
                          uint64_t now)
{
    if (p->addr_is_str || p->shm || peer->reached) return;
    uint64_t since = peer->stall_ns > s->first_try_ns ? peer->stall_ns : s->first_try_ns;
    uint64_t wait = GMX_STALL_NS << (peer->stalls < 3 ? peer->stalls : 3);
    if (wait > GMX_STALL_MAX_NS) wait = GMX_STALL_MAX_NS;
    if (now - since < wait) return;
    peer->stall_ns = now;
    peer->stalls++;
    gmx_log("no connection to node %u port %u after %u ms of retries: making a new one\n",
            peer->node, peer->port, (unsigned)((now - s->first_try_ns) / 1000000u));
    gmx_peer_renew(p, peer);
}

/* shm: a target whose lock a live process holds (its port is open) refused every send of ours
 * for the whole send timeout. GM calls that GM_SEND_TIMED_OUT; it was reported as
 * GM_SEND_TARGET_PORT_CLOSED (what "try again" from a target never reached means over tcp),
 * which at 256 domains on libfabric's shm provider named open ports closed
 * (docs/measurements/scale-2026-11-29.md). Says once per target (on stderr: the program's
 * report of the failure names only the status) what held the sends back. */
static gm_status_t open_but_refused(struct gm_port *p, struct gmx_peer *peer, uint64_t waited)
{
    if (!peer->told_refused) {
        peer->told_refused = 1;
        uint64_t now = gmx_coarse_ns();
        if (peer->qlock_held_ns)
            fprintf(stderr,
                    "libgm: port %u: node %u port %u is open but took nothing for %u ms: its "
                    "queue lock (libfabric shm) has been held for %u ms; send timed out\n",
                    p->port_id, peer->node, peer->port, (unsigned)(waited / 1000000u),
                    (unsigned)((now - peer->qlock_held_ns) / 1000000u));
        else
            fprintf(stderr,
                    "libgm: port %u: node %u port %u is open but took nothing for %u ms (%s: "
                    "\"try again\": its queue full, or it does not poll%s); send timed out\n",
                    p->port_id, peer->node, peer->port, (unsigned)(waited / 1000000u),
                    p->shm ? "its ring" : "libfabric's shm provider",
                    p->shm ? "" : ", so our connection request waits in it");
    }
    return GM_SEND_TIMED_OUT;
}

/* Why the head of a stuck backlog should fail now, or GM_SUCCESS to wait. */
static gm_status_t stuck_verdict(struct gm_port *p, struct gmx_peer *peer, const struct gmx_sreq *s,
                                 uint64_t now)
{
    uint64_t waited = now - s->first_try_ns;
    renew_stalled(p, peer, s, now);
    if (p->addr_is_str && now - peer->last_check_ns >= 10000000u) {
        /* shm: the target's lock file says whether it is open, and where. */
        peer->last_check_ns = now;
        if (gmx_peer_closed(p, peer)) {
            /* A port that was open once (we reached it, read its address, heard from it,
             * or found the lock file its killed owner left) closed or died: say so at once.
             * One never seen open may not be open yet: like GM, retry for the send timeout
             * (below), long enough for a person to start the receiver. */
            if ((peer->reached || peer->existed) && waited >= 50000000u)
                return GM_SEND_TARGET_PORT_CLOSED;
        } else {
            gmx_peer_resolve(p, peer);
        }
    }
    /* A target that took sends before may just be slow to poll: its own grace. */
    uint64_t limit =
        (uint64_t)(peer->reached ? gmx_cfg.stuck_ms : gmx_cfg.send_timeout_ms) * 1000000u;
    if (waited < limit) return GM_SUCCESS;
    if (!peer->reached && p->addr_is_str &&
        gmx_lock_unheld(peer->node, peer->port) == GMX_PORT_HELD)
        return open_but_refused(p, peer, waited);
    return gmx_status_from_fi(FI_EAGAIN, peer);
}

/* Retries one queue (dataq or backlog) of peer; 1 if it is empty now. */
static int queue_progress(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq **head,
                          struct gmx_sreq **tail, uint64_t *now)
{
    while (*head) {
        struct gmx_sreq *s = *head;
        if (!s->parent && peer->disabled[s->prio])
            return 0; /* held until gm_drop_sends / gm_resume_sending */
        if (s->stream && peer->inflight >= GMX_WINDOW)
            return 0; /* waits for an ack, not for the provider */
        if (peer->rma_busy && (s->stream || s->rma == 1)) return 0;
        if (s->retried && gmx_coarse_ns() - s->retry_ns < 1000000u)
            return 0; /* give a failed connection a moment */
        /* Unlink first: a successful inject may complete s at once. */
        *head = s->next;
        if (!*head) *tail = NULL;
        ssize_t rc = peer->resolved ? send_now(p, s) : -FI_EAGAIN;
        if (rc == 0) continue;
        if (rc == -FI_EAGAIN) {
            if (!*now) *now = gmx_coarse_ns();
            gm_status_t st = stuck_verdict(p, peer, s, *now);
            if (st == GM_SUCCESS) {
                s->next = *head; /* back at the front */
                *head = s;
                if (!*tail) *tail = s;
                return 0;
            }
            gmx_log("node %u port %u unreachable for %u ms: %s\n", peer->node, peer->port,
                    (unsigned)((*now - s->first_try_ns) / 1000000u), gm_strerror(st));
            gmx_stream_failed(p, peer, s, st);
            continue;
        }
        gmx_stream_failed(p, peer, s, gmx_status_from_fi((int)rc, peer));
    }
    return 1;
}

void gmx_backlog_progress(struct gm_port *p)
{
    if (!p->backlogged) return;
    struct gmx_peer **link = &p->backlogged;
    uint64_t now = 0;
    while (*link) {
        struct gmx_peer *peer = *link;
        if (queue_progress(p, peer, &peer->dataq, &peer->dataq_tail, &now))
            queue_progress(p, peer, &peer->backlog, &peer->backlog_tail, &now);
        if (!peer->backlog && !peer->dataq) {
            peer->in_backlog_list = 0;
            if (peer->qlock_held_ns) gmx_qlock_forget(p, peer); /* nothing waits for it */
            *link = peer->next_backlogged;
        } else {
            link = &peer->next_backlogged;
        }
    }
    if (!p->backlogged) atomic_fetch_sub(&gmx_backlogged_ports, 1);
}

/* A stream item injected now from the caller's memory, outside the window and the unacked
 * list: only where an injected message is already in the target's memory (this host), and only
 * when nothing of the stream waits in the library or the window (order). Its sequence number
 * is taken only once it left, so a refused one leaves the stream as it was. */
ssize_t gmx_send_unacked(struct gm_port *p, struct gmx_peer *peer, unsigned prio, unsigned size,
                         const struct iovec *iov, unsigned iovcnt, size_t len)
{
    if (!p->addr_is_str || iovcnt > GMX_SENDV_MAX || len > p->eager_max ||
        sizeof(struct gmx_hdr) + len > p->inject_size)
        return -FI_EAGAIN;
    revalidate(p, peer);
    if (peer->backlog || peer->dataq || peer->disabled[prio] || peer->rma_busy ||
        (!peer->resolved && !gmx_peer_resolve(p, peer)) || gmx_peer_gone(p, peer))
        return -FI_EAGAIN;
    if (!p->shm && gmx_qlock_busy(p, peer)) return -FI_EAGAIN; /* its lock held: later */
    uint32_t seq = peer->send_seq[prio] & GMX_SEQ_MASK, base = stream_base(peer, prio, seq);
    /* A short-form ack names an item in flight by the low 6 bits of its seq
     * (gmx_ack_arrived_low): with the window after it, the items in flight stay within 64. */
    if (((seq - base) & GMX_SEQ_MASK) >= 64 - GMX_WINDOW - 1) return -FI_EAGAIN;
    struct gmx_hdr h = {.kind = GMX_K_MSG,
                        .size = (uint8_t)size,
                        .prio = (uint8_t)prio,
                        .node = (uint16_t)p->node_id,
                        .port = (uint8_t)p->port_id,
                        .seq = seq,
                        .base = base,
                        .flags = GMX_F_UNACKED,
                        .len = len};
    gmx_hdr_acks(peer, &h);
    h.epoch = p->epoch;
    struct iovec v[1 + GMX_SENDV_MAX] = {{&h, sizeof h}};
    for (unsigned i = 0; i < iovcnt; i++)
        v[1 + i] = iov[i];
    if (!p->shm) gmx_guard_enter(p, peer); /* the watchdog frees a call stuck on a dead lock */
    ssize_t rc = gmx_tp_inject(p, peer, v, 1 + iovcnt, GMX_TAG_EAGER);
    if (!p->shm) gmx_guard_leave(p);
    if (rc != 0) return rc == -FI_EAGAIN || rc == -FI_ENOTCONN ? -FI_EAGAIN : rc;
    peer->send_seq[prio]++;
    acks_sent(peer, &h);
    gmx_bell_ring(peer->bell);
    peer->reached = 1;
    return 0;
}

/* Sends an internal DATA/GETDATA message (no callback); 0 or -1 when out of
 * memory. */
int gmx_send_internal(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                      uint64_t tag)
{
    struct gmx_sreq *s = gmx_sreq_get(p);
    if (!s) return -1;
    s->kind = GMX_S_INTERNAL;
    s->peer = peer;
    s->buf = buf;
    s->len = len;
    s->tag = tag;
    s->local_pending = 1;
    gmx_submit(p, s);
    return 0;
}

/* Sends a header-only control message (ack, nack, key) at once, outside
 * the stream and the backlog; 0, or -1 if the provider would not take it. */
static void revalidate(struct gm_port *p, struct gmx_peer *peer);

int gmx_send_ctl(struct gm_port *p, struct gmx_peer *peer, const struct gmx_hdr *h)
{
    if (p->addr_is_str) revalidate(p, peer);
    if ((!peer->resolved && !gmx_peer_resolve(p, peer)) || gmx_peer_gone(p, peer)) return -1;
    struct gmx_hdr copy = *h;
    copy.node = (uint16_t)p->node_id;
    copy.port = (uint8_t)p->port_id;
    int done = 0;
    ssize_t rc = -FI_EAGAIN;
    if (p->addr_is_str && !p->shm && gmx_qlock_busy(p, peer)) return -1; /* held: later */
    if (p->addr_is_str) gmx_guard_enter(p, peer);
    /* (a full ring empties only when its target reads it: a few looks, then later) */
    int tries = p->shm ? 16 : 1000;
    for (int i = 0; i < tries && rc == -FI_EAGAIN; i++) {
        rc = eager_send(p, peer, &copy, NULL, 0, NULL, &done);
        if (rc == -FI_EAGAIN) gmx_tp_drive(p);
    }
    if (p->addr_is_str) gmx_guard_leave(p);
    return rc == 0 ? 0 : -1;
}
