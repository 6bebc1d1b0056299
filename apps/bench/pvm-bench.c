/*
 * pvm-bench: PVM message latency and rate by route option, encoding and size, through the
 * PVM 3.4 API alone (pvm3.h; cor/pvm.h only names the CoR route options). The same binary
 * measures PVM's own routes (plain libpvm3) and CoR's (libcorpvm: linked with
 * `-lcorpvm -lpvm3`, or LD_PRELOAD=libcorpvm.so on a binary linked with -lpvm3 only).
 *
 *   pvm-bench [--routes dont,direct,udp,myrinet] [--encodings raw,inplace] [--sizes LIST]
 *             [--threads 1,8] [--reps K] [--iters F] [--csv FILE] ...
 *
 * Run it in a PVM virtual machine (pvmd up) whose hostfile's ep= holds this program's folder.
 * It is the master: for every route option and thread count it spawns a fresh partner (itself,
 * with the argument "worker"), so that each route starts clean (PVM and libcorpvm switch routes
 * per peer, at first contact). Each such run is a child process of its own, a PVM task of its
 * own too: libcorpvm joins one CoR route per task. The partner learns the route option, the
 * thread count and the window from a setup message and sets the option with pvm_setopt before
 * the first data message, as the master does.
 *
 * Modes, per encoding and size:
 *   pingpong  round trips; one-way = half the round trip, the median over --reps repeats
 *             (the minimum is shown too);
 *   stream    messages one way with at most --window unconsumed (the receiver returns a credit
 *             every window/2 messages), then one ack; MB/s = payload megabytes (10^6 B) per
 *             second, the median over the repeats (the best is shown too).
 * With --threads N, N thread pairs (master thread i with worker thread i, tags of their own)
 * measure at the same time; rows give the mean one-way latency of the pairs and the aggregate
 * rate. libpvm3 alone is not thread-safe: N > 1 needs libcorpvm. With --peers, master thread
 * i's partner is a worker task of its own (N workers, one thread each): threads of one task
 * sending to different peers; its rows' mode is "pingpong-peers" or "stream-peers".
 *
 * Every wait is bounded (pvm_trecv, --timeout); a partner that exits early is noticed through
 * pvm_notify(PvmTaskExit).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pvm3.h>

#include "cor/pvm.h"

/* libcorpvm's bridge call, used only to tell whether a CoR route really carries the messages;
 * NULL when libcorpvm is not loaded (plain libpvm3). */
#pragma weak pvm_cor_domain

static const char usage[] =
    "usage: pvm-bench [options]        (in a running PVM virtual machine)\n"
    "options:\n"
    "  --routes LIST     route options to measure, each with a fresh partner task:\n"
    "                    dont (PvmDontRoute), direct (PvmRouteDirect), udp\n"
    "                    (PvmRouteDirectUDP), myrinet (PvmRouteDirectMyrinet; alias gm)\n"
    "                    (default dont,direct,udp,myrinet)\n"
    "  --encodings LIST  raw (PvmDataRaw), inplace (PvmDataInPlace), default\n"
    "                    (PvmDataDefault, XDR) (default raw,inplace)\n"
    "  --modes LIST      pingpong, stream (default both)\n"
    "  --sizes LIST      message sizes, e.g. 0,8,4K,1M (default 0,8,64,512,4K,32K,256K,1M)\n"
    "  --threads LIST    thread pairs, each count 1..8 (default 1); more than 1 needs\n"
    "                    libcorpvm (plain libpvm3 is not thread-safe)\n"
    "  --iters F         scale the iteration counts by F (default 1)\n"
    "  --reps K          repeat each measurement K times; report the median, and the\n"
    "                    minimum latency / best rate beside it (default 3)\n"
    "  --window N        stream: messages the sender may be ahead of the receiver,\n"
    "                    2..1024 (default 32)\n"
    "  --timeout S       longest wait for any one message, seconds (default 20)\n"
    "  --verify          check the content of every received message\n"
    "  --peers           every master thread with a partner task of its own (not\n"
    "                    one partner task with as many threads)\n"
    "  --csv FILE        write rows mode,route,encoding,threads,bytes,iters,usec_oneway,MBps\n"
    "                    (the medians)\n"
    "  --quiet           no table on standard output\n"
    "  -h, --help        this text\n"
    "Libraries: link with -lcorpvm -lpvm3 (in that order) or run with\n"
    "LD_PRELOAD=libcorpvm.so for the CoR routes (udp, myrinet) and for --threads > 1; the\n"
    "partner gets COR_ROUTE_PATH, LD_PRELOAD and COR_PVM_* through PVM_EXPORT (added here).\n"
    "COR_PVM_ROUTE is ignored (it would turn PvmRouteDirect into a CoR route).\n";

#define MAX_SIZES 64
#define MAX_SIZE ((size_t)256 << 20)
#define MAX_THREADS 8
#define MAX_REPS 100
#define SETUP_VERSION 0x50420002 /* "PB" 2 */

/* Message tags. Pair i uses TAG_PAIR + 8 * i + one of the PT_* offsets. */
enum {
    TAG_SETUP = 0x5042000, /* master -> worker: the run's parameters */
    TAG_READY,             /* worker -> master: route set, threads started (or an error) */
    TAG_EXIT,              /* pvm_notify(PvmTaskExit) of the partner */
    TAG_PAIR = 0x5042100,
};
enum { PT_CMD, PT_DATA, PT_CREDIT, PT_ACK };
#define PAIR_TAG(i, what) (TAG_PAIR + 8 * (i) + (what))

enum op { OP_PINGPONG = 1, OP_STREAM, OP_QUIT };
#define CMD_INTS 5 /* op, encoding, size, count, window */

