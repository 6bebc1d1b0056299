/* Suite gm_order: 100,000 messages of mixed sizes (0 B .. 64 KiB, size
 * classes 3..16) at both priorities, sent through the full token window:
 * per priority every message arrives exactly once, in order, intact
 * (gm-api.md section 1: order is kept for the same priority to the same
 * port).  COR_TEST_SCALE=small runs 10,000 (sanitizer builds);
 * GMT_ORDER_COUNT overrides the count. */
#include "gmt.h"

#include <gm_compat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LEN = 65528, MIN_SIZE = 3, MAX_SIZE = 16, BUFS_PER_CLASS = 8 };

static struct gmt_pair pr;
static unsigned char pattern[MAX_LEN];

/* Lengths: mostly small, some medium, a few large (as a real mix). */
static uint32_t rng_state = 12345;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static size_t pick_len(void)
{
    uint32_t r = rng() % 100;
    if (r < 5) return rng() % 8; /* 0..7: below the header */
    if (r < 60) return 8 + rng() % 120;
    if (r < 90) return 128 + rng() % (4096 - 128);
    return 4096 + rng() % (MAX_LEN - 4096 + 1);
}

/* Payload: 8-byte header (index, ~index) then pattern bytes 8..len. */
static void make_payload(unsigned char *b, size_t len, uint32_t idx)
{
    unsigned char hdr[8];
    uint32_t inv = ~idx;
    memcpy(hdr, &idx, 4);
    memcpy(hdr + 4, &inv, 4);
    memcpy(b, hdr, len < 8 ? len : 8);
    if (len > 8) memcpy(b + 8, pattern + 8, len - 8);
}
static int payload_ok(const unsigned char *b, size_t len, uint32_t idx)
{
    unsigned char hdr[8];
    uint32_t inv = ~idx;
    memcpy(hdr, &idx, 4);
    memcpy(hdr + 4, &inv, 4);
    if (memcmp(b, hdr, len < 8 ? len : 8) != 0) return 0;
    return len <= 8 || memcmp(b + 8, pattern + 8, len - 8) == 0;
}

struct slot {
    unsigned char *buf;
    int busy;
};
static int cb_errors, cb_outside, cb_done;
static void order_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct slot *s = ctx;
    (void)p;
    s->busy = 0;
    cb_done++;
    if (st != GM_SUCCESS) cb_errors++;
    if (!gmt_in_unknown) cb_outside++;
}

/* Receive buffers on pr.b, BUFS_PER_CLASS for each size class at each of the first `nprio`
 * priorities (low, then high). gmt_pair_close frees them; the caller frees the array. */
static char **provide_buffers(unsigned nprio)
{
    unsigned nrbuf = (MAX_SIZE - MIN_SIZE + 1) * nprio * BUFS_PER_CLASS, k = 0;
    GMT_TRUE_FATAL("enough receive tokens", nrbuf <= gm_num_receive_tokens(pr.b));
    char **rbuf = calloc(nrbuf, sizeof *rbuf);
    GMT_TRUE_FATAL("calloc", rbuf != NULL);
    for (unsigned s = MIN_SIZE; s <= MAX_SIZE; s++)
        for (unsigned p = 0; p < nprio; p++)
            for (unsigned j = 0; j < BUFS_PER_CLASS; j++, k++) {
                rbuf[k] = gm_dma_malloc(pr.b, gm_max_length_for_size(s) + 8);
                GMT_TRUE_FATAL("gm_dma_malloc", rbuf[k] != NULL);
                gm_provide_receive_buffer(pr.b, rbuf[k], s, p);
            }
    return rbuf;
}

/* A send buffer of MAX_LEN on pr.a for each of its send tokens (*nslot). gmt_pair_close frees
 * the buffers; the caller frees the array. */
