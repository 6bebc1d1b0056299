/*
 * Messages between tasks of one domain (the same matching code as remote messages):
 * wildcards, contexts, order, truncation, types, core-allocated receive buffers, large
 * messages, bad arguments and the statistics counters.
 */
#include <sched.h>
#include <stdatomic.h>

#include "cor/cor.h"
#include "../ctest.h"
#include "one_domain.h"

static int send_int(cor_idp_t to, cor_idp_t ctx, int tag, int v)
{
    return cor_send(to, ctx, tag, COR_INT, &v, 1);
}

static void test_self(void)
{
    int out[4] = {1, 2, 3, 4}, in[4] = {0};
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 7, COR_INT, out, 4), COR_OK);
    cor_status_t st;
    memset(&st, 0xff, sizeof st);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 7, COR_INT, in, 4, &st), COR_OK);
    EXPECT_EQ(memcmp(in, out, sizeof in), 0);
    EXPECT_EQ(st.source, me);
    EXPECT_EQ(st.context, COR_CTX_WORLD);
    EXPECT_EQ(st.tag, 7);
    EXPECT_EQ(st.type, COR_INT);
    EXPECT_EQ(st.count, 4);
    EXPECT_ERR(st.error, COR_OK);
    /* empty message */
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 8, COR_DOUBLE, NULL, 0), COR_OK);
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 8, COR_DOUBLE, NULL, 0, &st), COR_OK);
    EXPECT_EQ(st.count, 0);
    expect_no_unexpected();
}

/* ---- wildcards ---- */

struct sender_arg {
    cor_idp_t to, ctx;
    int tag0, n, sleep_us;
    size_t bytes_big; /* every 5th message this big (0: none) */
};

static int int_sender(void *p)
{
    struct sender_arg *a = p;
    for (int i = 0; i < a->n; i++) {
        int err = send_int(a->to, a->ctx, a->tag0 + i % 3, i);
        if (err) return err;
        if (a->sleep_us) usleep((useconds_t)a->sleep_us);
    }
    return 0;
}

