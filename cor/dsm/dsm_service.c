/*
 * The service: how the requests sent to this domain are received, served and answered. They
 * are served where they land (on_arrival, in whichever thread polled them in, one thread at
 * a time: the turn), else by the service thread; replies and protocol messages leave through
 * outboxes that keep each send's buffer until the send completes. The top of dsm.c says who
 * guards what.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "dsm_runtime.h"

enum reap_how { REAP_WAIT, REAP_PEEK /* makes no progress */ };

/* Gives back what a send of p held: its buffer (kept for reuse or freed), or its reference
 * on the object it read from. */
static void pend_free(const struct dsm__pend *p)
{
    if (p->obj)
        dsm__res_put(p->obj);
    else
        dsm__sbuf_put(p->buf);
}

/* Frees o's sends that completed (REAP_WAIT: waits for every one); o->mu held. */
static void outbox_reap(struct dsm__outbox *o, enum reap_how how)
{
    for (size_t i = 0; i < o->n;) {
        int done = 1;
        if (how == REAP_WAIT)
            cor_wait(&o->pend[i].req, NULL);
        else if (cor_peek(o->pend[i].req, &done) == COR_OK && done)
            cor_test(&o->pend[i].req, &done, NULL);
        if (!done) {
            i++;
            continue;
        }
        pend_free(&o->pend[i]);
        o->pend[i] = o->pend[--o->n];
    }
}

/* Sends p's buffer as task `as` to `to` in context ctx; o->mu held. p->buf is malloc'd and
 * ours until the send completes, or (p->obj) the memory of an object the caller holds a
 * reference to for the send, given back when it completes. */
void dsm__outbox_send_in(struct dsm__outbox *o, cor_idp_t as, cor_idp_t to, cor_idp_t ctx,
                         uint32_t tag, struct dsm__pend p, size_t n)
{
    if (cor_sendI_as(as, to, ctx, (int)tag, COR_BYTE, p.buf, n, &p.req) != COR_OK) {
        pend_free(&p); /* the peer died or left: nobody waits for this any more */
        return;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        struct dsm__pend *more = realloc(o->pend, cap * sizeof *more);
        if (!more) {
            cor_wait(&p.req, NULL);
            pend_free(&p);
            return;
        }
        o->pend = more;
        o->cap = cap;
    }
    o->pend[o->n++] = p;
}

/* Sends buf (malloc'd, ours until the send completes) as task `as` to `to`; o->mu held. */
static void outbox_send(struct dsm__outbox *o, cor_idp_t as, cor_idp_t to, uint32_t tag, void *buf,
                        size_t n)
{
    dsm__outbox_send_in(o, as, to, dsm__rt.ctx, tag, (struct dsm__pend){.buf = buf}, n);
}

/* Waits for o's sends and frees what it holds. */
void dsm__outbox_clear(struct dsm__outbox *o)
{
    dsm__lock_or_die(&o->mu);
    outbox_reap(o, REAP_WAIT);
    free(o->pend);
    o->pend = NULL;
    o->n = o->cap = 0;
    dsm__unlock_or_die(&o->mu);
}

/* Sends buf (malloc'd, ours until the send completes) from the service to `to`. */
void dsm__svc_send(cor_idp_t to, uint32_t tag, void *buf, size_t n)
{
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    outbox_send(&dsm__rt.svc_out, dsm__rt.svc, to, tag, buf, n);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
}

/* all: waits for every send; else frees those that completed, without polling the routes (a
 * drain runs where they were just polled) */
static void reap(bool all)
{
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    outbox_reap(&dsm__rt.svc_out, all ? REAP_WAIT : REAP_PEEK);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
}

/* A reply whose data (dlen bytes) is already in place after the header in buf. */
void dsm__reply_buf(cor_idp_t to, uint8_t op, uint8_t type, uint32_t id, int status, uint64_t value,
                    unsigned char *buf, size_t dlen)
{
    struct dsm_rep p = {.op = op,
                        .type = type,
                        .status = status,
                        .id = id,
                        .value = value,
                        .data_len = status ? 0 : dlen};
    size_t n = dsm_rep_encode(buf, DSM_REP_HDR + dlen, &p);
    if (n == 0) {
        free(buf);
        return;
    }
    dsm__svc_send(to, id, buf, n);
}

