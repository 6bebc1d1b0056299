/*
 * Raw measurement of CoRudpRoute against plain UDP on loopback, two threads in one process
 * (each spinning on its own port, as two polling domains would): one-way small-message
 * latency from a ping-pong, and streaming rate for a frame size. Not a test: run by hand,
 *   udp/udp_bench [iterations]
 * The official figures come from cor-bench.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conf_harness.h"

static const struct cor_route_ops *ops;
static struct cor_rport *port[2];
static volatile uint64_t got[2], got_bytes[2], done[2];
static int iters = 20000;

static void b_deliver(void *core, cor_peer_t peer, const void *f, size_t len)
{
    int me = (int)(intptr_t)core;
    got[me]++;
    got_bytes[me] += len;
}
static void b_done(void *core, void *cookie, int st)
{
    done[(int)(intptr_t)core]++;
}
static void b_failed(void *core, cor_peer_t peer, int err)
{
    fprintf(stderr, "peer failed\n");
}

static char msg[8];
static char *big;

static void *echo_main(void *a)
{
    uint64_t seen = 0;
    struct iovec iov = {msg, sizeof(msg)};
    while (seen < (uint64_t)iters) {
        ops->progress(port[1]);
        if (got[1] > seen) {
            seen++;
            while (ops->send(port[1], 0, &iov, 1, NULL) == COR_EAGAIN)
                ops->progress(port[1]);
        }
    }
    for (int i = 0; i < 100000; i++)
        ops->progress(port[1]);
    return NULL;
}

static double route_pingpong(void)
{
    got[0] = got[1] = 0;
    pthread_t t;
    pthread_create(&t, NULL, echo_main, NULL);
    struct iovec iov = {msg, sizeof(msg)};
    double t0 = 0;
    for (int i = 0; i < iters; i++) {
        if (i == 100) t0 = h_seconds();
        while (ops->send(port[0], 1, &iov, 1, NULL) == COR_EAGAIN)
            ops->progress(port[0]);
        while (got[0] <= (uint64_t)i)
            ops->progress(port[0]);
    }
    double dt = h_seconds() - t0;
    pthread_join(t, NULL);
    return dt / (iters - 100) / 2 * 1e6;
}

static size_t stream_size;
static int stream_n;
static void *sink_main(void *a)
{
    while (got[1] < (uint64_t)stream_n)
        ops->progress(port[1]);
    for (int i = 0; i < 10000; i++)
        ops->progress(port[1]);
    return NULL;
}

static double route_stream(size_t size, int n)
{
    got[1] = got_bytes[1] = 0;
    done[0] = 0;
    stream_size = size;
    stream_n = n;
    pthread_t t;
    pthread_create(&t, NULL, sink_main, NULL);
    struct iovec iov = {big, size};
    double t0 = h_seconds();
    for (int i = 0; i < n; i++)
        while (ops->send(port[0], 1, &iov, 1, NULL) == COR_EAGAIN)
            ops->progress(port[0]);
    while (got[1] < (uint64_t)n)
        ops->progress(port[0]);
    double dt = h_seconds() - t0;
    while (done[0] < (uint64_t)n)
        ops->progress(port[0]);
    pthread_join(t, NULL);
    return (double)size * n / dt / 1e6;
}

/* Plain UDP for comparison. */
static int rs[2];
static struct sockaddr_in ra[2];
static void *raw_echo(void *a)
{
    char b[16];
    for (int i = 0; i < iters; i++) {
        while (recv(rs[1], b, sizeof(b), MSG_DONTWAIT) < 0)
            ;
        sendto(rs[1], b, 8, 0, (struct sockaddr *)&ra[0], sizeof(ra[0]));
    }
    return NULL;
}
static volatile int raw_stop;
static volatile uint64_t raw_bytes;
static void *raw_sink(void *a)
{
    static char b[65536];
    while (!raw_stop) {
        ssize_t r = recv(rs[1], b, sizeof(b), MSG_DONTWAIT);
        if (r > 0) raw_bytes += (uint64_t)r;
    }
    return NULL;
}

