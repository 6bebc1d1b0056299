/*
 * Peers the core waits for with nothing of ours in flight to them: stopped, or only slow?
 *
 * The route judges a peer's silence only while datagrams of ours wait for its
 * acknowledgement (udp_rx.c, run_timers) or after its host refused one (its port closed).
 * A domain that waits for a peer's rendezvous answer (an RTS's clear-to-send, a CTS's data)
 * or a service reply has nothing in flight once the request was acknowledged: a peer stopped
 * then (SIGSTOP, a debugger) keeps its port, its kernel takes our probes in, and it was never
 * given up.
 *
 * So the core says what it waits for (await_peer, route.h), and while it waits and nothing
 * of ours is in flight to the peer, the timers (run_timers) send the peer a PING when it was
 * silent for a quarter of COR_UDP_DEAD_MS: a header-only ACK with UDP_F_PING, which the
 * peer's progress() (its listener, or a task that polls) answers with an ACK at once, without
 * waking its tasks. Anything from the peer counts as the answer. An unanswered PING is sent
 * again every quarter of the dead time (a datagram may be lost); a peer that answered none
 * for COR_UDP_DEAD_MS is given up with COR_ETIMEDOUT (the core reports it lost), judged only
 * when our socket had nothing more to read, as every silence here. A stopped process never
 * answers; a slow one (sanitizers, CPU hogs) answers within the dead time, which is what
 * COR_UDP_DEAD_MS is sized for. A PING also counts as a probe: a closed port's refusal gives
 * the peer up 200 ms later (udp_rx.c, refusals_in).
 *
 * A peer awaited before this port ever talked to it (a slow barrier awaits every peer: the
 * core's watch, cor/core/boot.h) has no state yet, and the timers look only at peers with
 * state: it gets its state when the wait begins (udp_await_strangers, from run_timers after a
 * new wait's kick), then the same PINGs and probes as any peer.
 *
 * Cost: nothing is sent and no timer runs for a peer nobody awaits (an idle domain); a live
 * awaited peer gets one PING (60 bytes, and an ACK back) per quiet quarter of the dead time
 * (15 s by default). await_peer itself is an atomic addition, and at the start of a wait a
 * lowering of the port's timer so that the next progress() starts the wait's clock.
 */
#include "udp_port.h"

void udp_op_await_peer(struct cor_rport *p, cor_peer_t peer, int on)
{
    if (!p || peer >= p->base.npeers || peer == p->base.self) return;
    int d = on ? 1 : -1;
    __atomic_fetch_add(&p->dests[peer].awaited, d, __ATOMIC_SEQ_CST);
    if (!on) return;
    /* run_timers starts the wait's clock. It clears the kick before it looks at the peers
     * and looks at it again after it stored the next timer, so a wait that begins while it
     * runs is not lost under its store. */
    __atomic_store_n(&p->await_kick, 1, __ATOMIC_SEQ_CST);
    udp_timer_at(p, rutil_now_ns());
}

void udp_await_strangers(struct cor_rport *p)
{
    for (uint32_t r = 0; r < p->base.npeers; r++)
        if (r != p->base.self && !p->peers[r] && p->dests[r].state == UDP_PEER_UP &&
            __atomic_load_n(&p->dests[r].awaited, __ATOMIC_RELAXED) > 0)
            udp_peer_get(p, r); /* NULL (no memory): the sweep still probes it */
}

/* Sends the peer a PING (port lock held). */
static void ping(struct cor_rport *p, struct udp_peer *peer, uint64_t now)
{
    udp_send_ping(p, peer, now);
    p->pings++;
    peer->ping_last_ns = now;
    if (!peer->ping_first_ns) peer->ping_first_ns = now;
    peer->probed_ns = now; /* a refusal of it is judged as a probe's */
}

uint64_t udp_await_timer(struct cor_rport *p, struct udp_peer *peer, uint64_t now, int drained,
                         int *gave_up)
{
    *gave_up = 0;
    if (__atomic_load_n(&peer->dest->awaited, __ATOMIC_RELAXED) <= 0 ||
        udp_swin_inflight(&peer->sw)) {
        /* Not awaited, or our datagrams in flight: their own dead time judges it. */
        peer->await_ns = peer->ping_first_ns = peer->ping_last_ns = 0;
        return 0;
    }
    uint64_t dead = p->k.dead_ns, quiet = dead / 4;
    if (!peer->await_ns) peer->await_ns = now; /* a new wait: the silence starts now */
    if (peer->ping_first_ns && peer->heard_ns >= peer->ping_first_ns)
        peer->ping_first_ns = peer->ping_last_ns = 0; /* it answered */
    uint64_t since = peer->heard_ns > peer->await_ns ? peer->heard_ns : peer->await_ns;
    /* (Sums, not differences: a thread whose `now` was read before another's ran the
     * timers first may come with a `now` a little older than the times kept.) */
    if (!peer->ping_first_ns) {
        if (now < since + quiet) return since + quiet;
        ping(p, peer, now);
        return now + quiet;
    }
    if (drained && now >= peer->ping_first_ns + dead) {
        udp_log("peer %u answered no ping for %llu ms while we waited for its answer: giving up",
                peer->rank, (unsigned long long)(dead / 1000000));
        udp_fail_peer(p, peer->rank, COR_ETIMEDOUT); /* silent: the core reports it lost */
        *gave_up = 1;
        return 0;
    }
    if (now >= peer->ping_last_ns + quiet) ping(p, peer, now);
    uint64_t again = peer->ping_last_ns + quiet, end = peer->ping_first_ns + dead;
    return again < end ? again : end;
}
