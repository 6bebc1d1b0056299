/*
 * A hard port: one endpoint of a route (a UDP socket, a GM port) and everything the core
 * keeps to drive it, in one place.
 *
 * - Its owner. One thread at a time owns the port (an atomic flag): only the owner calls the
 *   route's send, put and progress there (route.h promises the routes as much) and touches
 *   the queue; a thread that finds the port owned never waits for it.
 * - Its inbox (lock-free, frames of threads that found the port owned) and its queue (the
 *   owner's: frames the route pushed back, in order), the dispatch of both to the route, and
 *   the dispatcher thread that retries a queue the route refused when nobody else polls.
 * - Its per-peer eager credits (atomics).
 * - Its polling (cor__hport_poll): own, let the route deliver (proto.c handles each frame),
 *   let go.
 *
 * The send path, top to bottom: proto.c builds an op (cor__op_new), spends credits
 * (cor__credits_spend) and hands it over (cor__hport_submit). If the port is free the sender
 * owns it, sends what the inbox holds, then its own frame (route_send: piggy-backed credits,
 * the route's send, an eager send completed at once on a copying route) and lets go. If the
 * port is owned the op goes into the inbox and the owner sends it before it lets go. The
 * route reports each frame done (cor__upcall_send_done) inside the owner's progress.
 *
 * The receive path: cor__hport_poll owns the port, calls the route's progress, which hands
 * each frame to cor__upcall_deliver (proto.c: credits back, order, match, complete), and lets
 * go; consuming a message owes its credits back (cor__return_credit), sent as a credit-only
 * frame once enough are owed, else piggy-backed on the next frame toward that peer.
 *
 * The listener thread and the waiting policy (who polls when) are progress.c's.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "hport.h"
#include "internal.h"
#include "knobs.h"
#include "proto.h"
#include "tcache.h"

/* ---- opening a hard port ---- */

/* COR_BIND as the routes get it. "auto" is resolved here, once for every route: our end of
 * the TCP connection to cor-run (the address toward the other hosts), else the first IPv4
 * interface that is up, running and not loopback, else loopback. */
static const char *bind_hint(char *buf, size_t cap)
{
    const char *bind = cor__knob_str(COR_K_BIND);
    if (!bind || !*bind) return "loopback";
    if (strcmp(bind, "auto") != 0) return bind;
    if (g.boot && g.boot->local_addr[0]) {
        snprintf(buf, cap, "%s", g.boot->local_addr);
        return buf;
    }
    struct ifaddrs *ifs = NULL;
    const char *pick = "loopback";
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
                (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) ||
                !(i->ifa_flags & IFF_RUNNING))
                continue;
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(a.s_addr) >> 24) == 127) continue;
            if (inet_ntop(AF_INET, &a, buf, (socklen_t)cap)) pick = buf;
            break;
        }
        freeifaddrs(ifs);
    }
    return pick;
}

