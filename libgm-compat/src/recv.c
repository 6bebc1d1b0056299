/* recv.c - the eager channel (bounce buffers), matching messages to the
 * client's buffers by (size, priority), in-order processing per (sender,
 * priority), acks, put/get service at the target, and the completion loop
 * (gmx_progress).  The event loop calls are in events.c. */
#include "gm_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define GMX_CQ_BATCH 16

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
 * retried from the progress loop, so a receive is never lost. */
int gmx_post_recv(struct gm_port *p, struct gmx_rreq *r, void *buf, size_t len, uint64_t tag,
                  uint64_t ignore)
{
    r->buf = buf;
    r->post_len = len;
    r->post_tag = tag;
    r->post_ignore = ignore;
    if (p->post_backlog) {
        post_backlog_push(p, r);
        return 0;
    }
    ssize_t rc = gmx_tp_recv(p, buf, len, tag, ignore, r);
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
        ssize_t rc = gmx_tp_recv(p, r->buf, r->post_len, r->post_tag, r->post_ignore, r);
        if (rc == -FI_EAGAIN) return;
        p->post_backlog = r->next;
        if (!p->post_backlog) p->post_backlog_tail = NULL;
        r->posted = rc == 0;
        if (rc != 0) {
            fprintf(stderr, "libgm: fi_trecv: %s; buffer %p dropped\n", fi_strerror((int)-rc),
                    r->buf);
            if (r->kind == GMX_R_EAGER) p->bposted--;
        }
    }
}

/* ---- bounce buffers of the eager channel ----------------------------------- */

static struct gmx_rreq *bounce_new(struct gm_port *p)
{
    if (p->nbmem == p->bmem_cap) {
        unsigned cap = p->bmem_cap ? p->bmem_cap * 2 : 64;
        char **grown = realloc(p->bmem, cap * sizeof *grown);
        if (!grown) return NULL;
        p->bmem = grown;
        p->bmem_cap = cap;
    }
    char *mem = malloc(GMX_BOUNCE_LEN);
    struct gmx_rreq *r = mem ? gmx_rreq_get(p) : NULL;
    if (!r) {
        free(mem);
        return NULL;
    }
    p->bmem[p->nbmem++] = mem;
    r->kind = GMX_R_EAGER;
    r->buf = mem;
    return r;
}

static void bounce_release(struct gm_port *p, struct gmx_rreq *r)
{
    r->next = p->bfree;
    p->bfree = r;
}

/* Keeps GMX_BOUNCE_POSTED eager receives posted, whatever the streams hold
 * (they hold at most a window each); 0, or -1 if none could be posted. */
int gmx_bounce_fill(struct gm_port *p)
{
    while (p->bposted < GMX_BOUNCE_POSTED) {
        struct gmx_rreq *r = p->bfree;
        if (r)
            p->bfree = r->next;
        else if (!(r = bounce_new(p)))
            return p->bposted ? 0 : -1;
        r->truncated = 0;
        if (gmx_post_recv(p, r, r->buf, GMX_BOUNCE_LEN, GMX_TAG_EAGER, 0) != 0) {
            bounce_release(p, r);
            return p->bposted ? 0 : -1;
        }
        p->bposted++;
    }
    return 0;
}

void gmx_bounce_free(struct gm_port *p)
{
    for (unsigned i = 0; i < p->nbmem; i++)
        free(p->bmem[i]);
    free(p->bmem);
    p->bmem = NULL;
    p->nbmem = p->bmem_cap = 0;
    p->bfree = NULL;
}

/* ---- client buffers -------------------------------------------------------- */

static void provide_locked(struct gm_port *p, void *ptr, unsigned int size, unsigned int priority,
                           unsigned int tag)
{
    if (!ptr || size < GMX_MIN_SIZE || size > GMX_MAX_SIZE || priority >= GM_NUM_PRIORITIES) {
        fprintf(stderr,
                "libgm: gm_provide_receive_buffer: bad buffer %p size %u "
                "priority %u; ignored\n",
                ptr, size, priority);
        return;
    }
    struct gmx_rreq *r = gmx_rreq_get(p);
    if (!r) {
        fprintf(stderr, "libgm: out of memory; receive buffer %p ignored\n", ptr);
        return;
    }
    r->kind = GMX_R_CLIENT;
    r->buf = ptr;
    r->size = size;
    r->prio = priority;
    r->gmtag = tag & 0xff;
    /* The one provided last is taken first: a client that gives each buffer back as soon as it
     * consumed it (a ping-pong, the CoR route) gets its next message in memory still in the
     * cache, instead of in the coldest of all it provided (FIFO: 64 x 32 KiB per peer cycled
     * through for every message). GM names no order among the buffers of one (size,
     * priority). */
    r->next = p->bufs[priority][size];
    p->bufs[priority][size] = r;
    if (!r->next) p->bufs_tail[priority][size] = r;
    if (p->wait_list) p->kick = 1;
}

