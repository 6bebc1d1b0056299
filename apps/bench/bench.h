/*
 * cor-bench internals: options, timing, result rows, and the measuring modes.
 *
 * cor-bench runs as exactly 2 domains under cor-run. Domain 0 measures and reports; domain 1
 * answers ping-pongs and sends the streams. Every mode function runs in both domains (it looks
 * at bench->rank), returns 0 or a negative CoR error (already printed), and reports rows with
 * bench_row() in domain 0.
 */
#ifndef COR_APPS_BENCH_H
#define COR_APPS_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_MAX_SIZES 256 /* after repetition (--reps) */
#define BENCH_MAX_PAIRS 16
#define BENCH_MAX_PORTS 4
#define BENCH_MAX_SIZE ((size_t)1 << 30)
#define BENCH_WINDOW_MAX 64 /* messages in flight in a stream or a rate window */

/* Tags of cor-bench's own messages (all in COR_CTX_WORLD). */
enum bench_tag {
    BENCH_TAG_DATA = 100, /* measured payload */
    BENCH_TAG_READY,      /* receiver posted its receives: start sending */
    BENCH_TAG_ACK,        /* receiver got the last byte (rate: the last of a window) */
    BENCH_TAG_SETUP,      /* out-of-band setup (socket ports) */
    BENCH_TAG_DSM_ROW,    /* dsm: a measured row (or lock counts) for domain 0 */
    BENCH_TAG_DSM_TOKEN,  /* dsm: orders two domains' steps, not timed */
    BENCH_TAG_DSM_RTT,    /* dsm: R, the task API's round trip */
};

struct bench {
    int rank;          /* this domain: 0 measures, 1 answers */
    const char *mode;  /* "pingpong", "stream", "rate", "multiport", "multitask", "udp-raw",
                          "dsm" */
    const char *route; /* route name for the task API and --raw */
    int raw;           /* --raw: the route alone, through cor/raw.h */
    int baseline_udp;  /* --baseline udp: plain UDP sockets */
    size_t sizes[BENCH_MAX_SIZES];
    int nsizes;                 /* each size appears `reps` times in a row */
    int reps;                   /* --reps: measurements per size; the best one is reported */
    double iters_scale;         /* --iters */
    int pairs[BENCH_MAX_PAIRS]; /* multitask, rate: pair counts to measure */
    int npairs;
    int ports[BENCH_MAX_PORTS]; /* multiport: port counts to measure */
    int nports;
    int window;       /* messages in flight in a stream; a rate's window */
    int ack_window;   /* rate: the receiver acks each window, the sender waits for it */
    int verify;       /* --verify: check every received byte */
    int distinct;     /* each receive in flight has its own buffer (--distinct-buffers, --verify) */
    int recv_alloc;   /* --recv-alloc: cor_recvI (core buffers) instead of cor_recvI_into */
    FILE *csv;        /* --csv FILE (domain 0 only), or NULL */
    int quiet;        /* no table on stdout */
    const char *plot; /* --plot FILE.png (drawn by domain 0), or NULL */
    long count;       /* dsm: operations per measure (--count) */
    const char *only; /* dsm: the groups to measure (--only LIST), NULL: all */
    int tasks;        /* dsm: tasks per domain of the aggregate pipelined adds (--tasks) */
    /* Progress on a terminal: domain 0 with stderr a tty only. The run is `nphases` equal
     * parts (udp-raw: pingpong then stream; multiport/multitask: one per count); `phase` is
     * the current one. */
    int progress;
    int phase, nphases;
    uint64_t started_ns;
};

/* Monotonic time in nanoseconds. */
uint64_t bench_now_ns(void);

/* Iterations for one size: ping-pong and stream budgets, scaled by --iters, at least `min`. */
long bench_iters_pingpong(const struct bench *b, size_t size);
long bench_iters_stream(const struct bench *b, size_t size);
long bench_warmup(long iters);

/* Fills buf with the pattern every sender uses; bench_check compares (for --verify). */
void bench_fill(void *buf, size_t len);
int bench_check(const void *buf, size_t len);

/* A measured row. one_way_us: half the round trip (pingpong) or time per message (stream);
 * mbps: payload megabytes (10^6 B) per second one way. Domain 0 prints it and writes CSV. */
struct bench_row {
    const char *route;
    const char *mode;
    size_t bytes;
    int ports;
    int pairs;
    double rtt_us; /* pingpong only, else 0 */
    double one_way_us;
    double mbps;
};
/* bench_row keeps the best (lowest one_way_us) of consecutive rows with the same route, mode,
 * bytes, ports and pairs (the --reps repetitions) and prints it when the next key comes, or at
 * bench_flush. */
