/*
 * Receiving and progress. Data frames arrive at low priority into buffers of two size
 * classes: small (COR_GM_SMALL_CLASS, default 11: frames up to 2 KiB, i.e. control frames and
 * small eager messages) and large (COR_GM_CLASS, default 15). GM matches a message only to a
 * buffer of exactly its class, and libgm keeps per-sender order by holding later messages
 * until earlier ones land; so a sender never sends a frame without a receive credit of its
 * class (gm_tx.c): no message ever waits for a buffer, and no class can stall another.
 * Each buffer is handed to the core's deliver() and provided again right after it returns.
 * Control messages (CREDIT, BYE) arrive at high priority into a few small buffers.
 */
#include <string.h>

#include "gm_port.h"

#define BUDGET 64 /* events per progress() call */

int gmr_rx_setup(struct cor_rport *p)
{
    /* Control buffers: a peer has at most a BYE, a couple of CREDITs, a PING and a PONG in
     * flight to us. */
    p->ctrl_bufs = 5 * p->base.npeers + 4;
    if (p->ctrl_bufs > 32) p->ctrl_bufs = 32;
    /* GM's 254 receive tokens bound the buffers, except where they would leave a domain fewer
     * than 2 large ones (over ~110 domains, as dynamic PVM sessions have): then the port
     * provides 2 per domain anyway, which libgm-compat allows (it does not count tokens). */
    unsigned budget = GMR_RX_TOKENS;
    if (budget < p->ctrl_bufs + 2 * p->base.npeers) budget = p->ctrl_bufs + 2 * p->base.npeers;
    unsigned per = (budget - p->ctrl_bufs) / p->base.npeers;
    p->cls[0] = p->k.small_class;
    p->cls[1] = p->k.data_class;
    /* GM's receive tokens (not memory) are what is scarce, and every frame fits a large
     * buffer: large buffers get their full share first, and the small class only the tokens
     * left over (at least 8 per peer, else no small class on this port: with 4 or more
     * domains at the default 64 credits). Same numbers in every domain (same knobs and
     * npeers), so senders and receivers agree. */
    p->allot[1] = per < p->k.credits ? per : p->k.credits;
    unsigned left = per - p->allot[1];
    p->allot[0] = 0;
    if (p->k.small_class && left >= 8) {
        p->allot[0] = left < p->k.small_credits ? left : p->k.small_credits;
        p->small_max = gm_max_length_for_size(p->cls[0]);
    }
    if (p->allot[1] < 2) {
        gmr_log("%u domains: too many for GM's %u receive tokens per port", p->base.npeers,
                GMR_RX_TOKENS);
        return COR_ELIMIT;
    }
    /* Buffers start 64-byte aligned: a class holds a power of two minus 8, rounded up. */
    size_t off = 0;
    for (int c = 0; c < 2; c++) {
        p->pool_bufs[c] = p->allot[c] * p->base.npeers;
        p->stride[c] = p->allot[c] ? (gm_max_length_for_size(p->cls[c]) + 63) & ~(size_t)63 : 64;
        p->pool_off[c] = off;
        off += p->stride[c] * p->pool_bufs[c];
    }
    p->rx_len = off + 64 * (size_t)p->ctrl_bufs;
    p->rx_mem = gm_dma_malloc(p->gp, p->rx_len);
    if (!p->rx_mem) return COR_ENOMEM;
    for (int c = 0; c < 2; c++)
        for (unsigned i = 0; i < p->pool_bufs[c]; i++)
            gm_provide_receive_buffer_with_tag(p->gp, p->rx_mem + p->pool_off[c] + p->stride[c] * i,
                                               p->cls[c], GM_LOW_PRIORITY, 0);
    char *ctrl = p->rx_mem + off;
    for (unsigned i = 0; i < p->ctrl_bufs; i++)
        gm_provide_receive_buffer_with_tag(p->gp, ctrl + 64 * i, GMR_CTRL_CLASS, GM_HIGH_PRIORITY,
                                           1);
    return COR_OK;
}

static unsigned hash_of(uint32_t key, unsigned mask)
{
    return (unsigned)((key * 2654435761u) >> 8) & mask;
}