static struct gmx_rreq *buffer_take(struct gm_port *p, unsigned prio, unsigned size)
{
    struct gmx_rreq *r = p->bufs[prio][size];
    if (r) {
        p->bufs[prio][size] = r->next;
        if (!r->next) p->bufs_tail[prio][size] = NULL;
        r->next = NULL;
    }
    return r;
}

/* A client buffer that was taken but not filled goes back, first in line. */
static void buffer_return(struct gm_port *p, struct gmx_rreq *c)
{
    c->next = p->bufs[c->prio][c->size];
    p->bufs[c->prio][c->size] = c;
    if (!c->next) p->bufs_tail[c->prio][c->size] = c;
}

GMX_EXPORT void gm_provide_receive_buffer_with_tag(struct gm_port *p, void *ptr, unsigned int size,
                                                   unsigned int priority, unsigned int tag)
{
    if (!p) return;
    gmx_port_lock(p);
    provide_locked(p, ptr, size, priority, tag);
    gmx_port_unlock(p);
}

GMX_EXPORT void gm_provide_receive_buffer(struct gm_port *p, void *ptr, unsigned int size,
                                          unsigned int priority)
{
    gm_provide_receive_buffer_with_tag(p, ptr, size, priority, 0);
}

/* ---- acks ------------------------------------------------------------------ */

/* Owes peer an ack for stream item seq.  It rides on the next header going
 * to peer (a reply), else goes alone once due (GMX_ACK_BATCH items or
 * GMX_ACK_DELAY_NS), from a progress round or a send call of this port or
 * another port's progress in this process; at the latest at gm_close or at
 * exit (one ack covers a batch). */
static void ack_owe(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq)
{
    peer->ack_due[prio] = seq;
    peer->ack_pending[prio] = 1;
    if (peer->acks_owed++ == 0)
        peer->ack_owed_ns = 0; /* timed from the first look (ack_due): no clock per item */
    if (peer->acks_owed >= GMX_ACK_BATCH) p->ack_urgent = 1;
    if (!peer->in_ack_list) {
        peer->in_ack_list = 1;
        peer->next_ack = p->ack_list;
        p->ack_list = peer;
    }
}

/* An error goes out at once (it also acks every earlier item). */
static void nack(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                 gm_status_t st)
{
    struct gmx_hdr h = {
        .kind = GMX_K_NACK, .prio = (uint8_t)prio, .seq = seq, .status = (uint8_t)st};
    if (gmx_send_ctl(p, peer, &h) != 0)
        ack_owe(p, peer, prio, seq); /* at least the window moves on */
}

static int ack_due(struct gmx_peer *peer, uint64_t *now)
{
    if (peer->acks_owed >= GMX_ACK_BATCH) return 1;
    if (!*now) *now = gmx_now_ns();
    if (!peer->ack_owed_ns) { /* the first look starts the delay */
        peer->ack_owed_ns = *now;
        return 0;
    }
    return *now - peer->ack_owed_ns >= GMX_ACK_DELAY_NS;
}

/* A sender whose node is in the map without an address yet (learnt at run time with
 * gm_node_set_address: the program adds peers as they first write to it) may be given one
 * soon: its acks wait for that, for the send timeout at most, timed from the first look
 * (ack_due's, or this one: a full batch is due at once, before ack_due read any clock; its
 * acks were dropped then, and the sender, its window of unacked items full, sent nothing
 * more and waited for acks that never came: a gm-route peer met by its first frame across
 * hosts was given up as silent, tests/hosts/slurm.sh with lazy peers, 2026-11-28). */
static int address_coming(struct gm_port *p, struct gmx_peer *peer, uint64_t now)
{
    if (p->addr_is_str) return 0;
    const struct gmx_node *n = gmx_node_find(peer->node);
    if (!n || __atomic_load_n(&n->has_addr, __ATOMIC_ACQUIRE)) return 0;
    if (!peer->ack_owed_ns) peer->ack_owed_ns = now;
    return now - peer->ack_owed_ns < (uint64_t)gmx_cfg.send_timeout_ms * 1000000u;
}

void gmx_acks_flush(struct gm_port *p, int all)
{
    struct gmx_peer **link = &p->ack_list;
    uint64_t now = 0;
    while (*link) {
        struct gmx_peer *peer = *link;
        if ((peer->ack_pending[0] || peer->ack_pending[1]) && (all || ack_due(peer, &now))) {
            struct gmx_hdr h = {.kind = GMX_K_ACK};
            if (gmx_send_ctl(p, peer, &h) != 0 && (!peer->resolved || peer->gone_ns) &&
                (all || peer->gone_ns || !address_coming(p, peer, now ? now : gmx_now_ns())))
                peer->ack_pending[0] = peer->ack_pending[1] = 0; /* nowhere to go */
        }
        if (!peer->ack_pending[0] && !peer->ack_pending[1]) {
            peer->in_ack_list = 0;
            *link = peer->next_ack;
        } else {
            link = &peer->next_ack;
        }
    }
}

