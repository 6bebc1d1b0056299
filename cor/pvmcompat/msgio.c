/*
 * Message calls: a message to a routed peer travels over the CoR route as an image (header
 * and small fragments) followed by its large fragments, each a message of its own, sent from
 * and received into libpvm3's own fragments without a copy (pmsg.c). At the receiver it
 * becomes a libpvm3 message again and waits in the routed receive queue, where receives take
 * it without the big lock (rxq.c), or mesg_input queues it or runs its handler, so every
 * receive call, encoding and handler of libpvm3 works unchanged. Everything else goes PVM's
 * way.
 */
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pmsg.h"
#include "route.h"

#define CPVM_FRAG_TAG 2 /* a detached fragment, after its image (CPVM_DATA_TAG) */

/* ---- sending -------------------------------------------------------------------------
 *
 * Locks. A routed pvm_send or pvm_psend holds the big lock only to find the peer and the
 * thread's send buffer (libpvm3's); it builds the image from the thread's own message
 * without it, and takes the peer's lock (route.h) only for what orders the pair: the check
 * that the pair is still routed, the message's number, the posts of the image and its
 * detached pieces (so the core's order is the numbers' order), and the list of what the peer
 * did not confirm. The data moves under no lock at all: images in the background (the
 * backlog, with a lock of its own), detached pieces while the sender waits for them. What
 * needs libpvm3 (PVM's path, a give-up's resend, pumping routed messages into libpvm3's
 * queue, reading PVM's sockets) goes back under the big lock. pvm_mcast and group calls keep
 * the big lock throughout, and take the peer's lock inside it. */

/* A peer's exit notice arrives on PVM's path: a send waiting for it looks every millisecond,
 * so that the notice fails the send instead of the route giving up after seconds. Lock held,
 * outermost level. */
static void look_for_exits(uint64_t *next_look)
{
    uint64_t now = cpvm_now_ns();
    if (now < *next_look) return;
    *next_look = now + 1000000;
    cpvm_read_sockets();
    if (cpvm_has_deferred()) cpvm_run_deferred();
}

static int arrived(void *arg)
{
    (void)arg;
    return cpvm_routed_arrived();
}

/* Waits for the routed sends of a message without the big lock (other threads' calls go on),
 * and receives meanwhile: two tasks sending each other large messages must each take the
 * other's. Returns the first error. `big`: the big lock is held on entry and exit (it is let
 * go while waiting, unless nested in a group call); else it is taken only to pump, and only
 * when free. */
static int finish_sends(cor_req_t *req, int n, bool big)
{
    uint64_t next_look = cpvm_now_ns() + 1000000;
    int first_err = COR_OK;
    for (int i = 0; i < n;) {
        int done = 0, err;
        if (!req[i]) {
            i++;
            continue;
        }
        err = cor_test(&req[i], &done, NULL); /* eager sends are done by now */
        if (!done && !err && !big) {
            err = cor_wait_timeout(&req[i], -1, 1000, arrived, NULL, &done, NULL);
        } else if (!done && !err && !cpvm_nested()) { /* (a group call keeps the lock) */
            int depth = cpvm_unlock_all();
            err = cor_wait_timeout(&req[i], -1, 1000, arrived, NULL, &done, NULL);
            cpvm_relock_all(depth);
        }
        if (done || err) {
            if (err && !first_err) first_err = err;
            req[i++] = COR_REQ_NULL;
            continue;
        }
        /* Without the big lock, a busy lock means its holder pumps and reads the sockets:
         * then no wait for it, only a turn for the others. */
        if (!big && !cpvm_try_enter()) {
            sched_yield();
            continue;
        }
        cpvm_pump();
        if (!cpvm_nested()) look_for_exits(&next_look);
        if (!big) cpvm_leave();
    }
    return first_err;
}

/* ---- numbers: no message lost or doubled when the route gives a peer up ---------------
 *
 * A route gives a peer up when it stays silent (stopped, swapped out, its port looked
 * closed) while PVM says it lives; a small routed send is complete as soon as the route has
 * its copy, so what the route held for the peer would be lost. Every routed message of a pair
 * therefore carries its number (H_SEQ, 1 and up), and the sender keeps each image until the
 * peer confirms that it took it: the H_ACK of any routed image of the peer's, or, for a
 * one-way stream, an image that only confirms, every CONFIRM_EVERY messages (CTL_CONFIRM on
 * PVM's path if the way back is not routed). A message with detached pieces is confirmed by
 * its own completion (the peer received them into the message it took, after every earlier
 * one). When the route gives the peer up, the sender sends what the peer did not confirm
 * again PVM's way, in order (RESEND_TAG), tells the peer (CTL_GAVEUP: its messages to us
 * take PVM's path as well), and the pair stays on PVM's path. A receiver takes each number
 * once: a message whose number it took already (the peer was only slow, and the route
 * delivered it after all) is dropped and counted; numbers only grow, so either path keeps
 * PVM's order per pair. The numbers, the list and the switch to PVM's path are under the
 * peer's lock: a sender either numbered and listed its message before the give-up (which
 * then sends it again) or finds the pair on PVM's path and sends it there, after them. */
#define CONFIRM_EVERY 32
#define UNCONF_MAX 256 /* unconfirmed messages to one peer before pvm_send waits */

#define KEEP_COPY_MAX 1024 /* a sent image up to this size is kept as a copy of its own */

struct unconf { /* the peer's lock */
    struct unconf *next;
    uint32_t seq;
    void *image; /* from cpvm_out (cpvm_image_release), or malloc'd when cap is 0 */
    size_t cap, len;
    bool in_flight; /* a background send still reads it */
    bool released;  /* confirmed or resent while in flight: the send's end frees it */
};
bool cpvm_confirms_due;

