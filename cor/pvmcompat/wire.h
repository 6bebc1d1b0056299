/*
 * What libcorpvm reads from the wire, as pure functions (no libpvm3 calls), so unit tests
 * and the fuzzer reach them:
 * - a routed message's image: a header of H_INTS native ints (pvm_pkmesg's: len ctx tag wid
 *   enc crc src dst; then the pair's numbers: seq, this message's number from src to dst, 1
 *   and up, 0 in an image that only acknowledges; ack, the highest number dst's messages to
 *   src that src took), then per fragment a native int and, if it is >= 0, that many bytes
 *   inline; a negative one -n says the fragment's n bytes are detached: they follow as a
 *   message of their own (large fragments travel without a copy);
 * - a control message's fields, as unpacked from PVM's path.
 */
#ifndef CPVM_WIRE_H
#define CPVM_WIRE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { H_LEN, H_CTX, H_TAG, H_WID, H_ENC, H_CRC, H_SRC, H_DST, H_SEQ, H_ACK, H_INTS };
#define CPVM_HDR_BYTES (H_INTS * (int)sizeof(int))
#define CPVM_ENC_INPLACE 0x20000000 /* libpvm3's encoding of PvmDataInPlace: never on the wire */
#define CPVM_DETACH_MAX 64          /* detached fragments of one message, at most */

/* True if img holds a header and fragments whose lengths add up to the header's body length
 * and fill len exactly, with at most CPVM_DETACH_MAX detached ones. */
bool cpvm_image_check(const void *img, size_t len);
/* A header field of an image of at least CPVM_HDR_BYTES. */
int cpvm_image_word(const void *img, int field);
void cpvm_image_set_word(void *img, int field, int value);

/* One fragment of a checked image: *pos starts at CPVM_HDR_BYTES; false after the last. */
struct cpvm_frag {
    size_t off; /* of the bytes, if inline */
    int len;
    bool detached;
};
bool cpvm_image_next(const void *img, size_t len, size_t *pos, struct cpvm_frag *f);

/* Building one: the header (seq and ack 0), then each fragment (data NULL: detached); put returns
 * the offset after the entry, open writes an inline entry's length and returns where its bytes go.
 * cpvm_image_entry is an entry's size. */
void cpvm_image_header(void *img, int body, int ctx, int tag, int wid, int enc, int src, int dst);
size_t cpvm_image_put(void *img, size_t off, const void *data, int len);
size_t cpvm_image_open(void *img, size_t off, int len);
size_t cpvm_image_entry(const void *data, int len);

/* Control messages (route.c): kind, version, session (2 ints), rank, inbox, route; then the
 * address as a length and bytes. */
#define CPVM_CTL_INTS 7
#define CPVM_CTL_VERSION 1
#define CPVM_ADDR_MAX 512
/* GAVEUP: the sender's route gave us up (our messages to it take PVM's path too); CONFIRM:
 * the highest number of ours the sender took (in the rank field), for a pair whose way back
 * is not routed. */
enum {
    CTL_HELLO = 1,
    CTL_ACK,
    CTL_NAK,
    CTL_SWITCH,
    CTL_BYE,
    CTL_GAVEUP,
    CTL_CONFIRM,
    CTL_EXITED /* local only */
};

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