static void test_wildcards(void)
{
    struct sender_arg a1 = {me, COR_CTX_WORLD, 100, 1, 0, 0},
                      a2 = {me, COR_CTX_WORLD, 200, 1, 0, 0};
    cor_idp_t t1, t2;
    REQUIRE(cor_task_spawn("s1", int_sender, &a1, &t1) == COR_OK);
    int st1 = -1;
    EXPECT_ERR(cor_task_join(t1, &st1), COR_OK);
    REQUIRE(cor_task_spawn("s2", int_sender, &a2, &t2) == COR_OK);
    int st2 = -1;
    EXPECT_ERR(cor_task_join(t2, &st2), COR_OK);
    EXPECT_EQ(st1 | st2, 0);
    /* both are waiting, t1's first: a source filter skips t1's */
    int v = -1;
    cor_status_t st;
    EXPECT_ERR(cor_recv(t2, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &v, 1, &st), COR_OK);
    EXPECT_EQ(st.source, t2);
    EXPECT_EQ(st.tag, 200);
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &v, 1, &st), COR_OK);
    EXPECT_EQ(st.source, t1);
    EXPECT_EQ(st.tag, 100);

    /* tag filter skips, wildcard takes the oldest */
    for (int tag = 1; tag <= 3; tag++)
        EXPECT_ERR(send_int(me, COR_CTX_WORLD, tag, tag * 10), COR_OK);
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 3, COR_INT, &v, 1, &st), COR_OK);
    EXPECT_EQ(v, 30);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &v, 1, &st), COR_OK);
    EXPECT_EQ(v, 10);
    EXPECT_EQ(st.tag, 1);
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &v, 1, &st), COR_OK);
    EXPECT_EQ(v, 20);

    /* posted first: a posted receive for another source or tag does not take it */
    cor_req_t other_src, other_tag, any;
    int a = -1, b = -1, c = -1;
    EXPECT_ERR(cor_recvI_into(t1, COR_CTX_WORLD, 5, COR_INT, &a, 1, &other_src), COR_OK);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 6, COR_INT, &b, 1, &other_tag), COR_OK);
    EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &c, 1, &any),
               COR_OK);
    EXPECT_ERR(send_int(me, COR_CTX_WORLD, 5, 55), COR_OK);
    EXPECT_ERR(cor_wait(&any, &st), COR_OK);
    EXPECT_EQ(c, 55);
    int done = 1;
    EXPECT_ERR(cor_test(&other_src, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_ERR(cor_test(&other_tag, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_ERR(send_int(me, COR_CTX_WORLD, 6, 66), COR_OK);
    EXPECT_ERR(cor_wait(&other_tag, NULL), COR_OK);
    EXPECT_EQ(b, 66);
    EXPECT_ERR(cor_cancel(&other_src), COR_OK);
    EXPECT_ERR(cor_wait(&other_src, NULL), COR_ECANCELED);
    expect_no_unexpected();
}

/* ---- contexts ---- */

static void test_contexts(void)
{
    cor_idp_t ld;
    REQUIRE(cor_ldomain_create("msg-ctx", &ld) == COR_OK);
    const cor_idp_t ctxs[] = {COR_CTX_WORLD, cor_domain_self(), ld,
                              cor_idp_make(cor_session(), COR_KIND_CONTEXT, 0, 1)};
    const int n = 4;
    /* a receive in each context, any source and tag */
    cor_req_t r[4];
    int got[4];
    for (int i = 0; i < n; i++) {
        got[i] = -1;
        EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, ctxs[i], COR_ANY_TAG, COR_INT, &got[i], 1, &r[i]),
                   COR_OK);
    }
    /* messages in reverse order of contexts: each lands in its own context */
    for (int i = n - 1; i >= 0; i--) {
        EXPECT_ERR(send_int(me, ctxs[i], 9, 1000 + i), COR_OK);
        for (int j = 0; j < n; j++) {
            int done = 0;
            if (r[j] == COR_REQ_NULL) continue;
            cor_status_t st;
            EXPECT_ERR(cor_test(&r[j], &done, &st), COR_OK);
            EXPECT_EQ(done, j == i);
            if (done) {
                EXPECT_EQ(got[j], 1000 + i);
                EXPECT_EQ(st.context, ctxs[i]);
            }
        }
    }
    /* unexpected messages are not taken by a receive of another context either */
    EXPECT_ERR(send_int(me, ctxs[2], 4, 42), COR_OK);
    cor_req_t wrong;
    int w = -1;
    EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, ctxs[0], COR_ANY_TAG, COR_INT, &w, 1, &wrong),
               COR_OK);
    int done = 1;
    EXPECT_ERR(cor_test(&wrong, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, ctxs[2], COR_ANY_TAG, COR_INT, &w, 1, NULL), COR_OK);
    EXPECT_EQ(w, 42);
    EXPECT_ERR(cor_cancel(&wrong), COR_OK);
    EXPECT_ERR(cor_wait(&wrong, NULL), COR_ECANCELED);
    expect_no_unexpected();
}

/* ---- order ---- */

#define ORDER_N 2000
#define ORDER_SENDERS 4
struct order_arg {
    cor_idp_t to;
    int id, n;
    int sleep_every;
};

/* Sends n messages: mostly small, every 7th 96 KiB (buffered vs. waits-for-receive paths). */
static int order_sender(void *p)
{
    struct order_arg *a = p;
    enum { BIG = 96 * 1024 / sizeof(int) };
    int *big = malloc(BIG * sizeof(int));
    cor_req_t pend[64];
    int np = 0, err = 0;
    if (!big) return COR_ENOMEM;
    for (int i = 0; i < a->n && !err; i++) {
        if (i % 7 == 3) {
            big[0] = i;
            big[BIG - 1] = a->id;
            err = cor_sendI_typed(a->to, COR_CTX_WORLD, a->id, COR_INT, big, BIG, &pend[np++]);
            /* a big message holds the buffer until received: one at a time */
            if (!err) err = cor_waitall((size_t)np, pend, NULL);
            np = 0;
        } else {
            int v[2] = {i, a->id};
            err = cor_send(a->to, COR_CTX_WORLD, a->id, COR_INT, v, 2);
        }
        if (a->sleep_every && i % a->sleep_every == 0) sched_yield();
    }
    free(big);
    return err;
}

