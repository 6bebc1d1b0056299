/* gm-pingpong: raw GM round-trip latency and one-way streaming rate by
 * message size, in the manner of GM's own test programs (the paper's
 * "raw GM" figures).
 *
 *   gm-pingpong --server [--port N] [--timeout S] [--blocking]
 *   gm-pingpong --client PEER [--port N] [--mode pingpong|stream|both]
 *               [--min-size B] [--max-size B] [--iters N] [--warmup N]
 *               [--csv FILE] [--stamps FILE] [--check] [--spread] [--blocking]
 *               [--timeout S]
 *
 * Two processes started like any GM program: both open the same fixed port
 * id; the client names the server by host name (node map) or node id.
 * Sizes are 0 and the powers of two from 1 B to 1 MiB (bounded by
 * --min-size/--max-size); iterations scale down with size.
 *
 * pingpong: the client sends, the server answers with a message of the same
 *   size from a send buffer of its own, as fi_pingpong does (with --check it
 *   echoes from the receive buffer it got, reposting it in the send
 *   callback), one-way = round trip / 2.
 * stream:   the client keeps its send window full; the server timestamps
 *   arrivals and reports the time between the first and the last timed
 *   message, so the rate is measured at the receiver, one way.
 * Data moves at low priority in gm_dma_malloc buffers of the exact size
 * class; control messages use high priority.  Send callbacks run through
 * gm_unknown.  --csv appends cor-bench rows:
 *   route,mode,bytes,ports,pairs,one_way_us,MBps  (route gm-raw).
 * --stamps appends one row per stream: bytes,iters,first_ns,last_ns, the server's
 * CLOCK_MONOTONIC at the first and the last timed arrival, so that a script running many
 * pairs at once on one host can take their aggregate over the same span as cor-bench's
 * multitask (all bytes over the time from the earliest first to the latest last arrival).
 */
#include <gm.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pp-proto.h"

/* ---- state shared by both sides ---------------------------------------- */

static struct gm_port *port;
static unsigned peer_node = GM_NO_SUCH_NODE_ID, port_id = 2;
static unsigned tokens;      /* send tokens we hold */
static unsigned recv_tokens; /* receive tokens not yet used */
static int use_blocking, do_check, show_spread;
static uint64_t deadline_us;
static const char *side = "gm-pingpong";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, gm_status_t st)
{
    fprintf(stderr, "%s: %s: %s\n", side, what, gm_strerror(st));
    exit(1);
}

static void check_deadline(const char *doing)
{
    if (now_ns() / 1000 > deadline_us) {
        fprintf(stderr, "%s: timed out while %s\n", side, doing);
        exit(2);
    }
}

/* ---- receive buffer pools, one per size class (low priority) ----------- */

enum { MAX_CLASS = 40, CTRL_BUFS = 4, POOL_MAX = 12, POOL_BYTES = 16 << 20 };
static unsigned pool_count[MAX_CLASS + 1];

/* Make sure `want' buffers of class s are provided (they stay provided:
 * GM has no way to take a buffer back, so pools only grow). */
static void pool_ensure(unsigned s, unsigned want)
{
    while (pool_count[s] < want && recv_tokens > 0) {
        void *b = gm_dma_malloc(port, gm_max_length_for_size(s) + 8);
        if (!b) die("gm_dma_malloc for a receive buffer", GM_OUT_OF_MEMORY);
        gm_provide_receive_buffer(port, b, s, GM_LOW_PRIORITY);
        pool_count[s]++;
        recv_tokens--;
    }
}

static unsigned pool_target(unsigned s)
{
    gm_size_t per = gm_max_length_for_size(s) + 8;
    unsigned n = (unsigned)(POOL_BYTES / per);
    return n > POOL_MAX ? POOL_MAX : n < 2 ? 2 : n;
}

/* ---- sends ---------------------------------------------------------------- */

struct sendop {
    int done;
    int busy; /* sent, callback not run yet */
    gm_status_t status;
    void *repost; /* buffer to provide again when the send completes */
    unsigned size;
};

