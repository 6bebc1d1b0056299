/*
 * stopinlock.so - preloaded into a domain by tests/proc/starve.sh: stops that process (SIGSTOP)
 * right after it took its own shm queue lock, so the stop lands inside the hold.
 *
 * libfabric 1.17's shm provider takes a region's spin lock (glibc's pthread_spin_lock) for
 * every send to that region and while the region's owner reads its queue. A process stopped
 * inside that short hold keeps every later send to it spinning inside the provider, which a
 * plain SIGSTOP hits only now and then (on a loaded machine). This library makes it certain.
 *
 * Active only in the domain whose COR_RANK is STOPINLOCK_RANK (default 0; "any": whatever
 * COR_RANK says, e.g. a PVM task the test preloads it into alone), and only once the
 * file STOPINLOCK_FILE exists (a thread looks every 10 ms): then it finds the shm regions it
 * has mapped, its own (the name carries ".<pid in hex>.": shm endpoint names are
 * `<namespace>-<node>-<port>.<pid>.<n>`, libfabric writes the pid in hex) and its peers'.
 * After its next send to a peer (a lock in the peer's region, at the offset of the queue lock
 * in every region: an ack or credits, which make the peer send to us at once) the next time
 * it takes the lock at that offset in its own region stops the process once the lock is
 * taken, after one line on stderr. Stopped at any other time, the peer
 * often has nothing to send us (its window full of unacknowledged sends) and never meets
 * the lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANGES 8

static int (*real_lock)(pthread_spinlock_t *);
static const char *trigger;
static uintptr_t lo[MAX_RANGES], hi[MAX_RANGES];
static int own[MAX_RANGES]; /* 1: our region, 0: a peer's */
static _Atomic int nranges;
static uintptr_t lock_off; /* offset of the lock a send takes in its target's region */
static _Atomic int armed;  /* 1: waiting for a send to a peer, 2: then for our lock; 0 after */

/* The shm regions we have mapped, from /proc/self/maps: ours and our peers'. */
static int find_ranges(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char needle[32], line[1024];
    snprintf(needle, sizeof needle, ".%x.", (unsigned)getpid()); /* libfabric: hex */
    int n = 0, ours = 0;
    while (n < MAX_RANGES && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char *path = strchr(line, '/');
        if (!path || strncmp(path, "/dev/shm/", 9) != 0 || strstr(path, ".lock")) continue;
        if (sscanf(line, "%lx-%lx", &a, &b) != 2) continue;
        lo[n] = a;
        hi[n] = b;
        own[n] = strstr(path, needle) != NULL;
        ours += own[n];
        n++;
    }
    fclose(f);
    return ours ? n : 0;
}

static void *poller(void *arg)
{
    (void)arg;
    struct stat st;
    for (int i = 0; i < 30000; i++) { /* 5 minutes at most */
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        if (stat(trigger, &st) != 0) continue;
        int n = find_ranges();
        if (!n) {
            fprintf(stderr, "stopinlock: no shm region of ours mapped\n");
            return NULL;
        }
        atomic_store(&nranges, n);
        atomic_store(&armed, 1);
        return NULL;
    }
    return NULL;
}

__attribute__((constructor)) static void init(void)
{
    real_lock = (int (*)(pthread_spinlock_t *))dlsym(RTLD_NEXT, "pthread_spin_lock");
    const char *rank = getenv("COR_RANK"), *want = getenv("STOPINLOCK_RANK");
    trigger = getenv("STOPINLOCK_FILE");
    bool any = want && !strcmp(want, "any"); /* a process that is no launched domain (PVM) */
    if (!trigger || (!any && (!rank || strcmp(rank, want ? want : "0") != 0))) return;
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, poller, NULL) == 0) pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int pthread_spin_lock(pthread_spinlock_t *l)
{
    if (!real_lock) /* a constructor that ran before ours */
        real_lock = (int (*)(pthread_spinlock_t *))dlsym(RTLD_NEXT, "pthread_spin_lock");
    int rc = real_lock(l);
    int state = atomic_load_explicit(&armed, memory_order_relaxed);
    if (!state) return rc;
    uintptr_t a = (uintptr_t)l;
    int n = atomic_load(&nranges);
    for (int i = 0; i < n; i++) {
        if (a < lo[i] || a >= hi[i]) continue;
        if (!own[i]) { /* a send to a peer (an ack or credits): its answer comes at once */
            if (state == 1) {
                lock_off = a - lo[i]; /* where a region's queue lock lies */
                atomic_store(&armed, 2);
            }
        } else if (state == 2 && a - lo[i] == lock_off && atomic_exchange(&armed, 0)) {
            static const char msg[] = "stopinlock: stopped holding our shm queue lock\n";
            ssize_t w = write(2, msg, sizeof msg - 1);
            (void)w;
            /* Held a moment first: the peer's answer to what we just sent meets the lock
             * (stopped at once, it often came before the stop and left the peer waiting for
             * our reply, with nothing to send us) */
            struct timespec hold = {0, 100000000};
            nanosleep(&hold, NULL);
            kill(getpid(), SIGSTOP);
        }
        break;
    }
    return rc;
}
