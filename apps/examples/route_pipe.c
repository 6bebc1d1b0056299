/*
 * cor_route_pipe: a small but real CoR route for domains on one host, the example of
 * doc/route-authors.md. It is built out of tree from this file and <cor/route.h> alone:
 *
 *     cc -shared -fPIC -O2 $(pkg-config --cflags cor) -o cor_route_pipe.so route_pipe.c
 *     COR_ROUTE_PATH=$PWD cor-run -n 2 --route pipe ./prog
 *
 * A hard port is a listening Unix SOCK_SEQPACKET socket in the abstract namespace, at
 * "unix:@cor-pipe.PID.N" (PID: its process). The first frame for a peer connects to its
 * address; each direction of a pair is one connection, so frames keep their order, and the
 * kernel keeps record boundaries. A frame is a 16-byte header (magic, sender's rank, session
 * cookie) and the payload. The kernel copies at send, so send_done follows at the next
 * progress(); a full socket buffer is COR_EAGAIN (backpressure); a connection refused, reset
 * or closed by the peer is that peer's death (COR_EPEERDEAD, peer_failed once).
 *
 * Untrusted input: any process of this host (and network namespace) can connect. A connection
 * from another user is closed at once. Its first frame names the sending rank: the kernel's
 * word on the connecting process (SO_PEERCRED) must be the PID in that rank's address, and
 * only one connection per rank is taken (frames of a rank whose address is not known yet
 * wait). A frame that is too short, too long, without the session's cookie, from a rank
 * outside the session or not the connection's rank is dropped and counted (counters), and
 * its connection closed.
 *
 * Threads (route.h's contract): send, progress and close come from the port's owner; add_peer,
 * peer_dead and timeout_ms from any thread, so the peer table is under a mutex, which no
 * callback is made under.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cor/route.h>

#define PIPE_MAGIC 0x70697065u /* "pipe" */
#define PIPE_HDR 16
#define PIPE_DONE_MAX 4096 /* frames sent whose send_done is still to come */
#define PIPE_BATCH 64      /* frames read from one connection per progress() */
#define PIPE_IOV_MAX 64

/* The knobs: one table, read at open() with libcor's reader, listed by cor-info. */
enum { K_FRAME_MAX, K_SNDBUF, K_COUNT };
static const cor_knob_t pipe_knobs[K_COUNT] = {
    {"COR_PIPE_FRAME_MAX", COR_KNOB_INT, 65536, 4096, 131072, "",
     "largest message on the wire, this route's 16-byte header included"},
    {"COR_PIPE_SNDBUF", COR_KNOB_INT, 1 << 20, 1 << 16, 1 << 26, "",
     "socket send buffer bytes: how much may be in flight per peer"},
};

struct peer {
    struct sockaddr_un sa; /* where it listens; salen 0 until add_peer */
    socklen_t salen;
    pid_t pid;    /* its process, from its address */
    int out;      /* our connection to it (owner only), -1 until the first send */
    int dead;     /* refused, reset, closed or declared dead: sends are refused */
    int reported; /* peer_failed made (once) */
    int in_seen;  /* a connection from it carried a valid frame */
};

struct conn { /* a connection accepted from a peer */
    int fd;
    int rank;   /* -1 until its first frame named a peer it may be */
    pid_t pid;  /* the connecting process (SO_PEERCRED) */
    int parked; /* its first frame names a peer whose address is not known yet */
};

struct cor_rport {
    struct cor_route_upcalls up;
    uint64_t cookie;
    uint32_t self, npeers;
    size_t frame_max;
    int sndbuf;
    int lfd, epfd;
    char addr[COR_ADDR_MAX];
    pthread_mutex_t lock; /* peers[] */
    struct peer *peers;
    struct conn **conns; /* accepted connections (owner only) */
    int nconns, conns_cap;
    atomic_int nparked;
    void *done[PIPE_DONE_MAX]; /* cookies of sent frames, a ring (owner only) */
    unsigned done_head;
    atomic_uint ndone;
    atomic_int failures; /* peers whose peer_failed is still to come */
    atomic_ullong dropped;
    uint8_t *rx; /* one frame */
};