static unsigned long send_errors;

static void send_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct sendop *op = ctx;
    (void)p;
    tokens++;
    if (st != GM_SUCCESS) {
        static unsigned printed;
        send_errors++;
        if (printed++ < 5) fprintf(stderr, "%s: send failed: %s\n", side, gm_strerror(st));
    }
    if (op) {
        op->done = 1;
        op->status = st;
        if (op->repost) gm_provide_receive_buffer(p, op->repost, op->size, GM_LOW_PRIORITY);
    }
}

/* One poll: returns a receive event or NULL; everything else goes through
 * gm_unknown (send callbacks, alarms, sleeping in blocking mode). */
static gm_recv_event_t *poll_event(void)
{
    gm_recv_event_t *e = use_blocking ? gm_blocking_receive(port) : gm_receive(port);
    switch (GM_RECV_EVENT_TYPE(e)) {
    case GM_RECV_EVENT:
    case GM_HIGH_RECV_EVENT:
    case GM_PEER_RECV_EVENT:
    case GM_HIGH_PEER_RECV_EVENT:
    case GM_FAST_RECV_EVENT:
    case GM_FAST_HIGH_RECV_EVENT:
    case GM_FAST_PEER_RECV_EVENT:
    case GM_FAST_HIGH_PEER_RECV_EVENT:
        return e;
    case GM_NO_RECV_EVENT:
        return NULL;
    default:
        gm_unknown(port, e);
        return NULL;
    }
}

static int is_high(gm_recv_event_t *e)
{
    unsigned t = GM_RECV_EVENT_TYPE(e);
    return t == GM_HIGH_RECV_EVENT || t == GM_HIGH_PEER_RECV_EVENT ||
           t == GM_FAST_HIGH_RECV_EVENT || t == GM_FAST_HIGH_PEER_RECV_EVENT;
}

/* ---- control messages (high priority, size PP_CTRL_SIZE) -------------- */

static struct pp_ctrl *ctrl_out;

static void ctrl_provide_all(void)
{
    for (int i = 0; i < CTRL_BUFS; i++) {
        void *b = gm_dma_malloc(port, gm_max_length_for_size(PP_CTRL_SIZE) + 8);
        if (!b) die("gm_dma_malloc for a control buffer", GM_OUT_OF_MEMORY);
        gm_provide_receive_buffer(port, b, PP_CTRL_SIZE, GM_HIGH_PRIORITY);
        recv_tokens--;
    }
}

/* Sends *c and waits for its callback; with `retry', a port that is not open
 * yet (the peer is still starting) is retried until the deadline. */
static gm_status_t ctrl_send(const struct pp_ctrl *c, int retry)
{
    for (;;) {
        struct sendop op = {0};
        *ctrl_out = *c;
        while (tokens == 0) {
            check_deadline("waiting for a send token");
            poll_event();
        }
        tokens--;
        gm_send_with_callback(port, ctrl_out, PP_CTRL_SIZE, sizeof *c, GM_HIGH_PRIORITY, peer_node,
                              port_id, send_cb, &op);
        while (!op.done) {
            check_deadline("sending a control message");
            gm_recv_event_t *e = poll_event();
            if (e) {
                fprintf(stderr, "%s: unexpected message during a control send\n", side);
                gm_unknown(port, e); /* gives the buffer back */
            }
        }
        if (op.status != GM_SEND_TARGET_PORT_CLOSED || !retry) return op.status;
        /* The server's port is not open yet: not an error, try again. */
        send_errors--;
        struct sendop r = {0};
        tokens--;
        gm_resume_sending(port, GM_HIGH_PRIORITY, peer_node, port_id, send_cb, &r);
        while (!r.done) {
            check_deadline("resuming sends");
            poll_event();
        }
    }
}

/* Waits for the next control message; low-priority data here is a protocol
 * error (counted, buffer reposted). */
