/*
 * The bootstrap protocol's lines: grammar, limits and encodings, in one place for both ends
 * (the domain side, cor/core/bootstrap.c, and cor-run, apps/tools/cor-run.c, which compiles
 * bootline.c in). Pure functions: no I/O, no session state. What depends on the session (is
 * this rank below the size? was this address announced twice?) stays with each end.
 *
 * Both directions carry lines of bytes other than NUL and '\n', ending in '\n', at most
 * COR_BOOT_LINE_MAX bytes with the newline; words are separated by spaces. A longer line, a
 * NUL byte, an unknown word or a field out of its range is a protocol error and ends the
 * connection. Addresses travel hex-encoded ("-" for an empty one) so that they may hold any
 * byte but NUL.
 *
 *   domain -> cor-run                         cor-run -> domain
 *                                             CHALLENGE 1 <nonce>          (TCP only, first)
 *   PROOF <nonce> <mac>       (TCP only)      PROVEN <mac>                 (TCP only)
 *   HELLO 1 <rank> <size> <session> <pid>     WELCOME            (or ERR <why>, then close)
 *   ADDR <k> <route> <port_index> <hex>       TABLE <size> <n> [<digest>]
 *   PUB <n>   (after ADDR 0..n-1)             A <rank> <k> <route> <port_index> <hex>  x size*n
 *   BARRIER <seq>   (seq = 1, 2, ...)         END
 *   FINISH                                    RELEASE <seq>
 *   LOST <rank>                               DEAD <rank> [<why>]
 *                                             BYE                (answer to FINISH)
 *
 * On TCP (a rendezvous another host can reach) both ends prove that they know the session's
 * secret before anything else is said (boot_auth.h): cor-run's CHALLENGE carries a fresh
 * random nonce Nr; the domain answers PROOF with its own fresh nonce Nd and
 * HMAC-SHA-256(secret, "domain" Nr Nd); cor-run answers PROVEN with HMAC(secret, "cor-run" Nr
 * Nd). The secret never travels on the connection; a PROOF captured from another connection
 * or session does not fit a new nonce. Every line after PROVEN, both ways, is sealed (a
 * sequence number and a tag under a key of that connection and direction, boot_auth.h): the
 * lines above are then the bodies of "@<seq> <tag> <body>". On the UNIX socket (mode 0600,
 * peer uid checked) the exchange starts at HELLO and nothing is sealed.
 *
 * The address table on a sealed connection is one sealed block: TABLE carries <digest>, the
 * SHA-256 of the A lines that follow (each with its newline), which then travel unsealed;
 * the sealed END closes the block, and a block whose bytes do not hash to <digest> fails whole
 * (lines injected into it or removed from it). cor-run hashes the table once and seals two
 * lines per connection, not 2 + size*n; the seal of TABLE (this connection's key, its next
 * number) binds the block to this connection. Without <digest> (the UNIX socket) every line
 * stands alone.
 *
 * <session> is 16 hex digits; <nonce>, <mac> and <digest> 64; numbers are decimal.
 */
#ifndef COR_BOOTLINE_H
#define COR_BOOTLINE_H

#include <stddef.h>
#include <stdint.h>

#include <cor/cor.h>

#include "cor/route.h"

#define COR_BOOT_VERSION 1
#define COR_BOOT_LINE_MAX 1024               /* bytes per line, newline included */
#define COR_BOOT_BUF (2 * COR_BOOT_LINE_MAX) /* a reader's buffer: a line and the next read */
#define COR_BOOT_MAX_ADDRS 64                /* addresses one domain may publish */
#define COR_BOOT_MAX_DOMAINS COR_MAX_DOMAINS
#define COR_BOOT_ROUTE_MAX 32                     /* route name, NUL included */
#define COR_BOOT_ADDR_MAX COR_ADDR_MAX            /* decoded address, NUL included */
#define COR_BOOT_HEX_MAX (2 * (COR_ADDR_MAX - 1)) /* its hex form */
#define COR_BOOT_PORT_LIMIT 1000000               /* |port_index| */
#define COR_BOOT_SEQ_MAX 0x7fffffffL              /* barrier sequence numbers 1..this */
#define COR_BOOT_KEY_BYTES 32                     /* session secret, nonces and MACs */
#define COR_BOOT_KEY_HEX (2 * COR_BOOT_KEY_BYTES)

