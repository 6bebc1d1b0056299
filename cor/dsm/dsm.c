/*
 * libcordsm's runtime, on libcor's public API only. This file: setup, the resources homed
 * here, and the client side of remote operations, non-fetching adds and objects.
 * dsm_sync.c: locks and barriers; dsm_cached.c: the cached protocol (copies and sections);
 * dsm_service.c: the service. Their shared state and types: dsm_runtime.h.
 *
 * Each domain runs a service: a reserved task ("cor.dsm") whose mailbox receives every DSM
 * request sent to this domain, in a context of its own. Its messages are served where they
 * land: the task's arrival hook (on_arrival) drains the mailbox in whatever thread polled the
 * message in (a task waiting in the core, a listener), one thread at a time (the turn,
 * dsm__rt.turn_mu); a thread of the service only takes what a thread holding one of our mutexes
 * left, and deaths. Served here: operations on objects homed here, the directory entries of
 * the names that hash here and the locks that live here. Barrier messages go to a second
 * reserved task ("cor.dsm.barrier"), received by a task waiting in the barrier.
 *
 * Who owns what:
 * - dsm__rt.lock guards the resource table (objects and locks homed here, by index), the barrier
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

#include "dsm_knobs.h"
#include "dsm_runtime.h"

struct dsm_runtime dsm__rt = {
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
__thread int dsm__tls_locks;

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

void dsm__res_free(struct dsm__res *x)
{
    if (x->shm) {
        dsm_shm_retire(x->shm);
        dsm_shm_close(x->shm);
    } else if (x->kind == DSM__RES_OBJ) {
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

void dsm__res_put(struct dsm__res *x)
{
    if (atomic_fetch_sub(&x->refs, 1) == 1) dsm__res_free(x);
}

struct dsm__res *dsm__res_get(cor_idp_t idp, enum dsm__res_kind kind)
{
    if (!dsm__our_idp(idp) || cor_idp_domain(idp) != (unsigned)dsm__rt.rank) return NULL;
    dsm__lock_or_die(&dsm__rt.lock);
    struct dsm__res *x = dsm__rt.res ? dsm__rt.res[cor_idp_index(idp)] : NULL;
    if (x && x->kind == kind)
        atomic_fetch_add(&x->refs, 1);
    else
        x = NULL;
    dsm__unlock_or_die(&dsm__rt.lock);
    return x;
}

/* Gives x an index (reused last: a stale idp meets ENOTFOUND for as long as possible). */
int dsm__res_add(struct dsm__res *x)
{
    dsm__lock_or_die(&dsm__rt.lock);
    for (unsigned k = 0; k < DSM__RES_MAX; k++) {
        unsigned i = (dsm__rt.next_index + k) % DSM__RES_MAX + 1;
        if (!dsm__rt.res[i]) {
            dsm__rt.res[i] = x;
            x->index = i;
            dsm__rt.next_index = i % DSM__RES_MAX;
            dsm__unlock_or_die(&dsm__rt.lock);
            return COR_OK;
        }
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    return COR_ELIMIT;
}

/* Takes resource `index` of `kind` out of the table; returns it (with the table's
 * reference) or NULL. */
static struct dsm__res *res_remove(unsigned index, enum dsm__res_kind kind)
{
    if (index == 0 || index > DSM__RES_MAX) return NULL;
    dsm__lock_or_die(&dsm__rt.lock);
    struct dsm__res *x = dsm__rt.res[index];
    if (x && x->kind == kind)
        dsm__rt.res[index] = NULL;
    else
        x = NULL;
    dsm__unlock_or_die(&dsm__rt.lock);
    return x;
}

struct dsm__res *dsm__res_new(enum dsm__res_kind kind, const char *name)
{
    struct dsm__res *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->kind = kind;
    atomic_init(&x->refs, 1);
    snprintf(x->name, sizeof x->name, "%s", name);
    pthread_mutex_init(&x->mu, NULL);
    return x;
}

/* Runs a request on a home-only object homed here, in the calling thread. */
int dsm__obj_apply(struct dsm__res *x, const struct dsm_req *r, void *out, uint64_t *value)
{
    if (x->shm) return dsm_shm_apply(x->shm, r, out, value);
    dsm__lock_or_die(&x->mu);
    int err = dsm_obj_apply(&x->obj, r, out, value);
    dsm__unlock_or_die(&x->mu);
    return err;
}

/* ---- Services of other domains -------------------------------------------------------- */

/* The idp of a mailbox (a reserved task: DSM__SVC_NAME or DSM__BAR_NAME) of domain `rank`. */
int dsm__mailbox_of(int rank, const char *name, cor_idp_t *out)
{
    if (rank < 0 || rank >= dsm__rt.size) return COR_EINVAL;
    if (atomic_load(&dsm__rt.dead[rank])) return COR_EPEERDEAD;
    bool bar = !strcmp(name, DSM__BAR_NAME);
    _Atomic cor_idp_t *cache = bar ? dsm__rt.bar_boxes : dsm__rt.svcs;
    cor_idp_t s = atomic_load(&cache[rank]);
    if (s == COR_IDP_NULL) {
        int err = COR_OK;
        if (rank == dsm__rt.rank)
            s = bar ? dsm__rt.bar_box : dsm__rt.svc;
        else
            err = cor_task_lookup(rank, name, 0, &s);
        if (err) return err;
        atomic_store(&cache[rank], s);
    }
    *out = s;
    return COR_OK;
}

int dsm__svc_of(int rank, cor_idp_t *svc)
{
    return dsm__mailbox_of(rank, DSM__SVC_NAME, svc);
}

static void on_death(int rank, int err, void *arg)
{
    (void)err;
    (void)arg;
    /* Called from a core thread: no locks, just marks (the service does the rest). */
    if (!dsm__rt.dead || rank < 0 || rank >= dsm__rt.size) return;
    atomic_store(&dsm__rt.dead[rank], true);
    atomic_store(&dsm__rt.deaths_pending, 1);
    dsm__svc_wake();
}

/* ---- Client operations ---------------------------------------------------------------- */

struct dsm__copy *dsm__region_of(cor_dsm_region_t rgn)
{
    return dsm_handle_get(DSM_H_REGION, DSM__HANDLE(rgn));
}

static __thread uint32_t tls_id;

uint32_t dsm__next_id(void)
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

void dsm__op_init(struct cor_dsm_op *o, const struct dsm_req *r)
{
    memset(o, 0, offsetof(struct cor_dsm_op, small));
    o->op = r->op;
    o->id = r->id;
}

/* Sends the request to domain `home`'s service, the reply (rep_data bytes of data at most)
 * to be received into o->rbuf. */
static bool adds_pending(int home);
static void adds_settle_home(int home);

int dsm__op_start(struct cor_dsm_op *o, int home, const struct dsm_req *r, size_t rep_data)
{
    dsm__adds_flush_home(home);
    cor_idp_t svc;
    int err = dsm__svc_of(home, &svc);
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
    err = cor_recvI_into(svc, dsm__rt.ctx, (int)r->id, COR_BYTE, o->rbuf, o->rcap, &o->rreq);
    if (err) goto fail;
    err = cor_sendI_typed(svc, dsm__rt.ctx, (int)r->id, COR_BYTE, o->sbuf, n, &o->sreq);
    if (err) {
        cor_cancel(&o->rreq);
        cor_wait(&o->rreq, NULL);
        goto fail;
    }
    dsm__count_requests(home, 1);
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
    if (o->op == DSM_OP_LOCK_ACQ || o->op == DSM_OP_LOCK_TRY) {
        /* a grant (also one that says its last holder died) carries its number */
        if (rep.status != COR_OK && rep.status != COR_DSM_EOWNERDEAD) return rep.status;
        if (rep.data_len || rep.value >> 1 > DSM_ID_MAX) return COR_EPROTO;
        o->grant = rep.value;
        return rep.status;
    }
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
        if (dsm_info_decode(rep.data, rep.data_len, &info) || !dsm__our_idp(rep.value) ||
            cor_idp_domain(rep.value) != (unsigned)info.home)
            return COR_EPROTO;
        if (o->info) *o->info = info;
        if (o->idp_out) *o->idp_out = rep.value;
        return COR_OK;
    }
    case DSM_OP_LOCK_OPEN:
        if (rep.data_len || !dsm__our_idp(rep.value)) return COR_EPROTO;
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

/* A wait on shared memory (a barrier's file, a lock's ticket): until met(arg), polls the
 * routes (this domain's DSM requests are served as in any wait) and yields between looks for
 * SHM_WAIT_US (or COR_DSM_SPIN_US), so that the domains being waited for get a CPU when
 * domains outnumber cores (polling alone: 2 ms per barrier of 4 domains on 2 cores,
 * yielding: 7 us); then nap(arg), a sleep in the kernel of a few milliseconds at most. */
void dsm__shm_wait(int (*met)(void *), void (*nap)(void *), void *arg, int domains)
{
    /* With a core for each domain waited with, first a few looks alone: a peer on another core
     * ends the wait within a microsecond, and a poll of the routes between looks adds its own
     * (2-domain barrier 0.12-0.41 us -> 0.13-0.31); with fewer cores they only keep the CPU
     * from the domains still to come (4-domain barrier on 2 cores: 5.7 -> 18 us). */
    for (int i = 0; domains <= dsm__rt.ncpus && i < DSM__SHM_SPIN_LOOKS; i++) {
        if (met(arg)) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long spin_us = dsm__rt.poll_us < 0 ? DSM__SHM_WAIT_US : dsm__rt.poll_us;
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
    return rank >= 0 && rank < dsm__rt.size && atomic_load(&dsm__rt.dead[rank]);
}

/* Whether an acquisition in shared memory is over (o->result then says how). */
int dsm__lock_turn(void *arg)
{
    struct cor_dsm_op *o = arg;
    int status;
    if (o->done) return 1; /* asked again: the holder's news was taken already */
    if (atomic_load(&dsm__rt.dead[o->lock_home]))
        o->result = COR_EPEERDEAD; /* as a request to a dead home would */
    else if (dsm_shm_lock_turn(o->lk, o->ticket, dsm__rt.rank, domain_dead, NULL, &status))
        o->result = status;
    else if (atomic_load(&dsm__rt.stopping))
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

static int op_wait(struct cor_dsm_op *o)
{
    if (!o->done && o->bar_in) {
        o->result = dsm__bar_step(&o->bar, true, NULL);
        o->done = true;
    }
    if (!o->done && o->lk) dsm__shm_wait(dsm__lock_turn, lock_nap, o, dsm__rt.size);
    if (!o->done && o->section) {
        o->result = dsm__section_begin(o->section, o->smode, true, &o->claimed);
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
    dsm__held_settle(o);
    op_release(o);
    return o->result;
}

static int op_test(struct cor_dsm_op *o, int *done)
{
    *done = 0;
    if (!o->done && o->bar_in) {
        int d = 0;
        int err = dsm__bar_step(&o->bar, false, &d);
        if (!d) return COR_OK;
        o->result = err;
        o->done = true;
    }
    if (!o->done && o->lk && !dsm__lock_turn(o)) {
        cor_progress();
        return COR_OK;
    }
    if (!o->done && o->section) {
        int err = dsm__section_begin(o->section, o->smode, false, &o->claimed);
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
    dsm__held_settle(o);
    op_release(o);
    *done = 1;
    return o->result;
}

/* Runs an operation on an object of another home of this host on the home's segment, in
 * the calling thread: its result, or DSM_SHM_NONE if the object has no segment here (a cached
 * object, one of another host, or COR_DSM_SHM=0). */
static int shm_op(int home, const struct dsm_req *r, void *out, uint64_t *slot)
{
    if (!dsm__rt.shm || !dsm__rt.local[home]) return DSM_SHM_NONE;
    if (atomic_load(&dsm__rt.dead[home])) return COR_EPEERDEAD;
    if (adds_pending(home)) {
        /* only for an object with a segment: a request would follow the adds anyway */
        if (!dsm_shm_views_has(r->obj)) return DSM_SHM_NONE;
        adds_settle_home(home);
    }
    uint64_t value = 0;
    int err = dsm_shm_views_apply(r, out, &value);
    if (err == DSM_SHM_NONE) return err;
    atomic_fetch_add(&dsm__rt.shm_ops, 1);
    if (!err && slot) *slot = value;
    return err;
}

/* Fills o for an operation on an object and runs it here (home = this domain: o->done) or
 * starts it at the home. */
static int obj_op(struct cor_dsm_op *o, cor_idp_t obj, uint8_t op, size_t offset, size_t count,
                  cor_type_t type, const void *data, size_t data_len, void *out, uint64_t *slot)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__our_idp(obj) || (unsigned)type >= COR_TYPE_COUNT) return COR_EINVAL;
    if (data_len && !data) return COR_EINVAL;
    struct dsm_req r = {.op = op,
                        .type = (uint8_t)type,
                        .id = dsm__next_id(),
                        .obj = obj,
                        .offset = offset,
                        .count = count,
                        .data = data,
                        .data_len = data_len};
    if (dsm_req_size(&r) == 0) {
        size_t ts = cor_type_size(type);
        return ts && count > COR_DSM_MAX_BYTES / ts ? COR_ELIMIT : COR_EINVAL;
    }
    dsm__op_init(o, &r);
    o->out = out;
    o->out_len = dsm_obj_out_len(&r);
    o->slot = slot;
    if (op == DSM_OP_GET && o->out_len && !out) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home != dsm__rt.rank) {
        int err = shm_op(home, &r, out, slot);
        if (err == DSM_SHM_NONE) return dsm__op_start(o, home, &r, o->out_len);
        o->result = err;
        o->done = true;
        return COR_OK;
    }

    struct dsm__res *x = dsm__res_get(obj, DSM__RES_OBJ);
    if (x && x->protocol == COR_DSM_CACHED) {
        /* its turn comes through the directory, which the service keeps moving */
        dsm__res_put(x);
        return dsm__op_start(o, home, &r, o->out_len);
    }
    atomic_fetch_add(&dsm__rt.local_ops, 1);
    if (!x) {
        o->result = COR_ENOTFOUND;
    } else {
        uint64_t value = 0;
        o->result = dsm__obj_apply(x, &r, out, &value);
        dsm__res_put(x);
        if (!o->result && slot) *slot = value;
    }
    o->done = true;
    return COR_OK;
}

/* A blocking request of any kind to domain `home`. */
int dsm__call(int home, const struct dsm_req *r, struct cor_dsm_op *o, size_t rep_data)
{
    int err = dsm__op_start(o, home, r, rep_data);
    return err ? err : op_wait(o);
}

int dsm__run_blocking(struct cor_dsm_op *o, int err)
{
    return err ? err : op_wait(o);
}

int dsm__run_nb(struct cor_dsm_op *o, int err, cor_dsm_req_t *req)
{
    if (err) {
        dsm_handle_take(DSM_H_REQ, o->handle, false);
        free(o);
        *req = NULL;
        return err;
    }
    *req = DSM__AS_HANDLE(cor_dsm_req_t, o->handle);
    return COR_OK;
}

/* An operation with its handle taken before it starts (none can fail once it runs). */
struct cor_dsm_op *dsm__nb_alloc(void)
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
    return dsm__run_blocking(&o,
                             obj_op(&o, obj, DSM_OP_GET, offset, count, type, NULL, 0, buf, NULL));
}

COR_API int cor_dsm_getI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type, void *buf,
                         cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, obj_op(o, obj, DSM_OP_GET, offset, count, type, NULL, 0, buf, NULL), req);
}

