/*
 * The cached protocol's runtime (COR_DSM_CACHED objects): copies, sections, the home's
 * directory, the grants' data sent straight into copies, and the LRU budget of the copies.
 *
 * The state machines are in dsm_dir.c; here they meet messages and threads. Every message of
 * the protocol goes between two domains' services, sent as the service task under the
 * directory's or the copy's mutex, so each pair of domains sees them in the order the state
 * changed (the protocol needs a grant never to be overtaken by the next invalidation). A home
 * task's request goes to the directory directly (no message); a remote domain's goes as
 * C_REQ from any of its tasks, sent as its service.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dsm_runtime.h"

/* Large send buffers (a grant's or a write-back's data) are kept for the next ones instead
 * of going back to malloc, which returns them to the system (munmap, or a trimmed arena) and
 * hands out fresh pages the next time: a page fault per page while the data is encoded.
 * SBUF_MIN_BYTES and up, at most SBUF_KEEP buffers and SBUF_KEEP_BYTES in all. */
#define SBUF_MIN_BYTES (64u << 10)
#define SBUF_KEEP 16
#define SBUF_KEEP_BYTES (16u << 20)
static struct {
    pthread_mutex_t mu;
    void *buf[SBUF_KEEP];
    size_t n, bytes;
} sbufs = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A buffer of at least n bytes, from the kept ones if one is large enough. */
static void *sbuf_get(size_t n)
{
    if (n >= SBUF_MIN_BYTES) {
        void *b = NULL;
        dsm__lock_or_die(&sbufs.mu);
        for (size_t i = 0; i < sbufs.n; i++) {
            size_t cap = malloc_usable_size(sbufs.buf[i]);
            if (cap >= n && cap / 2 <= n) { /* no more than twice what is needed */
                b = sbufs.buf[i];
                sbufs.buf[i] = sbufs.buf[--sbufs.n];
                sbufs.bytes -= cap;
                break;
            }
        }
        dsm__unlock_or_die(&sbufs.mu);
        if (b) return b;
    }
    return malloc(n);
}

/* Frees a send buffer (from malloc or sbuf_get), or keeps it for sbuf_get. */
void dsm__sbuf_put(void *b)
{
    if (!b) return;
    size_t cap = malloc_usable_size(b);
    if (cap >= SBUF_MIN_BYTES) {
        dsm__lock_or_die(&sbufs.mu);
        bool keep = sbufs.n < SBUF_KEEP && sbufs.bytes + cap <= SBUF_KEEP_BYTES;
        if (keep) {
            sbufs.buf[sbufs.n++] = b;
            sbufs.bytes += cap;
        }
        dsm__unlock_or_die(&sbufs.mu);
        if (keep) return;
    }
    free(b);
}

void dsm__sbuf_clear(void)
{
    dsm__lock_or_die(&sbufs.mu);
    while (sbufs.n)
        free(sbufs.buf[--sbufs.n]);
    sbufs.bytes = 0;
    dsm__unlock_or_die(&sbufs.mu);
}

static void copy_wake(struct dsm__copy *c);
static void copy_retire(cor_idp_t idp);

/* The sections the calling task has open (the hit path reads these: initial-exec TLS, see
 * Makefile.am). */
static __thread struct {
    struct dsm__copy *c;
    int mode;
    bool fast; /* started on the fast path */
} tls_sec[COR_DSM_MAX_SECTIONS];
static __thread int tls_nsec;

static int tls_find(const struct dsm__copy *c)
{
    for (int i = 0; i < tls_nsec; i++)
        if (tls_sec[i].c == c) return i;
    return -1;
}

/* Copies of this size and more take their grant's data straight into their memory (below). */
#define DSM_DIRECT_MIN ((size_t)16 << 10)

/* The tag of an object's data sent straight into a copy (in dsm__rt.dctx). */
static int direct_tag(cor_idp_t obj)
{
    return (int)cor_idp_index(obj);
}

/* An operation on a cached object, waiting for its directory turn at the home. */
struct pop {
    cor_idp_t src;
    struct dsm_req r;
    unsigned char data[];
};

/* A protocol message (service to service) carrying the copy's data if `data`; id: an
 * invalidation's grant number. */
static void cmsg_id(int dom, uint8_t op, const struct dsm__copy *c, uint64_t seq, uint32_t id,
                    uint32_t flags, const void *data)
{
    cor_idp_t svc;
    if (dsm__svc_of(dom, &svc)) return; /* dead: its death is handled on its own */
    struct dsm_req r = {.op = op,
                        .type = (uint8_t)c->type,
                        .id = id & DSM_ID_MAX,
                        .flags = flags,
                        .obj = c->idp,
                        .offset = seq,
                        .count = data ? c->count : 0,
                        .data = data,
                        .data_len = data ? c->bytes : 0};
    size_t n = dsm_req_size(&r);
    unsigned char *buf = n ? sbuf_get(n) : NULL;
    if (!buf) return; /* the peer sees no answer: as from a slow domain */
    dsm_req_encode(buf, n, &r);
    dsm__svc_send(svc, 0, buf, n);
}

static void cmsg(int dom, uint8_t op, const struct dsm__copy *c, uint64_t seq, uint32_t flags,
                 const void *data)
{
    cmsg_id(dom, op, c, seq, 0, flags, data);
}

static bool copy_valid(const struct dsm__copy *c)
{
    return c->st.state != DSM_MODE_NONE;
}

/* Accounting of the valid bytes of copies homed elsewhere, around a state change. */
static void copy_account(const struct dsm__copy *c, bool was_valid)
{
    if (c->x || was_valid == copy_valid(c)) return;
    if (was_valid)
        atomic_fetch_sub(&dsm__rt.cached_bytes, c->bytes);
    else
        atomic_fetch_add(&dsm__rt.cached_bytes, c->bytes);
}

/* Directory callbacks, at the home under x->mu. */
static bool dir_inv(void *ctx, int dom, uint32_t seq, bool writeback, bool keep)
{
    struct dsm__res *x = ctx;
    atomic_fetch_add(&dsm__rt.invalidations, 1);
    if (dom == dsm__rt.rank) {
        bool dirty;
        bool now = dsm_copy_inv(&x->hc.st, seq, keep, &dirty);
        if (!now) copy_wake(&x->hc); /* new sections must wait now */
        return now;                  /* the home's copy is the memory: nothing to write back */
    }
    uint32_t flags = (writeback ? DSM_CF_WRITEBACK : 0) | (keep ? DSM_CF_KEEP : 0);
    cmsg_id(dom, DSM_OP_C_INV, &x->hc, seq, x->dir.granted[dom], flags, NULL);
    return false; /* a dead one counts as acknowledged when its death is handled */
}

/* Under x->mu: a reader's invalidation for a write in three hops by domain `to`. */
static void dir_finv(void *ctx, int dom, uint32_t seq, int to)
{
    struct dsm__res *x = ctx;
    atomic_fetch_add(&dsm__rt.invalidations, 1);
    uint32_t flags = DSM_CF_FWD | (((uint32_t)to << DSM_CF_TO_SHIFT) & DSM_CF_TO);
    cmsg_id(dom, DSM_OP_C_INV, &x->hc, seq, x->dir.granted[dom], flags, NULL);
}

/* Acknowledges invalidation `seq` of c: to the home (to < 0; with the data if dirty), or to
 * the writer `to` of a write in three hops (a reader's: never dirty). */
static void inv_ack(const struct dsm__copy *c, int to, uint64_t seq, bool dirty)
{
    if (to < 0)
        cmsg(c->home, DSM_OP_C_ACK, c, seq, 0, dirty ? c->data : NULL);
    else
        cmsg(to, DSM_OP_C_FACK, c, seq, 0, NULL);
}

static void op_run(struct dsm__res *x, struct pop *p, int status)
{
    if (p->r.op == DSM_OP_ADD) { /* non-fetching: no reply; the sender's QUIET waits for it */
        if (status == COR_OK) status = dsm_obj_apply(&x->obj, &p->r, NULL, NULL);
        dsm__add_done(p->src, status);
        free(p);
        return;
    }
    size_t olen = dsm_obj_out_len(&p->r);
    unsigned char *buf = malloc(DSM_REP_HDR + olen);
    uint64_t value = 0;
    if (!buf) {
        free(p);
        return;
    }
    if (status == COR_OK) status = dsm_obj_apply(&x->obj, &p->r, buf + DSM_REP_HDR, &value);
    dsm__reply_buf(p->src, p->r.op, p->r.type, p->r.id, status, value, buf, olen);
    free(p);
}

