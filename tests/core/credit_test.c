/*
 * The message protocols of cor/core/proto.c over a fake route, with the test playing the
 * peer domain: eager sends while credit units last (the last one reserved), rendezvous when they
 * run out or the message is above the eager limit, credits coming back piggy-backed or in
 * credit-only frames, unexpected-memory accounting, rendezvous receives, order of frames
 * that overtook each other, malformed frames dropped and counted, and the read rendezvous
 * (F_RTS_GET / F_GOT) on a port whose route reads remote memory.
 *
 * Also the wake-ups of sleeping tasks that a polling loop defers (req.c).
 *
 * The core's sources are compiled in; the domain is set up by hand as rank 0 of 2 with one
 * hard port on the fake route and no core threads: the test pumps progress itself.
 */
#include <sched.h>

#include "internal.h"
#include "proto.h"
#include "../ctest.h"

#define CREDITS 4
#define THRESHOLD 2
#define EAGER_LIMIT 1024
#define FRAME_MAX (2048 + FRAME_HDR_SIZE)
#define PEER 1
/* Credits are units (proto.h): the budget per peer, what an int message costs, how many int
 * messages go eager from a full budget (the last unit is kept), the units owed that trigger a
 * credit-only frame and the int messages that owe them. */
#define UNITS (CREDITS * cor__credit_cost(EAGER_LIMIT, EAGER_LIMIT))
#define IC cor__credit_cost(sizeof(int), EAGER_LIMIT)
#define EAGER_INTS ((UNITS - 1) / IC)
#define TU (UNITS * THRESHOLD / CREDITS)
#define TI ((TU + IC - 1) / IC)

/* ---- the fake route: frames sent are captured, frames injected are delivered ---- */

struct frame {
    uint32_t peer;
    size_t len;
    unsigned char *data;
};

struct cor_rport {
    struct cor_route_upcalls up;
};

#define FK_MAX 4096
static struct {
    pthread_mutex_t lock;
    struct frame out[FK_MAX]; /* sent by the core, in order */
    int nout, seen;           /* seen: consumed by the test */
    void *cookies[FK_MAX];    /* send_done still due */
    int ncookies;
    int status[FK_MAX];      /* their send_done status */
    struct frame in[FK_MAX]; /* to deliver at the next progress */
    int nin;
    int refuse;       /* send() says COR_EAGAIN */
    int done_in_send; /* sends after which another thread's progress runs first */
} fk = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* route.h's one owner per port: send() and progress() of two threads must never overlap (a
 * thread's own nesting, a send from a callback inside its progress, is allowed). */
static _Atomic int fk_inside, fk_overlaps;
static _Thread_local int fk_depth;
static void fk_enter(void)
{
    if (fk_depth++ == 0 && atomic_fetch_add(&fk_inside, 1) != 0) atomic_fetch_add(&fk_overlaps, 1);
}
static void fk_leave(void)
{
    if (--fk_depth == 0) atomic_fetch_sub(&fk_inside, 1);
}

static int fk_open(const struct cor_route_config *cfg, const struct cor_route_upcalls *up,
                   struct cor_rport **port)
{
    (void)cfg;
    struct cor_rport *p = calloc(1, sizeof *p);
    if (!p) return COR_ENOMEM;
    p->up = *up;
    *port = p;
    return COR_OK;
}
static void fk_close(struct cor_rport *p)
{
    free(p);
}
static int fk_address(struct cor_rport *p, char *buf, size_t len)
{
    (void)p;
    snprintf(buf, len, "fake");
    return COR_OK;
}
static int fk_add_peer(struct cor_rport *p, cor_peer_t peer, const char *addr)
{
    (void)p, (void)peer, (void)addr;
    return COR_OK;
}
static int fk_progress(struct cor_rport *p);
static void *fk_progress_thread(void *p)
{
    fk_progress(p);
    return NULL;
}
static int fk_send(struct cor_rport *p, cor_peer_t peer, const struct iovec *iov, int iovcnt,
                   void *cookie)
{
    (void)p;
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > FRAME_MAX) return COR_EINVAL;
    fk_enter();
    COR_LOCK(&fk.lock);
    if (fk.refuse || fk.nout == FK_MAX || fk.ncookies == FK_MAX) {
        COR_UNLOCK(&fk.lock);
        fk_leave();
        return COR_EAGAIN;
    }
    unsigned char *d = malloc(len ? len : 1);
    size_t off = 0;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(d + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    fk.out[fk.nout++] = (struct frame){peer, len, d};
    fk.status[fk.ncookies] = COR_OK;
    fk.cookies[fk.ncookies++] = cookie;
    bool race = fk.done_in_send > 0;
    if (race) fk.done_in_send--;
    COR_UNLOCK(&fk.lock);
    fk_leave();
    if (race) {
        /* The listener completes the frame before this thread returns from send(), as
         * when the sender is preempted right after the route took the frame. */
        pthread_t th;
        if (pthread_create(&th, NULL, fk_progress_thread, p) == 0) pthread_join(th, NULL);
    }
    return COR_OK;
}
static int fk_progress(struct cor_rport *p)
{
    static void *cookies[FK_MAX];
    static int status[FK_MAX];
    static struct frame in[FK_MAX];
    fk_enter();
    COR_LOCK(&fk.lock);
    int nc = fk.ncookies, ni = fk.nin;
    memcpy(cookies, fk.cookies, (size_t)nc * sizeof *cookies);
    memcpy(status, fk.status, (size_t)nc * sizeof *status);
    memcpy(in, fk.in, (size_t)ni * sizeof *in);
    fk.ncookies = fk.nin = 0;
    COR_UNLOCK(&fk.lock);
    /* callbacks without our lock held, as route.h requires */
    for (int i = 0; i < nc; i++)
        p->up.send_done(p->up.core, cookies[i], status[i]);
    for (int i = 0; i < ni; i++) {
        p->up.deliver(p->up.core, in[i].peer, in[i].data, in[i].len);
        free(in[i].data);
    }
    fk_leave();
    return nc + ni;
}
static int fk_wait_fd(struct cor_rport *p)
{
    (void)p;
    return -1;
}
static int fk_timeout(struct cor_rport *p)
{
    (void)p;
    return -1;
}
static void fk_caps(struct cor_rport *p, struct cor_route_caps *c)
{
    (void)p;
    *c = (struct cor_route_caps){.frame_max = FRAME_MAX, .eager_limit = EAGER_LIMIT};
}

/* RMA, used only where a test turns the port's rma and get on (rma_on): registrations are
 * counted, every key is FK_KEY, and a get copies from our own memory (the test plays the
 * peer in this process), or fails with COR_EINVAL for another key (a stale one). */
#define FK_KEY 0x5eed5eedull
struct cor_route_mr {
    void *addr;
    size_t len;
};
static _Atomic int fk_regs, fk_gets;
static int fk_mem_register(struct cor_rport *p, void *addr, size_t len, struct cor_route_mr **mr,
                           uint64_t *key)
{
    (void)p;
    struct cor_route_mr *m = malloc(sizeof *m);
    if (!m) return COR_ENOMEM;
    *m = (struct cor_route_mr){addr, len};
    *mr = m;
    *key = FK_KEY;
    atomic_fetch_add(&fk_regs, 1);
    return COR_OK;
}
static void fk_mem_deregister(struct cor_rport *p, struct cor_route_mr *mr)
{
    (void)p;
    free(mr);
    atomic_fetch_sub(&fk_regs, 1);
}
static int fk_put(struct cor_rport *p, cor_peer_t peer, const void *local, size_t len,
                  struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie)
{
    (void)p, (void)peer, (void)local, (void)len, (void)mr, (void)raddr, (void)rkey, (void)cookie;
    return COR_EINVAL; /* the tests never ask for a remote write */
}
static int fk_get(struct cor_rport *p, cor_peer_t peer, void *local, size_t len,
                  struct cor_route_mr *mr, uint64_t raddr, uint64_t rkey, void *cookie)
{
    (void)p, (void)peer;
    if (!mr || (char *)local < (char *)mr->addr || len > mr->len) return COR_EINVAL;
    fk_enter();
    COR_LOCK(&fk.lock);
    if (rkey == FK_KEY) memcpy(local, (const void *)(uintptr_t)raddr, len);
    fk.status[fk.ncookies] = rkey == FK_KEY ? COR_OK : COR_EINVAL;
    fk.cookies[fk.ncookies++] = cookie;
    COR_UNLOCK(&fk.lock);
    fk_leave();
    atomic_fetch_add(&fk_gets, 1);
    return COR_OK;
}

static const struct cor_route_ops fake_ops = {
    .size = sizeof(struct cor_route_ops),
    .abi = COR_ROUTE_ABI,
    .name = "fake",
    .open = fk_open,
    .close = fk_close,
    .address = fk_address,
    .add_peer = fk_add_peer,
    .send = fk_send,
    .progress = fk_progress,
    .wait_fd = fk_wait_fd,
    .timeout_ms = fk_timeout,
    .caps = fk_caps,
    .mem_register = fk_mem_register,
    .mem_deregister = fk_mem_deregister,
    .put = fk_put,
    .get = fk_get,
};