static struct slot *send_slots(unsigned *nslot)
{
    *nslot = gm_num_send_tokens(pr.a);
    struct slot *slots = calloc(*nslot, sizeof *slots);
    GMT_TRUE_FATAL("calloc", slots != NULL);
    for (unsigned i = 0; i < *nslot; i++) {
        slots[i].buf = gm_dma_malloc(pr.a, MAX_LEN);
        GMT_TRUE_FATAL("gm_dma_malloc", slots[i].buf != NULL);
    }
    return slots;
}

static void test_order_mixed(void)
{
    unsigned long n = 100000;
    /* Sanitizer runs set COR_TEST_SCALE=small: fewer messages, same mix. */
    const char *scale = getenv("COR_TEST_SCALE");
    if (scale && strcmp(scale, "small") == 0) n = 10000;
    const char *env = getenv("GMT_ORDER_COUNT");
    if (env && atol(env) > 0) n = (unsigned long)atol(env);
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    gmt_fill(pattern, sizeof pattern, 7);
    /* The whole sequence is fixed in advance so the receiver knows, per
     * priority, which message must come next. */
    size_t *len = malloc(n * sizeof *len);
    unsigned char *prio = malloc(n);
    uint32_t *order[2] = {malloc(n * sizeof(uint32_t)), malloc(n * sizeof(uint32_t))};
    unsigned long count[2] = {0, 0}, cursor[2] = {0, 0};
    GMT_TRUE_FATAL("malloc", len && prio && order[0] && order[1]);
    for (unsigned long i = 0; i < n; i++) {
        len[i] = pick_len();
        prio[i] = (rng() & 3) == 0 ? GM_HIGH_PRIORITY : GM_LOW_PRIORITY;
        order[prio[i]][count[prio[i]]++] = (uint32_t)i;
    }

    char **rbuf = provide_buffers(2);
    unsigned nslot;
    struct slot *slots = send_slots(&nslot);

    cb_errors = cb_outside = cb_done = 0;
    unsigned long sent = 0, recv = 0, bad_len = 0, bad_data = 0, bad_size = 0, extra = 0;
    unsigned long first_bad = (unsigned long)-1;
    /* A sane library moves 100,000 messages in seconds; sanitizers are ~10x
     * slower; 30 s + 1 ms per message bounds a stuck run. */
    uint64_t t0 = gmt_now_us(), deadline = t0 + 30000000u + (uint64_t)n * 1000u;
    unsigned free_hint = 0;
    while ((recv < n || (unsigned long)cb_done < sent) && gmt_now_us() < deadline) {
        /* Send while a slot (= send token) is free. */
        for (unsigned tries = 0; tries < nslot && sent < n; tries++) {
            struct slot *s = &slots[free_hint];
            free_hint = (free_hint + 1) % nslot;
            if (s->busy) continue;
            s->busy = 1;
            make_payload(s->buf, len[sent], (uint32_t)sent);
            gm_send_with_callback(pr.a, s->buf, gm_min_size_for_length(len[sent]), len[sent],
                                  prio[sent], pr.node_b, pr.port_b, order_cb, s);
            sent++;
        }
        /* Drain what arrived; repost each buffer at once. */
        for (int burst = 0; burst < 64; burst++) {
            struct gmt_msg m;
            if (gmt_poll_once(pr.b, &m) != 1) break;
            unsigned p = m.prio;
            if (cursor[p] >= count[p]) {
                extra++;
            } else {
                uint32_t idx = order[p][cursor[p]++];
                if (m.length != len[idx])
                    bad_len++;
                else if (!payload_ok(m.data, m.length, idx))
                    bad_data++;
                if (m.size != gm_min_size_for_length(len[idx])) bad_size++;
                if ((m.length != len[idx] || !payload_ok(m.data, m.length, idx)) &&
                    first_bad == (unsigned long)-1)
                    first_bad = idx;
            }
            gm_provide_receive_buffer(pr.b, m.buffer, m.size, p);
            recv++;
        }
        gmt_poll_once(pr.a, NULL);
    }
    uint64_t el = gmt_now_us() - t0;
    printf("\n  gm_order: %lu messages in %.2f s (%.0f msg/s)\n", recv, el / 1e6,
           el ? recv * 1e6 / el : 0.0);
    if (recv < n)
        printf("  stopped: sent %lu, received %lu (low %lu of %lu, high %lu of %lu), "
               "callbacks %d\n",
               sent, recv, cursor[0], count[0], cursor[1], count[1], cb_done);
    if (first_bad != (unsigned long)-1)
        printf("  first message out of order or corrupt: index %lu\n", first_bad);
    GMT_EQ("messages sent", sent, n);
    GMT_EQ("messages received", recv, n);
    GMT_EQ("low-priority messages received", cursor[0], count[0]);
    GMT_EQ("high-priority messages received", cursor[1], count[1]);
    GMT_EQ("messages with the wrong length for their place in the order", bad_len, 0);
    GMT_EQ("messages with corrupt or misplaced payload", bad_data, 0);
    GMT_EQ("messages in the wrong size class", bad_size, 0);
    GMT_EQ("messages beyond those sent", extra, 0);
    GMT_EQ("send callbacks", cb_done, sent);
    GMT_EQ("send callbacks with an error", cb_errors, 0);
    GMT_EQ("send callbacks outside gm_unknown", cb_outside, 0);
    /* Nothing more may arrive. */
    GMT_EQ("messages after the last one", gmt_drain(pr.b, pr.a, 50000), 0);

    gmt_pair_close(&pr); /* releases provided buffers and dma memory */
    free(rbuf);
    free(slots);
    free(len);
    free(prio);
    free(order[0]);
    free(order[1]);
}

