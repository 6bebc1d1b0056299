/*
 * The message protocols, shared by all routes.
 *
 * Eager: header and data in one frame, while the sender holds credits for the peer on that
 * hard port. Credits are units of memory the receiver may have to spend keeping unexpected
 * messages (a record plus the payload, proto.h), so receiver memory per peer is bounded by
 * COR_CREDITS x eager limit whatever the sizes. They come back piggy-backed on any frame, or
 * in a credit-only frame once the receiver owes `credit_threshold`. The last unit is never
 * spent on data; a sender without enough credits falls back to rendezvous, which costs the
 * receiver only a header until a receive matches.
 *
 * Rendezvous: RTS; the receiver matches it (now or when the receive is posted) and answers
 * CTS with the bytes it can take; the sender streams DATA frames, which the receiver copies
 * into place (or, on a route with RMA, puts the data there and sends F_FIN). Matching happens
 * in frame order, so order per task pair holds for all of them.
 *
 * Read rendezvous (routes with get, messages up to COR_GET_MAX): the RTS (F_RTS_GET) names the
 * data's address and the sender's route key; the receiver that matches it reads the data
 * straight into the receive's buffer (route get) and answers F_GOT, which completes the send.
 * One hop and one copy where CTS, put and FIN took three hops: on one host an 8-32 KiB
 * message is a message and a process_vm_readv. A receiver that cannot read (truncated to
 * nothing, no registration, a stale key) answers CTS instead, and the sender goes on as for
 * an RTS.
 */
#include <stdlib.h>
#include <string.h>

#include "hport.h"
#include "internal.h"
#include "proto.h"

struct held_frame {
    struct held_frame *next;
    struct cor_hport *hp;
    uint16_t src_task;
    uint32_t seq;
    size_t len;
    unsigned char frame[];
};

static void drop(const char *why, uint32_t peer)
{
    cor__count(C_FRAMES_DROPPED, 1);
    static _Atomic int logged;
    if (atomic_fetch_add(&logged, 1) < 10)
        cor__log("dropped a frame from domain %u: %s", peer, why);
}

/* ---- sending frames ---- */

/* ---- sending messages ---- */

static void fill_status(struct cor_req *r, cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type,
                        size_t count)
{
    r->status.source = src;
    r->status.context = ctx;
    r->status.tag = tag;
    r->status.type = type;
    r->status.count = count;
}

/* Checks a matched receive against the message: type and room. Allocates the core buffer
 * for recvI(&ptr). Returns the error the receive will complete with (data may still flow
 * for COR_ETRUNC) and sets *take to the bytes to copy. */
static int accept_into(struct cor_req *r, cor_type_t type, size_t count, size_t bytes, size_t *take)
{
    *take = 0;
    if (r->core_alloc) {
        if (!r->buf) {
            r->buf = cor__buf_alloc(type, count);
            if (!r->buf) return COR_ENOMEM;
            r->cap = bytes;
        }
    } else if (r->type != COR_BYTE && r->type != type) {
        return COR_ETYPE;
    }
    *take = bytes < r->cap ? bytes : r->cap;
    return bytes > r->cap ? COR_ETRUNC : COR_OK;
}

/* Copies a whole message held in memory into a matched receive; the error it completes with. */
static int copy_into(struct cor_req *r, cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type,
                     size_t count, const void *data, size_t bytes)
{
    fill_status(r, src, ctx, tag, type, count);
    size_t take;
    int err = accept_into(r, type, count, bytes, &take);
    if (take) memcpy(r->buf, data, take);
    cor__count(C_MSGS_RECEIVED, 1);
    cor__count(C_BYTES_RECEIVED, take);
    return err;
}

/* Delivers a whole message held in memory (eager or local) into a matched receive. */
static void complete_recv_with(struct cor_req *r, cor_idp_t src, cor_idp_t ctx, int tag,
                               cor_type_t type, size_t count, const void *data, size_t bytes)
{
    cor__req_complete(r, copy_into(r, src, ctx, tag, type, count, data, bytes));
}

/* The same into a receive just taken off its owner's posted list, the owner's lock held. */
static void complete_recv_held(struct cor_req *r, cor_idp_t src, cor_idp_t ctx, int tag,
                               cor_type_t type, size_t count, const void *data, size_t bytes)
{
    cor__req_complete_held(r, copy_into(r, src, ctx, tag, type, count, data, bytes));
}

static int send_local(struct cor_task *t, struct cor_req *r, unsigned dst_index)
{
    struct cor_task *dt = cor__task_get(dst_index);
    if (!dt) return COR_EINVAL;
    cor_idp_t src = cor__task_idp(g.rank, t->index);
    COR_LOCK(&dt->lock);
    struct cor_req *rr = cor__posted_take(dt, src, r->ctx, r->tag);
    cor__arrival_note(dt);
    if (rr) {
        COR_UNLOCK(&dt->lock);
        complete_recv_with(rr, src, r->ctx, r->tag, r->type, r->count, r->buf, r->cap);
        cor__req_complete(r, COR_OK);
        return COR_OK;
    }
    struct cor_umsg *m = calloc(1, sizeof *m);
    if (!m) {
        COR_UNLOCK(&dt->lock);
        return COR_ENOMEM;
    }
    *m = (struct cor_umsg){.src = src,
                           .ctx = r->ctx,
                           .tag = r->tag,
                           .type = r->type,
                           .count = r->count,
                           .bytes = r->cap};
    /* Small messages are buffered so the sender goes on; large ones wait for the receive
     * (bounded memory), the receiver then copying straight from the sender's buffer. */
    if (r->cap <= 65536 && (m->data = cor__buf_alloc(COR_BYTE, r->cap))) {
        m->kind = UM_EAGER;
        if (r->cap) memcpy(m->data, r->buf, r->cap);
    } else {
        m->kind = UM_LOCAL;
        m->lsend = r;
    }
    bool buffered = m->kind == UM_EAGER; /* m is the receiver's once unlocked */
    cor__unexp_append(dt, m);
    cor__count(C_UNEXPECTED_NOW, 1);
    COR_UNLOCK(&dt->lock);
    if (buffered) cor__req_complete(r, COR_OK);
    return COR_OK;
}