int gmr_lookup(struct cor_rport *p, unsigned node, unsigned port, uint32_t *rank)
{
    uint32_t key = node << 8 | port;
    unsigned h = hash_of(key, p->hash_mask);
    for (unsigned n = 0; n <= p->hash_mask; n++, h = (h + 1) & p->hash_mask) {
        uint32_t k = atomic_load_explicit(&p->hash[h].key, memory_order_acquire);
        if (k == 0) return -1;
        if (k == key) {
            *rank = atomic_load_explicit(&p->hash[h].rank, memory_order_acquire);
            return 0;
        }
    }
    return -1;
}

/* Is buf one of our buffers of data class c (0, 1), or (c = -1) a control buffer? */
static int own_buffer(struct cor_rport *p, const char *buf, int c)
{
    if (buf < p->rx_mem || buf >= p->rx_mem + p->rx_len) return 0;
    size_t off = (size_t)(buf - p->rx_mem);
    if (c < 0) {
        size_t ctrl_off = p->pool_off[1] + p->stride[1] * p->pool_bufs[1];
        return off >= ctrl_off && (off - ctrl_off) % 64 == 0;
    }
    return off >= p->pool_off[c] && off < p->pool_off[c] + p->stride[c] * p->pool_bufs[c] &&
           (off - p->pool_off[c]) % p->stride[c] == 0;
}

/* Credits returned by a peer, packed as small | large << 16: valid if neither class gets
 * more back than it has out. */
static int credits_ok(struct cor_rport *p, const struct gmr_peer *q, uint32_t packed)
{
    uint32_t b0 = packed & 0xffff, b1 = packed >> 16;
    return b0 <= p->allot[0] - q->credits[0] && b1 <= p->allot[1] - q->credits[1];
}

static void credits_add(struct cor_rport *p, struct gmr_peer *q, uint32_t packed)
{
    q->credits[0] += packed & 0xffff;
    q->credits[1] += packed >> 16;
    if (packed) p->pump_dirty = 1;
}

/* Buffers delivered by the last progress() go back to GM (and count toward the credits we
 * return) at the start of the next one: off the latency path, where the task whose receive
 * just completed is waiting to run. */
static void give_back(struct cor_rport *p)
{
    unsigned n = p->nreturns;
    p->nreturns = 0;
    for (unsigned i = 0; i < n && !p->base.closing; i++) {
        struct gmr_rx_item *it = &p->returns[i];
        gm_provide_receive_buffer_with_tag(p->gp, it->buf, p->cls[it->c], GM_LOW_PRIORITY, 0);
        p->peers[it->peer].owed[it->c]++;
        gmr_credit_return(p, it->peer);
    }
}

static void on_control(struct cor_rport *p, const char *m, size_t len, uint32_t peer)
{
    uint32_t op, arg;
    struct gmr_peer *q = &p->peers[peer];
    enum gmr_ctrl_verdict v = gmr_ctrl_parse(m, len, p->base.cookie, p->inc, q->inc, &op, &arg);
    if (v == GMR_CTRL_STALE) p->stale_ctrl++;
    if (v != GMR_CTRL_OK || (op == GMR_OP_CREDIT && !credits_ok(p, q, arg))) {
        rutil_port_drop(&p->base);
        return;
    }
    q->heard = q->spoke = 1;
    if (op == GMR_OP_CREDIT)
        credits_add(p, q, arg);
    else if (op == GMR_OP_BYE)
        q->closed = 1; /* its frames sent before BYE may still come: keep receiving */
    else if (op == GMR_OP_PING)
        gmr_pong(p, peer); /* (a PONG only proved it alive: spoke) */
    p->pump_dirty = 1;
}

