/* Suite gm_tokens: send and receive token accounting (gm-api.md section 1,
 * "Tokens"): a full window of sends and of receive buffers works, each
 * callback returns exactly one token, each receive event returns its
 * receive token, and a receive event passed to gm_unknown re-provides its
 * buffer. */
#include "gmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gmt_pair pr;

static void test_counts(void)
{
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    GMT_EQ("gm_num_send_tokens", gm_num_send_tokens(pr.a), 61);
    GMT_EQ("gm_num_receive_tokens", gm_num_receive_tokens(pr.a), 254);
    gmt_pair_close(&pr);
}

/* Provide every receive token's worth of buffers, then send through the full
 * send window twice over: every message arrives, every callback runs once. */
struct window_slot {
    int outstanding;
};
static int win_errors, win_outside, win_spurious, win_callbacks;
static void window_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct window_slot *w = ctx;
    win_callbacks++;
    if (!w->outstanding) win_spurious++;
    w->outstanding = 0;
    if (st != GM_SUCCESS) win_errors++;
    if (!gmt_in_unknown) win_outside++;
}

static void test_full_windows(void)
{
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    const unsigned size = 6, R = gm_num_receive_tokens(pr.b), S = gm_num_send_tokens(pr.a);
    const size_t len = 20;
    GMT_TRUE_FATAL("token counts are sane", R > 0 && R <= 4096 && S > 0 && S <= 4096);
    char **rbuf = calloc(R, sizeof *rbuf);
    char **sbuf = calloc(S, sizeof *sbuf);
    struct window_slot *slot = calloc(S, sizeof *slot);
    GMT_TRUE_FATAL("calloc", rbuf && sbuf && slot);
    for (unsigned i = 0; i < R; i++) {
        rbuf[i] = gm_dma_malloc(pr.b, gm_max_length_for_size(size) + 8);
        GMT_TRUE_FATAL("gm_dma_malloc", rbuf[i] != NULL);
    }
    for (unsigned i = 0; i < S; i++) {
        sbuf[i] = gm_dma_malloc(pr.a, len);
        GMT_TRUE_FATAL("gm_dma_malloc", sbuf[i] != NULL);
    }
    win_errors = win_outside = win_spurious = win_callbacks = 0;
    unsigned received = 0, bad_payload = 0, sent_total = 0;
    const unsigned rounds = 2;
    for (unsigned round = 0; round < rounds; round++) {
        /* All receive tokens handed over at once. */
        for (unsigned i = 0; i < R; i++)
            gm_provide_receive_buffer(pr.b, rbuf[i], size, GM_LOW_PRIORITY);
        unsigned round_recv = 0, next = 0;
        uint64_t deadline = gmt_now_us() + GMT_WAIT_US;
        while (round_recv < R && gmt_now_us() < deadline) {
            /* Fill the send window: one token per outstanding send. */
            for (unsigned i = 0; i < S && next < R; i++) {
                if (slot[i].outstanding) continue;
                slot[i].outstanding = 1;
                uint32_t seq = round * R + next++;
                memcpy(sbuf[i], &seq, 4);
                gm_send_with_callback(pr.a, sbuf[i], size, len, GM_LOW_PRIORITY, pr.node_b,
                                      pr.port_b, window_cb, &slot[i]);
                sent_total++;
            }
            struct gmt_msg m;
            if (gmt_poll_once(pr.b, &m) == 1) {
                uint32_t seq;
                memcpy(&seq, m.data, 4);
                if (m.length != len || seq != round * R + round_recv) bad_payload++;
                round_recv++;
            }
            gmt_poll_once(pr.a, NULL);
        }
        GMT_EQ("messages received in this round (one per receive token)", round_recv, R);
        received += round_recv;
        /* Let the last callbacks of the round run. */
        gmt_wait_sent(pr.a, pr.b, &win_callbacks, (int)sent_total, GMT_WAIT_US);
        GMT_EQ("send callbacks so far", win_callbacks, sent_total);
    }
    GMT_EQ("messages received in order with intact header", bad_payload, 0);
    GMT_EQ("messages received overall", received, rounds * R);
    GMT_EQ("callbacks with an error status", win_errors, 0);
    GMT_EQ("callbacks outside gm_unknown", win_outside, 0);
    GMT_EQ("callbacks for a send already completed", win_spurious, 0);
    for (unsigned i = 0; i < R; i++)
        gm_dma_free(pr.b, rbuf[i]);
    for (unsigned i = 0; i < S; i++)
        gm_dma_free(pr.a, sbuf[i]);
    free(rbuf);
    free(sbuf);
    free(slot);
    gmt_pair_close(&pr);
}