/* Acks owed go out when a batch is full at once, else from every GMX_ACK_LOOK_EVERY-th call:
 * a look at the clock at each poll of a spinning receiver cost more than the poll itself
 * (20+ ns a read on a virtual machine), and most acks ride on a reply before they are due. */
void gmx_acks_maybe(struct gm_port *p)
{
    if (!p->ack_list || (!p->ack_urgent && ++p->ack_tick % GMX_ACK_LOOK_EVERY != 0)) return;
    p->ack_urgent = 0;
    gmx_acks_flush(p, 0);
}

/* At close: items taken but never processed fail at their senders
 * (instead of waiting for the in-flight timeout). */
void gmx_nack_held(struct gm_port *p)
{
    for (unsigned n = 0; n < p->peers_rows; n++) {
        if (!p->peers[n]) continue;
        for (unsigned q = 0; q < GMX_NUM_PORTS; q++) {
            struct gmx_peer *peer = p->peers[n][q];
            for (unsigned prio = 0; peer && prio < GM_NUM_PRIORITIES; prio++) {
                for (struct gmx_rreq *r = peer->held[prio]; r; r = r->next) {
                    struct gmx_hdr h;
                    memcpy(&h, r->buf, sizeof h);
                    struct gmx_hdr n_h = {.kind = GMX_K_NACK,
                                          .prio = (uint8_t)prio,
                                          .seq = h.seq,
                                          .status = GM_SEND_TARGET_PORT_CLOSED};
                    gmx_send_ctl(p, peer, &n_h);
                }
            }
        }
    }
}

/* ---- events -------------------------------------------------------------- */

gm_recv_event_t *gmx_event_push(struct gm_port *p)
{
    if (p->ring_count == p->ring_cap) {
        /* Rare: more completions than slots.  Grow and unwrap. */
        unsigned cap = p->ring_cap * 2;
        gm_recv_event_t *ring = malloc(cap * sizeof *ring);
        if (!ring) return NULL;
        for (unsigned i = 0; i < p->ring_count; i++)
            ring[i] = p->ring[(p->ring_head + i) % p->ring_cap];
        free(p->ring);
        p->ring = ring;
        p->ring_cap = cap;
        p->ring_head = 0;
    }
    return &p->ring[(p->ring_head + p->ring_count++) % p->ring_cap];
}

/* The client buffer c holds a message of len bytes from peer. */
static void deliver(struct gm_port *p, struct gmx_rreq *c, const struct gmx_peer *peer, size_t len)
{
    gm_recv_event_t *ev = gmx_event_push(p);
    if (!ev) {
        fprintf(stderr, "libgm: out of memory; a received message is lost\n");
        gmx_rreq_put(p, c);
        return;
    }
    gm_recv_t *rv = &ev->recv;
    memset(ev, 0, sizeof *ev);
#if GM_SIZEOF_UP_T == 8
    rv->buffer.n = _GM_SW64((gm_up_t)(uintptr_t)c->buf);
#else
    rv->buffer.n = _GM_SW32((gm_up_t)(uintptr_t)c->buf);
#endif
    rv->message = rv->buffer;
    rv->length = gm_hton_u32((gm_u32_t)len);
    rv->sender_node_id = gm_hton_u16((gm_u16_t)peer->node);
    rv->tag = gm_hton_u8((gm_u8_t)c->gmtag);
    rv->size = gm_hton_u8((gm_u8_t)c->size);
    rv->sender_port_id = gm_hton_u8((gm_u8_t)peer->port);
    rv->type = gm_hton_u8(c->prio ? GM_HIGH_RECV_EVENT : GM_RECV_EVENT);
    gmx_rreq_put(p, c);
}

/* ---- processing stream items, in order --------------------------------------- */

/* A put or get by messages into [addr, addr + len): allowed, registered, and, where the
 * sender named a key (gm_compat_put_keyed; the wire's word, 0: none) and this port gives keys,
 * under that live key: a stale key (its registration withdrawn, the memory perhaps registered
 * anew) is refused like unregistered memory. */
static int access_ok(struct gm_port *p, uint64_t addr, uint64_t len, uint64_t key)
{
    if (!p->remote_access) return 0;
    if (!key || !p->rma || !p->mr_virt) return gmx_region_covers(p, addr, len);
    const struct gmx_region *g = gmx_region_find(p, addr, len);
    return g && g->exported && g->key == key;
}

/* After a put or get served by messages: tell the sender our registration,
 * so that its next ones are RMA. */
static void offer_key(struct gm_port *p, struct gmx_peer *peer, uint64_t addr, uint64_t len)
{
    if (!p->rma) return;
    struct gmx_region *g = gmx_region_find(p, addr, len);
    if (!g || gmx_region_export(p, g) != 0) return;
    struct gmx_hdr h = {.kind = GMX_K_KEY, .addr = g->base, .len = g->len, .key = g->key};
    if (gmx_send_ctl(p, peer, &h) == 0) peer->keyed = 1;
}

/* What a PUTDATA receive's gmtag says: 0 into the target memory; refused (into nothing, the
 * item was refused); revoked (its memory's registration went while it was posted: cancelled,
 * its item is refused when its completion comes). */
