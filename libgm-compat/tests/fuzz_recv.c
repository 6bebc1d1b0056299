/*
 * libFuzzer target for libgm-compat's receive side: the message headers that arrive on the
 * eager channel (eager_arrived), the per-sender stream ordering they drive (stream_arrive,
 * seq/base, duplicates, restarts), and the item checks (process: kind, size, lengths). Includes
 * src/recv.c with the rest of the library replaced by small stand-ins below (no libfabric
 * provider: posted receives are only recorded); built by `make fuzz`
 * (tests/fuzz at the top of the tree), run by tests/fuzz/run.sh.
 *
 * Input: a sequence of operations, each chosen by one byte:
 *   0 len(2) bytes  a raw eager message (header and payload as sent on the wire)
 *   1 k s q n e l(2) a well-formed-ish header: kind k, size s, prio/seq/base q, sender n,
 *                   epoch e, payload l bytes (zeros)
 *   2 s q           the client provides a receive buffer of size s, priority q
 *   3 l t           the oldest posted DATA receive completes with l bytes (t: truncated)
 *   4               buffers were provided: retry the streams that wait
 *   5 d(8) len(2)   a short-form eager message (gmx_short): remote CQ data d (little endian),
 *                   then len payload bytes
 * Checks beyond the sanitizers (and leaks): the held lists stay sorted and their tails right.
 */
#include "../src/recv.c"

#include <assert.h>

struct gmx_config gmx_cfg;
atomic_int gmx_backlogged_ports;
atomic_int gmx_open_ports;

/* Every request and bounce buffer made here, freed after each input. */
#define FUZZ_MAX 4096
static void *fuzz_mem[FUZZ_MAX];
static unsigned fuzz_nmem;

static void *fuzz_alloc(size_t n)
{
    if (fuzz_nmem == FUZZ_MAX) return NULL;
    void *m = calloc(1, n);
    if (m) fuzz_mem[fuzz_nmem++] = m;
    return m;
}

struct gmx_rreq *gmx_rreq_get(struct gm_port *p)
{
    (void)p;
    struct gmx_rreq *r = fuzz_alloc(sizeof *r);
    if (r) r->is_recv = 1;
    return r;
}

void gmx_rreq_put(struct gm_port *p, struct gmx_rreq *r)
{
    (void)p;
    r->kind = (enum gmx_rreq_kind) - 1; /* returned: must not be used again */
}

#define FUZZ_NODES 2
static struct gmx_peer *fuzz_peers[FUZZ_NODES][4];

struct gmx_peer *gmx_peer_get(struct gm_port *p, unsigned node, unsigned port)
{
    (void)p;
    if (node >= FUZZ_NODES || port >= 4) return NULL;
    if (!fuzz_peers[node][port]) {
        struct gmx_peer *peer = fuzz_alloc(sizeof *peer);
        if (!peer) return NULL;
        peer->node = node;
        peer->port = port;
        fuzz_peers[node][port] = peer;
    }
    return fuzz_peers[node][port];
}

int gmx_peer_resolve(struct gm_port *p, struct gmx_peer *peer)
{
    (void)p, (void)peer;
    return 0;
}

uint64_t gmx_now_ns(void)
{
    return 1;
}

uint64_t gmx_coarse_ns(void)
{
    return 1;
}

void gmx_send_done(struct gm_port *p, struct gmx_sreq *s, gm_status_t st)
{
    (void)p, (void)s, (void)st;
}

void gmx_backlog_progress(struct gm_port *p)
{
    (void)p;
}

void gmx_watch_progress(struct gm_port *p)
{
    (void)p;
}

void gmx_help_others(struct gm_port *self)
{
    (void)self;
}

int gmx_send_internal(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                      uint64_t tag)
{
    (void)p, (void)peer, (void)buf, (void)len, (void)tag;
    return 0;
}

void gmx_send_failed(struct gm_port *p, struct gmx_sreq *s, gm_status_t st)
{
    (void)p, (void)s, (void)st;
}

int gmx_send_retry(struct gm_port *p, struct gmx_sreq *s)
{
    (void)p, (void)s;
    return 0;
}

int gmx_send_ctl(struct gm_port *p, struct gmx_peer *peer, const struct gmx_hdr *h)
{
    (void)p, (void)peer, (void)h;
    return 0;
}

void gmx_key_learn(struct gmx_peer *peer, const struct gmx_hdr *h)
{
    (void)peer, (void)h;
}

