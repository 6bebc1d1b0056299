/*
 * Encoding and decoding of DSM requests and replies (format in dsm_internal.h). Decoding
 * treats the bytes as hostile: every length is checked against the buffer and against what
 * the op allows before anything points into it.
 */
#include <string.h>

#include "dsm_internal.h"

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t dsm_hash(const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Elements of `type` in `count`, as bytes, if the total stays within an object's limit. */
static size_t elems_bytes(uint8_t type, uint64_t count)
{
    size_t ts = cor_type_size((cor_type_t)type);
    if (!ts || type >= COR_TYPE_COUNT) return SIZE_MAX;
    if (count > COR_DSM_MAX_BYTES / ts) return SIZE_MAX;
    return (size_t)count * ts;
}

static bool op_has_name(uint8_t op)
{
    return op == DSM_OP_DIR_PUT || op == DSM_OP_DIR_GET || op == DSM_OP_DIR_DEL ||
           op == DSM_OP_LOCK_OPEN;
}

size_t dsm_req_data_len(uint8_t op, uint8_t type, uint64_t count)
{
    switch (op) {
    case DSM_OP_GET:
        return elems_bytes(type, count) == SIZE_MAX ? SIZE_MAX : 0;
    case DSM_OP_PUT:
        return elems_bytes(type, count);
    case DSM_OP_APPEND:
        return count == 0 ? SIZE_MAX : elems_bytes(type, count);
    case DSM_OP_SWAP:
    case DSM_OP_FADD:
    case DSM_OP_ADD:
        return count == 1 ? elems_bytes(type, 1) : SIZE_MAX;
    case DSM_OP_CAS:
        return count == 1 ? elems_bytes(type, 2) : SIZE_MAX;
    case DSM_OP_C_GRANT: /* cached protocol: a whole copy, or nothing (count 0) */
    case DSM_OP_C_ACK:
    case DSM_OP_C_FLUSH:
        return count == 0 ? 0 : elems_bytes(type, count);
    case DSM_OP_C_REQ:
    case DSM_OP_C_INV:
    case DSM_OP_C_GONE:
    case DSM_OP_C_FACK:
        return count == 0 ? 0 : SIZE_MAX;
    case DSM_OP_ADDV:
        return type == 0 && count >= 1 && count <= DSM_ADDV_MAX ? (size_t)count * DSM_ADDV_ENTRY
                                                                : SIZE_MAX;
    case DSM_OP_DIR_PUT: /* the object's type and count travel in the header */
        return elems_bytes(type, count) == SIZE_MAX ? SIZE_MAX : 0;
    case DSM_OP_BARRIER:
    case DSM_OP_QUIET:
    case DSM_OP_QUERY:
    case DSM_OP_DIR_GET:
    case DSM_OP_DIR_DEL:
    case DSM_OP_LOCK_OPEN:
    case DSM_OP_LOCK_ACQ:
    case DSM_OP_LOCK_TRY:
    case DSM_OP_LOCK_REL:
    case DSM_OP_LOCK_RECALL:
        return 0;
    default:
        return SIZE_MAX;
    }
}

/* The checks decode makes, on a request given as fields. */
static bool req_valid(const struct dsm_req *r)
{
    if (r->id > DSM_ID_MAX) return false;
    size_t want = dsm_req_data_len(r->op, r->type, r->count);
    if (want == SIZE_MAX || r->data_len != want) return false;
    if (op_has_name(r->op)) {
        if (r->name_len == 0 || r->name_len >= COR_NAME_MAX || !r->name) return false;
        if (memchr(r->name, '\0', r->name_len)) return false;
    } else if (r->name_len != 0) {
        return false;
    }
    if (r->op == DSM_OP_BARRIER && r->offset >= DSM_MAX_ROUNDS) return false;
    if (r->op == DSM_OP_DIR_PUT) {
        if (r->flags > COR_DSM_CACHED) return false;
    } else if (r->op == DSM_OP_C_REQ) {
        uint32_t mode = r->flags & DSM_CF_MODE;
        uint32_t how = r->flags & (DSM_CF_HAVE | DSM_CF_DIRECT | DSM_CF_TASK);
        uint32_t alone = how & ~(uint32_t)DSM_CF_TASK; /* an upgrade may go to the task */
        if ((r->flags & ~(DSM_CF_MODE | how)) ||
            (mode != DSM_MODE_READ && mode != DSM_MODE_WRITE) || (alone & (alone - 1)) ||
            (alone == DSM_CF_DIRECT && (how & DSM_CF_TASK)))
            return false; /* HAVE or DIRECT, each alone or HAVE with TASK */
        if ((how & DSM_CF_TASK) ? cor_idp_kind(r->offset) != COR_KIND_TASK : r->offset != 0)
            return false;
    } else if (r->op == DSM_OP_C_GRANT) {
        uint32_t mode = r->flags & DSM_CF_MODE;
        if ((r->flags & ~(DSM_CF_MODE | DSM_CF_ERR | DSM_CF_DIRECT)) || mode == 3) return false;
        if ((mode == DSM_MODE_NONE) != ((r->flags & DSM_CF_ERR) != 0)) return false;
        /* the header of data sent alone: a mode, no data */
        if ((r->flags & DSM_CF_DIRECT) && (r->count || (r->flags & DSM_CF_ERR))) return false;
        if ((r->flags & DSM_CF_ERR) && r->count) return false;
    } else if (r->op == DSM_OP_C_INV) {
        if (r->flags & ~(DSM_CF_WRITEBACK | DSM_CF_KEEP | DSM_CF_FWD | DSM_CF_TO)) return false;
        if ((r->flags & DSM_CF_KEEP) && !(r->flags & DSM_CF_WRITEBACK)) return false;
        /* to a reader, naming the writer; the writer's rank only then */
        if ((r->flags & DSM_CF_FWD) && (r->flags & DSM_CF_WRITEBACK)) return false;
        if (!(r->flags & DSM_CF_FWD) && (r->flags & DSM_CF_TO)) return false;
    } else if (r->flags != 0) {
        return false;
    }
    return true;
}

size_t dsm_req_size(const struct dsm_req *r)
{
    if (!req_valid(r)) return 0;
    return DSM_REQ_HDR + r->name_len + r->data_len;
}

size_t dsm_req_encode(void *buf, size_t cap, const struct dsm_req *r)
{
    size_t n = dsm_req_size(r);
    if (n == 0 || n > cap) return 0;
    unsigned char *p = buf;
    put32(p, DSM_REQ_MAGIC);
    p[4] = r->op;
    p[5] = r->type;
    put16(p + 6, (uint16_t)r->name_len);
    put32(p + 8, r->id);
    put32(p + 12, r->flags);
    put64(p + 16, r->obj);
    put64(p + 24, r->offset);
    put64(p + 32, r->count);
    if (r->name_len) memcpy(p + DSM_REQ_HDR, r->name, r->name_len);
    if (r->data_len) memcpy(p + DSM_REQ_HDR + r->name_len, r->data, r->data_len);
    return n;
}

int dsm_req_decode(const void *buf, size_t len, struct dsm_req *r)
{
    const unsigned char *p = buf;
    if (!buf || len < DSM_REQ_HDR || get32(p) != DSM_REQ_MAGIC) return COR_EPROTO;
    memset(r, 0, sizeof *r);
    r->op = p[4];
    r->type = p[5];
    r->name_len = get16(p + 6);
    r->id = get32(p + 8);
    r->flags = get32(p + 12);
    r->obj = get64(p + 16);
    r->offset = get64(p + 24);
    r->count = get64(p + 32);
    if (r->name_len > len - DSM_REQ_HDR) return COR_EPROTO;
    r->name = r->name_len ? (const char *)p + DSM_REQ_HDR : NULL;
    r->data_len = len - DSM_REQ_HDR - r->name_len;
    r->data = r->data_len ? p + DSM_REQ_HDR + r->name_len : NULL;
    return req_valid(r) ? COR_OK : COR_EPROTO;
}

void dsm_addv_put(unsigned char *e, uint64_t obj, uint64_t index, cor_type_t type,
                  const void *value)
{
    memset(e, 0, DSM_ADDV_ENTRY);
    put64(e, obj);
    put64(e + 8, index);
    e[16] = (unsigned char)type;
    memcpy(e + 24, value, cor_type_size(type));
}

int dsm_addv_get(const struct dsm_req *r, size_t i, struct dsm_req *add)
{
    if (r->op != DSM_OP_ADDV || i >= r->count) return COR_EPROTO;
    const unsigned char *e = (const unsigned char *)r->data + i * DSM_ADDV_ENTRY;
    size_t ts = cor_type_size((cor_type_t)e[16]);
    if (!ts || e[16] >= COR_TYPE_COUNT) return COR_EPROTO;
    for (int k = 17; k < 24; k++)
        if (e[k]) return COR_EPROTO;
    for (size_t k = 24 + ts; k < DSM_ADDV_ENTRY; k++)
        if (e[k]) return COR_EPROTO;
    memset(add, 0, sizeof *add);
    add->op = DSM_OP_ADD;
    add->type = e[16];
    add->id = r->id;
    add->obj = get64(e);
    add->offset = get64(e + 8);
    add->count = 1;
    add->data = e + 24;
    add->data_len = ts;
    return COR_OK;
}

size_t dsm_rep_encode(void *buf, size_t cap, const struct dsm_rep *r)
{
    size_t n = DSM_REP_HDR + r->data_len;
    if (r->id > DSM_ID_MAX || n > cap || n < r->data_len) return 0;
    unsigned char *p = buf;
    put32(p, DSM_REP_MAGIC);
    p[4] = r->op;
    p[5] = r->type;
    put16(p + 6, 0);
    put32(p + 8, (uint32_t)r->status);
    put32(p + 12, r->id);
    put64(p + 16, r->value);
    /* data NULL: the caller already wrote it after the header */
    if (r->data_len && r->data) memcpy(p + DSM_REP_HDR, r->data, r->data_len);
    return n;
}

int dsm_rep_decode(const void *buf, size_t len, struct dsm_rep *r)
{
    const unsigned char *p = buf;
    if (!buf || len < DSM_REP_HDR || get32(p) != DSM_REP_MAGIC || get16(p + 6) != 0)
        return COR_EPROTO;
    r->op = p[4];
    r->type = p[5];
    r->status = (int32_t)get32(p + 8);
    r->id = get32(p + 12);
    r->value = get64(p + 16);
    r->data_len = len - DSM_REP_HDR;
    r->data = r->data_len ? p + DSM_REP_HDR : NULL;
    if (r->op == 0 || r->op >= DSM_OP_END || r->id > DSM_ID_MAX || r->status > 0) return COR_EPROTO;
    if (r->status != COR_OK && r->data_len != 0) return COR_EPROTO;
    return COR_OK;
}

size_t dsm_info_encode(void *buf, size_t cap, const cor_dsm_info_t *info)
{
    size_t nl = strnlen(info->name, COR_NAME_MAX);
    size_t n = DSM_INFO_HDR + nl;
    if (nl >= COR_NAME_MAX || n > cap) return 0;
    unsigned char *p = buf;
    p[0] = (unsigned char)info->type;
    p[1] = (unsigned char)info->protocol;
    put16(p + 2, (uint16_t)nl);
    put32(p + 4, (uint32_t)info->home);
    put64(p + 8, info->count);
    put64(p + 16, info->appended);
    memcpy(p + DSM_INFO_HDR, info->name, nl);
    return n;
}

int dsm_info_decode(const void *buf, size_t len, cor_dsm_info_t *info)
{
    const unsigned char *p = buf;
    if (!buf || len < DSM_INFO_HDR) return COR_EPROTO;
    size_t nl = get16(p + 2);
    uint32_t home = get32(p + 4);
    uint64_t count = get64(p + 8), appended = get64(p + 16);
    if (nl >= COR_NAME_MAX || len != DSM_INFO_HDR + nl) return COR_EPROTO;
    if (memchr(p + DSM_INFO_HDR, '\0', nl)) return COR_EPROTO;
    size_t bytes = elems_bytes(p[0], count);
    if (bytes == SIZE_MAX || p[1] > COR_DSM_CACHED || home >= COR_MAX_DOMAINS || appended > count)
        return COR_EPROTO;
    memset(info, 0, sizeof *info);
    info->type = (cor_type_t)p[0];
    info->protocol = (cor_dsm_protocol_t)p[1];
    info->home = (int)home;
    info->count = (size_t)count;
    info->bytes = bytes;
    info->appended = appended;
    memcpy(info->name, p + DSM_INFO_HDR, nl);
    info->name[nl] = '\0';
    return COR_OK;
}

void dsm_fgrant_encode(void *buf, uint32_t seq, int n, const uint64_t *wait)
{
    unsigned char *p = buf;
    put32(p, seq);
    put32(p + 4, (uint32_t)n);
    for (size_t i = 0; i < ((size_t)n + 63) / 64; i++)
        put64(p + DSM_FGRANT_HDR + 8 * i, wait[i]);
}

int dsm_fgrant_decode(const void *buf, size_t len, int n, int self, int home, uint32_t *seq,
                      uint64_t *wait)
{
    const unsigned char *p = buf;
    if (n < 1 || len != dsm_fgrant_size(n) || get32(p + 4) != (uint32_t)n) return COR_EPROTO;
    size_t nw = ((size_t)n + 63) / 64;
    for (size_t i = 0; i < nw; i++)
        wait[i] = get64(p + DSM_FGRANT_HDR + 8 * i);
    if (n % 64 && (wait[nw - 1] >> (n % 64))) return COR_EPROTO; /* beyond the session */
    if (self < 0 || self >= n || home < 0 || home >= n) return COR_EPROTO;
    if (((wait[self / 64] >> (self % 64)) & 1) || ((wait[home / 64] >> (home % 64)) & 1))
        return COR_EPROTO; /* neither acknowledges to the writer: it would wait for good */
    *seq = get32(p);
    return COR_OK;
}
