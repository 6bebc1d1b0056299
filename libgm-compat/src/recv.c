/* recv.c - receive buffers, the completion loop, in-order delivery per
 * (sender, priority), put/get service at the target, and the event loop
 * calls (gm_receive, gm_blocking_receive*, gm_unknown). */
#include "gm_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GMX_CQ_BATCH 16
#define GMX_SPIN_NS 1000000u  /* blocking receive spins this long */
#define GMX_NAP_NS 10000000u  /* one _GM_SLEEP_EVENT sleeps at most this long */

/* ---- posting receives ---------------------------------------------------- */

static void post_backlog_push(struct gm_port *p, struct gmx_rreq *r)
{
    r->next = NULL;
    if (p->post_backlog_tail)
        p->post_backlog_tail->next = r;
    else
        p->post_backlog = r;
    p->post_backlog_tail = r;
}

/* Posts a tagged receive; if the provider has no room now it is queued and
 * retried from the progress loop, so a provided buffer is never lost. */
int gmx_post_recv(struct gm_port *p, struct gmx_rreq *r, void *buf, size_t len,
                  uint64_t tag, uint64_t ignore)
{
    r->buf = buf;
    r->post_len = len;
    r->post_tag = tag;
    r->post_ignore = ignore;
    if (p->post_backlog) {
        post_backlog_push(p, r);
        return 0;
    }
    ssize_t rc = fi_trecv(p->ep, buf, len, NULL, FI_ADDR_UNSPEC, tag, ignore, r);
    if (rc == 0) {
        r->posted = 1;
        return 0;
    }
    if (rc == -FI_EAGAIN) {
        post_backlog_push(p, r);
        return 0;
    }
    fprintf(stderr, "libgm: fi_trecv(%zu bytes): %s\n", len, fi_strerror((int)-rc));
    return -1;
}

static void post_backlog_progress(struct gm_port *p)
{
    while (p->post_backlog) {
        struct gmx_rreq *r = p->post_backlog;
        ssize_t rc = fi_trecv(p->ep, r->buf, r->post_len, NULL, FI_ADDR_UNSPEC, r->post_tag,
                              r->post_ignore, r);
        if (rc == -FI_EAGAIN)
            return;
        p->post_backlog = r->next;
        if (!p->post_backlog)
            p->post_backlog_tail = NULL;
        r->posted = rc == 0;
        if (rc != 0)
            fprintf(stderr, "libgm: fi_trecv: %s; buffer %p dropped\n",
                    fi_strerror((int)-rc), r->buf);
    }
}

int gmx_post_ctrl(struct gm_port *p, struct gmx_rreq *r)
{
    return gmx_post_recv(p, r, r->buf, GMX_CTRL_BUF_LEN,
                         (uint64_t)GMX_KIND_CTRL << GMX_TAG_KIND_SHIFT, ~GMX_TAG_KIND_MASK);
}

static void provide_locked(struct gm_port *p, void *ptr, unsigned int size,
                           unsigned int priority, unsigned int tag)
{
    if (!p)
        return;
    if (!ptr || size < GMX_MIN_SIZE || size > GMX_MAX_SIZE ||
        priority >= GM_NUM_PRIORITIES) {
        fprintf(stderr, "libgm: gm_provide_receive_buffer: bad buffer %p size %u "
                        "priority %u; ignored\n", ptr, size, priority);
        return;
    }
    struct gmx_rreq *r = gmx_rreq_get(p);
    if (!r) {
        fprintf(stderr, "libgm: out of memory; receive buffer %p ignored\n", ptr);
        return;
    }
    r->kind = GMX_R_CLIENT;
    r->size = size;
    r->prio = priority;
    r->gmtag = tag & 0xff;
    if (gmx_post_recv(p, r, ptr, gm_max_length_for_size(size),
                      gmx_tag(GMX_KIND_MSG, size, priority, 0, 0),
                      GMX_TAG_SEQ_MASK | GMX_TAG_SENDER_MASK) != 0)
        gmx_rreq_put(p, r);
}

int gmx_post_ack(struct gm_port *p, struct gmx_rreq *r)
{
    r->kind = GMX_R_ACK;
    return gmx_post_recv(p, r, NULL, 0, (uint64_t)GMX_KIND_ACK << GMX_TAG_KIND_SHIFT,
                         ~GMX_TAG_KIND_MASK);
}