void gmx_key_forget(struct gmx_peer *peer, uint64_t base)
{
    (void)peer, (void)base;
}

void gmx_ack_arrived_low(struct gm_port *p, struct gmx_peer *peer, unsigned prio, unsigned low)
{
    (void)p, (void)peer, (void)prio, (void)low;
}

void gmx_send_local_done(struct gm_port *p, struct gmx_sreq *s)
{
    (void)p, (void)s;
}

void gmx_ack_arrived(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                     gm_status_t st)
{
    (void)p, (void)peer, (void)prio, (void)seq, (void)st;
}

int gmx_region_covers(struct gm_port *p, uint64_t addr, uint64_t len)
{
    (void)p, (void)addr, (void)len;
    return 0; /* every put and get is refused: nothing is written at a received address */
}

struct gmx_region *gmx_region_find(struct gm_port *p, uint64_t addr, uint64_t len)
{
    (void)p, (void)addr, (void)len;
    return NULL;
}

int gmx_region_export(struct gm_port *p, struct gmx_region *g)
{
    (void)p, (void)g;
    return -1;
}

void gmx_deferred_free(struct gm_port *p, int all)
{
    (void)p, (void)all;
}

gm_status_t gmx_status_from_fi(int fi_err, const struct gmx_peer *peer)
{
    (void)fi_err, (void)peer;
    return GM_FAILURE;
}

/* The provider: posted receives are recorded (oldest first), cancels forget them. */
static struct gmx_rreq *fuzz_posted[FUZZ_MAX];
static unsigned fuzz_nposted;

static ssize_t fuzz_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
                          uint64_t tag, uint64_t ignore, void *context)
{
    (void)ep, (void)buf, (void)len, (void)desc, (void)src_addr, (void)tag, (void)ignore;
    if (fuzz_nposted == FUZZ_MAX) return -FI_EAGAIN;
    fuzz_posted[fuzz_nposted++] = context;
    return 0;
}

static ssize_t fuzz_cancel(struct fid *fid, void *context)
{
    (void)fid;
    for (unsigned i = 0; i < fuzz_nposted; i++)
        if (fuzz_posted[i] == context) {
            memmove(&fuzz_posted[i], &fuzz_posted[i + 1],
                    (fuzz_nposted - i - 1) * sizeof *fuzz_posted);
            fuzz_nposted--;
            break;
        }
    return 0;
}

static struct fi_ops_tagged fuzz_tagged_ops = {.size = sizeof fuzz_tagged_ops, .recv = fuzz_trecv};
static struct fi_ops_ep fuzz_ep_ops = {.size = sizeof fuzz_ep_ops, .cancel = fuzz_cancel};

/* transport.c's calls, on the stand-in endpoint above. */
ssize_t gmx_tp_recv(struct gm_port *p, void *buf, size_t len, uint64_t tag, uint64_t ignore,
                    void *ctx)
{
    return fi_trecv(p->ep, buf, len, NULL, FI_ADDR_UNSPEC, tag, ignore, ctx);
}

void gmx_tp_cancel(struct gm_port *p, void *ctx)
{
    fi_cancel(&p->ep->fid, ctx);
}

ssize_t gmx_tp_cq_read(struct gm_port *p, struct fi_cq_tagged_entry *ce, size_t n)
{
    (void)p, (void)ce, (void)n;
    return -FI_EAGAIN;
}

int gmx_tp_cq_readerr(struct gm_port *p, struct fi_cq_err_entry *err)
{
    (void)p, (void)err;
    return 0;
}

int gmx_shm_deferred(struct gmx_shm *sh)
{
    (void)sh;
    return 0;
}

const char *fi_strerror(int errnum)
{
    (void)errnum;
    return "error";
}

static void check_peer(const struct gmx_peer *peer)
{
    for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++) {
        const struct gmx_rreq *last = NULL;
        for (const struct gmx_rreq *r = peer->held[prio]; r; r = r->next) {
            assert(r->kind == GMX_R_EAGER);
            if (last)
                assert(seq_diff(r->seq, peer->recv_seq[prio]) >
                       seq_diff(last->seq, peer->recv_seq[prio]));
            last = r;
        }
        assert(peer->held_tail[prio] == last);
    }
}

static size_t take(const uint8_t **data, size_t *size, size_t n, uint8_t *out)
{
    size_t k = n < *size ? n : *size;
    memset(out, 0, n);
    memcpy(out, *data, k);
    *data += k;
    *size -= k;
    return k;
}

