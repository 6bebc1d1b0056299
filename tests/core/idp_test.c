/*
 * Identifiers, data types, error names and the one-domain session: idp make/split/format,
 * cor_type_size, cor_strerror, calls before cor_init, domain queries of a lone domain.
 */
#include "cor/cor.h"
#include "../ctest.h"

static void test_idp_fields(void)
{
    const uint32_t macros[] = {0, 1, 0xdeadbeef, 0xffffffff};
    const unsigned domains[] = {0, 1, 2047, COR_MAX_DOMAINS - 1};
    const unsigned indices[] = {0, 1, 4660, COR_MAX_INDEX};
    for (unsigned a = 0; a < 4; a++)
        for (int k = COR_KIND_NONE; k <= COR_KIND_CONTEXT; k++)
            for (unsigned d = 0; d < 4; d++)
                for (unsigned i = 0; i < 4; i++) {
                    cor_idp_t x = cor_idp_make(macros[a], k, domains[d], indices[i]);
                    EXPECT_EQ(cor_idp_macro(x), macros[a]);
                    EXPECT_EQ(cor_idp_kind(x), k);
                    EXPECT_EQ(cor_idp_domain(x), domains[d]);
                    EXPECT_EQ(cor_idp_index(x), indices[i]);
                    EXPECT_EQ(cor_idp_micro(x), (uint32_t)x);
                }
}

static void test_idp_masks_out_of_range(void)
{
    /* fields wider than their slot are cut, never spill into the neighbours */
    cor_idp_t x = cor_idp_make(7, COR_KIND_TASK, 0x1fff, 0x1ffff);
    EXPECT_EQ(cor_idp_macro(x), 7);
    EXPECT_EQ(cor_idp_kind(x), COR_KIND_TASK);
    EXPECT_EQ(cor_idp_domain(x), 0xfff);
    EXPECT_EQ(cor_idp_index(x), 0xffff);
    cor_idp_t y = cor_idp_make(7, (enum cor_kind)0x13, 0, 0);
    EXPECT_EQ(cor_idp_kind(y), 3);
    EXPECT_EQ(cor_idp_macro(y), 7);
}

static void test_idp_distinct(void)
{
    /* different resources get different idps */
    cor_idp_t a = cor_idp_make(5, COR_KIND_TASK, 1, 2);
    EXPECT_NE(a, cor_idp_make(5, COR_KIND_TASK, 2, 1));
    EXPECT_NE(a, cor_idp_make(5, COR_KIND_PORT, 1, 2));
    EXPECT_NE(a, cor_idp_make(6, COR_KIND_TASK, 1, 2));
    EXPECT_NE(a, COR_IDP_NULL);
}

static void test_idp_format(void)
{
    char buf[64];
    cor_idp_t x = cor_idp_make(0xdeadbeef, COR_KIND_TASK, 3, 17);
    REQUIRE(cor_idp_format(x, buf, sizeof buf) == buf);
    EXPECT_EQ(strcmp(buf, "deadbeef:task:3.17"), 0);
    if (strcmp(buf, "deadbeef:task:3.17")) fprintf(stderr, "formatted as '%s'\n", buf);
    cor_idp_format(cor_idp_make(1, COR_KIND_LDOMAIN, 0, 65535), buf, sizeof buf);
    EXPECT_EQ(strcmp(buf, "00000001:ldomain:0.65535"), 0);
    /* unknown kinds are still formatted */
    cor_idp_format(cor_idp_make(1, (enum cor_kind)15, 0, 0), buf, sizeof buf);
    EXPECT_TRUE(strstr(buf, "00000001:") == buf);
    /* a short buffer is truncated and terminated, never overrun */
    char small[8];
    memset(small, 'x', sizeof small);
    cor_idp_format(x, small, 5);
    EXPECT_EQ(strlen(small), 4);
    EXPECT_EQ(small[5], 'x');
    EXPECT_TRUE(cor_idp_format(x, NULL, 10) == NULL);
    char one = 'x';
    cor_idp_format(x, &one, 0);
    EXPECT_EQ(one, 'x');
}

