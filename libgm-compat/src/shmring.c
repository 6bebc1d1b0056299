/*
 * shmring.c - libgm-compat's own shared-memory transport, for ports whose peers are all on
 * this host (transport.c chooses it).  It gives send.c and recv.c what libfabric gives them
 * (tagged messages, masked matching, per-sender order, completions) without loading
 * libfabric (0.2-0.3 s per process).
 *
 * Each open port owns a region /dev/shm/<namespace>-<node>-<port>.<pid>.<n>:ring, named in its
 * lock file as "gmshm://<name>" (lockfile.c removes it with the lock file when its owner died):
 * - a head page: magic, geometry, and the "active" bitmaps senders set after publishing;
 * - RING_CHANS channel controls, each a single-producer single-consumer ring: owner (the
 *   sending port, (node << 8 | port) + 1, claimed with a compare-and-swap at first use and
 *   kept: only one process holds a (namespace, node, port) lock at a time, so a reopened
 *   sender takes its predecessor's channel back), tail (written by the sender only), head
 *   (written by the owner only), each on a cache line of its own;
 * - the channels' slots: RING_SLOTS slots of RING_SLOT bytes, a slot header (tag, message
 *   length, this slot's length, first-slot flag) then up to SLOT_PAYLOAD bytes.  A GM header
 *   and 4 KiB of payload fit one slot: a 4 KiB message is one copy into the ring and one out.
 *   Longer messages take consecutive slots of their channel, but a DATA of at least ref_min
 *   bytes (GM_SHM_BY_REF) takes one slot by reference (struct slot_ref): the receiver copies
 *   it from the sender's process, and the send completes when the receiver's head passed it.
 *
 * No lock is shared between processes: a sender killed at any point leaves at most a slot it
 * had not published (tail moves after the slot is written) or a message cut short, which the
 * receiver drops when that channel starts a new message.  The receiver copies each slot
 * header before use and checks every field and the ring indices against the geometry: a
 * corrupt slot is dropped and counted, a corrupt tail resets the channel.
 *
 * Receiving: a first slot is matched against the posted receives (in post order, tag under
 * mask); its data goes straight into the receive's buffer.  A message no receive matches
 * while completions are waiting to be read is left in the ring until they are read (a large
 * message's DATA follows its header, and recv.c posts the DATA receive when it processes the
 * header); otherwise it is copied aside (unexpected; up to UNEXPECTED_MAX bytes, a larger one
 * waits in the ring) and matched when a receive is posted.
 * Sending: a message goes into the ring at once if it fits; otherwise the rest waits in the
 * sender (in order per target) and moves on at each progress call (gmx_shm_cq_read), which
 * completes the send when its last slot is in the ring.  Senders ring the target's doorbell
 * (bell.c) after publishing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv, process_vm_writev */
#endif
#include "gm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RING_MAGIC 0x474d5247u /* "GMRG" */
#define RING_VERSION 2u        /* 2: slots by reference (SLOT_REF) */
#define RING_CHANS 512u
#define RING_SLOTS 32u
#define RING_SLOT 4224u
#define RING_PAGE 4096u
#define RING_WORDS (RING_CHANS / 64)
#define MSG_MAX ((uint64_t)1 << 40) /* GM's largest size class holds less */
/* Larger messages that no receive matches stay in the ring until one is posted (their sender
 * waits): the length is the sender's word, and memory is ours. */
#define UNEXPECTED_MAX ((uint64_t)1 << 28)

struct slot_hdr {
    uint64_t tag;
    uint64_t total; /* bytes of the whole message */
    uint32_t len;   /* bytes in this slot */
    uint32_t first; /* SLOT_NEXT, SLOT_FIRST or SLOT_REF */
    uint64_t pad;
};
#define SLOT_PAYLOAD (RING_SLOT - sizeof(struct slot_hdr))
enum {
    SLOT_NEXT = 0,  /* a later slot of a message: its next bytes */
    SLOT_FIRST = 1, /* a message's first slot: its first bytes */
    SLOT_REF = 2,   /* a whole message by reference: a struct slot_ref, len = its size */
};

/* A message by reference: the receiver copies its `total' bytes from the sender's process
 * (process_vm_readv) straight into the receive's buffer, then moves its head past the slot,
 * which completes the send (the sender's buffer is the client's until then: GM's callback means
 * it may be reused).  Everything here is the sender's word but `state' and `status', which the
 * receiver writes and the sender reads back once the head passed the slot (before it writes
 * that slot again).  A sender that gives the message up (its target reopened or gone, its port
 * closing) takes it back with a compare-and-swap OFFERED -> REVOKED; the receiver takes it with
 * OFFERED -> TAKEN before it copies, so one of the two wins and a revoked buffer is never read. */
struct slot_ref {
    uint64_t addr;          /* the message in the sender's address space */
    uint32_t pid;           /* the sender's process */
    _Atomic uint32_t state; /* REF_OFFERED, REF_TAKEN, REF_REVOKED */
    int32_t status;         /* the receiver's: 0 copied, else an errno (the send fails) */
    uint32_t pad;
};
enum { REF_OFFERED = 1, REF_TAKEN = 2, REF_REVOKED = 3 };
_Static_assert(sizeof(struct slot_ref) <= SLOT_PAYLOAD, "a reference fits a slot");

struct ring_head {
    uint32_t magic, version, nchan, nslots, slot_size;
    uint32_t pid;                        /* the owner's, for RMA (process_vm_readv/writev) */
    _Atomic uint64_t summary;            /* bit w: active[w] may have bits set */
    _Atomic uint64_t active[RING_WORDS]; /* bit c: channel c has published slots */
};

struct ring_chan {
    _Atomic uint32_t owner;
    uint32_t pad0[15];
    _Atomic uint64_t tail;
    uint64_t pad1[7];
    _Atomic uint64_t head;
    uint64_t pad2[7];
};