struct route_opt {
    const char *name;
    int value;
};
static const struct route_opt routes_known[] = {
    {"dont", PvmDontRoute},
    {"direct", PvmRouteDirect},
    {"udp", PvmRouteDirectUDP},
    {"myrinet", PvmRouteDirectMyrinet},
};
struct enc_opt {
    const char *name;
    int value;
};
static const struct enc_opt encs_known[] = {
    {"raw", PvmDataRaw},
    {"inplace", PvmDataInPlace},
    {"default", PvmDataDefault},
};

struct opts {
    const struct route_opt *routes[8];
    int nroutes;
    const struct enc_opt *encs[3];
    int nencs;
    int pingpong, stream;
    size_t sizes[MAX_SIZES];
    int nsizes;
    int threads[MAX_THREADS];
    int nthreads;
    double iters_scale;
    int reps;
    int window;
    int timeout_s;
    int verify;
    int peers;
    int quiet;
    const char *csv_path;
};

static struct opts o;
static FILE *csv;
static char self_path[PATH_MAX];

/* ---- small helpers ------------------------------------------------------------------- */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static const char *pvm_err_name(int rc)
{
    switch (rc) {
    case PvmBadParam:
        return "bad parameter";
    case PvmMismatch:
        return "parameter mismatch";
    case PvmOverflow:
        return "value too large";
    case PvmNoData:
        return "end of buffer";
    case PvmNoHost:
        return "no such host";
    case PvmNoFile:
        return "no such file (is its folder in the hostfile's ep=?)";
    case PvmDenied:
        return "permission denied";
    case PvmNoMem:
        return "out of memory";
    case PvmBadMsg:
        return "cannot decode message";
    case PvmSysErr:
        return "cannot contact the local pvmd (is a virtual machine running?)";
    case PvmNoBuf:
        return "no current buffer";
    case PvmNoSuchBuf:
        return "no such buffer";
    case PvmHostFail:
        return "host failed";
    case PvmNoParent:
        return "no parent task";
    case PvmNotImpl:
        return "not implemented";
    case PvmDSysErr:
        return "pvmd system error";
    case PvmOutOfRes:
        return "out of resources";
    case PvmNoTask:
        return "no such task";
    case PvmNotFound:
        return "not found";
    case PvmExists:
        return "already exists";
    default:
        return "PVM error";
    }
}

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pvm-bench: %s\n", line);
    fflush(stderr);
}

/* Fills buf with the pattern every sender uses; check() compares it (--verify). */
static void fill(unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(i * 7 + 1);
}

static int check(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (unsigned char)(i * 7 + 1)) {
            msg("byte %zu of %zu is %u, expected %u", i, len, p[i], (unsigned char)(i * 7 + 1));
            return -1;
        }
    return 0;
}

/* ---- option parsing ------------------------------------------------------------------- */

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "pvm-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (pvm-bench --help for the usage)\n");
    return 2;
}

/* "4K" -> 4096; binary suffixes K, M, G (KiB, KB accepted). -1 on junk or > MAX_SIZE. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno) return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    }
    if (shift && (*end == 'i' || *end == 'B')) end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end || v > (MAX_SIZE >> shift)) return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* Splits a comma-separated list into `words` (in `buf`); -1 if empty, too many or too long. */
static int split(const char *arg, char *buf, size_t buflen, char **words, int max)
{
    int n = 0;
    if (snprintf(buf, buflen, "%s", arg) >= (int)buflen) return -1;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) return -1;
        words[n++] = tok;
    }
    return n ? n : -1;
}

