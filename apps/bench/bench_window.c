/*
 * The loops of message transports given as bench_msg_ops (--raw and --baseline udp): the
 * ping-pong, and the windowed loop they share for rate (and --raw for stream): domain
 * 1 sends, domain 0 receives and acks with an empty message after every `ack_every` messages
 * and after the last; the sender waits for its sends and for that ack before going on. The task
 * API has its own loop (bench_task.c), whose receives are posted ahead.
 */
#include "bench.h"
#include "cor/cor.h"

int bench_windows(const struct bench *b, const struct bench_msg_ops *ops, void *ctx, size_t size,
                  long total, long warm, long ack_every, struct bench_stream_result *r)
{
    int err = COR_OK;
    for (long k = 0; !err && k < total; k++) {
        int ack = (k + 1) % ack_every == 0 || k + 1 == total;
        if (b->rank == 1) {
            err = ops->send(ctx, size);
            if (!err && ack && ops->drain) err = ops->drain(ctx);
            if (!err && ack) err = ops->recv(ctx, 0);
            continue;
        }
        err = ops->recv(ctx, size);
        if (k == warm) r->t0_ns = bench_now_ns();
        if (k + 1 == total) r->t1_ns = bench_now_ns();
        if (!err && ack) err = ops->send(ctx, 0);
    }
    r->msgs = total - 1 - warm;
    r->bytes = (uint64_t)size * (uint64_t)r->msgs;
    return err;
}

void bench_rate_budget(const struct bench *b, long n, long *total, long *warm)
{
    long w = b->window;
    *warm = 2 * w - 1;
    *total = (n + w - 1) / w * w + 2 * w;
}

void bench_pingpong_row(const struct bench *b, const char *route, size_t size, double rtt_us)
{
    struct bench_row row = {
        .route = route,
        .mode = "pingpong",
        .bytes = size,
        .ports = 1,
        .pairs = 1,
        .rtt_us = rtt_us,
        .one_way_us = rtt_us / 2,
        .mbps = (double)size / (rtt_us / 2),
    };
    bench_row(b, &row);
}

int bench_pingpong(struct bench *b, const char *route, const struct bench_msg_ops *ops, void *ctx)
{
    int err = COR_OK;
    for (int i = 0; !err && i < b->nsizes; i++) {
        size_t size = b->sizes[i];
        bench_progress(b, i, b->nsizes, size);
        long n = bench_iters_pingpong(b, size), warm = bench_warmup(n);
        uint64_t t0 = 0;
        /* Leftovers of an earlier size cannot exist (every message was answered). */
        for (long k = 0; !err && k < warm + n; k++) {
            if (k == warm) t0 = bench_now_ns();
            if (b->rank == 0) {
                if (!(err = ops->send(ctx, size))) err = ops->recv(ctx, size);
            } else if (!(err = ops->recv(ctx, size))) {
                err = ops->send(ctx, size);
            }
        }
        if (err)
            fprintf(stderr, "cor-bench: domain %d: %s ping-pong of %zu bytes failed\n", b->rank,
                    route, size);
        else if (b->rank == 0)
            bench_pingpong_row(b, route, size, (double)(bench_now_ns() - t0) / 1e3 / (double)n);
    }
    return err;
}
