/* Suite gm_sizes: receive buffers match exactly on (size, priority); a
 * message waits until a matching buffer is provided; event fields; tags;
 * acceptable-size masks (gm-api.md sections 1-3). */
#include "gmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gmt_pair pr;

/* Check a received message against what was sent. */
static void check_msg(const char *what, const struct gmt_msg *m, unsigned size, unsigned prio,
                      size_t len, uint32_t seed, const void *posted, unsigned tag)
{
    char w[160];
    snprintf(w, sizeof w, "%s: length", what);
    GMT_EQ(w, m->length, len);
    snprintf(w, sizeof w, "%s: size", what);
    GMT_EQ(w, m->size, size);
    snprintf(w, sizeof w, "%s: priority from event type %u", what, m->type);
    GMT_EQ(w, m->prio, prio);
    snprintf(w, sizeof w, "%s: tag", what);
    GMT_EQ(w, m->tag, tag);
    snprintf(w, sizeof w, "%s: sender node", what);
    GMT_EQ(w, m->sender_node, pr.node_a);
    snprintf(w, sizeof w, "%s: sender port", what);
    GMT_EQ(w, m->sender_port, pr.port_a);
    snprintf(w, sizeof w, "%s: buffer is the one provided", what);
    GMT_TRUE(w, m->buffer == posted);
    snprintf(w, sizeof w, "%s: not a PEER event (port ids differ)", what);
    GMT_TRUE(w, m->type != GM_PEER_RECV_EVENT && m->type != GM_HIGH_PEER_RECV_EVENT &&
                    m->type != GM_FAST_PEER_RECV_EVENT && m->type != GM_FAST_HIGH_PEER_RECV_EVENT);
    if (!gmt_is_fast_type(m->type)) {
        snprintf(w, sizeof w, "%s: non-FAST event has message == buffer", what);
        GMT_TRUE(w, m->data == m->buffer);
    }
    if (m->data && m->length == len) {
        snprintf(w, sizeof w, "%s: payload intact (first bad byte, -1 = none)", what);
        GMT_EQ(w, gmt_check(m->data, len, seed), -1);
    }
}

/* Every size class 3..21, both priorities, shortest and longest length. */
static void test_all_sizes_both_priorities(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    for (unsigned size = 3; size <= 21; size++) {
        gm_size_t maxlen = gm_max_length_for_size(size);
        gm_size_t lens[2] = {size == 3 ? 0 : gm_max_length_for_size(size - 1) + 1, maxlen};
        for (unsigned prio = 0; prio < 2; prio++) {
            for (int k = 0; k < 2; k++) {
                size_t len = lens[k];
                uint32_t seed = size * 100 + prio * 10 + (unsigned)k;
                char *rbuf = gm_dma_malloc(pr.b, maxlen ? maxlen : 8);
                char *sbuf = gm_dma_malloc(pr.a, len ? len : 8);
                GMT_TRUE_FATAL("gm_dma_malloc", rbuf && sbuf);
                gmt_fill(sbuf, len, seed);
                gm_provide_receive_buffer(pr.b, rbuf, size, prio);
                struct gmt_send s = {0};
                gm_send_with_callback(pr.a, sbuf, size, len, prio, pr.node_b, pr.port_b,
                                      gmt_send_cb, &s);
                struct gmt_msg m;
                char what[96];
                snprintf(what, sizeof what, "size %u prio %u len %zu", size, prio, len);
                int got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
                GMT_TRUE(what, got);
                if (got) check_msg(what, &m, size, prio, len, seed, rbuf, 0);
                GMT_TRUE("send callback ran", gmt_wait_sent(pr.a, pr.b, &s.calls, 1, GMT_WAIT_US));
                GMT_EQ("send status", s.status, GM_SUCCESS);
                GMT_EQ("send callback ran once", s.calls, 1);
                gm_dma_free(pr.b, rbuf);
                gm_dma_free(pr.a, sbuf);
                if (!got) goto out;
            }
        }
    }
out:
    gmt_pair_close(&pr);
}