int cor__hport_open(struct cor_route *r, int index, struct cor_hport **out)
{
    struct cor_hport *hp = calloc(1, sizeof *hp);
    if (!hp) return COR_ENOMEM;
    hp->route = r;
    hp->index = index;
    hp->links = calloc((size_t)g.size, sizeof *hp->links);
    if (!hp->links) {
        free(hp);
        return COR_ENOMEM;
    }
    pthread_mutex_init(&hp->disp_lock, NULL);
    pthread_mutex_init(&hp->copy_lock, NULL);
    pthread_cond_init(&hp->send_cond, NULL);

    char bind_buf[64];
    const char *bind = bind_hint(bind_buf, sizeof bind_buf);
    struct cor_route_config cfg = {.session_cookie = g.cookie,
                                   .self = (uint32_t)g.rank,
                                   .npeers = (uint32_t)g.size,
                                   .port_index = index,
                                   .bind_hint = bind};
    struct cor_route_upcalls up = {.core = hp,
                                   .deliver = cor__upcall_deliver,
                                   .send_done = cor__upcall_send_done,
                                   .peer_failed = cor__upcall_peer_failed,
                                   .need_peer = cor__upcall_need_peer};
    int err = r->ops->open(&cfg, &up, &hp->rp);
    if (err) {
        cor__log("route '%s': cannot open hard port %d: %s", r->name, index, cor_strerror(err));
        free(hp->links);
        free(hp);
        return err;
    }
    memset(&hp->caps, 0, sizeof hp->caps); /* fields a route does not know stay 0 */
    r->ops->caps(hp->rp, &hp->caps);
    if (hp->caps.frame_max <= FRAME_HDR_SIZE + 64) {
        cor__log("route '%s': frame_max %zu is too small", r->name, hp->caps.frame_max);
        r->ops->close(hp->rp);
        free(hp->links);
        free(hp);
        return COR_EROUTE;
    }
    size_t room = hp->caps.frame_max - FRAME_HDR_SIZE;
    hp->eager_limit = g.eager_override >= 0 ? (size_t)g.eager_override : hp->caps.eager_limit;
    if (hp->eager_limit > room) hp->eager_limit = room;
    hp->chunk = room;
    long units = (long)g.credits * cor__credit_cost(hp->eager_limit, hp->eager_limit);
    hp->credit_units = units > INT32_MAX / 2 ? INT32_MAX / 2 : (int)units;
    hp->credit_threshold = (int)(units * g.credit_threshold / g.credits);
    for (int i = 0; i < g.size; i++)
        hp->links[i].credits = hp->credit_units;
    if (hp->caps.frame_pref > FRAME_HDR_SIZE + 4096 && hp->caps.frame_pref < hp->caps.frame_max)
        hp->chunk = hp->caps.frame_pref - FRAME_HDR_SIZE;
    const struct cor_route_ops *ops = r->ops;
    hp->rma = hp->caps.has_rma && cor__route_has_rma(ops) && cor__knob_long(COR_K_RMA) == 1;
    hp->await_peer = cor__route_has_await(ops);
    hp->get = hp->rma && cor__route_has_get(ops);
    *out = hp;
    return COR_OK;
}

void *cor__copy_get(struct cor_hport *hp)
{
    COR_LOCK(&hp->copy_lock);
    void *b = hp->ncopies ? hp->copies[--hp->ncopies] : NULL;
    COR_UNLOCK(&hp->copy_lock);
    return b ? b : malloc(hp->eager_limit ? hp->eager_limit : 1);
}

void cor__copy_put(struct cor_hport *hp, void *b)
{
    COR_LOCK(&hp->copy_lock);
    if (hp->ncopies < COPY_CACHE) {
        hp->copies[hp->ncopies++] = b;
        b = NULL;
    }
    COR_UNLOCK(&hp->copy_lock);
    free(b);
}

/* ---- credits: atomics, so receiving and returning them takes no lock ---- */

/* Credits owed back are noted in two counts: the port's owner (the thread that delivers the
 * frames, hence most consumptions) adds to `owed_own`, which only the owner changes, so a
 * plain load and store do (the port's ownership orders its owners); other threads (a receive
 * that found its message waiting) add to `owed` atomically. A ping-pong used to pay a
 * fetch-and-add to note the credits and a compare-and-swap to take them, per message and
 * side. */
static int owed_own_get(struct peer_link *l)
{
    return atomic_load_explicit(&l->owed_own, memory_order_relaxed);
}

static void owed_own_set(struct peer_link *l, int v)
{
    atomic_store_explicit(&l->owed_own, v, memory_order_relaxed);
}

/* Takes up to `most` of what other threads noted we owe the peer. */
static int owed_take_shared(struct peer_link *l, int most)
{
    int v = atomic_load_explicit(&l->owed, memory_order_relaxed), take;
    do {
        take = v > most ? most : v;
    } while (take > 0 && !atomic_compare_exchange_weak(&l->owed, &v, v - take));
    return take > 0 ? take : 0;
}

/* Takes what we owe the peer, up to what a header carries; the port's owner. */
static int owed_take(struct peer_link *l)
{
    int own = owed_own_get(l), take = own > 0xffff ? 0xffff : own;
    if (own) owed_own_set(l, own - take);
    return take + owed_take_shared(l, 0xffff - take);
}

