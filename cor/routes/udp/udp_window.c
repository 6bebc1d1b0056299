/* Send and receive windows of CoRudpRoute (pure logic; see udp_window.h). */
#include <stdlib.h>
#include <string.h>

#include "udp_window.h"

/* Holes need this many selectively acknowledged datagrams above them for a fast resend
 * (fewer, and reordering would cause needless resends). */
#define UDP_DUPTHRESH 3
/* Lower bound of the variance term, so a very steady RTT does not make the timer hair-trigger. */
#define UDP_RTO_VAR_MIN_NS 200000ull

static int pow2(uint32_t n)
{
    return n >= 2 && n <= 65536 && (n & (n - 1)) == 0;
}

int udp_swin_init(struct udp_swin *sw, uint32_t limit, uint64_t rto_init, uint64_t rto_min,
                  uint64_t rto_max)
{
    memset(sw, 0, sizeof(*sw));
    if (!pow2(limit) || rto_min == 0 || rto_min > rto_max) return -1;
    uint32_t size = limit < UDP_SWIN_FIRST ? limit : UDP_SWIN_FIRST;
    sw->slot = calloc(size, sizeof(*sw->slot));
    if (!sw->slot) return -1;
    sw->limit = limit;
    sw->size = size;
    sw->mask = size - 1;
    sw->rto_min = rto_min;
    sw->rto_max = rto_max;
    sw->rto = rto_init < rto_min ? rto_min : rto_init > rto_max ? rto_max : rto_init;
    return 0;
}

void udp_swin_free(struct udp_swin *sw)
{
    free(sw->slot);
    memset(sw, 0, sizeof(*sw));
}

struct udp_sslot *udp_swin_at(struct udp_swin *sw, uint32_t seq)
{
    if (udp_seq_lt(seq, sw->una) || !udp_seq_lt(seq, sw->nxt)) return NULL;
    return &sw->slot[seq & sw->mask];
}

/* Doubles the ring (up to limit), keeping every in-flight slot at its seq's new index.
 * Returns 0, or -1 when it is as large as it may be or memory ran out (nothing changed). */
static int swin_grow(struct udp_swin *sw)
{
    if (sw->size >= sw->limit) return -1;
    uint32_t size = sw->size * 2;
    struct udp_sslot *slot = calloc(size, sizeof(*slot));
    if (!slot) return -1;
    for (uint32_t seq = sw->una; seq != sw->nxt; seq++)
        slot[seq & (size - 1)] = sw->slot[seq & sw->mask];
    free(sw->slot);
    sw->slot = slot;
    sw->size = size;
    sw->mask = size - 1;
    return 0;
}

uint32_t udp_swin_reserve(struct udp_swin *sw, uint32_t want)
{
    while (sw->size - udp_swin_inflight(sw) < want && swin_grow(sw) == 0)
        ;
    uint32_t fit = sw->size - udp_swin_inflight(sw);
    return fit < want ? fit : want;
}

struct udp_sslot *udp_swin_add(struct udp_swin *sw, void *frame, uint32_t off, uint32_t len,
                               int last, uint64_t now)
{
    if (udp_swin_room(sw) == 0 || udp_swin_reserve(sw, 1) == 0) return NULL;
    if (udp_swin_inflight(sw) == 0)
        sw->last_progress_ns = now; /* the dead-peer clock starts with the first datagram */
    struct udp_sslot *s = &sw->slot[sw->nxt & sw->mask];
    *s = (struct udp_sslot){
        .frame = frame, .off = off, .len = len, .sent_ns = now, .tx = 1, .last = (uint8_t) !!last};
    sw->nxt++;
    sw->bytes += len;
    return s;
}

void udp_swin_resent(struct udp_swin *sw, uint32_t seq, uint64_t now)
{
    struct udp_sslot *s = udp_swin_at(sw, seq);
    if (!s) return;
    s->sent_ns = now;
    if (s->tx < UINT16_MAX) s->tx++;
    sw->retransmits++;
}

uint64_t udp_rtt_feed(uint64_t *srtt, uint64_t *rttvar, uint64_t r)
{
    if (*srtt == 0) {
        *srtt = r ? r : 1;
        *rttvar = r / 2;
    } else {
        uint64_t err = *srtt > r ? *srtt - r : r - *srtt;
        *rttvar = (3 * *rttvar + err) / 4;
        *srtt = (7 * *srtt + r) / 8;
        if (*srtt == 0) *srtt = 1;
    }
    uint64_t var = 4 * *rttvar;
    if (var < UDP_RTO_VAR_MIN_NS) var = UDP_RTO_VAR_MIN_NS;
    return *srtt + var;
}