/* "unix:@cor-pipe.PID.N" into a socket address and the PID; -1 if it is not one. */
static int addr_parse(const char *s, struct sockaddr_un *sa, socklen_t *len, pid_t *pid)
{
    int pidv, end = 0;
    unsigned nth;
    if (!s || sscanf(s, "unix:@cor-pipe.%d.%u%n", &pidv, &nth, &end) != 2 || s[end] || pidv <= 0)
        return -1;
    size_t n = strlen(s + 6);
    if (n >= sizeof sa->sun_path - 1) return -1;
    *pid = pidv;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path + 1, s + 6, n); /* sun_path[0] = 0: the abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    return 0;
}

/* Marks `peer` dead; its peer_failed comes at the next progress(). Lock held. */
static void peer_lost(struct cor_rport *p, uint32_t peer)
{
    if (p->peers[peer].dead) return;
    p->peers[peer].dead = 1;
    atomic_fetch_add(&p->failures, 1);
}

static void conn_close(struct cor_rport *p, int i)
{
    struct conn *c = p->conns[i];
    if (c->parked) atomic_fetch_sub(&p->nparked, 1);
    epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
    p->conns[i] = p->conns[--p->nconns];
}

static int conn_add(struct cor_rport *p, int fd, pid_t pid)
{
    if (p->nconns == p->conns_cap) {
        int cap = p->conns_cap ? 2 * p->conns_cap : 16;
        struct conn **m = realloc(p->conns, (size_t)cap * sizeof *m);
        if (!m) return -1;
        p->conns = m;
        p->conns_cap = cap;
    }
    struct conn *c = malloc(sizeof *c);
    if (!c) return -1;
    *c = (struct conn){.fd = fd, .rank = -1, .pid = pid};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        free(c);
        return -1;
    }
    p->conns[p->nconns++] = c;
    return 0;
}

static void conn_accept(struct cor_rport *p)
{
    for (int k = 0; k < PIPE_BATCH; k++) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct ucred cred;
        socklen_t clen = sizeof cred;
        int mine =
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 && cred.uid == getuid();
        if (mine && conn_add(p, fd, cred.pid) == 0) continue;
        atomic_fetch_add(&p->dropped, 1); /* another user's, or no memory: refused */
        close(fd);
    }
}

static int pipe_open(const struct cor_route_config *cfg, const struct cor_route_upcalls *up,
                     struct cor_rport **portp)
{
    if (!cfg || !up || !portp || cfg->npeers == 0 || cfg->self >= cfg->npeers) return COR_EINVAL;
    struct cor_rport *p = calloc(1, sizeof *p);
    if (!p) return COR_ENOMEM;
    p->up = *up;
    p->cookie = cfg->session_cookie;
    p->self = cfg->self;
    p->npeers = cfg->npeers;
    p->frame_max = (size_t)cor_knob_int(&pipe_knobs[K_FRAME_MAX]);
    p->sndbuf = (int)cor_knob_int(&pipe_knobs[K_SNDBUF]);
    p->lfd = p->epfd = -1;
    pthread_mutex_init(&p->lock, NULL);
    p->peers = calloc(cfg->npeers, sizeof *p->peers);
    p->rx = malloc(PIPE_HDR + p->frame_max);
    if (!p->peers || !p->rx) goto fail;
    for (uint32_t i = 0; i < cfg->npeers; i++)
        p->peers[i].out = -1;
    /* the first free cor-pipe.PID.N of this process (a squatter only costs a number) */
    static atomic_uint nth;
    p->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int bound = -1;
    for (int tries = 0; p->lfd >= 0 && bound != 0 && tries < 100; tries++) {
        struct sockaddr_un sa;
        socklen_t salen;
        pid_t pid;
        snprintf(p->addr, sizeof p->addr, "unix:@cor-pipe.%d.%u", (int)getpid(),
                 atomic_fetch_add(&nth, 1));
        if (addr_parse(p->addr, &sa, &salen, &pid) == 0)
            bound = bind(p->lfd, (struct sockaddr *)&sa, salen);
    }
    if (bound != 0 || listen(p->lfd, 128) != 0) goto fail;
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL: the listener */
    if (p->epfd < 0 || epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfd, &ev) != 0) goto fail;
    *portp = p;
    return COR_OK;