static bool seq_after(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

static void unconf_free(struct unconf *u)
{
    if (u->cap)
        cpvm_image_release(u->image, u->cap);
    else
        free(u->image);
    free(u);
}

/* Its send is over: a small image is kept as a copy, and its buffer (4 KiB at least, maybe
 * the route's memory) goes back for the next message. */
static void unconf_compact(struct unconf *u)
{
    void *copy = u->cap && u->len <= KEEP_COPY_MAX ? malloc(u->len) : NULL;
    if (!copy) return;
    memcpy(copy, u->image, u->len);
    cpvm_image_release(u->image, u->cap);
    u->image = copy;
    u->cap = 0;
}

static void unconf_drop(struct unconf *u)
{
    if (u->in_flight)
        u->released = true;
    else
        unconf_free(u);
}

static struct unconf *unconf_pop(struct cpvm_peer *p)
{
    struct unconf *u = p->unconf_head;
    if (!u) return NULL;
    p->unconf_head = u->next;
    if (!p->unconf_head) p->unconf_tail = NULL;
    p->nunconf--;
    return u;
}

void cpvm_confirmed(struct cpvm_peer *p, uint32_t seq)
{
    pthread_mutex_lock(&p->lock);
    if (seq_after(seq, p->tx_confirmed) && !seq_after(seq, p->tx_seq)) {
        p->tx_confirmed = seq;
        while (p->unconf_head && !seq_after(p->unconf_head->seq, seq))
            unconf_drop(unconf_pop(p));
    }
    pthread_mutex_unlock(&p->lock);
}

/* An image again on PVM's path, as a control message: its length, its bytes. Lock held. */
static void resend(struct cpvm_peer *p, const void *image, size_t bytes)
{
    int buf = REAL(pvm_mkbuf, PvmDataDefault), len = (int)bytes, rc = -1;
    if (buf < 0) return;
    int old = REAL(pvm_setsbuf, buf);
    if (REAL(pvm_pkint, &len, 1, 1) >= 0 && REAL(pvm_pkbyte, (char *)image, len, 1) >= 0) {
        int ctx = REAL(pvm_setcontext, CTL_CTX);
        rc = REAL(pvm_send, p->tid, RESEND_TAG);
        REAL(pvm_setcontext, ctx);
    }
    REAL(pvm_setsbuf, old);
    REAL(pvm_freebuf, buf);
    atomic_fetch_add(rc >= 0 ? &cpvm_stats.resent : &cpvm_stats.dropped, 1);
}

void cpvm_route_gave_up(struct cpvm_peer *p, bool told)
{
    /* The switch to PVM's path and the list taken off under p's lock: a routed send of
     * another thread numbered and listed its message before (it is sent again here) or
     * finds the pair on PVM's path, and then sends it there once it has the big lock, after
     * these. The resends themselves run without p's lock: libpvm3's pvm_send runs message
     * handlers, and p's own resends arriving meanwhile take p's lock (cpvm_resend_handler). */
    pthread_mutex_lock(&p->lock);
    bool was_routed = p->tx == TX_ROUTED;
    if (was_routed && !p->gone) {
        p->tx = TX_REFUSED;
        atomic_fetch_add(&cpvm_stats.peers_gone, 1);
        cpvm_log("the route %s t%x up: %u unconfirmed message(s) and the next ones take PVM's "
                 "path",
                 told ? "to us was given by" : "gave", (unsigned)p->tid, p->nunconf);
    }
    struct unconf *list = p->unconf_head;
    p->unconf_head = p->unconf_tail = NULL;
    p->nunconf = 0;
    pthread_mutex_unlock(&p->lock);
    while (list) {
        struct unconf *u = list;
        list = u->next;
        if (!p->gone) { /* (gone: PVM said it exited, nobody takes them) */
            /* A copy: a background send's end may compact u's image meanwhile. */
            pthread_mutex_lock(&p->lock);
            size_t len = u->len;
            void *copy = malloc(len);
            if (copy) memcpy(copy, u->image, len);
            pthread_mutex_unlock(&p->lock);
            if (copy)
                resend(p, copy, len);
            else
                atomic_fetch_add(&cpvm_stats.dropped, 1);
            free(copy);
        }
        pthread_mutex_lock(&p->lock);
        unconf_drop(u);
        pthread_mutex_unlock(&p->lock);
    }
    if (!was_routed || p->gone) return;
    if (told) /* our route forgets it too: nothing waits for its acknowledgements */
        cor_domain_leave(p->rank, 0);
    else
        cpvm_ctl_send(p->tid, CTL_GAVEUP, 0);
}

/* Sends of an image alone (a message without detached pieces: all bytes are libcorpvm's own)
 * complete in the background, as PVM's own sends return once the data is handed over:
 * pvm_send does not wait for them. They are reaped, oldest first, by later sends; at most
 * BACKLOG_MAX wait, and pvm_exit waits for all. Lock: bl_lock (after the big lock, before a
 * peer's). A send that fails means the route gave the peer up: the give-up, which needs the
 * big lock, is handed on as the core's death notices are (cpvm_route_lost). */
#define BACKLOG_MAX 16
static struct backlog {
    cor_req_t req;
    struct unconf *u; /* the image */
    struct cpvm_peer *peer;
} backlog[BACKLOG_MAX];
static unsigned bl_first, bl_count;
static pthread_mutex_t bl_lock = PTHREAD_MUTEX_INITIALIZER;

/* Tests one background send (progressing the routes): true once it is complete (and then
 * retired: b->u is NULL). bl_lock held. */
static bool background_done(struct backlog *b)
{
    if (!b->u) return true;
    int done = 0, err = b->req ? cor_test(&b->req, &done, NULL) : COR_OK;
    if (b->req && !done) return false;
    struct unconf *u = b->u;
    b->u = NULL;
    pthread_mutex_lock(&b->peer->lock);
    u->in_flight = false;
    if (u->released)
        unconf_free(u);
    else
        unconf_compact(u);
    pthread_mutex_unlock(&b->peer->lock);
    if (err) cpvm_route_lost(b->peer->rank);
    return true;
}

/* Completes the oldest background sends that are done; returns how many are left. bl_lock. */
static unsigned reap(void)
{
    while (bl_count) {
        struct backlog *b = &backlog[bl_first];
        int done = 0;
        if (b->u && cor_peek(b->req, &done) == COR_OK && !done) return bl_count;
        if (!background_done(b)) return bl_count;
        bl_first = (bl_first + 1) % BACKLOG_MAX;
        bl_count--;
    }
    return 0;
}

/* Until at most `most` background sends are left; returns with bl_lock held. `big`: the big
 * lock is held (let go while yielding, unless nested). */
static void reap_until(unsigned most, bool big)
{
    uint64_t next_look = cpvm_now_ns() + 1000000;
    pthread_mutex_lock(&bl_lock);
    while (reap() > most) {
        background_done(&backlog[bl_first]); /* progresses the routes */
        if (big && cpvm_nested()) continue;
        pthread_mutex_unlock(&bl_lock);
        if (big) {
            look_for_exits(&next_look);
            int depth = cpvm_unlock_all();
            sched_yield();
            cpvm_relock_all(depth);
        } else {
            sched_yield();
        }
        pthread_mutex_lock(&bl_lock);
    }
}

void cpvm_sends_drain(void)
{
    reap_until(0, true);
    pthread_mutex_unlock(&bl_lock);
    /* Leaving: what peers did not confirm yet is kept until cor_finalize is over (a peer the
     * route gives up meanwhile gets it PVM's way), as copies of its own: an image's buffer
     * may be the core's memory. */
    for (int r = 0; r < cpvm_rt.capacity; r++) {
        struct cpvm_peer *p = cpvm_peer_of_rank(r);
        if (!p) continue;
        pthread_mutex_lock(&p->lock);
        for (struct unconf *u = p->unconf_head; u; u = u->next) {
            void *copy = u->cap ? malloc(u->len) : NULL;
            if (!copy) continue; /* (kept where it is: malloc failing at exit) */
            memcpy(copy, u->image, u->len);
            cpvm_image_release(u->image, u->cap);
            u->image = copy;
            u->cap = 0;
        }
        pthread_mutex_unlock(&p->lock);
    }
}

void cpvm_unconfirmed_forget(void)
{
    /* cor_finalize is over: every peer still reachable acknowledged our frames. */
    for (int r = 0; r < cpvm_rt.capacity; r++) {
        struct cpvm_peer *p = cpvm_peer_of_rank(r);
        if (!p) continue;
        pthread_mutex_lock(&p->lock);
        for (struct unconf *u; (u = unconf_pop(p));)
            unconf_drop(u);
        pthread_mutex_unlock(&p->lock);
    }
}

/* Whether a send to p must wait for confirmations first. */
static bool too_many_unconfirmed(struct cpvm_peer *p)
{
    pthread_mutex_lock(&p->lock);
    bool wait = p->nunconf >= UNCONF_MAX && p->tx == TX_ROUTED;
    pthread_mutex_unlock(&p->lock);
    return wait;
}

/* Until peer p confirmed enough of our messages, or its route gave it up. Big lock held. */
static void wait_confirms(struct cpvm_peer *p)
{
    uint64_t next_look = cpvm_now_ns() + 1000000;
    while (too_many_unconfirmed(p) && !cpvm_nested()) {
        pthread_mutex_lock(&bl_lock);
        reap();
        pthread_mutex_unlock(&bl_lock);
        cpvm_pump();
        look_for_exits(&next_look);
        if (!too_many_unconfirmed(p)) break;
        int depth = cpvm_unlock_all();
        cpvm_routed_wait(0, 1000, NULL, NULL);
        cpvm_relock_all(depth);
    }
}

/* In the background: the image u (its number already in it) to peer p. */
static void background_send(struct cpvm_peer *p, cor_req_t req, struct unconf *u, bool big)
{
    reap_until(BACKLOG_MAX - 1, big);
    backlog[(bl_first + bl_count++) % BACKLOG_MAX] = (struct backlog){req, u, p};
    pthread_mutex_unlock(&bl_lock);
}

/* An image that only confirms what we took from p (up to seq), routed; false if it could
 * not go. Big lock held (no number of ours: its order with the pair's messages does not
 * matter). */
static bool confirm_routed(struct cpvm_peer *p, uint32_t seq)
{
    struct unconf *u = malloc(sizeof *u);
    void *img = u ? cor_getBuffer(COR_BYTE, CPVM_HDR_BYTES) : NULL;
    cor_req_t req = COR_REQ_NULL;
    if (img) {
        cpvm_image_header(img, 0, 0, 0, 0, 0, pvmmytid, p->tid);
        cpvm_image_set_word(img, H_ACK, (int)seq);
    }
    /* Under p's lock all the same: the core numbers a task's sends to one domain, and routed
     * sends of other threads to p do not wait for the big lock. */
    int err = COR_ENOMEM;
    if (img) {
        pthread_mutex_lock(&p->lock);
        err = cor_sendI_as(cpvm_rt.inbox, cor_task_idp(p->rank, p->inbox_index), cpvm_rt.ctx,
                           CPVM_DATA_TAG, COR_BYTE, img, CPVM_HDR_BYTES, &req);
        pthread_mutex_unlock(&p->lock);
    }
    if (err) {
        if (img) cor_releaseBuffer(img);
        free(u);
        return false;
    }
    *u = (struct unconf){.image = img, .cap = CPVM_HDR_BYTES, .in_flight = true, .released = true};
    background_send(p, req, u, true);
    return true;
}

void cpvm_send_confirms(void)
{
    cpvm_confirms_due = false;
    for (int r = 0; r < cpvm_rt.capacity; r++) {
        struct cpvm_peer *p = cpvm_peer_of_rank(r);
        if (!p || !p->confirm_due) continue;
        p->confirm_due = false;
        if (p->gone) continue;
        pthread_mutex_lock(&p->lock);
        uint32_t seq = p->rx_seq;
        bool due = seq != p->rx_confirmed;
        p->rx_confirmed = seq;
        pthread_mutex_unlock(&p->lock);
        if (due && (p->tx != TX_ROUTED || !confirm_routed(p, seq)))
            cpvm_ctl_send(p->tid, CTL_CONFIRM, (int)seq);
    }
}

/* We took message number seq of p's. Big lock held. */
static void taken(struct cpvm_peer *p, uint32_t seq)
{
    pthread_mutex_lock(&p->lock);
    p->rx_seq = seq;
    bool due = p->rx_seq - p->rx_confirmed >= CONFIRM_EVERY;
    pthread_mutex_unlock(&p->lock);
    if (due && !p->confirm_due) {
        p->confirm_due = true;
        cpvm_confirms_due = true;
    }
}

#define NOT_ROUTED 1 /* send_out: the pair went to PVM's path meanwhile */

/* Sends a built message to peer p: the image, then its detached pieces. An image alone goes
 * on in the background (o's image is then taken over, and kept until p confirms it). `big`:
 * whether the big lock is held. PVM status, or NOT_ROUTED (nothing sent). */
static int send_out(struct cpvm_peer *p, struct cpvm_out *o, bool big)
{
    cor_req_t req[1 + CPVM_DETACH_MAX] = {0};
    struct unconf *u = o->npiece ? NULL : malloc(sizeof *u);
    if (!o->npiece && !u) return PvmNoMem;
    uint64_t body = (uint64_t)cpvm_image_word(o->image, H_LEN);
    pthread_mutex_lock(&p->lock);
    if (p->tx != TX_ROUTED) {
        pthread_mutex_unlock(&p->lock);
        free(u);
        return NOT_ROUTED;
    }
    cor_idp_t to = cor_task_idp(p->rank, p->inbox_index);
    uint32_t seq = p->tx_seq + 1;
    cpvm_image_set_word(o->image, H_SEQ, (int)seq);
    cpvm_image_set_word(o->image, H_ACK, (int)p->rx_seq);
    int n = 0, err = cor_sendI_as(cpvm_rt.inbox, to, cpvm_rt.ctx, CPVM_DATA_TAG, COR_BYTE, o->image,
                                  o->image_len, &req[n]);
    if (!err) {
        p->tx_seq = seq;
        p->rx_confirmed = p->rx_seq; /* (its H_ACK) */
    }
    for (int i = 0; !err && i < o->npiece; i++) {
        err = cor_sendI_as(cpvm_rt.inbox, to, cpvm_rt.ctx, CPVM_FRAG_TAG, COR_BYTE,
                           o->piece[i].data, (size_t)o->piece[i].len, &req[++n]);
    }
    n += !err;
    bool alone = !err && !o->npiece, full = false;
    if (alone) {
        *u = (struct unconf){NULL, seq, o->image, o->image_cap, o->image_len, true, false};
        o->image = NULL;
        if (p->unconf_tail)
            p->unconf_tail->next = u;
        else
            p->unconf_head = u;
        p->unconf_tail = u;
        full = ++p->nunconf >= UNCONF_MAX;
    }
    pthread_mutex_unlock(&p->lock);
    int werr = COR_OK;
    /* Only images go on in the background: a detached piece moves by rendezvous, which a
     * waiting sender drives itself, while in the background it would wait for the core's
     * listener naps. */
    if (alone) {
        background_send(p, req[0], u, big);
        if (full && !big) cpvm_enter();
        if (full) wait_confirms(p);
        if (full && !big) cpvm_leave();
    } else {
        free(u);
        werr = finish_sends(req, n, big);
        if (!err && !werr) cpvm_confirmed(p, seq); /* its pieces are in the message p took */
    }
    if (err || werr) return cpvm_error(err ? err : werr);
    atomic_fetch_add_explicit(&cpvm_stats.routed_sent, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpvm_stats.routed_bytes_sent, body, memory_order_relaxed);
    return PvmOk;
}

/* The peer tid if messages to it take the route now. Big lock held. */
static struct cpvm_peer *routed_peer(int tid)
{
    if (!cpvm_routing()) return NULL;
    struct cpvm_peer *p = cpvm_peer_find(tid);
    if (p && p->tx == TX_ROUTED) return p;
    /* The handshake may switch the pair now; then this message must go routed too: the
     * SWITCH marker is already on PVM's path ahead of it. */
    cpvm_route_touch(tid);
    p = cpvm_peer_find(tid);
    return p && p->tx == TX_ROUTED ? p : NULL;
}

/* A routed send that failed (rc < 0) or found the pair on PVM's path: whether the caller
 * sends the message PVM's way after all. Big lock held. */
static bool pvm_way_after_all(struct cpvm_peer *p, int rc)
{
    if (rc == NOT_ROUTED) return true;
    if (rc >= 0 || p->gone || rc == PvmNoMem) return false;
    cpvm_route_gave_up(p, false); /* what p did not confirm goes PVM's way first */
    return true;                  /* then this one */
}

/* Sends the thread's send buffer to tid over the route; 1 = done (status in *rc), 0 = the
 * caller must use PVM's path. Big lock held throughout (pvm_mcast, group calls). */
static int route_send(int tid, int tag, int *rc)
{
    if (cpvm_pvm_protocol(tag)) return 0;
    struct cpvm_peer *p = routed_peer(tid);
    if (!p) return 0;
    int sbuf = REAL(pvm_getsbuf);
    struct cpvm_out o;
    *rc = sbuf <= 0 ? PvmNoBuf : cpvm_out_message(sbuf, tid, tag, REAL(pvm_getcontext), &o);
    if (*rc < 0) return 1;
    *rc = send_out(p, &o, true);
    cpvm_out_release(&o);
    return !pvm_way_after_all(p, *rc);
}

/* ---- routed sends without the big lock ----
 *
 * A thread remembers the routed peers it sent to (the peer structures live as long as the
 * task), and sends its own send buffer (cpvm_own_sbuf: native data, known since its last
 * call or made by a pvm_initsend without the lock) to one of them taking no big lock at all:
 * the image is built from the thread's message, and send_out takes the peer's lock, checks
 * that the pair is still routed and numbers and posts the message. A pair that went PVM's
 * way meanwhile (NOT_ROUTED: nothing sent) takes the locked path; a failed send goes back
 * under the big lock as the locked path's does. Peers not known yet, PVM's protocol,
 * other encodings and traced tasks take the locked path. */
#define PEER_CACHE 8
static _Thread_local struct {
    int tid;
    unsigned epoch;
    struct cpvm_peer *p;
} peer_cache[PEER_CACHE];
static _Thread_local unsigned peer_cache_next;
/* Bumped when the task leaves its route: what threads remember is forgotten. */
static _Atomic unsigned route_epoch = 1;

static void peer_remember(int tid, struct cpvm_peer *p)
{
    unsigned epoch = atomic_load_explicit(&route_epoch, memory_order_acquire);
    for (int i = 0; i < PEER_CACHE; i++)
        if (peer_cache[i].tid == tid && peer_cache[i].epoch == epoch) return;
    unsigned i = peer_cache_next++ % PEER_CACHE;
    peer_cache[i].tid = tid;
    peer_cache[i].epoch = epoch;
    peer_cache[i].p = p;
}

static struct cpvm_peer *peer_recalled(int tid)
{
    unsigned epoch = atomic_load_explicit(&route_epoch, memory_order_acquire);
    for (int i = 0; i < PEER_CACHE; i++)
        if (peer_cache[i].tid == tid && peer_cache[i].epoch == epoch) return peer_cache[i].p;
    return NULL;
}

void cpvm_sends_forget_peers(void)
{
    atomic_fetch_add_explicit(&route_epoch, 1, memory_order_release);
}

/* Sends the built message o to p without the big lock: 1 = done (status in *rc), 0 = the
 * caller takes the locked path (nothing was sent). */
static int send_built_unlocked(struct cpvm_peer *p, struct cpvm_out *o, int *rc)
{
    *rc = send_out(p, o, false);
    cpvm_out_release(o);
    if (*rc == NOT_ROUTED) return 0;
    if (*rc == PvmOk) {
        atomic_fetch_add_explicit(&cpvm_stats.sends_unlocked, 1, memory_order_relaxed);
        return 1;
    }
    cpvm_enter();
    bool pvm_way = pvm_way_after_all(p, *rc);
    cpvm_leave();
    return pvm_way ? 0 : 1; /* (the locked path then sends it PVM's way) */
}

/* pvm_send without the big lock: 1 = done (status in *rc), 0 = take the locked path. */
static int send_unlocked(int tid, int tag, int *rc)
{
    struct lp_msg *m = cpvm_own_sbuf();
    int ctx;
    if (!m || !cpvm_own_context(&ctx) || cpvm_pvm_protocol_in(tag, ctx)) return 0;
    struct cpvm_peer *p = peer_recalled(tid);
    if (!p) return 0;
    struct cpvm_out o;
    m->len = (int)cpvm_msg_body(m); /* (what pmsg_setlen makes of native data) */
    if (cpvm_out_build(m, tid, tag, ctx, &o) < 0) return 0;
    return send_built_unlocked(p, &o, rc);
}

/* pvm_send's routed path, the big lock held only to find the peer and the message: 1 = done
 * (status in *rc), 0 = the caller must use PVM's path. The big lock is held on entry (one
 * level); *held says whether it is on return (always when 0 is returned). */
static int route_send_unlocked(int tid, int tag, int *rc, bool *held)
{
    *held = true;
    if (cpvm_pvm_protocol(tag)) return 0;
    struct cpvm_peer *p = routed_peer(tid);
    if (!p) return 0;
    int sbuf = REAL(pvm_getsbuf), ctx = REAL(pvm_getcontext);
    struct lp_msg *m = sbuf > 0 ? cpvm_out_prepare(sbuf) : NULL;
    if (!m) {
        *rc = sbuf <= 0 ? PvmNoBuf : PvmNoSuchBuf;
        return 1;
    }
    peer_remember(tid, p);
    cpvm_leave();
    *held = false;
    struct cpvm_out o;
    *rc = cpvm_out_build(m, tid, tag, ctx, &o);
    if (*rc >= 0) {
        *rc = send_out(p, &o, false);
        cpvm_out_release(&o);
    }
    if (*rc == PvmOk) return 1;
    cpvm_enter();
    *held = true;
    return !pvm_way_after_all(p, *rc);
}

CPVM_API int pvm_send(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_send(tid, tag);
    int rc;
    cpvm_in_send++;
    if (send_unlocked(tid, tag, &rc)) {
        cpvm_in_send--;
        return rc;
    }
    cpvm_enter();
    bool held = true;
    if (!(cpvm_nested() ? route_send(tid, tag, &rc) : route_send_unlocked(tid, tag, &rc, &held))) {
        rc = REAL(pvm_send, tid, tag);
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
    }
    if (held) cpvm_leave();
    cpvm_in_send--;
    return rc;
}

CPVM_API int pvm_mcast(int *tids, int n, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_mcast(tids, n, tag);
    if (n < 0 || (n && !tids)) return PvmBadParam;
    cpvm_in_send++;
    cpvm_enter();
    int *rest = n ? malloc((size_t)n * sizeof *rest) : NULL, nrest = 0, rc = PvmOk;
    if (n && !rest) rc = PvmNoMem;
    /* Handshakes first (they may wait, and switch pairs); then PVM's path for the peers
     * that are not routed, at once, before anything can send another SWITCH; then the
     * routed ones. */
    bool protocol = cpvm_pvm_protocol(tag);
    for (int i = 0; i < n && rc >= 0 && !protocol; i++)
        cpvm_route_touch(tids[i]);
    for (int i = 0; i < n && rc >= 0; i++) {
        struct cpvm_peer *p = cpvm_routing() && !protocol ? cpvm_peer_find(tids[i]) : NULL;
        if (!p || p->tx != TX_ROUTED) rest[nrest++] = tids[i];
    }
    if (rc >= 0 && nrest) {
        rc = REAL(pvm_mcast, rest, nrest, tag);
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, (uint64_t)nrest, memory_order_relaxed);
    }
    for (int i = 0, k = 0; i < n && rc >= 0; i++) {
        if (k < nrest && rest[k] == tids[i]) {
            k++;
            continue;
        }
        int one;
        if (route_send(tids[i], tag, &one) && one < 0) rc = one;
    }
    free(rest);
    cpvm_leave();
    cpvm_in_send--;
    return rc;
}

