/*
 * peers: threads of one task send to several routed peers at once, each thread to every peer,
 * so that threads send to different peers and to the same peer concurrently; every peer takes
 * each thread's messages exactly once and in the thread's order.
 *
 * The master spawns `workers` workers (this program with "worker"), waits for each one's first
 * message (sent once it is enrolled: the pair takes the route), starts `threads` threads,
 * and each thread sends `count` numbered messages to every worker (thread t starts at worker
 * t, so the peers differ between threads at any moment). With `stop_ms` > 0 the master stops
 * worker 0 (SIGSTOP, seen stopped in /proc: the virtual machine is one host) before the threads
 * begin, and continues it stop_ms later: with the routes' dead time below stop_ms
 * (COR_GM_DEAD_MS, COR_UDP_DEAD_MS) the route gives that worker up while the threads send to it
 * and to the others, and what it did not confirm goes PVM's way. Each worker checks, per sending
 * thread, that the numbers come 0, 1, 2, ... (none lost, none twice, none out of order) and
 * reports to the master. Exit status 0 when every worker got everything in order. With `bytes`
 * > 0 every message is PvmDataRaw and carries that many bytes more, a pattern of its thread and
 * number that the worker checks: from COR_PVM_DETACH_MIN (32 KiB) they travel as a detached
 * piece after the image, so threads sending to one peer at once must keep each image with its
 * piece (a receiver takes the pieces in the order of the images). With `own`, thread t sends
 * to worker t only (as many threads as workers: every thread to a peer of its own), each its
 * own way (send_own: PvmDataRaw, pvm_psend, PvmDataInPlace, a buffer of pvm_mkbuf's). With
 * `exits`, the same with PvmDataRaw and PvmDataInPlace only (threads alternate), and each thread
 * ends right after one more pvm_initsend (without the big lock: a send buffer libpvm3 has not
 * installed yet); the master then counts libpvm3's message buffers (pvm_bufinfo of every id)
 * and fails if the ended threads left one each behind.
 *
 *   peers [workers [threads [count [stop_ms [bytes [all|own|exits]]]]]] (default 3 4 300 0 0 all)
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pvm3.h>

#include "pairs.h"

#define TAG_SEQ 31
#define TAG_VERDICT 32
#define TAG_READY 33
#define MAX_WORKERS 8
#define MAX_THREADS 16
#define WAIT_S PAIRS_WAIT_S

static int nworkers = 3, nthreads = 4, count = 300, stop_ms = 0, bytes = 0;
static bool own;   /* thread t sends to worker t only, its own way (send_own) */
static bool exits; /* own, Raw or InPlace, and a last pvm_initsend before the thread ends */
static int worker_tid[MAX_WORKERS];
static int send_errors[MAX_THREADS];

/* Thread t's message n to tid, one of four ways (t % 4): packed into a new PvmDataRaw buffer,
 * pvm_psend, PvmDataInPlace, or a buffer of its own (pvm_mkbuf, pvm_setsbuf, pvm_freebuf). */
static int send_own(int t, int n, int tid, char *data)
{
    int msg[3] = {t, n, ~n}, rc;
    switch (t % 4) {
    case 1: {
        char *all = malloc(sizeof msg + (size_t)bytes);
        if (!all) return PvmNoMem;
        memcpy(all, msg, sizeof msg);
        if (bytes) memcpy(all + sizeof msg, data, (size_t)bytes);
        rc = pvm_psend(tid, TAG_SEQ, all, (int)sizeof msg + bytes, PVM_BYTE);
        free(all);
        return rc;
    }
    case 3: {
        int mid = pvm_mkbuf(PvmDataRaw), old = mid > 0 ? pvm_setsbuf(mid) : mid;
        if (old > 0) pvm_freebuf(old);
        rc = old < 0 ? old : pvm_pkint(msg, 3, 1);
        if (rc >= 0 && bytes) rc = pvm_pkbyte(data, bytes, 1);
        if (rc >= 0) rc = pvm_send(tid, TAG_SEQ);
        if (mid > 0 && pvm_freebuf(mid) < 0 && rc >= 0) rc = PvmSysErr;
        return rc;
    }
    default:
        rc = pvm_initsend(t % 4 == 2 ? PvmDataInPlace : PvmDataRaw);
        if (rc >= 0) rc = pvm_pkint(msg, 3, 1);
        if (rc >= 0 && bytes) rc = pvm_pkbyte(data, bytes, 1);
        return rc >= 0 ? pvm_send(tid, TAG_SEQ) : rc;
    }
}

