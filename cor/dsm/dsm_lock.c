/*
 * A lock's state at its home: the holder and a FIFO ring of waiters. Grants go out in
 * arrival order at the home, whichever domain the waiters are in.
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

/* Hands the lock to the longest waiter, if any. */
static bool pass_on(struct dsm_lock *l, struct dsm_grant *g)
{
    if (l->len == 0) {
        l->holder = COR_IDP_NULL;
        return false;
    }
    struct dsm_waiter w = l->q[l->head];
    l->head = (l->head + 1) % l->cap;
    l->len--;
    l->holder = w.who;
    g->who = w.who;
    g->id = w.id;
    g->status = l->owner_died ? COR_DSM_EOWNERDEAD : COR_OK;
    l->owner_died = false;
    return true;
}

int dsm_lock_acquire(struct dsm_lock *l, cor_idp_t who, uint32_t id, bool try, struct dsm_grant *g)
{
    if (l->holder == who || queued(l, who)) return COR_ESTATE;
    if (l->holder == COR_IDP_NULL) {
        l->holder = who;
        g->who = who;
        g->id = id;
        g->status = l->owner_died ? COR_DSM_EOWNERDEAD : COR_OK;
        l->owner_died = false;
        return DSM_LOCK_GRANTED;
    }
    if (try) return COR_EBUSY;
    int err = push(l, who, id);
    return err ? err : DSM_LOCK_QUEUED;
}

int dsm_lock_release(struct dsm_lock *l, cor_idp_t who, struct dsm_grant *g, bool *granted)
{
    *granted = false;
    if (who == COR_IDP_NULL || l->holder != who) return COR_ESTATE;
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
