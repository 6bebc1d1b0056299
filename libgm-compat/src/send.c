/* send.c - sends, puts, gets, drop/resume.  Every operation is a tagged send
 * on the per-(target, priority) ordered stream; sends the provider cannot
 * take right now wait in the target's backlog (FIFO, so order holds) and are
 * retried from the progress loop until GM_SEND_TIMEOUT_MS runs out. */
#include "gm_internal.h"

#include <string.h>
#include <sys/uio.h>

/* The provider is done with s's buffer.  A stream item completes when its
 * ack has come too. */
void gmx_send_local_done(struct gm_port *p, struct gmx_sreq *s)
{
    s->local_done = 1;
    if (!s->stream || s->acked)
        gmx_send_done(p, s, s->ack_status);
}

/* The target processed every stream item up to seq (acks come in order). */
void gmx_ack_arrived(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                     gm_status_t st)
{
    while (peer->unacked[prio]) {
        struct gmx_sreq *s = peer->unacked[prio];
        uint32_t d = (seq - s->seq) & GMX_SEQ_MASK;
        if (d & 0x200000u)
            break; /* s is after seq */
        peer->unacked[prio] = s->next;
        if (!peer->unacked[prio])
            peer->unacked_tail[prio] = NULL;
        peer->inflight--;
        s->acked = 1;
        if (s->seq == seq)
            s->ack_status = st;
        if (s->local_done)
            gmx_send_done(p, s, s->ack_status);
    }
}

static void unacked_push(struct gmx_peer *peer, struct gmx_sreq *s)
{
    unsigned prio = s->prio;
    s->next = NULL;
    if (peer->unacked_tail[prio])
        peer->unacked_tail[prio]->next = s;
    else
        peer->unacked[prio] = s;
    peer->unacked_tail[prio] = s;
    peer->inflight++;
}

/* A client send failed: report it and hold that stream (GM semantics). */
void gmx_stream_failed(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s,
                       gm_status_t st)
{
    if (s->kind == GMX_S_CLIENT && peer && s->prio < GM_NUM_PRIORITIES)
        peer->disabled[s->prio] = 1;
    gmx_send_done(p, s, st);
    if (peer && s->stream && s->prio < GM_NUM_PRIORITIES) {
        /* Items sent before it will not be acknowledged either. */
        while (peer->unacked[s->prio]) {
            struct gmx_sreq *u = peer->unacked[s->prio];
            peer->unacked[s->prio] = u->next;
            peer->inflight--;
            u->acked = 1;
            if (u->local_done)
                gmx_send_done(p, u, st);
        }
        peer->unacked_tail[s->prio] = NULL;
    }
}

