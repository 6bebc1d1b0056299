/*
 * Reserved tasks (cor_task_reserve): a mailbox without a thread, served by whichever thread
 * calls cor_sendI_as, cor_recvI_as or cor_recvI_into_as on its behalf; and cor_wait_timeout
 * (timeout, stop hook) on such requests. One-domain session: the domain sends to itself.
 * Every wait is bounded (WAIT_US); cor_send is used only for small messages, which a domain
 * buffers for its own tasks (so it never blocks). Threads record what they saw, the main
 * thread asserts.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cor/cor.h"
#include "../ctest.h"
#include "one_domain.h"

#define WAIT_US 5000000L /* what "completes" means here: within 5 s */
#define LARGE 100000     /* ints: 400 kB, beyond the 64 KiB a local send buffers */

static int pre_init_err = 1; /* cor_task_reserve before cor_init */

static cor_idp_t reserve(const char *name)
{
    cor_idp_t t = COR_IDP_NULL;
    EXPECT_ERR(cor_task_reserve(name, &t), COR_OK);
    EXPECT_EQ(cor_idp_kind(t), COR_KIND_TASK);
    return t;
}

/* Waits at most WAIT_US for a request that must complete, from any thread. */
static int wait_bounded(cor_req_t *r, cor_status_t *st, int *done)
{
    *done = -1;
    return cor_wait_timeout(r, -1, WAIT_US, NULL, NULL, done, st);
}

/* The same in the main thread: one still pending is a failure, and a receive is then
 * canceled so that later tests start clean. Returns the request's result. */
static int wait_done(cor_req_t *r, cor_status_t *st)
{
    int done;
    int err = wait_bounded(r, st, &done);
    EXPECT_EQ(done, 1);
    if (done == 0 && cor_cancel(r) == COR_OK) {
        err = wait_bounded(r, st, &done); /* a canceled receive completes at once */
        EXPECT_EQ(done, 1);
    }
    return err;
}