/* Peers at first contact (route.h, lazy_peers): a data frame from a (node, port) no add_peer
 * named yet, whose header says it is of this session and meant for this port, or (high) a
 * PING checked the same way (the whole session cookie, this port's incarnation): a member
 * that awaits our first message asks whether we live before we ever wrote to it, and a PING
 * dropped here went unanswered until it gave us up (tests/proc/lazypeers.sh's gm tcp ring
 * under ThreadSanitizer: "7 pings sent, 0 answered"). Any other control message from a
 * stranger admits nothing (a BYE: bye_of_member; a CREDIT or PONG answers what we sent, so
 * comes only from a peer we added). The core is
 * asked about the member it should be (need_peer: it looks the member's address up and calls
 * add_peer on our ports), then the sender is looked up again: nothing in the frame is
 * believed, only an address the member published can name (node, port). When our node id is
 * our rank + 1 (the route's own node map, or COR_GM_NODE_ID=rank: every domain of a session
 * is started alike) the sender is asked about as rank node - 1; otherwise (a user's map whose
 * ids say nothing of ranks) every member not added yet is, once per port (what the eager way
 * did at cor_init). Made from inside progress(), no lock of ours held. 1 if the sender is a
 * member now (*peer). */
static int stranger(struct cor_rport *p, const char *buf, size_t len, int high, unsigned node,
                    unsigned port, uint32_t *peer)
{
    uint32_t credits, op, arg;
    if (p->swept) return 0;
    if (high ? gmr_ctrl_parse(buf, len, p->base.cookie, p->inc, 0, &op, &arg) != GMR_CTRL_OK ||
                   op != GMR_OP_PING
             : gmr_data_parse(buf, len, p->cookie32, p->inc, 0, &credits) != GMR_CTRL_OK)
        return 0;
    if (p->rank_nodes) {
        uint32_t r = node - 1;
        if (node == 0 || r >= p->base.npeers || r == p->base.self) return 0;
        if (p->base.up.need_peer(p->base.up.core, r) == COR_ENOTSUP) p->swept = 1;
        return gmr_lookup(p, node, port, peer) == 0;
    }
    p->swept = 1;
    for (uint32_t r = 0; r < p->base.npeers; r++) {
        if (r == p->base.self) continue;
        pthread_mutex_lock(&p->mem_lock);
        int added = p->peers[r].added;
        pthread_mutex_unlock(&p->mem_lock);
        if (!added && p->base.up.need_peer(p->base.up.core, r) == COR_ENOTSUP) return 0;
    }
    return gmr_lookup(p, node, port, peer) == 0;
}

/* A BYE of this session from a port we never added: a member that added us (it posted a
 * receive from us, or looked everyone up) and never wrote to us. Nothing of ours is about it:
 * not a drop. */
static int bye_of_member(struct cor_rport *p, const char *buf, size_t len)
{
    uint32_t op, arg;
    return gmr_ctrl_parse(buf, len, p->base.cookie, p->inc, 0, &op, &arg) == GMR_CTRL_OK &&
           op == GMR_OP_BYE;
}

/* Drains one receive event into `it` (data to deliver) or handles it (owner). Returns 1
 * if a data frame was queued for delivery. */
