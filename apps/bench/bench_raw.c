/*
 * --raw: ping-pong and stream over the route alone (cor/raw.h): frames straight over the raw
 * hard port, no tasks, matching or protocol. A message larger than the route's frame is sent as
 * consecutive full frames (the route keeps them in order), so sizes are comparable with the task
 * API rows. Both sides poll in the main thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cor/raw.h"

struct raw_ctx {
    const struct bench *b;
    cor_raw_t *raw;
    size_t frame; /* largest frame */
    char *sbuf, *rbuf;
    int peer;
    char route[64]; /* "<route>-route" for the rows */
};

/* Sends one message of `size` bytes as frames (one empty frame for size 0). */
static int raw_send_msg(struct raw_ctx *c, size_t size)
{
    size_t off = 0;
    do {
        size_t len = size - off < c->frame ? size - off : c->frame;
        int err = cor_raw_send(c->raw, c->peer, c->sbuf + off, len);
        if (err) return bench_fail("cor_raw_send", err);
        off += len;
    } while (off < size);
    return COR_OK;
}

/* Receives one message of `size` bytes from the peer, frame by frame. */
static int raw_recv_msg(struct raw_ctx *c, size_t size)
{
    size_t off = 0;
    do {
        size_t len;
        int from, err = cor_raw_recv(c->raw, c->rbuf + off, c->frame, &len, &from);
        if (err) return bench_fail("cor_raw_recv", err);
        if (from != c->peer || len > size - off || (len < c->frame && off + len < size)) {
            fprintf(stderr,
                    "cor-bench: raw frame of %zu bytes from domain %d at offset %zu of "
                    "a %zu-byte message: unexpected\n",
                    len, from, off, size);
            return COR_EPROTO;
        }
        off += len;
    } while (off < size);
    if (c->b->verify) return bench_check(c->rbuf, size);
    return COR_OK;
}

static int raw_open(const struct bench *b, struct raw_ctx *c)
{
    size_t max = bench_max_size(b);
    memset(c, 0, sizeof *c);
    c->b = b;
    c->peer = 1 - b->rank;
    snprintf(c->route, sizeof c->route, "%s-route", b->route);
    int err = cor_raw_open(b->route, &c->raw);
    if (err) {
        fprintf(stderr, "cor-bench: cor_raw_open(%s): %s\n", b->route, cor_strerror(err));
        return err;
    }
    c->frame = cor_raw_frame_max(c->raw);
    if (c->frame == 0) {
        fprintf(stderr, "cor-bench: route %s reports a frame size of 0\n", b->route);
        return COR_EROUTE;
    }
    /* The receive buffer takes a whole frame at any offset below max. */
    c->sbuf = malloc(max);
    c->rbuf = malloc(max + c->frame);
    if (!c->sbuf || !c->rbuf) return bench_fail("malloc", COR_ENOMEM);
    bench_fill(c->sbuf, max);
    /* Both raw ports are open before the first frame. */
    if ((err = cor_barrier())) return bench_fail("cor_barrier", err);
    return COR_OK;
}

static void raw_close(struct raw_ctx *c)
{
    if (c->raw) cor_raw_close(c->raw);
    free(c->sbuf);
    free(c->rbuf);
}

static int raw_send_ctx(void *c, size_t size)
{
    return raw_send_msg(c, size);
}

static int raw_recv_ctx(void *c, size_t size)
{
    return raw_recv_msg(c, size);
}

int bench_raw_pingpong(struct bench *b)
{
    static const struct bench_msg_ops ops = {raw_send_ctx, raw_recv_ctx, NULL};
    struct raw_ctx c;
    int err = raw_open(b, &c);
    if (!err) err = bench_pingpong(b, c.route, &ops, &c);
    if (!err && (err = cor_raw_flush(c.raw))) bench_fail("cor_raw_flush", err);
    raw_close(&c);
    return err;
}

static int raw_drain(void *c)
{
    int err = cor_raw_flush(((struct raw_ctx *)c)->raw);
    return err ? bench_fail("cor_raw_flush", err) : COR_OK;
}

/* stream (one ack at the end) or rate (an ack per window of b->window messages, two windows
 * untimed), one row per size. */
static int raw_measure(struct bench *b, int rate)
{
    struct raw_ctx c;
    int err = raw_open(b, &c);
    for (int i = 0; !err && i < b->nsizes; i++) {
        size_t size = b->sizes[i];
        bench_progress(b, i, b->nsizes, size);
        static const struct bench_msg_ops ops = {raw_send_ctx, raw_recv_ctx, raw_drain};
        long n = bench_iters_stream(b, size), warm = bench_warmup(n), total = warm + n;
        if (rate) bench_rate_budget(b, n, &total, &warm);
        struct bench_stream_result r = {0};
        err = bench_windows(b, &ops, &c, size, total, warm, rate ? b->window : total, &r);
        if (!err) bench_stream_row(b, c.route, rate ? "rate-raw" : "stream", size, 1, 1, &r);
    }
    if (!err && (err = cor_raw_flush(c.raw))) bench_fail("cor_raw_flush", err);
    raw_close(&c);
    return err;
}

int bench_raw_stream(struct bench *b)
{
    return raw_measure(b, 0);
}

int bench_raw_rate(struct bench *b)
{
    return raw_measure(b, 1);
}