void dsm__reply(cor_idp_t to, const struct dsm_req *r, int status, uint64_t value, const void *data,
                size_t dlen)
{
    if (status) dlen = 0;
    unsigned char *buf = malloc(DSM_REP_HDR + dlen);
    if (!buf) return; /* the client sees its home as unresponsive; nothing better to do */
    if (dlen) memcpy(buf + DSM_REP_HDR, data, dlen);
    dsm__reply_buf(to, r->op, r->type, r->id, status, value, buf, dlen);
}

void dsm__grant(const struct dsm_grant *g)
{
    struct dsm_req r = {.op = DSM_OP_LOCK_ACQ, .id = g->id};
    dsm__reply(g->who, &r, g->status, dsm_grant_value(g), NULL, 0);
}

/* Sends a lock request (40-byte header, no reply) from the service to domain `to`'s
 * service: a recall to the domain that keeps a lock homed here, or a kept lock's release
 * to its home. A failure is the peer's death, which settles the lock either way. */
void dsm__lock_msg(int to, uint8_t op, cor_idp_t lock, uint32_t gen)
{
    cor_idp_t svc;
    if (dsm__svc_of(to, &svc)) return;
    struct dsm_req r = {.op = op, .id = dsm__next_id(), .obj = lock, .offset = gen};
    unsigned char *buf = malloc(DSM_REQ_HDR);
    if (!buf) abort(); /* a lock would stay kept for good: no way to recover */
    size_t n = dsm_req_encode(buf, DSM_REQ_HDR, &r);
    dsm__svc_send(svc, r.id, buf, n);
}

static struct dsm__dir_entry **dir_slot(enum dsm__res_kind kind, const char *name, size_t len)
{
    struct dsm__dir_entry **p = &dsm__rt.dir[dsm_hash(name, len) % DSM__DIR_BUCKETS];
    for (; *p; p = &(*p)->next)
        if ((*p)->kind == kind && strlen((*p)->name) == len && !memcmp((*p)->name, name, len))
            break;
    return p;
}

static void qerr_note_locked(cor_idp_t who, int err)
{
    for (struct dsm__qerr *q = dsm__rt.qerrs; q; q = q->next)
        if (q->who == who) return; /* the first error is kept */
    if (dsm__rt.nqerrs >= DSM__QERR_MAX) return;
    struct dsm__qerr *q = malloc(sizeof *q);
    if (!q) return;
    *q = (struct dsm__qerr){dsm__rt.qerrs, who, err};
    dsm__rt.qerrs = q;
    dsm__rt.nqerrs++;
}

static int qerr_take_locked(cor_idp_t who)
{
    for (struct dsm__qerr **p = &dsm__rt.qerrs; *p; p = &(*p)->next)
        if ((*p)->who == who) {
            struct dsm__qerr *q = *p;
            int err = q->err;
            *p = q->next;
            free(q);
            dsm__rt.nqerrs--;
            return err;
        }
    return COR_OK;
}

static void qerr_note(cor_idp_t who, int err)
{
    dsm__lock_or_die(&dsm__rt.qmu);
    qerr_note_locked(who, err);
    dsm__unlock_or_die(&dsm__rt.qmu);
}

int dsm__qerr_take(cor_idp_t who)
{
    dsm__lock_or_die(&dsm__rt.qmu);
    int err = qerr_take_locked(who);
    dsm__unlock_or_die(&dsm__rt.qmu);
    return err;
}

static struct dsm__addq **addq_slot(cor_idp_t who)
{
    struct dsm__addq **p = &dsm__rt.addqs;
    while (*p && (*p)->who != who)
        p = &(*p)->next;
    return p;
}

/* An add of `who` to a cached object enters a directory (service thread). COR_ENOMEM if it
 * cannot be counted: then it is not applied either. */