COR_API int cor_dsm_put(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                        const void *buf)
{
    struct cor_dsm_op o;
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    return dsm__run_blocking(&o,
                             obj_op(&o, obj, DSM_OP_PUT, offset, count, type, buf, n, NULL, NULL));
}

COR_API int cor_dsm_putI(cor_idp_t obj, size_t offset, size_t count, cor_type_t type,
                         const void *buf, cor_dsm_req_t *req)
{
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, obj_op(o, obj, DSM_OP_PUT, offset, count, type, buf, n, NULL, NULL), req);
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
    return dsm__run_blocking(&o, elem_op(&o, obj, DSM_OP_SWAP, index, type, value, NULL, old));
}

COR_API int cor_dsm_swapI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                          void *old, cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, elem_op(o, obj, DSM_OP_SWAP, index, type, value, NULL, old), req);
}

COR_API int cor_dsm_fetch_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                              void *old)
{
    struct cor_dsm_op o;
    return dsm__run_blocking(&o, elem_op(&o, obj, DSM_OP_FADD, index, type, value, NULL, old));
}

COR_API int cor_dsm_fetch_addI(cor_idp_t obj, size_t index, cor_type_t type, const void *value,
                               void *old, cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, elem_op(o, obj, DSM_OP_FADD, index, type, value, NULL, old), req);
}

