/* Environment knobs of CoRudpRoute (listed in README.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "udp_port.h"

static int knob(const char *name, unsigned long long lo, unsigned long long hi,
                unsigned long long def, unsigned long long *out)
{
    const char *v = getenv(name);
    *out = def;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (*v == '-' || errno || *end || x < lo || x > hi) {
        udp_log("%s=%s: expected an integer in [%llu, %llu]", name, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int udp_knobs_read(struct udp_knobs *k)
{
    unsigned long long v;
    int bad = 0;
    memset(k, 0, sizeof(*k));
    bad |= knob("COR_UDP_SNDBUF", 0, 1u << 30, 4u << 20, &v);
    k->sndbuf = (int)v;
    bad |= knob("COR_UDP_RCVBUF", 0, 1u << 30, 4u << 20, &v);
    k->rcvbuf = (int)v;
    bad |= knob("COR_UDP_WINDOW", 16, 16384, 512, &v);
    if (v & (v - 1)) {
        udp_log("COR_UDP_WINDOW=%llu: must be a power of two", v);
        bad = 1;
    }
    k->window = (uint32_t)v;
    bad |= knob("COR_UDP_WINDOW_BYTES", 65536, 1u << 30, 2u << 20, &v);
    k->window_bytes = v;
    bad |= knob("COR_UDP_QUEUE_BYTES", 0, 1u << 30, 4u << 20, &v);
    k->queue_bytes = v;
    bad |= knob("COR_UDP_QUEUE_FRAMES", 1, 1u << 20, 4096, &v);
    k->queue_frames = (uint32_t)v;
    bad |= knob("COR_UDP_RTO_MIN_US", 50, 10000000, 2000, &v);
    k->rto_min_ns = v * 1000;
    bad |= knob("COR_UDP_RTO_MAX_US", 50, 60000000, 500000, &v);
    k->rto_max_ns = v * 1000;
    bad |= knob("COR_UDP_RTO_INIT_US", 50, 60000000, 10000, &v);
    k->rto_init_ns = v * 1000;
    if (k->rto_min_ns > k->rto_max_ns) {
        udp_log("COR_UDP_RTO_MIN_US above COR_UDP_RTO_MAX_US");
        bad = 1;
    }
    bad |= knob("COR_UDP_DEAD_MS", 10, 86400000, 5000, &v);
    k->dead_ns = v * 1000000;
    bad |= knob("COR_UDP_DGRAM", 0, UDP_DGRAM_MAX, 0, &v);
    if (v && v < 576) {
        udp_log("COR_UDP_DGRAM=%llu: at least 576", v);
        bad = 1;
    }
    k->dgram = (uint32_t)v;
    bad |= knob("COR_UDP_ACK_DELAY_US", 0, 1000000, 50, &v);
    k->ack_delay_ns = v * 1000;
    bad |= knob("COR_UDP_ACK_EVERY", 1, 1u << 16, 32, &v);
    k->ack_every = (uint32_t)v;
    bad |= knob("COR_UDP_BATCH", 1, UDP_BATCH_MAX, 16, &v);
    k->batch = (uint32_t)v;
    /* Eager up to what, with the core's header, still fits one loopback datagram: larger
     * messages pay a rendezvous round trip, smaller ones nothing extra. */
    bad |= knob("COR_UDP_EAGER", 0, UDP_FRAME_MAX - 4096, 65280, &v);
    k->eager_limit = v;
    k->bind = getenv("COR_UDP_BIND");
    if (k->bind && !*k->bind)
        k->bind = NULL;
    k->faults = getenv("COR_UDP_FAULTS");
    return bad ? -1 : 0;
}
