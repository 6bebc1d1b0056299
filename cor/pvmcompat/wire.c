/* Checks and builds what travels: routed images and control messages (see wire.h). */
#include <string.h>

#include "wire.h"

#define COR_MAX_DOMAINS_ 4096 /* cor.h's COR_MAX_DOMAINS, kept here so wire.c stands alone */
#define COR_MAX_INDEX_ 65535

static int word(const void *img, int i)
{
    int v;
    memcpy(&v, (const char *)img + (size_t)i * sizeof v, sizeof v);
    return v;
}

static void set_word(void *img, int i, int v)
{
    memcpy((char *)img + (size_t)i * sizeof v, &v, sizeof v);
}

/* Sum of the fragment lengths, or -1 if they overrun len or leave bytes over. */
static long body_length(const void *img, size_t len)
{
    if (len < (size_t)CPVM_HDR_BYTES || len > (size_t)INT32_MAX) return -1;
    size_t off = CPVM_HDR_BYTES;
    long body = 0;
    while (off < len) {
        int flen;
        if (len - off < sizeof flen) return -1;
        memcpy(&flen, (const char *)img + off, sizeof flen);
        off += sizeof flen;
        if (flen < 0 || (size_t)flen > len - off) return -1;
        off += (size_t)flen;
        body += flen;
    }
    return body;
}

bool cpvm_image_check(const void *img, size_t len)
{
    long body = body_length(img, len);
    return body >= 0 && word(img, H_LEN) == body && word(img, H_ENC) != CPVM_ENC_INPLACE;
}

bool cpvm_image_seal(void *img, size_t len, int ctx, int tag, int src, int dst, int dsig)
{
    long body = body_length(img, len);
    if (body < 0) return false;
    set_word(img, H_CTX, ctx);
    set_word(img, H_TAG, tag);
    set_word(img, H_SRC, src);
    set_word(img, H_DST, dst);
    /* InPlace data was read just now by pkmesg: it is native bytes now, and libpvm3 never
     * computed its length. */
    if (word(img, H_ENC) == CPVM_ENC_INPLACE) {
        set_word(img, H_ENC, dsig);
        set_word(img, H_LEN, (int)body);
    }
    return word(img, H_LEN) == body;
}

int cpvm_image_src(const void *img)
{
    return word(img, H_SRC);
}

bool cpvm_ctl_decode(const int head[CPVM_CTL_INTS], int alen, const char *addr, int src_tid,
                     struct cpvm_ctl *c)
{
    memset(c, 0, sizeof *c);
    if (head[1] != CPVM_CTL_VERSION || head[0] < CTL_HELLO || head[0] > CTL_BYE || src_tid <= 0 ||
        alen < 0 || alen >= CPVM_ADDR_MAX)
        return false;
    c->kind = head[0];
    c->tid = src_tid;
    c->session = (uint64_t)(uint32_t)head[2] << 32 | (uint32_t)head[3];
    c->rank = head[4];
    c->inbox = head[5];
    c->route = head[6];
    /* HELLO and ACK name a domain to connect to: everything must be in range. */
    if ((c->kind == CTL_HELLO || c->kind == CTL_ACK) &&
        (c->session == 0 || c->rank < 0 || c->rank >= COR_MAX_DOMAINS_ || c->inbox < 0 ||
         c->inbox > COR_MAX_INDEX_ || alen == 0 || !addr || memchr(addr, '\0', (size_t)alen)))
        return false;
    if (alen) memcpy(c->addr, addr, (size_t)alen);
    c->addr[alen] = '\0';
    return true;
}

void cpvm_ctl_encode(int kind, uint64_t session, int rank, int inbox, int route,
                     int head[CPVM_CTL_INTS])
{
    head[0] = kind;
    head[1] = CPVM_CTL_VERSION;
    head[2] = (int)(uint32_t)(session >> 32);
    head[3] = (int)(uint32_t)session;
    head[4] = rank;
    head[5] = inbox;
    head[6] = route;
}