bool cor__credits_spend(struct cor_hport *hp, uint32_t peer, int cost)
{
    struct peer_link *l = &hp->links[peer];
    int v = atomic_load(&l->credits);
    while (v > cost)
        if (atomic_compare_exchange_weak(&l->credits, &v, v - cost)) return true;
    return false;
}

void cor__credits_returned(struct cor_hport *hp, uint32_t peer, int n)
{
    struct peer_link *l = &hp->links[peer];
    int v = atomic_load(&l->credits), sum;
    do {
        sum = v + n > hp->credit_units ? hp->credit_units : v + n;
    } while (!atomic_compare_exchange_weak(&l->credits, &v, sum));
}

/* Rank `peer` gets a new occupant (cor__peer_reset): a full budget, nothing owed. */
void cor__credits_reset(struct cor_hport *hp, uint32_t peer)
{
    atomic_store(&hp->links[peer].credits, hp->credit_units);
    atomic_store(&hp->links[peer].owed, 0);
    owed_own_set(&hp->links[peer], 0);
}

/* ---- one owner per hard port ----
 * A port has one owner at a time, whoever set `owned`: it alone calls the route's send, put
 * and progress there (route.h promises the routes as much), so a route's calls on a port never
 * run at once and its own locks are never contended. A thread that finds the port owned does
 * not wait: it leaves its frame in the inbox (below) and goes on; the owner sends it before
 * it lets go. A sender used to block on the port's send lock while a thread holding it was
 * preempted, and the route's and libgm's locks inside it were contended as well. Taking and
 * leaving are one exchange each, with no fence besides: cheaper than the mutex and the
 * fence they replace, which an idle poll paid each time. */
static _Thread_local char owner_mark; /* its address names this thread */

static void port_drain(struct cor_hport *hp); /* the send path, below */

bool cor__port_own(struct cor_hport *hp)
{
    /* seq_cst, as the inbox's push and the release's look: see cor__port_release */
    if (atomic_load(&hp->owned) || atomic_exchange(&hp->owned, true)) return false;
    atomic_store_explicit(&hp->owner, &owner_mark, memory_order_relaxed);
    return true;
}

void cor__port_own_wait(struct cor_hport *hp)
{
    while (!cor__port_own(hp))
        sched_yield();
}

bool cor__port_mine(struct cor_hport *hp)
{
    return atomic_load_explicit(&hp->owner, memory_order_relaxed) == &owner_mark;
}

void cor__port_release(struct cor_hport *hp)
{
    /* A frame pushed while we owned the port, whose sender then found it owned: these four
     * steps are sequentially consistent (push, look at `owned`; leave, look at the inbox),
     * so either we see the frame here or its sender saw the port free and sends it itself.
     * No frame stays behind unsent. */
    do {
        port_drain(hp);
        atomic_store_explicit(&hp->owner, NULL, memory_order_relaxed);
        atomic_exchange(&hp->owned, false);
    } while (atomic_load(&hp->inbox) && cor__port_own(hp));
}

/* ---- the send path, in the order a frame takes it ---- */

static void submit_owned(struct cor_hport *hp, struct send_op *op);
static int route_send(struct cor_hport *hp, struct send_op *op, bool own);
static void queue_append(struct cor_hport *hp, struct send_op *op);
static void inbox_push(struct cor_hport *hp, struct send_op *op);
static void dispatch_some(struct cor_hport *hp);
static void dispatch_queued(struct cor_hport *hp);
static void backlog_note(struct cor_hport *hp);
static void op_fail(struct send_op *op, int err);

/* Ops with room for ROOM_MAX bytes (every message's but large copies') that a thread freed are
 * kept for its next ones, rather than a calloc and a free per message. In a ping-pong the sender
 * frees its op itself (the route's send_done comes in its own poll); where another thread frees
 * them they stay in that thread's cache (tcache.h), up to 64, and the sender allocates anew. */
#define OP_LINK offsetof(struct send_op, next)
static _Thread_local struct cor_tcache op_cache;

static void op_cache_retire(void *arg)
{
    struct cor_tcache *c = arg;
    struct send_op *op;
    while ((op = cor__tcache_pop(c, OP_LINK)))
        free(op);
    c->registered = false;
}
static struct cor_tcache_kind op_cache_kind = {.max = 64, .retire = op_cache_retire};

