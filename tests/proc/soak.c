/*
 * soak: a long run for scripts/soak (not part of the suite). Each domain runs -t tasks;
 * task i of domain r streams messages of mixed sizes (0 B to -x bytes, mostly small) to
 * task i of domain r+1 (a ring) for -d seconds, then an end message carrying its count, and
 * receives the same from task i of domain r-1, checking size, content and order of each.
 * The main thread samples its own resident memory (VmRSS) every 200 ms after the -W seconds
 * of warm-up, while the traffic runs, and counts its open descriptors (/proc/self/fd) after
 * warm-up and just before the end.
 *
 *   soak [-t TASKS] [-d SECONDS] [-W WARMUP_S] [-x MAXBYTES]
 * Output: "soak: domain R: PASS ..." (or FAIL with reasons): messages and bytes, mean RSS
 * in the first and in the last fifth of the time after warm-up, its peak, descriptors at
 * both points. FAIL if anything was lost, reordered or damaged, the mean RSS grew 5% or more
 * from the first fifth to the last, or descriptors leaked.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cor/cor.h"
#include "proc_util.h"

#define TAG_END 0x7ffffff0

static int ntasks = 16, rank, ndom;
static double duration = 60, warmup = 15;
static size_t maxsize = 1u << 20;
static _Atomic uint64_t msgs_recv, bytes_recv;

/* Size of message k from domain src's task i: both ends compute it. */
static size_t msg_size(int src, int i, uint32_t k)
{
    uint64_t h = mix64(((uint64_t)src << 48) ^ ((uint64_t)i << 32) ^ k);
    unsigned r = (unsigned)(h % 1000);
    size_t lo, hi;
    if (r < 10)
        lo = 256u << 10, hi = maxsize;
    else if (r < 100)
        lo = 16u << 10, hi = 256u << 10;
    else if (r < 400)
        lo = 257, hi = 16u << 10;
    else
        lo = 0, hi = 256;
    if (hi > maxsize) hi = maxsize;
    if (lo > hi) lo = hi;
    return lo + (size_t)((h >> 20) % (hi - lo + 1));
}

static unsigned char byte_at(int src, int i, uint32_t k, size_t off)
{
    return (unsigned char)(off * 131u + k * 7u + (unsigned)src * 17u + (unsigned)i);
}

static int task_main(void *arg)
{
    int i = (int)(intptr_t)arg;
    int to = (rank + 1) % ndom, from = (rank + ndom - 1) % ndom;
    cor_idp_t dst = cor_task_idp(to, i), src = cor_task_idp(from, i);
    unsigned char *sbuf = malloc(maxsize ? maxsize : 1), *rbuf = malloc(maxsize ? maxsize : 1);
    if (!sbuf || !rbuf) {
        pt_fail("task %d: out of memory", i);
        goto out;
    }
    double end = now_s() + duration;
    uint32_t sent = 0, got = 0;
    int sender_done = 0, receiver_done = 0;
    while (!receiver_done) {
        cor_req_t sr = COR_REQ_NULL;
        int err;
        if (!sender_done) {
            if (now_s() >= end) {
                err =
                    cor_sendI_typed(dst, COR_CTX_WORLD, TAG_END, COR_BYTE, &sent, sizeof sent, &sr);
                sender_done = 1;
            } else {
                size_t n = msg_size(rank, i, sent);
                for (size_t o = 0; o < n; o++)
                    sbuf[o] = byte_at(rank, i, sent, o);
                err = cor_sendI_typed(dst, COR_CTX_WORLD, (int)(sent % TAG_END), COR_BYTE, sbuf, n,
                                      &sr);
                sent++;
            }
            if (err) {
                pt_fail("task %d: sendI %u: %s", i, sent, cor_strerror(err));
                break;
            }
        }
        cor_status_t st;
        err = cor_recv(src, COR_CTX_WORLD, COR_ANY_TAG, COR_BYTE, rbuf, maxsize, &st);
        if (err) {
            pt_fail("task %d: recv %u: %s", i, got, cor_strerror(err));
            break;
        }
        if (st.tag == TAG_END) {
            uint32_t count;
            memcpy(&count, rbuf, sizeof count);
            if (st.count != 4 || count != got)
                pt_fail("task %d: end after %u messages, the sender says %u", i, got, count);
            receiver_done = 1;
        } else {
            size_t n = msg_size(from, i, got), bad = n;
            if (st.tag != (int)(got % TAG_END) || st.count != n) {
                pt_fail("task %d: message %u: tag %d, %zu bytes, expected tag %u, %zu bytes", i,
                        got, st.tag, (size_t)st.count, got % TAG_END, n);
                break;
            }
            for (size_t o = 0; o < n && bad == n; o++)
                if (rbuf[o] != byte_at(from, i, got, o)) bad = o;
            if (bad != n) {
                pt_fail("task %d: message %u of %zu bytes damaged at byte %zu", i, got, n, bad);
                break;
            }
            atomic_fetch_add(&msgs_recv, 1);
            atomic_fetch_add(&bytes_recv, n);
            got++;
        }
        if (sr != COR_REQ_NULL && (err = cor_wait(&sr, NULL)) != COR_OK) {
            pt_fail("task %d: send %u: %s", i, sent, cor_strerror(err));
            break;
        }
    }
    /* Our predecessor may end before our own clock says so: our successor still needs our
     * end message. */
    if (!sender_done &&
        cor_send(dst, COR_CTX_WORLD, TAG_END, COR_BYTE, &sent, sizeof sent) != COR_OK)
        pt_fail("task %d: end message", i);
out:
    free(sbuf);
    free(rbuf);
    return 0;
}

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