/* The send-token pool pattern (orangefs, Charm++, NetPIPE): free all tokens
 * into the pool, take one per send, give it back in the callback. */
struct pool_ctx {
    int done;
    int errors;
};
static void pool_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct pool_ctx *c = ctx;
    if (st != GM_SUCCESS || !gmt_in_unknown) c->errors++;
    c->done++;
    gm_free_send_token(p, GM_HIGH_PRIORITY);
}

static void test_token_pool_loop(void)
{
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    const int N = 3000, NBUF = 32;
    const unsigned size = 7;
    char *sbuf = gm_dma_malloc(pr.a, 100);
    char *rbuf[32];
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf != NULL);
    for (int i = 0; i < NBUF; i++) {
        rbuf[i] = gm_dma_malloc(pr.b, gm_max_length_for_size(size) + 8);
        GMT_TRUE_FATAL("gm_dma_malloc", rbuf[i] != NULL);
        gm_provide_receive_buffer(pr.b, rbuf[i], size, GM_HIGH_PRIORITY);
    }
    gm_free_send_tokens(pr.a, GM_HIGH_PRIORITY, gm_num_send_tokens(pr.a));
    struct pool_ctx c = {0};
    int sent = 0, recv = 0;
    uint64_t deadline = gmt_now_us() + GMT_WAIT_US;
    while ((recv < N || c.done < N) && gmt_now_us() < deadline) {
        while (sent < N && gm_alloc_send_token(pr.a, GM_HIGH_PRIORITY)) {
            gm_send_with_callback(pr.a, sbuf, size, 100, GM_HIGH_PRIORITY, pr.node_b, pr.port_b,
                                  pool_cb, &c);
            sent++;
        }
        struct gmt_msg m;
        if (gmt_poll_once(pr.b, &m) == 1) {
            recv++;
            gm_provide_receive_buffer(pr.b, m.buffer, size, GM_HIGH_PRIORITY);
        }
        gmt_poll_once(pr.a, NULL);
    }
    GMT_EQ("messages sent through the token pool", sent, N);
    GMT_EQ("messages received", recv, N);
    GMT_EQ("callbacks (one token back each)", c.done, N);
    GMT_EQ("callbacks with an error or outside gm_unknown", c.errors, 0);
    int pool = 0;
    while (pool < 100000 && gm_alloc_send_token(pr.a, GM_HIGH_PRIORITY))
        pool++;
    GMT_EQ("all tokens back in the pool", pool, (int)gm_num_send_tokens(pr.a));
    gmt_pair_close(&pr);
}

/* A receive event passed to gm_unknown gives its buffer back: the next
 * message lands in the same buffer without a new gm_provide_receive_buffer. */
static void test_unknown_reprovides(void)
{
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    char *sbuf = gm_dma_malloc(pr.a, 32);
    char *rbuf = gm_dma_malloc(pr.b, gm_max_length_for_size(6) + 8);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf && rbuf);
    gm_provide_receive_buffer(pr.b, rbuf, 6, GM_LOW_PRIORITY);
    struct gmt_send s = {0};
    int got = 0;
    for (int i = 0; i < 3; i++) {
        gm_send_with_callback(pr.a, sbuf, 6, 32, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                              &s);
        uint64_t deadline = gmt_now_us() + GMT_WAIT_US;
        int this_one = 0;
        while (!this_one && gmt_now_us() < deadline) {
            gm_recv_event_t *e = gm_receive(pr.b);
            unsigned t = GM_RECV_EVENT_TYPE(e);
            if (gmt_is_recv_type(t)) {
                GMT_TRUE("message lands in the re-provided buffer",
                         gm_ntohp(e->recv.buffer) == rbuf);
                this_one = 1;
            }
            if (t != GM_NO_RECV_EVENT) gmt_unknown(pr.b, e); /* also hands the receive event back */
            gmt_poll_once(pr.a, NULL);
        }
        got += this_one;
        if (!this_one) break;
    }
    GMT_EQ("messages received through one re-provided buffer", got, 3);
    gmt_wait_sent(pr.a, pr.b, &s.calls, 3, GMT_WAIT_US);
    GMT_EQ("send callbacks", s.calls, 3);
    gmt_pair_close(&pr);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"token counts as GM reports them", test_counts},
        {"full send and receive windows, twice", test_full_windows},
        {"send-token pool: one token back per callback", test_token_pool_loop},
        {"gm_unknown on a receive event re-provides its buffer", test_unknown_reprovides},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_tokens", tests);
}