/* ---- the domain, set up by hand ---- */

static struct cor_route route = {.ops = &fake_ops, .name = "fake"};
static struct cor_hport *hp;
static cor_idp_t peer_task, me;
static uint32_t peer_seq[COR_MAX_INDEX + 1]; /* next message number per peer sender task */

static int setup(void)
{
    g.rank = 0;
    g.size = 2;
    g.cookie = 0x1122334455667788ull;
    g.macro = 0x55667788;
    g.max_tasks = 64;
    g.spin_ns = 0;
    g.credits = CREDITS;
    g.credit_threshold = THRESHOLD;
    g.eager_override = -1;
    g.tasks = calloc((size_t)g.max_tasks, sizeof *g.tasks);
    g.dead = calloc(2, sizeof *g.dead);
    g.peers = calloc(2, sizeof *g.peers);
    g.peer_epoch = calloc(2, sizeof *g.peer_epoch);
    if (!g.tasks || !g.dead || !g.peers || !g.peer_epoch) return 1;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_init(&g.peers[i].lock, NULL);
        g.peers[i].recv_seq = calloc((size_t)g.max_tasks, sizeof(uint32_t));
        if (!g.peers[i].recv_seq) return 1;
    }
    cor__task_adopt_main();
    g.routes[0] = &route;
    g.nroutes = 1;
    if (cor__hport_open(&route, 0, &route.ports[0]) != COR_OK) return 1;
    route.nports = 1;
    hp = route.ports[0];
    atomic_store(&g.initialized, 1);
    peer_task = cor_idp_make(g.macro, COR_KIND_TASK, PEER, 0);
    me = cor_task_self();
    return cor_idp_index(me) == 0 && hp->eager_limit == EAGER_LIMIT ? 0 : 1;
}

/* Runs progress until nothing happens (bounded). */
static void pump(void)
{
    for (int i = 0; i < 1000 && cor__progress_all() > 0; i++)
        continue;
}

static void inject(const struct frame_hdr *h, const void *payload, size_t plen, uint32_t from)
{
    unsigned char *d = malloc(FRAME_HDR_SIZE + plen);
    memcpy(d, h, FRAME_HDR_SIZE);
    if (plen) memcpy(d + FRAME_HDR_SIZE, payload, plen);
    COR_LOCK(&fk.lock);
    fk.in[fk.nin++] = (struct frame){from, FRAME_HDR_SIZE + plen, d};
    COR_UNLOCK(&fk.lock);
}

static void inject_raw(const void *bytes, size_t len, uint32_t from)
{
    unsigned char *d = malloc(len ? len : 1);
    memcpy(d, bytes, len);
    COR_LOCK(&fk.lock);
    fk.in[fk.nin++] = (struct frame){from, len, d};
    COR_UNLOCK(&fk.lock);
}

/* An eager message from the peer's task `src` to our task `dst`. */
static void inject_eager_to(uint16_t dst, uint16_t src, int tag, const int *v, size_t n)
{
    struct frame_hdr h = {.type = F_EAGER,
                          .dtype = COR_INT,
                          .src_task = src,
                          .dst_task = dst,
                          .seq = peer_seq[src]++,
                          .tag = tag,
                          .ctx = COR_CTX_WORLD,
                          .count = n,
                          .len = n * sizeof(int),
                          .sreq = 0x1000 + tag,
                          .offset = (uint64_t)cor__credit_cost(n * sizeof(int), EAGER_LIMIT)};
    inject(&h, v, n * sizeof(int), PEER);
}

/* An eager message from the peer's task `src` to our main task. */
static void inject_eager(uint16_t src, int tag, const int *v, size_t n)
{
    inject_eager_to(0, src, tag, v, n);
}

/* The next frame the core sent (NULL if none); header copied out. */
static const struct frame *next_out(struct frame_hdr *h)
{
    COR_LOCK(&fk.lock);
    const struct frame *f = fk.seen < fk.nout ? &fk.out[fk.seen++] : NULL;
    COR_UNLOCK(&fk.lock);
    if (f && h) memcpy(h, f->data, FRAME_HDR_SIZE);
    return f;
}

static int pending_out(void)
{
    COR_LOCK(&fk.lock);
    int n = fk.nout - fk.seen;
    COR_UNLOCK(&fk.lock);
    return n;
}

static void drain_out(void)
{
    while (next_out(NULL))
        continue;
}

static cor_stats_t stats(void)
{
    cor_stats_t s;
    memset(&s, 0, sizeof s);
    cor_stats_get(&s);
    return s;
}

static int link_credits(void)
{
    return atomic_load(&hp->links[PEER].credits);
}

static int link_owed(void)
{
    return atomic_load(&hp->links[PEER].owed) + atomic_load(&hp->links[PEER].owed_own);
}

/* Takes the port's ownership as the dispatcher does (a listener may hold it a moment). */
static void own_port(void)
{
    for (int i = 0; i < 100000 && !cor__port_own(hp); i++)
        sched_yield();
    REQUIRE(cor__port_mine(hp));
}

/* Gives the core `n` credits back in a credit-only frame. */
static void give_credits(int n)
{
    struct frame_hdr h = {.type = F_CREDIT, .credits = (uint16_t)n};
    inject(&h, NULL, 0, PEER);
    pump();
}

/* Tests until done (bounded); returns the request's result, or 999 if it never completed. */
static int finish(cor_req_t *r, cor_status_t *st)
{
    for (int i = 0; i < 1000; i++) {
        int done = 0;
        int err = cor_test(r, &done, st);
        if (done || err == COR_EINVAL) return err;
        pump();
    }
    return 999;
}

/* Plays the receiver of a rendezvous send: CTS for `take` bytes, then checks the DATA. */
static void answer_rts(const struct frame_hdr *rts, size_t take, const void *expect)
{
    struct frame_hdr cts = {.type = F_CTS,
                            .src_task = rts->dst_task,
                            .dst_task = rts->src_task,
                            .len = take,
                            .sreq = rts->sreq,
                            .rreq = 0x77770000 + rts->seq};
    inject(&cts, NULL, 0, PEER);
    pump();
    size_t got = 0;
    int frames = 0, bad = 0;
    struct frame_hdr d;
    const struct frame *f;
    while (got < take && (f = next_out(&d)) && frames < 100) {
        frames++;
        if (d.type != F_DATA || d.rreq != cts.rreq || d.offset != got ||
            f->len != FRAME_HDR_SIZE + d.len || d.len > FRAME_MAX - FRAME_HDR_SIZE ||
            memcmp(f->data + FRAME_HDR_SIZE, (const char *)expect + got, d.len)) {
            bad++;
            break;
        }
        got += d.len;
        pump();
    }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(got, take);
    if (take)
        EXPECT_EQ(frames, (take + (FRAME_MAX - FRAME_HDR_SIZE) - 1) / (FRAME_MAX - FRAME_HDR_SIZE));
}

/* ---- sending ---- */