fail:
    if (p->lfd >= 0) close(p->lfd);
    if (p->epfd >= 0) close(p->epfd);
    free(p->peers);
    free(p->rx);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return COR_EIO;
}

static void pipe_close(struct cor_rport *p)
{
    /* Every accepted frame is in the kernel already: each completes as sent. */
    for (unsigned n = atomic_exchange(&p->ndone, 0); n; n--) {
        p->up.send_done(p->up.core, p->done[p->done_head], COR_OK);
        p->done_head = (p->done_head + 1) % PIPE_DONE_MAX;
    }
    while (p->nconns)
        conn_close(p, p->nconns - 1);
    free(p->conns);
    for (uint32_t i = 0; i < p->npeers; i++)
        if (p->peers[i].out >= 0) close(p->peers[i].out);
    close(p->lfd);
    close(p->epfd);
    free(p->peers);
    free(p->rx);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static int pipe_address(struct cor_rport *p, char *buf, size_t len)
{
    if (!buf || strlen(p->addr) >= len) return COR_EINVAL;
    memcpy(buf, p->addr, strlen(p->addr) + 1);
    return COR_OK;
}

static int pipe_add_peer(struct cor_rport *p, cor_peer_t peer, const char *addr)
{
    struct sockaddr_un sa;
    socklen_t len;
    pid_t pid;
    if (peer >= p->npeers || addr_parse(addr, &sa, &len, &pid)) return COR_EINVAL;
    int rc = COR_OK;
    pthread_mutex_lock(&p->lock);
    struct peer *q = &p->peers[peer];
    if (q->salen && (q->salen != len || memcmp(&q->sa, &sa, len) != 0))
        rc = COR_EEXIST; /* known at another address */
    else
        q->sa = sa, q->salen = len, q->pid = pid;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* The connection to `peer`, made at its first frame; -1 with *rc set when there is none. */
static int out_fd(struct cor_rport *p, cor_peer_t peer, int *rc)
{
    struct peer *q = &p->peers[peer];
    if (q->out >= 0) return q->out;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *rc = COR_EIO;
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &p->sndbuf, sizeof p->sndbuf);
    if (connect(fd, (struct sockaddr *)&q->sa, q->salen) != 0) {
        int e = errno;
        close(fd);
        if (e == EAGAIN) { /* its listener's backlog is full: it is busy, not dead */
            *rc = COR_EAGAIN;
        } else {
            peer_lost(p, peer); /* nothing listens there any more */
            *rc = COR_EPEERDEAD;
        }
        return -1;
    }
    return q->out = fd;
}

static int pipe_send(struct cor_rport *p, cor_peer_t peer, const struct iovec *iov, int iovcnt,
                     void *cookie)
{
    if (iovcnt < 0 || iovcnt > PIPE_IOV_MAX - 1 || (iovcnt > 0 && !iov)) return COR_EINVAL;
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > p->frame_max - PIPE_HDR) return COR_EINVAL;
    if (atomic_load(&p->ndone) == PIPE_DONE_MAX) return COR_EAGAIN; /* progress() first */
    int rc = COR_OK, fd = -1;
    pthread_mutex_lock(&p->lock);
    if (peer >= p->npeers || !p->peers[peer].salen)
        rc = COR_EINVAL;
    else if (p->peers[peer].dead)
        rc = COR_EPEERDEAD;
    else
        fd = out_fd(p, peer, &rc);
    pthread_mutex_unlock(&p->lock);
    if (fd < 0) return rc;

    uint8_t hdr[PIPE_HDR];
    uint32_t magic = PIPE_MAGIC, self = p->self;
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &self, 4);
    memcpy(hdr + 8, &p->cookie, 8);
    struct iovec v[PIPE_IOV_MAX];
    v[0] = (struct iovec){hdr, PIPE_HDR};
    if (iovcnt) memcpy(v + 1, iov, (size_t)iovcnt * sizeof *iov);
    struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)iovcnt + 1};
    if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        if (errno == EAGAIN || errno == ENOBUFS) return COR_EAGAIN; /* buffer full */
        pthread_mutex_lock(&p->lock); /* reset or closed: the peer is gone */
        peer_lost(p, peer);
        pthread_mutex_unlock(&p->lock);
        return COR_EPEERDEAD;
    }
    /* the kernel copied the frame: it completes at the next progress() */
    p->done[(p->done_head + atomic_load(&p->ndone)) % PIPE_DONE_MAX] = cookie;
    atomic_fetch_add(&p->ndone, 1);
    return COR_OK;
}