static struct pp_ctrl ctrl_wait(unsigned *sender)
{
    for (;;) {
        check_deadline("waiting for a control message");
        gm_recv_event_t *e = poll_event();
        if (!e) continue;
        void *buf = gm_ntohp(e->recv.buffer);
        unsigned size = gm_ntoh_u8(e->recv.size);
        if (is_high(e) && size == PP_CTRL_SIZE &&
            gm_ntoh_u32(e->recv.length) == sizeof(struct pp_ctrl)) {
            struct pp_ctrl c;
            memcpy(&c, gm_ntohp(e->recv.message), sizeof c);
            if (sender) *sender = gm_ntoh_u16(e->recv.sender_node_id);
            gm_provide_receive_buffer(port, buf, size, GM_HIGH_PRIORITY);
            if (c.magic == PP_MAGIC) return c;
            fprintf(stderr, "%s: control message with a bad magic ignored\n", side);
            continue;
        }
        fprintf(stderr, "%s: stray message (size %u) ignored\n", side, size);
        gm_provide_receive_buffer(port, buf, size, is_high(e) ? GM_HIGH_PRIORITY : GM_LOW_PRIORITY);
    }
}

/* ---- data pattern ------------------------------------------------------ */

static void pattern(uint8_t *b, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(seed * 31u + i * 7u + (i >> 8));
}

static int pattern_ok(const uint8_t *b, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] != (uint8_t)(seed * 31u + i * 7u + (i >> 8))) return 0;
    return 1;
}

/* ---- server -------------------------------------------------------------- */

/* pingpong: answer each data message with one of its length from a buffer of
 * the server's own, provided again at once (fi_pingpong's work: each side writes
 * only its receive buffer).  Echoing the data from the buffer it arrived in, as
 * --check needs, also moves every message's lines from one core's cache to the
 * other's: the receive buffer the server's copy just wrote is what the client's
 * copy reads, and the next copy into it (12 round trips later, the pool turning)
 * must take the lines back.  That made whole runs at 16-64 KiB 2-3x slower than
 * fi_pingpong in some periods and not in others on this 2-vCPU machine (the
 * server's copy: 51% of its time in such runs); the send callback provides an
 * echoed buffer again. */
static void serve_pingpong(const struct pp_ctrl *c)
{
    unsigned total = c->warmup + c->iters;
    struct sendop *ops = calloc(POOL_MAX + 2, sizeof *ops);
    unsigned nops = POOL_MAX + 2, next = 0;
    if (!ops) die("calloc", GM_OUT_OF_MEMORY);
    uint8_t *answer = NULL;
    if (!c->check) {
        if (!(answer = gm_dma_malloc(port, c->len ? c->len : 1)))
            die("gm_dma_malloc for the answer buffer", GM_OUT_OF_MEMORY);
        memset(answer, 0x5a, c->len);
    }
    for (unsigned got = 0; got < total;) {
        check_deadline("serving pingpong");
        gm_recv_event_t *e = poll_event();
        if (!e) continue;
        if (is_high(e)) {
            fprintf(stderr, "%s: control message during pingpong ignored\n", side);
            gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), gm_ntoh_u8(e->recv.size),
                                      GM_HIGH_PRIORITY);
            continue;
        }
        struct sendop *op = &ops[next];
        next = (next + 1) % nops;
        while (!op->done && op->busy) { /* slot still in flight: wait */
            check_deadline("waiting for an echo to complete");
            poll_event();
        }
        *op = (struct sendop){
            .busy = 1, .repost = gm_ntohp(e->recv.buffer), .size = gm_ntoh_u8(e->recv.size)};
        void *from = op->repost;
        if (answer) {
            gm_provide_receive_buffer(port, op->repost, op->size, GM_LOW_PRIORITY);
            op->repost = NULL;
            from = answer;
        }
        while (tokens == 0) {
            check_deadline("waiting for a send token");
            gm_recv_event_t *x = poll_event();
            if (x) gm_unknown(port, x);
        }
        tokens--;
        gm_send_with_callback(port, from, op->size, gm_ntoh_u32(e->recv.length), GM_LOW_PRIORITY,
                              peer_node, port_id, send_cb, op);
        got++;
    }
    /* Let the last echoes complete before their slots go away. */
    for (unsigned i = 0; i < nops; i++)
        while (!ops[i].done && ops[i].busy) {
            check_deadline("finishing echoes");
            poll_event();
        }
    free(ops);
    if (answer) gm_dma_free(port, answer);
}