static void test_eager_until_reserved_credit(void)
{
    drain_out();
    EXPECT_EQ(link_credits(), UNITS);
    cor_stats_t s0 = stats();
    const int NS = EAGER_INTS + 2;
    int v[NS];
    cor_req_t r[NS];
    for (int i = 0; i < NS; i++)
        v[i] = 10 + i;
    for (int i = 0; i < NS; i++)
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, i, COR_INT, &v[i], 1, &r[i]), COR_OK);
    cor_stats_t s1 = stats();
    EXPECT_EQ(s1.eager_sent - s0.eager_sent, EAGER_INTS);
    EXPECT_EQ(s1.rndv_sent - s0.rndv_sent, NS - EAGER_INTS);
    EXPECT_EQ(s1.credit_stalls - s0.credit_stalls, NS - EAGER_INTS);
    EXPECT_EQ(link_credits(), UNITS - EAGER_INTS * IC); /* the last unit is reserved */
    struct frame_hdr h[NS];
    for (int i = 0; i < NS; i++) {
        const struct frame *f = next_out(&h[i]);
        REQUIRE(f != NULL);
        EXPECT_EQ(f->peer, PEER);
        EXPECT_EQ(h[i].seq, i);
        EXPECT_EQ(h[i].tag, i);
        EXPECT_EQ(h[i].ctx, COR_CTX_WORLD);
        EXPECT_EQ(h[i].src_task, 0);
        EXPECT_EQ(h[i].dst_task, 0);
        EXPECT_EQ(h[i].count, 1);
        EXPECT_EQ(h[i].len, sizeof(int));
        if (i < EAGER_INTS) {
            EXPECT_EQ(h[i].type, F_EAGER);
            EXPECT_EQ(f->len, FRAME_HDR_SIZE + sizeof(int));
            EXPECT_EQ(memcmp(f->data + FRAME_HDR_SIZE, &v[i], sizeof(int)), 0);
        } else {
            EXPECT_EQ(h[i].type, F_RTS);
            EXPECT_EQ(f->len, FRAME_HDR_SIZE);
        }
    }
    /* eager sends are done (the route copied); rendezvous ones wait for CTS */
    for (int i = 0; i < EAGER_INTS; i++)
        EXPECT_ERR(finish(&r[i], NULL), COR_OK);
    int done = 1;
    EXPECT_ERR(cor_test(&r[EAGER_INTS], &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    /* CTS for all its bytes: one DATA frame, then the send completes */
    answer_rts(&h[EAGER_INTS], sizeof(int), &v[EAGER_INTS]);
    EXPECT_ERR(finish(&r[EAGER_INTS], NULL), COR_OK);
    /* CTS for 0 bytes (the receiver truncated to nothing): completes without data */
    answer_rts(&h[NS - 1], 0, NULL);
    EXPECT_ERR(finish(&r[NS - 1], NULL), COR_OK);
    EXPECT_EQ(pending_out(), 0);
    give_credits(UNITS);
    EXPECT_EQ(link_credits(), UNITS); /* capped at the configured number */
}

static void test_credits_come_back(void)
{
    drain_out();
    REQUIRE(link_credits() == UNITS);
    int v = 1;
    cor_req_t r;
    for (int i = 0; i < EAGER_INTS; i++) {
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 1, COR_INT, &v, 1, &r), COR_OK);
        EXPECT_ERR(finish(&r, NULL), COR_OK);
    }
    EXPECT_EQ(link_credits(), UNITS - EAGER_INTS * IC);
    drain_out();
    /* two messages' worth back, piggy-backed on an ordinary frame (a credit-only one here) */
    give_credits(2 * IC);
    EXPECT_EQ(link_credits(), UNITS - EAGER_INTS * IC + 2 * IC);
    cor_stats_t s0 = stats();
    for (int i = 0; i < 3; i++) {
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 2, COR_INT, &v, 1, &r), COR_OK);
        if (i < 2) EXPECT_ERR(finish(&r, NULL), COR_OK);
    }
    cor_stats_t s1 = stats();
    EXPECT_EQ(s1.eager_sent - s0.eager_sent, 2);
    EXPECT_EQ(s1.credit_stalls - s0.credit_stalls, 1);
    struct frame_hdr h;
    next_out(&h);
    next_out(&h);
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_RTS);
    answer_rts(&h, sizeof v, &v);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    /* credits piggy-backed on a data-carrying frame count too */
    int w = 5;
    struct frame_hdr e = {.type = F_EAGER,
                          .dtype = COR_INT,
                          .credits = 100,
                          .src_task = 3,
                          .seq = peer_seq[3]++,
                          .tag = 9,
                          .ctx = COR_CTX_WORLD,
                          .count = 1,
                          .len = sizeof w};
    inject(&e, &w, sizeof w, PEER);
    pump();
    EXPECT_EQ(link_credits(), UNITS); /* never above the configured number */
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 9, COR_INT, &w, 1, NULL), COR_OK);
    EXPECT_EQ(w, 5);
    pump();
    drain_out();
}

/* A burst far above the credits: memory at the receiver stays bounded. */
static void test_burst(void)
{
    enum { N = 100 };
    drain_out();
    give_credits(UNITS);
    REQUIRE(link_credits() == UNITS);
    int v[N];
    cor_req_t r[N];
    cor_stats_t s0 = stats();
    for (int i = 0; i < N; i++) {
        v[i] = i;
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 3, COR_INT, &v[i], 1, &r[i]), COR_OK);
    }
    cor_stats_t s1 = stats();
    EXPECT_EQ(s1.eager_sent - s0.eager_sent, EAGER_INTS);
    EXPECT_EQ(s1.rndv_sent - s0.rndv_sent, N - EAGER_INTS);
    EXPECT_EQ(s1.credit_stalls - s0.credit_stalls, N - EAGER_INTS);
    /* the peer would hold at most credits-1 eager payloads; answer the rest in order */
    int eager = 0, bad_seq = 0;
    static struct frame_hdr h[N];
    for (int i = 0; i < N; i++) {
        REQUIRE(next_out(&h[i]) != NULL);
        if (h[i].seq != h[0].seq + (uint32_t)i) bad_seq++;
    }
    EXPECT_EQ(pending_out(), 0); /* nothing else went out */
    for (int i = 0; i < N; i++) {
        if (h[i].type == F_EAGER) {
            eager++;
            EXPECT_ERR(finish(&r[i], NULL), COR_OK);
        } else {
            answer_rts(&h[i], sizeof(int), &v[i]);
            EXPECT_ERR(finish(&r[i], NULL), COR_OK);
        }
    }
    EXPECT_EQ(eager, EAGER_INTS);
    EXPECT_EQ(bad_seq, 0);
    give_credits(UNITS);
}

static void test_above_eager_limit(void)
{
    drain_out();
    give_credits(UNITS);
    size_t n = 5000;
    unsigned char *big = malloc(n);
    REQUIRE(big != NULL);
    for (size_t i = 0; i < n; i++)
        big[i] = (unsigned char)(i * 13);
    cor_stats_t s0 = stats();
    cor_req_t r;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 4, COR_BYTE, big, n, &r), COR_OK);
    cor_stats_t s1 = stats();
    EXPECT_EQ(s1.rndv_sent - s0.rndv_sent, 1);
    EXPECT_EQ(s1.credit_stalls - s0.credit_stalls, 0); /* not a stall: just large */
    EXPECT_EQ(link_credits(), UNITS);
    struct frame_hdr h;
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_RTS);
    EXPECT_EQ(h.len, n);
    /* the receiver takes only 3000 bytes: exactly those are streamed in chunks */
    answer_rts(&h, 3000, big);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    /* exactly the limit still goes eager */
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 4, COR_BYTE, big, EAGER_LIMIT, &r),
               COR_OK);
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_EAGER);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    free(big);
    give_credits(UNITS);
}

/* A full window queues frames; they leave in order when it opens. */
static void test_window_full(void)
{
    drain_out();
    give_credits(UNITS);
    COR_LOCK(&fk.lock);
    fk.refuse = 1;
    COR_UNLOCK(&fk.lock);
    int v[2] = {21, 22};
    cor_req_t r[2];
    for (int i = 0; i < 2; i++)
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 5, COR_INT, &v[i], 1, &r[i]), COR_OK);
    EXPECT_EQ(pending_out(), 0);
    int done = 1;
    EXPECT_ERR(cor_test(&r[0], &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    COR_LOCK(&fk.lock);
    fk.refuse = 0;
    COR_UNLOCK(&fk.lock);
    own_port();
    cor__dispatch_queue(hp); /* what the dispatcher thread does */
    cor__port_release(hp);
    struct frame_hdr h;
    for (int i = 0; i < 2; i++) {
        const struct frame *f = next_out(&h);
        REQUIRE(f != NULL);
        EXPECT_EQ(h.type, F_EAGER);
        EXPECT_EQ(memcmp(f->data + FRAME_HDR_SIZE, &v[i], sizeof(int)), 0);
        EXPECT_ERR(finish(&r[i], NULL), COR_OK);
    }
    give_credits(UNITS);
}

/* A frame taken from the queue may be completed and freed as soon as the route took it (here
 * the fake route completes it inside send, which a route may not do; a route did inside
 * another thread's progress before the port had one owner): the drain must not look at it
 * again. It read op->next after send() and went on with a freed op (SIGSEGV in route_send
 * under cor-bench multitask); the frames queued behind it were lost or sent from garbage. */
static void test_done_during_drain(void)
{
    drain_out();
    give_credits(UNITS);
    COR_LOCK(&fk.lock);
    fk.refuse = 1;
    COR_UNLOCK(&fk.lock);
    int v[3] = {31, 32, 33};
    cor_req_t r[3];
    for (int i = 0; i < 3; i++)
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 6, COR_INT, &v[i], 1, &r[i]), COR_OK);
    EXPECT_EQ(pending_out(), 0);
    COR_LOCK(&fk.lock);
    fk.refuse = 0;
    fk.done_in_send = 3;
    COR_UNLOCK(&fk.lock);
    own_port();
    cor__dispatch_queue(hp); /* what the dispatcher thread does */
    bool drained = !hp->q_head && !hp->q_tail;
    cor__port_release(hp);
    EXPECT_EQ(drained, true);
    COR_LOCK(&fk.lock);
    fk.done_in_send = 0;
    COR_UNLOCK(&fk.lock);
    struct frame_hdr h;
    for (int i = 0; i < 3; i++) {
        const struct frame *f = next_out(&h);
        REQUIRE(f != NULL);
        EXPECT_EQ(h.type, F_EAGER);
        EXPECT_EQ(memcmp(f->data + FRAME_HDR_SIZE, &v[i], sizeof(int)), 0);
        EXPECT_ERR(finish(&r[i], NULL), COR_OK);
    }
    EXPECT_EQ(atomic_load(&hp->inflight), 0);
    give_credits(UNITS);
}

/* ---- receiving ---- */

/* Sends what the core owes the peer (piggy-backed on a message), so counts start at 0. */
static void flush_owed(void)
{
    give_credits(UNITS);
    if (link_owed() == 0) return;
    int v = 0;
    cor_req_t r;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 99, COR_INT, &v, 1, &r), COR_OK);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    EXPECT_EQ(link_owed(), 0);
    give_credits(UNITS);
}

