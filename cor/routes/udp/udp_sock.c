/* Socket I/O and fault injection of CoRudpRoute (see udp_sock.h). */
#include "udp_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct udp_held {
    struct udp_held *next;
    uint64_t due;
    struct sockaddr_in to;
    size_t len;
    uint8_t data[];
};

static void set_buf(int fd, int force_opt, int opt, int bytes, const char *name)
{
    if (bytes <= 0) return;
    /* The FORCE variants pass rmem_max/wmem_max when privileged; fall back silently. */
    if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0) return;
    if (setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes)) != 0)
        udp_log("setsockopt(%s, %d): %s", name, bytes, strerror(errno));
}

int udp_sock_open(struct udp_sock *s, const char *ip, int sndbuf, int rcvbuf)
{
    s->held_head = s->held_tail = NULL;
    s->logged_error = 0;
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        int e = errno;
        udp_log("socket(AF_INET, SOCK_DGRAM): %s", strerror(e));
        return -e;
    }
    set_buf(s->fd, SO_SNDBUFFORCE, SO_SNDBUF, sndbuf, "SO_SNDBUF");
    set_buf(s->fd, SO_RCVBUFFORCE, SO_RCVBUF, rcvbuf, "SO_RCVBUF");
    /* Without it an unconnected socket hears of no ICMP error: a dead peer and a slow one
     * would look the same. */
    int one = 1;
    if (setsockopt(s->fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one)) != 0)
        udp_log("setsockopt(IP_RECVERR): %s (dead peers are noticed by silence only)",
                strerror(errno));
    atomic_store(&s->refused_pending, 0);
    memset(&s->local, 0, sizeof(s->local));
    s->local.sin_family = AF_INET;
    if (inet_pton(AF_INET, ip, &s->local.sin_addr) != 1) {
        udp_log("bad bind address '%s'", ip);
        close(s->fd);
        s->fd = -1;
        return -EINVAL;
    }
    socklen_t sl = sizeof(s->local);
    if (bind(s->fd, (struct sockaddr *)&s->local, sizeof(s->local)) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&s->local, &sl) != 0) {
        int e = errno;
        udp_log("bind(%s:0): %s", ip, strerror(e));
        close(s->fd);
        s->fd = -1;
        return -e;
    }
    return 0;
}