COR_API int cor_dsm_cas(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                        const void *desired, void *old)
{
    struct cor_dsm_op o;
    return dsm__run_blocking(&o, elem_op(&o, obj, DSM_OP_CAS, index, type, expected, desired, old));
}

COR_API int cor_dsm_casI(cor_idp_t obj, size_t index, cor_type_t type, const void *expected,
                         const void *desired, void *old, cor_dsm_req_t *req)
{
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, elem_op(o, obj, DSM_OP_CAS, index, type, expected, desired, old), req);
}

COR_API int cor_dsm_append(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                           uint64_t *slot)
{
    struct cor_dsm_op o;
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    return dsm__run_blocking(&o,
                             obj_op(&o, obj, DSM_OP_APPEND, 0, count, type, data, n, NULL, slot));
}

COR_API int cor_dsm_appendI(cor_idp_t obj, cor_type_t type, const void *data, size_t count,
                            uint64_t *slot, cor_dsm_req_t *req)
{
    size_t n = nbytes(type, count);
    if (n == SIZE_MAX) return tsz(type) ? COR_ELIMIT : COR_EINVAL;
    DSM__NB_ALLOC(o, req);
    return dsm__run_nb(o, obj_op(o, obj, DSM_OP_APPEND, 0, count, type, data, n, NULL, slot), req);
}