static int add_begin(cor_idp_t who)
{
    dsm__lock_or_die(&dsm__rt.qmu);
    struct dsm__addq **p = addq_slot(who);
    if (!*p && (*p = calloc(1, sizeof **p))) (*p)->who = who;
    int err = *p ? COR_OK : COR_ENOMEM; /* not after the unlock: add_done may free it then */
    if (*p) (*p)->pending++;
    dsm__unlock_or_die(&dsm__rt.qmu);
    return err;
}

/* An add of `who` to a cached object was applied (or refused with err): in whatever thread
 * moved the directory, under the object's mutex. The last one answers a QUIET held back. */
void dsm__add_done(cor_idp_t who, int err)
{
    struct dsm_req q = {.op = DSM_OP_QUIET};
    bool answer = false;
    int qerr = COR_OK;
    dsm__lock_or_die(&dsm__rt.qmu);
    if (err) qerr_note_locked(who, err);
    struct dsm__addq **p = addq_slot(who);
    struct dsm__addq *a = *p;
    if (a && --a->pending == 0) {
        answer = a->quiet;
        q.id = a->quiet_id;
        if (answer) qerr = qerr_take_locked(who);
        *p = a->next;
        free(a);
    }
    dsm__unlock_or_die(&dsm__rt.qmu);
    if (answer) dsm__reply(who, &q, qerr, 0, NULL, 0);
}

/* A QUIET from `who` (service thread): answered now unless adds of it to cached objects still
 * wait in a directory (add_done answers it then). */
static void quiet_serve(cor_idp_t who, const struct dsm_req *r)
{
    dsm__lock_or_die(&dsm__rt.qmu);
    struct dsm__addq *a = *addq_slot(who);
    if (a) {
        a->quiet = true;
        a->quiet_id = r->id;
    }
    int err = a ? COR_OK : qerr_take_locked(who);
    dsm__unlock_or_die(&dsm__rt.qmu);
    if (!a) dsm__reply(who, r, err, 0, NULL, 0);
}

static void serve_obj(cor_idp_t src, const struct dsm_req *r)
{
    struct dsm__res *x = dsm__res_get(r->obj, DSM__RES_OBJ);
    if (r->op == DSM_OP_ADD) {
        int err = COR_ENOTFOUND;
        if (x && x->protocol == COR_DSM_CACHED) {
            /* its turn comes through the directory; the sender's QUIET waits for it */
            err = add_begin(src);
            if (!err) dsm__serve_cached_op(x, src, r);
        } else if (x) {
            err = dsm__obj_apply(x, r, NULL, NULL);
        }
        if (err) qerr_note(src, err);
        if (x) dsm__res_put(x);
        return;
    }
    if (!x) {
        dsm__reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
        return;
    }
    if (x->protocol == COR_DSM_CACHED) {
        dsm__serve_cached_op(x, src, r);
        dsm__res_put(x);
        return;
    }
    size_t olen = dsm_obj_out_len(r);
    unsigned char *buf = malloc(DSM_REP_HDR + olen);
    if (!buf) {
        dsm__res_put(x);
        dsm__reply(src, r, COR_ENOMEM, 0, NULL, 0);
        return;
    }
    uint64_t value = 0;
    int err = dsm__obj_apply(x, r, buf + DSM_REP_HDR, &value);
    dsm__res_put(x);
    dsm__reply_buf(src, r->op, r->type, r->id, err, value, buf, olen);
}

static void serve_info(cor_idp_t src, const struct dsm_req *r, const cor_dsm_info_t *info,
                       cor_idp_t idp)
{
    unsigned char data[DSM_INFO_HDR + COR_NAME_MAX];
    size_t n = dsm_info_encode(data, sizeof data, info);
    dsm__reply(src, r, n ? COR_OK : COR_EPROTO, idp, data, n);
}