/* Queues a finished request for its callback (run by gm_unknown). */
void gmx_send_done(struct gm_port *p, struct gmx_sreq *s, gm_status_t st)
{
    if (s->kind == GMX_S_INTERNAL) {
        if (st != GM_SUCCESS && s->get_rreq) {
            /* The GET request never got out: fail the get once its receive
             * is cancelled. */
            s->get_rreq->get->status = st;
            fi_cancel(&p->ep->fid, s->get_rreq);
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

/* Hands one request to the provider: 0, -FI_EAGAIN, or another error. */
static ssize_t send_now_raw(struct gm_port *p, struct gmx_sreq *s);
static ssize_t send_now(struct gm_port *p, struct gmx_sreq *s)
{
    struct gmx_peer *peer = s->peer;
    if (!s->stream)
        return send_now_raw(p, s);
    if (peer->inflight >= GMX_WINDOW)
        return -FI_EAGAIN;
    ssize_t rc = send_now_raw(p, s);
    if (rc == 0 && !s->acked)
        unacked_push(peer, s);
    return rc;
}

static ssize_t send_now_raw(struct gm_port *p, struct gmx_sreq *s)
{
    ssize_t rc;
    struct gmx_peer *peer = s->peer;
    if (s->use_hdr) {
        struct iovec iov[2] = {{&s->hdr, sizeof s->hdr}, {(void *)s->buf, s->len}};
        struct fi_msg_tagged msg = {.msg_iov = iov, .iov_count = s->len ? 2 : 1,
                                    .addr = peer->addr, .tag = s->tag, .context = s};
        rc = fi_tsendmsg(p->ep, &msg, FI_COMPLETION);
    } else if (s->len <= p->inject_size) {
        /* Small: the provider copies it now, so the request is done. */
        rc = fi_tinject(p->ep, s->buf, s->len, peer->addr, s->tag);
        if (rc == 0) {
            peer->reached = 1;
            gmx_send_local_done(p, s);
        }
        return rc;
    } else {
        rc = fi_tsend(p->ep, s->buf, s->len, NULL, peer->addr, s->tag, s);
    }
    return rc;
}

static void backlog_push(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s)
{
    s->next = NULL;
    if (!s->first_try_ns)
        s->first_try_ns = gmx_now_ns();
    if (peer->backlog_tail)
        peer->backlog_tail->next = s;
    else
        peer->backlog = s;
    peer->backlog_tail = s;
    if (!peer->in_backlog_list) {
        peer->in_backlog_list = 1;
        if (!p->backlogged)
            atomic_fetch_add(&gmx_backlogged_ports, 1);
        peer->next_backlogged = p->backlogged;
        p->backlogged = peer;
    }
}

/* Sends s now, or queues it behind earlier sends to the same target. */
static void submit(struct gm_port *p, struct gmx_sreq *s)
{
    struct gmx_peer *peer = s->peer;
    if (p->addr_is_str) {
        /* A port of this process closed since we last looked: check that
         * this target is still the one we resolved (one load otherwise). */
        unsigned epoch = atomic_load_explicit(&gmx_close_epoch, memory_order_relaxed);
        if (peer->close_epoch != epoch) {
            peer->close_epoch = epoch;
            if (peer->resolved && gmx_peer_closed(p, peer)) {
                fi_av_remove(p->av, &peer->addr, 1, 0);
                peer->resolved = 0;
                peer->shm_name[0] = '\0';
            }
        }
    }
    if (!peer->backlog && !peer->disabled[s->prio] &&
        (peer->resolved || gmx_peer_resolve(p, peer))) {
        ssize_t rc = send_now(p, s);
        /* Let the provider make room (or connect), then try a few times
         * more: a first send to a target often needs a setup round. */
        for (int i = 0; rc == -FI_EAGAIN && i < (peer->reached ? 1 : 16); i++) {
            gmx_progress(p);
            if (peer->backlog)
                break;
            rc = send_now(p, s);
        }
        if (rc == 0)
            return;
        if (rc != -FI_EAGAIN) {
            gmx_log("send to node %u port %u: %s\n", peer->node, peer->port,
                    fi_strerror((int)-rc));
            gmx_stream_failed(p, peer, s, gmx_status_from_fi((int)rc, peer));
            return;
        }
    }
    backlog_push(p, peer, s);
}

/* Why the head of a stuck backlog should fail now, or GM_SUCCESS to wait. */
static gm_status_t stuck_verdict(struct gm_port *p, struct gmx_peer *peer,
                                 const struct gmx_sreq *s, uint64_t now)
{
    uint64_t waited = now - s->first_try_ns;
    if (p->addr_is_str && now - peer->last_check_ns >= 10000000u) {
        /* shm: the target's lock file says whether it is open, and where. */
        peer->last_check_ns = now;
        if (gmx_peer_closed(p, peer)) {
            if (waited >= 50000000u)
                return GM_SEND_TARGET_PORT_CLOSED;
        } else {
            gmx_peer_resolve(p, peer);
        }
    }
    uint64_t limit = (uint64_t)gmx_cfg.send_timeout_ms * 1000000u;
    /* A target that took sends before may just be slow to poll: give it a
     * much longer grace than one never reached. */
    if (peer->reached)
        limit *= 60;
    return waited >= limit ? gmx_status_from_fi(FI_EAGAIN, peer) : GM_SUCCESS;
}

void gmx_backlog_progress(struct gm_port *p)
{
    if (!p->backlogged)
        return;
    struct gmx_peer **link = &p->backlogged;
    uint64_t now = 0;
    while (*link) {
        struct gmx_peer *peer = *link;
        while (peer->backlog) {
            struct gmx_sreq *s = peer->backlog;
            if (peer->disabled[s->prio])
                break; /* held until gm_drop_sends / gm_resume_sending */
            /* Unlink first: a successful inject completes s at once, which
             * reuses its link. */
            struct gmx_sreq *rest = s->next;
            ssize_t rc = peer->resolved ? send_now(p, s) : -FI_EAGAIN;
            if (rc == -FI_EAGAIN) {
                if (!now)
                    now = gmx_now_ns();
                gm_status_t st = stuck_verdict(p, peer, s, now);
                if (st == GM_SUCCESS)
                    break;
                gmx_log("node %u port %u unreachable for %u ms: %s\n", peer->node,
                        peer->port, (unsigned)((now - s->first_try_ns) / 1000000u),
                        gm_strerror(st));
                /* Fail it; GM then holds later sends to this stream until the
                 * client drops them or resumes. */
                peer->backlog = rest;
                gmx_stream_failed(p, peer, s, st);
                continue;
            }
            peer->backlog = rest;
            if (rc != 0)
                gmx_stream_failed(p, peer, s, gmx_status_from_fi((int)rc, peer));
        }
        if (!peer->backlog) {
            peer->backlog_tail = NULL;
            peer->in_backlog_list = 0;
            *link = peer->next_backlogged;
        } else {
            link = &peer->next_backlogged;
        }
    }
    if (!p->backlogged)
        atomic_fetch_sub(&gmx_backlogged_ports, 1);
}

/* Sends an internal message (no callback); 0 or -1 when out of memory. */
int gmx_send_internal(struct gm_port *p, struct gmx_peer *peer, const void *buf,
                      size_t len, uint64_t tag)
{
    struct gmx_sreq *s = gmx_sreq_get(p);
    if (!s)
        return -1;
    s->kind = GMX_S_INTERNAL;
    s->peer = peer;
    s->buf = buf;
    s->len = len;
    s->tag = tag;
    submit(p, s);
    return 0;
}

/* A client request; on bad arguments or an unknown target it completes at
 * once (through gm_unknown) with the status, as GM reports send errors. */
static struct gmx_sreq *client_req(struct gm_port *p, unsigned prio, unsigned node,
                                   unsigned port, gm_send_completion_callback_t cb,
                                   void *ctx, int args_ok)
{
    struct gmx_sreq *s = gmx_sreq_get(p);
    if (!s) {
        fprintf(stderr, "libgm: out of memory for a send request; send lost\n");
        return NULL;
    }
    s->kind = GMX_S_CLIENT;
    s->cb = cb;
    s->ctx = ctx;
    s->prio = prio;
    if (!args_ok || prio >= GM_NUM_PRIORITIES || port >= GMX_NUM_PORTS) {
        gmx_send_done(p, s, GM_INVALID_PARAMETER);
        return NULL;
    }
    s->peer = gmx_peer_get(p, node, port);
    /* shm targets not open yet resolve later (see stuck_verdict). */
    if (!s->peer || (!s->peer->resolved && !p->addr_is_str)) {
        gmx_send_done(p, s, GM_SEND_TARGET_NODE_UNREACHABLE);
        return NULL;
    }
    return s;
}

static void send_locked(struct gm_port *p, void *message, unsigned int size,
                                      gm_size_t len, unsigned int priority,
                                      unsigned int target_node_id,
                                      unsigned int target_port_id,
                                      gm_send_completion_callback_t callback,
                                      void *context)
{
    if (!p)
        return;
    int ok = size >= GMX_MIN_SIZE && size <= GMX_MAX_SIZE &&
             len <= gm_max_length_for_size(size) && (message || len == 0);
    struct gmx_sreq *s = client_req(p, priority, target_node_id, target_port_id,
                                    callback, context, ok);
    if (!s)
        return;
    struct gmx_peer *peer = s->peer;
    s->buf = message;
    s->len = len;
    s->stream = 1;
    s->seq = peer->send_seq[priority]++ & GMX_SEQ_MASK;
    s->tag = gmx_tag(GMX_KIND_MSG, size, priority, s->seq, p->self_bits);
    submit(p, s);
}

GMX_EXPORT void gm_send_to_peer_with_callback(struct gm_port *p, void *message,
                                              unsigned int size, gm_size_t len,
                                              unsigned int priority,
                                              unsigned int target_node_id,
                                              gm_send_completion_callback_t callback,
                                              void *context)
{
    if (p)
        gm_send_with_callback(p, message, size, len, priority, target_node_id, p->port_id,
                              callback, context);
}

GMX_EXPORT void gm_send(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                        unsigned int priority, unsigned int target_node_id,
                        unsigned int target_port_id)
{
    gm_send_with_callback(p, message, size, len, priority, target_node_id, target_port_id,
                          NULL, NULL);
}

GMX_EXPORT void gm_send_to_peer(struct gm_port *p, void *message, unsigned int size,
                                gm_size_t len, unsigned int priority,
                                unsigned int target_node_id)
{
    gm_send_to_peer_with_callback(p, message, size, len, priority, target_node_id, NULL,
                                  NULL);
}

GMX_EXPORT void gm_datagram_send(struct gm_port *p, void *message, unsigned int size,
                                 gm_size_t len, unsigned int priority,
                                 unsigned int target_node_id, unsigned int target_port_id,
                                 gm_send_completion_callback_t callback, void *context)
{
    gm_send_with_callback(p, message, size, len, priority, target_node_id, target_port_id,
                          callback, context);
}

static void put_locked(struct gm_port *p, void *local_buffer, gm_remote_ptr_t remote_buffer,
                       gm_size_t len, enum gm_priority priority,
                       unsigned int target_node_id, unsigned int target_port_id,
                       gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    int ok = (local_buffer || len == 0) && remote_buffer + len >= remote_buffer;
    struct gmx_sreq *s = client_req(p, (unsigned)priority, target_node_id, target_port_id,
                                    callback, context, ok);
    if (!s)
        return;
    struct gmx_peer *peer = s->peer;
    unsigned prio = (unsigned)priority;
    uint32_t ctrl_seq = peer->send_seq[prio]++ & GMX_SEQ_MASK;
    uint64_t ctrl_tag = gmx_tag(GMX_KIND_CTRL, 0, prio, ctrl_seq, p->self_bits);
    if (len <= GMX_PUT_INLINE_MAX) {
        s->use_hdr = 1;
        s->hdr = (struct gmx_ctrl){.op = GMX_CTRL_PUT_INLINE, .addr = remote_buffer,
                                   .len = len};
        s->buf = local_buffer;
        s->len = len;
        s->tag = ctrl_tag;
        s->stream = 1;
        s->seq = ctrl_seq;
        submit(p, s);
        return;
    }
    /* Large: a header on the ordered stream, then the data, which the target
     * receives straight into the target address. */
    struct gmx_sreq *h = gmx_sreq_get(p);
    if (!h) {
        gmx_send_done(p, s, GM_OUT_OF_MEMORY);
        return;
    }
    uint32_t xfer = p->next_xfer++ & GMX_SEQ_MASK;
    h->kind = GMX_S_INTERNAL;
    h->peer = peer;
    h->use_hdr = 1;
    h->hdr = (struct gmx_ctrl){.op = GMX_CTRL_PUT_RNDV, .xfer = xfer, .addr = remote_buffer,
                               .len = len};
    h->tag = ctrl_tag;
    h->stream = 1;
    h->seq = ctrl_seq;
    h->prio = prio;
    submit(p, h);
    s->buf = local_buffer;
    s->len = len;
    s->tag = gmx_tag(GMX_KIND_PUTDATA, 0, prio, xfer, p->self_bits);
    submit(p, s);
}

GMX_EXPORT void gm_directed_send_with_callback(struct gm_port *p, void *source_buffer,
                                               gm_remote_ptr_t target_buffer, gm_size_t len,
                                               enum gm_priority priority,
                                               unsigned int target_node_id,
                                               unsigned int target_port_id,
                                               gm_send_completion_callback_t callback,
                                               void *context)
{
    gm_put(p, source_buffer, target_buffer, len, priority, target_node_id, target_port_id,
           callback, context);
}

GMX_EXPORT void gm_directed_send(struct gm_port *p, void *source_buffer,
                                 gm_remote_ptr_t target_buffer, gm_size_t len,
                                 enum gm_priority priority, unsigned int target_node_id,
                                 unsigned int target_port_id)
{
    gm_put(p, source_buffer, target_buffer, len, priority, target_node_id, target_port_id,
           NULL, NULL);
}

static void get_locked(struct gm_port *p, gm_remote_ptr_t remote_buffer, void *local_buffer,
                       gm_size_t len, enum gm_priority priority,
                       unsigned int target_node_id, unsigned int target_port_id,
                       gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    int ok = (local_buffer || len == 0) && remote_buffer + len >= remote_buffer;
    struct gmx_sreq *s = client_req(p, (unsigned)priority, target_node_id, target_port_id,
                                    callback, context, ok);
    if (!s)
        return;
    struct gmx_peer *peer = s->peer;
    unsigned prio = (unsigned)priority;
    struct gmx_rreq *r = gmx_rreq_get(p);
    struct gmx_sreq *h = gmx_sreq_get(p);
    if (!r || !h) {
        if (r)
            gmx_rreq_put(p, r);
        if (h)
            gmx_sreq_put(p, h);
        gmx_send_done(p, s, GM_OUT_OF_MEMORY);
        return;
    }
    uint32_t xfer = p->next_xfer++ & GMX_SEQ_MASK;
    /* The answer lands directly in local_buffer; post before asking. */
    r->kind = GMX_R_GETDATA;
    r->get = s;
    r->buf = local_buffer;
    uint64_t tag = gmx_tag(GMX_KIND_GETDATA, 0, 0, xfer,
                           gmx_sender_bits(peer->node, peer->port));
    if (gmx_post_recv(p, r, local_buffer, len, tag, GMX_TAG_ERR |
                      (1ULL << GMX_TAG_PRIO_SHIFT)) != 0) {
        gmx_rreq_put(p, r);
        gmx_sreq_put(p, h);
        gmx_send_done(p, s, GM_FAILURE);
        return;
    }
    h->kind = GMX_S_INTERNAL;
    h->peer = peer;
    h->use_hdr = 1;
    h->get_rreq = r;
    h->hdr = (struct gmx_ctrl){.op = GMX_CTRL_GET_REQ, .xfer = xfer, .addr = remote_buffer,
                               .len = len};
    h->stream = 1;
    h->prio = prio;
    h->seq = peer->send_seq[prio]++ & GMX_SEQ_MASK;
    h->tag = gmx_tag(GMX_KIND_CTRL, 0, prio, h->seq, p->self_bits);
    submit(p, h);
}

static void drop_locked(struct gm_port *p, unsigned int priority,
                              unsigned int target_node_id, unsigned int target_port_id,
                              gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    struct gmx_peer *peer = target_port_id < GMX_NUM_PORTS && target_node_id <= gmx_cfg.max_node_id &&
                                    p->peers[target_node_id]
                                ? p->peers[target_node_id][target_port_id]
                                : NULL;
    if (peer) {
        struct gmx_sreq **link = &peer->backlog;
        peer->backlog_tail = NULL;
        while (*link) {
            struct gmx_sreq *s = *link;
            if (s->prio == priority && s->kind == GMX_S_CLIENT) {
                *link = s->next;
                gmx_send_done(p, s, GM_SEND_DROPPED);
            } else {
                peer->backlog_tail = s;
                link = &s->next;
            }
        }
        if (priority < GM_NUM_PRIORITIES)
            peer->disabled[priority] = 0;
    }
    struct gmx_sreq *d = gmx_sreq_get(p);
    if (d) {
        d->kind = GMX_S_CLIENT;
        d->cb = callback;
        d->ctx = context;
        gmx_send_done(p, d, GM_SUCCESS);
    }
}

static void resume_locked(struct gm_port *p, unsigned int priority,
                                  unsigned int target_node_id, unsigned int target_port_id,
                                  gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    struct gmx_peer *peer = target_port_id < GMX_NUM_PORTS &&
                                    target_node_id <= gmx_cfg.max_node_id &&
                                    p->peers[target_node_id]
                                ? p->peers[target_node_id][target_port_id]
                                : NULL;
    if (peer && priority < GM_NUM_PRIORITIES)
        peer->disabled[priority] = 0;
    struct gmx_sreq *d = gmx_sreq_get(p);
    if (d) {
        d->kind = GMX_S_CLIENT;
        d->cb = callback;
        d->ctx = context;
        gmx_send_done(p, d, GM_SUCCESS);
    }
}

/* ---- exported entry points: each holds the port lock (see gm_internal.h) */

GMX_EXPORT void gm_send_with_callback(struct gm_port *p, void *message, unsigned int size,
                                      gm_size_t len, unsigned int priority,
                                      unsigned int target_node_id,
                                      unsigned int target_port_id,
                                      gm_send_completion_callback_t callback,
                                      void *context)
{
    if (!p)
        return;
    gmx_port_lock(p);
    send_locked(p, message, size, len, priority, target_node_id, target_port_id, callback,
                context);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_put(struct gm_port *p, void *local_buffer, gm_remote_ptr_t remote_buffer,
                       gm_size_t len, enum gm_priority priority,
                       unsigned int target_node_id, unsigned int target_port_id,
                       gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    gmx_port_lock(p);
    put_locked(p, local_buffer, remote_buffer, len, priority, target_node_id, target_port_id,
               callback, context);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_get(struct gm_port *p, gm_remote_ptr_t remote_buffer, void *local_buffer,
                       gm_size_t len, enum gm_priority priority,
                       unsigned int target_node_id, unsigned int target_port_id,
                       gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    gmx_port_lock(p);
    get_locked(p, remote_buffer, local_buffer, len, priority, target_node_id, target_port_id,
               callback, context);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_drop_sends(struct gm_port *p, unsigned int priority,
                              unsigned int target_node_id, unsigned int target_port_id,
                              gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    gmx_port_lock(p);
    drop_locked(p, priority, target_node_id, target_port_id, callback, context);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_resume_sending(struct gm_port *p, unsigned int priority,
                                  unsigned int target_node_id, unsigned int target_port_id,
                                  gm_send_completion_callback_t callback, void *context)
{
    if (!p)
        return;
    gmx_port_lock(p);
    resume_locked(p, priority, target_node_id, target_port_id, callback, context);
    gmx_port_unlock(p);
}