/* psend/precv move bytes: the datatype only scales the length (as in libpvm3). */
static int type_size(int type)
{
    switch (type) {
    case PVM_BYTE:
        return 1;
    case PVM_SHORT:
    case PVM_USHORT:
        return (int)sizeof(short);
    case PVM_INT:
    case PVM_UINT:
        return (int)sizeof(int);
    case PVM_FLOAT:
        return (int)sizeof(float);
    case PVM_CPLX:
        return 2 * (int)sizeof(float);
    case PVM_DOUBLE:
        return (int)sizeof(double);
    case PVM_DCPLX:
        return 2 * (int)sizeof(double);
    case PVM_LONG:
    case PVM_ULONG:
        return (int)sizeof(long);
    default:
        return 0; /* PVM_STR and unknown types */
    }
}

/* pvm_psend without the big lock: 1 = done (status in *rc), 0 = take the locked path. */
static int psend_unlocked(int tid, int tag, void *buf, int len, int size, int *rc)
{
    int ctx;
    struct cpvm_peer *p = size ? peer_recalled(tid) : NULL;
    if (!p || !cpvm_own_context(&ctx) || cpvm_pvm_protocol_in(tag, ctx) || len < 0 ||
        (long)len * size > INT32_MAX || (len && !buf))
        return 0;
    struct cpvm_out o;
    if (cpvm_out_bytes(buf, len * size, tid, tag, ctx, &o) < 0) return 0;
    return send_built_unlocked(p, &o, rc);
}

