/*
 * Message calls: a message to a routed peer travels as the bytes of its packed image
 * (pvm_pkmesg: a 32-byte header of native ints, then the fragments) over the CoR route, and
 * becomes a libpvm3 message again at the receiver (pvm_upkmesg, then mesg_input queues it or
 * runs its handler), so every receive call, encoding and handler of libpvm3 works unchanged.
 * Everything else goes PVM's way.
 */
#include <stdlib.h>
#include <string.h>

#include "route.h"


/* ---- sending ------------------------------------------------------------------------- */

/* One cor_getBuffer block kept for outgoing images. A send that waits releases the lock, so
 * another thread's send may come meanwhile: it gets a block of its own. */
static void *spare;       /* (lock) */
static size_t spare_cap;  /* (lock) */

static void *image_get(size_t len, size_t *cap)
{
    void *b = NULL;
    if (spare && spare_cap >= len) {
        b = spare;
        *cap = spare_cap;
        spare = NULL;
        return b;
    }
    *cap = len < 4096 ? 4096 : len;
    return cor_getBuffer(COR_BYTE, *cap);
}

static void image_put(void *b, size_t cap)
{
    if (!b) return;
    if (!spare || spare_cap < cap) { /* keep the larger one */
        if (spare) cor_releaseBuffer(spare);
        spare = b;
        spare_cap = cap;
    } else {
        cor_releaseBuffer(b);
    }
}

/* Serializes message `mid` into a new image (*out, of *cap bytes, for image_put); returns
 * its length or a PVM error. Lock held. */
static int make_image(int mid, int tid, int tag, int ctx, void **out, size_t *cap)
{
    *out = NULL;
    int tmp = REAL(pvm_mkbuf, PvmDataRaw);
    if (tmp < 0) return tmp;
    int old_s = REAL(pvm_setsbuf, tmp);
    int rc = REAL(pvm_pkmesg, mid);
    REAL(pvm_setsbuf, old_s);
    int len = 0, t, s;
    if (rc >= 0) rc = REAL(pvm_bufinfo, tmp, &len, &t, &s);
    if (rc >= 0 && !(*out = image_get((size_t)len, cap))) rc = PvmNoMem;
    if (rc >= 0) {
        int old_r = REAL(pvm_setrbuf, tmp);
        rc = REAL(pvm_upkbyte, *out, len, 1);
        REAL(pvm_setrbuf, old_r);
    }
    REAL(pvm_freebuf, tmp);
    if (rc >= 0 && !cpvm_image_seal(*out, (size_t)len, ctx, tag, pvmmytid, tid, pvmmydsig))
        rc = PvmBadMsg;
    if (rc < 0) {
        image_put(*out, *cap);
        *out = NULL;
        return rc;
    }
    return len;
}

/* Waits for a routed send, receiving meanwhile (two tasks sending each other large messages
 * must not wait on each other). Lock held. */
static int finish_send(cor_req_t *req)
{
    uint64_t next_look = cpvm_now_ns() + 1000000;
    for (;;) {
        int done = 0;
        cor_status_t st;
        int err = cor_test(req, &done, &st);
        if (err || done) return err;
        cpvm_pump();
        /* The peer's exit notice arrives on PVM's path: look every millisecond, and let
         * it fail the send instead of waiting for the route to give up. */
        uint64_t now = cpvm_now_ns();
        if (now >= next_look && !cpvm_nested()) {
            next_look = now + 1000000;
            cpvm_read_sockets();
            if (cpvm_has_deferred()) cpvm_run_deferred();
        }
        cpvm_wait_activity_send(req);
    }
}

/* Sends the thread's send buffer to tid over the route; 1 = done (status in *rc), 0 = the
 * caller must use PVM's path. Lock held. */
