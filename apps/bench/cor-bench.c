/*
 * cor-bench: round-trip time and one-way transfer rate by message size, through the task API,
 * and message rate (rate), through a route alone (--raw), and over plain UDP sockets (the
 * baseline), in one run so the figures can be compared. Runs as 2 domains:
 *
 *   cor-run -n 2 [--route udp] [--ports 4] cor-bench MODE [options]
 *
 * and libcordsm's operations beside the task API's round trip (cor-bench dsm, 2 or more
 * domains). This file reads the options, joins the session and prints rows; the modes live in
 * bench_task.c, bench_multi.c, bench_raw.c, bench_socket.c and bench_dsm.c, --plot in
 * bench_plot.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cor/cor.h"

static const char usage[] =
    "usage: cor-run -n 2 [--route R] [--ports P] cor-bench MODE [options]\n"
    "modes:\n"
    "  pingpong    round trip by size (one-way = half)\n"
    "  stream      one-way transfer rate, measured by the receiver\n"
    "  multiport   aggregate stream rate over 1..4 hard ports, one task pair per port\n"
    "  multitask   aggregate stream rate of 1..16 task pairs per domain\n"
    "  rate        messages per second (osu_mbw_mr): windows of 64 small messages,\n"
    "              each acked, over 1 and 16 task pairs (aggregate); one_way_us is the\n"
    "              time per message\n"
    "  udp-raw     the baseline: plain polled UDP sockets, ping-pong and stream\n"
    "  dsm         libcordsm (2+ domains: cor-run -n N): read hit and miss, write\n"
    "              invalidation, fetch-add, CAS, pipelined adds, locks, barrier, a\n"
    "              fetch-add while the home computes, put; each beside R, the task\n"
    "              API's 8 B round trip of the same run, with the issue's goals\n"
    "options:\n"
    "  --raw             measure the route alone (cor/raw.h), without the task layer\n"
    "  --baseline udp    pingpong/stream/rate over plain UDP sockets instead\n"
    "  --route NAME      route for the task API and --raw (default: COR_ROUTE or udp)\n"
    "  --sizes LIST      message sizes, e.g. 0,1,4K,64K,1M (default 0,1,2,4..1M;\n"
    "                    multiport/multitask: 4K,64K,1M; rate: 1,2,4..4K)\n"
    "  --iters F         scale the iteration counts by F (default 1)\n"
    "  --reps N          measure each size N times, report the best (default 3)\n"
    "  --pairs LIST      multitask pair counts (default 1,2,4,8,16); rate: task pairs\n"
    "                    (default 1,16; --raw and --baseline measure one pair)\n"
    "  --ports LIST      multiport port counts (default 1..min(4, ports opened))\n"
    "  --window N        stream messages in flight (default 8), or a rate's window\n"
    "                    (default 64); 1..64\n"
    "  --recv-alloc      receive into core buffers (cor_recvI) instead of cor_recvI_into\n"
    "  --distinct-buffers  each receive in flight, and each multiport/multitask pair,\n"
    "                    gets its own buffers (default: shared, as osu_bw does, so the\n"
    "                    caches and memory bandwidth stay out)\n"
    "  --verify          check the content of every received message (distinct buffers)\n"
    "  --count N         dsm: operations per measure (default 10000; 10..10^7)\n"
    "  --tasks T         dsm: tasks per domain of the aggregate pipelined adds (1..16,\n"
    "                    default 4); dsm's --sizes are its put sizes (default\n"
    "                    64,1K,16K,256K,1M)\n"
    "  --only LIST       dsm: measure only these groups (R always): sections, atomics,\n"
    "                    adds, lock, barrier, polling, attentive, put; e.g. --only atomics,lock\n"
    "  --csv FILE        write rows route,mode,bytes,ports,pairs,one_way_us,MBps\n"
    "                    (dsm: route,domains,what,count,median,p99,unit,per_R,goal,met)\n"
    "  --plot FILE.png   draw this run's rows with gnuplot (not dsm): by size, time per\n"
    "                    message and MB/s on log axes; multiport/multitask: aggregate\n"
    "                    MB/s by port or pair count\n"
    "  --quiet           no table on standard output\n"
    "When standard error is a terminal, domain 0 shows there the size being measured, the\n"
    "time elapsed and an estimate of the time left.\n";

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long scaled(const struct bench *b, long n, long min)
{
    double v = (double)n * b->iters_scale;
    return v < (double)min ? min : (long)v;
}

/* Budgets chosen so every size takes a fraction of a second on loopback. */
long bench_iters_pingpong(const struct bench *b, size_t size)
{
    long n = size ? (long)((32u << 20) / size) : 2000;
    n = n < 100 ? 100 : n > 2000 ? 2000 : n;
    return scaled(b, n, 2);
}