static void test_receiver_returns_credits(void)
{
    flush_owed();
    drain_out();
    cor_stats_t s0 = stats();
    int v[TI + 1];
    for (int i = 0; i <= TI; i++)
        v[i] = 31 + i;
    for (int i = 0; i <= TI; i++)
        inject_eager(1, 40, &v[i], 1);
    pump();
    cor_stats_t s1 = stats();
    EXPECT_EQ(s1.unexpected_now - s0.unexpected_now, TI + 1);
    EXPECT_EQ(s1.unexpected_bytes_now - s0.unexpected_bytes_now, (TI + 1) * sizeof(int));
    EXPECT_EQ(pending_out(), 0);
    int w = 0;
    cor_status_t st;
    /* one consumed: its units owed, below the threshold: no frame yet */
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 40, COR_INT, &w, 1, &st), COR_OK);
    EXPECT_EQ(w, 31);
    EXPECT_EQ(st.source, cor_idp_make(g.macro, COR_KIND_TASK, PEER, 1));
    EXPECT_EQ(link_owed(), IC);
    EXPECT_EQ(pending_out(), 0);
    /* up to the threshold: a credit-only frame goes out */
    for (int i = 1; i < TI; i++) {
        EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 40, COR_INT, &w, 1, NULL), COR_OK);
        EXPECT_EQ(w, 31 + i);
    }
    struct frame_hdr h;
    const struct frame *f = next_out(&h);
    REQUIRE(f != NULL);
    EXPECT_EQ(h.type, F_CREDIT);
    EXPECT_EQ(h.credits, TI * IC);
    EXPECT_EQ(f->peer, PEER);
    EXPECT_EQ(link_owed(), 0);
    cor_stats_t s2 = stats();
    EXPECT_EQ(s2.credit_frames - s1.credit_frames, 1);
    /* one more: owed again, which rides on the next frame we send */
    EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, 40, COR_INT, &w, 1, NULL), COR_OK);
    EXPECT_EQ(w, 31 + TI);
    EXPECT_EQ(link_owed(), IC);
    cor_req_t r;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 41, COR_INT, &w, 1, &r), COR_OK);
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_EAGER);
    EXPECT_EQ(h.credits, IC);
    EXPECT_EQ(link_owed(), 0);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    cor_stats_t s3 = stats();
    EXPECT_EQ(s3.unexpected_now, s0.unexpected_now);
    EXPECT_EQ(s3.unexpected_bytes_now, s0.unexpected_bytes_now);
    EXPECT_EQ(s3.credit_frames - s2.credit_frames, 0);
    give_credits(UNITS);
    /* posted first: the credits come back as well */
    cor_req_t rr[TI];
    for (int i = 0; i < TI; i++)
        EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 42, COR_INT, &v[i], 1, &rr[i]),
                   COR_OK);
    for (int i = 0; i < TI; i++) {
        int x = 51 + i;
        inject_eager(1, 42, &x, 1);
    }
    pump();
    for (int i = 0; i < TI; i++) {
        EXPECT_ERR(finish(&rr[i], NULL), COR_OK);
        EXPECT_EQ(v[i], 51 + i);
    }
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_CREDIT);
    EXPECT_EQ(h.credits, TI * IC);
    drain_out();
}

static void test_rendezvous_receive(void)
{
    drain_out();
    enum { N = 3000 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    REQUIRE(src && dst);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 1);
    for (int round = 0; round < 2; round++) {
        size_t cap = round == 0 ? N : 1000;
        memset(dst, 0, N);
        cor_stats_t s0 = stats();
        struct frame_hdr rts = {.type = F_RTS,
                                .dtype = COR_BYTE,
                                .src_task = 2,
                                .dst_task = 0,
                                .seq = peer_seq[2]++,
                                .tag = 60,
                                .ctx = COR_CTX_WORLD,
                                .count = N,
                                .len = N,
                                .sreq = 0xabc0 + (uint64_t)round};
        inject(&rts, NULL, 0, PEER);
        pump();
        cor_stats_t s1 = stats();
        EXPECT_EQ(s1.unexpected_now - s0.unexpected_now, 1);
        EXPECT_EQ(s1.unexpected_bytes_now - s0.unexpected_bytes_now, 0); /* a header only */
        cor_req_t r;
        EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 60, COR_BYTE, dst, cap, &r),
                   COR_OK);
        struct frame_hdr cts;
        REQUIRE(next_out(&cts) != NULL);
        EXPECT_EQ(cts.type, F_CTS);
        EXPECT_EQ(cts.sreq, rts.sreq);
        EXPECT_EQ(cts.len, cap);
        EXPECT_EQ(cts.dst_task, 2);
        EXPECT_EQ(cts.rreq, r);
        /* a DATA frame for another request is dropped */
        struct frame_hdr bad = {.type = F_DATA, .rreq = cts.rreq + 1, .len = 10};
        inject(&bad, src, 10, PEER);
        /* DATA past the bytes allowed is dropped */
        struct frame_hdr over = {.type = F_DATA, .rreq = cts.rreq, .len = 10, .offset = cap - 5};
        inject(&over, src, 10, PEER);
        pump();
        cor_stats_t s2 = stats();
        EXPECT_EQ(s2.frames_dropped - s1.frames_dropped, 2);
        /* the data in two pieces, the second first */
        size_t half = cap / 2;
        struct frame_hdr d2 = {.type = F_DATA, .rreq = cts.rreq, .len = cap - half, .offset = half};
        struct frame_hdr d1 = {.type = F_DATA, .rreq = cts.rreq, .len = half, .offset = 0};
        inject(&d2, src + half, cap - half, PEER);
        pump();
        int done = 1;
        EXPECT_ERR(cor_test(&r, &done, NULL), COR_OK);
        EXPECT_EQ(done, 0);
        inject(&d1, src, half, PEER);
        pump();
        cor_status_t st;
        EXPECT_ERR(finish(&r, &st), round == 0 ? COR_OK : COR_ETRUNC);
        EXPECT_EQ(st.count, N);
        EXPECT_EQ(st.type, COR_BYTE);
        EXPECT_EQ(memcmp(dst, src, cap), 0);
        if (cap < N) EXPECT_EQ(dst[cap], 0);
        EXPECT_EQ(stats().unexpected_now, s0.unexpected_now);
    }
    free(src);
    free(dst);
    drain_out();
}

/* A rendezvous send whose last frame would be short carries those bytes in the RTS, and the
 * receiver asks only for the rest; a long tail travels as data. */
static void test_rts_tail_send(void)
{
    drain_out();
    enum { CHUNK = FRAME_MAX - FRAME_HDR_SIZE };
    size_t n = 2 * CHUNK + 904; /* tail 904 <= RTS_TAIL_MAX */
    unsigned char *big = malloc(n);
    REQUIRE(big != NULL);
    for (size_t i = 0; i < n; i++)
        big[i] = (unsigned char)(i * 11 + 3);
    cor_req_t r;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 4, COR_BYTE, big, n, &r), COR_OK);
    struct frame_hdr h;
    const struct frame *f = next_out(&h);
    REQUIRE(f != NULL);
    EXPECT_EQ(h.type, F_RTS);
    EXPECT_EQ(h.len, n);
    EXPECT_EQ(h.offset, 2 * CHUNK);
    EXPECT_EQ(f->len, FRAME_HDR_SIZE + 904);
    EXPECT_EQ(memcmp(f->data + FRAME_HDR_SIZE, big + 2 * CHUNK, 904), 0);
    answer_rts(&h, 2 * CHUNK, big);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    /* a tail above RTS_TAIL_MAX stays with the data */
    n = CHUNK + RTS_TAIL_MAX + 1;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 4, COR_BYTE, big, n, &r), COR_OK);
    f = next_out(&h);
    REQUIRE(f != NULL);
    EXPECT_EQ(h.type, F_RTS);
    EXPECT_EQ(f->len, FRAME_HDR_SIZE);
    answer_rts(&h, n, big);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    free(big);
    give_credits(UNITS);
}

/* The receiving side of a tail: unexpected or posted, whole, cut by a short receive, or not
 * needed at all. */
