/*
 * Receive side and timers of CoRudpRoute: the progress() op. One non-blocking recvmmsg per
 * round; each datagram is checked (parser, cookie, ranks, source address) before anything in
 * it is believed, then its acknowledgement and its fragment are applied under the port lock.
 * Frames are handed to the core after the lock is released, straight from the receive
 * buffer when a frame fits one datagram.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "udp_port.h"

/* Receive rounds per progress() call: bounds the work done in one call. */
#define UDP_ROUNDS 4
/* Seqs resent per timer or ack. */
#define UDP_RESEND_MAX 32
/* Refused datagrams read per round. */
#define UDP_REFUSALS_MAX 16
/* How often the error queue is read without an error reported. */
#define UDP_ERRQ_CHECK_NS 100000000ull
/* Silence after a refusal before the peer is given up. */
#define UDP_REFUSED_GRACE_NS 200000000ull
/* Probes a port sends per second at most, over all its peers (probe_interval). */
#define UDP_PROBE_RATE 32u

struct ack_ctx {
    struct cor_rport *p;
    struct udp_peer *peer;
};

/* A datagram was released by a cumulative ack; its frame is done after its last one.
 * Frames complete in order, so that frame is the peer's head. */
static void released(void *vctx, struct udp_sslot *s)
{
    struct ack_ctx *c = vctx;
    struct udp_frame *f = s->frame;
    if (!s->last || f != c->peer->head) return;
    c->peer->head = f->next;
    if (!c->peer->head) c->peer->tail = NULL;
    c->peer->nframes--;
    rutil_done_push(&c->p->base, &f->done, COR_OK);
}

static int dl_push(struct cor_rport *p, cor_peer_t peer, const void *frame, size_t len,
                   void *to_free)
{
    if (p->ndl == p->cap_dl) {
        size_t cap = p->cap_dl ? 2 * p->cap_dl : 64;
        struct udp_delivery *d = realloc(p->dl, cap * sizeof(*d));
        if (!d) return -1;
        p->dl = d;
        p->cap_dl = cap;
    }
    p->dl[p->ndl++] = (struct udp_delivery){peer, frame, len, to_free};
    return 0;
}

/* Feeds one in-order fragment; `stored` is its malloc'd copy or NULL (in the rx buffer).
 * Returns 0 when consumed, -1 when it must stay where it is (no memory, or peer failed). */
static int take_fragment(struct cor_rport *p, struct udp_peer *peer, const struct udp_hdr *h,
                         const uint8_t *payload, uint8_t *stored)
{
    /* Reserve the delivery slot first, so a completed frame is never lost. */
    if (p->ndl == p->cap_dl) {
        if (dl_push(p, 0, NULL, 0, NULL) != 0) return -1;
        p->ndl--;
    }
    uint8_t *frame = NULL;
    size_t len = 0;
    switch (udp_reasm_feed(&peer->ra, h, payload, &frame, &len)) {
    case UDP_RA_SINGLE:
        dl_push(p, peer->rank, frame, len, stored);
        return 0;
    case UDP_RA_DONE:
        dl_push(p, peer->rank, frame, len, frame);
        free(stored);
        return 0;
    case UDP_RA_MORE:
        free(stored);
        return 0;
    case UDP_RA_NOMEM:
        return -1;
    default: /* a session member breaking the protocol: give up on it */
        rutil_port_drop(&p->base);
        udp_log("peer %u sent an inconsistent fragment (seq %u off %u len %u of %u): giving up",
                peer->rank, h->seq, h->frag_off, h->len, h->frame_len);
        udp_fail_peer(p, peer->rank, COR_EPROTO);
        return -1;
    }
}