/* A stream moves 512 MiB (at most 20000 messages): at several GB/s that is a tenth of a second,
 * long enough that a scheduler tick or a neighbour's burst on a shared machine stays small. */
long bench_iters_stream(const struct bench *b, size_t size)
{
    long n = size ? (long)((512u << 20) / size) : 20000;
    n = n < 64 ? 64 : n > 20000 ? 20000 : n;
    return scaled(b, n, 3);
}

long bench_warmup(long iters)
{
    long w = iters / 20;
    return w < 2 ? 2 : w > 100 ? 100 : w;
}

void bench_fill(void *buf, size_t len)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(i * 7 + 1);
}

int bench_check(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        if (p[i] != (unsigned char)(i * 7 + 1)) {
            fprintf(stderr, "cor-bench: byte %zu of %zu is %u, expected %u\n", i, len, p[i],
                    (unsigned char)(i * 7 + 1));
            return COR_EPROTO;
        }
    return COR_OK;
}

int bench_fail(const char *what, int err)
{
    fprintf(stderr, "cor-bench: %s: %s\n", what, cor_strerror(err));
    return err;
}

void bench_header(const struct bench *b)
{
    if (b->rank != 0 || b->quiet) return;
    if (!strcmp(b->mode, "rate"))
        printf("%-11s %-11s %9s %5s %10s %10s %10s\n", "route", "mode", "bytes", "pairs", "Mmsg/s",
               "us/msg", "MB/s");
    else
        printf("%-11s %-9s %9s %5s %5s %10s %11s %10s\n", "route", "mode", "bytes", "ports",
               "pairs", "rtt_us", "one_way_us", "MB/s");
    fflush(stdout);
}

void bench_progress(const struct bench *b, int step, int steps, size_t bytes)
{
    if (!b->progress || steps <= 0) return;
    double done = (b->phase + (double)step / steps) / (b->nphases > 0 ? b->nphases : 1);
    double elapsed = (double)(bench_now_ns() - b->started_ns) / 1e9;
    char left[32] = "?";
    if (done > 0) snprintf(left, sizeof left, "%.1f s", elapsed / done - elapsed);
    /* \r and erase-line: the next state overwrites this one */
    fprintf(stderr, "\r\033[Kcor-bench %s: %zu B (%d/%d), %.1f s elapsed, about %s left", b->mode,
            bytes, step + 1, steps, elapsed, left);
    fflush(stderr);
}

void bench_progress_clear(const struct bench *b)
{
    if (b->progress) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

static void row_print(const struct bench *b, const struct bench_row *r)
{
    bench_progress_clear(b);
    if (b->plot) bench_plot_keep(r);
    if (!b->quiet && !strcmp(b->mode, "rate")) {
        /* messages/s in millions: one message every one_way_us */
        printf("%-11s %-11s %9zu %5d %10.3f %10.2f %10.1f\n", r->route, r->mode, r->bytes, r->pairs,
               r->one_way_us > 0 ? 1 / r->one_way_us : 0, r->one_way_us, r->mbps);
        fflush(stdout);
    } else if (!b->quiet) {
        char rtt[32] = "-";
        if (r->rtt_us > 0) snprintf(rtt, sizeof rtt, "%.2f", r->rtt_us);
        printf("%-11s %-9s %9zu %5d %5d %10s %11.2f %10.1f\n", r->route, r->mode, r->bytes,
               r->ports, r->pairs, rtt, r->one_way_us, r->mbps);
        fflush(stdout);
    }
    if (b->csv) {
        fprintf(b->csv, "%s,%s,%zu,%d,%d,%.3f,%.3f\n", r->route, r->mode, r->bytes, r->ports,
                r->pairs, r->one_way_us, r->mbps);
        fflush(b->csv);
    }
}

/* The best row so far of the current key; strings copied (callers' may not outlive it). */
static struct {
    int have;
    struct bench_row row;
    char route[64], mode[32];
} best;

void bench_flush(const struct bench *b)
{
    if (best.have) row_print(b, &best.row);
    best.have = 0;
}

void bench_row(const struct bench *b, const struct bench_row *r)
{
    if (b->rank != 0) return;
    int same = best.have && !strcmp(best.route, r->route) && !strcmp(best.mode, r->mode) &&
               best.row.bytes == r->bytes && best.row.ports == r->ports &&
               best.row.pairs == r->pairs;
    if (same && best.row.one_way_us <= r->one_way_us) return;
    if (!same) bench_flush(b);
    best.have = 1;
    best.row = *r;
    snprintf(best.route, sizeof best.route, "%s", r->route);
    snprintf(best.mode, sizeof best.mode, "%s", r->mode);
    best.row.route = best.route;
    best.row.mode = best.mode;
}

/* "4K" -> 4096; binary suffixes K, M, G. Returns -1 on junk or > BENCH_MAX_SIZE. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-') return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    }
    if (*end == 'i' || *end == 'B') /* KiB, KB */
        end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
    if (*end || v > BENCH_MAX_SIZE) return -1;
    *out = (size_t)v;
    return 0;
}