/* Owes peer an ack for stream item seq; sent at the end of this progress
 * round, so one ack covers a batch and the event reaches the client first. */
static void ack_owe(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq)
{
    peer->ack_due[prio] = seq;
    peer->ack_pending[prio] = 1;
    if (!peer->in_ack_list) {
        peer->in_ack_list = 1;
        peer->next_ack = p->ack_list;
        p->ack_list = peer;
    }
}

/* An error ack goes out at once; it also acks every earlier item. */
static void ack_now(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                    gm_status_t st)
{
    if (!peer->resolved && !gmx_peer_resolve(p, peer))
        return;
    uint64_t tag = gmx_tag(GMX_KIND_ACK, (unsigned)st & GMX_TAG_SIZE_MASK, prio, seq,
                           p->self_bits);
    ssize_t rc = -FI_EAGAIN;
    for (int i = 0; i < 1000 && rc == -FI_EAGAIN; i++) {
        rc = fi_tinject(p->ep, NULL, 0, peer->addr, tag);
        if (rc == -FI_EAGAIN)
            fi_cq_read(p->cq, NULL, 0); /* drive the provider only */
    }
    if (rc == 0)
        peer->ack_pending[prio] = 0;
    else
        ack_owe(p, peer, prio, seq); /* at least the window moves on */
}

static void acks_flush(struct gm_port *p)
{
    struct gmx_peer **link = &p->ack_list;
    while (*link) {
        struct gmx_peer *peer = *link;
        for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++) {
            if (!peer->ack_pending[prio])
                continue;
            if (!peer->resolved && !gmx_peer_resolve(p, peer)) {
                peer->ack_pending[prio] = 0; /* nowhere to send it */
                continue;
            }
            uint64_t tag = gmx_tag(GMX_KIND_ACK, 0, prio, peer->ack_due[prio], p->self_bits);
            ssize_t rc = fi_tinject(p->ep, NULL, 0, peer->addr, tag);
            if (rc == 0 || rc != -FI_EAGAIN)
                peer->ack_pending[prio] = 0;
        }
        if (!peer->ack_pending[0] && !peer->ack_pending[1]) {
            peer->in_ack_list = 0;
            *link = peer->next_ack;
        } else {
            link = &peer->next_ack;
        }
    }
}

