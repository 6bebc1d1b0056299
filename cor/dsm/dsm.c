/*
 * libcordsm's runtime, on libcor's public API only. This file: setup, the resources homed
 * here, and the client side of every operation (remote operations, non-fetching adds,
 * objects, locks, barriers). dsm_cached.c: the cached protocol (copies and sections);
 * dsm_service.c: the service. Their shared state and types: dsm_runtime.h.
 *
 * Each domain runs a service: a reserved task ("cor.dsm") whose mailbox receives every DSM
 * request sent to this domain, in a context of its own. Its messages are served where they
 * land: the task's arrival hook (on_arrival) drains the mailbox in whatever thread polled the
 * message in (a task waiting in the core, a listener), one thread at a time (the turn,
 * D.turn_mu); a thread of the service only takes what a thread holding one of our mutexes
 * left, and deaths. Served here: operations on objects homed here, the directory entries of
 * the names that hash here and the locks that live here. Barrier messages go to a second
 * reserved task ("cor.dsm.barrier"), received by a task waiting in the barrier.
 *
 * Who owns what:
 * - D.lock guards the resource table (objects and locks homed here, by index), the barrier
 *   list and every barrier's state. An object's data is guarded by its own mutex, so the
 *   home's tasks operate on it directly (no message) while the service serves remote ones.
 * - Only the thread holding the turn touches the directory, the locks' queues, the errors
 *   kept for QUIET and the list of its pending reply sends; none of them needs another lock.
 * - A client's request is two core requests of the calling task: a receive of the reply
 *   (posted first, tag = the request id) and the send of the request.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
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

struct dsm_runtime D = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .svc_out.mu = PTHREAD_MUTEX_INITIALIZER,
    .direct_mu = PTHREAD_MUTEX_INITIALIZER,
    .qmu = PTHREAD_MUTEX_INITIALIZER,
    .bar_out.mu = PTHREAD_MUTEX_INITIALIZER,
    .turn_mu = PTHREAD_MUTEX_INITIALIZER,
    .svc_mu = PTHREAD_MUTEX_INITIALIZER,
    .svc_cv = PTHREAD_COND_INITIALIZER,
    .ready_mu = PTHREAD_MUTEX_INITIALIZER,
    .bar_cv = PTHREAD_COND_INITIALIZER,
    .ready_cv = PTHREAD_COND_INITIALIZER,
};

/* How many of our mutexes the thread holds (lock_or_die). */
__thread int tls_locks;

COR_API const char *cor_dsm_strerror(int err)
{
#define DSM_STR_(name, value, text)                                                                \
    case value:                                                                                    \
        return text;
    switch (err) {
        COR_DSM_ERRNO_MAP(DSM_STR_)
    default:
        return cor_strerror(err);
    }
#undef DSM_STR_
}

/* ---- Resources homed here ------------------------------------------------------------ */

void res_free(struct res *x)
{
    if (x->shm) {
        dsm_shm_retire(x->shm);
        dsm_shm_close(x->shm);
    } else if (x->kind == RES_OBJ) {
        free(x->obj.data);
    }
    if (x->protocol == COR_DSM_CACHED) {
        dsm_dir_free(&x->dir);
        pthread_cond_destroy(&x->hc.cv);
    }
    dsm_lock_free(&x->lock);
    pthread_mutex_destroy(&x->mu);
    free(x);
}

void res_put(struct res *x)
{
    if (atomic_fetch_sub(&x->refs, 1) == 1) res_free(x);
}

struct res *res_get(cor_idp_t idp, enum res_kind kind)
{
    if (!our_idp(idp) || cor_idp_domain(idp) != (unsigned)D.rank) return NULL;
    lock_or_die(&D.lock);
    struct res *x = D.res ? D.res[cor_idp_index(idp)] : NULL;
    if (x && x->kind == kind)
        atomic_fetch_add(&x->refs, 1);
    else
        x = NULL;
    unlock_or_die(&D.lock);
    return x;
}

/* Gives x an index (reused last: a stale idp meets ENOTFOUND for as long as possible). */
int res_add(struct res *x)
{
    lock_or_die(&D.lock);
    for (unsigned k = 0; k < RES_MAX; k++) {
        unsigned i = (D.next_index + k) % RES_MAX + 1;
        if (!D.res[i]) {
            D.res[i] = x;
            x->index = i;
            D.next_index = i % RES_MAX;
            unlock_or_die(&D.lock);
            return COR_OK;
        }
    }
    unlock_or_die(&D.lock);
    return COR_ELIMIT;
}

/* Takes resource `index` of `kind` out of the table; returns it (with the table's
 * reference) or NULL. */
static struct res *res_remove(unsigned index, enum res_kind kind)
{
    if (index == 0 || index > RES_MAX) return NULL;
    lock_or_die(&D.lock);
    struct res *x = D.res[index];
    if (x && x->kind == kind)
        D.res[index] = NULL;
    else
        x = NULL;
    unlock_or_die(&D.lock);
    return x;
}

struct res *res_new(enum res_kind kind, const char *name)
{
    struct res *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->kind = kind;
    atomic_init(&x->refs, 1);
    snprintf(x->name, sizeof x->name, "%s", name);
    pthread_mutex_init(&x->mu, NULL);
    return x;
}

/* Runs a request on a home-only object homed here, in the calling thread. */
int obj_apply(struct res *x, const struct dsm_req *r, void *out, uint64_t *value)
{
    if (x->shm) return dsm_shm_apply(x->shm, r, out, value);
    lock_or_die(&x->mu);
    int err = dsm_obj_apply(&x->obj, r, out, value);
    unlock_or_die(&x->mu);
    return err;
}

/* ---- Services of other domains -------------------------------------------------------- */

/* The idp of a mailbox (a reserved task: SVC_NAME or BAR_NAME) of domain `rank`. */
int mailbox_of(int rank, const char *name, cor_idp_t *out)
{
    if (rank < 0 || rank >= D.size) return COR_EINVAL;
    if (atomic_load(&D.dead[rank])) return COR_EPEERDEAD;
    bool bar = !strcmp(name, BAR_NAME);
    _Atomic cor_idp_t *cache = bar ? D.bar_boxes : D.svcs;
    cor_idp_t s = atomic_load(&cache[rank]);
    if (s == COR_IDP_NULL) {
        int err = COR_OK;
        if (rank == D.rank)
            s = bar ? D.bar_box : D.svc;
        else
            err = cor_task_lookup(rank, name, 0, &s);
        if (err) return err;
        atomic_store(&cache[rank], s);
    }
    *out = s;
    return COR_OK;
}

int svc_of(int rank, cor_idp_t *svc)
{
    return mailbox_of(rank, SVC_NAME, svc);
}

static void on_death(int rank, int err, void *arg)
{
    (void)err;
    (void)arg;
    /* Called from a core thread: no locks, just marks (the service does the rest). */
    if (!D.dead || rank < 0 || rank >= D.size) return;
    atomic_store(&D.dead[rank], true);
    atomic_store(&D.deaths_pending, 1);
    svc_wake();
}

/* ---- Client operations ---------------------------------------------------------------- */

struct copy *region_of(cor_dsm_region_t rgn)
{
    return dsm_handle_get(DSM_H_REGION, HANDLE(rgn));
}

static __thread uint32_t tls_id;

static uint32_t next_id(void)
{
    tls_id = (tls_id + 1) & DSM_ID_MAX;
    if (tls_id == 0) tls_id = 1;
    return tls_id;
}

static void op_release(struct cor_dsm_op *o)
{
    if (o->sbuf && o->sbuf != o->small) free(o->sbuf);
    if (o->rbuf && o->rbuf != o->rsmall) free(o->rbuf);
    o->sbuf = o->rbuf = NULL;
}

static void op_init(struct cor_dsm_op *o, const struct dsm_req *r)
{
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->op = r->op;
    o->id = r->id;
}

/* Sends the request to domain `home`'s service, the reply (rep_data bytes of data at most)
 * to be received into o->rbuf. */
static void adds_flush_home(int home);
static bool adds_pending(int home);
static void adds_settle_home(int home);

