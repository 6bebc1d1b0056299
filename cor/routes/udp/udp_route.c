/*
 * CoRudpRoute: reliable, ordered frames over UDP (cor_route_udp.so).
 * This file holds the port's life cycle and the operations table, the plugin's only exported
 * symbol; sending is in udp_tx.c, receiving and timers in udp_rx.c.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "udp_knobs.h"
#include "udp_port.h"

static void port_free(struct cor_rport *p)
{
    if (p->peers)
        for (uint32_t i = 0; i < p->nactive; i++)
            udp_peer_free(p->peers[p->active[i]]);
    while (p->free_frames) {
        struct udp_frame *f = p->free_frames;
        p->free_frames = f->next;
        free(f);
    }
    free(p->peers);
    free(p->dests);
    free(p->active);
    free(p->touched);
    rutil_port_fini(&p->base);
    free(p->dl);
    free(p->rx_buf);
    free(p);
}

static int udp_open(const struct cor_route_config *cfg, const struct cor_route_upcalls *up,
                    struct cor_rport **out)
{
    if (!out) {
        udp_log("open: invalid configuration or upcalls");
        return COR_EINVAL;
    }
    *out = NULL;
    struct cor_rport *p = calloc(1, sizeof(*p));
    if (!p) return COR_ENOMEM;
    p->sock.fd = -1;
    p->timer_ns = UINT64_MAX;
    int rc = rutil_port_init(&p->base, UDP_LOG_WHO, cfg, up, 1u << 20);
    if (rc != COR_OK) goto fail;
    rc = COR_EINVAL;
    if (udp_knobs_read(&p->k) != 0) goto fail;
    if (udp_faults_parse(p->k.faults, &p->sock.faults) != 0) {
        udp_log("COR_UDP_FAULTS='%s': expected drop=P,dup=P,reorder=P,delay_us=N,seed=N",
                p->k.faults);
        goto fail;
    }
    udp_faults_reseed(&p->sock.faults, ((uint64_t)cfg->self << 16) ^ (uint64_t)cfg->port_index);
    const char *hint = p->k.bind ? p->k.bind : cfg->bind_hint;
    char ip[INET_ADDRSTRLEN];
    uint32_t dgram;
    int loop;
    if (udp_addr_pick(hint, ip, &dgram, &loop) != 0) {
        udp_log("bind hint '%s': expected loopback, auto or an IPv4 address", hint);
        goto fail;
    }
    p->dgram_local = p->k.dgram ? p->k.dgram : UDP_DGRAM_MAX;
    p->dgram_iface = p->k.dgram ? p->k.dgram : dgram;
    rc = COR_ENOMEM;
    p->dests = calloc(p->base.npeers, sizeof(*p->dests));
    p->unadded = p->base.npeers - 1;
    p->peers = calloc(p->base.npeers, sizeof(*p->peers));
    p->active = calloc(p->base.npeers, sizeof(*p->active));
    p->touched = calloc(p->base.npeers, sizeof(*p->touched));
    p->rx_buf = malloc((size_t)p->k.batch * (UDP_DGRAM_MAX + 1));
    if (!p->dests || !p->peers || !p->active || !p->touched || !p->rx_buf) goto fail;
    for (unsigned i = 0; i < p->k.batch; i++) {
        p->rx_iov[i] =
            (struct iovec){p->rx_buf + (size_t)i * (UDP_DGRAM_MAX + 1), UDP_DGRAM_MAX + 1};
        p->rx_msg[i].msg_hdr = (struct msghdr){.msg_name = &p->rx_from[i],
                                               .msg_namelen = sizeof(p->rx_from[i]),
                                               .msg_iov = &p->rx_iov[i],
                                               .msg_iovlen = 1};
    }
    rc = COR_EIO;
    if (udp_sock_open(&p->sock, ip, p->k.sndbuf, p->k.rcvbuf) != 0) goto fail;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        udp_sock_close(&p->sock);
        goto fail;
    }
    *out = p;
    return COR_OK;
fail:
    port_free(p);
    return rc;
}

static void udp_close(struct cor_rport *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    /* Acknowledge what we received and still owe an ack for (acks are delayed): a peer
     * that sent us its last frames would otherwise find our port closed and give us up, or
     * wait for them in its own cor_finalize. */
    uint64_t now = rutil_now_ns();
    for (uint32_t i = 0; i < p->nactive; i++) {
        struct udp_peer *peer = p->peers[p->active[i]];
        if (peer->dest->state == UDP_PEER_UP && peer->ack_owed) udp_send_ack(p, peer, now);
    }
    p->base.closing = 1;
    for (uint32_t i = 0; i < p->nactive; i++)
        udp_peer_flush(p, p->peers[p->active[i]], COR_ECLOSED);
    struct rutil_done *done = rutil_done_take(&p->base);
    pthread_mutex_unlock(&p->lock);
    udp_done_run(p, done);
    pthread_mutex_lock(&p->lock); /* quiesce: a straggling send() sees `closing` */
    pthread_mutex_unlock(&p->lock);
    if (p->k.stats) {
        udp_log("port %u.%d: dropped %llu retransmits %llu (timeouts %llu) duplicates %llu "
                "beyond-window %llu probes %llu (sweep %llu) pings %llu pongs %llu; %u of %u "
                "peers contacted; longest "
                "silence %llu ms "
                "before "
                "a peer's first answer, %llu ms after",
                p->base.self, p->base.port_index, (unsigned long long)rutil_port_dropped(&p->base),
                (unsigned long long)p->retransmits, (unsigned long long)p->timeouts,
                (unsigned long long)p->dups, (unsigned long long)p->beyond,
                (unsigned long long)p->probes, (unsigned long long)p->sweeps,
                (unsigned long long)p->pings, (unsigned long long)p->pongs, p->nactive,
                p->base.npeers - 1, (unsigned long long)(p->silence_max[0] / 1000000),
                (unsigned long long)(p->silence_max[1] / 1000000));
        /* per peer only for small sessions: hundreds of lines per domain help nobody */
        for (uint32_t i = 0; i < p->nactive && p->nactive <= 16; i++) {
            struct udp_peer *peer = p->peers[p->active[i]];
            udp_log("  peer %u: srtt %llu us rto %llu us, needless timeouts %llu", peer->rank,
                    (unsigned long long)(peer->sw.srtt / 1000),
                    (unsigned long long)(peer->sw.rto / 1000),
                    (unsigned long long)peer->sw.spurious);
        }
    }
    udp_sock_close(&p->sock);
    pthread_mutex_destroy(&p->lock);
    port_free(p);
}

