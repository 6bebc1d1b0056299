/* gm-test-peer: one side of the two-process GM test.
 *
 *   gm-test-peer --server [--port N] [--count N] [--timeout S] [CONFIG]
 *   gm-test-peer --client PEER [--port N] [--count N] [--timeout S] [CONFIG]
 *
 * CONFIG (--nodes MAP, --node ID, --ns NAMESPACE) configures libgm-compat with
 * gm_compat_configure instead of the GM_* environment, so that a process with
 * an empty environment (env -i) can take part.
 *
 * PEER is a host name from the node map (or a node id).  Both sides open the
 * same port id, like GM programs (so gm_send_to_peer_with_callback works).
 * The client says hello (retrying until the server's port is open), sends
 * COUNT messages of mixed sizes (0 B .. 64 KiB, plus 1 MiB ones) at both
 * priorities; the server checks each against the sequence both sides derive
 * from one seed (per-priority order, length, payload) and echoes it; the
 * client checks the echoes.  Then the client puts 64 KiB into the server's
 * registered region and notifies at the same priority (the server checks the
 * data is there when the note arrives), gets 512 KiB back with gm_get, and
 * says bye; the server answers with its error count.  Exit 0 only if both
 * sides saw no error; 2 on timeout. */
#include <gm.h>
#include <gm_compat.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    CTRL_SIZE = 9, /* control messages only; data never uses size 9 */
    CTRL_LEN = 256,
    MIN_DATA_SIZE = 3,
    MAX_DATA_SIZE = 16,
    BIG_SIZE = 21, /* 1 MiB messages */
    BIG_LEN = 1048576,
    BUFS_PER_CLASS = 4,
    REGION_LEN = 1048576,
    PUT_LEN = 65536,
    GET_OFF = 524288,
    GET_LEN = 524288,
};
enum { HELLO = 1, WELCOME, NOTE, NOTE_REPLY, BYE, BYE_REPLY };

struct ctrl {
    uint32_t magic, kind;
    uint64_t region, region_len;
    uint32_t count, errors, seed, pad;
};
#define CTRL_MAGIC 0x474d5450u

static struct gm_port *port;
static unsigned peer_node, port_id;
static unsigned long errors;
static uint64_t deadline_us;
static int is_server;
/* Progress, printed on a timeout to show where the exchange stopped. */
static unsigned prog_sent, prog_recv, prog_cursor[2];

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void fail(const char *fmt, const char *a, unsigned long b)
{
    fprintf(stderr, "gm-test-peer (%s): ", is_server ? "server" : "client");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    errors++;
}

static void check_deadline(const char *doing)
{
    if (now_us() > deadline_us) {
        fprintf(stderr,
                "gm-test-peer (%s): timed out while %s (sent %u, received %u, "
                "low %u, high %u, errors %lu)\n",
                is_server ? "server" : "client", doing, prog_sent, prog_recv, prog_cursor[0],
                prog_cursor[1], errors);
        exit(2);
    }
}

/* ---- the message sequence both sides derive ---------------------------- */

struct item {
    uint32_t len;
    uint8_t prio, to_peer;
};

static uint32_t xorshift(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static struct item *make_sequence(unsigned n)
{
    struct item *seq = calloc(n, sizeof *seq);
    uint32_t s = 2024;
    if (!seq) return NULL;
    for (unsigned i = 0; i < n; i++) {
        uint32_t r = xorshift(&s) % 1000, len;
        if (r < 3)
            len = BIG_LEN;
        else if (r < 50)
            len = xorshift(&s) % 8;
        else if (r < 600)
            len = 8 + xorshift(&s) % 240;
        else if (r < 900)
            len = 505 + xorshift(&s) % (4096 - 505);
        else
            len = 4096 + xorshift(&s) % (65528 - 4096 + 1);
        if (gm_min_size_for_length(len) == CTRL_SIZE) len = 505;
        seq[i].len = len;
        seq[i].prio = (xorshift(&s) & 3) == 0 ? GM_HIGH_PRIORITY : GM_LOW_PRIORITY;
        seq[i].to_peer = xorshift(&s) & 1;
    }
    return seq;
}

static uint8_t pat(uint32_t seed, size_t i)
{
    uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + 1u;
    x ^= x << 13;
    x ^= x >> 17;
    return (uint8_t)(x ^ (x >> 8));
}

/* Payload of message idx: byte i = pat(idx, i). */
static void fill(uint8_t *b, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++)
        b[i] = pat(seed, i);
}