static int op_start(struct cor_dsm_op *o, int home, const struct dsm_req *r, size_t rep_data)
{
    adds_flush_home(home);
    cor_idp_t svc;
    int err = svc_of(home, &svc);
    if (err) return err;
    size_t n = dsm_req_size(r);
    if (n == 0) return COR_EINVAL;
    o->sbuf = n <= sizeof o->small ? o->small : malloc(n);
    o->rcap = DSM_REP_HDR + rep_data;
    o->rbuf = o->rcap <= sizeof o->rsmall ? o->rsmall : malloc(o->rcap);
    if (!o->sbuf || !o->rbuf) {
        op_release(o);
        return COR_ENOMEM;
    }
    dsm_req_encode(o->sbuf, n, r);
    err = cor_recvI_into(svc, D.ctx, (int)r->id, COR_BYTE, o->rbuf, o->rcap, &o->rreq);
    if (err) goto fail;
    err = cor_sendI_typed(svc, D.ctx, (int)r->id, COR_BYTE, o->sbuf, n, &o->sreq);
    if (err) {
        cor_cancel(&o->rreq);
        cor_wait(&o->rreq, NULL);
        goto fail;
    }
    atomic_fetch_add(&D.remote_ops, 1);
    return COR_OK;
fail:
    op_release(o);
    return err;
}

/* Checks the reply (it comes from a peer: untrusted) and delivers its results. */
static int op_finish(struct cor_dsm_op *o, size_t len)
{
    struct dsm_rep rep;
    if (dsm_rep_decode(o->rbuf, len, &rep) || rep.op != o->op || rep.id != o->id) return COR_EPROTO;
    if (rep.status != COR_OK) return rep.status;
    switch (o->op) {
    case DSM_OP_GET:
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_CAS:
        if (rep.data_len != o->out_len) return COR_EPROTO;
        if (o->out && o->out_len) memcpy(o->out, rep.data, o->out_len);
        return COR_OK;
    case DSM_OP_APPEND:
        if (rep.data_len) return COR_EPROTO;
        if (o->slot) *o->slot = rep.value;
        return COR_OK;
    case DSM_OP_QUERY:
    case DSM_OP_DIR_GET: {
        cor_dsm_info_t info;
        if (dsm_info_decode(rep.data, rep.data_len, &info) || !our_idp(rep.value) ||
            cor_idp_domain(rep.value) != (unsigned)info.home)
            return COR_EPROTO;
        if (o->info) *o->info = info;
        if (o->idp_out) *o->idp_out = rep.value;
        return COR_OK;
    }
    case DSM_OP_LOCK_OPEN:
        if (rep.data_len || !our_idp(rep.value)) return COR_EPROTO;
        if (o->idp_out) *o->idp_out = rep.value;
        return COR_OK;
    default:
        return rep.data_len ? COR_EPROTO : COR_OK;
    }
}

/* The send failed: the reply cannot come; take the receive back. */
static int op_abort(struct cor_dsm_op *o, int err)
{
    if (o->rreq != COR_REQ_NULL) {
        cor_cancel(&o->rreq);
        cor_wait(&o->rreq, NULL);
    }
    return err;
}

static void held_settle(struct cor_dsm_op *o);

/* A wait on shared memory (a barrier's file, a lock's ticket): until met(arg), polls the
 * routes (this domain's DSM requests are served as in any wait) and yields between looks for
 * SHM_WAIT_US (or COR_DSM_SPIN_US), so that the domains being waited for get a CPU when
 * domains outnumber cores (polling alone: 2 ms per barrier of 4 domains on 2 cores,
 * yielding: 7 us); then nap(arg), a sleep in the kernel of a few milliseconds at most. */
static void shm_wait(int (*met)(void *), void (*nap)(void *), void *arg, int domains)
{
    /* With a core for each domain waited with, first a few looks alone: a peer on another core
     * ends the wait within a microsecond, and a poll of the routes between looks adds its own
     * (2-domain barrier 0.12-0.41 us -> 0.13-0.31); with fewer cores they only keep the CPU
     * from the domains still to come (4-domain barrier on 2 cores: 5.7 -> 18 us). */
    for (int i = 0; domains <= D.ncpus && i < SHM_SPIN_LOOKS; i++) {
        if (met(arg)) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long spin_us = D.poll_us < 0 ? SHM_WAIT_US : D.poll_us;
    for (unsigned i = 1; !met(arg); i++) {
        cor_progress();
        sched_yield();
        if (i % 16) continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < spin_us) continue;
        while (!met(arg))
            nap(arg);
        return;
    }
}

static bool domain_dead(int rank, void *arg)
{
    (void)arg;
    return rank >= 0 && rank < D.size && atomic_load(&D.dead[rank]);
}

/* Whether an acquisition in shared memory is over (o->result then says how). */
static int lock_turn(void *arg)
{
    struct cor_dsm_op *o = arg;
    int status;
    if (o->done) return 1; /* asked again: the holder's news was taken already */
    if (atomic_load(&D.dead[o->lock_home]))
        o->result = COR_EPEERDEAD; /* as a request to a dead home would */
    else if (dsm_shm_lock_turn(o->lk, o->ticket, D.rank, domain_dead, NULL, &status))
        o->result = status;
    else if (atomic_load(&D.stopping))
        o->result = COR_ESTATE;
    else
        return 0;
    o->done = true;
    return 1;
}

static void lock_nap(void *arg)
{
    struct cor_dsm_op *o = arg;
    dsm_shm_lock_sleep(o->lk, o->ticket);
}

static int bar_step(struct bar_entry *e, bool block, int *done);

static int op_wait(struct cor_dsm_op *o)
{
    if (!o->done && o->bar_in) {
        o->result = bar_step(&o->bar, true, NULL);
        o->done = true;
    }
    if (!o->done && o->lk) shm_wait(lock_turn, lock_nap, o, D.size);
    if (!o->done && o->section) {
        o->result = section_begin(o->section, o->smode, true);
        o->done = true;
    }
    if (!o->done) {
        int err = o->sreq != COR_REQ_NULL ? cor_wait(&o->sreq, NULL) : COR_OK;
        if (err) {
            o->result = op_abort(o, err);
        } else {
            cor_status_t st;
            err = cor_wait(&o->rreq, &st);
            o->result = err ? err : op_finish(o, st.count);
        }
        o->done = true;
    }
    held_settle(o);
    op_release(o);
    return o->result;
}

static int op_test(struct cor_dsm_op *o, int *done)
{
    *done = 0;
    if (!o->done && o->bar_in) {
        int d = 0;
        int err = bar_step(&o->bar, false, &d);
        if (!d) return COR_OK;
        o->result = err;
        o->done = true;
    }
    if (!o->done && o->lk && !lock_turn(o)) {
        cor_progress();
        return COR_OK;
    }
    if (!o->done && o->section) {
        int err = section_begin(o->section, o->smode, false);
        if (err == COR_EAGAIN) {
            cor_progress(); /* the grant's rendezvous moves, as a cor_test would move it */
            return COR_OK;
        }
        o->result = err;
        o->done = true;
    }
    if (!o->done) {
        int d = 0, err;
        if (o->sreq != COR_REQ_NULL) {
            err = cor_test(&o->sreq, &d, NULL);
            if (d && err) {
                o->result = op_abort(o, err);
                o->done = true;
            }
            if (!d) return COR_OK;
        }
        if (!o->done) {
            cor_status_t st;
            err = cor_test(&o->rreq, &d, &st);
            if (!d) return COR_OK;
            o->result = err ? err : op_finish(o, st.count);
            o->done = true;
        }
    }
    held_settle(o);
    op_release(o);
    *done = 1;
    return o->result;
}

/* Runs an operation on an object of another home of this host on the home's segment, in
 * the calling thread: its result, or DSM_SHM_NONE if the object has no segment here (a cached
 * object, one of another host, or COR_DSM_SHM=0). */
static int shm_op(int home, const struct dsm_req *r, void *out, uint64_t *slot)
{
    if (!D.shm) return DSM_SHM_NONE;
    if (atomic_load(&D.dead[home])) return COR_EPEERDEAD;
    if (adds_pending(home)) {
        /* only for an object with a segment: a request would follow the adds anyway */
        if (!dsm_shm_views_has(r->obj)) return DSM_SHM_NONE;
        adds_settle_home(home);
    }
    uint64_t value = 0;
    int err = dsm_shm_views_apply(r, out, &value);
    if (err == DSM_SHM_NONE) return err;
    atomic_fetch_add(&D.shm_ops, 1);
    if (!err && slot) *slot = value;
    return err;
}

/* Fills o for an operation on an object and runs it here (home = this domain: o->done) or
 * starts it at the home. */