/* One frame from connection c (n bytes in p->rx): delivered, or dropped with its connection
 * (1: the connection was closed). */
static int frame_in(struct cor_rport *p, int ci, size_t n)
{
    struct conn *c = p->conns[ci];
    uint32_t magic, src;
    uint64_t cookie;
    memcpy(&magic, p->rx, 4);
    memcpy(&src, p->rx + 4, 4);
    memcpy(&cookie, p->rx + 8, 8);
    int ok = n >= PIPE_HDR && n <= p->frame_max && magic == PIPE_MAGIC && cookie == p->cookie &&
             (uint32_t)c->rank == src;
    if (!ok) {
        atomic_fetch_add(&p->dropped, 1);
        conn_close(p, ci);
        return 1;
    }
    p->up.deliver(p->up.core, src, p->rx + PIPE_HDR, n - PIPE_HDR);
    return 0;
}

static void conn_park(struct cor_rport *p, struct conn *c, int park)
{
    if (c->parked == park) return;
    struct epoll_event ev = {.events = park ? 0 : EPOLLIN, .data.ptr = c};
    epoll_ctl(p->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->parked = park;
    atomic_fetch_add(&p->nparked, park ? 1 : -1);
}

/* A new connection's first frame (peeked at) names its rank: taken if that rank's process
 * connected and no other connection speaks for it. 0: bound; 1: not yet (no frame, or the
 * rank's address is not known: parked); -1: dropped and closed. */
static int conn_bind(struct cor_rport *p, int ci)
{
    struct conn *c = p->conns[ci];
    uint8_t h[PIPE_HDR];
    ssize_t n = recv(c->fd, h, sizeof h, MSG_DONTWAIT | MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
    uint32_t magic = 0, src = 0;
    uint64_t cookie = 0;
    if (n >= PIPE_HDR) {
        memcpy(&magic, h, 4);
        memcpy(&src, h + 4, 4);
        memcpy(&cookie, h + 8, 8);
    }
    int ok = n >= PIPE_HDR && magic == PIPE_MAGIC && cookie == p->cookie && src < p->npeers;
    if (ok) {
        pthread_mutex_lock(&p->lock);
        struct peer *q = &p->peers[src];
        if (!q->salen) {
            pthread_mutex_unlock(&p->lock);
            conn_park(p, c, 1); /* add_peer comes soon: the core learns addresses together */
            return 1;
        }
        ok = q->pid == c->pid && !q->in_seen;
        if (ok) q->in_seen = 1;
        pthread_mutex_unlock(&p->lock);
    }
    if (!ok) {
        if (n != 0) atomic_fetch_add(&p->dropped, 1); /* 0: it left without a word */
        conn_close(p, ci);
        return -1;
    }
    conn_park(p, c, 0);
    c->rank = (int)src;
    return 0;
}

/* Reads up to PIPE_BATCH frames from connection ci; the number delivered. */
static int conn_read(struct cor_rport *p, int ci)
{
    if (p->conns[ci]->rank < 0 && conn_bind(p, ci) != 0) return 0;
    int got = 0;
    for (int k = 0; k < PIPE_BATCH; k++) {
        struct conn *c = p->conns[ci];
        ssize_t n = recv(c->fd, p->rx, PIPE_HDR + p->frame_max, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (n <= 0) { /* closed or reset: the peer is gone (or a stranger left) */
            if (c->rank >= 0) {
                pthread_mutex_lock(&p->lock);
                peer_lost(p, (uint32_t)c->rank);
                pthread_mutex_unlock(&p->lock);
            }
            conn_close(p, ci);
            break;
        }
        if (frame_in(p, ci, (size_t)n)) break;
        got++;
    }
    return got;
}

static int pipe_progress(struct cor_rport *p)
{
    int work = 0;
    for (unsigned n = atomic_load(&p->ndone); n; n--, work++) {
        void *cookie = p->done[p->done_head];
        p->done_head = (p->done_head + 1) % PIPE_DONE_MAX;
        atomic_fetch_sub(&p->ndone, 1);
        p->up.send_done(p->up.core, cookie, COR_OK);
    }
    struct epoll_event evs[16];
    int n = epoll_wait(p->epfd, evs, 16, 0);
    for (int i = 0; i < n; i++) {
        if (!evs[i].data.ptr) {
            conn_accept(p);
            continue;
        }
        for (int ci = 0; ci < p->nconns; ci++) /* still open? (a frame may have closed it) */
            if (p->conns[ci] == evs[i].data.ptr) {
                work += conn_read(p, ci);
                break;
            }
    }
    for (int ci = p->nconns - 1; atomic_load(&p->nparked) > 0 && ci >= 0; ci--)
        if (p->conns[ci]->parked) work += conn_read(p, ci); /* its peer may be known now */
    /* peer_failed, once per peer, with no lock held */
    while (atomic_load(&p->failures) > 0) {
        int peer = -1;
        pthread_mutex_lock(&p->lock);
        for (uint32_t i = 0; i < p->npeers && peer < 0; i++)
            if (p->peers[i].dead && !p->peers[i].reported) {
                p->peers[i].reported = 1;
                peer = (int)i;
            }
        atomic_fetch_sub(&p->failures, 1);
        pthread_mutex_unlock(&p->lock);
        if (peer >= 0) p->up.peer_failed(p->up.core, (cor_peer_t)peer, COR_EPEERDEAD), work++;
    }
    return work;
}

static int pipe_wait_fd(struct cor_rport *p)
{
    return p->epfd; /* readable when a connection or the listener is */
}

static int pipe_timeout_ms(struct cor_rport *p)
{
    /* no timers; completions and failures to report need a progress() at once */
    if (atomic_load(&p->ndone) || atomic_load(&p->failures)) return 0;
    return atomic_load(&p->nparked) ? 1 : -1; /* parked: look again for its peer soon */
}

static void pipe_caps(struct cor_rport *p, struct cor_route_caps *caps)
{
    memset(caps, 0, sizeof *caps);
    caps->frame_max = p->frame_max - PIPE_HDR;
    caps->eager_limit = caps->frame_max / 2;
}

static void pipe_counters(struct cor_rport *p, uint64_t *dropped, uint64_t *retransmits)
{
    if (dropped) *dropped = atomic_load(&p->dropped);
    if (retransmits) *retransmits = 0; /* the kernel loses nothing */
}

/* The core learnt that `peer` died: nothing is held here (the kernel has every accepted
 * frame), so later sends are refused; the core made this known, so no peer_failed. */
static void pipe_peer_dead(struct cor_rport *p, cor_peer_t peer)
{
    if (peer >= p->npeers) return;
    pthread_mutex_lock(&p->lock);
    p->peers[peer].dead = 1;
    p->peers[peer].reported = 1;
    pthread_mutex_unlock(&p->lock);
}

COR_ROUTE_DECLARE(pipe) = {
    .size = sizeof(struct cor_route_ops),
    .abi = COR_ROUTE_ABI,
    .name = "pipe",
    .open = pipe_open,
    .close = pipe_close,
    .address = pipe_address,
    .add_peer = pipe_add_peer,
    .send = pipe_send,
    .progress = pipe_progress,
    .wait_fd = pipe_wait_fd,
    .timeout_ms = pipe_timeout_ms,
    .caps = pipe_caps,
    .counters = pipe_counters,
    .peer_dead = pipe_peer_dead,
    .knobs = pipe_knobs,
    .nknobs = K_COUNT,
};