static int check(const uint8_t *b, size_t len, uint32_t seed)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] != pat(seed, i)) return 0;
    return 1;
}

/* ---- sends and tokens -------------------------------------------------- */

static unsigned tokens;
struct send_ctx {
    void (*done)(struct send_ctx *, gm_status_t);
    void *buf;
    unsigned size, prio;
    gm_status_t status;
    int completed;
};

static void send_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    struct send_ctx *c = ctx;
    (void)p;
    tokens++;
    c->status = st;
    c->completed = 1;
    if (c->done) c->done(c, st);
}

/* One step of the event loop; returns a receive event or NULL. */
static gm_recv_event_t *poll_once(void)
{
    gm_recv_event_t *e = gm_receive(port);
    switch (GM_RECV_EVENT_TYPE(e)) {
    case GM_RECV_EVENT:
    case GM_HIGH_RECV_EVENT:
    case GM_PEER_RECV_EVENT:
    case GM_HIGH_PEER_RECV_EVENT:
    case GM_FAST_RECV_EVENT:
    case GM_FAST_HIGH_RECV_EVENT:
    case GM_FAST_PEER_RECV_EVENT:
    case GM_FAST_HIGH_PEER_RECV_EVENT:
        return e;
    case GM_NO_RECV_EVENT:
        return NULL;
    default:
        gm_unknown(port, e);
        return NULL;
    }
}

static int event_prio(gm_recv_event_t *e)
{
    unsigned t = GM_RECV_EVENT_TYPE(e);
    return t == GM_HIGH_RECV_EVENT || t == GM_HIGH_PEER_RECV_EVENT ||
                   t == GM_FAST_HIGH_RECV_EVENT || t == GM_FAST_HIGH_PEER_RECV_EVENT
               ? GM_HIGH_PRIORITY
               : GM_LOW_PRIORITY;
}

static void *ctrl_out;
static struct send_ctx ctrl_sc;

/* Send a control message and wait for its callback (retrying while the
 * peer's port is not open yet if `retry'). */
static gm_status_t send_ctrl(const struct ctrl *c, int retry)
{
    for (;;) {
        memcpy(ctrl_out, c, sizeof *c);
        memset(&ctrl_sc, 0, sizeof ctrl_sc);
        tokens--;
        gm_send_with_callback(port, ctrl_out, CTRL_SIZE, CTRL_LEN, GM_HIGH_PRIORITY, peer_node,
                              port_id, send_cb, &ctrl_sc);
        while (!ctrl_sc.completed) {
            check_deadline("sending a control message");
            gm_recv_event_t *e = poll_once();
            if (e) { /* not expected before the reply; hand it back */
                fail("unexpected message of %s%lu bytes during a control send", "",
                     gm_ntoh_u32(e->recv.length));
                gm_unknown(port, e);
            }
        }
        if (ctrl_sc.status == GM_SUCCESS || !retry || ctrl_sc.status != GM_SEND_TARGET_PORT_CLOSED)
            return ctrl_sc.status;
        /* The server is not up yet: re-enable the target and try again. */
        struct send_ctx r = {0};
        tokens--;
        gm_resume_sending(port, GM_HIGH_PRIORITY, peer_node, port_id, send_cb, &r);
        while (!r.completed) {
            check_deadline("resuming after the peer's port was closed");
            poll_once();
        }
    }
}