static void serve_dir(cor_idp_t src, const struct dsm_req *r)
{
    char name[COR_NAME_MAX];
    memcpy(name, r->name, r->name_len);
    name[r->name_len] = '\0';
    if (dsm__dir_home(name) != dsm__rt.rank) {
        dsm__reply(src, r, COR_EINVAL, 0, NULL, 0); /* misrouted */
        return;
    }
    struct dsm__dir_entry **p =
        dir_slot(r->op == DSM_OP_LOCK_OPEN ? DSM__RES_LOCK : DSM__RES_OBJ, name, r->name_len);
    struct dsm__dir_entry *e = *p;
    switch (r->op) {
    case DSM_OP_DIR_PUT:
        /* Only the home registers its objects. */
        if (!dsm__our_idp(r->obj) || cor_idp_domain(r->obj) != cor_idp_domain(src) ||
            r->flags > COR_DSM_CACHED) {
            dsm__reply(src, r, COR_EINVAL, 0, NULL, 0);
            return;
        }
        if (e) {
            dsm__reply(src, r, COR_EEXIST, 0, NULL, 0);
            return;
        }
        e = calloc(1, sizeof *e);
        if (!e) {
            dsm__reply(src, r, COR_ENOMEM, 0, NULL, 0);
            return;
        }
        e->kind = DSM__RES_OBJ;
        memcpy(e->name, name, sizeof name);
        e->idp = r->obj;
        e->type = (cor_type_t)r->type;
        e->count = r->count;
        e->protocol = (cor_dsm_protocol_t)r->flags;
        *p = e;
        dsm__reply(src, r, COR_OK, 0, NULL, 0);
        return;
    case DSM_OP_DIR_GET: {
        if (!e) {
            dsm__reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
            return;
        }
        cor_dsm_info_t info = {.type = e->type,
                               .count = (size_t)e->count,
                               .home = (int)cor_idp_domain(e->idp),
                               .protocol = e->protocol};
        memcpy(info.name, e->name, sizeof info.name);
        serve_info(src, r, &info, e->idp);
        return;
    }
    case DSM_OP_DIR_DEL:
        if (!e || e->idp != r->obj) {
            dsm__reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
            return;
        }
        if (cor_idp_domain(e->idp) != cor_idp_domain(src)) {
            dsm__reply(src, r, COR_EINVAL, 0, NULL, 0);
            return;
        }
        *p = e->next;
        free(e);
        dsm__reply(src, r, COR_OK, 0, NULL, 0);
        return;
    case DSM_OP_LOCK_OPEN: {
        if (e) {
            dsm__reply(src, r, COR_OK, e->idp, NULL, 0);
            return;
        }
        struct dsm__res *x = dsm__res_new(DSM__RES_LOCK, name);
        if (x) x->lock.never_keep = !dsm__rt.lock_keep;
        e = calloc(1, sizeof *e);
        int err = !x || !e ? COR_ENOMEM : dsm__res_add(x);
        if (err) {
            if (x) dsm__res_free(x);
            free(e);
            dsm__reply(src, r, err, 0, NULL, 0);
            return;
        }
        e->kind = DSM__RES_LOCK;
        memcpy(e->name, name, sizeof name);
        e->idp = cor_idp_make(dsm__rt.session, COR_KIND_OBJECT, (unsigned)dsm__rt.rank, x->index);
        *p = e;
        dsm__reply(src, r, COR_OK, e->idp, NULL, 0);
        return;
    }
    }
}