/* stream: count arrivals, time from the end of warm-up to the last one,
 * check data if asked, and report. */
static void serve_stream(const struct pp_ctrl *c)
{
    unsigned total = c->warmup + c->iters, bad = 0;
    uint64_t t0 = 0, t1 = 0;
    for (unsigned got = 0; got < total;) {
        check_deadline("receiving a stream");
        gm_recv_event_t *e = poll_event();
        if (!e) continue;
        uint64_t t = now_ns();
        void *buf = gm_ntohp(e->recv.buffer);
        unsigned size = gm_ntoh_u8(e->recv.size);
        if (is_high(e)) {
            fprintf(stderr, "%s: control message during a stream ignored\n", side);
            gm_provide_receive_buffer(port, buf, size, GM_HIGH_PRIORITY);
            continue;
        }
        if (gm_ntoh_u32(e->recv.length) != c->len ||
            (c->check && !pattern_ok(gm_ntohp(e->recv.message), c->len, got)))
            bad++;
        gm_provide_receive_buffer(port, buf, size, GM_LOW_PRIORITY);
        got++;
        if (got == c->warmup) t0 = t;
        if (got == total) t1 = t;
    }
    struct pp_ctrl r = {.magic = PP_MAGIC,
                        .op = PP_RESULT,
                        .len = c->len,
                        .iters = c->iters,
                        .elapsed_ns = t1 - t0,
                        .first_ns = t0,
                        .errors = bad};
    if (ctrl_send(&r, 0) != GM_SUCCESS)
        fprintf(stderr, "%s: could not send a stream result\n", side);
}

static int run_server(int forever)
{
    printf("%s: server on port %u, waiting for a client\n", side, port_id);
    fflush(stdout);
    for (;;) {
        unsigned sender = 0;
        struct pp_ctrl c = ctrl_wait(&sender);
        switch (c.op) {
        case PP_HELLO: {
            peer_node = sender;
            struct pp_ctrl r = {.magic = PP_MAGIC, .op = PP_HELLO};
            ctrl_send(&r, 0);
            break;
        }
        case PP_SETUP: {
            if (c.len > PP_MAX_LEN || c.iters == 0 || c.warmup == 0) {
                fprintf(stderr, "%s: bad setup (len %u, iters %u) refused\n", side, c.len, c.iters);
                struct pp_ctrl r = {.magic = PP_MAGIC, .op = PP_REFUSED};
                ctrl_send(&r, 0);
                break;
            }
            unsigned s = gm_min_size_for_length(c.len);
            pool_ensure(s, pool_target(s));
            struct pp_ctrl r = {.magic = PP_MAGIC, .op = PP_READY};
            ctrl_send(&r, 0);
            if (c.mode == PP_PINGPONG)
                serve_pingpong(&c);
            else
                serve_stream(&c);
            break;
        }
        case PP_DONE:
            printf("%s: client done\n", side);
            if (!forever) return send_errors ? 1 : 0;
            break;
        default:
            fprintf(stderr, "%s: unknown control op %u ignored\n", side, c.op);
        }
    }
}

/* ---- client -------------------------------------------------------------- */

struct result {
    const char *mode;
    unsigned len, iters;
    double one_way_us, mbps;
    uint64_t first_ns, last_ns; /* stream: the server's clock (--stamps) */
};

