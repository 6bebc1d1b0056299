/*
 * The one libFuzzer target of the bootstrap protocol's lines (cor/core/bootline.h), for both
 * ends: the grammar itself, the domain's reader (cor/core/bootstrap.c, with boot.c) and cor-run's
 * connections (apps/tools/cor-run.c, its main renamed), which this file includes to reach their
 * static parsers and state. Built by `make fuzz` (tests/fuzz/Makefile.am: with
 * cor/core/bootline.c, boot_auth.c and knobs.c, -Iapps/tools), run by tests/fuzz/run.sh.
 *
 * Byte 0 chooses the part (mod 3):
 * 0 grammar: the rest is lines; every line that parses formats back to a line that parses to
 *   the same fields, within every limit of bootline.h; the splitter never keeps a line too long.
 * 1 domain: byte 1 the session size (1..8), this domain's rank (bits 3-6) and whether the
 *   connection is sealed (bit 7: a proven TCP one, keys from a secret and challenge of zeros
 *   and a domain nonce of 0x11 bytes), byte 2 the size of each read (1..256 bytes), the rest
 *   the byte stream from cor-run. The buffer never holds a line
 *   too long, a death callback names a rank of the session, and a finished table has every
 *   entry, each with a valid route and a terminated address.
 * 2 cor-run: byte 1 the number of domains (1..4) and which of 8 connections are TCP; then
 *   records of [connection (low 3 bits), length, bytes], each fed to that connection as one
 *   read. Session cookie 0123456789abcdef; TCP connections challenge with a nonce of zeros
 *   under a secret of zeros, and every other TCP connection starts proven (its lines sealed
 *   with the keys of a domain nonce of 0x11 bytes). A connection the
 *   parser drops is closed as cor-run closes it. What the session state says about ranks,
 *   connections, addresses and barriers stays consistent, and a TCP connection that did not
 *   prove the secret has not joined and was sent nothing but CHALLENGE, PROVEN or ERR.
 */
#define _GNU_SOURCE /* cor-run.c's headers need it, and bootstrap.c's come first */
#include "boot.c"
#include "bootstrap.c"
#define main cor_run_main
#include "cor-run.c"
#undef main

#include <assert.h>

/* The core's log line (cor/core/log.c needs the whole domain): knobs.c reports a malformed
 * knob through it. */
void cor__log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- 0: the grammar ---------------------------------------------------------------------- */

static void same(const struct cor_bootline *a, const struct cor_bootline *b)
{
    assert(a->kind == b->kind && a->version == b->version && a->rank == b->rank);
    assert(a->size == b->size && a->k == b->k && a->n == b->n && a->port == b->port);
    assert(a->seq == b->seq && a->pid == b->pid && a->session == b->session);
    assert(!strcmp(a->route, b->route) && !strcmp(a->addr, b->addr) && !strcmp(a->text, b->text));
    assert(!memcmp(a->nonce, b->nonce, sizeof a->nonce) && !memcmp(a->mac, b->mac, sizeof a->mac));
    assert(a->digest == b->digest);
}

static int grammar_line(void *arg, char *line)
{
    (void)arg;
    assert(strlen(line) < COR_BOOT_LINE_MAX);
    struct cor_bootline l, m;
    if (cor__bootline_parse(line, &l)) return 0;
    assert((unsigned)l.kind < COR_BL_KINDS);
    assert(l.rank >= 0 && l.rank < COR_BOOT_MAX_DOMAINS && l.size >= 0);
    assert(l.size <= COR_BOOT_MAX_DOMAINS && l.k >= 0 && l.k < COR_BOOT_MAX_ADDRS);
    assert(l.n >= 0 && l.n <= COR_BOOT_MAX_ADDRS && l.seq >= 0 && l.seq <= COR_BOOT_SEQ_MAX);
    assert(l.port >= -COR_BOOT_PORT_LIMIT && l.port <= COR_BOOT_PORT_LIMIT && l.pid >= 0);
    assert(strlen(l.addr) < sizeof l.addr && strlen(l.text) < sizeof l.text);
    if (l.kind == COR_BL_ADDR || l.kind == COR_BL_A) assert(cor__bootline_route_ok(l.route));
    char out[COR_BOOT_LINE_MAX + 1];
    int n = cor__bootline_format(&l, out, sizeof out);
    assert(n > 0 && n <= COR_BOOT_LINE_MAX && out[n - 1] == '\n' && strlen(out) == (size_t)n);
    out[n - 1] = 0;
    assert(cor__bootline_parse(out, &m) == 0);
    same(&l, &m);
    return 0;
}

