/*
 * libFuzzer target for libgm-compat's own shared-memory rings (src/shmring.c): the slots and
 * ring indices another process writes into a port's region, as the receiving port reads them
 * (drain: slot headers, fragments, message assembly, matching against posted receives,
 * unexpected messages, cancels).  Includes src/shmring.c; the region is ordinary memory here
 * and the input plays every sender.  Built by `make fuzz` (tests/fuzz at the top of the tree),
 * run by tests/fuzz/run.sh.
 *
 * Input: a sequence of operations, each chosen by one byte:
 *   0 c l(2) bytes   a raw slot (header and payload as a sender writes them) into channel c,
 *                    published (tail + 1, active bits set)
 *   1 c t f l(2) n(2) a well-formed-ish slot: tag t, first flag f, message length n, l zero bytes
 *   2 t l(2)          a receive is posted: tag t, buffer of l bytes
 *   3                 completions are read (and error completions)
 *   4 c x             channel c's tail is set to head + x (indices out of range included)
 *   5 k               the k-th receive still posted is cancelled
 *   6 c t n(2) a(2) p s  a slot by reference into channel c: tag t, message length n, at
 *                    address a of a sender's memory that is process p % 4 (1: a readable
 *                    8 KiB, 2: gone, 0 and 3: not readable), its state s % 4 (1: offered)
 * Checks beyond the sanitizers (and leaks): a completion names a posted receive and never
 * reports more bytes than its buffer holds; every posted receive completes at most once.
 */
#include <stdint.h>
#include <stddef.h>
static int fuzz_ref_read(uint32_t pid, char *dst, uint64_t addr, size_t n);
#define GMX_SHM_REF_READ fuzz_ref_read
#include "../src/shmring.c"

#include <assert.h>

struct gmx_config gmx_cfg;

void gmx_bell_ring(struct gmx_bell *b)
{
    (void)b;
}
struct gmx_bell *gmx_bell_map_peer(unsigned node, unsigned port)
{
    (void)node, (void)port;
    return NULL;
}
void gmx_bell_unmap(struct gmx_bell *b)
{
    (void)b;
}
/* Only gmx_shm_open reads a knob (GM_SHM_BY_REF); the target never opens a region. */
unsigned long gmx_knob_uint(int id)
{
    (void)id;
    return 0;
}
/* Only gmx_shm_open's RMA key seed reads the clock; the target never opens a region. */
uint64_t gmx_now_ns(void)
{
    return 0;
}

/* The senders' memory that slots by reference name: process 1's 8 KiB (its bytes are their
 * offsets), process 2 is gone, any other may not be read. */
static char sender_mem[8192];

static int fuzz_ref_read(uint32_t pid, char *dst, uint64_t addr, size_t n)
{
    if (pid == 2) return ESRCH;
    if (pid != 1) return EPERM;
    if (addr > sizeof sender_mem || n > sizeof sender_mem - addr) return EFAULT;
    memcpy(dst, sender_mem + addr, n);
    return 0;
}

#define CHANS_USED 4
#define MAX_POSTED 64

static char *region;
static struct {
    char *buf;
    size_t len;
    int posted;
} rx_ctx[MAX_POSTED];

static uint64_t tags[4] = {GMX_TAG_EAGER, 2ULL << GMX_TAG_KIND_SHIFT,
                           3ULL << GMX_TAG_KIND_SHIFT | 1ULL << GMX_TAG_NODE_SHIFT,
                           GMX_TAG_ERR | 3ULL << GMX_TAG_KIND_SHIFT};

static size_t take(const uint8_t **data, size_t *size, size_t n, uint8_t *out)
{
    size_t k = n < *size ? n : *size;
    memset(out, 0, n);
    memcpy(out, *data, k);
    *data += k;
    *size -= k;
    return k;
}

static void publish(struct gmx_shm *sh, unsigned c)
{
    atomic_fetch_add(&sh->chans[c].tail, 1);
    atomic_fetch_or(&sh->rh->active[c / 64], 1ULL << (c % 64));
    atomic_fetch_or(&sh->rh->summary, 1ULL << (c / 64));
}

static char *slot_at(struct gmx_shm *sh, unsigned c)
{
    uint64_t t = atomic_load(&sh->chans[c].tail);
    return sh->slots + (size_t)c * CHAN_BYTES + (size_t)(t % RING_SLOTS) * RING_SLOT;
}