/* Wait for a control message of kind `kind'; data messages are not expected. */
static void *ctrl_bufs[BUFS_PER_CLASS];
static struct ctrl wait_ctrl(uint32_t kind)
{
    for (;;) {
        check_deadline("waiting for a control message");
        gm_recv_event_t *e = poll_once();
        if (!e) continue;
        unsigned size = gm_ntoh_u8(e->recv.size), len = gm_ntoh_u32(e->recv.length);
        struct ctrl c;
        memset(&c, 0, sizeof c);
        if (size == CTRL_SIZE && len == CTRL_LEN) memcpy(&c, gm_ntohp(e->recv.message), sizeof c);
        gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), size, event_prio(e));
        if (c.magic == CTRL_MAGIC && c.kind == kind) return c;
        fail("unexpected message (%s%lu bytes) while waiting for control", "", len);
    }
}

/* ---- buffers ----------------------------------------------------------- */

static void provide_all(void)
{
    for (unsigned s = MIN_DATA_SIZE; s <= MAX_DATA_SIZE; s++) {
        if (s == CTRL_SIZE) continue;
        for (unsigned p = 0; p < 2; p++)
            for (unsigned k = 0; k < BUFS_PER_CLASS; k++) {
                void *b = gm_dma_malloc(port, gm_max_length_for_size(s) + 8);
                if (!b) {
                    fprintf(stderr, "gm-test-peer: gm_dma_malloc failed\n");
                    exit(1);
                }
                gm_provide_receive_buffer(port, b, s, p);
            }
    }
    for (unsigned p = 0; p < 2; p++)
        for (unsigned k = 0; k < 2; k++)
            gm_provide_receive_buffer(
                port, gm_dma_malloc(port, gm_max_length_for_size(BIG_SIZE) + 8), BIG_SIZE, p);
    for (unsigned k = 0; k < BUFS_PER_CLASS; k++) {
        ctrl_bufs[k] = gm_dma_malloc(port, gm_max_length_for_size(CTRL_SIZE) + 8);
        gm_provide_receive_buffer(port, ctrl_bufs[k], CTRL_SIZE, GM_HIGH_PRIORITY);
    }
}

/* Check one data message against the sequence (per-priority cursor). */
static struct item *seq;
static unsigned count;
static unsigned *order[2], norder[2], cursor[2];

static void check_data(gm_recv_event_t *e, const char *what)
{
    unsigned prio = event_prio(e), len = gm_ntoh_u32(e->recv.length);
    if (cursor[prio] >= norder[prio]) {
        fail("%s: more messages than sent at this priority (len %lu)", what, len);
        return;
    }
    unsigned idx = order[prio][cursor[prio]++];
    prog_cursor[prio] = cursor[prio];
    if (len != seq[idx].len)
        fail("%s: message out of order or wrong length (%lu)", what, len);
    else if (!check(gm_ntohp(e->recv.message), len, idx))
        fail("%s: payload corrupt (index %lu)", what, idx);
    if (gm_ntoh_u8(e->recv.size) != gm_min_size_for_length(seq[idx].len))
        fail("%s: wrong size class (index %lu)", what, idx);
    if (gm_ntoh_u16(e->recv.sender_node_id) != peer_node)
        fail("%s: wrong sender node %lu", what, gm_ntoh_u16(e->recv.sender_node_id));
    if (gm_ntoh_u8(e->recv.sender_port_id) != port_id)
        fail("%s: wrong sender port %lu", what, gm_ntoh_u8(e->recv.sender_port_id));
}

/* ---- server ------------------------------------------------------------ */

/* An echo waiting for a token or for its callback. */
struct echo {
    struct send_ctx sc;
    unsigned len;
    int queued;
};

static void echo_done(struct send_ctx *sc, gm_status_t st)
{
    if (st != GM_SUCCESS) fail("echo send failed: %s (%lu)", gm_strerror(st), st);
    gm_provide_receive_buffer(port, sc->buf, sc->size, sc->prio);
    free(sc);
}

