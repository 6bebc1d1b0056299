/* calls.c - the client's send-side calls: gm_send*, gm_put /
 * gm_directed_send*, gm_get, gm_drop_sends, gm_resume_sending, and the
 * remote registrations that let puts and gets use the provider's RMA. */
#include "gm_internal.h"

#include <string.h>

/* ---- remote registrations (RMA) ------------------------------------------- */

void gmx_key_learn(struct gmx_peer *peer, const struct gmx_hdr *h)
{
    if (h->addr + h->len < h->addr) return;
    for (unsigned i = 0; i < peer->nkeys; i++) {
        if (peer->keys[i].base == h->addr) {
            peer->keys[i] = (struct gmx_rkey){h->addr, h->len, h->key};
            return;
        }
    }
    unsigned i = peer->nkeys < GMX_KEY_CACHE ? peer->nkeys++ : peer->key_next++ % GMX_KEY_CACHE;
    peer->keys[i] = (struct gmx_rkey){h->addr, h->len, h->key};
}

void gmx_key_forget(struct gmx_peer *peer, uint64_t base)
{
    for (unsigned i = 0; i < peer->nkeys; i++) {
        if (peer->keys[i].base == base) {
            peer->keys[i] = peer->keys[--peer->nkeys];
            return;
        }
    }
}

static const struct gmx_rkey *key_find(struct gmx_peer *peer, uint64_t addr, uint64_t len)
{
    for (unsigned i = 0; i < peer->nkeys; i++) {
        const struct gmx_rkey *k = &peer->keys[i];
        if (addr >= k->base && addr + len <= k->base + k->len) return k;
    }
    return NULL;
}

/* Turns s into an fi_write/fi_read if the target's registration is known (or
 * its key was given: `key`, 0 = none); 1 if it did. */
static int try_rma(struct gm_port *p, struct gmx_sreq *s, int op, uint64_t raddr, uint64_t len,
                   gm_u64_t key)
{
    if (!p->rma || len == 0) return 0;
    if (key && p->mr_virt) {
        s->rkey = key;
    } else {
        /* Take in any news of deregistrations first. */
        gmx_progress(p);
        const struct gmx_rkey *k = key_find(s->peer, raddr, len);
        if (!k) return 0;
        s->rkey = k->key;
        if (!p->mr_virt) raddr -= k->base;
    }
    s->rma = op;
    s->raddr = raddr;
    s->local_pending = 1;
    return 1;
}

/* ---- client calls ---------------------------------------------------------- */

/* A client request; on bad arguments or an unknown target it completes at
 * once (through gm_unknown) with the status, as GM reports send errors. */
static struct gmx_sreq *client_req(struct gm_port *p, unsigned prio, unsigned node, unsigned port,
                                   gm_send_completion_callback_t cb, void *ctx, int args_ok)
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
    /* A target first met by its message, before its node had an address (given at run time
     * with gm_node_set_address), resolves once it has one. shm targets not open yet resolve
     * later (see stuck_verdict). */
    if (s->peer && !s->peer->resolved && !p->addr_is_str) gmx_peer_resolve(p, s->peer);
    if (!s->peer || (!s->peer->resolved && !p->addr_is_str)) {
        gmx_send_done(p, s, GM_SEND_TARGET_NODE_UNREACHABLE);
        return NULL;
    }
    return s;
}

/* Makes s a stream item of kind (small) or kind_rndv with its payload as
 * DATA; NULL-safe on memory failure (completes s). */
