/*
 * Receiving and progress. Data frames arrive at low priority into buffers of one size class
 * (GM matches a message only to a buffer of exactly its class, and libgm keeps per-sender
 * order by holding later messages until earlier ones land: with several classes, held
 * messages of one class could starve another and stall every stream; one class cannot).
 * Each buffer is handed to the core's deliver() and provided again right after it returns.
 * Control messages (BYE) arrive at high priority into a few small buffers.
 */
#include <string.h>

#include "gm_port.h"

#define BUDGET 64 /* events per progress() call */

int gmr_rx_setup(struct cor_rport *p)
{
    /* Control buffers: a peer has at most a BYE and a couple of CREDITs in flight to us. */
    p->ctrl_bufs = 3 * p->npeers + 4;
    if (p->ctrl_bufs > 32)
        p->ctrl_bufs = 32;
    unsigned per = (GMR_RX_TOKENS - p->ctrl_bufs) / p->npeers;
    p->credits = per < p->k.credits ? per : p->k.credits;
    if (p->credits < 2) {
        gmr_log("%u domains: too many for GM's %u receive tokens per port", p->npeers,
                GMR_RX_TOKENS);
        return COR_ELIMIT;
    }
    p->rx_bufs = p->credits * p->npeers;
    /* Buffers start 64-byte aligned: the data class is a power of two minus 8, rounded up. */
    size_t stride = (gm_max_length_for_size(p->k.data_class) + 63) & ~(size_t)63;
    p->data_buf_len = stride;
    p->rx_len = stride * p->rx_bufs + 64 * (size_t)p->ctrl_bufs;
    p->rx_mem = gm_dma_malloc(p->gp, p->rx_len);
    if (!p->rx_mem)
        return COR_ENOMEM;
    for (unsigned i = 0; i < p->rx_bufs; i++)
        gm_provide_receive_buffer_with_tag(p->gp, p->rx_mem + stride * i, p->k.data_class,
                                           GM_LOW_PRIORITY, 0);
    char *ctrl = p->rx_mem + stride * p->rx_bufs;
    for (unsigned i = 0; i < p->ctrl_bufs; i++)
        gm_provide_receive_buffer_with_tag(p->gp, ctrl + 64 * i, GMR_CTRL_CLASS,
                                           GM_HIGH_PRIORITY, 1);
    return COR_OK;
}

static unsigned hash_of(uint32_t key, unsigned mask)
{
    return (unsigned)((key * 2654435761u) >> 8) & mask;
}

int gmr_lookup(struct cor_rport *p, unsigned node, unsigned port, uint32_t *rank)
{
    uint32_t key = node << 8 | port;
    for (unsigned h = hash_of(key, p->hash_mask);; h = (h + 1) & p->hash_mask) {
        if (p->hash[h].key == 0)
            return -1;
        if (p->hash[h].key == key) {
            *rank = p->hash[h].rank;
            return 0;
        }
    }
}

/* Is buf one of our data (data = 1) or control buffers? */
static int own_buffer(struct cor_rport *p, const char *buf, int data)
{
    size_t ctrl_off = p->data_buf_len * p->rx_bufs;
    if (buf < p->rx_mem || buf >= p->rx_mem + p->rx_len)
        return 0;
    size_t off = (size_t)(buf - p->rx_mem);
    if (data)
        return off < ctrl_off && off % p->data_buf_len == 0;
    return off >= ctrl_off && (off - ctrl_off) % 64 == 0;
}

struct rx_item {
    uint32_t peer;
    char *buf;
    size_t len;
};

static void on_control(struct cor_rport *p, const char *m, size_t len, uint32_t peer)
{
    uint64_t cookie;
    uint32_t op;
    if (len != GMR_CTRL_LEN) {
        p->dropped++;
        return;
    }
    memcpy(&cookie, m, 8);
    memcpy(&op, m + 8, 4);
    uint32_t arg;
    memcpy(&arg, m + 12, 4);
    struct gmr_peer *q = &p->peers[peer];
    if (cookie != p->cookie || (op != GMR_OP_BYE && op != GMR_OP_CREDIT) ||
        (op == GMR_OP_CREDIT && (arg == 0 || arg > p->credits - q->credits))) {
        p->dropped++;
        return;
    }
    q->heard = 1;
    if (op == GMR_OP_CREDIT)
        q->credits += arg;
    else
        q->closed = 1; /* its frames sent before BYE may still come: keep receiving */
    p->pump_dirty = 1;
}

/* Drains one receive event into `it` (data to deliver) or handles it; lock held. Returns 1
 * if a data frame was queued for delivery. */