static int on_recv(struct cor_rport *p, gm_recv_event_t *e, struct gmr_rx_item *it)
{
    int high = GM_RECV_EVENT_TYPE(e) == GM_HIGH_RECV_EVENT;
    char *buf = gm_ntohp(e->recv.buffer);
    size_t len = gm_ntoh_u32(e->recv.length);
    unsigned node = gm_ntoh_u16(e->recv.sender_node_id);
    unsigned port = gm_ntoh_u8(e->recv.sender_port_id);
    unsigned size = gm_ntoh_u8(e->recv.size);
    /* Which of our pools: control (high), else by the class GM says it matched. */
    int c = high ? -1 : (p->allot[0] && size == p->cls[0]) ? 0 : 1;
    if (!own_buffer(p, buf, c)) {
        /* Not ours (cannot happen with a correct libgm): never touch or re-provide it. */
        rutil_port_drop(&p->base);
        return 0;
    }
    uint32_t peer;
    int ok = gmr_lookup(p, node, port, &peer) == 0;
    if (!ok && p->base.up.need_peer) ok = stranger(p, buf, len, high, node, port, &peer);
    if (high) {
        if (ok && size == GMR_CTRL_CLASS && len <= 64)
            on_control(p, buf, len, peer);
        else if (!bye_of_member(p, buf, len))
            rutil_port_drop(&p->base);
        gm_provide_receive_buffer_with_tag(p->gp, buf, GMR_CTRL_CLASS, GM_HIGH_PRIORITY, 1);
        return 0;
    }
    /* A new occupant of a rank given up: its note first (add_peer, before it could send). */
    if (ok && p->peers[peer].core_dead &&
        atomic_load_explicit(&p->peers[peer].readmit_note, memory_order_acquire))
        gmr_take_notes(p);
    if (ok && p->peers[peer].core_dead) {
        /* The core already failed everything toward it: late frames would only match
         * requests that no longer wait (or new ones posted after the death was known). */
        p->from_dead++;
        gm_provide_receive_buffer_with_tag(p->gp, buf, p->cls[c], GM_LOW_PRIORITY, 0);
        return 0;
    }
    if (ok && size == p->cls[c] && len >= GMR_HDR && len <= gm_max_length_for_size(p->cls[c])) {
        struct gmr_peer *q = &p->peers[peer];
        uint32_t credits;
        enum gmr_ctrl_verdict v = gmr_data_parse(buf, len, p->cookie32, p->inc, q->inc, &credits);
        if (v == GMR_CTRL_STALE && atomic_load_explicit(&q->readmit_note, memory_order_acquire)) {
            gmr_take_notes(p); /* a new occupant's first frame, before we took its note */
            v = gmr_data_parse(buf, len, p->cookie32, p->inc, q->inc, &credits);
        }
        /* A frame of the rank's earlier occupant (or meant for our earlier port): its credits
         * are not the new occupant's, and the core must not see it. */
        if (v == GMR_CTRL_STALE) p->stale_data++;
        if (v == GMR_CTRL_OK && credits_ok(p, q, credits)) {
            credits_add(p, q, credits); /* piggy-backed receive credits */
            q->heard = q->spoke = 1;
            *it = (struct gmr_rx_item){peer, buf, len, c};
            return 1;
        }
    }
    rutil_port_drop(&p->base);
    gm_provide_receive_buffer_with_tag(p->gp, buf, p->cls[c], GM_LOW_PRIORITY, 0);
    return 0;
}

int gmr_report(struct cor_rport *p)
{
    int events = 0;
    while (p->base.done_head || p->base.fails.n) {
        struct rutil_done_copy batch[64];
        unsigned nb = 0;
        /* Deaths first, so the core knows why the sends that follow failed. */
        uint32_t nf = rutil_fails_take(&p->base.fails);
        /* Copied out, oldest first: the descriptors are free again before the upcalls, for
         * the sends those make. */
        struct rutil_done *d;
        while (nb < 64 && (d = rutil_done_pop(&p->base))) {
            struct gmr_tx *t = rutil_container_of(d, struct gmr_tx, done);
            batch[nb++] = (struct rutil_done_copy){d->cookie, d->status};
            t->state = TX_FREE;
        }
        gmr_reclaim(p);
        rutil_port_report_failed(&p->base, nf);
        events += rutil_port_report_copies(&p->base, batch, nb);
    }
    return events;
}

/* The queue's pump, the reports of finished sends and the activity stamp: the part of a
 * progress() call that need not come before a frame's delivery. */
static int after_events(struct cor_rport *p, int events)
{
    /* The queue is walked only when it may move (walking it on every poll of a spinning task
     * costs O(queue) each), or every 50 ms for the starvation check; a busy poll looks at the
     * clock for that only every 64th time (a reading costs 20+ ns here, and 16 task pairs kept
     * frames queued, and read the clock, at nearly every poll). */
    uint64_t now = 0;
    if (p->d_queue < p->d_head && (!events || (p->busy_polls & 63) == 0)) {
        now = rutil_now_ns();
        if (now - p->pump_ns <= 50000000u) now = 0; /* not due */
    }
    if (p->credit_due || (p->d_queue < p->d_head && (p->pump_dirty || now))) gmr_pump(p, now);
    /* The core waits for some peer's answer: is it alive? (gm_live.c; same clock rule) */
    if (atomic_load_explicit(&p->awaiting, memory_order_relaxed) > 0 &&
        (!events || (p->busy_polls & 63) == 0)) {
        uint64_t t = now ? now : rutil_now_ns();
        if (t - p->live_ns > 50000000u) gmr_liveness(p, t);
    }
    return gmr_report(p);
}

