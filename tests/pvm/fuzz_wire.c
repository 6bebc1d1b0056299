/*
 * libFuzzer target for what libcorpvm reads from the wire: the input is taken as a routed
 * image (checked, then sealed) and as a control message's words and address (decoded).
 * Built and run by run-fuzz.sh.
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
    if (cpvm_image_check(img, size)) {
        if (!cpvm_image_seal(img, size, 1, 2, 3, 4, 5)) abort(); /* checked ones seal */
        (void)cpvm_image_src(img);
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