/* Lengths at the library's protocol switches, content checked: on shm an
 * eager message (64-byte header + payload) must fit the provider's 4096-byte
 * inject size, so payloads above 4032 go as header + DATA; DATA up to 4096
 * bytes is injected, above by process_vm_readv; elsewhere (tcp) payloads up
 * to 4096 are eager. */
static void test_protocol_thresholds(void)
{
    static const size_t lens[] = {4031, 4032, 4033, 4095, 4096, 4097, 8184};
    const unsigned size = 13;
    if (gmt_pair_open_or_stop(&pr)) return;
    char *rbuf = gm_dma_malloc(pr.b, gm_max_length_for_size(size));
    char *sbuf = gm_dma_malloc(pr.a, gm_max_length_for_size(size));
    GMT_TRUE_FATAL("gm_dma_malloc", rbuf && sbuf);
    for (unsigned prio = 0; prio < 2; prio++) {
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            uint32_t seed = 7000 + (uint32_t)(prio * 100 + i);
            memset(rbuf, 0, gm_max_length_for_size(size));
            gmt_fill(sbuf, lens[i], seed);
            gm_provide_receive_buffer(pr.b, rbuf, size, prio);
            struct gmt_send s = {0};
            gm_send_with_callback(pr.a, sbuf, size, lens[i], prio, pr.node_b, pr.port_b,
                                  gmt_send_cb, &s);
            struct gmt_msg m;
            char what[96];
            snprintf(what, sizeof what, "len %zu prio %u", lens[i], prio);
            int got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
            GMT_TRUE(what, got);
            if (got) check_msg(what, &m, size, prio, lens[i], seed, rbuf, 0);
            GMT_TRUE("send callback ran", gmt_wait_sent(pr.a, pr.b, &s.calls, 1, GMT_WAIT_US));
            GMT_EQ("send status", s.status, GM_SUCCESS);
            if (!got) goto out;
        }
    }
out:
    gm_dma_free(pr.b, rbuf);
    gm_dma_free(pr.a, sbuf);
    gmt_pair_close(&pr);
}

/* Messages that fill an inject (4033-4096 bytes on libfabric's shm) go in the short form once
 * the target knows the sender (gm_internal.h, gmx_short), with an ack of their own priority in
 * it, else with the full header: a ping-pong at both priorities in both directions takes every
 * case (a reply of the other priority than the ack it owes goes with its header). */
