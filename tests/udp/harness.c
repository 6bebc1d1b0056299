/* CoRudpRoute test harness (see harness.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Frame content comes from a pool of pseudo-random bytes; each frame starts at an offset
 * derived from (src, dst, seq), so a misplaced or stale frame does not compare equal. */
#define POOL_LEN (2u << 20)
static uint8_t *pool;

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void pool_init(void)
{
    if (pool)
        return;
    pool = malloc(POOL_LEN);
    uint64_t s = 12345;
    for (size_t i = 0; i < POOL_LEN; i += 8) {
        uint64_t v = mix(s++);
        memcpy(pool + i, &v, 8);
    }
}

double h_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const struct cor_route_ops *h_route(void)
{
    static const struct cor_route_ops *ops;
    if (ops)
        return ops;
    char dirs[4096] = "";
    const char *rp = getenv("COR_ROUTE_PATH"), *bd = getenv("COR_BUILDDIR");
    snprintf(dirs, sizeof(dirs), "%s:%s/cor/routes/udp/.libs:../cor/routes/udp/.libs",
             rp ? rp : "", bd ? bd : ".");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/cor_route_udp.so", d);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        ops = dlsym(h, "cor_route_udp");
        if (ops)
            break;
    }
    if (!ops)
        fprintf(stderr, "cannot load cor_route_udp.so (set COR_ROUTE_PATH or COR_BUILDDIR)\n");
    return ops;
}

size_t h_frame_len(uint32_t src, uint32_t dst, uint64_t seq, size_t max)
{
    uint64_t r = mix((seq << 8) ^ (src << 4) ^ dst);
    unsigned pick = (unsigned)(r % 1000);
    size_t len;
    if (pick < 700)
        len = (r >> 10) % 257; /* small: 0..256 */
    else if (pick < 950)
        len = (r >> 10) % 16385; /* medium */
    else if (pick < 995)
        len = (r >> 10) % 131073; /* several datagrams */
    else
        len = (1u << 20) - 4096 + (r >> 10) % 8193; /* around 1 MiB */
    return len > max ? max : len;
}

static size_t frame_off(uint32_t src, uint32_t dst, uint64_t seq)
{
    return (size_t)(mix(seq ^ ((uint64_t)src << 40) ^ ((uint64_t)dst << 48)) % (POOL_LEN / 2));
}

/* Per-frame 8-byte prefix holding the seq; must live until send_done, so a ring of them. */
#define PREFIX_RING 65536
static uint64_t prefix[H_MAX_PORTS][H_MAX_PORTS][PREFIX_RING];

static void on_deliver(void *core, cor_peer_t peer, const void *frame, size_t len)
{
    struct h_port *hp = core;
    hp->rx_bytes += len;
    if (peer >= H_MAX_PORTS) {
        hp->rx_bad++;
        return;
    }
    uint64_t seq = hp->rx_next[peer]++;
    if (!hp->check)
        return;
    size_t want = h_frame_len(peer, hp->rank, seq, hp->rx_max);
    if (len != want) {
        if (hp->rx_bad++ < 5)
            fprintf(stderr, "port %u: frame %llu from %u has %zu bytes, expected %zu\n", hp->rank,
                    (unsigned long long)seq, peer, len, want);
        return;
    }
    size_t head = len < 8 ? len : 8;
    const uint8_t *f = frame;
    if (memcmp(f, &seq, head) != 0 ||
        (len > 8 && memcmp(f + 8, pool + frame_off(peer, hp->rank, seq), len - 8) != 0)) {
        if (hp->rx_bad++ < 5)
            fprintf(stderr, "port %u: frame %llu from %u (%zu bytes) has wrong content\n",
                    hp->rank, (unsigned long long)seq, peer, len);
    }
}

static void on_done(void *core, void *cookie, int status)
{
    struct h_port *hp = core;
    (void)cookie;
    if (status == COR_OK)
        __atomic_fetch_add(&hp->done_ok, 1, __ATOMIC_RELAXED); /* read by sender threads */
    else {
        hp->done_err++;
        hp->last_err = status;
    }
}

static void on_failed(void *core, cor_peer_t peer, int err)
{
    struct h_port *hp = core;
    hp->failed_peer = (int)peer;
    hp->failed_err = err;
    hp->failures++;
}

