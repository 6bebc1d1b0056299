/*
 * Message calls: a message to a routed peer travels over the CoR route as an image (header
 * and small fragments) followed by its large fragments, each a message of its own, sent from
 * and received into libpvm3's own fragments without a copy (pmsg.c). At the receiver it
 * becomes a libpvm3 message again and mesg_input queues it or runs its handler, so every
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

/* ---- sending ------------------------------------------------------------------------- */

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

/* Waits for the routed sends of a message, without the lock (other threads' calls go on),
 * and receives meanwhile: two tasks sending each other large messages must each take the
 * other's. Returns the first error. Lock held on entry and exit. */
static int finish_sends(cor_req_t *req, int n)
{
    uint64_t next_look = cpvm_now_ns() + 1000000;
    int first_err = COR_OK;
    for (int i = 0; i < n;) {
        int done = 0, err;
        if (!req[i]) {
            i++;
            continue;
        }
        err = cor_test(&req[i], &done, NULL);  /* eager sends are done by now */
        if (!done && !err && !cpvm_nested()) { /* (a group call keeps the lock) */
            int depth = cpvm_unlock_all();
            err = cor_wait_timeout(&req[i], -1, 1000, arrived, NULL, &done, NULL);
            cpvm_relock_all(depth);
        }
        if (done || err) {
            if (err && !first_err) first_err = err;
            req[i++] = COR_REQ_NULL;
            continue;
        }
        cpvm_pump();
        if (!cpvm_nested()) look_for_exits(&next_look);
    }
    return first_err;
}

/* Sends of an image alone (a message without detached pieces: all bytes are libcorpvm's own)
 * complete in the background, as PVM's own sends return once the data is handed over:
 * pvm_send does not wait for them. They are reaped, oldest first, by later calls; at most
 * BACKLOG_MAX wait, and pvm_exit waits for all. Lock: the big lock (they are only ever tested
 * under it, never waited for without it). */
#define BACKLOG_MAX 16
static struct backlog {
    cor_req_t req;
    void *image;
    size_t cap, len;
    struct cpvm_peer *peer;
} backlog[BACKLOG_MAX];
static unsigned bl_first, bl_count;

/* The route gave peer p up (it found the peer's port closed, or the peer silent) while PVM
 * did not say it exited: its messages take PVM's path from now on; a waiting receiver gets
 * them that way instead of never. Lock held. */
static void route_failed(struct cpvm_peer *p, int err)
{
    if (p->gone || p->tx != TX_ROUTED) return;
    p->tx = TX_REFUSED;
    atomic_fetch_add(&cpvm_stats.peers_gone, 1);
    cpvm_log("the route to t%x failed (%s): its messages take PVM's path", (unsigned)p->tid,
             cor_strerror(err));
}

/* Sends a routed image on PVM's path after all: rebuilt as the libpvm3 message it was (same
 * encoding, context and tag). Lock held. */
static void resend_on_pvm(int tid, const void *image, size_t len)
{
    char *dst[CPVM_DETACH_MAX];
    int dlen[CPVM_DETACH_MAX], n = 0;
    struct lp_msg *m =
        cpvm_image_check(image, len) ? cpvm_in_message(image, len, dst, dlen, &n) : NULL;
    if (!m || n) { /* (only images without detached pieces go on in the background) */
        if (m) cpvm_in_discard(m);
        atomic_fetch_add(&cpvm_stats.dropped, 1);
        return;
    }
    int mid = m->mid, ctx = cpvm_image_word(image, H_CTX), tag = cpvm_image_word(image, H_TAG);
    int old = REAL(pvm_setsbuf, mid), octx = REAL(pvm_setcontext, ctx);
    if (REAL(pvm_send, tid, tag) >= 0)
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
    REAL(pvm_setcontext, octx);
    REAL(pvm_setsbuf, old);
    REAL(pvm_freebuf, mid);
}

/* Tests one background send (progressing the routes): true once it is complete. A send
 * that failed goes PVM's way, unless PVM said the peer exited. */
static bool background_done(struct backlog *b)
{
    int done = 0, err = b->req ? cor_test(&b->req, &done, NULL) : COR_OK;
    if (b->req && !done) return false;
    if (err && b->peer && !b->peer->gone) {
        route_failed(b->peer, err);
        resend_on_pvm(b->peer->tid, b->image, b->len);
    } else if (err) { /* too late to tell the caller: the peer is gone */
        atomic_fetch_add(&cpvm_stats.dropped, 1);
        cpvm_log("a routed message failed after pvm_send returned: %s", cor_strerror(err));
    }
    return true;
}

/* Completes the oldest background sends that are done; returns how many are left. */
static unsigned reap(void)
{
    while (bl_count) {
        struct backlog *b = &backlog[bl_first];
        int done = 0;
        if (cor_peek(b->req, &done) == COR_OK && !done) return bl_count;
        background_done(b);
        cpvm_image_release(b->image, b->cap);
        bl_first = (bl_first + 1) % BACKLOG_MAX;
        bl_count--;
    }
    return 0;
}

