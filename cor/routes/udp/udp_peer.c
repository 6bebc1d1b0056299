/*
 * Per-peer protocol state of CoRudpRoute, made at first contact (udp_port.h): a session of N
 * domains costs each port N small address records, and a udp_peer with its windows only for
 * the peers it actually talks to (docs/scale.md has the arithmetic).
 */
#include <stdlib.h>

#include "udp_port.h"

struct udp_peer *udp_peer_get(struct cor_rport *p, cor_peer_t rank)
{
    struct udp_peer *peer = p->peers[rank];
    if (peer || p->dests[rank].state != UDP_PEER_UP) return peer;
    peer = calloc(1, sizeof(*peer));
    if (!peer) return NULL;
    peer->rank = rank;
    peer->dest = &p->dests[rank];
    peer->heard_ns = rutil_now_ns(); /* silence is counted from first contact */
    /* The receive budget allows a whole send window of early datagrams twice over. */
    if (udp_swin_init(&peer->sw, p->k.window, p->k.rto_init_ns, p->k.rto_min_ns, p->k.rto_max_ns) !=
            0 ||
        udp_rwin_init(&peer->rw, p->k.window, 2 * p->k.window_bytes + UDP_DGRAM_MAX) != 0) {
        udp_peer_free(peer);
        return NULL;
    }
    udp_swin_rto_hint(&peer->sw, p->rto_hint); /* how slow this host's peers answer now */
    p->peers[rank] = peer;
    p->active[p->nactive++] = rank;
    return peer;
}

void udp_peer_free(struct udp_peer *peer)
{
    if (!peer) return;
    udp_swin_free(&peer->sw);
    udp_rwin_free(&peer->rw);
    udp_reasm_reset(&peer->ra);
    free(peer);
}

void udp_peer_readmit(struct cor_rport *p, cor_peer_t rank, const struct sockaddr_in *sa,
                      uint32_t dgram)
{
    struct udp_peer *old = p->peers[rank];
    if (old) {
        /* Its frames were finished when it was given up (udp_fail_peer); the windows too. */
        for (uint32_t i = 0; i < p->nactive; i++)
            if (p->active[i] == rank) {
                p->active[i] = p->active[--p->nactive];
                break;
            }
        p->peers[rank] = NULL;
        udp_peer_free(old);
    }
    /* A failure of the earlier occupant not reported yet must not reach the core now. */
    rutil_fails_forget(&p->base.fails, rank);
    struct udp_dest *d = &p->dests[rank];
    d->sa = *sa;
    d->dgram = dgram;
    d->state = UDP_PEER_UP;
}
