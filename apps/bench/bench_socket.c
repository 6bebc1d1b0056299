/*
 * The baseline: plain UDP sockets, polled (non-blocking recv in a spin loop), the best a
 * program can do over the kernel's UDP without any runtime. Rows are named "udp-socket".
 *
 * Each domain binds a socket to the address its routes use (COR_BIND as cor-run sets it: unset
 * or "loopback" is 127.0.0.1, an IPv4 address is itself, "auto" the first interface that is up
 * and not loopback, as the core picks for a domain started on another host) and the two
 * exchange address and port with cor_send/cor_recv, then connect() to each other. A message larger
 * than one datagram goes as 64 KiB-class datagrams (UDP_DGRAM_MAX, the IPv4 limit). Streams are a
 * byte stream cut into datagrams of min(size, UDP_DGRAM_MAX), with a credit window acknowledged by
 * the receiver: loopback UDP drops what overflows the socket buffer, and a lost datagram would
 * stall the measurement. Loss is still detected (no progress for LOSS_TIMEOUT_NS) and reported,
 * never waited out.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "cor/cor.h"

#define UDP_DGRAM_MAX 65507u           /* 65535 - IPv4 header - UDP header */
#define SOCK_BUF (8u << 20)            /* asked for both socket buffers */
#define WINDOW_BYTES (2u << 20)        /* unacknowledged bytes in flight */
#define WINDOW_DGRAMS 256u             /* unacknowledged datagrams in flight */
#define LOSS_TIMEOUT_NS 10000000000ull /* no progress for this long: datagrams were lost */

struct sock_ctx {
    const struct bench *b;
    int fd;
    size_t window_bytes; /* what the receive buffer we got can hold without a drop */
    char *sbuf, *rbuf;
};

static int sys_fail(const char *what)
{
    fprintf(stderr, "cor-bench: %s: %s\n", what, strerror(errno));
    return COR_EIO;
}

/* Sets a socket buffer size; as root the FORCE variant goes beyond net.core.*mem_max. */
static void set_buf(int fd, int force_opt, int opt)
{
    int v = (int)SOCK_BUF;
    if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) < 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

/* The address to bind, by COR_BIND (see the top of this file). */
static struct in_addr local_addr(void)
{
    struct in_addr a = {.s_addr = htonl(INADDR_LOOPBACK)};
    const char *bind = getenv("COR_BIND");
    if (!bind || !*bind || !strcmp(bind, "loopback")) return a;
    if (strcmp(bind, "auto") != 0) {
        struct in_addr x;
        if (inet_pton(AF_INET, bind, &x) == 1) a = x;
        return a;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return a;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_RUNNING))
            continue;
        a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        break;
    }
    freeifaddrs(ifs);
    return a;
}