/*
 * A loop of tests on a barrier while other tasks of the domain are inside the episode too. The
 * wait's tasks other than the one that moves the episode (the driver, or the task that meets
 * the other domains in the barrier's file) sleep on the barrier's condvar from the start and
 * are woken by its end; a loop of tests that spun (cor_polled's yields, then a nap once the
 * CPUs looked crowded) cost 11-22 us of CPU per task and episode against the wait's 6-11, and
 * with 3 domains x 4 tasks on 2 cores the episodes took 2.5-5.5x the wait's
 * (docs/measurements/dsm.md, "2026-11-29"). So the second fruitless test in a row (misses
 * further apart than TEST_GAP_NS are no loop: a task that computes between its tests never
 * sleeps here) sleeps until the episode moves or TEST_NAP_NS pass, as the wait's tasks do,
 * while another task of the domain inside the episode is awake to move it (dsm__bar_nap). The
 * one left awake while others sleep becomes the driver for up to TEST_DRIVE_NS when the barrier
 * goes over messages, waiting for the rounds in the core as the wait's driver does: polling
 * them in by cor_progress between tests, it took them 70-140 us after they were sent against
 * 10-20 us driving, and the route's listener woke for them besides (3 domains x 4 tasks, gm
 * messages: 1.1-1.5x the wait's episode against 0.45-0.55x driving, same run). The turn lasts
 * as long as the wait's driver spins before it sleeps (COR_SPIN_US's default): turns of
 * TEST_NAP_NS ended mid-episode whenever an episode outlasted them, and the role went round
 * the domain's tasks through their naps (gm messages, one build, alternating: 0.68-3.68x, 6
 * runs of 11 within 2x, against 0.65-1.46x, 8 of 8, with 2 ms). A domain's only task inside
 * never sleeps nor drives here.
 */
#define TEST_GAP_NS 20000
#define TEST_NAP_NS 200000
#define TEST_DRIVE_NS 2000000
static __thread uint64_t test_miss_last; /* the thread's last fruitless test on a barrier */

/* A fruitless test of a barrier: whether it follows another one closely (a loop). */
static bool test_looping(void)
{
    uint64_t now = dsm__now_ns(), last = test_miss_last;
    test_miss_last = now;
    return last && now - last <= TEST_GAP_NS;
}

/* A test or wait has the handle to itself (claimed), so two tasks completing one handle at
 * once cannot both free it: the second gets COR_EINVAL. */
