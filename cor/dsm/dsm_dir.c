/*
 * The cached protocol's state machines (contract in dsm_internal.h): the home's directory and
 * a domain's copy. Pure: no messages, no locks; the runtime (dsm_cached.c) holds the
 * object's or the copy's mutex around every call and does the sending in the callbacks.
 */
#include <stdlib.h>
#include <string.h>

#include "dsm_internal.h"

static size_t words(int n)
{
    return ((size_t)n + 63) / 64;
}
static bool bit(const uint64_t *s, int i)
{
    return (s[i / 64] >> (i % 64)) & 1;
}
static void set_bit(uint64_t *s, int i)
{
    s[i / 64] |= 1ull << (i % 64);
}
static void clear_bit(uint64_t *s, int i)
{
    s[i / 64] &= ~(1ull << (i % 64));
}

int dsm_dir_init(struct dsm_dir *d, int n, int home, const struct dsm_dir_cb *cb, void *ctx)
{
    memset(d, 0, sizeof *d);
    if (n < 1 || home < 0 || home >= n) return COR_EINVAL;
    d->sharers = calloc(words(n), sizeof *d->sharers);
    d->waiting = calloc(words(n), sizeof *d->waiting);
    d->keeping = calloc(words(n), sizeof *d->keeping);
    d->dead = calloc(words(n), sizeof *d->dead);
    d->granted = calloc((size_t)n, sizeof *d->granted);
    d->fwd = calloc(words(n), sizeof *d->fwd);
    if (!d->sharers || !d->waiting || !d->keeping || !d->dead || !d->granted || !d->fwd) {
        dsm_dir_free(d);
        return COR_ENOMEM;
    }
    d->n = n;
    d->home = home;
    d->owner = home; /* the object is born at its home, writable there */
    d->cb = cb;
    d->ctx = ctx;
    return COR_OK;
}

void dsm_dir_free(struct dsm_dir *d)
{
    free(d->sharers);
    free(d->waiting);
    free(d->keeping);
    free(d->dead);
    free(d->granted);
    d->granted = NULL;
    free(d->fwd);
    d->fwd = NULL;
    free(d->q);
    d->sharers = d->waiting = d->keeping = d->dead = NULL;
    d->q = NULL;
    d->len = d->cap = 0;
}

int dsm_dir_holds(const struct dsm_dir *d, int dom)
{
    if (dom < 0 || dom >= d->n) return DSM_MODE_NONE;
    if (d->owner == dom) return DSM_MODE_WRITE;
    return bit(d->sharers, dom) ? DSM_MODE_READ : DSM_MODE_NONE;
}

static void forget(struct dsm_dir *d, int dom)
{
    clear_bit(d->sharers, dom);
    if (d->owner == dom) d->owner = -1;
}

/* dom's copy was invalidated, or downgraded (keep): the old owner now shares it. */
static void dropped(struct dsm_dir *d, int dom, bool keep)
{
    forget(d, dom);
    if (keep) set_bit(d->sharers, dom);
}

/* The current request's round is over (or needed none): grant it and record the new holder. */
static void complete(struct dsm_dir *d)
{
    struct dsm_dreq r = d->cur;
    d->busy = false;
    if (d->lost || d->fail) {
        d->cb->grant(d->ctx, &r, false, d->fail ? d->fail : COR_EPEERDEAD);
        return;
    }
    if (r.kind == DSM_DREQ_OP) {
        /* every conflicting copy is gone; the operation runs on the home's memory */
        d->cb->grant(d->ctx, &r, false, COR_OK);
        return;
    }
    bool valid = r.have_copy && dsm_dir_holds(d, r.who) != DSM_MODE_NONE;
    if (bit(d->dead, r.who)) { /* died while its request waited: it holds nothing */
        d->cb->grant(d->ctx, &r, false, COR_EPEERDEAD);
        return;
    }
    if (r.mode == DSM_MODE_READ) {
        set_bit(d->sharers, r.who);
    } else {
        memset(d->sharers, 0, words(d->n) * sizeof *d->sharers);
        d->owner = r.who;
    }
    /* numbered, so that the holder tells an invalidation of this grant from one of its
     * previous copy when the grant may reach it later (dsm_cached.c) */
    d->granted[r.who]++;
    /* the home's copy is the memory itself: it never needs data */
    d->cb->grant(d->ctx, &r, !valid && r.who != d->home, COR_OK);
}