static int stream_item(struct gm_port *p, struct gmx_sreq *s, unsigned kind, unsigned kind_rndv,
                       const void *buf, size_t len)
{
    struct gmx_peer *peer = s->peer;
    unsigned prio = s->prio;
    s->eager = 1;
    s->stream = 1;
    s->local_pending = 1;
    s->seq = peer->send_seq[prio]++ & GMX_SEQ_MASK;
    s->hdr.prio = (uint8_t)prio;
    s->hdr.seq = s->seq;
    s->hdr.node = (uint16_t)p->node_id;
    s->hdr.port = (uint8_t)p->port_id;
    s->hdr.len = len;
    /* A message that fills an inject goes in the short form if its target knows us by now
     * (else, as the sender finds at send time, with its full header, not injected). */
    if (len <= p->eager_max ||
        (kind == GMX_K_MSG && p->short_form && len <= p->inject_size && peer->knows_us)) {
        s->hdr.kind = (uint8_t)kind;
        s->buf = buf;
        s->len = len;
        return 0;
    }
    struct gmx_sreq *d = gmx_sreq_get(p);
    if (!d) {
        peer->send_seq[prio]--; /* never used */
        gmx_send_done(p, s, GM_OUT_OF_MEMORY);
        return -1;
    }
    uint32_t xfer = p->next_xfer++ & GMX_SEQ_MASK;
    s->hdr.kind = (uint8_t)kind_rndv;
    s->hdr.xfer = xfer;
    s->buf = NULL;
    s->len = 0;
    d->kind = GMX_S_INTERNAL;
    d->peer = peer;
    d->parent = s;
    d->prio = prio;
    d->buf = buf;
    d->len = len;
    d->tag = gmx_tag(GMX_TK_DATA, xfer, p->self_bits);
    s->child = d;
    s->local_pending = 2;
    return 0;
}

static void send_locked(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                        unsigned int priority, unsigned int target_node_id,
                        unsigned int target_port_id, gm_send_completion_callback_t callback,
                        void *context)
{
    int ok = size >= GMX_MIN_SIZE && size <= GMX_MAX_SIZE && len <= gm_max_length_for_size(size) &&
             (message || len == 0);
    struct gmx_sreq *s =
        client_req(p, priority, target_node_id, target_port_id, callback, context, ok);
    if (!s) return;
    s->hdr.size = (uint8_t)size;
    if (stream_item(p, s, GMX_K_MSG, GMX_K_MSG_RNDV, message, len) == 0) gmx_submit(p, s);
}

/* gm_put, with the target's key when it was given out of band (`key`, 0 = none). */
static void put_locked(struct gm_port *p, void *local_buffer, gm_remote_ptr_t remote_buffer,
                       gm_u64_t key, gm_size_t len, enum gm_priority priority,
                       unsigned int target_node_id, unsigned int target_port_id,
                       gm_send_completion_callback_t callback, void *context)
{
    int ok = (local_buffer || len == 0) && remote_buffer + len >= remote_buffer;
    struct gmx_sreq *s =
        client_req(p, (unsigned)priority, target_node_id, target_port_id, callback, context, ok);
    if (!s) return;
    if (try_rma(p, s, 1, remote_buffer, len, key)) {
        s->buf = local_buffer;
        s->len = len;
        gmx_submit(p, s);
        return;
    }
    /* The target checks and copies (or receives the DATA straight into the
     * target address), under the key if one was given; it tells us its
     * registration for next time. */
    s->hdr.addr = remote_buffer;
    s->hdr.key = key;
    if (stream_item(p, s, GMX_K_PUT, GMX_K_PUT_RNDV, local_buffer, len) == 0) gmx_submit(p, s);
}

GMX_EXPORT gm_status_t gm_compat_export(struct gm_port *p, void *addr, gm_size_t len, gm_u64_t *key)
{
    if (!p || !addr || !len || !key) return GM_INVALID_PARAMETER;
    gmx_port_lock(p);
    gm_status_t st = GM_FAILURE;
    struct gmx_region *g = p->rma && p->mr_virt ? gmx_region_find(p, (uintptr_t)addr, len) : NULL;
    if (g && gmx_region_export(p, g) == 0 && g->key != 0) {
        *key = g->key;
        st = GM_SUCCESS;
    }
    gmx_port_unlock(p);
    return st;
}

