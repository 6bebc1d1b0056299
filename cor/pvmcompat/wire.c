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

bool cpvm_image_next(const void *img, size_t len, size_t *pos, struct cpvm_frag *f)
{
    if (*pos > len || len - *pos < sizeof(int)) return false;
    int n;
    memcpy(&n, (const char *)img + *pos, sizeof n);
    size_t at = *pos + sizeof n;
    if (n == INT32_MIN || (n > 0 && (size_t)n > len - at)) return false; /* malformed: stop */
    *f = (struct cpvm_frag){at, n < 0 ? -n : n, n < 0};
    *pos = at + (n > 0 ? (size_t)n : 0);
    return true;
}

/* A malformed entry stops the walk short of len. */
bool cpvm_image_check(const void *img, size_t len)
{
    if (len < (size_t)CPVM_HDR_BYTES || len > (size_t)INT32_MAX) return false;
    size_t pos = CPVM_HDR_BYTES;
    long body = 0;
    int detached = 0;
    struct cpvm_frag f;
    while (cpvm_image_next(img, len, &pos, &f)) {
        if (f.detached && ++detached > CPVM_DETACH_MAX) return false;
        if ((body += f.len) > INT32_MAX) return false;
    }
    return pos == len && cpvm_image_word(img, H_LEN) == body &&
           cpvm_image_word(img, H_ENC) != CPVM_ENC_INPLACE;
}

int cpvm_image_word(const void *img, int field)
{
    return word(img, field);
}

void cpvm_image_set_word(void *img, int field, int value)
{
    memcpy((char *)img + (size_t)field * sizeof value, &value, sizeof value);
}

void cpvm_image_header(void *img, int body, int ctx, int tag, int wid, int enc, int src, int dst)
{
    int h[H_INTS] = {[H_LEN] = body, [H_CTX] = ctx, [H_TAG] = tag, [H_WID] = wid,
                     [H_ENC] = enc,  [H_CRC] = 0,   [H_SRC] = src, [H_DST] = dst};
    memcpy(img, h, sizeof h);
}

size_t cpvm_image_entry(const void *data, int len)
{
    return sizeof(int) + (data ? (size_t)len : 0);
}

size_t cpvm_image_open(void *img, size_t off, int len)
{
    memcpy((char *)img + off, &len, sizeof len);
    return off + sizeof len;
}

size_t cpvm_image_put(void *img, size_t off, const void *data, int len)
{
    if (!data) return cpvm_image_open(img, off, -len);
    off = cpvm_image_open(img, off, len);
    if (len) memcpy((char *)img + off, data, (size_t)len);
    return off + (size_t)len;
}

bool cpvm_ctl_decode(const int head[CPVM_CTL_INTS], int alen, const char *addr, int src_tid,
                     struct cpvm_ctl *c)
{
    memset(c, 0, sizeof *c);
    if (head[1] != CPVM_CTL_VERSION || head[0] < CTL_HELLO || head[0] > CTL_CONFIRM ||
        src_tid <= 0 || alen < 0 || alen >= CPVM_ADDR_MAX)
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