/* Whether r may be a write in three hops: an upgrade of a valid read copy elsewhere, asked by
 * a task that waits for its grant, while nobody owns the object (only readers hold it). */
static bool forwardable(const struct dsm_dir *d, const struct dsm_dreq *r)
{
    return d->forward && d->cb->finv && r->kind == DSM_DREQ_SECTION && r->mode == DSM_MODE_WRITE &&
           r->who != d->home && r->have_copy && r->task && d->owner < 0 && bit(d->sharers, r->who);
}

/* Starts the round of d->cur: invalidates every copy that conflicts with it. */
static void start(struct dsm_dir *d)
{
    struct dsm_dreq *r = &d->cur;
    d->busy = true;
    d->nwait = 0;
    if (d->lost || d->fail) {
        complete(d);
        return;
    }
    memset(d->waiting, 0, words(d->n) * sizeof *d->waiting);
    memset(d->keeping, 0, words(d->n) * sizeof *d->keeping);
    memset(d->fwd, 0, words(d->n) * sizeof *d->fwd);
    bool fwd = forwardable(d, r);
    bool first = true;
    for (int i = 0; i < d->n; i++) {
        int h = dsm_dir_holds(d, i);
        if (h == DSM_MODE_NONE) continue;
        /* a section's requester keeps what it has; an operation's (the home) does not */
        if (r->kind == DSM_DREQ_SECTION && i == r->who) continue;
        if (r->mode == DSM_MODE_READ && h != DSM_MODE_WRITE) continue;
        if (first) {
            d->seq++;
            d->rounds++;
            first = false;
        }
        r->recalled = true;
        d->invals++;
        if (fwd && i != d->home) { /* a reader: it acknowledges to the writer */
            d->cb->finv(d->ctx, i, d->seq, r->who);
            set_bit(d->fwd, i);
            r->forwarded = true;
            dropped(d, i, false);
            continue;
        }
        bool wb = h == DSM_MODE_WRITE;
        bool keep = wb && r->mode == DSM_MODE_READ; /* a reader only needs the data back */
        if (d->cb->inv(d->ctx, i, d->seq, wb, keep)) {
            dropped(d, i, keep);
        } else {
            set_bit(d->waiting, i);
            if (keep) set_bit(d->keeping, i);
            d->nwait++;
        }
    }
    if (d->nwait == 0) complete(d);
}

static void serve(struct dsm_dir *d)
{
    while (!d->busy && d->len) {
        d->cur = d->q[d->head];
        d->head = (d->head + 1) % d->cap;
        d->len--;
        start(d);
    }
}

int dsm_dir_request(struct dsm_dir *d, const struct dsm_dreq *r)
{
    if (r->who < 0 || r->who >= d->n) return COR_EINVAL;
    if (bit(d->dead, r->who)) return COR_EPEERDEAD;
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct dsm_dreq *q = malloc(cap * sizeof *q);
        if (!q) return COR_ENOMEM;
        for (size_t i = 0; i < d->len; i++)
            q[i] = d->q[(d->head + i) % d->cap];
        free(d->q);
        d->q = q;
        d->head = 0;
        d->cap = cap;
    }
    struct dsm_dreq e = *r;
    e.recalled = e.forwarded = false;
    d->q[(d->head + d->len) % d->cap] = e;
    d->len++;
    serve(d);
    return COR_OK;
}

bool dsm_dir_ack_expected(const struct dsm_dir *d, int dom, uint32_t seq)
{
    return d->busy && seq == d->seq && dom >= 0 && dom < d->n && bit(d->waiting, dom);
}

static void acked(struct dsm_dir *d, int dom)
{
    clear_bit(d->waiting, dom);
    dropped(d, dom, bit(d->keeping, dom));
    if (--d->nwait == 0) {
        complete(d);
        serve(d);
    }
}

bool dsm_dir_ack(struct dsm_dir *d, int dom, uint32_t seq)
{
    if (!dsm_dir_ack_expected(d, dom, seq)) return false;
    acked(d, dom);
    return true;
}