static int sock_open(const struct bench *b, struct sock_ctx *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = local_addr()};
    socklen_t alen = sizeof a;
    int err, mine[2], peer_ap[2], peerport;
    cor_idp_t peer = cor_task_idp(1 - b->rank, 0);

    memset(c, 0, sizeof *c);
    c->b = b;
    c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return sys_fail("socket");
    set_buf(c->fd, SO_RCVBUFFORCE, SO_RCVBUF);
    set_buf(c->fd, SO_SNDBUFFORCE, SO_SNDBUF);
    /* Without root the buffer stays at net.core.rmem_max: keep the window well inside it
     * (the kernel counts a datagram's whole allocation, about twice a 64 KiB payload). */
    int rcv = 0;
    socklen_t rlen = sizeof rcv;
    if (getsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcv, &rlen) < 0)
        return sys_fail("getsockopt SO_RCVBUF");
    c->window_bytes = (size_t)rcv / 4 < WINDOW_BYTES ? (size_t)rcv / 4 : WINDOW_BYTES;
    if (c->window_bytes < WINDOW_BYTES && b->rank == 0)
        fprintf(stderr,
                "cor-bench: UDP receive buffer of %d bytes only (not root?): the "
                "socket stream keeps %zu bytes in flight\n",
                rcv, c->window_bytes);
    if (bind(c->fd, (struct sockaddr *)&a, sizeof a) < 0) return sys_fail("bind");
    if (getsockname(c->fd, (struct sockaddr *)&a, &alen) < 0) return sys_fail("getsockname");
    mine[0] = (int)ntohl(a.sin_addr.s_addr);
    mine[1] = ntohs(a.sin_port);
    /* Domain 0 sends first so the two blocking calls cannot wait on each other. */
    if (b->rank == 0) {
        err = cor_send(peer, COR_CTX_WORLD, BENCH_TAG_SETUP, COR_INT, mine, 2);
        if (!err) err = cor_recv(peer, COR_CTX_WORLD, BENCH_TAG_SETUP, COR_INT, peer_ap, 2, NULL);
    } else {
        err = cor_recv(peer, COR_CTX_WORLD, BENCH_TAG_SETUP, COR_INT, peer_ap, 2, NULL);
        if (!err) err = cor_send(peer, COR_CTX_WORLD, BENCH_TAG_SETUP, COR_INT, mine, 2);
    }
    peerport = peer_ap[1];
    if (err) return bench_fail("exchanging socket ports", err);
    if (peerport <= 0 || peerport > 65535) {
        fprintf(stderr, "cor-bench: peer sent a bad port %d\n", peerport);
        return COR_EPROTO;
    }
    a.sin_addr.s_addr = htonl((uint32_t)peer_ap[0]);
    a.sin_port = htons((uint16_t)peerport);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) return sys_fail("connect");
    size_t max = bench_max_size(b);
    c->sbuf = malloc(max > UDP_DGRAM_MAX ? max : UDP_DGRAM_MAX);
    c->rbuf = malloc(max > UDP_DGRAM_MAX ? max : UDP_DGRAM_MAX);
    if (!c->sbuf || !c->rbuf) return bench_fail("malloc", COR_ENOMEM);
    bench_fill(c->sbuf, max);
    return COR_OK;
}

static void sock_close(struct sock_ctx *c)
{
    if (c->fd >= 0) close(c->fd);
    free(c->sbuf);
    free(c->rbuf);
}

/* Sends one datagram, spinning while the socket buffer is full. */
static int dgram_send(struct sock_ctx *c, const void *buf, size_t len)
{
    for (;;) {
        ssize_t n = send(c->fd, buf, len, 0);
        if (n == (ssize_t)len) return COR_OK;
        if (n >= 0) {
            fprintf(stderr, "cor-bench: UDP send took %zd of %zu bytes\n", n, len);
            return COR_EIO;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS && errno != EINTR)
            return sys_fail("send");
    }
}