/* Comma-separated sizes. */
static int parse_sizes(const char *arg, size_t *sizes, int max, int *n)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf) return -1;
    *n = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == max || parse_size(tok, &sizes[*n]) < 0) return -1;
        (*n)++;
    }
    return *n > 0 ? 0 : -1;
}

/* Comma-separated counts in [1, hi]. */
static int parse_counts(const char *arg, int *out, int max, int hi, int *n)
{
    size_t tmp[BENCH_MAX_SIZES];
    if (parse_sizes(arg, tmp, max, n) < 0) return -1;
    for (int i = 0; i < *n; i++) {
        if (tmp[i] < 1 || tmp[i] > (size_t)hi) return -1;
        out[i] = (int)tmp[i];
    }
    return 0;
}

static void default_sizes(struct bench *b)
{
    b->nsizes = 0;
    if (!strcmp(b->mode, "multiport") || !strcmp(b->mode, "multitask")) {
        b->sizes[b->nsizes++] = 4096;
        b->sizes[b->nsizes++] = 65536;
        b->sizes[b->nsizes++] = 1 << 20;
        return;
    }
    if (!strcmp(b->mode, "rate")) {
        for (size_t s = 1; s <= 4096; s *= 2)
            b->sizes[b->nsizes++] = s;
        return;
    }
    if (!strcmp(b->mode, "dsm")) {
        static const size_t put[] = {64, 1024, 16384, 262144, 1 << 20};
        for (size_t i = 0; i < sizeof put / sizeof put[0]; i++)
            b->sizes[b->nsizes++] = put[i];
        return;
    }
    b->sizes[b->nsizes++] = 0;
    for (size_t s = 1; s <= (1u << 20); s *= 2)
        b->sizes[b->nsizes++] = s;
}

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "cor-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (cor-bench --help for the usage)\n");
    return 2;
}

