/*
 * libFuzzer target for cor-run's side of the bootstrap protocol: the lines domains send
 * (HELLO, ADDR, PUB, BARRIER, FINISH) on several connections at once, as cor-run's poll loop
 * takes them from its sockets. Includes apps/cor-run.c (its main renamed) to reach the static
 * parser (conn_take_lines, handle_line) and the session state it drives; built and run by
 * proc/run-fuzz.sh. No process is started or signaled: every domain has pid 0.
 *
 * Input: byte 0 chooses the number of domains (1..4); then records of [connection (low 3
 * bits), length, bytes], each fed to that connection as one read. Session cookie:
 * 0123456789abcdef. A connection the parser drops is closed as cor-run closes it. Checks
 * beyond the sanitizers: what the session state says about ranks, connections, addresses and
 * barriers stays consistent.
 */
#define main cor_run_main
#include "cor-run.c"
#undef main

#include <assert.h>

#define FUZZ_CONNS 8

static void check_state(void)
{
    unsigned min_barrier = UINT_MAX;
    for (int r = 0; r < g.n; r++) {
        const struct domain *d = &g.dom[r];
        assert(d->naddr >= 0 && d->naddr <= MAX_ADDRS);
        assert(!d->published || d->naddr >= 1);
        for (int k = 0; k < d->naddr; k++) {
            assert(route_name_ok(d->addrs[k].route));
            assert(hex_ok(d->addrs[k].hex));
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
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    memset(&g, 0, sizeof g);
    g.n = 1 + data[0] % 4;
    g.cookie = 0x0123456789abcdefULL;
    g.grace = 1;
    g.lfd = g.sigr = g.sigw = -1;
    g.dom = calloc((size_t)g.n, sizeof *g.dom);
    g.conns = calloc(FUZZ_CONNS, sizeof *g.conns);
    assert(g.dom && g.conns);
    for (int r = 0; r < g.n; r++) {
        g.dom[r].rank = r;
        g.dom[r].state = D_RUNNING;
        g.dom[r].conn = -1;
    }
    g.nconns = g.conns_cap = FUZZ_CONNS;
    for (int i = 0; i < FUZZ_CONNS; i++) {
        g.conns[i].fd = open("/dev/null", O_WRONLY | O_CLOEXEC); /* takes what is queued */
        g.conns[i].rank = -1;
        assert(g.conns[i].fd >= 0);
    }
    data++;
    size--;
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
            check_state();
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
    return 0;
}