static void raw_open(void)
{
    for (int i = 0; i < 2; i++) {
        rs[i] = socket(AF_INET, SOCK_DGRAM, 0);
        int sz = 4 << 20;
        setsockopt(rs[i], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
        setsockopt(rs[i], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
        ra[i] =
            (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        bind(rs[i], (struct sockaddr *)&ra[i], sizeof(ra[i]));
        socklen_t l = sizeof(ra[i]);
        getsockname(rs[i], (struct sockaddr *)&ra[i], &l);
    }
}

static double raw_pingpong(void)
{
    pthread_t t;
    pthread_create(&t, NULL, raw_echo, NULL);
    char b[16] = {0};
    double t0 = 0;
    for (int i = 0; i < iters; i++) {
        if (i == 100) t0 = h_seconds();
        sendto(rs[0], b, 8, 0, (struct sockaddr *)&ra[1], sizeof(ra[1]));
        while (recv(rs[0], b, sizeof(b), MSG_DONTWAIT) < 0)
            ;
    }
    double dt = h_seconds() - t0;
    pthread_join(t, NULL);
    return dt / (iters - 100) / 2 * 1e6;
}

static double raw_stream(double secs)
{
    raw_stop = 0;
    raw_bytes = 0;
    pthread_t t;
    pthread_create(&t, NULL, raw_sink, NULL);
    double t0 = h_seconds();
    while (h_seconds() - t0 < secs)
        sendto(rs[0], big, 65507, MSG_DONTWAIT, (struct sockaddr *)&ra[1], sizeof(ra[1]));
    double dt = h_seconds() - t0;
    usleep(10000);
    raw_stop = 1;
    pthread_join(t, NULL);
    return raw_bytes / dt / 1e6;
}

/* One thread drives both ends: the CPU cost of a one-way trip, free of scheduling. */
static double route_cost(void)
{
    struct iovec iov = {msg, sizeof(msg)};
    uint64_t g0 = got[0], g1 = got[1];
    double t0 = h_seconds();
    for (int i = 0; i < iters; i++) {
        ops->send(port[0], 1, &iov, 1, NULL);
        while (got[1] == g1)
            ops->progress(port[1]);
        g1++;
        ops->send(port[1], 0, &iov, 1, NULL);
        while (got[0] == g0)
            ops->progress(port[0]);
        g0++;
    }
    return (h_seconds() - t0) / iters / 2 * 1e6;
}

static double raw_cost(void)
{
    char b[16] = {0};
    double t0 = h_seconds();
    for (int i = 0; i < iters; i++) {
        sendto(rs[0], b, 8, 0, (struct sockaddr *)&ra[1], sizeof(ra[1]));
        while (recv(rs[1], b, sizeof(b), MSG_DONTWAIT) < 0)
            ;
        sendto(rs[1], b, 8, 0, (struct sockaddr *)&ra[0], sizeof(ra[0]));
        while (recv(rs[0], b, sizeof(b), MSG_DONTWAIT) < 0)
            ;
    }
    return (h_seconds() - t0) / iters / 2 * 1e6;
}

int main(int argc, char **argv)
{
    if (argc > 1) iters = atoi(argv[1]);
    if (iters < 200) iters = 200;
    ops = h_route();
    if (!ops) return 1;
    big = calloc(1, 1 << 21);
    char addr[2][COR_ADDR_MAX];
    for (int i = 0; i < 2; i++) {
        struct cor_route_config cfg = {.session_cookie = 42, .self = (uint32_t)i, .npeers = 2};
        struct cor_route_upcalls up = {(void *)(intptr_t)i, b_deliver, b_done, b_failed};
        if (ops->open(&cfg, &up, &port[i]) != COR_OK) return 1;
        ops->address(port[i], addr[i], sizeof(addr[i]));
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            ops->add_peer(port[i], (cor_peer_t)j, addr[j]);
    raw_open();
    double rawc = raw_cost();
    printf("one-way cost, one thread driving both ends, 8 B: raw UDP %.2f us, udp route %.2f us\n",
           rawc, route_cost());
    double rawl = raw_pingpong();
    printf("one-way latency, 8 B: raw UDP %.2f us, udp route %.2f us\n", rawl, route_pingpong());
    double raw = raw_stream(1.0);
    printf("raw UDP streaming, 65507 B datagrams: %.0f MB/s\n", raw);
    size_t sizes[] = {1024, 16384, 65536, 1 << 20};
    int counts[] = {100000, 40000, 20000, 1500};
    const char *only = getenv("UDP_BENCH_SIZE");
    for (int i = 0; i < 4; i++) {
        if (only && (size_t)atol(only) != sizes[i]) continue;
        double r = route_stream(sizes[i], counts[i]);
        printf("udp route streaming %7zu B frames: %.0f MB/s (%.0f%% of raw)\n", sizes[i], r,
               100 * r / raw);
    }
    uint64_t d, rt;
    ops->counters(port[0], &d, &rt);
    printf("retransmits (port 0): %llu\n", (unsigned long long)rt);
    ops->close(port[0]);
    ops->close(port[1]);
    return 0;
}
