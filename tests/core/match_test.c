/*
 * Matching (cor/core/match.c), as pure list operations on a task's posted receives and
 * unexpected messages: the match rule, FIFO order, wildcards, contexts, and list integrity
 * when entries leave from the head, the middle and the tail.
 */
#include "internal.h"
#include "../ctest.h"

#define SRC(i) cor_idp_make(9, COR_KIND_TASK, 0, (i))
#define CTX_A ((cor_idp_t)1)
#define CTX_B cor_idp_make(9, COR_KIND_LDOMAIN, 0, 3)

static struct cor_task task;
static struct cor_req reqs[16];
static struct cor_umsg msgs[16];

static void reset(void)
{
    memset(&task, 0, sizeof task);
    memset(reqs, 0, sizeof reqs);
    memset(msgs, 0, sizeof msgs);
}

static struct cor_req *post(int i, cor_idp_t src, cor_idp_t ctx, int tag)
{
    struct cor_req *r = &reqs[i];
    r->peer = src;
    r->ctx = ctx;
    r->tag = tag;
    atomic_store(&r->state, RS_PENDING);
    cor__posted_append(&task, r);
    return r;
}

static struct cor_umsg *arrive(int i, cor_idp_t src, cor_idp_t ctx, int tag)
{
    struct cor_umsg *m = &msgs[i];
    m->src = src;
    m->ctx = ctx;
    m->tag = tag;
    cor__unexp_append(&task, m);
    return m;
}

/* Walks both lists forwards and backwards; returns the length or -1 if they disagree. */
static int posted_len(void)
{
    int n = 0;
    struct cor_req *last = NULL;
    for (struct cor_req *r = task.posted_head; r; r = r->next, n++) {
        if (r->prev != last || n > 16) return -1;
        last = r;
    }
    if (task.posted_tail != last) return -1;
    return n;
}

static int unexp_len(void)
{
    int n = 0;
    struct cor_umsg *last = NULL;
    for (struct cor_umsg *m = task.unexp_head; m; m = m->next, n++) {
        if (m->prev != last || n > 16) return -1;
        last = m;
    }
    if (task.unexp_tail != last) return -1;
    return n;
}

static void test_rule(void)
{
    EXPECT_TRUE(cor__match(SRC(1), CTX_A, 5, SRC(1), CTX_A, 5));
    EXPECT_TRUE(cor__match(COR_ANY_SOURCE, CTX_A, 5, SRC(1), CTX_A, 5));
    EXPECT_TRUE(cor__match(SRC(1), CTX_A, COR_ANY_TAG, SRC(1), CTX_A, 0));
    EXPECT_TRUE(cor__match(COR_ANY_SOURCE, CTX_A, COR_ANY_TAG, SRC(7), CTX_A, 123456));
    EXPECT_TRUE(!cor__match(SRC(1), CTX_A, 5, SRC(2), CTX_A, 5));
    EXPECT_TRUE(!cor__match(SRC(1), CTX_A, 5, SRC(1), CTX_A, 6));
    /* contexts never match across, whatever the wildcards */
    EXPECT_TRUE(!cor__match(SRC(1), CTX_A, 5, SRC(1), CTX_B, 5));
    EXPECT_TRUE(!cor__match(COR_ANY_SOURCE, CTX_A, COR_ANY_TAG, SRC(1), CTX_B, 5));
    EXPECT_TRUE(!cor__match(COR_ANY_SOURCE, 0, COR_ANY_TAG, SRC(1), CTX_B, 5));
    /* a source idp differing only in kind or session is another source */
    EXPECT_TRUE(!cor__match(cor_idp_make(8, COR_KIND_TASK, 0, 1), CTX_A, 5, SRC(1), CTX_A, 5));
    EXPECT_TRUE(!cor__match(cor_idp_make(9, COR_KIND_PORT, 0, 1), CTX_A, 5, SRC(1), CTX_A, 5));
}