static int parse_args(int argc, char **argv)
{
    char buf[1024], *w[MAX_SIZES];
    int n;

    o.iters_scale = 1.0;
    o.reps = 3;
    o.window = 32;
    o.timeout_s = 20;
    o.pingpong = o.stream = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(a, "--verify")) {
            o.verify = 1;
        } else if (!strcmp(a, "--peers")) {
            o.peers = 1;
        } else if (!strcmp(a, "--quiet")) {
            o.quiet = 1;
        } else if (a[0] != '-') {
            return bad_usage("unexpected argument '%s'", a);
        } else if (strcmp(a, "--routes") && strcmp(a, "--encodings") && strcmp(a, "--modes") &&
                   strcmp(a, "--sizes") && strcmp(a, "--threads") && strcmp(a, "--iters") &&
                   strcmp(a, "--reps") && strcmp(a, "--window") && strcmp(a, "--timeout") &&
                   strcmp(a, "--csv")) {
            return bad_usage("unknown option %s", a);
        } else if (!v) {
            return bad_usage("option %s needs a value", a);
        } else {
            i++;
            char *end;
            if (!strcmp(a, "--routes")) {
                if ((n = split(v, buf, sizeof buf, w, 8)) < 0)
                    return bad_usage("bad --routes '%s' (comma-separated: dont,direct,udp,myrinet)",
                                     v);
                o.nroutes = 0;
                for (int k = 0; k < n; k++) {
                    const char *name = !strcmp(w[k], "gm") ? "myrinet" : w[k];
                    const struct route_opt *r = NULL;
                    for (size_t j = 0; j < sizeof routes_known / sizeof *routes_known; j++)
                        if (!strcmp(name, routes_known[j].name)) r = &routes_known[j];
                    if (!r)
                        return bad_usage(
                            "unknown route '%s' in --routes (dont, direct, udp, myrinet)", w[k]);
                    o.routes[o.nroutes++] = r;
                }
            } else if (!strcmp(a, "--encodings")) {
                if ((n = split(v, buf, sizeof buf, w, 3)) < 0)
                    return bad_usage("bad --encodings '%s' (comma-separated: raw,inplace,default)",
                                     v);
                o.nencs = 0;
                for (int k = 0; k < n; k++) {
                    const struct enc_opt *e = NULL;
                    for (size_t j = 0; j < sizeof encs_known / sizeof *encs_known; j++)
                        if (!strcmp(w[k], encs_known[j].name)) e = &encs_known[j];
                    if (!e)
                        return bad_usage(
                            "unknown encoding '%s' in --encodings (raw, inplace, default)", w[k]);
                    o.encs[o.nencs++] = e;
                }
            } else if (!strcmp(a, "--modes")) {
                if ((n = split(v, buf, sizeof buf, w, 2)) < 0)
                    return bad_usage("bad --modes '%s' (pingpong, stream or both)", v);
                o.pingpong = o.stream = 0;
                for (int k = 0; k < n; k++) {
                    if (!strcmp(w[k], "pingpong"))
                        o.pingpong = 1;
                    else if (!strcmp(w[k], "stream"))
                        o.stream = 1;
                    else
                        return bad_usage("unknown mode '%s' in --modes (pingpong, stream)", w[k]);
                }
            } else if (!strcmp(a, "--sizes")) {
                if ((n = split(v, buf, sizeof buf, w, MAX_SIZES)) < 0)
                    return bad_usage("bad --sizes '%s' (comma-separated, at most %d)", v,
                                     MAX_SIZES);
                for (int k = 0; k < n; k++)
                    if (parse_size(w[k], &o.sizes[k]) < 0)
                        return bad_usage("bad size '%s' in --sizes (a number with an optional "
                                         "K/M/G suffix, at most 256M)",
                                         w[k]);
                o.nsizes = n;
            } else if (!strcmp(a, "--threads")) {
                if ((n = split(v, buf, sizeof buf, w, MAX_THREADS)) < 0)
                    return bad_usage("bad --threads '%s' (comma-separated counts 1..%d)", v,
                                     MAX_THREADS);
                for (int k = 0; k < n; k++) {
                    long t = strtol(w[k], &end, 10);
                    if (*end || end == w[k] || t < 1 || t > MAX_THREADS)
                        return bad_usage("bad thread count '%s' in --threads (1..%d)", w[k],
                                         MAX_THREADS);
                    o.threads[k] = (int)t;
                }
                o.nthreads = n;
            } else if (!strcmp(a, "--iters")) {
                o.iters_scale = strtod(v, &end);
                if (*end || end == v || !(o.iters_scale > 0 && o.iters_scale <= 1000))
                    return bad_usage("--iters takes a number in (0, 1000], not '%s'", v);
            } else if (!strcmp(a, "--reps")) {
                long r = strtol(v, &end, 10);
                if (*end || end == v || r < 1 || r > MAX_REPS)
                    return bad_usage("--reps takes 1..%d, not '%s'", MAX_REPS, v);
                o.reps = (int)r;
            } else if (!strcmp(a, "--window")) {
                long r = strtol(v, &end, 10);
                if (*end || end == v || r < 2 || r > 1024)
                    return bad_usage("--window takes 2..1024, not '%s'", v);
                o.window = (int)r;
            } else if (!strcmp(a, "--timeout")) {
                long r = strtol(v, &end, 10);
                if (*end || end == v || r < 1 || r > 3600)
                    return bad_usage("--timeout takes 1..3600 seconds, not '%s'", v);
                o.timeout_s = (int)r;
            } else if (!strcmp(a, "--csv")) {
                o.csv_path = v;
            }
        }
    }
    if (!o.nroutes)
        for (size_t j = 0; j < sizeof routes_known / sizeof *routes_known; j++)
            o.routes[o.nroutes++] = &routes_known[j];
    if (!o.nencs) {
        o.encs[o.nencs++] = &encs_known[0];
        o.encs[o.nencs++] = &encs_known[1];
    }
    if (!o.nsizes) {
        static const size_t def[] = {0, 8, 64, 512, 4096, 32768, 262144, 1048576};
        for (size_t k = 0; k < sizeof def / sizeof *def; k++)
            o.sizes[o.nsizes++] = def[k];
    }
    if (!o.nthreads) o.threads[o.nthreads++] = 1;
    return 0;
}

static size_t max_size(void)
{
    size_t m = 1;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > m) m = o.sizes[i];
    return m;
}

/* Iterations: budgets that keep every point at a fraction of a second on one host. */
static long scaled(long n, long min)
{
    double v = (double)n * o.iters_scale;
    return v < (double)min ? min : v > 1e8 ? 100000000 : (long)v;
}

static long iters_pingpong(size_t size)
{
    long n = size ? (long)((4u << 20) / size) : 1000;
    n = n < 20 ? 20 : n > 1000 ? 1000 : n;
    return scaled(n, 2);
}

static long iters_stream(size_t size)
{
    long n = size ? (long)((32u << 20) / size) : 4000;
    n = n < 32 ? 32 : n > 4000 ? 4000 : n;
    return scaled(n, 4);
}

static long warm_of(long n, long lo, long hi)
{
    long w = n / 10;
    return w < lo ? lo : w > hi ? hi : w;
}

/* ---- messages --------------------------------------------------------------------------- */

/* Waits for a message (tid, tag) at most `secs` seconds; `partner` (if > 0) is watched: its
 * pvm_notify(PvmTaskExit) ends the wait early. Returns the buffer id, or -1 after saying why. */
static int wait_msg_for(int tid, int tag, int partner, const char *what, int secs)
{
    double deadline = now_us() + secs * 1e6;
    for (;;) {
        double left = deadline - now_us();
        if (left <= 0) {
            msg("t%x: timed out after %d s waiting for %s from t%x", pvm_mytid(), secs, what, tid);
            return -1;
        }
        /* Slices of at most 1 s, so a partner's exit is seen soon. */
        long slice = left > 1e6 ? 1000000 : (long)left + 1;
        struct timeval tv = {slice / 1000000, slice % 1000000};
        int b = pvm_trecv(tid, tag, &tv);
        if (b > 0) return b;
        if (b < 0) {
            msg("t%x: pvm_trecv (%s): %s (%d)", pvm_mytid(), what, pvm_err_name(b), b);
            return -1;
        }
        if (partner > 0 && pvm_probe(-1, TAG_EXIT) > 0) {
            msg("t%x: t%x exited while we waited for %s", pvm_mytid(), partner, what);
            return -1;
        }
    }
}