static int obj_op(struct cor_dsm_op *o, cor_idp_t obj, uint8_t op, size_t offset, size_t count,
                  cor_type_t type, const void *data, size_t data_len, void *out, uint64_t *slot)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || (unsigned)type >= COR_TYPE_COUNT) return COR_EINVAL;
    if (data_len && !data) return COR_EINVAL;
    struct dsm_req r = {.op = op,
                        .type = (uint8_t)type,
                        .id = next_id(),
                        .obj = obj,
                        .offset = offset,
                        .count = count,
                        .data = data,
                        .data_len = data_len};
    if (dsm_req_size(&r) == 0) {
        size_t ts = cor_type_size(type);
        return ts && count > COR_DSM_MAX_BYTES / ts ? COR_ELIMIT : COR_EINVAL;
    }
    op_init(o, &r);
    o->out = out;
    o->out_len = dsm_obj_out_len(&r);
    o->slot = slot;
    if (op == DSM_OP_GET && o->out_len && !out) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home != D.rank) {
        int err = shm_op(home, &r, out, slot);
        if (err == DSM_SHM_NONE) return op_start(o, home, &r, o->out_len);
        o->result = err;
        o->done = true;
        return COR_OK;
    }

    struct res *x = res_get(obj, RES_OBJ);
    if (x && x->protocol == COR_DSM_CACHED) {
        /* its turn comes through the directory, which the service keeps moving */
        res_put(x);
        return op_start(o, home, &r, o->out_len);
    }
    atomic_fetch_add(&D.local_ops, 1);
    if (!x) {
        o->result = COR_ENOTFOUND;
    } else {
        uint64_t value = 0;
        o->result = obj_apply(x, &r, out, &value);
        res_put(x);
        if (!o->result && slot) *slot = value;
    }
    o->done = true;
    return COR_OK;
}

/* A blocking request of any kind to domain `home`. */
int call(int home, const struct dsm_req *r, struct cor_dsm_op *o, size_t rep_data)
{
    int err = op_start(o, home, r, rep_data);
    return err ? err : op_wait(o);
}

static int run_blocking(struct cor_dsm_op *o, int err)
{
    return err ? err : op_wait(o);
}

int run_nb(struct cor_dsm_op *o, int err, cor_dsm_req_t *req)
{
    if (err) {
        dsm_handle_take(DSM_H_REQ, o->handle, false);
        free(o);
        *req = NULL;
        return err;
    }
    *req = AS_HANDLE(cor_dsm_req_t, o->handle);
    return COR_OK;
}

/* An operation with its handle taken before it starts (none can fail once it runs). */
struct cor_dsm_op *nb_alloc(void)
{
    struct cor_dsm_op *o = malloc(sizeof *o);
    if (o && !(o->handle = dsm_handle_put(DSM_H_REQ, o))) {
        free(o);
        o = NULL;
    }
    return o;
}

static size_t tsz(cor_type_t type)
{
    return (unsigned)type < COR_TYPE_COUNT ? cor_type_size(type) : 0;
}

/* Bytes of `count` elements, or SIZE_MAX (dsm_req_size then refuses the request). */
static size_t nbytes(cor_type_t type, size_t count)
{
    size_t ts = tsz(type);
    if (!ts || count > COR_DSM_MAX_BYTES / ts) return SIZE_MAX;
    return count * ts;
}

COR_API int cor_dsm_get(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf)
{
    struct cor_dsm_op o;
    return run_blocking(&o, obj_op(&o, obj, DSM_OP_GET, offset, count, type, NULL, 0, buf, NULL));
}

COR_API int cor_dsm_getI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf,
                         cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, obj_op(o, obj, DSM_OP_GET, offset, count, type, NULL, 0, buf, NULL), req);
}

COR_API int cor_dsm_put(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                        const void *buf)
{
    struct cor_dsm_op o;
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    return run_blocking(&o, obj_op(&o, obj, DSM_OP_PUT, offset, count, type, buf, n, NULL, NULL));
}

COR_API int cor_dsm_putI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                         const void *buf, cor_dsm_req_t *req)
{
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    NB_ALLOC(o, req);
    return run_nb(o, obj_op(o, obj, DSM_OP_PUT, offset, count, type, buf, n, NULL, NULL), req);
}

/* One-element operations: value (and desired, for CAS) travel as the request's data. */
static int elem_op(struct cor_dsm_op *o, cor_idp_t obj, uint8_t op, size_t index, cor_type_t type,
                   const void *value, const void *desired, void *old)
{
    size_t ts = tsz(type);
    if (!ts || !value || (op == DSM_OP_CAS && !desired)) return COR_EINVAL;
    unsigned char in[32];
    memcpy(in, value, ts);
    if (op == DSM_OP_CAS) memcpy(in + ts, desired, ts);
    return obj_op(o, obj, op, index, 1, type, in, op == DSM_OP_CAS ? 2 * ts : ts, old, NULL);
}

COR_API int cor_dsm_swap(cor_idp_t obj, size_t index, cor_type_t type, const void *value, void *old)
{
    struct cor_dsm_op o;
    return run_blocking(&o, elem_op(&o, obj, DSM_OP_SWAP, index, type, value, NULL, old));
}

COR_API int cor_dsm_swapI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                          void *old, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, elem_op(o, obj, DSM_OP_SWAP, index, type, value, NULL, old), req);
}

COR_API int cor_dsm_fetch_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                              void *old)
{
    struct cor_dsm_op o;
    return run_blocking(&o, elem_op(&o, obj, DSM_OP_FADD, index, type, value, NULL, old));
}

COR_API int cor_dsm_fetch_addI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                               void *old, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, elem_op(o, obj, DSM_OP_FADD, index, type, value, NULL, old), req);
}

COR_API int cor_dsm_cas(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                        const void *desired, void *old)
{
    struct cor_dsm_op o;
    return run_blocking(&o, elem_op(&o, obj, DSM_OP_CAS, index, type, expected, desired, old));
}

COR_API int cor_dsm_casI(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                         const void *desired, void *old, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, elem_op(o, obj, DSM_OP_CAS, index, type, expected, desired, old), req);
}

COR_API int cor_dsm_append(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                           uint64_t *slot)
{
    struct cor_dsm_op o;
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    return run_blocking(&o, obj_op(&o, obj, DSM_OP_APPEND, 0, count, type, data, n, NULL, slot));
}

COR_API int cor_dsm_appendI(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                            uint64_t *slot, cor_dsm_req_t *req)
{
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    NB_ALLOC(o, req);
    return run_nb(o, obj_op(o, obj, DSM_OP_APPEND, 0, count, type, data, n, NULL, slot), req);
}

/* A test or wait has the handle to itself (claimed), so two tasks completing one handle at
 * once cannot both free it: the second gets COR_EINVAL. */
COR_API int cor_dsm_test(cor_dsm_req_t *req, int *done)
{
    if (!req || !done) return COR_EINVAL;
    uint64_t h = HANDLE(*req);
    struct cor_dsm_op *o = dsm_handle_claim(DSM_H_REQ, h);
    if (!o) return COR_EINVAL;
    int err = op_test(o, done);
    if (!*done) {
        dsm_handle_unclaim(DSM_H_REQ, h);
        return err;
    }
    dsm_handle_take(DSM_H_REQ, h, true);
    free(o);
    *req = NULL;
    return err;
}

COR_API int cor_dsm_wait(cor_dsm_req_t *req)
{
    if (!req) return COR_EINVAL;
    uint64_t h = HANDLE(*req);
    struct cor_dsm_op *o = dsm_handle_claim(DSM_H_REQ, h);
    if (!o) return COR_EINVAL;
    int err = op_wait(o);
    dsm_handle_take(DSM_H_REQ, h, true);
    free(o);
    *req = NULL;
    return err;
}

/* ---- Non-fetching adds and quiet -------------------------------------------------------
 *
 * A task's adds toward a home are gathered into a batch (an ADDV request of up to
 * DSM_ADDV_MAX entries), sent when it is full, at cor_dsm_quiet, or before any other
 * operation of the task toward that home, so they still arrive in the order issued and before
 * what the task does next there. A few batches (one per recent home) and the sends in flight
 * belong to the task (thread-local, freed when the thread ends).
 */

#define ADD_BATCHES 4 /* homes with a batch open at once, per task */
#define ADD_INFLIGHT 16

struct add_batch {
    int home; /* -1: none */
    uint32_t n;
    unsigned char e[DSM_ADDV_MAX * DSM_ADDV_ENTRY];
};

struct add_state {
    struct add_batch b[ADD_BATCHES];
    struct {
        cor_req_t req;
        unsigned char *buf;
    } fl[ADD_INFLIGHT];
    unsigned next;
};

static pthread_key_t add_key;
static pthread_once_t add_once = PTHREAD_ONCE_INIT;
static __thread struct add_state *tls_as;
static __thread int tls_add_err;
static __thread uint64_t tls_homes[COR_MAX_DOMAINS / 64];

static void add_note(int err)
{
    if (err && !tls_add_err) tls_add_err = err;
}

static void add_state_free(void *p)
{
    struct add_state *a = p;
    for (int i = 0; i < ADD_INFLIGHT; i++) {
        if (a->fl[i].req != COR_REQ_NULL) cor_wait(&a->fl[i].req, NULL);
        free(a->fl[i].buf);
    }
    free(a);
}

