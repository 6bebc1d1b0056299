/*
 * Raw route access (include/cor/raw.h): frames over a hard port reserved for it, driven by the
 * calling thread, so benchmarks see the route's own cost beside the task layer's. While a raw
 * port is open the domain counts as spinning, which keeps the listeners off the sockets; once
 * closed, the port's listener goes on acknowledging for peers that still need it.
 * The raw state is protected by the port's progress lock, held around every progress call.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cor/raw.h"

struct raw_frame {
    struct raw_frame *next;
    int peer;
    size_t len;
    unsigned char data[];
};

struct cor_raw {
    struct cor_hport *hp;
    struct raw_frame *head, *tail; /* frames that arrived before a receive asked */
    void *want;                    /* a waiting cor_raw_recv's buffer */
    size_t want_max, got_len;
    int got_peer, got;
    _Atomic long outstanding; /* sends the route has not finished */
    bool open;
    int send_error;
};

static void raw_deliver(struct cor_hport *hp, cor_peer_t peer, const void *f, size_t len)
{
    struct cor_raw *raw = hp->raw_state;
    if (raw->want && !raw->got && !raw->head) {
        raw->got = 1;
        raw->got_peer = (int)peer;
        raw->got_len = len;
        if (len <= raw->want_max) memcpy(raw->want, f, len);
        return;
    }
    struct raw_frame *rf = malloc(sizeof *rf + len);
    if (!rf) return;
    rf->next = NULL;
    rf->peer = (int)peer;
    rf->len = len;
    memcpy(rf->data, f, len);
    if (raw->tail)
        raw->tail->next = rf;
    else
        raw->head = rf;
    raw->tail = rf;
}

void cor__raw_upcall_send_done(struct cor_hport *hp, int status)
{
    struct cor_raw *raw = hp->raw_state;
    raw->outstanding--;
    if (status != COR_OK) raw->send_error = status;
}

/* Frames may arrive before the user opens the raw port: they wait in its queue. */
int cor__raw_attach(struct cor_hport *hp)
{
    struct cor_raw *raw = calloc(1, sizeof *raw);
    if (!raw) return COR_ENOMEM;
    raw->hp = hp;
    hp->raw_state = raw;
    hp->raw_deliver = raw_deliver;
    return COR_OK;
}

void cor__raw_detach(struct cor_hport *hp)
{
    struct cor_raw *raw = hp->raw_state;
    if (!raw) return;
    while (raw->head) {
        struct raw_frame *f = raw->head;
        raw->head = f->next;
        free(f);
    }
    free(raw);
    hp->raw_state = NULL;
    hp->raw_deliver = NULL;
}

COR_API int cor_raw_open(const char *route, cor_raw_t **out)
{
    int err = cor__check_init();
    if (err) return err;
    if (!out) return COR_EINVAL;
    struct cor_route *r = cor__route_find(route);
    if (!r) return COR_ENOTFOUND;
    if (!r->raw || !r->raw->raw_state) return COR_ESTATE;
    struct cor_raw *raw = r->raw->raw_state;
    if (raw->open) return COR_EBUSY;
    raw->open = true;
    atomic_fetch_add(&g.raw_users, 1);
    *out = raw;
    return COR_OK;
}

COR_API int cor_raw_close(cor_raw_t *raw)
{
    if (!raw || !raw->open) return COR_EINVAL;
    int err = cor_raw_flush(raw);
    raw->open = false;
    if (atomic_fetch_sub(&g.raw_users, 1) == 1) cor__listeners_resume();
    return err;
}

COR_API size_t cor_raw_frame_max(cor_raw_t *raw)
{
    return raw ? raw->hp->caps.frame_max : 0;
}

static int poll_once(cor_raw_t *raw)
{
    cor__port_own_wait(raw->hp);
    int n = raw->hp->route->ops->progress(raw->hp->rp);
    cor__port_release(raw->hp);
    return n;
}

COR_API int cor_raw_send(cor_raw_t *raw, int peer, const void *buf, size_t len)
{
    if (!raw || peer < 0 || peer >= g.size || peer == g.rank || (!buf && len)) return COR_EINVAL;
    int ready = cor__peer_ready((unsigned)peer); /* its address, at the first frame to it */
    if (ready != COR_OK) return ready;
    struct iovec iov = {(void *)buf, len};
    uint64_t deadline = cor__now_ns() + 60ull * 1000000000u;
    for (;;) {
        /* as the port's owner: a route's send and progress never run at once (route.h) */
        cor__port_own_wait(raw->hp);
        int rc = raw->hp->route->ops->send(raw->hp->rp, (cor_peer_t)peer, &iov, 1, raw);
        cor__port_release(raw->hp);
        if (rc == COR_OK) {
            raw->outstanding++;
            return COR_OK;
        }
        if (rc != COR_EAGAIN) return rc;
        poll_once(raw);
        if (cor__now_ns() > deadline) return COR_ETIMEDOUT;
    }
}

COR_API int cor_raw_recv(cor_raw_t *raw, void *buf, size_t max, size_t *len, int *peer)
{
    if (!raw || (!buf && max)) return COR_EINVAL;
    struct cor_hport *hp = raw->hp;
    uint64_t deadline = cor__now_ns() + 60ull * 1000000000u;
    cor__port_own_wait(hp);
    if (!raw->head) {
        /* wait for a frame, letting it land straight in buf */
        raw->want = buf;
        raw->want_max = max;
        raw->got = 0;
        unsigned n = 0;
        while (!raw->got && !raw->head) {
            hp->route->ops->progress(hp->rp);
            if ((++n & 1023) == 0 && cor__now_ns() > deadline) break;
        }
        raw->want = NULL;
        if (raw->got) {
            cor__port_release(hp);
            if (len) *len = raw->got_len;
            if (peer) *peer = raw->got_peer;
            return raw->got_len > max ? COR_ETRUNC : COR_OK;
        }
        if (!raw->head) {
            cor__port_release(hp);
            return COR_ETIMEDOUT;
        }
    }
    struct raw_frame *f = raw->head;
    raw->head = f->next;
    if (!raw->head) raw->tail = NULL;
    cor__port_release(hp);
    size_t n = f->len < max ? f->len : max;
    memcpy(buf, f->data, n);
    if (len) *len = f->len;
    if (peer) *peer = f->peer;
    int err = f->len > max ? COR_ETRUNC : COR_OK;
    free(f);
    return err;
}

COR_API int cor_raw_flush(cor_raw_t *raw)
{
    if (!raw) return COR_EINVAL;
    uint64_t deadline = cor__now_ns() + 60ull * 1000000000u;
    while (atomic_load(&raw->outstanding) > 0) {
        poll_once(raw);
        if (cor__now_ns() > deadline) return COR_ETIMEDOUT;
    }
    cor__port_own_wait(raw->hp);
    int err = raw->send_error;
    raw->send_error = 0;
    cor__port_release(raw->hp);
    return err;
}