enum { PUTDATA_REFUSED = 1, PUTDATA_REVOKED = 2 };
#define GMX_SETTLE_NS 2000000000ULL

static struct gmx_rreq *putdata_into(struct gm_port *p, uintptr_t base, size_t len)
{
    for (unsigned n = 0; n < p->peers_rows; n++) {
        if (!p->peers || !p->peers[n]) continue;
        for (unsigned q = 0; q < GMX_NUM_PORTS; q++) {
            struct gmx_peer *peer = p->peers[n][q];
            for (unsigned prio = 0; peer && prio < GM_NUM_PRIORITIES; prio++) {
                struct gmx_rreq *r = peer->stall_req[prio];
                if (r && r->kind == GMX_R_PUTDATA && r->posted && !r->gmtag &&
                    (uintptr_t)r->buf - base < len)
                    return r;
            }
        }
    }
    return NULL;
}

/* A put by messages whose header was taken lands its DATA straight in the target memory
 * afterwards (a receive posted there).  When that memory's registration goes, no such receive
 * may outlive it: the deregistration waits for them (the sender moves DATA right behind its
 * header; other ports of this process, which may be the sender, are progressed too), at most
 * GMX_SETTLE_NS; one still posted then (its sender stopped) is cancelled and its put fails
 * with GM_PERMISSION_DENIED.  Port lock held. */
void gmx_putdata_settle(struct gm_port *p, uintptr_t base, size_t len)
{
    uint64_t start = 0;
    struct gmx_rreq *r;
    while ((r = putdata_into(p, base, len))) {
        uint64_t now = gmx_now_ns();
        if (!start) start = now;
        if (now - start >= GMX_SETTLE_NS || p->in_progress) {
            gmx_log("a put into memory being deregistered did not finish: cancelled\n");
            r->gmtag = PUTDATA_REVOKED;
            gmx_tp_cancel(p, r);
            continue;
        }
        if (gmx_progress(p) == 0) gmx_help_others(p);
    }
}

/* Posts the receive of DATA(xfer) from peer into buf[cap]: the target memory, or a refused
 * put's sink (to take the DATA out of the provider's queue; it completes truncated). */
static int post_data(struct gm_port *p, struct gmx_rreq *d, struct gmx_peer *peer, unsigned prio,
                     const struct gmx_hdr *h, void *buf, size_t cap)
{
    d->peer = peer;
    d->prio = prio;
    d->seq = h->seq;
    return gmx_post_recv(p, d, buf, cap, gmx_tag(GMX_TK_DATA, h->xfer, peer->bits), 0);
}

/* Where a refused put's DATA (h->len bytes, right behind its header) is received: a sink of a
 * few bytes, which it completes truncated, not 0 bytes, since tcp;ofi_rxm (1.17) never answers
 * a rendezvous matched by an empty receive, and the sender's DATA, so its callback, would never
 * complete. On libfabric's shm provider a truncating receive of a message that came by CMA
 * (process_vm_readv, above the inject size) never returns (1.17: its copy loop retries with
 * no room left; gm_rdma_test's 8 MiB refused put hung in fi_trecv): there the sink holds the
 * whole DATA, an anonymous mapping reserved for it (no swap reserved, pages only where the
 * sender's bytes land), unmapped when the receive completes (pool.c). *cap: its length. */