GMX_EXPORT void gm_compat_put_keyed(struct gm_port *p, void *local_buffer,
                                    gm_remote_ptr_t remote_buffer, gm_u64_t key, gm_size_t len,
                                    enum gm_priority priority, unsigned int target_node_id,
                                    unsigned int target_port_id,
                                    gm_send_completion_callback_t callback, void *context)
{
    if (!p) return;
    gmx_port_lock(p);
    put_locked(p, local_buffer, remote_buffer, key, len, priority, target_node_id, target_port_id,
               callback, context);
    gmx_acks_maybe(p); /* acks due that this send did not carry */
    gmx_port_unlock(p);
}

static void get_locked(struct gm_port *p, gm_remote_ptr_t remote_buffer, gm_u64_t key,
                       void *local_buffer, gm_size_t len, enum gm_priority priority,
                       unsigned int target_node_id, unsigned int target_port_id,
                       gm_send_completion_callback_t callback, void *context)
{
    int ok = (local_buffer || len == 0) && remote_buffer + len >= remote_buffer;
    struct gmx_sreq *s =
        client_req(p, (unsigned)priority, target_node_id, target_port_id, callback, context, ok);
    if (!s) return;
    struct gmx_peer *peer = s->peer;
    if (try_rma(p, s, 2, remote_buffer, len, key)) {
        s->buf = local_buffer;
        s->len = len;
        gmx_submit(p, s);
        return;
    }
    struct gmx_rreq *r = gmx_rreq_get(p);
    struct gmx_sreq *h = gmx_sreq_get(p);
    if (!r || !h) {
        if (r) gmx_rreq_put(p, r);
        if (h) gmx_sreq_put(p, h);
        gmx_send_done(p, s, GM_OUT_OF_MEMORY);
        return;
    }
    uint32_t xfer = p->next_xfer++ & GMX_SEQ_MASK;
    /* The answer lands directly in local_buffer.  Posted before asking, so
     * the wildcard on the error bit is safe. */
    r->kind = GMX_R_GETDATA;
    r->get = s;
    if (gmx_post_recv(p, r, local_buffer, len, gmx_tag(GMX_TK_GETDATA, xfer, peer->bits),
                      GMX_TAG_ERR) != 0) {
        gmx_rreq_put(p, r);
        gmx_sreq_put(p, h);
        gmx_send_done(p, s, GM_FAILURE);
        return;
    }
    h->kind = GMX_S_INTERNAL;
    h->peer = peer;
    h->prio = (unsigned)priority;
    h->get_rreq = r;
    h->hdr.addr = remote_buffer;
    h->hdr.xfer = xfer;
    stream_item(p, h, GMX_K_GET, GMX_K_GET, NULL, 0);
    h->hdr.len = len;
    gmx_submit(p, h);
}

static struct gmx_peer *known_peer(struct gm_port *p, unsigned node, unsigned port)
{
    if (port >= GMX_NUM_PORTS || node > gmx_cfg.max_node_id || !p->peers[node]) return NULL;
    return p->peers[node][port];
}

/* The drop/resume request itself: a token, its callback always GM_SUCCESS. */
static void token_done(struct gm_port *p, gm_send_completion_callback_t cb, void *ctx)
{
    struct gmx_sreq *d = gmx_sreq_get(p);
    if (d) {
        d->kind = GMX_S_CLIENT;
        d->cb = cb;
        d->ctx = ctx;
        gmx_send_done(p, d, GM_SUCCESS);
    }
}