static int run_server(void)
{
    void *region = gm_dma_malloc(port, REGION_LEN);
    if (!region || gm_allow_remote_memory_access(port) != GM_SUCCESS) {
        fprintf(stderr, "gm-test-peer: cannot set up the remote-access region\n");
        return 1;
    }
    fill(region, REGION_LEN, 0x5e);
    /* main() has taken the hello (it tells us the client's node id). */
    struct ctrl w = {.magic = CTRL_MAGIC,
                     .kind = WELCOME,
                     .region = (uintptr_t)region,
                     .region_len = REGION_LEN};
    if (send_ctrl(&w, 0) != GM_SUCCESS) fail("cannot answer hello: %s%lu", "", ctrl_sc.status);

    /* Echo every data message; queue echoes while out of send tokens. */
    struct echo **queue = calloc(count + 1, sizeof *queue);
    unsigned qhead = 0, qtail = 0, received = 0;
    while (received < count) {
        check_deadline("receiving data messages");
        while (qhead < qtail && tokens > 0) {
            struct echo *ec = queue[qhead++];
            tokens--;
            gm_send_with_callback(port, ec->sc.buf, ec->sc.size, ec->len, ec->sc.prio, peer_node,
                                  port_id, send_cb, &ec->sc);
        }
        gm_recv_event_t *e = poll_once();
        if (!e) continue;
        unsigned size = gm_ntoh_u8(e->recv.size);
        if (size == CTRL_SIZE) {
            fail("control message in the data phase (%s%lu)", "", 0);
            gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), size, event_prio(e));
            continue;
        }
        check_data(e, "server");
        received++;
        prog_recv = received;
        struct echo *ec = calloc(1, sizeof *ec);
        ec->sc = (struct send_ctx){.done = echo_done,
                                   .buf = gm_ntohp(e->recv.buffer),
                                   .size = size,
                                   .prio = event_prio(e)};
        ec->len = gm_ntoh_u32(e->recv.length);
        queue[qtail++] = ec;
    }
    while (qhead < qtail) {
        check_deadline("sending the last echoes");
        if (tokens > 0) {
            struct echo *ec = queue[qhead++];
            tokens--;
            gm_send_with_callback(port, ec->sc.buf, ec->sc.size, ec->len, ec->sc.prio, peer_node,
                                  port_id, send_cb, &ec->sc);
        }
        gm_recv_event_t *e = poll_once();
        if (e) {
            fail("unexpected message after the data phase (%s%lu bytes)", "",
                 gm_ntoh_u32(e->recv.length));
            gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), gm_ntoh_u8(e->recv.size),
                                      event_prio(e));
        }
    }
    free(queue);

    /* Put then notify: the put's data must be in the region when the note
     * arrives. */
    struct ctrl note = wait_ctrl(NOTE);
    int put_ok = check(region, PUT_LEN, note.seed);
    if (!put_ok) fail("put data not in place when its notification arrived (%s%lu)", "", 0);
    struct ctrl nr = {.magic = CTRL_MAGIC, .kind = NOTE_REPLY, .errors = put_ok ? 0 : 1};
    send_ctrl(&nr, 0);

    wait_ctrl(BYE);
    struct ctrl br = {.magic = CTRL_MAGIC, .kind = BYE_REPLY, .errors = (uint32_t)errors};
    send_ctrl(&br, 0);
    /* Let the reply's completion settle before closing. */
    uint64_t until = now_us() + 100000;
    while (now_us() < until)
        poll_once();
    return errors ? 1 : 0;
}

/* ---- client ------------------------------------------------------------ */