/* A receive that must stay pending: cor_test says so, the handle is left as it is. */
static void expect_pending(cor_req_t *r)
{
    cor_req_t before = *r;
    int done = -1;
    EXPECT_ERR(cor_test(r, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_EQ(*r, before);
}

static void cancel_pending(cor_req_t *r)
{
    EXPECT_ERR(cor_cancel(r), COR_OK);
    EXPECT_ERR(wait_done(r, NULL), COR_ECANCELED);
    EXPECT_EQ(*r, COR_REQ_NULL);
}

static int recv_int_as(cor_idp_t as, cor_idp_t src, int tag, int *v, cor_status_t *st)
{
    cor_req_t r = COR_REQ_NULL;
    int err = cor_recvI_into_as(as, src, COR_CTX_WORLD, tag, COR_INT, v, 1, &r);
    return err ? err : wait_done(&r, st);
}

/* cor_recv, bounded: a normal task's receive (the calling thread's). */
static int recv_bounded(cor_idp_t src, int tag, cor_type_t type, void *buf, size_t count,
                        cor_status_t *st)
{
    cor_req_t r = COR_REQ_NULL;
    int err = cor_recvI_into(src, COR_CTX_WORLD, tag, type, buf, count, &r);
    return err ? err : wait_done(&r, st);
}

static int send_int_as(cor_idp_t as, cor_idp_t to, int tag, int v)
{
    cor_req_t r = COR_REQ_NULL;
    int err = cor_sendI_as(as, to, COR_CTX_WORLD, tag, COR_INT, &v, 1, &r);
    return err ? err : wait_done(&r, NULL); /* small: buffered, so done at once */
}

static void check_status(const cor_status_t *st, cor_idp_t src, int tag, cor_type_t type,
                         size_t count, int err)
{
    EXPECT_EQ(st->source, src);
    EXPECT_EQ(st->context, COR_CTX_WORLD);
    EXPECT_EQ(st->tag, tag);
    EXPECT_EQ(st->type, type);
    EXPECT_EQ(st->count, count);
    EXPECT_ERR(st->error, err);
}

/* ---- reserving ---- */

static void test_reserve(void)
{
    EXPECT_ERR(pre_init_err, COR_ESTATE);
    cor_idp_t a = reserve("rsv-box"), b = reserve("rsv-box"), c = reserve(NULL);
    EXPECT_EQ(cor_idp_domain(a), 0);
    EXPECT_EQ(cor_idp_macro(a), cor_session());
    EXPECT_NE(a, me);
    EXPECT_NE(a, b);
    EXPECT_NE(b, c);
    cor_name_t nm;
    EXPECT_ERR(cor_task_name(a, &nm), COR_OK);
    EXPECT_EQ(strcmp(nm.name, "rsv-box"), 0);
    EXPECT_EQ(nm.index, 0);
    EXPECT_EQ(nm.ascendant, cor_domain_self());
    EXPECT_ERR(cor_task_name(b, &nm), COR_OK);
    EXPECT_EQ(nm.index, 1);
    EXPECT_ERR(cor_task_name(c, &nm), COR_OK);
    EXPECT_EQ(strcmp(nm.name, "mailbox"), 0);
    cor_idp_t found = COR_IDP_NULL;
    EXPECT_ERR(cor_task_lookup(0, "rsv-box", 1, &found), COR_OK);
    EXPECT_EQ(found, b);
    /* no thread to join */
    EXPECT_ERR(cor_task_join(a, NULL), COR_ENOTFOUND);

    /* a message sent to a slot before it is reserved waits in its mailbox */
    cor_idp_t next = cor_task_idp(0, cor_idp_index(c) + 1);
    REQUIRE(next != COR_IDP_NULL);
    int v = 31;
    EXPECT_ERR(cor_send(next, COR_CTX_WORLD, 1, COR_INT, &v, 1), COR_OK);
    cor_idp_t d = reserve("rsv-late");
    EXPECT_EQ(d, next);
    v = -1;
    cor_status_t st;
    EXPECT_ERR(recv_int_as(next, me, 1, &v, &st), COR_OK);
    EXPECT_EQ(v, 31);

    /* bad arguments */
    cor_idp_t out = 77;
    char longname[COR_NAME_MAX + 1];
    memset(longname, 'x', COR_NAME_MAX);
    longname[COR_NAME_MAX] = '\0';
    EXPECT_ERR(cor_task_reserve(longname, &out), COR_EINVAL);
    EXPECT_EQ(out, 77);
    EXPECT_ERR(cor_task_reserve("rsv-null", NULL), COR_EINVAL);
    longname[COR_NAME_MAX - 1] = '\0'; /* 63 characters fit */
    EXPECT_ERR(cor_task_reserve(longname, &out), COR_OK);
    EXPECT_ERR(cor_task_name(out, &nm), COR_OK);
    EXPECT_EQ(strcmp(nm.name, longname), 0);
    expect_no_unexpected();
}

/* ---- round trips ---- */

static int echo_task(void *arg)
{
    cor_idp_t *from = arg;
    int v = -1;
    cor_status_t st;
    cor_req_t r = COR_REQ_NULL;
    int done, err = cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 8, COR_INT, &v, 1, &r);
    if (!err) err = wait_bounded(&r, &st, &done);
    if (!err && !done) {
        cor_cancel(&r);
        wait_bounded(&r, NULL, &done);
        err = COR_ETIMEDOUT;
    }
    if (err) return err;
    *from = st.source;
    v++;
    return cor_send(st.source, COR_CTX_WORLD, 9, COR_INT, &v, 1);
}

static void test_round_trip(void)
{
    cor_idp_t as = reserve("rsv-rt");
    cor_status_t st;

    /* a normal task to the reserved one, unexpected first; received into a core buffer */
    int out[3] = {10, -20, 30};
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 5, COR_INT, out, 3), COR_OK);
    void *p = (void *)1;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_as(as, me, COR_CTX_WORLD, 5, &p, &r), COR_OK);
    EXPECT_NE(r, COR_REQ_NULL);
    memset(&st, 0xff, sizeof st);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    EXPECT_EQ(r, COR_REQ_NULL);
    check_status(&st, me, 5, COR_INT, 3, COR_OK);
    REQUIRE(p != NULL && p != (void *)1);
    cor_type_t type = COR_TYPE_COUNT;
    size_t n = 0;
    EXPECT_ERR(cor_buffer_info(p, &type, &n), COR_OK);
    EXPECT_EQ(type, COR_INT);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(memcmp(p, out, sizeof out), 0);
    EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    EXPECT_ERR(cor_releaseBuffer(p), COR_EINVAL);

    /* the reply: the message's source is the reserved task, not the calling thread's */
    double d[2] = {1.25, -2.5}, din[2] = {0, 0};
    cor_req_t s = COR_REQ_NULL;
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 6, COR_DOUBLE, d, 2, &s), COR_OK);
    EXPECT_ERR(wait_done(&s, &st), COR_OK);
    EXPECT_EQ(s, COR_REQ_NULL);
    EXPECT_ERR(recv_bounded(COR_ANY_SOURCE, 6, COR_DOUBLE, din, 2, &st), COR_OK);
    check_status(&st, as, 6, COR_DOUBLE, 2, COR_OK);
    EXPECT_EQ(memcmp(din, d, sizeof d), 0);

    /* receive posted first, into user memory */
    int v = -1;
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 7, COR_INT, &v, 1, &r), COR_OK);
    expect_pending(&r);
    EXPECT_EQ(v, -1);
    int seven = 77;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 7, COR_INT, &seven, 1), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    check_status(&st, me, 7, COR_INT, 1, COR_OK);
    EXPECT_EQ(v, 77);

    /* with a spawned task: reserved -> task -> reserved */
    cor_idp_t from = COR_IDP_NULL, echo;
    REQUIRE(cor_task_spawn("rsv-echo", echo_task, &from, &echo) == COR_OK);
    cor_req_t back = COR_REQ_NULL;
    v = -1;
    EXPECT_ERR(cor_recvI_into_as(as, echo, COR_CTX_WORLD, 9, COR_INT, &v, 1, &back), COR_OK);
    EXPECT_ERR(send_int_as(as, echo, 8, 41), COR_OK);
    EXPECT_ERR(wait_done(&back, &st), COR_OK);
    check_status(&st, echo, 9, COR_INT, 1, COR_OK);
    EXPECT_EQ(v, 42);
    int est = -1;
    EXPECT_ERR(cor_task_join(echo, &est), COR_OK);
    EXPECT_ERR(est, COR_OK);
    EXPECT_EQ(from, as);

    /* a reserved task to itself, an empty message */
    EXPECT_ERR(cor_sendI_as(as, as, COR_CTX_WORLD, 10, COR_DOUBLE, NULL, 0, &s), COR_OK);
    EXPECT_ERR(wait_done(&s, NULL), COR_OK);
    p = NULL;
    EXPECT_ERR(cor_recvI_as(as, as, COR_CTX_WORLD, 10, &p, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    check_status(&st, as, 10, COR_DOUBLE, 0, COR_OK);
    EXPECT_TRUE(p != NULL);
    if (p) {
        EXPECT_ERR(cor_buffer_info(p, &type, &n), COR_OK);
        EXPECT_EQ(type, COR_DOUBLE);
        EXPECT_EQ(n, 0);
        EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    }
    expect_no_unexpected();
}

/* ---- order ---- */

struct sender_thread {
    cor_idp_t as, to;
    int first, n, err;
};

/* Sends first..first+n-1 on behalf of the reserved task, tags cycling 0..2. */
static void *as_sender(void *p)
{
    struct sender_thread *a = p;
    for (int i = a->first; i < a->first + a->n && !a->err; i++) {
        cor_req_t r = COR_REQ_NULL;
        int done = 0;
        a->err = cor_sendI_as(a->as, a->to, COR_CTX_WORLD, i % 3, COR_INT, &i, 1, &r);
        if (!a->err) a->err = wait_bounded(&r, NULL, &done);
        if (!a->err && !done) a->err = COR_ETIMEDOUT;
    }
    return NULL;
}

static int task_sender(void *p)
{
    cor_idp_t as = *(cor_idp_t *)p;
    for (int i = 0; i < 10; i++) {
        int v = 100 + i;
        int err = cor_send(as, COR_CTX_WORLD, 1, COR_INT, &v, 1);
        if (err) return err;
    }
    return 0;
}

static void test_order(void)
{
    cor_idp_t as = reserve("rsv-order");
    cor_status_t st;

    /* from the reserved task, through two threads in turn: one order, the task's */
    struct sender_thread a1 = {as, me, 0, 6, 0}, a2 = {as, me, 6, 6, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, as_sender, &a1) == 0);
    pthread_join(th, NULL);
    REQUIRE(pthread_create(&th, NULL, as_sender, &a2) == 0);
    pthread_join(th, NULL);
    EXPECT_ERR(a1.err, COR_OK);
    EXPECT_ERR(a2.err, COR_OK);
    for (int i = 0; i < 12; i++) {
        int v = -1, err = recv_bounded(as, COR_ANY_TAG, COR_INT, &v, 1, &st);
        EXPECT_ERR(err, COR_OK);
        EXPECT_EQ(v, i);
        EXPECT_EQ(st.tag, i % 3);
        EXPECT_EQ(st.source, as);
        if (err) break; /* the rest would time out one by one */
    }

    /* into it, from two sources at once: each source's messages in its order */
    cor_idp_t t;
    REQUIRE(cor_task_spawn("rsv-sender", task_sender, &as, &t) == COR_OK);
    for (int i = 0; i < 10; i++)
        EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &i, 1), COR_OK);
    int tst = -1;
    EXPECT_ERR(cor_task_join(t, &tst), COR_OK);
    EXPECT_ERR(tst, COR_OK);
    for (int i = 0; i < 10; i++) {
        int v = -1, err = recv_int_as(as, t, 1, &v, &st);
        EXPECT_ERR(err, COR_OK);
        EXPECT_EQ(v, 100 + i);
        EXPECT_EQ(st.source, t);
        if (err) break;
    }
    for (int i = 0; i < 10; i++) {
        int v = -1, err = recv_int_as(as, me, 1, &v, &st);
        EXPECT_ERR(err, COR_OK);
        EXPECT_EQ(v, i);
        if (err) break;
    }

    /* receives posted first complete in the order posted */
    enum { P = 5 };
    cor_req_t r[P];
    int got[P];
    for (int i = 0; i < P; i++) {
        got[i] = -1;
        EXPECT_ERR(
            cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 3, COR_INT, &got[i], 1, &r[i]),
            COR_OK);
    }
    for (int i = 0; i < P; i++)
        EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 3, COR_INT, &i, 1), COR_OK);
    for (int i = 0; i < P; i++) {
        EXPECT_ERR(wait_done(&r[i], NULL), COR_OK);
        EXPECT_EQ(got[i], i);
    }

    /* a large message (sent from the sender's memory, not buffered) keeps its place */
    int *big = malloc(LARGE * sizeof(int));
    REQUIRE(big != NULL);
    for (int i = 0; i < LARGE; i++)
        big[i] = i ^ 0x5a5a;
    int one = 1, three = 3;
    cor_req_t s = COR_REQ_NULL;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &one, 1), COR_OK);
    EXPECT_ERR(cor_sendI_typed(as, COR_CTX_WORLD, 2, COR_INT, big, LARGE, &s), COR_OK);
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 3, COR_INT, &three, 1), COR_OK);
    const int want_tag[3] = {1, 2, 3};
    const size_t want_n[3] = {1, LARGE, 1};
    for (int k = 0; k < 3; k++) {
        void *p = NULL;
        cor_req_t q = COR_REQ_NULL;
        EXPECT_ERR(cor_recvI_as(as, me, COR_CTX_WORLD, COR_ANY_TAG, &p, &q), COR_OK);
        EXPECT_ERR(wait_done(&q, &st), COR_OK);
        EXPECT_EQ(st.tag, want_tag[k]);
        EXPECT_EQ(st.count, want_n[k]);
        if (!p) continue;
        if (k == 1)
            EXPECT_EQ(memcmp(p, big, LARGE * sizeof(int)), 0);
        else
            EXPECT_EQ(*(int *)p, want_tag[k]);
        EXPECT_ERR(cor_releaseBuffer(p), COR_OK);
    }
    EXPECT_ERR(wait_done(&s, NULL), COR_OK);
    free(big);
    expect_no_unexpected();
}

