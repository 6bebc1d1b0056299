/*
 * Soft-port handles in a one-domain session (udp route): open, use, info and close, and that
 * a closed, stale or forged handle is COR_EINVAL in every call (slot + generation), also once
 * its slot holds another port, and for handles of an earlier session.
 */
#include "cor/cor.h"
#include "../ctest.h"
#include "one_domain.h"

static void expect_invalid(cor_port_t h)
{
    const char *route = "untouched";
    int hard = -7;
    EXPECT_ERR(cor_port_info(h, &route, &hard), COR_EINVAL);
    EXPECT_ERR(cor_port_use(h), COR_EINVAL);
    EXPECT_ERR(cor_port_close(h), COR_EINVAL);
    EXPECT_TRUE(!strcmp(route, "untouched"));
    EXPECT_EQ(hard, -7);
}

static void test_open_close(void)
{
    cor_port_t p = COR_PORT_NULL;
    cor_port_attr_t a = {"udp", 0, 0};
    EXPECT_ERR(cor_port_open(&a, &p), COR_OK);
    EXPECT_NE(p, COR_PORT_NULL);
    const char *route = NULL;
    int hard = -1;
    EXPECT_ERR(cor_port_info(p, &route, &hard), COR_OK);
    EXPECT_TRUE(route && !strcmp(route, "udp"));
    EXPECT_EQ(hard, 0);
    EXPECT_ERR(cor_port_use(p), COR_OK);
    EXPECT_ERR(cor_port_close(p), COR_OK);
    expect_invalid(p); /* closed: also a second close */
    /* the calling task's current port was that one: messages still go (to itself here) */
    int v = 3, w = 0;
    EXPECT_ERR(cor_send(cor_task_self(), COR_CTX_WORLD, 1, COR_INT, &v, 1), COR_OK);
    EXPECT_ERR(cor_recv(cor_task_self(), COR_CTX_WORLD, 1, COR_INT, &w, 1, NULL), COR_OK);
    EXPECT_EQ(w, 3);
}

static void test_stale_after_reuse(void)
{
    cor_port_t old = COR_PORT_NULL, fresh = COR_PORT_NULL;
    REQUIRE(cor_port_open(NULL, &old) == COR_OK);
    REQUIRE(cor_port_close(old) == COR_OK);
    REQUIRE(cor_port_open(NULL, &fresh) == COR_OK);
    /* the freed slot is taken again, under a new generation */
    EXPECT_EQ((uint32_t)fresh, (uint32_t)old);
    EXPECT_NE(fresh, old);
    expect_invalid(old);
    EXPECT_ERR(cor_port_info(fresh, NULL, NULL), COR_OK);
    /* exclusive use of a hard port is given back by close, not by a stale close */
    cor_port_t ex = COR_PORT_NULL, other = COR_PORT_NULL;
    cor_port_attr_t a = {"udp", 0, 1};
    EXPECT_ERR(cor_port_close(fresh), COR_OK);
    REQUIRE(cor_port_open(&a, &ex) == COR_OK);
    EXPECT_ERR(cor_port_close(fresh), COR_EINVAL);
    EXPECT_ERR(cor_port_open(&a, &other), COR_EBUSY);
    EXPECT_ERR(cor_port_close(ex), COR_OK);
    EXPECT_ERR(cor_port_open(&a, &other), COR_OK);
    EXPECT_ERR(cor_port_close(other), COR_OK);
}

static void test_forged(void)
{
    cor_port_t p = COR_PORT_NULL;
    REQUIRE(cor_port_open(NULL, &p) == COR_OK);
    const cor_port_t forged[] = {
        COR_PORT_NULL,
        p + ((cor_port_t)1 << 32),    /* the next generation of its slot */
        p - ((cor_port_t)1 << 32),    /* the previous one */
        p + 1,                        /* the next slot, never used */
        p & 0xffffffffu,              /* generation 0 */
        p & ~(cor_port_t)0x80000000u, /* without the port tag: a request's shape */
        (cor_port_t)1 << 32,          /* a first request handle */
        ~(cor_port_t)0,
        (cor_port_t)(uintptr_t)&p, /* a pointer */
    };
    for (unsigned i = 0; i < sizeof forged / sizeof *forged; i++)
        expect_invalid(forged[i]);
    /* a request handle is no port handle */
    cor_req_t r;
    int v;
    REQUIRE(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 9, COR_INT, &v, 1, &r) == COR_OK);
    expect_invalid((cor_port_t)r);
    EXPECT_ERR(cor_cancel(&r), COR_OK);
    cor_wait(&r, NULL);
    EXPECT_ERR(cor_port_info(p, NULL, NULL), COR_OK); /* the forgeries changed nothing */
    EXPECT_ERR(cor_port_close(p), COR_OK);
    cor_port_attr_t bad = {"udp", 99, 0}, none = {"nosuchroute", COR_HARD_PORT_ANY, 0};
    EXPECT_ERR(cor_port_open(&bad, &p), COR_EINVAL);
    EXPECT_ERR(cor_port_open(&none, &p), COR_ENOTFOUND);
    EXPECT_ERR(cor_port_open(NULL, NULL), COR_EINVAL);
}

/* Many ports at once (more than one chunk of slots), closed in another order. */
static void test_many(void)
{
    enum { N = 600 };
    static cor_port_t ps[N];
    for (int i = 0; i < N; i++)
        REQUIRE(cor_port_open(NULL, &ps[i]) == COR_OK);
    for (int i = 0; i < N; i += 2)
        EXPECT_ERR(cor_port_close(ps[i]), COR_OK);
    for (int i = 0; i < N; i++)
        EXPECT_ERR(cor_port_info(ps[i], NULL, NULL), i % 2 ? COR_OK : COR_EINVAL);
    for (int i = 1; i < N; i += 2)
        EXPECT_ERR(cor_port_close(ps[i]), COR_OK);
}

/* A handle of an earlier session is invalid in the next one. */
static void test_across_sessions(void)
{
    cor_port_t p = COR_PORT_NULL, q = COR_PORT_NULL;
    REQUIRE(cor_port_open(NULL, &p) == COR_OK);
    REQUIRE(cor_finalize() == COR_OK);
    EXPECT_ERR(cor_port_close(p), COR_EINVAL);
    REQUIRE(cor_init(NULL, NULL) == COR_OK);
    expect_invalid(p);
    REQUIRE(cor_port_open(NULL, &q) == COR_OK);
    EXPECT_NE(q, p);
    expect_invalid(p);
    EXPECT_ERR(cor_port_close(q), COR_OK);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"open, use, info, close", test_open_close},
        {"stale handle after its slot is reused", test_stale_after_reuse},
        {"forged handles", test_forged},
        {"600 ports", test_many},
        {"handles of an earlier session", test_across_sessions},
        {NULL, NULL},
    };
    return ct_main("port", init, clean, tests, 60);
}
