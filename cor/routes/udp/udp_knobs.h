/*
 * The environment knobs of CoRudpRoute, once: the route reads them with this table
 * (udp_knobs.c, through rutil_knobs_read) and cor-info prints it. README.md explains each.
 * Rows: X(ID, name, kind, default, lo, hi, default as cor-info shows it ("" = the number),
 * meaning); see rutil.h. Bounds are only evaluated inside the route.
 */
#ifndef UDP_KNOBS_H
#define UDP_KNOBS_H

#define UDP_KNOBS(X)                                                                               \
    X(BIND, "COR_UDP_BIND", STR, 0, 0, 0, "COR_BIND", "loopback, auto or an IPv4 address")         \
    X(SNDBUF, "COR_UDP_SNDBUF", UINT, 4194304, 0, 1u << 30, "", "socket send buffer bytes")        \
    X(RCVBUF, "COR_UDP_RCVBUF", UINT, 4194304, 0, 1u << 30, "", "socket receive buffer bytes")     \
    X(WINDOW, "COR_UDP_WINDOW", UINT, 512, 16, 16384, "",                                          \
      "datagrams in flight per peer (power of two)")                                               \
    X(WINDOW_BYTES, "COR_UDP_WINDOW_BYTES", UINT, 2097152, 65536, 1u << 30, "",                    \
      "payload bytes in flight per peer")                                                          \
    X(QUEUE_BYTES, "COR_UDP_QUEUE_BYTES", UINT, 4194304, 0, 1u << 30, "",                          \
      "bytes queued per peer before EAGAIN")                                                       \
    X(QUEUE_FRAMES, "COR_UDP_QUEUE_FRAMES", UINT, 4096, 1, 1u << 20, "",                           \
      "frames queued per peer before EAGAIN")                                                      \
    X(RTO_MIN_US, "COR_UDP_RTO_MIN_US", UINT, 2000, 50, 10000000, "",                              \
      "smallest retransmission timeout")                                                           \
    X(RTO_MAX_US, "COR_UDP_RTO_MAX_US", UINT, 500000, 50, 60000000, "",                            \
      "largest retransmission timeout")                                                            \
    X(RTO_INIT_US, "COR_UDP_RTO_INIT_US", UINT, 10000, 50, 60000000, "",                           \
      "first retransmission timeout")                                                              \
    X(DEAD_MS, "COR_UDP_DEAD_MS", UINT, 60000, 10, 86400000, "",                                   \
      "silence with data outstanding or an awaited peer's pings unanswered before peer death "     \
      "(closed port: 0.2 s)")                                                                      \
    X(PROBE_MS, "COR_UDP_PROBE_MS", UINT, 1000, 0, 86400000, "",                                   \
      "silence before a peer's port is probed (0: never)")                                         \
    X(DGRAM, "COR_UDP_DGRAM", UINT, 0, 0, UDP_DGRAM_MAX, "by interface",                           \
      "datagram size, header included (576..65507)")                                               \
    X(ACK_DELAY_US, "COR_UDP_ACK_DELAY_US", UINT, 50, 0, 1000000, "",                              \
      "how long an ack waits for a reply to carry it")                                             \
    X(ACK_EVERY, "COR_UDP_ACK_EVERY", UINT, 32, 1, 1u << 16, "",                                   \
      "datagrams received before an ack goes at once")                                             \
    X(BATCH, "COR_UDP_BATCH", UINT, 16, 1, UDP_BATCH_MAX, "", "datagrams per recvmmsg")            \
    X(EAGER, "COR_UDP_EAGER", UINT, 65280, 0, UDP_FRAME_MAX - 4096, "",                            \
      "eager limit the route reports")                                                             \
    X(FAULTS, "COR_UDP_FAULTS", STR, 0, 0, 0, "off", "drop=P,dup=P,reorder=P,delay_us=N,seed=N")   \
    X(STATS, "COR_UDP_STATS", SET, 0, 0, 0, "off", "print per-port counters at close")

#endif /* UDP_KNOBS_H */