static void test_rts_tail_receive(void)
{
    drain_out();
    enum { N = 3000, TAIL = 200, AT = N - TAIL };
    unsigned char *src = malloc(N), *dst = malloc(N);
    REQUIRE(src && dst);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 5 + 2);
    const size_t caps[] = {N, AT + 50, 1000};
    for (int round = 0; round < 3; round++) {
        size_t cap = caps[round];
        memset(dst, 0, N);
        struct frame_hdr rts = {.type = F_RTS,
                                .dtype = COR_BYTE,
                                .src_task = 3,
                                .dst_task = 0,
                                .seq = peer_seq[3]++,
                                .tag = 61,
                                .ctx = COR_CTX_WORLD,
                                .count = N,
                                .len = N,
                                .offset = AT,
                                .sreq = 0xbc00 + (uint64_t)round};
        cor_req_t r;
        if (round == 1) /* posted first */
            EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 61, COR_BYTE, dst, cap, &r),
                       COR_OK);
        inject(&rts, src + AT, TAIL, PEER);
        pump();
        if (round != 1)
            EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 61, COR_BYTE, dst, cap, &r),
                       COR_OK);
        struct frame_hdr cts;
        REQUIRE(next_out(&cts) != NULL);
        EXPECT_EQ(cts.type, F_CTS);
        size_t ask = cap > AT ? AT : cap;
        EXPECT_EQ(cts.len, ask);
        struct frame_hdr d = {.type = F_DATA, .rreq = cts.rreq, .len = ask};
        inject(&d, src, ask, PEER);
        pump();
        cor_status_t st;
        EXPECT_ERR(finish(&r, &st), cap == N ? COR_OK : COR_ETRUNC);
        EXPECT_EQ(st.count, N);
        EXPECT_EQ(memcmp(dst, src, cap), 0);
        if (cap < N) EXPECT_EQ(dst[cap], 0);
    }
    /* tails that do not fit their header are dropped and counted */
    cor_stats_t s0 = stats();
    struct frame_hdr bad = {.type = F_RTS,
                            .dtype = COR_BYTE,
                            .src_task = 3,
                            .dst_task = 0,
                            .tag = 61,
                            .ctx = COR_CTX_WORLD,
                            .count = N,
                            .len = N};
    bad.seq = peer_seq[3]++;
    bad.offset = AT + 1; /* not where the tail starts */
    inject(&bad, src, TAIL, PEER);
    bad.seq = peer_seq[3]++;
    bad.offset = N - (RTS_TAIL_MAX + 1); /* too long */
    inject(&bad, src, RTS_TAIL_MAX + 1, PEER);
    bad.seq = peer_seq[3]++;
    bad.count = bad.len = 100, bad.offset = 0; /* the whole message */
    inject(&bad, src, 100, PEER);
    pump();
    EXPECT_EQ(stats().frames_dropped - s0.frames_dropped, 3);
    EXPECT_EQ(stats().unexpected_now, s0.unexpected_now);
    free(src);
    free(dst);
    drain_out();
}

/* Eager copies come from a per-port cache that keeps at most COPY_CACHE blocks and hands
 * the kept ones out again. */
static void test_copy_cache(void)
{
    enum { N = COPY_CACHE + 8 };
    void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = cor__copy_get(hp);
        REQUIRE(b[i] != NULL);
        memset(b[i], i, hp->eager_limit); /* the whole block is ours */
    }
    for (int i = 0; i < N; i++)
        cor__copy_put(hp, b[i]);
    EXPECT_EQ(hp->ncopies, COPY_CACHE);
    void *again = cor__copy_get(hp);
    int kept = 0;
    for (int i = 0; i < N; i++)
        kept += again == b[i];
    EXPECT_EQ(kept, 1);
    EXPECT_EQ(hp->ncopies, COPY_CACHE - 1);
    cor__copy_put(hp, again);
}

/* ---- credits under concurrency: spending and piggy-backing in the sending thread while
 * another thread delivers returned credits and messages whose consumption owes credits ---- */

static struct {
    atomic_bool stop;
    atomic_int eager_seen, rts_seen, carried; /* units the core returned to the peer */
    atomic_int bad_charge;                    /* EAGER frames whose cost is not the rule's */
    int injected;                             /* eager messages to our task */
} cc;

/* The peer: returns the units of every eager frame it sees (so the budget must end full),
 * answers every RTS with a 0-byte CTS, sums the credits our frames carry, and sends messages
 * for the main task's posted receives. */
static void *credit_peer(void *want_msgs)
{
    int want = *(int *)want_msgs;
    uint64_t end = cor__now_ns() + 20000000000u; /* bounded: the main thread stops us */
    for (long turn = 0; cor__now_ns() < end; turn++) {
        bool stopping = atomic_load(&cc.stop); /* before looking: then nothing is missed */
        struct frame_hdr h;
        const struct frame *f = next_out(&h);
        if (f) {
            atomic_fetch_add(&cc.carried, h.credits);
            if (h.type == F_EAGER) {
                atomic_fetch_add(&cc.eager_seen, 1);
                if (h.offset != (uint64_t)cor__credit_cost(h.len, EAGER_LIMIT))
                    atomic_fetch_add(&cc.bad_charge, 1);
                give_credits((int)h.offset); /* what the frame says it cost */
            } else if (h.type == F_RTS) {
                atomic_fetch_add(&cc.rts_seen, 1);
                struct frame_hdr cts = {.type = F_CTS,
                                        .src_task = h.dst_task,
                                        .dst_task = h.src_task,
                                        .sreq = h.sreq,
                                        .rreq = 1};
                inject(&cts, NULL, 0, PEER);
            }
        } else if (stopping) {
            break;
        }
        if (cc.injected < want && (turn & 1)) {
            int x = cc.injected++;
            inject_eager(1, 78, &x, 1);
        }
        pump();
    }
    return NULL;
}

/* finish() for a request another thread completes: tests (and pumps) for up to `secs`. */
static int finish_within(cor_req_t *r, int secs)
{
    uint64_t end = cor__now_ns() + (uint64_t)secs * 1000000000u;
    while (cor__now_ns() < end) {
        int done = 0;
        int err = cor_test(r, &done, NULL);
        if (done || err == COR_EINVAL) return err;
        sched_yield();
    }
    return 999;
}

static void test_credits_concurrent(void)
{
    enum { SENDS = 600, MSGS = 300 };
    flush_owed();
    drain_out();
    give_credits(UNITS);
    REQUIRE(link_credits() == UNITS);
    int owed0 = link_owed();
    static int got[MSGS];
    static cor_req_t rr[MSGS], sr[SENDS];
    for (int i = 0; i < MSGS; i++) {
        got[i] = -1;
        REQUIRE(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 78, COR_INT, &got[i], 1, &rr[i]) ==
                COR_OK);
    }
    memset(&cc, 0, sizeof cc);
    int want = MSGS;
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, credit_peer, &want) == 0);
    int v = 5, bad = 0;
    for (int i = 0; i < SENDS; i++) {
        /* mostly eager: wait a little for the peer's credits when they run low */
        for (int k = 0; k < 1000 && link_credits() <= IC; k++)
            sched_yield();
        if (cor_sendI_typed(peer_task, COR_CTX_WORLD, 79, COR_INT, &v, 1, &sr[i]) != COR_OK) bad++;
        pump();
    }
    for (int i = 0; i < SENDS; i++)
        if (finish_within(&sr[i], 10) != COR_OK) bad++;
    for (int i = 0; i < MSGS; i++)
        if (finish_within(&rr[i], 10) != COR_OK || got[i] != i) bad++;
    atomic_store(&cc.stop, true);
    pthread_join(th, NULL);
    pump();
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(atomic_load(&cc.eager_seen) + atomic_load(&cc.rts_seen), SENDS);
    EXPECT_EQ(link_credits(), UNITS); /* every unit spent came back, none twice */
    EXPECT_EQ(atomic_load(&cc.bad_charge), 0);
    /* what consuming the messages owed went out (piggy-backed or in credit frames) or is owed */
    EXPECT_EQ(atomic_load(&cc.carried) + link_owed(), owed0 + MSGS * IC);
    printf("(%d eager, %d rendezvous, %d units carried) ", atomic_load(&cc.eager_seen),
           atomic_load(&cc.rts_seen), atomic_load(&cc.carried));
    drain_out();
}

/* Frames of one sender that overtook each other are matched in the sender's order. */
static void test_order_held(void)
{
    drain_out();
    int a = 1, b = 2, c = 3;
    uint32_t s = peer_seq[4];
    struct frame_hdr h2 = {.type = F_EAGER,
                           .dtype = COR_INT,
                           .src_task = 4,
                           .seq = s + 1,
                           .tag = 70,
                           .ctx = COR_CTX_WORLD,
                           .count = 1,
                           .len = sizeof b};
    struct frame_hdr h3 = h2, h1 = h2;
    h3.seq = s + 2;
    h1.seq = s;
    inject(&h3, &c, sizeof c, PEER);
    inject(&h2, &b, sizeof b, PEER);
    pump();
    uint64_t u0 = stats().unexpected_now;
    EXPECT_EQ(u0, 0); /* held back: message s is missing */
    inject(&h1, &a, sizeof a, PEER);
    pump();
    peer_seq[4] = s + 3;
    EXPECT_EQ(stats().unexpected_now, u0 + 3);
    for (int want = 1; want <= 3; want++) {
        int v = 0;
        EXPECT_ERR(cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &v, 1, NULL),
                   COR_OK);
        EXPECT_EQ(v, want);
    }
    /* a repeated number is a duplicate: dropped */
    cor_stats_t s0 = stats();
    inject(&h2, &b, sizeof b, PEER);
    pump();
    EXPECT_EQ(stats().frames_dropped - s0.frames_dropped, 1);
    EXPECT_EQ(stats().unexpected_now, 0);
    pump();
    drain_out();
}