void udp_swin_rtt(struct udp_swin *sw, uint64_t r)
{
    uint64_t rto = udp_rtt_feed(&sw->srtt, &sw->rttvar, r);
    sw->rto = rto < sw->rto_min ? sw->rto_min : rto > sw->rto_max ? sw->rto_max : rto;
}

void udp_swin_rto_hint(struct udp_swin *sw, uint64_t rto)
{
    if (sw->srtt) return; /* its own samples know better */
    if (rto > sw->rto_max) rto = sw->rto_max;
    if (rto > sw->rto) sw->rto = rto;
}

int udp_swin_ack(struct udp_swin *sw, uint32_t ack, uint64_t sack, uint64_t now,
                 udp_release_fn release, void *ctx)
{
    if (udp_seq_lt(ack, sw->una) || udp_seq_lt(sw->nxt, ack)) return -1;
    int progressed = 0, released = 0;
    while (sw->una != ack) {
        struct udp_sslot *s = &sw->slot[sw->una & sw->mask];
        sw->bytes -= s->len;
        sw->una++;
        released++;
        if (release) release(ctx, s);
        memset(s, 0, sizeof(*s));
    }
    if (released) progressed = 1;
    for (int i = 0; i < 64 && sack; i++, sack >>= 1) {
        if (!(sack & 1)) continue;
        uint32_t seq = ack + 1 + (uint32_t)i;
        if (!udp_seq_lt(seq, sw->nxt)) break;
        struct udp_sslot *s = &sw->slot[seq & sw->mask];
        if (!s->sacked) {
            s->sacked = 1;
            progressed = 1;
        }
    }
    if (progressed) sw->last_progress_ns = now;
    return released;
}

int udp_swin_fast(struct udp_swin *sw, uint64_t now, uint32_t *out, int max)
{
    /* Walk down from the newest datagram counting acknowledged ones above each hole. */
    int n = 0, above = 0;
    uint64_t quiet = sw->srtt ? sw->srtt : sw->rto_min;
    uint32_t inflight = udp_swin_inflight(sw);
    uint32_t span = inflight < 65 ? inflight : 65; /* sack covers una+1 .. una+64 */
    for (uint32_t k = span; k-- > 0 && n < max;) {
        uint32_t seq = sw->una + k;
        struct udp_sslot *s = &sw->slot[seq & sw->mask];
        if (s->sacked) {
            above++;
            continue;
        }
        if (above >= UDP_DUPTHRESH && now >= s->sent_ns && now - s->sent_ns >= quiet)
            out[n++] = seq;
    }
    return n;
}

uint64_t udp_swin_deadline(const struct udp_swin *sw)
{
    if (udp_swin_inflight(sw) == 0) return 0;
    return sw->slot[sw->una & sw->mask].sent_ns + sw->rto;
}

int udp_swin_timeout(struct udp_swin *sw, uint64_t now, uint32_t *out, int max)
{
    uint64_t dl = udp_swin_deadline(sw);
    if (dl == 0 || now < dl) return 0;
    int n = 0;
    for (uint32_t seq = sw->una; udp_seq_lt(seq, sw->nxt) && n < max; seq++) {
        struct udp_sslot *s = &sw->slot[seq & sw->mask];
        if (!s->sacked && now - s->sent_ns >= sw->rto) out[n++] = seq;
    }
    if (!sw->in_recovery) sw->rto_before = sw->rto;
    sw->rto = sw->rto * 2 > sw->rto_max ? sw->rto_max : sw->rto * 2;
    sw->in_recovery = 1;
    sw->recover = sw->nxt;
    sw->recover_ns = now;
    return n;
}

void udp_swin_echo(struct udp_swin *sw, uint64_t sent_ns)
{
    /* Resends leave at recover_ns or later; originals at least rto_min before it. */
    if (sw->in_recovery && sent_ns + sw->rto_min / 2 < sw->recover_ns) {
        sw->in_recovery = 0;
        sw->rto = sw->rto_before;
        sw->spurious++;
    }
}

int udp_swin_recovery(struct udp_swin *sw, int released, uint32_t *out, int max)
{
    if (!sw->in_recovery || released <= 0) return 0;
    if (!udp_seq_lt(sw->una, sw->recover)) {
        sw->in_recovery = 0;
        return 0;
    }
    int want = 2 * released + 2;
    if (want > max) want = max;
    int n = 0;
    for (uint32_t seq = sw->una; udp_seq_lt(seq, sw->recover) && n < want; seq++) {
        struct udp_sslot *s = &sw->slot[seq & sw->mask];
        if (!s->sacked && s->sent_ns < sw->recover_ns) out[n++] = seq;
    }
    return n;
}