static void fuzz_grammar(const uint8_t *data, size_t size)
{
    char buf[COR_BOOT_BUF];
    size_t have = 0;
    while (size > 0) {
        size_t k = sizeof buf - have < size ? sizeof buf - have : size;
        memcpy(buf + have, data, k);
        data += k;
        size -= k;
        have += k;
        if (cor__bootline_take(buf, &have, grammar_line, NULL)) return;
        assert(have < COR_BOOT_LINE_MAX);
    }
}

/* ---- 1: the domain's reader ---------------------------------------------------------------- */

static int fuzz_size;

static void on_death(void *arg, int rank, const char *why)
{
    (void)arg;
    assert(rank >= 0 && rank < fuzz_size);
    assert(why && strlen(why) < COR_BOOT_LINE_MAX);
}

static void check_domain(const struct corrun_boot *b)
{
    assert(b->ndead >= 0 && b->ndead <= b->base.size);
    assert(b->released <= (unsigned)COR_BOOT_SEQ_MAX);
    assert(strnlen(b->err, sizeof b->err) < sizeof b->err);
    if (b->table_ready) {
        assert(!b->table_open && b->table && b->table_n >= 1 && b->table_n <= COR_BOOT_MAX_ADDRS);
        assert(b->table_got == b->base.size * b->table_n);
        for (int i = 0; i < b->table_got; i++) {
            const struct cor_boot_addr *a = &b->table[i];
            assert(b->table_seen[i]);
            assert(strnlen(a->addr, sizeof a->addr) < sizeof a->addr);
            assert(strnlen(a->route, sizeof a->route) < sizeof a->route);
            assert(cor__bootline_route_ok(a->route));
            assert(a->port_index >= -COR_BOOT_PORT_LIMIT && a->port_index <= COR_BOOT_PORT_LIMIT);
        }
    }
}

static void fuzz_domain(const uint8_t *data, size_t size)
{
    if (size < 2) return;
    fuzz_size = 1 + (data[0] & 7);
    int rank = (data[0] >> 3 & 15) % fuzz_size, sealed = data[0] >> 7;
    size_t chunk = 1 + (size_t)data[1];
    data += 2;
    size -= 2;
    struct corrun_boot *b = boot_alloc(rank, fuzz_size);
    if (!b) return;
    b->listener.fn = on_death; /* the core's death callback (cor__boot_listener_set) */
    if (sealed) {
        unsigned char zero[COR_BOOT_KEY_BYTES] = {0}, nd[COR_BOOT_KEY_BYTES];
        memset(nd, 0x11, sizeof nd);
        cor__boot_chan_init(&b->tx, zero, COR_BOOT_ROLE_DOMAIN, zero, nd);
        cor__boot_chan_init(&b->rx, zero, COR_BOOT_ROLE_CORRUN, zero, nd);
        b->sealed = 1;
    }
    char buf[COR_BOOT_BUF];
    size_t have = 0;
    while (size > 0) {
        size_t k = chunk < size ? chunk : size;
        if (k > sizeof buf - have) k = sizeof buf - have;
        memcpy(buf + have, data, k);
        data += k;
        size -= k;
        have += k;
        const char *why = boot_take_lines(b, buf, &have);
        check_domain(b);
        if (why) break;
        assert(have < COR_BOOT_LINE_MAX);
    }
    boot_free(b);
}

/* ---- 2: cor-run's connections -------------------------------------------------------------- */

#define FUZZ_CONNS 8

/* What an unproven TCP connection was sent: only these lines. */
static void check_unproven_output(const struct conn *c)
{
    size_t i = c->out_off;
    while (i < c->out_len) {
        const char *line = c->out + i;
        const char *nl = memchr(line, '\n', c->out_len - i);
        assert(nl);
        assert(!strncmp(line, "CHALLENGE ", 10) || !strncmp(line, "PROVEN ", 7) ||
               !strncmp(line, "ERR", 3));
        i += (size_t)(nl - line) + 1;
    }
}