static void serve_lock(cor_idp_t src, const struct dsm_req *r)
{
    struct dsm__res *x = dsm__res_get(r->obj, DSM__RES_LOCK);
    if (!x) {
        if (r->op == DSM_OP_LOCK_REL)
            atomic_fetch_add(&dsm__rt.dropped, 1); /* one-way */
        else
            dsm__reply(src, r, COR_ENOTFOUND, 0, NULL, 0);
        return;
    }
    struct dsm_grant g;
    bool granted = false, recall = false;
    cor_idp_t holder = x->lock.holder;
    uint32_t gen = x->lock.gen;
    if (r->op == DSM_OP_LOCK_REL) {
        /* one-way: the releasing task checked that it holds the lock (cor_dsm_unlock), or
         * its domain's service answers our recall */
        if (r->offset > DSM_ID_MAX ||
            dsm_lock_release(&x->lock, src, (uint32_t)r->offset, &g, &granted))
            atomic_fetch_add(&dsm__rt.dropped, 1);
        if (granted) dsm__grant(&g);
    } else if (atomic_load(&dsm__rt.dead[cor_idp_domain(src)])) {
        /* a request that arrived after its domain's death was handled: never grant it */
    } else {
        int rc = dsm_lock_acquire(&x->lock, src, r->id, r->op == DSM_OP_LOCK_TRY, &g, &recall);
        if (rc == DSM_LOCK_GRANTED)
            dsm__reply(src, r, g.status, dsm_grant_value(&g), NULL, 0);
        else if (rc != DSM_LOCK_QUEUED)
            dsm__reply(src, r, rc, 0, NULL, 0);
    }
    dsm__res_put(x);
    if (!recall) return;
    if ((int)cor_idp_domain(holder) == dsm__rt.rank)
        dsm__lock_recalled(r->obj, gen); /* kept here: no message to ourselves */
    else
        dsm__lock_msg((int)cor_idp_domain(holder), DSM_OP_LOCK_RECALL, r->obj, gen);
}

/* Sends buf (malloc'd, ours until the send completes) as the barrier mailbox's task; first
 * frees the sends that completed, without making progress: it runs on the barrier's path. */
static void bar_send_one(cor_idp_t to, void *buf, size_t n)
{
    dsm__lock_or_die(&dsm__rt.bar_out.mu);
    outbox_reap(&dsm__rt.bar_out, REAP_PEEK);
    outbox_send(&dsm__rt.bar_out, dsm__rt.bar_box, to, 0, buf,
                n); /* a failure: the death fails it */
    dsm__unlock_or_die(&dsm__rt.bar_out.mu);
}

/* Sends a barrier's messages to the members' barrier mailboxes, as the mailbox's task (not
 * waiting for the sends: over udp a send completes when acknowledged, up to
 * COR_UDP_ACK_DELAY_US later). Their order does not matter: messages are counted per round.
 * m[i].to is a domain rank (bar_resolve): the barrier itself is not touched. */
int dsm__bar_send(uint64_t id, const struct dsm_bar_msg *m, int n)
{
    int err = COR_OK;
    for (int i = 0; i < n; i++) {
        struct dsm_req r = {
            .op = DSM_OP_BARRIER, .obj = id, .offset = (uint64_t)m[i].round, .count = m[i].epoch};
        cor_idp_t box;
        int e = dsm__mailbox_of(m[i].to, DSM__BAR_NAME, &box);
        unsigned char *buf = e ? NULL : malloc(DSM_REQ_HDR);
        if (!e && !buf) e = COR_ENOMEM;
        if (e) {
            err = err ? err : e;
            continue;
        }
        bar_send_one(box, buf, dsm_req_encode(buf, DSM_REQ_HDR, &r));
    }
    return err;
}