COR_API int cor_dsm_test(cor_dsm_req_t *req, int *done)
{
    if (!req || !done) return COR_EINVAL;
    uint64_t h = DSM__HANDLE(*req);
    struct cor_dsm_op *o = dsm_handle_claim(DSM_H_REQ, h);
    if (!o) return COR_EINVAL;
    int err = op_test(o, done);
    bool napped = false;
    if (!*done && o->bar_in && !o->done && test_looping() &&
        dsm__bar_nap(&o->bar, TEST_NAP_NS, TEST_DRIVE_NS)) {
        err = op_test(o, done);
        napped = true;
        test_miss_last = dsm__now_ns(); /* the nap was part of the loop */
    }
    if (*done) test_miss_last = 0;
    if (!napped || *done) cor_polled(*done); /* a loop of tests lets the threads it waits for run */
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
    uint64_t h = DSM__HANDLE(*req);
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
        atomic_fetch_add(&dsm__rt.shm_ops, n);
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
                        .id = dsm__next_id(),
                        .count = b->n,
                        .data = b->e,
                        .data_len = (size_t)b->n * DSM_ADDV_ENTRY};
    uint32_t here = dsm__rt.shm && dsm__rt.local[home] && !atomic_load(&dsm__rt.dead[home])
                        ? batch_apply_here(b, &r)
                        : 0;
    r.count -= here;
    r.data = b->e + (size_t)here * DSM_ADDV_ENTRY;
    r.data_len -= (size_t)here * DSM_ADDV_ENTRY;
    b->home = -1;
    b->n = 0;
    if (r.count == 0) return;
    cor_idp_t svc;
    int err = dsm__svc_of(home, &svc);
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
    err = cor_sendI_typed(svc, dsm__rt.ctx, (int)r.id, COR_BYTE, buf, n, &a->fl[k].req);
    if (err) {
        add_note(err);
        a->fl[k].req = COR_REQ_NULL;
        return;
    }
    /* counted here, not when added: the adds applied in shared memory above are shm_ops */
    dsm__count_requests(home, r.count);
    tls_homes[home / 64] |= 1ull << (home % 64);
}

/* Before another operation of this task toward `home`: its adds go first. */
void dsm__adds_flush_home(int home)
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
    dsm__adds_flush_home(home);
    uint64_t bit = 1ull << (home % 64);
    if (!(tls_homes[home / 64] & bit)) return;
    struct dsm_req r = {.op = DSM_OP_QUIET, .id = dsm__next_id()};
    struct cor_dsm_op q;
    dsm__op_init(&q, &r);
    add_note(dsm__call(home, &r, &q, 0));
    tls_homes[home / 64] &= ~bit;
}

