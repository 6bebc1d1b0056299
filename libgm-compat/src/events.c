/* events.c - the event loop calls: gm_receive, gm_blocking_receive*,
 * gm_receive_pending, gm_next_event_peek, gm_unknown (callbacks, alarms,
 * sleeping). */
#include "gm_internal.h"
#include "gm_compat.h"

#include <string.h>
#include <time.h>

#define GMX_SPIN_NS 1000000u /* blocking receive spins this long */
#define GMX_NAP_NS 10000000u /* one _GM_SLEEP_EVENT sleeps at most this long */

/* ---- the event loop ------------------------------------------------------ */

static gm_recv_event_t *set_type(struct gm_port *p, unsigned type)
{
    p->cur.recv.type = gm_hton_u8((gm_u8_t)type);
    return &p->cur;
}

/* The next event, or NULL when idle.  Takes the port lock. */
static gm_recv_event_t *next_event_locked(struct gm_port *p);
static gm_recv_event_t *next_event(struct gm_port *p)
{
    gmx_port_lock(p);
    gm_recv_event_t *e = next_event_locked(p);
    gmx_port_unlock(p);
    return e;
}

static gm_recv_event_t *next_event_locked(struct gm_port *p)
{
    if (p->done) return set_type(p, GM_SENT_TOKENS_EVENT);
    if (!p->ring_count) {
        gmx_progress(p);
        /* Callbacks first: on GM the ack of a message reaches its sender
         * before any reply the target sent after receiving it. */
        if (p->done) return set_type(p, GM_SENT_TOKENS_EVENT);
    }
    if (p->ring_count) {
        p->cur = p->ring[p->ring_head];
        p->ring_head = (p->ring_head + 1) % p->ring_cap;
        p->ring_count--;
        return &p->cur;
    }
    if (p->alarms && gmx_alarm_due(p, gmx_now_ns())) return set_type(p, GM_ALARM_EVENT);
    return NULL;
}

GMX_EXPORT gm_recv_event_t *gm_receive(struct gm_port *p)
{
    static gm_recv_event_t none; /* type 0; only for a NULL port */
    if (!p) return &none;
    gm_recv_event_t *e = next_event(p);
    return e ? e : set_type(p, GM_NO_RECV_EVENT);
}

GMX_EXPORT gm_recv_event_t *gm_blocking_receive(struct gm_port *p)
{
    if (!p) return gm_receive(p);
    uint64_t start = 0;
    for (unsigned i = 0;; i++) {
        gm_recv_event_t *e = next_event(p);
        if (e) return e;
        if ((i & 63) == 0) {
            uint64_t now = gmx_now_ns();
            if (!start)
                start = now;
            else if (now - start > GMX_SPIN_NS)
                return set_type(p, _GM_SLEEP_EVENT);
        }
    }
}

GMX_EXPORT gm_recv_event_t *gm_blocking_receive_no_spin(struct gm_port *p)
{
    if (!p) return gm_receive(p);
    gm_recv_event_t *e = next_event(p);
    return e ? e : set_type(p, _GM_SLEEP_EVENT);
}

static int pending_locked(struct gm_port *p)
{
    if (!p->ring_count && !p->done) gmx_progress(p);
    return p->ring_count || p->done || (p->alarms && gmx_alarm_due(p, gmx_now_ns()));
}

GMX_EXPORT int gm_receive_pending(struct gm_port *p)
{
    if (!p) return 0;
    gmx_port_lock(p);
    int r = pending_locked(p);
    gmx_port_unlock(p);
    return r;
}

GMX_EXPORT int gm_next_event_peek(struct gm_port *p, gm_u16_t *sender)
{
    if (!p) return GM_NO_RECV_EVENT;
    int type = GM_NO_RECV_EVENT;
    gmx_port_lock(p);
    if (!pending_locked(p)) {
        type = GM_NO_RECV_EVENT;
    } else if (p->done) {
        type = GM_SENT_TOKENS_EVENT;
    } else if (p->ring_count) {
        gm_recv_event_t *e = &p->ring[p->ring_head];
        if (sender) *sender = gm_ntoh_u16(e->recv.sender_node_id);
        type = GM_RECV_EVENT_TYPE(e);
    } else {
        type = GM_ALARM_EVENT;
    }
    gmx_port_unlock(p);
    return type;
}

/* ---- sleeping ------------------------------------------------------------ */

/* One sleep on the port's doorbell (bell.c): until a ring (on shm, anything a process on
 * this host sends to the port; gm_compat_wake), the next alarm, or `ns`.  While the port
 * owes acks, or sends wait anywhere in the process, it sleeps at most GMX_ACK_DELAY_NS:
 * its progress rounds send those.  1 if an event is ready after it. */
