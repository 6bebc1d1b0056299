/*
 * exchange: every task of every domain sends to every task of the other domains a sequence
 * of messages of mixed sizes (0 B up to -x bytes, mostly small), each carrying its sequence
 * number (the tag), a header and a checksum. Receivers check the size, the content and the
 * order per sending task, and the program exits 0 only if every expected message arrived
 * exactly once and in order. Uses cor.h only. Run under cor-run (see proc/exchange.sh).
 *
 *   exchange [-t TASKS] [-m TOTAL] [-x MAXBYTES] [-s SEED] [-w WINDOW]
 *            [-a ADDRFILE] [-H HOLDFILE] [-P] [-q]
 *   -t  tasks per domain (default 8)          -m  messages in the whole session (100000)
 *   -x  largest message (4 MiB)               -s  seed of the size mix (1)
 *   -w  outstanding sends and receives per task (8)
 *   -a  domain 0 writes "ADDR <address of its hard port 0 of the default route>" and
 *       "SESSION <cookie>" lines to this file
 *   -H  domain 0 waits (at most 120 s) for this file to exist before checking its
 *       counters, then prints frames_dropped (for the bad-input test)
 *   -P  tasks never block: they poll (cor_progress, then cor_peek on each request), and the
 *       summary counts the events cor_progress handled
 * Output: one summary line per domain, "exchange: domain R: PASS ..." or FAIL with reasons.
 */
#define _GNU_SOURCE
#include <pthread.h>
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

#define HDR_BYTES 32
#define MAGIC 0x43784368u

static int ntasks = 8, window = 8, quiet, poll_mode;
static _Atomic long polled_events;
static long total = 100000;
static size_t maxsize = 4u << 20;
static uint64_t seed = 1;
static const char *addrfile, *holdfile;
static int rank, ndom;
static long per_pair;
static _Atomic long progress_ticks;
static atomic_int tasks_done;
static _Atomic uint64_t bytes_sent, bytes_recv, msgs_recv;

