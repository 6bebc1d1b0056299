/*
 * getBuffer / releaseBuffer / buffer_info: typed core buffers, and foreign pointers rejected
 * with COR_EINVAL instead of crashing. Each bad-pointer probe runs in a child process so a
 * crash (or a sanitizer report) fails that one test and the suite goes on.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "cor/cor.h"
#include "../ctest.h"

static void test_types_and_sizes(void)
{
    const size_t counts[] = {0, 1, 3, 64, 1000, 100000};
    for (int t = COR_BYTE; t < COR_TYPE_COUNT; t++)
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            void *b = cor_getBuffer((cor_type_t)t, counts[k]);
            REQUIRE(b != NULL);
            EXPECT_EQ((uintptr_t)b % 64, 0);
            cor_type_t ty = COR_TYPE_COUNT;
            size_t n = 12345;
            EXPECT_ERR(cor_buffer_info(b, &ty, &n), COR_OK);
            EXPECT_EQ(ty, t);
            EXPECT_EQ(n, counts[k]);
            EXPECT_ERR(cor_buffer_info(b, NULL, NULL), COR_OK);
            /* the whole buffer is writable (ASan checks the bounds) */
            memset(b, 0xab, counts[k] * cor_type_size((cor_type_t)t));
            EXPECT_ERR(cor_releaseBuffer(b), COR_OK);
        }
}

static void test_invalid_requests(void)
{
    EXPECT_TRUE(cor_getBuffer(COR_TYPE_COUNT, 1) == NULL);
    EXPECT_TRUE(cor_getBuffer((cor_type_t)-3, 1) == NULL);
    EXPECT_TRUE(cor_getBuffer(COR_DOUBLE, SIZE_MAX / 4) == NULL); /* overflows */
    EXPECT_TRUE(cor_getBuffer(COR_BYTE, SIZE_MAX) == NULL);
    EXPECT_TRUE(cor_getBuffer(COR_BYTE, SIZE_MAX - 32) == NULL);
}

static void test_many_live(void)
{
    enum { N = 500 };
    static void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = cor_getBuffer(COR_INT, (size_t)i);
        REQUIRE(b[i] != NULL);
        for (int j = 0; j < i; j++)
            ((int *)b[i])[j] = i;
    }
    for (int i = 0; i < N; i++) {
        size_t n;
        EXPECT_ERR(cor_buffer_info(b[i], NULL, &n), COR_OK);
        EXPECT_EQ(n, i);
        if (i > 0) EXPECT_EQ(((int *)b[i])[i - 1], i);
        EXPECT_ERR(cor_releaseBuffer(b[i]), COR_OK);
    }
}

/* Lookups take no lock while other threads add and release buffers, which rebuilds the set
 * now and then (it grows, or sheds its tombstones in place): readers look up long-lived
 * buffers in a tight loop while churners allocate and release, and every live buffer must be
 * found at every moment (lookups that ignored the rebuilds missed some dozens of times a run). */
enum { CHURNERS = 2, READERS = 2, CHURN_KEEP = 40, READER_KEEP = 64 };
static _Atomic int churn_errors, churners_left;
static void *reader_bufs[READER_KEEP];

static void *churn(void *arg)
{
    long rounds = (long)(intptr_t)arg;
    void *mine[CHURN_KEEP] = {0};
    for (long r = 0; r < rounds; r++) {
        int k = (int)(r % CHURN_KEEP);
        /* (a released buffer is not looked up again: another thread may get its memory) */
        if (mine[k] && cor_releaseBuffer(mine[k]) != COR_OK) atomic_fetch_add(&churn_errors, 1);
        mine[k] = cor_getBuffer(COR_BYTE, (size_t)(k + 1));
        if (!mine[k]) {
            atomic_fetch_add(&churn_errors, 1);
            break;
        }
    }
    for (int i = 0; i < CHURN_KEEP; i++)
        if (mine[i]) cor_releaseBuffer(mine[i]);
    atomic_fetch_sub(&churners_left, 1);
    return NULL;
}

static void *read_loop(void *arg)
{
    (void)arg;
    while (atomic_load(&churners_left) > 0)
        for (int i = 0; i < READER_KEEP; i++) {
            size_t n = 0;
            if (cor_buffer_info(reader_bufs[i], NULL, &n) != COR_OK || n != (size_t)i + 1)
                atomic_fetch_add(&churn_errors, 1);
        }
    return NULL;
}

static void test_churn_lookups(void)
{
    long rounds = getenv("COR_TEST_SCALE") ? 50000 : 300000;
    for (int i = 0; i < READER_KEEP; i++)
        REQUIRE((reader_bufs[i] = cor_getBuffer(COR_INT, (size_t)i + 1)) != NULL);
    pthread_t th[CHURNERS + READERS];
    atomic_store(&churners_left, CHURNERS);
    for (int i = 0; i < CHURNERS + READERS; i++)
        REQUIRE(pthread_create(&th[i], NULL, i < CHURNERS ? churn : read_loop,
                               (void *)(intptr_t)rounds) == 0);
    for (int i = 0; i < CHURNERS + READERS; i++)
        pthread_join(th[i], NULL);
    EXPECT_EQ(atomic_load(&churn_errors), 0);
    for (int i = 0; i < READER_KEEP; i++)
        EXPECT_ERR(cor_releaseBuffer(reader_bufs[i]), COR_OK);
}