static int wait_msg(int tid, int tag, int partner, const char *what)
{
    return wait_msg_for(tid, tag, partner, what, o.timeout_s);
}

/* Sends `size` bytes of `data` with encoding `enc` to tid. 0 or -1. */
static int send_data(int tid, int tag, int enc, const unsigned char *data, size_t size)
{
    int rc = pvm_initsend(enc);
    if (rc >= 0 && size) rc = pvm_pkbyte((char *)data, (int)size, 1);
    if (rc >= 0) rc = pvm_send(tid, tag);
    if (rc < 0) {
        msg("t%x: sending %zu bytes to t%x: %s (%d)", pvm_mytid(), size, tid, pvm_err_name(rc), rc);
        return -1;
    }
    return 0;
}

/* Receives a data message of `size` bytes into buf (checked with --verify). 0 or -1. */
static int recv_data(int tid, int tag, int partner, unsigned char *buf, size_t size)
{
    int b = wait_msg(tid, tag, partner, "data");
    if (b < 0) return -1;
    int bytes = 0, t = 0, src = 0;
    int rc = pvm_bufinfo(b, &bytes, &t, &src);
    /* XDR (PvmDataDefault) pads bytes to 4. */
    if (rc < 0 || bytes < (int)size || bytes > (int)size + 8) {
        msg("t%x: message from t%x has %d bytes, expected %zu", pvm_mytid(), src, bytes, size);
        return -1;
    }
    if (size && (rc = pvm_upkbyte((char *)buf, (int)size, 1)) < 0) {
        msg("t%x: pvm_upkbyte %zu bytes: %s (%d)", pvm_mytid(), size, pvm_err_name(rc), rc);
        return -1;
    }
    if (o.verify && check(buf, size)) return -1;
    return 0;
}

static int send_ints(int tid, int tag, const int *v, int n)
{
    int rc = pvm_initsend(PvmDataDefault);
    if (rc >= 0) rc = pvm_pkint((int *)v, n, 1);
    if (rc >= 0) rc = pvm_send(tid, tag);
    if (rc < 0) {
        msg("t%x: sending to t%x: %s (%d)", pvm_mytid(), tid, pvm_err_name(rc), rc);
        return -1;
    }
    return 0;
}

static int recv_ints(int tid, int tag, int partner, int *v, int n, const char *what, int secs)
{
    int b = wait_msg_for(tid, tag, partner, what, secs);
    if (b < 0) return -1;
    int rc = pvm_upkint(v, n, 1);
    if (rc < 0) {
        msg("t%x: unpacking %s: %s (%d)", pvm_mytid(), what, pvm_err_name(rc), rc);
        return -1;
    }
    return 0;
}

/* A zero-length control message (credit, ack). */
static int send_ctl(int tid, int tag)
{
    return send_data(tid, tag, PvmDataRaw, NULL, 0);
}

/* ---- the worker ------------------------------------------------------------------------- */

struct wthread {
    int index;
    int master;
    pthread_t th;
    int failed;
};

static size_t w_maxsize;

/* The longest a (route, threads) run may take: its waits are bounded one by one. */
static unsigned run_limit_s(void)
{
    return (unsigned)(30 * o.timeout_s < 60 ? 60 : 30 * o.timeout_s);
}

/* Worker thread `index`: answers its master thread's commands until QUIT. */
static void *worker_pair(void *arg)
{
    struct wthread *wt = arg;
    int m = wt->master, i = wt->index;
    unsigned char *sbuf = malloc(w_maxsize), *rbuf = malloc(w_maxsize);
    if (!sbuf || !rbuf) {
        msg("worker: out of memory (%zu bytes)", w_maxsize);
        wt->failed = 1;
        free(sbuf);
        free(rbuf);
        return NULL;
    }
    fill(sbuf, w_maxsize);
    for (;;) {
        int cmd[CMD_INTS];
        /* Between commands the master may measure the other pairs for a while: wait as long
         * as a whole run may last (its exit ends the wait). */
        if (recv_ints(m, PAIR_TAG(i, PT_CMD), m, cmd, CMD_INTS, "a command", run_limit_s())) {
            wt->failed = 1;
            break;
        }
        int op = cmd[0], enc = cmd[1];
        size_t size = (size_t)cmd[2];
        long count = cmd[3];
        int half = cmd[4] / 2;
        if (op == OP_QUIT) break;
        if ((op != OP_PINGPONG && op != OP_STREAM) || size > w_maxsize || count < 0 || half < 1) {
            msg("worker: bad command %d (size %zu count %ld)", op, size, count);
            wt->failed = 1;
            break;
        }
        int err = 0;
        if (op == OP_PINGPONG) {
            for (long k = 0; k < count && !err; k++)
                err = recv_data(m, PAIR_TAG(i, PT_DATA), m, rbuf, size) ||
                      send_data(m, PAIR_TAG(i, PT_DATA), enc, sbuf, size);
        } else {
            for (long k = 1; k <= count && !err; k++) {
                err = recv_data(m, PAIR_TAG(i, PT_DATA), m, rbuf, size);
                if (!err && k % half == 0 && k < count) err = send_ctl(m, PAIR_TAG(i, PT_CREDIT));
            }
            if (!err) err = send_ctl(m, PAIR_TAG(i, PT_ACK));
        }
        if (err) {
            wt->failed = 1;
            break;
        }
    }
    free(sbuf);
    free(rbuf);
    return NULL;
}