void bench_header(const struct bench *b);
/* Shows on stderr, if b->progress, the size being measured (step of steps in this phase),
 * the time elapsed and an estimate of the time left; bench_progress_clear erases the line
 * (before a row goes to the same terminal, and at the end). */
void bench_progress(const struct bench *b, int step, int steps, size_t bytes);
void bench_progress_clear(const struct bench *b);
void bench_row(const struct bench *b, const struct bench_row *row);
void bench_flush(const struct bench *b);

/* --plot (bench_plot.c): whether gnuplot is in PATH; keep a printed row (domain 0); draw
 * the kept rows into png with gnuplot at the end of the run (0 or a CoR error, printed). */
int bench_plot_available(void);
void bench_plot_keep(const struct bench_row *row);
int bench_plot_write(const struct bench *b, const char *png);

/* Prints "cor-bench: what: error text" to stderr and returns err. */
int bench_fail(const char *what, int err);

/* One stream over the task API between the calling task and task `peer` (COR_CTX_WORLD):
 * `total` messages of `size` bytes from the getBuffer buffer `sbuf`; the receiver posts
 * b->window receives into `rbufs` (bench_rbufs(b) buffers of size bytes, used in turn; unused
 * with --recv-alloc),
 * starts its clock when message `warm` arrived and stops it at the last one, then acks.
 * With b->ack_window (rate) the receiver also acks every b->window messages and the sender
 * waits for its sends and that ack before the next window, as osu_mbw_mr does; its receives
 * stay posted a window ahead. */
struct bench_stream_result {
    uint64_t t0_ns, t1_ns; /* first and last measured arrival */
    uint64_t bytes;        /* payload received between them */
    long msgs;
};
int bench_stream_send(const struct bench *b, uint64_t peer, const void *sbuf, size_t size,
                      long total);
int bench_stream_recv(const struct bench *b, uint64_t peer, void *const *rbufs, size_t size,
                      long total, long warm, struct bench_stream_result *res);
size_t bench_max_size(const struct bench *b);
/* Receive buffers a stream needs: one shared by every receive in flight, as osu_bw does, so the
 * rate is the transport's and not the memory system's; b->window with b->distinct. */
int bench_rbufs(const struct bench *b);
/* The row of a stream result (one_way_us = time per message). */
void bench_stream_row(const struct bench *b, const char *route, const char *mode, size_t size,
                      int ports, int pairs, const struct bench_stream_result *r);

/* One message each way for bench_windows: send or receive `size` bytes (0: the ack); drain,
 * if not NULL, waits until the sends went out. Each returns 0 or a CoR error (printed). */
struct bench_msg_ops {
    int (*send)(void *ctx, size_t size);
    int (*recv)(void *ctx, size_t size);
    int (*drain)(void *ctx);
};
/* `total` messages from domain 1 to domain 0 in windows of `ack_every`, each acked by the
 * receiver before the sender goes on; domain 0 times from message `warm` to the last. */
int bench_windows(const struct bench *b, const struct bench_msg_ops *ops, void *ctx, size_t size,
                  long total, long warm, long ack_every, struct bench_stream_result *r);
/* Ping-pong over a message transport: for every size, after bench_warmup untimed round trips,
 * domain 0 times bench_iters_pingpong round trips (it sends, domain 1 answers) and reports
 * them as `route` (drain is not used). Returns 0 or the first CoR error (printed). */
int bench_pingpong(struct bench *b, const char *route, const struct bench_msg_ops *ops, void *ctx);
/* The row of a ping-pong: rtt_us for one round trip of `size` bytes each way. */
void bench_pingpong_row(const struct bench *b, const char *route, size_t size, double rtt_us);
/* rate: about n timed messages in whole windows of b->window, after two untimed windows;
 * *total counts them all and *warm is the receiver's clock start (as bench_stream_recv). */
void bench_rate_budget(const struct bench *b, long n, long *total, long *warm);

/* Modes. */
int bench_task_pingpong(struct bench *b);
int bench_task_stream(struct bench *b);
int bench_multi(struct bench *b, int multiport);
/* rate: messages/s of windows of b->window messages, each acked (bench_multi.c for the task
 * API over 1..16 pairs, bench_raw.c, bench_socket.c). */
int bench_task_rate(struct bench *b);
int bench_raw_rate(struct bench *b);
int bench_socket_rate(struct bench *b);
int bench_raw_pingpong(struct bench *b);
int bench_raw_stream(struct bench *b);
int bench_socket_pingpong(struct bench *b);
int bench_socket_stream(struct bench *b);
/* libcordsm's operations beside R (bench_dsm.c); 2 or more domains; calls cor_dsm_init and,
 * on success, cor_dsm_finalize. */
int bench_dsm(struct bench *b);
/* Whether LIST names only dsm groups (--only): sections, atomics, adds, lock, barrier,
 * attentive, put. */
int bench_dsm_only_ok(const char *list);

#endif