/* Returns 0, or an exit status (2: usage, 1: other) after printing why. */
static int parse_args(int argc, char **argv, struct bench *b, const char **csv_path)
{
    static const char *modes[] = {"pingpong",  "stream",  "rate", "multiport",
                                  "multitask", "udp-raw", "dsm"};
    const char *sizes = NULL, *pairs = NULL, *ports = NULL;

    b->iters_scale = 1.0;
    b->window = 0; /* the mode's default, below */
    b->reps = 3;
    b->count = 10000;
    b->tasks = 4;
    int reps_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            exit(0);
        } else if (!strcmp(a, "--raw")) {
            b->raw = 1;
        } else if (!strcmp(a, "--verify")) {
            b->verify = b->distinct = 1;
        } else if (!strcmp(a, "--distinct-buffers")) {
            b->distinct = 1;
        } else if (!strcmp(a, "--recv-alloc")) {
            b->recv_alloc = 1;
        } else if (!strcmp(a, "--quiet")) {
            b->quiet = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            if (!next) return bad_usage("option %s needs a value", a);
            i++;
            if (!strcmp(a, "--route")) {
                b->route = next;
            } else if (!strcmp(a, "--baseline")) {
                if (strcmp(next, "udp")) return bad_usage("--baseline takes 'udp', not '%s'", next);
                b->baseline_udp = 1;
            } else if (!strcmp(a, "--sizes")) {
                sizes = next;
            } else if (!strcmp(a, "--iters")) {
                char *end;
                b->iters_scale = strtod(next, &end);
                if (*end || !(b->iters_scale > 0 && b->iters_scale <= 1000))
                    return bad_usage("--iters takes a number in (0, 1000], not '%s'", next);
            } else if (!strcmp(a, "--reps")) {
                char *end;
                long r = strtol(next, &end, 10);
                if (*end || r < 1 || r > 100)
                    return bad_usage("--reps takes 1..100, not '%s'", next);
                b->reps = (int)r;
                reps_set = 1;
            } else if (!strcmp(a, "--pairs")) {
                pairs = next;
            } else if (!strcmp(a, "--ports")) {
                ports = next;
            } else if (!strcmp(a, "--window")) {
                char *end;
                long w = strtol(next, &end, 10);
                if (*end || w < 1 || w > BENCH_WINDOW_MAX)
                    return bad_usage("--window takes 1..64, not '%s'", next);
                b->window = (int)w;
            } else if (!strcmp(a, "--count")) {
                char *end;
                long n = strtol(next, &end, 10);
                if (*end || n < 10 || n > 10000000)
                    return bad_usage("--count takes 10..10000000, not '%s'", next);
                b->count = n;
            } else if (!strcmp(a, "--tasks")) {
                char *end;
                long t = strtol(next, &end, 10);
                if (*end || t < 1 || t > BENCH_MAX_PAIRS)
                    return bad_usage("--tasks takes 1..16, not '%s'", next);
                b->tasks = (int)t;
            } else if (!strcmp(a, "--only")) {
                if (!bench_dsm_only_ok(next))
                    return bad_usage("--only takes groups of sections,atomics,adds,lock,"
                                     "barrier,attentive,put, not '%s'",
                                     next);
                b->only = next;
            } else if (!strcmp(a, "--csv")) {
                *csv_path = next;
            } else if (!strcmp(a, "--plot")) {
                b->plot = next;
            } else {
                return bad_usage("unknown option %s", a);
            }
        } else if (!b->mode) {
            for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
                if (!strcmp(a, modes[m])) b->mode = modes[m];
            if (!b->mode) return bad_usage("unknown mode '%s'", a);
        } else {
            return bad_usage("unexpected argument '%s'", a);
        }
    }
    if (!b->mode) return bad_usage("%s", "which mode?");
    int multi = !strcmp(b->mode, "multiport") || !strcmp(b->mode, "multitask");
    if (multi && (b->raw || b->baseline_udp))
        return bad_usage("%s measures tasks: --raw and --baseline do not apply", b->mode);
    int dsm = !strcmp(b->mode, "dsm");
    if (dsm && (b->raw || b->baseline_udp))
        return bad_usage("%s", "dsm measures libcordsm: --raw and --baseline do not apply");
    if (dsm && reps_set)
        return bad_usage("%s", "dsm reports medians and p99: --reps does not apply");
    if (dsm) b->reps = 1;
    int rate = !strcmp(b->mode, "rate");
    if (!b->window) b->window = rate ? BENCH_WINDOW_MAX : 8;
    if (rate && pairs && (b->raw || b->baseline_udp))
        return bad_usage("%s",
                         "rate --raw and --baseline measure one pair: --pairs does not apply");
    if (dsm && b->plot) return bad_usage("%s", "--plot draws the transfer modes, not dsm");
    /* Before the run, not after it: a long measurement should not end without its figure. */
    if (b->plot && !bench_plot_available()) {
        fprintf(stderr, "cor-bench: --plot needs gnuplot, which is not in PATH (Debian package "
                        "gnuplot-nox)\n");
        return 1;
    }
    if (b->raw && (b->baseline_udp || !strcmp(b->mode, "udp-raw")))
        return bad_usage("%s", "--raw and the UDP socket baseline exclude each other");
    if (sizes && parse_sizes(sizes, b->sizes, BENCH_MAX_SIZES, &b->nsizes) < 0)
        return bad_usage("bad --sizes '%s' (comma-separated, suffix K/M/G, at most 1G)", sizes);
    if (!sizes) default_sizes(b);
    /* Each size `reps` times in a row; bench_row keeps the best. */
    if (b->nsizes * b->reps > BENCH_MAX_SIZES)
        return bad_usage("%s", "too many sizes times --reps (at most 256 measurements)");
    for (int i = b->nsizes - 1; i >= 0; i--)
        for (int r = b->reps - 1; r >= 0; r--)
            b->sizes[i * b->reps + r] = b->sizes[i];
    b->nsizes *= b->reps;
    if (pairs && parse_counts(pairs, b->pairs, BENCH_MAX_PAIRS, BENCH_MAX_PAIRS, &b->npairs) < 0)
        return bad_usage("bad --pairs '%s' (comma-separated, 1..16)", pairs);
    if (!pairs && rate) {
        b->pairs[b->npairs++] = 1;
        b->pairs[b->npairs++] = BENCH_MAX_PAIRS;
    }
    if (!pairs && !rate)
        for (int p = 1; p <= BENCH_MAX_PAIRS; p *= 2)
            b->pairs[b->npairs++] = p;
    if (ports && parse_counts(ports, b->ports, BENCH_MAX_PORTS, BENCH_MAX_PORTS, &b->nports) < 0)
        return bad_usage("bad --ports '%s' (comma-separated, 1..4)", ports);
    if (!b->route)
        b->route = getenv("COR_ROUTE") && *getenv("COR_ROUTE") ? getenv("COR_ROUTE") : "udp";
    return 0;
}

