/*
 * The operations on an object's memory at its home. The caller holds the object's lock, so
 * each request is one indivisible step with respect to every other.
 */
#include <string.h>

#include "dsm_internal.h"

size_t dsm_obj_out_len(const struct dsm_req *r)
{
    size_t ts = cor_type_size((cor_type_t)r->type);
    switch (r->op) {
    case DSM_OP_GET:
        return (size_t)r->count * ts; /* bounded by decode (COR_DSM_MAX_BYTES) */
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_CAS:
        return ts;
    default:
        return 0;
    }
}

/* *dst += *src for one element of `type` (memcpy: the caller's values need no alignment).
 * Integers wrap around (done in unsigned arithmetic, so no overflow is undefined). */
static int add_elem(cor_type_t type, unsigned char *dst, const void *src)
{
#define ADD_AS(T, U)                                                                               \
    do {                                                                                           \
        T a, b;                                                                                    \
        memcpy(&a, dst, sizeof a);                                                                 \
        memcpy(&b, src, sizeof b);                                                                 \
        a = (T)((U)a + (U)b);                                                                      \
        memcpy(dst, &a, sizeof a);                                                                 \
    } while (0)
    switch (type) {
    case COR_SHORT:
        ADD_AS(short, unsigned short);
        return COR_OK;
    case COR_INT:
        ADD_AS(int, unsigned);
        return COR_OK;
    case COR_LONG:
        ADD_AS(long, unsigned long);
        return COR_OK;
    case COR_INT64:
        ADD_AS(int64_t, uint64_t);
        return COR_OK;
    case COR_UINT64:
        ADD_AS(uint64_t, uint64_t);
        return COR_OK;
    case COR_FLOAT:
        ADD_AS(float, float);
        return COR_OK;
    case COR_DOUBLE:
        ADD_AS(double, double);
        return COR_OK;
    default:
        return COR_EINVAL;
    }
#undef ADD_AS
}

int dsm_obj_apply(struct dsm_obj *o, const struct dsm_req *r, void *out, uint64_t *value)
{
    if (r->type != (uint8_t)o->type) return COR_ETYPE;
    size_t ts = o->tsize;
    const unsigned char *in = r->data;
    switch (r->op) {
    case DSM_OP_GET:
    case DSM_OP_PUT:
        if (r->offset > o->count || r->count > o->count - r->offset) return COR_DSM_ERANGE;
        if (r->count == 0) return COR_OK; /* no data at all: nothing to copy from or to */
        if (r->op == DSM_OP_GET)
            memcpy(out, o->data + r->offset * ts, r->count * ts);
        else
            memcpy(o->data + r->offset * ts, in, r->count * ts);
        return COR_OK;
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_ADD:
    case DSM_OP_CAS: {
        if (r->offset >= o->count) return COR_DSM_ERANGE;
        unsigned char *e = o->data + r->offset * ts;
        if (r->op == DSM_OP_FADD || r->op == DSM_OP_ADD) {
            unsigned char old[16];
            memcpy(old, e, ts);
            int err = add_elem(o->type, e, in);
            if (err) return err;
            if (out && r->op == DSM_OP_FADD) memcpy(out, old, ts); /* ADD: no output */
            return COR_OK;
        }
        if (out) memcpy(out, e, ts);
        if (r->op == DSM_OP_SWAP)
            memcpy(e, in, ts);
        else if (memcmp(e, in, ts) == 0)
            memcpy(e, in + ts, ts);
        return COR_OK;
    }
    case DSM_OP_APPEND:
        if (r->count == 0 || o->appended > o->count || r->count > o->count - o->appended)
            return COR_ELIMIT;
        memcpy(o->data + o->appended * ts, in, r->count * ts);
        if (value) *value = o->appended;
        o->appended += r->count;
        return COR_OK;
    default:
        return COR_EINVAL;
    }
}