static unsigned scaled_iters(unsigned base, unsigned len)
{
    if (len <= 4096) return base;
    uint64_t n = (uint64_t)base * 4096 / len;
    return n < 20 ? 20 : (unsigned)n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* --spread: how the round trips of one size spread (one-way: half of each), and where the
 * slowest was: a stall shows as a few iterations far above the median, which the average
 * (one_way_us) hides or blows up. */
static void spread_print(unsigned len, uint64_t *rt, unsigned n)
{
    uint64_t sum = 0, max = 0;
    unsigned at = 0, slow = 0;
    for (unsigned i = 0; i < n; i++) {
        sum += rt[i];
        if (rt[i] > max) max = rt[i], at = i;
    }
    qsort(rt, n, sizeof *rt, cmp_u64);
    uint64_t med = rt[n / 2], slow_ns = 0;
    for (unsigned i = 0; i < n; i++)
        if (rt[i] > 10 * med) slow++, slow_ns += rt[i];
    printf("# spread %u B: one-way median %.3f us, p99 %.3f, max %.3f (iteration %u); %u of %u "
           "over 10x the median, %.1f%% of the time\n",
           len, med / 2e3, rt[n * 99 / 100] / 2e3, max / 2e3, at, slow, n,
           sum ? 100.0 * (double)slow_ns / (double)sum : 0.0);
}

static int client_pingpong(unsigned len, unsigned iters, unsigned warmup, uint8_t *sbuf,
                           struct result *res)
{
    unsigned s = gm_min_size_for_length(len);
    pool_ensure(s, 2);
    uint64_t t0 = 0, ti = 0;
    unsigned bad = 0;
    uint64_t *rt = show_spread ? calloc(iters, sizeof *rt) : NULL;
    for (unsigned i = 0; i < warmup + iters; i++) {
        if (i == warmup) t0 = now_ns();
        if (rt && i > warmup) rt[i - warmup - 1] = now_ns() - ti;
        if (rt) ti = now_ns();
        if (do_check) pattern(sbuf, len, i);
        while (tokens == 0) {
            check_deadline("waiting for a send token");
            gm_recv_event_t *x = poll_event();
            if (x) gm_unknown(port, x);
        }
        tokens--;
        gm_send_with_callback(port, sbuf, s, len, GM_LOW_PRIORITY, peer_node, port_id, send_cb,
                              NULL);
        for (;;) {
            gm_recv_event_t *e = poll_event();
            if (!e) {
                /* The deadline check is cheap but not free: every 4096th idle poll. */
                static unsigned idle;
                if ((++idle & 4095) == 0) check_deadline("waiting for an echo");
                continue;
            }
            void *buf = gm_ntohp(e->recv.buffer);
            unsigned size = gm_ntoh_u8(e->recv.size);
            if (is_high(e)) {
                fprintf(stderr, "%s: control message during pingpong ignored\n", side);
                gm_provide_receive_buffer(port, buf, size, GM_HIGH_PRIORITY);
                continue;
            }
            if (gm_ntoh_u32(e->recv.length) != len ||
                (do_check && !pattern_ok(gm_ntohp(e->recv.message), len, i)))
                bad++;
            gm_provide_receive_buffer(port, buf, size, GM_LOW_PRIORITY);
            break;
        }
    }
    uint64_t el = now_ns() - t0;
    if (rt) {
        rt[iters - 1] = now_ns() - ti;
        spread_print(len, rt, iters);
        free(rt);
    }
    res->one_way_us = el / 1e3 / iters / 2;
    res->mbps = res->one_way_us > 0 ? len / res->one_way_us : 0;
    if (bad) fprintf(stderr, "%s: %u echoes of %u bytes were wrong\n", side, bad, len);
    return bad ? -1 : 0;
}

static int client_stream(unsigned len, unsigned iters, unsigned warmup, uint8_t *sbuf,
                         struct result *res)
{
    unsigned s = gm_min_size_for_length(len);
    /* With --check every message needs its own contents, so its own buffer
     * (one per send token); otherwise all sends share one buffer, which GM
     * allows since nobody writes it while sends are in flight. */
    unsigned nbuf = do_check ? gm_num_send_tokens(port) : 1, next = 0;
    uint8_t **bufs = calloc(nbuf, sizeof *bufs);
    struct sendop *ops = calloc(nbuf, sizeof *ops);
    if (!bufs || !ops) die("calloc", GM_OUT_OF_MEMORY);
    bufs[0] = sbuf;
    for (unsigned i = 1; i < nbuf; i++)
        if (!(bufs[i] = gm_dma_malloc(port, len ? len : 1))) die("gm_dma_malloc", GM_OUT_OF_MEMORY);
    for (unsigned i = 0; i < nbuf; i++)
        ops[i].done = 1;
    for (unsigned i = 0; i < warmup + iters; i++) {
        struct sendop *op = do_check ? &ops[next] : NULL;
        while (tokens == 0 || (op && !op->done)) {
            check_deadline("streaming");
            gm_recv_event_t *e = poll_event();
            if (e) {
                fprintf(stderr, "%s: message during a stream ignored\n", side);
                gm_unknown(port, e);
            }
        }
        uint8_t *b = do_check ? bufs[next] : sbuf;
        if (do_check) {
            pattern(b, len, i);
            *op = (struct sendop){0};
            next = (next + 1) % nbuf;
        }
        tokens--;
        gm_send_with_callback(port, b, s, len, GM_LOW_PRIORITY, peer_node, port_id, send_cb, op);
    }
    unsigned sender;
    struct pp_ctrl r = ctrl_wait(&sender);
    /* Every send completes before its buffer goes away. */
    unsigned all = gm_num_send_tokens(port);
    while (tokens < all) {
        check_deadline("waiting for stream sends to complete");
        poll_event();
    }
    for (unsigned i = 1; i < nbuf; i++)
        gm_dma_free(port, bufs[i]);
    free(bufs);
    free(ops);
    if (r.op != PP_RESULT || r.len != len) {
        fprintf(stderr, "%s: expected a stream result for %u bytes\n", side, len);
        return -1;
    }
    double el_us = r.elapsed_ns / 1e3;
    res->one_way_us = el_us / iters;
    res->first_ns = r.first_ns;
    res->last_ns = r.first_ns + r.elapsed_ns;
    res->mbps = el_us > 0 ? (double)len * iters / el_us : 0;
    if (r.errors)
        fprintf(stderr, "%s: server saw %u wrong messages of %u bytes\n", side, r.errors, len);
    return r.errors ? -1 : 0;
}

static void csv_append(const char *path, const struct result *r, unsigned n)
{
    FILE *f = fopen(path, "a+");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", side, path, strerror(errno));
        return;
    }
    fseek(f, 0, SEEK_END);
    if (ftell(f) == 0) fprintf(f, "route,mode,bytes,ports,pairs,one_way_us,MBps\n");
    for (unsigned i = 0; i < n; i++)
        fprintf(f, "gm-raw,%s,%u,1,1,%.3f,%.6f\n", r[i].mode, r[i].len, r[i].one_way_us, r[i].mbps);
    fclose(f);
}

