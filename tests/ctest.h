/*
 * The helpers every CUnit suite uses (tests/ and libgm-compat/tests/): assertions that print
 * what they expected, a bounded run (alarm) and a main() that turns failures into a nonzero
 * exit status. Assertions are made from the main thread only (CUnit is not thread-safe);
 * tasks record what they saw and the main thread checks it.
 */
#ifndef COR_TESTS_CTEST_H
#define COR_TESTS_CTEST_H

#include <CUnit/Basic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Prints a failed check and records it; a fatal one ends the test function. */
static inline void ct_report(int fatal, const char *file, int line, const char *msg)
{
    fprintf(stderr, "%s:%d: %s\n", file, line, msg);
    CU_assertImplementation(CU_FALSE, (unsigned)line, msg, file, "", fatal ? CU_TRUE : CU_FALSE);
}

static inline void ct_fail_msg(const char *file, int line, const char *msg)
{
    ct_report(0, file, line, msg);
}

/* ct_failf(fatal, file, line, fmt, ...): the same with a printf message. */
__attribute__((format(printf, 4, 5))) static inline void ct_failf(int fatal, const char *file,
                                                                  int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_report(fatal, file, line, msg);
}

static inline void ct_fail(const char *file, int line, const char *fmt, long long got,
                           long long want, const char *expr)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, expr, got, want);
    ct_fail_msg(file, line, msg);
}

/* EXPECT_EQ(actual, expected): integers, both printed on failure. */
#define EXPECT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long ct_a = (long long)(a), ct_b = (long long)(b);                                    \
        if (ct_a != ct_b)                                                                          \
            ct_fail(__FILE__, __LINE__, "%s = %lld, expected %lld", ct_a, ct_b, #a);               \
        else                                                                                       \
            CU_PASS(#a);                                                                           \
    } while (0)
#define EXPECT_NE(a, b)                                                                            \
    do {                                                                                           \
        long long ct_a = (long long)(a), ct_b = (long long)(b);                                    \
        if (ct_a == ct_b)                                                                          \
            ct_fail(__FILE__, __LINE__, "%s = %lld, expected anything but %lld", ct_a, ct_b, #a);  \
        else                                                                                       \
            CU_PASS(#a);                                                                           \
    } while (0)
#define EXPECT_GE(a, b)                                                                            \
    do {                                                                                           \
        long long ct_a = (long long)(a), ct_b = (long long)(b);                                    \
        if (ct_a < ct_b)                                                                           \
            ct_fail(__FILE__, __LINE__, "%s = %lld, expected at least %lld", ct_a, ct_b, #a);      \
        else                                                                                       \
            CU_PASS(#a);                                                                           \
    } while (0)
#define EXPECT_LE(a, b)                                                                            \
    do {                                                                                           \
        long long ct_a = (long long)(a), ct_b = (long long)(b);                                    \
        if (ct_a > ct_b)                                                                           \
            ct_fail(__FILE__, __LINE__, "%s = %lld, expected at most %lld", ct_a, ct_b, #a);       \
        else                                                                                       \
            CU_PASS(#a);                                                                           \
    } while (0)
/* Strings, both printed on failure. */
#define EXPECT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *ct_a = (a), *ct_b = (b);                                                       \
        if (strcmp(ct_a, ct_b) != 0) {                                                             \
            char ct_m[256];                                                                        \
            snprintf(ct_m, sizeof ct_m, "%s = \"%.80s\", expected \"%.80s\"", #a, ct_a, ct_b);     \
            ct_fail_msg(__FILE__, __LINE__, ct_m);                                                 \
        } else {                                                                                   \
            CU_PASS(#a);                                                                           \
        }                                                                                          \
    } while (0)
/* Error codes: printed by name. */
#define EXPECT_ERR(a, b)                                                                           \
    do {                                                                                           \
        int ct_a = (int)(a), ct_b = (int)(b);                                                      \
        if (ct_a != ct_b) {                                                                        \
            char ct_m[256];                                                                        \
            snprintf(ct_m, sizeof ct_m, "%s = %d (%s), expected %d (%s)", #a, ct_a,                \
                     cor_strerror(ct_a), ct_b, cor_strerror(ct_b));                                \
            ct_fail_msg(__FILE__, __LINE__, ct_m);                                                 \
        } else {                                                                                   \
            CU_PASS(#a);                                                                           \
        }                                                                                          \
    } while (0)
#define EXPECT_TRUE(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);                       \
            CU_assertImplementation(CU_FALSE, __LINE__, "expected " #c, __FILE__, "", CU_FALSE);   \
        } else {                                                                                   \
            CU_PASS(#c);                                                                           \
        }                                                                                          \
    } while (0)
/* Stops the test function when a precondition for the rest of it fails. */
#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: required %s\n", __FILE__, __LINE__, #c);                       \
            CU_assertImplementation(CU_FALSE, __LINE__, "required " #c, __FILE__, "", CU_TRUE);    \
        }                                                                                          \
    } while (0)

static inline double ct_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct ct_test {
    const char *name;
    void (*fn)(void);
};

/* The watchdog: the whole program is killed by SIGALRM after `seconds` (a call that never
 * returns fails the run instead of hanging it). */
static inline void ct_watchdog(unsigned seconds)
{
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
}

/* Runs one suite (tests: ended by {NULL, NULL}) under the watchdog; the exit status for
 * automake: 0 all passed, 1 a failure, 99 CUnit could not be set up. */
static inline int ct_main(const char *suite, int (*init)(void), int (*clean)(void),
                          const struct ct_test *tests, unsigned seconds)
{
    ct_watchdog(seconds);
    if (CU_initialize_registry() != CUE_SUCCESS) return 99;
    CU_pSuite s = CU_add_suite(suite, init, clean);
    int ok = s != NULL;
    for (const struct ct_test *t = tests; ok && t->name; t++)
        ok = CU_add_test(s, t->name, t->fn) != NULL;
    if (!ok) {
        fprintf(stderr, "%s: CUnit setup failed: %s\n", suite, CU_get_error_msg());
        CU_cleanup_registry();
        return 99;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    const CU_RunSummary *sum = CU_get_run_summary();
    failed += sum->nSuitesFailed; /* init or cleanup failed */
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

#endif