COR_API int cor_dsm_add(cor_idp_t obj, size_t index, cor_type_t type, const void *value)
{
    if (!dsm__is_up()) return COR_ESTATE;
    size_t ts = tsz(type);
    if (!dsm__our_idp(obj) || !ts || !value) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    struct dsm_req r = {.op = DSM_OP_ADD,
                        .type = (uint8_t)type,
                        .obj = obj,
                        .offset = index,
                        .count = 1,
                        .data = value,
                        .data_len = ts};
    if (home == dsm__rt.rank) {
        struct dsm__res *x = dsm__res_get(obj, DSM__RES_OBJ);
        if (!x || x->protocol != COR_DSM_CACHED) {
            atomic_fetch_add(&dsm__rt.local_ops, 1);
            if (!x) {
                add_note(COR_ENOTFOUND);
                return COR_OK;
            }
            add_note(dsm__obj_apply(x, &r, NULL, NULL));
            dsm__res_put(x);
            return COR_OK;
        }
        /* A cached object's add waits for its directory turn (copies elsewhere are recalled
         * first): it goes through our own service in the task's batch, as a remote task's
         * does, and cor_dsm_quiet asks that service too. */
        dsm__res_put(x);
    } else if (atomic_load(&dsm__rt.dead[home])) {
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
    if (b->n == DSM_ADDV_MAX) batch_send(a, b);
    return COR_OK;
}

COR_API int cor_dsm_quiet(void)
{
    if (!dsm__is_up()) return COR_ESTATE;
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
    for (int h = 0; h < dsm__rt.size; h++)
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
        for (int h = 0; h < dsm__rt.size; h++) {
            if (!((tls_homes[h / 64] >> (h % 64)) & 1)) continue;
            struct dsm_req r = {.op = DSM_OP_QUIET, .id = dsm__next_id()};
            dsm__op_init(&ops[k], &r);
            int err = dsm__op_start(&ops[k], h, &r, 0);
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
    if (obj) *obj = COR_IDP_NULL; /* what a failure leaves (dsm.h) */
    if (!dsm__is_up()) return COR_ESTATE;
    size_t ts = tsz(type);
    if (!dsm__name_ok(name) || !ts || count == 0 || !obj ||
        (protocol != COR_DSM_HOME_ONLY && protocol != COR_DSM_CACHED))
        return COR_EINVAL;
    if (count > COR_DSM_MAX_BYTES / ts) return COR_ELIMIT;
    struct dsm__res *x = dsm__res_new(DSM__RES_OBJ, name);
    if (!x) return COR_ENOMEM;
    x->protocol = protocol;
    x->obj.type = type;
    x->obj.tsize = ts;
    x->obj.count = count;
    if (protocol == COR_DSM_HOME_ONLY && dsm__rt.shm && dsm__rt.any_local)
        x->shm = dsm_shm_create(type, count);
    if (!x->shm && !(x->obj.data = calloc(count, ts))) {
        dsm__res_free(x);
        return COR_ENOMEM;
    }
    if (protocol == COR_DSM_CACHED) {
        int e = dsm__cached_setup(x);
        if (e) {
            x->protocol = COR_DSM_HOME_ONLY; /* nothing of the cached state to free */
            dsm__res_free(x);
            return e;
        }
    }
    int err = dsm__res_add(x);
    if (err) {
        dsm__res_free(x);
        return err;
    }
    cor_idp_t idp =
        cor_idp_make(dsm__rt.session, COR_KIND_OBJECT, (unsigned)dsm__rt.rank, x->index);
    x->hc.idp = idp;
    /* unpublished, the segment still serves this domain; the others send requests */
    if (x->shm) dsm_shm_publish(x->shm, idp);
    struct dsm_req r = {.op = DSM_OP_DIR_PUT,
                        .type = (uint8_t)type,
                        .id = dsm__next_id(),
                        .flags = protocol,
                        .obj = idp,
                        .count = count,
                        .name = name,
                        .name_len = strlen(name)};
    struct cor_dsm_op o;
    dsm__op_init(&o, &r);
    err = dsm__call(dsm__dir_home(name), &r, &o, 0);
    if (err) {
        struct dsm__res *y = res_remove(x->index, DSM__RES_OBJ);
        if (y) dsm__res_put(y);
        return err;
    }
    *obj = idp;
    return COR_OK;
}

COR_API int cor_dsm_lookup(const char *name, cor_idp_t *obj)
{
    if (obj) *obj = COR_IDP_NULL; /* what a failure leaves (dsm.h) */
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__name_ok(name) || !obj) return COR_EINVAL;
    struct dsm_req r = {
        .op = DSM_OP_DIR_GET, .id = dsm__next_id(), .name = name, .name_len = strlen(name)};
    struct cor_dsm_op o;
    dsm__op_init(&o, &r);
    o.idp_out = obj;
    return dsm__call(dsm__dir_home(name), &r, &o, DSM_INFO_HDR + COR_NAME_MAX);
}

void dsm__local_info(struct dsm__res *x, cor_dsm_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->type = x->obj.type;
    info->count = x->obj.count;
    info->bytes = x->obj.count * x->obj.tsize;
    if (x->shm) {
        dsm_shm_appended(x->shm, &info->appended);
    } else {
        dsm__lock_or_die(&x->mu);
        info->appended = x->obj.appended;
        dsm__unlock_or_die(&x->mu);
    }
    info->home = dsm__rt.rank;
    info->protocol = x->protocol;
    snprintf(info->name, sizeof info->name, "%s", x->name);
}

COR_API int cor_dsm_query(cor_idp_t obj, cor_dsm_info_t *info)
{
    if (info) memset(info, 0, sizeof *info); /* what a failure leaves (dsm.h) */
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__our_idp(obj) || !info) return COR_EINVAL;
    int home = (int)cor_idp_domain(obj);
    if (home == dsm__rt.rank) {
        struct dsm__res *x = dsm__res_get(obj, DSM__RES_OBJ);
        if (!x) return COR_ENOTFOUND;
        dsm__local_info(x, info);
        dsm__res_put(x);
        return COR_OK;
    }
    struct dsm_req r = {.op = DSM_OP_QUERY, .id = dsm__next_id(), .obj = obj};
    struct cor_dsm_op o;
    dsm__op_init(&o, &r);
    o.info = info;
    return dsm__call(home, &r, &o, DSM_INFO_HDR + COR_NAME_MAX);
}

COR_API int cor_dsm_destroy(cor_idp_t obj)
{
    if (!dsm__is_up()) return COR_ESTATE;
    if (!dsm__our_idp(obj) || cor_idp_domain(obj) != (unsigned)dsm__rt.rank) return COR_EINVAL;
    struct dsm__res *x = res_remove(cor_idp_index(obj), DSM__RES_OBJ);
    if (!x) return COR_ENOTFOUND;
    if (x->protocol == COR_DSM_CACHED) dsm__cached_destroy(x);
    if (x->shm) dsm_shm_retire(x->shm); /* other domains' operations end here too */
    struct dsm_req r = {.op = DSM_OP_DIR_DEL,
                        .id = dsm__next_id(),
                        .obj = obj,
                        .name = x->name,
                        .name_len = strlen(x->name)};
    struct cor_dsm_op o;
    dsm__op_init(&o, &r);
    int err = dsm__call(dsm__dir_home(x->name), &r, &o, 0);
    dsm__res_put(x); /* freed when the last operation in progress on it ends */
    return err;
}

/* ---- Setup ------------------------------------------------------------------------------- */

