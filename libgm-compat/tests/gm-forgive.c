/*
 * gm-forgive: GM programs that lean on GM's forgiving behaviour (issue 13 item 7), run by
 * gm-forgive.sh as two processes (two nodes) on shm and on tcp.
 *
 *   gm-forgive --sink  --port N --count N --len BYTES [--timeout S]
 *   gm-forgive MODE --to NODE --port N --count N --len BYTES [--timeout S]
 *
 * The sink provides buffers and checks that COUNT messages of LEN bytes arrive, in order,
 * each with its pattern. MODE is the sender:
 *   late   the target's port is not open yet: every send must still complete with
 *          GM_SUCCESS (retried for GM_SEND_TIMEOUT_MS, not failed at once);
 *   free   each message comes from gm_dma_malloc and is gm_dma_free'd right after the send,
 *          before its callback: the send must still succeed and the data arrive intact;
 *   close  sends COUNT messages, naps 50 ms without calling GM, then gm_close without
 *          waiting for a callback: the sink must still get every message;
 *   closed no sink ever comes: the first send must complete with
 *          GM_SEND_TARGET_PORT_CLOSED once GM_SEND_TIMEOUT_MS ran out (the rest are dropped
 *          with gm_drop_sends); prints the time it took.
 * --sink --learn NODE IP:BASE --after K (tcp): the sink's node map has no address for the
 * sender's node NODE; it learns it (gm_node_set_address) only once K messages arrived, as a
 * program that adds a peer when its first messages come (CoR's gm route). The acks owed for
 * those K must wait for the address, not be dropped: the sender, its window of unacked
 * items full, would send nothing more and wait for them until its timeout.
 * closed --delay S first sends one message to the sink (which must succeed), says "reached",
 * then waits S seconds before the COUNT sends: the script kills the sink meanwhile, a port
 * that was open and is gone, which must be reported at once, not after the timeout.
 * Exit 0 when all holds, 1 with a message otherwise.
 */
#include "gm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct gm_port *port;
static double deadline, started, first_cb;
static unsigned pending;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void fill(unsigned char *b, unsigned long len, unsigned idx)
{
    for (unsigned long i = 0; i < len; i++)
        b[i] = (unsigned char)(idx * 31 + i * 7 + (i >> 12));
}

static unsigned long first_bad(const unsigned char *b, unsigned long len, unsigned idx)
{
    for (unsigned long i = 0; i < len; i++)
        if (b[i] != (unsigned char)(idx * 31 + i * 7 + (i >> 12))) return i;
    return len;
}

static void on_sent(struct gm_port *p, void *ctx, gm_status_t st)
{
    (void)p;
    pending--;
    if (!first_cb) first_cb = now_s() - started;
    if (st != GM_SUCCESS) {
        /* the stream is held after an error: nothing more will come */
        fprintf(stderr, "gm-forgive: send %lu completed with %s (%d) after %.3f s\n",
                (unsigned long)(uintptr_t)ctx, gm_strerror(st), (int)st, now_s() - started);
        exit(1);
    }
}

static unsigned closed_seen, other_seen;

static void on_closed(struct gm_port *p, void *ctx, gm_status_t st)
{
    (void)p;
    (void)ctx;
    pending--;
    if (!first_cb) first_cb = now_s() - started;
    if (st == GM_SEND_TARGET_PORT_CLOSED)
        closed_seen++;
    else if (st != GM_SEND_DROPPED)
        other_seen++;
}

static void on_drop(struct gm_port *p, void *ctx, gm_status_t st)
{
    (void)p;
    (void)ctx;
    (void)st;
    pending--;
}

/* One step of the event loop: a receive event, or NULL (others go to gm_unknown). */
static gm_recv_event_t *poll_once(void)
{
    if (now_s() > deadline) {
        fprintf(stderr, "gm-forgive: timed out (%u sends pending)\n", pending);
        exit(1);
    }
    gm_recv_event_t *e = gm_receive(port);
    switch (GM_RECV_EVENT_TYPE(e)) {
    case GM_RECV_EVENT:
    case GM_HIGH_RECV_EVENT:
        return e;
    case GM_NO_RECV_EVENT: {
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
        return NULL;
    }
    default:
        gm_unknown(port, e);
        return NULL;
    }
}

/* --learn: the sender's node and address, given once `learn_after` messages arrived. */
static unsigned learn_node, learn_after;
static char learn_ip[64];
static unsigned learn_base;

static int run_sink(unsigned count, unsigned long len)
{
    unsigned size = gm_min_size_for_length(len);
    for (unsigned k = 0; k < 4 && k < count; k++) {
        void *b = gm_dma_malloc(port, gm_max_length_for_size(size));
        if (!b) {
            fprintf(stderr, "gm-forgive: gm_dma_malloc failed\n");
            return 1;
        }
        gm_provide_receive_buffer(port, b, size, GM_LOW_PRIORITY);
    }
    printf("gm-forgive: sink ready\n"); /* the script starts early senders after this */
    fflush(stdout);
    for (unsigned got = 0; got < count;) {
        gm_recv_event_t *e = poll_once();
        if (!e) continue;
        unsigned long n = gm_ntoh_u32(e->recv.length);
        const unsigned char *m = gm_ntohp(e->recv.message);
        unsigned long bad = n == len ? first_bad(m, len, got) : 0;
        if (n != len || bad != len) {
            fprintf(stderr,
                    "gm-forgive: sink: message %u: %lu bytes (want %lu), first wrong "
                    "byte at %lu\n",
                    got, n, len, bad);
            return 1;
        }
        gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), size, GM_LOW_PRIORITY);
        got++;
        if (learn_node && got == learn_after) {
            if (gm_node_set_address(learn_node, learn_ip, learn_base) != GM_SUCCESS) {
                fprintf(stderr, "gm-forgive: sink: gm_node_set_address(%u, %s, %u) failed\n",
                        learn_node, learn_ip, learn_base);
                return 1;
            }
            printf("gm-forgive: sink: learnt node %u's address after %u messages\n", learn_node,
                   got);
        }
    }
    printf("gm-forgive: sink: %u messages of %lu bytes intact\n", count, len);
    return 0;
}