static int on_recv(struct cor_rport *p, gm_recv_event_t *e, struct rx_item *it)
{
    int high = GM_RECV_EVENT_TYPE(e) == GM_HIGH_RECV_EVENT;
    char *buf = gm_ntohp(e->recv.buffer);
    size_t len = gm_ntoh_u32(e->recv.length);
    unsigned node = gm_ntoh_u16(e->recv.sender_node_id);
    unsigned port = gm_ntoh_u8(e->recv.sender_port_id);
    unsigned size = gm_ntoh_u8(e->recv.size);
    if (!own_buffer(p, buf, !high)) {
        /* Not ours (cannot happen with a correct libgm): never touch or re-provide it. */
        p->dropped++;
        return 0;
    }
    uint32_t peer;
    int ok = gmr_lookup(p, node, port, &peer) == 0;
    if (high) {
        if (ok && size == GMR_CTRL_CLASS && len <= 64)
            on_control(p, buf, len, peer);
        else
            p->dropped++;
        gm_provide_receive_buffer_with_tag(p->gp, buf, GMR_CTRL_CLASS, GM_HIGH_PRIORITY, 1);
        return 0;
    }
    if (ok && p->peers[peer].core_dead) {
        /* The core already failed everything toward it: late frames would only match
         * requests that no longer wait (or new ones posted after the death was known). */
        p->from_dead++;
        gm_provide_receive_buffer_with_tag(p->gp, buf, p->k.data_class, GM_LOW_PRIORITY, 0);
        return 0;
    }
    uint32_t hdr[2];
    if (ok && size == p->k.data_class && len >= GMR_HDR &&
        len <= gm_max_length_for_size(p->k.data_class)) {
        memcpy(hdr, buf, GMR_HDR);
        struct gmr_peer *q = &p->peers[peer];
        if (hdr[0] == p->cookie32 && hdr[1] <= p->credits - q->credits) {
            q->credits += hdr[1]; /* piggy-backed receive credits */
            if (hdr[1])
                p->pump_dirty = 1;
            q->heard = 1;
            *it = (struct rx_item){peer, buf, len};
            return 1;
        }
    }
    p->dropped++;
    gm_provide_receive_buffer_with_tag(p->gp, buf, p->k.data_class, GM_LOW_PRIORITY, 0);
    return 0;
}

int gmr_report(struct cor_rport *p)
{
    int events = 0;
    while (p->ndone || p->nfailed) {
        struct {
            void *cookie;
            int status;
        } batch[64];
        uint32_t failed[16];
        unsigned nb = 0, nf = 0;
        /* Deaths first, so the core knows why the sends that follow failed. */
        while (nf < 16 && p->nfailed)
            failed[nf++] = p->failed[--p->nfailed];
        while (nb < 64 && nb < p->ndone) { /* oldest first */
            struct gmr_tx *t = p->done[nb];
            batch[nb].cookie = t->cookie;
            batch[nb].status = t->status;
            nb++;
            t->state = TX_FREE;
        }
        p->ndone -= nb;
        if (p->ndone)
            memmove(p->done, p->done + nb, p->ndone * sizeof *p->done);
        gmr_reclaim(p);
        pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < nf; i++)
            p->up.peer_failed(p->up.core, failed[i], COR_EPEERDEAD);
        for (unsigned i = 0; i < nb; i++)
            p->up.send_done(p->up.core, batch[i].cookie, batch[i].status);
        events += (int)nb;
        pthread_mutex_lock(&p->lock);
    }
    return events;
}

int gmr_progress(struct cor_rport *p)
{
    if (!p)
        return 0;
    struct rx_item items[BUDGET];
    int events = 0;
    pthread_mutex_lock(&p->lock);
    if (p->closing) {
        pthread_mutex_unlock(&p->lock);
        return 0;
    }
    for (int round = 0; round < 4; round++) {
        unsigned n = 0;
        int other = 0;
        for (int i = 0; i < BUDGET && n < BUDGET; i++) {
            gm_recv_event_t *e = gm_receive(p->gp);
            unsigned type = GM_RECV_EVENT_TYPE(e);
            if (type == GM_NO_RECV_EVENT)
                break;
            if (type == GM_RECV_EVENT || type == GM_HIGH_RECV_EVENT) {
                n += (unsigned)on_recv(p, e, &items[n]);
            } else {
                gmr_unknown(p, e); /* send callbacks, alarms */
                other++;
            }
        }
        /* The queue is walked only when it may move (walking it on every poll of a
         * spinning task costs O(queue) each), or every 50 ms for the starvation check. */
        if (p->credit_due ||
            (p->d_queue < p->d_head && (p->pump_dirty || gmr_now_ns() - p->pump_ns > 50000000u)))
            gmr_pump(p);
        events += gmr_report(p);
        if (n) {
            p->frames_in += n;
            pthread_mutex_unlock(&p->lock);
            for (unsigned i = 0; i < n; i++)
                p->up.deliver(p->up.core, items[i].peer, items[i].buf + GMR_HDR,
                              items[i].len - GMR_HDR);
            pthread_mutex_lock(&p->lock);
            for (unsigned i = 0; i < n && !p->closing; i++) {
                gm_provide_receive_buffer_with_tag(p->gp, items[i].buf, p->k.data_class,
                                                   GM_LOW_PRIORITY, 0);
                p->peers[items[i].peer].owed++;
                gmr_credit_return(p, items[i].peer);
            }
            events += (int)n;
        }
        if (n < BUDGET && !other)
            break;
    }
    if (events)
        p->active_ns = gmr_now_ns();
    pthread_mutex_unlock(&p->lock);
    return events;
}
