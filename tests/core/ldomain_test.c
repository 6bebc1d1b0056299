/*
 * Logical domains (named, ordered groups) in a one-domain session: create, names, lookup,
 * join order, leave, rank, size, member, and joins from many tasks at once.
 */
#include <stdatomic.h>

#include "cor/cor.h"
#include "../ctest.h"
#include "one_domain.h"

static cor_idp_t member(unsigned i)
{
    return cor_idp_make(cor_session(), COR_KIND_TASK, 0, 100 + i);
}

static void test_create_lookup(void)
{
    cor_idp_t a = 0, b = 0, x = 0;
    REQUIRE(cor_ldomain_create("alpha", &a) == COR_OK);
    EXPECT_EQ(cor_idp_kind(a), COR_KIND_LDOMAIN);
    EXPECT_EQ(cor_idp_macro(a), cor_session());
    REQUIRE(cor_ldomain_create("beta", &b) == COR_OK);
    EXPECT_NE(a, b);
    x = 77;
    EXPECT_ERR(cor_ldomain_create("alpha", &x), COR_EEXIST);
    EXPECT_EQ(x, 77);
    EXPECT_ERR(cor_ldomain_lookup("alpha", &x), COR_OK);
    EXPECT_EQ(x, a);
    EXPECT_ERR(cor_ldomain_lookup("beta", &x), COR_OK);
    EXPECT_EQ(x, b);
    EXPECT_ERR(cor_ldomain_lookup("gamma", &x), COR_ENOTFOUND);
    EXPECT_ERR(cor_ldomain_lookup("alph", &x), COR_ENOTFOUND);
    int n = -1;
    EXPECT_ERR(cor_ldomain_size(a, &n), COR_OK);
    EXPECT_EQ(n, 0);
}

