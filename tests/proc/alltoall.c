/*
 * alltoall: every domain sends one message to every other domain and receives one from each
 * (checking its source and value), then reports what its start-up cost: how long cor_init
 * took, its resident memory, its open descriptors and threads once every message arrived.
 * Uses cor.h only; run under any launcher (cor-run, mpirun, srun). scripts/bench-scale runs
 * it for N = 4 .. 256 and prints the growth; tests/proc/scale.sh runs it small in the suite.
 *
 *   alltoall [-s]
 *   -s  skip the messages: cor_init and cor_finalize only (proc/latedeath.sh)
 * Output: "alltoall: domain R of N: PASS init_ms X init_cpu_ms C up_at U rss_kb Y heap_kb H fds Z
 * threads T" (X: this domain's cor_init; C: the CPU time, user and system, of the process
 * when cor_init returned; U: when cor_init returned, seconds since the epoch, to compare with
 * when the launcher started: scripts/bench-scale; H: bytes malloc'd and still in use,
 * mallinfo2), or FAIL lines;
 * exit status 0 only if every message arrived with the right value.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cor/cor.h"
#include "proc_util.h"

#define TAG 7

/* Entries of a /proc folder, without "." and "..". */
static long count_dir(const char *path)
{
    DIR *d = opendir(path);
    long n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static long value_of(int src, int dst)
{
    return (long)(mix64(((uint64_t)src << 32) | (uint64_t)dst) & 0x7fffffff);
}

int main(int argc, char **argv)
{
    double t0 = now_s();
    int rc = cor_init(&argc, &argv);
    double init_ms = (now_s() - t0) * 1e3;
    struct timespec up;
    clock_gettime(CLOCK_REALTIME, &up); /* the launcher's clock: bench-scale's date +%s.%N */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread of ours so far: the start-up's CPU */
    double init_cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-3;
    if (rc != COR_OK) {
        fprintf(stderr, "alltoall: cor_init: %s\n", cor_strerror(rc));
        return 1;
    }
    int me = cor_domain_rank(), n = cor_domain_count(), bad = 0;
    int talk = !(argc > 1 && strcmp(argv[1], "-s") == 0) ? n : 0; /* domains to talk to */
    char *posted = calloc((size_t)n, 1);
    long *got = calloc((size_t)n, sizeof *got);
    cor_req_t *req = calloc((size_t)n, sizeof *req);
    if (!got || !req || !posted) {
        fprintf(stderr, "alltoall: domain %d: out of memory\n", me);
        return 1;
    }
    for (int s = 0; s < talk; s++) {
        if (s == me) continue;
        rc = cor_recvI_into(cor_task_idp(s, 0), COR_CTX_WORLD, TAG, COR_LONG, &got[s], 1, &req[s]);
        if (rc != COR_OK) {
            printf("alltoall: domain %d: FAIL recvI from %d: %s\n", me, s, cor_strerror(rc));
            bad++;
        } else {
            posted[s] = 1;
        }
    }
    /* Start with the next domain, so the N senders do not all hit domain 0 first. */
    for (int k = 1; k < talk; k++) {
        int d = (me + k) % n;
        long v = value_of(me, d);
        rc = cor_send(cor_task_idp(d, 0), COR_CTX_WORLD, TAG, COR_LONG, &v, 1);
        if (rc != COR_OK) {
            printf("alltoall: domain %d: FAIL send to %d: %s\n", me, d, cor_strerror(rc));
            bad++;
        }
    }
    for (int s = 0; s < talk; s++) {
        if (!posted[s]) continue;
        cor_status_t st;
        rc = cor_wait(&req[s], &st);
        if (rc != COR_OK || st.error != COR_OK) {
            printf("alltoall: domain %d: FAIL receive from %d: %s\n", me, s,
                   cor_strerror(rc != COR_OK ? rc : st.error));
            bad++;
        } else if (got[s] != value_of(s, me)) {
            printf("alltoall: domain %d: FAIL from %d: got %ld, expected %ld\n", me, s, got[s],
                   value_of(s, me));
            bad++;
        }
    }
    /* opendir's own descriptor is not the domain's */
    long rss = rss_kb(), fds = count_dir("/proc/self/fd") - 1, thr = count_dir("/proc/self/task");
    struct mallinfo2 mi = mallinfo2(); /* heap bytes in use, every arena */
    if (!bad)
        printf("alltoall: domain %d of %d: PASS init_ms %.1f init_cpu_ms %.1f up_at %lld.%06ld "
               "rss_kb %ld heap_kb %zu fds %ld threads %ld\n",
               me, n, init_ms, init_cpu_ms, (long long)up.tv_sec, up.tv_nsec / 1000, rss,
               (mi.uordblks + mi.hblkhd) / 1024, fds, thr);
    fflush(stdout);
    free(got);
    free(req);
    free(posted);
    rc = cor_finalize();
    if (rc != COR_OK) {
        printf("alltoall: domain %d: FAIL cor_finalize: %s\n", me, cor_strerror(rc));
        bad++;
    }
    return bad ? 1 : 0;
}