CPVM_API int pvm_psend(int tid, int tag, void *buf, int len, int type)
{
    if (CPVM_PASS) return cpvm_real.pvm_psend(tid, tag, buf, len, type);
    int rc, size = type_size(type);
    cpvm_in_send++;
    if (psend_unlocked(tid, tag, buf, len, size, &rc)) {
        cpvm_in_send--;
        return rc < 0 ? rc : PvmOk;
    }
    cpvm_enter();
    struct cpvm_peer *p = cpvm_pvm_protocol(tag) ? NULL : routed_peer(tid);
    struct cpvm_out o;
    bool big = cpvm_nested(), held = true; /* (a group call keeps the lock) */
    if (!p) {
        rc = REAL(pvm_psend, tid, tag, buf, len, type);
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
    } else if (!size) {
        rc = type == PVM_STR ? PvmNotImpl : PvmBadParam;
    } else if (len < 0 || (long)len * size > INT32_MAX || (len && !buf)) {
        rc = PvmBadParam;
    } else {
        /* The bytes of the data, as libpvm3's psend packs them; without the big lock (the
         * data is the caller's) but to go PVM's way after all. */
        int ctx = REAL(pvm_getcontext);
        cpvm_out_init();
        if (!big) peer_remember(tid, p);
        if (!big) {
            cpvm_leave();
            held = false;
        }
        if ((rc = cpvm_out_bytes(buf, len * size, tid, tag, ctx, &o)) >= 0) {
            rc = send_out(p, &o, big);
            cpvm_out_release(&o);
        }
        if (rc != PvmOk && !held) {
            cpvm_enter();
            held = true;
        }
        if (rc != PvmOk && pvm_way_after_all(p, rc)) {
            rc = REAL(pvm_psend, tid, tag, buf, len, type);
            atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
        }
    }
    if (held) cpvm_leave();
    cpvm_in_send--;
    return rc < 0 ? rc : PvmOk;
}

