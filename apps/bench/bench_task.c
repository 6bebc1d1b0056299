/*
 * Ping-pong and stream through the task API (cor_sendI / cor_recvI(_into) / cor_wait), between
 * the main tasks of domains 0 and 1, and the stream engine bench_multi.c reuses per task pair.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cor/cor.h"

static int dummy_byte;

int bench_rbufs(const struct bench *b)
{
    return b->distinct ? b->window : 1;
}

size_t bench_max_size(const struct bench *b)
{
    size_t max = 1;
    for (int i = 0; i < b->nsizes; i++)
        if (b->sizes[i] > max) max = b->sizes[i];
    return max;
}

/* A zero-length control message (READY, ACK). */
static int ctl_send(cor_idp_t peer, int tag)
{
    return cor_send(peer, COR_CTX_WORLD, tag, COR_BYTE, &dummy_byte, 0);
}

static int ctl_recv(cor_idp_t peer, int tag)
{
    char c;
    return cor_recv(peer, COR_CTX_WORLD, tag, COR_BYTE, &c, 1, NULL);
}

/* Posts one data receive: into rbuf, or (--recv-alloc) into a core buffer stored in *ptr. */
static int post_recv(const struct bench *b, cor_idp_t peer, void *rbuf, size_t size, void **ptr,
                     cor_req_t *req)
{
    if (b->recv_alloc) return cor_recvI(peer, COR_CTX_WORLD, BENCH_TAG_DATA, ptr, req);
    return cor_recvI_into(peer, COR_CTX_WORLD, BENCH_TAG_DATA, COR_BYTE, rbuf, size, req);
}

/* Waits for a data receive and checks what arrived. With --recv-alloc the core fills *ptr
 * when the request completes, so it is read only after the wait. */
static int finish_recv(const struct bench *b, cor_req_t *req, size_t size, void *rbuf, void **ptr)
{
    cor_status_t st;
    int err = cor_wait(req, &st);
    if (err) return bench_fail("cor_wait (receive)", err);
    if (st.count != size) {
        fprintf(stderr, "cor-bench: received %zu bytes, expected %zu\n", st.count, size);
        return COR_EPROTO;
    }
    void *data = b->recv_alloc ? *ptr : rbuf;
    if (b->verify && (err = bench_check(data, size))) return err;
    if (b->recv_alloc && (err = cor_releaseBuffer(*ptr)))
        return bench_fail("cor_releaseBuffer", err);
    return COR_OK;
}

/* Waits for the `w` sends in flight, then for the receiver's ACK. */
static int sends_acked(cor_idp_t peer, cor_req_t *req, long w)
{
    int err;
    for (long slot = 0; slot < w; slot++)
        if (req[slot] != COR_REQ_NULL && (err = cor_wait(&req[slot], NULL)))
            return bench_fail("cor_wait (send)", err);
    if ((err = ctl_recv(peer, BENCH_TAG_ACK)))
        return bench_fail("waiting for the receiver (ACK)", err);
    return COR_OK;
}

/* rate: the receiver acks the end of each window but the last (the final ACK covers that). */
static int window_ends(const struct bench *b, long i, long w, long total)
{
    return b->ack_window && (i + 1) % w == 0 && i + 1 < total;
}

int bench_stream_send(const struct bench *b, cor_idp_t peer, const void *sbuf, size_t size,
                      long total)
{
    cor_req_t req[BENCH_WINDOW_MAX] = {0};
    long w = b->window < total ? b->window : total;
    int err = ctl_recv(peer, BENCH_TAG_READY);
    if (err) return bench_fail("waiting for the receiver (READY)", err);
    for (long i = 0; i < total; i++) {
        long slot = i % w;
        if (req[slot] != COR_REQ_NULL && (err = cor_wait(&req[slot], NULL)))
            return bench_fail("cor_wait (send)", err);
        if ((err = cor_sendI(peer, COR_CTX_WORLD, BENCH_TAG_DATA, sbuf, size, &req[slot])))
            return bench_fail("cor_sendI", err);
        if (window_ends(b, i, w, total) && (err = sends_acked(peer, req, w))) return err;
    }
    return sends_acked(peer, req, w);
}