/* Under x->mu: a grant with data to a copy that posted its receive (in domain dom's service,
 * or in task `to`): the object's memory alone, read in place until the send completes (no
 * write reaches it before the grantee acknowledges an invalidation, which it does only once
 * the data landed). */
static void direct_send(struct dsm__res *x, int dom, cor_idp_t to)
{
    cor_idp_t svc;
    if (dsm__svc_of(dom, &svc)) return; /* dead: its death is handled on its own */
    atomic_fetch_add(&x->refs, 1);
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    dsm__outbox_send_in(&dsm__rt.svc_out, dsm__rt.svc, to ? to : svc, dsm__rt.dctx,
                        (uint32_t)direct_tag(x->hc.idp),
                        (struct dsm__pend){.buf = x->obj.data, .obj = x}, x->hc.bytes);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
}

/* Under x->mu: an upgrade's grant, to the task that asked: an empty message into its receive
 * (the copy has the data), sent as the service in order with its other sends. */
static void task_send_empty(int dom, cor_idp_t to, const struct dsm__copy *hc)
{
    cor_idp_t svc;
    if (dsm__svc_of(dom, &svc)) return; /* dead: its death is handled on its own */
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    dsm__outbox_send_in(&dsm__rt.svc_out, dsm__rt.svc, to, dsm__rt.dctx,
                        (uint32_t)direct_tag(hc->idp), (struct dsm__pend){.buf = NULL}, 0);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
}

/* Under x->mu: the grant of a write in three hops, to the task that asked: the round and the
 * readers that acknowledge to it (dsm_fgrant_encode), into its receive. */
static void task_send_fgrant(struct dsm__res *x, int dom, cor_idp_t to)
{
    cor_idp_t svc;
    if (dsm__svc_of(dom, &svc)) return; /* dead: its death is handled on its own */
    size_t n = dsm_fgrant_size(x->dir.n);
    unsigned char *buf = malloc(n);
    if (!buf) return; /* the writer sees no answer: as from a slow domain */
    dsm_fgrant_encode(buf, x->dir.seq, x->dir.n, x->dir.fwd);
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    dsm__outbox_send_in(&dsm__rt.svc_out, dsm__rt.svc, to, dsm__rt.dctx,
                        (uint32_t)direct_tag(x->hc.idp), (struct dsm__pend){.buf = buf}, n);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
}

static void dir_grant(void *ctx, const struct dsm_dreq *r, bool data, int status)
{
    struct dsm__res *x = ctx;
    if (r->kind == DSM_DREQ_OP) {
        if (r->recalled) atomic_fetch_add(&dsm__rt.recalls, 1);
        op_run(x, r->op, status);
        /* the operation changed the memory under nobody's copy: the home's is current */
        return;
    }
    if (r->who == dsm__rt.rank) {
        dsm_copy_grant(&x->hc.st, r->mode, status);
        copy_wake(&x->hc);
        return;
    }
    if (status) {
        uint32_t flags = (uint32_t)(-status) << DSM_CF_ERR_SHIFT;
        cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, flags & DSM_CF_ERR, NULL);
        return;
    }
    if (r->task && r->have_copy) { /* an upgrade: the task posted a receive of nothing */
        if (data)                  /* its read copy went meanwhile: the data comes in a message */
            cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, r->mode, x->obj.data);
        else if (r->forwarded) /* in three hops: it waits for the readers named */
            task_send_fgrant(x, r->who, r->task);
        else
            task_send_empty(r->who, r->task, &x->hc);
    } else if (data && r->task) {
        direct_send(x, r->who, r->task); /* the data alone is the grant */
    } else if (data && r->direct) {
        direct_send(x, r->who, 0);
        cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, r->mode | DSM_CF_DIRECT, NULL);
    } else {
        cmsg(r->who, DSM_OP_C_GRANT, &x->hc, 0, r->mode, data ? x->obj.data : NULL);
    }
}

static const struct dsm_dir_cb dir_cbs = {.inv = dir_inv, .grant = dir_grant, .finv = dir_finv};

int dsm__cached_setup(struct dsm__res *x)
{
    int err = dsm_dir_init(&x->dir, dsm__rt.size, dsm__rt.rank, &dir_cbs, x);
    if (err) return err;
    x->dir.forward = dsm__rt.forward;
    struct dsm__copy *c = &x->hc;
    c->inv_to = c->dinv_to = -1;
    c->home = dsm__rt.rank;
    c->type = x->obj.type;
    c->count = x->obj.count;
    c->bytes = x->obj.count * x->obj.tsize;
    c->mu = &x->mu;
    pthread_cond_init(&c->cv, NULL);
    c->st.state = DSM_MODE_WRITE; /* the directory starts with the home as owner */
    c->data = x->obj.data;
    c->x = x;
    return COR_OK;
}

/* Under dsm__rt.lock: the link in dsm__rt.copies that holds idp's copy, or the empty one at its
 * bucket's end. */
static struct dsm__copy **copy_slot(cor_idp_t idp)
{
    struct dsm__copy **p = &dsm__rt.copies[idp % DSM__DIR_BUCKETS];
    while (*p && (*p)->idp != idp)
        p = &(*p)->next;
    return p;
}

static struct dsm__copy *copy_find(cor_idp_t idp)
{
    dsm__lock_or_die(&dsm__rt.lock);
    struct dsm__copy *c = *copy_slot(idp);
    dsm__unlock_or_die(&dsm__rt.lock);
    return c;
}

static void copy_lock(struct dsm__copy *c);
static void copy_unlock(struct dsm__copy *c);

/* The data of a copy homed elsewhere: allocated when a region first maps it, given back once
 * no region maps it and it is invalid and idle (copy_data_release), allocated again by the
 * next map. A program that maps objects one after the other kept every copy's data until
 * cor_dsm_finalize; now what stays allocated unmapped is at most the valid copies, which the
 * cache budget bounds. Every page is written at once (calloc maps large ones lazily): the
 * first grant then copies into resident memory instead of taking a page fault per page in the
 * service thread (about 25 us each on a paravirtualized guest: 0.8 ms for a 128 KiB block).
 * The stores are volatile, or the compiler would drop them. */
static size_t copy_data_size(const struct dsm__copy *c)
{
    return (size_t)(c->count ? c->count : 1) * cor_type_size(c->type);
}

static int copy_data_alloc(struct dsm__copy *c)
{
    size_t n = copy_data_size(c);
    if (!(c->data = calloc(1, n))) return COR_ENOMEM;
    for (size_t o = 0; o < n; o += 4096)
        ((volatile unsigned char *)c->data)[o] = 0;
    atomic_fetch_add(&dsm__rt.copy_bytes, n);
    return COR_OK;
}

/* Under *c->mu: no region maps c and nothing is under way on it (a section, a request, a
 * receive posted into the data, an invalidation, a waiter). */
static bool copy_idle(const struct dsm__copy *c)
{
    const struct dsm_copy *s = &c->st;
    return atomic_load(&c->maps) == 0 && !s->readers && !s->writers && !s->pending && !s->inv &&
           !s->waiters && !c->claims && c->dreq == COR_REQ_NULL && !c->dlanded &&
           c->sreq == COR_REQ_NULL;
}

/* Under *c->mu. A valid copy keeps its data (the cache); so does one that a region maps (its
 * owner holds the pointer) or on which anything is under way. */
static void copy_data_release(struct dsm__copy *c)
{
    if (c->x || !c->data || copy_valid(c) || !copy_idle(c)) return;
    free(c->data);
    c->data = NULL;
    atomic_fetch_sub(&dsm__rt.copy_bytes, copy_data_size(c));
}

void dsm__copy_free(struct dsm__copy *c)
{
    if (c->dreq != COR_REQ_NULL) { /* cor_dsm_finalize: the service has stopped */
        cor_cancel(&c->dreq);
        cor_wait(&c->dreq, NULL);
    }
    pthread_mutex_destroy(&c->own_mu);
    pthread_cond_destroy(&c->cv);
    free(c->fbuf);
    free(c->fwant);
    free(c->facked);
    if (c->data) atomic_fetch_sub(&dsm__rt.copy_bytes, copy_data_size(c));
    free(c->data);
    free(c);
}