static void data_in(struct cor_rport *p, struct udp_peer *peer, const struct udp_hdr *h,
                    const uint8_t *payload, uint64_t now)
{
    struct udp_rwin *rw = &peer->rw;
    peer->ack_owed++;
    peer->ack_owed_bytes += h->len;
    /* A quarter of a window unacknowledged: ack now, so the sender never stalls on a full
     * window while we sit on its acks. */
    if (peer->ack_owed_bytes >= p->k.window_bytes / 4) peer->ack_now = 1;
    if (h->flags & UDP_F_ACKNOW) peer->ack_now = 1;
    /* Every datagram is acknowledged within ack_delay even if its ACKREQ flag was lost with
     * a later datagram; a reply sent sooner carries the ack for free. */
    if (!peer->ack_due) {
        peer->ack_due = now + p->k.ack_delay_ns;
        udp_timer_at(p, peer->ack_due);
    }
    switch (udp_rwin_classify(rw, h->seq)) {
    case UDP_RX_NEXT:
        /* Echo the timestamp of the datagram that moves our window (RFC 7323's rule): a
         * resend that fills a hole measures the resend's own round trip. */
        if (!peer->ts_echo_valid) {
            peer->ts_echo = h->tsval;
            peer->ts_echo_valid = 1;
        }
        if (take_fragment(p, peer, h, payload, NULL) != 0) return;
        udp_rwin_advance(rw);
        /* Early datagrams that are now in order. */
        for (struct udp_rslot *s; peer->dest->state == UDP_PEER_UP && (s = udp_rwin_ready(rw));) {
            struct udp_hdr sh = s->hdr;
            if (take_fragment(p, peer, &sh, s->data, s->data) != 0) break;
            /* take_fragment now owns the copy (freed, or freed after delivery). */
            s->data = NULL;
            udp_rwin_advance(rw);
        }
        if (peer->dest->state == UDP_PEER_UP && rw->stored)
            peer->ack_now = 1; /* a hole remains: tell the sender at once */
        break;
    case UDP_RX_STORE:
        udp_rwin_store(rw, h, payload); /* over budget: dropped, it will be resent */
        peer->ack_now = 1;              /* a hole: the selective ack triggers a resend */
        break;
    case UDP_RX_DUP:
        p->dups++;
        peer->ack_now = 1; /* our ack was probably lost */
        break;
    default:
        p->beyond++;
        peer->ack_now = 1;
        break;
    }
}

static void datagram_in(struct cor_rport *p, const uint8_t *buf, size_t n,
                        const struct sockaddr_in *from, int truncated, uint64_t now)
{
    struct udp_hdr h;
    if (truncated || udp_wire_parse(buf, n, UDP_FRAME_MAX, &h) != UDP_W_OK ||
        h.cookie != p->base.cookie || h.dst != p->base.self || h.src >= p->base.npeers) {
        rutil_port_drop(&p->base);
        return;
    }
    const struct udp_dest *d = &p->dests[h.src];
    struct udp_peer *peer;
    if (d->state != UDP_PEER_UP || from->sin_family != AF_INET ||
        from->sin_addr.s_addr != d->sa.sin_addr.s_addr || from->sin_port != d->sa.sin_port) {
        rutil_port_drop(&p->base);
        return;
    }
    /* An ACK from a member we sent nothing (we hold no state for it) acknowledges nothing: a
     * probe of its sweep (below). Taken without making state, or every sweep would give each
     * domain state for every other. */
    if (h.type == UDP_T_ACK && !p->peers[h.src]) {
        if (h.flags & UDP_F_PING) { /* answered all the same: it awaits us, we live */
            udp_send_sweep(p, h.src, now);
            p->pongs++;
        }
        return;
    }
    if (!(peer = udp_peer_get(p, h.src))) {
        rutil_port_drop(&p->base);
        return;
    }
    struct ack_ctx c = {p, peer};
    uint64_t waited = udp_swin_inflight(&peer->sw) ? now - peer->sw.last_progress_ns : 0;
    int heard = peer->heard;
    peer->heard = 1;
    peer->heard_ns = now;
    int released_n = udp_swin_ack(&peer->sw, h.ack, h.sack, now, released, &c);
    if (waited && peer->sw.last_progress_ns == now && waited > p->silence_max[heard])
        p->silence_max[heard] = waited;
    if (released_n >= 0 && h.tsecr) {
        uint32_t rtt_us = udp_ts(now) - h.tsecr;
        if (rtt_us < 60000000u) { /* else a stale or bogus echo */
            udp_swin_echo(&peer->sw, now - (uint64_t)rtt_us * 1000);
            udp_swin_rtt(&peer->sw, (uint64_t)rtt_us * 1000);
            p->rto_hint = udp_rtt_feed(&p->srtt, &p->rttvar, (uint64_t)rtt_us * 1000);
        }
    }
    if (released_n > 0 && peer->sw.in_recovery) {
        uint32_t seqs[UDP_RESEND_MAX];
        int k = udp_swin_recovery(&peer->sw, released_n, seqs, UDP_RESEND_MAX);
        if (k) udp_resend(p, peer, seqs, k, now);
    }
    if (released_n >= 0 && h.sack) {
        uint32_t seqs[UDP_RESEND_MAX];
        int k = udp_swin_fast(&peer->sw, now, seqs, UDP_RESEND_MAX);
        if (k) udp_resend(p, peer, seqs, k, now);
    }
    if (!peer->touched) {
        peer->touched = 1;
        p->touched[p->ntouched++] = peer->rank;
    }
    if (h.type == UDP_T_DATA) data_in(p, peer, &h, buf + UDP_HDR_LEN, now);
    if (h.flags & UDP_F_PING) peer->pong_owed = 1; /* (the parser allows it on ACKs only) */
}

