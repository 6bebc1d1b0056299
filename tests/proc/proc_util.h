/*
 * Small helpers the process-test programs share: a monotonic clock in seconds, a 64-bit
 * mixer (SplitMix64's finalizer) for message patterns and checksums, and the resident memory.
 */
#ifndef COR_TESTS_PROC_UTIL_H
#define COR_TESTS_PROC_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

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