GMX_EXPORT void gm_provide_receive_buffer_with_tag(struct gm_port *p, void *ptr,
                                                   unsigned int size, unsigned int priority,
                                                   unsigned int tag)
{
    if (!p)
        return;
    gmx_port_lock(p);
    provide_locked(p, ptr, size, priority, tag);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_provide_receive_buffer(struct gm_port *p, void *ptr, unsigned int size,
                                          unsigned int priority)
{
    gm_provide_receive_buffer_with_tag(p, ptr, size, priority, 0);
}

/* ---- events -------------------------------------------------------------- */

gm_recv_event_t *gmx_event_push(struct gm_port *p)
{
    if (p->ring_count == p->ring_cap) {
        /* Rare: more completions than slots (held messages released at
         * once).  Grow and unwrap. */
        unsigned cap = p->ring_cap * 2;
        gm_recv_event_t *ring = malloc(cap * sizeof *ring);
        if (!ring)
            return NULL;
        for (unsigned i = 0; i < p->ring_count; i++)
            ring[i] = p->ring[(p->ring_head + i) % p->ring_cap];
        free(p->ring);
        p->ring = ring;
        p->ring_cap = cap;
        p->ring_head = 0;
    }
    return &p->ring[(p->ring_head + p->ring_count++) % p->ring_cap];
}

static void deliver_client(struct gm_port *p, struct gmx_rreq *r)
{
    gm_recv_event_t *ev = gmx_event_push(p);
    if (!ev) {
        fprintf(stderr, "libgm: out of memory; a received message is lost\n");
        gmx_rreq_put(p, r);
        return;
    }
    unsigned node = (unsigned)(r->rtag >> GMX_TAG_NODE_SHIFT) & 0xffff;
    unsigned port = (unsigned)(r->rtag >> GMX_TAG_PORT_SHIFT) & 0xff;
    gm_recv_t *rv = &ev->recv;
    memset(ev, 0, sizeof *ev);
    rv->message = rv->buffer = (gm_up_n_t){0};
#if GM_SIZEOF_UP_T == 8
    rv->buffer.n = _GM_SW64((gm_up_t)(uintptr_t)r->buf);
#else
    rv->buffer.n = _GM_SW32((gm_up_t)(uintptr_t)r->buf);
#endif
    rv->message = rv->buffer;
    rv->length = gm_hton_u32((gm_u32_t)r->rlen);
    rv->sender_node_id = gm_hton_u16((gm_u16_t)node);
    rv->tag = gm_hton_u8((gm_u8_t)r->gmtag);
    rv->size = gm_hton_u8((gm_u8_t)r->size);
    rv->sender_port_id = gm_hton_u8((gm_u8_t)port);
    rv->type = gm_hton_u8(r->prio ? GM_HIGH_RECV_EVENT : GM_RECV_EVENT);
    gmx_rreq_put(p, r);
}

/* ---- put/get service (target side) --------------------------------------- */

static int access_ok(struct gm_port *p, uint64_t addr, uint64_t len)
{
    return p->remote_access && gmx_region_covers(p, addr, len);
}

static gm_status_t serve_ctrl(struct gm_port *p, struct gmx_peer *peer, unsigned prio,
                              struct gmx_rreq *r)
{
    struct gmx_ctrl h;
    unsigned node = (unsigned)(r->rtag >> GMX_TAG_NODE_SHIFT) & 0xffff;
    unsigned port = (unsigned)(r->rtag >> GMX_TAG_PORT_SHIFT) & 0xff;
    if (r->truncated || r->rlen < sizeof h) {
        gmx_log("bad control message (%zu bytes) from node %u port %u\n", r->rlen, node,
                port);
        return GM_INVALID_PARAMETER;
    }
    memcpy(&h, r->buf, sizeof h);
    size_t data_len = r->rlen - sizeof h;
    switch (h.op) {
    case GMX_CTRL_PUT_INLINE:
        if (h.len != data_len || !access_ok(p, h.addr, h.len)) {
            gmx_log("put of %llu bytes at %#llx from node %u port %u refused\n",
                    (unsigned long long)h.len, (unsigned long long)h.addr, node, port);
            return GM_PERMISSION_DENIED;
        }
        memcpy((void *)(uintptr_t)h.addr, (char *)r->buf + sizeof h, data_len);
        return GM_SUCCESS;
    case GMX_CTRL_PUT_RNDV: {
        if (!peer)
            return GM_FAILURE;
        struct gmx_rreq *d = gmx_rreq_get(p);
        if (!d)
            return GM_OUT_OF_MEMORY;
        int ok = access_ok(p, h.addr, h.len);
        if (!ok)
            gmx_log("put of %llu bytes at %#llx from node %u port %u refused\n",
                    (unsigned long long)h.len, (unsigned long long)h.addr, node, port);
        d->kind = GMX_R_PUTDATA;
        d->peer = peer;
        d->prio = prio;
        /* A refused put is still received (into nothing, truncated) so that
         * it does not sit in the provider's queue forever. */
        uint64_t tag = gmx_tag(GMX_KIND_PUTDATA, 0, 0, h.xfer, gmx_sender_bits(node, port));
        if (gmx_post_recv(p, d, ok ? (void *)(uintptr_t)h.addr : NULL, ok ? h.len : 0, tag,
                          1ULL << GMX_TAG_PRIO_SHIFT) != 0) {
            gmx_rreq_put(p, d);
            return GM_FAILURE;
        }
        peer->put_stall[prio]++;
        return ok ? GM_SUCCESS : GM_PERMISSION_DENIED;
    }
    case GMX_CTRL_GET_REQ: {
        if (!peer || !peer->resolved)
            return GM_FAILURE;
        int ok = access_ok(p, h.addr, h.len);
        uint64_t tag = gmx_tag(GMX_KIND_GETDATA, 0, prio, h.xfer, p->self_bits);
        if (!ok) {
            gmx_log("get of %llu bytes at %#llx from node %u port %u refused\n",
                    (unsigned long long)h.len, (unsigned long long)h.addr, node, port);
            gmx_send_internal(p, peer, NULL, 0, tag | GMX_TAG_ERR);
        } else {
            gmx_send_internal(p, peer, (void *)(uintptr_t)h.addr, h.len, tag);
        }
        return GM_SUCCESS; /* the get completes with its answer */
    }
    default:
        gmx_log("unknown control op %u from node %u port %u\n", h.op, node, port);
        return GM_INVALID_PARAMETER;
    }
}

/* Acts on one message of a stream, in order. */
static void process(struct gm_port *p, struct gmx_peer *peer, unsigned prio,
                    struct gmx_rreq *r)
{
    uint32_t seq = (uint32_t)(r->rtag >> GMX_TAG_SEQ_SHIFT) & GMX_SEQ_MASK;
    if (r->kind == GMX_R_CLIENT) {
        if (peer)
            ack_owe(p, peer, prio, seq);
        deliver_client(p, r);
        return;
    }
    if (r->kind == GMX_R_REJECT) {
        if (peer)
            ack_now(p, peer, prio, seq, GM_SEND_REJECTED);
        unsigned size = r->size;
        if (p->reject[prio][size] == r && gmx_post_recv(p, r, NULL, 0, r->post_tag,
                                                        r->post_ignore) == 0)
            return;
        if (p->reject[prio][size] == r)
            p->reject[prio][size] = NULL;
        gmx_rreq_put(p, r);
        return;
    }
    gm_status_t st = serve_ctrl(p, peer, prio, r);
    if (peer) {
        if (st == GM_SUCCESS)
            ack_owe(p, peer, prio, seq);
        else
            ack_now(p, peer, prio, seq, st);
    }
    if (gmx_post_ctrl(p, r) != 0)
        gmx_rreq_put(p, r);
}

static uint32_t seq_of(uint64_t tag)
{
    return (uint32_t)(tag >> GMX_TAG_SEQ_SHIFT) & GMX_SEQ_MASK;
}

/* Signed distance of seq from the expected one, modulo 2^22. */
static int32_t seq_diff(uint32_t seq, uint32_t expected)
{
    uint32_t d = (seq - expected) & GMX_SEQ_MASK;
    return d & 0x200000u ? (int32_t)d - 0x400000 : (int32_t)d;
}

static void drain(struct gm_port *p, struct gmx_peer *peer, unsigned prio)
{
    while (peer->held[prio] && !peer->put_stall[prio] &&
           seq_of(peer->held[prio]->rtag) == peer->recv_seq[prio]) {
        struct gmx_rreq *r = peer->held[prio];
        peer->held[prio] = r->next;
        peer->recv_seq[prio] = (peer->recv_seq[prio] + 1) & GMX_SEQ_MASK;
        process(p, peer, prio, r);
    }
}

static void hold(struct gmx_peer *peer, unsigned prio, struct gmx_rreq *r)
{
    int32_t d = seq_diff(seq_of(r->rtag), peer->recv_seq[prio]);
    struct gmx_rreq **link = &peer->held[prio];
    while (*link && seq_diff(seq_of((*link)->rtag), peer->recv_seq[prio]) < d)
        link = &(*link)->next;
    r->next = *link;
    *link = r;
}

/* A message or control message arrived: deliver it in stream order. */
static void stream_arrive(struct gm_port *p, struct gmx_rreq *r)
{
    unsigned node = (unsigned)(r->rtag >> GMX_TAG_NODE_SHIFT) & 0xffff;
    unsigned port = (unsigned)(r->rtag >> GMX_TAG_PORT_SHIFT) & 0xff;
    unsigned prio = (unsigned)(r->rtag >> GMX_TAG_PRIO_SHIFT) & 1;
    uint32_t seq = seq_of(r->rtag);
    struct gmx_peer *peer = gmx_peer_get(p, node, port);
    if (!peer) { /* sender outside our map: no ordering state to keep */
        process(p, NULL, prio, r);
        return;
    }
    if (!peer->seen_prio[prio]) {
        peer->seen_prio[prio] = 1;
        peer->recv_seq[prio] = seq;
    }
    int32_t d = seq_diff(seq, peer->recv_seq[prio]);
    if (d != 0 && seq == 0) {
        /* The sender reopened its port and started over. */
        gmx_log("node %u port %u restarted its stream\n", node, port);
        peer->recv_seq[prio] = 0;
        peer->put_stall[prio] = 0;
        d = 0;
    }
    if (d < 0) { /* stale: from before a restart; never lose it */
        process(p, peer, prio, r);
        return;
    }
    if (d > 0 || peer->put_stall[prio]) {
        gmx_log("holding seq %u (expected %u) from node %u port %u\n", seq,
                peer->recv_seq[prio], node, port);
        hold(peer, prio, r);
        return;
    }
    peer->recv_seq[prio] = (seq + 1) & GMX_SEQ_MASK;
    process(p, peer, prio, r);
    drain(p, peer, prio);
}

/* ---- completions --------------------------------------------------------- */

static void recv_done(struct gm_port *p, struct gmx_rreq *r)
{
    switch (r->kind) {
    case GMX_R_CLIENT:
    case GMX_R_CTRL:
    case GMX_R_REJECT:
        stream_arrive(p, r);
        return;
    case GMX_R_PUTDATA: {
        struct gmx_peer *peer = r->peer;
        unsigned prio = r->prio;
        gmx_rreq_put(p, r);
        if (peer->put_stall[prio])
            peer->put_stall[prio]--;
        drain(p, peer, prio);
        return;
    }
    case GMX_R_ACK: {
        unsigned node = (unsigned)(r->rtag >> GMX_TAG_NODE_SHIFT) & 0xffff;
        unsigned port = (unsigned)(r->rtag >> GMX_TAG_PORT_SHIFT) & 0xff;
        unsigned prio = (unsigned)(r->rtag >> GMX_TAG_PRIO_SHIFT) & 1;
        struct gmx_peer *peer = gmx_peer_get(p, node, port);
        if (peer)
            gmx_ack_arrived(p, peer, prio, seq_of(r->rtag),
                            (gm_status_t)(r->rtag & GMX_TAG_SIZE_MASK));
        if (gmx_post_ack(p, r) != 0)
            gmx_rreq_put(p, r);
        return;
    }
    case GMX_R_GETDATA: {
        struct gmx_sreq *s = r->get;
        gm_status_t st = GM_SUCCESS;
        if (r->rtag & GMX_TAG_ERR)
            st = GM_PERMISSION_DENIED;
        else if (r->truncated)
            st = GM_INVALID_PARAMETER;
        gmx_rreq_put(p, r);
        gmx_send_done(p, s, st);
        return;
    }
    }
}

static void read_error(struct gm_port *p)
{
    struct fi_cq_err_entry err = {0};
    if (fi_cq_readerr(p->cq, &err, 0) != 1)
        return;
    if (!err.op_context)
        return;
    if (!*(int *)err.op_context) {
        struct gmx_sreq *s = err.op_context;
        gmx_log("send to node %u port %u failed: %s\n", s->peer ? s->peer->node : 0,
                s->peer ? s->peer->port : 0, fi_strerror(err.err));
        gmx_stream_failed(p, s->peer, s, gmx_status_from_fi(err.err, s->peer));
        return;
    }
    struct gmx_rreq *r = err.op_context;
    r->posted = 0;
    if (err.err == FI_ECANCELED) {
        if (r->kind == GMX_R_REJECT && p->reject[r->prio][r->size] == r)
            p->reject[r->prio][r->size] = NULL;
        if (r->kind == GMX_R_GETDATA)
            gmx_send_done(p, r->get, r->get->status ? r->get->status : GM_SEND_DROPPED);
        gmx_rreq_put(p, r);
        return;
    }
    if (err.err == FI_ETRUNC || err.err == FI_ETOOSMALL) {
        /* Wire data is untrusted: a message longer than the buffer is
         * delivered truncated to the buffer, flagged for control messages. */
        if (r->kind == GMX_R_CLIENT)
            fprintf(stderr, "libgm: message of %zu bytes truncated to its size-%u "
                            "buffer\n", err.len + err.olen, r->size);
        r->truncated = 1;
        r->rtag = err.tag;
        r->rlen = err.len;
        recv_done(p, r);
        return;
    }
    fprintf(stderr, "libgm: receive failed: %s\n", fi_strerror(err.err));
    if (r->kind == GMX_R_GETDATA)
        gmx_send_done(p, r->get, gmx_status_from_fi(err.err, NULL));
    if (r->kind == GMX_R_CTRL && gmx_post_ctrl(p, r) == 0)
        return;
    gmx_rreq_put(p, r);
}

/* Polls the completion queue once; returns how many completions it handled. */
int gmx_progress(struct gm_port *p)
{
    if (p->in_progress)
        return 0;
    p->in_progress = 1;
    struct fi_cq_tagged_entry ce[GMX_CQ_BATCH];
    int handled = 0;
    ssize_t n = fi_cq_read(p->cq, ce, GMX_CQ_BATCH);
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (!*(int *)ce[i].op_context) {
                struct gmx_sreq *s = ce[i].op_context;
                s->peer->reached = 1;
                gmx_send_local_done(p, s);
            } else {
                struct gmx_rreq *r = ce[i].op_context;
                r->posted = 0;
                r->rtag = ce[i].tag;
                r->rlen = ce[i].len;
                recv_done(p, r);
            }
        }
        handled = (int)n;
    } else if (n == -FI_EAVAIL) {
        read_error(p);
        handled = 1;
    }
    if (p->post_backlog)
        post_backlog_progress(p);
    if (p->ack_list)
        acks_flush(p);
    p->in_progress = 0;
    if (p->backlogged)
        gmx_backlog_progress(p);
    if (atomic_load_explicit(&gmx_backlogged_ports, memory_order_relaxed))
        gmx_help_others(p);
    return handled;
}