int h_open(struct h_port *ports, int n, uint64_t cookie)
{
    const struct cor_route_ops *ops = h_route();
    if (!ops)
        return COR_EROUTE;
    pool_init();
    for (int i = 0; i < n; i++) {
        memset(&ports[i], 0, sizeof(ports[i]));
        ports[i].rank = (uint32_t)i;
        ports[i].failed_peer = -1;
        ports[i].check = 1;
        struct cor_route_config cfg = {.session_cookie = cookie,
                                       .self = (uint32_t)i,
                                       .npeers = (uint32_t)n,
                                       .port_index = 0,
                                       .bind_hint = "loopback"};
        struct cor_route_upcalls up = {&ports[i], on_deliver, on_done, on_failed};
        int rc = ops->open(&cfg, &up, &ports[i].port);
        if (rc != COR_OK) {
            h_close(ports, i);
            return rc;
        }
        rc = ops->address(ports[i].port, ports[i].addr, sizeof(ports[i].addr));
        if (rc != COR_OK) {
            h_close(ports, i + 1);
            return rc;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int rc = ops->add_peer(ports[i].port, (cor_peer_t)j, ports[j].addr);
            if (rc != COR_OK) {
                h_close(ports, n);
                return rc;
            }
        }
    return COR_OK;
}

void h_close(struct h_port *ports, int n)
{
    const struct cor_route_ops *ops = h_route();
    for (int i = 0; i < n; i++)
        if (ports[i].port) {
            ops->close(ports[i].port);
            ports[i].port = NULL;
        }
}

int h_progress(struct h_port *ports, int n)
{
    const struct cor_route_ops *ops = h_route();
    int ev = 0;
    for (int i = 0; i < n; i++)
        if (ports[i].port)
            ev += ops->progress(ports[i].port);
    return ev;
}

int h_send_next(struct h_port *ports, int from, uint32_t to, size_t max)
{
    struct h_port *hp = &ports[from];
    uint64_t seq = hp->tx_next[to];
    size_t len = h_frame_len(hp->rank, to, seq, max);
    if (ports[to].rx_max != max) /* written once, read by the receiving thread */
        ports[to].rx_max = max;
    uint64_t *pre = &prefix[from][to][seq % PREFIX_RING];
    *pre = seq;
    struct iovec iov[2] = {{pre, len < 8 ? len : 8},
                           {pool + frame_off(hp->rank, to, seq), len > 8 ? len - 8 : 0}};
    int rc = h_route()->send(hp->port, to, iov, 2, (void *)(uintptr_t)seq);
    if (rc == COR_OK)
        hp->tx_next[to]++;
    return rc;
}

int h_exchange(struct h_port *ports, int n, uint64_t frames, size_t max, double limit_s)
{
    double t0 = h_seconds();
    uint64_t want_done = 0;
    for (int i = 0; i < n; i++)
        want_done += (uint64_t)(n - 1) * frames;
    uint64_t iters = 0;
    for (;;) {
        int busy = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                if (i == j)
                    continue;
                /* Keep at most PREFIX_RING/2 frames outstanding (prefix ring reuse). */
                for (int k = 0; k < 64 && ports[i].tx_next[j] < frames; k++) {
                    if (ports[i].tx_next[j] - ports[i].done_ok >= PREFIX_RING / 2)
                        break;
                    int rc = h_send_next(ports, i, (uint32_t)j, max);
                    if (rc == COR_EAGAIN)
                        break;
                    if (rc != COR_OK) {
                        fprintf(stderr, "send %d->%d: %d\n", i, j, rc);
                        return -1;
                    }
                    busy = 1;
                }
            }
        h_progress(ports, n);
        uint64_t done = 0, rx_ok = 1;
        for (int i = 0; i < n; i++) {
            done += ports[i].done_ok;
            for (int j = 0; j < n; j++)
                if (i != j && ports[i].rx_next[j] != frames)
                    rx_ok = 0;
            if (ports[i].rx_bad || ports[i].done_err || ports[i].failures)
                return -1;
        }
        if (rx_ok && done >= want_done)
            return 0;
        if (++iters % 256 == 0 && h_seconds() - t0 > limit_s) {
            for (int i = 0; i < n; i++)
                fprintf(stderr, "timeout: port %d sent %llu, completed %llu, received %llu\n", i,
                        (unsigned long long)ports[i].tx_next[(i + 1) % n],
                        (unsigned long long)ports[i].done_ok,
                        (unsigned long long)ports[i].rx_next[(i + 1) % n]);
            return -1;
        }
        (void)busy;
    }
}