int udp_swin_dead(const struct udp_swin *sw, uint64_t now, uint64_t dead_ns)
{
    return udp_swin_inflight(sw) && now > sw->last_progress_ns &&
           now - sw->last_progress_ns >= dead_ns;
}

int udp_rwin_init(struct udp_rwin *rw, uint32_t limit, size_t max_bytes)
{
    memset(rw, 0, sizeof(*rw));
    if (!pow2(limit)) return -1;
    rw->limit = limit;
    rw->max_bytes = max_bytes;
    return 0;
}

void udp_rwin_free(struct udp_rwin *rw)
{
    for (uint32_t i = 0; i < rw->size; i++)
        if (rw->slot[i]) {
            free(rw->slot[i]->data);
            free(rw->slot[i]);
        }
    free(rw->slot);
    memset(rw, 0, sizeof(*rw));
}

/* What the ring holds for seq (0 < seq - next < limit), or NULL. */
static struct udp_rslot *rwin_at(const struct udp_rwin *rw, uint32_t seq)
{
    if (rw->stored == 0 || (uint32_t)udp_seq_diff(seq, rw->next) >= rw->size) return NULL;
    return rw->slot[seq & rw->mask];
}

int udp_rwin_classify(const struct udp_rwin *rw, uint32_t seq)
{
    int32_t d = udp_seq_diff(seq, rw->next);
    if (d < 0) return UDP_RX_DUP;
    if (d == 0) return UDP_RX_NEXT;
    if ((uint32_t)d >= rw->limit) return UDP_RX_BEYOND;
    return rwin_at(rw, seq) ? UDP_RX_DUP : UDP_RX_STORE;
}

/* Makes the ring large enough for seq next + d (d < limit), moving what it holds. */
static int rwin_fit(struct udp_rwin *rw, uint32_t d)
{
    if (d < rw->size) return 0;
    uint32_t size = rw->size ? rw->size : UDP_RWIN_FIRST;
    while (size <= d)
        size *= 2;
    if (size > rw->limit) size = rw->limit;
    struct udp_rslot **slot = calloc(size, sizeof(*slot));
    if (!slot) return -1;
    for (uint32_t i = 0; i < rw->size; i++)
        if (rw->slot[i]) slot[rw->slot[i]->hdr.seq & (size - 1)] = rw->slot[i];
    free(rw->slot);
    rw->slot = slot;
    rw->size = size;
    rw->mask = size - 1;
    return 0;
}

int udp_rwin_store(struct udp_rwin *rw, const struct udp_hdr *h, const uint8_t *payload)
{
    if (udp_rwin_classify(rw, h->seq) != UDP_RX_STORE) return -1;
    if (rw->stored_bytes + h->len > rw->max_bytes) return -1;
    if (rwin_fit(rw, (uint32_t)udp_seq_diff(h->seq, rw->next)) != 0) return -1;
    struct udp_rslot *s = malloc(sizeof(*s));
    uint8_t *copy = malloc(h->len ? h->len : 1);
    if (!s || !copy) {
        free(s);
        free(copy);
        return -1;
    }
    if (h->len) memcpy(copy, payload, h->len);
    s->data = copy;
    s->hdr = *h;
    rw->slot[h->seq & rw->mask] = s;
    rw->stored++;
    rw->stored_bytes += h->len;
    return 0;
}

struct udp_rslot *udp_rwin_ready(struct udp_rwin *rw)
{
    return rw->stored ? rw->slot[rw->next & rw->mask] : NULL;
}

uint8_t *udp_rwin_advance(struct udp_rwin *rw)
{
    uint8_t *data = NULL;
    struct udp_rslot *s = udp_rwin_ready(rw);
    if (s) {
        data = s->data;
        rw->stored--;
        rw->stored_bytes -= s->hdr.len;
        rw->slot[rw->next & rw->mask] = NULL;
        free(s);
    }
    rw->next++;
    return data;
}

uint64_t udp_rwin_sack(const struct udp_rwin *rw)
{
    uint64_t bits = 0;
    if (rw->stored == 0) return 0;
    uint32_t span = rw->size - 1 < 64 ? rw->size - 1 : 64;
    for (uint32_t i = 0; i < span; i++)
        if (rw->slot[(rw->next + 1 + i) & rw->mask]) bits |= 1ull << i;
    return bits;
}