static void check_completions(struct gmx_shm *sh)
{
    struct fi_cq_tagged_entry ce[8];
    ssize_t n;
    while ((n = gmx_shm_cq_read(sh, ce, 8)) > 0 || n == -FI_EAVAIL) {
        for (ssize_t i = 0; i < n; i++) {
            uintptr_t k = (uintptr_t)ce[i].op_context - 1;
            assert(k < MAX_POSTED && rx_ctx[k].posted);
            assert(ce[i].len <= rx_ctx[k].len);
            rx_ctx[k].posted = 0;
        }
        struct fi_cq_err_entry err;
        while (gmx_shm_cq_readerr(sh, &err)) {
            uintptr_t k = (uintptr_t)err.op_context - 1;
            assert(k < MAX_POSTED && rx_ctx[k].posted);
            assert(err.len <= rx_ctx[k].len);
            rx_ctx[k].posted = 0;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!region) {
        for (size_t i = 0; i < sizeof sender_mem; i++)
            sender_mem[i] = (char)i;
        region =
            mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert(region != MAP_FAILED);
    }
    memset(region, 0, SLOTS_OFF);
    struct gmx_shm *sh = calloc(1, sizeof *sh);
    assert(sh);
    sh->cq.size = sizeof(struct fi_cq_tagged_entry);
    sh->errq.size = sizeof(struct fi_cq_err_entry);
    sh->base = region;
    sh->rh = (struct ring_head *)region;
    sh->chans = (struct ring_chan *)(region + CTL_OFF);
    sh->slots = region + SLOTS_OFF;
    uint8_t a[8];
    while (size) {
        take(&data, &size, 1, a);
        switch (a[0] % 7) {
        case 0: {
            take(&data, &size, 3, a);
            unsigned c = a[0] % CHANS_USED;
            size_t l = (size_t)(a[1] | a[2] << 8) % RING_SLOT;
            char *slot = slot_at(sh, c);
            memset(slot, 0, RING_SLOT);
            take(&data, &size, l, (uint8_t *)slot);
            publish(sh, c);
            break;
        }
        case 1: {
            take(&data, &size, 7, a);
            unsigned c = a[0] % CHANS_USED;
            struct slot_hdr h = {.tag = tags[a[1] % 4],
                                 .first = a[2] % 3,
                                 .len = (uint32_t)(a[3] | a[4] << 8),
                                 .total = (uint64_t)(a[5] | a[6] << 8)};
            char *slot = slot_at(sh, c);
            memset(slot, 0, RING_SLOT);
            memcpy(slot, &h, sizeof h);
            publish(sh, c);
            break;
        }
        case 2: {
            take(&data, &size, 3, a);
            unsigned k = 0;
            while (k < MAX_POSTED && (rx_ctx[k].posted || rx_ctx[k].buf))
                k++;
            if (k == MAX_POSTED) break;
            size_t l = (size_t)(a[1] | a[2] << 8);
            rx_ctx[k].buf = malloc(l ? l : 1);
            rx_ctx[k].len = l;
            rx_ctx[k].posted = 1;
            uint64_t t = tags[a[0] % 4];
            uint64_t ignore = a[0] & 4 ? GMX_TAG_ERR : 0;
            assert(gmx_shm_recv(sh, rx_ctx[k].buf, l, t, ignore, (void *)(uintptr_t)(k + 1)) == 0);
            break;
        }
        case 3:
            check_completions(sh);
            break;
        case 4: {
            take(&data, &size, 2, a);
            unsigned c = a[0] % CHANS_USED;
            atomic_store(&sh->chans[c].tail, sh->heads[c] + a[1]);
            publish(sh, c);
            atomic_fetch_sub(&sh->chans[c].tail, 1);
            break;
        }
        case 5: {
            take(&data, &size, 1, a);
            unsigned n = a[0] % MAX_POSTED, k;
            for (k = 0; k < MAX_POSTED; k++)
                if (rx_ctx[k].posted && n-- == 0) break;
            if (k < MAX_POSTED) gmx_shm_cancel(sh, (void *)(uintptr_t)(k + 1));
            break;
        }
        case 6: {
            take(&data, &size, 8, a);
            unsigned c = a[0] % CHANS_USED;
            struct slot_hdr h = {.tag = tags[a[1] % 4],
                                 .first = SLOT_REF,
                                 .len = sizeof(struct slot_ref),
                                 .total = (uint64_t)(a[2] | a[3] << 8)};
            char *slot = slot_at(sh, c);
            memset(slot, 0, RING_SLOT);
            memcpy(slot, &h, sizeof h);
            struct slot_ref *r = (struct slot_ref *)(slot + sizeof h);
            r->addr = (uint64_t)(a[4] | a[5] << 8);
            r->pid = a[6] % 4;
            atomic_store(&r->state, a[7] % 4);
            publish(sh, c);
            break;
        }
        }
    }
    check_completions(sh);
    shm_free_state(sh);
    free(sh);
    for (unsigned k = 0; k < MAX_POSTED; k++) {
        free(rx_ctx[k].buf);
        rx_ctx[k].buf = NULL;
        rx_ctx[k].posted = 0;
    }
    for (unsigned c = 0; c < CHANS_USED; c++)
        memset(region + SLOTS_OFF + (size_t)c * CHAN_BYTES, 0, CHAN_BYTES);
    return 0;
}
