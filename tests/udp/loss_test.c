/* CoRudpRoute under injected faults (COR_UDP_FAULTS): the same exchange completes, every
 * frame exactly once and in order. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>

#include "conf_harness.h"

static uint64_t frames_from_env(uint64_t def)
{
    const char *v = getenv("UDP_TEST_FRAMES");
    return v && atoll(v) > 0 ? (uint64_t)atoll(v) : def;
}

static void run(const char *faults, uint64_t frames, size_t max)
{
    setenv("COR_UDP_FAULTS", faults, 1);
    struct h_port p[2];
    int rc = h_open(p, 2, 0x5eed5eed5eed5eedull);
    unsetenv("COR_UDP_FAULTS");
    CU_ASSERT_EQUAL_FATAL(rc, COR_OK);
    double t0 = h_seconds();
    rc = h_exchange(p, 2, frames, max, 240.0);
    double dt = h_seconds() - t0;
    CU_ASSERT_EQUAL(rc, 0);
    uint64_t dropped[2] = {0, 0}, retx[2] = {0, 0};
    CU_ASSERT_EQUAL(h_exchanged(p, 2, frames), 0);
    for (int i = 0; i < 2; i++) {
        h_route()->counters(p[i].port, &dropped[i], &retx[i]);
        CU_ASSERT_EQUAL(dropped[i], 0); /* injected loss is not "foreign" traffic */
    }
    /* With 5% loss nothing gets through without retransmissions: prove the faults were on. */
    CU_ASSERT(retx[0] + retx[1] > 0);
    printf("\n  [%s] %llu frames each way in %.2f s, retransmits %llu + %llu\n", faults,
           (unsigned long long)frames, dt, (unsigned long long)retx[0],
           (unsigned long long)retx[1]);
    h_close(p, 2);
}

static void test_loss_mixed(void)
{
    run("drop=0.05,dup=0.01,reorder=0.02,delay_us=200,seed=42", frames_from_env(20000), (size_t)-1);
}

static void test_loss_small_heavy(void)
{
    run("drop=0.2,dup=0.05,reorder=0.1,delay_us=500,seed=7", frames_from_env(20000) / 4, 2000);
}

static void test_loss_other_seed(void)
{
    run("drop=0.05,dup=0.01,reorder=0.02,delay_us=200,seed=4242", frames_from_env(20000) / 4,
        200000);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("udp_loss", NULL, NULL);
    CU_add_test(s, "5% drop, 1% dup, 2% reorder+delay, mixed sizes up to 1 MiB", test_loss_mixed);
    CU_add_test(s, "20% drop, 5% dup, 10% reorder, small frames", test_loss_small_heavy);
    CU_add_test(s, "5% drop, another seed, frames up to 200 KB", test_loss_other_seed);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
