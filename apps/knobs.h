/*
 * Every environment variable (knob) the CoR libraries, routes, libgm-compat and the launchers
 * read, written once for cor-info: name, module, default, meaning. The modules parse their own
 * knobs; tests/apps/cor_info.sh compares this list with the "COR_*" / "GM_*" names found in
 * their sources, both ways, so neither can change without the other.
 */
#ifndef COR_APPS_KNOBS_H
#define COR_APPS_KNOBS_H

/* X(name, module, default, meaning) */
#define COR_KNOBS(X)                                                                               \
    X("COR_ROUTE", "core", "udp", "default route (cor-run --route)")                               \
    X("COR_ROUTES", "core", "COR_ROUTE", "comma-separated routes to open")                         \
    X("COR_PORTS", "core", "1", "hard ports per route (1..8, cor-run --ports)")                    \
    X("COR_ROUTE_PATH", "core", "plugin folder", "folders searched first for route plugins")       \
    X("COR_BIND", "core", "loopback", "address hint for routes: loopback, auto or an IP")          \
    X("COR_EAGER_LIMIT", "core", "route's", "message size above which rendezvous is used")         \
    X("COR_CREDITS", "core", "32", "eager credits per peer and hard port")                         \
    X("COR_CREDIT_THRESHOLD", "core", "credits/2", "owed credits that send a credit frame")        \
    X("COR_SPIN_US", "core", "2000", "how long a waiting task polls before it blocks")             \
    X("COR_MAX_TASKS", "core", "1024", "task slots per domain (64..65536)")                        \
    X("COR_LINGER_US", "core", "1000", "listeners keep off the sockets after a task's spin")       \
    X("COR_SERVICE_SLICE_US", "core", "100", "time slice of serving threads; 0 leaves them alone") \
    X("COR_STRIPE_MIN", "core", "524288", "rendezvous data striped over the hard ports")           \
    X("COR_RMA", "core", "1", "0: no remote writes for rendezvous")                                \
    X("COR_DMA_BUFFERS", "core", "1", "0: getBuffer from the heap, not route memory")              \
    X("COR_RAW", "core", "unset", "1: open a raw hard port per route (cor/raw.h)")                 \
    X("COR_BOOT", "core", "set by cor-run", "rendezvous socket of the session")                    \
    X("COR_RANK", "core", "set by cor-run", "this domain's number")                                \
    X("COR_SIZE", "core", "set by cor-run", "domains in the session")                              \
    X("COR_SESSION", "core", "set by cor-run", "session cookie, 16 hex digits")                    \
    X("COR_BOOT_TIMEOUT", "core", "120", "seconds a domain waits for the session to form")         \
    X("COR_BOOT_ORPHAN", "core", "unset", "keep: survive losing cor-run (else SIGTERM)")           \
    X("COR_UDP_BIND", "udp", "COR_BIND", "loopback, auto or an IPv4 address")                      \
    X("COR_UDP_SNDBUF", "udp", "4194304", "socket send buffer bytes")                              \
    X("COR_UDP_RCVBUF", "udp", "4194304", "socket receive buffer bytes")                           \
    X("COR_UDP_WINDOW", "udp", "512", "datagrams in flight per peer (power of two)")               \
    X("COR_UDP_WINDOW_BYTES", "udp", "2097152", "payload bytes in flight per peer")                \
    X("COR_UDP_QUEUE_BYTES", "udp", "4194304", "bytes queued per peer before EAGAIN")              \
    X("COR_UDP_QUEUE_FRAMES", "udp", "4096", "frames queued per peer before EAGAIN")               \
    X("COR_UDP_RTO_MIN_US", "udp", "2000", "smallest retransmission timeout")                      \
    X("COR_UDP_RTO_MAX_US", "udp", "500000", "largest retransmission timeout")                     \
    X("COR_UDP_RTO_INIT_US", "udp", "10000", "first retransmission timeout")                       \
    X("COR_UDP_DEAD_MS", "udp", "5000", "silence with data outstanding before peer death")         \
    X("COR_UDP_DGRAM", "udp", "by interface", "datagram size, header included (576..65507)")       \
    X("COR_UDP_ACK_DELAY_US", "udp", "50", "how long an ack waits for a reply to carry it")        \
    X("COR_UDP_ACK_EVERY", "udp", "32", "datagrams received before an ack goes at once")           \
    X("COR_UDP_BATCH", "udp", "16", "datagrams per recvmmsg")                                      \
    X("COR_UDP_EAGER", "udp", "65280", "eager limit the route reports")                            \
    X("COR_UDP_FAULTS", "udp", "off", "drop=P,dup=P,reorder=P,delay_us=N,seed=N")                  \
    X("COR_UDP_STATS", "udp", "off", "print per-port counters at close")                           \
    X("COR_GM_CLASS", "gm", "15", "GM size class of large buffers (12..20)")                       \
    X("COR_GM_SMALL_CLASS", "gm", "11", "GM size class of small buffers, 0 = none")                \
    X("COR_GM_CREDITS", "gm", "64", "large receive buffers per peer")                              \
    X("COR_GM_SMALL_CREDITS", "gm", "64", "small receive buffers per peer")                        \
    X("COR_GM_EAGER", "gm", "16384", "eager limit the route reports")                              \
    X("COR_GM_TX_BYTES", "gm", "4194304", "DMA send ring bytes")                                   \
    X("COR_GM_TX_FRAMES", "gm", "1024", "frames accepted and not yet completed")                   \
    X("COR_GM_REGCACHE", "gm", "64", "unused memory registrations kept")                           \
    X("COR_GM_NODE_ID", "gm", "unset", "rank (node = rank+1 of a user map) or a node id")          \
    X("COR_GM_PROVIDER", "gm", "unset", "tcp: libgm-compat over TCP, endpoints at run time")       \
    X("COR_GM_STATS", "gm", "0", "1: print counters per port at close")                            \
    X("COR_GM_DEAD_MS", "gm", "5000", "silence while frames wait for credits: peer dead")          \
    X("COR_DSM_CACHE_BYTES", "dsm", "268435456", "cache budget of cached objects")                 \
    X("COR_DSM_SPIN_US", "dsm", "COR_SPIN_US", "how long the DSM service polls")                   \
    X("COR_PVM_ROUTE", "pvm", "none", "myrinet/gm, udp or none: a task's route")                   \
    X("COR_PVM_STATS", "pvm", "0", "1: print routed and PVM-path counts at pvm_exit")              \
    X("COR_PVM_DOMAINS", "pvm", "64", "most tasks of one virtual machine that take a route")       \
    X("COR_PVM_CONNECT_MS", "pvm", "1000", "how long a first message waits for the peer")          \
    X("COR_PVM_SPIN_US", "pvm", "2000", "how long a waiting receive polls before it blocks")       \
    X("COR_PVM_DETACH_MIN", "pvm", "32768", "bytes from which a fragment travels detached")        \
    X("COR_PVM_KEEP_MEMORY", "pvm", "1", "0: leave glibc's trimming thresholds alone")             \
    X("COR_PVM_LIB", "cor-pvm", "installed", "the libcorpvm.so cor-pvm preloads")                  \
    X("GM_NODE_MAP", "libgm", "unset", "path of the node map file")                                \
    X("GM_NODES", "libgm", "unset", "the node map inline, entries separated by ';'")               \
    X("GM_NODE_ID", "libgm", "from host name", "this process's node id in the map")                \
    X("GM_HOST_NAME", "libgm", "gethostname()", "this host's name in the map")                     \
    X("GM_PROVIDER", "libgm", "shm or tcp;ofi_rxm", "libfabric provider")                          \
    X("GM_PORT_BASE", "libgm", "27000", "TCP port of GM port 0")                                   \
    X("GM_SHM_NAMESPACE", "libgm", "gm<uid>", "prefix of shm endpoint names")                      \
    X("GM_SEND_TIMEOUT_MS", "libgm", "1000", "how long a send may fail to reach its port")         \
    X("GM_RMA", "libgm", "1 on shm, else 0", "1: puts and gets by the provider's RMA")             \
    X("GM_CLOSE_LINGER_MS", "libgm", "2000", "shm: how long gm_close waits for acks")              \
    X("GM_VERBOSE", "libgm", "0", "1: print fabric errors and configuration")

#endif /* COR_APPS_KNOBS_H */