static void add_key_make(void)
{
    if (pthread_key_create(&add_key, add_state_free)) abort();
}

static struct add_state *add_state(void)
{
    if (tls_as) return tls_as;
    pthread_once(&add_once, add_key_make);
    struct add_state *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    for (int i = 0; i < ADD_BATCHES; i++)
        a->b[i].home = -1;
    pthread_setspecific(add_key, a);
    return tls_as = a;
}

/* Applies the adds of batch b that it can in the memory its home shares, in runs on one
 * object under one hold of the object's mutex (per add, the mutex's cache line bounced
 * between the domains of a GUPS run: half the rate of batches sent as messages). Stops at
 * the first add of an object without a segment: that one and the rest go as a message, in
 * order. Returns how many were applied. */
static uint32_t batch_apply_here(struct add_batch *b, const struct dsm_req *all)
{
    struct dsm_req run[DSM_ADDV_MAX];
    uint32_t i = 0;
    while (i < b->n) {
        size_t n = 0;
        while (i + n < b->n && dsm_addv_get(all, i + n, &run[n]) == COR_OK &&
               (n == 0 || run[n].obj == run[0].obj))
            n++;
        if (n == 0) break; /* malformed: the home refuses it */
        int err = dsm_shm_views_apply_all(run, n, NULL, NULL);
        if (err == DSM_SHM_NONE) break;
        add_note(err);
        atomic_fetch_add(&D.shm_ops, n);
        i += (uint32_t)n;
    }
    return i;
}

/* Sends batch b to its home (an error goes to the task's next quiet). */
static void batch_send(struct add_state *a, struct add_batch *b)
{
    if (b->home < 0 || b->n == 0) return;
    int home = b->home;
    struct dsm_req r = {.op = DSM_OP_ADDV,
                        .id = next_id(),
                        .count = b->n,
                        .data = b->e,
                        .data_len = (size_t)b->n * DSM_ADDV_ENTRY};
    uint32_t here = D.shm && !atomic_load(&D.dead[home]) ? batch_apply_here(b, &r) : 0;
    r.count -= here;
    r.data = b->e + (size_t)here * DSM_ADDV_ENTRY;
    r.data_len -= (size_t)here * DSM_ADDV_ENTRY;
    b->home = -1;
    b->n = 0;
    if (r.count == 0) return;
    cor_idp_t svc;
    int err = svc_of(home, &svc);
    size_t n = dsm_req_size(&r);
    unsigned char *buf = err ? NULL : malloc(n);
    if (!buf) {
        add_note(err ? err : COR_ENOMEM);
        return;
    }
    dsm_req_encode(buf, n, &r);
    unsigned k = a->next++ % ADD_INFLIGHT;
    if (a->fl[k].req != COR_REQ_NULL) add_note(cor_wait(&a->fl[k].req, NULL));
    free(a->fl[k].buf);
    a->fl[k].buf = buf;
    err = cor_sendI_typed(svc, D.ctx, (int)r.id, COR_BYTE, buf, n, &a->fl[k].req);
    if (err) {
        add_note(err);
        a->fl[k].req = COR_REQ_NULL;
        return;
    }
    tls_homes[home / 64] |= 1ull << (home % 64);
}

/* Before another operation of this task toward `home`: its adds go first. */
static void adds_flush_home(int home)
{
    if (!tls_as) return;
    for (int i = 0; i < ADD_BATCHES; i++)
        if (tls_as->b[i].home == home) batch_send(tls_as, &tls_as->b[i]);
}

/* Whether the task has adds toward `home` batched or sent since its last quiet there. */
static bool adds_pending(int home)
{
    for (int i = 0; tls_as && i < ADD_BATCHES; i++)
        if (tls_as->b[i].home == home && tls_as->b[i].n) return true;
    return (tls_homes[home / 64] >> (home % 64)) & 1;
}

/* Before an operation of this task that runs here on a segment of `home` (shm_op): its adds
 * toward that home are applied first: those batched, here if they can be, and those sent
 * (a QUIET there), as the messages' order would have it. */
static void adds_settle_home(int home)
{
    adds_flush_home(home);
    uint64_t bit = 1ull << (home % 64);
    if (!(tls_homes[home / 64] & bit)) return;
    struct dsm_req r = {.op = DSM_OP_QUIET, .id = next_id()};
    struct cor_dsm_op q;
    op_init(&q, &r);
    add_note(call(home, &r, &q, 0));
    tls_homes[home / 64] &= ~bit;
}

COR_API int cor_dsm_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value)
{
    if (!is_up()) return COR_ESTATE;
    size_t ts = tsz(type);
    if (!our_idp(obj) || !ts || !value) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    struct dsm_req r = {.op = DSM_OP_ADD,
                        .type = (uint8_t)type,
                        .obj = obj,
                        .offset = index,
                        .count = 1,
                        .data = value,
                        .data_len = ts};
    if (home == D.rank) {
        struct res *x = res_get(obj, RES_OBJ);
        if (!x || x->protocol != COR_DSM_CACHED) {
            atomic_fetch_add(&D.local_ops, 1);
            if (!x) {
                add_note(COR_ENOTFOUND);
                return COR_OK;
            }
            add_note(obj_apply(x, &r, NULL, NULL));
            res_put(x);
            return COR_OK;
        }
        /* A cached object's add waits for its directory turn (copies elsewhere are recalled
         * first): it goes through our own service in the task's batch, as a remote task's
         * does, and cor_dsm_quiet asks that service too. */
        res_put(x);
    } else if (atomic_load(&D.dead[home])) {
        return COR_EPEERDEAD;
    }
    struct add_state *a = add_state();
    if (!a) return COR_ENOMEM;
    struct add_batch *b = NULL;
    for (int i = 0; i < ADD_BATCHES && !b; i++)
        if (a->b[i].home == home) b = &a->b[i];
    if (!b) {
        b = &a->b[home % ADD_BATCHES];
        batch_send(a, b); /* another home's batch had that place */
        b->home = home;
    }
    dsm_addv_put(b->e + (size_t)b->n * DSM_ADDV_ENTRY, obj, index, type, value);
    b->n++;
    atomic_fetch_add(&D.remote_ops, 1);
    if (b->n == DSM_ADDV_MAX) batch_send(a, b);
    return COR_OK;
}

COR_API int cor_dsm_quiet(void)
{
    if (!is_up()) return COR_ESTATE;
    if (tls_as) {
        for (int i = 0; i < ADD_BATCHES; i++)
            batch_send(tls_as, &tls_as->b[i]);
        for (int i = 0; i < ADD_INFLIGHT; i++) {
            if (tls_as->fl[i].req != COR_REQ_NULL) add_note(cor_wait(&tls_as->fl[i].req, NULL));
            free(tls_as->fl[i].buf); /* nothing stays allocated after a quiet */
            tls_as->fl[i].buf = NULL;
        }
    }
    int nh = 0;
    for (int h = 0; h < D.size; h++)
        nh += (tls_homes[h / 64] >> (h % 64)) & 1;
    if (nh) {
        struct cor_dsm_op *ops = calloc((size_t)nh, sizeof *ops);
        int *started = calloc((size_t)nh, sizeof *started);
        if (!ops || !started) {
            free(ops);
            free(started);
            return COR_ENOMEM;
        }
        int k = 0;
        for (int h = 0; h < D.size; h++) {
            if (!((tls_homes[h / 64] >> (h % 64)) & 1)) continue;
            struct dsm_req r = {.op = DSM_OP_QUIET, .id = next_id()};
            op_init(&ops[k], &r);
            int err = op_start(&ops[k], h, &r, 0);
            if (err)
                add_note(err);
            else
                started[k] = 1;
            k++;
        }
        for (int i = 0; i < k; i++)
            if (started[i]) add_note(op_wait(&ops[i]));
        free(ops);
        free(started);
        memset(tls_homes, 0, sizeof tls_homes);
    }
    int err = tls_add_err;
    tls_add_err = COR_OK;
    return err;
}

/* ---- Objects: create, lookup, query, destroy ------------------------------------------ */

