/*
 * CoRudpRoute wire format: one fixed header in front of every datagram, little-endian.
 *
 *   off size field
 *    0   4  magic "CoRu"
 *    4   1  version (UDP_WIRE_VERSION)
 *    5   1  type: UDP_T_DATA (carries a fragment of a frame) or UDP_T_ACK (header only)
 *    6   2  flags: UDP_F_ACKREQ (sender goes idle: ack soon), UDP_F_ACKNOW (ack at once),
 *           UDP_F_PING (ACK only: answer with an ACK at once; a peer awaited, udp_await.c)
 *    8   8  session cookie
 *   16   4  source rank
 *   20   4  destination rank
 *   24   4  ack: next datagram sequence the sender expects from the destination (cumulative)
 *   28   8  sack: bit i set = datagram ack+1+i has arrived (selective acknowledgement)
 *   36   4  seq: this datagram's sequence number (DATA; 0 in ACK)
 *   40   4  frame_len: total length of the frame this fragment belongs to
 *   44   4  frag_off: offset of this fragment in the frame
 *   48   4  len: payload bytes after the header (must equal datagram length - header)
 *   52   4  tsval: sender's clock (microseconds, wrapping) when this datagram left
 *   56   4  tsecr: a tsval received from the destination, echoed once (0 = none); the
 *           destination measures its round-trip time from it
 *
 * The parser is a pure function of the bytes: everything it accepts is self-consistent and
 * bounded by frame_max, so callers may allocate frame_len bytes after a successful parse.
 */
#ifndef UDP_WIRE_H
#define UDP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define UDP_WIRE_MAGIC 0x75526f43u /* "CoRu" read as little-endian */
#define UDP_WIRE_VERSION 1
#define UDP_HDR_LEN 60
/* Largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP): nothing larger can arrive. */
#define UDP_DGRAM_MAX 65507

enum udp_type { UDP_T_DATA = 1, UDP_T_ACK = 2 };
enum udp_flags { UDP_F_ACKREQ = 1, UDP_F_ACKNOW = 2, UDP_F_PING = 4 };
#define UDP_F_ALL (UDP_F_ACKREQ | UDP_F_ACKNOW | UDP_F_PING)

struct udp_hdr {
    uint8_t type;
    uint16_t flags;
    uint64_t cookie;
    uint32_t src, dst;
    uint32_t ack;
    uint64_t sack;
    uint32_t seq;
    uint32_t frame_len, frag_off, len;
    uint32_t tsval, tsecr;
};

/* Why a datagram was refused (0 = accepted). */
enum udp_wire_err {
    UDP_W_OK = 0,
    UDP_W_SHORT, /* shorter than a header */
    UDP_W_MAGIC, /* not ours (magic or version) */
    UDP_W_TYPE,  /* unknown type or flags, or a PING that is not an ACK */
    UDP_W_LEN,   /* len field disagrees with the datagram length */
    UDP_W_FRAME, /* frame_len above frame_max */
    UDP_W_FRAG,  /* fragment does not fit its frame, or an empty fragment of a non-empty frame */
};

/* Writes h into out[0..UDP_HDR_LEN). */
void udp_wire_put(uint8_t *out, const struct udp_hdr *h);
/* Parses a datagram of n bytes; on UDP_W_OK *h is filled and the payload is buf+UDP_HDR_LEN. */
int udp_wire_parse(const uint8_t *buf, size_t n, size_t frame_max, struct udp_hdr *h);

/* The first bytes of a datagram (at least a header's worth; the rest may be cut off, as in
 * what an ICMP error gives back): its cookie and ranks, if magic and version are ours. */
int udp_wire_peek(const uint8_t *buf, size_t n, uint64_t *cookie, uint32_t *src, uint32_t *dst);

/* Sequence-number arithmetic that survives wrap-around. */
static inline int32_t udp_seq_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}
static inline int udp_seq_lt(uint32_t a, uint32_t b)
{
    return udp_seq_diff(a, b) < 0;
}
static inline int udp_seq_le(uint32_t a, uint32_t b)
{
    return udp_seq_diff(a, b) <= 0;
}

#endif
