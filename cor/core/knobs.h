/*
 * The core's knobs, once: X(ID, name, TYPE, default, lo, hi, "shown default", "meaning").
 * TYPE is INT (read by cor__knob_long with this default and range), STR or SET (read where
 * they are used with cor__knob_str(COR_K_<ID>): the name is written only here). The table is public
 * through cor_knobs() (cor.h): cor-info lists it and the top README's table is generated from it
 * (cor-info --knobs-markdown core). The bootstrap's variables are set by the launchers (cor-run,
 * PMIx); they are listed here for the user and read by the bootstrap modules.
 */
#ifndef COR_CORE_KNOBS_H
#define COR_CORE_KNOBS_H

#define COR_CORE_KNOBS(X)                                                                          \
    X(ROUTE, "COR_ROUTE", STR, 0, 0, 0, "udp", "default route (cor-run --route)")                  \
    X(ROUTES, "COR_ROUTES", STR, 0, 0, 0, "COR_ROUTE", "comma-separated routes to open")           \
    X(PORTS, "COR_PORTS", INT, 1, 1, COR_HPORTS_MAX, "",                                           \
      "hard ports per route (1..8, cor-run --ports)")                                              \
    X(ROUTE_PATH, "COR_ROUTE_PATH", STR, 0, 0, 0, "plugin folder",                                 \
      "folders searched first for route plugins")                                                  \
    X(BIND, "COR_BIND", STR, 0, 0, 0, "loopback",                                                  \
      "address hint for routes: loopback, auto or an IP")                                          \
    X(EAGER_LIMIT, "COR_EAGER_LIMIT", INT, -1, -1, 1L << 30, "route's",                            \
      "message size above which rendezvous is used")                                               \
    X(CREDITS, "COR_CREDITS", INT, 32, 2, 65535, "",                                               \
      "eager budget per peer and hard port, in largest eager messages")                            \
    X(CREDIT_THRESHOLD, "COR_CREDIT_THRESHOLD", INT, -1, 1, 65534, "credits/2",                    \
      "the part of it owed that sends a credit frame")                                             \
    X(SPIN_US, "COR_SPIN_US", INT, 2000, 0, 10000000, "",                                          \
      "how long a waiting task polls before it blocks")                                            \
    X(MAX_TASKS, "COR_MAX_TASKS", INT, 1024, 64, COR_MAX_INDEX + 1, "",                            \
      "task slots per domain (64..65536)")                                                         \
    X(YIELDERS, "COR_YIELDERS", INT, -1, -1, 1 << 20, "16 udp, 2 gm",                              \
      "waiting tasks that yield to the spinning one; others sleep")                                \
    X(LINGER_US, "COR_LINGER_US", INT, 1000, 0, 1000000, "",                                       \
      "listeners keep off the sockets after a task's spin")                                        \
    X(SERVICE_SLICE_US, "COR_SERVICE_SLICE_US", INT, 100, 0, 100000, "",                           \
      "time slice of serving threads; 0 leaves them alone")                                        \
    X(STRIPE_MIN, "COR_STRIPE_MIN", INT, 512 * 1024, 0, 1LL << 40, "",                             \
      "rendezvous data striped over the hard ports")                                               \
    X(RMA, "COR_RMA", INT, 1, 0, 1, "", "0: no remote writes for rendezvous")                      \
    X(GET_MAX, "COR_GET_MAX", INT, 65536, 0, 1LL << 40, "",                                        \
      "rendezvous up to this size are read by the receiver (route get); 0: never")                 \
    X(DMA_BUFFERS, "COR_DMA_BUFFERS", INT, 1, 0, 1, "",                                            \
      "0: getBuffer from the heap, not route memory")                                              \
    X(PREPARE, "COR_PREPARE", INT, 1, 0, 1, "",                                                    \
      "0: load the routes' libraries after the launcher answered")                                 \
    X(RAW, "COR_RAW", STR, 0, 0, 0, "unset", "1: open a raw hard port per route (cor/raw.h)")      \
    X(BOOT, "COR_BOOT", STR, 0, 0, 0, "set by cor-run",                                            \
      "rendezvous of the session: a UNIX socket path or tcp:HOST:PORT")                            \
    X(RANK, "COR_RANK", STR, 0, 0, 0, "set by cor-run", "this domain's number")                    \
    X(SIZE, "COR_SIZE", STR, 0, 0, 0, "set by cor-run", "domains in the session")                  \
    X(SESSION, "COR_SESSION", STR, 0, 0, 0, "set by cor-run", "session cookie, 16 hex digits")     \
    X(BOOT_TIMEOUT, "COR_BOOT_TIMEOUT", INT, 120, 1, 86400, "",                                    \
      "seconds a domain waits for the session to form")                                            \
    X(BOOT_ORPHAN, "COR_BOOT_ORPHAN", STR, 0, 0, 0, "unset",                                       \
      "keep: survive losing cor-run (else SIGTERM)")                                               \
    X(BOOT_SECRET, "COR_BOOT_SECRET", STR, 0, 0, 0, "set by cor-run",                              \
      "TCP rendezvous: the session secret, 64 hex digits or - (a line on stdin)")                  \
    X(BOOT_STATS, "COR_BOOT_STATS", INT, 0, 0, 1, "",                                              \
      "1: the exchange says what its steps took, finish how many peers were looked up")            \
    X(BOOT_NODE_TABLE, "COR_BOOT_NODE_TABLE", INT, 1, 0, 1, "",                                    \
      "PMIx: 0: each domain gets the N addresses itself, not its node's table")                    \
    X(BOOT_FENCE_CHECK, "COR_BOOT_FENCE_CHECK", INT, -1, -1, 1, "-1 (auto)",                       \
      "PMIx: 1: a barrier checks that every domain entered; -1 (auto): under --enable-recovery")   \
    X(LAZY_PEERS, "COR_LAZY_PEERS", INT, 1, 0, 1, "",                                              \
      "0: give the routes every peer's address at cor_init, not at first contact")                 \
    X(BARRIER_WATCH_MS, "COR_BARRIER_WATCH_MS", INT, 1000, 0, 86400000, "",                        \
      "a barrier waiting this long makes the routes watch every peer (boot.h)")

#define COR_KNOB_ENUM(id, name, type, def, lo, hi, shown, meaning) COR_K_##id,
enum { COR_CORE_KNOBS(COR_KNOB_ENUM) COR_K_COUNT };

/* An INT knob of the table: its value, or its default when unset or malformed (reported). */
long cor__knob_long(int id);
/* A knob's name, and its value as a string (getenv by the table's name; NULL when unset). */
const char *cor__knob_name(int id);
const char *cor__knob_str(int id);
/* The same with a default and upper bound known only at run time (COR_CREDIT_THRESHOLD). */
long cor__knob_long_in(int id, long dflt, long hi);

#endif /* COR_CORE_KNOBS_H */