static void test_order(void)
{
    struct order_arg a[ORDER_SENDERS];
    cor_idp_t t[ORDER_SENDERS];
    for (int k = 0; k < ORDER_SENDERS; k++) {
        a[k] = (struct order_arg){me, k, ORDER_N / ORDER_SENDERS, k + 1};
        REQUIRE(cor_task_spawn("order", order_sender, &a[k], &t[k]) == COR_OK);
    }
    int next[ORDER_SENDERS] = {0};
    int *buf = malloc(96 * 1024);
    REQUIRE(buf != NULL);
    int bad_src = 0, bad_order = 0, bad_size = 0;
    double end = ct_now() + 60;
    for (int m = 0; m < ORDER_N && ct_now() < end; m++) {
        cor_status_t st;
        int err = cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, buf,
                           96 * 1024 / sizeof(int), &st);
        if (err) {
            EXPECT_ERR(err, COR_OK);
            break;
        }
        int k = st.tag;
        if (k < 0 || k >= ORDER_SENDERS || st.source != t[k]) {
            bad_src++;
            continue;
        }
        int i = buf[0], id = st.count == 2 ? buf[1] : buf[st.count - 1];
        if (id != k) bad_src++;
        if (i != next[k]) bad_order++;
        if ((i % 7 == 3) != (st.count > 2)) bad_size++;
        next[k] = i + 1;
    }
    EXPECT_EQ(bad_src, 0);
    EXPECT_EQ(bad_order, 0);
    EXPECT_EQ(bad_size, 0);
    for (int k = 0; k < ORDER_SENDERS; k++) {
        EXPECT_EQ(next[k], ORDER_N / ORDER_SENDERS);
        int st = -1;
        EXPECT_ERR(cor_task_join(t[k], &st), COR_OK);
        EXPECT_ERR(st, COR_OK);
    }
    free(buf);
    expect_no_unexpected();
}

/* Receives posted before the messages complete in posting order. */
static void test_order_posted(void)
{
    enum { N = 64 };
    cor_req_t r[N];
    int v[N];
    for (int i = 0; i < N; i++)
        EXPECT_ERR(
            cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &v[i], 1, &r[i]),
            COR_OK);
    struct sender_arg a = {me, COR_CTX_WORLD, 0, N, 0, 0};
    cor_idp_t t;
    REQUIRE(cor_task_spawn("posted", int_sender, &a, &t) == COR_OK);
    cor_status_t st[N];
    EXPECT_ERR(cor_waitall(N, r, st), COR_OK);
    for (int i = 0; i < N; i++) {
        EXPECT_EQ(v[i], i);
        EXPECT_EQ(st[i].tag, i % 3);
        EXPECT_EQ(st[i].source, t);
        EXPECT_EQ(r[i], COR_REQ_NULL);
    }
    int s = -1;
    EXPECT_ERR(cor_task_join(t, &s), COR_OK);
    EXPECT_EQ(s, 0);
}

/* ---- sizes and types ---- */

