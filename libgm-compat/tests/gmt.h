/* gmt: helpers shared by the libgm-compat CUnit suites.
 *
 * Every suite opens ports in one process and lets them talk over the
 * library's default provider (shm unless GM_TEST_PROVIDER / the library's
 * own environment says otherwise).  Every wait here is bounded by a
 * deadline so that a broken library fails a test instead of hanging it;
 * the watchdog of gmt_run_suite() is the last resort for a call that never returns. */
#ifndef GMT_H
#define GMT_H

#include <gm.h>
#include <stdint.h>
#include <stddef.h>
#include <CUnit/CUnit.h>

#include "../../tests/ctest.h" /* the CUnit helpers of every suite */

/* Default bound for a single wait (microseconds); sanitizer builds are slow. */
#define GMT_WAIT_US (20u * 1000u * 1000u)

uint64_t gmt_now_us(void);

/* Environment defaults for in-process suites; call before gm_init(). */
void gmt_setup_env(void);

/* Open the first free port among the ids GM clients probe (2, 4, 5, ...). */
gm_status_t gmt_open_port(struct gm_port **p, unsigned *port_id, const char *name);

/* Two ports of this process, a and b, that can reach each other. */
struct gmt_pair {
    struct gm_port *a, *b;
    unsigned node_a, node_b; /* local node ids (equal: same process) */
    unsigned port_a, port_b;
};
int gmt_pair_open(struct gmt_pair *pr);
/* gmt_pair_open as a test's first step: a fatal assertion (the test ends) if it fails. */
int gmt_pair_open_or_stop(struct gmt_pair *pr);
void gmt_pair_close(struct gmt_pair *pr);

/* One received message, copied out of the event (valid after the next poll). */
struct gmt_msg {
    unsigned type; /* GM_*RECV_EVENT as delivered */
    unsigned length, size, prio, tag;
    unsigned sender_node, sender_port;
    void *buffer; /* the client buffer the event consumed */
    void *data;   /* where the bytes are (message pointer) */
};

int gmt_is_recv_type(unsigned type);
int gmt_is_fast_type(unsigned type);
unsigned gmt_prio_of_type(unsigned type);

/* Non-zero while the calling thread is inside gmt_unknown(); callbacks
 * use it to check that GM ran them from gm_unknown only. */
extern _Thread_local int gmt_in_unknown;
void gmt_unknown(struct gm_port *p, gm_recv_event_t *e);

/* One gm_receive on p: a receive event fills *m (if m) and returns 1;
 * anything else goes to gm_unknown and returns 0. */
int gmt_poll_once(struct gm_port *p, struct gmt_msg *m);

/* Poll a and b (b may be NULL) until a message arrives on `on` (a or b) or
 * the deadline passes; returns 1 with *m filled, 0 on timeout.  Receive
 * events on the other port are counted in *stray (may be NULL). */
int gmt_wait_msg(struct gm_port *on, struct gm_port *other, struct gmt_msg *m, uint64_t timeout_us,
                 unsigned *stray);

/* Poll both ports for a fixed time; returns the receive events seen. */
unsigned gmt_drain(struct gm_port *a, struct gm_port *b, uint64_t us);

/* A send completion record for gmt_send_cb. */
struct gmt_send {
    int calls; /* how many times the callback ran (must be 1) */
    gm_status_t status;
    int outside_unknown; /* callbacks that ran outside gm_unknown */
    struct gm_port *port;
};
void gmt_send_cb(struct gm_port *p, void *ctx, gm_status_t status);

/* Poll until s->calls reaches n (or timeout); returns 1 when reached. */
int gmt_wait_sent(struct gm_port *a, struct gm_port *b, const int *calls, int n,
                  uint64_t timeout_us);

/* Deterministic byte pattern: fill / check (returns index of first bad
 * byte, or -1). */
void gmt_fill(void *buf, size_t len, uint32_t seed);
long gmt_check(const void *buf, size_t len, uint32_t seed);

/* Runs a CUnit suite built from a NULL-terminated table with ct_main()
 * (tests/ctest.h) between gm_init and gm_finalize, after gmt_setup_env(),
 * under a watchdog of GMT_WATCHDOG_S seconds (default 600): a call that
 * never returns (a hung gm_blocking_receive) fails the run.  Returns the
 * exit status for automake (0 = all passed). */
int gmt_run_suite(const char *suite, const struct ct_test *tests);

/* Assertions that print what they expected and what they got (through
 * ct_report(), tests/ctest.h); `what` names the check. */
void gmt_assert(int ok, int fatal, int line, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define GMT_EQ(what, got, want)                                                                    \
    do {                                                                                           \
        long long g_ = (long long)(got), w_ = (long long)(want);                                   \
        gmt_assert(g_ == w_, 0, __LINE__, __FILE__, "%s: expected %lld, got %lld", (what), w_,     \
                   g_);                                                                            \
    } while (0)
#define GMT_TRUE(what, cond)                                                                       \
    gmt_assert(!!(cond), 0, __LINE__, __FILE__, "%s: expected %s", (what), #cond)
#define GMT_TRUE_FATAL(what, cond)                                                                 \
    gmt_assert(!!(cond), 1, __LINE__, __FILE__, "%s: expected %s", (what), #cond)

#endif
