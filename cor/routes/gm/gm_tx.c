/*
 * Sending: frames are copied into a ring of DMA memory and handed to GM while send tokens
 * last; beyond that they wait, in acceptance order, in the descriptor ring (the software
 * queue) and go out from progress() as GM callbacks return tokens. Puts and gets share the
 * same FIFO, so a put is ordered before every later send to its peer. All data and puts travel at
 * low priority, where GM keeps order per target port.
 */
#include <stdlib.h>
#include <string.h>

#include "gm_port.h"

#define ALIGN 64
#define TX_HOT ((size_t)64 << 10) /* bytes of the ring a ping-pong keeps to (ring_alloc) */

static struct gmr_tx *tx_at(struct cor_rport *p, uint64_t i)
{
    return &p->tx[i % p->k.tx_frames];
}

int gmr_tx_setup(struct cor_rport *p)
{
    p->tokens = gm_num_send_tokens(p->gp);
    if (p->tokens > 1) p->tokens--; /* one kept for the control messages of close() */
    p->tx = calloc(p->k.tx_frames, sizeof *p->tx);
    p->blocked = calloc(p->base.npeers, sizeof *p->blocked);
    p->tx_mem = gm_dma_malloc(p->gp, p->k.tx_bytes);
    /* control slots per peer: BYE, CREDIT, PING, PONG (op - 1) */
    p->ctrl_tx = gm_dma_malloc(p->gp, (size_t)GMR_CTRL_LEN * GMR_CTRL_SLOTS * p->base.npeers);
    p->cookie32 = (uint32_t)(p->base.cookie ^ (p->base.cookie >> 32));
    if (!p->tx || !p->blocked || !p->tx_mem || !p->ctrl_tx) return COR_ENOMEM;
    return COR_OK;
}

/* Reserves n bytes of the byte ring; NULL when full. Live bytes are [tail, head), or
 * [tail, R) + [0, head) once wrapped; head == tail only when no frame holds bytes (a frame
 * never fills the gap exactly). While few bytes are live (a ping-pong: the frame of the last
 * message waits for GM's callback, so the ring is never empty when the next one comes) it
 * wraps as soon as head leaves the first TX_HOT bytes and the front is free: the copy then
 * writes lines still in the cache, instead of a new part of the 4 MiB ring each time. */
static char *ring_alloc(struct cor_rport *p, size_t n, size_t *end)
{
    n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    size_t R = p->k.tx_bytes, off;
    if (p->tx_head == p->tx_tail) p->tx_head = p->tx_tail = 0;
    if (p->tx_head >= p->tx_tail) {
        if (p->tx_head + n > TX_HOT && p->tx_head - p->tx_tail <= TX_HOT / 2 && n < p->tx_tail)
            off = 0;
        else if (R - p->tx_head >= n)
            off = p->tx_head;
        else if (n < p->tx_tail)
            off = 0;
        else
            return NULL;
    } else if (p->tx_tail - p->tx_head > n) {
        off = p->tx_head;
    } else {
        return NULL;
    }
    p->tx_head = off + n;
    *end = p->tx_head;
    return p->tx_mem + off;
}

/* Frees descriptors (and their bytes) from the oldest while they are done and reported. */
void gmr_reclaim(struct cor_rport *p)
{
    while (p->d_tail < p->d_queue) {
        struct gmr_tx *t = tx_at(p, p->d_tail);
        if (t->state != TX_FREE) break;
        if (t->kind == TX_SEND && t->buf) p->tx_tail = t->end; /* (sent direct: no bytes) */
        p->d_tail++;
    }
    if (p->d_tail == p->d_head) p->tx_head = p->tx_tail = 0;
}

/* The descriptor stays taken until gmr_report() has made its send_done upcall, so at most
 * tx_frames completions wait. */
static void complete(struct cor_rport *p, struct gmr_tx *t, int status)
{
    t->state = TX_DONE;
    rutil_done_push(&p->base, &t->done, status);
}

void gmr_peer_dead(struct cor_rport *p, uint32_t peer, int err)
{
    struct gmr_peer *q = &p->peers[peer];
    q->dead = 1;
    atomic_store(&q->gone, 1);
    p->pump_dirty = 1;
    if (!q->reported) {
        q->reported = 1;
        rutil_fails_push(&p->base.fails, peer, err);
    }
}