/* ---- foreign pointers, probed in a child ---- */

enum probe_call { P_RELEASE, P_INFO, P_SENDI };

/* Runs call(ptr) in a child; the child exits 0 if the call returned COR_EINVAL. */
static void probe(const char *what, enum probe_call call, void *(*make)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20);
        void *p = make();
        int rc;
        if (call == P_RELEASE) {
            rc = cor_releaseBuffer(p);
        } else if (call == P_INFO) {
            rc = cor_buffer_info(p, NULL, NULL);
        } else {
            if (cor_init(NULL, NULL) != COR_OK) _exit(3);
            cor_req_t r;
            rc = cor_sendI(cor_task_self(), COR_CTX_WORLD, 0, p, 1, &r);
        }
        _exit(rc == COR_EINVAL ? 0 : 2);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        continue;
    const char *calls[] = {"cor_releaseBuffer", "cor_buffer_info", "cor_sendI"};
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "%s(%s) killed the process with signal %d; expected COR_EINVAL\n",
                calls[call], what, WTERMSIG(st));
    } else if (WEXITSTATUS(st) != 0) {
        fprintf(stderr,
                "%s(%s): exit %d (2 = not COR_EINVAL, other = sanitizer report); "
                "expected COR_EINVAL\n",
                calls[call], what, WEXITSTATUS(st));
    }
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void *make_null(void)
{
    return NULL;
}
static void *make_unaligned_heap(void)
{
    char *p = malloc(256);
    return p + 1;
}
/* A 64-byte aligned pointer to the first byte of a page whose predecessor is unmapped: the
 * core may not look at memory before a pointer it does not know. */
static void *make_guarded_page(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) _exit(4);
    mprotect(m, (size_t)pg, PROT_NONE);
    memset(m + pg, 0, (size_t)pg);
    return m + pg;
}
/* A 64-byte aligned malloc block: the bytes before it are the allocator's. */
static void *make_aligned_heap(void)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, 256)) _exit(4);
    memset(p, 0, 256);
    return p;
}
/* A buffer released twice. */
static void *make_released(void)
{
    void *b = cor_getBuffer(COR_INT, 16);
    if (!b || cor_releaseBuffer(b) != COR_OK) _exit(5);
    return b;
}

static void test_release_bad(void)
{
    probe("NULL", P_RELEASE, make_null);
    probe("unaligned heap pointer", P_RELEASE, make_unaligned_heap);
    probe("64-aligned heap block", P_RELEASE, make_aligned_heap);
    probe("page after an unmapped page", P_RELEASE, make_guarded_page);
    probe("a buffer already released", P_RELEASE, make_released);
}

static void test_info_bad(void)
{
    probe("NULL", P_INFO, make_null);
    probe("unaligned heap pointer", P_INFO, make_unaligned_heap);
    probe("64-aligned heap block", P_INFO, make_aligned_heap);
    probe("page after an unmapped page", P_INFO, make_guarded_page);
    probe("a buffer already released", P_INFO, make_released);
}

static void test_sendI_bad(void)
{
    probe("NULL", P_SENDI, make_null);
    probe("64-aligned heap block", P_SENDI, make_aligned_heap);
    probe("page after an unmapped page", P_SENDI, make_guarded_page);
}

/* In-process: the cheap cases that must never touch memory. */
static void test_bad_inline(void)
{
    char stack[128];
    EXPECT_ERR(cor_releaseBuffer(NULL), COR_EINVAL);
    EXPECT_ERR(cor_buffer_info(NULL, NULL, NULL), COR_EINVAL);
    EXPECT_ERR(cor_releaseBuffer(stack + ((uintptr_t)stack % 64 == 1 ? 2 : 1)), COR_EINVAL);
    void *b = cor_getBuffer(COR_DOUBLE, 8);
    REQUIRE(b != NULL);
    EXPECT_ERR(cor_releaseBuffer((char *)b + 8), COR_EINVAL); /* inside a buffer */
    EXPECT_ERR(cor_buffer_info((char *)b + 1, NULL, NULL), COR_EINVAL);
    EXPECT_ERR(cor_releaseBuffer(b), COR_OK);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"every type and size", test_types_and_sizes},
        {"invalid type or size", test_invalid_requests},
        {"many live buffers", test_many_live},
        {"lookups while other threads churn", test_churn_lookups},
        {"bad pointers (no memory touched)", test_bad_inline},
        {"releaseBuffer of foreign pointers", test_release_bad},
        {"buffer_info of foreign pointers", test_info_bad},
        {"sendI of foreign pointers", test_sendI_bad},
        {NULL, NULL},
    };
    return ct_main("buffer", NULL, NULL, tests, 60);
}