static uint64_t msg_key(unsigned src, unsigned dst, uint32_t seq)
{
    return mix64(seed ^ mix64(((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ seq));
}

/* Global task numbers: domain r's task i (1..ntasks) is r * ntasks + i - 1. */
static int first_remote(unsigned src)
{
    int srank = (int)src / ntasks;
    return srank == 0 ? ntasks : 0;
}

/* The size of message seq from src to dst: a deterministic mix both sides can compute.
 * Every pair starts with an empty message; one pair ends with the largest size. */
static size_t msg_size(unsigned src, unsigned dst, uint32_t seq)
{
    if (seq == 0) return 0;
    if (src == 0 && (int)dst == first_remote(0) && seq == per_pair - 1) return maxsize;
    uint64_t h = msg_key(src, dst, seq);
    unsigned r = (unsigned)(h % 100000);
    uint64_t u = h >> 20;
    size_t lo, hi;
    if (r < 50) {
        lo = 1u << 20, hi = maxsize;
    } else if (r < 500) {
        lo = 64u << 10, hi = 1u << 20;
    } else if (r < 5500) {
        lo = 256, hi = 64u << 10;
    } else {
        lo = 1, hi = 256;
    }
    if (hi > maxsize) hi = maxsize;
    if (lo > hi) lo = hi;
    return lo + (size_t)(u % (hi - lo + 1));
}

/* Payload: small messages are pure pattern; larger ones a header, then a pattern whose
 * checksum is in the header. */
static uint64_t body_checksum(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void fill_pattern(unsigned char *p, size_t n, uint64_t key)
{
    uint64_t x = key | 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++)
        p[i] = (unsigned char)(key >> (8 * (i % 8))) ^ (unsigned char)i;
}

struct hdr {
    uint32_t magic, src, dst, seq;
    uint64_t size, csum;
};

static void fill_message(unsigned char *p, unsigned src, unsigned dst, uint32_t seq, size_t n)
{
    uint64_t key = msg_key(src, dst, seq);
    if (n < HDR_BYTES) {
        fill_pattern(p, n, key);
        return;
    }
    fill_pattern(p + HDR_BYTES, n - HDR_BYTES, key);
    struct hdr h = {MAGIC, src, dst, seq, n, body_checksum(p + HDR_BYTES, n - HDR_BYTES)};
    memset(p, 0, HDR_BYTES);
    memcpy(p, &h, sizeof h);
}

static int check_message(const unsigned char *p, size_t n, unsigned src, unsigned dst, uint32_t seq)
{
    uint64_t key = msg_key(src, dst, seq);
    if (n < HDR_BYTES) {
        unsigned char want[HDR_BYTES];
        fill_pattern(want, n, key);
        return n == 0 || memcmp(p, want, n) == 0;
    }
    struct hdr h;
    memcpy(&h, p, sizeof h);
    return h.magic == MAGIC && h.src == src && h.dst == dst && h.seq == seq && h.size == n &&
           h.csum == body_checksum(p + HDR_BYTES, n - HDR_BYTES);
}

/* ---- one task ------------------------------------------------------------------------------ */

struct slot {
    int is_send;
    int user_buf; /* receive into ubuf / send from user memory */
    long post;    /* receive: posting order */
    int want_src; /* receive: specific source (global task) or -1 */
    void *ptr;    /* core buffer (send buffer, or where recvI puts the message) */
    unsigned char *ubuf;
};

struct task {
    unsigned me; /* global task number */
    long to_send, to_recv;
    /* per source (global task number): receive bookkeeping */
    long *done_from;    /* completed receives from src */
    long *pending_spec; /* pending specific receives for src */
    long **post_of;     /* [src][seq]: posting order of the receive that got it, -1 none */
};

static unsigned gtask(int r, unsigned index)
{
    return (unsigned)r * (unsigned)ntasks + index - 1;
}

/* -P: cor_waitany by polling, never blocking (at most 120 s). */
static int poll_any(size_t n, cor_req_t *reqs, size_t *idx, cor_status_t *st)
{
    time_t start = time(NULL);
    for (;;) {
        int k = cor_progress();
        if (k > 0) atomic_fetch_add(&polled_events, k);
        for (size_t i = 0; i < n; i++) {
            int done = 0;
            if (reqs[i] != COR_REQ_NULL && cor_peek(reqs[i], &done) == COR_OK && done) {
                *idx = i;
                return cor_test(&reqs[i], &done, st);
            }
        }
        if (time(NULL) - start > 120) {
            *idx = n;
            return COR_ETIMEDOUT;
        }
    }
}

static int task_main(void *arg)
{
    struct task *t = arg;
    unsigned nglob = (unsigned)(ndom * ntasks);
    int nslots = 2 * window;
    struct slot *slots = calloc((size_t)nslots, sizeof *slots);
    cor_req_t *reqs = calloc((size_t)nslots, sizeof *reqs);
    /* Destinations round-robin: (dest k, seq s) for k over remote tasks. */
    unsigned nremote = (unsigned)((ndom - 1) * ntasks);
    unsigned *remotes = calloc(nremote, sizeof *remotes);
    unsigned k = 0;
    for (unsigned g = 0; g < nglob; g++)
        if ((int)(g / (unsigned)ntasks) != rank) remotes[k++] = g;
    long sent = 0, send_posted = 0, recv_posted = 0, recv_done = 0, pending_wild = 0;
    if (!slots || !reqs || !remotes) {
        pt_fail("out of memory");
        return 1;
    }
    /* Half the receive slots use user buffers of maxsize bytes (the others core buffers). */
    for (int i = window; i < nslots; i++)
        if (i % 2 == 1) {
            slots[i].ubuf = malloc(maxsize ? maxsize : 1);
            if (!slots[i].ubuf) {
                pt_fail("out of memory for receive buffers");
                return 1;
            }
        }
    uint64_t rng = mix64(seed ^ t->me ^ 0x5eed);

    while (sent < t->to_send || recv_done < t->to_recv) {
        /* Post sends into free send slots. */
        for (int i = 0; i < window && send_posted < t->to_send; i++) {
            if (reqs[i] != COR_REQ_NULL) continue;
            unsigned dst = remotes[send_posted % nremote];
            uint32_t seq = (uint32_t)(send_posted / nremote);
            size_t n = msg_size(t->me, dst, seq);
            struct slot *s = &slots[i];
            s->is_send = 1;
            s->user_buf = (send_posted % 3) == 2;
            cor_idp_t to = cor_task_idp((int)(dst / (unsigned)ntasks), dst % (unsigned)ntasks + 1);
            int rc;
            if (s->user_buf) {
                s->ubuf = malloc(n ? n : 1);
                if (!s->ubuf) {
                    pt_fail("out of memory");
                    return 1;
                }
                fill_message(s->ubuf, t->me, dst, seq, n);
                rc = cor_sendI_typed(to, COR_CTX_WORLD, (int)seq, COR_BYTE, s->ubuf, n, &reqs[i]);
            } else {
                s->ptr = cor_getBuffer(COR_BYTE, n ? n : 1); /* count 0 is sent below */
                if (!s->ptr) {
                    pt_fail("cor_getBuffer(%zu) returned NULL", n);
                    return 1;
                }
                fill_message(s->ptr, t->me, dst, seq, n);
                rc = cor_sendI(to, COR_CTX_WORLD, (int)seq, s->ptr, n, &reqs[i]);
            }
            if (rc != COR_OK) {
                pt_fail("sendI to task %u seq %u (%zu B): %s", dst, seq, n, cor_strerror(rc));
                return 1;
            }
            atomic_fetch_add(&bytes_sent, n);
            send_posted++;
        }
        /* Post receives: mostly wildcards; some for a specific source when it is certain
         * that source still has a message no earlier receive can take. */
        for (int i = window; i < nslots && recv_posted < t->to_recv; i++) {
            if (reqs[i] != COR_REQ_NULL) continue;
            struct slot *s = &slots[i];
            s->is_send = 0;
            s->post = recv_posted;
            s->want_src = -1;
            rng = mix64(rng);
            if (rng % 4 == 0) {
                unsigned src = remotes[(rng >> 8) % nremote];
                long left = per_pair - t->done_from[src] - t->pending_spec[src] - pending_wild;
                if (left >= 1) s->want_src = (int)src;
            }
            cor_idp_t from = s->want_src < 0 ? COR_ANY_SOURCE
                                             : cor_task_idp(s->want_src / ntasks,
                                                            (unsigned)(s->want_src % ntasks) + 1);
            int rc;
            s->user_buf = s->ubuf != NULL;
            s->ptr = NULL;
            if (s->user_buf)
                rc = cor_recvI_into(from, COR_CTX_WORLD, COR_ANY_TAG, COR_BYTE, s->ubuf, maxsize,
                                    &reqs[i]);
            else
                rc = cor_recvI(from, COR_CTX_WORLD, COR_ANY_TAG, &s->ptr, &reqs[i]);
            if (rc != COR_OK) {
                pt_fail("recvI: %s", cor_strerror(rc));
                return 1;
            }
            if (s->want_src < 0)
                pending_wild++;
            else
                t->pending_spec[s->want_src]++;
            recv_posted++;
        }

        size_t idx;
        cor_status_t st;
        int rc = poll_mode ? poll_any((size_t)nslots, reqs, &idx, &st)
                           : cor_waitany((size_t)nslots, reqs, &idx, &st);
        if (idx >= (size_t)nslots) {
            pt_fail("waitany returned index %zu (rc %s)", idx, cor_strerror(rc));
            return 1;
        }
        atomic_fetch_add(&progress_ticks, 1);
        struct slot *s = &slots[idx];
        if (s->is_send) {
            if (rc != COR_OK) pt_fail("send completed with %s", cor_strerror(rc));
            if (s->user_buf) {
                free(s->ubuf);
                s->ubuf = NULL;
            } else {
                cor_releaseBuffer(s->ptr);
            }
            s->ptr = NULL;
            sent++;
            continue;
        }
        recv_done++;
        if (s->want_src < 0)
            pending_wild--;
        else
            t->pending_spec[s->want_src]--;
        const unsigned char *data = s->user_buf ? s->ubuf : s->ptr;
        if (rc != COR_OK) {
            pt_fail("receive completed with %s", cor_strerror(rc));
        } else if (cor_idp_kind(st.source) != COR_KIND_TASK ||
                   (int)cor_idp_domain(st.source) >= ndom ||
                   (int)cor_idp_domain(st.source) == rank || cor_idp_index(st.source) < 1 ||
                   (int)cor_idp_index(st.source) > ntasks) {
            pt_fail("message from unexpected source %llx", (unsigned long long)st.source);
        } else {
            unsigned src = gtask((int)cor_idp_domain(st.source), cor_idp_index(st.source));
            long seq = st.tag;
            if (s->want_src >= 0 && (unsigned)s->want_src != src)
                pt_fail("receive for task %d matched a message from task %u", s->want_src, src);
            if (seq < 0 || seq >= per_pair) {
                pt_fail("tag %ld from task %u out of range 0..%ld", seq, src, per_pair - 1);
            } else {
                size_t want = msg_size(src, t->me, (uint32_t)seq);
                if (st.count != want || st.type != COR_BYTE)
                    pt_fail("message %ld from task %u: %zu elements of type %d, expected %zu bytes",
                            seq, src, st.count, (int)st.type, want);
                else if (!check_message(data, want, src, t->me, (uint32_t)seq))
                    pt_fail("message %ld from task %u (%zu B): content or checksum wrong", seq, src,
                            want);
                if (t->post_of[src][seq] >= 0)
                    pt_fail("message %ld from task %u received twice", seq, src);
                t->post_of[src][seq] = s->post;
                t->done_from[src]++;
                atomic_fetch_add(&bytes_recv, st.count);
                atomic_fetch_add(&msgs_recv, 1);
            }
        }
        if (!s->user_buf && s->ptr) cor_releaseBuffer(s->ptr);
        s->ptr = NULL;
    }
    /* Nothing may be pending now; waitall on the empty set must return at once. */
    int rc = cor_waitall((size_t)nslots, reqs, NULL);
    if (rc != COR_OK) pt_fail("final waitall: %s", cor_strerror(rc));

    /* Order: per source, the receives that got seq 0, 1, 2... were posted in that order. */
    for (unsigned i = 0; i < nremote; i++) {
        unsigned src = remotes[i];
        long last = -1;
        for (long q = 0; q < per_pair; q++) {
            long p = t->post_of[src][q];
            if (p < 0) {
                pt_fail("message %ld from task %u never arrived", q, src);
                break;
            }
            if (p <= last) {
                pt_fail("message %ld from task %u overtook message %ld", q, src, q - 1);
                break;
            }
            last = p;
        }
    }
    for (int i = window; i < nslots; i++)
        free(slots[i].ubuf);
    free(slots);
    free(reqs);
    free(remotes);
    return 0;
}

static void write_addr_file(void)
{
    char addr[256] = "";
    const char *route = getenv("COR_ROUTE"); /* set by cor-run --route */
    int rc = cor_route_address(route && *route ? route : "udp", 0, addr, sizeof addr);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", addrfile);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        pt_fail("cannot write %s", tmp);
        return;
    }
    const char *sess = getenv("COR_SESSION");
    fprintf(f, "ADDR %s\nSESSION %s\nRC %d\n", rc == COR_OK ? addr : "-", sess ? sess : "-", rc);
    fclose(f);
    rename(tmp, addrfile);
}

static void wait_hold_file(void)
{
    for (int i = 0; i < 1200 && access(holdfile, F_OK) != 0; i++)
        usleep(100000);
    if (access(holdfile, F_OK) != 0) pt_fail("hold file %s did not appear within 120 s", holdfile);
}

int main(int argc, char **argv)
{
    pt_name = "exchange";
    int opt;
    while ((opt = getopt(argc, argv, "t:m:x:s:w:a:H:Pq")) != -1) {
        switch (opt) {
        case 't':
            ntasks = atoi(optarg);
            break;
        case 'm':
            total = atol(optarg);
            break;
        case 'x':
            maxsize = (size_t)atol(optarg);
            break;
        case 's':
            seed = (uint64_t)atoll(optarg);
            break;
        case 'w':
            window = atoi(optarg);
            break;
        case 'a':
            addrfile = optarg;
            break;
        case 'H':
            holdfile = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'P':
            poll_mode = 1;
            break;
        default:
            fprintf(stderr, "usage: exchange [-t tasks] [-m total] [-x maxbytes] [-s seed] "
                            "[-w window] [-a addrfile] [-H holdfile] [-P] [-q]\n");
            return 2;
        }
    }
    if (ntasks < 1 || ntasks > 64 || total < 1 || window < 1 || window > 64 ||
        maxsize > (64u << 20)) {
        fprintf(stderr, "exchange: bad arguments\n");
        return 2;
    }
    int rc = cor_init(&argc, &argv);
    if (rc != COR_OK) {
        fprintf(stderr, "exchange: cor_init: %s\n", cor_strerror(rc));
        return 1;
    }
    rank = pt_rank = cor_domain_rank();
    ndom = cor_domain_count();
    if (ndom < 2) {
        fprintf(stderr, "exchange: needs at least 2 domains (run it under cor-run -n N)\n");
        cor_finalize();
        return 2;
    }
    long pairs = (long)ndom * ntasks * (ndom - 1) * ntasks;
    per_pair = total / pairs;
    if (per_pair < 2) per_pair = 2;
    pt_watchdog_start(&progress_ticks, &tasks_done, 90, 3, "no message completed (hang)");
    if (addrfile && rank == 0) write_addr_file();

    struct task *tasks = calloc((size_t)ntasks, sizeof *tasks);
    unsigned nglob = (unsigned)(ndom * ntasks);
    for (int i = 0; i < ntasks; i++) {
        struct task *t = &tasks[i];
        t->me = gtask(rank, (unsigned)i + 1);
        t->to_send = per_pair * (ndom - 1) * ntasks;
        t->to_recv = t->to_send;
        t->done_from = calloc(nglob, sizeof(long));
        t->pending_spec = calloc(nglob, sizeof(long));
        t->post_of = calloc(nglob, sizeof(long *));
        for (unsigned g = 0; g < nglob; g++) {
            t->post_of[g] = malloc((size_t)per_pair * sizeof(long));
            for (long q = 0; q < per_pair; q++)
                t->post_of[g][q] = -1;
        }
    }
    rc = cor_barrier();
    if (rc != COR_OK) pt_fail("first barrier: %s", cor_strerror(rc));
    double t0 = now_s();
    cor_idp_t *ids = calloc((size_t)ntasks, sizeof *ids);
    for (int i = 0; i < ntasks; i++) {
        rc = cor_task_spawn("xchg", task_main, &tasks[i], &ids[i]);
        if (rc != COR_OK) {
            pt_fail("spawn: %s", cor_strerror(rc));
            return 1;
        }
        if (cor_idp_index(ids[i]) != (unsigned)i + 1)
            pt_fail("task %d got index %u, expected %d", i, cor_idp_index(ids[i]), i + 1);
    }
    for (int i = 0; i < ntasks; i++) {
        int st = 0;
        rc = cor_task_join(ids[i], &st);
        if (rc != COR_OK || st != 0) pt_fail("task %d: join %s, exit %d", i, cor_strerror(rc), st);
    }
    double el = now_s() - t0;
    atomic_store(&tasks_done, 1);
    if (addrfile && rank == 0) { /* lets badinput.sh tell whether its junk overlapped */
        char done[4096];
        snprintf(done, sizeof done, "%s.tasks-done", addrfile);
        FILE *f = fopen(done, "w");
        if (f) fclose(f);
    }
    if (holdfile && rank == 0) wait_hold_file();
    cor_stats_t stats;
    memset(&stats, 0, sizeof stats);
    cor_stats_get(&stats);
    rc = cor_barrier();
    if (rc != COR_OK) pt_fail("last barrier: %s", cor_strerror(rc));
    long expect = per_pair * (ndom - 1) * ntasks * ntasks;
    if ((long)atomic_load(&msgs_recv) != expect)
        pt_fail("received %llu messages, expected %ld", (unsigned long long)atomic_load(&msgs_recv),
                expect);
    long nfail = atomic_load(&pt_failures);
    printf("exchange: domain %d: %s %d domains x %d tasks, %ld msgs per pair, received %llu "
           "msgs %.1f MB in %.2f s (%.1f MB/s in), frames_dropped=%llu, polled_events=%ld\n",
           rank, nfail ? "FAIL" : "PASS", ndom, ntasks, per_pair,
           (unsigned long long)atomic_load(&msgs_recv), (double)atomic_load(&bytes_recv) / 1e6, el,
           (double)atomic_load(&bytes_recv) / 1e6 / (el > 0 ? el : 1),
           (unsigned long long)stats.frames_dropped, atomic_load(&polled_events));
    fflush(stdout);
    rc = cor_finalize();
    if (rc != COR_OK)
        fprintf(stderr, "exchange: domain %d: cor_finalize: %s\n", rank, cor_strerror(rc));
    for (int i = 0; i < ntasks; i++) {
        for (unsigned g = 0; g < nglob; g++)
            free(tasks[i].post_of[g]);
        free(tasks[i].post_of);
        free(tasks[i].done_from);
        free(tasks[i].pending_spec);
    }
    free(tasks);
    free(ids);
    return nfail || rc != COR_OK ? 1 : 0;
}