static int worker_main(void)
{
    int me = pvm_mytid();
    if (me < 0) {
        msg("worker: pvm_mytid: %s (%d)", pvm_err_name(me), me);
        return 1;
    }
    int master = pvm_parent();
    if (master <= 0) {
        msg("worker: no parent task: the worker is spawned by pvm-bench, not run by hand");
        pvm_exit();
        return 2;
    }
    pvm_notify(PvmTaskExit, TAG_EXIT, 1, &master);
    /* The master sends the setup right after the spawn. */
    int setup[8];
    if (recv_ints(master, TAG_SETUP, master, setup, 8, "the setup", 60)) {
        pvm_exit();
        return 1;
    }
    int route = setup[1], nthreads = setup[2], first = setup[7]; /* (its threads' indices) */
    w_maxsize = (size_t)setup[4];
    o.timeout_s = setup[5];
    o.verify = setup[6];
    int status = 0;
    if (setup[0] != SETUP_VERSION || nthreads < 1 || nthreads > MAX_THREADS || setup[3] < 2 ||
        setup[4] < 1 || o.timeout_s < 1 || first < 0 || first > MAX_THREADS - nthreads) {
        msg("worker: bad setup message (version %#x)", (unsigned)setup[0]);
        status = PvmBadParam;
    }
    /* The route option, before the first data message (the master set the same). */
    if (!status) {
        int rc = pvm_setopt(PvmRoute, route);
        if (rc < 0) {
            msg("worker t%x: pvm_setopt(PvmRoute, %d): %s (%d)", me, route, pvm_err_name(rc), rc);
            status = rc;
        }
    }
    struct wthread wt[MAX_THREADS] = {0};
    int started = 0;
    for (int i = 0; !status && i < nthreads; i++) {
        wt[i] = (struct wthread){.index = first + i, .master = master};
        if (i > 0 && pthread_create(&wt[i].th, NULL, worker_pair, &wt[i])) {
            msg("worker: cannot start thread %d", i);
            status = PvmOutOfRes;
            break;
        }
        started = i + 1;
    }
    int ready[2] = {status, started};
    if (send_ints(master, TAG_READY, ready, 2) || status) {
        /* The master gives up on us; threads already started wait inside pvm calls. */
        fflush(stderr);
        _exit(1);
    }
    worker_pair(&wt[0]);
    int failed = 0;
    for (int i = 1; i < started; i++) {
        pthread_join(wt[i].th, NULL);
        failed |= wt[i].failed;
    }
    failed |= wt[0].failed;
    pvm_exit();
    return failed ? 1 : 0;
}

/* ---- the master: one route option, one thread count, in a child process ----------------- */

struct point {
    double pp_us;  /* pingpong: this pair's one-way time (this rep) */
    double t0, t1; /* stream: first send, ack received (this rep) */
    long msgs;     /* stream: timed messages */
};

struct run {
    const struct route_opt *route;
    int nthreads;
    int worker[MAX_THREADS]; /* the partner task (one, or with --peers one per thread) */
    int nworkers;
    pthread_barrier_t barrier;
    struct point pt[MAX_THREADS];
    _Atomic int failed; /* any thread failed: all stop at the next barrier */
    /* Thread 0's results: one value per (encoding, mode, size, repeat), see VAL(); how many
     * repeats of each point were measured. */
    double *vals;
    int *nvals;
};
#define POINT(r, e, stream, s) (((e)*2 + (stream)) * o.nsizes + (s))
#define VAL(r, e, stream, s, rep) ((r)->vals[POINT(r, e, stream, s) * o.reps + (rep)])