static void *refused_sink(struct gm_port *p, struct gmx_rreq *d, const struct gmx_hdr *h,
                          size_t *cap)
{
    *cap = sizeof d->sink;
    if (p->shm || !p->addr_is_str || h->len <= p->inject_size) return d->sink;
    void *m = h->len <= SIZE_MAX / 2 ? mmap(NULL, (size_t)h->len, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                     : MAP_FAILED;
    if (m == MAP_FAILED) {
        gmx_log("no room for a sink of %llu bytes: the refused put's data is received "
                "truncated\n",
                (unsigned long long)h->len);
        return d->sink;
    }
    d->sink_map = m;
    d->sink_len = *cap = (size_t)h->len;
    return m;
}

/* Acts on the stream item in bounce buffer r; 1 if it must wait for a
 * client buffer (r untouched), else 0 (r released). */
static int process(struct gm_port *p, struct gmx_peer *peer, unsigned prio, struct gmx_rreq *r)
{
    struct gmx_hdr h;
    memcpy(&h, r->buf, sizeof h);
    const char *payload = (const char *)r->buf + sizeof h;
    size_t plen = r->rlen - sizeof h;
    int eager = h.kind == GMX_K_MSG || h.kind == GMX_K_PUT;
    if (r->truncated || (eager ? h.len != plen : plen != 0)) {
        gmx_log("bad item (kind %u, %llu bytes, %zu received) from node %u port %u\n", h.kind,
                (unsigned long long)h.len, plen, peer->node, peer->port);
        nack(p, peer, prio, h.seq, GM_INVALID_PARAMETER);
        bounce_release(p, r);
        return 0;
    }
    switch (h.kind) {
    case GMX_K_MSG:
    case GMX_K_MSG_RNDV: {
        unsigned size = h.size;
        if (size < GMX_MIN_SIZE || size > GMX_MAX_SIZE || h.len > gm_max_length_for_size(size)) {
            nack(p, peer, prio, h.seq, GM_INVALID_PARAMETER);
            break;
        }
        if (!((p->acceptable[prio] >> size) & 1)) {
            nack(p, peer, prio, h.seq, GM_SEND_REJECTED);
            break;
        }
        struct gmx_rreq *c = buffer_take(p, prio, size);
        if (!c) return 1;
        if (h.kind == GMX_K_MSG) {
            memcpy(c->buf, payload, plen);
            deliver(p, c, peer, plen);
            if (!(h.flags & GMX_F_UNACKED)) ack_owe(p, peer, prio, h.seq);
            break;
        }
        /* Large: the DATA lands straight in the client buffer; the stream
         * waits for it. */
        if (post_data(p, c, peer, prio, &h, c->buf, gm_max_length_for_size(size)) != 0) {
            gmx_rreq_put(p, c);
            nack(p, peer, prio, h.seq, GM_FAILURE);
            break;
        }
        peer->stall[prio]++;
        peer->stall_req[prio] = c;
        break;
    }
    case GMX_K_PUT:
        if (!access_ok(p, h.addr, h.len, h.key)) {
            gmx_log("put of %llu bytes at %#llx from node %u port %u refused\n",
                    (unsigned long long)h.len, (unsigned long long)h.addr, peer->node, peer->port);
            nack(p, peer, prio, h.seq, GM_PERMISSION_DENIED);
            break;
        }
        memcpy((void *)(uintptr_t)h.addr, payload, plen);
        ack_owe(p, peer, prio, h.seq);
        offer_key(p, peer, h.addr, h.len);
        break;
    case GMX_K_PUT_RNDV: {
        struct gmx_rreq *d = gmx_rreq_get(p);
        if (!d) {
            nack(p, peer, prio, h.seq, GM_OUT_OF_MEMORY);
            break;
        }
        d->kind = GMX_R_PUTDATA;
        int ok = access_ok(p, h.addr, h.len, h.key);
        if (!ok) {
            gmx_log("put of %llu bytes at %#llx from node %u port %u refused\n",
                    (unsigned long long)h.len, (unsigned long long)h.addr, peer->node, peer->port);
            /* Still taken out of the provider's queue, into a sink (refused_sink). */
            d->gmtag = PUTDATA_REFUSED;
            size_t cap;
            void *sink = refused_sink(p, d, &h, &cap);
            if (post_data(p, d, peer, prio, &h, sink, cap) != 0) gmx_rreq_put(p, d);
            nack(p, peer, prio, h.seq, GM_PERMISSION_DENIED);
            break;
        }
        if (post_data(p, d, peer, prio, &h, (void *)(uintptr_t)h.addr, h.len) != 0) {
            gmx_rreq_put(p, d);
            nack(p, peer, prio, h.seq, GM_FAILURE);
            break;
        }
        peer->stall[prio]++;
        peer->stall_req[prio] = d;
        offer_key(p, peer, h.addr, h.len);
        break;
    }
    case GMX_K_GET: {
        uint64_t tag = gmx_tag(GMX_TK_GETDATA, h.xfer, p->self_bits);
        if (!access_ok(p, h.addr, h.len, 0)) {
            gmx_log("get of %llu bytes at %#llx from node %u port %u refused\n",
                    (unsigned long long)h.len, (unsigned long long)h.addr, peer->node, peer->port);
            gmx_send_internal(p, peer, NULL, 0, tag | GMX_TAG_ERR);
        } else {
            gmx_send_internal(p, peer, (void *)(uintptr_t)h.addr, h.len, tag);
            offer_key(p, peer, h.addr, h.len);
        }
        ack_owe(p, peer, prio, h.seq); /* the get completes with its answer */
        break;
    }
    default:
        nack(p, peer, prio, h.seq, GM_INVALID_PARAMETER);
        break;
    }
    bounce_release(p, r);
    return 0;
}

static void wait_for_buffer(struct gm_port *p, struct gmx_peer *peer)
{
    if (!peer->in_wait_list) {
        peer->in_wait_list = 1;
        peer->next_wait = p->wait_list;
        p->wait_list = peer;
    }
}

/* Processes what (peer, prio) holds, in order, until an item must wait. */
/* Signed distance of seq from the expected one, modulo 2^22. */
static int32_t seq_diff(uint32_t seq, uint32_t expected)
{
    uint32_t d = (seq - expected) & GMX_SEQ_MASK;
    return d & 0x200000u ? (int32_t)d - 0x400000 : (int32_t)d;
}

static void drain(struct gm_port *p, struct gmx_peer *peer, unsigned prio)
{
    while (peer->held[prio] && !peer->stall[prio] &&
           peer->held[prio]->seq == peer->recv_seq[prio]) {
        struct gmx_rreq *r = peer->held[prio];
        peer->held[prio] = r->next;
        if (!r->next) peer->held_tail[prio] = NULL;
        if (process(p, peer, prio, r)) {
            r->next = peer->held[prio];
            peer->held[prio] = r;
            if (!r->next) peer->held_tail[prio] = r;
            peer->blocked[prio] = 1;
            wait_for_buffer(p, peer);
            return;
        }
        peer->blocked[prio] = 0;
        peer->recv_seq[prio] = (peer->recv_seq[prio] + 1) & GMX_SEQ_MASK;
    }
}

/* Files stream item r (seq, base from its header) in sequence order: the
 * provider may deliver out of order when it had to be retried.  Items
 * before the sender's base are done or given up by the sender. */
static void stream_arrive(struct gm_port *p, struct gmx_peer *peer, unsigned prio,
                          struct gmx_rreq *r, uint32_t base)
{
    if (!peer->seen[prio]) {
        peer->seen[prio] = 1;
        peer->recv_seq[prio] = base;
    } else if (seq_diff(base, peer->recv_seq[prio]) > 0 && !peer->blocked[prio] &&
               !peer->stall[prio]) {
        /* The sender gave up the items before base (failed sends). */
        peer->recv_seq[prio] = base;
        while (peer->held[prio] && seq_diff(peer->held[prio]->seq, base) < 0) {
            struct gmx_rreq *old = peer->held[prio];
            peer->held[prio] = old->next;
            bounce_release(p, old);
        }
        if (!peer->held[prio]) peer->held_tail[prio] = NULL;
    }
    int32_t d = seq_diff(r->seq, peer->recv_seq[prio]);
    struct gmx_rreq **link = &peer->held[prio];
    while (*link && seq_diff((*link)->seq, peer->recv_seq[prio]) < d)
        link = &(*link)->next;
    if (d < 0 || (*link && (*link)->seq == r->seq)) {
        /* A duplicate (sent again after a provider error): processed or
         * held already.  Ack what is done, so the sender moves on. */
        if (d < 0) ack_owe(p, peer, prio, (peer->recv_seq[prio] - 1) & GMX_SEQ_MASK);
        bounce_release(p, r);
        return;
    }
    r->next = *link;
    *link = r;
    if (!r->next) peer->held_tail[prio] = r;
    if (!peer->blocked[prio]) drain(p, peer, prio);
}

/* Buffers were provided (or acceptable sizes changed): retry the streams
 * that wait. */
static void retry_waiting(struct gm_port *p)
{
    p->kick = 0;
    struct gmx_peer *list = p->wait_list;
    p->wait_list = NULL;
    while (list) {
        struct gmx_peer *peer = list;
        list = peer->next_wait;
        peer->in_wait_list = 0;
        for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++)
            if (peer->blocked[prio]) drain(p, peer, prio);
    }
}