COR_API int cor_dsm_create(const char *name, cor_type_t type, size_t count,
                           cor_dsm_protocol_t protocol, cor_idp_t *obj)
{
    if (!is_up()) return COR_ESTATE;
    size_t ts = tsz(type);
    if (!name_ok(name) || !ts || count == 0 || !obj ||
        (protocol != COR_DSM_HOME_ONLY && protocol != COR_DSM_CACHED))
        return COR_EINVAL;
    if (count > COR_DSM_MAX_BYTES / ts) return COR_ELIMIT;
    struct res *x = res_new(RES_OBJ, name);
    if (!x) return COR_ENOMEM;
    x->protocol = protocol;
    x->obj.type = type;
    x->obj.tsize = ts;
    x->obj.count = count;
    if (protocol == COR_DSM_HOME_ONLY && D.shm && D.size > 1) x->shm = dsm_shm_create(type, count);
    if (!x->shm && !(x->obj.data = calloc(count, ts))) {
        res_free(x);
        return COR_ENOMEM;
    }
    if (protocol == COR_DSM_CACHED) {
        int e = cached_setup(x);
        if (e) {
            x->protocol = COR_DSM_HOME_ONLY; /* nothing of the cached state to free */
            res_free(x);
            return e;
        }
    }
    int err = res_add(x);
    if (err) {
        res_free(x);
        return err;
    }
    cor_idp_t idp = cor_idp_make(D.session, COR_KIND_OBJECT, (unsigned)D.rank, x->index);
    x->hc.idp = idp;
    /* unpublished, the segment still serves this domain; the others send requests */
    if (x->shm) dsm_shm_publish(x->shm, idp);
    struct dsm_req r = {.op = DSM_OP_DIR_PUT,
                        .type = (uint8_t)type,
                        .id = next_id(),
                        .flags = protocol,
                        .obj = idp,
                        .count = count,
                        .name = name,
                        .name_len = strlen(name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    err = call(dir_home(name), &r, &o, 0);
    if (err) {
        struct res *y = res_remove(x->index, RES_OBJ);
        if (y) res_put(y);
        return err;
    }
    *obj = idp;
    return COR_OK;
}

COR_API int cor_dsm_lookup(const char *name, cor_idp_t *obj)
{
    if (!is_up()) return COR_ESTATE;
    if (!name_ok(name) || !obj) return COR_EINVAL;
    struct dsm_req r = {
        .op = DSM_OP_DIR_GET, .id = next_id(), .name = name, .name_len = strlen(name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    o.idp_out = obj;
    return call(dir_home(name), &r, &o, DSM_INFO_HDR + COR_NAME_MAX);
}

void local_info(struct res *x, cor_dsm_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->type = x->obj.type;
    info->count = x->obj.count;
    info->bytes = x->obj.count * x->obj.tsize;
    if (x->shm) {
        dsm_shm_appended(x->shm, &info->appended);
    } else {
        lock_or_die(&x->mu);
        info->appended = x->obj.appended;
        unlock_or_die(&x->mu);
    }
    info->home = D.rank;
    info->protocol = x->protocol;
    snprintf(info->name, sizeof info->name, "%s", x->name);
}

COR_API int cor_dsm_query(cor_idp_t obj, cor_dsm_info_t *info)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || !info) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home == D.rank) {
        struct res *x = res_get(obj, RES_OBJ);
        if (!x) return COR_ENOTFOUND;
        local_info(x, info);
        res_put(x);
        return COR_OK;
    }
    struct dsm_req r = {.op = DSM_OP_QUERY, .id = next_id(), .obj = obj};
    struct cor_dsm_op o;
    op_init(&o, &r);
    o.info = info;
    return call(home, &r, &o, DSM_INFO_HDR + COR_NAME_MAX);
}

COR_API int cor_dsm_destroy(cor_idp_t obj)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(obj) || cor_idp_domain(obj) != (unsigned)D.rank) return COR_EINVAL;
    struct res *x = res_remove(cor_idp_index(obj), RES_OBJ);
    if (!x) return COR_ENOTFOUND;
    if (x->protocol == COR_DSM_CACHED) cached_destroy(x);
    if (x->shm) dsm_shm_retire(x->shm); /* other domains' operations end here too */
    struct dsm_req r = {.op = DSM_OP_DIR_DEL,
                        .id = next_id(),
                        .obj = obj,
                        .name = x->name,
                        .name_len = strlen(x->name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    int err = call(dir_home(x->name), &r, &o, 0);
    res_put(x); /* freed when the last operation in progress on it ends */
    return err;
}

/* ---- Locks ----------------------------------------------------------------------------- */

COR_API int cor_dsm_lock_open(const char *name, cor_idp_t *lock)
{
    if (!is_up()) return COR_ESTATE;
    if (!name_ok(name) || !lock) return COR_EINVAL;
    struct dsm_req r = {
        .op = DSM_OP_LOCK_OPEN, .id = next_id(), .name = name, .name_len = strlen(name)};
    struct cor_dsm_op o;
    op_init(&o, &r);
    o.idp_out = lock;
    return call(dir_home(name), &r, &o, 0);
}

/*
 * Each task keeps a record of the locks it holds or is acquiring, so that a release needs
 * no reply: misuse (a release without holding) is answered here, and the release travels as
 * a one-way message that the home applies before the task's next request to it (one FIFO
 * channel per task and home). A task holds at most DSM_LOCKS_HELD locks at once.
 */
#define DSM_LOCKS_HELD 64

static __thread struct {
    cor_idp_t lock;
    bool granted;
} tls_held[DSM_LOCKS_HELD];
static __thread int tls_nheld;

static int held_find(cor_idp_t lock)
{
    for (int i = 0; i < tls_nheld; i++)
        if (tls_held[i].lock == lock) return i;
    return -1;
}

static void held_drop(int i)
{
    tls_held[i] = tls_held[--tls_nheld];
}

/* An acquisition ended: the lock is held (also when its last holder died), or not at all. */
static void held_settle(struct cor_dsm_op *o)
{
    if (o->lock == COR_IDP_NULL) return;
    int i = held_find(o->lock);
    if (i >= 0) {
        if (o->result == COR_OK || o->result == COR_DSM_EOWNERDEAD)
            tls_held[i].granted = true;
        else
            held_drop(i);
    }
    o->lock = COR_IDP_NULL;
}

static int lock_op(struct cor_dsm_op *o, cor_idp_t lock, uint8_t op)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(lock)) return COR_EINVAL;
    if (held_find(lock) >= 0) return COR_ESTATE; /* held, or being acquired */
    if (tls_nheld == DSM_LOCKS_HELD) return COR_ELIMIT;
    struct dsm_req r = {.op = op, .id = next_id(), .obj = lock};
    op_init(o, &r);
    int home = (int)cor_idp_domain(lock);
    if (D.all_here) { /* a ticket in shared memory (dsm_shm.c) instead of a request */
        if (atomic_load(&D.dead[home])) return COR_EPEERDEAD;
        o->lk = dsm_shm_lock_view(lock);
        if (!o->lk) return COR_ENOMEM; /* never requests: the others' tickets would not see them */
        o->lock_home = home;
        if (op == DSM_OP_LOCK_TRY) {
            o->result = dsm_shm_lock_try(o->lk, D.rank, &o->ticket);
            if (o->result == COR_OK) lock_turn(o); /* holds at once; was its holder dead? */
            o->done = true;
        } else {
            o->ticket = dsm_shm_lock_ticket(o->lk, D.rank);
        }
    } else {
        int err = op_start(o, home, &r, 0);
        if (err) return err;
    }
    tls_held[tls_nheld].lock = lock;
    tls_held[tls_nheld++].granted = false;
    o->lock = lock;
    return COR_OK;
}

COR_API int cor_dsm_lock(cor_idp_t lock)
{
    struct cor_dsm_op o;
    return run_blocking(&o, lock_op(&o, lock, DSM_OP_LOCK_ACQ));
}

COR_API int cor_dsm_lockI(cor_idp_t lock, cor_dsm_req_t *req)
{
    NB_ALLOC(o, req);
    return run_nb(o, lock_op(o, lock, DSM_OP_LOCK_ACQ), req);
}

COR_API int cor_dsm_trylock(cor_idp_t lock)
{
    struct cor_dsm_op o;
    return run_blocking(&o, lock_op(&o, lock, DSM_OP_LOCK_TRY));
}

COR_API int cor_dsm_unlock(cor_idp_t lock)
{
    if (!is_up()) return COR_ESTATE;
    if (!our_idp(lock)) return COR_EINVAL;
    int i = held_find(lock);
    if (i < 0 || !tls_held[i].granted) return COR_ESTATE;
    int home = (int)cor_idp_domain(lock);
    if (D.all_here) {
        struct dsm_shm_lock *k = dsm_shm_lock_view(lock); /* mapped when it was acquired */
        if (!k) return COR_ENOMEM;
        held_drop(i);
        dsm_shm_lock_release(k);
        return atomic_load(&D.dead[home]) ? COR_EPEERDEAD : COR_OK;
    }
    held_drop(i);
    adds_flush_home(home);
    cor_idp_t svc;
    int err = svc_of(home, &svc);
    if (err) return err;
    struct dsm_req r = {.op = DSM_OP_LOCK_REL, .id = next_id(), .obj = lock};
    unsigned char buf[DSM_REQ_HDR];
    size_t n = dsm_req_encode(buf, sizeof buf, &r);
    cor_req_t sreq;
    err = cor_sendI_typed(svc, D.ctx, (int)r.id, COR_BYTE, buf, n, &sreq);
    if (!err) err = cor_wait(&sreq, NULL);
    if (!err) atomic_fetch_add(&D.remote_ops, 1);
    return err;
}