/* gm_compat_sendv_now (gm_compat.h) mixed with gm_send_with_callback on one stream: the
 * sender keeps at most BUFS_PER_CLASS messages of a class unreceived (its own credits, as the
 * call requires), sends each small message in two pieces with gm_compat_sendv_now and the
 * usual way when that says GM_TRY_AGAIN (and every large one): every message arrives once, in
 * order, intact; only the usual sends get callbacks; on shm most small ones leave direct. */
static void test_order_sendv_now(void)
{
    unsigned long n = 20000;
    const char *scale = getenv("COR_TEST_SCALE");
    if (scale && strcmp(scale, "small") == 0) n = 4000;
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE_FATAL("open two ports", 0);
        return;
    }
    gmt_fill(pattern, sizeof pattern, 7);
    size_t *len = malloc(n * sizeof *len);
    GMT_TRUE_FATAL("malloc", len != NULL);
    for (unsigned long i = 0; i < n; i++)
        len[i] = pick_len();
    char **rbuf = provide_buffers(1);
    unsigned nslot;
    struct slot *slots = send_slots(&nslot);
    unsigned char *direct_buf = malloc(MAX_LEN);
    GMT_TRUE_FATAL("malloc", direct_buf != NULL);
    unsigned out[MAX_SIZE + 1] = {0}; /* per class: sent, not yet received */
    cb_errors = cb_outside = cb_done = 0;
    unsigned long sent = 0, sent_cb = 0, direct = 0, again = 0, recv = 0, bad = 0, extra = 0;
    uint64_t deadline = gmt_now_us() + 30000000u + (uint64_t)n * 1000u;
    /* First, usual sends beyond the window of 16 while the receiver does not poll (no ack
     * comes): the last ones wait in the library, and a direct send must not overtake them. */
    enum { HELD = 24 };
    GMT_TRUE_FATAL("send tokens for the held sends", nslot > HELD);
    unsigned small = gm_min_size_for_length(16);
    for (unsigned i = 0; i <= HELD; i++)
        len[i] = 16;
    for (unsigned i = 0; i < HELD; i++) {
        slots[i].busy = 1;
        make_payload(slots[i].buf, 16, i);
        gm_send_with_callback(pr.a, slots[i].buf, small, 16, GM_LOW_PRIORITY, pr.node_b, pr.port_b,
                              order_cb, &slots[i]);
    }
    sent = sent_cb = HELD;
    out[small] = HELD;
    make_payload(direct_buf, 16, HELD);
    struct iovec one = {direct_buf, 16};
    gm_status_t held_st =
        gm_compat_sendv_now(pr.a, &one, 1, small, GM_LOW_PRIORITY, pr.node_b, pr.port_b);
    GMT_EQ("gm_compat_sendv_now behind sends waiting in the library", held_st, GM_TRY_AGAIN);
    if (held_st == GM_SUCCESS) { /* it left: the order check below says where it landed */
        sent++;
        out[small]++;
    }
    unsigned free_hint = HELD;
    while ((recv < n || (unsigned long)cb_done < sent_cb) && gmt_now_us() < deadline) {
        for (unsigned tries = 0; tries < nslot && sent < n; tries++) {
            unsigned size = gm_min_size_for_length(len[sent]);
            if (out[size] >= BUFS_PER_CLASS) break; /* no credit: wait for the receiver */
            if (len[sent] < 4096) {
                make_payload(direct_buf, len[sent], (uint32_t)sent);
                size_t cut = len[sent] / 2;
                struct iovec iov[2] = {{direct_buf, cut}, {direct_buf + cut, len[sent] - cut}};
                gm_status_t st =
                    gm_compat_sendv_now(pr.a, iov, 2, size, GM_LOW_PRIORITY, pr.node_b, pr.port_b);
                if (st == GM_SUCCESS) {
                    memset(direct_buf, 0xee, len[sent]); /* reused at once */
                    direct++;
                    out[size]++;
                    sent++;
                    continue;
                }
                if (st != GM_TRY_AGAIN) bad++;
                again++;
            }
            struct slot *s = &slots[free_hint];
            free_hint = (free_hint + 1) % nslot;
            if (s->busy) continue;
            s->busy = 1;
            make_payload(s->buf, len[sent], (uint32_t)sent);
            gm_send_with_callback(pr.a, s->buf, size, len[sent], GM_LOW_PRIORITY, pr.node_b,
                                  pr.port_b, order_cb, s);
            out[size]++;
            sent++;
            sent_cb++;
        }
        for (int burst = 0; burst < 64; burst++) {
            struct gmt_msg m;
            if (gmt_poll_once(pr.b, &m) != 1) break;
            if (recv >= sent) {
                extra++;
            } else if (m.length != len[recv] || !payload_ok(m.data, m.length, (uint32_t)recv) ||
                       m.size != gm_min_size_for_length(len[recv])) {
                bad++;
            }
            if (m.size <= MAX_SIZE && out[m.size]) out[m.size]--;
            gm_provide_receive_buffer(pr.b, m.buffer, m.size, GM_LOW_PRIORITY);
            recv++;
        }
        gmt_poll_once(pr.a, NULL);
    }
    printf("\n  sendv_now: %lu of %lu messages direct, %lu sent again the usual way\n", direct,
           sent, again);
    GMT_EQ("messages sent", sent, n);
    GMT_EQ("messages received", recv, n);
    GMT_EQ("messages out of order, corrupt or refused", bad, 0);
    GMT_EQ("messages beyond those sent", extra, 0);
    GMT_EQ("send callbacks (the usual sends only)", (unsigned long)cb_done, sent_cb);
    GMT_EQ("send callbacks with an error", cb_errors, 0);
    if (gm_compat_wakes_on_arrival(pr.a)) /* shm: small messages leave direct */
        GMT_TRUE("most small messages sent direct", direct > n / 4);
    else
        GMT_EQ("messages sent direct off shm", direct, 0);
    GMT_EQ("messages after the last one", gmt_drain(pr.b, pr.a, 50000), 0);
    gmt_pair_close(&pr);
    free(direct_buf);
    free(rbuf);
    free(slots);
    free(len);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"100,000 mixed-size messages at two priorities, in order", test_order_mixed},
        {"gm_compat_sendv_now mixed with callback sends, in order", test_order_sendv_now},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_order", tests);
}
