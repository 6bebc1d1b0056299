/*
 * libFuzzer target for the domain's side of the bootstrap protocol: the lines cor-run sends
 * (WELCOME, TABLE, A, END, RELEASE, DEAD, ERR, BYE), as the reader thread takes them from its
 * socket. Includes boot.c and bootstrap.c to reach its static parser (boot_take_lines and
 * handle_line); built and run by core/run-fuzz.sh.
 *
 * Input: byte 0 chooses the session size (1..8) and this domain's rank, byte 1 the size of
 * each read (1..256 bytes), the rest is the byte stream from cor-run. Checks beyond the
 * sanitizers: the buffer never holds a line too long, a death callback names a rank of the
 * session, and a finished table has every entry, each with a valid route and a terminated
 * address.
 */
#include "boot.c"
#include "bootstrap.c"

#include <assert.h>

static int fuzz_size;

static void on_death(void *arg, int rank, const char *why)
{
    (void)arg;
    assert(rank >= 0 && rank < fuzz_size);
    assert(why && strlen(why) < BOOT_LINE_MAX);
}

static void check(const struct corrun_boot *b)
{
    assert(b->ndead >= 0 && b->ndead <= b->base.size);
    assert(b->released <= 0x7fffffffu);
    assert(strnlen(b->err, sizeof b->err) < sizeof b->err);
    if (b->table_ready) {
        assert(!b->table_open && b->table && b->table_n >= 1 && b->table_n <= BOOT_MAX_ADDRS);
        assert(b->table_got == b->base.size * b->table_n);
        for (int i = 0; i < b->table_got; i++) {
            const struct cor_boot_addr *a = &b->table[i];
            assert(b->table_seen[i]);
            assert(strnlen(a->addr, sizeof a->addr) < sizeof a->addr);
            assert(strnlen(a->route, sizeof a->route) < sizeof a->route &&
                   cor__boot_route_name_ok(a->route));
            assert(a->port_index >= -1000000 && a->port_index <= 1000000);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    fuzz_size = 1 + (data[0] & 7);
    int rank = (data[0] >> 3) % fuzz_size;
    size_t chunk = 1 + (size_t)data[1];
    data += 2;
    size -= 2;
    struct corrun_boot *b = boot_alloc(rank, fuzz_size);
    if (!b) return 0;
    b->death_fn = on_death;
    char buf[BOOT_BUF];
    size_t have = 0;
    while (size > 0) {
        size_t k = chunk < size ? chunk : size;
        if (k > sizeof buf - have) k = sizeof buf - have;
        memcpy(buf + have, data, k);
        data += k;
        size -= k;
        have += k;
        const char *why = boot_take_lines(b, buf, &have);
        check(b);
        if (why) break;
        assert(have < BOOT_LINE_MAX);
    }
    boot_free(b);
    return 0;
}