/* ---- Barriers --------------------------------------------------------------------------- */

/* Under D.lock. */
static struct cor_dsm_barrier *bar_find(uint64_t id, bool make)
{
    for (struct cor_dsm_barrier *b = D.bars; b; b = b->next)
        if (b->id == id) return b;
    if (!make) return NULL;
    struct cor_dsm_barrier *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->id = id;
    b->next = D.bars;
    D.bars = b;
    return b;
}

static void bar_free(struct cor_dsm_barrier *b)
{
    dsm_shm_bar_leave(b->sb);
    free(b->members);
    free(b);
}

/* The creation number of barrier name `id` here (1, 2, ...), or 0 without memory; D.lock. */
unsigned bar_gen_next(uint64_t id)
{
    struct bar_gen *g = D.bar_gens;
    while (g && g->id != id)
        g = g->next;
    if (!g && (g = calloc(1, sizeof *g))) {
        g->id = id;
        g->next = D.bar_gens;
        D.bar_gens = g;
    }
    return g ? ++g->gen : 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

COR_API int cor_dsm_barrier_create(const char *name, cor_idp_t ldom, int local_tasks,
                                   cor_dsm_barrier_t *bar)
{
    if (!is_up()) return COR_ESTATE;
    if (!name_ok(name) || local_tasks < 1 || !bar) return COR_EINVAL;
    int n = 0, *members = malloc((size_t)D.size * sizeof *members);
    if (!members) return COR_ENOMEM;
    int err = COR_OK;
    if (ldom == COR_IDP_NULL) {
        for (int r = 0; r < D.size; r++)
            members[n++] = r;
    } else {
        int size = 0;
        err = cor_ldomain_size(ldom, &size);
        bool *seen = calloc((size_t)D.size, sizeof *seen);
        if (!err && !seen) err = COR_ENOMEM;
        for (int i = 0; !err && i < size; i++) {
            cor_idp_t m;
            err = cor_ldomain_member(ldom, i, &m);
            if (err) break;
            unsigned d = cor_idp_domain(m);
            if (cor_idp_macro(m) != D.session || d >= (unsigned)D.size) continue;
            if (!seen[d]) members[n++] = (int)d;
            seen[d] = true;
        }
        free(seen);
        qsort(members, (size_t)n, sizeof *members, cmp_int);
    }
    int pos = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == D.rank) pos = i;
    if (!err && pos < 0) err = COR_EINVAL;
    if (err) {
        free(members);
        return err;
    }
    uint64_t id = dsm_hash(name, strlen(name));
    lock_or_die(&D.lock);
    struct cor_dsm_barrier *b = bar_find(id, true);
    if (!b)
        err = COR_ENOMEM;
    else if (b->created)
        err = COR_EEXIST;
    if (!err) {
        b->created = true;
        b->members = members;
        dsm_bar_setup(&b->st, n, pos, local_tasks);
        unsigned gen = bar_gen_next(id);
        if (gen && D.shm && n > 1) b->sb = dsm_shm_bar_join(D.session, id, gen);
        for (int i = 0; i < n; i++)
            if (atomic_load(&D.dead[members[i]])) b->err = COR_EPEERDEAD;
        b->handle = dsm_handle_put(DSM_H_BARRIER, b);
        if (!b->handle) {
            b->created = false;
            b->members = NULL;
            dsm_shm_bar_leave(b->sb);
            b->sb = NULL;
            err = COR_ENOMEM;
        }
        *bar = AS_HANDLE(cor_dsm_barrier_t, b->handle);
    }
    unlock_or_die(&D.lock);
    if (err) free(members);
    return err;
}

/* Sends barrier messages as the barrier mailbox's task, from whichever thread calls. */

/* Under D.lock: turns the messages' member positions into domain ranks, so they can be sent
 * after the lock is released without touching b (once an episode completed, a task of this
 * domain may destroy the barrier). */
void bar_resolve(const struct cor_dsm_barrier *b, struct dsm_bar_msg *m, int n)
{
    for (int i = 0; i < n; i++)
        m[i].to = b->members[m[i].to];
}

/* Wakes the barrier waiters; D.lock held. A driver polling the routes sees bar_events move. */
void bar_wake(void)
{
    atomic_fetch_add(&D.bar_events, 1);
    pthread_cond_broadcast(&D.bar_cv);
}

/* Whether episode `epoch` of b ended or failed; D.lock held. */
static bool bar_over(struct cor_dsm_barrier *b, uint64_t epoch)
{
    if (b->st.epoch != epoch || b->err) return true;
    for (int i = 0; i < b->st.n; i++)
        if (atomic_load(&D.dead[b->members[i]])) {
            b->err = COR_EPEERDEAD;
            bar_wake();
            return true;
        }
    return false;
}

/* Counts a message received on the barrier mailbox toward its barrier and sends what that
 * barrier's next rounds need. A malformed one is dropped and counted. */
static void bar_take(const void *buf, size_t len)
{
    struct dsm_req r;
    if (dsm_req_decode(buf, len, &r) || r.op != DSM_OP_BARRIER) {
        atomic_fetch_add(&D.dropped, 1);
        return;
    }
    struct dsm_bar_msg msgs[DSM_MAX_ROUNDS];
    int nmsg = 0;
    bool completed = false;
    lock_or_die(&D.lock);
    struct cor_dsm_barrier *b = bar_find(r.obj, true);
    if (b && dsm_bar_recv(&b->st, r.offset) == COR_OK && b->created && !b->err) {
        nmsg = dsm_bar_advance(&b->st, msgs, &completed);
        bar_resolve(b, msgs, nmsg);
        if (completed) bar_wake();
    } else if (!b || b->st.n > 0) {
        atomic_fetch_add(&D.dropped, 1);
    }
    unlock_or_die(&D.lock);
    if (nmsg) bar_send(r.obj, msgs, nmsg);
}

struct bar_meeting {
    struct cor_dsm_barrier *b;
    uint32_t gen;
    int err;
};

/* Whether a domain waiting in a barrier's file may stop: the episode ended, a member died,
 * or we stop. Reads no state under D.lock (b stays while a task is inside). */
static int bar_met(void *arg)
{
    struct bar_meeting *m = arg;
    if (dsm_shm_bar_passed(m->b->sb, m->gen)) return 1;
    if (atomic_load(&D.stopping)) m->err = COR_ESTATE;
    for (int i = 0; i < m->b->st.n && !m->err; i++)
        if (atomic_load(&D.dead[m->b->members[i]])) m->err = COR_EPEERDEAD;
    return m->err != COR_OK;
}

static void bar_nap(void *arg)
{
    struct bar_meeting *m = arg;
    dsm_shm_bar_sleep(m->b->sb, m->gen);
}

struct bar_watch {
    struct cor_dsm_barrier *b;
    uint64_t epoch, events;
    bool over; /* sticky: the hook and the driver's loop both ask */
};

/* Called at every turn of a polling wait, and with the mailbox task's lock held while it
 * blocks: so no lock here (a send completing as the mailbox's task takes that lock under the
 * core's send lock, which the cached protocol takes under a copy's mutex, and D.lock is held
 * while copies' mutexes are taken). Says only that something happened; bar_watch_over looks. */
static int bar_watch_stop(void *arg)
{
    struct bar_watch *w = arg;
    if (w->over || atomic_load(&D.stopping)) return 1;
    if (atomic_load(&D.bar_events) != w->events) return 1;
    for (int i = 0; i < w->b->st.n; i++)
        if (atomic_load(&D.dead[w->b->members[i]])) return 1;
    return 0;
}

/* Whether the driver's turn is over; outside the core's waits, so D.lock may be taken. */
static bool bar_watch_over(struct bar_watch *w)
{
    if (!bar_watch_stop(w)) return false;
    if (!w->over && !atomic_load(&D.stopping)) {
        w->events = atomic_load(&D.bar_events); /* before the look: no event is missed */
        lock_or_die(&D.lock);
        w->over = bar_over(w->b, w->epoch);
        unlock_or_die(&D.lock);
    }
    return w->over || atomic_load(&D.stopping);
}