#define CTL_OFF RING_PAGE
#define SLOTS_OFF (CTL_OFF + RING_CHANS * sizeof(struct ring_chan))
#define CHAN_BYTES ((size_t)RING_SLOTS * RING_SLOT)
#define REGION_BYTES (SLOTS_OFF + (size_t)RING_CHANS * CHAN_BYTES)
_Static_assert(sizeof(struct ring_head) <= RING_PAGE, "ring head fits its page");
_Static_assert(SLOTS_OFF % RING_PAGE == 0 && CHAN_BYTES % RING_PAGE == 0, "page-aligned rings");
_Static_assert(SLOT_PAYLOAD >= sizeof(struct gmx_hdr) + GMX_EAGER_MAX, "eager fits a slot");

/* ---- receiver's private state ------------------------------------------------------- */

struct rx { /* a posted receive */
    struct rx *next;
    char *buf;
    size_t len;
    uint64_t tag, ignore;
    void *ctx;
};

struct ux { /* a message that arrived before its receive */
    struct ux *next;
    uint64_t tag;
    char *data;
    size_t total, got;
    struct rx *rx; /* posted while the message was still arriving */
};

struct assembly { /* the message a channel is delivering */
    int active, deferred;
    struct rx *rx; /* into a posted receive, or */
    struct ux *ux; /* aside; neither: dropped */
    uint64_t tag;
    size_t total, got;
};

struct txq { /* a send (its rest) waiting for room */
    struct txq *next;
    struct iovec iov[2];
    size_t iovcnt, total, off;
    uint64_t tag;
    void *ctx;
};

struct ref_out { /* a message by reference that the target has not passed yet */
    struct ref_out *next;
    uint64_t idx; /* its slot's index in the channel */
    uint64_t tag;
    size_t total;
    void *ctx;
};

struct tx { /* a target port's channel of ours */
    int used, broken;
    unsigned node, port;
    struct ring_head *rh; /* its region's head and controls (mapped) */
    struct ring_chan *chan;
    char *slots; /* our channel's slots (mapped) */
    unsigned ci;
    pid_t pid; /* the target's process (RMA) */
    uint64_t tail;
    struct gmx_bell *bell;
    struct txq *q, *q_tail;
    struct ref_out *refs, *refs_tail; /* in slot order */
};

struct entry_queue {
    void *e;
    size_t size, head, count, cap;
};

struct gmx_shm {
    char name[GMX_REGION_NAME]; /* "/<name>" */
    char *base;
    struct ring_head *rh;
    struct ring_chan *chans;
    char *slots;
    uint64_t heads[RING_CHANS]; /* our copy: the shared one is only for senders to read */
    struct assembly as[RING_CHANS];
    uint64_t pending[RING_WORDS]; /* channels to drain again (deferred) */
    int any_pending;
    struct rx *eager, *eager_tail, *other, *other_tail;
    struct ux *ux, *ux_tail;
    struct entry_queue cq, errq;
    struct tx *tx;
    size_t ntx;
    unsigned busy;  /* tx with a queue */
    size_t nrefs;   /* messages by reference not passed yet, all targets */
    size_t ref_min; /* DATA of at least this many bytes goes by reference (0: never) */
    uint64_t dropped;
    uint32_t id;  /* ours as a sender: (node << 8 | port) + 1 */
    uint32_t pid; /* ours, named in slots by reference */
};

static int eq_push(struct entry_queue *q, const void *e)
{
    if (q->count == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        char *n = malloc(cap * q->size);
        if (!n) return -1;
        for (size_t i = 0; i < q->count; i++)
            memcpy(n + i * q->size, (char *)q->e + ((q->head + i) % q->cap) * q->size, q->size);
        free(q->e);
        q->e = n;
        q->cap = cap;
        q->head = 0;
    }
    memcpy((char *)q->e + ((q->head + q->count) % q->cap) * q->size, e, q->size);
    q->count++;
    return 0;
}

static void eq_pop(struct entry_queue *q, void *out)
{
    memcpy(out, (char *)q->e + q->head * q->size, q->size);
    q->head = (q->head + 1) % q->cap;
    q->count--;
}

static void complete(struct gmx_shm *sh, void *ctx, uint64_t flags, size_t len, void *buf,
                     uint64_t tag)
{
    struct fi_cq_tagged_entry e = {
        .op_context = ctx, .flags = flags, .len = len, .buf = buf, .tag = tag};
    if (eq_push(&sh->cq, &e) != 0) fprintf(stderr, "libgm: out of memory for a completion\n");
}

static void fail(struct gmx_shm *sh, void *ctx, int err, size_t len, size_t olen, uint64_t tag)
{
    struct fi_cq_err_entry e = {
        .op_context = ctx, .err = err, .len = len, .olen = olen, .tag = tag};
    if (eq_push(&sh->errq, &e) != 0) fprintf(stderr, "libgm: out of memory for a completion\n");
}

static int tag_matches(const struct rx *r, uint64_t tag)
{
    return ((r->tag ^ tag) & ~r->ignore) == 0;
}

/* A posted receive delivered `total' bytes (what exceeded its buffer was dropped). */
static void rx_done(struct gmx_shm *sh, struct rx *r, uint64_t tag, size_t total)
{
    if (total > r->len)
        fail(sh, r->ctx, FI_ETRUNC, r->len, total - r->len, tag);
    else
        complete(sh, r->ctx, FI_RECV | FI_TAGGED, total, r->buf, tag);
    free(r);
}

static void list_push_front(struct rx **head, struct rx **tail, struct rx *r)
{
    r->next = *head;
    *head = r;
    if (!*tail) *tail = r;
}