/* Without RMA the data follows the CTS in frames of hp->chunk bytes. A short last frame costs
 * as much as a full one (64 KiB over udp is 65375 + 161 bytes), so the RTS carries that tail
 * when it is small; a copy, since the route may hold the RTS past the send's completion. */
static void rts_carry_tail(struct cor_hport *hp, struct send_op *op, const struct cor_req *r)
{
    size_t tail = r->cap % hp->chunk;
    if (hp->rma || tail == 0 || tail > RTS_TAIL_MAX || tail == r->cap) return;
    void *copy = malloc(tail);
    if (!copy) return; /* the data frames bring it instead */
    memcpy(copy, (const char *)r->buf + r->cap - tail, tail);
    op->payload = copy;
    op->plen = tail;
    op->owned = true;
    op->hdr.offset = r->cap - tail;
}

/* A rendezvous its receiver reads (route get): the RTS names the data's place and the route's
 * key for it. Not with key 0 (the receiver's read would go as messages the sender answers). */
static bool rts_readable(struct cor_hport *hp, struct send_op *op, struct cor_req *r)
{
    uint64_t key = 0;
    if (!hp->get || r->cap == 0 || r->cap > (size_t)g.get_max ||
        hp->route->ops->mem_register(hp->rp, r->buf, r->cap, &r->mr, &key) != COR_OK)
        return false;
    if (!key) {
        cor__req_mr_release(r);
        return false;
    }
    op->hdr.type = F_RTS_GET;
    op->hdr.offset = (uint64_t)(uintptr_t)r->buf;
    op->hdr.rreq = key;
    r->getting = true;
    return true;
}

/* The task's table of message numbers, one per destination domain, made at its first send.
 * Threads sending as one task (libcorpvm's inbox) may get here together: one table wins
 * (their sends to one destination must be serialized by the caller). The pointer is only
 * ever read atomically: a failed exchange counts as an atomic write for ThreadSanitizer,
 * which then reported a plain read of it as a race. NULL: out of memory. */
