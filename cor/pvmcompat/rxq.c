/*
 * The routed receive queue: routed messages waiting for a receive call, kept apart from
 * libpvm3's receive queue so that a thread finds and takes its message without the big lock.
 *
 * A routed message becomes a libpvm3 message when it is pumped (msgio.c, big lock: its buffer
 * id and fragments are libpvm3's), and is then appended here instead of libpvm3's queue, its
 * decoding already set up (as pvm_recv would when it takes it). A receive call looks here
 * first, by libpvm3's matching rule (source and tag, -1 any; the thread's context), under
 * this queue's own lock; the message it takes becomes the thread's receive buffer without
 * the big lock (lock.c: the thread's buffer is installed in libpvm3 at its next call, and
 * the buffer it replaces, which PVM frees at every receive, is freed by the next holder of
 * the big lock). Only what is really libpvm3's waits for the big lock: pumping (making the
 * message), PVM's own path, and reading PVM's sockets.
 *
 * Order. PVM keeps each sender's order. A routed message goes here only when libpvm3's queue
 * holds nothing from its sender (else after it, into libpvm3's queue); so whenever both
 * queues hold messages of one sender, the ones here are the older (the later ones came PVM's
 * way after the route gave the pair up), and a receive that looks here first keeps the order.
 * Anything libpvm3 must see whole (a matcher of the program's, pvm_recvf; tracing; a message
 * the program names by its id in a call that changes it, as pvm_freebuf) first moves this
 * queue to the head of libpvm3's (cpvm_rxq_flush). Programs with message handlers of their
 * own get every routed message through libpvm3's mesg_input, as before.
 */
#include "pmsg.h"
#include "route.h"

extern struct lp_msg *pvmrxlist; /* libpvm3's queue: a master node */
extern struct Pvmtracer pvmtrc;
extern int pvmmydsig;

static pthread_mutex_t rq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lp_msg rq_head = {&rq_head, &rq_head}; /* (rq_lock) a master node, as libpvm3's */
static _Atomic unsigned rq_len;                      /* messages in the queue */
/* Snapshots of the big lock's last holder (cpvm_rxq_publish), for receives without it. */
static _Atomic bool rq_on;   /* routed messages go to the queue */
static _Atomic bool rx_busy; /* libpvm3's queue holds messages */
int cpvm_user_handlers;      /* the program's message handlers (big lock) */
static _Atomic bool pumper;  /* a receive without the lock is taking it to pump */

static bool usable(void)
{
    return cpvm_rt.joined && !cpvm_rt.leaving && !cpvm_custom_match && cpvm_user_handlers <= 0 &&
           pvmtrc.trctid <= 0;
}

/* A receive that takes the big lock to pump (cpvm_recv_unlocked) gets the first message it
 * makes that it would take from the queue, handed over without the queue (its lock, the wake
 * of the waiters, another look), if the queue is empty: nothing older could match. */
static _Thread_local struct want {
    bool on;
    int tid, tag, ctx, how;
    struct lp_msg *got;
} want;

static bool matches(const struct lp_msg *m, int tid, int tag, int ctx)
{
    return (tid == -1 || tid == m->src) && (tag == -1 || tag == m->tag) &&
           (ctx == -1 || ctx == m->ctx);
}

/* Whether libpvm3's queue holds a message of src; big lock. */
static bool rxlist_has(int src)
{
    if (!pvmrxlist) return true; /* (no queue yet: let libpvm3 make it) */
    for (struct lp_msg *m = pvmrxlist->link; m != pvmrxlist; m = m->link)
        if (m->src == src) return true;
    return false;
}

void cpvm_in_deliver(struct lp_msg *m)
{
    bool ready = m->flag & LP_MM_READY; /* a receive spare: its decoding is set up */
    m->flag &= ~LP_MM_READY;
    if (!usable() || rxlist_has(m->src)) {
        if (ready) m->flag &= ~LP_MM_UPACK; /* (as a message libpvm3 made) */
        REAL(mesg_input, (struct pmsg *)m);
        return;
    }
    /* What pvm_recv does to the message it takes: unpacking starts at its beginning. */
    if (!ready) {
        m->flag &= ~LP_MM_UPACK;
        int old = REAL(pvm_setrbuf, m->mid);
        REAL(pvm_setrbuf, old);
    }
    if (want.on && !atomic_load(&rq_len) && matches(m, want.tid, want.tag, want.ctx) &&
        (want.how != CPVM_RXQ_NATIVE || m->enc == pvmmydsig)) {
        want.on = false;
        want.got = m;
        return;
    }
    pthread_mutex_lock(&rq_lock);
    m->link = &rq_head;
    m->rlink = rq_head.rlink;
    rq_head.rlink->link = m;
    rq_head.rlink = m;
    atomic_fetch_add(&rq_len, 1);
    pthread_mutex_unlock(&rq_lock);
    /* Waiters count themselves before they look (wait.c): one that missed it wakes. */
    if (cpvm_waiters()) cpvm_wake_waiters();
}