static int route_send(int tid, int tag, int *rc)
{
    if (!cpvm_routing()) return 0;
    struct cpvm_peer *p = cpvm_peer_find(tid);
    if (!p || p->tx != TX_ROUTED) {
        /* The handshake may switch the pair now; then this message must go routed too:
         * the SWITCH marker is already on PVM's path ahead of it. */
        cpvm_route_touch(tid);
        if (!(p = cpvm_peer_find(tid)) || p->tx != TX_ROUTED) return 0;
    }
    int sbuf = REAL(pvm_getsbuf);
    if (sbuf <= 0) {
        *rc = PvmNoBuf;
        return 1;
    }
    void *image;
    size_t cap;
    int len = make_image(sbuf, tid, tag, REAL(pvm_getcontext), &image, &cap);
    if (len < 0) {
        *rc = len;
        return 1;
    }
    cor_req_t req;
    int err = cor_sendI_as(cpvm_rt.inbox, cor_task_idp(p->rank, p->inbox_index), cpvm_rt.ctx,
                           CPVM_DATA_TAG, COR_BYTE, image, (size_t)len, &req);
    if (!err) err = finish_send(&req);
    image_put(image, cap);
    if (err) {
        *rc = cpvm_error(err);
        return 1;
    }
    atomic_fetch_add_explicit(&cpvm_stats.routed_sent, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpvm_stats.routed_bytes_sent, (uint64_t)len, memory_order_relaxed);
    *rc = PvmOk;
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
    for (int i = 0; i < n && rc >= 0; i++) cpvm_route_touch(tids[i]);
    for (int i = 0; i < n && rc >= 0; i++) {
        struct cpvm_peer *p = cpvm_routing() ? cpvm_peer_find(tids[i]) : NULL;
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
    case PVM_BYTE: return 1;
    case PVM_SHORT: case PVM_USHORT: return (int)sizeof(short);
    case PVM_INT: case PVM_UINT: return (int)sizeof(int);
    case PVM_FLOAT: return (int)sizeof(float);
    case PVM_CPLX: return 2 * (int)sizeof(float);
    case PVM_DOUBLE: return (int)sizeof(double);
    case PVM_DCPLX: return 2 * (int)sizeof(double);
    case PVM_LONG: case PVM_ULONG: return (int)sizeof(long);
    default: return 0; /* PVM_STR and unknown types */
    }
}

CPVM_API int pvm_psend(int tid, int tag, void *buf, int len, int type)
{
    if (CPVM_PASS) return cpvm_real.pvm_psend(tid, tag, buf, len, type);
    cpvm_enter();
    int rc;
    if (cpvm_routing()) cpvm_route_touch(tid);
    struct cpvm_peer *p = cpvm_routing() ? cpvm_peer_find(tid) : NULL;
    if (!p || p->tx != TX_ROUTED) {
        rc = REAL(pvm_psend, tid, tag, buf, len, type);
        atomic_fetch_add_explicit(&cpvm_stats.pvm_sent, 1, memory_order_relaxed);
    } else if (!type_size(type)) {
        rc = type == PVM_STR ? PvmNotImpl : PvmBadParam;
    } else if (len < 0) {
        rc = PvmBadParam;
    } else {
        /* The bytes of the data, as libpvm3's psend packs them (its InPlace buffer would be
         * read at send just the same). */
        int mid = REAL(pvm_mkbuf, PvmDataRaw), old = REAL(pvm_setsbuf, mid);
        rc = REAL(pvm_pkbyte, buf, len * type_size(type), 1);
        if (rc >= 0) route_send(tid, tag, &rc);
        REAL(pvm_setsbuf, old);
        REAL(pvm_freebuf, mid);
    }
    cpvm_leave();
    return rc < 0 ? rc : PvmOk;
}

/* ---- receiving ----------------------------------------------------------------------- */

struct held {
    struct held *next;
    void *data;
    size_t len;
};

#define RING 8 /* routed receives kept posted */
static struct inbound {
    cor_req_t req;
    void *ptr;
    cor_status_t st;
    bool done; /* completed by cpvm_routed_ready, not yet pumped */
} ring[RING];
static unsigned ring_head;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER; /* ring, also without big */
static _Atomic bool inbound_on;

