/* Environment knobs of CoRudpRoute: the table is udp_knobs.h, the parser rutil_knobs_read. */
#include <string.h>

#include "udp_knobs.h"
#include "udp_port.h"

const cor_knob_t udp_knob_table[] = {UDP_KNOBS(RUTIL_KNOB_ROW)};
enum { UDP_KNOBS(RUTIL_KNOB_ENUM) NKNOBS };

int udp_knobs_read(struct udp_knobs *k)
{
    struct rutil_knob_val v[NKNOBS];
    int bad = rutil_knobs_read(UDP_LOG_WHO, udp_knob_table, NKNOBS, v) != 0;
    memset(k, 0, sizeof(*k));
    k->sndbuf = (int)v[K_SNDBUF].u;
    k->rcvbuf = (int)v[K_RCVBUF].u;
    k->window = (uint32_t)v[K_WINDOW].u;
    if (k->window & (k->window - 1)) {
        udp_log("COR_UDP_WINDOW=%u: must be a power of two", k->window);
        bad = 1;
    }
    k->window_bytes = v[K_WINDOW_BYTES].u;
    k->queue_bytes = v[K_QUEUE_BYTES].u;
    k->queue_frames = (uint32_t)v[K_QUEUE_FRAMES].u;
    k->rto_min_ns = v[K_RTO_MIN_US].u * 1000;
    k->rto_max_ns = v[K_RTO_MAX_US].u * 1000;
    k->rto_init_ns = v[K_RTO_INIT_US].u * 1000;
    if (k->rto_min_ns > k->rto_max_ns) {
        udp_log("COR_UDP_RTO_MIN_US above COR_UDP_RTO_MAX_US");
        bad = 1;
    }
    k->dead_ns = v[K_DEAD_MS].u * 1000000;
    k->probe_ns = v[K_PROBE_MS].u * 1000000;
    k->dgram = (uint32_t)v[K_DGRAM].u;
    if (k->dgram && k->dgram < 576) {
        udp_log("COR_UDP_DGRAM=%u: at least 576", k->dgram);
        bad = 1;
    }
    k->ack_delay_ns = v[K_ACK_DELAY_US].u * 1000;
    k->ack_every = (uint32_t)v[K_ACK_EVERY].u;
    k->batch = (uint32_t)v[K_BATCH].u;
    /* Eager up to what, with the core's header, still fits one loopback datagram: larger
     * messages pay a rendezvous round trip, smaller ones nothing extra. */
    k->eager_limit = v[K_EAGER].u;
    k->bind = v[K_BIND].s && *v[K_BIND].s ? v[K_BIND].s : NULL;
    k->faults = v[K_FAULTS].s;
    k->stats = (int)v[K_STATS].u;
    return bad ? -1 : 0;
}