static void drop_locked(struct gm_port *p, unsigned int priority, unsigned int target_node_id,
                        unsigned int target_port_id, gm_send_completion_callback_t callback,
                        void *context)
{
    struct gmx_peer *peer = known_peer(p, target_node_id, target_port_id);
    if (peer) {
        /* Clients drop sends to a peer they were told died: if it did, the watchdog may free
         * a live peer's lock it died holding (unstick.c). */
        gmx_peer_closed(p, peer);
        struct gmx_sreq **link = &peer->backlog;
        peer->backlog_tail = NULL;
        while (*link) {
            struct gmx_sreq *s = *link;
            if (s->prio == priority && s->kind == GMX_S_CLIENT) {
                *link = s->next;
                if (s->stream) {
                    /* Its sequence number was never used: the target
                     * expects the next item to take it. */
                    peer->send_seq[priority]--;
                    for (struct gmx_sreq *t = s->next; t; t = t->next)
                        if (t->stream && t->prio == priority)
                            t->hdr.seq = t->seq = (t->seq - 1) & GMX_SEQ_MASK;
                }
                if (s->child) {
                    gmx_sreq_put(p, s->child);
                    s->child = NULL;
                }
                gmx_send_done(p, s, GM_SEND_DROPPED);
            } else {
                peer->backlog_tail = s;
                link = &s->next;
            }
        }
        if (priority < GM_NUM_PRIORITIES) peer->disabled[priority] = 0;
    }
    token_done(p, callback, context);
}

static void resume_locked(struct gm_port *p, unsigned int priority, unsigned int target_node_id,
                          unsigned int target_port_id, gm_send_completion_callback_t callback,
                          void *context)
{
    struct gmx_peer *peer = known_peer(p, target_node_id, target_port_id);
    if (peer && priority < GM_NUM_PRIORITIES) peer->disabled[priority] = 0;
    token_done(p, callback, context);
}

/* ---- exported entry points: each holds the port lock (see gm_internal.h) */

GMX_EXPORT void gm_send_with_callback(struct gm_port *p, void *message, unsigned int size,
                                      gm_size_t len, unsigned int priority,
                                      unsigned int target_node_id, unsigned int target_port_id,
                                      gm_send_completion_callback_t callback, void *context)
{
    if (!p) return;
    gmx_port_lock(p);
    send_locked(p, message, size, len, priority, target_node_id, target_port_id, callback, context);
    gmx_acks_maybe(p); /* acks due that this send did not carry */
    gmx_port_unlock(p);
}

GMX_EXPORT gm_status_t gm_compat_sendv_now(struct gm_port *p, const struct iovec *iov,
                                           unsigned int iovcnt, unsigned int size,
                                           unsigned int priority, unsigned int target_node_id,
                                           unsigned int target_port_id)
{
    if (!p || (!iov && iovcnt) || priority >= GM_NUM_PRIORITIES ||
        target_port_id >= GMX_NUM_PORTS || size < GMX_MIN_SIZE || size > GMX_MAX_SIZE)
        return GM_INVALID_PARAMETER;
    size_t len = 0;
    for (unsigned i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len && !iov[i].iov_base) return GM_INVALID_PARAMETER;
        len += iov[i].iov_len;
        if (len < iov[i].iov_len) return GM_INVALID_PARAMETER;
    }
    if (len > gm_max_length_for_size(size)) return GM_INVALID_PARAMETER;
    gmx_port_lock(p);
    struct gmx_peer *peer = gmx_peer_get(p, target_node_id, target_port_id);
    ssize_t rc = peer ? gmx_send_unacked(p, peer, priority, size, iov, iovcnt, len) : -FI_EAGAIN;
    gmx_acks_maybe(p); /* acks due that this send did not carry */
    gmx_port_unlock(p);
    return rc == 0 ? GM_SUCCESS : GM_TRY_AGAIN;
}

GMX_EXPORT void gm_send_to_peer_with_callback(struct gm_port *p, void *message, unsigned int size,
                                              gm_size_t len, unsigned int priority,
                                              unsigned int target_node_id,
                                              gm_send_completion_callback_t callback, void *context)
{
    if (p)
        gm_send_with_callback(p, message, size, len, priority, target_node_id, p->port_id, callback,
                              context);
}