static void test_truncation(void)
{
    int out[10], in[6];
    for (int i = 0; i < 10; i++)
        out[i] = i + 1;
    cor_status_t st;
    /* unexpected first */
    for (int i = 0; i < 6; i++)
        in[i] = -7;
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 1, COR_INT, out, 10), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 1, COR_INT, in, 4, &st), COR_ETRUNC);
    EXPECT_ERR(st.error, COR_ETRUNC);
    EXPECT_EQ(st.count, 10);
    EXPECT_EQ(memcmp(in, out, 4 * sizeof(int)), 0);
    EXPECT_EQ(in[4], -7); /* nothing written past the buffer */
    /* posted first */
    for (int i = 0; i < 6; i++)
        in[i] = -7;
    cor_req_t r;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 2, COR_INT, in, 3, &r), COR_OK);
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 2, COR_INT, out, 10), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_ETRUNC);
    EXPECT_EQ(st.count, 10);
    EXPECT_EQ(memcmp(in, out, 3 * sizeof(int)), 0);
    EXPECT_EQ(in[3], -7);
    /* bytes: 5 bytes of a 40-byte int message */
    unsigned char raw[8];
    memset(raw, 0xee, sizeof raw);
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 3, COR_INT, out, 10), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 3, COR_BYTE, raw, 5, &st), COR_ETRUNC);
    EXPECT_EQ(st.count, 10);
    EXPECT_EQ(st.type, COR_INT);
    EXPECT_EQ(memcmp(raw, out, 5), 0);
    EXPECT_EQ(raw[5], 0xee);
    /* a receive of zero elements */
    EXPECT_ERR(send_int(me, COR_CTX_WORLD, 4, 5), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 4, COR_INT, in, 0, &st), COR_ETRUNC);
    EXPECT_EQ(st.count, 1);
    expect_no_unexpected();
}

static void test_types(void)
{
    double d[3] = {1.5, 2.5, 3.5};
    int i3[3];
    cor_status_t st;
    /* type mismatch: a receive of ints does not take doubles */
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 1, COR_DOUBLE, d, 3), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 1, COR_INT, i3, 3, &st), COR_ETYPE);
    EXPECT_EQ(st.type, COR_DOUBLE);
    /* posted first, the same */
    cor_req_t r;
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 2, COR_FLOAT, i3, 3, &r), COR_OK);
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 2, COR_DOUBLE, d, 3), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_ETYPE);
    /* COR_BYTE takes any type; count stays the message's element count */
    double back[3] = {0};
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 3, COR_DOUBLE, d, 3), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 3, COR_BYTE, back, sizeof back, &st), COR_OK);
    EXPECT_EQ(st.type, COR_DOUBLE);
    EXPECT_EQ(st.count, 3);
    EXPECT_EQ(memcmp(back, d, sizeof d), 0);
    /* a larger receive than needed is fine */
    double more[8];
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 4, COR_DOUBLE, d, 3), COR_OK);
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 4, COR_DOUBLE, more, 8, &st), COR_OK);
    EXPECT_EQ(st.count, 3);
    /* a getBuffer buffer carries its type */
    long *lb = cor_getBuffer(COR_LONG, 4);
    REQUIRE(lb != NULL);
    for (int i = 0; i < 4; i++)
        lb[i] = 1L << (20 + i);
    cor_req_t s;
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, 5, lb, 3, &s), COR_OK); /* part of it */
    long lin[4] = {0};
    EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, 5, COR_LONG, lin, 4, &st), COR_OK);
    EXPECT_ERR(cor_wait(&s, NULL), COR_OK);
    EXPECT_EQ(st.type, COR_LONG);
    EXPECT_EQ(st.count, 3);
    EXPECT_EQ(lin[2], 1L << 22);
    EXPECT_EQ(lin[3], 0);
    EXPECT_ERR(cor_releaseBuffer(lb), COR_OK);
    expect_no_unexpected();
}

/* recvI(&ptr): the core allocates a buffer of the message's type and count. */
static void check_core_buffer(void *p, cor_type_t type, size_t n)
{
    REQUIRE(p != NULL);
    cor_type_t t = COR_TYPE_COUNT;
    size_t k = 0;
    EXPECT_ERR(cor_buffer_info(p, &t, &k), COR_OK);
    EXPECT_EQ(t, type);
    EXPECT_EQ(k, n);
}