int cpvm_inbound_start(void)
{
    for (int i = 0; i < RING; i++) {
        int err = cor_recvI_as(cpvm_rt.inbox, COR_ANY_SOURCE, cpvm_rt.ctx, CPVM_DATA_TAG,
                               &ring[i].ptr, &ring[i].req);
        if (err) return err;
    }
    atomic_store(&inbound_on, true);
    return COR_OK;
}

void cpvm_inbound_stop(void)
{
    atomic_store(&inbound_on, false);
    pthread_mutex_lock(&ring_lock);
    for (int i = 0; i < RING; i++) {
        if (ring[i].req) {
            cor_cancel(&ring[i].req);
            cor_wait(&ring[i].req, &ring[i].st);
        }
        if (ring[i].ptr) cor_releaseBuffer(ring[i].ptr);
        ring[i] = (struct inbound){0};
    }
    pthread_mutex_unlock(&ring_lock);
}

/* Completes the head receive if it is done; ring_lock held. */
static bool head_done(void)
{
    struct inbound *in = &ring[ring_head % RING];
    if (in->done) return true;
    if (!in->req) return false;
    int done = 0;
    cor_test(&in->req, &done, &in->st);
    if (done) in->done = true;
    return done;
}

bool cpvm_routed_wait(long spin_us, long timeout_us, int (*stop)(void *), void *arg)
{
    if (!atomic_load(&inbound_on)) return false;
    pthread_mutex_lock(&ring_lock);
    struct inbound *in = &ring[ring_head % RING];
    bool ready = in->done;
    if (!ready && in->req) {
        int done = 0;
        cor_wait_timeout(&in->req, spin_us, timeout_us, stop, arg, &done, &in->st);
        ready = in->done = done;
    }
    pthread_mutex_unlock(&ring_lock);
    return ready;
}

bool cpvm_routed_ready(void)
{
    if (!atomic_load(&inbound_on)) return false;
    pthread_mutex_lock(&ring_lock);
    bool ready = head_done();
    pthread_mutex_unlock(&ring_lock);
    return ready;
}

/* Queues an image as a libpvm3 message (or runs its handler). Lock held. */
static void inject(const void *data, size_t len)
{
    int b = REAL(pvm_mkbuf, PvmDataRaw);
    if (b < 0) goto drop;
    int old_s = REAL(pvm_setsbuf, b);
    int rc = REAL(pvm_pkbyte, (char *)data, (int)len, 1);
    REAL(pvm_setsbuf, old_s);
    int m = -1;
    if (rc >= 0) {
        int old_r = REAL(pvm_setrbuf, b);
        m = REAL(pvm_upkmesg);
        REAL(pvm_setrbuf, old_r);
    }
    REAL(pvm_freebuf, b);
    if (m <= 0) goto drop;
    atomic_fetch_add_explicit(&cpvm_stats.routed_recv, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpvm_stats.routed_bytes_recv, len, memory_order_relaxed);
    REAL(mesg_input, REAL(midtobuf, m));
    return;
drop:
    atomic_fetch_add(&cpvm_stats.dropped, 1);
}

void cpvm_release_held(struct cpvm_peer *p)
{
    while (p->held_head) {
        struct held *h = p->held_head;
        p->held_head = h->next;
        inject(h->data, h->len);
        cor_releaseBuffer(h->data);
        free(h);
    }
    p->held_tail = NULL;
    cpvm_wake_waiters();
}

