/*
 * libcorpvm's wire checks (cor/pvmcompat/wire.c): routed images and control messages, as a
 * receiver sees them from the wire or from another task.
 */
#include <stdint.h>
#include <string.h>

#include "../ctest.h"
#include "wire.h"

/* An image of `nfrag` fragments of the given lengths (negative: detached), built as the
 * sender builds one. */
static size_t build(char *img, size_t cap, int enc, const int *flen, int nfrag)
{
    static char bytes[200];
    memset(bytes, 'x', sizeof bytes);
    size_t off = CPVM_HDR_BYTES;
    long body = 0;
    for (int i = 0; i < nfrag; i++) {
        int n = flen[i] < 0 ? -flen[i] : flen[i];
        const void *data = flen[i] < 0 ? NULL : bytes;
        if ((data && n > (int)sizeof bytes) || off + cpvm_image_entry(data, n) > cap) return 0;
        off = cpvm_image_put(img, off, data, n);
        body += n;
    }
    cpvm_image_header(img, (int)body, 7, 42, 0, enc, 0x40001, 0x40002);
    return off;
}

static void image_good(void)
{
    char img[256];
    int f[] = {10, 0, 33};
    size_t len = build(img, sizeof img, 1, f, 3);
    EXPECT_TRUE(cpvm_image_check(img, len));
    EXPECT_EQ(cpvm_image_word(img, H_CTX), 7);
    EXPECT_EQ(cpvm_image_word(img, H_TAG), 42);
    EXPECT_EQ(cpvm_image_word(img, H_SRC), 0x40001);
    EXPECT_EQ(cpvm_image_word(img, H_DST), 0x40002);
    EXPECT_EQ(cpvm_image_word(img, H_LEN), 43);
    size_t pos = CPVM_HDR_BYTES;
    struct cpvm_frag fr;
    int seen = 0;
    while (cpvm_image_next(img, len, &pos, &fr)) {
        EXPECT_EQ(fr.len, f[seen]);
        EXPECT_TRUE(!fr.detached);
        EXPECT_TRUE(fr.len == 0 || img[fr.off] == 'x');
        seen++;
    }
    EXPECT_EQ(seen, 3);
    EXPECT_EQ(pos, len);
    /* no fragment at all: an empty message */
    len = build(img, sizeof img, 0, NULL, 0);
    EXPECT_EQ(len, CPVM_HDR_BYTES);
    EXPECT_TRUE(cpvm_image_check(img, len));
}

static void image_detached(void)
{
    char img[512];
    int f[] = {8, -100000, 4, -70000};
    size_t len = build(img, sizeof img, 1, f, 4);
    EXPECT_EQ(len, CPVM_HDR_BYTES + 4 * 4 + 8 + 4);
    EXPECT_TRUE(cpvm_image_check(img, len));
    EXPECT_EQ(cpvm_image_word(img, H_LEN), 170012);
    size_t pos = CPVM_HDR_BYTES;
    struct cpvm_frag fr;
    for (int i = 0; i < 4; i++) {
        EXPECT_TRUE(cpvm_image_next(img, len, &pos, &fr));
        EXPECT_EQ(fr.detached, f[i] < 0);
        EXPECT_EQ(fr.len, f[i] < 0 ? -f[i] : f[i]);
    }
    EXPECT_TRUE(!cpvm_image_next(img, len, &pos, &fr));
    /* at most CPVM_DETACH_MAX detached fragments */
    int many[CPVM_DETACH_MAX + 1];
    for (int i = 0; i <= CPVM_DETACH_MAX; i++)
        many[i] = -1;
    len = build(img, sizeof img, 1, many, CPVM_DETACH_MAX);
    EXPECT_TRUE(cpvm_image_check(img, len));
    len = build(img, sizeof img, 1, many, CPVM_DETACH_MAX + 1);
    EXPECT_TRUE(!cpvm_image_check(img, len));
}

static void image_bad(void)
{
    char img[256];
    int f[] = {10, 20};
    size_t len = build(img, sizeof img, 1, f, 2);
    EXPECT_TRUE(!cpvm_image_check(img, 0));
    EXPECT_TRUE(!cpvm_image_check(img, CPVM_HDR_BYTES - 1)); /* short header */
    EXPECT_TRUE(!cpvm_image_check(img, len - 1));            /* last fragment cut */
    EXPECT_TRUE(!cpvm_image_check(img, len + 2));            /* bytes over */
    int big = 1 << 30;
    memcpy(img + CPVM_HDR_BYTES, &big, 4); /* a fragment longer than the image */
    EXPECT_TRUE(!cpvm_image_check(img, len));
    int neg = -4; /* now detached: the body no longer adds up, and bytes are over */
    memcpy(img + CPVM_HDR_BYTES, &neg, 4);
    EXPECT_TRUE(!cpvm_image_check(img, len));
    int least = INT32_MIN;
    memcpy(img + CPVM_HDR_BYTES, &least, 4);
    EXPECT_TRUE(!cpvm_image_check(img, len));
    len = build(img, sizeof img, 1, f, 2);
    int lie = 31; /* header body length disagrees with the fragments */
    memcpy(img, &lie, 4);
    EXPECT_TRUE(!cpvm_image_check(img, len));
    len = build(img, sizeof img, CPVM_ENC_INPLACE, f, 2); /* InPlace never travels */
    EXPECT_TRUE(!cpvm_image_check(img, len));
    int huge[] = {-0x7fffffff, -0x7fffffff}; /* the body overflows an int */
    len = build(img, sizeof img, 1, huge, 2);
    EXPECT_TRUE(!cpvm_image_check(img, len));
}