/* Frames that lie are dropped and counted; nothing reaches a task. */
static void test_malformed(void)
{
    drain_out();
    int v[4] = {0};
    cor_stats_t s0 = stats();
    int n = 0;
    uint16_t fresh = 20; /* a sender task of its own per frame: sequence numbers start at 0 */
#define BAD(set)                                                                                   \
    do {                                                                                           \
        struct frame_hdr h = {                                                                     \
            .dtype = COR_INT, .src_task = fresh++, .ctx = COR_CTX_WORLD, .count = 1, .len = 4};    \
        set;                                                                                       \
        inject(&h, v, h.type == F_EAGER ? sizeof(int) : 0, PEER);                                  \
        n++;                                                                                       \
    } while (0)
    BAD(h.type = 0);
    BAD(h.type = F_TYPE_END);
    BAD(h.type = 200);
    BAD(h.type = F_EAGER; h.len = 8; h.count = 2); /* payload shorter than len */
    BAD(h.type = F_EAGER; h.dtype = 77);           /* no such type */
    BAD(h.type = F_EAGER; h.count = 2);            /* count * size != len */
    BAD(h.type = F_EAGER; h.tag = -4);             /* negative tag */
    BAD(h.type = F_EAGER; h.dst_task = 64);        /* beyond max tasks */
    BAD(h.type = F_EAGER; h.src_task = 64);        /* beyond max tasks */
    BAD(h.type = F_RTS; h.len = 5; h.count = 5);   /* count * size != len */
    /* count * size wraps around 2^64 to exactly len: was taken as a message of len bytes */
    BAD(h.type = F_RTS; h.count = 6148914691236517206u; h.len = 6148914691236517208u);
    BAD(h.type = F_CTS; h.sreq = 0xdead);  /* no such send */
    BAD(h.type = F_DATA; h.rreq = 0xbeef); /* no such receive */
    BAD(h.type = F_SVC_REQ);               /* wrong size */
    BAD(h.type = F_SVC_REP; h.sreq = 5);   /* wrong size */
#undef BAD
    /* an eager message above the eager limit */
    static int big[EAGER_LIMIT / sizeof(int) + 1];
    struct frame_hdr e = {.type = F_EAGER,
                          .dtype = COR_INT,
                          .src_task = fresh++,
                          .ctx = COR_CTX_WORLD,
                          .count = sizeof big / sizeof(int),
                          .len = sizeof big};
    inject(&e, big, sizeof big, PEER);
    n++;
    /* a valid RTS announcing 1 GiB: kept as a header only */
    struct frame_hdr huge = {.type = F_RTS,
                             .dtype = COR_INT,
                             .src_task = fresh++,
                             .ctx = COR_CTX_WORLD,
                             .tag = 1,
                             .count = 1u << 28,
                             .len = 1u << 30,
                             .sreq = 1};
    inject(&huge, NULL, 0, PEER);
    /* shorter than a header, and from a peer outside the session */
    inject_raw(v, 7, PEER);
    n++;
    struct frame_hdr ok = {.type = F_EAGER,
                           .dtype = COR_INT,
                           .src_task = fresh++,
                           .ctx = COR_CTX_WORLD,
                           .count = 1,
                           .len = 4};
    inject(&ok, v, 4, 5);
    n++;
    pump();
    cor_stats_t s1 = stats();
    EXPECT_EQ(s1.frames_dropped - s0.frames_dropped, n);
    EXPECT_EQ(s1.unexpected_now - s0.unexpected_now, 1); /* the one valid RTS */
    EXPECT_EQ(s1.msgs_received, s0.msgs_received);
    /* the huge RTS is harmless: the receive says how much it takes */
    cor_req_t r;
    int w[2];
    EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 1, COR_INT, w, 2, &r), COR_OK);
    struct frame_hdr cts;
    REQUIRE(next_out(&cts) != NULL);
    EXPECT_EQ(cts.type, F_CTS);
    EXPECT_EQ(cts.len, sizeof w);
    struct frame_hdr d = {.type = F_DATA, .rreq = cts.rreq, .len = sizeof w};
    inject(&d, v, sizeof w, PEER);
    pump();
    cor_status_t st;
    EXPECT_ERR(finish(&r, &st), COR_ETRUNC);
    EXPECT_EQ(st.count, 1u << 28);
    drain_out();
}

/* ---- wake-ups a polling loop defers (req.c): every sleeper is woken, once ---- */

#define WAKERS 17     /* above req.c's DEFER_MAX: the list overflows and flushes on the way */
#define WAKE_ROUNDS 3 /* task indices are not reused: 51 of the 64 */
static atomic_int wakers_done;

static int waker(void *arg)
{
    int k = (int)(intptr_t)arg, v = -1;
    int err = cor_recv(peer_task, COR_CTX_WORLD, 900 + k, COR_INT, &v, 1, NULL); /* sleeps */
    if (!err && v == k) atomic_fetch_add(&wakers_done, 1);
    return err ? err : v == k ? 0 : 1;
}

/* Whether every waker sleeps on its task's condvar (bounded: 5 s). */
static bool wakers_asleep(const cor_idp_t *ids)
{
    for (int tries = 0; tries < 5000; tries++) {
        int asleep = 0;
        for (int k = 0; k < WAKERS; k++)
            asleep += atomic_load(&cor__task_get(cor_idp_index(ids[k]))->sleepers) > 0;
        if (asleep == WAKERS) return true;
        usleep(1000);
    }
    return false;
}

static void test_deferred_wakes(void)
{
    int slow = 0;
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        cor_idp_t ids[WAKERS];
        atomic_store(&wakers_done, 0);
        for (int k = 0; k < WAKERS; k++)
            REQUIRE(cor_task_spawn("waker", waker, (void *)(intptr_t)k, &ids[k]) == COR_OK);
        REQUIRE(wakers_asleep(ids)); /* g.spin_ns = 0: waits sleep at once */
        cor__wakes_defer(true);      /* as a spinner or a listener's pass does */
        for (int k = 0; k < WAKERS; k++)
            inject_eager_to((uint16_t)cor_idp_index(ids[k]), 0, 900 + k, &k, 1);
        pump(); /* completes every receive */
        double t0 = ct_now();
        cor__wakes_defer(false); /* the loop stops: whoever is still deferred wakes now */
        for (int k = 0; k < WAKERS; k++) {
            int st = -1;
            EXPECT_ERR(cor_task_join(ids[k], &st), COR_OK);
            EXPECT_EQ(st, 0);
        }
        /* a wake-up lost from the list would leave its task to the 100 ms re-check */
        if (ct_now() - t0 > 0.09) slow++;
        EXPECT_EQ(atomic_load(&wakers_done), WAKERS);
    }
    EXPECT_LE(slow, 1); /* a preempted machine may be that late once, not every round */
    drain_out();
}

/* ---- one owner per port: frames of several threads while others poll ---- */

#define OWN_SENDERS 4
#define OWN_FRAMES 400 /* per sender: all of them fit in the fake route's record */
struct own_tag {
    uint32_t sender, seq;
};
static _Atomic int own_senders_left;

static void *own_sender(void *arg)
{
    uint32_t me_id = (uint32_t)(intptr_t)arg;
    struct frame_hdr h = {.type = F_CREDIT}; /* no credits: only its payload matters here */
    for (uint32_t i = 0; i < OWN_FRAMES; i++) {
        struct own_tag tag = {me_id, i};
        if (cor__frame_send_copy(hp, PEER, &h, sizeof h, &tag, sizeof tag) != COR_OK)
            atomic_fetch_add(&fk_overlaps, 1000); /* seen as a failure below */
        if (i % 64 == 0) sched_yield();
    }
    atomic_fetch_sub(&own_senders_left, 1);
    return NULL;
}

/* Polls (and, as the dispatcher does, pushes what the route refused) until the senders end;
 * the route refuses for a while now and then. */
static void *own_poller(void *arg)
{
    (void)arg;
    for (unsigned n = 0; atomic_load(&own_senders_left) > 0 && n < 10000000; n++) {
        cor__progress_all();
        if (n % 512 == 100) {
            COR_LOCK(&fk.lock);
            fk.refuse = !fk.refuse;
            COR_UNLOCK(&fk.lock);
        }
        if (n % 64 == 0 && cor__port_own(hp)) {
            cor__dispatch_queue(hp);
            cor__port_release(hp);
        }
    }
    COR_LOCK(&fk.lock);
    fk.refuse = 0;
    COR_UNLOCK(&fk.lock);
    return NULL;
}

/* Threads that find the port owned leave their frames in its inbox and go on; the owner sends
 * them before it lets go. Every frame reaches the route exactly once, each thread's in its
 * order, and the route's send and progress never run in two threads at once. */