static void test_type_size(void)
{
    EXPECT_EQ(cor_type_size(COR_BYTE), 1);
    EXPECT_EQ(cor_type_size(COR_CHAR), 1);
    EXPECT_EQ(cor_type_size(COR_SHORT), sizeof(short));
    EXPECT_EQ(cor_type_size(COR_INT), sizeof(int));
    EXPECT_EQ(cor_type_size(COR_LONG), sizeof(long));
    EXPECT_EQ(cor_type_size(COR_FLOAT), sizeof(float));
    EXPECT_EQ(cor_type_size(COR_DOUBLE), sizeof(double));
    EXPECT_EQ(cor_type_size(COR_INT64), 8);
    EXPECT_EQ(cor_type_size(COR_UINT64), 8);
    EXPECT_EQ(cor_type_size(COR_TYPE_COUNT), 0);
    EXPECT_EQ(cor_type_size((cor_type_t)-1), 0);
    EXPECT_EQ(cor_type_size((cor_type_t)1000), 0);
}

static void test_strerror(void)
{
    /* every code has its own text; unknown codes still get a string */
    const int codes[] = {COR_OK,      COR_EAGAIN,    COR_EINVAL,    COR_ENOMEM,    COR_ETRUNC,
                         COR_ETYPE,   COR_ECANCELED, COR_EPEERDEAD, COR_ENOTFOUND, COR_EROUTE,
                         COR_ECLOSED, COR_EBUSY,     COR_ESTATE,    COR_ELIMIT,    COR_EBOOT,
                         COR_EIO,     COR_EPROTO,    COR_ETIMEDOUT, COR_EEXIST};
    const size_t n = sizeof codes / sizeof *codes;
    for (size_t i = 0; i < n; i++) {
        const char *s = cor_strerror(codes[i]);
        REQUIRE(s != NULL);
        EXPECT_TRUE(*s != 0);
        for (size_t j = 0; j < i; j++)
            EXPECT_NE(strcmp(s, cor_strerror(codes[j])), 0);
    }
    EXPECT_TRUE(cor_strerror(-1000) != NULL);
    EXPECT_TRUE(cor_strerror(42) != NULL);
}

static int nop_task(void *arg)
{
    (void)arg;
    return 0;
}

/* Before cor_init every call reports the state instead of crashing. */
static void test_before_init(void)
{
    cor_idp_t t = 0, l = 0;
    cor_req_t r = 0;
    cor_stats_t st;
    int v = 0;
    EXPECT_EQ(cor_initialized(), 0);
    EXPECT_ERR(cor_task_spawn("x", nop_task, NULL, &t), COR_ESTATE);
    EXPECT_ERR(cor_ldomain_create("x", &l), COR_ESTATE);
    EXPECT_ERR(
        cor_sendI_typed(cor_idp_make(1, COR_KIND_TASK, 0, 0), COR_CTX_WORLD, 0, COR_INT, &v, 1, &r),
        COR_ESTATE);
    EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 0, COR_INT, &v, 1, &r), COR_ESTATE);
    EXPECT_ERR(cor_stats_get(&st), COR_ESTATE);
    EXPECT_ERR(cor_barrier(), COR_ESTATE);
    EXPECT_ERR(cor_finalize(), COR_ESTATE);
    EXPECT_EQ(cor_task_self(), COR_IDP_NULL);
    EXPECT_EQ(cor_domain_rank(), -1);
    EXPECT_EQ(cor_domain_count(), 0);
    EXPECT_EQ(cor_session(), 0);
}

