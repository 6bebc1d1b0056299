/* SHA-256 (FIPS 180-4), HMAC-SHA-256 (RFC 2104) and the bootstrap's challenge MACs. */
#include "boot_auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* FIPS 180-4, 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n)
{
    return x >> n | x << (32 - n);
}

static void compress(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
               (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ w[t - 15] >> 3;
        uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ w[t - 2] >> 10;
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 =
            hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void cor__sha256_init(struct cor_sha256 *s)
{
    /* FIPS 180-4, 5.3.3: fractional parts of the square roots of the first 8 primes. */
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->bytes = 0;
    s->fill = 0;
}

void cor__sha256_update(struct cor_sha256 *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->bytes += n;
    while (n > 0) {
        if (s->fill == 0 && n >= 64) {
            compress(s->h, p);
            p += 64;
            n -= 64;
            continue;
        }
        size_t k = 64 - s->fill < n ? 64 - s->fill : n;
        memcpy(s->blk + s->fill, p, k);
        s->fill += k;
        p += k;
        n -= k;
        if (s->fill == 64) {
            compress(s->h, s->blk);
            s->fill = 0;
        }
    }
}

void cor__sha256_final(struct cor_sha256 *s, unsigned char out[COR_SHA256_BYTES])
{
    /* 5.1.1: a 1 bit, zeros to 56 mod 64 bytes, then the length in bits, big-endian. */
    uint64_t bits = s->bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t padlen = (s->fill < 56 ? 56 : 120) - s->fill;
    for (int i = 0; i < 8; i++)
        pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    cor__sha256_update(s, pad, padlen + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
    memset(s, 0, sizeof *s);
}

void cor__hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n,
                      unsigned char out[COR_SHA256_BYTES])
{
    /* RFC 2104: H((K ^ opad) || H((K ^ ipad) || msg)), K hashed first if longer than a
     * block, then padded with zeros to the block size (64). */
    unsigned char k[64] = {0}, pad[64], inner[COR_SHA256_BYTES];
    struct cor_sha256 s;
    if (keylen > 64) {
        cor__sha256_init(&s);
        cor__sha256_update(&s, key, keylen);
        cor__sha256_final(&s, k);
    } else if (keylen) {
        memcpy(k, key, keylen);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    cor__sha256_init(&s);
    cor__sha256_update(&s, pad, 64);
    cor__sha256_update(&s, msg, n);
    cor__sha256_final(&s, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    cor__sha256_init(&s);
    cor__sha256_update(&s, pad, 64);
    cor__sha256_update(&s, inner, sizeof inner);
    cor__sha256_final(&s, out);
    memset(k, 0, sizeof k);
    memset(pad, 0, sizeof pad);
}

void cor__boot_mac(const unsigned char secret[COR_BOOT_KEY_BYTES], enum cor_boot_role role,
                   const unsigned char nonce_r[COR_BOOT_KEY_BYTES],
                   const unsigned char nonce_d[COR_BOOT_KEY_BYTES],
                   unsigned char mac[COR_BOOT_KEY_BYTES])
{
    static const char tag_d[] = "cor-boot 1 domain", tag_r[] = "cor-boot 1 cor-run";
    const char *tag = role == COR_BOOT_ROLE_DOMAIN ? tag_d : tag_r;
    size_t tn = strlen(tag) + 1; /* with its NUL: the tags are not prefixes of one another */
    unsigned char msg[sizeof tag_r + 2 * COR_BOOT_KEY_BYTES];
    memcpy(msg, tag, tn);
    memcpy(msg + tn, nonce_r, COR_BOOT_KEY_BYTES);
    memcpy(msg + tn + COR_BOOT_KEY_BYTES, nonce_d, COR_BOOT_KEY_BYTES);
    cor__hmac_sha256(secret, COR_BOOT_KEY_BYTES, msg, tn + 2 * COR_BOOT_KEY_BYTES, mac);
}

int cor__boot_mac_equal(const unsigned char *a, const unsigned char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}

int cor__boot_random(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = getrandom(p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ---- sealed lines ---------------------------------------------------------------------------- */

void cor__boot_chan_init(struct cor_boot_chan *c, const unsigned char secret[COR_BOOT_KEY_BYTES],
                         enum cor_boot_role sender, const unsigned char nonce_r[COR_BOOT_KEY_BYTES],
                         const unsigned char nonce_d[COR_BOOT_KEY_BYTES])
{
    static const char tag_d[] = "cor-boot 1 key domain", tag_r[] = "cor-boot 1 key cor-run";
    const char *tag = sender == COR_BOOT_ROLE_DOMAIN ? tag_d : tag_r;
    size_t tn = strlen(tag) + 1;
    unsigned char msg[sizeof tag_r + 2 * COR_BOOT_KEY_BYTES], key[COR_SHA256_BYTES], pad[64];
    memcpy(msg, tag, tn);
    memcpy(msg + tn, nonce_r, COR_BOOT_KEY_BYTES);
    memcpy(msg + tn + COR_BOOT_KEY_BYTES, nonce_d, COR_BOOT_KEY_BYTES);
    cor__hmac_sha256(secret, COR_BOOT_KEY_BYTES, msg, tn + 2 * COR_BOOT_KEY_BYTES, key);
    /* HMAC's two padded key blocks, absorbed once: a tag then costs the message's blocks and
     * one more, not two more (cor-run seals the N-line table for each of N domains). */
    memset(pad, 0x36, sizeof pad);
    for (size_t i = 0; i < sizeof key; i++)
        pad[i] ^= key[i];
    cor__sha256_init(&c->inner);
    cor__sha256_update(&c->inner, pad, sizeof pad);
    memset(pad, 0x5c, sizeof pad);
    for (size_t i = 0; i < sizeof key; i++)
        pad[i] ^= key[i];
    cor__sha256_init(&c->outer);
    cor__sha256_update(&c->outer, pad, sizeof pad);
    c->next = 1;
    memset(key, 0, sizeof key);
    memset(pad, 0, sizeof pad);
}

void cor__boot_chan_clear(struct cor_boot_chan *c)
{
    memset(c, 0, sizeof *c);
}

static void seal_tag(const struct cor_boot_chan *c, uint64_t seq, const char *body, size_t len,
                     unsigned char tag[COR_SHA256_BYTES])
{
    unsigned char be[8], inner[COR_SHA256_BYTES];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(seq >> (56 - 8 * i));
    struct cor_sha256 s = c->inner;
    cor__sha256_update(&s, be, sizeof be);
    cor__sha256_update(&s, body, len);
    cor__sha256_final(&s, inner);
    s = c->outer;
    cor__sha256_update(&s, inner, sizeof inner);
    cor__sha256_final(&s, tag);
}

int cor__boot_seal(struct cor_boot_chan *tx, const char *body, size_t len, char *out, size_t cap)
{
    if (len > COR_BOOT_BODY_MAX || memchr(body, '\n', len) || memchr(body, 0, len)) return -1;
    unsigned char tag[COR_SHA256_BYTES];
    char hex[2 * COR_BOOT_TAG_BYTES + 1];
    seal_tag(tx, tx->next, body, len, tag);
    cor__bootline_hex(tag, COR_BOOT_TAG_BYTES, hex);
    int n =
        snprintf(out, cap, "@%llu %s %.*s\n", (unsigned long long)tx->next, hex, (int)len, body);
    if (n < 0 || (size_t)n >= cap) return -1;
    tx->next++;
    return n;
}

enum cor_boot_seal_check cor__boot_unseal(struct cor_boot_chan *rx, const char *line,
                                          const char **body)
{
    /* "@" digits " " 32 hex " " body: anything else is not ours. */
    if (line[0] != '@') return COR_SEAL_FORGED;
    size_t nd = strspn(line + 1, "0123456789");
    if (nd == 0 || nd > 19 || line[1 + nd] != ' ') return COR_SEAL_FORGED;
    char num[20];
    memcpy(num, line + 1, nd);
    num[nd] = 0;
    long seq;
    if (cor__bootline_long(num, 1, 0x7fffffffffffffffL, &seq)) return COR_SEAL_FORGED;
    const char *t = line + 2 + nd;
    char hex[2 * COR_BOOT_TAG_BYTES + 1];
    unsigned char got[COR_BOOT_TAG_BYTES], want[COR_SHA256_BYTES];
    if (strnlen(t, sizeof hex) < sizeof hex - 1 || t[sizeof hex - 1] != ' ') return COR_SEAL_FORGED;
    memcpy(hex, t, sizeof hex - 1);
    hex[sizeof hex - 1] = 0;
    if (cor__bootline_unhex(hex, got, sizeof got)) return COR_SEAL_FORGED;
    const char *b = t + sizeof hex;
    seal_tag(rx, (uint64_t)seq, b, strlen(b), want);
    if (!cor__boot_mac_equal(got, want, sizeof got)) return COR_SEAL_FORGED;
    if ((uint64_t)seq < rx->next) return COR_SEAL_REPLAYED;
    if ((uint64_t)seq > rx->next) return COR_SEAL_GAP;
    rx->next++;
    *body = b;
    return COR_SEAL_OK;
}