/* ---- the event loop ------------------------------------------------------ */

static gm_recv_event_t *set_type(struct gm_port *p, unsigned type)
{
    p->cur.recv.type = gm_hton_u8((gm_u8_t)type);
    return &p->cur;
}

/* The next event, or NULL when idle.  Takes the port lock. */
static gm_recv_event_t *next_event_locked(struct gm_port *p);
static gm_recv_event_t *next_event(struct gm_port *p)
{
    gmx_port_lock(p);
    gm_recv_event_t *e = next_event_locked(p);
    gmx_port_unlock(p);
    return e;
}

static gm_recv_event_t *next_event_locked(struct gm_port *p)
{
    if (p->done)
        return set_type(p, GM_SENT_TOKENS_EVENT);
    if (!p->ring_count) {
        gmx_progress(p);
        if (p->done)
            return set_type(p, GM_SENT_TOKENS_EVENT);
    }
    if (p->ring_count) {
        p->cur = p->ring[p->ring_head];
        p->ring_head = (p->ring_head + 1) % p->ring_cap;
        p->ring_count--;
        return &p->cur;
    }
    if (p->alarms && gmx_alarm_due(p, gmx_now_ns()))
        return set_type(p, GM_ALARM_EVENT);
    return NULL;
}

GMX_EXPORT gm_recv_event_t *gm_receive(struct gm_port *p)
{
    static gm_recv_event_t none; /* type 0; only for a NULL port */
    if (!p)
        return &none;
    gm_recv_event_t *e = next_event(p);
    return e ? e : set_type(p, GM_NO_RECV_EVENT);
}