/* ---- wildcard source ---- */

static int send_once(void *p)
{
    int v = 3;
    return cor_send(*(cor_idp_t *)p, COR_CTX_WORLD, 3, COR_INT, &v, 1);
}

static void test_wildcard(void)
{
    cor_idp_t as = reserve("rsv-wild"), other = reserve("rsv-wild-other");
    cor_status_t st;
    /* three sources, oldest first: main, another reserved task, a spawned task */
    int v = 1;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &v, 1), COR_OK);
    EXPECT_ERR(send_int_as(other, as, 2, 2), COR_OK);
    cor_idp_t t;
    REQUIRE(cor_task_spawn("rsv-once", send_once, &as, &t) == COR_OK);
    int tst = -1;
    EXPECT_ERR(cor_task_join(t, &tst), COR_OK);
    EXPECT_ERR(tst, COR_OK);

    /* a source filter skips older messages of other sources */
    EXPECT_ERR(recv_int_as(as, other, COR_ANY_TAG, &v, &st), COR_OK);
    EXPECT_EQ(v, 2);
    check_status(&st, other, 2, COR_INT, 1, COR_OK);
    /* the wildcard takes the oldest left */
    EXPECT_ERR(recv_int_as(as, COR_ANY_SOURCE, COR_ANY_TAG, &v, &st), COR_OK);
    EXPECT_EQ(v, 1);
    EXPECT_EQ(st.source, me);
    void *p = NULL;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, &p, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    check_status(&st, t, 3, COR_INT, 1, COR_OK);
    if (p) EXPECT_EQ(*(int *)p, 3);
    EXPECT_ERR(cor_releaseBuffer(p), COR_OK);

    /* posted: a receive filtered on another source does not take it, the wildcard does */
    int a = -1, b = -1;
    cor_req_t filtered = COR_REQ_NULL, any = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into_as(as, t, COR_CTX_WORLD, 4, COR_INT, &a, 1, &filtered), COR_OK);
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 4, COR_INT, &b, 1, &any),
               COR_OK);
    EXPECT_ERR(send_int_as(other, as, 4, 44), COR_OK);
    EXPECT_ERR(wait_done(&any, &st), COR_OK);
    EXPECT_EQ(b, 44);
    EXPECT_EQ(st.source, other);
    expect_pending(&filtered);
    EXPECT_EQ(a, -1);

    /* mailboxes are apart: a message to `other` is not one for `as`, nor another context's */
    EXPECT_ERR(
        cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &b, 1, &any),
        COR_OK);
    v = 5;
    EXPECT_ERR(cor_send(other, COR_CTX_WORLD, 5, COR_INT, &v, 1), COR_OK);
    cor_req_t s = COR_REQ_NULL;
    EXPECT_ERR(cor_sendI_as(other, as, cor_domain_self(), 6, COR_INT, &v, 1, &s), COR_OK);
    EXPECT_ERR(wait_done(&s, NULL), COR_OK);
    expect_pending(&any);
    expect_pending(&filtered);
    cancel_pending(&any);
    cancel_pending(&filtered);
    EXPECT_ERR(recv_int_as(other, COR_ANY_SOURCE, COR_ANY_TAG, &v, &st), COR_OK);
    EXPECT_EQ(st.tag, 5);
    EXPECT_ERR(cor_recvI_into_as(as, other, cor_domain_self(), 6, COR_INT, &v, 1, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    EXPECT_EQ(st.context, cor_domain_self());
    expect_no_unexpected();
}

/* ---- truncation and types ---- */

static void test_truncation(void)
{
    cor_idp_t as = reserve("rsv-trunc");
    cor_status_t st;
    int out[8], in[5];
    for (int i = 0; i < 8; i++)
        out[i] = 1000 + i;

    /* unexpected first: 8 ints into 4 */
    for (int i = 0; i < 5; i++)
        in[i] = -7;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, out, 8), COR_OK);
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 1, COR_INT, in, 4, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_ETRUNC);
    check_status(&st, me, 1, COR_INT, 8, COR_ETRUNC);
    EXPECT_EQ(memcmp(in, out, 4 * sizeof(int)), 0);
    EXPECT_EQ(in[4], -7);

    /* posted first: 8 ints into 2, and the sender on behalf of another reserved task */
    cor_idp_t other = reserve("rsv-trunc-src");
    for (int i = 0; i < 5; i++)
        in[i] = -7;
    EXPECT_ERR(cor_recvI_into_as(as, other, COR_CTX_WORLD, 2, COR_INT, in, 2, &r), COR_OK);
    cor_req_t s = COR_REQ_NULL;
    EXPECT_ERR(cor_sendI_as(other, as, COR_CTX_WORLD, 2, COR_INT, out, 8, &s), COR_OK);
    EXPECT_ERR(wait_done(&s, NULL), COR_OK); /* the sender is not told */
    EXPECT_ERR(wait_done(&r, &st), COR_ETRUNC);
    EXPECT_EQ(st.count, 8);
    EXPECT_EQ(memcmp(in, out, 2 * sizeof(int)), 0);
    EXPECT_EQ(in[2], -7);

    /* COR_BYTE takes any type, here 6 bytes of 32 */
    unsigned char raw[8];
    memset(raw, 0xee, sizeof raw);
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 3, COR_INT, out, 8), COR_OK);
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 3, COR_BYTE, raw, 6, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_ETRUNC);
    check_status(&st, me, 3, COR_INT, 8, COR_ETRUNC);
    EXPECT_EQ(memcmp(raw, out, 6), 0);
    EXPECT_EQ(raw[6], 0xee);
    /* ... and exactly enough bytes is no truncation */
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 3, COR_INT, out, 2), COR_OK);
    memset(raw, 0, sizeof raw);
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 3, COR_BYTE, raw, 8, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    EXPECT_EQ(memcmp(raw, out, 8), 0);

    /* another type than the message's */
    double d[2] = {1, 2};
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 4, COR_DOUBLE, d, 2), COR_OK);
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 4, COR_INT, in, 5, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_ETYPE);
    EXPECT_EQ(st.type, COR_DOUBLE);

    /* a large message into a small buffer: truncated, and its sender completes */
    int *big = malloc(LARGE * sizeof(int));
    REQUIRE(big != NULL);
    for (int i = 0; i < LARGE; i++)
        big[i] = 3 * i + 1;
    EXPECT_ERR(cor_sendI_as(other, as, COR_CTX_WORLD, 5, COR_INT, big, LARGE, &s), COR_OK);
    for (int i = 0; i < 5; i++)
        in[i] = -7;
    EXPECT_ERR(cor_recvI_into_as(as, other, COR_CTX_WORLD, 5, COR_INT, in, 4, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_ETRUNC);
    EXPECT_EQ(st.count, LARGE);
    EXPECT_EQ(memcmp(in, big, 4 * sizeof(int)), 0);
    EXPECT_EQ(in[4], -7);
    EXPECT_ERR(wait_done(&s, NULL), COR_OK);
    free(big);
    expect_no_unexpected();
}