/* ---- receiving ----------------------------------------------------------------------- */

struct held {
    struct held *next;
    struct lp_msg *msg;
};

#define RING 8 /* routed receives kept posted */
static struct inbound {
    cor_req_t req;
    void *ptr;
    cor_status_t st;
    bool done; /* completed (by a waiter or a test), not yet pumped */
} ring[RING];
static unsigned ring_head;

/* Routed messages taken from the ring, in arrival order, each waiting for its detached
 * fragments (they follow its image from the same sender and are received straight into the
 * message). They are delivered from the front as they complete: PVM's order holds while the
 * transfers of several messages go on together. */
#define PENDING_MAX 16
#define PENDING_BYTES (256 * 1024) /* more at once only competes for the caches (measured) */
static struct pending {
    struct lp_msg *msg;
    struct cpvm_peer *peer;
    int n;
    cor_idp_t source;
    cor_req_t req[CPVM_DETACH_MAX];
    char *dst[CPVM_DETACH_MAX];
    int len[CPVM_DETACH_MAX];
    bool failed;
    bool posted; /* its receives are posted (cpvm_post_pieces) */
} pend[PENDING_MAX];
static unsigned pend_first, pend_count;
static _Atomic unsigned pend_unposted; /* entries whose receives wait for cpvm_post_pieces */
static size_t pend_bytes;              /* detached bytes of the pending messages */

/* Room to take one more image (and post its fragment receives); ring_lock held. */
static bool pend_room(void)
{
    return pend_count == 0 || (pend_count < PENDING_MAX && pend_bytes < PENDING_BYTES);
}

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER; /* ring, pend; also without big */
static cor_req_t *watched; /* (ring_lock) the request a waiter waits for without ring_lock */
static _Atomic bool inbound_on;

static int post(struct inbound *in)
{
    return cor_recvI_as(cpvm_rt.inbox, COR_ANY_SOURCE, cpvm_rt.ctx, CPVM_DATA_TAG, &in->ptr,
                        &in->req);
}

/* A pump does not post the receive of the slot it took again: the receive waiting for that
 * message would wait for the post too. The next wait posts them (before it spins), in ring
 * order, after the slots still posted, so the core's order of posts stays the ring's; the
 * ring's head is always posted (a pump that took them all posts them). ring_lock held. */
static unsigned posts_due; /* the slots just before ring_head */

static void post_due(void)
{
    for (; posts_due; posts_due--) {
        int err = post(&ring[(ring_head - posts_due) % RING]);
        if (err) cpvm_log("cannot post a routed receive: %s", cor_strerror(err));
    }
}

int cpvm_inbound_start(void)
{
    for (int i = 0; i < RING; i++) {
        int err = post(&ring[i]);
        if (err) return err;
    }
    atomic_store(&inbound_on, true);
    cpvm_in_spares_open(true);
    return COR_OK;
}

static void cancel(cor_req_t *req)
{
    if (!*req) return;
    cor_cancel(req);
    cor_wait(req, NULL);
}

/* Lock held. */
void cpvm_inbound_stop(void)
{
    atomic_store(&inbound_on, false);
    cpvm_in_spares_open(false);
    pthread_mutex_lock(&ring_lock);
    /* A thread still waiting for a routed message completes it itself: let it finish (its
     * wait is bounded by a few milliseconds). */
    for (int n = 0; watched && n < 1000; n++) {
        pthread_mutex_unlock(&ring_lock);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        pthread_mutex_lock(&ring_lock);
    }
    for (int i = 0; i < RING; i++) {
        cancel(&ring[i].req);
        if (ring[i].ptr) cor_releaseBuffer(ring[i].ptr);
        ring[i] = (struct inbound){0};
    }
    posts_due = 0;
    atomic_store(&pend_unposted, 0);
    for (; pend_count; pend_count--, pend_first = (pend_first + 1) % PENDING_MAX) {
        struct pending *e = &pend[pend_first];
        for (int i = 0; i < e->n; i++)
            cancel(&e->req[i]);
        cpvm_in_discard(e->msg);
        *e = (struct pending){0};
    }
    pend_bytes = 0;
    pthread_mutex_unlock(&ring_lock);
}

/* A fragment receive of e completed with st. */
static void note(struct pending *e, int i, const cor_status_t *st)
{
    if (st->error || st->count != (size_t)e->len[i]) e->failed = true;
}

