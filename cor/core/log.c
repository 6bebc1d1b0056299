/* Diagnostics and small helpers shared by the core's files. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void cor__log(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cor[%d]: %s\n", g.rank, line);
}

void cor__fatal(const char *what, const char *file, int line)
{
    fprintf(stderr, "cor: internal error: %s failed at %s:%d\n", what, file, line);
    abort();
}

uint64_t cor__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* pthread_cond_timedwait for a relative time. */
void cor__cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *lock, long ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec += ns % 1000000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(cond, lock, &ts);
}
