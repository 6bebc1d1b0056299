/*
 * Helpers shared by the DSM applications (gups, lu): a clock, strict number and option parsing,
 * a counter-based generator and the fatal-error exit. Header-only: each program is one file.
 */
#ifndef COR_APP_H
#define COR_APP_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double app_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* CPU time of the whole process (all its threads). */
static inline double app_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Prints the message and leaves the process at once: a domain that fails must not wait in a
 * barrier for peers that will never come; cor-run sees the status and stops the others. */
static void app_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void app_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

/* Parses a decimal number with an optional K/M/G suffix (powers of 2) into [min, max].
 * Returns 0, or prints why not and returns -1. */
static inline int app_parse_u64(const char *prog, const char *opt, const char *s, uint64_t min,
                                uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || *s < '0' || *s > '9') goto bad;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) goto bad;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift) {
        end++;
        if (v > (UINT64_MAX >> shift)) goto bad;
        v <<= shift;
    }
    if (*end || v < min || v > max) goto bad;
    *out = v;
    return 0;
bad:
    fprintf(stderr, "%s: %s wants a number in [%" PRIu64 ", %" PRIu64 "], not '%s'\n", prog, opt,
            min, max, s ? s : "(missing)");
    return -1;
}

/* One command-line option: a flag (sets *flag to 1) or a number (app_parse_u64 into *value,
 * within [min, max]). A table of them ends with a null name. */
struct app_opt {
    const char *name;
    int *flag;
    uint64_t *value;
    uint64_t min, max;
};

/* Parses argv against opts. Returns -1 to go on, or the status to exit with at once: 0 after
 * -h/--help printed the usage, 2 after a bad or unknown argument (said, then the usage). */
static inline int app_parse_args(const char *prog, int argc, char **argv,
                                 const struct app_opt *opts, void (*usage)(void))
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        const struct app_opt *o = opts;
        while (o->name && strcmp(o->name, a))
            o++;
        if (!o->name) {
            fprintf(stderr, "%s: unknown argument '%s'\n", prog, a);
            usage();
            return 2;
        }
        if (o->flag) {
            *o->flag = 1;
            continue;
        }
        if (app_parse_u64(prog, a, v, o->min, o->max, o->value)) return 2;
        i++;
    }
    return -1;
}

/* SplitMix64's output function: a good 64-bit mix, so mix(seed + k * odd) is a fixed-seed
 * stream that any domain can replay from (seed, k) alone. */
static inline uint64_t app_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

#define APP_GOLDEN UINT64_C(0x9e3779b97f4a7c15)

#endif /* COR_APP_H */