static void serve(const void *buf, size_t len, cor_idp_t src)
{
    struct dsm_req r;
    if (cor_idp_kind(src) != COR_KIND_TASK || cor_idp_domain(src) >= (unsigned)dsm__rt.size ||
        dsm_req_decode(buf, len, &r) != COR_OK) {
        atomic_fetch_add(&dsm__rt.dropped, 1);
        return;
    }
    atomic_fetch_add(&dsm__rt.served, 1);
    switch (r.op) {
    case DSM_OP_GET:
    case DSM_OP_PUT:
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_CAS:
    case DSM_OP_APPEND:
    case DSM_OP_ADD:
        serve_obj(src, &r);
        return;
    case DSM_OP_ADDV:
        for (size_t i = 0; i < r.count; i++) {
            struct dsm_req add;
            if (dsm_addv_get(&r, i, &add) != COR_OK) {
                atomic_fetch_add(&dsm__rt.dropped, 1);
                qerr_note(src, COR_EPROTO);
                return;
            }
            serve_obj(src, &add);
        }
        return;
    case DSM_OP_QUIET:
        quiet_serve(src, &r);
        return;
    case DSM_OP_QUERY: {
        struct dsm__res *x = dsm__res_get(r.obj, DSM__RES_OBJ);
        if (!x) {
            dsm__reply(src, &r, COR_ENOTFOUND, 0, NULL, 0);
            return;
        }
        cor_dsm_info_t info;
        dsm__local_info(x, &info);
        dsm__res_put(x);
        serve_info(src, &r, &info, r.obj);
        return;
    }
    case DSM_OP_DIR_PUT:
    case DSM_OP_DIR_GET:
    case DSM_OP_DIR_DEL:
    case DSM_OP_LOCK_OPEN:
        serve_dir(src, &r);
        return;
    case DSM_OP_LOCK_ACQ:
    case DSM_OP_LOCK_TRY:
    case DSM_OP_LOCK_REL:
        serve_lock(src, &r);
        return;
    case DSM_OP_LOCK_RECALL:
        if (cor_idp_domain(r.obj) != cor_idp_domain(src) || r.offset > DSM_ID_MAX) {
            atomic_fetch_add(&dsm__rt.dropped, 1); /* only the home recalls its locks */
            return;
        }
        dsm__lock_recalled(r.obj, (uint32_t)r.offset);
        return;
    case DSM_OP_BARRIER: /* to the barrier mailbox, not here */
        atomic_fetch_add(&dsm__rt.dropped, 1);
        return;
    case DSM_OP_C_REQ:
    case DSM_OP_C_ACK:
    case DSM_OP_C_FLUSH:
        dsm__serve_cached_home((int)cor_idp_domain(src), &r, src);
        return;
    case DSM_OP_C_GRANT:
    case DSM_OP_C_INV:
    case DSM_OP_C_GONE:
        if (cor_idp_domain(r.obj) != cor_idp_domain(src)) { /* only the home speaks for it */
            atomic_fetch_add(&dsm__rt.dropped, 1);
            return;
        }
        dsm__serve_cached_copy(&r);
        return;
    case DSM_OP_C_FACK:
        dsm__serve_cached_fack((int)cor_idp_domain(src), &r);
        return;
    }
}

static void handle_deaths(void)
{
    atomic_store(&dsm__rt.deaths_pending, 0);
    for (int d = 0; d < dsm__rt.size; d++) {
        if (!atomic_load(&dsm__rt.dead[d]) || dsm__rt.death_done[d]) continue;
        dsm__rt.death_done[d] = true;
        /* Locks homed here: the dead domain's waiters leave, a held lock passes on. The
         * grants are collected under dsm__rt.lock and sent after. */
        size_t ng = 0, capg = 0;
        struct dsm_grant *gs = NULL;
        dsm__lock_or_die(&dsm__rt.lock);
        for (unsigned i = 1; i <= DSM__RES_MAX; i++) {
            struct dsm__res *x = dsm__rt.res[i];
            if (!x || x->kind != DSM__RES_LOCK) continue;
            struct dsm_grant g;
            bool granted;
            dsm_lock_peer_dead(&x->lock, (unsigned)d, &g, &granted);
            if (!granted) continue;
            if (ng == capg) {
                capg = capg ? capg * 2 : 16;
                struct dsm_grant *n = realloc(gs, capg * sizeof *n);
                if (!n) abort(); /* a lock would stay held by the dead: no way to recover */
                gs = n;
            }
            gs[ng++] = g;
        }
        for (struct cor_dsm_barrier *b = dsm__rt.bars; b; b = b->next) {
            for (int i = 0; b->members && i < b->st.n; i++)
                if (b->members[i] == d && !b->err) {
                    b->err = COR_EPEERDEAD;
                    dsm__bar_wake();
                }
        }
        dsm__unlock_or_die(&dsm__rt.lock);
        for (size_t i = 0; i < ng; i++)
            dsm__grant(&gs[i]);
        free(gs);
        dsm__cached_peer_dead(d);
        dsm__lock_or_die(&dsm__rt.qmu);
        for (struct dsm__qerr **p = &dsm__rt.qerrs; *p;) {
            if (cor_idp_domain((*p)->who) == (unsigned)d) {
                struct dsm__qerr *q = *p;
                *p = q->next;
                free(q);
                dsm__rt.nqerrs--;
            } else {
                p = &(*p)->next;
            }
        }
        dsm__unlock_or_die(&dsm__rt.qmu);
    }
}