int bench_stream_recv(const struct bench *b, cor_idp_t peer, void *const *rbufs, size_t size,
                      long total, long warm, struct bench_stream_result *res)
{
    cor_req_t req[BENCH_WINDOW_MAX] = {0};
    void *ptr[BENCH_WINDOW_MAX] = {0};
    long w = b->window < total ? b->window : total;
    int nbufs = bench_rbufs(b), err;
    uint64_t t0 = 0;

    for (long slot = 0; slot < w; slot++)
        if ((err = post_recv(b, peer, rbufs[slot % nbufs], size, &ptr[slot], &req[slot])))
            return bench_fail("cor_recvI", err);
    if ((err = ctl_send(peer, BENCH_TAG_READY))) return bench_fail("sending READY", err);
    for (long i = 0; i < total; i++) {
        long slot = i % w;
        if ((err = finish_recv(b, &req[slot], size, rbufs[slot % nbufs], &ptr[slot]))) return err;
        if (i == warm) t0 = bench_now_ns();
        if (i + w < total &&
            (err = post_recv(b, peer, rbufs[slot % nbufs], size, &ptr[slot], &req[slot])))
            return bench_fail("cor_recvI", err);
        if (window_ends(b, i, w, total) && (err = ctl_send(peer, BENCH_TAG_ACK)))
            return bench_fail("sending ACK", err);
    }
    res->t1_ns = bench_now_ns();
    res->t0_ns = t0;
    res->msgs = total - 1 - warm;
    res->bytes = (uint64_t)size * (uint64_t)res->msgs;
    if ((err = ctl_send(peer, BENCH_TAG_ACK))) return bench_fail("sending ACK", err);
    return COR_OK;
}

void bench_stream_row(const struct bench *b, const char *route, const char *mode, size_t size,
                      int ports, int pairs, const struct bench_stream_result *r)
{
    double us = (double)(r->t1_ns - r->t0_ns) / 1e3;
    if (us <= 0) us = 1e-3;
    struct bench_row row = {
        .route = route,
        .mode = mode,
        .bytes = size,
        .ports = ports,
        .pairs = pairs,
        .one_way_us = r->msgs > 0 ? us / (double)r->msgs : 0,
        .mbps = (double)r->bytes / us,
    };
    bench_row(b, &row);
}

/* The task-API buffers: one send buffer and bench_rbufs() receive buffers of the largest size
 * (ping-pong alternates between the first two). */
struct task_bufs {
    void *sbuf;
    void *rbufs[BENCH_WINDOW_MAX];
    int n;
};

static int bufs_get(const struct bench *b, struct task_bufs *tb)
{
    size_t max = bench_max_size(b);
    tb->n = bench_rbufs(b) < 2 ? 2 : bench_rbufs(b);
    tb->sbuf = cor_getBuffer(COR_BYTE, max);
    if (!tb->sbuf) return bench_fail("cor_getBuffer", COR_ENOMEM);
    bench_fill(tb->sbuf, max);
    for (int i = 0; i < tb->n; i++)
        if (!(tb->rbufs[i] = cor_getBuffer(COR_BYTE, max)))
            return bench_fail("cor_getBuffer", COR_ENOMEM);
    return COR_OK;
}

static void bufs_release(struct task_bufs *tb)
{
    if (tb->sbuf) cor_releaseBuffer(tb->sbuf);
    for (int i = 0; i < tb->n; i++)
        if (tb->rbufs[i]) cor_releaseBuffer(tb->rbufs[i]);
}

static int use_route(const struct bench *b)
{
    int err = cor_setTransport(b->route);
    if (err) {
        fprintf(stderr, "cor-bench: cannot use route '%s': %s\n", b->route, cor_strerror(err));
        return err;
    }
    return COR_OK;
}

