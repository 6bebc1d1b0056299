/*
 * Test harness for CoRudpRoute: loads cor_route_udp.so with dlopen (COR_ROUTE_PATH, or
 * COR_BUILDDIR/cor/routes/udp/.libs), opens several hard ports in one process and drives
 * them from one thread, checking every frame that arrives.
 */
#ifndef UDP_HARNESS_H
#define UDP_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "route.h"

#define H_MAX_PORTS 4

/* One hard port and what the test saw on it. */
struct h_port {
    struct cor_rport *port;
    uint32_t rank;
    char addr[COR_ADDR_MAX];
    /* Receive checking: frames from each peer must arrive with seq 0, 1, 2... */
    uint64_t rx_next[H_MAX_PORTS];
    uint64_t rx_bad; /* frames with wrong length or content */
    uint64_t rx_bytes;
    /* Sending: frames given to send(), and completions. */
    uint64_t tx_next[H_MAX_PORTS];
    uint64_t done_ok, done_err;
    int last_err;
    int failed_peer, failed_err, failures;
    int check;     /* 0: deliveries only counted */
    size_t rx_max; /* the size cap the senders use (set by h_send_next) */
};

/* The route table, loaded once; NULL (with a message) if it cannot be found. */
const struct cor_route_ops *h_route(void);
/* Opens n ports as ranks 0..n-1 of a session with `cookie` and adds them to each other.
 * Returns 0 or a COR error. */
int h_open(struct h_port *ports, int n, uint64_t cookie);
void h_close(struct h_port *ports, int n);
/* Progress on every open port once; returns the events. */
int h_progress(struct h_port *ports, int n);

/* Frame `seq` from `src` to `dst`: its length and content are functions of these. */
size_t h_frame_len(uint32_t src, uint32_t dst, uint64_t seq, size_t max);
/* Sends the next frame from ports[from] to rank `to`; returns the send() result. */
int h_send_next(struct h_port *ports, int from, uint32_t to, size_t max);

/* Exchanges frames until `frames` (a total, counting earlier calls) went in each direction between ports 0 and 1 (and all pairs when
 * n > 2), at most `limit_s` seconds. Returns 0 when everything arrived exactly once, in
 * order, with correct content, and every send completed OK. */
int h_exchange(struct h_port *ports, int n, uint64_t frames, size_t max, double limit_s);

double h_seconds(void);

#endif