/* Datagrams of ours that hosts refused: the port they went to is closed, so the peer's
 * process is gone (a slow or stopped one still has its port and says nothing). A peer that
 * has data in flight and stays silent UDP_REFUSED_GRACE_NS after a refusal is given up then,
 * without waiting out the dead time (run_timers). The grace lets two domains that finalize
 * together close their ports in peace (the last control frame of one may find the other's
 * port just closed), and an acknowledgement that still comes (a forged ICMP error) cancels
 * it. Only a refusal naming a session member at the address add_peer gave counts. A
 * refusal older than the peer's last probe is replaced, so the probe's own is judged. */
static void refusals_in(struct cor_rport *p, const struct udp_refusal *rf, int n, uint64_t now)
{
    for (int i = 0; i < n; i++) {
        uint64_t cookie;
        uint32_t src, dst;
        if (udp_wire_peek(rf[i].head, rf[i].len, &cookie, &src, &dst) != UDP_W_OK ||
            cookie != p->base.cookie || src != p->base.self || dst >= p->base.npeers)
            continue;
        const struct udp_dest *d = &p->dests[dst];
        struct udp_peer *peer = p->peers[dst];
        if (d->state != UDP_PEER_UP || rf[i].to.sin_addr.s_addr != d->sa.sin_addr.s_addr ||
            rf[i].to.sin_port != d->sa.sin_port)
            continue;
        if (!peer) {
            /* The sweep's probe of a peer never talked to (nothing else goes to one): its
             * port is closed. It gets state now, as if probed and refused, so that the same
             * grace (run_timers) gives it up unless it speaks. */
            if (!(peer = udp_peer_get(p, dst))) continue;
            peer->probed_ns = now;
            peer->heard_ns = now - 1;
        } else if (peer->refused_ns && peer->refused_ns >= peer->probed_ns) {
            continue;
        }
        peer->refused_ns = now;
        udp_timer_at(p, now + UDP_REFUSED_GRACE_NS);
    }
}

/* Peers heard from in this batch: send what the opened window allows, then owed acks. */
static void after_batch(struct cor_rport *p, uint64_t now)
{
    for (uint32_t i = 0; i < p->ntouched; i++) {
        struct udp_peer *peer = p->peers[p->touched[i]];
        peer->touched = 0;
        if (peer->dest->state != UDP_PEER_UP) continue;
        udp_pump(p, peer, now);
        if (peer->ack_owed && (peer->ack_now || peer->ack_owed >= p->k.ack_every)) {
            udp_send_ack(p, peer, now);
        } else if (peer->pong_owed) { /* the answer to its PING (udp_await.c) */
            udp_send_ack(p, peer, now);
            p->pongs++;
        }
        udp_timer_at(p, udp_swin_deadline(&peer->sw));
    }
    p->ntouched = 0;
}