/*
 * Retired copies (their objects were destroyed: copy_retire) are freed once nothing involves
 * them: at the retirement, or at their last unmap. Who else may hold a copy's pointer: a
 * region (counted in maps), the service's turn (which retires), the direct grants' list (a
 * receive is posted: not idle), and an evict() that listed it before it retired (while one
 * works, nothing is freed: the next sweep does it).
 */

/* Under dsm__rt.lock: frees the retired copies nothing involves any more. */
static void retired_sweep(void)
{
    if (atomic_load(&dsm__rt.evicting)) return;
    for (struct dsm__copy **p = &dsm__rt.retired; *p;) {
        struct dsm__copy *c = *p;
        dsm__lock_or_die(c->mu);
        bool idle = copy_idle(c);
        dsm__unlock_or_die(c->mu);
        if (idle) {
            *p = c->next;
            dsm__copy_free(c);
        } else {
            p = &c->next;
        }
    }
}

/* Under dsm__rt.lock: whether obj was destroyed since dsm__rt.ngone was `seen` (1), not (0), or
 * maybe (-1: more objects were destroyed since than dsm__rt.gone remembers). The home answered a
 * map's query before it destroyed obj, and the news of that came to the service before the map
 * could keep its new copy: without this look the copy would stay, and one day stand for another
 * object under the same idp. */
static int gone_since(cor_idp_t obj, uint64_t seen)
{
    if (dsm__rt.ngone - seen > DSM__GONE_RING) return -1;
    for (uint64_t i = seen; i < dsm__rt.ngone; i++)
        if (dsm__rt.gone[i % DSM__GONE_RING] == obj) return 1;
    return 0;
}

/* Ends one map of c, a copy homed elsewhere: its data goes once nobody maps it and it is
 * invalid, the copy itself once it retired too. */
static void copy_put(struct dsm__copy *c)
{
    dsm__lock_or_die(&dsm__rt.lock);
    if (atomic_fetch_sub(&c->maps, 1) == 1) {
        copy_lock(c);
        copy_data_release(c);
        copy_unlock(c);
        if (c->retired) retired_sweep();
    }
    dsm__unlock_or_die(&dsm__rt.lock);
}

/* One map of c, counted in c->maps already: a handle of its own (the unmap ends it). */
static int map_handle(struct dsm__copy *c, cor_dsm_region_t *rgn)
{
    uint64_t h = dsm_handle_put(DSM_H_REGION, c);
    if (!h) {
        if (c->x) {
            atomic_fetch_sub(&c->maps, 1);
            dsm__res_put(c->x);
        } else {
            copy_put(c);
        }
        return COR_ENOMEM;
    }
    *rgn = DSM__AS_HANDLE(cor_dsm_region_t, h);
    return COR_OK;
}

COR_API int cor_dsm_map(cor_idp_t obj, cor_dsm_region_t *rgn)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__our_idp(obj) || !rgn) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home == dsm__rt.rank) {
        struct dsm__res *x = dsm__res_get(obj, DSM__RES_OBJ);
        if (!x) return COR_ENOTFOUND;
        if (x->protocol != COR_DSM_CACHED) {
            dsm__res_put(x);
            return COR_DSM_EPROTOCOL;
        }
        atomic_fetch_add(&x->hc.maps, 1);
        return map_handle(&x->hc, rgn); /* the reference is the map's */
    }
    /* Found and counted under dsm__rt.lock: a copy that retires meanwhile stays while mapped. */
again:
    dsm__lock_or_die(&dsm__rt.lock);
    struct dsm__copy *c = *copy_slot(obj);
    if (c) atomic_fetch_add(&c->maps, 1);
    uint64_t seen = dsm__rt.ngone;
    dsm__unlock_or_die(&dsm__rt.lock);
    if (!c) {
        cor_dsm_info_t info;
        int err = cor_dsm_query(obj, &info);
        if (err) return err;
        if (info.protocol != COR_DSM_CACHED) return COR_DSM_EPROTOCOL;
        struct dsm__copy *n = calloc(1, sizeof *n);
        if (!n) return COR_ENOMEM;
        n->idp = obj;
        n->home = home;
        n->inv_to = n->dinv_to = -1;
        n->type = info.type;
        n->count = info.count;
        n->bytes = info.bytes;
        if (copy_data_alloc(n)) {
            free(n);
            return COR_ENOMEM;
        }
        n->mu = &n->own_mu;
        pthread_mutex_init(&n->own_mu, NULL);
        pthread_cond_init(&n->cv, NULL);
        dsm__lock_or_die(&dsm__rt.lock);
        struct dsm__copy **slot = copy_slot(obj);
        c = *slot;
        int gone = c ? 0 : gone_since(obj, seen);
        if (!c && !gone) {
            *slot = c = n; /* the bucket's end */
            n = NULL;
        }
        if (c) atomic_fetch_add(&c->maps, 1);
        dsm__unlock_or_die(&dsm__rt.lock);
        if (n) dsm__copy_free(n); /* another task mapped it first, or it is gone */
        if (gone < 0) goto again;
        if (gone) return COR_ENOTFOUND;
    }
    /* Counted before the look at the data: a release sees the map, or we see its NULL. */
    copy_lock(c);
    int err = c->data ? COR_OK : copy_data_alloc(c);
    copy_unlock(c);
    if (err) {
        copy_put(c);
        return err;
    }
    return map_handle(c, rgn);
}

COR_API int cor_dsm_region_data(cor_dsm_region_t rgn, void **data, size_t *count)
{
    struct dsm__copy *c = dsm__region_of(rgn);
    if (!c || !data) return COR_EINVAL;
    *data = c->data;
    if (count) *count = c->count;
    return COR_OK;
}

COR_API int cor_dsm_unmap(cor_dsm_region_t rgn)
{
    struct dsm__copy *c = dsm__region_of(rgn);
    if (!c) return COR_EINVAL;
    if (tls_find(c) >= 0) return COR_DSM_ESECTION;
    if (!dsm_handle_take(DSM_H_REGION, DSM__HANDLE(rgn), false))
        return COR_EINVAL; /* a racing unmap */
    if (c->x) {
        atomic_fetch_sub(&c->maps, 1);
        dsm__res_put(c->x);
    } else {
        copy_put(c);
    }
    return COR_OK;
}

/*
 * The read fast path (copies homed elsewhere): while c->fast has FAST_OPEN, a read section
 * starts and ends with one atomic operation each, without the mutex. FAST_OPEN is set under
 * the mutex only when a read could start there without waiting and nobody waits, and only
 * while no fast reader is counted; every critical section on the copy begins by closing it
 * (copy_lock), turning the fast readers of the moment into readers of the state machine: a
 * fast reader that ends after that sees FAST_OPEN gone and ends through the mutex. The bits
 * above the count total the fast hits (for the statistics), free of charge.
 */

static bool fast_read_start(struct dsm__copy *c)
{
    uint64_t v = atomic_load_explicit(&c->fast, memory_order_relaxed);
    while ((v & DSM__FAST_OPEN) && (v & DSM__FAST_COUNT) != DSM__FAST_COUNT)
        if (atomic_compare_exchange_weak_explicit(&c->fast, &v, v + 1 + DSM__FAST_HIT,
                                                  memory_order_acquire, memory_order_relaxed))
            return true;
    return false;
}

/* true: ended; false: the fast path closed meanwhile, end through the mutex. */
static bool fast_read_end(struct dsm__copy *c)
{
    return atomic_fetch_sub_explicit(&c->fast, 1, memory_order_release) & DSM__FAST_OPEN;
}

/* Under *c->mu: opens the fast path if a read could start now and nobody waits. */
static void fast_reopen(struct dsm__copy *c)
{
    const struct dsm_copy *s = &c->st;
    if (!s->err && !s->inv && !s->fresh && s->state >= DSM_MODE_READ && !s->writers &&
        s->pending != DSM_MODE_WRITE && !s->waiters &&
        (atomic_load_explicit(&c->fast, memory_order_relaxed) & DSM__FAST_COUNT) == 0)
        atomic_fetch_or_explicit(&c->fast, DSM__FAST_OPEN, memory_order_release);
}