/* Until at most `most` background sends are left. Lock held (let go while yielding). */
static void reap_until(unsigned most)
{
    uint64_t next_look = cpvm_now_ns() + 1000000;
    while (reap() > most) {
        background_done(&backlog[bl_first]); /* progresses the routes */
        if (cpvm_nested()) continue;
        look_for_exits(&next_look);
        int depth = cpvm_unlock_all();
        sched_yield();
        cpvm_relock_all(depth);
    }
}

void cpvm_sends_drain(void)
{
    reap_until(0);
}

/* Sends a built message to peer p: the image, then its detached pieces. An image alone goes
 * on in the background (o's image is then taken over). PVM status. */
static int send_out(struct cpvm_peer *p, struct cpvm_out *o)
{
    cor_req_t req[1 + CPVM_DETACH_MAX] = {0};
    cor_idp_t to = cor_task_idp(p->rank, p->inbox_index);
    reap();
    int n = 0, err = cor_sendI_as(cpvm_rt.inbox, to, cpvm_rt.ctx, CPVM_DATA_TAG, COR_BYTE, o->image,
                                  o->image_len, &req[n]);
    for (int i = 0; !err && i < o->npiece; i++) {
        err = cor_sendI_as(cpvm_rt.inbox, to, cpvm_rt.ctx, CPVM_FRAG_TAG, COR_BYTE,
                           o->piece[i].data, (size_t)o->piece[i].len, &req[++n]);
    }
    n += !err;
    uint64_t body = (uint64_t)cpvm_image_word(o->image, H_LEN);
    int werr = COR_OK;
    /* Only images go on in the background: a detached piece moves by rendezvous, which a
     * waiting sender drives itself, while in the background it would wait for the core's
     * listener naps. */
    if (!err && !o->npiece) {
        reap_until(BACKLOG_MAX - 1);
        backlog[(bl_first + bl_count++) % BACKLOG_MAX] =
            (struct backlog){req[0], o->image, o->image_cap, o->image_len, p};
        o->image = NULL;
    } else {
        werr = finish_sends(req, n);
    }
    if (err || werr) return cpvm_error(err ? err : werr);
    atomic_fetch_add_explicit(&cpvm_stats.routed_sent, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpvm_stats.routed_bytes_sent, body, memory_order_relaxed);
    return PvmOk;
}

/* The peer tid if messages to it take the route now. Lock held. */
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

/* Sends the thread's send buffer to tid over the route; 1 = done (status in *rc), 0 = the
 * caller must use PVM's path. Lock held. */
static int route_send(int tid, int tag, int *rc)
{
    if (cpvm_pvm_protocol(tag)) return 0;
    struct cpvm_peer *p = routed_peer(tid);
    if (!p) return 0;
    int sbuf = REAL(pvm_getsbuf);
    struct cpvm_out o;
    *rc = sbuf <= 0 ? PvmNoBuf : cpvm_out_message(sbuf, tid, tag, REAL(pvm_getcontext), &o);
    if (*rc < 0) return 1;
    *rc = send_out(p, &o);
    cpvm_out_release(&o);
    if (*rc < 0 && !p->gone && p->tx == TX_ROUTED && *rc != PvmNoMem) {
        route_failed(p, COR_EPEERDEAD);
        return 0; /* the caller sends it PVM's way */
    }
    return 1;
}