static void test_fill_inject_both_ways(void)
{
    static const size_t lens[] = {4096, 4033, 4095};
    const unsigned size = 13, rounds = 200;
    if (gmt_pair_open_or_stop(&pr)) return;
    char *rbuf_a = gm_dma_malloc(pr.a, gm_max_length_for_size(size));
    char *rbuf_b = gm_dma_malloc(pr.b, gm_max_length_for_size(size));
    char *sbuf_a = gm_dma_malloc(pr.a, gm_max_length_for_size(size));
    char *sbuf_b = gm_dma_malloc(pr.b, gm_max_length_for_size(size));
    GMT_TRUE_FATAL("gm_dma_malloc", rbuf_a && rbuf_b && sbuf_a && sbuf_b);
    for (unsigned i = 0; i < rounds; i++) {
        unsigned prio_ab = i & 1, prio_ba = (i >> 1) & 1;
        size_t len = lens[i % 3];
        struct gmt_send sa = {0}, sb = {0};
        struct gmt_msg m;
        char what[96];
        gm_provide_receive_buffer(pr.b, rbuf_b, size, prio_ab);
        gm_provide_receive_buffer(pr.a, rbuf_a, size, prio_ba);
        gmt_fill(sbuf_a, len, 9000 + i);
        gm_send_with_callback(pr.a, sbuf_a, size, len, prio_ab, pr.node_b, pr.port_b, gmt_send_cb,
                              &sa);
        snprintf(what, sizeof what, "round %u: a to b, %zu bytes, prio %u", i, len, prio_ab);
        int got = gmt_wait_msg(pr.b, NULL, &m, GMT_WAIT_US, NULL);
        GMT_TRUE(what, got);
        if (!got) break;
        check_msg(what, &m, size, prio_ab, len, 9000 + i, rbuf_b, 0);
        gmt_fill(sbuf_b, len, 19000 + i);
        gm_send_with_callback(pr.b, sbuf_b, size, len, prio_ba, pr.node_a, pr.port_a, gmt_send_cb,
                              &sb);
        snprintf(what, sizeof what, "round %u: b to a, %zu bytes, prio %u", i, len, prio_ba);
        got = gmt_wait_msg(pr.a, NULL, &m, GMT_WAIT_US, NULL);
        GMT_TRUE(what, got);
        if (!got) break;
        /* check_msg expects a's port as the sender: check b's message here */
        GMT_EQ(what, m.length, len);
        GMT_EQ(what, m.prio, prio_ba);
        GMT_EQ(what, m.sender_port, pr.port_b);
        GMT_TRUE(what, m.buffer == rbuf_a);
        GMT_EQ(what, gmt_check(m.data, len, 19000 + i), -1);
        GMT_TRUE("a's send callback ran", gmt_wait_sent(pr.a, pr.b, &sa.calls, 1, GMT_WAIT_US));
        GMT_TRUE("b's send callback ran", gmt_wait_sent(pr.b, pr.a, &sb.calls, 1, GMT_WAIT_US));
        GMT_EQ("a's send status", sa.status, GM_SUCCESS);
        GMT_EQ("b's send status", sb.status, GM_SUCCESS);
        if (sa.calls != 1 || sb.calls != 1) break;
    }
    gm_dma_free(pr.a, rbuf_a);
    gm_dma_free(pr.b, rbuf_b);
    gm_dma_free(pr.a, sbuf_a);
    gm_dma_free(pr.b, sbuf_b);
    gmt_pair_close(&pr);
}

/* A message is never delivered into a buffer of another size or priority;
 * it waits until the matching buffer is provided. */
