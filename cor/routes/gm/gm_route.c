/*
 * CoRgmRoute: reliable, ordered frames over the GM API (cor_route_gm.so), written against
 * gm.h only (libgm-compat runs it on libfabric). This file holds the port's life cycle,
 * addressing and the operations table, the plugin's only exported symbol; sending is in
 * gm_tx.c, receiving and progress in gm_rx.c, memory in gm_mem.c, knobs in gm_env.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "gm_knobs.h"
#include "gm_port.h"

/* GM port ids a hard port may use, in probing order (0, 1 and 3 are GM's own). */
static const unsigned port_ids[] = {2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#define NPORT_IDS (sizeof port_ids / sizeof port_ids[0])

static int open_gm_port(struct cor_rport *p, int index)
{
    unsigned start = index < 0 ? NPORT_IDS - 1 : (unsigned)index % NPORT_IDS;
    gm_status_t st = GM_BUSY;
    for (unsigned i = 0; i < NPORT_IDS; i++) {
        unsigned id = port_ids[(start + i) % NPORT_IDS];
        st = gm_open(&p->gp, 0, id, "cor", (enum gm_api_version)GM_API_VERSION_2_0_16);
        if (st == GM_SUCCESS) {
            p->port_id = id;
            return COR_OK;
        }
        if (st != GM_BUSY) break;
    }
    gmr_log("cannot open a GM port for hard port %d: %s", index, gm_strerror(st));
    return st == GM_BUSY ? COR_EBUSY : COR_EROUTE;
}

static void port_free(struct cor_rport *p)
{
    if (p->gp) {
        gmr_mem_fini(p);
        gm_close(p->gp); /* releases DMA memory too */
    }
    if (p->joined) gmr_session_fini();
    free(p->peers);
    free(p->hash);
    free(p->tx);
    rutil_port_fini(&p->base);
    free(p->blocked);
    pthread_mutex_destroy(&p->mem_lock);
    free(p);
}

static int gmr_open(const struct cor_route_config *cfg, const struct cor_route_upcalls *up,
                    struct cor_rport **out)
{
    if (!out) return COR_EINVAL;
    *out = NULL;
    struct cor_rport *p = calloc(1, sizeof *p);
    if (!p) return COR_ENOMEM;
    pthread_mutex_init(&p->mem_lock, NULL);
    int rc = rutil_port_init(&p->base, GMR_LOG_WHO, cfg, up, 65535);
    if (rc != COR_OK) goto fail;
    rc = COR_EINVAL;
    if (gmr_knobs_read(&p->k)) goto fail;
    rc = COR_ENOMEM;
    unsigned slots = 4;
    while (slots < 2 * p->base.npeers)
        slots *= 2;
    p->hash_mask = slots - 1;
    p->peers = calloc(p->base.npeers, sizeof *p->peers);
    p->hash = calloc(slots, sizeof *p->hash);
    if (!p->peers || !p->hash) goto fail;
    if ((rc = gmr_session_init(cfg, &p->k)) != COR_OK) goto fail;
    p->joined = 1;
    if ((rc = open_gm_port(p, cfg->port_index)) != COR_OK) goto fail;
    while (!p->inc)
        if (getrandom(&p->inc, sizeof p->inc, 0) != sizeof p->inc)
            p->inc = (uint32_t)rutil_now_ns() ^ (uint32_t)getpid() << 12;
    if (gm_get_node_id(p->gp, &p->node_id) != GM_SUCCESS ||
        gm_get_host_name(p->gp, p->host) != GM_SUCCESS) {
        rc = COR_EROUTE;
        goto fail;
    }
    p->host[GM_MAX_HOST_NAME_LEN] = '\0';
    p->rank_nodes = gmr_nodes_are_ranks() && p->node_id == cfg->self + 1;
    if ((rc = gmr_tx_setup(p)) != COR_OK || (rc = gmr_rx_setup(p)) != COR_OK) goto fail;
    gm_allow_remote_memory_access(p->gp);
    p->rings = gm_compat_wakes_on_arrival(p->gp);
    p->direct = p->rings; /* shm: an injected frame is in the target's memory */
    p->active_ns = rutil_now_ns();
    p->probe_ns = p->active_ns;
    gmr_local_add(p);
    gmr_watch_add(p);
    *out = p;
    return COR_OK;
fail:
    port_free(p);
    return rc;
}

/* Tells every live peer we are going, so its sends fail at once instead of timing out;
 * waits (briefly, bounded) until GM has taken the messages. */
static void say_bye(struct cor_rport *p)
{
    int any = 0;
    for (uint32_t i = 0; i < p->base.npeers; i++) {
        struct gmr_peer *q = &p->peers[i];
        if (!q->added || q->dead || q->closed || i == p->base.self || q->local)
            continue; /* local ports learn it from gmr_local_remove_and_notify */
        gmr_send_ctrl(p, i, GMR_OP_BYE, 0);
        any = 1;
    }
    /* Let GM push them out; receives are no longer delivered. */
    double spins = any ? 20000 : 0;
    for (int i = 0; i < spins; i++) {
        gm_recv_event_t *e = gm_receive(p->gp);
        unsigned type = GM_RECV_EVENT_TYPE(e);
        if (type == GM_NO_RECV_EVENT && i > 200) break;
        if (type != GM_NO_RECV_EVENT && type != GM_RECV_EVENT && type != GM_HIGH_RECV_EVENT)
            gmr_unknown(p, e);
    }
}

static void gmr_close(struct cor_rport *p)
{
    if (!p) return;
    gmr_watch_remove(p);
    gmr_local_remove_and_notify(p);
    /* The core closes a port nobody sends on or polls any more: only the memory calls may
     * still come, and they look at `closing` under mem_lock. */
    pthread_mutex_lock(&p->mem_lock);
    p->base.closing = 1;
    pthread_mutex_unlock(&p->mem_lock);
    say_bye(p);
    /* Every accepted frame not yet reported completes with COR_ECLOSED (or its status). */
    size_t n = (size_t)(p->d_head - p->d_tail);
    struct rutil_done_copy *rep = calloc(n ? n : 1, sizeof *rep);
    size_t nrep = 0;
    for (uint64_t i = p->d_tail; i < p->d_head; i++) {
        struct gmr_tx *t = &p->tx[i % p->k.tx_frames];
        if (t->state == TX_FREE) continue;
        int st = t->state == TX_DONE ? t->done.status : COR_ECLOSED;
        if (rep) rep[nrep++] = (struct rutil_done_copy){t->done.cookie, st};
        t->state = TX_FREE;
    }
    unsigned ndone = 0; /* the done list is now empty: its descriptors were reported above */
    (void)rutil_done_take(&p->base);
    if (p->k.stats)
        gmr_log("port node %u id %u: frames out %" PRIu64 " (%" PRIu64 " small) in %" PRIu64
                ", puts %" PRIu64 ", gets %" PRIu64 ", dropped %" PRIu64 " (stale control %" PRIu64
                ", data %" PRIu64 "), deepest software queue %" PRIu64 ", sent direct %" PRIu64,
                p->node_id, p->port_id, p->frames_out, p->small_out, p->frames_in, p->puts, p->gets,
                rutil_port_dropped(&p->base), p->stale_ctrl, p->stale_data, p->queued_max,
                p->direct_out);
    if (p->k.stats)
        gmr_log("  ring: d_tail %llu d_queue %llu d_head %llu tx_tail %zu tx_head %zu ndone %u",
                (unsigned long long)p->d_tail, (unsigned long long)p->d_queue,
                (unsigned long long)p->d_head, p->tx_tail, p->tx_head, ndone);
    if (p->k.stats)
        for (uint32_t i = 0; i < p->base.npeers; i++)
            gmr_log("  peer %u: credits %u+%u owed %u+%u ctrl_busy %d wanted %d dead %d tokens %u",
                    i, p->peers[i].credits[0], p->peers[i].credits[1], p->peers[i].owed[0],
                    p->peers[i].owed[1], p->peers[i].ctrl_busy, p->peers[i].credit_wanted,
                    p->peers[i].dead, p->tokens);
    if (p->k.stats && p->abandoned)
        gmr_log("  %" PRIu64 " frames in flight to dead domains given up, %" PRIu64
                " from them dropped",
                p->abandoned, p->from_dead);
    if (p->k.stats && (p->pings || p->pongs))
        gmr_log("  liveness: %" PRIu64 " pings sent to peers we waited for, %" PRIu64 " answered",
                p->pings, p->pongs);
    rutil_port_report_copies(&p->base, rep, nrep);
    free(rep);
    port_free(p);
}

static int gmr_address(struct cor_rport *p, char *buf, size_t len)
{
    if (!p || !buf) return COR_EINVAL;
    const char *tcp = gmr_tcp_address();
    int w = snprintf(buf, len, "%u:%u:%s%s%s#%" PRIu32, p->node_id, p->port_id, p->host,
                     tcp ? "@" : "", tcp ? tcp : "", p->inc);
    return w < 0 || (size_t)w >= len || (size_t)w >= COR_ADDR_MAX ? COR_EINVAL : COR_OK;
}

/* Parses "node:port:host[@ip:port_base][#incarnation]"; the host must be what our node map
 * calls that node, so both sides use the same map (same session). The TCP endpoint, when
 * given, goes to libgm's node map (peers learnt at run time). */
static int parse_addr(struct cor_rport *p, const char *full, unsigned *node, unsigned *port,
                      uint32_t *inc)
{
    char *end, addr[COR_ADDR_MAX];
    if (!full || strnlen(full, COR_ADDR_MAX) >= COR_ADDR_MAX || full[0] < '0' || full[0] > '9')
        return -1;
    strcpy(addr, full);
    char *hash = strrchr(addr, '#');
    *inc = 0;
    if (hash) {
        if (hash[1] < '1' || hash[1] > '9') return -1;
        errno = 0;
        unsigned long v = strtoul(hash + 1, &end, 10);
        if (*end || errno || v > UINT32_MAX) return -1;
        *inc = (uint32_t)v;
        *hash = '\0';
    }
    unsigned long n = strtoul(addr, &end, 10);
    if (*end != ':' || n == 0 || n > 65535 || end[1] < '0' || end[1] > '9') return -1;
    unsigned long q = strtoul(end + 1, &end, 10);
    if (*end != ':' || q >= gm_num_ports(NULL) || q == 0 || q == 1 || q == 3) return -1;
    char host[GM_MAX_HOST_NAME_LEN + 1];
    const char *at = strchr(end + 1, '@');
    size_t hlen = at ? (size_t)(at - end - 1) : strlen(end + 1);
    if (hlen > GM_MAX_HOST_NAME_LEN) return -1;
    memcpy(host, end + 1, hlen);
    host[hlen] = '\0';
    char known[GM_MAX_HOST_NAME_LEN + 1];
    if (gm_node_id_to_host_name_ex(p->gp, 0, (unsigned)n, &known) != GM_SUCCESS) return -1;
    known[GM_MAX_HOST_NAME_LEN] = '\0';
    if (strcmp(known, host) != 0) return -1;
    if (at) {
        char ip[48];
        const char *colon = strrchr(at + 1, ':');
        if (!colon || colon[1] < '0' || colon[1] > '9' || (size_t)(colon - at - 1) >= sizeof ip)
            return -1;
        unsigned long base = strtoul(colon + 1, &end, 10);
        if (*end || base > 65535) return -1;
        memcpy(ip, at + 1, (size_t)(colon - at - 1));
        ip[colon - at - 1] = '\0';
        if (gm_node_set_address((unsigned)n, ip, (unsigned)base) != GM_SUCCESS) return -1;
    }
    *node = (unsigned)n;
    *port = (unsigned)q;
    return 0;
}

/* Points (node, port) at rank `peer` in the hash: a new key, or one a rank given up had (GM
 * port numbers are few: a new domain on a node often gets one a gone domain had). mem_lock
 * held; the owner reads the hash without it. -1 if the table is full. */
static int hash_point(struct cor_rport *p, unsigned node, unsigned port, uint32_t peer)
{
    uint32_t key = node << 8 | port;
    unsigned h = (unsigned)((key * 2654435761u) >> 8) & p->hash_mask;
    for (unsigned n = 0; n <= p->hash_mask; n++, h = (h + 1) & p->hash_mask) {
        uint32_t k = atomic_load_explicit(&p->hash[h].key, memory_order_relaxed);
        if (k == key) {
            atomic_store_explicit(&p->hash[h].rank, peer, memory_order_release);
            return 0;
        }
        if (!k) {
            atomic_store_explicit(&p->hash[h].rank, peer, memory_order_relaxed);
            atomic_store_explicit(&p->hash[h].key, key, memory_order_release);
            return 0;
        }
    }
    gmr_log("domain %u: no room for another GM address (%u known)", peer, p->hash_mask + 1);
    return -1;
}

/* A new occupant of rank `peer`, which was given up (mem_lock held): the owner forgets the
 * earlier one's state when it takes the note. Frames of the earlier one that still arrive
 * carry its port's incarnation: the route drops them (gm_rx.c), credits and all. */
static int readmit(struct cor_rport *p, cor_peer_t peer, unsigned node, unsigned port, int local,
                   uint32_t inc)
{
    uint32_t other;
    if (gmr_lookup(p, node, port, &other) == 0 && other != peer &&
        !atomic_load(&p->peers[other].gone)) {
        gmr_log("domain %u: address %u:%u is already domain %u's", peer, node, port, other);
        return COR_EINVAL;
    }
    if (hash_point(p, node, port, peer)) return COR_ELIMIT;
    struct gmr_peer *q = &p->peers[peer];
    q->re_node = node;
    q->re_port = port;
    q->re_local = local;
    q->re_inc = inc;
    atomic_store(&q->gone, 0);
    atomic_store(&q->held_lost, 0);
    atomic_store(&q->readmit_note, 1);
    atomic_store(&p->notes, 1);
    return COR_OK;
}

/* Owner: a rank's new occupant (readmit's note) starts as a peer just added. */
static void apply_readmit(struct cor_rport *p, struct gmr_peer *q)
{
    q->node = q->re_node;
    q->port = q->re_port;
    q->local = q->re_local;
    q->inc = q->re_inc;
    q->dead = q->closed = q->reported = q->core_dead = 0;
    q->credits[0] = p->allot[0];
    q->credits[1] = p->allot[1];
    q->owed[0] = q->owed[1] = 0;
    q->credit_wanted = 0;
    q->blocked = 0;
    q->heard = 0;
    q->starved_since = 0;
    q->probed_closed = 0;
    q->spoke = 0;
    q->quiet_ns = q->ping_ns = 0;
    atomic_store(&q->closed_note, 0);
    /* A failure of the earlier occupant not reported yet must not reach the core now. */
    rutil_fails_forget(&p->base.fails, (cor_peer_t)(q - p->peers));
    p->pump_dirty = 1;
}

static int gmr_add_peer(struct cor_rport *p, cor_peer_t peer, const char *addr)
{
    if (!p || peer >= p->base.npeers) return COR_EINVAL;
    unsigned node, port;
    uint32_t inc;
    if (parse_addr(p, addr, &node, &port, &inc) != 0) {
        gmr_log("domain %u: bad or foreign address '%.64s'", peer, addr ? addr : "(null)");
        return COR_EINVAL;
    }
    int local = gmr_local_is(node, port);
    /* Against another add_peer only: the owner looks the new peer up only once its key is in
     * the hash, which is written last, and sends to it only once the core has it added. */
    pthread_mutex_lock(&p->mem_lock);
    int rc = COR_EEXIST;
    if (p->peers[peer].added && atomic_load(&p->peers[peer].gone)) {
        rc = readmit(p, peer, node, port, local, inc);
        goto out;
    }
    if (p->peers[peer].added) {
        if (p->peers[peer].node == node && p->peers[peer].port == port && p->peers[peer].inc == inc)
            rc = COR_OK; /* the same again */
        goto out;
    }
    rc = COR_EINVAL;
    uint32_t other;
    if (gmr_lookup(p, node, port, &other) == 0 && !atomic_load(&p->peers[other].gone)) {
        gmr_log("domain %u: address %s is already domain %u's", peer, addr, other);
        goto out;
    }
    /* Everything the owner reads of a peer it finds in the hash (its frames' credits, its
     * control messages) before the key: hash_point publishes it (release). Written after it,
     * the credits raced with a listener that received the peer's first frame (TSan, pvm/idle
     * over gm: a new PVM task spoke before our add_peer returned). */
    struct gmr_peer *q = &p->peers[peer];
    q->inc = inc;
    q->node = node;
    q->port = port;
    q->local = local;
    q->credits[0] = p->allot[0];
    q->credits[1] = p->allot[1];
    q->port_of = p;
    if (hash_point(p, node, port, peer)) goto out;
    q->added = 1;
    rc = COR_OK;
out:
    pthread_mutex_unlock(&p->mem_lock);
    return rc;
}

/* GM has no file descriptor to poll: the core's listener calls gmr_wait() instead. */
static int gmr_wait_fd(struct cor_rport *p)
{
    (void)p;
    return -1;
}

/* Our only timers: frames waiting for a silent peer's credits, and peers the core waits for
 * (COR_GM_DEAD_MS; gm_live.c). libgm's own (alarms, its in-flight watchdog) run inside
 * gm_receive_pending(), which gmr_wait() calls. */
static int gmr_timeout_ms(struct cor_rport *p)
{
    if (!p) return -1;
    return atomic_load_explicit(&p->queue_hint, memory_order_relaxed) ||
                   atomic_load_explicit(&p->awaiting, memory_order_relaxed) > 0
               ? 100
               : -1;
}

/* Work for progress() that GM does not show as an event. */
static int route_work(struct cor_rport *p)
{
    return atomic_load_explicit(&p->work_hint, memory_order_relaxed) ||
           atomic_load_explicit(&p->notes, memory_order_relaxed);
}

void gmr_publish(struct cor_rport *p)
{
    int w = p->base.closing || p->base.done_head || p->base.fails.n || p->credit_due ||
            p->nreturns || (p->d_queue < p->d_head && p->tokens > 0);
    int q = p->d_queue < p->d_head;
    /* stored only when they change: the listener reads them while the owner works */
    if (atomic_load_explicit(&p->work_hint, memory_order_relaxed) != w)
        atomic_store_explicit(&p->work_hint, w, memory_order_relaxed);
    if (atomic_load_explicit(&p->queue_hint, memory_order_relaxed) != q)
        atomic_store_explicit(&p->queue_hint, q, memory_order_relaxed);
}

void gmr_take_notes(struct cor_rport *p)
{
    if (!atomic_exchange(&p->notes, 0)) return;
    for (uint32_t i = 0; i < p->base.npeers; i++) {
        struct gmr_peer *q = &p->peers[i];
        if (atomic_load_explicit(&q->closed_note, memory_order_relaxed) &&
            atomic_exchange(&q->closed_note, 0)) {
            q->closed = 1;
            p->pump_dirty = 1;
        }
        if (atomic_load_explicit(&q->dead_note, memory_order_relaxed) &&
            atomic_exchange(&q->dead_note, 0) && q->added && !p->base.closing)
            gmr_abandon_peer(p, i);
        if (atomic_load_explicit(&q->readmit_note, memory_order_acquire) &&
            atomic_exchange(&q->readmit_note, 0))
            apply_readmit(p, q);
    }
}

/* Blocks until GM has an event, or timeout_ms passed, sleeping in gm_compat_wait (which also
 * runs libgm's progress and watchdog).  On shm every message to the port wakes it (a
 * doorbell), so it sleeps the whole timeout.  Elsewhere messages from other hosts do not, so
 * it naps idle/16, at least 20 us and at most 4 ms, where idle is the time since the port
 * last did something: right after traffic (a task that blocked waiting for a reply) the reply
 * is picked up within ~20 us; an idle domain wakes ~250 times a second instead of 1000+; a
 * send (gmr_kick) cuts a nap short, as its reply comes soon.  The calling thread's timer
 * slack is set to 1 us once, or a 20 us sleep would last the default 50 us more.  No route
 * lock is held while sleeping (libgm locks its port itself). */
static GMR_THREAD_LOCAL int slack_set;

void gmr_kick(struct cor_rport *p)
{
    if (p->rings) return;                                             /* the reply rings */
    if (atomic_load_explicit(&p->kick, memory_order_relaxed)) return; /* already kicked */
    atomic_store(&p->kick, 1);
    gm_compat_wake(p->gp);
}

static uint64_t nap_ns(struct cor_rport *p, uint64_t now)
{
    /* read each time: tasks polling meanwhile keep the port active, and a task that stops
     * polling to sleep must not find us deep in a long nap */
    uint64_t active = atomic_load(&p->active_ns);
    uint64_t nap = now > active ? (now - active) / 16 : 0;
    if (nap < 20000) nap = 20000;
    if (nap > 4000000) nap = 4000000;
    return nap;
}

/* The core's listener is to look at its stop request: wait() returns now, or at once. */
static void gmr_wake(struct cor_rport *p)
{
    if (!p) return;
    atomic_store(&p->woken, 1);
    gm_compat_wake(p->gp);
}

static int gmr_wait(struct cor_rport *p, int timeout_ms)
{
    if (!p || route_work(p) || atomic_exchange(&p->woken, 0)) return 1;
    if (p->rings) { /* shm: the peers' liveness probe is due (gmr_probe, by the owner) */
        uint64_t t = rutil_now_ns();
        if (t - atomic_load_explicit(&p->probe_ns, memory_order_relaxed) >=
            (uint64_t)GMR_PROBE_MS * 1000000u) {
            atomic_store_explicit(&p->probe_ns, t, memory_order_relaxed);
            atomic_store(&p->probe_due, 1);
            return 1;
        }
    }
    if (!slack_set) {
        slack_set = 1;
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    }
    uint64_t now = rutil_now_ns();
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)timeout_ms * 1000000u;
    if (p->rings) { /* back for the next probe (the listener may ask for a long wait) */
        uint64_t probe = atomic_load_explicit(&p->probe_ns, memory_order_relaxed) +
                         (uint64_t)GMR_PROBE_MS * 1000000u;
        if (probe < deadline) deadline = probe;
    }
    for (; now < deadline; now = rutil_now_ns()) {
        uint64_t sleep = p->rings ? deadline - now : nap_ns(p, now);
        if (sleep > deadline - now) sleep = deadline - now;
        if (gm_compat_wait(p->gp, (unsigned long)((sleep + 999) / 1000))) return 1;
        if (atomic_exchange(&p->woken, 0)) return 1;
        if (atomic_exchange(&p->kick, 0)) /* a send since: its reply comes soon, nap short */
            atomic_store(&p->active_ns, rutil_now_ns());
    }
    return 0;
}