static int udp_address(struct cor_rport *p, char *buf, size_t len)
{
    if (!p || !buf) return COR_EINVAL;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &p->sock.local.sin_addr, ip, sizeof(ip));
    int n = snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(p->sock.local.sin_port));
    return n < 0 || (size_t)n >= len ? COR_EINVAL : COR_OK;
}

static int udp_add_peer(struct cor_rport *p, cor_peer_t rank, const char *addr)
{
    struct sockaddr_in sa;
    if (!p || rank >= p->base.npeers || udp_addr_parse(addr, &sa) != 0) {
        udp_log("add_peer %u: bad rank or address '%s' (expected a.b.c.d:port)", rank,
                addr ? addr : "(null)");
        return COR_EINVAL;
    }
    /* Same-host peers get loopback-sized datagrams; others what the interface carries. */
    uint32_t dgram = udp_addr_is_local(sa.sin_addr) ? p->dgram_local : p->dgram_iface;
    int rc = COR_OK;
    pthread_mutex_lock(&p->lock);
    struct udp_dest *d = &p->dests[rank];
    if (p->base.closing) {
        rc = COR_ECLOSED;
    } else if (d->state == UDP_PEER_DEAD) {
        /* The core re-admits the rank for a new occupant: its datagrams come from `sa`, the
         * earlier one's (from its own address) are dropped and counted (datagram_in). */
        udp_peer_readmit(p, rank, &sa, dgram);
    } else if (d->state != UDP_PEER_NONE) {
        if (d->sa.sin_addr.s_addr != sa.sin_addr.s_addr || d->sa.sin_port != sa.sin_port)
            rc = COR_EEXIST;
    } else {
        /* Only where it is: windows and queues come at first contact (udp_peer_get). */
        d->sa = sa;
        d->dgram = dgram;
        d->state = UDP_PEER_UP;
        if (rank != p->base.self) __atomic_store_n(&p->unadded, p->unadded - 1, __ATOMIC_RELAXED);
    }
    /* The sweep of peers never talked to (udp_rx.c) starts with the timers of an idle port. */
    if (rc == COR_OK && p->k.probe_ns && !p->sweep_ns)
        udp_timer_at(p, rutil_now_ns() + p->k.probe_ns);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static int udp_wait_fd(struct cor_rport *p)
{
    return p ? p->sock.fd : -1;
}

static int udp_timeout_ms(struct cor_rport *p)
{
    if (!p) return -1;
    uint64_t t = __atomic_load_n(&p->timer_ns, __ATOMIC_RELAXED);
    return rutil_ms_until(t, t == UINT64_MAX ? 0 : rutil_now_ns());
}

static void udp_caps(struct cor_rport *p, struct cor_route_caps *c)
{
    if (!c) return;
    c->frame_max = UDP_FRAME_MAX;
    c->eager_limit = p ? p->k.eager_limit : 16384;
    c->has_rma = 0;
    c->zero_copy_send = 1; /* frames are sent (and resent) from the caller's iov until acked */
    /* one datagram to every peer, whichever interface it is behind */
    if (p) {
        uint32_t d = p->dgram_local < p->dgram_iface ? p->dgram_local : p->dgram_iface;
        c->frame_pref = d > UDP_HDR_LEN ? d - UDP_HDR_LEN : 0;
    }
}

static void udp_counters(struct cor_rport *p, uint64_t *dropped, uint64_t *retransmits)
{
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    rutil_counters_put(dropped, retransmits, rutil_port_dropped(&p->base), p->retransmits);
    pthread_mutex_unlock(&p->lock);
}

/* The core heard (from the launcher, or libcorpvm's exit notices) that `rank` is gone: its
 * frames finish now instead of after the dead-peer timeout (cor_finalize waits for them). */
static void udp_peer_dead(struct cor_rport *p, cor_peer_t rank)
{
    if (!p || rank >= p->base.npeers) return;
    pthread_mutex_lock(&p->lock);
    udp_fail_peer(p, rank, 0); /* no peer_failed: the core knows (route.h) */
    udp_timer_at(p,
                 rutil_now_ns()); /* the next progress() reports them, even with nothing to read */
    pthread_mutex_unlock(&p->lock);
}

COR_ROUTE_DECLARE(udp) = {
    .size = sizeof(struct cor_route_ops),
    .abi = COR_ROUTE_ABI,
    .name = "udp",
    .open = udp_open,
    .close = udp_close,
    .address = udp_address,
    .add_peer = udp_add_peer,
    .send = udp_op_send,
    .progress = udp_op_progress,
    .wait_fd = udp_wait_fd,
    .timeout_ms = udp_timeout_ms,
    .caps = udp_caps,
    .counters = udp_counters,
    .peer_dead = udp_peer_dead,
    .knobs = udp_knob_table,
    .nknobs = 0 UDP_KNOBS(RUTIL_KNOB_COUNT),
    .lazy_peers = 1,
    .await_peer = udp_op_await_peer,
};