/* Domain 0: n timed round trips after `warm` untimed ones. */
static int pingpong_measure(const struct bench *b, struct task_bufs *tb, cor_idp_t peer,
                            size_t size, long n, long warm, double *rtt_us)
{
    uint64_t t0 = 0;
    int err;
    for (long i = 0; i < warm + n; i++) {
        cor_req_t rreq, sreq;
        void *ptr = NULL;
        if (i == warm) t0 = bench_now_ns();
        /* The receive is posted while the message flies, as osu_latency's MPI_Send then
         * MPI_Recv and gm-pingpong (its buffers provided again off the path) do. */
        if ((err = cor_sendI(peer, COR_CTX_WORLD, BENCH_TAG_DATA, tb->sbuf, size, &sreq)))
            return bench_fail("cor_sendI", err);
        if ((err = post_recv(b, peer, tb->rbufs[0], size, &ptr, &rreq)))
            return bench_fail("cor_recvI", err);
        if ((err = cor_wait(&sreq, NULL))) return bench_fail("cor_wait (send)", err);
        if ((err = finish_recv(b, &rreq, size, tb->rbufs[0], &ptr))) return err;
    }
    *rtt_us = (double)(bench_now_ns() - t0) / 1e3 / (double)n;
    return COR_OK;
}

/* Domain 1: answers every message; the next receive is posted once the reply is on its way
 * (the measurer's next message comes only after that reply). */
static int pingpong_answer(const struct bench *b, struct task_bufs *tb, cor_idp_t peer, size_t size,
                           long total)
{
    cor_req_t rreq, sreq;
    void *ptr[2] = {0};
    int err;
    if ((err = post_recv(b, peer, tb->rbufs[0], size, &ptr[0], &rreq)))
        return bench_fail("cor_recvI", err);
    for (long i = 0; i < total; i++) {
        int cur = (int)(i & 1), nxt = !cur;
        if ((err = finish_recv(b, &rreq, size, tb->rbufs[cur], &ptr[cur]))) return err;
        if ((err = cor_sendI(peer, COR_CTX_WORLD, BENCH_TAG_DATA, tb->sbuf, size, &sreq)))
            return bench_fail("cor_sendI", err);
        if (i + 1 < total && (err = post_recv(b, peer, tb->rbufs[nxt], size, &ptr[nxt], &rreq)))
            return bench_fail("cor_recvI", err);
        if ((err = cor_wait(&sreq, NULL))) return bench_fail("cor_wait (send)", err);
    }
    return COR_OK;
}

int bench_task_pingpong(struct bench *b)
{
    struct task_bufs tb = {0};
    cor_idp_t peer = cor_task_idp(1 - b->rank, 0);
    int err = use_route(b);
    if (!err) err = bufs_get(b, &tb);
    for (int i = 0; !err && i < b->nsizes; i++) {
        size_t size = b->sizes[i];
        bench_progress(b, i, b->nsizes, size);
        long n = bench_iters_pingpong(b, size), warm = bench_warmup(n);
        if (b->rank == 1) {
            err = pingpong_answer(b, &tb, peer, size, warm + n);
            continue;
        }
        double rtt = 0;
        if ((err = pingpong_measure(b, &tb, peer, size, n, warm, &rtt))) break;
        bench_pingpong_row(b, b->route, size, rtt);
    }
    bufs_release(&tb);
    return err;
}

int bench_task_stream(struct bench *b)
{
    struct task_bufs tb = {0};
    cor_idp_t peer = cor_task_idp(1 - b->rank, 0);
    int err = use_route(b);
    if (!err) err = bufs_get(b, &tb);
    for (int i = 0; !err && i < b->nsizes; i++) {
        size_t size = b->sizes[i];
        bench_progress(b, i, b->nsizes, size);
        long n = bench_iters_stream(b, size), warm = bench_warmup(n);
        struct bench_stream_result r;
        if (b->rank == 1) {
            err = bench_stream_send(b, peer, tb.sbuf, size, warm + n);
            continue;
        }
        if ((err = bench_stream_recv(b, peer, tb.rbufs, size, warm + n, warm, &r))) break;
        bench_stream_row(b, b->route, "stream", size, 1, 1, &r);
    }
    bufs_release(&tb);
    return err;
}
