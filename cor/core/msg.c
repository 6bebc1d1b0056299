/* The message calls of the task API: argument checks, then the protocol (proto.c). */
#include "internal.h"

static int check_peer(cor_idp_t idp, bool wildcard_ok)
{
    if (idp == COR_ANY_SOURCE) return wildcard_ok ? COR_OK : COR_EINVAL;
    if (cor_idp_kind(idp) != COR_KIND_TASK || cor_idp_macro(idp) != g.macro ||
        cor_idp_domain(idp) >= (unsigned)g.size || cor_idp_index(idp) >= (unsigned)g.max_tasks)
        return COR_EINVAL;
    return COR_OK;
}

static int post_send(struct cor_task *t, cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type,
                     const void *data, size_t count, cor_req_t *req)
{
    if (!t) return COR_ESTATE;
    struct cor_req *r = cor__req_new(REQ_SEND, t);
    if (!r) return COR_ENOMEM;
    r->peer = dest;
    r->ctx = ctx;
    r->tag = tag;
    r->type = type;
    r->count = count;
    r->buf = (void *)data;
    r->cap = count * cor_type_size(type);
    int err = cor__send_start(t, r);
    if (err) {
        cor__req_free(r);
        return err;
    }
    *req = r->handle;
    cor__arrivals_run(); /* a local destination's hook */
    return COR_OK;
}

COR_API int cor_sendI(cor_idp_t dest, cor_idp_t ctx, int tag, const void *buf, size_t count,
                      cor_req_t *req)
{
    int err = cor__check_init();
    if (err) return err;
    struct cor_bufhdr *h = cor__buf_hdr(buf);
    if (!req || tag < 0 || !h || count > h->n || check_peer(dest, false)) return COR_EINVAL;
    return post_send(cor__task_self(), dest, ctx, tag, h->type, buf, count, req);
}

static int check_typed_send(cor_idp_t dest, int tag, cor_type_t type, const void *data,
                            size_t count, cor_req_t *req)
{
    int err = cor__check_init();
    if (err) return err;
    size_t es = cor_type_size(type);
    if (!req || tag < 0 || !es || (!data && count) || count > SIZE_MAX / es ||
        check_peer(dest, false))
        return COR_EINVAL;
    return COR_OK;
}

COR_API int cor_sendI_typed(cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type,
                            const void *data, size_t count, cor_req_t *req)
{
    int err = check_typed_send(dest, tag, type, data, count, req);
    return err ? err : post_send(cor__task_self(), dest, ctx, tag, type, data, count, req);
}

COR_API int cor_sendI_as(cor_idp_t as, cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type,
                         const void *data, size_t count, cor_req_t *req)
{
    int err = check_typed_send(dest, tag, type, data, count, req);
    if (err) return err;
    struct cor_task *t = cor__task_reserved(as);
    return t ? post_send(t, dest, ctx, tag, type, data, count, req) : COR_EINVAL;
}

static int post_recv(cor_idp_t src, cor_idp_t ctx, int tag, struct cor_req *r, cor_req_t *req)
{
    r->peer = src;
    r->ctx = ctx;
    r->tag = tag;
    int err = cor__recv_start(r->owner, r);
    if (err) {
        cor__req_free(r);
        return err;
    }
    *req = r->handle;
    return COR_OK;
}

static int recv_core_buffer(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag, void **ptr,
                            cor_req_t *req)
{
    struct cor_req *r = cor__req_new(REQ_RECV, t);
    if (!r) return COR_ENOMEM;
    *ptr = NULL;
    r->core_alloc = true;
    r->out_ptr = ptr;
    return post_recv(src, ctx, tag, r, req);
}

COR_API int cor_recvI(cor_idp_t src, cor_idp_t ctx, int tag, void **ptr, cor_req_t *req)
{
    int err = cor__check_init();
    if (err) return err;
    if (!req || !ptr || tag < COR_ANY_TAG || check_peer(src, true)) return COR_EINVAL;
    struct cor_task *t = cor__task_self();
    return t ? recv_core_buffer(t, src, ctx, tag, ptr, req) : COR_ESTATE;
}

COR_API int cor_recvI_as(cor_idp_t as, cor_idp_t src, cor_idp_t ctx, int tag, void **ptr,
                         cor_req_t *req)
{
    int err = cor__check_init();
    if (err) return err;
    if (!req || !ptr || tag < COR_ANY_TAG || check_peer(src, true)) return COR_EINVAL;
    struct cor_task *t = cor__task_reserved(as);
    return t ? recv_core_buffer(t, src, ctx, tag, ptr, req) : COR_EINVAL;
}

static int recv_user_buffer(struct cor_task *t, cor_idp_t src, cor_idp_t ctx, int tag,
                            cor_type_t type, void *buf, size_t count, cor_req_t *req)
{
    size_t es = cor_type_size(type);
    if (!req || !es || (!buf && count) || count > SIZE_MAX / es || tag < COR_ANY_TAG ||
        check_peer(src, true))
        return COR_EINVAL;
    if (!t) return COR_ESTATE;
    struct cor_req *r = cor__req_new(REQ_RECV, t);
    if (!r) return COR_ENOMEM;
    r->type = type;
    r->buf = buf;
    r->count = count;
    r->cap = count * es;
    return post_recv(src, ctx, tag, r, req);
}

COR_API int cor_recvI_into(cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type, void *buf,
                           size_t count, cor_req_t *req)
{
    int err = cor__check_init();
    if (err) return err;
    return recv_user_buffer(cor__task_self(), src, ctx, tag, type, buf, count, req);
}

COR_API int cor_recvI_into_as(cor_idp_t as, cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type,
                              void *buf, size_t count, cor_req_t *req)
{
    int err = cor__check_init();
    if (err) return err;
    struct cor_task *t = cor__task_reserved(as);
    return t ? recv_user_buffer(t, src, ctx, tag, type, buf, count, req) : COR_EINVAL;
}

COR_API int cor_send(cor_idp_t dest, cor_idp_t ctx, int tag, cor_type_t type, const void *data,
                     size_t count)
{
    cor_req_t r;
    int err = cor_sendI_typed(dest, ctx, tag, type, data, count, &r);
    return err ? err : cor_wait(&r, NULL);
}

COR_API int cor_recv(cor_idp_t src, cor_idp_t ctx, int tag, cor_type_t type, void *buf,
                     size_t count, cor_status_t *status)
{
    cor_req_t r;
    int err = cor_recvI_into(src, ctx, tag, type, buf, count, &r);
    return err ? err : cor_wait(&r, status);
}
