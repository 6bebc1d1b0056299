/* Route conformance harness (see conf_harness.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "conf_harness.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *h_route_name = "udp";

/* Frame content: an 8-byte sequence prefix, then bytes of a pseudo-random pool from an offset
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

static int pool_init(void)
{
    if (pool) return 0;
    pool = malloc(POOL_LEN);
    if (!pool) return -1;
    uint64_t s = 777;
    for (size_t i = 0; i < POOL_LEN; i += 8) {
        uint64_t v = mix(s++);
        memcpy(pool + i, &v, 8);
    }
    return 0;
}

double h_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int h_small(void)
{
    const char *s = getenv("COR_TEST_SCALE");
    return s && strcmp(s, "small") == 0;
}

uint64_t h_cookie(void)
{
    static uint64_t n;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return mix(((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (++n << 48));
}

const struct cor_route_ops *h_route(void)
{
    static const struct cor_route_ops *ops;
    if (ops) return ops;
    char dirs[4096], sym[64];
    const char *rp = getenv("COR_ROUTE_PATH"), *bd = getenv("COR_BUILDDIR");
    snprintf(dirs, sizeof dirs, "%s:%s/cor/routes/%s/.libs", rp ? rp : "", bd ? bd : "..",
             h_route_name);
    snprintf(sym, sizeof sym, "cor_route_%s", h_route_name);
    char *save = NULL;
    const char *why = "not found";
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char path[4200];
        snprintf(path, sizeof path, "%s/cor_route_%s.so", d, h_route_name);
        if (access(path, R_OK) != 0) continue;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            why = dlerror();
            continue;
        }
        ops = dlsym(h, sym);
        if (ops && ops->size == sizeof *ops && ops->abi == COR_ROUTE_ABI) break;
        why = "no valid operations table";
        ops = NULL;
    }
    if (!ops)
        fprintf(stderr, "cannot load cor_route_%s.so: %s (set COR_ROUTE_PATH or COR_BUILDDIR)\n",
                h_route_name, why);
    return ops;
}

size_t h_frame_len(uint32_t src, uint32_t dst, uint64_t seq, size_t max)
{
    uint64_t r = mix((seq << 8) ^ (src << 4) ^ dst);
    unsigned pick = (unsigned)(r % 1000);
    size_t len;
    if (pick < 700)
        len = (r >> 10) % 257;
    else if (pick < 950)
        len = (r >> 10) % 16385;
    else if (pick < 995)
        len = (r >> 10) % 131073;
    else
        len = (1u << 20) - 4096 + (r >> 10) % 8193;
    return len > max ? max : len;
}

static size_t frame_off(uint32_t src, uint32_t dst, uint64_t seq)
{
    return (size_t)(mix(seq ^ ((uint64_t)src << 40) ^ ((uint64_t)dst << 48)) % (POOL_LEN / 2));
}

/* Prefixes must live until send_done (zero-copy routes): a ring per pair. */
#define PREFIX_RING 65536
static uint64_t prefix[H_MAX_PORTS][H_MAX_PORTS][PREFIX_RING];

static void on_deliver(void *core, cor_peer_t peer, const void *frame, size_t len)
{
    struct h_port *hp = core;
    if (hp->hook) hp->hook(hp, peer, frame, len);
    hp->rx_bytes += len;
    if (peer >= H_MAX_PORTS) {
        hp->rx_bad++;
        return;
    }
    uint64_t seq = hp->rx_next[peer]++;
    if (!hp->check) return;
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
            fprintf(stderr, "port %u: frame %llu from %u (%zu bytes) has wrong content\n", hp->rank,
                    (unsigned long long)seq, peer, len);
    }
}