/* Under *c->mu: closes it; its readers of the moment join the state machine's. */
static void fast_close(struct dsm__copy *c)
{
    uint64_t old = atomic_fetch_and_explicit(&c->fast, ~DSM__FAST_OPEN, memory_order_acq_rel);
    if (old & DSM__FAST_OPEN) c->st.readers += (int)(old & DSM__FAST_COUNT);
}

static void copy_lock(struct dsm__copy *c)
{
    dsm__lock_or_die(c->mu);
    if (!c->x) fast_close(c);
}

static void copy_unlock(struct dsm__copy *c)
{
    if (!c->x) fast_reopen(c);
    dsm__unlock_or_die(c->mu);
}

/* Under *c->mu: wakes the tasks waiting on c (and a task driving the service for c). */
static void copy_wake(struct dsm__copy *c)
{
    atomic_fetch_add_explicit(&c->gen, 1, memory_order_release);
    pthread_cond_broadcast(&c->cv);
}

/*
 * Grants straight into the copy. A copy of DSM_DIRECT_MIN bytes or more that has no valid
 * data posts the receive of the data into c->data before it asks (as the service task, in
 * dsm__rt.dctx, tagged with the object's index: one request per copy at a time). The home sends the
 * object's memory alone, which over the core's rendezvous (gm: the route's remote write)
 * lands in the copy with no staging buffer or copy on either side, then the grant's header
 * (DSM_CF_DIRECT) over dsm__rt.ctx, in order with its invalidations. The grant takes effect when
 * both came; an invalidation after the header waits for the data, one before it concerns a
 * copy this domain dropped already (acknowledged at once, as always). The thread holding the
 * service's turn sees the receive complete (the arrival hook also runs for it). Smaller
 * copies take the grant inline, one message with its header.
 */

static void evict(void);

/* Under *c->mu: posts the receive; false if it could not (the grant then comes inline). */
static bool direct_post(struct dsm__copy *c)
{
    cor_idp_t home_svc;
    if (c->x || c->bytes < DSM_DIRECT_MIN || dsm__svc_of(c->home, &home_svc)) return false;
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    int err = cor_recvI_into_as(dsm__rt.svc, home_svc, dsm__rt.dctx, direct_tag(c->idp), COR_BYTE,
                                c->data, c->bytes, &c->dreq);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
    if (err) return false;
    dsm__lock_or_die(&dsm__rt.direct_mu);
    c->dnext = dsm__rt.direct;
    dsm__rt.direct = c;
    atomic_fetch_add(&dsm__rt.ndirect, 1);
    dsm__unlock_or_die(&dsm__rt.direct_mu);
    return true;
}

static void direct_unlink(struct dsm__copy *c)
{
    dsm__lock_or_die(&dsm__rt.direct_mu);
    for (struct dsm__copy **p = &dsm__rt.direct; *p; p = &(*p)->dnext)
        if (*p == c) {
            *p = c->dnext;
            atomic_fetch_sub(&dsm__rt.ndirect, 1);
            break;
        }
    dsm__unlock_or_die(&dsm__rt.direct_mu);
}

static void direct_reset(struct dsm__copy *c)
{
    c->dmode = DSM_MODE_NONE;
    c->dlanded = c->dinv = false;
    c->dland_err = COR_OK;
}

/* Under *c->mu, holding the turn: no data will come (a grant refused or inline, the home's
 * death, finalize): takes the receive back. */
static void direct_cancel(struct dsm__copy *c)
{
    direct_reset(c);
    if (c->dreq == COR_REQ_NULL) return;
    direct_unlink(c);
    dsm__lock_or_die(&dsm__rt.svc_out.mu);
    cor_cancel(&c->dreq);
    cor_wait(&c->dreq, NULL);
    dsm__unlock_or_die(&dsm__rt.svc_out.mu);
    c->dreq = COR_REQ_NULL;
}

/* Under *c->mu: a grant whose data came apart from the service's messages takes effect if
 * still asked for (counted in *kind), then an invalidation that waited for the data. */
static bool grant_landed(struct dsm__copy *c, int mode, int err, _Atomic uint64_t *kind)
{
    if (!c->st.pending) return false;
    dsm_copy_grant(&c->st, mode, err);
    if (!err) {
        c->grants++;
        atomic_fetch_add(kind, 1);
    }
    bool dirty;
    if (c->dinv && !err) {
        if (dsm_copy_inv(&c->st, c->dinv_seq, c->dinv_keep, &dirty))
            inv_ack(c, c->dinv_to, c->dinv_seq, dirty);
        else
            c->inv_to = c->dinv_to;
    }
    return true;
}

/* Under *c->mu, holding the turn: the grant takes effect once its header and data both came. */
static void direct_finish(struct dsm__copy *c)
{
    if (!c->dmode || !c->dlanded) return;
    if (grant_landed(c, c->dmode, c->dland_err, &dsm__rt.grants_direct)) copy_wake(c);
    direct_reset(c);
}

/* Holding the turn: c's data came (or its receive failed). */
static void direct_land(struct dsm__copy *c)
{
    copy_lock(c);
    bool was = copy_valid(c);
    cor_status_t st;
    int done = 0;
    int err = cor_test(&c->dreq, &done, &st);
    c->dreq = COR_REQ_NULL;
    if (!err && !done) err = COR_EPROTO; /* cor_peek said done: not reached */
    if (!err && st.count * cor_type_size(st.type) != c->bytes) err = COR_EPROTO;
    c->dlanded = true;
    c->dland_err = err;
    direct_finish(c);
    copy_account(c, was);
    copy_unlock(c);
}

/* Holding the turn: lands the copies whose data came. */
void dsm__direct_reap(void)
{
    struct dsm__copy *landed = NULL;
    dsm__lock_or_die(&dsm__rt.direct_mu);
    for (struct dsm__copy **p = &dsm__rt.direct; *p;) {
        struct dsm__copy *c = *p;
        int done = 0;
        if (cor_peek(c->dreq, &done) == COR_OK && !done) {
            p = &c->dnext;
            continue;
        }
        *p = c->dnext;
        atomic_fetch_sub(&dsm__rt.ndirect, 1);
        c->dnext = landed;
        landed = c;
    }
    dsm__unlock_or_die(&dsm__rt.direct_mu);
    while (landed) {
        struct dsm__copy *c = landed;
        landed = c->dnext;
        direct_land(c);
    }
    evict();
}

/*
 * Grants as the data alone, to the task that asks. A copy under DSM_DIRECT_MIN bytes without
 * valid data, asked for by a task that waits for it (a blocking start), has that task post
 * the receive of the data into c->data (its own receive, in dsm__rt.dctx, from the home's service,
 * tagged with the object's index) before it asks with DSM_CF_TASK. The home sends the object's
 * memory alone, whose arrival is the grant: the task sees its own receive complete and lands
 * it; no arrival hook, no service turn, no message to decode. An invalidation that comes to
 * the service meanwhile may concern that grant (sent after it, but served first: the
 * service's messages wait their turn, the task's receive does not) or a copy dropped before:
 * the home numbers its grants to each domain (dsm_dir granted) and an invalidation carries the
 * number of the grant it revokes, the copy counts the grants it got (c->grants). The next
 * one's invalidation waits for the task to land it; an earlier one's is acknowledged at once,
 * as always. A grant that comes as a message instead (refused, or the home's choice) makes
 * the service take the receive back.
 */

/* Under *c->mu: posts the calling task's receive; false if it cannot (the grant then comes
 * as a message). */
static bool small_post(struct dsm__copy *c, int mode, bool have)
{
    cor_idp_t home_svc;
    /* c->sreq: another task's receive, taken back by a grant in a message, that task still to
     * land (it owns the receive until then) */
    if (c->x || c->sreq != COR_REQ_NULL || (!have && c->bytes >= DSM_DIRECT_MIN) ||
        cor_task_self() == COR_IDP_NULL || dsm__svc_of(c->home, &home_svc))
        return false;
    /* an upgrade's grant is an empty message (the copy's data, read meanwhile, is current),
     * or the readers to wait for (a write in three hops) */
    size_t words = ((size_t)dsm__rt.size + 63) / 64;
    if (have && !c->fbuf) {
        c->fbuf = malloc(dsm_fgrant_size(dsm__rt.size));
        c->fwant = calloc(words, sizeof *c->fwant);
        c->facked = calloc(words, sizeof *c->facked);
        if (!c->fbuf || !c->fwant || !c->facked) {
            free(c->fbuf);
            free(c->fwant);
            free(c->facked);
            c->fbuf = NULL;
            c->fwant = c->facked = NULL;
            return false;
        }
    }
    if (cor_recvI_into(home_svc, dsm__rt.dctx, direct_tag(c->idp), COR_BYTE,
                       have ? c->fbuf : c->data, have ? dsm_fgrant_size(dsm__rt.size) : c->bytes,
                       &c->sreq))
        return false;
    c->smode = (uint8_t)mode;
    c->supgrade = have;
    c->scanceled = false;
    return true;
}

