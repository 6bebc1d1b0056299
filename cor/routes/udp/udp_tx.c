/*
 * Send side of CoRudpRoute: accepting frames, cutting them into datagrams that go straight
 * to the socket from the caller's thread when the window has room, acknowledgements,
 * retransmissions, and giving up on a peer. Everything here runs under the port lock,
 * except udp_op_send's argument checks and udp_done_run.
 */
#include <stdlib.h>
#include <string.h>

#include "udp_port.h"

/* Unacknowledged bytes from which the end of a burst asks for an immediate ack. */
#define UDP_BURST_ACK_BYTES (48u << 10)

/* Retry delay after the socket refused a datagram (send buffer full). */
#define UDP_SOCK_RETRY_NS 100000ull
/* Frame records kept for reuse per port. */
#define UDP_FREE_MAX 256

void udp_timer_at(struct cor_rport *p, uint64_t t)
{
    /* A compare-and-swap: await_peer lowers it without the lock. */
    uint64_t cur = __atomic_load_n(&p->timer_ns, __ATOMIC_RELAXED);
    while (
        t && t < cur &&
        !__atomic_compare_exchange_n(&p->timer_ns, &cur, t, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        ;
}

/* Sends tx_msg[0..k); datagrams the fault injector holds back get a timer. */
static int sock_send(struct cor_rport *p, unsigned k, uint64_t now)
{
    int sent = udp_sock_send(&p->sock, p->tx_msg, k, now);
    udp_timer_at(p, udp_sock_held_due(&p->sock));
    return sent;
}

/* Points out[] at bytes [off, off+len) of the frame; returns the iovec count. */
static int slice(const struct udp_frame *f, uint32_t off, uint32_t len, struct iovec *out)
{
    int n = 0;
    size_t pos = 0;
    for (int i = 0; i < f->iovcnt && len; i++) {
        size_t l = f->iov[i].iov_len;
        if (off >= pos + l) {
            pos += l;
            continue;
        }
        size_t skip = off - pos, take = l - skip;
        if (take > len) take = len;
        out[n].iov_base = (uint8_t *)f->iov[i].iov_base + skip;
        out[n].iov_len = take;
        n++;
        off += (uint32_t)take;
        len -= (uint32_t)take;
        pos += l;
    }
    return n;
}

static void fill_hdr(struct cor_rport *p, struct udp_peer *peer, struct udp_hdr *h, int type,
                     uint64_t now)
{
    memset(h, 0, sizeof(*h));
    h->type = (uint8_t)type;
    h->cookie = p->base.cookie;
    h->src = p->base.self;
    h->dst = peer->rank;
    h->ack = peer->rw.next;
    h->sack = udp_rwin_sack(&peer->rw);
    h->tsval = udp_ts(now);
    h->tsecr = peer->ts_echo_valid ? peer->ts_echo : 0;
}

/* Our ack went out (alone or piggy-backed). */
static void acked(struct udp_peer *peer)
{
    peer->ack_owed = 0;
    peer->ack_owed_bytes = 0;
    peer->ack_now = 0;
    peer->ack_due = 0;
    peer->ts_echo_valid = 0; /* each timestamp is echoed once */
    peer->pong_owed = 0;     /* anything from us answers its PING */
}

static void set_msg(struct cor_rport *p, unsigned k, struct udp_peer *peer, int niov)
{
    struct msghdr *mh = &p->tx_msg[k].msg_hdr;
    mh->msg_name = &peer->dest->sa;
    mh->msg_namelen = sizeof(peer->dest->sa);
    mh->msg_iov = p->tx_iov[k];
    mh->msg_iovlen = (size_t)niov;
    mh->msg_control = NULL;
    mh->msg_controllen = 0;
    mh->msg_flags = 0;
}

void udp_pump(struct cor_rport *p, struct udp_peer *peer, uint64_t now)
{
    struct udp_swin *sw = &peer->sw;
    uint32_t payload_max = peer->dest->dgram - UDP_HDR_LEN;
    while (peer->dest->state == UDP_PEER_UP && peer->unsent) {
        uint32_t room = udp_swin_room(sw);
        if (room > UDP_BATCH_MAX) room = UDP_BATCH_MAX;
        /* The ring grows here, before sending, so every datagram sent gets its slot. */
        room = udp_swin_reserve(sw, room);
        struct udp_hdr h;
        fill_hdr(p, peer, &h, UDP_T_DATA, now);
        struct udp_frame *f = peer->unsent;
        uint32_t off = f->sent;
        size_t bytes = sw->bytes;
        unsigned k = 0;
        /* An empty window always takes one datagram, so any frame size makes progress. */
        while (f && k < room && (bytes < p->k.window_bytes || (k == 0 && sw->bytes == 0))) {
            uint32_t len = f->len - off < payload_max ? f->len - off : payload_max;
            h.seq = sw->nxt + k;
            h.frame_len = f->len;
            h.frag_off = off;
            h.len = len;
            udp_wire_put(p->tx_hdr[k], &h);
            p->tx_iov[k][0] = (struct iovec){p->tx_hdr[k], UDP_HDR_LEN};
            set_msg(p, k, peer, 1 + slice(f, off, len, &p->tx_iov[k][1]));
            bytes += len;
            off += len;
            k++;
            if (off == f->len) {
                f = f->next;
                off = 0;
            }
        }
        if (k == 0) break;
        /* Tell the receiver when we go idle (ack soon) or run out of window (ack now). A
         * burst of large frames that ends asks for the ack at once: its sender waits for
         * that ack to reuse its memory, and the receiver may have nothing to piggy-back it
         * on for a while (small frames are copied by the core and need no such hurry). */
        uint16_t flags = 0;
        if (!f) flags |= sw->bytes + bytes >= UDP_BURST_ACK_BYTES ? UDP_F_ACKNOW : UDP_F_ACKREQ;
        if (k == udp_swin_room(sw) || bytes >= p->k.window_bytes) flags |= UDP_F_ACKNOW;
        p->tx_hdr[k - 1][6] = (uint8_t)flags;
        p->tx_hdr[k - 1][7] = (uint8_t)(flags >> 8);

        int sent = sock_send(p, k, now);
        for (int i = 0; i < sent; i++) {
            struct udp_frame *cf = peer->unsent;
            uint32_t len = cf->len - cf->sent < payload_max ? cf->len - cf->sent : payload_max;
            int last = cf->sent + len == cf->len;
            udp_swin_add(sw, cf, cf->sent, len, last, now);
            cf->sent += len;
            peer->queued_bytes -= len;
            if (last) peer->unsent = cf->next;
        }
        if (sent > 0) {
            acked(peer);
            udp_timer_at(p, udp_swin_deadline(sw));
            udp_timer_at(p, sw->last_progress_ns + p->k.dead_ns);
        }
        if ((unsigned)sent < k) {
            udp_timer_at(p, now + UDP_SOCK_RETRY_NS);
            break;
        }
    }
}

/* A header-only ACK with our acknowledgement state and `flags`. */
static void send_hdr_only(struct cor_rport *p, struct udp_peer *peer, uint16_t flags, uint64_t now)
{
    struct udp_hdr h;
    fill_hdr(p, peer, &h, UDP_T_ACK, now);
    h.flags = flags;
    udp_wire_put(p->tx_hdr[0], &h);
    p->tx_iov[0][0] = (struct iovec){p->tx_hdr[0], UDP_HDR_LEN};
    set_msg(p, 0, peer, 1);
    if (sock_send(p, 1, now) == 1)
        acked(peer);
    else
        udp_timer_at(p, now + UDP_SOCK_RETRY_NS);
}

void udp_send_ack(struct cor_rport *p, struct udp_peer *peer, uint64_t now)
{
    send_hdr_only(p, peer, 0, now);
}

void udp_send_ping(struct cor_rport *p, struct udp_peer *peer, uint64_t now)
{
    send_hdr_only(p, peer, UDP_F_PING, now); /* one the socket refused goes again (await) */
}

void udp_send_sweep(struct cor_rport *p, cor_peer_t rank, uint64_t now)
{
    struct udp_hdr h = {.type = UDP_T_ACK, .cookie = p->base.cookie, .src = p->base.self};
    h.dst = rank;
    h.tsval = udp_ts(now); /* ack 0, no sack: what a fresh receive window says */
    udp_wire_put(p->tx_hdr[0], &h);
    p->tx_iov[0][0] = (struct iovec){p->tx_hdr[0], UDP_HDR_LEN};
    struct msghdr *mh = &p->tx_msg[0].msg_hdr;
    *mh = (struct msghdr){.msg_name = &p->dests[rank].sa,
                          .msg_namelen = sizeof(p->dests[rank].sa),
                          .msg_iov = p->tx_iov[0],
                          .msg_iovlen = 1};
    sock_send(p, 1, now); /* a probe the socket could not take is the next sweep's */
}

void udp_resend(struct cor_rport *p, struct udp_peer *peer, const uint32_t *seqs, int n,
                uint64_t now)
{
    struct udp_hdr h;
    fill_hdr(p, peer, &h, UDP_T_DATA, now);
    h.flags = UDP_F_ACKNOW; /* the receiver answers at once, so recovery takes one RTT */
    unsigned k = 0;
    for (int i = 0; i < n && k < UDP_BATCH_MAX; i++) {
        struct udp_sslot *s = udp_swin_at(&peer->sw, seqs[i]);
        if (!s) continue;
        struct udp_frame *f = s->frame;
        h.seq = seqs[i];
        h.frame_len = f->len;
        h.frag_off = s->off;
        h.len = s->len;
        udp_wire_put(p->tx_hdr[k], &h);
        p->tx_iov[k][0] = (struct iovec){p->tx_hdr[k], UDP_HDR_LEN};
        set_msg(p, k, peer, 1 + slice(f, s->off, s->len, &p->tx_iov[k][1]));
        k++;
    }
    if (k == 0) return;
    int sent = sock_send(p, k, now);
    for (int i = 0; i < sent; i++) {
        uint8_t *hb = p->tx_hdr[i];
        uint32_t seq = (uint32_t)hb[36] | ((uint32_t)hb[37] << 8) | ((uint32_t)hb[38] << 16) |
                       ((uint32_t)hb[39] << 24);
        udp_swin_resent(&peer->sw, seq, now);
        p->retransmits++;
    }
    if (sent > 0) acked(peer);
    udp_timer_at(p, udp_swin_deadline(&peer->sw));
}

void udp_peer_flush(struct cor_rport *p, struct udp_peer *peer, int status)
{
    struct udp_frame *f = peer->head;
    while (f) {
        struct udp_frame *next = f->next;
        rutil_done_push(&p->base, &f->done, status);
        f = next;
    }
    peer->head = peer->tail = peer->unsent = NULL;
    peer->queued_bytes = 0;
    peer->nframes = 0;
}

void udp_fail_peer(struct cor_rport *p, cor_peer_t rank, int err)
{
    struct udp_dest *d = &p->dests[rank];
    if (d->state != UDP_PEER_UP) return;
    d->state = UDP_PEER_DEAD;
    struct udp_peer *peer = p->peers[rank];
    if (peer) {
        udp_peer_flush(p, peer, COR_EPEERDEAD);
        /* Nothing more will be sent or delivered: free the windows' memory now. */
        udp_swin_free(&peer->sw);
        udp_rwin_free(&peer->rw);
        udp_reasm_reset(&peer->ra);
        acked(peer);
    }
    if (err) rutil_fails_push(&p->base.fails, rank, err);
}

int udp_done_run(struct cor_rport *p, struct rutil_done *list)
{
    if (!list) return 0;
    int n = rutil_port_report_list(&p->base, list);
    for (struct rutil_done *d = list; d; d = d->next) {
        struct udp_frame *f = rutil_container_of(d, struct udp_frame, done);
        free(f->flat);
        f->flat = NULL;
    }
    pthread_mutex_lock(&p->lock);
    while (list && p->nfree < UDP_FREE_MAX) {
        struct udp_frame *f = rutil_container_of(list, struct udp_frame, done);
        list = list->next;
        f->next = p->free_frames;
        p->free_frames = f;
        p->nfree++;
    }
    pthread_mutex_unlock(&p->lock);
    while (list) {
        struct udp_frame *f = rutil_container_of(list, struct udp_frame, done);
        list = list->next;
        free(f);
    }
    return n;
}

int udp_op_send(struct cor_rport *p, cor_peer_t rank, const struct iovec *iov, int iovcnt,
                void *cookie)
{
    if (!p || rank >= p->base.npeers || iovcnt < 0 || (iovcnt > 0 && !iov)) return COR_EINVAL;
    size_t total = 0;
    int pieces = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len == 0) continue;
        if (!iov[i].iov_base || iov[i].iov_len > UDP_FRAME_MAX - total) return COR_EINVAL;
        total += iov[i].iov_len;
        pieces++;
    }
    pthread_mutex_lock(&p->lock);
    int state = p->dests[rank].state;
    struct udp_peer *peer = NULL;
    int rc = COR_OK;
    if (p->base.closing)
        rc = COR_ECLOSED;
    else if (state == UDP_PEER_NONE)
        rc = COR_EINVAL;
    else if (state == UDP_PEER_DEAD)
        rc = COR_EPEERDEAD;
    else if (!(peer = udp_peer_get(p, rank))) /* the first frame to this peer */
        rc = COR_ENOMEM;
    else if (peer->nframes >= p->k.queue_frames ||
             (peer->unsent && peer->queued_bytes + total > p->k.queue_bytes))
        rc = COR_EAGAIN;
    struct udp_frame *f = NULL;
    if (rc == COR_OK) {
        f = p->free_frames;
        if (f) {
            p->free_frames = f->next;
            p->nfree--;
        } else if (!(f = malloc(sizeof(*f)))) {
            rc = COR_ENOMEM;
        }
    }
    if (rc == COR_OK) {
        memset(f, 0, sizeof(*f));
        f->done.cookie = cookie;
        f->len = (uint32_t)total;
        if (pieces <= UDP_IOV_INLINE) {
            for (int i = 0; i < iovcnt; i++)
                if (iov[i].iov_len) f->iov_inline[f->iovcnt++] = iov[i];
        } else {
            /* Too many pieces to slice cheaply: keep one private copy instead. */
            f->flat = malloc(total);
            if (!f->flat) {
                rc = COR_ENOMEM;
                f->next = p->free_frames;
                p->free_frames = f;
                p->nfree++;
            } else {
                size_t off = 0;
                for (int i = 0; i < iovcnt; i++) {
                    memcpy(f->flat + off, iov[i].iov_base, iov[i].iov_len);
                    off += iov[i].iov_len;
                }
                f->iov_inline[0] = (struct iovec){f->flat, total};
                f->iovcnt = 1;
            }
        }
        f->iov = f->iov_inline;
    }
    if (rc == COR_OK) {
        if (peer->tail)
            peer->tail->next = f;
        else
            peer->head = f;
        peer->tail = f;
        if (!peer->unsent) peer->unsent = f;
        peer->queued_bytes += total;
        peer->nframes++;
        udp_pump(p, peer, rutil_now_ns());
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}