GMX_EXPORT gm_recv_event_t *gm_blocking_receive(struct gm_port *p)
{
    if (!p)
        return gm_receive(p);
    uint64_t start = 0;
    for (unsigned i = 0;; i++) {
        gm_recv_event_t *e = next_event(p);
        if (e)
            return e;
        if ((i & 63) == 0) {
            uint64_t now = gmx_now_ns();
            if (!start)
                start = now;
            else if (now - start > GMX_SPIN_NS)
                return set_type(p, _GM_SLEEP_EVENT);
        }
    }
}

GMX_EXPORT gm_recv_event_t *gm_blocking_receive_no_spin(struct gm_port *p)
{
    if (!p)
        return gm_receive(p);
    gm_recv_event_t *e = next_event(p);
    return e ? e : set_type(p, _GM_SLEEP_EVENT);
}

static int pending_locked(struct gm_port *p)
{
    if (!p->ring_count && !p->done)
        gmx_progress(p);
    return p->ring_count || p->done || (p->alarms && gmx_alarm_due(p, gmx_now_ns()));
}

GMX_EXPORT int gm_receive_pending(struct gm_port *p)
{
    if (!p)
        return 0;
    gmx_port_lock(p);
    int r = pending_locked(p);
    gmx_port_unlock(p);
    return r;
}