/* ---- cor_wait_timeout ---- */

static void test_timeout(void)
{
    cor_idp_t as = reserve("rsv-timeout");
    cor_status_t st;
    int v = -1, done = -1;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_OK);
    cor_req_t keep = r;

    /* nothing comes: done = 0 after the timeout, the request still pending */
    const struct {
        long spin_us, timeout_us;
    } cases[] = {{0, 50000}, {-1, 50000}, {10000000, 30000}, {0, 0}, {-1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        done = -1;
        double t0 = ct_now();
        EXPECT_ERR(
            cor_wait_timeout(&r, cases[i].spin_us, cases[i].timeout_us, NULL, NULL, &done, &st),
            COR_OK);
        double dt = ct_now() - t0;
        EXPECT_EQ(done, 0);
        EXPECT_EQ(r, keep);
        EXPECT_GE(dt * 1e6, cases[i].timeout_us);
        /* a spin budget longer than the timeout does not stretch it */
        EXPECT_LE(dt * 1e6, cases[i].timeout_us + 1000000);
    }
    expect_pending(&r);
    EXPECT_EQ(v, -1);

    /* bad arguments leave it pending */
    EXPECT_ERR(cor_wait_timeout(NULL, 0, 0, NULL, NULL, &done, NULL), COR_EINVAL);
    EXPECT_ERR(cor_wait_timeout(&r, 0, 0, NULL, NULL, NULL, NULL), COR_EINVAL);
    EXPECT_ERR(cor_wait_timeout(&r, 0, -1, NULL, NULL, &done, NULL), COR_EINVAL);
    cor_req_t null = COR_REQ_NULL, forged = keep + ((cor_req_t)1 << 32);
    EXPECT_ERR(cor_wait_timeout(&null, 0, 0, NULL, NULL, &done, NULL), COR_EINVAL);
    EXPECT_ERR(cor_wait_timeout(&forged, 0, 0, NULL, NULL, &done, NULL), COR_EINVAL);
    expect_pending(&r);

    /* the message comes: it completes as cor_wait would */
    int nine = 9;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &nine, 1), COR_OK);
    done = -1;
    EXPECT_ERR(cor_wait_timeout(&r, -1, WAIT_US, NULL, NULL, &done, &st), COR_OK);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(r, COR_REQ_NULL);
    EXPECT_EQ(v, 9);
    check_status(&st, me, 1, COR_INT, 1, COR_OK);
    /* and the handle is dead */
    EXPECT_ERR(cor_wait_timeout(&keep, 0, 0, NULL, NULL, &done, NULL), COR_EINVAL);

    /* already complete: done = 1 even with no time at all; the result is the request's */
    int pair[2] = {1, 2};
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 2, COR_INT, pair, 2), COR_OK);
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 2, COR_INT, &v, 1, &r), COR_OK);
    done = -1;
    EXPECT_ERR(cor_wait_timeout(&r, 0, 0, NULL, NULL, &done, &st), COR_ETRUNC);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(v, 1);
    EXPECT_EQ(st.count, 2);

    /* a send of the reserved task that waits for its receive times out the same way */
    int *big = malloc(LARGE * sizeof(int));
    REQUIRE(big != NULL);
    for (int i = 0; i < LARGE; i++)
        big[i] = -i;
    cor_req_t s = COR_REQ_NULL;
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 3, COR_INT, big, LARGE, &s), COR_OK);
    done = -1;
    EXPECT_ERR(cor_wait_timeout(&s, 0, 20000, NULL, NULL, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_ERR(cor_cancel(&s), COR_EINVAL); /* sends cannot be canceled */
    int *in = malloc(LARGE * sizeof(int));
    REQUIRE(in != NULL);
    EXPECT_ERR(recv_bounded(as, 3, COR_INT, in, LARGE, &st), COR_OK);
    EXPECT_EQ(memcmp(in, big, LARGE * sizeof(int)), 0);
    EXPECT_ERR(wait_done(&s, NULL), COR_OK);
    free(in);
    free(big);
    expect_no_unexpected();
}

/* ---- the stop hook ---- */

struct stop_count {
    const void *tag; /* checks stop_arg arrives as given */
    int calls, stop_at, wrong_arg;
};

static int stop_after(void *arg)
{
    struct stop_count *c = arg;
    if (c->tag != (const void *)stop_after) c->wrong_arg = 1;
    return ++c->calls >= c->stop_at;
}

static int stop_on_flag(void *arg)
{
    return atomic_load((atomic_int *)arg);
}

static void *raise_later(void *arg)
{
    usleep(60000);
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

static int stop_always(void *arg)
{
    (void)arg;
    return 1;
}

static void test_stop_hook(void)
{
    cor_idp_t as = reserve("rsv-stop");
    cor_status_t st;
    int v = -1, done = -1;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_OK);

    /* a hook that says stop on its third call ends the wait long before the timeout */
    struct stop_count c = {(const void *)stop_after, 0, 3, 0};
    double t0 = ct_now();
    EXPECT_ERR(cor_wait_timeout(&r, -1, 2 * WAIT_US, stop_after, &c, &done, &st), COR_OK);
    double dt = ct_now() - t0;
    EXPECT_EQ(done, 0);
    EXPECT_GE(c.calls, 3);
    EXPECT_EQ(c.wrong_arg, 0);
    EXPECT_LE(dt * 1000, 2000);
    expect_pending(&r);

    /* raised by another thread while the waiter blocks (no spinning): seen at a wake-up */
    atomic_int flag = 0;
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, raise_later, &flag) == 0);
    done = -1;
    t0 = ct_now();
    EXPECT_ERR(cor_wait_timeout(&r, 0, 2 * WAIT_US, stop_on_flag, &flag, &done, &st), COR_OK);
    dt = ct_now() - t0;
    pthread_join(th, NULL);
    EXPECT_EQ(done, 0);
    EXPECT_GE(dt * 1000, 50);
    EXPECT_LE(dt * 1000, 2000);
    expect_pending(&r);
    EXPECT_EQ(v, -1);

    /* a hook that is always 1 does not hide a completed request */
    int eleven = 11;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &eleven, 1), COR_OK);
    done = -1;
    EXPECT_ERR(cor_wait_timeout(&r, 0, WAIT_US, stop_always, NULL, &done, &st), COR_OK);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(v, 11);
    EXPECT_EQ(r, COR_REQ_NULL);

    /* and stops at once otherwise */
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_OK);
    done = -1;
    t0 = ct_now();
    EXPECT_ERR(cor_wait_timeout(&r, -1, 2 * WAIT_US, stop_always, NULL, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    EXPECT_LE((ct_now() - t0) * 1000, 1000);
    cancel_pending(&r);
    expect_no_unexpected();
}

/* ---- posted by one thread, completed by another ---- */

struct handoff {
    cor_idp_t as;
    cor_req_t req;
    int v, post_err;
    void *ptr;          /* for cor_recvI_as: written when the request completes */
    int wait_err, done; /* the waiter's view */
    cor_status_t st;
    double waited, end;
    atomic_int waiting;
};

static void *post_into(void *p)
{
    struct handoff *h = p;
    h->post_err =
        cor_recvI_into_as(h->as, COR_ANY_SOURCE, COR_CTX_WORLD, 11, COR_INT, &h->v, 1, &h->req);
    return NULL;
}

static void *post_core(void *p)
{
    struct handoff *h = p;
    h->post_err = cor_recvI_as(h->as, COR_ANY_SOURCE, COR_CTX_WORLD, 12, &h->ptr, &h->req);
    return NULL;
}

static void *waiter(void *p)
{
    struct handoff *h = p;
    double t0 = ct_now();
    atomic_store(&h->waiting, 1);
    h->done = -1;
    h->wait_err = cor_wait_timeout(&h->req, 0, WAIT_US, NULL, NULL, &h->done, &h->st);
    h->end = ct_now();
    h->waited = h->end - t0;
    return NULL;
}

static int send_12(void *p)
{
    short s[3] = {1, -2, 3};
    usleep(20000);
    return cor_send(*(cor_idp_t *)p, COR_CTX_WORLD, 12, COR_SHORT, s, 3);
}

/* Starts the waiter and lets it block. */
static pthread_t start_waiter(struct handoff *h)
{
    pthread_t w;
    if (pthread_create(&w, NULL, waiter, h) != 0) return (pthread_t)0;
    while (!atomic_load(&h->waiting))
        usleep(1000);
    usleep(30000);
    return w;
}

static void test_cross_thread(void)
{
    cor_idp_t as = reserve("rsv-cross");
    pthread_t th;

    /* into user memory: posted by one pthread, waited by a second, sent by main. The
     * completion wakes the waiter at once, though it sleeps on the reserved task's condvar
     * (a blocked waiter otherwise looks again only every 100 ms): the best of 3 rounds. */
    double best = 1e9;
    for (int round = 0; round < 3; round++) {
        struct handoff h1 = {.as = as, .v = -1};
        REQUIRE(pthread_create(&th, NULL, post_into, &h1) == 0);
        pthread_join(th, NULL);
        EXPECT_ERR(h1.post_err, COR_OK);
        REQUIRE(h1.req != COR_REQ_NULL);
        pthread_t w = start_waiter(&h1);
        REQUIRE(w != (pthread_t)0);
        int v = 1234 + round;
        double sent = ct_now();
        EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 11, COR_INT, &v, 1), COR_OK);
        pthread_join(w, NULL);
        EXPECT_ERR(h1.wait_err, COR_OK);
        EXPECT_EQ(h1.done, 1);
        EXPECT_EQ(h1.req, COR_REQ_NULL);
        EXPECT_EQ(h1.v, 1234 + round);
        check_status(&h1.st, me, 11, COR_INT, 1, COR_OK);
        EXPECT_LE(h1.waited * 1000, 2000);
        if (h1.end - sent < best) best = h1.end - sent;
    }
    EXPECT_LE(best * 1000, 50);

    /* into a core buffer: posted by a pthread, sent by a task, waited by another pthread */
    struct handoff h2 = {.as = as};
    REQUIRE(pthread_create(&th, NULL, post_core, &h2) == 0);
    pthread_join(th, NULL);
    EXPECT_ERR(h2.post_err, COR_OK);
    REQUIRE(h2.req != COR_REQ_NULL);
    cor_idp_t t;
    REQUIRE(cor_task_spawn("rsv-send12", send_12, &as, &t) == COR_OK);
    pthread_t w = start_waiter(&h2);
    REQUIRE(w != (pthread_t)0);
    pthread_join(w, NULL);
    int tst = -1;
    EXPECT_ERR(cor_task_join(t, &tst), COR_OK);
    EXPECT_ERR(tst, COR_OK);
    EXPECT_ERR(h2.wait_err, COR_OK);
    EXPECT_EQ(h2.done, 1);
    check_status(&h2.st, t, 12, COR_SHORT, 3, COR_OK);
    REQUIRE(h2.ptr != NULL);
    const short want[3] = {1, -2, 3};
    EXPECT_EQ(memcmp(h2.ptr, want, sizeof want), 0);
    EXPECT_ERR(cor_releaseBuffer(h2.ptr), COR_OK);

    /* canceled by main while another pthread waits for it */
    struct handoff h3 = {.as = as};
    REQUIRE(pthread_create(&th, NULL, post_core, &h3) == 0);
    pthread_join(th, NULL);
    EXPECT_ERR(h3.post_err, COR_OK);
    w = start_waiter(&h3);
    REQUIRE(w != (pthread_t)0);
    cor_req_t copy = h3.req;
    EXPECT_ERR(cor_cancel(&copy), COR_OK);
    pthread_join(w, NULL);
    EXPECT_EQ(h3.done, 1);
    EXPECT_ERR(h3.wait_err, COR_ECANCELED);
    EXPECT_ERR(h3.st.error, COR_ECANCELED);
    EXPECT_TRUE(h3.ptr == NULL);
    EXPECT_LE(h3.waited * 1000, 2000);
    expect_no_unexpected();
}