int main(int argc, char **argv)
{
    pt_name = "soak";
    int opt;
    while ((opt = getopt(argc, argv, "t:d:W:x:")) != -1) {
        switch (opt) {
        case 't':
            ntasks = atoi(optarg);
            break;
        case 'd':
            duration = atof(optarg);
            break;
        case 'W':
            warmup = atof(optarg);
            break;
        case 'x':
            maxsize = (size_t)atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: soak [-t TASKS] [-d S] [-W S] [-x BYTES]\n");
            return 2;
        }
    }
    if (ntasks < 1 || ntasks > 256 || duration <= 0 || warmup < 0 || warmup >= duration ||
        maxsize > (64u << 20)) {
        fprintf(stderr, "soak: bad arguments (-t 1..256, -d > -W >= 0, -x at most 64 MiB)\n");
        return 2;
    }
    alarm((unsigned)(duration + 600));
    int err = cor_init(NULL, NULL);
    if (err) {
        fprintf(stderr, "soak: cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    rank = pt_rank = cor_domain_rank();
    ndom = cor_domain_count();
    if (ndom < 2) {
        fprintf(stderr, "soak: needs at least 2 domains\n");
        cor_finalize();
        return 1;
    }
    cor_idp_t *ids = calloc((size_t)ntasks, sizeof *ids);
    if (!ids) return 1;
    for (int i = 0; i < ntasks; i++) {
        char name[32];
        snprintf(name, sizeof name, "soak%d", i + 1);
        err = cor_task_spawn(name, task_main, (void *)(intptr_t)(i + 1), &ids[i]);
        if (err) pt_fail("spawn %d: %s", i + 1, cor_strerror(err));
    }
    /* RSS sampled every 200 ms while the traffic runs: "flat" compares the mean of the first
     * fifth after warm-up with the mean of the last fifth (single samples swing with the
     * megabyte messages in flight). */
    double t0 = now_s();
    while (now_s() - t0 < warmup)
        usleep(100000);
    int fds_warm = fd_count();
    double span = duration - warmup, early_sum = 0, late_sum = 0;
    long early_n = 0, late_n = 0, rss_peak = 0;
    double tenth_sum[10] = {0};
    long tenth_n[10] = {0};
    for (double t; (t = now_s() - t0) < duration - 0.5;) {
        long r = rss_kb();
        if (r > rss_peak) rss_peak = r;
        int tenth = (int)((t - warmup) * 10 / span);
        if (tenth >= 0 && tenth < 10) tenth_sum[tenth] += (double)r, tenth_n[tenth]++;
        if (t < warmup + span / 5)
            early_sum += (double)r, early_n++;
        else if (t >= duration - span / 5)
            late_sum += (double)r, late_n++;
        usleep(200000);
    }
    int fds_late = fd_count();
    double early = early_n ? early_sum / (double)early_n : 0,
           late = late_n ? late_sum / (double)late_n : 0;
    for (int i = 0; i < ntasks; i++)
        if (ids[i] != COR_IDP_NULL && (err = cor_task_join(ids[i], NULL)) != COR_OK)
            pt_fail("join %d: %s", i + 1, cor_strerror(err));
    double growth = early > 0 ? 100.0 * (late - early) / early : 0;
    if (!early_n || !late_n) pt_fail("too few RSS samples (%ld, %ld): run longer", early_n, late_n);
    if (growth >= 5.0)
        pt_fail("RSS grew %.1f%% after warm-up (%.0f -> %.0f KiB)", growth, early, late);
    if (fds_late != fds_warm)
        pt_fail("descriptors %d after warm-up, %d at the end", fds_warm, fds_late);
    err = cor_finalize();
    if (err) pt_fail("finalize: %s", cor_strerror(err));
    printf("soak: domain %d: %s %llu messages %llu bytes in %.0f s; RSS (mean) %.0f KiB just "
           "after the %.0f s warm-up, %.0f KiB at the end (%+.1f%%), peak %ld KiB; descriptors "
           "%d -> %d\n",
           rank, pt_failures ? "FAIL" : "PASS", (unsigned long long)msgs_recv,
           (unsigned long long)bytes_recv, now_s() - t0, early, warmup, late, growth, rss_peak,
           fds_warm, fds_late);
    /* The curve, so a reader can tell a plateau from a steady climb. */
    char curve[256];
    size_t used = 0;
    for (int k = 0; k < 10; k++)
        used += (size_t)snprintf(curve + used, sizeof curve - used, " %.0f",
                                 tenth_n[k] ? tenth_sum[k] / (double)tenth_n[k] : 0.0);
    printf("soak: domain %d: mean RSS (KiB) per tenth of the time after warm-up:%s\n", rank, curve);
    free(ids);
    return pt_failures ? 1 : 0;
}