/* Under *c->mu: the service takes the task's receive back (the task still completes it). */
static void small_cancel(struct dsm__copy *c)
{
    if (c->sreq == COR_REQ_NULL || c->scanceled) return;
    cor_req_t h = c->sreq; /* the task's handle stays its own */
    cor_cancel(&h);
    c->scanceled = true;
}

static bool bit_of(const uint64_t *s, int d)
{
    return (s[d / 64] >> (d % 64)) & 1;
}

/* Under *c->mu: whether every reader named by the grant of a write in three hops has
 * acknowledged its round (c->fseq) or died. */
static bool fwd_done(const struct dsm__copy *c)
{
    for (int d = 0; d < dsm__rt.size; d++)
        if (bit_of(c->fwant, d) && !bit_of(c->facked, d) && !atomic_load(&dsm__rt.dead[d]))
            return false;
    return true;
}

/* Under *c->mu: the write in three hops takes effect once its readers are all accounted for
 * (at its grant's landing, at each acknowledgment, at each death), then an invalidation that
 * waited for it. */
static void fwd_try(struct dsm__copy *c)
{
    if (!c->fwaiting || !fwd_done(c)) return;
    c->fwaiting = false;
    bool was = copy_valid(c);
    if (grant_landed(c, c->fmode, COR_OK, &dsm__rt.grants_task))
        atomic_fetch_add(&dsm__rt.writes_3hop, 1);
    c->dinv = false;
    copy_account(c, was);
    copy_wake(c);
}

/* Under *c->mu: records round seq's acknowledgments from now on (those of an older one are
 * stale); false if seq is older than the round recorded. */
static bool fwd_round(struct dsm__copy *c, uint32_t seq)
{
    if (c->fseq_set && c->fseq == seq) return true;
    if (c->fseq_set && (int32_t)(seq - c->fseq) < 0) return false;
    memset(c->facked, 0, ((size_t)dsm__rt.size + 63) / 64 * sizeof *c->facked);
    c->fseq = seq;
    c->fseq_set = true;
    return true;
}

/* Under *c->mu: an upgrade's grant that names readers (a write in three hops) landed in
 * c->fbuf: waits for them (fwd_try). */
static int fwd_begin(struct dsm__copy *c, size_t len)
{
    uint32_t seq;
    if (dsm_fgrant_decode(c->fbuf, len, dsm__rt.size, dsm__rt.rank, c->home, &seq, c->fwant) ||
        !fwd_round(c, seq))
        return COR_EPROTO;
    c->fwaiting = true;
    c->fmode = c->smode;
    return COR_OK;
}

/* Under *c->mu: the task's receive completed (err: how; len bytes came): the grant takes
 * effect unless the service took the receive back, then an invalidation that waited for it. */
static void small_land(struct dsm__copy *c, int err, size_t len)
{
    bool was = copy_valid(c);
    /* Taken back, it leaves c->dinv alone: it may be a later grant's now (another task's
     * request straight into the copy, a large read after an upgrade that came as a message),
     * and clearing it lost that invalidation (dsm_proc cache, 32 KiB blocks, 4 domains). */
    if (!c->scanceled) {
        if (!err && c->supgrade && len) err = fwd_begin(c, len);
        if (c->fwaiting) {
            fwd_try(c); /* or later: the readers' acknowledgments, their deaths */
        } else {
            grant_landed(c, c->smode, err, &dsm__rt.grants_task);
            c->dinv = false;
        }
    }
    c->sreq = COR_REQ_NULL;
    c->scanceled = false;
    copy_account(c, was);
    copy_wake(c);
}

/* Under *c->mu, by the task that posted c->sreq: waits for it (polling the routes, then
 * asleep on the task's own condvar) and lands it. */
static void small_wait(struct dsm__copy *c)
{
    cor_req_t h = c->sreq;
    cor_status_t st;
    int done = 0, err;
    copy_unlock(c);
    do
        err = cor_wait_timeout(&h, dsm__rt.poll_us, 1000000, NULL, NULL, &done, &st);
    while (err == COR_OK && !done);
    copy_lock(c);
    if (!done && !err) err = COR_EPROTO;
    size_t len = done && !err ? st.count * cor_type_size(st.type) : 0;
    if (!err && (c->supgrade ? len != 0 && len != dsm_fgrant_size(dsm__rt.size) : len != c->bytes))
        err = COR_EPROTO;
    small_land(c, err, len);
}

/* Under *c->mu: asks the home for `mode`; `task_waits`: the calling task blocks for it. */
static int copy_request(struct dsm__copy *c, int mode, bool have, bool task_waits)
{
    c->misses++;
    if (c->x) {
        struct dsm_dreq r = {.who = dsm__rt.rank,
                             .mode = (uint8_t)mode,
                             .kind = DSM_DREQ_SECTION,
                             .have_copy = have};
        int err = dsm_dir_request(&c->x->dir, &r);
        if (err) c->st.pending = DSM_MODE_NONE;
        return err;
    }
    if (atomic_load(&dsm__rt.dead[c->home])) {
        c->st.pending = DSM_MODE_NONE;
        return COR_EPEERDEAD;
    }
    uint32_t flags = (uint32_t)mode | (have ? DSM_CF_HAVE : 0);
    cor_idp_t task = COR_IDP_NULL;
    if (task_waits && small_post(c, mode, have)) {
        flags |= DSM_CF_TASK;
        task = cor_task_self();
    } else if (!have && direct_post(c)) {
        flags |= DSM_CF_DIRECT;
    }
    cmsg(c->home, DSM_OP_C_REQ, c, task, flags, NULL);
    return COR_OK;
}

/* Under *c->mu: a section of the domain on c ended or the copy was dropped for a flush:
 * acknowledges a due invalidation (round seq) to the home. */
static void copy_ack(struct dsm__copy *c, uint32_t seq)
{
    bool was = copy_valid(c);
    bool dirty = dsm_copy_drop(&c->st);
    copy_account(c, was);
    if (c->x) {
        dsm_dir_ack(&c->x->dir, dsm__rt.rank, seq);
    } else {
        inv_ack(c, c->inv_to, seq, dirty);
        c->inv_to = -1;
    }
}

static void timed_wait(struct dsm__copy *c)
{
    if (!c->x) fast_reopen(c); /* stays shut while this task waits; for form's sake */
    dsm__wait_a_while(&c->cv, c->mu);
    if (!c->x) fast_close(c);
}

struct copy_watch {
    struct dsm__copy *c;
    unsigned gen;
};

static int copy_changed(void *arg)
{
    const struct copy_watch *w = arg;
    return atomic_load_explicit(&w->c->gen, memory_order_acquire) != w->gen ||
           atomic_load(&dsm__rt.stopping);
}

/*
 * Under *c->mu: waits for c to change (a grant, an acknowledgment, a section's end). The
 * message that changes it is served by whichever thread of the domain polls the routes when
 * it comes (the service task's arrival hook), so the task polls them itself, for
 * COR_DSM_SPIN_US at most: the message then wakes no thread (a wake-up from the copy's
 * condvar cost 8-70 us on the shared 2-core machine). After one poll that saw no change
 * (*sleep set) it sleeps on the condvar: a long wait costs no core.
 */
static void wait_change(struct dsm__copy *c, bool *sleep)
{
    if (!*sleep) {
        struct copy_watch w = {c, atomic_load_explicit(&c->gen, memory_order_relaxed)};
        if (!c->x) fast_reopen(c); /* stays shut while this task waits; for form's sake */
        dsm__unlock_or_die(c->mu);
        *sleep = !cor_poll_until(copy_changed, &w, dsm__rt.poll_us);
        dsm__lock_or_die(c->mu);
        if (!c->x) fast_close(c);
        if (!*sleep || atomic_load_explicit(&c->gen, memory_order_relaxed) != w.gen) return;
    }
    timed_wait(c);
}