/* ---- cancel ---- */

static void test_cancel(void)
{
    cor_idp_t as = reserve("rsv-cancel");
    cor_status_t st;

    /* a pending core-buffer receive */
    void *p = (void *)1;
    cor_req_t r = COR_REQ_NULL;
    EXPECT_ERR(cor_recvI_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, &p, &r), COR_OK);
    cor_req_t keep = r;
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_EQ(r, keep); /* cancel does not complete the handle: wait does */
    memset(&st, 0, sizeof st);
    EXPECT_ERR(wait_done(&r, &st), COR_ECANCELED);
    EXPECT_ERR(st.error, COR_ECANCELED);
    EXPECT_TRUE(p == NULL);
    EXPECT_ERR(cor_cancel(&keep), COR_EINVAL);
    /* it no longer takes messages: the next one waits for a new receive */
    int v = 5;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &v, 1), COR_OK);
    cor_stats_t stats;
    EXPECT_ERR(cor_stats_get(&stats), COR_OK);
    EXPECT_EQ(stats.unexpected_now, 1);
    v = -1;
    EXPECT_ERR(recv_int_as(as, me, 1, &v, &st), COR_OK);
    EXPECT_EQ(v, 5);

    /* a pending receive into user memory: left untouched */
    int buf[2] = {-3, -3};
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 2, COR_INT, buf, 2, &r), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK); /* twice is harmless until it is waited for */
    EXPECT_ERR(wait_done(&r, NULL), COR_ECANCELED);
    EXPECT_EQ(buf[0], -3);
    EXPECT_EQ(buf[1], -3);

    /* one of two: the other still receives */
    int a = -1, b = -1;
    cor_req_t ra, rb;
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 3, COR_INT, &a, 1, &ra), COR_OK);
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 3, COR_INT, &b, 1, &rb), COR_OK);
    EXPECT_ERR(cor_cancel(&ra), COR_OK);
    v = 33;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 3, COR_INT, &v, 1), COR_OK);
    EXPECT_ERR(wait_done(&rb, NULL), COR_OK);
    EXPECT_EQ(b, 33);
    EXPECT_ERR(wait_done(&ra, NULL), COR_ECANCELED);
    EXPECT_EQ(a, -1);

    /* already matched: the cancel is too late and it completes normally */
    EXPECT_ERR(cor_recvI_into_as(as, me, COR_CTX_WORLD, 4, COR_INT, &a, 1, &r), COR_OK);
    v = 44;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 4, COR_INT, &v, 1), COR_OK);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    EXPECT_EQ(a, 44);

    /* sends cannot be canceled, nor can a completed-but-not-waited send */
    cor_req_t s = COR_REQ_NULL;
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 5, COR_INT, &v, 1, &s), COR_OK);
    EXPECT_ERR(cor_cancel(&s), COR_EINVAL);
    EXPECT_ERR(wait_done(&s, NULL), COR_OK);
    EXPECT_ERR(recv_bounded(as, 5, COR_INT, &a, 1, NULL), COR_OK);
    expect_no_unexpected();
}