struct client_opts {
    int pingpong, stream;
    unsigned min_size, max_size, iters, warmup;
    const char *csv, *stamps;
};

static void stamps_append(const char *path, const struct result *r, unsigned n)
{
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", side, path, strerror(errno));
        return;
    }
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(r[i].mode, "stream"))
            fprintf(f, "%u,%u,%llu,%llu\n", r[i].len, r[i].iters, (unsigned long long)r[i].first_ns,
                    (unsigned long long)r[i].last_ns);
    fclose(f);
}

static int run_client(const struct client_opts *o)
{
    struct pp_ctrl hello = {.magic = PP_MAGIC, .op = PP_HELLO};
    gm_status_t st = ctrl_send(&hello, 1);
    if (st != GM_SUCCESS) die("hello to the server", st);
    unsigned sender;
    struct pp_ctrl r = ctrl_wait(&sender);
    if (r.op != PP_HELLO) {
        fprintf(stderr, "%s: the server did not answer hello\n", side);
        return 1;
    }
    unsigned sizes[32], nsizes = 0;
    if (o->min_size == 0) sizes[nsizes++] = 0;
    for (unsigned long l = 1; l <= o->max_size && nsizes < 32; l <<= 1)
        if (l >= o->min_size) sizes[nsizes++] = (unsigned)l;
    uint8_t *sbuf = gm_dma_malloc(port, o->max_size ? o->max_size : 1);
    if (!sbuf) die("gm_dma_malloc for the send buffer", GM_OUT_OF_MEMORY);
    memset(sbuf, 0x3c, o->max_size);
    struct result *res = calloc(2 * nsizes, sizeof *res);
    unsigned nres = 0;
    int failed = 0;
    char host[GM_MAX_HOST_NAME_LEN + 1] = "?";
    gm_node_id_to_host_name_ex(port, 1000000, peer_node, &host);
    printf("# gm-pingpong: port %u, peer node %u (%s)%s\n", port_id, peer_node, host,
           do_check ? ", data checked" : "");
    printf("%-9s %9s %8s %12s %12s\n", "mode", "bytes", "iters", "one_way_us", "MBps");
    for (int m = 0; m < 2; m++) {
        if ((m == 0 && !o->pingpong) || (m == 1 && !o->stream)) continue;
        for (unsigned i = 0; i < nsizes; i++) {
            unsigned len = sizes[i];
            unsigned iters = scaled_iters(o->iters, len);
            if (m == 1) iters = iters < 50 ? 50 : iters; /* a rate needs a few messages */
            unsigned warmup = o->warmup ? o->warmup : (iters / 10 < 2 ? 2 : iters / 10);
            struct pp_ctrl c = {.magic = PP_MAGIC,
                                .op = PP_SETUP,
                                .mode = m == 0 ? PP_PINGPONG : PP_STREAM,
                                .len = len,
                                .iters = iters,
                                .warmup = warmup,
                                .check = (uint32_t)do_check};
            if ((st = ctrl_send(&c, 0)) != GM_SUCCESS) die("setup", st);
            struct pp_ctrl ready = ctrl_wait(&sender);
            if (ready.op != PP_READY) {
                fprintf(stderr, "%s: server refused %u bytes\n", side, len);
                failed = 1;
                continue;
            }
            struct result *rs = &res[nres];
            rs->mode = m == 0 ? "pingpong" : "stream";
            rs->len = len;
            rs->iters = iters;
            int rc = m == 0 ? client_pingpong(len, iters, warmup, sbuf, rs)
                            : client_stream(len, iters, warmup, sbuf, rs);
            if (rc != 0) failed = 1;
            printf("%-9s %9u %8u %12.3f %12.3f\n", rs->mode, len, iters, rs->one_way_us, rs->mbps);
            fflush(stdout);
            nres++;
        }
    }
    struct pp_ctrl done = {.magic = PP_MAGIC, .op = PP_DONE};
    ctrl_send(&done, 0);
    if (o->csv) csv_append(o->csv, res, nres);
    if (o->stamps) stamps_append(o->stamps, res, nres);
    free(res);
    gm_dma_free(port, sbuf);
    return failed || send_errors ? 1 : 0;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: gm-pingpong --server [--port N] [--forever] [options]\n"
               "       gm-pingpong --client PEER [--port N] [options]\n"
               "PEER is a host name from the GM node map or a node id.\n"
               "options:\n"
               "  --mode pingpong|stream|both  what to measure (both)\n"
               "  --min-size B / --max-size B  size range (0 .. 1048576)\n"
               "  --iters N                    iterations for sizes <= 4 KiB (10000),\n"
               "                               scaled down by size above (at least 20)\n"
               "  --warmup N                   warm-up iterations (iters/10)\n"
               "  --csv FILE                   append cor-bench CSV rows (route gm-raw)\n"
               "  --stamps FILE                stream: append bytes,iters,first_ns,last_ns\n"
               "                               (the server's CLOCK_MONOTONIC)\n"
               "  --check                      verify every byte (slower)\n"
               "  --spread                     pingpong: median, p99, max of the round trips\n"
               "  --blocking                   gm_blocking_receive instead of polling\n"
               "  --timeout S                  give up after S seconds (120)\n");
}