GMX_EXPORT void gm_send(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                        unsigned int priority, unsigned int target_node_id,
                        unsigned int target_port_id)
{
    gm_send_with_callback(p, message, size, len, priority, target_node_id, target_port_id, NULL,
                          NULL);
}

GMX_EXPORT void gm_send_to_peer(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                                unsigned int priority, unsigned int target_node_id)
{
    gm_send_to_peer_with_callback(p, message, size, len, priority, target_node_id, NULL, NULL);
}

GMX_EXPORT void gm_datagram_send(struct gm_port *p, void *message, unsigned int size, gm_size_t len,
                                 unsigned int priority, unsigned int target_node_id,
                                 unsigned int target_port_id,
                                 gm_send_completion_callback_t callback, void *context)
{
    gm_send_with_callback(p, message, size, len, priority, target_node_id, target_port_id, callback,
                          context);
}

GMX_EXPORT void gm_put(struct gm_port *p, void *local_buffer, gm_remote_ptr_t remote_buffer,
                       gm_size_t len, enum gm_priority priority, unsigned int target_node_id,
                       unsigned int target_port_id, gm_send_completion_callback_t callback,
                       void *context)
{
    gm_compat_put_keyed(p, local_buffer, remote_buffer, 0, len, priority, target_node_id,
                        target_port_id, callback, context);
}

GMX_EXPORT void gm_directed_send_with_callback(
    struct gm_port *p, void *source_buffer, gm_remote_ptr_t target_buffer, gm_size_t len,
    enum gm_priority priority, unsigned int target_node_id, unsigned int target_port_id,
    gm_send_completion_callback_t callback, void *context)
{
    gm_put(p, source_buffer, target_buffer, len, priority, target_node_id, target_port_id, callback,
           context);
}

GMX_EXPORT void gm_directed_send(struct gm_port *p, void *source_buffer,
                                 gm_remote_ptr_t target_buffer, gm_size_t len,
                                 enum gm_priority priority, unsigned int target_node_id,
                                 unsigned int target_port_id)
{
    gm_put(p, source_buffer, target_buffer, len, priority, target_node_id, target_port_id, NULL,
           NULL);
}

GMX_EXPORT void gm_compat_get_keyed(struct gm_port *p, gm_remote_ptr_t remote_buffer, gm_u64_t key,
                                    void *local_buffer, gm_size_t len, enum gm_priority priority,
                                    unsigned int target_node_id, unsigned int target_port_id,
                                    gm_send_completion_callback_t callback, void *context)
{
    if (!p) return;
    gmx_port_lock(p);
    get_locked(p, remote_buffer, key, local_buffer, len, priority, target_node_id, target_port_id,
               callback, context);
    gmx_acks_maybe(p); /* acks due that this send did not carry */
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_get(struct gm_port *p, gm_remote_ptr_t remote_buffer, void *local_buffer,
                       gm_size_t len, enum gm_priority priority, unsigned int target_node_id,
                       unsigned int target_port_id, gm_send_completion_callback_t callback,
                       void *context)
{
    gm_compat_get_keyed(p, remote_buffer, 0, local_buffer, len, priority, target_node_id,
                        target_port_id, callback, context);
}

GMX_EXPORT void gm_drop_sends(struct gm_port *p, unsigned int priority, unsigned int target_node_id,
                              unsigned int target_port_id, gm_send_completion_callback_t callback,
                              void *context)
{
    if (!p) return;
    gmx_port_lock(p);
    drop_locked(p, priority, target_node_id, target_port_id, callback, context);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_resume_sending(struct gm_port *p, unsigned int priority,
                                  unsigned int target_node_id, unsigned int target_port_id,
                                  gm_send_completion_callback_t callback, void *context)
{
    if (!p) return;
    gmx_port_lock(p);
    resume_locked(p, priority, target_node_id, target_port_id, callback, context);
    gmx_port_unlock(p);
}