enum cor_bootline_kind {
    /* domain -> cor-run */
    COR_BL_PROOF,
    COR_BL_HELLO,
    COR_BL_ADDR,
    COR_BL_PUB,
    COR_BL_BARRIER,
    COR_BL_FINISH,
    COR_BL_LOST,
    /* cor-run -> domain */
    COR_BL_CHALLENGE,
    COR_BL_PROVEN,
    COR_BL_WELCOME,
    COR_BL_TABLE,
    COR_BL_A,
    COR_BL_END,
    COR_BL_RELEASE,
    COR_BL_DEAD,
    COR_BL_ERR,
    COR_BL_BYE,
    COR_BL_KINDS
};

/* One line, parsed. Only the fields of its kind are meaningful (see the table above). */
struct cor_bootline {
    enum cor_bootline_kind kind;
    long version;                   /* HELLO, CHALLENGE: COR_BOOT_VERSION */
    long rank;                      /* HELLO, A, LOST, DEAD: 0 .. COR_BOOT_MAX_DOMAINS-1 */
    long size;                      /* HELLO, TABLE: 1 .. COR_BOOT_MAX_DOMAINS */
    long k;                         /* ADDR, A: 0 .. COR_BOOT_MAX_ADDRS-1 */
    long n;                         /* PUB, TABLE: 1 .. COR_BOOT_MAX_ADDRS */
    long port;                      /* ADDR, A: -COR_BOOT_PORT_LIMIT .. COR_BOOT_PORT_LIMIT */
    long seq;                       /* BARRIER, RELEASE: 1 .. COR_BOOT_SEQ_MAX */
    long pid;                       /* HELLO: 1 .. LONG_MAX */
    uint64_t session;               /* HELLO */
    char route[COR_BOOT_ROUTE_MAX]; /* ADDR, A: [A-Za-z0-9_.-]+ */
    char addr[COR_BOOT_ADDR_MAX];   /* ADDR, A: decoded, no NUL inside, may be empty */
    unsigned char nonce[COR_BOOT_KEY_BYTES]; /* CHALLENGE (cor-run's), PROOF (the domain's) */
    unsigned char mac[COR_BOOT_KEY_BYTES];   /* PROOF, PROVEN; TABLE: the block's digest */
    int digest;                              /* TABLE: 1 if it carries a digest (in mac) */
    char text[COR_BOOT_LINE_MAX]; /* ERR, DEAD: the rest of the line, "" if none; printable
                                   * ASCII (other bytes become '?') */
};

/* The keyword of a kind ("HELLO"), or NULL for an out-of-range kind. */
const char *cor__bootline_word(enum cor_bootline_kind kind);

/* Parses one line (without its newline, NUL-terminated). Checks the grammar and every range
 * above; returns 0, or -1 for anything else. */
int cor__bootline_parse(const char *line, struct cor_bootline *out);

/* Writes line l with its newline (and a NUL) into buf[cap]; returns its length without the
 * NUL, or -1 when a field is out of its range or the line would pass COR_BOOT_LINE_MAX.
 * Parsing the result gives l back. */
int cor__bootline_format(const struct cor_bootline *l, char *buf, size_t cap);

/* Hands each complete line in buf[0 .. *have) to fn (NUL-terminated, newline removed,
 * writable), then moves a partial last line to the start of buf. Stops at the first non-zero
 * return of fn and returns it (the rest stays unread in buf); returns COR_BL_TOO_LONG for a
 * line longer than COR_BOOT_LINE_MAX (also a partial one that cannot end in time: *have
 * stays >= COR_BOOT_LINE_MAX), COR_BL_NUL for a NUL byte in a line, 0 when all went well. */
#define COR_BL_TOO_LONG (-1001)
#define COR_BL_NUL (-1002)
int cor__bootline_take(char *buf, size_t *have, int (*fn)(void *arg, char *line), void *arg);

/* Route names: 1..31 of [A-Za-z0-9_.-]. */
int cor__bootline_route_ok(const char *s);

/* Strict decimal (optional '-', 1..19 digits) within lo..hi: 0, or -1. */
int cor__bootline_long(const char *s, long lo, long hi, long *out);

/* Exactly 2*n hex digits (either case) into out[n]: 0, or -1. */
int cor__bootline_unhex(const char *s, unsigned char *out, size_t n);
/* n bytes as 2*n lowercase hex digits and a NUL into out. */
void cor__bootline_hex(const unsigned char *in, size_t n, char *out);

#endif