static void op_free(struct send_op *op)
{
    if (op->cached)
        cor__copy_put(op->hp, (void *)op->payload);
    else if (op->owned)
        free((void *)op->payload);
    if (op->room_max && cor__tcache_push(&op_cache, &op_cache_kind, op, OP_LINK)) return;
    free(op);
}

/* A zeroed op with room for plen bytes, from the thread's cache when plen <= ROOM_MAX. */
static struct send_op *op_alloc(struct cor_hport *hp, uint32_t peer, size_t plen)
{
    struct send_op *op = NULL;
    bool room_max = plen <= ROOM_MAX;
    if (!room_max || !(op = cor__tcache_pop(&op_cache, OP_LINK)))
        op = malloc(sizeof *op + (room_max ? ROOM_MAX : plen));
    if (op) {
        memset(op, 0, sizeof *op);
        op->room_max = room_max;
        op->hp = hp;
        op->peer = peer;
        op->epoch = atomic_load_explicit(&g.peer_epoch[peer], memory_order_relaxed);
    }
    return op;
}

struct send_op *cor__op_new(struct cor_hport *hp, uint32_t peer)
{
    return op_alloc(hp, peer, 0);
}

/* An op whose payload is a copy of the plen bytes at p, in the op's own allocation. */
struct send_op *cor__op_new_copy(struct cor_hport *hp, uint32_t peer, const void *p, size_t plen)
{
    struct send_op *op = op_alloc(hp, peer, plen);
    if (op) {
        if (plen) memcpy(op->room, p, plen);
        op->payload = op->room;
        op->plen = plen;
        op->in_room = true;
    }
    return op;
}

/* Hands a frame to the port: sent inline when the port is ours or free, else left for its
 * owner, without waiting for it. */
void cor__hport_submit(struct cor_hport *hp, struct send_op *op)
{
    if (cor__port_mine(hp)) { /* a callback inside our own progress */
        submit_owned(hp, op);
        return;
    }
    if (cor__port_own(hp)) {
        submit_owned(hp, op);
        cor__port_release(hp);
        return;
    }
    /* Then look again (cor__port_release says why): its owner may have left meanwhile. */
    inbox_push(hp, op);
    if (cor__port_own(hp)) cor__port_release(hp);
}

/* The owner sends now if nothing is queued ahead (the inline fast path), else queues. The
 * inbox's frames go first: a thread's frames keep their order. */
static void submit_owned(struct cor_hport *hp, struct send_op *op)
{
    port_drain(hp);
    bool refused = hp->q_head != NULL; /* what is queued is what the route pushed back */
    if (!refused && op->kind == OP_FRAME) {
        int rc = route_send(hp, op, true);
        if (rc == COR_OK) return;
        if (rc != COR_EAGAIN) {
            op_fail(op, rc);
            return;
        }
        refused = true;
    }
    queue_append(hp, op);
    if (!refused) dispatch_some(hp); /* a data job: the route may take its frames */
    backlog_note(hp);
}

/* Send ops the route holds. Only the port's owner changes the count (its route calls and the
 * callbacks inside them), others only read it (flush_sends): no read-modify-write needed. */
static void inflight_add(struct cor_hport *hp, long n)
{
    long v = atomic_load_explicit(&hp->inflight, memory_order_relaxed);
    atomic_store_explicit(&hp->inflight, v + n, memory_order_relaxed);
}

/* Offers one frame to the route; the port's owner. Returns COR_EAGAIN if the window is full.
 * `own`: the caller is the frame's sender, still inside its cor_sendI (the request's handle
 * is not the user's yet). */