static void list_push(struct rx **head, struct rx **tail, struct rx *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

static int is_eager_rx(uint64_t tag, uint64_t ignore)
{
    return tag == GMX_TAG_EAGER && ignore == 0;
}

/* Gives r back to the posted receives, first (it was the oldest that matched). */
static void rx_repost(struct gmx_shm *sh, struct rx *r)
{
    if (is_eager_rx(r->tag, r->ignore))
        list_push_front(&sh->eager, &sh->eager_tail, r);
    else
        list_push_front(&sh->other, &sh->other_tail, r);
}

static struct rx *take_from(struct rx **head, struct rx **tail, uint64_t tag)
{
    struct rx *prev = NULL;
    for (struct rx *r = *head; r; prev = r, r = r->next) {
        if (!tag_matches(r, tag)) continue;
        if (prev)
            prev->next = r->next;
        else
            *head = r->next;
        if (*tail == r) *tail = prev;
        return r;
    }
    return NULL;
}

static struct rx *take_match(struct gmx_shm *sh, uint64_t tag)
{
    struct rx *r = tag == GMX_TAG_EAGER ? take_from(&sh->eager, &sh->eager_tail, tag) : NULL;
    return r ? r : take_from(&sh->other, &sh->other_tail, tag);
}

static void ux_unlink(struct gmx_shm *sh, struct ux *u)
{
    struct ux *prev = NULL;
    for (struct ux *v = sh->ux; v; prev = v, v = v->next) {
        if (v != u) continue;
        if (prev)
            prev->next = v->next;
        else
            sh->ux = v->next;
        if (sh->ux_tail == v) sh->ux_tail = prev;
        return;
    }
}

/* The channel's message ends here, whole or not. */
static void assembly_end(struct gmx_shm *sh, struct assembly *a, int whole)
{
    if (a->rx) {
        if (whole)
            rx_done(sh, a->rx, a->tag, a->total);
        else
            rx_repost(sh, a->rx); /* its sender died mid-message: still posted */
    } else if (a->ux) {
        struct ux *u = a->ux;
        if (!whole) {
            ux_unlink(sh, u);
            if (u->rx) rx_repost(sh, u->rx);
            free(u->data);
            free(u);
        } else if (u->rx) {
            ux_unlink(sh, u);
            memcpy(u->rx->buf, u->data, u->total < u->rx->len ? u->total : u->rx->len);
            rx_done(sh, u->rx, u->tag, u->total);
            free(u->data);
            free(u);
        }
    }
    memset(a, 0, sizeof *a);
}

static void dropped(struct gmx_shm *sh, unsigned c, const char *why)
{
    if (sh->dropped++ < 8) gmx_log("ring channel %u: %s; dropped\n", c, why);
}

/* A message's first slot: where its bytes go.  0, or 1 to leave it in the ring for now. */
static int assembly_start(struct gmx_shm *sh, unsigned c, const struct slot_hdr *h)
{
    struct assembly *a = &sh->as[c];
    if (a->active) assembly_end(sh, a, 0); /* a predecessor's message cut short */
    struct rx *r = take_match(sh, h->tag);
    struct ux *u = NULL;
    if (!r) {
        if ((!a->deferred && sh->cq.count) || h->total > UNEXPECTED_MAX) {
            a->deferred = 1; /* the completions before it may post its receive */
            return 1;
        }
        u = calloc(1, sizeof *u);
        if (u) u->data = malloc(h->total ? h->total : 1);
        if (!u || !u->data) {
            free(u);
            u = NULL;
            dropped(sh, c, "no memory for an unexpected message");
        } else {
            u->tag = h->tag;
            u->total = h->total;
            if (sh->ux_tail)
                sh->ux_tail->next = u;
            else
                sh->ux = u;
            sh->ux_tail = u;
        }
    }
    *a = (struct assembly){.active = 1, .rx = r, .ux = u, .tag = h->tag, .total = h->total};
    return 0;
}

/* Copies n bytes at addr in process pid into dst: 0 or an errno (ESRCH: the process is gone;
 * EFAULT: the range is not all mapped there; EPERM: not ours to read).  The fuzz target
 * (tests/fuzz_ring.c) plays the sender's memory with its own GMX_SHM_REF_READ. */
#ifndef GMX_SHM_REF_READ
#define GMX_SHM_REF_READ ref_read
static int ref_read(uint32_t pid, char *dst, uint64_t addr, size_t n)
{
    if (pid == 0 || pid > INT32_MAX) return ESRCH;
    if (addr + n < addr) return EFAULT;
    size_t done = 0;
    while (done < n) {
        struct iovec l = {dst + done, n - done};
        struct iovec r = {(void *)(uintptr_t)(addr + done), n - done};
        ssize_t k = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (k <= 0) return k == 0 ? EFAULT : errno;
        done += (size_t)k;
    }
    return 0;
}
#endif

/* A message by reference (its assembly started): copied whole into its receive, or aside, and
 * the result left in the slot for the sender.  A message its sender took back, or whose sender
 * is gone, ends cut short (as a sender killed mid-message leaves one); one that could not be
 * read from a live sender fails its receive (its stream goes on) and its send. */
static void ref_take(struct gmx_shm *sh, unsigned c, struct slot_ref *sr)
{
    struct assembly *a = &sh->as[c];
    uint64_t addr = sr->addr;
    uint32_t pid = sr->pid;
    uint32_t want = REF_OFFERED;
    int err = ECANCELED;
    if (atomic_compare_exchange_strong(&sr->state, &want, REF_TAKEN)) {
        size_t n = 0;
        char *dst = NULL;
        if (a->rx) {
            dst = a->rx->buf;
            n = a->total < a->rx->len ? a->total : a->rx->len; /* the rest: truncated */
        } else if (a->ux) {
            dst = a->ux->data;
            n = a->total;
        }
        err = a->rx || a->ux ? (n ? GMX_SHM_REF_READ(pid, dst, addr, n) : 0) : ENOMEM;
        sr->status = err; /* read by the sender once our head passed the slot */
    }
    if (!err) {
        if (a->ux) a->ux->got = a->total;
        a->got = a->total;
        assembly_end(sh, a, 1);
        return;
    }
    if (err == ESRCH || err == ECANCELED) {
        dropped(sh, c,
                err == ESRCH ? "by-reference message of a sender gone"
                             : "by-reference message taken back by its sender");
    } else {
        dropped(sh, c, "by-reference message not readable");
        if (a->rx) {
            fail(sh, a->rx->ctx, FI_EIO, 0, a->total, a->tag);
            free(a->rx);
            a->rx = NULL;
        }
    }
    assembly_end(sh, a, 0);
}

static void mark_pending(struct gmx_shm *sh, unsigned c)
{
    sh->pending[c / 64] |= 1ULL << (c % 64);
    sh->any_pending = 1;
}

/* Takes what channel c holds. */
static void drain(struct gmx_shm *sh, unsigned c)
{
    struct ring_chan *ch = &sh->chans[c];
    uint64_t head = sh->heads[c];
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_acquire);
    if (tail - head > RING_SLOTS) {
        dropped(sh, c, "tail out of range");
        assembly_end(sh, &sh->as[c], 0);
        head = tail;
    }
    char *ring = sh->slots + (size_t)c * CHAN_BYTES;
    while (head != tail) {
        char *slot = ring + (size_t)(head % RING_SLOTS) * RING_SLOT;
        struct slot_hdr h;
        memcpy(&h, slot, sizeof h); /* the sender's: copied once, then checked */
        struct assembly *a = &sh->as[c];
        if (h.len > SLOT_PAYLOAD || h.first > SLOT_REF || h.total > MSG_MAX ||
            (h.first == SLOT_FIRST && h.len > h.total) ||
            (h.first == SLOT_REF && h.len != sizeof(struct slot_ref))) {
            dropped(sh, c, "bad slot header");
            head++;
            continue;
        }
        if (h.first) {
            if (assembly_start(sh, c, &h)) {
                mark_pending(sh, c);
                break;
            }
            if (h.first == SLOT_REF) {
                ref_take(sh, c, (struct slot_ref *)(slot + sizeof h));
                head++;
                continue;
            }
        } else if (!a->active) {
            dropped(sh, c, "slot of a message not started");
            head++;
            continue;
        }
        if (h.len > a->total - a->got) {
            dropped(sh, c, "slot beyond its message");
            assembly_end(sh, a, 0);
            head++;
            continue;
        }
        const char *data = slot + sizeof h;
        if (a->rx) {
            if (a->got < a->rx->len) {
                size_t room = a->rx->len - a->got;
                memcpy(a->rx->buf + a->got, data, h.len < room ? h.len : room);
            }
        } else if (a->ux) {
            memcpy(a->ux->data + a->got, data, h.len);
            a->ux->got += h.len;
        }
        a->got += h.len;
        head++;
        if (a->got == a->total) assembly_end(sh, a, 1);
    }
    sh->heads[c] = head;
    atomic_store_explicit(&ch->head, head, memory_order_release);
}