static void test_core_buffer(void)
{
    double d[5] = {1, 2, 3, 4, 5};
    cor_status_t st;
    /* posted first */
    void *p = (void *)1;
    cor_req_t r;
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, 1, &p, &r), COR_OK);
    EXPECT_EQ(cor_send(me, COR_CTX_WORLD, 1, COR_DOUBLE, d, 5), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    check_core_buffer(p, COR_DOUBLE, 5);
    if (p) EXPECT_EQ(memcmp(p, d, sizeof d), 0);
    EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    /* unexpected first */
    short sh[3] = {-1, 0, 1};
    EXPECT_EQ(cor_send(me, COR_CTX_WORLD, 2, COR_SHORT, sh, 3), COR_OK);
    p = NULL;
    EXPECT_ERR(cor_recvI(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, &p, &r), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    check_core_buffer(p, COR_SHORT, 3);
    if (p) EXPECT_EQ(memcmp(p, sh, sizeof sh), 0);
    EXPECT_EQ(st.count, 3);
    EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    /* empty message */
    EXPECT_EQ(cor_send(me, COR_CTX_WORLD, 3, COR_INT, NULL, 0), COR_OK);
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, 3, &p, &r), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    check_core_buffer(p, COR_INT, 0);
    EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    /* a large one (waits for the receive) */
    size_t n = 200000;
    int *big = malloc(n * sizeof(int));
    REQUIRE(big != NULL);
    for (size_t i = 0; i < n; i++)
        big[i] = (int)(i * 7);
    cor_req_t s;
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, 4, COR_INT, big, n, &s), COR_OK);
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, 4, &p, &r), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    EXPECT_ERR(cor_wait(&s, NULL), COR_OK);
    check_core_buffer(p, COR_INT, n);
    if (p) EXPECT_EQ(memcmp(p, big, n * sizeof(int)), 0);
    EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    free(big);
    /* canceled: no buffer handed back */
    p = (void *)1;
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, 5, &p, &r), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_ERR(cor_wait(&r, NULL), COR_ECANCELED);
    EXPECT_TRUE(p == NULL);
    expect_no_unexpected();
}

/* 4 MiB to itself: the send waits for the receive and the data arrives whole. */
static void test_large(void)
{
    const size_t n = 4u << 20;
    unsigned char *out = cor_getBuffer(COR_BYTE, n), *in = malloc(n);
    REQUIRE(out && in);
    for (size_t i = 0; i < n; i++)
        out[i] = (unsigned char)(i * 31 + (i >> 12));
    memset(in, 0, n);
    cor_stats_t s0, s1;
    EXPECT_ERR(cor_stats_get(&s0), COR_OK);
    cor_req_t s, r;
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, 11, out, n, &s), COR_OK);
    int done = 1;
    EXPECT_ERR(cor_test(&s, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0); /* not buffered: holds on until a receive takes it */
    EXPECT_ERR(cor_stats_get(&s1), COR_OK);
    EXPECT_EQ(s1.unexpected_now, s0.unexpected_now + 1);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 11, COR_BYTE, in, n, &r), COR_OK);
    cor_status_t st;
    EXPECT_ERR(cor_wait(&r, &st), COR_OK);
    EXPECT_ERR(cor_wait(&s, NULL), COR_OK);
    EXPECT_EQ(st.count, n);
    EXPECT_EQ(memcmp(in, out, n), 0);
    /* between two tasks, receiver posted first, truncated */
    memset(in, 0, n);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 12, COR_BYTE, in, n / 2, &r), COR_OK);
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, 12, out, n, &s), COR_OK);
    EXPECT_ERR(cor_wait(&r, &st), COR_ETRUNC);
    EXPECT_ERR(cor_wait(&s, NULL), COR_OK);
    EXPECT_EQ(st.count, n);
    EXPECT_EQ(memcmp(in, out, n / 2), 0);
    EXPECT_EQ(in[n / 2], 0);
    EXPECT_ERR(cor_releaseBuffer(out), COR_OK);
    free(in);
    expect_no_unexpected();
}