static void *sender(void *arg)
{
    int t = (int)(long)arg;
    char *data = bytes ? malloc((size_t)bytes) : NULL;
    if (bytes && !data) {
        send_errors[t]++;
        return NULL;
    }
    for (int n = 0; n < count; n++)
        for (int k = 0; k < (own ? 1 : nworkers); k++) {
            int w = (t + k) % nworkers, msg[3] = {t, n, ~n}, rc;
            if (bytes) pairs_pattern(data, bytes, t, n);
            if (own) {
                rc = send_own(exits ? t % 2 * 2 : t, n, worker_tid[w], data);
            } else {
                rc = pvm_initsend(bytes ? PvmDataRaw : PvmDataDefault);
                if (rc >= 0) rc = pvm_pkint(msg, 3, 1);
                if (rc >= 0 && bytes) rc = pvm_pkbyte(data, bytes, 1);
                if (rc >= 0) rc = pvm_send(worker_tid[w], TAG_SEQ);
            }
            if (rc < 0 && send_errors[t]++ < 3)
                fprintf(stderr, "peers: thread %d, message %d to t%x: %d\n", t, n, worker_tid[w],
                        rc);
        }
    /* (send_own's PvmDataInPlace message refers to data: a new buffer before it goes) */
    if (exits && pvm_initsend(t % 2 ? PvmDataInPlace : PvmDataRaw) < 0) send_errors[t]++;
    free(data);
    return NULL;
}