static unsigned long parse_num(const char *s, const char *opt, unsigned long max)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 0);
    if (errno || *end || end == s || v > max) {
        fprintf(stderr, "gm-pingpong: bad value '%s' for %s (0..%lu)\n", s, opt, max);
        exit(64);
    }
    return v;
}

int main(int argc, char **argv)
{
    int server = 0, forever = 0;
    const char *peer = NULL;
    unsigned timeout = 120;
    struct client_opts o = {
        .pingpong = 1, .stream = 1, .min_size = 0, .max_size = PP_MAX_LEN, .iters = 10000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--server"))
            server = 1;
        else if (!strcmp(a, "--forever"))
            forever = 1;
        else if (!strcmp(a, "--check"))
            do_check = 1;
        else if (!strcmp(a, "--spread"))
            show_spread = 1;
        else if (!strcmp(a, "--blocking"))
            use_blocking = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            usage(stderr);
            return 64;
        } else if (!strcmp(a, "--client"))
            peer = argv[++i];
        else if (!strcmp(a, "--port"))
            port_id = (unsigned)parse_num(argv[++i], a, 255);
        else if (!strcmp(a, "--min-size"))
            o.min_size = (unsigned)parse_num(argv[++i], a, PP_MAX_LEN);
        else if (!strcmp(a, "--max-size"))
            o.max_size = (unsigned)parse_num(argv[++i], a, PP_MAX_LEN);
        else if (!strcmp(a, "--iters"))
            o.iters = (unsigned)parse_num(argv[++i], a, 100000000);
        else if (!strcmp(a, "--warmup"))
            o.warmup = (unsigned)parse_num(argv[++i], a, 100000000);
        else if (!strcmp(a, "--timeout"))
            timeout = (unsigned)parse_num(argv[++i], a, 86400);
        else if (!strcmp(a, "--csv"))
            o.csv = argv[++i];
        else if (!strcmp(a, "--stamps"))
            o.stamps = argv[++i];
        else if (!strcmp(a, "--mode")) {
            v = argv[++i];
            o.pingpong = !strcmp(v, "pingpong") || !strcmp(v, "both");
            o.stream = !strcmp(v, "stream") || !strcmp(v, "both");
            if (!o.pingpong && !o.stream) {
                fprintf(stderr, "gm-pingpong: --mode takes pingpong, stream or both\n");
                return 64;
            }
        } else {
            usage(stderr);
            return 64;
        }
    }
    if (server == (peer != NULL) || o.iters == 0 || timeout == 0 || o.min_size > o.max_size) {
        usage(stderr);
        return 64;
    }
    side = server ? "gm-pingpong server" : "gm-pingpong client";
    deadline_us = now_ns() / 1000 + (uint64_t)timeout * 1000000u;

    gm_status_t st = gm_init();
    if (st != GM_SUCCESS) die("gm_init", st);
    st = gm_open(&port, 0, port_id, side, (enum gm_api_version)GM_API_VERSION_2_0);
    if (st != GM_SUCCESS) {
        fprintf(stderr, "%s: gm_open(port %u): %s\n", side, port_id, gm_strerror(st));
        return 1;
    }
    tokens = gm_num_send_tokens(port);
    recv_tokens = gm_num_receive_tokens(port);
    ctrl_out = gm_dma_malloc(port, gm_max_length_for_size(PP_CTRL_SIZE) + 8);
    if (!ctrl_out) die("gm_dma_malloc", GM_OUT_OF_MEMORY);
    ctrl_provide_all();

    int rc;
    if (server) {
        rc = run_server(forever);
    } else {
        char *end;
        unsigned long id = strtoul(peer, &end, 10);
        if (*end == 0 && end != peer && id > 0 && id < 65536)
            peer_node = (unsigned)id;
        else if (gm_host_name_to_node_id_ex(port, 1000000, peer, &peer_node) != GM_SUCCESS) {
            fprintf(stderr, "%s: unknown host '%s' (not in the GM node map)\n", side, peer);
            return 1;
        }
        rc = run_client(&o);
    }
    gm_close(port);
    gm_finalize();
    return rc;
}
