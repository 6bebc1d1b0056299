/*
 * libFuzzer target for libcordsm's wire parsers: whatever the bytes, dsm_req_decode,
 * dsm_rep_decode and dsm_info_decode must refuse them or give fields that hold together
 * (lengths inside the buffer, data length what the op demands), and an accepted request must
 * be applied to an object without reading or writing outside it, and re-encode to the same
 * bytes. Cached-protocol messages are fed to a home directory of 8 domains (the sender taken
 * from the id), which must keep its invariants (one owner, or readers; a round waits only
 * for holders). The same bytes are also the first page of a same-host segment file (dsm_shm.c,
 * idp FUZZ_IDP, 64 longs of room after it): dsm_shm_check must refuse it or give an object
 * that fits the file. Built by `make fuzz`, run by tests/fuzz/run.sh.
 */
#include <stdlib.h>
#include <string.h>

#include "dsm_internal.h"

static bool f_inv(void *ctx, int dom, uint32_t seq, bool wb, bool keep)
{
    (void)ctx, (void)seq, (void)wb, (void)keep;
    return dom == 0; /* the home's own copy goes at once */
}
static void f_grant(void *ctx, const struct dsm_dreq *r, bool data, int status)
{
    (void)ctx, (void)r, (void)data, (void)status;
}
static void f_finv(void *ctx, int dom, uint32_t seq, int to)
{
    (void)ctx, (void)seq;
    if (dom == 0 || dom == to) abort(); /* the home acknowledges to itself; a writer reads on */
}
static const struct dsm_dir_cb f_cb = {f_inv, f_grant, f_finv};

static void feed_dir(const struct dsm_req *r)
{
    static struct dsm_dir d;
    static bool ready;
    if (!ready && dsm_dir_init(&d, 8, 0, &f_cb, NULL) == COR_OK) ready = d.forward = true;
    if (!ready) return;
    int from = (int)(r->id % 8);
    if (r->op == DSM_OP_C_REQ) {
        struct dsm_dreq q = {.who = from,
                             .mode = (uint8_t)(r->flags & DSM_CF_MODE),
                             .have_copy = (r->flags & DSM_CF_HAVE) != 0,
                             .kind = r->offset & 1 ? DSM_DREQ_OP : DSM_DREQ_SECTION,
                             .task = r->offset & 2}; /* a waiting task's: three hops allowed */
        if (q.kind == DSM_DREQ_OP) q.who = 0;
        dsm_dir_request(&d, &q);
    } else if (r->op == DSM_OP_C_ACK) {
        dsm_dir_ack(&d, from, (uint32_t)r->offset);
    } else if (r->op == DSM_OP_C_FLUSH) {
        dsm_dir_release(&d, from);
    } else if (r->op == DSM_OP_C_INV && r->offset == 0xdead) {
        dsm_dir_peer_dead(&d, from);
    }
    int readers = 0;
    for (int i = 0; i < 8; i++)
        readers += dsm_dir_holds(&d, i) == DSM_MODE_READ;
    if (d.owner >= 0 && readers) abort();
    if (d.busy != (d.nwait > 0)) abort(); /* callbacks run inside: no round without waiters */
    if (d.len > 1u << 20) {               /* bound the fuzzer's memory: start over */
        dsm_dir_free(&d);
        ready = false;
    }
}

#define FUZZ_IDP 0x1122334455667788ull
#define SEG_PAGE 4096

static void feed_segment(const uint8_t *data, size_t size)
{
    static unsigned char file[SEG_PAGE + 64 * 8];
    memset(file, 0, sizeof file);
    memcpy(file, data, size < SEG_PAGE ? size : SEG_PAGE);
    struct dsm_obj o;
    /* a file cut anywhere: what it claims must fit what is there */
    size_t len = size > SEG_PAGE ? SEG_PAGE + (size - SEG_PAGE) % (64 * 8 + 1) : sizeof file;
    if (dsm_shm_check(file, len, FUZZ_IDP, &o) != COR_OK) return;
    if (o.data != file + SEG_PAGE || o.count * o.tsize > len - SEG_PAGE) abort();
    unsigned char *out = malloc(o.count * o.tsize);
    struct dsm_req get = {.op = DSM_OP_GET, .type = (uint8_t)o.type, .count = o.count};
    if (!out || dsm_obj_apply(&o, &get, out, NULL) != COR_OK) abort();
    free(out);
}

/* The grant of a write in three hops (12 domains, writer 1, home 0): refused, or readers
 * within the session, neither the writer nor the home, and the same bytes again. */
static void feed_fgrant(const uint8_t *data, size_t size)
{
    uint64_t want[1];
    uint32_t seq;
    if (dsm_fgrant_decode(data, size, 12, 1, 0, &seq, want) != COR_OK) return;
    if ((want[0] >> 12) || (want[0] & 3)) abort();
    unsigned char again[DSM_FGRANT_HDR + 8];
    if (size != sizeof again) abort();
    dsm_fgrant_encode(again, seq, 12, want);
    if (memcmp(again, data, size)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    feed_segment(data, size);
    feed_fgrant(data, size);
    struct dsm_req r;
    if (dsm_req_decode(data, size, &r) == COR_OK) {
        if (DSM_REQ_HDR + r.name_len + r.data_len != size) abort();
        if (r.data_len != dsm_req_data_len(r.op, r.type, r.count)) abort();
        if (r.name_len &&
            (r.name < (const char *)data || r.name + r.name_len > (const char *)data + size))
            abort();
        unsigned char *again = malloc(size);
        if (!again || dsm_req_encode(again, size, &r) != size || memcmp(again, data, size)) abort();
        free(again);
        if (r.op >= DSM_OP_C_REQ && r.op <= DSM_OP_C_FLUSH) feed_dir(&r);
        if (r.op == DSM_OP_ADDV) { /* every entry well formed or refused, applied in bounds */
            long mem[16] = {0};
            for (size_t i = 0; i < r.count; i++) {
                struct dsm_req a;
                if (dsm_addv_get(&r, i, &a) != COR_OK) break;
                if (a.data_len != cor_type_size((cor_type_t)a.type) || a.data_len > 8) abort();
                struct dsm_obj o = {.type = (cor_type_t)a.type,
                                    .tsize = a.data_len,
                                    .count = sizeof mem / a.data_len,
                                    .data = (void *)mem};
                dsm_obj_apply(&o, &a, NULL, NULL);
            }
        }
        /* apply to a small object of the request's type, as a home would */
        size_t ts = cor_type_size((cor_type_t)r.type);
        if (ts && r.op >= DSM_OP_GET && r.op <= DSM_OP_ADD) {
            struct dsm_obj o = {.type = (cor_type_t)r.type, .tsize = ts, .count = 64};
            o.data = calloc(o.count, ts);
            size_t olen = dsm_obj_out_len(&r);
            /* a GET larger than the object fails on range before any copy */
            void *out = olen <= o.count * ts ? malloc(olen ? olen : 1) : NULL;
            uint64_t slot;
            if (o.data && (out || olen > o.count * ts)) {
                int err = dsm_obj_apply(&o, &r, out, &slot);
                if (!out && err == COR_OK && r.op == DSM_OP_GET) abort();
            }
            free(out);
            free(o.data);
        }
    }
    struct dsm_rep p;
    if (dsm_rep_decode(data, size, &p) == COR_OK && DSM_REP_HDR + p.data_len != size) abort();
    cor_dsm_info_t info;
    if (dsm_info_decode(data, size, &info) == COR_OK &&
        (info.appended > info.count || strlen(info.name) >= COR_NAME_MAX))
        abort();
    return 0;
}