static int run_client(void)
{
    struct ctrl h = {.magic = CTRL_MAGIC, .kind = HELLO, .count = count};
    gm_status_t st = send_ctrl(&h, 1);
    if (st != GM_SUCCESS) {
        fprintf(stderr, "gm-test-peer (client): hello failed: %s\n", gm_strerror(st));
        return 1;
    }
    struct ctrl w = wait_ctrl(WELCOME);

    /* One send buffer per token, filled when used. */
    unsigned nslot = tokens;
    struct send_ctx *slot = calloc(nslot, sizeof *slot);
    for (unsigned i = 0; i < nslot; i++) {
        slot[i].buf = gm_dma_malloc(port, BIG_LEN);
        slot[i].completed = 1;
        if (!slot[i].buf) {
            fprintf(stderr, "gm-test-peer: gm_dma_malloc failed\n");
            return 1;
        }
    }
    unsigned sent = 0, echoed = 0, next_slot = 0;
    while (echoed < count) {
        check_deadline("exchanging data messages");
        for (unsigned tries = 0; tries < nslot && sent < count; tries++) {
            struct send_ctx *sc = &slot[next_slot];
            next_slot = (next_slot + 1) % nslot;
            if (!sc->completed) continue;
            if (sc->status != GM_SUCCESS)
                fail("data send failed: %s (%lu)", gm_strerror(sc->status), sc->status);
            sc->completed = 0;
            sc->status = GM_SUCCESS;
            const struct item *it = &seq[sent];
            fill(sc->buf, it->len, sent);
            tokens--;
            if (it->to_peer)
                gm_send_to_peer_with_callback(port, sc->buf, gm_min_size_for_length(it->len),
                                              it->len, it->prio, peer_node, send_cb, sc);
            else
                gm_send_with_callback(port, sc->buf, gm_min_size_for_length(it->len), it->len,
                                      it->prio, peer_node, port_id, send_cb, sc);
            sent++;
            prog_sent = sent;
        }
        gm_recv_event_t *e = poll_once();
        if (!e) continue;
        check_data(e, "client (echo)");
        echoed++;
        prog_recv = echoed;
        gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), gm_ntoh_u8(e->recv.size),
                                  event_prio(e));
    }
    for (unsigned i = 0; i < nslot; i++)
        while (!slot[i].completed) {
            check_deadline("waiting for the last send callbacks");
            poll_once();
        }

    /* Put 64 KiB at the start of the server's region, then notify. */
    uint8_t *src = slot[0].buf;
    fill(src, PUT_LEN, 0xabc);
    struct send_ctx pc = {0};
    tokens--;
    gm_put(port, src, w.region, PUT_LEN, GM_HIGH_PRIORITY, peer_node, port_id, send_cb, &pc);
    struct ctrl n = {.magic = CTRL_MAGIC, .kind = NOTE, .seed = 0xabc};
    if (send_ctrl(&n, 0) != GM_SUCCESS)
        fail("notification after the put failed (%s%lu)", "", ctrl_sc.status);
    while (!pc.completed) {
        check_deadline("waiting for the put callback");
        poll_once();
    }
    if (pc.status != GM_SUCCESS) fail("gm_put failed: %s (%lu)", gm_strerror(pc.status), pc.status);
    struct ctrl nr = wait_ctrl(NOTE_REPLY);
    if (nr.errors) fail("server saw the notification before the put's data (%s%lu)", "", nr.errors);

    /* Get the second half of the region back. */
    uint8_t *dst = slot[1 % nslot].buf;
    memset(dst, 0, GET_LEN);
    struct send_ctx gc = {0};
    tokens--;
    gm_get(port, w.region + GET_OFF, dst, GET_LEN, GM_LOW_PRIORITY, peer_node, port_id, send_cb,
           &gc);
    while (!gc.completed) {
        check_deadline("waiting for the get callback");
        poll_once();
    }
    if (gc.status != GM_SUCCESS)
        fail("gm_get failed: %s (%lu)", gm_strerror(gc.status), gc.status);
    else {
        uint8_t *expect = malloc(REGION_LEN);
        fill(expect, REGION_LEN, 0x5e);
        if (memcmp(dst, expect + GET_OFF, GET_LEN) != 0)
            fail("gm_get data differs from the server's region (%s%lu)", "", 0);
        free(expect);
    }

    struct ctrl bye = {.magic = CTRL_MAGIC, .kind = BYE};
    send_ctrl(&bye, 0);
    struct ctrl br = wait_ctrl(BYE_REPLY);
    if (br.errors) fail("server reported %s%lu errors", "", br.errors);
    free(slot);
    printf("gm-test-peer: %u messages exchanged, put/notify and get checked, %lu errors\n", count,
           errors);
    return errors ? 1 : 0;
}

