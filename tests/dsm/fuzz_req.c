/*
 * libFuzzer target for libcordsm's wire parsers: whatever the bytes, dsm_req_decode,
 * dsm_rep_decode and dsm_info_decode must refuse them or give fields that hold together
 * (lengths inside the buffer, data length what the op demands), and an accepted request must
 * be applied to an object without reading or writing outside it, and re-encode to the same
 * bytes. Built and run by dsm/run-fuzz.sh.
 */
#include <stdlib.h>
#include <string.h>

#include "dsm_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