/* On shm a message to a process killed with SIGKILL lands in its memory and completes: no
 * send fails, and a survivor that waits for its answer (a rendezvous' clear-to-send, a DSM
 * reply) with nothing in flight to it would wait for ever (mpirun --enable-recovery tells
 * nobody; tests/launch/kill.sh). The port's lock file, whose flock the kernel drops with the
 * process, says whether someone still holds the port (gm_compat_port_probe). A peer found
 * closed twice in a row, GMR_PROBE_MS apart, with no BYE from it meanwhile, died. */
void gmr_probe(struct cor_rport *p)
{
    for (uint32_t i = 0; i < p->base.npeers; i++) {
        struct gmr_peer *q = &p->peers[i];
        /* add_peer (another thread, under mem_lock) may be making this peer right now */
        pthread_mutex_lock(&p->mem_lock);
        int added = q->added;
        pthread_mutex_unlock(&p->mem_lock);
        if (i == p->base.self || !added || q->local || q->dead || q->closed) {
            q->probed_closed = 0;
            continue;
        }
        if (gm_compat_port_probe(p->gp, q->node, q->port) == GM_SUCCESS) {
            q->probed_closed = 0;
        } else if (!q->probed_closed) {
            q->probed_closed = 1; /* a BYE may still be on its way: look again next time */
        } else {
            gmr_log("domain %u: nobody holds its port any more (its process is gone): giving "
                    "it up",
                    i);
            gmr_peer_dead(p, i, COR_EPEERDEAD);
        }
    }
}

void gmr_abandon_peer(struct cor_rport *p, uint32_t peer)
{
    struct gmr_peer *q = &p->peers[peer];
    q->dead = 1;
    q->core_dead = 1;
    q->reported = 1; /* the core knows: no peer_failed upcall */
    q->credit_wanted = 0;
    for (uint64_t i = p->d_tail; i < p->d_head; i++) {
        struct gmr_tx *t = tx_at(p, i);
        if (t->peer != peer || (t->state != TX_QUEUED && t->state != TX_INFLIGHT)) continue;
        if (t->state == TX_INFLIGHT) {
            p->tokens++; /* GM may never call back for a dead target */
            p->abandoned++;
        }
        complete(p, t, COR_EPEERDEAD);
    }
    q->nqueued = 0;
    p->pump_dirty = 1;
    if (q->ctrl_busy) {
        q->ctrl_busy = 0;
        q->ctrl_abandoned = 1;
        p->tokens++;
    }
    gmr_live_abandon(p, q);
    /* What libgm still holds for it need not go out (no callbacks: contexts are stale). */
    gm_drop_sends(p->gp, GM_LOW_PRIORITY, q->node, q->port, NULL, NULL);
    gm_drop_sends(p->gp, GM_HIGH_PRIORITY, q->node, q->port, NULL, NULL);
}

static int is_peer_error(gm_status_t st)
{
    return st == GM_SEND_TARGET_PORT_CLOSED || st == GM_SEND_TARGET_NODE_UNREACHABLE ||
           st == GM_SEND_TIMED_OUT || st == GM_SEND_REJECTED || st == GM_SEND_ORPHANED;
}

GMR_THREAD_LOCAL struct cor_rport *gmr_cb_port;

void gmr_unknown(struct cor_rport *p, gm_recv_event_t *e)
{
    struct cor_rport *outer = gmr_cb_port;
    gmr_cb_port = p;
    gm_unknown(p->gp, e);
    gmr_cb_port = outer;
}

/* The live in-flight descriptor number ctx names, or NULL (given up: its peer died). */
static struct gmr_tx *inflight(struct cor_rport *p, void *ctx)
{
    uint64_t seq = (uint64_t)(uintptr_t)ctx;
    if (seq < p->d_tail || seq >= p->d_head) return NULL;
    struct gmr_tx *t = tx_at(p, seq);
    return t->seq == seq && t->state == TX_INFLIGHT ? t : NULL;
}