static void check_corrun(void)
{
    unsigned min_barrier = UINT_MAX;
    for (int r = 0; r < g.n; r++) {
        const struct domain *d = &g.dom[r];
        assert(d->naddr >= 0 && d->naddr <= MAX_ADDRS);
        assert(!d->published || d->naddr >= 1);
        for (int k = 0; k < d->naddr; k++) {
            assert(cor__bootline_route_ok(d->addrs[k].route));
            assert(strnlen(d->addrs[k].addr, sizeof d->addrs[k].addr) < sizeof d->addrs[k].addr);
        }
        if (d->conn >= 0) {
            assert(d->conn < g.nconns && g.conns[d->conn].rank == r && d->joined);
            assert(g.conns[d->conn].fd >= 0);
        }
        if (d->barrier < min_barrier) min_barrier = d->barrier;
    }
    assert(g.released <= min_barrier);
    for (int i = 0; i < g.nconns; i++) {
        const struct conn *c = &g.conns[i];
        assert(c->rank >= -1 && c->rank < g.n);
        assert(c->in_len < LINE_MAX_);
        if (c->fd >= 0 && c->rank >= 0) assert(g.dom[c->rank].conn == i);
        if (c->tcp && !c->authed) {
            assert(c->rank < 0);
            check_unproven_output(c);
        }
    }
}

static void fuzz_corrun(const uint8_t *data, size_t size)
{
    if (size < 2) return;
    memset(&g, 0, sizeof g);
    g.n = 1 + data[0] % 4;
    unsigned tcp_mask = data[1];
    g.cookie = 0x0123456789abcdefULL;
    g.grace = 1;
    g.lfd = g.sigr = g.sigw = g.relay_fd = g.epfd = -1;
    g.dom = calloc((size_t)g.n, sizeof *g.dom);
    g.conns = calloc(FUZZ_CONNS, sizeof *g.conns);
    assert(g.dom && g.conns);
    for (int r = 0; r < g.n; r++) {
        g.dom[r].rank = r;
        g.dom[r].state = D_RUNNING;
        g.dom[r].conn = -1;
    }
    g.nconns = g.conns_cap = FUZZ_CONNS;
    g.nanon = FUZZ_CONNS; /* none joined yet */
    for (int i = 0; i < FUZZ_CONNS; i++) {
        struct conn *c = &g.conns[i];
        c->fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        c->rank = -1;
        assert(c->fd >= 0);
        if (tcp_mask >> i & 1) {
            g.tcp = 1;
            c->tcp = 1;
            c->authed = i & 1; /* the odd ones start proven: what follows is fuzzed too */
            if (c->authed) {
                unsigned char nd[COR_BOOT_KEY_BYTES];
                memset(nd, 0x11, sizeof nd);
                cor__boot_chan_init(&c->tx, g.secret, COR_BOOT_ROLE_CORRUN, c->nonce, nd);
                cor__boot_chan_init(&c->rx, g.secret, COR_BOOT_ROLE_DOMAIN, c->nonce, nd);
                c->sealed = 1;
            }
        }
    }
    data += 2;
    size -= 2;
    while (size >= 2) {
        int ci = data[0] & 7;
        size_t len = data[1];
        data += 2;
        size -= 2;
        if (len > size) len = size;
        struct conn *c = &g.conns[ci];
        while (len > 0 && c->fd >= 0) {
            size_t k = sizeof c->in - c->in_len;
            if (k > len) k = len;
            memcpy(c->in + c->in_len, data, k);
            c->in_len += k;
            data += k;
            size -= k;
            len -= k;
            if (conn_take_lines(ci)) conn_close(ci);
            check_corrun();
        }
        data += len; /* the rest of a record for a closed connection */
        size -= len;
    }
    for (int i = 0; i < FUZZ_CONNS; i++)
        conn_close(i);
    for (int r = 0; r < g.n; r++)
        free(g.dom[r].addrs);
    free(g.dom);
    free(g.conns);
    free(g.dirty);
    free(g.table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_grammar(data + 1, size - 1);
        break;
    case 1:
        fuzz_domain(data + 1, size - 1);
        break;
    default:
        fuzz_corrun(data + 1, size - 1);
    }
    return 0;
}
