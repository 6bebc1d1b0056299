/*
 * Proving knowledge of the session secret on the bootstrap's TCP rendezvous (bootline.h has
 * the exchange): SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), written here from the
 * specifications, and the two MACs of the challenge. Shared by libcor and cor-run.
 */
#ifndef COR_BOOT_AUTH_H
#define COR_BOOT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "bootline.h"

#define COR_SHA256_BYTES 32

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

/* Compares n bytes in time that does not depend on where they differ: 1 if equal. */
int cor__boot_mac_equal(const unsigned char *a, const unsigned char *b, size_t n);

/* n bytes from the kernel's random generator (getrandom): 0, or -1 (no fallback: a nonce or
 * a secret must not be guessable). */
int cor__boot_random(void *buf, size_t n);

#endif