static struct gmx_rreq *bounce(struct gm_port *p)
{
    struct gmx_rreq *r = p->bfree;
    if (r) {
        p->bfree = r->next;
    } else {
        r = gmx_rreq_get(p);
        if (!r || !(r->buf = fuzz_alloc(GMX_BOUNCE_LEN))) return NULL;
        r->kind = GMX_R_EAGER;
    }
    r->next = NULL;
    r->truncated = 0;
    r->short_form = 0;
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fid_ep ep = {.ops = &fuzz_ep_ops, .tagged = &fuzz_tagged_ops};
    struct gm_port *p = calloc(1, sizeof *p);
    assert(p);
    p->ep = &ep;
    p->epoch = 7;
    p->rma = p->mr_virt = 1; /* keyed puts by messages: the wire's key is checked */
    p->ring_cap = 4;
    p->ring = malloc(p->ring_cap * sizeof *p->ring);
    for (unsigned prio = 0; prio < GM_NUM_PRIORITIES; prio++)
        p->acceptable[prio] = ~(gm_size_t)0;
    uint8_t a[8];
    while (size > 0) {
        take(&data, &size, 1, a);
        switch (a[0] % 6) {
        case 0:
        case 5: { /* 5: a short form, its CQ data first */
            int short_form = a[0] % 6 == 5;
            uint64_t cqdata = 0;
            if (short_form) {
                uint8_t d[8];
                take(&data, &size, 8, d);
                for (int i = 7; i >= 0; i--)
                    cqdata = cqdata << 8 | d[i];
            }
            take(&data, &size, 2, a);
            size_t len = (size_t)(a[0] | a[1] << 8) % (GMX_BOUNCE_LEN + 1);
            struct gmx_rreq *r = bounce(p);
            if (!r) goto out;
            memset(r->buf, 0, GMX_BOUNCE_LEN);
            r->rlen = take(&data, &size, len, r->buf);
            r->short_form = short_form;
            r->cqdata = cqdata;
            p->bposted++;
            recv_done(p, r);
            break;
        }
        case 1: {
            take(&data, &size, 7, a);
            struct gmx_rreq *r = bounce(p);
            if (!r) goto out;
            struct gmx_hdr h = {.kind = a[0] % 12,
                                .size = a[1] % 32,
                                .prio = a[2] & 1,
                                .node = (a[3] >> 2) % FUZZ_NODES,
                                .port = a[3] & 3,
                                .seq = (a[2] >> 1) & 7,
                                .base = (a[2] >> 4) & 7,
                                .epoch = a[4] & 1,
                                .aepoch = 7};
            size_t len = (size_t)(a[5] | a[6] << 8) % (GMX_EAGER_MAX + 1);
            h.len = len;
            memset(r->buf, 0, GMX_BOUNCE_LEN);
            memcpy(r->buf, &h, sizeof h);
            r->rlen = sizeof h + (h.kind == GMX_K_MSG || h.kind == GMX_K_PUT ? len : 0);
            p->bposted++;
            recv_done(p, r);
            break;
        }
        case 2: {
            take(&data, &size, 2, a);
            unsigned sz = a[0] % 32;
            void *buf = sz >= GMX_MIN_SIZE && sz <= GMX_MAX_SIZE && sz <= 16
                            ? fuzz_alloc(gm_max_length_for_size(sz))
                            : NULL;
            if (buf) provide_locked(p, buf, sz, a[1] & 1, a[1] >> 1);
            break;
        }
        case 3: {
            take(&data, &size, 2, a);
            if (fuzz_nposted == 0) break;
            struct gmx_rreq *r = fuzz_posted[0];
            memmove(&fuzz_posted[0], &fuzz_posted[1], --fuzz_nposted * sizeof *fuzz_posted);
            r->posted = 0;
            r->rlen = a[0] * 16u < r->post_len ? a[0] * 16u : r->post_len;
            r->truncated = a[1] & 1;
            recv_done(p, r);
            break;
        }
        case 4:
            retry_waiting(p);
            break;
        }
        for (unsigned n = 0; n < FUZZ_NODES; n++)
            for (unsigned q = 0; q < 4; q++)
                if (fuzz_peers[n][q]) check_peer(fuzz_peers[n][q]);
    }
out:
    for (unsigned i = 0; i < fuzz_nmem; i++)
        free(fuzz_mem[i]);
    fuzz_nmem = 0;
    fuzz_nposted = 0;
    memset(fuzz_peers, 0, sizeof fuzz_peers);
    free(p->ring);
    free(p);
    return 0;
}