static int run_sender(const char *mode, unsigned node, unsigned target_port, unsigned count,
                      unsigned long len)
{
    unsigned size = gm_min_size_for_length(len);
    void **bufs = calloc(count, sizeof *bufs);
    if (!bufs) return 1;
    int do_free = !strcmp(mode, "free");
    int closed = !strcmp(mode, "closed");
    started = now_s();
    for (unsigned i = 0; i < count; i++) {
        bufs[i] = gm_dma_malloc(port, len);
        if (!bufs[i]) {
            fprintf(stderr, "gm-forgive: gm_dma_malloc(%lu) failed\n", len);
            return 1;
        }
        fill(bufs[i], len, i);
        pending++;
        gm_send_with_callback(port, bufs[i], size, len, GM_LOW_PRIORITY, node, target_port,
                              closed ? on_closed : on_sent, (void *)(uintptr_t)i);
        if (do_free) {
            /* GM kept DMA memory valid until its send completed; and make sure freed
             * memory does not still hold the right bytes by luck. */
            gm_dma_free(port, bufs[i]);
            bufs[i] = NULL;
        }
    }
    printf("gm-forgive: %u sends issued\n", count); /* the script opens a late sink now */
    fflush(stdout);
    if (!strcmp(mode, "close")) {
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        gm_close(port); /* must not lose what is still in flight (frees the buffers) */
        port = NULL;
        free(bufs);
        printf("gm-forgive: %u sends then gm_close without waiting\n", count);
        return 0;
    }
    if (closed) {
        while (!first_cb)
            poll_once();
        pending++;
        gm_drop_sends(port, GM_LOW_PRIORITY, node, target_port, on_drop, NULL);
        while (pending)
            poll_once();
        for (unsigned i = 0; i < count; i++)
            gm_dma_free(port, bufs[i]);
        free(bufs);
        if (!closed_seen || other_seen) {
            fprintf(stderr,
                    "gm-forgive: closed: %u sends said the port was closed, %u something else\n",
                    closed_seen, other_seen);
            return 1;
        }
        printf("gm-forgive: closed: GM_SEND_TARGET_PORT_CLOSED after %.3f s\n", first_cb);
        return 0;
    }
    while (pending)
        poll_once();
    for (unsigned i = 0; i < count; i++)
        if (bufs[i]) gm_dma_free(port, bufs[i]);
    free(bufs);
    printf("gm-forgive: %s: %u sends of %lu bytes completed with GM_SUCCESS, the first after "
           "%.3f s\n",
           mode, count, len, first_cb);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = NULL;
    unsigned node = 0, port_id = 2, count = 1;
    unsigned long len = 64;
    double timeout = 60, delay = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--sink") || !strcmp(a, "late") || !strcmp(a, "free") ||
            !strcmp(a, "close") || !strcmp(a, "closed"))
            mode = a;
        else if (!strcmp(a, "--to") && v)
            node = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--port") && v)
            port_id = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--count") && v)
            count = (unsigned)atoi(argv[++i]);
        else if (!strcmp(a, "--len") && v)
            len = strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--timeout") && v)
            timeout = atof(argv[++i]);
        else if (!strcmp(a, "--delay") && v)
            delay = atof(argv[++i]);
        else if (!strcmp(a, "--learn") && v && i + 2 < argc &&
                 sscanf(argv[i + 2], "%63[0-9.]:%u", learn_ip, &learn_base) == 2)
            learn_node = (unsigned)atoi(argv[++i]), i++;
        else if (!strcmp(a, "--after") && v)
            learn_after = (unsigned)atoi(argv[++i]);
        else
            mode = NULL, i = argc;
    }
    if (!mode || (strcmp(mode, "--sink") && !node) || !count || count > 100000 || !len ||
        len > (64ul << 20) || port_id > 15 ||
        (learn_node && (!learn_after || learn_after > count))) {
        fprintf(stderr, "usage: gm-forgive --sink [--learn NODE IP:BASE --after K] | "
                        "late|free|close|closed --to NODE  --port N --count N --len BYTES "
                        "[--timeout S]\n");
        return 2;
    }
    deadline = now_s() + timeout;
    if (gm_init() != GM_SUCCESS) return 1;
    gm_status_t st = gm_open(&port, 0, port_id, "gm-forgive", GM_API_VERSION);
    if (st != GM_SUCCESS) {
        fprintf(stderr, "gm-forgive: gm_open(port %u): %s\n", port_id, gm_strerror(st));
        return 1;
    }
    if (delay > 0 && delay < timeout && !strcmp(mode, "closed")) {
        unsigned size = gm_min_size_for_length(len);
        void *b = gm_dma_malloc(port, len);
        if (!b) return 1;
        fill(b, len, 0);
        pending = 1;
        gm_send_with_callback(port, b, size, len, GM_LOW_PRIORITY, node, port_id, on_sent, NULL);
        while (pending)
            poll_once();
        gm_dma_free(port, b);
        first_cb = 0;
        printf("gm-forgive: reached\n");
        fflush(stdout);
        struct timespec nap = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
        nanosleep(&nap, NULL);
    }
    int rc =
        strcmp(mode, "--sink") ? run_sender(mode, node, port_id, count, len) : run_sink(count, len);
    if (port) gm_close(port);
    gm_finalize();
    return rc;
}