/* ---- bad arguments ---- */

static int nothing(void *arg)
{
    (void)arg;
    return 0;
}

static void test_bad_args(void)
{
    cor_idp_t as = reserve("rsv-bad");
    cor_stats_t s0, s1;
    EXPECT_ERR(cor_stats_get(&s0), COR_OK);
    cor_idp_t spawned;
    REQUIRE(cor_task_spawn("rsv-nothing", nothing, NULL, &spawned) == COR_OK);
    EXPECT_ERR(cor_task_join(spawned, NULL), COR_OK);
    const uint32_t ses = cor_session();
    const unsigned idx = cor_idp_index(as);
    /* not a reserved task of this domain */
    const cor_idp_t not_as[] = {
        me,                                                 /* a task with a thread */
        spawned,                                            /* a finished one */
        COR_IDP_NULL,                                       /* nothing (a failed lookup) */
        COR_ANY_SOURCE,                                     /* the wildcard */
        cor_idp_make(ses, COR_KIND_TASK, 1, idx),           /* another domain */
        cor_idp_make(ses + 1, COR_KIND_TASK, 0, idx),       /* another session */
        cor_idp_make(ses, COR_KIND_PORT, 0, idx),           /* not a task */
        cor_idp_make(ses, COR_KIND_TASK, 0, 1000),          /* a slot nobody took */
        cor_idp_make(ses, COR_KIND_TASK, 0, COR_MAX_INDEX), /* beyond the slots */
        cor_domain_self(),
    };
    for (size_t i = 0; i < sizeof not_as / sizeof *not_as; i++) {
        int v = 1;
        void *p = NULL;
        cor_req_t r = 99;
        EXPECT_ERR(cor_sendI_as(not_as[i], me, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_EINVAL);
        EXPECT_ERR(cor_recvI_as(not_as[i], COR_ANY_SOURCE, COR_CTX_WORLD, 1, &p, &r), COR_EINVAL);
        EXPECT_ERR(
            cor_recvI_into_as(not_as[i], COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r),
            COR_EINVAL);
        EXPECT_EQ(r, 99);
    }

    /* sendI_as with a good `as` */
    int v = 1;
    cor_req_t r = 99;
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, -1, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 1, COR_INT, &v, 1, NULL), COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 1, COR_INT, NULL, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 1, COR_TYPE_COUNT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 1, (cor_type_t)-1, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, me, COR_CTX_WORLD, 1, COR_DOUBLE, &v, SIZE_MAX / 4, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, cor_domain_self(), COR_CTX_WORLD, 1, COR_INT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, cor_idp_make(ses, COR_KIND_TASK, 1, 0), COR_CTX_WORLD, 1, COR_INT,
                            &v, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, cor_idp_make(ses + 1, COR_KIND_TASK, 0, 0), COR_CTX_WORLD, 1,
                            COR_INT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_sendI_as(as, cor_idp_make(ses, COR_KIND_TASK, 0, COR_MAX_INDEX), COR_CTX_WORLD,
                            1, COR_INT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_EQ(r, 99);

    /* recvI_as */
    void *p = (void *)1;
    EXPECT_ERR(cor_recvI_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, NULL, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, &p, NULL), COR_EINVAL);
    EXPECT_ERR(cor_recvI_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, -2, &p, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_as(as, cor_domain_self(), COR_CTX_WORLD, 1, &p, &r), COR_EINVAL);
    EXPECT_ERR(cor_recvI_as(as, cor_idp_make(ses, COR_KIND_TASK, 1, 0), COR_CTX_WORLD, 1, &p, &r),
               COR_EINVAL);
    EXPECT_ERR(
        cor_recvI_as(as, cor_idp_make(ses + 1, COR_KIND_TASK, 0, 0), COR_CTX_WORLD, 1, &p, &r),
        COR_EINVAL);
    EXPECT_EQ(r, 99);

    /* recvI_into_as */
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, NULL, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, &v, 1, NULL),
               COR_EINVAL);
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_TYPE_COUNT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, -2, COR_INT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(
        cor_recvI_into_as(as, COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_DOUBLE, &v, SIZE_MAX / 4, &r),
        COR_EINVAL);
    EXPECT_ERR(cor_recvI_into_as(as, cor_domain_self(), COR_CTX_WORLD, 1, COR_INT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_ERR(cor_recvI_into_as(as, cor_idp_make(ses, COR_KIND_TASK, 1, 0), COR_CTX_WORLD, 1,
                                 COR_INT, &v, 1, &r),
               COR_EINVAL);
    EXPECT_EQ(r, 99);

    /* nothing was sent or left posted by any of them */
    EXPECT_ERR(cor_stats_get(&s1), COR_OK);
    EXPECT_EQ(s1.msgs_sent, s0.msgs_sent);
    v = 8;
    EXPECT_ERR(cor_send(as, COR_CTX_WORLD, 1, COR_INT, &v, 1), COR_OK);
    EXPECT_ERR(cor_stats_get(&s1), COR_OK);
    EXPECT_EQ(s1.unexpected_now, 1);
    v = -1;
    EXPECT_ERR(recv_int_as(as, me, 1, &v, NULL), COR_OK);
    EXPECT_EQ(v, 8);
    /* a zero-element receive and an empty send with NULL data are fine */
    EXPECT_ERR(cor_sendI_as(as, as, COR_CTX_WORLD, 2, COR_INT, NULL, 0, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, NULL), COR_OK);
    cor_status_t st;
    EXPECT_ERR(cor_recvI_into_as(as, as, COR_CTX_WORLD, 2, COR_INT, NULL, 0, &r), COR_OK);
    EXPECT_ERR(wait_done(&r, &st), COR_OK);
    EXPECT_EQ(st.count, 0);
    expect_no_unexpected();
}

/* A thread that only works on behalf of a reserved task takes no task slot of its own:
 * threads that come and go (libcorpvm's callers) must not use up COR_MAX_TASKS (1024). */
struct churn {
    cor_idp_t as;
    int post_err, wait_err, done;
};

static void *churn_thread(void *p)
{
    struct churn *c = p;
    int v;
    cor_req_t r;
    c->post_err = cor_recvI_into_as(c->as, COR_ANY_SOURCE, COR_CTX_WORLD, 77, COR_INT, &v, 1, &r);
    if (c->post_err == COR_OK) {
        cor_cancel(&r);
        c->wait_err = cor_wait_timeout(&r, 0, WAIT_US, NULL, NULL, &c->done, NULL);
    }
    return NULL;
}

static void test_thread_churn(void)
{
    cor_idp_t as;
    EXPECT_ERR(cor_task_reserve("churn", &as), COR_OK);
    int bad = 0;
    for (int i = 0; i < 1100 && !bad; i++) {
        struct churn c = {as, -1, -1, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, churn_thread, &c) != 0) break;
        pthread_join(t, NULL);
        bad = c.post_err != COR_OK || c.wait_err != COR_ECANCELED || !c.done;
    }
    EXPECT_EQ(bad, 0);
    cor_idp_t more;
    EXPECT_ERR(cor_task_reserve("after-churn", &more), COR_OK); /* slots left */
    expect_no_unexpected();
}

