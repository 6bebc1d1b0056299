/*
 * flood: domain 1 streams -b bytes to domain 0, alternating eager-size (-e) and
 * rendezvous-size (-r) messages with up to -w sends outstanding; domain 0 posts nothing for
 * -i seconds, then receives everything. Run under cor-run -n 2 (see proc/flood.sh).
 *
 *   flood -b BYTES -e EAGER_MSG -r RNDV_MSG -i IDLE_S -w WINDOW -L SLACK_BYTES
 *
 * Checked, each failure printed and the exit status 1:
 * - receiver: its resident memory (VmRSS) while it posts nothing grows over what it had
 *   before the flood began by at most the core's bound (credits x eager limit, plus 2 KiB
 *   per unexpected message; COR_CREDITS, COR_EAGER_LIMIT, COR_PORTS from the environment)
 *   plus -L bytes of slack; cor_stats' unexpected_bytes_now stays within credits x eager
 *   limit, and the unexpected messages within the sender's window plus credits;
 * - sender: no send fails, and by the end of the idle time it has completed only a window's
 *   worth (the eager messages its credits allow + window x largest message), i.e. it was
 *   slowed;
 * - every message arrives once, in order, with every byte as sent.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cor/cor.h"
#include "proc_util.h"

/* Receiver memory per unexpected message beyond its eager data: the core's record of it and
 * an RTS's tail (at most 1 KiB), with the allocator's overhead. */
#define UNEXP_RNDV_MAX 2048

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    return s && *s ? atol(s) : def;
}

/* Message i: even ones eager-size, odd ones rendezvous-size; words (i << 32) + j. */
static size_t esize, rsize;
static size_t msg_size(long i)
{
    return (i & 1) ? rsize : esize;
}

static void fill(uint64_t *w, size_t n, long i)
{
    for (size_t j = 0; j < n; j++)
        w[j] = ((uint64_t)i << 32) + j;
}

static size_t first_bad(const uint64_t *w, size_t n, long i)
{
    for (size_t j = 0; j < n; j++)
        if (w[j] != ((uint64_t)i << 32) + j) return j;
    return n;
}

static int sender(long nmsg, int window, double idle, long slowed_max)
{
    cor_req_t *req = calloc((size_t)window, sizeof *req);
    uint64_t **buf = calloc((size_t)window, sizeof *buf);
    if (!req || !buf) return 1;
    for (int k = 0; k < window; k++) {
        buf[k] = malloc(rsize > esize ? rsize : esize);
        if (!buf[k]) return 1;
        req[k] = COR_REQ_NULL;
    }
    cor_idp_t to = cor_task_idp(0, 0);
    double t0 = now_s(), t_last = t0;
    long done_bytes = 0, done_at_idle = -1;
    int err = COR_OK;
    for (long i = 0; i < nmsg + window && !err; i++) {
        int k = (int)(i % window);
        if (i >= window) { /* reuse slot k: its send (message i - window) must be done */
            err = cor_wait(&req[k], NULL);
            PT_CHECK(err == COR_OK, "send %ld: %s", i - window, cor_strerror(err));
            done_bytes += (long)msg_size(i - window);
            t_last = now_s();
            if (i == window) fprintf(stderr, "flood: sender: streaming\n"); /* see starve.sh */
        }
        if (done_at_idle < 0 && now_s() - t0 >= idle * 0.9) done_at_idle = done_bytes;
        if (i >= nmsg || err) continue;
        size_t n = msg_size(i) / 8;
        fill(buf[k], n, i);
        err = cor_sendI_typed(to, COR_CTX_WORLD, (int)(i & 0x7fffffff), COR_UINT64, buf[k], n,
                              &req[k]);
        PT_CHECK(err == COR_OK, "sendI %ld: %s", i, cor_strerror(err));
    }
    if (done_at_idle < 0) done_at_idle = done_bytes;
    cor_stats_t st;
    cor_stats_get(&st);
    printf("flood: sender: %ld bytes in %ld messages in %.2f s; %ld bytes completed in the "
           "first %.1f s (allowed %ld); eager %llu, rendezvous %llu, credit stalls %llu\n",
           done_bytes, nmsg, t_last - t0, done_at_idle, idle * 0.9, slowed_max,
           (unsigned long long)st.eager_sent, (unsigned long long)st.rndv_sent,
           (unsigned long long)st.credit_stalls);
    PT_CHECK(done_at_idle <= slowed_max, "at most %ld bytes sent while the receiver idles, got %ld",
             slowed_max, done_at_idle);
    PT_CHECK(st.credit_stalls > 0, "credit stalls, got %llu", (unsigned long long)st.credit_stalls);
    for (int k = 0; k < window; k++)
        free(buf[k]);
    free(buf);
    free(req);
    return 0;
}

