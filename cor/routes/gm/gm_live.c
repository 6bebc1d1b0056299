/*
 * Peers the core waits for with nothing of ours held for them: stopped or only slow?
 *
 * The route's other checks run only for what it holds: frames waiting for a peer's credits or
 * send tokens (gm_tx.c, starving()), a send held inside libgm (gm_watch.c), a port nobody
 * holds any more (gmr_probe). A domain that waits for a peer's rendezvous answer (an RTS's
 * clear-to-send, a CTS's data) or a service reply holds nothing: over shm its RTS landed in
 * the peer's memory and completed. A peer stopped then (SIGSTOP, a debugger) was never given
 * up (tests/proc/starve.sh, "answer" case: ~3 in 60 sessions of its lock case ended so).
 *
 * So the core says what it waits for (await_peer, route.h), and while it waits the owner
 * looks every 50 ms (gmr_liveness, from after_events): a peer silent for a quarter of
 * COR_GM_DEAD_MS gets a PING, a high-priority control message that whichever thread of the
 * peer polls its port answers with a PONG (a listener woken by the shm doorbell, a spinning
 * task), without waking its tasks. Anything from the peer counts as the answer. A PING
 * unanswered for COR_GM_DEAD_MS gives the peer up with COR_ETIMEDOUT: the core reports it
 * lost and cor-run kills it. A stopped process never answers; a slow one (TSan, CPU hogs)
 * answers within the dead time as its credits would, which is what COR_GM_DEAD_MS is sized
 * for. An idle domain awaits nothing and sends no PING; a live one waited for gets one PING
 * per quiet quarter of the dead time (1.25 s by default), 16 bytes.
 */
#include "gm_port.h"

void gmr_await_peer(struct cor_rport *p, cor_peer_t peer, int on)
{
    if (!p || peer >= p->base.npeers) return;
    int d = on ? 1 : -1;
    atomic_fetch_add_explicit(&p->peers[peer].awaited, d, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->awaiting, d, memory_order_relaxed);
}

void gmr_liveness(struct cor_rport *p, uint64_t now)
{
    p->live_ns = now;
    uint64_t dead = (uint64_t)p->k.dead_ms * 1000000u, quiet = dead / 4;
    for (uint32_t i = 0; i < p->base.npeers; i++) {
        struct gmr_peer *q = &p->peers[i];
        int added = 0;
        if (atomic_load_explicit(&q->awaited, memory_order_relaxed) > 0) {
            /* With peers at first contact add_peer (another thread, under mem_lock) may be
             * making this peer right now: what it wrote (local, node) is ours once added is
             * read under the lock (ThreadSanitizer, lazypeers.sh over tcp). */
            pthread_mutex_lock(&p->mem_lock);
            added = q->added;
            pthread_mutex_unlock(&p->mem_lock);
        }
        if (!added || q->dead || q->local) {
            q->quiet_ns = q->ping_ns = 0;
            continue;
        }
        if (q->spoke || !q->quiet_ns) { /* alive, or newly awaited: the silence starts now */
            q->spoke = 0;
            q->quiet_ns = now;
            q->ping_ns = 0;
        } else if (q->ping_ns) {
            if (now - q->ping_ns > dead) {
                gmr_log("domain %u answered no probe for %u ms while we waited for its answer: "
                        "giving up",
                        i, p->k.dead_ms);
                gmr_peer_dead(p, i, COR_ETIMEDOUT); /* silent: the core reports it lost */
            }
        } else if (now - q->quiet_ns >= quiet && !q->ping_busy && p->tokens > 0) {
            q->ping_busy = 1;
            q->ping_ns = now;
            p->pings++;
            gmr_send_ctrl(p, i, GMR_OP_PING, 0);
        }
    }
}

void gmr_pong(struct cor_rport *p, uint32_t peer)
{
    struct gmr_peer *q = &p->peers[peer];
    if (q->dead) return;
    if (q->pong_busy || p->tokens == 0) { /* gmr_pump answers once a token is back */
        q->pong_wanted = 1;
        p->credit_due = 1;
        return;
    }
    q->pong_wanted = 0;
    q->pong_busy = 1;
    p->pongs++;
    gmr_send_ctrl(p, peer, GMR_OP_PONG, 0);
}

void gmr_live_abandon(struct cor_rport *p, struct gmr_peer *q)
{
    q->pong_wanted = 0;
    q->ping_ns = q->quiet_ns = 0;
    if (q->ping_busy) {
        q->ping_busy = 0;
        q->ping_abandoned = 1;
        p->tokens++;
    }
    if (q->pong_busy) {
        q->pong_busy = 0;
        q->pong_abandoned = 1;
        p->tokens++;
    }
}
