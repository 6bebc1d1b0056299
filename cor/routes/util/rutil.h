/*
 * The shared layer under the route plugins (libfabric's prov/util): what every route needs and
 * none should write again, so that a route folder holds only its own I/O.
 *
 * - the clock: monotonic nanoseconds and the conversions timeout_ms() and timed waits need;
 * - logging: one line on stderr with the route's prefix;
 * - knob tables: a route lists its environment variables once, as an X-macro (name, default,
 *   range, the default cor-info shows, meaning) that becomes the cor_knob_t table its ops
 *   point to; rutil_knobs_read() parses them with one error message, and cor-info prints the
 *   same table from the loaded plugin;
 * - the port base, struct rutil_port, which each route port embeds first: the core's
 *   callbacks, the session's cookie, rank and size, the closing flag, the failed peers, the
 *   finished sends and the drop counter;
 * - reporting to the core at the end of a poll: the upcalls made, in the contract's order,
 *   where no route lock is held.
 *
 * Built as libcorroute_util.la (noinst, static) and linked into each plugin, which is built
 * with -fvisibility=hidden: nothing here is exported. Everything on a send or receive path is
 * `static inline` in this header; only the cold calls (knobs, logging) live in .c files.
 * No function here takes a lock or keeps state of its own; routes say what guards the
 * base's lists (udp: the route's port lock; gm: the port's one owner, route.h).
 */
#ifndef COR_ROUTES_RUTIL_H
#define COR_ROUTES_RUTIL_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cor/route.h"

/* ---- clock ---------------------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds: the one clock of the routes (timers, RTT, naps). */
static inline uint64_t rutil_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What timeout_ms() returns for a timer due at `due_ns` (UINT64_MAX = no timer): -1, 0 when
 * due, else the milliseconds left rounded up (the core must not wake before it), at most
 * INT_MAX. */