static void test_bad_args(void)
{
    int v = 1;
    cor_req_t r = 12345;
    cor_idp_t dom = cor_domain_self();
    cor_idp_t other_session = cor_idp_make(cor_session() + 1, COR_KIND_TASK, 0, 0);
    cor_idp_t other_domain = cor_idp_make(cor_session(), COR_KIND_TASK, 1, 0);
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, -1, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, -5, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, 0, COR_INT, &v, 1, NULL), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(dom, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(COR_ANY_SOURCE, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(other_session, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(other_domain, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, 0, COR_TYPE_COUNT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, 0, COR_INT, NULL, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_typed(me, COR_CTX_WORLD, 0, COR_INT, &v, SIZE_MAX / 2, &r), COR_EINVAL);
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, -1, COR_INT, &v, 1), COR_EINVAL);
    /* sendI needs a getBuffer buffer, and no more than it holds */
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, 0, &v, 1, &r), COR_EINVAL);
    int *b = cor_getBuffer(COR_INT, 2);
    REQUIRE(b != NULL);
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, 0, b, 3, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, -1, b, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI(me, COR_CTX_WORLD, 0, b, 1, NULL), COR_EINVAL);
    EXPECT_ERR(cor_sendI(dom, COR_CTX_WORLD, 0, b, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_releaseBuffer(b), COR_OK);
    /* receives */
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, -2, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 0, COR_INT, &v, 1, NULL), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(dom, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(other_session, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(other_domain, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 0, (cor_type_t)99, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 0, COR_INT, NULL, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(me, COR_CTX_WORLD, 0, COR_DOUBLE, &v, SIZE_MAX / 4, &r), COR_EINVAL);
    void *p;
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, 0, NULL, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, 0, &p, NULL), COR_EINVAL);
    EXPECT_ERR(cor_recvI(me, COR_CTX_WORLD, -3, &p, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI(dom, COR_CTX_WORLD, 0, &p, &r), COR_EINVAL);
    EXPECT_EQ(r, 12345); /* untouched by failed calls */
    expect_no_unexpected();
}

/* A failed lookup is no wildcard: COR_IDP_NULL (what cor_task_idp returns on error) as a
 * source or destination is COR_EINVAL, and a message waiting for anyone stays untaken. */