/* True when every fragment of e arrived; ring_lock held. */
static bool pending_done(struct pending *e)
{
    if (!e->posted) return false;
    for (int i = 0; i < e->n; i++) {
        if (!e->req[i]) continue;
        if (&e->req[i] == watched) return false; /* its waiter completes it */
        int done = 0;
        cor_status_t st;
        /* Only a look: cor_test of a pending request progresses the routes, whose rendezvous
         * reads (a detached piece, 1 MiB) would run under the big lock in a pump. */
        if (cor_peek(e->req[i], &done) || !done) return false;
        cor_test(&e->req[i], &done, &st);
        note(e, i, &st);
    }
    return true;
}

/* Posts the receives of the detached pieces of the messages taken since, in the order of
 * their images (pieces of one sender match its images' order). A pump (big lock) only
 * notes them: posting a receive that matches a piece already announced reads it at once,
 * and that read must not hold the big lock. Called where the big lock is let go, and by
 * waits before they wait. ring_lock taken. */
void cpvm_post_pieces(void)
{
    if (!atomic_load_explicit(&pend_unposted, memory_order_acquire)) return;
    pthread_mutex_lock(&ring_lock);
    for (unsigned k = 0; k < pend_count && atomic_load(&pend_unposted); k++) {
        struct pending *e = &pend[(pend_first + k) % PENDING_MAX];
        if (e->posted) continue;
        for (int i = 0; i < e->n; i++)
            if (cor_recvI_into_as(cpvm_rt.inbox, e->source, cpvm_rt.ctx, CPVM_FRAG_TAG, COR_BYTE,
                                  e->dst[i], (size_t)e->len[i], &e->req[i]))
                e->failed = true;
        e->posted = true;
        atomic_fetch_sub(&pend_unposted, 1);
    }
    pthread_mutex_unlock(&ring_lock);
}

/* True when the ring's oldest image arrived; ring_lock held. `poll`: the routes are polled
 * first if it did not (cor_test), else only its request is looked at. */
static bool image_done_poll(bool poll)
{
    struct inbound *in = &ring[ring_head % RING];
    if (in->done) return true;
    if (!in->req || &in->req == watched) return false;
    int done = 0;
    if (!poll && (cor_peek(in->req, &done) || !done)) return false;
    cor_test(&in->req, &done, &in->st);
    if (done) in->done = true;
    return done;
}

static bool image_done(void)
{
    return image_done_poll(true);
}

/* Whether a pump has work: the front message is complete, or an image to take; ring_lock. */
static bool ready_locked(void)
{
    if (pend_count && pending_done(&pend[pend_first])) return true;
    return pend_room() && image_done();
}

/* What the oldest routed message waits for (NULL: nothing to wait for); ring_lock held. */
static cor_req_t *head_request(void)
{
    if (pend_count) {
        struct pending *e = &pend[pend_first];
        if (!e->posted) return NULL;
        for (int i = 0; i < e->n; i++)
            if (e->req[i]) return &e->req[i];
        return NULL;
    }
    struct inbound *in = &ring[ring_head % RING];
    return in->done || !in->req ? NULL : &in->req;
}

/* A new image stops a wait for an older message's fragments: taking it posts its own. */
struct wait_stop {
    int (*stop)(void *);
    void *arg;
    cor_req_t image; /* the ring's oldest image, if the wait is for fragments */
};

static int stop_or_image(void *arg)
{
    struct wait_stop *w = arg;
    int done = 0;
    if (w->image && cor_peek(w->image, &done) == COR_OK && done) return 1;
    return w->stop ? w->stop(w->arg) : 0;
}

/* Waits for the oldest routed message without ring_lock (pumps of other threads go on); the
 * request is marked watched meanwhile, so that only this waiter completes it. */
bool cpvm_routed_wait(long spin_us, long timeout_us, int (*stop)(void *), void *arg)
{
    if (!atomic_load(&inbound_on)) return false;
    cpvm_post_pieces();
    pthread_mutex_lock(&ring_lock);
    post_due();
    cor_req_t *req = watched ? NULL : head_request();
    if (req) {
        struct inbound *head = &ring[ring_head % RING];
        struct wait_stop w = {stop, arg,
                              pend_count && pend_room() && !head->done ? head->req : COR_REQ_NULL};
        cor_req_t handle = *req;
        watched = req;
        pthread_mutex_unlock(&ring_lock);
        int done = 0;
        cor_status_t st;
        cor_wait_timeout(&handle, spin_us, timeout_us, stop_or_image, &w, &done, &st);
        pthread_mutex_lock(&ring_lock);
        watched = NULL;
        if (done) {
            *req = COR_REQ_NULL;
            if ((char *)req >= (char *)ring && (char *)req < (char *)(ring + RING)) {
                struct inbound *in = &ring[((char *)req - (char *)ring) / sizeof *ring];
                in->st = st;
                in->done = true;
            } else {
                struct pending *e = &pend[((char *)req - (char *)pend) / sizeof *pend];
                note(e, (int)(req - e->req), &st);
            }
        }
    }
    bool ready = ready_locked();
    pthread_mutex_unlock(&ring_lock);
    return ready;
}

bool cpvm_routed_arrived(void)
{
    if (!atomic_load(&inbound_on) || pthread_mutex_trylock(&ring_lock)) return false;
    cor_req_t *req = head_request();
    int done = 0;
    if (req)
        cor_peek(*req, &done);
    else
        done = pend_count || ring[ring_head % RING].done;
    pthread_mutex_unlock(&ring_lock);
    return done;
}

bool cpvm_routed_in_flight(void)
{
    if (!atomic_load(&inbound_on)) return false;
    pthread_mutex_lock(&ring_lock);
    bool busy = pend_count && !watched;
    pthread_mutex_unlock(&ring_lock);
    return busy;
}

/* A complete routed message: held until its sender's SWITCH, else queued. Lock held. */
static void finish(struct lp_msg *m, struct cpvm_peer *p, bool failed)
{
    if (failed) {
        cpvm_in_discard(m);
        atomic_fetch_add(&cpvm_stats.dropped, 1);
        return;
    }
    atomic_fetch_add_explicit(&cpvm_stats.routed_recv, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpvm_stats.routed_bytes_recv, (uint64_t)m->len,
                              memory_order_relaxed);
    if (p->rx_switched) {
        cpvm_in_deliver(m);
        return;
    }
    /* Its SWITCH is still on PVM's path: keep the order. */
    struct held *h = malloc(sizeof *h);
    if (!h) { /* nothing better to do than deliver early */
        cpvm_in_deliver(m);
        return;
    }
    *h = (struct held){NULL, m};
    if (p->held_tail)
        p->held_tail->next = h;
    else
        p->held_head = h;
    p->held_tail = h;
    atomic_fetch_add(&cpvm_stats.held, 1);
}

void cpvm_release_held(struct cpvm_peer *p)
{
    while (p->held_head) {
        struct held *h = p->held_head;
        p->held_head = h->next;
        cpvm_in_deliver(h->msg);
        free(h);
    }
    p->held_tail = NULL;
    cpvm_wake_waiters();
}

/* One routed image: check where it comes from, build the message, then receive its detached
 * fragments behind the messages still pending, or deliver it. Lock held. */
