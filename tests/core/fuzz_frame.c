/*
 * libFuzzer target for the core's frame checks (cor/core/proto.h: cor__frame_hdr and
 * cor__frame_msg_ok, which cor__upcall_deliver and on_message apply to every frame a route
 * delivers). Built with idp.c (cor_type_size) by `make fuzz`, run by tests/fuzz/run.sh.
 *
 * Input: byte 0 chooses the eager limit (0, 1 KiB, 8 KiB or 64 KiB), the rest is the frame.
 * Checks beyond the sanitizers: a message header that passes describes exactly its bytes
 * (count x element size = len, computed without overflow), an eager frame carries them all
 * within the limit, an RTS tail ends at the message's end, and an RTS_GET (read rendezvous)
 * carries nothing and names a range of the sender's memory that does not wrap around.
 */
#include <assert.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t limits[] = {0, 1024, 8192, 65536};
    if (size < 1) return 0;
    size_t limit = limits[data[0] & 3];
    struct frame_hdr h;
    int rc = cor__frame_hdr(data + 1, size - 1, &h);
    if (rc == -1) {
        assert(size - 1 < FRAME_HDR_SIZE);
        return 0;
    }
    if (rc) return 0;
    assert(h.type >= F_EAGER && h.type < F_TYPE_END);
    if (!cor__frame_is_msg(h.type)) return 0;
    size_t plen = size - 1 - FRAME_HDR_SIZE;
    if (!cor__frame_msg_ok(&h, plen, limit)) return 0;
    size_t es = cor_type_size((cor_type_t)h.dtype);
    uint64_t bytes;
    assert(es > 0 && h.tag >= 0);
    assert(!__builtin_mul_overflow(h.count, (uint64_t)es, &bytes) && bytes == h.len);
    if (h.type == F_EAGER)
        assert(plen == h.len && plen <= limit);
    else if (h.type == F_RTS_GET)
        assert(plen == 0 && h.len > 0 && h.offset + h.len >= h.offset);
    else if (plen)
        assert(plen <= RTS_TAIL_MAX && plen < h.len && h.offset + plen == h.len);
    return 0;
}