/*
 * Under *c->mu: a non-blocking start (*claim: its cor_dsm_op's) that has to wait for its copy
 * claims it until its section starts or fails (c->claims). evict() leaves a claimed copy
 * alone: with a budget of 0 the grant of a prefetch used to be evicted as it came, before any
 * section, and a start that only cor_dsm_test completes asked the home again at every test,
 * for ever (13,793 requests in 20 s, dsm_proc cache -b 0). Invalidations still take it.
 */
static void claim_settle(struct dsm__copy *c, bool *claim, int err)
{
    if (!claim || *claim == (err == COR_EAGAIN)) return;
    *claim = err == COR_EAGAIN;
    c->claims += *claim ? 1 : -1;
}

/* Tries to start a section (blocking: until it starts or fails). COR_EAGAIN: not yet (the
 * copy is requested). */
static int section_start(struct dsm__copy *c, int mode, bool block, bool *claim, bool *fast)
{
    *fast = false;
    if (mode == DSM_MODE_READ && !c->x && !(claim && *claim) && fast_read_start(c)) {
        *fast = true;
        return COR_OK;
    }
    copy_lock(c);
    if (dsm_copy_can_start(&c->st, mode)) { /* the hit: no message, no allocation */
        dsm_copy_start(&c->st, mode);
        c->hits++;
        claim_settle(c, claim, COR_OK);
        copy_unlock(c);
        return COR_OK;
    }
    int err = COR_OK;
    bool sleep = false;
    c->st.waiters++;
    for (;;) {
        if (dsm_copy_can_start(&c->st, mode)) {
            dsm_copy_start(&c->st, mode);
            break;
        }
        if (!c->st.err && !c->x && atomic_load(&dsm__rt.dead[c->home])) c->st.err = COR_EPEERDEAD;
        bool have;
        int m = dsm_copy_miss(&c->st, mode, &have);
        if (m < 0) {
            err = m;
            break;
        }
        bool mine = false; /* a receive of the grant this task posted */
        if (m > 0) {
            bool other = c->sreq != COR_REQ_NULL; /* another task's, still to land */
            err = copy_request(c, m, have, block);
            if (err) break;
            if (dsm_copy_can_start(&c->st, mode)) continue; /* granted at once (home) */
            mine = !other && c->sreq != COR_REQ_NULL;
        }
        if (!block) {
            err = COR_EAGAIN;
            break;
        }
        if (mine)
            small_wait(c);
        else
            wait_change(c, &sleep);
    }
    c->st.waiters--;
    claim_settle(c, claim, err);
    copy_unlock(c);
    return err;
}

int dsm__section_begin(struct dsm__copy *c, int mode, bool block, bool *claim)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!c) return COR_EINVAL;
    int err = COR_OK;
    if (tls_find(c) >= 0) err = COR_DSM_ESECTION;
    if (!err && tls_nsec == COR_DSM_MAX_SECTIONS) err = COR_ELIMIT;
    if (err) {
        if (claim && *claim) { /* a start that waited fails */
            copy_lock(c);
            claim_settle(c, claim, err);
            copy_unlock(c);
        }
        return err;
    }
    bool fast;
    err = section_start(c, mode, block, claim, &fast);
    if (err == COR_OK) {
        tls_sec[tls_nsec].c = c;
        tls_sec[tls_nsec].mode = mode;
        tls_sec[tls_nsec].fast = fast;
        tls_nsec++;
    }
    return err;
}

static int section_end(struct dsm__copy *c, int mode)
{
    if (!c) return COR_EINVAL;
    int i = tls_find(c);
    if (i < 0 || tls_sec[i].mode != mode) return COR_DSM_ESECTION;
    bool fast = tls_sec[i].fast;
    tls_sec[i] = tls_sec[--tls_nsec];
    /* the LRU stamp: the service's tick, written only when it moved (no shared-line writes
     * on every hit; a clock read would cost as much as the rest of the hit) */
    uint64_t tick = atomic_load_explicit(&dsm__rt.tick, memory_order_relaxed);
    if (atomic_load_explicit(&c->last_use, memory_order_relaxed) != tick)
        atomic_store_explicit(&c->last_use, tick, memory_order_relaxed);
    /* the copy may be idle now: over the budget (a budget of 0, or copies that were busy
     * when a grant last looked), it goes at once, not at the next grant */
    if (fast && fast_read_end(c)) {
        evict();
        return COR_OK;
    }
    copy_lock(c);
    if (dsm_copy_end(&c->st, mode)) copy_ack(c, c->st.inv_seq);
    if (c->st.waiters) copy_wake(c);
    copy_unlock(c);
    evict();
    return COR_OK;
}

COR_API int cor_dsm_start_read(cor_dsm_region_t rgn)
{
    return dsm__section_begin(dsm__region_of(rgn), DSM_MODE_READ, true, NULL);
}
COR_API int cor_dsm_end_read(cor_dsm_region_t rgn)
{
    return section_end(dsm__region_of(rgn), DSM_MODE_READ);
}
COR_API int cor_dsm_start_write(cor_dsm_region_t rgn)
{
    return dsm__section_begin(dsm__region_of(rgn), DSM_MODE_WRITE, true, NULL);
}
COR_API int cor_dsm_end_write(cor_dsm_region_t rgn)
{
    return section_end(dsm__region_of(rgn), DSM_MODE_WRITE);
}

COR_API int cor_dsm_flush(cor_dsm_region_t rgn)
{
    if (!dsm__is_up()) return COR_ESTATE;
    struct dsm__copy *c = dsm__region_of(rgn);
    if (!c) return COR_EINVAL;
    if (tls_find(c) >= 0) return COR_DSM_ESECTION;
    if (c->x) return COR_OK; /* the home's copy is the object itself */
    copy_lock(c);
    c->st.waiters++;
    while ((c->st.readers || c->st.writers || c->st.pending) && !c->st.err &&
           !atomic_load(&dsm__rt.dead[c->home]))
        timed_wait(c);
    c->st.waiters--;
    if (copy_valid(c) && !c->st.err) {
        if (c->st.inv) {
            c->st.inv_keep = false; /* flushed: a due downgrade keeps nothing either */
            copy_ack(c, c->st.inv_seq);
        } else {
            bool was = copy_valid(c);
            bool dirty = dsm_copy_drop(&c->st);
            copy_account(c, was);
            cmsg(c->home, DSM_OP_C_FLUSH, c, 0, 0, dirty ? c->data : NULL);
        }
    }
    int err = c->st.err;
    copy_unlock(c);
    return err;
}

COR_API int cor_dsm_set_cache_bytes(size_t bytes)
{
    atomic_store(&dsm__rt.cache_budget, bytes);
    if (dsm__is_up()) evict(); /* a smaller budget holds from now on */
    return COR_OK;
}

/* Flushes idle copies, least recently used first, until the valid ones fit the budget: where
 * the valid bytes grow (a grant) and where a copy may become idle (a section's end; a copy
 * busy when a grant looked was kept, and with a budget of 0 a copy granted to the asking task
 * stayed until the next grant to come as a message, in dsm_proc cache -b 0 for a whole run
 * under TSan). Over the budget alone it costs two loads. Retired copies are not freed while
 * one works (dsm__rt.evicting), so pointers taken under dsm__rt.lock stay good. */
static int cmp_lru(const void *a, const void *b)
{
    uint64_t x = atomic_load(&(*(struct dsm__copy *const *)a)->last_use);
    uint64_t y = atomic_load(&(*(struct dsm__copy *const *)b)->last_use);
    return x < y ? -1 : x > y;
}

