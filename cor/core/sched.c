/*
 * Threads that serve others (listeners, dispatchers, a library's service thread) must run
 * soon after they wake, even while every CPU computes. Linux's fair scheduler (EEVDF, 6.12+)
 * lets a thread ask for a short time slice without privilege: a woken thread with a short
 * slice has the earliest deadline and preempts a computing one at once, where with the
 * default slice (about 3 ms on 2 CPUs) it waits for the current slice to end.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* The kernel's struct sched_attr (sched_setattr(2)); glibc does not declare it. */
struct sched_attr_v1 {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
};

COR_API int cor_thread_attentive(void)
{
    long us = g.service_slice_us;
    if (us == 0) return COR_OK;
#ifdef SYS_sched_setattr
    struct sched_attr_v1 a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0) return COR_EIO;
    if (a.policy != 0) return COR_OK; /* SCHED_OTHER only: leave real-time or batch alone */
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = (uint64_t)us * 1000; /* the kernel clamps it to 0.1..100 ms */
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) return COR_EIO;
    /* Kernels before 6.12 accept and ignore the slice of a fair thread. */
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0 || a.runtime == 0) return COR_ENOTSUP;
    return COR_OK;
#else
    return COR_ENOTSUP;
#endif
}

/* /proc/loadavg, opened once and kept: a pread of it costs ~1.3 us on a virtual machine where
 * an open, read and close cost ~5.6. */
static _Atomic int loadavg_fd = -2; /* -2: not opened yet; -1: cannot be */

static int loadavg_open(void)
{
    int fd = atomic_load_explicit(&loadavg_fd, memory_order_acquire);
    if (fd != -2) return fd;
    int mine = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    int expect = -2;
    if (atomic_compare_exchange_strong(&loadavg_fd, &expect, mine < 0 ? -1 : mine)) return mine;
    if (mine >= 0) close(mine); /* another thread opened it first */
    return expect;
}

COR_API int cor_cpus_busy(void)
{
    static _Atomic long ncpus;
    long cpus = atomic_load_explicit(&ncpus, memory_order_relaxed);
    if (cpus == 0) {
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus < 1) cpus = 1;
        atomic_store_explicit(&ncpus, cpus, memory_order_relaxed);
    }
    int fd = loadavg_open();
    char buf[128];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return 0;
    buf[n] = 0;
    /* "0.52 0.58 0.59 3/467 12345": the fourth field, found by its spaces (the load averages'
     * decimal point is not the locale's) */
    const char *f = buf;
    for (int i = 0; i < 3 && f; i++)
        if ((f = strchr(f, ' '))) f++;
    char *end;
    long running = f ? strtol(f, &end, 10) : 0;
    return f && end != f && *end == '/' && running > cpus;
}

/* Names the calling thread (15 characters at most; longer names are cut) so that top -H,
 * perf and gdb tell the core's threads and the tasks apart. */
void cor__thread_name(const char *fmt, ...)
{
    char name[16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    prctl(PR_SET_NAME, name, 0, 0, 0);
}