CPVM_API int pvm_send(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_send(tid, tag);
    cpvm_enter();
    int rc;
    if (!route_send(tid, tag, &rc)) {
        rc = REAL(pvm_send, tid, tag);
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
    }
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_mcast(int *tids, int n, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_mcast(tids, n, tag);
    if (n < 0 || (n && !tids)) return PvmBadParam;
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

CPVM_API int pvm_psend(int tid, int tag, void *buf, int len, int type)
{
    if (CPVM_PASS) return cpvm_real.pvm_psend(tid, tag, buf, len, type);
    cpvm_enter();
    int rc, size = type_size(type);
    struct cpvm_peer *p = cpvm_pvm_protocol(tag) ? NULL : routed_peer(tid);
    struct cpvm_out o;
    if (!p) {
        rc = REAL(pvm_psend, tid, tag, buf, len, type);
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
    } else if (!size) {
        rc = type == PVM_STR ? PvmNotImpl : PvmBadParam;
    } else if (len < 0 || (long)len * size > INT32_MAX || (len && !buf)) {
        rc = PvmBadParam;
    } else if ((rc = cpvm_out_bytes(buf, len * size, tid, tag, REAL(pvm_getcontext), &o)) >= 0) {
        /* The bytes of the data, as libpvm3's psend packs them. */
        rc = send_out(p, &o);
        cpvm_out_release(&o);
    }
    cpvm_leave();
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
    cor_req_t req[CPVM_DETACH_MAX];
    int len[CPVM_DETACH_MAX];
    bool failed;
} pend[PENDING_MAX];
static unsigned pend_first, pend_count;
static size_t pend_bytes; /* detached bytes of the pending messages */

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

int cpvm_inbound_start(void)
{
    for (int i = 0; i < RING; i++) {
        int err = post(&ring[i]);
        if (err) return err;
    }
    atomic_store(&inbound_on, true);
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
    for (int i = 0; i < e->n; i++) {
        if (!e->req[i]) continue;
        if (&e->req[i] == watched) return false; /* its waiter completes it */
        int done = 0;
        cor_status_t st;
        cor_test(&e->req[i], &done, &st);
        if (!done) return false;
        note(e, i, &st);
    }
    return true;
}

/* True when the ring's oldest image arrived; ring_lock held. */
static bool image_done(void)
{
    struct inbound *in = &ring[ring_head % RING];
    if (in->done) return true;
    if (!in->req || &in->req == watched) return false;
    int done = 0;
    cor_test(&in->req, &done, &in->st);
    if (done) in->done = true;
    return done;
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
    pthread_mutex_lock(&ring_lock);
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
        cpvm_image_word(data, H_SRC) == p->tid)
        m = cpvm_in_message(data, st->count, dst, len, &n);
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
    *e = (struct pending){.msg = m, .peer = p, .n = n};
    for (int i = 0; i < n; i++) {
        e->len[i] = len[i];
        pend_bytes += (size_t)len[i];
        if (cor_recvI_into_as(cpvm_rt.inbox, st->source, cpvm_rt.ctx, CPVM_FRAG_TAG, COR_BYTE,
                              dst[i], (size_t)len[i], &e->req[i]))
            e->failed = true;
    }
    pthread_mutex_unlock(&ring_lock);
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
        if (!pend_room() || !image_done()) {
            pthread_mutex_unlock(&ring_lock);
            break;
        }
        struct inbound *in = &ring[ring_head % RING];
        void *data = in->ptr;
        cor_status_t st = in->st;
        in->ptr = NULL;
        in->done = false;
        int err = post(in);
        ring_head++;
        pthread_mutex_unlock(&ring_lock);
        if (err) cpvm_log("cannot post a routed receive: %s", cor_strerror(err));
        take(data, &st);
        n++;
    }
    return n; /* waiters are woken when the lock is released (lock.c) */
}

/* The receive calls: pump routed messages into libpvm3's queue, look, wait, repeat. */

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

CPVM_API int pvm_nrecv(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_nrecv(tid, tag);
    cpvm_enter();
    cpvm_pump();
    int rc = 0;
    if (worth_looking(tid, tag, false)) {
        rc = received(REAL(pvm_nrecv, tid, tag));
    } else { /* what pvm_nrecv does when it finds nothing: the receive buffer goes */
        int old = REAL(pvm_setrbuf, 0);
        if (old > 0) REAL(pvm_freebuf, old);
    }
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_probe(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_probe(tid, tag);
    cpvm_enter();
    cpvm_pump();
    int rc = worth_looking(tid, tag, false) ? REAL(pvm_probe, tid, tag) : 0;
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
        int rc = worth_looking(tid, tag, true) ? REAL(pvm_nrecv, tid, tag) : 0;
        if (rc != 0) return received(rc);
        if (deadline_ns && cpvm_now_ns() >= deadline_ns) return 0;
        cpvm_wait_activity(deadline_ns, spin_end);
    }
}

CPVM_API int pvm_recv(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_recv(tid, tag);
    cpvm_enter();
    int rc = blocking_ok() ? received(REAL(pvm_recv, tid, tag)) : recv_until(tid, tag, 0);
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_trecv(int tid, int tag, struct timeval *tmout)
{
    if (CPVM_PASS) return cpvm_real.pvm_trecv(tid, tag, tmout);
    cpvm_enter();
    int rc;
    if (!tmout) {
        rc = blocking_ok() ? received(REAL(pvm_recv, tid, tag)) : recv_until(tid, tag, 0);
    } else if (tmout->tv_sec < 0 || tmout->tv_usec < 0) {
        rc = PvmBadParam;
    } else if (blocking_ok()) {
        rc = received(REAL(pvm_trecv, tid, tag, tmout));
    } else {
        uint64_t d = cpvm_now_ns() + (uint64_t)tmout->tv_sec * 1000000000u +
                     (uint64_t)tmout->tv_usec * 1000u;
        rc = recv_until(tid, tag, d);
        if (rc == 0 && tmout->tv_sec == 0 && tmout->tv_usec == 0)
            rc = received(REAL(pvm_nrecv, tid, tag));
    }
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_precv(int tid, int tag, void *buf, int len, int type, int *rtid, int *rtag,
                       int *rlen)
{
    if (CPVM_PASS) return cpvm_real.pvm_precv(tid, tag, buf, len, type, rtid, rtag, rlen);
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