GMX_EXPORT int gm_next_event_peek(struct gm_port *p, gm_u16_t *sender)
{
    if (!p)
        return GM_NO_RECV_EVENT;
    int type = GM_NO_RECV_EVENT;
    gmx_port_lock(p);
    if (!pending_locked(p)) {
        type = GM_NO_RECV_EVENT;
    } else if (p->done) {
        type = GM_SENT_TOKENS_EVENT;
    } else if (p->ring_count) {
        gm_recv_event_t *e = &p->ring[p->ring_head];
        if (sender)
            *sender = gm_ntoh_u16(e->recv.sender_node_id);
        type = GM_RECV_EVENT_TYPE(e);
    } else {
        type = GM_ALARM_EVENT;
    }
    gmx_port_unlock(p);
    return type;
}

/* Sleeps until an event is ready, the next alarm, or GMX_NAP_NS. */
static void nap(struct gm_port *p)
{
    uint64_t now = gmx_now_ns();
    uint64_t until = now + GMX_NAP_NS;
    uint64_t alarm = gmx_alarm_next(p);
    if (alarm && alarm < until)
        until = alarm;
    for (;;) {
        gmx_port_lock(p);
        int ready = p->ring_count || p->done || gmx_progress(p);
        gmx_port_unlock(p);
        if (ready)
            return;
        now = gmx_now_ns();
        if (now >= until)
            return;
        struct timespec ts = {0, 20000}; /* short enough to keep latency low */
        nanosleep(&ts, NULL);
    }
}

