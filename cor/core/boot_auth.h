/*
 * Authentication on the bootstrap's TCP rendezvous (bootline.h has the exchange): SHA-256
 * (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), written here from the specifications, the two
 * MACs of the challenge, and the seal every later line carries. Shared by libcor and cor-run.
 *
 * Sealed lines. The challenge proves who opened the connection, not who writes on it later:
 * a stranger who can inject bytes into the TCP stream (or hijack it, or sit in the middle of
 * a proven exchange it relayed) could otherwise send DEAD, LOST or a table of its own. So
 * from the line after PROVEN on, every line in both directions is
 *
 *   @<seq> <tag> <body>
 *
 * <seq> counts the lines of that direction of that connection from 1 (decimal), <tag> is the
 * first COR_BOOT_TAG_BYTES of HMAC-SHA-256(K, seq as 8 bytes big-endian || body) in hex, and
 * K is the direction's key for this connection: HMAC-SHA-256(secret, "cor-boot 1 key
 * domain|cor-run" NUL || Nr || Nd), from the challenge's two fresh nonces. Keys differ per
 * connection and per direction, so a line cannot be moved to another connection or reflected
 * back; the sequence number makes a copy of an earlier line of the same connection stale. The
 * receiver takes a line only if its tag is right and its number is the next one: a forged
 * line (no seal, a wrong tag) and a replayed one (a right tag, an old number) are dropped and
 * counted, and what follows is read as before; a right tag with a number beyond the next one
 * means lines of ours were removed from the stream, and the connection ends. The one
 * exception is the address table's block (bootline.h): its A lines travel unsealed between a
 * sealed TABLE that carries their SHA-256 and a sealed END, and a block that does not hash to
 * it is refused whole (a changed or injected line cannot be told from the rest there, so it
 * is not dropped alone); cor-run then seals 2 lines per connection, not the N-line table. On the
 * UNIX socket (mode 0600, the peer's uid checked) lines are not sealed.
 */
#ifndef COR_BOOT_AUTH_H
#define COR_BOOT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "bootline.h"

#define COR_SHA256_BYTES 32
#define COR_BOOT_TAG_BYTES 16 /* a seal's tag: HMAC-SHA-256 cut to 128 bits */
/* "@" seq(<= 19 digits) " " tag " ": what a seal adds to a line. */
#define COR_BOOT_SEAL_MAX (1 + 19 + 1 + 2 * COR_BOOT_TAG_BYTES + 1)
/* The longest body a sealed line can carry (the wire line stays within COR_BOOT_LINE_MAX). */
#define COR_BOOT_BODY_MAX (COR_BOOT_LINE_MAX - COR_BOOT_SEAL_MAX)

struct cor_sha256 {
    uint32_t h[8];
    uint64_t bytes;        /* message length so far */
    unsigned char blk[64]; /* partial block */
    size_t fill;           /* bytes in blk */
};

void cor__sha256_init(struct cor_sha256 *s);
void cor__sha256_update(struct cor_sha256 *s, const void *data, size_t n);
void cor__sha256_final(struct cor_sha256 *s, unsigned char out[COR_SHA256_BYTES]);

/* HMAC-SHA-256 of msg under key (any length). */
void cor__hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n,
                      unsigned char out[COR_SHA256_BYTES]);

/* Which end proves: the MACs of the two directions differ, so one cannot be reflected as the
 * other. */
enum cor_boot_role { COR_BOOT_ROLE_DOMAIN, COR_BOOT_ROLE_CORRUN };

/* HMAC-SHA-256(secret, "cor-boot 1 domain|cor-run" || nonce_r || nonce_d). */
void cor__boot_mac(const unsigned char secret[COR_BOOT_KEY_BYTES], enum cor_boot_role role,
                   const unsigned char nonce_r[COR_BOOT_KEY_BYTES],
                   const unsigned char nonce_d[COR_BOOT_KEY_BYTES],
                   unsigned char mac[COR_BOOT_KEY_BYTES]);

/* One direction of a proven connection: its key, as HMAC's two padded states, and the next
 * sequence number (to send, or expected). */
struct cor_boot_chan {
    struct cor_sha256 inner, outer;
    uint64_t next;
};

/* The channel the `sender` writes on (the reader of that direction builds the same one). */
void cor__boot_chan_init(struct cor_boot_chan *c, const unsigned char secret[COR_BOOT_KEY_BYTES],
                         enum cor_boot_role sender, const unsigned char nonce_r[COR_BOOT_KEY_BYTES],
                         const unsigned char nonce_d[COR_BOOT_KEY_BYTES]);
void cor__boot_chan_clear(struct cor_boot_chan *c);

/* Seals body[len] (one line without its newline) as "@seq tag body\n" into out[cap] (a NUL
 * after it) and counts it sent. Returns the line's length, or -1 when body holds a newline or
 * a NUL, or is longer than COR_BOOT_BODY_MAX, or out is too small (nothing is counted then). */
int cor__boot_seal(struct cor_boot_chan *tx, const char *body, size_t len, char *out, size_t cap);

/* What cor__boot_unseal found. */
enum cor_boot_seal_check {
    COR_SEAL_OK,       /* *body is the line's body; the next number is expected now */
    COR_SEAL_FORGED,   /* no seal, or a tag that is not ours: drop the line, count it */
    COR_SEAL_REPLAYED, /* a right tag with a number already taken: drop it, count it */
    COR_SEAL_GAP       /* a right tag beyond the next number: lines went missing, end */
};

/* Checks one received line (NUL-terminated, without its newline). */
enum cor_boot_seal_check cor__boot_unseal(struct cor_boot_chan *rx, const char *line,
                                          const char **body);

/* Compares n bytes in time that does not depend on where they differ: 1 if equal. */
int cor__boot_mac_equal(const unsigned char *a, const unsigned char *b, size_t n);

/* n bytes from the kernel's random generator (getrandom): 0, or -1 (no fallback: a nonce or
 * a secret must not be guessable). */
int cor__boot_random(void *buf, size_t n);

#endif