/* Receive buffers, made resident before the flood starts so the baseline holds them. */
static uint64_t **rbuf;
static long rss_base;

static int receiver_prepare(int window)
{
    size_t cap = rsize > esize ? rsize : esize;
    rbuf = calloc((size_t)window, sizeof *rbuf);
    if (!rbuf) return -1;
    for (int k = 0; k < window; k++) {
        rbuf[k] = malloc(cap);
        if (!rbuf[k]) return -1;
        memset(rbuf[k], 0xa5, cap); /* 0 would let the compiler make it a calloc: not resident */
    }
    rss_base = rss_kb() * 1024;
    return 0;
}

/* Eager messages of esize bytes a sender can have unreceived at once (cor/core/README.md): a
 * slot is 1 + ceil(eager limit / 256) units, the sender holds credits slots per hard port and
 * never spends the last unit, a message above 256 bytes costs a slot and a smaller one 2. */
static long eager_messages_max(long credits, long elimit, long ports)
{
    long slot = elimit <= 256 ? 2 : 1 + (elimit + 255) / 256, cost = esize <= 256 ? 2 : slot;
    return (credits * slot - 1) / cost * ports;
}

static int receiver(long nmsg, int window, double idle, long slack)
{
    long credits = env_long("COR_CREDITS", 32), elimit = env_long("COR_EAGER_LIMIT", 0);
    long ports = env_long("COR_PORTS", 1);
    if (elimit <= 0) {
        fprintf(stderr, "flood: set COR_EAGER_LIMIT: the bound depends on it\n");
        return 1;
    }
    cor_req_t *req = calloc((size_t)window, sizeof *req);
    uint64_t **buf = rbuf;
    size_t cap = rsize > esize ? rsize : esize;
    if (!req || !buf) return 1;
    long base = rss_base, peak = base;
    cor_stats_t st;
    uint64_t max_unexp = 0, max_unexp_bytes = 0;
    double t0 = now_s();
    while (now_s() - t0 < idle) {
        usleep(20000);
        long r = rss_kb() * 1024;
        if (r > peak) peak = r;
        cor_stats_get(&st);
        if (st.unexpected_now > max_unexp) max_unexp = st.unexpected_now;
        if (st.unexpected_bytes_now > max_unexp_bytes) max_unexp_bytes = st.unexpected_bytes_now;
    }
    fprintf(stderr, "flood: receiver: receiving\n"); /* unbuffered, for proc/starve.sh */
    /* The core's bound (cor/core/README.md): eager data within credits x eager limit per
     * peer and hard port, plus at most UNEXP_RNDV_MAX bytes per unexpected message (its
     * record and an RTS's tail), plus the slack for allocator arenas and route buffers. */
    long bound = credits * elimit * ports + (long)max_unexp * UNEXP_RNDV_MAX + slack;
    printf("flood: receiver: idle %.1f s: VmRSS %ld KiB before, peak %ld KiB: growth %ld KiB "
           "(bound %ld KiB); unexpected messages at most %llu holding %llu bytes of eager data\n",
           idle, base / 1024, peak / 1024, (peak - base) / 1024, bound / 1024,
           (unsigned long long)max_unexp, (unsigned long long)max_unexp_bytes);
    PT_CHECK(base > 0, "VmRSS readable");
    PT_CHECK(peak - base <= bound, "RSS growth <= %ld bytes, got %ld", bound, peak - base);
    PT_CHECK(max_unexp_bytes <= (uint64_t)(credits * elimit * ports),
             "unexpected eager bytes <= credits x eager limit x ports = %ld, got %llu",
             credits * elimit * ports, (unsigned long long)max_unexp_bytes);
    /* One per send the peer has outstanding: the sender's window, plus the eager ones that
     * completed at once. */
    long eager_max = eager_messages_max(credits, elimit, ports);
    PT_CHECK(max_unexp <= (uint64_t)(window + eager_max),
             "unexpected messages <= window + eager ones = %ld, got %llu", window + eager_max,
             (unsigned long long)max_unexp);
    PT_CHECK(max_unexp > 0, "the flood arrived unexpected, got %llu messages",
             (unsigned long long)max_unexp);

    double t1 = now_s();
    long got = 0, bytes = 0;
    int err = COR_OK;
    for (long i = 0; i < nmsg + window && !err; i++) {
        int k = (int)(i % window);
        if (i >= window) {
            long m = i - window;
            cor_status_t s;
            err = cor_wait(&req[k], &s);
            PT_CHECK(err == COR_OK, "receive %ld: %s", m, cor_strerror(err));
            if (err) break;
            size_t n = msg_size(m) / 8, bad = first_bad(buf[k], n, m);
            PT_CHECK(
                s.tag == (int)(m & 0x7fffffff) && s.count == n && bad == n,
                "message %ld in order and intact: tag %d, %zu words, first bad word %zu of %zu", m,
                s.tag, (size_t)s.count, bad, n);
            if (pt_failures > 10) return 1;
            got++;
            bytes += (long)msg_size(m);
        }
        if (i >= nmsg) continue;
        err = cor_recvI_into(cor_task_idp(1, 0), COR_CTX_WORLD, COR_ANY_TAG, COR_UINT64, buf[k],
                             cap / 8, &req[k]);
        PT_CHECK(err == COR_OK, "recvI %ld: %s", i, cor_strerror(err));
    }
    double dt = now_s() - t1;
    printf("flood: receiver: %ld messages, %ld bytes in order and intact, received in %.2f s "
           "after the idle time (%.0f MB/s)\n",
           got, bytes, dt, dt > 0 ? (double)bytes / dt / 1e6 : 0.0);
    PT_CHECK(got == nmsg, "%ld messages, got %ld", nmsg, got);
    for (int k = 0; k < window; k++)
        free(buf[k]);
    free(buf);
    free(req);
    return 0;
}