/* ---- arrival hooks ---- */

/* A mailbox served by its hook: each message is received inside the hook, in the thread that
 * sent it (a local send), and answered to its sender from there. */
struct served {
    cor_idp_t as;
    int calls, flags_seen, served;
    long sum;
};

static void serve_hook(void *arg, int flags)
{
    struct served *s = arg;
    s->calls++;
    s->flags_seen |= flags;
    for (;;) {
        int v = 0, done = 0;
        cor_req_t r = COR_REQ_NULL;
        cor_status_t st;
        if (cor_recvI_into_as(s->as, COR_ANY_SOURCE, COR_CTX_WORLD, 5, COR_INT, &v, 1, &r)) return;
        if (cor_test(&r, &done, &st) != COR_OK || !done) {
            cor_cancel(&r);
            cor_wait(&r, NULL);
            return;
        }
        s->served++;
        s->sum += v;
        cor_req_t sr;
        if (cor_sendI_as(s->as, st.source, COR_CTX_WORLD, 6, COR_INT, &v, 1, &sr) == COR_OK)
            cor_wait(&sr, NULL); /* small: buffered, done at once */
    }
}

static int count_hook_calls;
static void count_hook(void *arg, int flags)
{
    (void)arg;
    (void)flags;
    count_hook_calls++;
}