static void test_posted_fifo(void)
{
    reset();
    post(0, COR_ANY_SOURCE, CTX_A, COR_ANY_TAG);
    post(1, COR_ANY_SOURCE, CTX_A, COR_ANY_TAG);
    post(2, SRC(1), CTX_A, 4);
    EXPECT_EQ(posted_len(), 3);
    /* the oldest that matches wins */
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 4) == &reqs[0]);
    EXPECT_EQ(atomic_load(&reqs[0].state), RS_MATCHED);
    EXPECT_TRUE(reqs[0].next == NULL && reqs[0].prev == NULL);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 4) == &reqs[1]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 4) == &reqs[2]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 4) == NULL);
    EXPECT_EQ(posted_len(), 0);
    EXPECT_TRUE(task.posted_head == NULL && task.posted_tail == NULL);
}

static void test_posted_skips(void)
{
    reset();
    post(0, SRC(1), CTX_A, 1);         /* other tag */
    post(1, SRC(2), CTX_A, 2);         /* other source */
    post(2, COR_ANY_SOURCE, CTX_B, 2); /* other context */
    post(3, COR_ANY_SOURCE, CTX_A, 2); /* this one */
    post(4, SRC(1), CTX_A, COR_ANY_TAG);
    struct cor_req *r = cor__posted_take(&task, SRC(1), CTX_A, 2);
    EXPECT_TRUE(r == &reqs[3]); /* middle */
    EXPECT_EQ(posted_len(), 4);
    EXPECT_EQ(atomic_load(&reqs[0].state), RS_PENDING); /* the skipped stay pending */
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 2) == &reqs[4]); /* tail */
    EXPECT_TRUE(task.posted_tail == &reqs[2]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 1) == &reqs[0]); /* head */
    EXPECT_TRUE(task.posted_head == &reqs[1]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(3), CTX_B, 9) == NULL); /* tag differs */
    EXPECT_TRUE(cor__posted_take(&task, SRC(3), CTX_B, 2) == &reqs[2]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(2), CTX_B, 2) == NULL);
    EXPECT_TRUE(cor__posted_take(&task, SRC(2), CTX_A, 2) == &reqs[1]);
    EXPECT_EQ(posted_len(), 0);
}

static void test_posted_remove(void)
{
    reset();
    for (int i = 0; i < 5; i++)
        post(i, COR_ANY_SOURCE, CTX_A, i);
    EXPECT_TRUE(cor__posted_remove(&task, &reqs[2]));
    EXPECT_TRUE(!cor__posted_remove(&task, &reqs[2])); /* not there any more */
    EXPECT_TRUE(!cor__posted_remove(&task, &reqs[9])); /* never was */
    EXPECT_EQ(posted_len(), 4);
    EXPECT_TRUE(cor__posted_remove(&task, &reqs[0]));
    EXPECT_TRUE(cor__posted_remove(&task, &reqs[4]));
    EXPECT_EQ(posted_len(), 2);
    EXPECT_TRUE(task.posted_head == &reqs[1] && task.posted_tail == &reqs[3]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 2) == NULL); /* removed: no match */
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 3) == &reqs[3]);
    EXPECT_TRUE(cor__posted_remove(&task, &reqs[1]));
    EXPECT_EQ(posted_len(), 0);
    /* appending after emptying works */
    post(6, SRC(1), CTX_A, 1);
    EXPECT_EQ(posted_len(), 1);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 1) == &reqs[6]);
}