struct mthread {
    struct run *run;
    int index;
    int worker; /* its partner task */
    pthread_t th;
    unsigned char *sbuf, *rbuf;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_row(const char *mode, const struct run *r, const char *enc, size_t bytes,
                      long iters, double us, double us_best, double mbps, double mbps_best)
{
    if (!o.quiet) {
        printf("%-9s %-8s %-8s %7d %9zu %7ld %11.2f %9.2f %10.1f %10.1f\n", mode, r->route->name,
               enc, r->nthreads, bytes, iters, us, us_best, mbps, mbps_best);
        fflush(stdout);
    }
    if (csv) {
        fprintf(csv, "%s,%s,%s,%d,%zu,%ld,%.3f,%.3f\n", mode, r->route->name, enc, r->nthreads,
                bytes, iters, us, mbps);
        fflush(csv);
    }
}

/* All master threads meet; false if one of them failed (then everybody stops). */
static int meet(struct run *r)
{
    pthread_barrier_wait(&r->barrier);
    int ok = !r->failed;
    pthread_barrier_wait(&r->barrier); /* nobody sets failed before all have read it */
    return ok;
}

static int send_cmd(struct mthread *t, int op, int enc, size_t size, long count)
{
    int cmd[CMD_INTS] = {op, enc, (int)size, (int)count, o.window};
    return send_ints(t->worker, PAIR_TAG(t->index, PT_CMD), cmd, CMD_INTS);
}

/* `count` round trips; the one-way time of the last `timed` of them in *us. */
static int pingpong(struct mthread *t, int enc, size_t size, long count, long timed, double *us)
{
    int w = t->worker, tag = PAIR_TAG(t->index, PT_DATA);
    if (send_cmd(t, OP_PINGPONG, enc, size, count)) return -1;
    double t0 = now_us();
    for (long k = 0; k < count; k++) {
        if (k == count - timed) t0 = now_us();
        if (send_data(w, tag, enc, t->sbuf, size) || recv_data(w, tag, w, t->rbuf, size)) return -1;
    }
    if (us) *us = (now_us() - t0) / (double)timed / 2;
    return 0;
}

/* `count` messages one way, at most o.window ahead of the receiver, then its ack. */
static int stream(struct mthread *t, int enc, size_t size, long count, double *t0, double *t1)
{
    int w = t->worker, half = o.window / 2;
    long credits = 0, ncredits = (count - 1) / half;
    if (send_cmd(t, OP_STREAM, enc, size, count)) return -1;
    *t0 = now_us();
    for (long k = 0; k < count; k++) {
        while (k >= o.window + credits * half) {
            if (wait_msg(w, PAIR_TAG(t->index, PT_CREDIT), w, "a credit") < 0) return -1;
            credits++;
        }
        if (send_data(w, PAIR_TAG(t->index, PT_DATA), enc, t->sbuf, size)) return -1;
    }
    for (; credits < ncredits; credits++)
        if (wait_msg(w, PAIR_TAG(t->index, PT_CREDIT), w, "a credit") < 0) return -1;
    if (wait_msg(w, PAIR_TAG(t->index, PT_ACK), w, "the ack") < 0) return -1;
    *t1 = now_us();
    return 0;
}

/* One measurement of a point (encoding, size, mode) by every pair at once; thread 0 keeps
 * the value. */
static int measure_once(struct mthread *t, int ei, int si, int is_stream, int rep)
{
    struct run *r = t->run;
    struct point *p = &r->pt[t->index];
    int enc = o.encs[ei]->value;
    size_t size = o.sizes[si];
    long n = is_stream ? iters_stream(size) : iters_pingpong(size);
    int err;
    if (!meet(r)) return -1;
    if (is_stream) {
        double a, b;
        /* Warm-up stream (untimed), then the timed one, started by the pairs together. */
        err = stream(t, enc, size, warm_of(n, 4, 200), &a, &b);
        pthread_barrier_wait(&r->barrier);
        if (!err) {
            err = stream(t, enc, size, n, &p->t0, &p->t1);
            p->msgs = n;
        }
    } else {
        err = pingpong(t, enc, size, warm_of(n, 2, 50) + n, n, &p->pp_us);
    }
    if (err) r->failed = 1;
    if (!meet(r)) return -1;
    if (t->index == 0) {
        /* Microseconds per message (stream: the pairs' messages together, so MB/s = bytes /
         * value), or the pairs' mean one-way time. */
        double v = 0;
        if (is_stream) {
            double t0 = r->pt[0].t0, t1 = r->pt[0].t1;
            long msgs = 0;
            for (int i = 0; i < r->nthreads; i++) {
                t0 = r->pt[i].t0 < t0 ? r->pt[i].t0 : t0;
                t1 = r->pt[i].t1 > t1 ? r->pt[i].t1 : t1;
                msgs += r->pt[i].msgs;
            }
            v = (t1 - t0) / (double)msgs;
        } else {
            for (int i = 0; i < r->nthreads; i++)
                v += r->pt[i].pp_us;
            v /= r->nthreads;
        }
        VAL(r, ei, is_stream, si, rep) = v > 1e-6 ? v : 1e-6;
        r->nvals[POINT(r, ei, is_stream, si)] = rep + 1;
    }
    return 0;
}

/* The rows: the median of the repeats measured (the least time beside it). */
static void report(struct run *r)
{
    for (int ei = 0; ei < o.nencs; ei++)
        for (int is_stream = 0; is_stream < 2; is_stream++)
            for (int si = 0; si < o.nsizes; si++) {
                int k = r->nvals[POINT(r, ei, is_stream, si)];
                if (!k) continue;
                double *v = &VAL(r, ei, is_stream, si, 0);
                double med = median(v, k), best = v[0]; /* median sorts */
                size_t size = o.sizes[si];
                /* MB/s (10^6 B/s): stream, all pairs' payload; pingpong, per pair. */
                double per = is_stream ? 1 : r->nthreads;
                long n = is_stream ? iters_stream(size) : iters_pingpong(size);
                const char *mode = is_stream ? (o.peers ? "stream-peers" : "stream")
                                             : (o.peers ? "pingpong-peers" : "pingpong");
                print_row(mode, r, o.encs[ei]->name, size, n, med, best, (double)size * per / med,
                          (double)size * per / best);
            }
}

static void *master_pair(void *arg)
{
    struct mthread *t = arg;
    struct run *r = t->run;
    int ok = 1;
    /* The repeats are the outer loop: a burst of load on a shared machine then spoils one
     * repeat of many points rather than every repeat of one. */
    for (int rep = 0; ok && rep < o.reps; rep++)
        for (int ei = 0; ok && ei < o.nencs; ei++)
            for (int is_stream = 0; ok && is_stream < 2; is_stream++)
                for (int s = 0; ok && s < o.nsizes; s++)
                    if (is_stream ? o.stream : o.pingpong)
                        ok = !measure_once(t, ei, s, is_stream, rep);
    if (send_cmd(t, OP_QUIT, 0, 0, 0)) ok = 0;
    if (!ok) r->failed = 1;
    return NULL;
}

/* Sets the task's route option; for CoR's values, fails clearly without libcorpvm. */
static int set_route(int value, const char *name)
{
    int cor = value == PvmRouteDirectUDP || value == PvmRouteDirectMyrinet;
    int autoerr = 0;
    if (cor) autoerr = pvm_setopt(PvmAutoErr, 0); /* plain libpvm3 would print its own error */
    int rc = pvm_setopt(PvmRoute, value);
    int now = pvm_getopt(PvmRoute);
    if (cor && autoerr >= 0) pvm_setopt(PvmAutoErr, autoerr);
    if (rc < 0 || now != value) {
        if (cor)
            msg("route %s: pvm_setopt(PvmRoute, %d) is refused (%d): libcorpvm is not loaded "
                "(link with -lcorpvm -lpvm3, or run with LD_PRELOAD=libcorpvm.so)",
                name, value, rc);
        else
            msg("route %s: pvm_setopt(PvmRoute, %d): %s (%d)", name, value, pvm_err_name(rc), rc);
        return -1;
    }
    return 0;
}

/* The child process of one (route, threads) run: a PVM task of its own. Exit status. */
static int master_run(const struct route_opt *route, int nthreads)
{
    struct run r = {.route = route, .nthreads = nthreads};
    int me = pvm_mytid();
    if (me < 0) {
        msg("pvm_mytid: %s (%d)", pvm_err_name(me), me);
        return 4;
    }
    int cor = route->value == PvmRouteDirectUDP || route->value == PvmRouteDirectMyrinet;
    /* A CoR route: set it first, so a missing libcorpvm shows before anything starts; then
     * PVM's default again until the partner has the setup: messages exchanged before both
     * sides set the option would settle the pair on PVM's path for good. */
    if (cor && (set_route(route->value, route->name) || set_route(PvmAllowDirect, "default"))) {
        pvm_exit();
        return 3;
    }
    /* The partners: one task with nthreads threads, or (--peers) one task per thread. */
    char *args[] = {"worker", NULL};
    int nworkers = o.peers ? nthreads : 1, rc = 1, ready[2] = {-1, 0};
    struct mthread mt[MAX_THREADS] = {0};
    for (int k = 0; k < nworkers; k++) {
        int worker = 0, n = pvm_spawn(self_path, args, PvmTaskDefault, "", 1, &worker);
        if (n != 1) {
            msg("cannot spawn the partner %s: %s (%d)", self_path, pvm_err_name(worker), worker);
            goto out;
        }
        r.worker[r.nworkers++] = worker;
        pvm_notify(PvmTaskExit, TAG_EXIT, 1, &worker);
    }
    for (int k = 0; k < nworkers; k++) {
        int worker = r.worker[k],
            setup[8] = {SETUP_VERSION, route->value, nthreads / nworkers, o.window, (int)max_size(),
                        o.timeout_s,   o.verify,     o.peers ? k : 0};
        if (send_ints(worker, TAG_SETUP, setup, 8) ||
            (k == nworkers - 1 && set_route(route->value, route->name)))
            goto out;
    }
    for (int k = 0; k < nworkers; k++) {
        int worker = r.worker[k];
        if (recv_ints(worker, TAG_READY, worker, ready, 2, "the partner's READY", o.timeout_s))
            goto out;
        if (ready[0] != 0 || ready[1] != nthreads / nworkers) {
            msg("the partner t%x could not start: %s (%d)", worker, pvm_err_name(ready[0]),
                ready[0]);
            ready[0] = -1;
            goto out;
        }
    }

    size_t npoints = (size_t)o.nencs * 2 * (size_t)o.nsizes;
    if (!(r.vals = calloc(npoints * (size_t)o.reps, sizeof *r.vals)) ||
        !(r.nvals = calloc(npoints, sizeof *r.nvals))) {
        msg("out of memory");
        goto out_free;
    }
    for (int i = 0; i < nthreads; i++) {
        mt[i] = (struct mthread){.run = &r, .index = i, .worker = r.worker[o.peers ? i : 0]};
        if (!(mt[i].sbuf = malloc(max_size())) || !(mt[i].rbuf = malloc(max_size()))) {
            msg("out of memory (%zu bytes per buffer)", max_size());
            goto out_free;
        }
        fill(mt[i].sbuf, max_size());
    }
    /* Warm-up: the first messages on a CoR route travel PVM's path while the handshake
     * runs (and PvmRouteDirect connects at the first message). */
    for (int k = 0; k < nworkers; k++)
        if (pingpong(&mt[o.peers ? k : 0], PvmDataRaw, 8, 50, 50, NULL)) goto out_free;
    char info[160] = "";
    for (int k = 0; cor && pvm_cor_domain && k < nworkers; k++) {
        int mine = -1, theirs = -1, worker = r.worker[k];
        if (pvm_cor_domain(me, &mine) == PvmOk && pvm_cor_domain(worker, &theirs) == PvmOk) {
            if (!k) snprintf(info, sizeof info, ", CoR domains %d and %d", mine, theirs);
        } else {
            /* Figures of PVM's path under a CoR route's name would mislead. */
            msg("route %s: the partner t%x is not reached over CoR, its messages take PVM's "
                "path: not measured (COR_ROUTE_PATH set? COR_PVM_STATS=1 tells more)",
                route->name, (unsigned)worker);
            goto out_quit;
        }
    }
    if (!o.quiet) {
        printf("# %s, %d thread pair%s: master t%x, worker t%x%s%s\n", route->name, nthreads,
               nthreads > 1 ? "s" : "", (unsigned)me, (unsigned)r.worker[0],
               r.nworkers > 1 ? " (and one more task per thread)" : "", info);
        fflush(stdout);
    }

    if (pthread_barrier_init(&r.barrier, NULL, (unsigned)nthreads)) {
        msg("pthread_barrier_init failed");
        goto out_free;
    }
    int started = 1;
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&mt[i].th, NULL, master_pair, &mt[i])) {
            msg("cannot start thread %d", i);
            break; /* the barrier never fills: the alarm ends this process */
        }
        started++;
    }
    if (started == nthreads) master_pair(&mt[0]);
    for (int i = 1; i < started; i++)
        pthread_join(mt[i].th, NULL);
    pthread_barrier_destroy(&r.barrier);
    report(&r);
    rc = r.failed || started != nthreads;
    goto out_free;