/* libpvm3's message buffers now: the ids that pvm_bufinfo knows (they are small numbers). */
static int live_buffers(void)
{
    int autoerr = pvm_setopt(PvmAutoErr, 0), n = 0, len, tag, tid;
    for (int mid = 1; mid <= 65536; mid++)
        n += pvm_bufinfo(mid, &len, &tag, &tid) >= 0;
    pvm_setopt(PvmAutoErr, autoerr);
    return n;
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The pid of task tid (the virtual machine is one host: the test's), or -1. */
static pid_t pid_of(int tid)
{
    struct pvmtaskinfo *ti;
    int n = 0;
    if (pvm_tasks(0, &n, &ti) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (ti[i].ti_tid == tid) return ti[i].ti_pid;
    return -1;
}

/* Whether process pid is stopped (its /proc state T), looking for at most 5 s. */
static bool stopped(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 500; i++, pause_ms(10)) {
        FILE *f = fopen(path, "r");
        char *close = f && fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        if (f) fclose(f);
        if (close && (close[2] == 'T' || close[2] == 't')) return true;
    }
    return false;
}

/* Takes `expect` messages from the master's threads (numbers below `threads`). */
static int worker(int threads, int expect)
{
    int master = pvm_parent(), next[MAX_THREADS] = {0}, got = 0, bad = 0;
    struct timeval tv = {WAIT_S, 0};
    char *data = bytes ? malloc((size_t)bytes) : NULL, *want = bytes ? malloc((size_t)bytes) : NULL;
    if (bytes && (!data || !want)) return 1;
    pairs_ready(TAG_READY);
    while (got < expect) {
        int buf = pvm_trecv(master, TAG_SEQ, &tv), msg[3] = {-1, -1, 0};
        if (buf <= 0) {
            fprintf(stderr, "peers worker t%x: %d of %d, then nothing (%d)\n", pvm_mytid(), got,
                    expect, buf);
            bad++;
            break;
        }
        got++;
        if (pvm_upkint(msg, 3, 1) < 0 || msg[0] < 0 || msg[0] >= threads || msg[2] != ~msg[1]) {
            if (bad++ < 5) fprintf(stderr, "peers worker: malformed message\n");
            continue;
        }
        int t = msg[0];
        if (bytes) {
            pairs_pattern(want, bytes, t, msg[1]);
            if ((pvm_upkbyte(data, bytes, 1) < 0 || memcmp(data, want, (size_t)bytes)) && bad++ < 5)
                fprintf(stderr, "peers worker t%x: thread %d's message %d: wrong payload\n",
                        pvm_mytid(), t, msg[1]);
        }
        if (msg[1] != next[t] && bad++ < 5)
            fprintf(stderr, "peers worker t%x: thread %d's message %d came as #%d\n", pvm_mytid(),
                    t, msg[1], next[t]);
        if (msg[1] >= next[t]) next[t] = msg[1] + 1;
    }
    int verdict[2] = {got, bad};
    pvm_initsend(PvmDataDefault);
    pvm_pkint(verdict, 2, 1);
    pvm_send(master, TAG_VERDICT);
    pvm_exit();
    free(data);
    free(want);
    return bad != 0;
}

int main(int argc, char **argv)
{
    if (pvm_mytid() < 0) return 1;
    if (argc == 6 && !strcmp(argv[1], "worker")) {
        bytes = (int)pairs_number(argv[4], 0, 1 << 24, "bytes");
        return worker((int)pairs_number(argv[2], 1, MAX_THREADS, "threads"),
                      (int)pairs_number(argv[5], 1, 1000000000, "expect"));
    }
    if (argc > 1) nworkers = (int)pairs_number(argv[1], 1, MAX_WORKERS, "workers");
    if (argc > 2) nthreads = (int)pairs_number(argv[2], 1, MAX_THREADS, "threads");
    if (argc > 3) count = (int)pairs_number(argv[3], 1, 1000000, "count");
    if (argc > 4) stop_ms = (int)pairs_number(argv[4], 0, 60000, "stop_ms");
    if (argc > 5) bytes = (int)pairs_number(argv[5], 0, 1 << 24, "bytes");
    if (argc > 6) exits = !strcmp(argv[6], "exits");
    if (argc > 6) own = exits || !strcmp(argv[6], "own");
    if (own && nthreads != nworkers) {
        fprintf(stderr, "peers: 'own' needs as many threads as workers\n");
        return 2;
    }
    int expect = own ? count : nthreads * count;
    char t_arg[16], n_arg[16], b_arg[16], e_arg[16];
    char *wargv[] = {"worker", t_arg, n_arg, b_arg, e_arg, NULL};
    snprintf(b_arg, sizeof b_arg, "%d", bytes);
    snprintf(t_arg, sizeof t_arg, "%d", nthreads);
    snprintf(n_arg, sizeof n_arg, "%d", count);
    snprintf(e_arg, sizeof e_arg, "%d", expect);
    if (!pairs_start(argv[0], wargv, NULL, nworkers, worker_tid, TAG_READY)) return 1;
    pid_t stop_pid = stop_ms ? pid_of(worker_tid[0]) : 0;
    if (stop_pid < 0 || (stop_pid && (kill(stop_pid, SIGSTOP) || !stopped(stop_pid)))) {
        fprintf(stderr, "peers: cannot stop worker t%x (pid %d)\n", worker_tid[0], (int)stop_pid);
        pvm_exit();
        return 1;
    }
    int buffers_before = exits ? live_buffers() : 0;
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, sender, (void *)(long)t)) {
            fprintf(stderr, "peers: cannot start thread %d\n", t);
            return 1; /* (the workers end at their timeout) */
        }
    if (stop_pid) { /* worker 0, stopped before the threads began, beyond the dead time */
        pause_ms(stop_ms);
        kill(stop_pid, SIGCONT);
    }
    int errors = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        errors += send_errors[t];
    }
    for (int w = 0; w < nworkers; w++) {
        struct timeval tv = {WAIT_S, 0};
        int verdict[2] = {0, 1};
        if (pvm_trecv(worker_tid[w], TAG_VERDICT, &tv) <= 0 || pvm_upkint(verdict, 2, 1) < 0) {
            fprintf(stderr, "peers: no verdict from worker t%x\n", worker_tid[w]);
            errors++;
        } else if (verdict[0] != expect || verdict[1]) {
            fprintf(stderr, "peers: worker t%x got %d of %d, %d wrong\n", worker_tid[w], verdict[0],
                    expect, verdict[1]);
            errors++;
        }
    }
    if (exits) { /* (the master's receive buffer was a READY, now a verdict: as many) */
        int left = live_buffers() - buffers_before;
        printf("peers: %d message buffer(s) more after %d threads ended\n", left, nthreads);
        if (left >= (nthreads + 1) / 2) {
            fprintf(stderr, "peers: the ended threads left %d message buffers behind\n", left);
            errors++;
        }
    }
    if (!errors)
        printf("peers: %d workers x %d threads x %d messages of %d B more%s%s: complete and in "
               "order\n",
               nworkers, nthreads, count, bytes, own ? ", each thread to its own worker" : "",
               stop_ms ? " across a give-up" : "");
    pvm_exit();
    return errors != 0;
}