static void test_exact_match_and_wait(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    const unsigned size = 10;
    const size_t len = 600;
    char *wrong_size_lo = gm_dma_malloc(pr.b, gm_max_length_for_size(size + 1) + 8);
    char *wrong_size_hi = gm_dma_malloc(pr.b, gm_max_length_for_size(size + 1) + 8);
    char *smaller_lo = gm_dma_malloc(pr.b, gm_max_length_for_size(size) + 8);
    char *wrong_prio = gm_dma_malloc(pr.b, gm_max_length_for_size(size) + 8);
    char *right = gm_dma_malloc(pr.b, gm_max_length_for_size(size) + 8);
    char *sbuf = gm_dma_malloc(pr.a, len);
    GMT_TRUE_FATAL("gm_dma_malloc",
                   wrong_size_lo && wrong_size_hi && smaller_lo && wrong_prio && right && sbuf);
    gmt_fill(sbuf, len, 42);

    /* Bigger size class, both priorities; same size class at high priority. */
    gm_provide_receive_buffer(pr.b, wrong_size_lo, size + 1, GM_LOW_PRIORITY);
    gm_provide_receive_buffer(pr.b, wrong_size_hi, size + 1, GM_HIGH_PRIORITY);
    gm_provide_receive_buffer(pr.b, wrong_prio, size, GM_HIGH_PRIORITY);
    gm_provide_receive_buffer(pr.b, smaller_lo, size - 1, GM_LOW_PRIORITY);
    struct gmt_send s = {0};
    gm_send_with_callback(pr.a, sbuf, size, len, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                          &s);
    unsigned early = gmt_drain(pr.b, pr.a, 300000);
    GMT_EQ("no delivery into a buffer of another size or priority", early, 0);
    GMT_EQ("no send callback before the message is received", s.calls, 0);

    gm_provide_receive_buffer_with_tag(pr.b, right, size, GM_LOW_PRIORITY, 201);
    struct gmt_msg m;
    int got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
    GMT_TRUE("delivered once the matching buffer is provided", got);
    if (got) check_msg("waiting message", &m, size, GM_LOW_PRIORITY, len, 42, right, 201);
    GMT_TRUE("send callback ran", gmt_wait_sent(pr.a, pr.b, &s.calls, 1, GMT_WAIT_US));
    GMT_EQ("send status", s.status, GM_SUCCESS);

    /* The other buffers are still there and still match exactly. */
    gmt_fill(sbuf, len, 43);
    struct gmt_send s2 = {0};
    gm_send_with_callback(pr.a, sbuf, size, len, GM_HIGH_PRIORITY, pr.node_b, pr.port_b,
                          gmt_send_cb, &s2);
    got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
    GMT_TRUE("high-priority message uses the high-priority buffer", got);
    if (got) check_msg("high priority", &m, size, GM_HIGH_PRIORITY, len, 43, wrong_prio, 0);
    GMT_TRUE("send callback ran", gmt_wait_sent(pr.a, pr.b, &s2.calls, 1, GMT_WAIT_US));
    GMT_EQ("event priority is HIGH", m.prio, GM_HIGH_PRIORITY);

    /* Use up the remaining buffers so they can be freed: each still matches
     * only its own (size, priority). */
    static const struct {
        unsigned size, prio;
    } rest[] = {
        {size + 1, GM_LOW_PRIORITY}, {size + 1, GM_HIGH_PRIORITY}, {size - 1, GM_LOW_PRIORITY}};
    char *const rest_buf[] = {wrong_size_lo, wrong_size_hi, smaller_lo};
    for (int i = 0; i < 3; i++) {
        struct gmt_send s3 = {0};
        size_t l =
            gm_max_length_for_size(rest[i].size) < len ? gm_max_length_for_size(rest[i].size) : len;
        gmt_fill(sbuf, l, 50 + (uint32_t)i);
        gm_send_with_callback(pr.a, sbuf, rest[i].size, l, rest[i].prio, pr.node_b, pr.port_b,
                              gmt_send_cb, &s3);
        got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
        GMT_TRUE("message for a remaining buffer delivered", got);
        if (got)
            check_msg("remaining buffer", &m, rest[i].size, rest[i].prio, l, 50 + (uint32_t)i,
                      rest_buf[i], 0);
        GMT_TRUE("send callback ran", gmt_wait_sent(pr.a, pr.b, &s3.calls, 1, GMT_WAIT_US));
    }
    gm_dma_free(pr.b, wrong_size_lo);
    gm_dma_free(pr.b, wrong_size_hi);
    gm_dma_free(pr.b, smaller_lo);
    gm_dma_free(pr.b, wrong_prio);
    gm_dma_free(pr.b, right);
    gm_dma_free(pr.a, sbuf);
    gmt_pair_close(&pr);
}

