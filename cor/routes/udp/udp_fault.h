/*
 * Seeded fault injector of CoRudpRoute's socket layer, for loss tests:
 *   COR_UDP_FAULTS="drop=0.05,dup=0.01,reorder=0.02,delay_us=200,seed=42"
 * Each datagram sent is, independently: dropped (drop=P), sent twice (dup=P), or held back
 * for delay_us microseconds and sent after the datagrams that follow it (reorder=P, which
 * both reorders and delays). The random stream is a function of the seed (and the port),
 * so a failing run can be replayed.
 */
#ifndef UDP_FAULT_H
#define UDP_FAULT_H

#include <stdint.h>

struct udp_faults {
    int on;
    double drop, dup, reorder; /* probabilities in [0,1] */
    uint64_t delay_ns;         /* hold time of reordered datagrams */
    uint64_t seed, rng;
    uint64_t dropped, duplicated, held; /* what was done, for tests */
};

enum udp_fault_action { UDP_FX_SEND, UDP_FX_DROP, UDP_FX_DUP, UDP_FX_HOLD };

/* Parses a spec (NULL or "" = off). Returns 0, or -1 on a malformed spec. */
int udp_faults_parse(const char *spec, struct udp_faults *f);
/* Mixes a per-port value into the seed so two ports of one process differ. */
void udp_faults_reseed(struct udp_faults *f, uint64_t salt);
/* Decides the fate of the next datagram. */
int udp_faults_decide(struct udp_faults *f);

#endif