static void test_one_domain(void)
{
    unsetenv("COR_BOOT");
    REQUIRE(cor_init(NULL, NULL) == COR_OK);
    EXPECT_EQ(cor_initialized(), 1);
    EXPECT_ERR(cor_init(NULL, NULL), COR_ESTATE);
    EXPECT_EQ(cor_domain_rank(), 0);
    EXPECT_EQ(cor_domain_count(), 1);
    uint32_t s = cor_session();
    EXPECT_NE(s, 0);
    cor_idp_t d = cor_domain_self();
    EXPECT_EQ(cor_idp_kind(d), COR_KIND_DOMAIN);
    EXPECT_EQ(cor_idp_macro(d), s);
    EXPECT_EQ(cor_idp_domain(d), 0);
    EXPECT_EQ(cor_domain_idp(0), d);
    EXPECT_EQ(cor_domain_idp(1), COR_IDP_NULL);
    EXPECT_EQ(cor_domain_idp(-1), COR_IDP_NULL);
    EXPECT_EQ(cor_domain_parent(0), -1);
    EXPECT_EQ(cor_domain_parent(1), -1);
    int ch[2] = {-5, -5};
    EXPECT_EQ(cor_domain_children(0, ch, 2), 0);
    EXPECT_EQ(ch[0], -5);
    EXPECT_ERR(cor_barrier(), COR_OK);

    /* the main thread is task 0, named ("main", 0) */
    cor_idp_t me = cor_task_self();
    EXPECT_EQ(cor_idp_kind(me), COR_KIND_TASK);
    EXPECT_EQ(cor_idp_macro(me), s);
    EXPECT_EQ(cor_idp_domain(me), 0);
    EXPECT_EQ(cor_idp_index(me), 0);
    EXPECT_EQ(cor_task_idp(0, 0), me);
    EXPECT_EQ(cor_task_idp(0, 9), cor_idp_make(s, COR_KIND_TASK, 0, 9));
    EXPECT_EQ(cor_task_idp(1, 0), COR_IDP_NULL);
    EXPECT_EQ(cor_task_idp(-1, 0), COR_IDP_NULL);
    EXPECT_EQ(cor_task_idp(0, COR_MAX_INDEX + 1), COR_IDP_NULL);
    cor_name_t nm;
    REQUIRE(cor_task_name(me, &nm) == COR_OK);
    EXPECT_EQ(strcmp(nm.name, "main"), 0);
    EXPECT_EQ(nm.index, 0);
    EXPECT_EQ(nm.ascendant, d);

    cor_stats_t st;
    EXPECT_ERR(cor_stats_get(&st), COR_OK);
    EXPECT_ERR(cor_stats_get(NULL), COR_EINVAL);
    EXPECT_EQ(st.msgs_sent, 0);
    EXPECT_EQ(st.unexpected_now, 0);

    cor_idp_t l;
    EXPECT_ERR(cor_ldomain_create("from-the-first-session", &l), COR_OK);
    EXPECT_ERR(cor_finalize(), COR_OK);
    EXPECT_EQ(cor_initialized(), 0);
    EXPECT_ERR(cor_finalize(), COR_ESTATE);
}

/* A second session in the same process starts clean. */
static void test_reinit(void)
{
    REQUIRE(cor_init(NULL, NULL) == COR_OK);
    EXPECT_EQ(cor_idp_index(cor_task_self()), 0);
    cor_name_t nm;
    EXPECT_ERR(cor_task_name(cor_task_self(), &nm), COR_OK);
    EXPECT_EQ(strcmp(nm.name, "main"), 0);
    cor_idp_t l;
    EXPECT_ERR(cor_ldomain_lookup("from-the-first-session", &l), COR_ENOTFOUND);
    EXPECT_ERR(cor_finalize(), COR_OK);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"idp fields round-trip", test_idp_fields},
        {"idp fields are masked", test_idp_masks_out_of_range},
        {"idps are distinct", test_idp_distinct},
        {"idp format", test_idp_format},
        {"type sizes", test_type_size},
        {"strerror", test_strerror},
        {"calls before init", test_before_init},
        {"one-domain session", test_one_domain},
        {"second session", test_reinit},
        {NULL, NULL},
    };
    return ct_main("idp", NULL, NULL, tests, 60);
}