static int bell_wait(struct gm_port *p, uint64_t ns)
{
    uint32_t seen = gmx_bell_arm(p->bell);
    int woken = atomic_exchange(&p->wake_req, 0); /* after arming: a later one rings */
    gmx_port_lock(p);
    /* A sleeper looks at its acks' age each time (a poller only every GMX_ACK_LOOK_EVERY
     * calls): its rounds are 20 us apart, and skipping 15 of them held acks for ~0.3 ms. */
    if (p->ack_list) gmx_acks_flush(p, 0);
    int ready = pending_locked(p);
    int owes = p->ack_list || atomic_load(&gmx_backlogged_ports) > 0 || gmx_tp_busy(p);
    uint64_t alarm = gmx_alarm_next(p);
    gmx_port_unlock(p);
    if (!ready) {
        uint64_t now = gmx_now_ns();
        if (alarm && alarm <= now)
            ns = 0;
        else if (alarm && alarm - now < ns)
            ns = alarm - now;
        if (owes && ns > GMX_ACK_DELAY_NS) ns = GMX_ACK_DELAY_NS;
        if (ns && !woken) gmx_bell_sleep(p->bell, seen, ns);
    }
    gmx_bell_disarm(p->bell);
    atomic_store(&p->wake_req, 0); /* answered (a wake during the sleep rang it) */
    return ready || gm_receive_pending(p);
}

/* _GM_SLEEP_EVENT: sleeps until an event is ready, the next alarm, or GMX_NAP_NS.  Where
 * the network does not ring (other providers than shm) it looks again every 20 us. */
static void nap(struct gm_port *p)
{
    uint64_t until = gmx_now_ns() + GMX_NAP_NS;
    for (;;) {
        uint64_t now = gmx_now_ns();
        if (now >= until) return;
        uint64_t ns = p->addr_is_str ? until - now : 20000;
        if (bell_wait(p, ns)) return;
    }
}

GMX_EXPORT int gm_compat_wait(struct gm_port *p, unsigned long timeout_us)
{
    if (!p) return 0;
    uint64_t ns = timeout_us > UINT64_MAX / 1000u ? UINT64_MAX : (uint64_t)timeout_us * 1000u;
    return bell_wait(p, ns);
}

GMX_EXPORT void gm_compat_wake(struct gm_port *p)
{
    if (!p) return;
    /* A wake before the sleeper armed its bell would ring nobody: it finds the request. */
    atomic_store(&p->wake_req, 1);
    gmx_bell_ring(p->bell); /* (a full fence before its look at armed) */
}

GMX_EXPORT int gm_compat_wakes_on_arrival(struct gm_port *p)
{
    return p && p->addr_is_str && p->bell != &p->own_bell;
}

static void run_callbacks(struct gm_port *p)
{
    /* Detach first: callbacks may send, and those completions go on a new
     * list. */
    gmx_port_lock(p);
    struct gmx_sreq *s = p->done;
    p->done = p->done_tail = NULL;
    gmx_port_unlock(p);
    while (s) {
        /* Callbacks run without the port lock: they call back into GM. */
        gmx_port_lock(p);
        struct gmx_sreq *next = s->next;
        gm_send_completion_callback_t cb = s->cb;
        void *ctx = s->ctx;
        gm_status_t st = s->status;
        gmx_sreq_put(p, s);
        gmx_port_unlock(p);
        if (cb) cb(p, ctx, st);
        s = next;
    }
}

GMX_EXPORT void gm_unknown(struct gm_port *p, gm_recv_event_t *e)
{
    if (!p || !e) return;
    unsigned type = GM_RECV_EVENT_TYPE(e);
    switch (type) {
    case GM_SENT_TOKENS_EVENT:
        run_callbacks(p);
        break;
    case GM_ALARM_EVENT:
        gmx_alarms_run(p);
        break;
    case _GM_SLEEP_EVENT:
        nap(p);
        break;
    case GM_RECV_EVENT:
    case GM_HIGH_RECV_EVENT:
    case GM_PEER_RECV_EVENT:
    case GM_HIGH_PEER_RECV_EVENT:
    case GM_FAST_RECV_EVENT:
    case GM_FAST_HIGH_RECV_EVENT:
    case GM_FAST_PEER_RECV_EVENT:
    case GM_FAST_HIGH_PEER_RECV_EVENT: {
        /* An unhandled receive gives its buffer (token) back to GM. */
        unsigned high = type == GM_HIGH_RECV_EVENT || type == GM_HIGH_PEER_RECV_EVENT ||
                        type == GM_FAST_HIGH_RECV_EVENT || type == GM_FAST_HIGH_PEER_RECV_EVENT;
        gm_provide_receive_buffer_with_tag(p, gm_ntohp(e->recv.buffer), gm_ntoh_u8(e->recv.size),
                                           high, gm_ntoh_u8(e->recv.tag));
        break;
    }
    default:
        break;
    }
}
