/*
 * libcorpvm's knobs, once: X(ID, name, TYPE, default, lo, hi, "shown default", "meaning"), the
 * cor_knob_t table (cor.h) it reads them with (cpvm_knob: cor_knob_t's reader) and that
 * cor_pvm_knobs() gives to cor-info, which generates the README's table from it. COR_PVM_LIB
 * is cor-pvm's (apps/tools/cor-pvm.in reads it; cor-info finds this library with it too).
 */
#ifndef COR_PVMCOMPAT_KNOBS_H
#define COR_PVMCOMPAT_KNOBS_H

#include "cor/cor.h"

#define CPVM_KNOBS(X)                                                                              \
    X(ROUTE, "COR_PVM_ROUTE", STR, 0, 0, 0, "none",                                                \
      "myrinet/gm, udp or none: the task's route at enrolment, and the answer to PvmRouteDirect")  \
    X(STATS, "COR_PVM_STATS", INT, 0, 0, 1, "",                                                    \
      "1: at pvm_exit, print routed and PVM-path counts, handshakes, holds, drops")                \
    X(DOMAINS, "COR_PVM_DOMAINS", INT, 64, 1, COR_MAX_DOMAINS, "",                                 \
      "most tasks of one virtual machine that take a route (the session's capacity)")              \
    X(CONNECT_MS, "COR_PVM_CONNECT_MS", INT, 1000, 0, 3600000, "",                                 \
      "how long a first message waits for the peer's answer")                                      \
    X(SPIN_US, "COR_PVM_SPIN_US", INT, 2000, 0, 10000000, "",                                      \
      "how long a waiting receive polls before it blocks")                                         \
    X(DETACH_MIN, "COR_PVM_DETACH_MIN", INT, 32768, 0, 1LL << 40, "",                              \
      "bytes from which a fragment travels detached (no copy)")                                    \
    X(KEEP_MEMORY, "COR_PVM_KEEP_MEMORY", INT, 1, 0, 1, "",                                        \
      "0: leave glibc's trimming and mmap thresholds alone")                                       \
    X(LIB, "COR_PVM_LIB", STR, 0, 0, 0, "beside libcor",                                           \
      "the libcorpvm.so cor-pvm preloads (and cor-info lists)")

#define CPVM_KNOB_ENUM(id, name, type, def, lo, hi, shown, meaning) CPVM_K_##id,
enum { CPVM_KNOBS(CPVM_KNOB_ENUM) CPVM_K_COUNT };

/* An INT knob's value (its default when unset or bad; a bad value is reported). */
long long cpvm_knob(int id);
/* A STR knob's value: getenv by the table's name (NULL when unset). */
const char *cpvm_knob_str(int id);

#endif /* COR_PVMCOMPAT_KNOBS_H */