static void ctl_roundtrip(void)
{
    int head[CPVM_CTL_INTS];
    uint64_t session = 0x0123456789abcdefull;
    cpvm_ctl_encode(CTL_HELLO, session, 12, 1, 8, head);
    struct cpvm_ctl c;
    const char *addr = "udp 0 127.0.0.1:4000";
    EXPECT_TRUE(cpvm_ctl_decode(head, (int)strlen(addr), addr, 0x40003, &c));
    EXPECT_EQ(c.kind, CTL_HELLO);
    EXPECT_EQ(c.tid, 0x40003);
    EXPECT_TRUE(c.session == session);
    EXPECT_EQ(c.rank, 12);
    EXPECT_EQ(c.inbox, 1);
    EXPECT_EQ(c.route, 8);
    EXPECT_TRUE(!strcmp(c.addr, addr));
    /* SWITCH and BYE carry no address */
    cpvm_ctl_encode(CTL_SWITCH, session, 12, 1, 8, head);
    EXPECT_TRUE(cpvm_ctl_decode(head, 0, NULL, 0x40003, &c));
    EXPECT_EQ(c.kind, CTL_SWITCH);
    /* GAVEUP carries nothing; CONFIRM a message number in the rank's place, any value (the
     * numbers wrap) */
    cpvm_ctl_encode(CTL_GAVEUP, session, 0, 1, 8, head);
    EXPECT_TRUE(cpvm_ctl_decode(head, 0, NULL, 0x40003, &c));
    EXPECT_EQ(c.kind, CTL_GAVEUP);
    cpvm_ctl_encode(CTL_CONFIRM, session, -7, 1, 8, head);
    EXPECT_TRUE(cpvm_ctl_decode(head, 0, NULL, 0x40003, &c));
    EXPECT_EQ(c.kind, CTL_CONFIRM);
    EXPECT_EQ(c.rank, -7);
}

/* The pair's numbers ride in the header: built as 0, set, read back; an image that only
 * confirms (no body, no fragment) is a good image. */
static void image_numbers(void)
{
    char img[CPVM_HDR_BYTES];
    cpvm_image_header(img, 0, 0, 0, 0, 0, 0x40003, 0x40004);
    EXPECT_EQ(cpvm_image_word(img, H_SEQ), 0);
    EXPECT_EQ(cpvm_image_word(img, H_ACK), 0);
    cpvm_image_set_word(img, H_SEQ, -2); /* 0xfffffffe: numbers wrap */
    cpvm_image_set_word(img, H_ACK, 77);
    EXPECT_EQ(cpvm_image_word(img, H_SEQ), -2);
    EXPECT_EQ(cpvm_image_word(img, H_ACK), 77);
    EXPECT_EQ(cpvm_image_word(img, H_SRC), 0x40003);
    EXPECT_EQ(cpvm_image_word(img, H_DST), 0x40004);
    EXPECT_TRUE(cpvm_image_check(img, sizeof img));
}

static void ctl_bad(void)
{
    int head[CPVM_CTL_INTS];
    struct cpvm_ctl c;
    const char *addr = "gm 0 2:2:d1";
    int alen = (int)strlen(addr);
    cpvm_ctl_encode(CTL_ACK, 5, 3, 1, 8, head);
    EXPECT_TRUE(cpvm_ctl_decode(head, alen, addr, 0x40003, &c));
    EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0, &c));                /* no sender */
    EXPECT_TRUE(!cpvm_ctl_decode(head, -1, addr, 0x40003, &c));            /* no length */
    EXPECT_TRUE(!cpvm_ctl_decode(head, CPVM_ADDR_MAX, addr, 0x40003, &c)); /* too long */
    EXPECT_TRUE(!cpvm_ctl_decode(head, 0, NULL, 0x40003, &c)); /* ACK needs an address */
    char nul[] = {'g', 'm', 0, 'x'};
    EXPECT_TRUE(!cpvm_ctl_decode(head, 4, nul, 0x40003, &c)); /* NUL inside */
    head[1] = CPVM_CTL_VERSION + 1;
    EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0x40003, &c)); /* other version */
    int kinds[] = {0, CTL_EXITED, -1, 99};
    for (unsigned i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        cpvm_ctl_encode(kinds[i], 5, 3, 1, 8, head);
        EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0x40003, &c));
    }
    cpvm_ctl_encode(CTL_HELLO, 0, 3, 1, 8, head); /* no session */
    EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0x40003, &c));
    cpvm_ctl_encode(CTL_HELLO, 5, 4096, 1, 8, head); /* rank out of range */
    EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0x40003, &c));
    cpvm_ctl_encode(CTL_HELLO, 5, -1, 1, 8, head);
    EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0x40003, &c));
    cpvm_ctl_encode(CTL_HELLO, 5, 3, 70000, 8, head); /* inbox index out of range */
    EXPECT_TRUE(!cpvm_ctl_decode(head, alen, addr, 0x40003, &c));
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"routed image: good ones, walked", image_good},
        {"routed image: detached fragments", image_detached},
        {"routed image: malformed ones refused", image_bad},
        {"routed image: the pair's numbers", image_numbers},
        {"control message: encode/decode", ctl_roundtrip},
        {"control message: out-of-range fields refused", ctl_bad},
        {NULL, NULL},
    };
    return ct_main("libcorpvm wire", NULL, NULL, tests, 30);
}
