/*
 * A thread's cache of freed objects of one kind (requests, send ops): the objects a thread
 * frees are kept for its next ones, so the message path takes neither the pool's lock nor
 * malloc/free. Objects link through a pointer field of their own (`link`: its offset). A
 * cache holds at most its kind's `max`; when its thread ends, the kind's `retire` gets the
 * cache (to empty it, back to a shared pool or to free) through a pthread key made once per
 * kind, registered at the thread's first push.
 */
#ifndef COR_TCACHE_H
#define COR_TCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct cor_tcache {
    void *top; /* linked through the objects' link field */
    int n;
    bool registered; /* with its kind's key, which retires it when the thread ends */
};

struct cor_tcache_kind {
    int max;                 /* objects a thread keeps at most */
    void (*retire)(void *c); /* the thread ended: c (its struct cor_tcache) to empty */
    pthread_key_t key;       /* made at the first registration (cor__tcache_register) */
    bool key_made;
};

/* Makes k's key (once) and registers c with it (the calling thread's cache). */
void cor__tcache_register(struct cor_tcache *c, struct cor_tcache_kind *k);

static inline void **cor__tcache_link(void *o, size_t link)
{
    return (void **)((char *)o + link);
}

/* The last object pushed, or NULL. */
static inline void *cor__tcache_pop(struct cor_tcache *c, size_t link)
{
    void *o = c->top;
    if (o) {
        c->top = *cor__tcache_link(o, link);
        c->n--;
    }
    return o;
}

/* Keeps o; false (o not taken) when the cache is full. */
static inline bool cor__tcache_push(struct cor_tcache *c, struct cor_tcache_kind *k, void *o,
                                    size_t link)
{
    if (c->n >= k->max) return false;
    if (!c->registered) cor__tcache_register(c, k);
    *cor__tcache_link(o, link) = c->top;
    c->top = o;
    c->n++;
    return true;
}

#endif