static int route_send(struct cor_hport *hp, struct send_op *op, bool own)
{
    struct peer_link *l = &hp->links[op->peer];
    int ready = cor__peer_ready(op->peer); /* its address, at the first frame to it */
    if (ready != COR_OK) return ready;
    op->hdr.credits = (uint16_t)owed_take(l); /* piggy-backed, or a credit frame's own */
    bool credit_frame = op->hdr.type == F_CREDIT;
    if (credit_frame && !op->hdr.credits && !op->plen) { /* a frame sent since carried them */
        op_free(op);
        return COR_OK;
    }
    op->hdr.src_epoch = g.epoch;
    op->hdr.dst_epoch = op->epoch;
    struct iovec iov[2] = {{&op->hdr, FRAME_HDR_SIZE}, {(void *)op->payload, op->plen}};
    /* Once the route accepted it, op may be finished and freed by another thread's progress:
     * take what we need from it before. A copying route is done with an eager payload at
     * once, so that send completes now rather than at send_done. */
    struct cor_req *early = NULL;
    if (op->req && (!hp->caps.zero_copy_send || op->owned || op->in_room || !op->plen) &&
        op->hdr.type == F_EAGER) {
        early = op->req;
        op->req = NULL;
    }
    inflight_add(hp, 1);
    int rc = hp->route->ops->send(hp->rp, op->peer, iov, op->plen ? 2 : 1, op);
    if (rc != COR_OK) {
        inflight_add(hp, -1);
        op->req = early;
        owed_own_set(l, owed_own_get(l) + op->hdr.credits); /* not sent: still owed */
        op->hdr.credits = 0;
        return rc;
    }
    if (credit_frame) cor__count(C_CREDIT_FRAMES, 1);
    if (early && own)
        cor__req_complete_unseen(early, COR_OK);
    else if (early)
        cor__req_complete(early, COR_OK);
    return COR_OK;
}

/* The inbox: frames of threads that found the port owned. */
static void inbox_push(struct cor_hport *hp, struct send_op *op)
{
    struct send_op *head = atomic_load_explicit(&hp->inbox, memory_order_relaxed);
    do {
        op->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&hp->inbox, &head, op, memory_order_seq_cst,
                                                    memory_order_relaxed));
}

/* Owner: moves the inbox to the queue's tail, oldest first (a thread's frames keep their
 * order). */
static void inbox_take(struct cor_hport *hp)
{
    struct send_op *op = atomic_exchange_explicit(&hp->inbox, NULL, memory_order_acquire);
    struct send_op *oldest = NULL;
    while (op) {
        struct send_op *next = op->next;
        op->next = oldest;
        oldest = op;
        op = next;
    }
    while (oldest) {
        struct send_op *next = oldest->next;
        queue_append(hp, oldest);
        oldest = next;
    }
}

static void port_drain(struct cor_hport *hp)
{
    if (!atomic_load_explicit(&hp->inbox, memory_order_relaxed)) return;
    bool refused = hp->q_head != NULL; /* the route pushes back: the dispatcher retries */
    inbox_take(hp);
    if (!refused) dispatch_some(hp);
    backlog_note(hp);
}

/* The queue: the owner's, frames the route pushed back, in order. */
static void queue_append(struct cor_hport *hp, struct send_op *op)
{
    op->next = NULL;
    if (hp->q_tail)
        hp->q_tail->next = op;
    else
        hp->q_head = op;
    hp->q_tail = op;
}

/* Sends queued frames in order until the route pushes back; the port's owner. Not again
 * from inside itself (a completion the route made inside send, which route.h forbids). */
static void dispatch_some(struct cor_hport *hp)
{
    if (hp->dispatching) return;
    hp->dispatching = true;
    dispatch_queued(hp);
    hp->dispatching = false;
}