/* GM completion of a send or put; runs in gm_unknown(), inside the owner's progress(). */
static void on_sent(struct gm_port *gp, void *ctx, gm_status_t st)
{
    struct cor_rport *p = gmr_cb_port;
    if (!p || p->gp != gp) return; /* cannot happen: only gmr_unknown() runs callbacks */
    struct gmr_tx *t = inflight(p, ctx);
    if (!t) return; /* given up when its peer died; its token came back then */
    p->tokens++;
    p->pump_dirty = 1;
    if (st == GM_SUCCESS) {
        /* A send completes when the peer's libgm took it (acknowledged): it is alive. A put
         * or a get is no such sign (on shm a stopped process is written and read all the
         * same). */
        if (t->kind == TX_SEND) p->peers[t->peer].heard = 1;
        complete(p, t, COR_OK);
        return;
    }
    if (t->kind == TX_GET && st == GM_PERMISSION_DENIED) {
        /* the peer's key is not live (its registration went): its memory is not read, the
         * peer is fine; the core asks for the data another way */
        complete(p, t, COR_EINVAL);
        return;
    }
    if (is_peer_error(st)) {
        if (!p->peers[t->peer].dead)
            gmr_log("%s to domain %u failed: %s; giving the domain up",
                    t->kind == TX_PUT   ? "put"
                    : t->kind == TX_GET ? "get"
                                        : "send",
                    t->peer, gm_strerror(st));
        gmr_peer_dead(p, t->peer, COR_EPEERDEAD);
    } else {
        gmr_log("send to domain %u: %s", t->peer, gm_strerror(st));
    }
    complete(p, t, COR_EPEERDEAD);
}

static void start(struct cor_rport *p, struct gmr_tx *t)
{
    struct gmr_peer *q = &p->peers[t->peer];
    p->tokens--;
    t->state = TX_INFLIGHT;
    if (t->kind == TX_SEND) {
        q->credits[t->cls]--;
        /* credits ride on the frame as it leaves, never earlier: small | large << 16 */
        uint32_t back = q->owed[0] | q->owed[1] << 16;
        q->owed[0] = q->owed[1] = 0;
        memcpy(t->buf + 4, &back, 4);
        gm_send_with_callback(p->gp, t->buf, p->cls[t->cls], t->len, GM_LOW_PRIORITY, q->node,
                              q->port, on_sent, (void *)(uintptr_t)t->seq);
        p->frames_out++;
        p->small_out += t->cls == 0;
    } else if (t->kind == TX_GET) {
        gm_compat_get_keyed(p->gp, t->raddr, t->rkey, t->buf, t->len, GM_LOW_PRIORITY, q->node,
                            q->port, on_sent, (void *)(uintptr_t)t->seq);
        p->gets++;
    } else {
        if (t->rkey) /* a remote write at once, not messages until the key is learnt */
            gm_compat_put_keyed(p->gp, t->buf, t->raddr, t->rkey, t->len, GM_LOW_PRIORITY, q->node,
                                q->port, on_sent, (void *)(uintptr_t)t->seq);
        else
            gm_put(p->gp, t->buf, t->raddr, t->len, GM_LOW_PRIORITY, q->node, q->port, on_sent,
                   (void *)(uintptr_t)t->seq);
        p->puts++;
    }
}

/* A control message of ours to q left GM (busy, abandoned: its op's flags). */
static void ctrl_sent(struct gmr_peer *q, int *busy, int *abandoned, gm_status_t st)
{
    if (*abandoned) { /* its token came back when the peer was given up */
        *abandoned = 0;
        return;
    }
    *busy = 0;
    q->port_of->tokens++;
    q->port_of->pump_dirty = 1;
    if (st == GM_SUCCESS) q->heard = 1; /* it acknowledged our message: alive (starving) */
    if (st != GM_SUCCESS && is_peer_error(st)) {
        if (!q->dead)
            gmr_log("control message to domain %u failed: %s; giving the domain up",
                    (unsigned)(q - q->port_of->peers), gm_strerror(st));
        gmr_peer_dead(q->port_of, (uint32_t)(q - q->port_of->peers), COR_EPEERDEAD);
    }
}

static void on_credit_sent(struct gm_port *gp, void *ctx, gm_status_t st)
{
    struct gmr_peer *q = ctx;
    (void)gp;
    ctrl_sent(q, &q->ctrl_busy, &q->ctrl_abandoned, st);
}

static void on_ping_sent(struct gm_port *gp, void *ctx, gm_status_t st)
{
    struct gmr_peer *q = ctx;
    (void)gp;
    ctrl_sent(q, &q->ping_busy, &q->ping_abandoned, st);
}

static void on_pong_sent(struct gm_port *gp, void *ctx, gm_status_t st)
{
    struct gmr_peer *q = ctx;
    (void)gp;
    ctrl_sent(q, &q->pong_busy, &q->pong_abandoned, st);
}

