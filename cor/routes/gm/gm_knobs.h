/*
 * The environment knobs of CoRgmRoute, once: the route reads them with this table (gm_env.c,
 * through rutil_knobs_read) and cor-info prints it. README.md explains each.
 * Rows: X(ID, name, kind, default, lo, hi, default as cor-info shows it ("" = the number),
 * meaning); see rutil.h.
 */
#ifndef GM_KNOBS_H
#define GM_KNOBS_H

#define GM_KNOBS(X)                                                                                \
    X(CLASS, "COR_GM_CLASS", UINT, 15, 12, 20, "", "GM size class of large buffers (12..20)")      \
    X(SMALL_CLASS, "COR_GM_SMALL_CLASS", UINT, 11, 0, 14, "",                                      \
      "GM size class of small buffers, 0 = none")                                                  \
    X(CREDITS, "COR_GM_CREDITS", UINT, 64, 2, 200, "", "large receive buffers per peer")           \
    X(SMALL_CREDITS, "COR_GM_SMALL_CREDITS", UINT, 64, 2, 200, "",                                 \
      "small receive buffers per peer")                                                            \
    X(EAGER, "COR_GM_EAGER", UINT, 16384, 64, 1u << 20, "", "eager limit the route reports")       \
    X(TX_BYTES, "COR_GM_TX_BYTES", UINT, 4194304, 1u << 16, 1u << 30, "", "DMA send ring bytes")   \
    X(TX_FRAMES, "COR_GM_TX_FRAMES", UINT, 1024, 64, 1u << 20, "",                                 \
      "frames accepted and not yet completed")                                                     \
    X(REGCACHE, "COR_GM_REGCACHE", UINT, 64, 0, 1u << 16, "", "unused memory registrations kept")  \
    X(NODE_ID, "COR_GM_NODE_ID", STR, 0, 0, 0, "unset",                                            \
      "rank (node = rank+1 of a user map) or a node id")                                           \
    X(PROVIDER, "COR_GM_PROVIDER", STR, 0, 0, 0, "unset",                                          \
      "tcp: libgm-compat over TCP, endpoints at run time")                                         \
    X(STATS, "COR_GM_STATS", UINT, 0, 0, 1, "", "1: print counters per port at close")             \
    X(DEAD_MS, "COR_GM_DEAD_MS", UINT, 5000, 10, 86400000, "",                                     \
      "silence of a peer we wait for (frames held, an answer): dead")

#endif /* GM_KNOBS_H */