static void dispatch_queued(struct cor_hport *hp)
{
    struct send_op *op;
    while ((op = hp->q_head)) {
        if (op->kind == OP_DATA_JOB && op->data->rma) {
            /* One remote write of the whole message, then F_FIN, which the route orders
             * after the write. The put's completion completes the send. */
            struct cor_req *r = op->data;
            struct send_op *put = cor__op_new(hp, op->peer), *fin = cor__op_new(hp, op->peer);
            if (!put || !fin) {
                free(put);
                free(fin);
                return;
            }
            put->data = r;
            put->plen = r->expect;
            cor__send_hold(r);
            fin->hdr = (struct frame_hdr){.type = F_FIN,
                                          .src_task = op->hdr.src_task,
                                          .dst_task = op->hdr.dst_task,
                                          .len = r->expect,
                                          .rreq = r->remote_req,
                                          .sreq = r->handle};
            inflight_add(hp, 1);
            int rc = hp->route->ops->put(hp->rp, op->peer, r->buf, r->expect, r->mr, r->raddr,
                                         r->rkey, put);
            if (rc == COR_EAGAIN) {
                inflight_add(hp, -1);
                cor__send_release(r, COR_OK); /* the job still holds r */
                free(put);
                free(fin);
                return;
            }
            hp->q_head = op->next;
            if (!hp->q_head) hp->q_tail = NULL;
            if (rc != COR_OK) {
                inflight_add(hp, -1);
                cor__send_release(r, rc);
                free(put);
                free(fin);
                op_fail(op, rc);
                continue;
            }
            op_fail(op, COR_OK); /* the job is done; the put holds r now */
            /* F_FIN goes next in order; if the window is full it waits at the queue head */
            fin->next = hp->q_head;
            hp->q_head = fin;
            if (!hp->q_tail) hp->q_tail = fin;
            continue;
        }
        if (op->kind == OP_GET) {
            /* The receiver reads a rendezvous' data (F_RTS_GET); its completion sends F_GOT. */
            struct cor_req *r = op->into;
            inflight_add(hp, 1);
            int rc = hp->route->ops->get(hp->rp, op->peer, r->buf, r->expect, r->mr, op->hdr.offset,
                                         op->hdr.ctx, op);
            if (rc == COR_EAGAIN) {
                inflight_add(hp, -1);
                return;
            }
            hp->q_head = op->next;
            if (!hp->q_head) hp->q_tail = NULL;
            if (rc != COR_OK) {
                inflight_add(hp, -1);
                cor__proto_got(hp, op, rc);
            }
            continue;
        }
        if (op->kind == OP_DATA_JOB) {
            struct cor_req *r = op->data; /* held by the job until it is freed */
            while (op->job_off < op->job_end) {
                struct send_op *c = cor__op_new(hp, op->peer);
                if (!c) return; /* retried on the next pass */
                size_t off = op->job_off, n = op->job_end - off;
                if (n > hp->chunk) n = hp->chunk;
                c->hdr = (struct frame_hdr){.type = F_DATA,
                                            .src_task = op->hdr.src_task,
                                            .dst_task = op->hdr.dst_task,
                                            .len = n,
                                            .rreq = op->hdr.rreq,
                                            .offset = off,
                                            .sreq = op->hdr.sreq};
                c->payload = (const char *)op->payload + off;
                c->plen = n;
                c->data = r;
                cor__send_hold(r);
                int rc = route_send(hp, c, false);
                if (rc == COR_EAGAIN) {
                    cor__send_release(r, COR_OK);
                    free(c);
                    return;
                }
                if (rc != COR_OK) {
                    cor__send_release(r, rc);
                    free(c);
                    hp->q_head = op->next;
                    if (!hp->q_head) hp->q_tail = NULL;
                    op_fail(op, rc);
                    goto next;
                }
                op->job_off += n;
            }
            hp->q_head = op->next;
            if (!hp->q_head) hp->q_tail = NULL;
            op_fail(op, COR_OK); /* drops the job's hold */
        } else {
            /* Once the route took op, its completion may free it, so its successor is read
             * before: reading op->next after send() unlinked a freed op and drained
             * garbage. */
            struct send_op *next = op->next;
            int rc = route_send(hp, op, false);
            if (rc == COR_EAGAIN) return;
            hp->q_head = next;
            if (!next) hp->q_tail = NULL;
            if (rc != COR_OK) op_fail(op, rc);
        }
    next:;
    }
}

/* The dispatcher learns of a queue that stopped being empty (the route pushed back); the
 * flush, of one that is. Owner. */
static void backlog_note(struct cor_hport *hp)
{
    bool now = hp->q_head != NULL;
    if (now == atomic_load_explicit(&hp->backlog, memory_order_relaxed)) return;
    atomic_store(&hp->backlog, now);
    if (!now) return;
    COR_LOCK(&hp->disp_lock);
    pthread_cond_signal(&hp->send_cond);
    COR_UNLOCK(&hp->disp_lock);
}