void gmr_send_ctrl(struct cor_rport *p, uint32_t peer, uint32_t op, uint32_t arg)
{
    struct gmr_peer *q = &p->peers[peer];
    char *m = p->ctrl_tx + (size_t)GMR_CTRL_LEN * (GMR_CTRL_SLOTS * peer + op - 1);
    gmr_ctrl_encode(m, p->base.cookie, op, arg, p->inc, q->inc);
    p->tokens--;
    if (op == GMR_OP_CREDIT) q->ctrl_busy = 1;
    gm_send_completion_callback_t cb = op == GMR_OP_CREDIT ? on_credit_sent
                                       : op == GMR_OP_PING ? on_ping_sent
                                       : op == GMR_OP_PONG ? on_pong_sent
                                                           : NULL; /* BYE: the port closes */
    gm_send_with_callback(p->gp, m, GMR_CTRL_CLASS, GMR_CTRL_LEN, GM_HIGH_PRIORITY, q->node,
                          q->port, cb, q);
}

/* The receiver side of flow control: after `owed` of the peer's frames have their buffers
 * back, tell it (on the next frame to it, or by a CREDIT message once half of a class's
 * buffers are owed). */
void gmr_credit_return(struct cor_rport *p, uint32_t peer)
{
    struct gmr_peer *q = &p->peers[peer];
    if (q->dead || ((!p->allot[0] || q->owed[0] < (p->allot[0] + 1) / 2) &&
                    q->owed[1] < (p->allot[1] + 1) / 2))
        return;
    if (!q->ctrl_busy && p->tokens > 0) {
        q->credit_wanted = 0;
        uint32_t n = q->owed[0] | q->owed[1] << 16;
        q->owed[0] = q->owed[1] = 0;
        gmr_send_ctrl(p, peer, GMR_OP_CREDIT, n);
    } else {
        q->credit_wanted = 1;
        p->credit_due = 1;
    }
}

/* Frames wait for `peer`'s credits, or for the send tokens its unacknowledged sends hold. A
 * peer that stays silent that long while holding our frames is given up (GM does not tell us
 * of a process killed on shm; the core cannot tell a route either): its frames complete with
 * COR_EPEERDEAD instead of hanging. Silent: nothing came from it, and none of our sends or
 * control messages to it completed (their callbacks come once its libgm took them). */
static void starving(struct cor_rport *p, uint32_t peer, uint64_t now)
{
    struct gmr_peer *q = &p->peers[peer];
    if (q->heard) { /* it is alive: the silence starts again at the next timed pump */
        q->heard = 0;
        q->starved_since = 0;
    } else if (!now) { /* a pump for credits or tokens that came back: no clock */
    } else if (!q->starved_since) {
        q->starved_since = now;
    } else if (now - q->starved_since > (uint64_t)p->k.dead_ms * 1000000u) {
        gmr_log("domain %u was silent for %u ms while our frames waited for it: giving up", peer,
                p->k.dead_ms);
        gmr_peer_dead(p, peer, COR_ETIMEDOUT); /* silent: the core reports it lost */
    }
}

void gmr_pump(struct cor_rport *p, uint64_t now)
{
    if (p->credit_due) {
        p->credit_due = 0;
        for (uint32_t i = 0; i < p->base.npeers; i++) {
            if (p->peers[i].credit_wanted) {
                p->peers[i].credit_wanted = 0;
                gmr_credit_return(p, i);
            }
            if (p->peers[i].pong_wanted) gmr_pong(p, i);
        }
    }
    /* Frames wait in acceptance order; one without a credit holds back only later frames
     * (and puts) to the same peer. The walk stops once every peer with frames queued is held
     * back: 16 task pairs keep ~1000 frames queued for one peer out of credits, and walking
     * them all at each credit that came back took 6% of a 16-pair message stream's time. */
    p->pump_dirty = 0;
    if (now) p->pump_ns = now;
    unsigned nblocked = 0, waiting = 0;
    for (uint32_t k = 0; k < p->base.npeers; k++)
        waiting += p->peers[k].nqueued > 0;
    for (uint64_t i = p->d_queue; i < p->d_head && p->tokens > 0 && nblocked < waiting; i++) {
        struct gmr_tx *t = tx_at(p, i);
        if (t->state != TX_QUEUED) continue;
        struct gmr_peer *q = &p->peers[t->peer];
        if (q->blocked) continue;
        if (q->closed && !q->dead) gmr_peer_dead(p, t->peer, COR_EPEERDEAD);
        if (q->dead) {
            if (--q->nqueued == 0) waiting--;
            complete(p, t, COR_EPEERDEAD);
        } else if (t->kind == TX_SEND && q->credits[t->cls] == 0) {
            q->blocked = 1;
            p->blocked[nblocked++] = t->peer;
            starving(p, t->peer, now);
        } else {
            if (--q->nqueued == 0) waiting--;
            start(p, t);
        }
    }
    for (unsigned i = 0; i < nblocked; i++)
        p->peers[p->blocked[i]].blocked = 0;
    /* GM holds every send token and frames wait: a peer whose sends hold tokens and that says
     * nothing is as silent as one that returns no credits (a stopped process never acks them;
     * the loop above, which needs a token, never got to its frames). */
    if (now && p->tokens == 0 && p->d_queue < p->d_head) {
        nblocked = 0;
        for (uint64_t i = p->d_tail; i < p->d_queue; i++) {
            struct gmr_tx *t = tx_at(p, i);
            struct gmr_peer *q = &p->peers[t->peer];
            if (t->state != TX_INFLIGHT || q->blocked || q->dead || !q->nqueued) continue;
            q->blocked = 1;
            p->blocked[nblocked++] = t->peer;
        }
        for (unsigned i = 0; i < nblocked; i++) {
            p->peers[p->blocked[i]].blocked = 0;
            starving(p, p->blocked[i], now);
        }
    }
    while (p->d_queue < p->d_head && tx_at(p, p->d_queue)->state != TX_QUEUED)
        p->d_queue++;
    gmr_reclaim(p);
}