void cpvm_rxq_flush(void)
{
    if (!atomic_load(&rq_len) || !pvmrxlist) return;
    pthread_mutex_lock(&rq_lock);
    if (rq_head.link != &rq_head) { /* the whole queue, in order, at the head of libpvm3's */
        struct lp_msg *first = rq_head.link, *last = rq_head.rlink;
        last->link = pvmrxlist->link;
        pvmrxlist->link->rlink = last;
        first->rlink = pvmrxlist;
        pvmrxlist->link = first;
        rq_head.link = rq_head.rlink = &rq_head;
        atomic_store(&rq_len, 0);
    }
    pthread_mutex_unlock(&rq_lock);
}

void cpvm_rxq_release(int mid)
{
    if (mid <= 0 || !atomic_load(&rq_len)) return;
    bool held = false;
    pthread_mutex_lock(&rq_lock);
    for (struct lp_msg *m = rq_head.link; m != &rq_head && !held; m = m->link)
        held = m->mid == mid;
    pthread_mutex_unlock(&rq_lock);
    if (held) cpvm_rxq_flush();
}

struct lp_msg *cpvm_rxq_take(int tid, int tag, int ctx, int how)
{
    if (!atomic_load(&rq_len)) return NULL;
    struct lp_msg *found = NULL;
    pthread_mutex_lock(&rq_lock);
    for (struct lp_msg *m = rq_head.link; m != &rq_head; m = m->link)
        if (matches(m, tid, tag, ctx)) {
            found = m;
            break;
        }
    if (found && how == CPVM_RXQ_NATIVE && found->enc != pvmmydsig) found = NULL;
    if (found && how != CPVM_RXQ_PEEK) {
        found->rlink->link = found->link;
        found->link->rlink = found->rlink;
        found->link = found->rlink = NULL;
        atomic_fetch_sub(&rq_len, 1);
    }
    pthread_mutex_unlock(&rq_lock);
    return found;
}

void cpvm_rxq_publish(void)
{
    bool on = usable();
    if (!on) cpvm_rxq_flush();
    atomic_store(&rq_on, on);
    atomic_store(&rx_busy, pvmrxlist && pvmrxlist->link != pvmrxlist);
}

/* The receive buffer a taken message becomes: unpacked without the lock if native. */
static struct lp_msg *unpackable(struct lp_msg *m)
{
    return m && m->enc == pvmmydsig ? m : NULL;
}

/* pvm_precv's end, as libpvm3's: the message's bytes (native: its decoder reads them) into
 * the caller's buffer, the message freed, the receive buffer left as it was. */
static int precv_finish(struct lp_msg *m, const struct cpvm_precv *p)
{
    int bytes = m->len;
    if (p->rtid) *p->rtid = m->src;
    if (p->rtag) *p->rtag = m->tag;
    if (p->rlen) *p->rlen = bytes / p->size;
    long want = (long)p->len * p->size;
    int rc = cpvm_unpack(m, LP_BYTE, p->buf, (int)(want < bytes ? want : bytes), 1, 1, "pvm_precv");
    cpvm_trash(m->mid);
    return rc;
}

/* A receive without the lock found m (taken out of the queue unless it probes). */
static int took(struct lp_msg *m, int mode, const struct cpvm_precv *precv, int *rc)
{
    *rc = m->mid;
    if (precv) {
        *rc = precv_finish(m, precv);
    } else if (mode != CPVM_RX_PROBE) {
        cpvm_adopt_rbuf(m, unpackable(m));
    }
    if (mode != CPVM_RX_PROBE)
        atomic_fetch_add_explicit(&cpvm_stats.recv_unlocked, 1, memory_order_relaxed);
    return 1;
}