static int countdown(void *arg)
{
    return --*(int *)arg <= 0;
}

static void test_arrival_hook(void)
{
    struct served s = {reserve("hooked"), 0, 0, 0, 0};
    EXPECT_ERR(cor_task_on_arrival(s.as, serve_hook, &s), COR_OK);
    for (int i = 1; i <= 5; i++) {
        EXPECT_ERR(cor_send(s.as, COR_CTX_WORLD, 5, COR_INT, &i, 1), COR_OK);
        EXPECT_EQ(s.served, i); /* served before the send returned */
        int echo = 0;
        EXPECT_ERR(recv_bounded(s.as, 6, COR_INT, &echo, 1, NULL), COR_OK);
        EXPECT_EQ(echo, i);
    }
    EXPECT_EQ(s.sum, 15);
    EXPECT_EQ(s.calls, 5);
    EXPECT_EQ(s.flags_seen, 0); /* the sender's thread, not a listener */
    /* removed: a message waits in the mailbox as before */
    EXPECT_ERR(cor_task_on_arrival(s.as, NULL, NULL), COR_OK);
    int v = 9;
    EXPECT_ERR(cor_send(s.as, COR_CTX_WORLD, 5, COR_INT, &v, 1), COR_OK);
    EXPECT_EQ(s.calls, 5);
    v = 0;
    EXPECT_ERR(recv_int_as(s.as, me, 5, &v, NULL), COR_OK);
    EXPECT_EQ(v, 9);

    /* bad arguments; at most 8 hooked tasks */
    EXPECT_ERR(cor_task_on_arrival(me, count_hook, NULL), COR_EINVAL); /* not reserved */
    EXPECT_ERR(cor_task_on_arrival(COR_IDP_NULL, count_hook, NULL), COR_EINVAL);
    cor_idp_t many[9];
    for (int i = 0; i < 8; i++) {
        many[i] = reserve("hook-many");
        EXPECT_ERR(cor_task_on_arrival(many[i], count_hook, NULL), COR_OK);
    }
    many[8] = reserve("hook-many");
    EXPECT_ERR(cor_task_on_arrival(many[8], count_hook, NULL), COR_ELIMIT);
    EXPECT_ERR(cor_task_on_arrival(many[0], count_hook, &s), COR_OK); /* a replacement */
    EXPECT_ERR(cor_task_on_arrival(many[0], NULL, NULL), COR_OK);
    EXPECT_ERR(cor_task_on_arrival(many[8], count_hook, NULL), COR_OK); /* room again */
    /* a send to each of them runs each hook once */
    count_hook_calls = 0;
    for (int i = 1; i <= 8; i++) {
        EXPECT_ERR(cor_send(many[i], COR_CTX_WORLD, 5, COR_INT, &i, 1), COR_OK);
        EXPECT_EQ(count_hook_calls, i);
    }
    for (int i = 1; i <= 8; i++) {
        EXPECT_ERR(cor_task_on_arrival(many[i], NULL, NULL), COR_OK);
        EXPECT_ERR(recv_int_as(many[i], me, 5, &v, NULL), COR_OK);
        EXPECT_EQ(v, i);
    }

    /* cor_poll_until: true at once; never true: 0 within its time (or at once without a
     * route to poll) */
    int left = 1;
    EXPECT_EQ(cor_poll_until(countdown, &left, 1000000), 1);
    left = 1 << 30;
    EXPECT_EQ(cor_poll_until(countdown, &left, 2000), 0);
    EXPECT_TRUE(left < 1 << 30);
    EXPECT_ERR(cor_poll_until(NULL, NULL, 10), COR_EINVAL);
    expect_no_unexpected();
}

int main(void)
{
    cor_idp_t early = COR_IDP_NULL;
    pre_init_err = cor_task_reserve("early", &early);
    static const struct ct_test tests[] = {
        {"reserve: names, lookup, no thread, bad arguments", test_reserve},
        {"round trips with a normal task", test_round_trip},
        {"order per source", test_order},
        {"wildcard source, separate mailboxes", test_wildcard},
        {"truncation and types", test_truncation},
        {"wait_timeout: timeouts, completion", test_timeout},
        {"wait_timeout: stop hook", test_stop_hook},
        {"posted by one thread, completed by another", test_cross_thread},
        {"cancel", test_cancel},
        {"bad arguments", test_bad_args},
        {"threads acting for a reserved task take no slot", test_thread_churn},
        {"arrival hooks; cor_poll_until", test_arrival_hook},
        {NULL, NULL},
    };
    return ct_main("reserved", init, clean, tests, 90);
}