/* The peer's port was closed and opened again (a new incarnation): what its
 * predecessor left here is dropped (as GM would lose it), so that the new
 * stream starts clean. */
static void peer_restarted(struct gm_port *p, struct gmx_peer *peer)
{
    gmx_log("node %u port %u was reopened; dropping what its predecessor left\n", peer->node,
            peer->port);
    for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++) {
        while (peer->held[prio]) {
            struct gmx_rreq *r = peer->held[prio];
            peer->held[prio] = r->next;
            bounce_release(p, r);
        }
        peer->held_tail[prio] = NULL;
        peer->blocked[prio] = 0;
        peer->seen[prio] = 0;
        peer->ack_pending[prio] = 0;
        peer->acks_owed = 0;
        struct gmx_rreq *d = peer->stall_req[prio];
        if (d) {
            d->peer = NULL; /* orphan: its completion or cancel just frees it */
            if (d->posted) gmx_tp_cancel(p, d);
        }
        peer->stall_req[prio] = NULL;
        peer->stall[prio] = 0;
    }
}

/* A message arrived on the eager channel (bounce buffer r). */
static void eager_arrived(struct gm_port *p, struct gmx_rreq *r)
{
    struct gmx_hdr h;
    if (r->rlen < sizeof h) {
        gmx_log("eager message of %zu bytes: too short; dropped\n", r->rlen);
        bounce_release(p, r);
        return;
    }
    memcpy(&h, r->buf, sizeof h);
    struct gmx_peer *peer = gmx_peer_get(p, h.node, h.port);
    if (!peer) {
        gmx_log("message from node %u port %u (not in the node map); dropped\n", h.node, h.port);
        bounce_release(p, r);
        return;
    }
    peer->heard_ns = p->round_ns;
    peer->existed = 1;
    if (h.epoch != peer->rx_epoch) {
        if (peer->rx_epoch) {
            peer_restarted(p, peer);
            if (p->addr_is_str) gmx_peer_resolve(p, peer); /* shm: its new address */
        }
        peer->rx_epoch = h.epoch;
    }
    /* Acks meant for an earlier incarnation of this port are not ours. */
    int acks_ours = h.aepoch == p->epoch;
    if (acks_ours) peer->knows_us = 1; /* it heard from this incarnation: gmx_short */
    for (unsigned prio = 0; acks_ours && prio < GM_NUM_PRIORITIES; prio++)
        if ((h.acks >> prio) & 1)
            gmx_ack_arrived(p, peer, prio, h.ack[prio] & GMX_SEQ_MASK, GM_SUCCESS);
    unsigned prio = h.prio & 1;
    switch (h.kind) {
    case GMX_K_ACK:
        break;
    case GMX_K_NACK:
        if (acks_ours)
            gmx_ack_arrived(p, peer, prio, h.seq & GMX_SEQ_MASK,
                            h.status ? (gm_status_t)h.status : GM_FAILURE);
        break;
    case GMX_K_KEY:
        gmx_key_learn(peer, &h);
        break;
    case GMX_K_UNKEY:
        gmx_key_forget(peer, h.addr);
        break;
    default:
        if (!GMX_IS_STREAM(h.kind)) {
            gmx_log("unknown message kind %u from node %u port %u\n", h.kind, h.node, h.port);
            break;
        }
        r->seq = h.seq & GMX_SEQ_MASK;
        stream_arrive(p, peer, prio, r, h.base & GMX_SEQ_MASK);
        return;
    }
    bounce_release(p, r);
}

