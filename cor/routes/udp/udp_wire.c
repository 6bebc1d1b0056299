/* CoRudpRoute wire format: encoding and the (fuzzed) parser. Layout in udp_wire.h. */
#include "udp_wire.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get64(const uint8_t *p)
{
    return get32(p) | ((uint64_t)get32(p + 4) << 32);
}

void udp_wire_put(uint8_t *out, const struct udp_hdr *h)
{
    put32(out + 0, UDP_WIRE_MAGIC);
    out[4] = UDP_WIRE_VERSION;
    out[5] = h->type;
    put16(out + 6, h->flags);
    put64(out + 8, h->cookie);
    put32(out + 16, h->src);
    put32(out + 20, h->dst);
    put32(out + 24, h->ack);
    put64(out + 28, h->sack);
    put32(out + 36, h->seq);
    put32(out + 40, h->frame_len);
    put32(out + 44, h->frag_off);
    put32(out + 48, h->len);
    put32(out + 52, h->tsval);
    put32(out + 56, h->tsecr);
}

int udp_wire_parse(const uint8_t *buf, size_t n, size_t frame_max, struct udp_hdr *h)
{
    if (!buf || n < UDP_HDR_LEN) return UDP_W_SHORT;
    if (get32(buf) != UDP_WIRE_MAGIC || buf[4] != UDP_WIRE_VERSION) return UDP_W_MAGIC;
    h->type = buf[5];
    h->flags = get16(buf + 6);
    h->cookie = get64(buf + 8);
    h->src = get32(buf + 16);
    h->dst = get32(buf + 20);
    h->ack = get32(buf + 24);
    h->sack = get64(buf + 28);
    h->seq = get32(buf + 36);
    h->frame_len = get32(buf + 40);
    h->frag_off = get32(buf + 44);
    h->len = get32(buf + 48);
    h->tsval = get32(buf + 52);
    h->tsecr = get32(buf + 56);
    if ((h->type != UDP_T_DATA && h->type != UDP_T_ACK) || (h->flags & ~UDP_F_ALL) ||
        (h->type == UDP_T_DATA && (h->flags & UDP_F_PING)))
        return UDP_W_TYPE;
    if (n > UDP_DGRAM_MAX || (size_t)h->len != n - UDP_HDR_LEN) return UDP_W_LEN;
    if (h->type == UDP_T_ACK)
        return (h->len || h->frame_len || h->frag_off || h->seq) ? UDP_W_FRAG : UDP_W_OK;
    if (h->frame_len > frame_max) return UDP_W_FRAME;
    /* 64-bit sums: no overflow whatever the fields say. */
    if ((uint64_t)h->frag_off + h->len > h->frame_len) return UDP_W_FRAG;
    if (h->len == 0 && h->frame_len != 0) return UDP_W_FRAG;
    return UDP_W_OK;
}

int udp_wire_peek(const uint8_t *buf, size_t n, uint64_t *cookie, uint32_t *src, uint32_t *dst)
{
    if (!buf || n < UDP_HDR_LEN) return UDP_W_SHORT;
    if (get32(buf) != UDP_WIRE_MAGIC || buf[4] != UDP_WIRE_VERSION) return UDP_W_MAGIC;
    *cookie = get64(buf + 8);
    *src = get32(buf + 16);
    *dst = get32(buf + 20);
    return UDP_W_OK;
}