/* One completed routed receive: check where it comes from, hold or inject. Lock held. */
static void take(void *data, const cor_status_t *st)
{
    struct cpvm_peer *p = cpvm_peer_of_rank((int)cor_idp_domain(st->source));
    if (st->error || !data || !p || !p->connected || !cpvm_image_check(data, st->count) ||
        cpvm_image_src(data) != p->tid) {
        atomic_fetch_add(&cpvm_stats.dropped, 1);
        cor_releaseBuffer(data);
        return;
    }
    if (!p->rx_switched) { /* its SWITCH is still on PVM's path: keep the order */
        struct held *h = malloc(sizeof *h);
        if (!h) { /* nothing better to do than deliver early */
            inject(data, st->count);
            cor_releaseBuffer(data);
            return;
        }
        *h = (struct held){NULL, data, st->count};
        if (p->held_tail) p->held_tail->next = h;
        else p->held_head = h;
        p->held_tail = h;
        atomic_fetch_add(&cpvm_stats.held, 1);
        return;
    }
    inject(data, st->count);
    cor_releaseBuffer(data);
}

int cpvm_pump(void)
{
    if (!atomic_load(&inbound_on)) return 0;
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&ring_lock);
        struct inbound *in = &ring[ring_head % RING];
        if (!head_done()) {
            pthread_mutex_unlock(&ring_lock);
            break;
        }
        void *data = in->ptr;
        cor_status_t st = in->st;
        in->ptr = NULL;
        in->done = false;
        int err = cor_recvI_as(cpvm_rt.inbox, COR_ANY_SOURCE, cpvm_rt.ctx, CPVM_DATA_TAG,
                               &in->ptr, &in->req);
        ring_head++;
        pthread_mutex_unlock(&ring_lock);
        if (err) cpvm_log("cannot post a routed receive: %s", cor_strerror(err));
        take(data, &st);
        n++;
    }
    if (n) cpvm_wake_waiters();
    return n;
}

/* The receive calls: pump routed messages into libpvm3's queue, look, wait, repeat. */

static bool blocking_ok(void)
{
    return !cpvm_rt.joined && cpvm_single_thread();
}

CPVM_API int pvm_nrecv(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_nrecv(tid, tag);
    cpvm_enter();
    cpvm_pump();
    int rc = REAL(pvm_nrecv, tid, tag);
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_probe(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_probe(tid, tag);
    cpvm_enter();
    cpvm_pump();
    int rc = REAL(pvm_probe, tid, tag);
    cpvm_leave();
    return rc;
}

/* Receives like pvm_trecv; deadline_ns 0 waits for ever. Lock held. */
static int recv_until(int tid, int tag, uint64_t deadline_ns)
{
    for (;;) {
        cpvm_pump();
        if (cpvm_has_deferred()) cpvm_run_deferred();
        int rc = REAL(pvm_nrecv, tid, tag);
        if (rc != 0) return rc;
        if (deadline_ns && cpvm_now_ns() >= deadline_ns) return 0;
        cpvm_wait_activity(deadline_ns);
    }
}

CPVM_API int pvm_recv(int tid, int tag)
{
    if (CPVM_PASS) return cpvm_real.pvm_recv(tid, tag);
    cpvm_enter();
    int rc = blocking_ok() ? REAL(pvm_recv, tid, tag) : recv_until(tid, tag, 0);
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_trecv(int tid, int tag, struct timeval *tmout)
{
    if (CPVM_PASS) return cpvm_real.pvm_trecv(tid, tag, tmout);
    cpvm_enter();
    int rc;
    if (!tmout) {
        rc = blocking_ok() ? REAL(pvm_recv, tid, tag) : recv_until(tid, tag, 0);
    } else if (tmout->tv_sec < 0 || tmout->tv_usec < 0) {
        rc = PvmBadParam;
    } else if (blocking_ok()) {
        rc = REAL(pvm_trecv, tid, tag, tmout);
    } else {
        uint64_t d = cpvm_now_ns() + (uint64_t)tmout->tv_sec * 1000000000u +
                     (uint64_t)tmout->tv_usec * 1000u;
        rc = recv_until(tid, tag, d);
        if (rc == 0 && tmout->tv_sec == 0 && tmout->tv_usec == 0) rc = REAL(pvm_nrecv, tid, tag);
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