static void poll_rings(struct gmx_shm *sh)
{
    if (atomic_load_explicit(&sh->rh->summary, memory_order_relaxed)) {
        uint64_t sum = atomic_exchange(&sh->rh->summary, 0);
        for (unsigned w = 0; w < RING_WORDS; w++) {
            if (!((sum >> w) & 1)) continue;
            uint64_t bits = atomic_exchange(&sh->rh->active[w], 0);
            if (bits) {
                sh->pending[w] |= bits;
                sh->any_pending = 1;
            }
        }
    }
    if (!sh->any_pending) return;
    sh->any_pending = 0;
    for (unsigned w = 0; w < RING_WORDS; w++) {
        uint64_t bits = sh->pending[w];
        sh->pending[w] = 0;
        while (bits) {
            unsigned b = (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            drain(sh, w * 64 + b);
        }
    }
}

/* ---- sending -------------------------------------------------------------------------- */

static struct tx *tx_of(struct gmx_shm *sh, fi_addr_t a)
{
    return a < sh->ntx && sh->tx[a].used ? &sh->tx[a] : NULL;
}

static struct slot_ref *ref_slot(struct tx *t, uint64_t idx)
{
    return (struct slot_ref *)(t->slots + (size_t)(idx % RING_SLOTS) * RING_SLOT +
                               sizeof(struct slot_hdr));
}

static struct ref_out *ref_pop(struct gmx_shm *sh, struct tx *t)
{
    struct ref_out *o = t->refs;
    t->refs = o->next;
    if (!t->refs) t->refs_tail = NULL;
    sh->nrefs--;
    return o;
}

/* Completes the messages by reference that the target's head passed (it copied them, or gave
 * them up: the result is in their slots, which we have not written since). */
static void tx_reap(struct gmx_shm *sh, struct tx *t, uint64_t head)
{
    while (t->refs && t->refs->idx < head) {
        struct ref_out *o = ref_pop(sh, t);
        struct slot_ref *sr = ref_slot(t, o->idx);
        int copied =
            atomic_load_explicit(&sr->state, memory_order_relaxed) == REF_TAKEN && sr->status == 0;
        if (copied)
            complete(sh, o->ctx, FI_SEND | FI_TAGGED, o->total, NULL, o->tag);
        else
            fail(sh, o->ctx, FI_EIO, 0, 0, o->tag);
        free(o);
    }
}

/* Takes back every message by reference the target has not copied: after this it reads none of
 * our buffers (their sends fail).  One it is copying right now is waited for (100 ms at most:
 * the target may have died in the copy).  Passed ones complete as usual. */
static void tx_revoke(struct gmx_shm *sh, struct tx *t)
{
    uint64_t deadline = 0;
    while (t->refs) {
        uint64_t head = atomic_load_explicit(&t->chan->head, memory_order_acquire);
        int sane = t->tail - head <= RING_SLOTS;
        if (sane) tx_reap(sh, t, head);
        if (!t->refs) break;
        struct slot_ref *sr = ref_slot(t, t->refs->idx);
        uint32_t want = REF_OFFERED;
        if (!atomic_compare_exchange_strong(&sr->state, &want, REF_REVOKED) && want == REF_TAKEN &&
            sane) {
            uint64_t now = gmx_now_ns();
            if (!deadline) deadline = now + 100000000u;
            if (now < deadline) {
                sched_yield();
                continue;
            }
        }
        struct ref_out *o = ref_pop(sh, t);
        fail(sh, o->ctx, FI_ECONNREFUSED, 0, 0, o->tag);
        free(o);
    }
}

/* Free slots in t's channel (0 if the target's indices make no sense: nothing goes); completes
 * the messages by reference the target passed, with the same look at its head. */
static size_t tx_room(struct gmx_shm *sh, struct tx *t)
{
    uint64_t head = atomic_load_explicit(&t->chan->head, memory_order_acquire);
    uint64_t used = t->tail - head;
    if (used > RING_SLOTS) {
        if (!t->broken) gmx_log("ring of node %u port %u: head out of range\n", t->node, t->port);
        t->broken = 1;
        tx_revoke(sh, t);
        return 0;
    }
    if (t->refs) tx_reap(sh, t, head);
    return RING_SLOTS - used;
}

/* Whether a send goes by reference: a DATA (a large message's or put's bytes, from the client's
 * buffer, which stays the client's until its callback) of at least ref_min bytes.  Not GETDATA:
 * it comes from registered memory whose deregistration must not be passed by a later read
 * (README, Stale keys). */
static int by_ref(const struct gmx_shm *sh, size_t iovcnt, size_t total, uint64_t tag)
{
    return sh->ref_min && total >= sh->ref_min && iovcnt == 1 &&
           ((tag >> GMX_TAG_KIND_SHIFT) & 7) == GMX_TK_DATA;
}

/* Copies len bytes at offset off of the iovec into dst. */
static void gather(char *dst, const struct iovec *iov, size_t iovcnt, size_t off, size_t len)
{
    for (size_t i = 0; i < iovcnt && len; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t n = iov[i].iov_len - off;
        if (n > len) n = len;
        memcpy(dst, (const char *)iov[i].iov_base + off, n);
        dst += n;
        len -= n;
        off = 0;
    }
}

/* Writes slots of (iov, total) from *off while there is room: 0 while some is left, 1 when the
 * message is in, 2 when it went by reference (ref: allowed; it completes when the target's head
 * passes its slot). */
static int tx_write(struct gmx_shm *sh, struct tx *t, const struct iovec *iov, size_t iovcnt,
                    size_t total, uint64_t tag, void *ctx, int ref, size_t *off)
{
    size_t room = tx_room(sh, t);
    struct ref_out *o = ref && *off == 0 && room ? malloc(sizeof *o) : NULL;
    if (o) { /* (out of memory: by slots) */
        char *slot = t->slots + (size_t)(t->tail % RING_SLOTS) * RING_SLOT;
        struct slot_hdr h = {
            .tag = tag, .total = total, .len = sizeof(struct slot_ref), .first = SLOT_REF};
        memcpy(slot, &h, sizeof h);
        struct slot_ref *sr = ref_slot(t, t->tail);
        sr->addr = (uintptr_t)iov[0].iov_base;
        sr->pid = sh->pid;
        sr->status = -1;
        sr->pad = 0;
        atomic_store_explicit(&sr->state, REF_OFFERED, memory_order_relaxed); /* (tail: release) */
        *o = (struct ref_out){.idx = t->tail, .tag = tag, .total = total, .ctx = ctx};
        if (t->refs_tail)
            t->refs_tail->next = o;
        else
            t->refs = o;
        t->refs_tail = o;
        sh->nrefs++;
        t->tail++;
        *off = total;
        return 2;
    }
    do {
        if (!room) return 0;
        size_t len = total - *off < SLOT_PAYLOAD ? total - *off : SLOT_PAYLOAD;
        char *slot = t->slots + (size_t)(t->tail % RING_SLOTS) * RING_SLOT;
        struct slot_hdr h = {.tag = tag,
                             .total = total,
                             .len = (uint32_t)len,
                             .first = *off == 0 ? SLOT_FIRST : SLOT_NEXT};
        memcpy(slot, &h, sizeof h);
        gather(slot + sizeof h, iov, iovcnt, *off, len);
        t->tail++;
        room--;
        *off += len;
    } while (*off < total);
    return 1;
}

/* Makes the slots written visible and wakes the target. */
static void tx_publish(struct tx *t)
{
    atomic_store_explicit(&t->chan->tail, t->tail, memory_order_release);
    /* The tail before the looks at the bits below: without the fence the loads may pass the
     * store, see a bit the receiver is just clearing, and skip setting it again while the
     * receiver's drain still reads the old tail: the slots would wait for our next message. */
    atomic_thread_fence(memory_order_seq_cst);
    unsigned w = t->ci / 64;
    uint64_t bit = 1ULL << (t->ci % 64);
    if (!(atomic_load_explicit(&t->rh->active[w], memory_order_relaxed) & bit))
        atomic_fetch_or(&t->rh->active[w], bit);
    if (!(atomic_load_explicit(&t->rh->summary, memory_order_relaxed) & (1ULL << w)))
        atomic_fetch_or(&t->rh->summary, 1ULL << w);
    gmx_bell_ring(t->bell);
}

static void tx_progress(struct gmx_shm *sh, struct tx *t)
{
    int wrote = 0;
    while (t->q && !t->broken) {
        struct txq *q = t->q;
        size_t before = t->tail;
        int done = tx_write(sh, t, q->iov, q->iovcnt, q->total, q->tag, q->ctx,
                            by_ref(sh, q->iovcnt, q->total, q->tag), &q->off);
        wrote |= t->tail != before;
        if (!done) break;
        t->q = q->next;
        if (!t->q) t->q_tail = NULL;
        if (done == 1) complete(sh, q->ctx, FI_SEND | FI_TAGGED, q->total, NULL, q->tag);
        free(q);
    }
    if (wrote) tx_publish(t);
    if (!t->q) sh->busy--;
}

ssize_t gmx_shm_inject(struct gmx_shm *sh, fi_addr_t to, const struct iovec *iov, size_t iovcnt,
                       uint64_t tag)
{
    struct tx *t = tx_of(sh, to);
    if (!t || t->broken) return -FI_EIO;
    size_t len = 0;
    for (size_t i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > SLOT_PAYLOAD) return -FI_EMSGSIZE;
    if (t->q) return -FI_EAGAIN; /* behind earlier sends */
    size_t off = 0;
    if (!tx_write(sh, t, iov, iovcnt, len, tag, NULL, 0, &off)) return -FI_EAGAIN;
    tx_publish(t);
    return 0;
}

ssize_t gmx_shm_send(struct gmx_shm *sh, fi_addr_t to, const struct iovec *iov, size_t iovcnt,
                     uint64_t tag, void *ctx)
{
    struct tx *t = tx_of(sh, to);
    if (!t || t->broken) return -FI_EIO;
    if (iovcnt > 2) return -FI_EINVAL;
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total > MSG_MAX) return -FI_EMSGSIZE;
    size_t off = 0;
    if (!t->q) {
        size_t before = t->tail;
        int done =
            tx_write(sh, t, iov, iovcnt, total, tag, ctx, by_ref(sh, iovcnt, total, tag), &off);
        if (t->tail != before) tx_publish(t);
        if (done == 1) complete(sh, ctx, FI_SEND | FI_TAGGED, total, NULL, tag);
        if (done) return 0;
    }
    struct txq *q = calloc(1, sizeof *q);
    if (!q) return -FI_ENOMEM; /* (only when nothing was written: off is 0 then) */
    memcpy(q->iov, iov, iovcnt * sizeof *iov);
    q->iovcnt = iovcnt;
    q->total = total;
    q->off = off;
    q->tag = tag;
    q->ctx = ctx;
    if (!t->q) sh->busy++;
    if (t->q_tail)
        t->q_tail->next = q;
    else
        t->q = q;
    t->q_tail = q;
    return 0;
}