static void test_null_is_no_wildcard(void)
{
    EXPECT_NE(COR_ANY_SOURCE, COR_IDP_NULL);
    EXPECT_EQ(cor_task_idp(cor_domain_count(), 0), COR_IDP_NULL);
    EXPECT_EQ(cor_task_idp(-1, 0), COR_IDP_NULL);
    EXPECT_TRUE(cor_idp_kind(COR_ANY_SOURCE) > COR_KIND_CONTEXT); /* names no resource */
    int v = 5, w = 0;
    cor_req_t r = 12345;
    void *p = NULL;
    cor_idp_t failed = cor_task_idp(-1, 0);
    EXPECT_ERR(cor_sendI_typed(failed, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_send(COR_IDP_NULL, COR_CTX_WORLD, 0, COR_INT, &v, 1), COR_EINVAL);
    int *b = cor_getBuffer(COR_INT, 1);
    REQUIRE(b != NULL);
    EXPECT_ERR(cor_sendI(COR_IDP_NULL, COR_CTX_WORLD, 0, b, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_releaseBuffer(b), COR_OK);
    /* a message is waiting: a receive from a failed lookup must not take it */
    EXPECT_ERR(cor_send(me, COR_CTX_WORLD, 33, COR_INT, &v, 1), COR_OK);
    EXPECT_ERR(cor_recvI_into(failed, COR_CTX_WORLD, 33, COR_INT, &w, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_into(COR_IDP_NULL, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &w, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_recvI(COR_IDP_NULL, COR_CTX_WORLD, 33, &p, &r), COR_EINVAL);
    EXPECT_ERR(cor_recv(COR_IDP_NULL, COR_CTX_WORLD, 33, COR_INT, &w, 1, NULL), COR_EINVAL);
    EXPECT_EQ(r, 12345);
    EXPECT_EQ(w, 0);
    /* the wildcard still takes it */
    cor_status_t st;
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 33, COR_INT, &w, 1, &st), COR_OK);
    EXPECT_EQ(w, 5);
    EXPECT_EQ(st.source, me);
    expect_no_unexpected();
}

static void test_stats(void)
{
    cor_stats_t a, b, c;
    EXPECT_ERR(cor_stats_get(&a), COR_OK);
    enum { K = 10, N = 25 };
    double d[N] = {0};
    for (int i = 0; i < K; i++)
        EXPECT_ERR(cor_send(me, COR_CTX_WORLD, i, COR_DOUBLE, d, N), COR_OK);
    EXPECT_ERR(cor_stats_get(&b), COR_OK);
    EXPECT_EQ(b.msgs_sent - a.msgs_sent, K);
    EXPECT_EQ(b.bytes_sent - a.bytes_sent, K * N * sizeof(double));
    EXPECT_EQ(b.unexpected_now - a.unexpected_now, K);
    for (int i = 0; i < K; i++)
        EXPECT_ERR(cor_recv(me, COR_CTX_WORLD, i, COR_DOUBLE, d, N, NULL), COR_OK);
    EXPECT_ERR(cor_stats_get(&c), COR_OK);
    EXPECT_EQ(c.msgs_received - a.msgs_received, K);
    EXPECT_EQ(c.bytes_received - a.bytes_received, K * N * sizeof(double));
    EXPECT_EQ(c.unexpected_now, a.unexpected_now);
    EXPECT_EQ(c.frames_dropped, a.frames_dropped);
}

/* Many tasks sending to one another at once (for the thread sanitizer). */
#define PAIRS 4
#define ROUNDS 300
static cor_idp_t ring[2 * PAIRS];

static int pinger(void *p)
{
    int k = (int)(intptr_t)p, peer = k ^ 1, err = 0;
    for (int i = 0; i < ROUNDS && !err; i++) {
        int v = -1;
        cor_req_t r;
        err = cor_recvI_into(ring[peer], COR_CTX_WORLD, 1, COR_INT, &v, 1, &r);
        if (!err) err = send_int(ring[peer], COR_CTX_WORLD, 1, i);
        if (!err) err = cor_wait(&r, NULL);
        if (!err && v != i) err = -100 - i;
    }
    return err;
}

static int start_gate(void *p)
{
    (void)p;
    return 0;
}

static void test_pairs(void)
{
    /* the idps are known before the tasks run: indices come in spawn order */
    cor_idp_t probe;
    REQUIRE(cor_task_spawn("gate", start_gate, NULL, &probe) == COR_OK);
    EXPECT_ERR(cor_task_join(probe, NULL), COR_OK);
    for (int k = 0; k < 2 * PAIRS; k++)
        ring[k] = cor_task_idp(0, cor_idp_index(probe) + 1 + (unsigned)k);
    cor_idp_t t[2 * PAIRS];
    for (int k = 0; k < 2 * PAIRS; k++) {
        REQUIRE(cor_task_spawn("pinger", pinger, (void *)(intptr_t)k, &t[k]) == COR_OK);
        EXPECT_EQ(t[k], ring[k]);
    }
    for (int k = 0; k < 2 * PAIRS; k++) {
        int st = -1;
        EXPECT_ERR(cor_task_join(t[k], &st), COR_OK);
        EXPECT_ERR(st, COR_OK);
    }
    expect_no_unexpected();
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"to itself", test_self},
        {"wildcards on source and tag", test_wildcards},
        {"contexts never cross", test_contexts},
        {"order per sender, mixed sizes, 4 senders", test_order},
        {"posted receives complete in order", test_order_posted},
        {"truncation", test_truncation},
        {"types", test_types},
        {"core-allocated receive buffers", test_core_buffer},
        {"4 MiB message", test_large},
        {"bad arguments", test_bad_args},
        {"a failed lookup is no wildcard", test_null_is_no_wildcard},
        {"stats counters", test_stats},
        {"4 task pairs ping-pong", test_pairs},
        {NULL, NULL},
    };
    return ct_main("msg", init, clean, tests, 120);
}
