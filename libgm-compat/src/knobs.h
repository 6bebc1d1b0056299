/*
 * libgm-compat's knobs, once: X(ID, name, TYPE, default, lo, hi, "shown default", "meaning").
 * TYPE NUMBER is a whole number in [lo, hi], read with gmx_knob_uint (a bad value is reported
 * and the default used); STRING is read where it is used with gmx_knob_str. The table is
 * public through gm_compat_knobs() (gm_compat.h): cor-info lists it and the README's table is
 * generated from it. A new knob is one row here.
 */
#ifndef GMX_KNOBS_H
#define GMX_KNOBS_H

/* GM_COMPAT_TRANSPORT when unset or empty (transport.c reads it; the table shows it). */
#define GMX_TRANSPORT_DEFAULT "auto"

#define GMX_KNOBS(X)                                                                               \
    X(NODE_MAP, "GM_NODE_MAP", STRING, 0, 0, 0, "unset", "path of the node map file")              \
    X(NODES, "GM_NODES", STRING, 0, 0, 0, "unset",                                                 \
      "the node map inline, entries separated by ';' (if GM_NODE_MAP is unset)")                   \
    X(NODE_ID, "GM_NODE_ID", STRING, 0, 0, 0, "from host name",                                    \
      "this process's node id in the map")                                                         \
    X(HOST_NAME, "GM_HOST_NAME", STRING, 0, 0, 0, "gethostname()",                                 \
      "this host's name, to find itself in the map; with no map, node 1's")                        \
    X(PROVIDER, "GM_PROVIDER", STRING, 0, 0, 0, "shm, or tcp;ofi_rxm with addresses",              \
      "libfabric provider (FI_PROVIDER syntax: tcp;ofi_rxm, shm, verbs;ofi_rxm)")                  \
    X(PORT_BASE, "GM_PORT_BASE", NUMBER, 27000, 1, 65535 - GMX_NUM_PORTS, "",                      \
      "TCP port of GM port 0 for map entries without :base")                                       \
    X(SHM_NAMESPACE, "GM_SHM_NAMESPACE", STRING, 0, 0, 0, "gm<uid>",                               \
      "prefix of shm endpoint names and lock files; one per concurrent job")                       \
    X(SEND_TIMEOUT_MS, "GM_SEND_TIMEOUT_MS", NUMBER, 60000, 0, 3600000, "",                        \
      "how long a send to a port not open yet is retried (gm_compat_configure overrides)")         \
    X(RMA, "GM_RMA", NUMBER, 0, 0, 1, "1 on shm, else 0",                                          \
      "1: puts and gets by the provider's RMA; 0: always as messages")                             \
    X(CLOSE_LINGER_MS, "GM_CLOSE_LINGER_MS", NUMBER, 2000, 0, 3600000, "",                         \
      "how long gm_close waits until live targets acknowledged its sends")                         \
    X(TRANSPORT, "GM_COMPAT_TRANSPORT", STRING, 0, 0, 0, GMX_TRANSPORT_DEFAULT,                    \
      "auto: own shared-memory rings when the provider is shm (no other host), else libfabric; "   \
      "fabric: libfabric; shm: the rings (this host only)")                                        \
    X(SHM_BY_REF, "GM_SHM_BY_REF", NUMBER, 16384, 0, 1u << 30, "",                                 \
      "on the own shm rings: a large message's data of at least this many bytes is read by its "   \
      "receiver from the sender's memory (one copy) instead of through the ring; 0: never")        \
    X(VERBOSE, "GM_VERBOSE", NUMBER, 0, 0, 10, "", "1: print fabric errors and configuration")

#define GMX_KNOB_ENUM(id, name, type, def, lo, hi, shown, meaning) GMX_K_##id,
enum { GMX_KNOBS(GMX_KNOB_ENUM) GMX_K_COUNT };

/* A NUMBER knob: its value, else `dflt` (unset, empty, or bad: then reported on stderr). */
unsigned long gmx_knob_uint_or(int id, unsigned long dflt);
/* The same with the table's default. */
unsigned long gmx_knob_uint(int id);
/* A STRING knob: getenv by the table's name (NULL when unset). */
const char *gmx_knob_str(int id);
/* A knob's name, for messages. */
const char *gmx_knob_name(int id);

#endif /* GMX_KNOBS_H */
