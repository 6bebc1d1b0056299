/*
 * The environment variables (knobs) of libcordsm, libcorpvm, cor-pvm and libgm-compat, written
 * once for cor-info: name, module, default, meaning. The core and the routes keep theirs in
 * their own tables (the ones they parse with), which cor-info reads at run time. The modules parse
 * their own knobs; apps/tools/cor_info_test.sh compares cor-info's list with the "COR_*" / "GM_*"
 * names found in the sources, both ways, so neither can change without the other.
 */
#ifndef COR_APPS_KNOBS_H
#define COR_APPS_KNOBS_H

/* The knobs of the modules that have no table of their own yet, X(name, module, default,
 * meaning). The core's come from libcor (cor_knobs, cor/core/knobs.h) and each route's from
 * its plugin (cor_route_knobs: the table its ops point to). */
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
    X("COR_LAUNCH_TRACE", "launch_cor", "unset", "1: print the time of each cor_init step")        \
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