static void on_done(void *core, void *cookie, int status)
{
    struct h_port *hp = core;
    (void)cookie;
    if (hp->closed) hp->done_late++;
    if (status == COR_OK) {
        /* atomic: tests that send from another thread read it (udp/route_test) */
        __atomic_fetch_add(&hp->done_ok, 1, __ATOMIC_RELAXED);
    } else {
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
    if (!ops || pool_init()) return COR_EROUTE;
    for (int i = 0; i < n; i++) {
        memset(&ports[i], 0, sizeof ports[i]);
        ports[i].rank = (uint32_t)i;
        ports[i].failed_peer = -1;
        ports[i].check = 1;
        ports[i].rx_max = (size_t)-1;
        struct cor_route_config cfg = {.session_cookie = cookie,
                                       .self = (uint32_t)i,
                                       .npeers = (uint32_t)n,
                                       .port_index = 0,
                                       .bind_hint = "loopback"};
        struct cor_route_upcalls up = {&ports[i], on_deliver, on_done, on_failed};
        int rc = ops->open(&cfg, &up, &ports[i].port);
        if (rc == COR_OK) rc = ops->address(ports[i].port, ports[i].addr, sizeof ports[i].addr);
        if (rc != COR_OK) {
            fprintf(stderr, "open/address of port %d: %s\n", i, cor_strerror(rc));
            h_close(ports, i + 1);
            return rc;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int rc = ops->add_peer(ports[i].port, (cor_peer_t)j, ports[j].addr);
            if (rc != COR_OK) {
                fprintf(stderr, "add_peer(%d, %d, %s): %s\n", i, j, ports[j].addr,
                        cor_strerror(rc));
                h_close(ports, n);
                return rc;
            }
        }
    return COR_OK;
}

void h_close_one(struct h_port *hp)
{
    if (!hp->port) return;
    struct cor_rport *p = hp->port;
    hp->port = NULL;
    h_route()->close(p);
    hp->closed = 1;
}

void h_close(struct h_port *ports, int n)
{
    for (int i = 0; i < n; i++)
        h_close_one(&ports[i]);
}

int h_progress(struct h_port *ports, int n)
{
    const struct cor_route_ops *ops = h_route();
    int ev = 0;
    for (int i = 0; i < n; i++)
        if (ports[i].port) ev += ops->progress(ports[i].port);
    return ev;
}

static int expect(int port, const char *what, uint64_t got, uint64_t want)
{
    if (got == want) return 0;
    fprintf(stderr, "port %d: %s is %llu, expected %llu\n", port, what, (unsigned long long)got,
            (unsigned long long)want);
    return 1;
}

int h_exchanged(const struct h_port *ports, int n, uint64_t frames)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            if (j != i)
                bad += expect(i, "frames received from a peer", ports[i].rx_next[j], frames);
        bad += expect(i, "bad frames", ports[i].rx_bad, 0);
        bad += expect(i, "sends completed OK", ports[i].done_ok, frames * (uint64_t)(n - 1));
        bad += expect(i, "sends failed", ports[i].done_err, 0);
    }
    return bad;
}

int h_progress_until(struct h_port *ports, int n, int (*cond)(void *), void *arg, double limit_s)
{
    double t0 = h_seconds();
    while (!cond(arg)) {
        if (h_progress(ports, n) == 0 && h_seconds() - t0 > limit_s) return cond(arg);
    }
    return 1;
}

int h_send_next(struct h_port *ports, int from, uint32_t to, size_t max)
{
    struct h_port *hp = &ports[from];
    uint64_t seq = hp->tx_next[to];
    size_t len = h_frame_len(hp->rank, to, seq, max);
    if (ports[to].rx_max != max) /* written once: a receiving thread may read it */
        ports[to].rx_max = max;
    uint64_t *pre = &prefix[from][to][seq % PREFIX_RING];
    *pre = seq;
    struct iovec iov[2] = {{pre, len < 8 ? len : 8},
                           {pool + frame_off(hp->rank, to, seq), len > 8 ? len - 8 : 0}};
    int rc = h_route()->send(hp->port, to, iov, 2, (void *)(uintptr_t)seq);
    if (rc == COR_OK) hp->tx_next[to]++;
    return rc;
}

int h_exchange(struct h_port *ports, int n, uint64_t frames, size_t max, double limit_s)
{
    double t0 = h_seconds();
    uint64_t want_done = 0;
    for (int i = 0; i < n; i++)
        want_done += (uint64_t)(n - 1) * frames;
    for (uint64_t iters = 1;; iters++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                if (i == j) continue;
                uint64_t sent = 0;
                for (int m = 0; m < n; m++)
                    sent += ports[i].tx_next[m];
                for (int k = 0; k < 64 && ports[i].tx_next[j] < frames; k++) {
                    /* prefixes are reused after PREFIX_RING frames per pair */
                    if (sent + (uint64_t)k - ports[i].done_ok - ports[i].done_err >=
                        PREFIX_RING / 2)
                        break;
                    int rc = h_send_next(ports, i, (uint32_t)j, max);
                    if (rc == COR_EAGAIN) break;
                    if (rc != COR_OK) {
                        fprintf(stderr, "send %d->%d: %s\n", i, j, cor_strerror(rc));
                        return -1;
                    }
                }
            }
        h_progress(ports, n);
        uint64_t done = 0;
        int rx_ok = 1;
        for (int i = 0; i < n; i++) {
            done += ports[i].done_ok;
            for (int j = 0; j < n; j++)
                if (i != j && ports[i].rx_next[j] != frames) rx_ok = 0;
            if (ports[i].rx_bad || ports[i].done_err || ports[i].failures) {
                fprintf(stderr, "port %d: %llu bad frames, %llu failed sends, %d failures\n", i,
                        (unsigned long long)ports[i].rx_bad, (unsigned long long)ports[i].done_err,
                        ports[i].failures);
                return -1;
            }
        }
        if (rx_ok && done >= want_done) return 0;
        if (iters % 256 == 0 && h_seconds() - t0 > limit_s) {
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    if (i != j)
                        fprintf(stderr, "timeout: %d->%d sent %llu, received %llu\n", i, j,
                                (unsigned long long)ports[i].tx_next[j],
                                (unsigned long long)ports[j].rx_next[i]);
            return -1;
        }
    }
}