static void evict(void)
{
    if (atomic_load(&dsm__rt.cached_bytes) <= atomic_load(&dsm__rt.cache_budget)) return;
    size_t n = 0, cap = 64;
    struct dsm__copy **v = malloc(cap * sizeof *v);
    if (!v) return;
    dsm__lock_or_die(&dsm__rt.lock);
    atomic_fetch_add(&dsm__rt.evicting, 1); /* what we list is not freed until we are done */
    for (int k = 0; k < DSM__DIR_BUCKETS; k++)
        for (struct dsm__copy *c = dsm__rt.copies[k]; c; c = c->next) {
            if (n == cap) {
                struct dsm__copy **w = realloc(v, 2 * cap * sizeof *v);
                if (!w) break;
                v = w;
                cap *= 2;
            }
            v[n++] = c;
        }
    dsm__unlock_or_die(&dsm__rt.lock);
    qsort(v, n, sizeof *v, cmp_lru);
    for (size_t i = 0;
         i < n && atomic_load(&dsm__rt.cached_bytes) > atomic_load(&dsm__rt.cache_budget); i++) {
        struct dsm__copy *c = v[i];
        copy_lock(c);
        struct dsm_copy *s = &c->st;
        if (copy_valid(c) && !s->readers && !s->writers && !s->pending && !s->inv && !s->waiters &&
            !c->claims && !s->err) {
            bool dirty = dsm_copy_drop(s);
            copy_account(c, true);
            cmsg(c->home, DSM_OP_C_FLUSH, c, 0, 0, dirty ? c->data : NULL);
            atomic_fetch_add(&dsm__rt.evictions, 1);
            copy_data_release(c);
        }
        copy_unlock(c);
    }
    if (atomic_fetch_sub(&dsm__rt.evicting, 1) == 1) { /* copies that retired meanwhile may go */
        dsm__lock_or_die(&dsm__rt.lock);
        retired_sweep();
        dsm__unlock_or_die(&dsm__rt.lock);
    }
    free(v);
}

/* The service: protocol messages. src is the sending domain's service. */
void dsm__serve_cached_home(int from, const struct dsm_req *r, cor_idp_t src)
{
    struct dsm__res *x = dsm__res_get(r->obj, DSM__RES_OBJ);
    if (!x || x->protocol != COR_DSM_CACHED) {
        if (r->op == DSM_OP_C_REQ) {
            int err = x ? COR_DSM_EPROTOCOL : COR_ENOTFOUND;
            struct dsm_req g = {.op = DSM_OP_C_GRANT,
                                .type = r->type,
                                .obj = r->obj,
                                .flags = ((uint32_t)(-err) << DSM_CF_ERR_SHIFT) & DSM_CF_ERR};
            size_t n = dsm_req_size(&g);
            unsigned char *buf = malloc(n);
            if (buf && dsm_req_encode(buf, n, &g))
                dsm__svc_send(src, 0, buf, n);
            else
                free(buf);
        }
        if (x) dsm__res_put(x);
        return;
    }
    size_t bytes = x->hc.bytes;
    dsm__lock_or_die(&x->mu);
    switch (r->op) {
    case DSM_OP_C_REQ: {
        struct dsm_dreq q = {.who = from,
                             .mode = (uint8_t)(r->flags & DSM_CF_MODE),
                             .kind = DSM_DREQ_SECTION,
                             .have_copy = (r->flags & DSM_CF_HAVE) != 0,
                             .direct = (r->flags & DSM_CF_DIRECT) != 0};
        /* a task of the requester's domain (else the grant comes as a message) */
        if ((r->flags & DSM_CF_TASK) && cor_idp_domain(r->offset) == (unsigned)from &&
            (bytes < DSM_DIRECT_MIN || q.have_copy))
            q.task = r->offset;
        int err = dsm_dir_request(&x->dir, &q);
        if (err) dir_grant(x, &q, false, err);
        break;
    }
    case DSM_OP_C_ACK:
        if (!dsm_dir_ack_expected(&x->dir, from, (uint32_t)r->offset)) break; /* stale */
        if (dsm_dir_holds(&x->dir, from) == DSM_MODE_WRITE) {
            if (r->data_len == bytes && r->type == (uint8_t)x->obj.type)
                memcpy(x->obj.data, r->data, bytes);
            else
                atomic_fetch_add(&dsm__rt.dropped, 1); /* an owner's ack without its data */
        }
        dsm_dir_ack(&x->dir, from, (uint32_t)r->offset);
        break;
    case DSM_OP_C_FLUSH:
        if (dsm_dir_holds(&x->dir, from) == DSM_MODE_WRITE && r->data_len == bytes &&
            r->type == (uint8_t)x->obj.type)
            memcpy(x->obj.data, r->data, bytes);
        dsm_dir_release(&x->dir, from);
        break;
    }
    dsm__unlock_or_die(&x->mu);
    dsm__res_put(x);
}

void dsm__serve_cached_copy(const struct dsm_req *r)
{
    if (r->op == DSM_OP_C_GONE) {
        copy_retire(r->obj);
        return;
    }
    /* An invalidation's acknowledgment goes to the home, or to the writer it names (a write
     * in three hops: never ourselves nor the home, who would not count it) */
    int to = -1;
    if (r->op == DSM_OP_C_INV && (r->flags & DSM_CF_FWD)) {
        to = (int)((r->flags & DSM_CF_TO) >> DSM_CF_TO_SHIFT);
        if (to >= dsm__rt.size || to == dsm__rt.rank || to == (int)cor_idp_domain(r->obj)) {
            atomic_fetch_add(&dsm__rt.dropped, 1);
            return;
        }
    }
    struct dsm__copy *c = copy_find(r->obj);
    if (!c) {
        if (r->op == DSM_OP_C_INV) { /* we never had it: nothing to give back */
            struct dsm__copy none = {
                .idp = r->obj, .home = (int)cor_idp_domain(r->obj), .type = (cor_type_t)r->type};
            inv_ack(&none, to, r->offset, false);
        } else {
            atomic_fetch_add(&dsm__rt.dropped, 1);
        }
        return;
    }
    copy_lock(c);
    bool was = copy_valid(c);
    /* Which grant an invalidation revokes: the copy's (0), the one the asking task is still
     * to land (1), or one before them (the task landed a newer grant first: the copy it
     * concerns is gone, and with it the round, ended by the flush or acknowledgment that
     * dropped it; the acknowledgment below is stale at the home, as it always was). */
    uint32_t age = (r->id - c->grants) & DSM_ID_MAX;
    if (r->op == DSM_OP_C_INV && age > DSM_ID_MAX / 2) {
        inv_ack(c, to, r->offset, false);
        copy_unlock(c);
        return;
    }
    /* the grant still to land: the task's receive, or a write in three hops whose readers
     * have not all acknowledged yet */
    bool ahead = r->op == DSM_OP_C_INV && age == 1 &&
                 ((c->sreq != COR_REQ_NULL && !c->scanceled) || c->fwaiting);
    if (r->op == DSM_OP_C_INV && (c->dmode || ahead)) {
        c->dinv = true; /* it overtook the grant's data: due once that landed */
        c->dinv_seq = (uint32_t)r->offset;
        c->dinv_keep = (r->flags & DSM_CF_KEEP) != 0;
        c->dinv_to = to;
        copy_unlock(c);
        return;
    }
    if (r->op == DSM_OP_C_GRANT && (r->flags & DSM_CF_DIRECT)) {
        if (c->dreq == COR_REQ_NULL && !c->dlanded) {
            atomic_fetch_add(&dsm__rt.dropped, 1); /* no data was asked for */
        } else {
            c->dmode = (uint8_t)(r->flags & DSM_CF_MODE);
            direct_finish(c);
        }
        copy_account(c, was);
        copy_unlock(c);
        evict();
        return;
    }
    if (r->op == DSM_OP_C_GRANT) {
        int mode = (int)(r->flags & DSM_CF_MODE);
        int err = -(int)((r->flags & DSM_CF_ERR) >> DSM_CF_ERR_SHIFT);
        /* An invalidation of this grant that came first, taken for the asking task's (an
         * upgrade's grant with the data is a message, and a large one may be overtaken by
         * the next small one): due now. Dropped with the receive, it left the home waiting
         * for its acknowledgment for good (dsm_proc cache, 32 KiB blocks, 4 domains). */
        bool dinv = c->dinv;
        uint32_t dinv_seq = c->dinv_seq;
        bool dinv_keep = c->dinv_keep;
        int dinv_to = c->dinv_to;
        direct_cancel(c); /* a grant in a message: no data comes alone */
        small_cancel(c);
        if (!c->st.pending) {
            atomic_fetch_add(&dsm__rt.dropped, 1); /* nobody asked */
        } else {
            if (!err && r->data_len) {
                if (r->data_len == c->bytes && r->type == (uint8_t)c->type)
                    memcpy(c->data, r->data, c->bytes);
                else
                    err = COR_EPROTO;
            } else if (!err && !copy_valid(c)) {
                err = COR_EPROTO; /* the home thought we had the data */
            }
            dsm_copy_grant(&c->st, mode, err);
            if (!err) c->grants++;
            bool dirty;
            if (dinv && !err) {
                if (dsm_copy_inv(&c->st, dinv_seq, dinv_keep, &dirty))
                    inv_ack(c, dinv_to, dinv_seq, dirty);
                else
                    c->inv_to = dinv_to;
            }
            copy_wake(c);
        }
    } else if (r->op == DSM_OP_C_INV) {
        bool dirty;
        if (dsm_copy_inv(&c->st, (uint32_t)r->offset, (r->flags & DSM_CF_KEEP) != 0, &dirty)) {
            inv_ack(c, to, r->offset, dirty);
        } else {
            c->inv_to = to;
            copy_wake(c);
        }
    }
    copy_account(c, was);
    copy_data_release(c); /* invalidated while nobody maps it */
    copy_unlock(c);
    if (r->op == DSM_OP_C_GRANT) evict();
}