void udp_sock_close(struct udp_sock *s)
{
    while (s->held_head) {
        struct udp_held *h = s->held_head;
        s->held_head = h->next;
        free(h);
    }
    s->held_tail = NULL;
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

static int soft_error(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == EINTR;
}

/* Raw batched send; returns messages accepted, counting hard-error losses as sent. */
static int send_raw(struct udp_sock *s, struct mmsghdr *m, unsigned n)
{
    unsigned done = 0;
    while (done < n) {
        int r = sendmmsg(s->fd, m + done, n - done, MSG_DONTWAIT);
        if (r > 0) {
            done += (unsigned)r;
            continue;
        }
        int e = r < 0 ? errno : EAGAIN;
        if (e == ECONNREFUSED) {
            /* An earlier datagram was refused (the error is now read, nothing was sent):
             * note it for progress() and send this one again. */
            atomic_store(&s->refused_pending, 1);
            continue;
        }
        if (soft_error(e)) break;
        /* A hard error (unreachable network...) loses this datagram; retransmission and the
         * dead-peer timeout deal with it. With IP_RECVERR it may also have left an entry in
         * the error queue, which keeps poll() reporting POLLERR until it is read. */
        atomic_store(&s->refused_pending, 1);
        if (!s->logged_error) {
            udp_log("sendmmsg: %s (datagram dropped, further errors not logged)", strerror(e));
            s->logged_error = 1;
        }
        done++;
    }
    return (int)done;
}

static int hold(struct udp_sock *s, const struct msghdr *mh, uint64_t now)
{
    size_t len = 0;
    for (size_t i = 0; i < mh->msg_iovlen; i++)
        len += mh->msg_iov[i].iov_len;
    struct udp_held *h = malloc(sizeof(*h) + len);
    if (!h) return -1;
    h->next = NULL;
    h->due = now + s->faults.delay_ns;
    memcpy(&h->to, mh->msg_name, sizeof(h->to));
    h->len = len;
    size_t off = 0;
    for (size_t i = 0; i < mh->msg_iovlen; i++) {
        memcpy(h->data + off, mh->msg_iov[i].iov_base, mh->msg_iov[i].iov_len);
        off += mh->msg_iov[i].iov_len;
    }
    if (s->held_tail)
        s->held_tail->next = h;
    else
        s->held_head = h;
    s->held_tail = h;
    return 0;
}

int udp_sock_send(struct udp_sock *s, struct mmsghdr *m, unsigned n, uint64_t now)
{
    if (!s->faults.on) return send_raw(s, m, n);
    udp_sock_release(s, now);
    for (unsigned i = 0; i < n; i++) {
        switch (udp_faults_decide(&s->faults)) {
        case UDP_FX_DROP:
            break;
        case UDP_FX_HOLD:
            if (hold(s, &m[i].msg_hdr, now) == 0) break;
            /* could not hold it: send it now */
            __attribute__((fallthrough));
        case UDP_FX_SEND:
            if (send_raw(s, &m[i], 1) == 0) return (int)i;
            break;
        case UDP_FX_DUP:
            if (send_raw(s, &m[i], 1) == 0) return (int)i;
            send_raw(s, &m[i], 1);
            break;
        }
    }
    return (int)n;
}

void udp_sock_release(struct udp_sock *s, uint64_t now)
{
    while (s->held_head && s->held_head->due <= now) {
        struct udp_held *h = s->held_head;
        struct iovec iov = {h->data, h->len};
        struct mmsghdr m = {.msg_hdr = {.msg_name = &h->to,
                                        .msg_namelen = sizeof(h->to),
                                        .msg_iov = &iov,
                                        .msg_iovlen = 1}};
        if (send_raw(s, &m, 1) == 0) return; /* socket full: try again later */
        s->held_head = h->next;
        if (!s->held_head) s->held_tail = NULL;
        free(h);
    }
}

uint64_t udp_sock_held_due(const struct udp_sock *s)
{
    return s->held_head ? s->held_head->due : 0;
}

int udp_sock_recv(struct udp_sock *s, struct mmsghdr *m, unsigned n)
{
    int r = recvmmsg(s->fd, m, n, MSG_DONTWAIT, NULL);
    if (r >= 0) return r;
    int e = errno;
    if (soft_error(e)) return 0;
    /* ECONNREFUSED (or another ICMP error, EMSGSIZE...): reported once here, the details wait
     * in the error queue (read by udp_sock_refused, which also empties it so that poll()
     * stops reporting POLLERR). */
    atomic_store(&s->refused_pending, 1);
    return 0;
}

int udp_sock_refused(struct udp_sock *s, struct udp_refusal *out, int max, int always)
{
    /* (a load first: this runs at every progress() call, and nearly always finds nothing) */
    if (!always && !atomic_load_explicit(&s->refused_pending, memory_order_relaxed)) return 0;
    atomic_store(&s->refused_pending, 0);
    int k = 0;
    /* Bounded: the queue holds what ICMP brought since the last look; more than this many
     * is read on the next round (the flag is set again). */
    for (int i = 0; i < 256; i++) {
        struct sockaddr_in to;
        uint8_t head[64];
        union {
            char buf[CMSG_SPACE(sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {head, sizeof(head)};
        struct msghdr mh = {.msg_name = &to,
                            .msg_namelen = sizeof(to),
                            .msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.buf,
                            .msg_controllen = sizeof(ctl.buf)};
        ssize_t r = recvmsg(s->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) continue;
            return k; /* EAGAIN: the queue is empty */
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
            struct sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(c), sizeof(ee));
            /* Port unreachable from ICMP; a local error or another ICMP type says nothing
             * about the process at the other end. */
            if (ee.ee_origin != SO_EE_ORIGIN_ICMP || ee.ee_type != 3 || ee.ee_code != 3 ||
                mh.msg_namelen < sizeof(to) || to.sin_family != AF_INET || k == max)
                continue;
            out[k].to = to;
            out[k].len = (size_t)r < sizeof(head) ? (size_t)r : sizeof(head);
            memcpy(out[k].head, head, out[k].len);
            k++;
        }
        if (k == max) {
            atomic_store(&s->refused_pending, 1); /* the rest next time */
            return k;
        }
    }
    atomic_store(&s->refused_pending, 1);
    return k;
}
