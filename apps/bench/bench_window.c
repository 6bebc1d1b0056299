/*
 * The windowed loop that --raw and --baseline udp share for rate (and --raw for stream): domain
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