/* RMA: copies between our buffer and the target process's memory at raddr, at once (the
 * target's CPU takes no part).  The address is the target's word (GMX_K_KEY); a bad one fails
 * the call (EFAULT), it never touches our memory beyond buf.  A target process that is gone
 * fails it too (ESRCH).  The caller (transport.c) checked the key against the target's live
 * registration table (keytab.c) and holds it until we return, so the target's deregistration
 * waits for this copy and a withdrawn key never gets here. */
ssize_t gmx_shm_rma(struct gmx_shm *sh, fi_addr_t to, void *buf, size_t len, uint64_t raddr,
                    int write, void *ctx)
{
    struct tx *t = tx_of(sh, to);
    if (!t || t->broken || t->pid <= 0) return -FI_EIO;
    size_t done = 0;
    int err = 0;
    while (done < len && !err) {
        struct iovec l = {(char *)buf + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(raddr + done), len - done};
        ssize_t n = write ? process_vm_writev(t->pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(t->pid, &l, 1, &r, 1, 0);
        if (n > 0)
            done += (size_t)n;
        else
            err = n == 0 ? EFAULT : errno;
    }
    if (err)
        fail(sh, ctx, err == ESRCH ? FI_ECONNREFUSED : FI_EACCES, done, 0, 0);
    else
        complete(sh, ctx, FI_RMA | (write ? FI_WRITE : FI_READ), len, NULL, 0);
    return 0;
}

int gmx_shm_busy(struct gmx_shm *sh)
{
    return sh->busy != 0 || sh->nrefs != 0 || sh->any_pending;
}

int gmx_shm_deferred(struct gmx_shm *sh)
{
    return sh->any_pending;
}

/* ---- receiving ------------------------------------------------------------------------ */

ssize_t gmx_shm_recv(struct gmx_shm *sh, void *buf, size_t len, uint64_t tag, uint64_t ignore,
                     void *ctx)
{
    struct rx *r = malloc(sizeof *r);
    if (!r) return -FI_ENOMEM;
    *r = (struct rx){.buf = buf, .len = len, .tag = tag, .ignore = ignore, .ctx = ctx};
    for (struct ux *u = sh->ux; u; u = u->next) {
        if (u->rx || !tag_matches(r, u->tag)) continue;
        if (u->got < u->total) { /* still arriving: it goes to r when whole */
            u->rx = r;
            return 0;
        }
        ux_unlink(sh, u);
        memcpy(buf, u->data, u->total < len ? u->total : len);
        rx_done(sh, r, u->tag, u->total);
        free(u->data);
        free(u);
        return 0;
    }
    if (is_eager_rx(tag, ignore))
        list_push(&sh->eager, &sh->eager_tail, r);
    else
        list_push(&sh->other, &sh->other_tail, r);
    return 0;
}

static int cancel_in(struct gmx_shm *sh, struct rx **head, struct rx **tail, void *ctx)
{
    struct rx *prev = NULL;
    for (struct rx *r = *head; r; prev = r, r = r->next) {
        if (r->ctx != ctx) continue;
        if (prev)
            prev->next = r->next;
        else
            *head = r->next;
        if (*tail == r) *tail = prev;
        fail(sh, ctx, FI_ECANCELED, 0, 0, r->tag);
        free(r);
        return 1;
    }
    return 0;
}

void gmx_shm_cancel(struct gmx_shm *sh, void *ctx)
{
    if (cancel_in(sh, &sh->eager, &sh->eager_tail, ctx) ||
        cancel_in(sh, &sh->other, &sh->other_tail, ctx))
        return;
    for (unsigned c = 0; c < RING_CHANS; c++) { /* being filled: the rest is dropped */
        struct assembly *a = &sh->as[c];
        if (a->active && a->rx && a->rx->ctx == ctx) {
            fail(sh, ctx, FI_ECANCELED, 0, 0, a->rx->tag);
            free(a->rx);
            a->rx = NULL;
            return;
        }
    }
    for (struct ux *u = sh->ux; u; u = u->next) {
        if (u->rx && u->rx->ctx == ctx) {
            fail(sh, ctx, FI_ECANCELED, 0, 0, u->rx->tag);
            free(u->rx);
            u->rx = NULL;
            return;
        }
    }
}

/* Sends waiting for room move on; messages by reference that their targets passed complete. */
void gmx_shm_drive(struct gmx_shm *sh)
{
    if (sh->busy || sh->nrefs)
        for (size_t i = 0; i < sh->ntx; i++) {
            struct tx *t = &sh->tx[i];
            if (!t->used) continue;
            if (t->q)
                tx_progress(sh, t); /* (its tx_write reaps first) */
            else if (t->refs)
                tx_room(sh, t);
        }
}

ssize_t gmx_shm_cq_read(struct gmx_shm *sh, struct fi_cq_tagged_entry *ce, size_t n)
{
    gmx_shm_drive(sh);
    if (!sh->cq.count) {
        poll_rings(sh);
        /* An ack read now may be for a message by reference whose target passed it since the
         * look above: its send completes in the same call (GM's callback needs both). */
        if (sh->nrefs) gmx_shm_drive(sh);
    }
    if (!sh->cq.count) return sh->errq.count ? -FI_EAVAIL : -FI_EAGAIN;
    size_t k = 0;
    while (k < n && sh->cq.count)
        eq_pop(&sh->cq, &ce[k++]);
    return (ssize_t)k;
}

int gmx_shm_cq_readerr(struct gmx_shm *sh, struct fi_cq_err_entry *err)
{
    if (!sh->errq.count) return 0;
    eq_pop(&sh->errq, err);
    return 1;
}

/* ---- peers ---------------------------------------------------------------------------- */

static void tx_release(struct gmx_shm *sh, struct tx *t)
{
    tx_revoke(sh, t); /* the target reads none of our buffers after this */
    while (t->q) {    /* the target is gone (or was reopened): these never arrive */
        struct txq *q = t->q;
        t->q = q->next;
        fail(sh, q->ctx, FI_ECONNREFUSED, 0, 0, q->tag);
        free(q);
    }
    if (t->q_tail) sh->busy--;
    t->q_tail = NULL;
    if (t->slots) munmap(t->slots, CHAN_BYTES);
    if (t->rh) munmap(t->rh, SLOTS_OFF);
    gmx_bell_unmap(t->bell);
    memset(t, 0, sizeof *t);
}

/* The region named "gmshm://<name>": 0 and *out, or -1. */
int gmx_shm_insert(struct gmx_shm *sh, unsigned node, unsigned port, const char *addr,
                   fi_addr_t *out)
{
    size_t plen = strlen(GMX_SHM_ADDR_PREFIX);
    const char *name = addr + plen;
    char path[GMX_REGION_NAME + 1];
    if (strncmp(addr, GMX_SHM_ADDR_PREFIX, plen) != 0 || !*name || strchr(name, '/') ||
        strlen(name) + 2 > sizeof path)
        return -1;
    snprintf(path, sizeof path, "/%s", name);
    int fd = shm_open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) return -1;
    struct stat st;
    struct ring_head *rh = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && S_ISREG(st.st_mode) &&
        (size_t)st.st_size >= REGION_BYTES)
        rh = mmap(NULL, SLOTS_OFF, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (rh == MAP_FAILED) {
        close(fd);
        return -1;
    }
    if (rh->magic != RING_MAGIC || rh->version != RING_VERSION || rh->nchan != RING_CHANS ||
        rh->nslots != RING_SLOTS || rh->slot_size != RING_SLOT) {
        gmx_log("%s: not a ring region of this version\n", path);
        munmap(rh, SLOTS_OFF);
        close(fd);
        return -1;
    }
    /* Our channel: the first one on our probe path that is ours or free (never freed). */
    struct ring_chan *ctl = (struct ring_chan *)((char *)rh + CTL_OFF);
    unsigned ci = RING_CHANS;
    uint32_t id = sh->id;
    for (unsigned k = 0; k < RING_CHANS && ci == RING_CHANS; k++) {
        unsigned c = (id * 2654435761u + k) % RING_CHANS;
        uint32_t o = atomic_load(&ctl[c].owner);
        if (o == id || (o == 0 && atomic_compare_exchange_strong(&ctl[c].owner, &o, id)) ||
            o == id) /* (a failed exchange loads the winner: it may be us, from a thread) */
            ci = c;
    }
    char *slots = MAP_FAILED;
    if (ci < RING_CHANS)
        slots = mmap(NULL, CHAN_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                     (off_t)(SLOTS_OFF + (size_t)ci * CHAN_BYTES));
    close(fd);
    if (slots == MAP_FAILED) {
        if (ci == RING_CHANS)
            fprintf(stderr, "libgm: node %u port %u has %u senders on this host already\n", node,
                    port, RING_CHANS);
        munmap(rh, SLOTS_OFF);
        return -1;
    }
    size_t i = 0;
    while (i < sh->ntx && sh->tx[i].used)
        i++;
    if (i == sh->ntx) {
        struct tx *n = realloc(sh->tx, (sh->ntx + 8) * sizeof *n);
        if (!n) {
            munmap(slots, CHAN_BYTES);
            munmap(rh, SLOTS_OFF);
            return -1;
        }
        memset(n + sh->ntx, 0, 8 * sizeof *n);
        sh->tx = n;
        sh->ntx += 8;
    }
    struct tx *t = &sh->tx[i];
    *t = (struct tx){.used = 1,
                     .node = node,
                     .port = port,
                     .rh = rh,
                     .chan = &ctl[ci],
                     .slots = slots,
                     .ci = ci,
                     .tail = atomic_load(&ctl[ci].tail),
                     .pid = (pid_t)rh->pid,
                     .bell = gmx_bell_map_peer(node, port)};
    tx_room(sh, t); /* marks it broken if the indices are wrong */
    *out = i;
    return 0;
}