/* The launcher told the core that `peer` died: frames held for it finish with
 * COR_EPEERDEAD at the next progress(), later sends are refused. Any thread may tell us, so
 * the owner gives the peer up at its next call (gmr_take_notes). */
static void gmr_peer_dead_slot(struct cor_rport *p, cor_peer_t peer)
{
    if (!p || peer >= p->base.npeers || peer == p->base.self) return;
    atomic_store(&p->peers[peer].gone, 1);
    atomic_store(&p->peers[peer].dead_note, 1);
    atomic_store(&p->notes, 1);
    gmr_wake(p); /* a listener asleep on an idle port takes the note now */
}

static void gmr_caps(struct cor_rport *p, struct cor_route_caps *caps)
{
    if (!p || !caps) return;
    caps->frame_max = gm_max_length_for_size(p->k.data_class) - GMR_HDR;
    caps->eager_limit = p->k.eager;
    caps->has_rma = 1;
    caps->zero_copy_send = 0;
}

static void gmr_counters(struct cor_rport *p, uint64_t *dropped, uint64_t *retransmits)
{
    if (!p) return;
    rutil_counters_put(dropped, retransmits, rutil_port_dropped(&p->base), 0); /* GM retransmits */
}

COR_ROUTE_DECLARE(gm) = {
    .size = sizeof(struct cor_route_ops),
    .abi = COR_ROUTE_ABI,
    .name = "gm",
    .open = gmr_open,
    .close = gmr_close,
    .address = gmr_address,
    .add_peer = gmr_add_peer,
    .send = gmr_send,
    .progress = gmr_progress,
    .wait_fd = gmr_wait_fd,
    .timeout_ms = gmr_timeout_ms,
    .caps = gmr_caps,
    .counters = gmr_counters,
    .mem_register = gmr_mem_register,
    .mem_deregister = gmr_mem_deregister,
    .put = gmr_put,
    .get = gmr_get,
    .mem_alloc = gmr_mem_alloc,
    .mem_free = gmr_mem_free,
    .peer_dead = gmr_peer_dead_slot,
    .wait = gmr_wait,
    .knobs = gmr_knob_table,
    .nknobs = 0 GM_KNOBS(RUTIL_KNOB_COUNT),
    .prepare = gm_compat_prepare,
    .wake = gmr_wake,
    .await_peer = gmr_await_peer,
    .lazy_peers = 1,
};