out_quit:
    for (int i = 0; i < nthreads; i++)
        send_cmd(&mt[i], OP_QUIT, 0, 0, 0);
out_free:
    for (int i = 0; i < nthreads; i++) {
        free(mt[i].sbuf);
        free(mt[i].rbuf);
    }
    free(r.vals);
    free(r.nvals);
out:
    /* The partners leave after QUIT (after a failure, once their own waits timed out); make
     * sure they are gone before the next run. */
    for (int k = 0; k < r.nworkers; k++) {
        struct timeval tv = {ready[0] == 0 ? o.timeout_s + 2 : 1, 0};
        int b = pvm_trecv(-1, TAG_EXIT, &tv), gone = 0;
        if (b <= 0 || pvm_upkint(&gone, 1, 1) < 0) {
            for (int j = 0; j < r.nworkers; j++)
                pvm_kill(r.worker[j]); /* (those gone already: an error, ignored) */
            if (!rc) msg("a partner did not exit: killed");
            break;
        }
    }
    pvm_exit();
    return rc;
}

/* Runs fn(route, threads) in a child process, bounded; its exit status. */
static int in_child(const struct route_opt *route, int nthreads, unsigned limit_s)
{
    fflush(stdout);
    fflush(stderr);
    if (csv) fflush(csv);
    pid_t pid = fork();
    if (pid < 0) {
        msg("fork: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(limit_s);
        int rc = route ? master_run(route, nthreads) : 0;
        fflush(stdout);
        if (csv) fflush(csv);
        _exit(rc);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            msg("waitpid: %s", strerror(errno));
            return 1;
        }
    if (WIFSIGNALED(st)) {
        msg("route %s, %d thread pair(s): the measuring task died of signal %d%s", route->name,
            nthreads, WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (took too long)" : "");
        return 1;
    }
    return WEXITSTATUS(st);
}

/* Is libcorpvm loaded? Asks pvm_setopt/pvm_getopt in a throw-away task, so the measuring
 * tasks start clean. 1 yes, 0 no, -1 cannot tell. */
static int corpvm_loaded(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        alarm(30);
        if (pvm_mytid() < 0) _exit(2);
        pvm_setopt(PvmAutoErr, 0);
        int rc = pvm_setopt(PvmRoute, PvmRouteDirectUDP);
        int yes = rc >= 0 && pvm_getopt(PvmRoute) == PvmRouteDirectUDP;
        pvm_exit();
        _exit(yes ? 0 : 1);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) > 1) return -1;
    return WEXITSTATUS(st) == 0;
}