static void run_callbacks(struct gm_port *p)
{
    /* Detach first: callbacks may send, and those completions go on a new
     * list. */
    gmx_port_lock(p);
    struct gmx_sreq *s = p->done;
    p->done = p->done_tail = NULL;
    gmx_port_unlock(p);
    while (s) {
        /* Callbacks run without the port lock: they call back into GM. */
        gmx_port_lock(p);
        struct gmx_sreq *next = s->next;
        gm_send_completion_callback_t cb = s->cb;
        void *ctx = s->ctx;
        gm_status_t st = s->status;
        gmx_sreq_put(p, s);
        gmx_port_unlock(p);
        if (cb)
            cb(p, ctx, st);
        s = next;
    }
}

GMX_EXPORT void gm_unknown(struct gm_port *p, gm_recv_event_t *e)
{
    if (!p || !e)
        return;
    unsigned type = GM_RECV_EVENT_TYPE(e);
    switch (type) {
    case GM_SENT_TOKENS_EVENT:
        run_callbacks(p);
        break;
    case GM_ALARM_EVENT:
        gmx_alarms_run(p);
        break;
    case _GM_SLEEP_EVENT:
        nap(p);
        break;
    case GM_RECV_EVENT:
    case GM_HIGH_RECV_EVENT:
    case GM_PEER_RECV_EVENT:
    case GM_HIGH_PEER_RECV_EVENT:
    case GM_FAST_RECV_EVENT:
    case GM_FAST_HIGH_RECV_EVENT:
    case GM_FAST_PEER_RECV_EVENT:
    case GM_FAST_HIGH_PEER_RECV_EVENT: {
        /* An unhandled receive gives its buffer (token) back to GM. */
        unsigned high = type == GM_HIGH_RECV_EVENT || type == GM_HIGH_PEER_RECV_EVENT ||
                        type == GM_FAST_HIGH_RECV_EVENT ||
                        type == GM_FAST_HIGH_PEER_RECV_EVENT;
        gm_provide_receive_buffer_with_tag(p, gm_ntohp(e->recv.buffer),
                                           gm_ntoh_u8(e->recv.size), high,
                                           gm_ntoh_u8(e->recv.tag));
        break;
    }
    default:
        break;
    }
}

/* Posts (or cancels) a zero-length catcher per size class newly rejected
 * (or accepted again): a message of a rejected size matches it, and the
 * sender gets GM_SEND_REJECTED through the ack. */
void gmx_reject_update(struct gm_port *p, unsigned prio, gm_size_t old_mask, gm_size_t mask)
{
    for (unsigned size = GMX_MIN_SIZE; size <= GMX_MAX_SIZE; size++) {
        int was = (old_mask >> size) & 1, now = (mask >> size) & 1;
        if (was && !now && !p->reject[prio][size]) {
            struct gmx_rreq *r = gmx_rreq_get(p);
            if (!r)
                return;
            r->kind = GMX_R_REJECT;
            r->size = size;
            r->prio = prio;
            p->reject[prio][size] = r;
            if (gmx_post_recv(p, r, NULL, 0, gmx_tag(GMX_KIND_MSG, size, prio, 0, 0),
                              GMX_TAG_SEQ_MASK | GMX_TAG_SENDER_MASK) != 0) {
                p->reject[prio][size] = NULL;
                gmx_rreq_put(p, r);
            }
        } else if (!was && now && p->reject[prio][size]) {
            struct gmx_rreq *r = p->reject[prio][size];
            p->reject[prio][size] = NULL;
            if (r->posted)
                fi_cancel(&p->ep->fid, r); /* completes as cancelled: freed then */
        }
    }
}