/* Takes the next descriptor, or NULL (window full). */
static struct gmr_tx *tx_new(struct cor_rport *p, uint32_t peer, void *cookie, int kind)
{
    if (p->d_head - p->d_tail >= p->k.tx_frames) return NULL;
    struct gmr_tx *t = tx_at(p, p->d_head);
    t->seq = p->d_head;
    t->done.cookie = cookie;
    t->peer = peer;
    t->kind = (uint8_t)kind;
    t->done.status = COR_OK;
    return t;
}

/* Starts it now if nothing waits ahead of it for its peer and a token and a credit are
 * free (frames to other peers that wait for their credits do not hold it back; order is
 * per peer), else queues it. */
static void tx_commit(struct cor_rport *p, struct gmr_tx *t)
{
    p->d_head++;
    struct gmr_peer *q = &p->peers[t->peer];
    if (q->nqueued == 0 && p->tokens > 0 && (t->kind != TX_SEND || q->credits[t->cls] > 0)) {
        if (p->d_queue == p->d_head - 1) p->d_queue++;
        start(p, t);
        return;
    }
    t->state = TX_QUEUED;
    q->nqueued++;
    uint64_t n = p->d_head - p->d_queue;
    if (n > p->queued_max) p->queued_max = n;
}

/* COR_OK to go on, or why a send/put to `peer` is refused now. */
static int peer_check(struct cor_rport *p, cor_peer_t peer)
{
    if (atomic_load_explicit(&p->notes, memory_order_relaxed)) gmr_take_notes(p);
    if (p->base.closing) return COR_ECLOSED;
    if (peer >= p->base.npeers || !p->peers[peer].added) return COR_EINVAL;
    struct gmr_peer *q = &p->peers[peer];
    if (q->closed && !q->dead)
        gmr_peer_dead(p, peer, COR_EPEERDEAD); /* reported by the next progress() */
    return q->dead ? COR_EPEERDEAD : COR_OK;
}

/* The frame leaves now from the core's memory: no copy into the ring, no GM send token, no
 * callback, and no libgm acknowledgement (gm_compat_sendv_now). The route's credits already
 * bound the receiver's buffers of the frame's class, so libgm's window and acks would meter the
 * link a second time. Only when none of this peer's frames waits in our queue (order) and a
 * credit is free; where libgm cannot (not shm, a send to the peer still in its backlog, a frame
 * larger than one injected message) COR_EAGAIN with nothing sent: the frame is then copied and
 * goes the usual way, behind what libgm holds. Its send_done comes at the next progress(). */