static void test_one_owner(void)
{
    pump();
    COR_LOCK(&fk.lock); /* a fresh record: these frames fill most of it */
    for (int i = 0; i < fk.nout; i++)
        free(fk.out[i].data);
    fk.nout = fk.seen = 0;
    COR_UNLOCK(&fk.lock);
    atomic_store(&fk_overlaps, 0);
    atomic_store(&own_senders_left, OWN_SENDERS);
    pthread_t th[OWN_SENDERS + 2];
    for (int k = 0; k < OWN_SENDERS; k++)
        REQUIRE(pthread_create(&th[k], NULL, own_sender, (void *)(intptr_t)k) == 0);
    for (int k = OWN_SENDERS; k < OWN_SENDERS + 2; k++) /* two pollers compete to own */
        REQUIRE(pthread_create(&th[k], NULL, own_poller, NULL) == 0);
    for (int k = 0; k < OWN_SENDERS + 2; k++)
        pthread_join(th[k], NULL);
    EXPECT_EQ(atomic_load(&hp->inbox) == NULL, true); /* nothing left without an owner */
    own_port(); /* frames refused at the end wait in the queue for the dispatcher */
    cor__dispatch_queue(hp);
    cor__port_release(hp);
    EXPECT_EQ(atomic_load(&hp->backlog), false);
    uint32_t next[OWN_SENDERS] = {0};
    int got = 0, disorder = 0, strangers = 0;
    struct frame_hdr h;
    const struct frame *f;
    while ((f = next_out(&h))) {
        struct own_tag tag;
        if (f->len != FRAME_HDR_SIZE + sizeof tag) {
            strangers++;
            continue;
        }
        memcpy(&tag, f->data + FRAME_HDR_SIZE, sizeof tag);
        if (tag.sender >= OWN_SENDERS || tag.seq != next[tag.sender])
            disorder++;
        else
            next[tag.sender]++;
        got++;
    }
    EXPECT_EQ(got, OWN_SENDERS * OWN_FRAMES);
    EXPECT_EQ(disorder, 0);
    EXPECT_EQ(strangers, 0);
    EXPECT_EQ(atomic_load(&fk_overlaps), 0);
    pump(); /* their send_done */
}

/* ---- requests recycled while the peer-death scan runs (req.c) ---- */

#define RECYCLE_ROUNDS 300000
static _Atomic int recycle_stop;

/* Fails what waits on PEER, over and over, as a death reported meanwhile would. */
static void *death_scanner(void *arg)
{
    (void)arg;
    while (!atomic_load(&recycle_stop)) {
        cor__req_fail_peer(PEER, COR_EPEERDEAD);
        sched_yield(); /* or the recycler, waiting for the pool's lock, may never get it */
    }
    return NULL;
}

/* A send that waits on PEER (a rendezvous before its CTS) is completed and freed, and its
 * slot comes back from this thread's cache as a send that waits on nobody: the scan may fail
 * the first, never the second. Without the scan's flag (req.c) the scan completed requests
 * in the middle of their recycling: the test failed (crashed) in 4 of 4 runs. */
static void test_recycle_under_scan(void)
{
    struct cor_task *t = cor__task_self();
    pthread_t th;
    atomic_store(&recycle_stop, 0);
    REQUIRE(pthread_create(&th, NULL, death_scanner, NULL) == 0);
    long rounds = getenv("COR_TEST_SCALE") ? RECYCLE_ROUNDS / 10 : RECYCLE_ROUNDS;
    int wrong = 0;
    double end = ct_now() + 10; /* bounded in time too: sanitizers and busy machines */
    for (long i = 0; i < rounds && (i % 1024 || ct_now() < end); i++) {
        struct cor_req *r = cor__req_new(REQ_SEND, t);
        REQUIRE(r != NULL);
        atomic_store(&r->remote_rank, PEER);
        cor__req_complete(r, COR_OK); /* or the scan did */
        cor__req_free(r);
        struct cor_req *q = cor__req_new(REQ_SEND, t);
        REQUIRE(q != NULL);
        if (!cor__req_complete(q, COR_OK)) wrong++; /* someone else completed it */
        cor__req_free(q);
    }
    atomic_store(&recycle_stop, 1);
    pthread_join(th, NULL);
    EXPECT_EQ(wrong, 0);
}

/* ---- a peer's death and re-admission beside a send ---- */

/* proto.c's COR_TEST_SEND_HOOK (tests/core/int/core_proto.c): where a send stops, once. */
extern void (*cor_test_send_hook)(int at);
#define OLD_EPOCH 0x0c1d0001u
#define NEW_EPOCH 0x0e110002u
static int hook_at;            /* 1: after the send's look at the peer; 2: after its read of the
                                * incarnation (before its number); 0: done */
static bool hook_readmit;      /* the peer dies and then is re-admitted, else it only dies */
static bool readmit_begun;     /* a re-admission thread runs */
static _Atomic int readmit_in; /* it entered cor__peer_reset */
static pthread_t readmit_th;

/* What cor_domain_connect does for a rank that left and comes back with a new incarnation. */
static void *readmit(void *arg)
{
    (void)arg;
    atomic_store(&readmit_in, 1);
    cor__peer_reset(PEER);
    atomic_store(&g.peer_epoch[PEER], NEW_EPOCH);
    atomic_store(&g.dead[PEER], false);
    return NULL;
}

/* Inside the send: the peer dies (as cor_domain_leave says), and another thread re-admits its
 * rank. A reset that does not wait for this send is over within the 50 ms given to it. */
static void send_hook(int at)
{
    if (at != hook_at) return;
    hook_at = 0;
    cor__peer_gone(PEER, COR_EPEERDEAD, false);
    if (!hook_readmit) return;
    atomic_store(&readmit_in, 0);
    readmit_begun = pthread_create(&readmit_th, NULL, readmit, NULL) == 0;
    for (int i = 0; i < 2000 && readmit_begun && !atomic_load(&readmit_in); i++)
        usleep(1000);
    usleep(50000);
}

/* One send of `n` bytes that the hook stops at `at`; the peer dies meanwhile and, when
 * `readmit`, its rank gets a new occupant. What the send must do: an eager send goes with the
 * earlier occupant's incarnation and its next number (the new one drops it, and its own count
 * starts at 0), a rendezvous send fails with COR_EPEERDEAD (nothing answers its RTS); the
 * next message goes to the new occupant as its message 0. */
static void death_beside_send(int at, bool readmit_too, size_t n)
{
    drain_out();
    g.dynamic = readmit_too; /* static sessions never re-admit a rank */
    g.epoch = readmit_too ? 0x5e1f0003u : 0;
    atomic_store(&g.peer_epoch[PEER], readmit_too ? OLD_EPOCH : 0);
    unsigned char *buf = calloc(1, n);
    REQUIRE(buf != NULL);
    cor_req_t r;
    struct frame_hdr h;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 80, COR_BYTE, buf, 1, &r), COR_OK);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    REQUIRE(next_out(&h) != NULL);
    uint32_t k = h.seq + 1; /* the number the next send to the earlier occupant takes */
    hook_at = at;
    hook_readmit = readmit_too;
    readmit_begun = false;
    cor_test_send_hook = send_hook;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 81, COR_BYTE, buf, n, &r), COR_OK);
    cor_test_send_hook = NULL;
    EXPECT_EQ(hook_at, 0);
    bool eager = n <= EAGER_LIMIT;
    /* (a rendezvous left waiting for its CTS would not complete: finish gives 999) */
    EXPECT_ERR(finish(&r, NULL), eager ? COR_OK : COR_EPEERDEAD);
    if (readmit_begun) {
        pthread_join(readmit_th, NULL);
        memset(peer_seq, 0, sizeof peer_seq); /* the new occupant numbers from 0 */
    }
    atomic_store(&g.dead[PEER], false); /* (the static case: alive again for the next tests) */
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, eager ? F_EAGER : F_RTS);
    if (readmit_too) {
        EXPECT_EQ(h.dst_epoch, OLD_EPOCH); /* never the new occupant's */
        EXPECT_EQ(h.seq, k);               /* never a number of the new occupant's count */
        EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 82, COR_BYTE, buf, 1, &r), COR_OK);
        EXPECT_ERR(finish(&r, NULL), COR_OK);
        REQUIRE(next_out(&h) != NULL);
        EXPECT_EQ(h.dst_epoch, NEW_EPOCH);
        EXPECT_EQ(h.seq, 0);
    }
    g.dynamic = false;
    g.epoch = 0;
    atomic_store(&g.peer_epoch[PEER], 0);
    free(buf);
    drain_out();
}

/* The peer dies, and its rank is re-admitted, while a send is between its look at the peer
 * and its frame's number (dynamic sessions: cor__peer_reset waits for such sends). */
static void test_readmit_beside_send(void)
{
    death_beside_send(1, true, 4);
    death_beside_send(2, true, 4);
    death_beside_send(1, true, 3 * EAGER_LIMIT);
    death_beside_send(2, true, 3 * EAGER_LIMIT);
}

/* The peer dies after a rendezvous send looked at it, before the send named it for the
 * peer-death scan: the send fails, it does not wait for a CTS for ever. */
static void test_death_beside_rendezvous_send(void)
{
    death_beside_send(1, false, 3 * EAGER_LIMIT);
    death_beside_send(2, false, 3 * EAGER_LIMIT);
}

/* ---- the read rendezvous ---- */

/* The port reads remote memory (the route's caps say no RMA, so the other tests see none). */
static void rma_on(bool on)
{
    hp->rma = hp->get = on;
    g.get_max = on ? 1 << 20 : 0;
}