void gmx_shm_remove(struct gmx_shm *sh, fi_addr_t a)
{
    struct tx *t = tx_of(sh, a);
    if (t) tx_release(sh, t);
}

/* ---- the port's own region ------------------------------------------------------------ */

/* Whether targets may read our memory (process_vm_readv): not under Yama's ptrace_scope 1-3
 * (only descendants, or nobody, then) nor where the call is not there (seccomp, old kernels).
 * Looked at once per process. */
static int cma_usable(void)
{
    static _Atomic int known; /* 0 not looked yet, 1 yes, 2 no */
    int k = atomic_load(&known);
    if (k) return k == 1;
    int ok = 1;
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (f) {
        int scope = 0;
        if (fscanf(f, "%d", &scope) == 1 && scope != 0) ok = 0;
        fclose(f);
    }
    char a = 'x', b = 0;
    struct iovec l = {&b, 1}, r = {&a, 1};
    if (ok && process_vm_readv(getpid(), &l, 1, &r, 1, 0) != 1) ok = 0;
    if (!ok) gmx_log("ring: no process_vm_readv between processes here; messages by slots only\n");
    atomic_store(&known, ok ? 1 : 2);
    return ok;
}

gm_status_t gmx_shm_open(struct gm_port *p)
{
    static _Atomic unsigned openings;
    struct gmx_shm *sh = calloc(1, sizeof *sh);
    if (!sh) return GM_OUT_OF_MEMORY;
    sh->cq.size = sizeof(struct fi_cq_tagged_entry);
    sh->errq.size = sizeof(struct fi_cq_err_entry);
    int fd = -1;
    /* The lock file's stem, then a name per opening (lockfile.c's region_of checks both). */
    snprintf(sh->name, sizeof sh->name, "/%s-%u-%u.%x.%x:ring", gmx_cfg.shm_ns, p->node_id,
             p->port_id, (unsigned)getpid(), atomic_fetch_add(&openings, 1));
    /* Named in the lock file before it exists: a process killed from here on leaves nothing
     * that the next finder of its lock file does not remove (a sender sees no magic yet). */
    char addr[GMX_ADDR_AREA];
    int alen = snprintf(addr, sizeof addr, GMX_SHM_ADDR_PREFIX "%s", sh->name + 1);
    if (alen <= 0 || (size_t)alen >= sizeof addr ||
        pwrite(p->lock_fd, addr, (size_t)alen, 0) != alen) {
        fprintf(stderr, "libgm: cannot publish the address of port %u\n", p->port_id);
        goto fail;
    }
    for (int tries = 0; tries < 2 && fd < 0; tries++) {
        fd = shm_open(sh->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            shm_unlink(sh->name); /* a dead namesake's: we hold the lock */
    }
    if (fd < 0 || ftruncate(fd, (off_t)REGION_BYTES) != 0) {
        fprintf(stderr, "libgm: cannot create %s: %s\n", sh->name, strerror(errno));
        goto fail;
    }
    sh->base = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    fd = -1;
    if (sh->base == MAP_FAILED) {
        sh->base = NULL;
        fprintf(stderr, "libgm: cannot map %s: %s\n", sh->name, strerror(errno));
        goto fail;
    }
    sh->rh = (struct ring_head *)sh->base;
    sh->chans = (struct ring_chan *)(sh->base + CTL_OFF);
    sh->slots = sh->base + SLOTS_OFF;
    sh->rh->nchan = RING_CHANS;
    sh->rh->nslots = RING_SLOTS;
    sh->rh->slot_size = RING_SLOT;
    sh->rh->version = RING_VERSION;
    sh->id = ((uint32_t)p->node_id << 8 | p->port_id) + 1;
    sh->rh->pid = (uint32_t)getpid();
    sh->pid = (uint32_t)getpid();
    sh->ref_min = cma_usable() ? gmx_knob_uint(GMX_K_SHM_BY_REF) : 0;
    atomic_thread_fence(memory_order_release);
    sh->rh->magic = RING_MAGIC;
    memcpy(p->region, sh->name, sizeof p->region);
    p->shm = sh;
    p->addr_is_str = 1;
    p->inject_size = SLOT_PAYLOAD;
    p->eager_max = GMX_EAGER_MAX;
    /* Puts and gets after the first into a region copy straight between the processes
     * (gmx_shm_rma), as libfabric's shm provider does: keys are made up by us. */
    p->rma = gmx_cfg.rma;
    p->mr_virt = 1;
    p->mr_prov_key = 0;
    p->next_key = (gmx_now_ns() & 0xffffffffffULL) << 20;
    return GM_SUCCESS;
fail:
    if (fd >= 0) close(fd);
    if (sh->base) munmap(sh->base, REGION_BYTES);
    shm_unlink(sh->name);
    free(sh);
    return GM_NO_SUCH_DEVICE;
}

/* Everything but the region itself. */
static void shm_free_state(struct gmx_shm *sh)
{
    for (size_t i = 0; i < sh->ntx; i++)
        if (sh->tx[i].used) tx_release(sh, &sh->tx[i]);
    free(sh->tx);
    for (unsigned c = 0; c < RING_CHANS; c++)
        if (sh->as[c].active) assembly_end(sh, &sh->as[c], 0);
    while (sh->ux) {
        struct ux *u = sh->ux;
        sh->ux = u->next;
        free(u->rx);
        free(u->data);
        free(u);
    }
    struct rx *lists[2] = {sh->eager, sh->other};
    for (int k = 0; k < 2; k++)
        while (lists[k]) {
            struct rx *r = lists[k];
            lists[k] = r->next;
            free(r);
        }
    free(sh->cq.e);
    free(sh->errq.e);
}

void gmx_shm_close(struct gm_port *p)
{
    struct gmx_shm *sh = p->shm;
    if (!sh) return;
    p->shm = NULL;
    shm_free_state(sh);
    /* We hold the port's lock: nobody else creates or removes a region of its name. */
    munmap(sh->base, REGION_BYTES);
    shm_unlink(sh->name);
    p->region[0] = '\0';
    free(sh);
}