/* Passes the variables that make the partner run like us to spawned tasks (PVM_EXPORT). */
static void export_env(void)
{
    static const char *vars[] = {"LD_PRELOAD",    "LD_LIBRARY_PATH", "COR_ROUTE_PATH",
                                 "COR_PVM_STATS", "COR_PVM_SPIN_US", "COR_PVM_DOMAINS",
                                 "COR_SPIN_US"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) pvm_export((char *)vars[i]);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The route options are ours to set: COR_PVM_ROUTE would turn PvmRouteDirect into a CoR
     * route (and is read when the task enrols, so it goes before any pvm call). */
    const char *env_route = getenv("COR_PVM_ROUTE");
    int is_worker = argc == 2 && !strcmp(argv[1], "worker");
    if (env_route && *env_route && strcmp(env_route, "none")) {
        if (!is_worker)
            msg("ignoring COR_PVM_ROUTE=%s: the routes measured are set with --routes", env_route);
        unsetenv("COR_PVM_ROUTE");
    }
    if (is_worker) return worker_main();

    int rc = parse_args(argc, argv);
    if (rc) return rc;
    if (argv[0][0] == '/') {
        snprintf(self_path, sizeof self_path, "%s", argv[0]);
    } else {
        ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
        if (n <= 0) {
            msg("cannot find this program's path (/proc/self/exe): %s", strerror(errno));
            return 1;
        }
        self_path[n] = 0;
    }
    int maxthreads = 1, pvm_routes = 0;
    for (int i = 0; i < o.nthreads; i++)
        maxthreads = o.threads[i] > maxthreads ? o.threads[i] : maxthreads;
    for (int i = 0; i < o.nroutes; i++)
        pvm_routes += o.routes[i]->value == PvmDontRoute || o.routes[i]->value == PvmRouteDirect;
    /* CoR routes find out by themselves (set_route); PVM's need the probe. */
    if (maxthreads > 1 && pvm_routes) {
        int loaded = corpvm_loaded();
        if (loaded < 0) {
            msg("cannot enrol in PVM: is a virtual machine (pvmd) running?");
            return 1;
        }
        if (!loaded) {
            msg("--threads %d: pvm_setopt(PvmRoute, PvmRouteDirectUDP) is refused, so "
                "libcorpvm is not loaded, and plain libpvm3 is not thread-safe (link with "
                "-lcorpvm -lpvm3, or run with LD_PRELOAD=libcorpvm.so)",
                maxthreads);
            return 2;
        }
    }
    if (o.csv_path) {
        csv = fopen(o.csv_path, "w");
        if (!csv) {
            msg("cannot write %s: %s", o.csv_path, strerror(errno));
            return 1;
        }
        fprintf(csv, "mode,route,encoding,threads,bytes,iters,usec_oneway,MBps\n");
        fflush(csv);
    }
    export_env();
    signal(SIGPIPE, SIG_IGN);
    if (!o.quiet)
        printf("%-9s %-8s %-8s %7s %9s %7s %11s %9s %10s %10s\n", "mode", "route", "encoding",
               "threads", "bytes", "iters", "one_way_us", "min_us", "MB/s", "best_MB/s");
    unsigned limit = run_limit_s();
    int failed = 0;
    for (int ri = 0; ri < o.nroutes; ri++)
        for (int ti = 0; ti < o.nthreads; ti++) {
            int st = in_child(o.routes[ri], o.threads[ti], limit);
            if (st == 4) {
                msg("no PVM virtual machine to run in: start pvmd first (PVM_ROOT, PVM_TMP)");
                failed++;
                goto done;
            }
            if (st) {
                msg("route %s, %d thread pair(s) failed%s", o.routes[ri]->name, o.threads[ti],
                    st == 3 ? " (libcorpvm missing)" : "");
                failed++;
            }
        }
done:
    if (csv && fclose(csv) != 0) {
        msg("writing %s: %s", o.csv_path, strerror(errno));
        failed++;
    }
    return failed ? 1 : 0;
}
