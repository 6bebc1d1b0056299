/*
 * Socket layer of CoRudpRoute: one non-blocking UDP socket per hard port, batched sends and
 * receives (sendmmsg/recvmmsg), the fault injector (udp_fault.h) applied on send, and the
 * choice of the local address. Sends are made under the port lock; receives only from
 * progress(), which the core never runs twice at once on a port.
 */
#ifndef UDP_SOCK_H
#define UDP_SOCK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rutil.h"
#include "udp_fault.h"

struct udp_held; /* a datagram the injector holds back */

struct udp_sock {
    int fd;
    struct sockaddr_in local;
    struct udp_faults faults;
    struct udp_held *held_head, *held_tail; /* FIFO, oldest due first; port lock */
    int logged_error;                       /* hard send errors are logged once */
    /* A send or receive reported ECONNREFUSED: ICMP errors wait in the error queue
     * (udp_sock_refused reads them). Set under the port lock or by progress(). */
    _Atomic int refused_pending;
};

/* A datagram of ours that a host refused: "port unreachable", the port it went to is closed
 * (the process that had it ended). `to` is where it went, `head` its first bytes (our
 * header, as sent), `len` how many of them came back. */
struct udp_refusal {
    struct sockaddr_in to;
    uint8_t head[64];
    size_t len;
};

/* Opens a socket bound to ip (dotted quad) with a kernel-chosen port; 0 or -errno. The
 * socket asks for ICMP errors (IP_RECVERR), so that a peer whose process is gone (its port
 * closed) is told from one that is only slow (docs/scale.md). */
int udp_sock_open(struct udp_sock *s, const char *ip, int sndbuf, int rcvbuf);
void udp_sock_close(struct udp_sock *s);
/* Sends the first n messages (faults applied); returns how many the kernel accepted, counting
 * datagrams lost to a hard error (logged) or to the injector as sent. Stops at EAGAIN. */
int udp_sock_send(struct udp_sock *s, struct mmsghdr *m, unsigned n, uint64_t now);
/* Sends held datagrams that are due. */
void udp_sock_release(struct udp_sock *s, uint64_t now);
/* When the oldest held datagram is due (ns), or 0 when none is held. */
uint64_t udp_sock_held_due(const struct udp_sock *s);
/* Receives up to n datagrams without blocking; returns the count (0 = none). An error the
 * socket reports (an ICMP error) makes the next udp_sock_refused read the error queue. */
int udp_sock_recv(struct udp_sock *s, struct mmsghdr *m, unsigned n);
/* When an error was reported (or `always`): reads the error queue, writes up to max "port
 * unreachable" refusals to out and returns their count (others are read and ignored). 0 at
 * once when nothing was reported and not `always`. Only from progress(). */
int udp_sock_refused(struct udp_sock *s, struct udp_refusal *out, int max, int always);

/* Address selection. hint: "loopback", "auto" or a dotted quad. Writes the IP to bind
 * (ip[16]) and the largest datagram that needs no IP fragmentation on that interface
 * (*dgram: MTU - 28, or UDP_DGRAM_MAX on loopback). Returns 0 or -1 (bad hint). */
int udp_addr_pick(const char *hint, char *ip, uint32_t *dgram, int *loopback);
/* Parses "a.b.c.d:port" strictly. 0 or -1. */
int udp_addr_parse(const char *s, struct sockaddr_in *sa);
/* Nonzero if the address belongs to this host (127/8 or a local interface). */
int udp_addr_is_local(struct in_addr a);

/* Logs a message prefixed "cor udp:" to stderr (the route layer's logger). */
#define UDP_LOG_WHO "cor udp"
#define udp_log(...) rutil_log(UDP_LOG_WHO, __VA_ARGS__)

#endif
