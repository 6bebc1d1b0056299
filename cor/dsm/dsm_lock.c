/*
 * A lock's state at its home: the holder and a FIFO ring of waiters. Grants go out in
 * arrival order at the home, whichever domain the waiters are in. A grant made while nobody
 * waits is kept by the holder's domain until recalled (dsm_internal.h); the recall goes out
 * when someone else asks.
 */
#include <stdlib.h>

#include "dsm_internal.h"

static bool queued(const struct dsm_lock *l, cor_idp_t who)
{
    for (size_t i = 0; i < l->len; i++)
        if (l->q[(l->head + i) % l->cap].who == who) return true;
    return false;
}

static int push(struct dsm_lock *l, cor_idp_t who, uint32_t id)
{
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct dsm_waiter *q = malloc(cap * sizeof *q);
        if (!q) return COR_ENOMEM;
        for (size_t i = 0; i < l->len; i++)
            q[i] = l->q[(l->head + i) % l->cap];
        free(l->q);
        l->q = q;
        l->cap = cap;
        l->head = 0;
    }
    l->q[(l->head + l->len) % l->cap] = (struct dsm_waiter){who, id};
    l->len++;
    return COR_OK;
}

/* The lock goes to who (tag id); kept when nobody waits after it and the last grant went to
 * the same domain (a domain that takes a lock again and again keeps it; domains taking it in
 * turn would each pay a recall, so they do not). */
static void grant(struct dsm_lock *l, cor_idp_t who, uint32_t id, struct dsm_grant *g)
{
    unsigned dom = cor_idp_domain(who) + 1;
    l->holder = who;
    l->gen = (l->gen + 1) & DSM_ID_MAX;
    l->kept = l->len == 0 && !l->never_keep && l->last_domain == dom;
    l->last_domain = dom;
    l->recalled = false;
    g->who = who;
    g->id = id;
    g->status = l->owner_died ? COR_DSM_EOWNERDEAD : COR_OK;
    g->gen = l->gen;
    g->keep = l->kept;
    l->owner_died = false;
}

/* Hands the lock to the longest waiter, if any. */
static bool pass_on(struct dsm_lock *l, struct dsm_grant *g)
{
    l->kept = l->recalled = false;
    if (l->len == 0) {
        l->holder = COR_IDP_NULL;
        return false;
    }
    struct dsm_waiter w = l->q[l->head];
    l->head = (l->head + 1) % l->cap;
    l->len--;
    grant(l, w.who, w.id, g);
    return true;
}

static bool same_domain(cor_idp_t a, cor_idp_t b)
{
    return cor_idp_domain(a) == cor_idp_domain(b);
}

int dsm_lock_acquire(struct dsm_lock *l, cor_idp_t who, uint32_t id, bool try, struct dsm_grant *g,
                     bool *recall)
{
    *recall = false;
    if (queued(l, who)) return COR_ESTATE;
    if (l->holder == COR_IDP_NULL) {
        grant(l, who, id, g);
        return DSM_LOCK_GRANTED;
    }
    if (l->holder == who && !l->kept) return COR_ESTATE;
    if (l->kept && !l->recalled) {
        *recall = true;
        l->recalled = true;
    }
    if (try) return COR_EBUSY;
    int err = push(l, who, id);
    if (err && *recall) l->recalled = false; /* nobody waits: no recall */
    if (err) *recall = false;
    return err ? err : DSM_LOCK_QUEUED;
}

int dsm_lock_release(struct dsm_lock *l, cor_idp_t who, uint32_t gen, struct dsm_grant *g,
                     bool *granted)
{
    *granted = false;
    if (who == COR_IDP_NULL || l->holder == COR_IDP_NULL) return COR_ESTATE;
    if (l->kept ? !same_domain(who, l->holder) || gen != l->gen : l->holder != who)
        return COR_ESTATE;
    *granted = pass_on(l, g);
    return COR_OK;
}

void dsm_lock_peer_dead(struct dsm_lock *l, unsigned rank, struct dsm_grant *g, bool *granted)
{
    *granted = false;
    size_t kept = 0;
    for (size_t i = 0; i < l->len; i++) {
        struct dsm_waiter w = l->q[(l->head + i) % l->cap];
        if (cor_idp_domain(w.who) != rank) l->q[(l->head + kept++) % l->cap] = w;
    }
    l->len = kept;
    if (l->holder != COR_IDP_NULL && cor_idp_domain(l->holder) == rank) {
        l->owner_died = true;
        *granted = pass_on(l, g);
    }
}

void dsm_lock_free(struct dsm_lock *l)
{
    free(l->q);
    l->q = NULL;
    l->head = l->len = l->cap = 0;
}