static void test_bad_args(void)
{
    char longname[COR_NAME_MAX + 4];
    memset(longname, 'l', sizeof longname);
    longname[sizeof longname - 1] = 0;
    cor_idp_t x, l;
    int r;
    REQUIRE(cor_ldomain_create("bad-args", &l) == COR_OK);
    EXPECT_ERR(cor_ldomain_create(NULL, &x), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_create("y", NULL), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_create("", &x), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_create(longname, &x), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_lookup(NULL, &x), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_lookup(longname, &x), COR_EINVAL);
    /* idps of the wrong kind or session */
    EXPECT_ERR(cor_ldomain_join(cor_task_self(), member(0), &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_join(cor_domain_self(), member(0), &r), COR_EINVAL);
    EXPECT_ERR(
        cor_ldomain_join(cor_idp_make(cor_session() + 1, COR_KIND_LDOMAIN, 0, cor_idp_index(l)),
                         member(0), &r),
        COR_EINVAL);
    EXPECT_ERR(cor_ldomain_join(l, COR_IDP_NULL, &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_size(cor_task_self(), &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_size(l, NULL), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_rank(l, member(0), NULL), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_member(l, 0, NULL), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_member(l, -1, &x), COR_EINVAL);
    /* a well-formed idp of a group that does not exist is a forged handle */
    cor_idp_t ghost = cor_idp_make(cor_session(), COR_KIND_LDOMAIN, 1, 5000);
    EXPECT_ERR(cor_ldomain_size(ghost, &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_join(ghost, member(0), &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_leave(ghost, member(0)), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_destroy(ghost), COR_EINVAL);
    /* wildcards and failed lookups are no members */
    EXPECT_ERR(cor_ldomain_join(l, COR_ANY_SOURCE, &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_join(l, cor_task_idp(-1, 0), &r), COR_EINVAL);
}

/* Handles: an existing group's slot with another generation, and a destroyed group, are
 * COR_EINVAL in every call; the name can be created again and gets a new handle. */
static void test_handles(void)
{
    cor_idp_t l, x;
    int r, n;
    REQUIRE(cor_ldomain_create("handles", &l) == COR_OK);
    EXPECT_ERR(cor_ldomain_join(l, member(1), &r), COR_OK);
    unsigned gen = cor_idp_domain(l), slot = cor_idp_index(l);
    const cor_idp_t forged[] = {
        cor_idp_make(cor_session(), COR_KIND_LDOMAIN, gen + 1, slot),
        cor_idp_make(cor_session(), COR_KIND_LDOMAIN, 0, slot),
        cor_idp_make(cor_session(), COR_KIND_LDOMAIN, gen, slot + 1000),
        cor_idp_make(cor_session(), COR_KIND_LDOMAIN, gen, COR_MAX_INDEX),
    };
    for (unsigned i = 0; i < sizeof forged / sizeof *forged; i++) {
        EXPECT_ERR(cor_ldomain_size(forged[i], &n), COR_EINVAL);
        EXPECT_ERR(cor_ldomain_join(forged[i], member(2), &r), COR_EINVAL);
        EXPECT_ERR(cor_ldomain_rank(forged[i], member(1), &r), COR_EINVAL);
        EXPECT_ERR(cor_ldomain_member(forged[i], 0, &x), COR_EINVAL);
        EXPECT_ERR(cor_ldomain_leave(forged[i], member(1)), COR_EINVAL);
        EXPECT_ERR(cor_ldomain_destroy(forged[i]), COR_EINVAL);
    }
    EXPECT_ERR(cor_ldomain_size(l, &n), COR_OK); /* the forgeries changed nothing */
    EXPECT_EQ(n, 1);

    EXPECT_ERR(cor_ldomain_destroy(l), COR_OK);
    EXPECT_ERR(cor_ldomain_destroy(l), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_size(l, &n), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_join(l, member(2), &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_rank(l, member(1), &r), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_member(l, 0, &x), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_leave(l, member(1)), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_lookup("handles", &x), COR_ENOTFOUND);

    /* created again: the freed slot, a new generation, empty; the old handle stays invalid */
    cor_idp_t again;
    REQUIRE(cor_ldomain_create("handles", &again) == COR_OK);
    EXPECT_NE(again, l);
    EXPECT_EQ(cor_idp_index(again), slot);
    EXPECT_ERR(cor_ldomain_size(again, &n), COR_OK);
    EXPECT_EQ(n, 0);
    EXPECT_ERR(cor_ldomain_size(l, &n), COR_EINVAL);
    EXPECT_ERR(cor_ldomain_lookup("handles", &x), COR_OK);
    EXPECT_EQ(x, again);
    EXPECT_ERR(cor_ldomain_destroy(again), COR_OK);
}

static void expect_members(cor_idp_t l, const unsigned *ids, int n)
{
    int size = -1;
    EXPECT_ERR(cor_ldomain_size(l, &size), COR_OK);
    EXPECT_EQ(size, n);
    for (int i = 0; i < n; i++) {
        cor_idp_t m = 0;
        int r = -1;
        EXPECT_ERR(cor_ldomain_member(l, i, &m), COR_OK);
        EXPECT_EQ(m, member(ids[i]));
        EXPECT_ERR(cor_ldomain_rank(l, member(ids[i]), &r), COR_OK);
        EXPECT_EQ(r, i);
    }
    cor_idp_t m;
    EXPECT_ERR(cor_ldomain_member(l, n, &m), COR_ENOTFOUND);
}

static void test_join_leave(void)
{
    cor_idp_t l;
    REQUIRE(cor_ldomain_create("group", &l) == COR_OK);
    for (unsigned i = 0; i < 5; i++) {
        int r = -1;
        EXPECT_ERR(cor_ldomain_join(l, member(i), &r), COR_OK);
        EXPECT_EQ(r, i); /* ranks in join order */
    }
    unsigned all[] = {0, 1, 2, 3, 4};
    expect_members(l, all, 5);
    /* joining twice keeps the first rank */
    int r = -1;
    EXPECT_ERR(cor_ldomain_join(l, member(2), &r), COR_OK);
    EXPECT_EQ(r, 2);
    expect_members(l, all, 5);
    /* rank NULL is allowed for join */
    EXPECT_ERR(cor_ldomain_join(l, member(2), NULL), COR_OK);

    /* leaving moves the later ranks down */
    EXPECT_ERR(cor_ldomain_leave(l, member(1)), COR_OK);
    unsigned after1[] = {0, 2, 3, 4};
    expect_members(l, after1, 4);
    EXPECT_ERR(cor_ldomain_rank(l, member(1), &r), COR_ENOTFOUND);
    EXPECT_ERR(cor_ldomain_leave(l, member(1)), COR_ENOTFOUND);
    EXPECT_ERR(cor_ldomain_leave(l, member(4)), COR_OK); /* the last */
    EXPECT_ERR(cor_ldomain_leave(l, member(0)), COR_OK); /* the first */
    unsigned after3[] = {2, 3};
    expect_members(l, after3, 2);
    /* a leaver that joins again comes last */
    EXPECT_ERR(cor_ldomain_join(l, member(0), &r), COR_OK);
    EXPECT_EQ(r, 2);
    unsigned again[] = {2, 3, 0};
    expect_members(l, again, 3);
    EXPECT_ERR(cor_ldomain_rank(l, member(99), &r), COR_ENOTFOUND);

    /* groups are independent */
    cor_idp_t other;
    REQUIRE(cor_ldomain_create("other-group", &other) == COR_OK);
    EXPECT_ERR(cor_ldomain_rank(other, member(2), &r), COR_ENOTFOUND);
    EXPECT_ERR(cor_ldomain_join(other, member(3), &r), COR_OK);
    EXPECT_EQ(r, 0);
    expect_members(l, again, 3);
}

/* Members need not be tasks: any resource idp may join, also the same one in many groups. */
static void test_any_resource(void)
{
    cor_idp_t l1, l2;
    int r;
    REQUIRE(cor_ldomain_create("mixed-1", &l1) == COR_OK);
    REQUIRE(cor_ldomain_create("mixed-2", &l2) == COR_OK);
    EXPECT_ERR(cor_ldomain_join(l1, cor_domain_self(), &r), COR_OK);
    EXPECT_EQ(r, 0);
    EXPECT_ERR(cor_ldomain_join(l1, cor_task_self(), &r), COR_OK);
    EXPECT_EQ(r, 1);
    EXPECT_ERR(cor_ldomain_join(l2, cor_task_self(), &r), COR_OK);
    EXPECT_EQ(r, 0);
    EXPECT_ERR(cor_ldomain_rank(l1, cor_task_self(), &r), COR_OK);
    EXPECT_EQ(r, 1);
}

/* ---- joins from many tasks at once ---- */

#define NJOIN 32
static cor_idp_t shared_ld;
static int join_rank[NJOIN];

static int joiner(void *arg)
{
    int i = (int)(intptr_t)arg;
    join_rank[i] = -1;
    cor_idp_t l = 0;
    /* everyone races to create it; exactly one wins, the others look it up */
    int err = cor_ldomain_create("crowd", &l);
    if (err == COR_EEXIST) err = cor_ldomain_lookup("crowd", &l);
    if (err) return err;
    if (l != shared_ld && shared_ld) return -100;
    return cor_ldomain_join(l, cor_task_self(), &join_rank[i]);
}

static void test_concurrent_join(void)
{
    cor_idp_t t[NJOIN];
    shared_ld = 0;
    for (int i = 0; i < NJOIN; i++)
        REQUIRE(cor_task_spawn("joiner", joiner, (void *)(intptr_t)i, &t[i]) == COR_OK);
    for (int i = 0; i < NJOIN; i++) {
        int st = -1;
        EXPECT_ERR(cor_task_join(t[i], &st), COR_OK);
        EXPECT_ERR(st, COR_OK);
    }
    cor_idp_t l;
    REQUIRE(cor_ldomain_lookup("crowd", &l) == COR_OK);
    int n = 0;
    EXPECT_ERR(cor_ldomain_size(l, &n), COR_OK);
    EXPECT_EQ(n, NJOIN);
    int hits[NJOIN] = {0};
    for (int i = 0; i < NJOIN; i++) {
        REQUIRE(join_rank[i] >= 0 && join_rank[i] < NJOIN);
        hits[join_rank[i]]++;
        cor_idp_t m;
        EXPECT_ERR(cor_ldomain_member(l, join_rank[i], &m), COR_OK);
        EXPECT_EQ(m, t[i]);
    }
    for (int i = 0; i < NJOIN; i++)
        EXPECT_EQ(hits[i], 1);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"create and lookup", test_create_lookup},
        {"bad arguments", test_bad_args},
        {"stale and forged handles", test_handles},
        {"join order, leave moves ranks down", test_join_leave},
        {"any resource may join", test_any_resource},
        {"32 tasks join at once", test_concurrent_join},
        {NULL, NULL},
    };
    return ct_main("ldomain", init, clean, tests, 60);
}