/* Holding the driver's role: posts the mailbox's one receive if none is. */
static int bar_post(void)
{
    if (D.bar_rr != COR_REQ_NULL) return COR_OK;
    D.bar_msg = NULL;
    lock_or_die(&D.bar_out.mu);
    int err = cor_recvI_as(D.bar_box, COR_ANY_SOURCE, D.ctx, COR_ANY_TAG, &D.bar_msg, &D.bar_rr);
    unlock_or_die(&D.bar_out.mu);
    return err;
}

/* Holding the driver's role: the receive completed (rc): counts its message, frees it. */
static void bar_landed(int rc, const cor_status_t *st)
{
    if (rc == COR_OK && D.bar_msg) bar_take(D.bar_msg, st->count * cor_type_size(st->type));
    if (D.bar_msg) cor_releaseBuffer(D.bar_msg);
    D.bar_msg = NULL;
}

/* The driver's turn: receives barrier messages (for any barrier) with the mailbox's one
 * receive, polling the routes itself like any waiting task, until episode `epoch` of b is
 * over. The receive outlives the turn: the next driver waits on it. */
static void bar_drive(struct cor_dsm_barrier *b, uint64_t epoch)
{
    struct bar_watch w = {b, epoch, atomic_load(&D.bar_events) - 1, false};
    /* Polls only in the first slice: a long wait (a domain computing meanwhile) would else
     * poll again every WAIT_SLICE_US, and park the listeners for its poll each time. */
    long spin_us = D.poll_us;
    while (!bar_watch_over(&w)) {
        int err = bar_post();
        if (err) {
            lock_or_die(&D.lock);
            if (!b->err) b->err = err;
            unlock_or_die(&D.lock);
            return;
        }
        int done = 0;
        cor_status_t st;
        int rc =
            cor_wait_timeout(&D.bar_rr, spin_us, WAIT_SLICE_US, bar_watch_stop, &w, &done, &st);
        if (!done) {
            spin_us = 0;
            continue;
        }
        spin_us = D.poll_us; /* the episode's next rounds follow soon */
        bar_landed(rc, &st);
    }
}

/* Holding the driver's role: takes every barrier message that came, without waiting. */
static void bar_take_ready(void)
{
    for (;;) {
        if (bar_post()) return; /* the service thread tries again at its next look */
        int done = 0;
        if (cor_peek(D.bar_rr, &done) == COR_OK && !done) return;
        cor_status_t st;
        int rc = cor_test(&D.bar_rr, &done, &st);
        if (!done) return;
        bar_landed(rc, &st);
    }
}

/*
 * Takes the barrier messages that came while no task drives, in the calling thread: the
 * mailbox's arrival hook (whatever thread polled them in), the service thread, a task testing
 * a non-blocking barrier. So a barrier moves on while every task of the domain computes (a
 * domain that entered with cor_dsm_barrier_waitI still answers the others' rounds), as
 * requests are served. A driver that holds the role takes them itself and pumps after its turn.
 */
void bar_pump(void)
{
    while (atomic_load(&D.bar_pending)) {
        lock_or_die(&D.lock);
        bool mine = !D.bar_driving && !atomic_load(&D.stopping);
        if (mine) D.bar_driving = true;
        unlock_or_die(&D.lock);
        if (!mine) return;
        atomic_store(&D.bar_pending, 0);
        bar_take_ready();
        lock_or_die(&D.lock);
        D.bar_driving = false;
        bar_wake();
        unlock_or_die(&D.lock);
    }
}

/* The barrier mailbox's arrival hook. A thread holding one of our mutexes leaves the message
 * to the service thread (the pump takes D.lock). */
static void bar_on_arrival(void *arg, int flags)
{
    (void)arg;
    (void)flags;
    atomic_store(&D.bar_pending, 1);
    if (tls_locks)
        svc_wake();
    else
        bar_pump();
}

/* The arrival: counts the task in, and if it is the domain's last, sends the first rounds or
 * arrives in the file. An error means the task is not inside. */
static int bar_enter(cor_dsm_barrier_t bar, struct bar_entry *e)
{
    if (!is_up()) return COR_ESTATE;
    struct dsm_bar_msg msgs[DSM_MAX_ROUNDS];
    int nmsg = 0;
    bool completed = false;
    lock_or_die(&D.lock); /* the handle is looked up under it: no destroy in between */
    struct cor_dsm_barrier *b = dsm_handle_get(DSM_H_BARRIER, HANDLE(bar));
    if (!b) {
        unlock_or_die(&D.lock);
        return COR_EINVAL;
    }
    *e = (struct bar_entry){.b = b, .epoch = b->st.epoch};
    int err = b->err;
    if (!err && dsm_bar_arrive(&b->st)) {
        if (b->shm)
            e->meet = true;
        else
            nmsg = dsm_bar_advance(&b->st, msgs, &completed);
    }
    bar_resolve(b, msgs, nmsg);
    uint64_t id = b->id;
    if (!err) b->inside++;
    if (completed) bar_wake();
    unlock_or_die(&D.lock);
    if (err) return err;
    if (e->meet) /* b stays: destroy waits for b->inside */
        e->met = dsm_shm_bar_arrive(b->sb, b->st.n, &e->gen);
    else
        err = bar_send(id, msgs, nmsg);
    lock_or_die(&D.lock);
    if (e->meet && e->met) {
        dsm_bar_done(&b->st);
        bar_wake();
    }
    if (err && !b->err) {
        b->err = err;
        bar_wake();
    }
    unlock_or_die(&D.lock);
    return COR_OK;
}

/* Waits for the episode's end (block), or looks once and moves it on (*done says whether it
 * ended); the episode's result once it did. */
static int bar_step(struct bar_entry *e, bool block, int *done)
{
    struct cor_dsm_barrier *b = e->b;
    if (e->meet && !e->met) {
        struct bar_meeting m = {b, e->gen, COR_OK};
        if (block) {
            shm_wait(bar_met, bar_nap, &m, b->st.n);
        } else if (!bar_met(&m)) {
            cor_progress();
            *done = 0;
            return COR_OK;
        }
        e->met = true;
        lock_or_die(&D.lock);
        if (!m.err)
            dsm_bar_done(&b->st);
        else if (!b->err)
            b->err = m.err;
        bar_wake();
        unlock_or_die(&D.lock);
    }
    lock_or_die(&D.lock);
    /* One waiting task at a time receives the barrier messages of the domain (the driver);
     * the others sleep until their episode ends or the driver's turn does. */
    while (!bar_over(b, e->epoch)) {
        if (!block) {
            unlock_or_die(&D.lock);
            atomic_store(&D.bar_pending, 1); /* messages may wait that no hook saw */
            bar_pump();
            cor_progress();
            lock_or_die(&D.lock);
            if (bar_over(b, e->epoch)) break;
            unlock_or_die(&D.lock);
            *done = 0;
            return COR_OK;
        }
        if (!D.bar_driving && !b->shm) {
            D.bar_driving = true;
            unlock_or_die(&D.lock);
            bar_drive(b, e->epoch);
            lock_or_die(&D.lock);
            D.bar_driving = false;
            bar_wake(); /* another waiter may drive now */
            unlock_or_die(&D.lock);
            bar_pump(); /* what came as the turn ended */
            lock_or_die(&D.lock);
            continue;
        }
        wait_a_while(&D.bar_cv, &D.lock);
    }
    int err = b->st.epoch != e->epoch ? COR_OK : b->err;
    if (!err && b->sb && !b->shm_checked) { /* before any task of the domain arrives again */
        b->shm = dsm_shm_bar_all_here(b->sb, b->st.n);
        b->shm_checked = true;
    }
    b->inside--;
    unlock_or_die(&D.lock);
    if (done) *done = 1;
    return err;
}

COR_API int cor_dsm_barrier_wait(cor_dsm_barrier_t bar)
{
    struct bar_entry e;
    int err = bar_enter(bar, &e);
    return err ? err : bar_step(&e, true, NULL);
}

COR_API int cor_dsm_barrier_waitI(cor_dsm_barrier_t bar, cor_dsm_req_t *req)
{
    if (!req) return COR_EINVAL;
    *req = NULL;
    struct cor_dsm_op *o = nb_alloc();
    if (!o) return COR_ENOMEM;
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->bar_in = true;
    return run_nb(o, bar_enter(bar, &o->bar), req);
}