COR_API int cor_dsm_init(void)
{
    if (!cor_initialized() || atomic_load(&dsm__rt.up) || dsm__rt.res) return COR_ESTATE;
    dsm__rt.rank = cor_domain_rank();
    dsm__rt.size = cor_domain_count();
    dsm__rt.session = cor_session();
    /* A context no application message uses: kind "context", domain 4095, index 0xd5. */
    dsm__rt.ctx = cor_idp_make(dsm__rt.session, COR_KIND_CONTEXT, COR_MAX_DOMAINS - 1, 0xd5);
    dsm__rt.dctx = cor_idp_make(dsm__rt.session, COR_KIND_CONTEXT, COR_MAX_DOMAINS - 1, 0xd6);
    atomic_store(&dsm__rt.cache_budget, (size_t)dsm__knob(DSM__K_CACHE_BYTES));
    dsm__rt.poll_us = (long)dsm__knob(DSM__K_SPIN_US); /* -1: the core's COR_SPIN_US */
    dsm__rt.shm = dsm__knob(DSM__K_SHM) != 0;
    dsm__rt.lock_keep = dsm__knob(DSM__K_LOCK_KEEP) != 0;
    dsm__rt.forward = dsm__knob(DSM__K_FORWARD) != 0;
    long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    dsm__rt.ncpus = ncpus > 0 ? (int)ncpus : 1;
    dsm__rt.svcs = calloc((size_t)dsm__rt.size, sizeof *dsm__rt.svcs);
    dsm__rt.bar_boxes = calloc((size_t)dsm__rt.size, sizeof *dsm__rt.bar_boxes);
    dsm__rt.dead = calloc((size_t)dsm__rt.size, sizeof *dsm__rt.dead);
    dsm__rt.death_done = calloc((size_t)dsm__rt.size, sizeof *dsm__rt.death_done);
    free(dsm__rt.local); /* a second init after a finalize */
    dsm__rt.local = calloc((size_t)dsm__rt.size, 1);
    dsm__rt.any_local = false;
    for (int r = 0; dsm__rt.local && r < dsm__rt.size; r++) {
        dsm__rt.local[r] = cor_domain_local(r) != 0;
        if (r != dsm__rt.rank && dsm__rt.local[r]) dsm__rt.any_local = true;
    }
    dsm__rt.res = calloc(DSM__RES_MAX + 1, sizeof *dsm__rt.res);
    if (!dsm__rt.svcs || !dsm__rt.bar_boxes || !dsm__rt.dead || !dsm__rt.death_done ||
        !dsm__rt.res || !dsm__rt.local)
        return COR_ENOMEM;
    int err = cor_task_reserve(DSM__SVC_NAME, &dsm__rt.svc);
    if (err) return err;
    err = cor_task_reserve(DSM__BAR_NAME, &dsm__rt.bar_box);
    if (err) return err;
    err = cor_domain_on_death_add(on_death, NULL);
    if (err) return err;
    dsm__rt.ready = 0;
    if (pthread_create(&dsm__rt.thread, NULL, dsm__service, NULL)) return COR_EIO;
    dsm__lock_or_die(&dsm__rt.ready_mu);
    while (dsm__rt.ready == 0)
        pthread_cond_wait(&dsm__rt.ready_cv, &dsm__rt.ready_mu);
    err = dsm__rt.ready < 0 ? dsm__rt.ready : COR_OK;
    dsm__unlock_or_die(&dsm__rt.ready_mu);
    if (err) {
        pthread_join(dsm__rt.thread, NULL);
        return err;
    }
    /* served from now on where messages land (one that came before waits for the hook's
     * first call or the service thread's next look) */
    err = cor_task_on_arrival(dsm__rt.svc, dsm__on_arrival, NULL);
    if (!err) err = cor_task_on_arrival(dsm__rt.bar_box, dsm__bar_on_arrival, NULL);
    if (err) { /* another library took the last hook */
        cor_task_on_arrival(dsm__rt.svc, NULL, NULL);
        atomic_store(&dsm__rt.stopping, 1);
        dsm__svc_wake();
        pthread_join(dsm__rt.thread, NULL);
        return err;
    }
    atomic_store(&dsm__rt.up, 1);
    /* every domain counts itself in the session's file before the barrier: after it, the
     * count says whether all of them share this host */
    bool every_local = true;
    for (int r = 0; r < dsm__rt.size; r++)
        every_local = every_local && dsm__rt.local[r];
    if (dsm__rt.shm && dsm__rt.size > 1 && every_local)
        dsm__rt.host = dsm_shm_bar_join(dsm__rt.session, 0, 0);
    err = cor_barrier();
    dsm__rt.all_here = !err && dsm__rt.host && dsm_shm_bar_all_here(dsm__rt.host, dsm__rt.size);
    /* Every domain's service and barrier mailbox, looked up now that all are reserved: a
     * lookup asks the domain and waits for its answer, which the hooks that send to them
     * must never do (a listener that waited in a hook for an answer it was the one to bring
     * in hung two domains' barriers, each asking the other). A domain already dead is left. */
    for (int r = 0; !err && r < dsm__rt.size; r++) {
        cor_idp_t x;
        dsm__svc_of(r, &x);
        dsm__mailbox_of(r, DSM__BAR_NAME, &x);
    }
    return err;
}