/* Takes the next message off the service task's receive and serves it; false if none is
 * complete. Under the turn. */
static bool serve_next(void)
{
    if (dsm__rt.rr == COR_REQ_NULL) {
        dsm__rt.msg = NULL;
        dsm__lock_or_die(&dsm__rt.svc_out.mu);
        int err = cor_recvI_as(dsm__rt.svc, COR_ANY_SOURCE, dsm__rt.ctx, COR_ANY_TAG, &dsm__rt.msg,
                               &dsm__rt.rr);
        dsm__unlock_or_die(&dsm__rt.svc_out.mu);
        if (err) return false; /* the service thread tries again at its next look */
    }
    int done = 0;
    if (cor_peek(dsm__rt.rr, &done) != COR_OK) dsm__rt.rr = COR_REQ_NULL;
    if (!done) return false;
    cor_status_t st;
    int rc = cor_test(&dsm__rt.rr, &done, &st);
    void *msg = dsm__rt.msg;
    dsm__rt.msg = NULL;
    if (rc == COR_OK && msg) serve(msg, st.count * cor_type_size(st.type), st.source);
    if (msg) cor_releaseBuffer(msg);
    atomic_fetch_add_explicit(&dsm__rt.tick, 1, memory_order_relaxed);
    return true;
}

static __thread bool tls_draining;

/*
 * Serves what came to the service task, and deaths, in the calling thread, unless another
 * thread is at it (the turn, taken without waiting): that one sees `pending` and serves it
 * too. Called by the arrival hook in whatever thread polled the message in (a task waiting
 * in the core or in a section start, a listener), so a protocol message is answered without
 * waking a thread; and by the service thread for what the hook left to it.
 */
static void drain(void)
{
    while (atomic_load(&dsm__rt.pending)) {
        if (pthread_mutex_trylock(&dsm__rt.turn_mu)) return;
        if (dsm__rt.closed) { /* cor_dsm_finalize: the service task receives no more */
            pthread_mutex_unlock(&dsm__rt.turn_mu);
            return;
        }
        tls_draining = true;
        while (atomic_exchange(&dsm__rt.pending, 0)) {
            while (serve_next())
                ;
            if (atomic_load(&dsm__rt.ndirect)) dsm__direct_reap();
            if (atomic_load(&dsm__rt.deaths_pending)) handle_deaths();
            reap(false);
        }
        tls_draining = false;
        pthread_mutex_unlock(&dsm__rt.turn_mu);
    }
}

void dsm__svc_wake(void)
{
    atomic_store(&dsm__rt.pending, 1);
    pthread_mutex_lock(&dsm__rt.svc_mu);
    pthread_cond_signal(&dsm__rt.svc_cv);
    pthread_mutex_unlock(&dsm__rt.svc_mu);
}

/* A listener lingers only while the machine has a CPU for it: spinning beside computing
 * threads would use up its share of the CPUs, and the scheduler then keeps it off them for
 * milliseconds just when the next request comes (seen: 6 ms, for a request served in 0.2 us),
 * where a listener that sleeps between requests is woken in tens of microseconds. The kernel
 * tells how many threads are runnable right now (cor_cpus_busy, ~1.3 us a look), cheaply
 * enough to look before each linger and every LINGER_LOOK_CALLS polls of it. */
#define LINGER_LOOK_CALLS 256 /* ~100 us of polling */
#define LINGER_BUSY_LOOKS 2   /* in a row, so a thread woken for a moment does not count */