COR_API int cor_dsm_barrier_destroy(cor_dsm_barrier_t bar)
{
    if (!is_up()) return COR_ESTATE;
    lock_or_die(&D.lock);
    struct cor_dsm_barrier *b = dsm_handle_get(DSM_H_BARRIER, HANDLE(bar));
    if (!b || b->st.arrived > 0 || b->inside > 0) {
        unlock_or_die(&D.lock);
        return b ? COR_EBUSY : COR_EINVAL;
    }
    dsm_handle_take(DSM_H_BARRIER, b->handle, false);
    for (struct cor_dsm_barrier **p = &D.bars; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    unlock_or_die(&D.lock);
    bar_free(b);
    return COR_OK;
}

/* ---- Setup ------------------------------------------------------------------------------- */

COR_API int cor_dsm_init(void)
{
    if (!cor_initialized() || atomic_load(&D.up) || D.res) return COR_ESTATE;
    D.rank = cor_domain_rank();
    D.size = cor_domain_count();
    D.session = cor_session();
    /* A context no application message uses: kind "context", domain 4095, index 0xd5. */
    D.ctx = cor_idp_make(D.session, COR_KIND_CONTEXT, COR_MAX_DOMAINS - 1, 0xd5);
    D.dctx = cor_idp_make(D.session, COR_KIND_CONTEXT, COR_MAX_DOMAINS - 1, 0xd6);
    const char *budget = getenv("COR_DSM_CACHE_BYTES");
    atomic_store(&D.cache_budget,
                 budget && *budget ? (size_t)strtoull(budget, NULL, 10) : DEFAULT_CACHE_BYTES);
    const char *spin = getenv("COR_DSM_SPIN_US");
    D.poll_us = spin && *spin ? strtol(spin, NULL, 10) : -1; /* -1: the core's COR_SPIN_US */
    if (D.poll_us < -1) D.poll_us = 0;
    const char *shm = getenv("COR_DSM_SHM");
    D.shm = !(shm && !strcmp(shm, "0"));
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    D.ncpus = ncpus > 0 ? (int)ncpus : 1;
    D.svcs = calloc((size_t)D.size, sizeof *D.svcs);
    D.bar_boxes = calloc((size_t)D.size, sizeof *D.bar_boxes);
    D.dead = calloc((size_t)D.size, sizeof *D.dead);
    D.death_done = calloc((size_t)D.size, sizeof *D.death_done);
    D.res = calloc(RES_MAX + 1, sizeof *D.res);
    if (!D.svcs || !D.bar_boxes || !D.dead || !D.death_done || !D.res) return COR_ENOMEM;
    int err = cor_task_reserve(SVC_NAME, &D.svc);
    if (err) return err;
    err = cor_task_reserve(BAR_NAME, &D.bar_box);
    if (err) return err;
    err = cor_domain_on_death_add(on_death, NULL);
    if (err) return err;
    D.ready = 0;
    if (pthread_create(&D.thread, NULL, service, NULL)) return COR_EIO;
    lock_or_die(&D.ready_mu);
    while (D.ready == 0)
        pthread_cond_wait(&D.ready_cv, &D.ready_mu);
    err = D.ready < 0 ? D.ready : COR_OK;
    unlock_or_die(&D.ready_mu);
    if (err) {
        pthread_join(D.thread, NULL);
        return err;
    }
    /* served from now on where messages land (one that came before waits for the hook's
     * first call or the service thread's next look) */
    err = cor_task_on_arrival(D.svc, on_arrival, NULL);
    if (!err) err = cor_task_on_arrival(D.bar_box, bar_on_arrival, NULL);
    if (err) { /* another library took the last hook */
        cor_task_on_arrival(D.svc, NULL, NULL);
        atomic_store(&D.stopping, 1);
        svc_wake();
        pthread_join(D.thread, NULL);
        return err;
    }
    atomic_store(&D.up, 1);
    /* every domain counts itself in the session's file before the barrier: after it, the
     * count says whether all of them share this host */
    if (D.shm && D.size > 1) D.host = dsm_shm_bar_join(D.session, 0, 0);
    err = cor_barrier();
    D.all_here = !err && D.host && dsm_shm_bar_all_here(D.host, D.size);
    /* Every domain's service and barrier mailbox, looked up now that all are reserved: a
     * lookup asks the domain and waits for its answer, which the hooks that send to them
     * must never do (a listener that waited in a hook for an answer it was the one to bring
     * in hung two domains' barriers, each asking the other). A domain already dead is left. */
    for (int r = 0; !err && r < D.size; r++) {
        cor_idp_t x;
        svc_of(r, &x);
        mailbox_of(r, BAR_NAME, &x);
    }
    return err;
}

COR_API int cor_dsm_finalize(void)
{
    if (!atomic_load(&D.up) || atomic_load(&D.stopping)) return COR_ESTATE;
    int err = cor_barrier();
    atomic_store(&D.stopping, 1);
    svc_wake();
    pthread_join(D.thread, NULL);
    cor_task_on_arrival(D.bar_box, NULL, NULL);
    lock_or_die(&D.lock); /* a pump still under way (a hook called before) ends first */
    while (D.bar_driving) {
        unlock_or_die(&D.lock);
        sched_yield();
        lock_or_die(&D.lock);
    }
    D.bar_driving = true; /* for the rest of finalize: later hooks do nothing */
    unlock_or_die(&D.lock);
    if (D.bar_rr != COR_REQ_NULL) { /* no barrier waits now: take the receive back */
        cor_cancel(&D.bar_rr);
        cor_wait(&D.bar_rr, NULL);
        if (D.bar_msg) cor_releaseBuffer(D.bar_msg);
        D.bar_msg = NULL;
    }
    outbox_clear(&D.bar_out);
    for (unsigned i = 1; i <= RES_MAX; i++)
        if (D.res[i]) {
            res_put(D.res[i]);
            D.res[i] = NULL;
        }
    for (int k = 0; k < DIR_BUCKETS; k++)
        while (D.copies[k]) {
            struct copy *c = D.copies[k];
            D.copies[k] = c->next;
            copy_free(c);
        }
    D.direct = NULL;
    atomic_store(&D.ndirect, 0);
    atomic_store(&D.cached_bytes, 0);
    for (int k = 0; k < DIR_BUCKETS; k++)
        while (D.dir[k]) {
            struct dir_entry *e = D.dir[k];
            D.dir[k] = e->next;
            free(e);
        }
    while (D.qerrs)
        qerr_take(D.qerrs->who);
    while (D.addqs) { /* adds still queued in a directory are dropped (README) */
        struct addq *q = D.addqs;
        D.addqs = q->next;
        free(q);
    }
    while (D.bars) {
        struct cor_dsm_barrier *b = D.bars;
        D.bars = b->next;
        bar_free(b);
    }
    while (D.bar_gens) {
        struct bar_gen *g = D.bar_gens;
        D.bar_gens = g->next;
        free(g);
    }
    outbox_clear(&D.svc_out);
    dsm_shm_views_clear();
    dsm_shm_lock_views_clear();
    dsm_shm_bar_leave(D.host);
    D.host = NULL;
    D.all_here = false;
    sbuf_clear();
    dsm_handle_clear();
    D.bar_driving = false; /* (D.stopping keeps a late hook from pumping until the next init) */
    atomic_store(&D.bar_pending, 0);
    /* D.dead and D.svcs stay: the core may still report a death to on_death. */
    atomic_store(&D.up, 0);
    return err;
}

COR_API int cor_dsm_stats_get(cor_dsm_stats_t *stats)
{
    if (!stats) return COR_EINVAL;
    if (!atomic_load(&D.up)) return COR_ESTATE;
    stats->requests_served = atomic_load(&D.served);
    stats->requests_dropped = atomic_load(&D.dropped);
    stats->local_ops = atomic_load(&D.local_ops);
    stats->remote_ops = atomic_load(&D.remote_ops);
    stats->shm_ops = atomic_load(&D.shm_ops);
    stats->grants_direct = atomic_load(&D.grants_direct);
    stats->copy_bytes = atomic_load(&D.copy_bytes);
    uint64_t hits = 0, misses = 0;
    lock_or_die(&D.lock);
    for (int k = 0; k < DIR_BUCKETS; k++)
        for (struct copy *c = D.copies[k]; c; c = c->next) {
            lock_or_die(c->mu);
            hits += c->hits + ((atomic_load(&c->fast) & ~FAST_OPEN) >> 24);
            misses += c->misses;
            unlock_or_die(c->mu);
        }
    for (unsigned i = 1; i <= RES_MAX; i++) {
        struct res *x = D.res[i];
        if (!x || x->kind != RES_OBJ || x->protocol != COR_DSM_CACHED) continue;
        lock_or_die(&x->mu);
        hits += x->hc.hits;
        misses += x->hc.misses;
        unlock_or_die(&x->mu);
    }
    unlock_or_die(&D.lock);
    stats->section_hits = hits;
    stats->section_misses = misses;
    stats->invalidations = atomic_load(&D.invalidations);
    stats->recalls = atomic_load(&D.recalls);
    stats->evictions = atomic_load(&D.evictions);
    stats->cached_bytes = atomic_load(&D.cached_bytes);
    return COR_OK;
}