static int send_direct(struct cor_rport *p, uint32_t peer, int cls, const struct iovec *iov,
                       int iovcnt, void *cookie)
{
    struct gmr_peer *q = &p->peers[peer];
    if (!p->direct || q->nqueued || !q->credits[cls] || iovcnt > GMR_DIRECT_IOV) return COR_EAGAIN;
    struct gmr_tx *t = tx_new(p, peer, cookie, TX_SEND);
    if (!t) return COR_EAGAIN;
    char hdr[GMR_HDR];
    gmr_data_encode(hdr, p->cookie32, q->owed[0] | q->owed[1] << 16, p->inc, q->inc);
    struct iovec v[1 + GMR_DIRECT_IOV] = {{hdr, GMR_HDR}};
    size_t len = GMR_HDR;
    for (int i = 0; i < iovcnt; i++) {
        v[1 + i] = iov[i];
        len += iov[i].iov_len;
    }
    if (gm_compat_sendv_now(p->gp, v, (unsigned)iovcnt + 1, p->cls[cls], GM_LOW_PRIORITY, q->node,
                            q->port) != GM_SUCCESS)
        return COR_EAGAIN;
    q->owed[0] = q->owed[1] = 0;
    q->credits[cls]--;
    p->d_head++;
    if (p->d_queue == p->d_head - 1) p->d_queue++;
    t->buf = NULL;
    t->len = len;
    t->cls = (uint8_t)cls;
    complete(p, t, COR_OK);
    p->frames_out++;
    p->direct_out++;
    p->small_out += cls == 0;
    return COR_OK;
}

int gmr_send(struct cor_rport *p, cor_peer_t peer, const struct iovec *iov, int iovcnt,
             void *cookie)
{
    if (!p || iovcnt < 0 || (iovcnt > 0 && !iov)) return COR_EINVAL;
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len && !iov[i].iov_base) return COR_EINVAL;
        len += iov[i].iov_len;
        if (len < iov[i].iov_len) return COR_EINVAL;
    }
    size_t max = gm_max_length_for_size(p->k.data_class) - GMR_HDR;
    if (len > max) return COR_EINVAL;
    int cls = p->allot[0] && len + GMR_HDR <= p->small_max ? 0 : 1;
    int rc = peer_check(p, peer);
    if (rc != COR_OK) goto out;
    if ((rc = send_direct(p, peer, cls, iov, iovcnt, cookie)) == COR_OK) goto out;
    struct gmr_tx *t = tx_new(p, peer, cookie, TX_SEND);
    if (!t) goto out;
    char *buf = ring_alloc(p, len + GMR_HDR, &t->end);
    if (!buf) goto out;
    /* credits: filled in when it leaves */
    gmr_data_encode(buf, p->cookie32, 0, p->inc, p->peers[peer].inc);
    size_t off = GMR_HDR;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len) memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    t->buf = buf;
    t->len = off;
    t->cls = (uint8_t)cls;
    tx_commit(p, t);
    rc = COR_OK;
out:
    gmr_publish(p);
    if (rc == COR_OK) gmr_kick(p);
    return rc;
}

/* Whether [l, l + len) lies in mr, a live registration of ours (the memory calls may change
 * the cache from another thread meanwhile: mem_lock). */
static int mr_covers(struct cor_rport *p, struct cor_route_mr *mr, const char *l, size_t len)
{
    int ok = 0;
    pthread_mutex_lock(&p->mem_lock);
    for (struct cor_route_mr *m = p->mrs; m && !ok; m = m->next)
        ok = m == mr && m->refs > 0 && l >= mr->addr && len <= mr->len &&
             l - mr->addr <= (ptrdiff_t)(mr->len - len);
    pthread_mutex_unlock(&p->mem_lock);
    return ok;
}

/* A put or a get of len bytes between local (in mr) and the peer's (raddr, rkey). */
static int rma(struct cor_rport *p, int kind, cor_peer_t peer, const void *local, size_t len,
               struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie)
{
    if (!p || !mr || (!local && len) || raddr + len < raddr) return COR_EINVAL;
    int rc = peer_check(p, peer);
    if (rc != COR_OK) goto out;
    rc = COR_EINVAL;
    if (!mr_covers(p, mr, local, len)) goto out;
    rc = COR_EAGAIN;
    struct gmr_tx *t = tx_new(p, peer, cookie, kind);
    if (!t) goto out;
    t->buf = (char *)local;
    t->len = len;
    t->raddr = raddr;
    t->rkey = rkey;
    tx_commit(p, t);
    rc = COR_OK;
out:
    gmr_publish(p);
    return rc;
}

int gmr_put(struct cor_rport *p, cor_peer_t peer, const void *local, size_t len,
            struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie)
{
    return rma(p, TX_PUT, peer, local, len, mr, raddr, rkey, cookie);
}

/* The peer's key comes with its request to send (the core's receiver-driven rendezvous): a
 * remote read at once, into the receive's own buffer. */
int gmr_get(struct cor_rport *p, cor_peer_t peer, void *local, size_t len, struct cor_route_mr *mr,
            uint64_t raddr, uint64_t rkey, void *cookie)
{
    return rma(p, TX_GET, peer, local, len, mr, raddr, rkey, cookie);
}