struct linger {
    uint64_t mark; /* dsm__rt.tick when the poll began */
    unsigned calls;
    int busy; /* looks in a row that found the CPUs busy */
};

static int served_since(void *arg)
{
    struct linger *l = arg;
    if (atomic_load_explicit(&dsm__rt.tick, memory_order_relaxed) != l->mark ||
        atomic_load(&dsm__rt.stopping))
        return 1;
    if (++l->calls % LINGER_LOOK_CALLS) return 0;
    l->busy = cor_cpus_busy() ? l->busy + 1 : 0;
    return l->busy >= LINGER_BUSY_LOOKS;
}

static __thread bool tls_lingering;

/* A listener brought a request: no task of the domain polls. Requests come in streams (a
 * remote task's next operation follows its reply within a round trip), so the listener polls
 * on until COR_DSM_SPIN_US pass without one, and serves the next at once instead of after its
 * own wake-up; unless the CPUs are busy (above). */
static void linger(void)
{
    if (cor_cpus_busy()) return;
    tls_lingering = true;
    struct linger l = {0};
    do
        l.mark = atomic_load_explicit(&dsm__rt.tick, memory_order_relaxed);
    while (cor_poll_until(served_since, &l, dsm__rt.poll_us) == 1 && l.busy < LINGER_BUSY_LOOKS &&
           !atomic_load(&dsm__rt.stopping));
    tls_lingering = false;
}

/* The service task's arrival hook (cor_task_on_arrival). A thread holding one of our
 * mutexes leaves the message to the service thread; one already draining, to itself. */
void dsm__on_arrival(void *arg, int flags)
{
    (void)arg;
    atomic_store(&dsm__rt.pending, 1);
    if (tls_draining) return;
    if (dsm__tls_locks) {
        dsm__svc_wake();
        return;
    }
    drain();
    if ((flags & COR_ARRIVAL_LISTENER) && !tls_lingering) linger();
}

static void set_ready(int v)
{
    dsm__lock_or_die(&dsm__rt.ready_mu);
    dsm__rt.ready = v;
    pthread_cond_broadcast(&dsm__rt.ready_cv);
    dsm__unlock_or_die(&dsm__rt.ready_mu);
}

/* The service thread: serves what the hook left to it (arrivals in threads holding our
 * mutexes, deaths), and looks anyway every WAIT_SLICE_US (a receive it could not post). */
void *dsm__service(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "cor-dsm", 0, 0, 0); /* for top -H, perf, gdb */
    cor_thread_attentive(); /* what it serves, it serves while every task computes */
    set_ready(1);
    pthread_mutex_lock(&dsm__rt.svc_mu);
    while (!atomic_load(&dsm__rt.stopping)) {
        if (!atomic_load(&dsm__rt.pending)) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += (long)DSM__WAIT_SLICE_US * 1000;
            while (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
            }
            int rc = pthread_cond_timedwait(&dsm__rt.svc_cv, &dsm__rt.svc_mu, &t);
            if (rc && rc != ETIMEDOUT) abort();
        }
        pthread_mutex_unlock(&dsm__rt.svc_mu);
        atomic_store(&dsm__rt.pending, 1);
        drain();
        dsm__bar_pump(); /* barrier messages a thread holding our mutexes left here */
        pthread_mutex_lock(&dsm__rt.svc_mu);
    }
    pthread_mutex_unlock(&dsm__rt.svc_mu);
    pthread_mutex_lock(&dsm__rt.turn_mu);
    dsm__rt.closed = true; /* hooks still to come do nothing */
    if (dsm__rt.rr != COR_REQ_NULL) {
        cor_cancel(&dsm__rt.rr);
        cor_status_t st;
        if (cor_wait(&dsm__rt.rr, &st) == COR_OK && dsm__rt.msg)
            atomic_fetch_add(&dsm__rt.dropped, 1);
        if (dsm__rt.msg) cor_releaseBuffer(dsm__rt.msg);
        dsm__rt.msg = NULL;
    }
    pthread_mutex_unlock(&dsm__rt.turn_mu);
    reap(true);
    return NULL;
}
