/*
 * What libcorpvm reads from the wire, as pure functions (no libpvm3 calls), so unit tests
 * and the fuzzer reach them:
 * - a routed message's image: pvm_pkmesg's layout, a header of H_INTS native ints, then per
 *   fragment a native int length and its bytes;
 * - a control message's fields, as unpacked from PVM's path.
 */
#ifndef CPVM_WIRE_H
#define CPVM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { H_LEN, H_CTX, H_TAG, H_WID, H_ENC, H_CRC, H_SRC, H_DST, H_INTS };
#define CPVM_HDR_BYTES (H_INTS * (int)sizeof(int))
#define CPVM_ENC_INPLACE 0x20000000 /* what pvm_pkmesg writes for PvmDataInPlace */

/* True if img holds a header and fragments whose lengths add up to len and to the header's
 * body length. */
bool cpvm_image_check(const void *img, size_t len);
/* Stamps the envelope of an outgoing image (pvm_pkmesg leaves it unset for a send buffer);
 * an InPlace image becomes a native one of its real length. False if it is malformed. */
bool cpvm_image_seal(void *img, size_t len, int ctx, int tag, int src, int dst, int dsig);
/* The sender's tid in an image of at least CPVM_HDR_BYTES. */
int cpvm_image_src(const void *img);

/* Control messages (route.c): kind, version, session (2 ints), rank, inbox, route; then the
 * address as a length and bytes. */
#define CPVM_CTL_INTS 7
#define CPVM_CTL_VERSION 1
#define CPVM_ADDR_MAX 512
enum { CTL_HELLO = 1, CTL_ACK, CTL_NAK, CTL_SWITCH, CTL_BYE, CTL_EXITED /* local only */ };

struct cpvm_ctl {
    int kind, tid;
    uint64_t session;
    int rank, inbox, route;
    char addr[CPVM_ADDR_MAX];
};

/* Fills c from the unpacked words; false (nothing trusted) if any field is out of range.
 * `addr` holds alen bytes (alen < 0: missing). */
bool cpvm_ctl_decode(const int head[CPVM_CTL_INTS], int alen, const char *addr, int src_tid,
                     struct cpvm_ctl *c);
/* The words of a control message of `kind` (the inverse of cpvm_ctl_decode). */
void cpvm_ctl_encode(int kind, uint64_t session, int rank, int inbox, int route,
                     int head[CPVM_CTL_INTS]);

#endif