void cor__dispatch_queue(struct cor_hport *hp)
{
    dispatch_some(hp);
    backlog_note(hp);
}

/* ---- a rendezvous send held by its frames; the end of a frame ---- */

void cor__req_mr_release(struct cor_req *r)
{
    if (r->mr) {
        r->hp->route->ops->mem_deregister(r->hp->rp, r->mr);
        r->mr = NULL;
    }
}

/* A rendezvous send is referenced by its data jobs and by every data frame or put the route
 * holds; it completes when the last of them lets go, with the first error any of them saw.
 * Completing it earlier would let the caller free it while the route still names it. */
void cor__send_hold(struct cor_req *r)
{
    atomic_fetch_add(&r->chunks_out, 1);
}

void cor__send_release(struct cor_req *r, int err)
{
    int none = COR_OK;
    if (err) atomic_compare_exchange_strong(&r->send_err, &none, err);
    if (atomic_fetch_sub(&r->chunks_out, 1) == 1) {
        cor__req_mr_release(r);
        cor__req_complete(r, atomic_load(&r->send_err));
    }
}

static void op_fail(struct send_op *op, int err)
{
    if (op->kind == OP_GET) { /* never taken by the route (a port that closes) */
        cor__proto_got(op->hp, op, err == COR_OK ? COR_ECLOSED : err);
        return;
    }
    if (op->req) cor__req_complete(op->req, err);
    if (op->data) cor__send_release(op->data, err);
    op_free(op);
}

void cor__upcall_send_done(void *core, void *cookie, int status)
{
    struct cor_hport *hp = core;
    if (hp->index < 0) {
        cor__raw_upcall_send_done(hp, status);
        return;
    }
    struct send_op *op = cookie;
    inflight_add(hp, -1);
    if (op->kind == OP_GET) {
        cor__proto_got(hp, op, status);
        return;
    }
    if (op->req) cor__req_complete(op->req, status);
    if (op->data) {
        if (status == COR_OK) atomic_fetch_add(&op->data->done_bytes, op->plen);
        cor__send_release(op->data, status);
    }
    op_free(op);
    /* The window opened: push queued frames from this thread (the owner: the route calls us
     * inside its progress) rather than waking another. */
    if (hp->q_head && cor__port_mine(hp)) cor__dispatch_queue(hp);
}

/* ---- frames the protocol sends besides messages ---- */

int cor__frame_send(struct cor_hport *hp, uint32_t peer, const void *hdr, size_t hlen,
                    const void *payload, size_t plen, struct cor_req *complete_on_done)
{
    struct send_op *op = cor__op_new(hp, peer);
    if (!op) return COR_ENOMEM;
    memcpy(&op->hdr, hdr, hlen < FRAME_HDR_SIZE ? hlen : FRAME_HDR_SIZE);
    op->payload = payload;
    op->plen = plen;
    op->req = complete_on_done;
    cor__hport_submit(hp, op);
    return COR_OK;
}

int cor__frame_send_copy(struct cor_hport *hp, uint32_t peer, const void *hdr, size_t hlen,
                         const void *payload, size_t plen)
{
    struct send_op *op = cor__op_new_copy(hp, peer, payload, plen);
    if (!op) return COR_ENOMEM;
    memcpy(&op->hdr, hdr, hlen < FRAME_HDR_SIZE ? hlen : FRAME_HDR_SIZE);
    cor__hport_submit(hp, op);
    return COR_OK;
}

void cor__return_credit(struct cor_hport *hp, uint32_t peer, int units)
{
    struct peer_link *l = &hp->links[peer];
    if (units <= 0) return;
    int owed;
    if (cor__port_mine(hp)) {
        owed = owed_own_get(l) + units;
        owed_own_set(l, owed);
        owed += atomic_load_explicit(&l->owed, memory_order_relaxed);
    } else {
        owed = atomic_fetch_add(&l->owed, units) + units + owed_own_get(l);
    }
    if (owed < hp->credit_threshold || g.dead[peer]) return;
    /* The frame takes what is owed when the port's owner sends it (route_send): all of it,
     * whoever noted it. */
    struct send_op *op = cor__op_new(hp, peer);
    if (!op) return; /* they ride on a later frame */
    op->hdr.type = F_CREDIT;
    cor__hport_submit(hp, op);
}