static void take(void *data, const cor_status_t *st)
{
    struct cpvm_peer *p = cpvm_peer_of_rank((int)cor_idp_domain(st->source));
    struct lp_msg *m = NULL;
    char *dst[CPVM_DETACH_MAX];
    int len[CPVM_DETACH_MAX], n = 0;
    if (!st->error && data && p && p->connected && cpvm_image_check(data, st->count) &&
        cpvm_image_word(data, H_SRC) == p->tid) {
        uint32_t seq = (uint32_t)cpvm_image_word(data, H_SEQ);
        cpvm_confirmed(p, (uint32_t)cpvm_image_word(data, H_ACK));
        if (!seq && st->count == (size_t)CPVM_HDR_BYTES) { /* it only confirms */
            cor_releaseBuffer(data);
            return;
        }
        if (seq && !seq_after(seq, p->rx_seq)) { /* taken already, PVM's way: p was slow */
            cor_releaseBuffer(data);
            atomic_fetch_add(&cpvm_stats.duplicates, 1);
            return;
        }
        if (seq && (m = cpvm_in_message(data, st->count, dst, len, &n))) taken(p, seq);
    }
    if (data) cor_releaseBuffer(data);
    if (!m) {
        atomic_fetch_add(&cpvm_stats.dropped, 1);
        return;
    }
    pthread_mutex_lock(&ring_lock);
    if (!n && !pend_count) {
        pthread_mutex_unlock(&ring_lock);
        finish(m, p, false);
        return;
    }
    struct pending *e = &pend[(pend_first + pend_count++) % PENDING_MAX];
    *e = (struct pending){.msg = m, .peer = p, .n = n, .source = st->source, .posted = !n};
    for (int i = 0; i < n; i++) {
        e->len[i] = len[i];
        e->dst[i] = dst[i];
        pend_bytes += (size_t)len[i];
    }
    if (n) atomic_fetch_add_explicit(&pend_unposted, 1, memory_order_release);
    pthread_mutex_unlock(&ring_lock);
}

/* A routed image that came PVM's way (its sender's route gave us up): taken unless we took
 * its number already, at once (later messages of the pair on PVM's path come after it).
 * Runs inside libpvm3, as a message handler; lock held. */
int cpvm_resend_handler(int mid)
{
    int bytes = 0, tag = 0, src = 0, len = 0, n = 0;
    struct cpvm_peer *p = NULL;
    char *img = NULL, *dst[CPVM_DETACH_MAX];
    int dlen[CPVM_DETACH_MAX];
    struct lp_msg *m = NULL;
    cpvm_pump(); /* routed messages that came complete before it go first */
    if (REAL(pvm_bufinfo, mid, &bytes, &tag, &src) >= 0 && (p = cpvm_peer_find(src)) &&
        p->connected && !p->gone && REAL(pvm_upkint, &len, 1, 1) >= 0 && len >= CPVM_HDR_BYTES &&
        len <= bytes && (img = malloc((size_t)len)) && REAL(pvm_upkbyte, img, len, 1) >= 0 &&
        cpvm_image_check(img, (size_t)len) && cpvm_image_word(img, H_SRC) == src &&
        cpvm_image_word(img, H_SEQ) != 0) {
        uint32_t seq = (uint32_t)cpvm_image_word(img, H_SEQ);
        if (!seq_after(seq, p->rx_seq)) { /* the route brought it before */
            free(img);
            atomic_fetch_add(&cpvm_stats.duplicates, 1);
            return 0;
        }
        m = cpvm_in_message(img, (size_t)len, dst, dlen, &n);
        if (m && n) { /* (only images alone are sent again) */
            cpvm_in_discard(m);
            m = NULL;
        }
        if (m) taken(p, seq);
    }
    free(img);
    if (!m) {
        atomic_fetch_add(&cpvm_stats.dropped, 1);
        return 0;
    }
    atomic_fetch_add(&cpvm_stats.resent_recv, 1);
    if (!p->rx_switched) { /* its SWITCH came before this, on the same path */
        p->rx_switched = true;
        cpvm_release_held(p);
    }
    finish(m, p, false);
    return 0;
}

int cpvm_pump(void)
{
    if (!atomic_load(&inbound_on)) return 0;
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&ring_lock);
        if (pend_count && pending_done(&pend[pend_first])) {
            struct pending e = pend[pend_first];
            for (int i = 0; i < e.n; i++)
                pend_bytes -= (size_t)e.len[i];
            pend[pend_first] = (struct pending){0};
            pend_first = (pend_first + 1) % PENDING_MAX;
            pend_count--;
            pthread_mutex_unlock(&ring_lock);
            finish(e.msg, e.peer, e.failed);
            n++;
            continue;
        }
        /* Only what the routes completed already: a poll here would run rendezvous reads
         * under the big lock, and delay the receive waiting for the message just taken (the
         * waits poll, without the lock; the locked calls that do not wait poll before they
         * take it, progress_first). */
        if (!pend_room() || !image_done_poll(false)) {
            pthread_mutex_unlock(&ring_lock);
            break;
        }
        struct inbound *in = &ring[ring_head % RING];
        void *data = in->ptr;
        cor_status_t st = in->st;
        in->ptr = NULL;
        in->done = false;
        ring_head++;
        if (++posts_due == RING) post_due();
        pthread_mutex_unlock(&ring_lock);
        take(data, &st);
        n++;
    }
    return n; /* waiters are woken when the lock is released (lock.c) */
}

/* The receive calls. A routed message waits in the routed receive queue (rxq.c), where a
 * thread takes it without the big lock (cpvm_recv_unlocked); the locked path below is for what
 * is libpvm3's (its queue, its sockets) and for long waits: pump routed messages, look in the
 * routed queue, then libpvm3's, wait, repeat. */

static bool blocking_ok(void)
{
    return !cpvm_rt.joined && cpvm_single_thread();
}

/* Whether libpvm3 has to look (a queued match, or its sockets are due); lock held. */
static bool worth_looking(int tid, int tag, bool waiting)
{
    return cpvm_queued(tid, tag) || cpvm_sockets_due(waiting);
}

/* A receive call's result: counts a message that came PVM's way. Lock held. */
static int received(int mid)
{
    if (mid > 0 && !cpvm_msg_routed(mid))
        atomic_fetch_add_explicit(&cpvm_stats.pvm_recv, 1, memory_order_relaxed);
    return mid;
}

/* The oldest routed message in the routed queue that matches, taken out unless `peek`; the
 * queue flushed into libpvm3's first when libpvm3 must see every message. Lock held. */
static struct lp_msg *routed_match(int tid, int tag, bool peek)
{
    cpvm_rxq_publish();
    return cpvm_rxq_take(tid, tag, cpvm_current_context(), peek ? CPVM_RXQ_PEEK : CPVM_RXQ_TAKE);
}

/* Message m (out of the routed queue) becomes the receive buffer as a libpvm3 receive makes
 * it: the old one freed. Lock held. */
static int adopt(struct lp_msg *m)
{
    int old = REAL(pvm_setrbuf, 0);
    if (old > 0) REAL(pvm_freebuf, old);
    REAL(pvm_setrbuf, m->mid);
    return m->mid;
}

/* What a pump finds complete is what the routes completed: a call that does not wait polls
 * them first, before it takes the big lock (a rendezvous read may run in the poll). */
static void progress_first(void)
{
    if (!atomic_load(&inbound_on)) return;
    cpvm_post_pieces();
    cor_progress();
}

static int nrecv_locked(int tid, int tag)
{
    progress_first();
    cpvm_enter();
    cpvm_pump();
    int rc = 0;
    struct lp_msg *m = routed_match(tid, tag, false);
    if (m) {
        rc = adopt(m);
    } else if (worth_looking(tid, tag, false)) {
        rc = received(REAL(pvm_nrecv, tid, tag));
    } else { /* what pvm_nrecv does when it finds nothing: the receive buffer goes */
        int old = REAL(pvm_setrbuf, 0);
        if (old > 0) REAL(pvm_freebuf, old);
    }
    cpvm_leave();
    return rc;
}