/* Polls for one datagram; COR_ETIMEDOUT after LOSS_TIMEOUT_NS without one. */
static int dgram_recv(struct sock_ctx *c, void *buf, size_t max, size_t *len)
{
    uint64_t start = 0;
    for (unsigned spins = 0;; spins++) {
        ssize_t n = recv(c->fd, buf, max, MSG_TRUNC);
        if (n >= 0) {
            if ((size_t)n > max) {
                fprintf(stderr, "cor-bench: UDP datagram of %zd bytes, at most %zu expected\n", n,
                        max);
                return COR_ETRUNC;
            }
            *len = (size_t)n;
            return COR_OK;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return sys_fail("recv");
        /* Read the clock only now and then: the spin itself is what we measure. */
        if ((spins & 1023) == 0) {
            uint64_t now = bench_now_ns();
            if (!start)
                start = now;
            else if (now - start > LOSS_TIMEOUT_NS) {
                fprintf(stderr,
                        "cor-bench: domain %d: no UDP datagram for %.0f s: "
                        "datagrams lost or the peer stalled\n",
                        c->b->rank, LOSS_TIMEOUT_NS / 1e9);
                return COR_ETIMEDOUT;
            }
        }
    }
}

/* One message: datagrams of at most UDP_DGRAM_MAX bytes (one empty datagram for size 0). */
static int msg_send(struct sock_ctx *c, size_t size)
{
    size_t off = 0;
    do {
        size_t len = size - off < UDP_DGRAM_MAX ? size - off : UDP_DGRAM_MAX;
        int err = dgram_send(c, c->sbuf + off, len);
        if (err) return err;
        off += len;
    } while (off < size);
    return COR_OK;
}

static int msg_recv(struct sock_ctx *c, size_t size)
{
    size_t off = 0;
    do {
        size_t len, want = size - off < UDP_DGRAM_MAX ? size - off : UDP_DGRAM_MAX;
        int err = dgram_recv(c, c->rbuf + off, want, &len);
        if (err) return err;
        if (len != want) {
            fprintf(stderr, "cor-bench: UDP datagram of %zu bytes, expected %zu\n", len, want);
            return COR_EPROTO;
        }
        off += len;
    } while (off < size);
    if (c->b->verify) return bench_check(c->rbuf, size);
    return COR_OK;
}

/* Stream plan for one size: `total` bytes in datagrams of `dgram` bytes. */
struct plan {
    uint64_t dgrams; /* datagrams in all */
    size_t dgram;    /* size of each but the last */
    uint64_t total;  /* payload bytes */
    uint64_t window; /* datagrams in flight */
    uint64_t ack_every;
};

static struct plan make_plan(const struct sock_ctx *c, size_t size, long msgs)
{
    struct plan p;
    p.total = (uint64_t)size * (uint64_t)msgs;
    p.dgram = size < UDP_DGRAM_MAX ? size : UDP_DGRAM_MAX;
    p.dgrams = p.dgram ? (p.total + p.dgram - 1) / p.dgram : (uint64_t)msgs;
    p.window = p.dgram ? c->window_bytes / p.dgram : WINDOW_DGRAMS;
    p.window = p.window > WINDOW_DGRAMS ? WINDOW_DGRAMS : p.window < 2 ? 2 : p.window;
    p.ack_every = p.window / 4 ? p.window / 4 : 1;
    return p;
}

/* Acks carry the number of datagrams received so far. */
static int stream_sender(struct sock_ctx *c, const struct plan *p)
{
    uint64_t sent = 0, acked = 0, ack = 0;
    size_t len;
    int err;
    while (acked < p->dgrams) {
        if (sent < p->dgrams && sent - acked < p->window) {
            uint64_t off = sent * p->dgram;
            size_t n = p->total - off < p->dgram ? (size_t)(p->total - off) : p->dgram;
            /* The stream's bytes come from the pattern buffer, wrapped at the message size. */
            if ((err = dgram_send(c, c->sbuf, n))) return err;
            sent++;
            continue;
        }
        if ((err = dgram_recv(c, &ack, sizeof ack, &len))) {
            fprintf(stderr, "cor-bench: sender: %llu of %llu datagrams sent, %llu acknowledged\n",
                    (unsigned long long)sent, (unsigned long long)p->dgrams,
                    (unsigned long long)acked);
            return err;
        }
        if (len != sizeof ack || ack > p->dgrams || ack < acked) {
            fprintf(stderr, "cor-bench: bad UDP ack (%zu bytes)\n", len);
            return COR_EPROTO;
        }
        acked = ack;
    }
    return COR_OK;
}

static int stream_receiver(struct sock_ctx *c, const struct plan *p, struct bench_stream_result *r)
{
    uint64_t got = 0, bytes = 0, first = 0;
    int err;
    while (got < p->dgrams) {
        size_t len;
        if ((err = dgram_recv(c, c->rbuf, UDP_DGRAM_MAX, &len))) {
            fprintf(stderr, "cor-bench: receiver: %llu of %llu datagrams received\n",
                    (unsigned long long)got, (unsigned long long)p->dgrams);
            return err;
        }
        if (got == 0) {
            r->t0_ns = bench_now_ns();
            first = len;
        }
        got++;
        bytes += len;
        if (c->b->verify && len <= p->dgram && (err = bench_check(c->rbuf, len))) return err;
        if (got % p->ack_every == 0 || got == p->dgrams) {
            if ((err = dgram_send(c, &got, sizeof got))) return err;
        }
    }
    r->t1_ns = bench_now_ns();
    if (bytes != p->total) {
        fprintf(stderr, "cor-bench: UDP stream brought %llu bytes, %llu expected\n",
                (unsigned long long)bytes, (unsigned long long)p->total);
        return COR_EPROTO;
    }
    r->bytes = bytes - first;
    return COR_OK;
}

int bench_socket_stream(struct bench *b)
{
    struct sock_ctx c;
    int err = sock_open(b, &c);
    for (int i = 0; !err && i < b->nsizes; i++) {
        size_t size = b->sizes[i];
        bench_progress(b, i, b->nsizes, size);
        long n = bench_iters_stream(b, size), warm = bench_warmup(n);
        struct plan p = make_plan(&c, size, n);
        struct bench_stream_result r = {0};
        /* Warm-up: a few untimed round trips of this size; they also line the two sides up. */
        for (long k = 0; !err && k < warm; k++) {
            if (b->rank == 0) {
                if (!(err = msg_recv(&c, size))) err = msg_send(&c, 0);
            } else if (!(err = msg_send(&c, size))) {
                err = msg_recv(&c, 0);
            }
        }
        if (!err) err = b->rank == 1 ? stream_sender(&c, &p) : stream_receiver(&c, &p, &r);
        if (err) {
            fprintf(stderr, "cor-bench: domain %d: UDP stream of %zu-byte messages failed\n",
                    b->rank, size);
            break;
        }
        if (b->rank == 1) continue;
        /* The clock starts at the first datagram: count the messages after it. */
        r.msgs = size ? (long)(r.bytes / size) : n - 1;
        bench_stream_row(b, "udp-socket", "stream", size, 1, 1, &r);
    }
    sock_close(&c);
    return err;
}

static int sock_send_ctx(void *c, size_t size)
{
    return msg_send(c, size);
}

static int sock_recv_ctx(void *c, size_t size)
{
    return msg_recv(c, size);
}

int bench_socket_pingpong(struct bench *b)
{
    static const struct bench_msg_ops ops = {sock_send_ctx, sock_recv_ctx, NULL};
    struct sock_ctx c;
    int err = sock_open(b, &c);
    if (!err) err = bench_pingpong(b, "udp-socket", &ops, &c);
    sock_close(&c);
    return err;
}

/* rate: windows of b->window messages, each acked; a window fits the socket buffer (sizes up
 * to a few KiB), so nothing overflows without the stream's credits. */
int bench_socket_rate(struct bench *b)
{
    static const struct bench_msg_ops ops = {sock_send_ctx, sock_recv_ctx, NULL};
    struct sock_ctx c;
    int err = sock_open(b, &c);
    for (int i = 0; !err && i < b->nsizes; i++) {
        size_t size = b->sizes[i];
        bench_progress(b, i, b->nsizes, size);
        if ((size ? size : 1) * (size_t)b->window > c.window_bytes) {
            fprintf(stderr,
                    "cor-bench: a window of %d messages of %zu bytes overflows the UDP "
                    "receive buffer: use smaller --sizes or --window\n",
                    b->window, size);
            err = COR_EINVAL;
            break;
        }
        long total, warm;
        bench_rate_budget(b, bench_iters_stream(b, size), &total, &warm);
        struct bench_stream_result r = {0};
        if ((err = bench_windows(b, &ops, &c, size, total, warm, b->window, &r))) {
            fprintf(stderr, "cor-bench: domain %d: UDP rate of %zu-byte messages failed\n", b->rank,
                    size);
            break;
        }
        bench_stream_row(b, "udp-socket", "rate-socket", size, 1, 1, &r);
    }
    sock_close(&c);
    return err;
}
