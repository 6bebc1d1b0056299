/*
 * The bootstrap's shared grammar (cor/core/bootline.c) and its authentication (boot_auth.c):
 * SHA-256 against FIPS 180-4's examples, HMAC-SHA-256 against RFC 4231's test cases, the
 * challenge MACs, every line kind parsed and formatted back, and lines that must be refused.
 */
#include "boot_auth.h"
#include "bootline.h"
#include "../ctest.h"

static void unhex_any(const char *h, unsigned char *out, size_t *n)
{
    *n = strlen(h) / 2;
    REQUIRE(cor__bootline_unhex(h, out, *n) == 0);
}

static void expect_hex(const unsigned char *got, size_t n, const char *want)
{
    char h[2 * 64 + 1];
    cor__bootline_hex(got, n, h);
    EXPECT_STR_EQ(h, want);
}

static void test_sha256(void)
{
    unsigned char d[32];
    struct cor_sha256 s;
    cor__sha256_init(&s);
    cor__sha256_update(&s, "abc", 3);
    cor__sha256_final(&s, d);
    expect_hex(d, 32, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    cor__sha256_init(&s);
    cor__sha256_final(&s, d);
    expect_hex(d, 32, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    cor__sha256_init(&s);
    cor__sha256_update(&s, two, strlen(two));
    cor__sha256_final(&s, d);
    expect_hex(d, 32, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a' in uneven pieces: blocks split across updates. */
    char a[997];
    memset(a, 'a', sizeof a);
    cor__sha256_init(&s);
    size_t left = 1000000;
    for (size_t k = 1; left > 0; k = k % 997 + 1) {
        size_t n = k < left ? k : left;
        cor__sha256_update(&s, a, n);
        left -= n;
    }
    cor__sha256_final(&s, d);
    expect_hex(d, 32, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* RFC 4231, section 4: test cases 1-7 (case 5 compares the first 128 bits). */
static void test_hmac_rfc4231(void)
{
    static const char *large =
        "This is a test using a larger than block-size key and a larger than block-size data. "
        "The key needs to be hashed before being used by the HMAC algorithm.";
    struct {
        const char *key_hex, *data;
        size_t data_rep; /* data_rep > 0: data[0] repeated */
        const char *mac;
    } tc[] = {
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "Hi There", 0,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"4a656665", "what do ya want for nothing?", 0,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\xdd", 50,
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {"0102030405060708090a0b0c0d0e0f10111213141516171819", "\xcd", 50,
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {"0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", "Test With Truncation", 0,
         "a3b6167473100ee06e0c796c2955552b"},
        {NULL, "Test Using Larger Than Block-Size Key - Hash Key First", 0,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {NULL, large, 0, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (size_t i = 0; i < sizeof tc / sizeof *tc; i++) {
        unsigned char key[131], data[256], mac[32];
        size_t kn, dn;
        if (tc[i].key_hex) {
            unhex_any(tc[i].key_hex, key, &kn);
        } else { /* cases 6 and 7: 131 bytes of 0xaa */
            kn = 131;
            memset(key, 0xaa, kn);
        }
        if (tc[i].data_rep) {
            dn = tc[i].data_rep;
            memset(data, (unsigned char)tc[i].data[0], dn);
        } else {
            dn = strlen(tc[i].data);
            memcpy(data, tc[i].data, dn);
        }
        cor__hmac_sha256(key, kn, data, dn, mac);
        expect_hex(mac, strlen(tc[i].mac) / 2, tc[i].mac);
    }
}

static void test_boot_mac(void)
{
    unsigned char secret[32], other[32], nr[32], nd[32], m1[32], m2[32], m3[32];
    REQUIRE(cor__boot_random(secret, sizeof secret) == 0);
    REQUIRE(cor__boot_random(nr, sizeof nr) == 0);
    REQUIRE(cor__boot_random(nd, sizeof nd) == 0);
    memcpy(other, secret, 32);
    other[31] ^= 1;
    cor__boot_mac(secret, COR_BOOT_ROLE_DOMAIN, nr, nd, m1);
    cor__boot_mac(secret, COR_BOOT_ROLE_DOMAIN, nr, nd, m2);
    EXPECT_TRUE(cor__boot_mac_equal(m1, m2, 32));
    cor__boot_mac(secret, COR_BOOT_ROLE_CORRUN, nr, nd, m3); /* the other direction */
    EXPECT_TRUE(!cor__boot_mac_equal(m1, m3, 32));
    cor__boot_mac(other, COR_BOOT_ROLE_DOMAIN, nr, nd, m3); /* another secret */
    EXPECT_TRUE(!cor__boot_mac_equal(m1, m3, 32));
    nr[0] ^= 0x80; /* another challenge: an old proof does not fit */
    cor__boot_mac(secret, COR_BOOT_ROLE_DOMAIN, nr, nd, m3);
    EXPECT_TRUE(!cor__boot_mac_equal(m1, m3, 32));
    /* The MAC is HMAC(secret, tag NUL nr nd), checked against the generic HMAC. */
    nr[0] ^= 0x80;
    unsigned char msg[18 + 64];
    memcpy(msg, "cor-boot 1 domain", 18);
    memcpy(msg + 18, nr, 32);
    memcpy(msg + 50, nd, 32);
    cor__hmac_sha256(secret, 32, msg, sizeof msg, m3);
    EXPECT_TRUE(cor__boot_mac_equal(m1, m3, 32));
}

/* Sealed lines: what the sender seals the reader of that direction takes, once and in order;
 * forged, replayed, moved and missing lines are told apart. */
static void test_seal(void)
{
    unsigned char secret[32], nr[32], nd[32];
    REQUIRE(cor__boot_random(secret, sizeof secret) == 0);
    REQUIRE(cor__boot_random(nr, sizeof nr) == 0);
    REQUIRE(cor__boot_random(nd, sizeof nd) == 0);
    struct cor_boot_chan tx, rx, back, other;
    cor__boot_chan_init(&tx, secret, COR_BOOT_ROLE_DOMAIN, nr, nd);
    cor__boot_chan_init(&rx, secret, COR_BOOT_ROLE_DOMAIN, nr, nd);
    cor__boot_chan_init(&back, secret, COR_BOOT_ROLE_CORRUN, nr, nd); /* the other way */
    nd[0] ^= 1;
    cor__boot_chan_init(&other, secret, COR_BOOT_ROLE_DOMAIN, nr, nd); /* another connection */
    char l1[COR_BOOT_LINE_MAX + 1], l2[COR_BOOT_LINE_MAX + 1], l3[COR_BOOT_LINE_MAX + 1];
    const char *body = NULL;
    int n1 = cor__boot_seal(&tx, "HELLO 1 0 2 0123456789abcdef 7", 30, l1, sizeof l1);
    REQUIRE(n1 > 0 && l1[n1 - 1] == '\n');
    l1[n1 - 1] = 0;
    EXPECT_EQ(strncmp(l1, "@1 ", 3), 0);
    EXPECT_EQ((int)strlen(l1), n1 - 1);
    int n2 = cor__boot_seal(&tx, "BARRIER 1", 9, l2, sizeof l2);
    REQUIRE(n2 > 0);
    l2[n2 - 1] = 0;
    /* The other direction's key, another connection's key: forged. */
    EXPECT_EQ(cor__boot_unseal(&back, l1, &body), COR_SEAL_FORGED);
    EXPECT_EQ(cor__boot_unseal(&other, l1, &body), COR_SEAL_FORGED);
    /* Line 2 before line 1: a gap (line 1 went missing). */
    EXPECT_EQ(cor__boot_unseal(&rx, l2, &body), COR_SEAL_GAP);
    EXPECT_EQ(cor__boot_unseal(&rx, l1, &body), COR_SEAL_OK);
    EXPECT_STR_EQ(body, "HELLO 1 0 2 0123456789abcdef 7");
    EXPECT_EQ(cor__boot_unseal(&rx, l1, &body), COR_SEAL_REPLAYED);
    /* A body changed, a number changed, a tag changed, no seal, a bad shape: forged. */
    strcpy(l3, l2);
    l3[n2 - 2] = '2'; /* BARRIER 2 */
    EXPECT_EQ(cor__boot_unseal(&rx, l3, &body), COR_SEAL_FORGED);
    strcpy(l3, l2);
    l3[1] = '3';
    EXPECT_EQ(cor__boot_unseal(&rx, l3, &body), COR_SEAL_FORGED);
    strcpy(l3, l2);
    l3[4] = l3[4] == 'a' ? 'b' : 'a';
    EXPECT_EQ(cor__boot_unseal(&rx, l3, &body), COR_SEAL_FORGED);
    EXPECT_EQ(cor__boot_unseal(&rx, "BARRIER 1", &body), COR_SEAL_FORGED);
    static const char *const shapes[] = {
        "@", "@2", "@2 ", "@ 00 x", "@-2 00 x", "@99999999999999999999 0 x", "@2 zz BARRIER 1"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        EXPECT_EQ(cor__boot_unseal(&rx, shapes[i], &body), COR_SEAL_FORGED);
    /* None of these moved the reader on: line 2 is still the next one. */
    EXPECT_EQ(cor__boot_unseal(&rx, l2, &body), COR_SEAL_OK);
    EXPECT_STR_EQ(body, "BARRIER 1");
    /* Bodies the seal refuses: a newline or NUL inside, longer than COR_BOOT_BODY_MAX, or no
     * room; none of them counts as sent. */
    char big[COR_BOOT_BODY_MAX + 2];
    memset(big, 'x', sizeof big);
    EXPECT_EQ(cor__boot_seal(&tx, "A\nB", 3, l3, sizeof l3), -1);
    EXPECT_EQ(cor__boot_seal(&tx, "A\0B", 3, l3, sizeof l3), -1);
    EXPECT_EQ(cor__boot_seal(&tx, big, COR_BOOT_BODY_MAX + 1, l3, sizeof l3), -1);
    EXPECT_EQ(cor__boot_seal(&tx, "FINISH", 6, l3, 20), -1);
    int n = cor__boot_seal(&tx, big, COR_BOOT_BODY_MAX, l3, sizeof l3);
    EXPECT_TRUE(n > 0 && n <= COR_BOOT_LINE_MAX);
    EXPECT_EQ(strncmp(l3, "@3 ", 3), 0);
}

/* Each line parses, formats back to the same text, and parses to the same fields. */
static void test_round_trip(void)
{
    static const char *ok[] = {
        "HELLO 1 3 4 0123456789abcdef 4242",
        "ADDR 0 udp 0 3132372e302e302e313a31303030",
        "ADDR 63 gm -1 -",
        "PUB 64",
        "BARRIER 2147483647",
        "FINISH",
        "LOST 4095",
        "CHALLENGE 1 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        "PROOF 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff "
        "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
        "PROVEN ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
        "WELCOME",
        "TABLE 4096 1",
        "TABLE 2 3 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
        "A 1 0 udp -1000000 41",
        "END",
        "RELEASE 1",
        "DEAD 3 killed by signal 9 (SIGKILL)",
        "DEAD 0",
        "ERR wrong session",
        "ERR",
        "BYE",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        struct cor_bootline l, m;
        char buf[COR_BOOT_LINE_MAX + 1];
        EXPECT_EQ(cor__bootline_parse(ok[i], &l), 0);
        int n = cor__bootline_format(&l, buf, sizeof buf);
        EXPECT_EQ(n, (long long)strlen(ok[i]) + 1);
        if (n > 0) {
            buf[n - 1] = 0;
            EXPECT_STR_EQ(buf, ok[i]);
            EXPECT_EQ(cor__bootline_parse(buf, &m), 0);
            EXPECT_EQ(m.kind, l.kind);
        }
    }
    struct cor_bootline l;
    REQUIRE(cor__bootline_parse("HELLO 1 3 4 0123456789ABCDEF 7", &l) == 0);
    EXPECT_TRUE(l.session == 0x0123456789abcdefULL && l.rank == 3 && l.size == 4 && l.pid == 7);
    EXPECT_EQ(cor__bootline_parse("A 2 5 gm 3 410042", &l), -1); /* a NUL inside */
    REQUIRE(cor__bootline_parse("A 2 5 gm 3 41ff42", &l) == 0);
    EXPECT_STR_EQ(l.addr, "A\xff"
                          "B");
    EXPECT_TRUE(l.rank == 2 && l.k == 5 && l.port == 3);
    REQUIRE(cor__bootline_parse("DEAD 2   why \x01 it  ", &l) == 0);
    EXPECT_STR_EQ(l.text, "why ? it");
}

static void test_refused(void)
{
    static const char *bad[] = {
        "",
        " ",
        "HELLO",
        "HELLO 2 0 1 0123456789abcdef 1",
        "HELLO 1 0 1 0123456789abcde 1",
        "HELLO 1 0 1 0123456789abcdef 0",
        "HELLO 1 4096 1 0123456789abcdef 1",
        "HELLO 1 0 4097 0123456789abcdef 1",
        "HELLO 1 0 1 0123456789abcdef 1 x",
        "HELLO 1 +0 1 0123456789abcdef 1",
        "HELLO 1 0x1 1 0123456789abcdef 1",
        "ADDR 64 udp 0 -",
        "ADDR 0 u/dp 0 -",
        "ADDR 0 udp 1000001 -",
        "ADDR 0 udp 0 4",
        "ADDR 0 udp 0 4g",
        "ADDR 0 udp 0 00",
        "ADDR 0 udp 0",
        "PUB 0",
        "PUB 65",
        "BARRIER 0",
        "BARRIER 2147483648",
        "BARRIER 99999999999999999999",
        "LOST -1",
        "FINISH now",
        "welcome",
        "TABLE 1 0",
        "TABLE 2 1 00112233",              /* a digest of 4 bytes */
        "TABLE 2 1 0011223344556677 8899", /* a fifth word */
        "A 0 0 udp 0",
        "DEAD",
        "DEAD x",
        "DEAD -1",
        "ERRX",
        "CHALLENGE 2 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        "PROVEN 0011",
        "PROOF 00 11",
        "NOSUCH 1",
        "ADDR 0 abcdefghijklmnopqrstuvwxyzabcdef 0 -", /* route of 32 characters */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cor_bootline l;
        if (cor__bootline_parse(bad[i], &l) == 0) {
            char m[200];
            snprintf(m, sizeof m, "'%s' was accepted", bad[i]);
            ct_fail_msg(__FILE__, __LINE__, m);
        }
    }
    /* Longest address: 255 bytes fit a line, 256 do not fit the field. */
    char line[COR_BOOT_LINE_MAX + 8];
    struct cor_bootline l;
    int n = snprintf(line, sizeof line, "A 4095 63 abcdefghijklmnopqrstuvwxyzabcde -1000000 ");
    for (int i = 0; i < 255; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "7e");
    EXPECT_EQ(cor__bootline_parse(line, &l), 0);
    char out[COR_BOOT_LINE_MAX + 1];
    EXPECT_EQ(cor__bootline_format(&l, out, sizeof out), n + 1);
    snprintf(line + n, sizeof line - (size_t)n, "7e");
    EXPECT_EQ(cor__bootline_parse(line, &l), -1);
    /* Formatting refuses what parsing would. */
    memset(&l, 0, sizeof l);
    l.kind = COR_BL_PUB;
    l.n = 65;
    EXPECT_EQ(cor__bootline_format(&l, out, sizeof out), -1);
    l.n = 1;
    EXPECT_EQ(cor__bootline_format(&l, out, 4), -1); /* does not fit the buffer */
}

static int collect(void *arg, char *line)
{
    char *acc = arg;
    strcat(acc, line);
    strcat(acc, "|");
    return strcmp(line, "STOP") == 0 ? 7 : 0;
}

static void test_take(void)
{
    char buf[COR_BOOT_BUF], acc[COR_BOOT_BUF] = "";
    size_t have = (size_t)snprintf(buf, sizeof buf, "ONE\nTWO\nthr");
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), 0);
    EXPECT_STR_EQ(acc, "ONE|TWO|");
    EXPECT_EQ(have, 3);
    have += (size_t)snprintf(buf + have, sizeof buf - have, "ee\nSTOP\nFOUR\n");
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), 7);
    EXPECT_STR_EQ(acc, "ONE|TWO|three|STOP|");
    EXPECT_EQ(have, 5); /* FOUR\n stays */
    memcpy(buf, "A\0B\n", 4);
    have = 4;
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), COR_BL_NUL);
    memset(buf, 'x', COR_BOOT_LINE_MAX);
    have = COR_BOOT_LINE_MAX - 1; /* a line of 1023 bytes may still end with its newline */
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), 0);
    buf[have++] = '\n';
    acc[0] = 0;
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), 0);
    EXPECT_EQ(strlen(acc), COR_BOOT_LINE_MAX);
    memset(buf, 'x', COR_BOOT_LINE_MAX + 1);
    have = COR_BOOT_LINE_MAX; /* one more byte: too long, newline or not */
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), COR_BL_TOO_LONG);
    buf[COR_BOOT_LINE_MAX] = '\n';
    have = COR_BOOT_LINE_MAX + 1;
    EXPECT_EQ(cor__bootline_take(buf, &have, collect, acc), COR_BL_TOO_LONG);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"sha256 (FIPS 180-4 examples)", test_sha256},
        {"hmac-sha256 (RFC 4231 cases 1-7)", test_hmac_rfc4231},
        {"challenge MACs", test_boot_mac},
        {"sealed lines", test_seal},
        {"lines round trip", test_round_trip},
        {"bad lines refused", test_refused},
        {"line splitting and limits", test_take},
        {NULL, NULL},
    };
    return ct_main("bootline", NULL, NULL, tests, 60);
}