/* A short-form message (gmx_short) in bounce buffer r: acts on its ack, then puts the full
 * header it stands for in front of its payload, so that it takes every eager message's path.
 * 0, or -1 if it was dropped (r released). */
static int short_expand(struct gm_port *p, struct gmx_rreq *r)
{
    struct gmx_short s;
    struct gmx_peer *peer = NULL;
    if (gmx_short_unpack(r->cqdata, &s) != 0 || r->truncated || r->rlen > GMX_EAGER_MAX) {
        gmx_log("eager message of %zu bytes with CQ data %#llx: not a short form; dropped\n",
                r->rlen, (unsigned long long)r->cqdata);
        goto drop;
    }
    peer = gmx_peer_get(p, s.node, s.port);
    if (!peer || !peer->rx_epoch) {
        /* A sender uses the form only once we acked it (we know its epoch). */
        gmx_log("short message from node %u port %u, %s; dropped\n", s.node, s.port,
                peer ? "which never sent its header" : "not in the node map");
        goto drop;
    }
    if (s.has_ack) gmx_ack_arrived_low(p, peer, s.prio, s.ack_low);
    struct gmx_hdr h = {.kind = GMX_K_MSG,
                        .size = (uint8_t)s.size,
                        .prio = (uint8_t)s.prio,
                        .node = (uint16_t)s.node,
                        .port = (uint8_t)s.port,
                        .seq = s.seq,
                        .epoch = peer->rx_epoch,
                        .aepoch = p->epoch,
                        .base = s.base,
                        .len = r->rlen};
    memmove((char *)r->buf + sizeof h, r->buf, r->rlen);
    memcpy(r->buf, &h, sizeof h);
    r->rlen += sizeof h;
    return 0;
drop:
    bounce_release(p, r);
    return -1;
}

/* ---- completions --------------------------------------------------------- */