/* ---- the receive path: one poll of the port ---- */

int cor__hport_poll(struct cor_hport *hp)
{
    if (!cor__port_own(hp)) return 0;
    int n = hp->route->ops->progress(hp->rp);
    cor__port_release(hp);
    cor__arrivals_run();
    return n;
}

/* ---- the port's threads, and its end ---- */

/* Pushes frames the route refused for lack of window, when nobody else makes progress. */
static void *dispatcher(void *arg)
{
    struct cor_hport *hp = arg;
    cor__thread_name("cor-dsp-%s%d", hp->route->name, hp->index);
    cor_thread_attentive();
    COR_LOCK(&hp->disp_lock);
    while (!atomic_load(&hp->stop)) {
        if (!atomic_load(&hp->backlog)) {
            pthread_cond_wait(&hp->send_cond, &hp->disp_lock);
            continue;
        }
        COR_UNLOCK(&hp->disp_lock);
        if (cor__port_own(hp)) {
            cor__dispatch_queue(hp);
            cor__port_release(hp);
        }
        /* Still refused (or another thread owns the port): let acknowledgements in, then try
         * again. */
        if (atomic_load(&hp->backlog) && cor__hport_poll(hp) == 0) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        COR_LOCK(&hp->disp_lock);
    }
    COR_UNLOCK(&hp->disp_lock);
    return NULL;
}

static int stop_fd_close(struct cor_hport *hp)
{
    if (hp->stop_fd >= 0) close(hp->stop_fd);
    hp->stop_fd = -1;
    return COR_ENOMEM;
}

int cor__hport_start(struct cor_hport *hp)
{
    hp->stop_fd = hp->route->ops->wait_fd(hp->rp) >= 0 ? eventfd(0, EFD_CLOEXEC) : -1;
    if (pthread_create(&hp->listener, NULL, cor__listener_main, hp) != 0) return stop_fd_close(hp);
    if (pthread_create(&hp->dispatcher, NULL, dispatcher, hp) != 0) {
        atomic_store(&hp->stop, true);
        pthread_join(hp->listener, NULL);
        return stop_fd_close(hp);
    }
    hp->threads = true;
    return COR_OK;
}

void cor__hport_stop(struct cor_hport *hp)
{
    if (!hp->threads) return;
    atomic_store(&hp->stop, true);
    if (hp->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(hp->stop_fd, &one, sizeof one);
        (void)w; /* a full counter wakes the listener as well */
    }
    if (cor__route_has_wake(hp->route->ops)) hp->route->ops->wake(hp->rp);
    COR_LOCK(&hp->disp_lock);
    pthread_cond_broadcast(&hp->send_cond);
    COR_UNLOCK(&hp->disp_lock);
    COR_LOCK(&g.spin_lock);
    pthread_cond_broadcast(&g.spin_cond);
    COR_UNLOCK(&g.spin_lock);
    pthread_join(hp->listener, NULL);
    pthread_join(hp->dispatcher, NULL);
    hp->threads = false;
    stop_fd_close(hp);
}

void cor__hport_close(struct cor_hport *hp)
{
    if (!hp) return;
    cor__hport_stop(hp);
    hp->route->ops->close(hp->rp);
    cor__queue_discard(hp);
    for (int i = 0; i < hp->ncopies; i++)
        free(hp->copies[i]);
    free(hp->links);
    free(hp);
}

/* Frames the route never took fail with COR_ECLOSED (the port is closing). */
void cor__queue_discard(struct cor_hport *hp)
{
    cor__port_own_wait(hp); /* its threads have stopped: we wait for no one long */
    inbox_take(hp);
    struct send_op *op = hp->q_head;
    hp->q_head = hp->q_tail = NULL;
    atomic_store(&hp->backlog, false);
    cor__port_release(hp);
    while (op) {
        struct send_op *next = op->next;
        op_fail(op, COR_ECLOSED);
        op = next;
    }
}