static inline int rutil_ms_until(uint64_t due_ns, uint64_t now_ns)
{
    if (due_ns == UINT64_MAX) return -1;
    if (due_ns <= now_ns) return 0;
    uint64_t ms = (due_ns - now_ns + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The CLOCK_MONOTONIC time `ns` from now, for pthread_cond_timedwait on a condition variable
 * created with pthread_condattr_setclock(CLOCK_MONOTONIC). */
static inline struct timespec rutil_abstime(uint64_t ns)
{
    uint64_t end = rutil_now_ns() + ns;
    struct timespec ts = {(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
    return ts;
}

/* ---- logging -------------------------------------------------------------------------- */

/* Writes "<who>: <message>\n" to stderr in one call (lines of concurrent threads do not mix);
 * messages are cut at 512 bytes. Each route wraps it: udp_log("..."), gmr_log("..."). */
void rutil_log(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- addresses ----------------------------------------------------------------------- */

/* What the bind hint "auto" means for every route: the first IPv4 address of an interface
 * that is up, has its carrier and is not loopback (getifaddrs order). Writes its dotted form
 * to ip (at least 16 bytes) and, if ifname is not NULL, the interface's name (at least
 * IF_NAMESIZE bytes); returns 0, or -1 with ip = "127.0.0.1" when there is none (loopback
 * still serves one host). */
int rutil_auto_ipv4(char *ip, char *ifname);

/* ---- knob tables ---------------------------------------------------------------------- */

/* A route's knobs are a table of cor_knob_t (cor.h), written as an X-macro of rows
 *     X(ID, "COR_<ROUTE>_NAME", KIND, default, lo, hi, "shown default", "meaning")
 * (KIND = UINT: a non-negative integer in [lo, hi]; STR; SET; the shown default is "" when it
 * is the default number itself). RUTIL_KNOB_ROW turns a row into the table's entry, which the
 * route's ops point to (.knobs) and rutil_knobs_read parses with; RUTIL_KNOB_ENUM into an
 * index K_ID. */
#define RUTIL_KNOB_KIND_UINT COR_KNOB_INT
#define RUTIL_KNOB_KIND_STR COR_KNOB_STR
#define RUTIL_KNOB_KIND_SET COR_KNOB_SET
#define RUTIL_KNOB_ROW(id, name, kind, def, lo, hi, shown, meaning)                                \
    {name, RUTIL_KNOB_KIND_##kind, def, lo, hi, shown, meaning},
#define RUTIL_KNOB_ENUM(id, name, kind, def, lo, hi, shown, meaning) K_##id,
/* (0 TABLE(RUTIL_KNOB_COUNT)): the number of rows, a constant for the ops table. */
#define RUTIL_KNOB_COUNT(id, name, kind, def, lo, hi, shown, meaning) +1

/* One knob's value: u (INT: the value or the default; SET: 1 if set), s (getenv's value,
 * NULL when unset). */
struct rutil_knob_val {
    unsigned long long u;
    const char *s;
};

/* Reads every knob of t[0..n) from the environment into v[0..n). A UINT that is not a whole
 * number in [lo, hi] is logged ("<who>: NAME='value': expected an integer in [lo, hi]") and
 * gets its default. Returns the number of such bad values (0: all fine). */
int rutil_knobs_read(const char *who, const cor_knob_t *t, size_t n, struct rutil_knob_val *v);

/* ---- the port base ------------------------------------------------------------------- */

/* container_of: the route object that embeds `member` at `ptr`. */
#define rutil_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* A peer given up, to report with peer_failed. */
struct rutil_fail {
    cor_peer_t peer;
    int err;
};

/* Peers given up, to report from progress() where no route lock is held. A peer fails at
 * most once, so [npeers] entries always suffice; `out` is the copy being reported (only the
 * thread in progress()). */
struct rutil_fails {
    struct rutil_fail *v, *out;
    uint32_t n;
};

/* A send that finished, waiting for its send_done upcall: embedded in the route's own record
 * of the send (udp: its frame; gm: its descriptor), which it finds again with
 * rutil_container_of. The record must stay valid until it has been reported. */
struct rutil_done {
    struct rutil_done *next;
    void *cookie;
    int status;
};

/* The fields every route port has, embedded FIRST in the route's struct cor_rport (libfabric's
 * util_ep in a provider's endpoint): the route reaches them as p->base.x at a fixed offset, no
 * pointer to follow. Set by rutil_port_init at open and constant afterwards, except:
 * - closing, fails, the done list: guarded as the route's header says (udp: its port lock; gm:
 *   the port's one owner, and `closing` is set under its mem_lock);
 * - dropped: atomic (counters() reads it from any thread). */
struct rutil_port {
    struct cor_route_upcalls up;              /* the core's callbacks */
    uint64_t cookie;                          /* the session cookie, carried by every frame */
    uint32_t self, npeers;                    /* our rank; domains in the session */
    int port_index;                           /* which hard port of this route in the domain */
    int closing;                              /* close() began: sends are refused */
    struct rutil_fails fails;                 /* peers given up, not yet reported */
    struct rutil_done *done_head, *done_tail; /* finished sends, oldest first */
    _Atomic uint64_t dropped;                 /* foreign or malformed frames, dropped and counted */
};

/* open(): checks the configuration (every upcall set, 1 <= npeers <= max_peers, self a
 * peer: else logs "<who>: open: invalid configuration or upcalls" and returns COR_EINVAL),
 * then fills b and allocates its failure list (COR_ENOMEM). b must be zeroed before. */
int rutil_port_init(struct rutil_port *b, const char *who, const struct cor_route_config *cfg,
                    const struct cor_route_upcalls *up, uint32_t max_peers);
/* Frees what rutil_port_init allocated; safe on a zeroed or half-initialised base. */
void rutil_port_fini(struct rutil_port *b);

/* A foreign or malformed frame was dropped. */
static inline void rutil_port_drop(struct rutil_port *b)
{
    atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
}

static inline uint64_t rutil_port_dropped(const struct rutil_port *b)
{
    return atomic_load_explicit(&b->dropped, memory_order_relaxed);
}

/* The caller makes sure each peer is pushed once (guarded as the route says). */
static inline void rutil_fails_push(struct rutil_fails *f, cor_peer_t peer, int err)
{
    f->v[f->n++] = (struct rutil_fail){peer, err};
}

/* Moves the pending failures to f->out; returns how many (guarded as the route says). */
static inline uint32_t rutil_fails_take(struct rutil_fails *f)
{
    uint32_t n = f->n;
    for (uint32_t i = 0; i < n; i++)
        f->out[i] = f->v[i];
    f->n = 0;
    return n;
}

/* Drops the pending failure of `peer`, if any: a rank re-admitted for a new occupant must not
 * get its earlier occupant's failure reported (guarded as the route says). */
static inline void rutil_fails_forget(struct rutil_fails *f, cor_peer_t peer)
{
    for (uint32_t i = 0; i < f->n;)
        if (f->v[i].peer == peer)
            f->v[i] = f->v[--f->n];
        else
            i++;
}

/* A send finished with `status`: appended to the done list (guarded as the route says). */
static inline void rutil_done_push(struct rutil_port *b, struct rutil_done *d, int status)
{
    d->status = status;
    d->next = NULL;
    if (b->done_tail)
        b->done_tail->next = d;
    else
        b->done_head = d;
    b->done_tail = d;
}

/* Detaches the whole done list, oldest first (NULL: none). */
static inline struct rutil_done *rutil_done_take(struct rutil_port *b)
{
    struct rutil_done *d = b->done_head;
    b->done_head = b->done_tail = NULL;
    return d;
}

/* Removes the oldest finished send (NULL: none). */
static inline struct rutil_done *rutil_done_pop(struct rutil_port *b)
{
    struct rutil_done *d = b->done_head;
    if (d && !(b->done_head = d->next)) b->done_tail = NULL;
    return d;
}

/* ---- end-of-poll reporting ------------------------------------------------------------
 * The contract's order (route.h): deaths first, then the deliveries and send completions
 * collected with them, so the core knows why the sends that follow failed. The route takes
 * what is pending under its guard (rutil_fails_take, rutil_done_take), releases every lock,
 * and then reports: no route lock is held during these calls, as a callback may send(). */

/* peer_failed for the n failures rutil_fails_take moved to b->fails.out, in order. */
static inline void rutil_port_report_failed(struct rutil_port *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        b->up.peer_failed(b->up.core, b->fails.out[i].peer, b->fails.out[i].err);
}

/* send_done for each finished send of a detached list, oldest first. The records are not
 * touched after their upcall; the caller recycles them afterwards. Returns how many. */
static inline int rutil_port_report_list(struct rutil_port *b, const struct rutil_done *d)
{
    int n = 0;
    for (; d; d = d->next, n++)
        b->up.send_done(b->up.core, d->cookie, d->status);
    return n;
}

/* A send's completion copied out of its record, for a route that recycles the record before
 * the upcall (gm: a callback's send() may reuse the descriptor at once). */
struct rutil_done_copy {
    void *cookie;
    int status;
};

/* send_done for each of d[0..n), oldest first. Returns n. */
static inline int rutil_port_report_copies(struct rutil_port *b, const struct rutil_done_copy *d,
                                           size_t n)
{
    for (size_t i = 0; i < n; i++)
        b->up.send_done(b->up.core, d[i].cookie, d[i].status);
    return (int)n;
}

/* The counters() op's answer; either pointer may be NULL. */
static inline void rutil_counters_put(uint64_t *dropped, uint64_t *retransmits, uint64_t d,
                                      uint64_t r)
{
    if (dropped) *dropped = d;
    if (retransmits) *retransmits = r;
}

#endif /* COR_ROUTES_RUTIL_H */