int main(int argc, char **argv)
{
    pt_name = "flood";
    long total = 1L << 30, slack = 0;
    double idle = 10;
    int window = 16, opt;
    esize = 8192;
    rsize = 256 << 10;
    while ((opt = getopt(argc, argv, "b:e:r:i:w:L:")) != -1) {
        switch (opt) {
        case 'b':
            total = atol(optarg);
            break;
        case 'e':
            esize = (size_t)atol(optarg) & ~(size_t)7;
            break;
        case 'r':
            rsize = (size_t)atol(optarg) & ~(size_t)7;
            break;
        case 'i':
            idle = atof(optarg);
            break;
        case 'w':
            window = atoi(optarg);
            break;
        case 'L':
            slack = atol(optarg);
            break;
        default:
            fprintf(stderr,
                    "usage: flood -b BYTES -e EAGER -r RNDV -i IDLE_S -w WINDOW -L SLACK\n");
            return 2;
        }
    }
    if (total <= 0 || esize == 0 || rsize == 0 || idle <= 0 || window < 1 || window > 4096 ||
        slack <= 0) {
        fprintf(stderr, "flood: bad arguments (every value positive, -w 1..4096, -L needed)\n");
        return 2;
    }
    alarm((unsigned)(idle + 300));
    int err = cor_init(NULL, NULL);
    if (err) {
        fprintf(stderr, "cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    int rank = pt_rank = cor_domain_rank();
    long nmsg = 0, sum = 0;
    while (sum < total)
        sum += (long)msg_size(nmsg++);
    if (cor_domain_count() != 2) {
        fprintf(stderr, "flood: needs 2 domains, got %d\n", cor_domain_count());
        pt_failures++;
    } else {
        /* Both started and the receiver's baseline taken: the flood starts after this. */
        if (cor_domain_rank() == 0 && receiver_prepare(window)) {
            fprintf(stderr, "flood: out of memory for the receive buffers\n");
            return 1;
        }
        err = cor_barrier();
        PT_CHECK(err == COR_OK, "barrier: %s", cor_strerror(err));
        long credits = env_long("COR_CREDITS", 32), ports = env_long("COR_PORTS", 1);
        long elimit = env_long("COR_EAGER_LIMIT", 16384);
        long slowed_max =
            eager_messages_max(credits, elimit, ports) * (long)esize + (long)window * (long)rsize;
        int rc = cor_domain_rank() == 1 ? sender(nmsg, window, idle, slowed_max)
                                        : receiver(nmsg, window, idle, slack);
        if (rc) pt_failures++;
    }
    err = cor_finalize();
    PT_CHECK(err == COR_OK, "finalize: %s", cor_strerror(err));
    if (!pt_failures) printf("flood: domain %d: PASS\n", rank);
    return pt_failures ? 1 : 0;
}