void dsm__serve_cached_fack(int from, const struct dsm_req *r)
{
    if (from < 0 || from >= dsm__rt.size || from == dsm__rt.rank ||
        from == (int)cor_idp_domain(r->obj)) {
        atomic_fetch_add(&dsm__rt.dropped, 1); /* the home never acknowledges to a writer */
        return;
    }
    struct dsm__copy *c = copy_find(r->obj);
    if (!c) return; /* retired (the object was destroyed): nothing waits for it */
    copy_lock(c);
    /* before or after the grant that names the round; a stale one (its reader counted dead,
     * or an older round) changes nothing */
    if (c->facked && fwd_round(c, (uint32_t)r->offset)) {
        c->facked[from / 64] |= 1ull << (from % 64);
        fwd_try(c);
    }
    copy_unlock(c);
}

/* An operation on a cached object homed here: its turn comes through the directory. */
void dsm__serve_cached_op(struct dsm__res *x, cor_idp_t src, const struct dsm_req *r)
{
    struct pop *p = malloc(sizeof *p + r->data_len);
    if (!p && r->op == DSM_OP_ADD) {
        dsm__add_done(src, COR_ENOMEM);
        return;
    }
    if (!p) {
        struct dsm_req q = *r;
        dsm__reply_buf(src, q.op, q.type, q.id, COR_ENOMEM, 0, malloc(DSM_REP_HDR), 0);
        return;
    }
    p->src = src;
    p->r = *r;
    if (r->data_len) memcpy(p->data, r->data, r->data_len); /* a GET has no data */
    p->r.data = p->data;
    p->r.name = NULL;
    p->r.name_len = 0;
    struct dsm_dreq q = {.who = dsm__rt.rank,
                         .mode = r->op == DSM_OP_GET ? DSM_MODE_READ : DSM_MODE_WRITE,
                         .kind = DSM_DREQ_OP,
                         .op = p};
    dsm__lock_or_die(&x->mu);
    int err = dsm_dir_request(&x->dir, &q);
    if (err) op_run(x, p, err);
    dsm__unlock_or_die(&x->mu);
}

/* A cached object is destroyed: the copies elsewhere are invalidated (their data goes
 * nowhere), requests waiting in the directory and later ones get COR_ENOTFOUND. */
static void destroy_inv(void *ctx, int dom)
{
    struct dsm__res *x = ctx;
    if (dom != dsm__rt.rank) cmsg_id(dom, DSM_OP_C_INV, &x->hc, 0, x->dir.granted[dom], 0, NULL);
}

void dsm__cached_destroy(struct dsm__res *x)
{
    dsm__lock_or_die(&x->mu);
    dsm_dir_fail(&x->dir, COR_ENOTFOUND, destroy_inv, x);
    if (!x->hc.st.err) x->hc.st.err = COR_ENOTFOUND;
    copy_wake(&x->hc);
    /* Every domain forgets its copy, holder or not: one that mapped it keeps its size and its
     * grant count, which a later object at the same index would inherit. After the
     * invalidations (one outbox: in order). */
    for (int d = 0; d < dsm__rt.size; d++)
        if (d != dsm__rt.rank) cmsg(d, DSM_OP_C_GONE, &x->hc, 0, 0, NULL);
    dsm__unlock_or_die(&x->mu);
}

/* Copy c fails for good with err (dsm__rt.lock and its mutex held): what was under way on it ends,
 * sections that start or wait get err; a copy inside a section stays valid until it ends. */
static void copy_fail(struct dsm__copy *c, int err)
{
    bool was = copy_valid(c);
    direct_cancel(c);
    small_cancel(c);
    c->fwaiting = false;
    c->st.err = err;
    c->st.pending = DSM_MODE_NONE;
    if (!c->st.readers && !c->st.writers) dsm_copy_drop(&c->st);
    copy_account(c, was);
    copy_wake(c);
}

/* The home destroyed the object: its copy here leaves dsm__rt.copies (the next map of that idp asks
 * the home again) for dsm__rt.retired, where the regions that still map it see COR_ENOTFOUND, and
 * goes once nothing involves it (retired_sweep). */
static void copy_retire(cor_idp_t idp)
{
    dsm__lock_or_die(&dsm__rt.lock);
    dsm__rt.gone[dsm__rt.ngone++ % DSM__GONE_RING] = idp;
    struct dsm__copy **p = copy_slot(idp);
    struct dsm__copy *c = *p;
    if (c) {
        *p = c->next;
        c->next = dsm__rt.retired;
        dsm__rt.retired = c;
        copy_lock(c);
        c->retired = true;
        copy_fail(c, COR_ENOTFOUND);
        copy_data_release(c);
        copy_unlock(c);
        retired_sweep();
    }
    dsm__unlock_or_die(&dsm__rt.lock);
}

/* Domain d died: directories forget its copies (a dirty one's data is lost), copies homed
 * there fail. */
void dsm__cached_peer_dead(int d)
{
    size_t n = 0;
    struct dsm__res **xs = malloc((DSM__RES_MAX + 1) * sizeof *xs);
    dsm__lock_or_die(&dsm__rt.lock);
    for (unsigned i = 1; xs && i <= DSM__RES_MAX; i++) {
        struct dsm__res *x = dsm__rt.res[i];
        if (x && x->kind == DSM__RES_OBJ && x->protocol == COR_DSM_CACHED) {
            atomic_fetch_add(&x->refs, 1);
            xs[n++] = x;
        }
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    for (size_t i = 0; i < n; i++) {
        struct dsm__res *x = xs[i];
        dsm__lock_or_die(&x->mu);
        dsm_dir_peer_dead(&x->dir, d);
        if (x->dir.lost && !x->hc.st.err) x->hc.st.err = COR_EPEERDEAD;
        copy_wake(&x->hc);
        dsm__unlock_or_die(&x->mu);
        dsm__res_put(x);
    }
    free(xs);
    dsm__lock_or_die(&dsm__rt.lock);
    for (int k = 0; k < DSM__DIR_BUCKETS; k++)
        for (struct dsm__copy *c = dsm__rt.copies[k]; c; c = c->next) {
            copy_lock(c); /* dsm__rt.lock -> copy mutex: nowhere the other way round */
            if (c->home == d)
                copy_fail(c, COR_EPEERDEAD);
            else
                fwd_try(c); /* a write in three hops waiting for it counts it */
            copy_unlock(c);
        }
    dsm__unlock_or_die(&dsm__rt.lock);
}

/* Non-blocking starts: a cor_dsm_op of kind section. */
static int section_op(struct cor_dsm_op *o, cor_dsm_region_t rgn, int mode)
{
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->section = dsm__region_of(rgn);
    o->smode = mode;
    int err = dsm__section_begin(o->section, mode, false, &o->claimed);
    if (err == COR_EAGAIN) return COR_OK;
    o->done = true;
    o->result = err;
    return err == COR_DSM_ESECTION || err == COR_EINVAL || err == COR_ELIMIT ? err : COR_OK;
}

COR_API int cor_dsm_start_readI(cor_dsm_region_t rgn, cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, section_op(o, rgn, DSM_MODE_READ), req);
}

COR_API int cor_dsm_start_writeI(cor_dsm_region_t rgn, cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, section_op(o, rgn, DSM_MODE_WRITE), req);
}