static uint32_t *send_numbers(struct cor_task *t)
{
    uint32_t *seq = __atomic_load_n(&t->send_seq, __ATOMIC_ACQUIRE);
    if (seq) return seq;
    uint32_t *made = calloc((size_t)g.size, sizeof *made);
    if (!made) return NULL;
    if (__atomic_compare_exchange_n(&t->send_seq, &seq, made, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) /* (cor__peer_reset reads it) */
        return made;
    free(made);
    return seq; /* the winner's */
}

/* The next message number in a task's table to domain d. Atomic: cor__peer_reset zeroes it
 * under the task's lock, which senders do not take; either comes first (the numbers stay
 * whole). */
static inline uint32_t next_seq(uint32_t *seq, unsigned d)
{
    return __atomic_fetch_add(&seq[d], 1, __ATOMIC_RELAXED);
}

/* A peer's death and re-admission beside a send to it. A send looks at g.dead[d], then
 * reads the peer's incarnation, takes a message number and spends credits; a death and
 * re-admission (cor__peer_reset) in between used to leave a frame numbered in the new
 * occupant's count but addressed to the earlier one (dropped there: every later message of
 * that task waited for the missing number), or the earlier one's message delivered to the
 * new one as its message 0. In a dynamic session (the only one whose ranks are re-admitted)
 * the send counts itself in its task's `numbering` before it looks, and the reset waits
 * until no task counts itself: a send that looked before the death finishes with the
 * earlier occupant's incarnation, number and credits (which the reset then forgets), one that
 * counts itself later sees the rank dead (both steps sequentially consistent on each side).
 * Static sessions never reset a rank and skip it. */
/* tests/core stops a send here (1: after its look at the peer; 2: after it read the peer's
 * incarnation, before the number) to kill and re-admit the peer meanwhile. */
#ifndef COR_TEST_SEND_HOOK
#define COR_TEST_SEND_HOOK(at) ((void)0)
#endif

static inline bool numbering_begin(struct cor_task *t, unsigned d)
{
    if (!g.dynamic) return true;
    atomic_fetch_add(&t->numbering, 1);
    if (!atomic_load(&g.dead[d])) return true;
    atomic_fetch_sub(&t->numbering, 1);
    return false;
}

static inline void numbering_end(struct cor_task *t)
{
    if (g.dynamic) atomic_fetch_sub(&t->numbering, 1);
}

int cor__send_start(struct cor_task *t, struct cor_req *r)
{
    cor_idp_t dest = r->peer;
    unsigned d = cor_idp_domain(dest), index = cor_idp_index(dest);
    if (cor_idp_kind(dest) != COR_KIND_TASK || cor_idp_macro(dest) != g.macro ||
        d >= (unsigned)g.size || index >= (unsigned)g.max_tasks)
        return COR_EINVAL;
    cor__count(C_MSGS_SENT, 1);
    cor__count(C_BYTES_SENT, r->cap);
    if (d == (unsigned)g.rank) return send_local(t, r, index);
    if (atomic_load(&g.dead[d])) return COR_EPEERDEAD;

    struct cor_port *port = cor__task_port(t);
    if (!port) return g.nroutes ? COR_ENOMEM : COR_EROUTE;
    uint32_t *seq = send_numbers(t);
    if (!seq) return COR_ENOMEM;
    struct cor_hport *hp = port->hp;
    if (!numbering_begin(t, d)) return COR_EPEERDEAD;
    COR_TEST_SEND_HOOK(1);
    /* A small message is copied now, outside the lock, in case it goes eager on a route that
     * sends from our memory (below); as a rendezvous, the copy just goes unused. */
    bool small_copy = hp->caps.zero_copy_send && r->cap && r->cap <= ROOM_MAX;
    struct send_op *op = small_copy ? cor__op_new_copy(hp, d, r->buf, r->cap) : cor__op_new(hp, d);
    if (!op) {
        numbering_end(t);
        return COR_ENOMEM;
    }
    COR_TEST_SEND_HOOK(2);
    r->hp = hp;
    r->peer_rank = d;
    op->hdr = (struct frame_hdr){.dtype = (uint8_t)r->type,
                                 .src_task = (uint16_t)t->index,
                                 .dst_task = (uint16_t)index,
                                 .seq = next_seq(seq, d),
                                 .tag = r->tag,
                                 .ctx = r->ctx,
                                 .count = r->count,
                                 .len = r->cap,
                                 .sreq = r->handle};
    int cost = cor__credit_cost(r->cap, hp->eager_limit);
    if (r->cap <= hp->eager_limit && cor__credits_spend(hp, d, cost)) {
        op->hdr.type = F_EAGER;
        op->hdr.offset = (uint64_t)cost; /* what the receiver returns once it consumed it */
        op->req = r;
        /* A route that sends from our memory would hold the send until acknowledged; an
         * eager message is small, so copy it and complete the send at once (MPI's buffered
         * eager send). */
        if (!small_copy) { /* (a small one is in op->room already) */
            op->payload = r->buf;
            op->plen = r->cap;
            void *copy = hp->caps.zero_copy_send && r->cap ? cor__copy_get(hp) : NULL;
            if (copy) {
                memcpy(copy, r->buf, r->cap);
                op->payload = copy;
                op->owned = op->cached = true;
            }
        }
        r->eager = true;
        /* (after `eager`: the peer-death scan leaves eager sends to the route) */
        atomic_store_explicit(&r->remote_rank, (int)d, memory_order_release);
        cor__count(C_EAGER_SENT, 1);
    } else {
        if (r->cap <= hp->eager_limit) cor__count(C_CREDIT_STALLS, 1);
        op->hdr.type = F_RTS;
        op->payload = NULL; /* the copy in room[], if any, stays unused */
        op->plen = 0;
        if (!rts_readable(hp, op, r)) rts_carry_tail(hp, op, r);
        cor__count(C_RNDV_SENT, 1);
        cor__await_begin(r); /* its clear-to-send */
        /* The peer-death scan (cor__req_fail_peer) fails what names the dead rank: name it
         * only now, all set up, and look at the peer again, as cor__recv_start does. Either
         * the scan sees the name or we see the death (both sequentially consistent); a send
         * that only looked before could wait for a CTS for ever. In a dynamic session the
         * rank cannot be re-admitted meanwhile (numbering_begin). */
        atomic_store(&r->remote_rank, (int)d);
        if (atomic_load(&g.dead[d])) cor__req_complete(r, COR_EPEERDEAD); /* died meanwhile */
    }
    numbering_end(t);
    cor__hport_submit(hp, op);
    return COR_OK;
}

/* ---- receiving ---- */

/* A matched F_RTS_GET (at = the sender's address and key): the route reads the data into the
 * receive's buffer (OP_GET), whose completion sends F_GOT (cor__proto_got). false if it cannot. */
static bool read_into(struct cor_req *r, struct cor_hport *hp, uint32_t peer, const uint64_t at[2],
                      uint16_t src_task, uint16_t dst_task)
{
    uint64_t key;
    if (hp->route->ops->mem_register(hp->rp, r->buf, r->expect, &r->mr, &key) != COR_OK)
        return false;
    struct send_op *op = cor__op_new(hp, peer);
    if (!op) {
        cor__req_mr_release(r);
        return false;
    }
    op->kind = OP_GET;
    op->into = r;
    op->hdr = (struct frame_hdr){.type = F_GOT,
                                 .src_task = dst_task,
                                 .dst_task = src_task,
                                 .len = r->expect,
                                 .sreq = r->remote_req,
                                 .offset = at[0],
                                 .ctx = at[1]};
    r->getting = true;
    cor__count(C_MSGS_RECEIVED, 1);
    cor__hport_submit(hp, op);
    return true;
}

void cor__proto_got(struct cor_hport *hp, struct send_op *op, int status)
{
    struct cor_req *r = op->into;
    cor__req_mr_release(r);
    op->kind = OP_FRAME;
    op->into = NULL;
    op->hdr.offset = op->hdr.ctx = 0;
    if (status == COR_OK) {
        cor__hport_submit(hp, op); /* F_GOT: the sender's send is done */
        cor__count(C_BYTES_RECEIVED, r->expect);
        atomic_store(&r->done_bytes, r->expect);
        cor__arrival_note(r->owner);
        cor__req_complete(r, r->status.error);
        return;
    }
    if (status == COR_EPEERDEAD || status == COR_ECLOSED) {
        free(op);
        cor__req_complete(r, status);
        return;
    }
    /* The sender's memory could not be read (its key is not live there): ask for the data as
     * for an RTS, by CTS; the sender's send is still pending. */
    r->getting = false;
    op->hdr = (struct frame_hdr){.type = F_CTS,
                                 .src_task = op->hdr.src_task,
                                 .dst_task = op->hdr.dst_task,
                                 .len = r->expect,
                                 .sreq = op->hdr.sreq,
                                 .rreq = r->handle};
    cor__await_begin(r);
    atomic_store(&r->awaiting_data, true);
    cor__hport_submit(hp, op);
}

/* A matched rendezvous: answer CTS with what the receive can take, less the message's tail
 * that came with the RTS (`tail` bytes ending the message, or none); a readable
 * one (F_RTS_GET: `readable` = the sender's address and key) is read instead when it can be. */
static void rndv_accept(struct cor_req *r, struct cor_hport *hp, uint32_t peer, uint64_t sreq,
                        cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type, size_t count,
                        size_t bytes, uint16_t src_task, uint16_t dst_task, const void *tail,
                        size_t tail_len, const uint64_t *readable)
{
    fill_status(r, src, ctx, tag, type, count);
    size_t take;
    int err = accept_into(r, type, count, bytes, &take);
    r->status.error = err;
    r->hp = hp;
    r->peer_rank = peer;
    r->remote_rank = (int)peer;
    r->remote_req = sreq;
    r->expect = take;
    size_t ask = take, tail_at = bytes - tail_len;
    bool taking = err == COR_OK || err == COR_ETRUNC;
    if (readable && hp->get && taking && take && !tail_len &&
        read_into(r, hp, peer, readable, src_task, dst_task))
        return;
    if (tail_len && taking && take > tail_at) {
        /* under the owner's lock, as on_data copies: a peer death may complete r meanwhile */
        COR_LOCK(&r->owner->lock);
        bool live = atomic_load(&r->state) == RS_MATCHED;
        if (live) memcpy((char *)r->buf + tail_at, tail, take - tail_at);
        COR_UNLOCK(&r->owner->lock);
        if (!live) return;
        cor__count(C_BYTES_RECEIVED, (int64_t)(take - tail_at));
        atomic_store(&r->done_bytes, take - tail_at); /* before the CTS lets data in */
        ask = tail_at;
    }
    struct frame_hdr h = {.type = F_CTS,
                          .src_task = dst_task,
                          .dst_task = src_task,
                          .len = ask,
                          .sreq = sreq,
                          .rreq = r->handle};
    uint64_t key;
    /* remote write covers whole receives only: F_FIN reports the bytes written */
    if (hp->rma && take && ask == take && taking &&
        hp->route->ops->mem_register(hp->rp, r->buf, take, &r->mr, &key) == COR_OK) {
        r->rma = true;
        h.count = CTS_RMA;
        h.offset = (uint64_t)(uintptr_t)r->buf;
        h.ctx = key;
    }
    bool waits = take != 0 && taking; /* for the data (or F_FIN) after the CTS */
    if (waits) cor__await_begin(r);
    if (cor__frame_send(hp, peer, &h, sizeof h, NULL, 0, NULL) != COR_OK) {
        cor__req_complete(r, COR_ENOMEM);
        return;
    }
    cor__count(C_MSGS_RECEIVED, 1);
    if (!waits)
        cor__req_complete(r, err);
    else
        atomic_store(&r->awaiting_data, true);
}

void cor__umsg_free(struct cor_umsg *m)
{
    if (m->data) cor_releaseBuffer(m->data);
    free(m);
}

/* Consumes an unexpected message into receive r (r already off every list). */
static void consume(struct cor_req *r, struct cor_umsg *m)
{
    cor__count(C_UNEXPECTED_NOW, -1);
    switch (m->kind) {
    case UM_EAGER:
        cor__count(C_UNEXPECTED_BYTES_NOW, -(int64_t)(m->hp ? m->bytes : 0));
        if (r->core_alloc) {
            /* hand the buffer over instead of copying it */
            struct cor_bufhdr *bh = cor__buf_hdr(m->data);
            bh->type = m->type;
            bh->n = m->count;
            r->buf = m->data;
            r->cap = m->bytes;
            m->data = NULL;
        }
        complete_recv_with(r, m->src, m->ctx, m->tag, m->type, m->count, m->data ? m->data : r->buf,
                           m->bytes);
        if (m->hp) cor__return_credit(m->hp, m->peer_rank, m->credit);
        break;
    case UM_RNDV: {
        uint64_t at[2] = {m->raddr, m->rkey};
        rndv_accept(r, m->hp, m->peer_rank, m->sreq, m->src, m->ctx, m->tag, m->type, m->count,
                    m->bytes, (uint16_t)cor_idp_index(m->src), (uint16_t)r->owner->index, m->data,
                    m->tail, m->readable ? at : NULL);
        break;
    }
    case UM_LOCAL:
        complete_recv_with(r, m->src, m->ctx, m->tag, m->type, m->count, m->lsend->buf, m->bytes);
        cor__req_complete(m->lsend, COR_OK);
        break;
    }
    cor__umsg_free(m);
}

int cor__recv_start(struct cor_task *t, struct cor_req *r)
{
    if (r->peer != COR_ANY_SOURCE) {
        unsigned d = cor_idp_domain(r->peer);
        if (cor_idp_kind(r->peer) != COR_KIND_TASK || d >= (unsigned)g.size) return COR_EINVAL;
        if (d != (unsigned)g.rank) {
            if (atomic_load(&g.dead[d])) return COR_EPEERDEAD;
            r->remote_rank = (int)d;
            /* A receive from a peer is talking to it: with peers at first contact its ports
             * learn of it now, so that its routes watch it (a udp port probes the peers it
             * knows) and its death ends this wait even if nothing ever goes to it. A peer
             * that cannot be looked up is logged there; the receive waits as before. */
            (void)cor__peer_ready(d);
        }
    }
    int from = r->remote_rank; /* once posted, r belongs to whoever matches it */
    COR_LOCK(&t->lock);
    struct cor_umsg *m = cor__unexp_take(t, r->peer, r->ctx, r->tag);
    if (!m)
        cor__posted_append(t, r);
    else
        atomic_store(&r->state, RS_MATCHED);
    COR_UNLOCK(&t->lock);
    if (m)
        consume(r, m);
    else if (from >= 0 && atomic_load(&g.dead[from]))
        cor__req_fail_peer((unsigned)from, COR_EPEERDEAD); /* died meanwhile */
    return COR_OK;
}

/* The credit units an EAGER frame's sender charged for it (a header carries at most 0xffff). */
static int eager_credit(const struct frame_hdr *h)
{
    return h->offset > 0xffff ? 0xffff : (int)h->offset;
}

/* An EAGER or RTS frame whose turn has come. */
static void on_message(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h,
                       const void *payload, size_t plen)
{
    struct cor_task *dt = cor__task_get(h->dst_task);
    if (!dt || !cor__frame_msg_ok(h, plen, hp->eager_limit)) {
        drop("malformed message header", peer);
        return;
    }
    cor_idp_t src = cor__task_idp(peer, h->src_task);
    COR_LOCK(&dt->lock);
    struct cor_req *r = cor__posted_unlink(dt, src, h->ctx, h->tag);
    if (r && h->type == F_EAGER) {
        /* The common case, an eager message for a posted receive: copied from the route's
         * buffer and completed before the lock goes, which keeps cancel and the peer-death
         * scan off the request (both look under this lock), so no compare-and-swap and no
         * fenced store (three locked instructions fewer per message). */
        complete_recv_held(r, src, h->ctx, h->tag, h->dtype, h->count, payload, plen);
        COR_UNLOCK(&dt->lock);
        cor__arrival_note(dt);
        cor__return_credit(hp, peer, eager_credit(h));
        return;
    }
    if (r) atomic_store(&r->state, RS_MATCHED); /* cancel can no longer take it */
    struct cor_umsg *m = NULL;
    if (!r) {
        m = calloc(1, sizeof *m);
        if (m) {
            *m = (struct cor_umsg){.src = src,
                                   .ctx = h->ctx,
                                   .tag = h->tag,
                                   .type = (cor_type_t)h->dtype,
                                   .count = h->count,
                                   .bytes = h->len,
                                   .hp = hp,
                                   .peer_rank = peer,
                                   .sreq = h->sreq};
            if (h->type == F_EAGER) {
                m->kind = UM_EAGER;
                m->credit = eager_credit(h);
                m->data = cor__buf_alloc(COR_BYTE, plen);
                if (m->data) {
                    if (plen) memcpy(m->data, payload, plen);
                } else {
                    free(m);
                    m = NULL;
                }
            } else {
                m->kind = UM_RNDV;
                m->readable = h->type == F_RTS_GET;
                m->raddr = h->offset;
                m->rkey = h->rreq;
                if (plen && (m->data = cor__buf_alloc(COR_BYTE, plen))) {
                    memcpy(m->data, payload, plen);
                    m->tail = plen;
                } else if (plen) {
                    free(m);
                    m = NULL;
                }
            }
        }
        if (m) {
            cor__unexp_append(dt, m);
            cor__count(C_UNEXPECTED_NOW, 1);
            if (m->kind == UM_EAGER) cor__count(C_UNEXPECTED_BYTES_NOW, plen);
        }
    }
    COR_UNLOCK(&dt->lock);
    cor__arrival_note(dt);
    if (r) { /* an RTS */
        uint64_t at[2] = {h->offset, h->rreq};
        rndv_accept(r, hp, peer, h->sreq, src, h->ctx, h->tag, h->dtype, h->count, h->len,
                    h->src_task, h->dst_task, payload, plen, h->type == F_RTS_GET ? at : NULL);
    } else if (!m) {
        cor__log("out of memory keeping a message from domain %u: it is lost", peer);
    }
}

static void on_cts(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h)
{
    struct cor_req *r = cor__req_lookup(h->sreq);
    if (!r || r->kind != REQ_SEND || r->peer_rank != peer || r->hp != hp ||
        atomic_load(&r->state) != RS_PENDING || h->len > r->cap) {
        drop("clear-to-send for no pending send", peer);
        return;
    }
    cor__await_end(r); /* what is left is the route's to hold (data frames, puts) */
    r->remote_req = h->rreq;
    r->expect = h->len;
    if (h->count == CTS_RMA) {
        /* (an RTS_GET's registration of the whole buffer serves the put as well) */
        if (!hp->rma || h->len == 0 ||
            (!r->mr &&
             hp->route->ops->mem_register(hp->rp, r->buf, h->len, &r->mr, &r->rkey) != COR_OK)) {
            /* the sender cannot write remotely: the receiver waits for F_FIN forever
             * otherwise, so this is a protocol failure both sides must see */
            drop("remote-write clear-to-send on a port without RMA", peer);
            cor__req_complete(r, COR_EPROTO);
            return;
        }
        r->rma = true;
        r->raddr = h->offset;
        r->rkey = h->ctx;
    }
    int pending = RS_PENDING; /* a peer death may have completed it meanwhile */
    if (!atomic_compare_exchange_strong(&r->state, &pending, RS_MATCHED)) {
        if (!r->getting) cor__req_mr_release(r); /* (else that completion released it) */
        return;
    }
    if (h->len == 0) {
        cor__req_complete(r, COR_OK);
        return;
    }
    /* Large messages are striped over the route's hard ports, one slice per port. */
    struct cor_route *rt = hp->route;
    size_t slices = r->expect >= (size_t)g.stripe_min && !r->rma ? (size_t)rt->nports : 1;
    size_t slice = (r->expect + slices - 1) / slices;
    slice = (slice + 4095) & ~(size_t)4095;
    cor__send_hold(r); /* until every slice is queued */
    for (size_t i = 0, off = 0; off < r->expect; i++, off += slice) {
        struct cor_hport *jp = slices > 1 ? rt->ports[(hp->index + i) % rt->nports] : hp;
        struct send_op *job = cor__op_new(jp, peer);
        if (!job) {
            cor__send_release(r, COR_ENOMEM);
            return;
        }
        job->kind = OP_DATA_JOB;
        job->data = r;
        job->payload = r->buf;
        job->job_off = off;
        job->job_end = off + slice < r->expect ? off + slice : r->expect;
        job->hdr.src_task = h->dst_task;
        job->hdr.dst_task = h->src_task;
        job->hdr.rreq = r->remote_req;
        job->hdr.sreq = r->handle;
        cor__send_hold(r);
        cor__hport_submit(jp, job);
    }
    cor__send_release(r, COR_OK);
}

static void on_data(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h,
                    const void *payload, size_t plen)
{
    struct cor_req *r = cor__req_lookup(h->rreq);
    if (!r || r->kind != REQ_RECV || r->peer_rank != peer || atomic_load(&r->state) != RS_MATCHED ||
        r->getting || plen != h->len || h->offset > r->expect || plen > r->expect - h->offset) {
        drop("rendezvous data for no matching receive", peer);
        return;
    }
    /* Copy under the owner's lock: a completion by peer death (req.c) publishes under that
     * lock too, so the caller cannot free the buffer while we write into it. */
    struct cor_task *t = r->owner;
    COR_LOCK(&t->lock);
    bool live = atomic_load(&r->state) == RS_MATCHED;
    if (live && plen) memcpy((char *)r->buf + h->offset, payload, plen);
    COR_UNLOCK(&t->lock);
    if (!live) return;
    /* frames of a striped message arrive on several ports at once: the one that brings
     * the last byte completes */
    cor__count(C_BYTES_RECEIVED, plen);
    /* expect is read before our bytes count: once they do, another port's frame may complete
     * r, and its caller free it and reuse the slot (ThreadSanitizer saw that read race) */
    size_t expect = r->expect;
    if (atomic_fetch_add(&r->done_bytes, plen) + plen == expect) {
        cor__arrival_note(t);
        cor__req_complete(r, r->status.error);
    }
}

static void on_fin(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h)
{
    struct cor_req *r = cor__req_lookup(h->rreq);
    if (!r || r->kind != REQ_RECV || r->peer_rank != peer || !r->rma ||
        atomic_load(&r->state) != RS_MATCHED || h->len != r->expect) {
        drop("remote-write completion for no matching receive", peer);
        return;
    }
    cor__req_mr_release(r);
    atomic_store(&r->done_bytes, r->expect);
    cor__count(C_BYTES_RECEIVED, r->expect);
    cor__arrival_note(r->owner);
    cor__req_complete(r, r->status.error);
}

/* The receiver read the data of our F_RTS_GET: the send is done. */
static void on_got(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h)
{
    struct cor_req *r = cor__req_lookup(h->sreq);
    if (!r || r->kind != REQ_SEND || r->peer_rank != peer || r->hp != hp || !r->getting ||
        atomic_load(&r->state) != RS_PENDING || h->len > r->cap) {
        drop("read-rendezvous completion for no pending send", peer);
        return;
    }
    cor__req_complete(r, COR_OK); /* (its registration goes with it) */
}

static void on_svc(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h,
                   const void *payload, size_t plen)
{
    if (plen != sizeof(struct svc_msg)) {
        drop("service frame of wrong size", peer);
        return;
    }
    if (h->type == F_SVC_REQ) {
        struct svc_msg m;
        memcpy(&m, payload, sizeof m);
        m.name[COR_NAME_MAX - 1] = 0;
        cor__svc_handle(&m);
        struct frame_hdr rep = {.type = F_SVC_REP, .sreq = h->sreq};
        cor__frame_send_copy(hp, peer, &rep, sizeof rep, &m, sizeof m);
        return;
    }
    struct cor_req *r = cor__req_lookup(h->sreq);
    if (!r || r->kind != REQ_SVC || r->peer_rank != peer || !r->svc_reply) {
        drop("service reply for no pending call", peer);
        return;
    }
    memcpy(r->svc_reply, payload, sizeof(struct svc_msg));
    cor__req_complete(r, COR_OK);
}

static void process(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h,
                    const void *payload, size_t plen);

/* Makes ps->recv_seq long enough for sender task `task` (< max_tasks): a power of two from
 * 8 numbers up, new ones 0. Caller holds ps->lock. */
static int recv_seq_fit(struct peer_state *ps, unsigned task)
{
    uint32_t n = ps->nrecv_seq ? ps->nrecv_seq : 8;
    while (n <= task)
        n *= 2;
    if (n > (uint32_t)g.max_tasks) n = (uint32_t)g.max_tasks;
    uint32_t *seq = realloc(ps->recv_seq, n * sizeof *seq);
    if (!seq) return -1;
    memset(seq + ps->nrecv_seq, 0, (n - ps->nrecv_seq) * sizeof *seq);
    ps->recv_seq = seq;
    ps->nrecv_seq = n;
    return 0;
}

/* Matches messages in each sender task's order, holding any that overtook an earlier one
 * (possible only when a task switched hard ports or routes). Caller orders the calls for the
 * peer (in_order). */
static void in_order_match(struct cor_hport *hp, uint32_t peer, struct peer_state *ps,
                           const struct frame_hdr *h, const unsigned char *frame, size_t len)
{
    /* Made at the first message from this peer, not at cor_init, and only as long as the
     * sender's task indices need: max_tasks numbers (4 KiB) per peer would be 1 MiB a domain
     * at 256 domains and 40 MiB at 10,000 (docs/scale.md). */
    if (h->src_task >= ps->nrecv_seq && recv_seq_fit(ps, h->src_task) != 0) {
        drop("no memory for the sender's message numbers", peer);
        return;
    }
    uint32_t *next = &ps->recv_seq[h->src_task];
    if (h->seq != *next) {
        if ((int32_t)(h->seq - *next) < 0) {
            drop("duplicate message number", peer);
            return;
        }
        struct held_frame *hf = malloc(sizeof *hf + len);
        if (hf) {
            *hf = (struct held_frame){
                .next = ps->held, .hp = hp, .src_task = h->src_task, .seq = h->seq, .len = len};
            memcpy(hf->frame, frame, len);
            ps->held = hf;
        }
        return;
    }
    on_message(hp, peer, h, frame + FRAME_HDR_SIZE, len - FRAME_HDR_SIZE);
    (*next)++;
    for (struct held_frame **pp = &ps->held; *pp;) {
        struct held_frame *hf = *pp;
        if (hf->src_task != h->src_task || hf->seq != *next) {
            pp = &hf->next;
            continue;
        }
        *pp = hf->next;
        struct frame_hdr hh;
        memcpy(&hh, hf->frame, sizeof hh);
        on_message(hf->hp, peer, &hh, hf->frame + FRAME_HDR_SIZE, hf->len - FRAME_HDR_SIZE);
        (*next)++;
        free(hf);
        pp = &ps->held; /* the next one may be anywhere */
    }
}

/* An EAGER or RTS frame from `peer`: matched in order. Frames of one peer may arrive on
 * several hard ports at once, so the peer's lock orders their matching; with one hard port
 * (g.one_port) its owner is the only thread that delivers, and the port's ownership already
 * orders them (taking and leaving it are sequentially consistent exchanges): no lock. */
static void in_order(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h,
                     const unsigned char *frame, size_t len)
{
    struct peer_state *ps = &g.peers[peer];
    if (h->src_task >= g.max_tasks) {
        drop("sender task index out of range", peer);
        return;
    }
    bool lock = !g.one_port;
    if (lock) COR_LOCK(&ps->lock);
    in_order_match(hp, peer, ps, h, frame, len);
    if (lock) COR_UNLOCK(&ps->lock);
}

void cor__upcall_deliver(void *core, cor_peer_t peer, const void *frame, size_t len)
{
    struct cor_hport *hp = core;
    if (hp->index < 0) { /* a raw port (raw.c) */
        if (hp->raw_deliver) hp->raw_deliver(hp, peer, frame, len);
        return;
    }
    struct frame_hdr h;
    int bad = peer >= (uint32_t)g.size ? -1 : cor__frame_hdr(frame, len, &h);
    if (bad) {
        drop(bad == -1 ? "frame shorter than a header or from an unknown peer"
                       : "unknown frame type",
             peer);
        return;
    }
    /* A rank re-admitted (cor_domain_connect after cor_domain_leave): what its earlier
     * occupant sent late, or what was meant for our own earlier incarnation, is not ours. */
    uint32_t pe = atomic_load_explicit(&g.peer_epoch[peer], memory_order_acquire);
    if ((pe && h.src_epoch != pe) || (h.dst_epoch && h.dst_epoch != g.epoch)) {
        drop("from an earlier occupant of its rank, or for one of ours", peer);
        return;
    }
    if (h.credits) cor__credits_returned(hp, peer, h.credits);
    const unsigned char *p = frame;
    if (cor__frame_is_msg(h.type))
        in_order(hp, peer, &h, p, len);
    else
        process(hp, peer, &h, p + FRAME_HDR_SIZE, len - FRAME_HDR_SIZE);
}

static void process(struct cor_hport *hp, uint32_t peer, const struct frame_hdr *h,
                    const void *payload, size_t plen)
{
    switch (h->type) {
    case F_CTS:
        on_cts(hp, peer, h);
        break;
    case F_DATA:
        on_data(hp, peer, h, payload, plen);
        break;
    case F_CREDIT:
        break;
    case F_FIN:
        on_fin(hp, peer, h);
        break;
    case F_GOT:
        on_got(hp, peer, h);
        break;
    case F_SVC_REQ:
    case F_SVC_REP:
        on_svc(hp, peer, h, payload, plen);
        break;
    default:
        drop("unexpected frame type", peer);
    }
}

void cor__upcall_peer_failed(void *core, cor_peer_t peer, int err)
{
    if (peer >= (uint32_t)g.size) return;
    /* A peer that went silent (not one that closed or refused): the whole session lets it go,
     * not only us (cor-run stops it), but not once we passed cor_finalize's barrier. */
    if (err == COR_ETIMEDOUT) {
        if (atomic_load(&g.initialized) != 3) cor__boot_lost(g.boot, (int)peer);
        err = COR_EPEERDEAD;
    }
    cor__peer_died(peer, err ? err : COR_EPEERDEAD);
}

/* The rank being reset is dead: sends that looked at it before (numbering_begin) finish
 * numbering their frames first, so that none takes a number of the new occupant's count or
 * its incarnation. That takes microseconds (no wait for the peer in it); g.lock is let go
 * while we yield to them, in case one needs it, and the wait is bounded all the same (a
 * sender stopped by a debugger), saying so when it gives up. */
#define NUMBERING_DRAIN_NS 2000000000ull

static void numbering_drain(void)
{
    uint64_t t0 = cor__now_ns();
    COR_LOCK(&g.lock);
    for (int i = 0; g.tasks && i < g.max_tasks; i++)
        while (g.tasks[i] && atomic_load(&g.tasks[i]->numbering)) {
            if (cor__now_ns() - t0 > NUMBERING_DRAIN_NS) {
                cor__log("a send of task %d still numbers a frame after 2 s; the re-admission "
                         "goes on",
                         i);
                i = g.max_tasks; /* (ends both loops) */
                break;
            }
            COR_UNLOCK(&g.lock);
            sched_yield();
            COR_LOCK(&g.lock);
        }
    COR_UNLOCK(&g.lock);
}

/* Rank `peer` gets a new occupant (cor_domain_connect after cor_domain_leave): what this
 * domain kept for the earlier one goes, so the new one starts as a peer never heard from:
 * message numbers both ways, frames held for their turn, eager credits, and the unexpected
 * messages the earlier one left (dropped and counted: nobody may take them for the new
 * one's). The rank is dead meanwhile (sends to it fail before they take a number). */
void cor__peer_reset(uint32_t peer)
{
    numbering_drain();
    struct peer_state *ps = &g.peers[peer];
    /* With one hard port its owner matches without the peer's lock (in_order): own it. */
    struct cor_hport *only = g.one_port ? g.routes[0]->ports[0] : NULL;
    if (only && cor__port_mine(only)) only = NULL; /* (we own it already) */
    if (only) cor__port_own_wait(only);
    COR_LOCK(&ps->lock);
    free(ps->recv_seq);
    ps->recv_seq = NULL;
    ps->nrecv_seq = 0;
    struct held_frame *hf = ps->held;
    ps->held = NULL;
    COR_UNLOCK(&ps->lock);
    if (only) cor__port_release(only);
    while (hf) {
        struct held_frame *next = hf->next;
        cor__count(C_FRAMES_DROPPED, 1);
        free(hf);
        hf = next;
    }
    for (int i = 0; i < g.nroutes; i++)
        for (int k = 0; k < g.routes[i]->nports; k++)
            cor__credits_reset(g.routes[i]->ports[k], peer);
    COR_LOCK(&g.lock);
    for (int i = 0; g.tasks && i < g.max_tasks; i++) {
        struct cor_task *t = g.tasks[i];
        if (!t) continue;
        COR_LOCK(&t->lock);
        uint32_t *seq = __atomic_load_n(&t->send_seq, __ATOMIC_ACQUIRE);
        if (seq) __atomic_store_n(&seq[peer], 0, __ATOMIC_RELAXED); /* senders: next_seq */
        struct cor_umsg *gone = cor__unexp_take_peer(t, peer);
        COR_UNLOCK(&t->lock);
        while (gone) {
            struct cor_umsg *next = gone->next;
            cor__count(C_UNEXPECTED_NOW, -1);
            cor__count(C_UNEXPECTED_BYTES_NOW, -(int64_t)(gone->hp ? gone->bytes : 0));
            cor__count(C_FRAMES_DROPPED, 1);
            cor__umsg_free(gone);
            gone = next;
        }
    }
    COR_UNLOCK(&g.lock);
}