COR_API int cor_dsm_finalize(void)
{
    if (!atomic_load(&dsm__rt.up) || atomic_load(&dsm__rt.stopping)) return COR_ESTATE;
    int err = cor_barrier();
    atomic_store(&dsm__rt.stopping, 1);
    dsm__svc_wake();
    pthread_join(dsm__rt.thread, NULL);
    cor_task_on_arrival(dsm__rt.bar_box, NULL, NULL);
    dsm__lock_or_die(&dsm__rt.lock); /* a pump still under way (a hook called before) ends first */
    while (dsm__rt.bar_driving) {
        dsm__unlock_or_die(&dsm__rt.lock);
        sched_yield();
        dsm__lock_or_die(&dsm__rt.lock);
    }
    dsm__rt.bar_driving = true; /* for the rest of finalize: later hooks do nothing */
    dsm__unlock_or_die(&dsm__rt.lock);
    if (dsm__rt.bar_rr != COR_REQ_NULL) { /* no barrier waits now: take the receive back */
        cor_cancel(&dsm__rt.bar_rr);
        cor_wait(&dsm__rt.bar_rr, NULL);
        if (dsm__rt.bar_msg) cor_releaseBuffer(dsm__rt.bar_msg);
        dsm__rt.bar_msg = NULL;
    }
    dsm__outbox_clear(&dsm__rt.bar_out);
    for (unsigned i = 1; i <= DSM__RES_MAX; i++)
        if (dsm__rt.res[i]) {
            dsm__res_put(dsm__rt.res[i]);
            dsm__rt.res[i] = NULL;
        }
    for (int k = 0; k < DSM__DIR_BUCKETS; k++)
        while (dsm__rt.copies[k]) {
            struct dsm__copy *c = dsm__rt.copies[k];
            dsm__rt.copies[k] = c->next;
            dsm__copy_free(c);
        }
    while (dsm__rt.retired) {
        struct dsm__copy *c = dsm__rt.retired;
        dsm__rt.retired = c->next;
        dsm__copy_free(c);
    }
    dsm__rt.direct = NULL;
    atomic_store(&dsm__rt.ndirect, 0);
    atomic_store(&dsm__rt.cached_bytes, 0);
    for (int k = 0; k < DSM__DIR_BUCKETS; k++)
        while (dsm__rt.dir[k]) {
            struct dsm__dir_entry *e = dsm__rt.dir[k];
            dsm__rt.dir[k] = e->next;
            free(e);
        }
    while (dsm__rt.qerrs)
        dsm__qerr_take(dsm__rt.qerrs->who);
    while (dsm__rt.addqs) { /* adds still queued in a directory are dropped (README) */
        struct dsm__addq *q = dsm__rt.addqs;
        dsm__rt.addqs = q->next;
        free(q);
    }
    while (dsm__rt.bars) {
        struct cor_dsm_barrier *b = dsm__rt.bars;
        dsm__rt.bars = b->next;
        dsm__bar_free(b);
    }
    dsm__locks_kept_clear();
    while (dsm__rt.bar_gens) {
        struct dsm__bar_gen *g = dsm__rt.bar_gens;
        dsm__rt.bar_gens = g->next;
        free(g);
    }
    dsm__outbox_clear(&dsm__rt.svc_out);
    dsm_shm_views_clear();
    dsm_shm_lock_views_clear();
    dsm_shm_bar_leave(dsm__rt.host);
    dsm__rt.host = NULL;
    dsm__rt.all_here = false;
    dsm__sbuf_clear();
    dsm_handle_clear();
    dsm__rt.bar_driving =
        false; /* (dsm__rt.stopping keeps a late hook from pumping until the next init) */
    atomic_store(&dsm__rt.bar_pending, 0);
    /* dsm__rt.dead and dsm__rt.svcs stay: the core may still report a death to on_death. */
    atomic_store(&dsm__rt.up, 0);
    return err;
}

COR_API int cor_dsm_stats_get(cor_dsm_stats_t *stats)
{
    if (!stats) return COR_EINVAL;
    if (!atomic_load(&dsm__rt.up)) return COR_ESTATE;
    stats->requests_served = atomic_load(&dsm__rt.served);
    stats->requests_dropped = atomic_load(&dsm__rt.dropped);
    stats->local_ops = atomic_load(&dsm__rt.local_ops);
    stats->remote_ops = atomic_load(&dsm__rt.remote_ops);
    stats->shm_ops = atomic_load(&dsm__rt.shm_ops);
    stats->grants_direct = atomic_load(&dsm__rt.grants_direct);
    stats->grants_task = atomic_load(&dsm__rt.grants_task);
    stats->writes_3hop = atomic_load(&dsm__rt.writes_3hop);
    stats->copy_bytes = atomic_load(&dsm__rt.copy_bytes);
    stats->lock_retakes = dsm__lock_retakes();
    uint64_t hits = 0, misses = 0;
    uint64_t copies = 0;
    dsm__lock_or_die(&dsm__rt.lock);
    for (int k = 0; k <= DSM__DIR_BUCKETS; k++) /* the buckets, then the retired copies */
        for (struct dsm__copy *c = k < DSM__DIR_BUCKETS ? dsm__rt.copies[k] : dsm__rt.retired; c;
             c = c->next) {
            copies++;
            dsm__lock_or_die(c->mu);
            hits += c->hits + ((atomic_load(&c->fast) & ~DSM__FAST_OPEN) >> 24);
            misses += c->misses;
            dsm__unlock_or_die(c->mu);
        }
    for (unsigned i = 1; i <= DSM__RES_MAX; i++) {
        struct dsm__res *x = dsm__rt.res[i];
        if (!x || x->kind != DSM__RES_OBJ || x->protocol != COR_DSM_CACHED) continue;
        dsm__lock_or_die(&x->mu);
        hits += x->hc.hits;
        misses += x->hc.misses;
        dsm__unlock_or_die(&x->mu);
    }
    dsm__unlock_or_die(&dsm__rt.lock);
    stats->section_hits = hits;
    stats->section_misses = misses;
    stats->copies = copies;
    stats->invalidations = atomic_load(&dsm__rt.invalidations);
    stats->recalls = atomic_load(&dsm__rt.recalls);
    stats->evictions = atomic_load(&dsm__rt.evictions);
    stats->cached_bytes = atomic_load(&dsm__rt.cached_bytes);
    return COR_OK;
}
