/*
 * Every environment variable (knob) the CoR libraries, libgm-compat and the launchers read,
 * written once for cor-info: name, module, default, meaning. The routes keep theirs in their
 * own tables (the ones they parse with), which cor-info includes. The modules parse their own
 * knobs; apps/tools/cor_info_test.sh compares cor-info's list with the "COR_*" / "GM_*" names found
 * in the sources, both ways, so neither can change without the other.
 */
#ifndef COR_APPS_KNOBS_H
#define COR_APPS_KNOBS_H

/* The core's knobs: X(name, module, default, meaning) */
#define COR_KNOBS_CORE(X)                                                                          \
    X("COR_ROUTE", "core", "udp", "default route (cor-run --route)")                               \
    X("COR_ROUTES", "core", "COR_ROUTE", "comma-separated routes to open")                         \
    X("COR_PORTS", "core", "1", "hard ports per route (1..8, cor-run --ports)")                    \
    X("COR_ROUTE_PATH", "core", "plugin folder", "folders searched first for route plugins")       \
    X("COR_BIND", "core", "loopback", "address hint for routes: loopback, auto or an IP")          \
    X("COR_EAGER_LIMIT", "core", "route's", "message size above which rendezvous is used")         \
    X("COR_CREDITS", "core", "32",                                                                 \
      "eager budget per peer and hard port, in largest eager messages")                            \
    X("COR_CREDIT_THRESHOLD", "core", "credits/2",                                                 \
      "the part of it owed that sends a credit frame")                                             \
    X("COR_SPIN_US", "core", "2000", "how long a waiting task polls before it blocks")             \
    X("COR_MAX_TASKS", "core", "1024", "task slots per domain (64..65536)")                        \
    X("COR_YIELDERS", "core", "16 udp, 2 gm",                                                      \
      "waiting tasks that yield to the spinning one; others sleep")                                \
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
    X("COR_BOOT_ORPHAN", "core", "unset", "keep: survive losing cor-run (else SIGTERM)")

/* The routes' knobs come next, from their own tables: cor/routes/udp/udp_knobs.h and
 * cor/routes/gm/gm_knobs.h. Then the other modules', X(name, module, default, meaning). */
#define COR_KNOBS_OTHER(X)                                                                         \
    X("COR_DSM_CACHE_BYTES", "dsm", "268435456", "cache budget of cached objects")                 \
    X("COR_DSM_SPIN_US", "dsm", "COR_SPIN_US", "how long the DSM service polls")                   \
    X("COR_DSM_SHM", "dsm", "1", "0: no same-host objects and barriers in /dev/shm")               \
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
    X("GM_SEND_TIMEOUT_MS", "libgm", "60000", "how long a send waits for its port to open")        \
    X("GM_RMA", "libgm", "1 on shm, else 0", "1: puts and gets by the provider's RMA")             \
    X("GM_CLOSE_LINGER_MS", "libgm", "2000", "shm: how long gm_close waits for acks")              \
    X("GM_VERBOSE", "libgm", "0", "1: print fabric errors and configuration")

#endif /* COR_APPS_KNOBS_H */