void dsm_dir_release(struct dsm_dir *d, int dom)
{
    if (dom < 0 || dom >= d->n) return;
    /* its acknowledgment of a round already sent will come and be stale: count it now (it
     * kept nothing) */
    clear_bit(d->keeping, dom);
    if (d->busy && bit(d->waiting, dom)) {
        acked(d, dom);
        return;
    }
    forget(d, dom);
}

void dsm_dir_fail(struct dsm_dir *d, int err, void (*each)(void *ctx, int dom), void *ctx)
{
    for (int i = 0; i < d->n; i++)
        if (dsm_dir_holds(d, i) != DSM_MODE_NONE) {
            each(ctx, i);
            forget(d, i);
        }
    d->fail = err;
    if (d->busy) {
        memset(d->waiting, 0, words(d->n) * sizeof *d->waiting);
        d->nwait = 0;
        complete(d);
    }
    serve(d);
}

void dsm_dir_peer_dead(struct dsm_dir *d, int dom)
{
    if (dom < 0 || dom >= d->n) return;
    size_t kept = 0;
    for (size_t i = 0; i < d->len; i++) {
        struct dsm_dreq e = d->q[(d->head + i) % d->cap];
        if (e.who != dom) d->q[(d->head + kept++) % d->cap] = e;
    }
    d->len = kept;
    set_bit(d->dead, dom);
    clear_bit(d->keeping, dom);
    if (d->owner == dom) d->lost = true;
    if (d->busy && bit(d->waiting, dom)) {
        acked(d, dom);
        return;
    }
    forget(d, dom);
    serve(d);
}

/* ---- A domain's copy ------------------------------------------------------------------ */

bool dsm_copy_can_start(const struct dsm_copy *c, int mode)
{
    /* a deferred invalidation stops new sections, except the first one after a grant */
    if (c->err || (c->inv && !c->fresh) || c->state < mode) return false;
    /* readers wait behind an upgrade, unless the copy was just granted to waiting tasks */
    if (mode == DSM_MODE_READ) return c->writers == 0 && (c->pending != DSM_MODE_WRITE || c->fresh);
    return c->readers == 0 && c->writers == 0;
}

void dsm_copy_start(struct dsm_copy *c, int mode)
{
    if (mode == DSM_MODE_READ)
        c->readers++;
    else
        c->writers++;
    c->fresh = false;
}

int dsm_copy_miss(struct dsm_copy *c, int mode, bool *have)
{
    if (c->err) return c->err;
    *have = false;
    /* one request at a time per copy; an invalidation in progress must finish first; a
     * copy good enough but busy locally only needs the local sections to end */
    if (c->pending || c->inv || c->state >= mode) return DSM_MODE_NONE;
    *have = c->state == DSM_MODE_READ;
    c->pending = (uint8_t)mode;
    return mode;
}

bool dsm_copy_end(struct dsm_copy *c, int mode)
{
    if (mode == DSM_MODE_READ)
        c->readers--;
    else
        c->writers--;
    return c->inv && c->readers == 0 && c->writers == 0;
}

void dsm_copy_grant(struct dsm_copy *c, int mode, int err)
{
    c->pending = DSM_MODE_NONE;
    if (err) {
        c->err = err;
        c->state = DSM_MODE_NONE;
        return;
    }
    c->state = (uint8_t)mode;
    /* the tasks that waited get at least one section before the next invalidation */
    c->fresh = c->waiters > 0;
}

bool dsm_copy_inv(struct dsm_copy *c, uint32_t seq, bool keep, bool *dirty)
{
    *dirty = false;
    c->inv_keep = keep;
    if (c->readers || c->writers || c->fresh) {
        c->inv = true;
        c->inv_seq = seq;
        return false;
    }
    *dirty = dsm_copy_drop(c);
    return true;
}

bool dsm_copy_drop(struct dsm_copy *c)
{
    bool dirty = c->state == DSM_MODE_WRITE;
    /* a downgrade keeps only a write copy (a flush meanwhile left none to keep) */
    c->state = c->inv_keep && dirty ? DSM_MODE_READ : DSM_MODE_NONE;
    c->inv = c->inv_keep = false;
    c->fresh = false;
    return dirty;
}
