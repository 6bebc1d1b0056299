/*
 * Matching: a task's posted receives and its unexpected messages, both FIFO, so the first
 * match is always the oldest and order per sender is kept. Callers hold the task's lock.
 */
#include "internal.h"

bool cor__match(cor_idp_t want_src, cor_idp_t want_ctx, int want_tag, cor_idp_t src, cor_idp_t ctx,
                int tag)
{
    return want_ctx == ctx && (want_src == COR_ANY_SOURCE || want_src == src) &&
           (want_tag == COR_ANY_TAG || want_tag == tag);
}

#define LIST_UNLINK(t, head, tail, e)                                                              \
    do {                                                                                           \
        if ((e)->prev)                                                                             \
            (e)->prev->next = (e)->next;                                                           \
        else                                                                                       \
            (t)->head = (e)->next;                                                                 \
        if ((e)->next)                                                                             \
            (e)->next->prev = (e)->prev;                                                           \
        else                                                                                       \
            (t)->tail = (e)->prev;                                                                 \
        (e)->next = (e)->prev = NULL;                                                              \
    } while (0)
#define LIST_APPEND(t, head, tail, e)                                                              \
    do {                                                                                           \
        (e)->next = NULL;                                                                          \
        (e)->prev = (t)->tail;                                                                     \
        if ((t)->tail)                                                                             \
            (t)->tail->next = (e);                                                                 \
        else                                                                                       \
            (t)->head = (e);                                                                       \
        (t)->tail = (e);                                                                           \
    } while (0)

struct cor_req *cor__posted_unlink(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag)
{
    for (struct cor_req *r = t->posted_head; r; r = r->next) {
        if (!cor__match(r->peer, r->ctx, r->tag, src, ctx, tag)) continue;
        LIST_UNLINK(t, posted_head, posted_tail, r);
        return r;
    }
    return NULL;
}

struct cor_req *cor__posted_take(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag)
{
    struct cor_req *r = cor__posted_unlink(t, src, ctx, tag);
    if (r) atomic_store(&r->state, RS_MATCHED); /* cancel can no longer take it */
    return r;
}

void cor__posted_append(struct cor_task *t, struct cor_req *r)
{
    LIST_APPEND(t, posted_head, posted_tail, r);
}

bool cor__posted_remove(struct cor_task *t, struct cor_req *r)
{
    for (struct cor_req *p = t->posted_head; p; p = p->next) {
        if (p != r) continue;
        LIST_UNLINK(t, posted_head, posted_tail, r);
        return true;
    }
    return false;
}

struct cor_umsg *cor__unexp_take(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag)
{
    for (struct cor_umsg *m = t->unexp_head; m; m = m->next) {
        if (!cor__match(src, ctx, tag, m->src, m->ctx, m->tag)) continue;
        LIST_UNLINK(t, unexp_head, unexp_tail, m);
        return m;
    }
    return NULL;
}

struct cor_umsg *cor__unexp_take_peer(struct cor_task *t, uint32_t peer)
{
    struct cor_umsg *gone = NULL;
    for (struct cor_umsg *m = t->unexp_head, *next; m; m = next) {
        next = m->next;
        if (m->kind == UM_LOCAL || m->peer_rank != peer) continue;
        LIST_UNLINK(t, unexp_head, unexp_tail, m);
        m->next = gone;
        gone = m;
    }
    return gone;
}

void cor__unexp_append(struct cor_task *t, struct cor_umsg *m)
{
    LIST_APPEND(t, unexp_head, unexp_tail, m);
}