static void test_unexpected(void)
{
    reset();
    arrive(0, SRC(1), CTX_A, 1);
    arrive(1, SRC(2), CTX_A, 1);
    arrive(2, SRC(1), CTX_B, 1);
    arrive(3, SRC(1), CTX_A, 2);
    arrive(4, SRC(1), CTX_A, 1);
    EXPECT_EQ(unexp_len(), 5);
    /* specific source and tag: the oldest of that pair */
    EXPECT_TRUE(cor__unexp_take(&task, SRC(1), CTX_A, 1) == &msgs[0]);
    /* wildcard tag from source 1: next in arrival order, skipping source 2 */
    EXPECT_TRUE(cor__unexp_take(&task, SRC(1), CTX_A, COR_ANY_TAG) == &msgs[3]);
    /* contexts */
    EXPECT_TRUE(cor__unexp_take(&task, COR_ANY_SOURCE, CTX_B, COR_ANY_TAG) == &msgs[2]);
    EXPECT_TRUE(cor__unexp_take(&task, COR_ANY_SOURCE, CTX_B, COR_ANY_TAG) == NULL);
    EXPECT_TRUE(cor__unexp_take(&task, COR_ANY_SOURCE, CTX_A, COR_ANY_TAG) == &msgs[1]);
    EXPECT_TRUE(cor__unexp_take(&task, SRC(2), CTX_A, COR_ANY_TAG) == NULL);
    EXPECT_EQ(unexp_len(), 1);
    EXPECT_TRUE(cor__unexp_take(&task, COR_ANY_SOURCE, CTX_A, 1) == &msgs[4]);
    EXPECT_EQ(unexp_len(), 0);
    EXPECT_TRUE(task.unexp_head == NULL && task.unexp_tail == NULL);
}

/* A receive posted with a wildcard does not take a message of a specific receive posted
 * earlier: order of posting decides, per message. */
static void test_posted_vs_wildcard_order(void)
{
    reset();
    post(0, SRC(1), CTX_A, 7);
    post(1, COR_ANY_SOURCE, CTX_A, COR_ANY_TAG);
    EXPECT_TRUE(cor__posted_take(&task, SRC(2), CTX_A, 7) == &reqs[1]);
    EXPECT_TRUE(cor__posted_take(&task, SRC(1), CTX_A, 7) == &reqs[0]);
}

/* Many entries: order and integrity under a long, mixed sequence (deterministic). */
static void test_long_sequence(void)
{
    enum { N = 2000 };
    struct cor_umsg *m = calloc(N, sizeof *m);
    REQUIRE(m != NULL);
    memset(&task, 0, sizeof task);
    for (int i = 0; i < N; i++) {
        m[i].src = SRC(i % 4);
        m[i].ctx = i % 5 == 0 ? CTX_B : CTX_A;
        m[i].tag = i % 3;
        cor__unexp_append(&task, &m[i]);
    }
    int last[4] = {-1, -1, -1, -1}, taken = 0, bad = 0;
    /* take by source with any tag in context A: each source's messages come in order */
    for (int round = 0; round < N; round++) {
        int s = round % 4;
        struct cor_umsg *x = cor__unexp_take(&task, SRC(s), CTX_A, COR_ANY_TAG);
        if (!x) continue;
        int i = (int)(x - m);
        if (i <= last[s] || x->src != SRC(s) || x->ctx != CTX_A) bad++;
        last[s] = i;
        taken++;
    }
    int a_count = 0;
    for (int i = 0; i < N; i++)
        a_count += i % 5 != 0;
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(taken, a_count);
    /* what is left is exactly context B, in order */
    int prev = -1, left = 0;
    for (struct cor_umsg *x = task.unexp_head; x; x = x->next, left++) {
        if (x->ctx != CTX_B || (int)(x - m) <= prev) bad++;
        prev = (int)(x - m);
    }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(left, N - a_count);
    free(m);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"match rule", test_rule},
        {"posted receives are FIFO", test_posted_fifo},
        {"posted: non-matching are skipped", test_posted_skips},
        {"posted: remove (cancel)", test_posted_remove},
        {"unexpected messages", test_unexpected},
        {"posting order decides", test_posted_vs_wildcard_order},
        {"2000 messages, 4 sources, 2 contexts", test_long_sequence},
        {NULL, NULL},
    };
    return ct_main("match", NULL, NULL, tests, 30);
}