/* Tags 0..255 come back in the event, one per buffer. */
static void test_tags(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    enum { N = 8 };
    static const unsigned tags[N] = {0, 1, 7, 100, 128, 200, 254, 255};
    char *bufs[N];
    char *sbuf = gm_dma_malloc(pr.a, 16);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf != NULL);
    for (int i = 0; i < N; i++) {
        bufs[i] = gm_dma_malloc(pr.b, gm_max_length_for_size(5) + 8);
        GMT_TRUE_FATAL("gm_dma_malloc", bufs[i] != NULL);
        gm_provide_receive_buffer_with_tag(pr.b, bufs[i], 5, GM_LOW_PRIORITY, tags[i]);
    }
    int seen[N] = {0};
    struct gmt_send s = {0};
    for (int i = 0; i < N; i++) {
        gm_send_with_callback(pr.a, sbuf, 5, 16, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                              &s);
        struct gmt_msg m;
        if (!gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL)) {
            GMT_TRUE("message with a tagged buffer arrives", 0);
            break;
        }
        int found = 0;
        for (int j = 0; j < N; j++)
            if (m.buffer == bufs[j]) {
                char w[80];
                snprintf(w, sizeof w, "tag of buffer %d", j);
                GMT_EQ(w, m.tag, tags[j]);
                seen[j]++;
                found = 1;
            }
        GMT_TRUE("event buffer is one of the provided buffers", found);
    }
    for (int j = 0; j < N; j++)
        GMT_EQ("each tagged buffer used once", seen[j], 1);
    gmt_wait_sent(pr.a, pr.b, &s.calls, N, GMT_WAIT_US);
    GMT_EQ("send callbacks", s.calls, N);
    gmt_pair_close(&pr);
}

/* gm_set_acceptable_sizes: a size outside the mask makes the send fail with
 * GM_SEND_REJECTED; sizes inside still work. */
static void test_acceptable_sizes(void)
{
    if (gmt_pair_open_or_stop(&pr)) return;
    GMT_EQ("gm_set_acceptable_sizes(low, 1<<6)",
           gm_set_acceptable_sizes(pr.b, GM_LOW_PRIORITY, (gm_size_t)1 << 6), GM_SUCCESS);
    char *sbuf = gm_dma_malloc(pr.a, 64);
    char *r6 = gm_dma_malloc(pr.b, gm_max_length_for_size(6) + 8);
    char *r7 = gm_dma_malloc(pr.b, gm_max_length_for_size(7) + 8);
    GMT_TRUE_FATAL("gm_dma_malloc", sbuf && r6 && r7);
    gm_provide_receive_buffer(pr.b, r7, 7, GM_LOW_PRIORITY);
    gm_provide_receive_buffer(pr.b, r6, 6, GM_LOW_PRIORITY);
    struct gmt_send rej = {0}, ok = {0};
    gm_send_with_callback(pr.a, sbuf, 7, 60, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                          &rej);
    int done = gmt_wait_sent(pr.a, pr.b, &rej.calls, 1, GMT_WAIT_US);
    GMT_TRUE("send of an unacceptable size completes", done);
    GMT_EQ("send of an unacceptable size: status", rej.status, GM_SEND_REJECTED);
    GMT_EQ("rejected callback ran inside gm_unknown", rej.outside_unknown, 0);
    /* After an error GM disables the target until resume; resume then send. */
    struct gmt_send res = {0};
    gm_resume_sending(pr.a, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb, &res);
    gmt_wait_sent(pr.a, pr.b, &res.calls, 1, GMT_WAIT_US);
    GMT_EQ("gm_resume_sending callback status", res.status, GM_SUCCESS);
    gm_send_with_callback(pr.a, sbuf, 6, 30, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                          &ok);
    struct gmt_msg m;
    int got = gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL);
    GMT_TRUE("acceptable size still delivered", got);
    if (got) GMT_EQ("delivered size", m.size, 6);
    gmt_wait_sent(pr.a, pr.b, &ok.calls, 1, GMT_WAIT_US);
    GMT_EQ("acceptable send status", ok.status, GM_SUCCESS);
    gmt_pair_close(&pr);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"every size class 3..21 at both priorities", test_all_sizes_both_priorities},
        {"lengths around the eager and inject switches", test_protocol_thresholds},
        {"messages that fill an inject, both ways, both priorities", test_fill_inject_both_ways},
        {"exact (size, priority) match; waits for a buffer", test_exact_match_and_wait},
        {"tags come back in the event", test_tags},
        {"acceptable sizes reject other sizes", test_acceptable_sizes},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_sizes", tests);
}