int cpvm_recv_unlocked(int tid, int tag, int mode, uint64_t deadline_ns,
                       const struct cpvm_precv *precv, int *rc)
{
    int ctx;
    bool spun = mode == CPVM_RX_AGAIN; /* (it spun before CPVM_RX_LONG: it sleeps at once) */
    if (spun) mode = CPVM_RX_BLOCK;
    if (!atomic_load(&rq_on) || !cpvm_own_context(&ctx)) return 0;
    /* Lock-free for the spin (COR_PVM_SPIN_US) and a while after it, asleep; a longer wait
     * is the locked path's (it sees PVM's sockets as they are now). */
    uint64_t spin_end = 0, give_up = 0;
    for (;;) {
        cpvm_watch_begin(); /* counted before it looks: whoever queues meanwhile wakes it */
        uint64_t gen0 = cpvm_generation(), arr0 = cpvm_arrivals();
        int how = mode == CPVM_RX_PROBE ? CPVM_RXQ_PEEK : precv ? CPVM_RXQ_NATIVE : CPVM_RXQ_TAKE;
        struct lp_msg *m = cpvm_rxq_take(tid, tag, ctx, how);
        if (!m && precv && cpvm_rxq_take(tid, tag, ctx, CPVM_RXQ_PEEK)) {
            cpvm_watch_end(); /* (encoded: libpvm3 unpacks it, under the lock) */
            return 0;
        }
        if (m) {
            cpvm_watch_end();
            return took(m, mode, precv, rc);
        }
        if (cpvm_routed_arrived()) {
            /* To pump (the big lock's work): one receiving thread at a time takes the lock
             * for it (a holder also pumps as it leaves); the others wait for the news. */
            bool idle = false;
            if (atomic_compare_exchange_strong(&pumper, &idle, true)) {
                cpvm_watch_end();
                cpvm_in_recv++;
                cpvm_enter_to_pump();
                cpvm_in_recv--;
                if (how != CPVM_RXQ_PEEK) want = (struct want){true, tid, tag, ctx, how, NULL};
                cpvm_pump();
                cpvm_leave();
                want.on = false;
                m = want.got;
                want.got = NULL;
                atomic_store(&pumper, false);
                if (m) return took(m, mode, precv, rc);
                continue;
            }
            /* Asleep, not yielding: with more threads than cores, yielding threads take the
             * pumper's turns. (At most 1 ms: the pump may have queued nothing.) */
            cpvm_wait_news(gen0, cpvm_now_ns() + 1000000u);
            cpvm_watch_end();
            continue;
        }
        /* libpvm3 has to look: its queue holds messages, its sockets have data, or the
         * queue here is off. */
        if (atomic_load(&rx_busy) || !atomic_load(&rq_on) || cpvm_sockets_flagged()) {
            cpvm_watch_end();
            return 0;
        }
        uint64_t now = cpvm_now_ns();
        if (mode != CPVM_RX_BLOCK) {
            cpvm_watch_end();
            if (cpvm_sockets_stale(now)) return 0; /* (pvm_nrecv reads them every 20 us) */
            *rc = 0;
            if (mode == CPVM_RX_NONBLOCK) cpvm_adopt_rbuf(NULL, NULL); /* as pvm_nrecv does */
            return 1;
        }
        if (!cpvm_sockets_known()) {
            cpvm_watch_end();
            return 0; /* (the locked wait watches PVM's sockets too, and notes them for us) */
        }
        if (!spin_end) {
            /* Nothing came yet: the lock's chores now, not on the message's way (still
             * counted as a waiter: a message queued meanwhile ends the wait at once). */
            cpvm_chores();
            spin_end = spun ? now : cpvm_spin_end();
            give_up = spun ? UINT64_MAX : spin_end + 20000000u; /* (AGAIN: looked now) */
        }
        if (deadline_ns && now >= deadline_ns) {
            cpvm_watch_end();
            return 0; /* the locked path's last look */
        }
        if (now >= give_up) {
            /* A look under the lock at what may have changed meanwhile (PVM's sockets as
             * they are now), then back here: a thread waiting long in the locked path took
             * the big lock again at every wake-up of every waiter (8 receiving threads of
             * a loaded machine: thousands of waits for it a second). */
            cpvm_watch_end();
            if (mode != CPVM_RX_BLOCK || precv) return 0;
            return CPVM_RX_LONG;
        }
        uint64_t until = give_up == UINT64_MAX                  ? deadline_ns /* (0: none) */
                         : deadline_ns && deadline_ns < give_up ? deadline_ns
                                                                : give_up;
        cpvm_wait_unlocked(gen0, arr0, until, spin_end);
        cpvm_watch_end();
    }
}