/* Probes. A peer killed after it acknowledged all our datagrams gets nothing more from us, so
 * neither the retransmission timer nor its host's refusal tells us it is gone, and a domain
 * that only waits for its answer (a clear-to-send, a reply) would wait for ever when the
 * launcher tells nobody (mpirun --enable-recovery). So a peer with nothing of ours in flight
 * that was silent for the probe interval gets a header-only ACK (our current acknowledgement
 * state, harmless to a live peer; it needs no answer): a live peer's port takes it in, even
 * when the peer is stopped or starved, and says nothing, so a probe never gives a live peer
 * up; a closed port makes its host refuse it, and the refusal path above gives the peer up
 * UDP_REFUSED_GRACE_NS later unless it speaks meanwhile. Only peers this port talked to
 * (those with a udp_peer) are probed, and at most UDP_PROBE_RATE a second over all of them:
 * the interval is COR_UDP_PROBE_MS, longer when many peers share the budget (256 peers: 8 s),
 * so a port's probe traffic stays bounded whatever the session size. */
static uint64_t probe_interval(const struct cor_rport *p)
{
    uint64_t spread = (uint64_t)p->nactive * (1000000000ull / UDP_PROBE_RATE);
    return spread > p->k.probe_ns ? spread : p->k.probe_ns;
}

/* A probe went out after the peer last spoke, and its port refused a datagram since. */
static int probe_refused(const struct udp_peer *peer)
{
    return peer->probed_ns && peer->heard_ns < peer->probed_ns &&
           peer->refused_ns >= peer->probed_ns;
}

/* When the peer's next probe is due (0: none: probes off, data in flight, which the
 * retransmission timer and the refusal path cover, or a refused probe in its grace, which a
 * new probe would restart). */
static uint64_t probe_due(const struct cor_rport *p, const struct udp_peer *peer, uint64_t every)
{
    if (!p->k.probe_ns || udp_swin_inflight(&peer->sw) || probe_refused(peer)) return 0;
    uint64_t last = peer->heard_ns > peer->probed_ns ? peer->heard_ns : peer->probed_ns;
    return last + every;
}

/* The sweep: peers this port never talked to. Nothing goes to them, so if one dies nothing
 * tells us, and a domain whose wait involves it without a message (a launcher's barrier
 * under mpirun --enable-recovery, which tells nobody of a death) would wait for ever. So the
 * port probes them too, one at a time, round-robin: each gets a header-only ACK
 * acknowledging nothing (a live port takes it without making state for us, datagram_in) once
 * per max(COR_UDP_PROBE_MS, M/UDP_PROBE_RATE s) for M such peers: for 3 every second, 256
 * every 8 s, at most UDP_PROBE_RATE probes a second beside those of the talked-to peers. A
 * closed port makes its host refuse the probe, and refusals_in gives the peer the state of a
 * probed, refused one: given up UDP_REFUSED_GRACE_NS later (COR_EPEERDEAD) unless it speaks.
 * With none to sweep the port sets no timer (an idle port sleeps); add_peer starts it again.
 * Returns when the next sweep probe is due (0: none). */
static bool sweepable(const struct cor_rport *p, uint32_t r)
{
    return r != p->base.self && !p->peers[r] && p->dests[r].state == UDP_PEER_UP;
}

static uint64_t sweep(struct cor_rport *p, uint64_t now)
{
    uint32_t n = p->base.npeers;
    if (!p->k.probe_ns || n < 2 || p->nactive >= n - 1) return p->sweep_ns = 0;
    if (!p->sweep_ns) p->sweep_ns = now + p->k.probe_ns; /* not before the session had a moment */
    if (now < p->sweep_ns) return p->sweep_ns;
    /* One turn: the first rank not talked to from where the last probe stopped, and how many
     * such ranks there are (the pace). */
    uint32_t left = 0, pick = n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = (p->sweep_rank + i) % n;
        if (!sweepable(p, r)) continue;
        if (pick == n) pick = r;
        left++;
    }
    if (!left) return p->sweep_ns = 0;
    udp_send_sweep(p, pick, now);
    p->sweeps++;
    p->sweep_rank = (pick + 1) % n;
    uint64_t spread = (uint64_t)left * (1000000000ull / UDP_PROBE_RATE);
    p->sweep_ns = now + (spread > p->k.probe_ns ? spread : p->k.probe_ns) / left;
    return p->sweep_ns;
}