static int probe_locked(int tid, int tag)
{
    progress_first();
    cpvm_enter();
    cpvm_pump();
    struct lp_msg *m = routed_match(tid, tag, true);
    int rc = m ? m->mid : worth_looking(tid, tag, false) ? REAL(pvm_probe, tid, tag) : 0;
    cpvm_leave();
    return rc;
}

/* Receives like pvm_trecv; deadline_ns 0 waits for ever. Lock held. */
static int recv_until(int tid, int tag, uint64_t deadline_ns)
{
    uint64_t spin_end = cpvm_spin_end();
    for (;;) {
        cpvm_pump();
        if (cpvm_has_deferred()) cpvm_run_deferred();
        struct lp_msg *m = routed_match(tid, tag, false);
        if (m) return adopt(m);
        int rc = worth_looking(tid, tag, true) ? REAL(pvm_nrecv, tid, tag) : 0;
        if (rc != 0) return received(rc);
        if (deadline_ns && cpvm_now_ns() >= deadline_ns) return 0;
        cpvm_wait_activity(deadline_ns, spin_end);
    }
}

/* One look under the lock for a blocking receive that waited without it for a while and
 * found nothing (CPVM_RX_LONG): routed messages pumped, the routed queue, libpvm3's queue and
 * sockets (as recv_until's turn), and PVM's sockets noted for the next sleep without the lock.
 * True, with *rc, if it found a message (or an error). */
static bool recv_look(int tid, int tag, int *rc)
{
    cpvm_in_recv++;
    cpvm_enter();
    cpvm_pump();
    if (cpvm_has_deferred()) cpvm_run_deferred();
    struct lp_msg *m = routed_match(tid, tag, false);
    int r = m ? adopt(m) : received(REAL(pvm_nrecv, tid, tag));
    if (r == 0) cpvm_note_fds();
    cpvm_leave();
    cpvm_in_recv--;
    *rc = r;
    return r != 0;
}

static int recv_locked(int tid, int tag)
{
    cpvm_enter();
    int rc = blocking_ok() ? received(REAL(pvm_recv, tid, tag)) : recv_until(tid, tag, 0);
    cpvm_leave();
    return rc;
}

/* pvm_trecv with a valid timeout tmout (NULL: none) that ends at deadline_ns. */
static int trecv_locked(int tid, int tag, struct timeval *tmout, uint64_t deadline_ns)
{
    cpvm_enter();
    int rc;
    if (!tmout) {
        rc = blocking_ok() ? received(REAL(pvm_recv, tid, tag)) : recv_until(tid, tag, 0);
    } else if (blocking_ok()) {
        rc = received(REAL(pvm_trecv, tid, tag, tmout));
    } else {
        rc = recv_until(tid, tag, deadline_ns);
        if (rc == 0 && tmout->tv_sec == 0 && tmout->tv_usec == 0)
            rc = received(REAL(pvm_nrecv, tid, tag));
    }
    cpvm_leave();
    return rc;
}

static int precv_locked(int tid, int tag, void *buf, int len, int type, int *rtid, int *rtag,
                        int *rlen)
{
    cpvm_enter();
    int rc;
    if (blocking_ok()) {
        rc = REAL(pvm_precv, tid, tag, buf, len, type, rtid, rtag, rlen);
        if (rc >= 0) /* (no route here: the message came PVM's way) */
            atomic_fetch_add_explicit(&cpvm_stats.pvm_recv, 1, memory_order_relaxed);
    } else {
        /* As libpvm3 does: receive, unpack into buf, and leave the active receive buffer
         * as it was. */
        int saved = REAL(pvm_setrbuf, 0);
        int mid = recv_until(tid, tag, 0), size = type_size(type);
        rc = mid;
        if (mid > 0) {
            int bytes = 0, mtag = 0, mtid = 0;
            REAL(pvm_bufinfo, mid, &bytes, &mtag, &mtid);
            if (rtid) *rtid = mtid;
            if (rtag) *rtag = mtag;
            if (rlen) *rlen = size ? bytes / size : bytes;
            long want = size ? (long)len * size : 0;
            rc = !size ? (type == PVM_STR ? PvmNotImpl : PvmBadParam)
                       : REAL(pvm_upkbyte, buf, (int)(want < bytes ? want : bytes), 1);
            if (rc > 0) rc = PvmOk;
            REAL(pvm_freebuf, mid);
        }
        REAL(pvm_setrbuf, saved);
    }
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_nrecv(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_nrecv(tid, tag);
    int rc;
    if (cpvm_recv_unlocked(tid, tag, CPVM_RX_NONBLOCK, 0, NULL, &rc)) return rc;
    cpvm_in_recv++;
    rc = nrecv_locked(tid, tag);
    cpvm_in_recv--;
    return rc;
}

CPVM_API int pvm_probe(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_probe(tid, tag);
    int rc;
    if (cpvm_recv_unlocked(tid, tag, CPVM_RX_PROBE, 0, NULL, &rc)) return rc;
    cpvm_in_recv++;
    rc = probe_locked(tid, tag);
    cpvm_in_recv--;
    return rc;
}

CPVM_API int pvm_recv(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_recv(tid, tag);
    int rc, r, how = CPVM_RX_BLOCK;
    while ((r = cpvm_recv_unlocked(tid, tag, how, 0, NULL, &rc)) == CPVM_RX_LONG) {
        if (recv_look(tid, tag, &rc)) return rc;
        how = CPVM_RX_AGAIN;
    }
    if (r > 0) return rc;
    cpvm_in_recv++;
    rc = recv_locked(tid, tag);
    cpvm_in_recv--;
    return rc;
}

CPVM_API int pvm_trecv(int tid, int tag, struct timeval *tmout)
{
    if (CPVM_PASS) return cpvm_real.pvm_trecv(tid, tag, tmout);
    if (tmout && (tmout->tv_sec < 0 || tmout->tv_usec < 0)) return PvmBadParam;
    uint64_t d = 0;
    int rc, r = 0, how = CPVM_RX_BLOCK;
    if (tmout) {
        d = cpvm_now_ns() + (uint64_t)tmout->tv_sec * 1000000000u +
            (uint64_t)tmout->tv_usec * 1000u;
    }
    /* (a zero timeout reads PVM's sockets at least once, as libpvm3's does: locked) */
    bool zero = tmout && tmout->tv_sec == 0 && tmout->tv_usec == 0;
    while (!zero && (r = cpvm_recv_unlocked(tid, tag, how, d, NULL, &rc)) == CPVM_RX_LONG) {
        if (recv_look(tid, tag, &rc)) return rc;
        how = CPVM_RX_AGAIN;
    }
    if (r > 0) return rc;
    cpvm_in_recv++;
    rc = trecv_locked(tid, tag, tmout, d);
    cpvm_in_recv--;
    return rc;
}

CPVM_API int pvm_precv(int tid, int tag, void *buf, int len, int type, int *rtid, int *rtag,
                       int *rlen)
{
    if (CPVM_PASS) return cpvm_real.pvm_precv(tid, tag, buf, len, type, rtid, rtag, rlen);
    struct cpvm_precv p = {buf, len, type_size(type), rtid, rtag, rlen};
    int rc;
    if (p.size && cpvm_recv_unlocked(tid, tag, CPVM_RX_BLOCK, 0, &p, &rc) > 0) return rc;
    cpvm_in_recv++;
    rc = precv_locked(tid, tag, buf, len, type, rtid, rtag, rlen);
    cpvm_in_recv--;
    return rc;
}
