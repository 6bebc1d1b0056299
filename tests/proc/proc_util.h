/*
 * The helpers every process-test program (one domain of a session cor-run started) shares:
 * failures reported and counted (pt_fail, PT_CHECK), a stall watchdog, a monotonic clock in
 * seconds, a 64-bit mixer (SplitMix64's finalizer) for message patterns and checksums, and
 * the resident memory. Included by one file per program (the state below is static).
 */
#ifndef COR_TESTS_PROC_UTIL_H
#define COR_TESTS_PROC_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Set first: the program's name and its domain's rank, for every message below. */
__attribute__((unused)) static const char *pt_name = "test";
__attribute__((unused)) static int pt_rank = -1;
/* Every failure reported so far: the program's exit status depends on it. */
__attribute__((unused)) static _Atomic long pt_failures;

static inline void pt_vfail(const char *fmt, va_list ap)
{
    if (atomic_fetch_add(&pt_failures, 1) >= 20) return; /* enough said: only counted */
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "%s: domain %d: FAIL %s\n", pt_name, pt_rank, msg);
}

/* Reports a failure, "NAME: domain R: FAIL message" on stderr (the first 20), and counts it.
 * Any thread may call it. */
__attribute__((format(printf, 1, 2))) static inline void pt_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_vfail(fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static inline void pt_check_failed(const char *cond,
                                                                         const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pt_fail("expected %s: %s", cond, msg);
}

/* PT_CHECK(cond, fmt, ...): a failure naming cond and saying what was seen when cond is false. */
#define PT_CHECK(c, ...)                                                                           \
    do {                                                                                           \
        if (!(c)) pt_check_failed(#c, __VA_ARGS__);                                                \
    } while (0)

/* The stall watchdog: the program's script would kill a hung domain without a word, so while
 * *done is 0 a thread looks at *ticks every second (the program adds 1 at each completed
 * operation); when it has not moved for stall_s seconds it prints "NAME: domain R: FAIL
 * nothing completed for S s: WHAT" and ends the process with `status`. */
struct pt_watch {
    _Atomic long *ticks;
    atomic_int *done;
    int stall_s, status;
    const char *what;
};

static inline void *pt_watchdog_main(void *arg)
{
    struct pt_watch *w = arg;
    long last = -1;
    int idle = 0;
    while (!atomic_load(w->done)) {
        sleep(1);
        long t = atomic_load(w->ticks);
        idle = t == last ? idle + 1 : 0;
        last = t;
        if (idle >= w->stall_s) {
            fprintf(stderr, "%s: domain %d: FAIL nothing completed for %d s: %s\n", pt_name,
                    pt_rank, w->stall_s, w->what);
            _exit(w->status);
        }
    }
    return NULL;
}

/* Starts the watchdog (detached; it ends when *done is set). 0, or -1 if it could not. */
static inline int pt_watchdog_start(_Atomic long *ticks, atomic_int *done, int stall_s, int status,
                                    const char *what)
{
    static struct pt_watch w;
    w = (struct pt_watch){ticks, done, stall_s, status, what};
    pthread_t t;
    if (pthread_create(&t, NULL, pt_watchdog_main, &w) != 0) return -1;
    pthread_detach(t);
    return 0;
}

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Resident memory in KiB, from /proc/self/status; 0 if unreadable. */
static inline long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

#endif