static int run_mode(struct bench *b)
{
    int socket = b->baseline_udp || !strcmp(b->mode, "udp-raw");
    int err = COR_OK;

    if (!strcmp(b->mode, "dsm")) return bench_dsm(b);
    if (!strcmp(b->mode, "multiport")) return bench_multi(b, 1);
    if (!strcmp(b->mode, "multitask")) return bench_multi(b, 0);
    if (!strcmp(b->mode, "rate"))
        return socket ? bench_socket_rate(b) : b->raw ? bench_raw_rate(b) : bench_task_rate(b);
    if (!strcmp(b->mode, "pingpong") || !strcmp(b->mode, "udp-raw"))
        err = socket   ? bench_socket_pingpong(b)
              : b->raw ? bench_raw_pingpong(b)
                       : bench_task_pingpong(b);
    if (!strcmp(b->mode, "udp-raw")) b->phase = 1;
    if (err == COR_OK && (!strcmp(b->mode, "stream") || !strcmp(b->mode, "udp-raw")))
        err = socket ? bench_socket_stream(b) : b->raw ? bench_raw_stream(b) : bench_task_stream(b);
    return err;
}

int main(int argc, char **argv)
{
    struct bench b = {0};
    const char *csv_path = NULL;
    int rc = parse_args(argc, argv, &b, &csv_path);
    if (rc) return rc;

    /* The raw port exists only if asked for before cor_init. */
    if (b.raw) setenv("COR_RAW", "1", 1);
    int err = cor_init(&argc, &argv);
    if (err) return bench_fail("cor_init", err), 1;
    int dsm = !strcmp(b.mode, "dsm");
    if (dsm ? cor_domain_count() < 2 : cor_domain_count() != 2) {
        fprintf(stderr, "cor-bench: %s runs as %s domains (found %d): cor-run -n 2 cor-bench %s\n",
                b.mode, dsm ? "2 or more" : "2", cor_domain_count(), b.mode);
        cor_finalize();
        return 2;
    }
    b.rank = cor_domain_rank();
    if (b.rank == 0 && csv_path) {
        b.csv = fopen(csv_path, "w");
        if (!b.csv) {
            fprintf(stderr, "cor-bench: cannot write %s: %s\n", csv_path, strerror(errno));
            return 1; /* without finalize: cor-run stops the other domain */
        }
        fprintf(b.csv, dsm ? "route,domains,what,count,median,p99,unit,per_R,goal,met\n"
                           : "route,mode,bytes,ports,pairs,one_way_us,MBps\n");
    }
    if (!dsm) bench_header(&b);
    b.progress = b.rank == 0 && isatty(STDERR_FILENO);
    b.nphases = !strcmp(b.mode, "udp-raw") ? 2 : 1;
    b.started_ns = bench_now_ns();
    err = run_mode(&b);
    bench_flush(&b);
    bench_progress_clear(&b);
    if (!err && b.plot && b.rank == 0) err = bench_plot_write(&b, b.plot);
    if (b.csv && fclose(b.csv) != 0) {
        fprintf(stderr, "cor-bench: writing %s: %s\n", csv_path, strerror(errno));
        err = err ? err : COR_EIO;
    }
    if (err) {
        /* Leave without finalize: the peer may be blocked on us, and cor-run tears the session
         * down when a domain dies. */
        fflush(stdout);
        return 1;
    }
    err = cor_finalize();
    if (err) return bench_fail("cor_finalize", err), 1;
    return 0;
}