/* A message above the eager limit goes as F_RTS_GET naming its buffer and key; the receiver's
 * F_GOT completes the send and releases the registration; a wrong or late F_GOT is dropped; a
 * receiver that answers CTS instead gets the data as for an RTS; a peer death completes a
 * waiting send and releases its registration too. */
static void test_read_rendezvous_send(void)
{
    drain_out();
    rma_on(true);
    enum { N = 3000 };
    unsigned char *src = malloc(N);
    REQUIRE(src != NULL);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 5 + 3);
    int regs0 = atomic_load(&fk_regs);
    cor_req_t r;
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 71, COR_BYTE, src, N, &r), COR_OK);
    struct frame_hdr h;
    const struct frame *f = next_out(&h);
    REQUIRE(f != NULL);
    EXPECT_EQ(h.type, F_RTS_GET);
    EXPECT_EQ(f->len, FRAME_HDR_SIZE); /* no tail: the receiver reads it all */
    EXPECT_EQ(h.len, N);
    EXPECT_EQ(h.offset, (uint64_t)(uintptr_t)src);
    EXPECT_EQ(h.rreq, FK_KEY);
    EXPECT_EQ(atomic_load(&fk_regs), regs0 + 1);
    cor_stats_t s0 = stats();
    struct frame_hdr other = {.type = F_GOT, .sreq = h.sreq + 1, .len = N};
    struct frame_hdr over = {.type = F_GOT, .sreq = h.sreq, .len = N + 1};
    inject(&other, NULL, 0, PEER);
    inject(&over, NULL, 0, PEER);
    pump();
    EXPECT_EQ(stats().frames_dropped - s0.frames_dropped, 2);
    int done = 1;
    EXPECT_ERR(cor_test(&r, &done, NULL), COR_OK);
    EXPECT_EQ(done, 0);
    struct frame_hdr got = {
        .type = F_GOT, .src_task = h.dst_task, .dst_task = h.src_task, .sreq = h.sreq, .len = N};
    inject(&got, NULL, 0, PEER);
    pump();
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    EXPECT_EQ(atomic_load(&fk_regs), regs0);
    inject(&got, NULL, 0, PEER); /* once more: no send waits for it */
    pump();
    EXPECT_EQ(stats().frames_dropped - s0.frames_dropped, 3);

    /* the receiver answers CTS (it could not read): data frames, as for an RTS */
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 72, COR_BYTE, src, N, &r), COR_OK);
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_RTS_GET);
    answer_rts(&h, N, src);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    EXPECT_EQ(atomic_load(&fk_regs), regs0);

    /* the peer dies while the send waits for F_GOT */
    EXPECT_ERR(cor_sendI_typed(peer_task, COR_CTX_WORLD, 73, COR_BYTE, src, N, &r), COR_OK);
    REQUIRE(next_out(&h) != NULL);
    EXPECT_EQ(h.type, F_RTS_GET);
    cor__req_fail_peer(PEER, COR_EPEERDEAD);
    EXPECT_ERR(finish(&r, NULL), COR_EPEERDEAD);
    EXPECT_EQ(atomic_load(&fk_regs), regs0);
    rma_on(false);
    free(src);
    drain_out();
}

/* An F_RTS_GET received, unexpected or matching a posted receive: the route reads the data
 * straight into the receive's buffer (truncated to it), then F_GOT tells the sender; DATA for
 * such a receive is dropped; a read that fails (a stale key) asks by CTS instead. */
static void test_read_rendezvous_receive(void)
{
    drain_out();
    rma_on(true);
    enum { N = 3000 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    REQUIRE(src && dst);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 11 + 7);
    int regs0 = atomic_load(&fk_regs);
    for (int round = 0; round < 4; round++) {
        bool posted = round & 1, stale = round == 3;
        size_t cap = round == 2 ? 1000 : N;
        memset(dst, 0, N);
        struct frame_hdr rts = {.type = F_RTS_GET,
                                .dtype = COR_BYTE,
                                .src_task = 3,
                                .dst_task = 0,
                                .seq = peer_seq[3]++,
                                .tag = 80 + round,
                                .ctx = COR_CTX_WORLD,
                                .count = N,
                                .len = N,
                                .sreq = 0xd00 + (uint64_t)round,
                                .rreq = stale ? FK_KEY + 1 : FK_KEY,
                                .offset = (uint64_t)(uintptr_t)src};
        cor_req_t r;
        int gets0 = atomic_load(&fk_gets);
        if (!posted) {
            inject(&rts, NULL, 0, PEER);
            pump();
        }
        EXPECT_ERR(
            cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 80 + round, COR_BYTE, dst, cap, &r),
            COR_OK);
        if (posted) {
            inject(&rts, NULL, 0, PEER);
            pump();
        }
        pump();
        EXPECT_EQ(atomic_load(&fk_gets) - gets0, 1);
        struct frame_hdr h;
        REQUIRE(next_out(&h) != NULL);
        if (stale) {
            /* the read failed: CTS for the whole receive, and the data comes as frames */
            EXPECT_EQ(h.type, F_CTS);
            EXPECT_EQ(h.sreq, rts.sreq);
            EXPECT_EQ(h.len, cap);
            struct frame_hdr d = {.type = F_DATA, .rreq = h.rreq, .len = cap};
            inject(&d, src, cap, PEER);
            pump();
        } else {
            EXPECT_EQ(h.type, F_GOT);
            EXPECT_EQ(h.sreq, rts.sreq);
            EXPECT_EQ(h.len, cap);
            EXPECT_EQ(h.dst_task, 3);
            EXPECT_EQ(h.offset, 0); /* the address and key stay here */
            EXPECT_EQ(h.ctx, 0);
        }
        cor_status_t st;
        EXPECT_ERR(finish(&r, &st), cap < N ? COR_ETRUNC : COR_OK);
        EXPECT_EQ(st.count, N);
        EXPECT_EQ(memcmp(dst, src, cap), 0);
        if (cap < N) EXPECT_EQ(dst[cap], 0);
        EXPECT_EQ(atomic_load(&fk_regs), regs0);
        EXPECT_EQ(pending_out(), 0);
    }
    /* DATA for a receive the route is reading into is not taken */
    struct frame_hdr rts = {.type = F_RTS_GET,
                            .dtype = COR_BYTE,
                            .src_task = 3,
                            .seq = peer_seq[3]++,
                            .tag = 90,
                            .ctx = COR_CTX_WORLD,
                            .count = N,
                            .len = N,
                            .sreq = 0xe00,
                            .rreq = FK_KEY,
                            .offset = (uint64_t)(uintptr_t)src};
    cor_req_t r;
    memset(dst, 0, N);
    EXPECT_ERR(cor_recvI_into(COR_ANY_SOURCE, COR_CTX_WORLD, 90, COR_BYTE, dst, N, &r), COR_OK);
    /* delivered in one progress call: the read is issued, its completion comes in the next */
    struct frame_hdr d = {.type = F_DATA, .rreq = r, .len = 10};
    unsigned char junk[10] = {0};
    cor_stats_t s0 = stats();
    inject(&rts, NULL, 0, PEER);
    inject(&d, junk, sizeof junk, PEER);
    pump();
    EXPECT_EQ(stats().frames_dropped - s0.frames_dropped, 1);
    EXPECT_ERR(finish(&r, NULL), COR_OK);
    EXPECT_EQ(memcmp(dst, src, N), 0);
    rma_on(false);
    free(src);
    free(dst);
    drain_out();
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"eager until the reserved credit, then rendezvous", test_eager_until_reserved_credit},
        {"credits come back", test_credits_come_back},
        {"burst of 100: bounded eager, order kept", test_burst},
        {"above the eager limit: rendezvous in chunks", test_above_eager_limit},
        {"full window: queued in order", test_window_full},
        {"frame completed by another thread while the queue drains", test_done_during_drain},
        {"receiver returns credits", test_receiver_returns_credits},
        {"rendezvous receive, truncation, bad DATA", test_rendezvous_receive},
        {"RTS carries a short tail", test_rts_tail_send},
        {"RTS tail received: unexpected, posted, truncated", test_rts_tail_receive},
        {"eager copy cache: bounded, reused", test_copy_cache},
        {"credits spent and returned concurrently stay exact", test_credits_concurrent},
        {"overtaking frames held in order", test_order_held},
        {"malformed frames dropped and counted", test_malformed},
        {"wake-ups deferred by a polling loop all arrive", test_deferred_wakes},
        {"one owner per port: other threads' frames all go, in order", test_one_owner},
        {"a request recycled under the peer-death scan keeps its new life",
         test_recycle_under_scan},
        {"peer dies and is re-admitted inside a send: old number, old incarnation",
         test_readmit_beside_send},
        {"peer dies inside a rendezvous send: the send fails", test_death_beside_rendezvous_send},
        {"read rendezvous send: RTS_GET, GOT, CTS instead, peer death", test_read_rendezvous_send},
        {"read rendezvous receive: unexpected, posted, truncated, stale key",
         test_read_rendezvous_receive},
        {NULL, NULL},
    };
    return ct_main("credit", setup, NULL, tests, 60);
}
