/*
 * The suite setup of the core's CUnit tests that run in a session of one domain (no cor-run,
 * no launcher): init and clean for ct_main, the calling task's idp in `me`, and the check that
 * a test left no unexpected message behind. Included after ../ctest.h by one file per program.
 */
#ifndef COR_TESTS_CORE_ONE_DOMAIN_H
#define COR_TESTS_CORE_ONE_DOMAIN_H

#include <stdlib.h>

#include "cor/cor.h"
#include "../ctest.h"

__attribute__((unused)) static cor_idp_t me; /* the main thread's task, set by init */

static int init(void)
{
    unsetenv("COR_BOOT");
    if (cor_init(NULL, NULL) != COR_OK) return 1;
    me = cor_task_self();
    return 0;
}

static int clean(void)
{
    return cor_finalize() == COR_OK ? 0 : 1;
}

/* Nothing must be left over between tests. */
__attribute__((unused)) static void expect_no_unexpected(void)
{
    cor_stats_t st;
    EXPECT_ERR(cor_stats_get(&st), COR_OK);
    EXPECT_EQ(st.unexpected_now, 0);
}

#endif