/* Timers: retransmission, dead peers, delayed acks, held datagrams, probes, awaited peers
 * (udp_await.c). Recomputes timer_ns.
 * drained: the socket had nothing more to read, so a peer's acknowledgements cannot be
 * waiting unread behind us (after this process was descheduled a while): only then is
 * silence judged. */
static void run_timers(struct cor_rport *p, uint64_t now, int drained)
{
    uint64_t next = UINT64_MAX;
    uint64_t every = probe_interval(p);
    /* before the peers' waits are read */
    if (__atomic_exchange_n(&p->await_kick, 0, __ATOMIC_SEQ_CST)) udp_await_strangers(p);
    udp_sock_release(&p->sock, now);
    for (uint32_t i = 0; i < p->nactive; i++) {
        struct udp_peer *peer = p->peers[p->active[i]];
        if (peer->dest->state != UDP_PEER_UP) continue;
        struct udp_swin *sw = &peer->sw;
        uint64_t dead_ns = p->k.dead_ns;
        if (peer->refused_ns &&
            (sw->last_progress_ns > peer->refused_ns || peer->heard_ns > peer->refused_ns))
            peer->refused_ns = 0; /* it spoke since: its port is open */
        if (drained && peer->refused_ns && (udp_swin_inflight(sw) || probe_refused(peer)) &&
            now - peer->refused_ns >= UDP_REFUSED_GRACE_NS) {
            udp_log("peer %u's port is closed (its process ended): giving up", peer->rank);
            udp_fail_peer(p, peer->rank, COR_EPEERDEAD);
            continue;
        }
        /* Silence alone: a peer whose process ended is refused by its host (above) */
        if (drained && udp_swin_dead(sw, now, dead_ns)) {
            udp_log("peer %u acknowledged nothing for %llu ms%s: giving up", peer->rank,
                    (unsigned long long)(dead_ns / 1000000),
                    peer->heard ? "" : " (it never answered)");
            udp_fail_peer(p, peer->rank, COR_ETIMEDOUT); /* silent: the core reports it lost */
            continue;
        }
        uint32_t seqs[UDP_RESEND_MAX];
        int k = udp_swin_timeout(sw, now, seqs, UDP_RESEND_MAX);
        if (k) udp_swin_rto_hint(sw, p->rto_hint);
        if (k) {
            p->timeouts++;
            udp_resend(p, peer, seqs, k, now);
        }
        if (peer->unsent) udp_pump(p, peer, now);
        if (peer->ack_owed && peer->ack_due && now >= peer->ack_due) udp_send_ack(p, peer, now);
        int gave_up = 0;
        uint64_t await_at = udp_await_timer(p, peer, now, drained, &gave_up);
        if (gave_up) continue;
        uint64_t probe_at = probe_due(p, peer, every);
        if (probe_at && now >= probe_at) {
            udp_send_ack(p, peer, now);
            peer->probed_ns = now;
            p->probes++;
            probe_at = now + every;
        }
        uint64_t t[7] = {udp_swin_deadline(sw),
                         udp_swin_inflight(sw) ? sw->last_progress_ns + dead_ns : 0,
                         peer->ack_owed ? (peer->ack_due ? peer->ack_due : now + 100000) : 0,
                         peer->unsent && !udp_swin_inflight(sw) ? now + 100000 : 0,
                         /* a refusal that can give the peer up (a stale one would keep
                          * the timer in the past) */
                         peer->refused_ns && (udp_swin_inflight(sw) || probe_refused(peer))
                             ? peer->refused_ns + UDP_REFUSED_GRACE_NS
                             : 0,
                         probe_at, await_at};
        for (int j = 0; j < 7; j++)
            if (t[j] && t[j] < next) next = t[j];
    }
    uint64_t held = udp_sock_held_due(&p->sock), swept = sweep(p, now);
    if (held && held < next) next = held;
    if (swept && swept < next) next = swept;
    __atomic_store_n(&p->timer_ns, next, __ATOMIC_SEQ_CST);
    /* A wait that began meanwhile (udp_await.c) may have lowered the timer before our store:
     * look again at once. */
    if (__atomic_load_n(&p->await_kick, __ATOMIC_SEQ_CST)) udp_timer_at(p, now);
}

