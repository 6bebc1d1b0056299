/*
 * Route conformance harness: loads cor_route_<name>.so with dlopen (COR_ROUTE_PATH, else
 * COR_BUILDDIR/cor/routes/<name>/.libs), opens several hard ports of it in one process as
 * ranks 0..n-1 of one session, and drives them from one thread, checking every frame.
 */
#ifndef CONF_HARNESS_H
#define CONF_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "cor/route.h"

#define H_MAX_PORTS 4

struct h_port;
/* Called for every frame delivered to a port before the harness checks it. */
typedef void (*h_frame_hook)(struct h_port *hp, cor_peer_t peer, const void *frame, size_t len);

struct h_port {
    struct cor_rport *port;
    uint32_t rank;
    char addr[COR_ADDR_MAX];
    uint64_t rx_next[H_MAX_PORTS]; /* frames from each peer, expected with seq 0, 1, 2... */
    uint64_t rx_bad;               /* wrong length or content */
    uint64_t rx_bytes;
    uint64_t tx_next[H_MAX_PORTS];
    uint64_t done_ok, done_err, done_late; /* late = after the port was closed */
    int last_err;
    int failed_peer, failed_err, failures;
    int check; /* 0: deliveries only counted */
    int closed;
    size_t rx_max; /* the size cap the senders use */
    h_frame_hook hook;
    void *hook_arg;
};

/* The route under test: argv[1] of the program or COR_CONF_ROUTE. */
extern const char *h_route_name;
/* Its table, loaded once; NULL (with a message) if it cannot be found. */
const struct cor_route_ops *h_route(void);
/* A cookie unique to this process and call (shm namespaces of concurrent runs differ). */
uint64_t h_cookie(void);
/* Opens n ports as ranks 0..n-1 of a session and adds them all to each other (self too).
 * Returns COR_OK or an error. */
int h_open(struct h_port *ports, int n, uint64_t cookie);
void h_close(struct h_port *ports, int n);
/* Closes one port; marks it so that later send_done calls count as late. */
void h_close_one(struct h_port *hp);
int h_progress(struct h_port *ports, int n);

/* Frame `seq` from `src` to `dst`: length and content are functions of these. */
size_t h_frame_len(uint32_t src, uint32_t dst, uint64_t seq, size_t max);
int h_send_next(struct h_port *ports, int from, uint32_t to, size_t max);
/* Exchanges frames until `frames` (a total) went each way between all pairs, at most
 * limit_s seconds; 0 when all arrived once, in order, intact, and every send completed OK. */
int h_exchange(struct h_port *ports, int n, uint64_t frames, size_t max, double limit_s);
/* After h_exchange(ports, n, frames, ...): 0 when each port received `frames` intact from
 * every other one and all its sends completed OK; else the number of counts that differ, each
 * printed with the value expected. */
int h_exchanged(const struct h_port *ports, int n, uint64_t frames);
/* Progress until cond(arg) or limit_s; returns cond's last value. */
int h_progress_until(struct h_port *ports, int n, int (*cond)(void *), void *arg, double limit_s);

double h_seconds(void);
int h_small(void); /* COR_TEST_SCALE=small */

#endif