/* ---- main -------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: gm-test-peer --server | --client PEER  [--port N] [--count N] "
                    "[--timeout SECONDS] [--nodes MAP] [--node ID] [--ns NAMESPACE]\n");
    exit(64);
}

int main(int argc, char **argv)
{
    const char *peer = NULL;
    unsigned timeout = 60;
    port_id = 2;
    count = 2000;
    gm_compat_config_t cfg;
    gm_compat_config_init(&cfg);
    int configured = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--server"))
            is_server = 1;
        else if (!strcmp(argv[i], "--client") && i + 1 < argc)
            peer = argv[++i];
        else if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port_id = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            cfg.nodes = argv[++i], configured = 1;
        else if (!strcmp(argv[i], "--node") && i + 1 < argc)
            cfg.node_id = (unsigned)strtoul(argv[++i], NULL, 0), configured = 1;
        else if (!strcmp(argv[i], "--ns") && i + 1 < argc)
            cfg.shm_namespace = argv[++i], configured = 1;
        else
            usage();
    }
    if (configured && gm_compat_configure(&cfg) != GM_SUCCESS) {
        fprintf(stderr, "gm-test-peer: gm_compat_configure refused the settings\n");
        return 1;
    }
    if (is_server == (peer != NULL) || count == 0 || count > 10000000 || timeout == 0) usage();
    deadline_us = now_us() + (uint64_t)timeout * 1000000u;

    gm_status_t st = gm_init();
    if (st != GM_SUCCESS) {
        gm_perror("gm-test-peer: gm_init", st);
        return 1;
    }
    st = gm_open(&port, 0, port_id, is_server ? "test-server" : "test-client",
                 (enum gm_api_version)GM_API_VERSION_2_0);
    if (st != GM_SUCCESS) {
        gm_perror("gm-test-peer: gm_open", st);
        return 1;
    }
    tokens = gm_num_send_tokens(port);
    if (is_server) {
        /* The server learns its peer from the hello; until then accept any. */
        peer_node = GM_NO_SUCH_NODE_ID;
    } else {
        char *end;
        unsigned long id = strtoul(peer, &end, 10);
        if (*end == 0 && end != peer)
            peer_node = (unsigned)id;
        else if (gm_host_name_to_node_id_ex(port, 1000000, peer, &peer_node) != GM_SUCCESS) {
            fprintf(stderr, "gm-test-peer: unknown host '%s'\n", peer);
            return 1;
        }
    }
    seq = make_sequence(count);
    for (int p = 0; p < 2; p++)
        order[p] = calloc(count, sizeof(unsigned));
    if (!seq || !order[0] || !order[1]) return 1;
    for (unsigned i = 0; i < count; i++)
        order[seq[i].prio][norder[seq[i].prio]++] = i;
    ctrl_out = gm_dma_malloc(port, CTRL_LEN);
    provide_all();

    int rc;
    if (is_server) {
        /* Learn the client's node id from its hello. */
        for (;;) {
            check_deadline("waiting for the client's hello");
            gm_recv_event_t *e = poll_once();
            if (!e) continue;
            struct ctrl c;
            memset(&c, 0, sizeof c);
            unsigned size = gm_ntoh_u8(e->recv.size);
            if (size == CTRL_SIZE && gm_ntoh_u32(e->recv.length) == CTRL_LEN)
                memcpy(&c, gm_ntohp(e->recv.message), sizeof c);
            peer_node = gm_ntoh_u16(e->recv.sender_node_id);
            gm_provide_receive_buffer(port, gm_ntohp(e->recv.buffer), size, event_prio(e));
            if (c.magic == CTRL_MAGIC && c.kind == HELLO) {
                if (c.count != count)
                    fail("client uses --count %s%lu; counts must match", "", c.count);
                break;
            }
        }
        rc = run_server();
    } else {
        rc = run_client();
    }
    gm_close(port);
    gm_finalize();
    return rc;
}