/* Makes the callbacks collected under the lock; the lock is not held. */
static int callbacks(struct cor_rport *p, uint32_t nfl, struct rutil_done *done)
{
    int events = 0;
    rutil_port_report_failed(&p->base, nfl);
    for (size_t i = 0; i < p->ndl; i++) {
        struct udp_delivery *d = &p->dl[i];
        p->base.up.deliver(p->base.up.core, d->peer, d->frame, d->len);
        free(d->to_free);
        events++;
    }
    p->ndl = 0;
    events += udp_done_run(p, done);
    return events;
}

/* Peers at first contact (route.h, lazy_peers): datagrams of this batch from session members
 * no add_peer named yet are offered to the core (need_peer), which adds them to the port, so
 * that datagram_in takes them (after the usual checks, the source address included) instead
 * of dropping them until the sender's retransmission. Only the header's claims are used
 * here, to pick whom to ask about: nothing in the datagram is believed before datagram_in.
 * No lock held (the core's add_peer takes it). */
static void strangers_in(struct cor_rport *p, int n)
{
    uint32_t ask[UDP_BATCH_MAX];
    int nask = 0;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < n; i++) {
        uint64_t cookie;
        uint32_t src, dst;
        if (udp_wire_peek(p->rx_iov[i].iov_base, p->rx_msg[i].msg_len, &cookie, &src, &dst) !=
                UDP_W_OK ||
            cookie != p->base.cookie || dst != p->base.self || src >= p->base.npeers ||
            src == p->base.self || p->dests[src].state != UDP_PEER_NONE)
            continue;
        int seen = 0;
        for (int k = 0; k < nask && !seen; k++)
            seen = ask[k] == src;
        if (!seen) ask[nask++] = src;
    }
    pthread_mutex_unlock(&p->lock);
    for (int k = 0; k < nask; k++)
        p->base.up.need_peer(p->base.up.core, ask[k]);
}

int udp_op_progress(struct cor_rport *p)
{
    if (!p) return 0;
    int events = 0;
    unsigned batch = p->k.batch;
    for (int round = 0; round < UDP_ROUNDS; round++) {
        for (unsigned i = 0; i < batch; i++) {
            p->rx_msg[i].msg_hdr.msg_namelen = sizeof(p->rx_from[i]);
            p->rx_msg[i].msg_hdr.msg_flags = 0;
        }
        int n = udp_sock_recv(&p->sock, p->rx_msg, batch);
        struct udp_refusal rf[UDP_REFUSALS_MAX];
        uint64_t now = rutil_now_ns();
        int timers = now >= __atomic_load_n(&p->timer_ns, __ATOMIC_RELAXED);
        /* Every UDP_ERRQ_CHECK_NS too, in case an error entry came without an error report
         * (a local one): poll() would report POLLERR for it. Not more often: it is a system
         * call, and timers run at every delayed acknowledgement (1-2 us a message). */
        int look = timers && round == 0 && now >= p->errq_check_ns;
        if (look) p->errq_check_ns = now + UDP_ERRQ_CHECK_NS;
        int nrf = udp_sock_refused(&p->sock, rf, UDP_REFUSALS_MAX, look);
        if (n <= 0 && !timers && !nrf) break;
        if (n > 0 && p->base.up.need_peer && __atomic_load_n(&p->unadded, __ATOMIC_RELAXED))
            strangers_in(p, n);
        pthread_mutex_lock(&p->lock);
        if (p->base.closing) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        for (int i = 0; i < n; i++)
            datagram_in(p, p->rx_iov[i].iov_base, p->rx_msg[i].msg_len, &p->rx_from[i],
                        !!(p->rx_msg[i].msg_hdr.msg_flags & MSG_TRUNC), now);
        after_batch(p, now);
        refusals_in(p, rf, nrf, now);
        if (timers) run_timers(p, now, n < (int)batch);
        struct rutil_done *done = rutil_done_take(&p->base);
        uint32_t nfl = rutil_fails_take(&p->base.fails);
        pthread_mutex_unlock(&p->lock);
        events += callbacks(p, nfl, done);
        if (n < (int)batch) break;
    }
    return events;
}