static void recv_done(struct gm_port *p, struct gmx_rreq *r)
{
    switch (r->kind) {
    case GMX_R_EAGER:
        p->bposted--;
        if (r->short_form && short_expand(p, r) != 0) return;
        eager_arrived(p, r);
        return;
    case GMX_R_CLIENT: { /* DATA of a large message */
        struct gmx_peer *peer = r->peer;
        unsigned prio = r->prio;
        if (!peer) { /* its sender's predecessor: the buffer is unused */
            buffer_return(p, r);
            return;
        }
        peer->stall_req[prio] = NULL;
        if (r->truncated)
            fprintf(stderr, "libgm: message truncated to its size-%u buffer\n", r->size);
        ack_owe(p, peer, prio, r->seq);
        deliver(p, r, peer, r->rlen);
        if (peer->stall[prio]) peer->stall[prio]--;
        drain(p, peer, prio);
        return;
    }
    case GMX_R_PUTDATA: {
        struct gmx_peer *peer = r->peer;
        unsigned prio = r->prio;
        int discard = r->gmtag == PUTDATA_REFUSED || !peer;
        int revoked = r->gmtag == PUTDATA_REVOKED;
        uint32_t seq = r->seq;
        gmx_rreq_put(p, r);
        if (discard) return;
        peer->stall_req[prio] = NULL;
        if (revoked)
            nack(p, peer, prio, seq, GM_PERMISSION_DENIED);
        else
            ack_owe(p, peer, prio, seq);
        if (peer->stall[prio]) peer->stall[prio]--;
        drain(p, peer, prio);
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
    if (!gmx_tp_cq_readerr(p, &err)) return;
    if (!err.op_context) return;
    if (!*(int *)err.op_context) {
        struct gmx_sreq *s = err.op_context;
        gmx_log("send to node %u port %u failed: %s\n", s->peer ? s->peer->node : 0,
                s->peer ? s->peer->port : 0, fi_strerror(err.err));
        /* Transient on connection-based providers: try again (in order). */
        /* (We never cancel sends: rxm cancels the ones queued on a
         * connection that failed.) */
        int transient =
            (err.err == FI_ENOTCONN || err.err == FI_EAGAIN || err.err == FI_ECANCELED) &&
            !p->addr_is_str;
        if (transient && gmx_send_retry(p, s)) return;
        gm_status_t st = gmx_status_from_fi(err.err, s->peer);
        if (transient && s->retried)
            st = GM_SEND_TIMED_OUT; /* the target is open, we could not reach it */
        if (s->rma && (err.err == FI_EINVAL || err.err == FI_EACCES || err.err == FI_EPERM ||
                       err.err == FI_EIO))
            st = GM_PERMISSION_DENIED; /* a stale or wrong key */
        gmx_send_failed(p, s, st);
        return;
    }
    struct gmx_rreq *r = err.op_context;
    r->posted = 0;
    if (err.err == FI_ECANCELED) {
        switch (r->kind) {
        case GMX_R_EAGER:
            p->bposted--;
            bounce_release(p, r);
            return;
        case GMX_R_GETDATA:
            gmx_send_done(p, r->get, r->get->status ? r->get->status : GM_SEND_DROPPED);
            break;
        case GMX_R_CLIENT:
            if (!r->peer) {
                buffer_return(p, r); /* cancelled by peer_restarted */
                return;
            }
            break;
        default:
            break;
        }
        gmx_rreq_put(p, r);
        return;
    }
    /* (libfabric 1.17's shm provider reports a truncation as -FI_ETRUNC) */
    int trunc = abs(err.err) == FI_ETRUNC || abs(err.err) == FI_ETOOSMALL;
    if (!trunc) fprintf(stderr, "libgm: receive failed: %s\n", fi_strerror(abs(err.err)));
    /* Wire data is untrusted: a message longer than its buffer is taken
     * truncated and flagged; other failures count as landed (truncated),
     * so that no stream waits forever. */
    r->truncated = 1;
    r->rtag = err.tag;
    r->short_form = (err.flags & FI_REMOTE_CQ_DATA) != 0;
    r->cqdata = err.data;
    r->rlen = trunc ? err.len : 0;
    recv_done(p, r);
}

/* Polls the completion queue once; returns how many completions it handled. */
int gmx_progress(struct gm_port *p)
{
    if (p->in_progress) return 0;
    p->in_progress = 1;
    /* Acks owed that no reply carried in time. */
    gmx_acks_maybe(p);
    if (p->ndeferred) gmx_deferred_free(p, 0);
    struct fi_cq_tagged_entry ce[GMX_CQ_BATCH];
    int handled = 0;
    /* The rings leave a large message's DATA in the ring until its header's completion was
     * handled here (which posts its receive): then one more read takes it. */
    int again = p->shm != NULL;
read:;
    ssize_t n = gmx_tp_cq_read(p, ce, GMX_CQ_BATCH);
    if (n > 0) {
        if (p->addr_is_str) p->round_ns = gmx_coarse_ns();
        for (ssize_t i = 0; i < n; i++) {
            if (!ce[i].op_context) continue;
            if (!*(int *)ce[i].op_context) {
                struct gmx_sreq *s = ce[i].op_context;
                struct gmx_peer *peer = s->peer;
                peer->reached = 1;
                peer->heard_ns = p->round_ns;
                if (s->rma == 1 && peer->rma_busy) peer->rma_busy--;
                gmx_send_local_done(p, s);
            } else {
                struct gmx_rreq *r = ce[i].op_context;
                r->posted = 0;
                r->rtag = ce[i].tag;
                r->rlen = ce[i].len;
                r->short_form = (ce[i].flags & FI_REMOTE_CQ_DATA) != 0;
                r->cqdata = ce[i].data;
                recv_done(p, r);
            }
        }
        handled += (int)n;
    } else if (n == -FI_EAVAIL) {
        read_error(p);
        handled++;
    }
    if (again && n != -FI_EAGAIN && gmx_shm_deferred(p->shm)) {
        again = 0;
        goto read;
    }
    if (p->kick) retry_waiting(p);
    if (p->bposted < GMX_BOUNCE_POSTED) gmx_bounce_fill(p);
    if (p->post_backlog) post_backlog_progress(p);
    if (p->watch && (++p->watch_tick & 255) == 0) gmx_watch_progress(p);
    p->in_progress = 0;
    if (p->backlogged) gmx_backlog_progress(p);
    /* Other ports of this process may owe us acks (or be stuck): GM's NIC
     * moved them without their host, so progress them too. */
    if (atomic_load_explicit(&gmx_backlogged_ports, memory_order_relaxed) ||
        (p->watch && atomic_load_explicit(&gmx_open_ports, memory_order_relaxed) > 1))
        gmx_help_others(p);
    return handled;
}