/* Polls GM until an event brings a data frame (or BUDGET events, or none is left) and delivers
 * it at once: a task spinning for that frame sees its receive complete without waiting for
 * more polls or for the buffer to go back (give_back, next time). In a stream (the last call
 * found events too) it takes up to GMR_RX_BATCH frames first: one port ownership, hint and
 * delivery loop for all (8 B, 16 task pairs: 0.42-0.91 -> 1.04-1.30 M msg/s). What can wait
 * (the pump, the reports of sends that finished, the clock) waits for the next call after a
 * delivery, which comes while the task answers (a ping-pong's receive spent ~40% of its route
 * time on them); the call after that never skips them, so a stream cannot starve them. */
/* Nothing for progress() to do but ask GM: no notes or probe, no buffers to give back, no
 * clock to read, nothing queued, reported or owed, nobody awaited, and the last call found
 * nothing (so its hints, published then, still hold). */
static int quiet(struct cor_rport *p)
{
    return !p->nreturns && !p->stamp_due && !p->was_busy && !p->deferred && !p->credit_due &&
           p->d_queue == p->d_head && !p->base.done_head && !p->base.fails.n &&
           !atomic_load_explicit(&p->notes, memory_order_relaxed) &&
           !atomic_load_explicit(&p->probe_due, memory_order_relaxed) &&
           !atomic_load_explicit(&p->awaiting, memory_order_relaxed);
}

int gmr_progress(struct cor_rport *p)
{
    if (!p) return 0;
    int events = 0;
    if (p->base.closing) return 0;
    /* A spinning task's idle poll of a quiet port is GM's receive alone: what follows would
     * find nothing to do (~130 instructions of a ~350-instruction poll before). */
    gm_recv_event_t *first = NULL;
    if (quiet(p)) {
        first = gm_receive(p->gp);
        if (GM_RECV_EVENT_TYPE(first) == GM_NO_RECV_EVENT) return 0;
    }
    if (atomic_load_explicit(&p->notes, memory_order_relaxed)) gmr_take_notes(p);
    if (atomic_load_explicit(&p->probe_due, memory_order_relaxed) &&
        atomic_exchange(&p->probe_due, 0))
        gmr_probe(p);
    /* The time of the last activity, for wait()'s naps: after the first busy poll that follows
     * an idle one and then every 8th (a few microseconds late at most, for a nap of 1/16 the
     * idle time). */
    if (p->stamp_due) {
        p->stamp_due = 0;
        p->active_ns = rutil_now_ns();
    }
    give_back(p);
    struct gmr_rx_item *items = p->returns;
    unsigned n = 0, batch = p->was_busy ? GMR_RX_BATCH : 1;
    for (int i = 0; i < BUDGET && n < batch; i++) {
        gm_recv_event_t *e = first ? first : gm_receive(p->gp);
        first = NULL;
        unsigned type = GM_RECV_EVENT_TYPE(e);
        if (type == GM_NO_RECV_EVENT) break;
        if (type == GM_RECV_EVENT || type == GM_HIGH_RECV_EVENT)
            n += (unsigned)on_recv(p, e, &items[n]);
        else
            gmr_unknown(p, e); /* send callbacks, alarms */
        events++;
    }
    if (events) {
        p->busy_polls++;
        p->stamp_due = !p->was_busy || (p->busy_polls & 7) == 0;
    }
    p->was_busy = events > 0;
    int skip = n && !p->deferred;
    p->deferred = skip;
    if (!skip) events += after_events(p, events);
    if (n) {
        /* given back at the next call: deliver() is done with them by then, and no other
         * thread calls us meanwhile (one owner per port, route.h) */
        p->nreturns = n;
        p->frames_in += n;
    }
    gmr_publish(p);
    for (unsigned i = 0; i < n; i++)
        p->base.up.deliver(p->base.up.core, items[i].peer, items[i].buf + GMR_HDR,
                           items[i].len - GMR_HDR);
    return events;
}
