/*
 * libFuzzer target for what libcorpvm reads from the wire: the input is taken as a routed
 * image (checked, then walked) and as a control message's words and address (decoded).
 * Built by `make fuzz` (tests/fuzz), run by tests/fuzz/run.sh.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, as the receive buffer would be */
    char *img = malloc(size ? size : 1);
    if (!img) return 0;
    memcpy(img, data, size);
    if (cpvm_image_check(img, size)) { /* a checked image walks to its end, adding up */
        size_t pos = CPVM_HDR_BYTES;
        long body = 0;
        struct cpvm_frag f;
        while (cpvm_image_next(img, size, &pos, &f)) {
            if (f.len < 0 || (!f.detached && f.off + (size_t)f.len > size)) abort();
            body += f.len;
        }
        if (pos != size || body != cpvm_image_word(img, H_LEN)) abort();
    }
    if (size >= CPVM_CTL_INTS * sizeof(int) + sizeof(int)) {
        int head[CPVM_CTL_INTS], alen;
        memcpy(head, data, sizeof head);
        memcpy(&alen, data + sizeof head, sizeof alen);
        size_t rest = size - sizeof head - sizeof alen;
        if (alen >= 0 && (size_t)alen > rest) alen = (int)rest;
        struct cpvm_ctl c;
        if (cpvm_ctl_decode(head, alen, (const char *)data + sizeof head + sizeof alen, 1, &c) &&
            strlen(c.addr) >= CPVM_ADDR_MAX)
            abort();
    }
    free(img);
    return 0;
}
