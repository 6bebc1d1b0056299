/*
 * libcordsm's knobs, once: X(ID, name, TYPE, default, lo, hi, "shown default", "meaning"), the
 * cor_knob_t table (cor.h) it reads them with at cor_dsm_init (cor_knob_int) and that
 * cor_dsm_knobs() gives to cor-info, which generates the README's table from it.
 */
#ifndef COR_DSM_KNOBS_H
#define COR_DSM_KNOBS_H

#include "cor/cor.h"

#define DSM__KNOBS(X)                                                                              \
    X(CACHE_BYTES, "COR_DSM_CACHE_BYTES", INT, 256LL << 20, 0, 1LL << 48, "",                      \
      "cache budget of cached objects, bytes (or cor_dsm_set_cache_bytes)")                        \
    X(SPIN_US, "COR_DSM_SPIN_US", INT, -1, -1, 10000000, "COR_SPIN_US",                            \
      "how long a task waiting for a copy, a lock or a barrier polls; -1: the core's")             \
    X(SHM, "COR_DSM_SHM", INT, 1, 0, 1, "",                                                        \
      "0: no same-host objects, barriers and locks in /dev/shm")                                   \
    X(LOCK_KEEP, "COR_DSM_LOCK_KEEP", INT, 1, 0, 1, "",                                            \
      "1: a lock granted while nobody waited stays with its domain until recalled; 0: never")      \
    X(FORWARD, "COR_DSM_FORWARD", INT, 1, 0, 1, "",                                                \
      "1: an upgrade's readers acknowledge to the writer (three hops); 0: to the home")

#define DSM__KNOB_ENUM(id, name, type, def, lo, hi, shown, meaning) DSM__K_##id,
enum { DSM__KNOBS(DSM__KNOB_ENUM) DSM__K_COUNT };

/* Knob `id` read from the environment (its default when unset or bad; a bad value is
 * reported). */
long long dsm__knob(int id);

#endif /* COR_DSM_KNOBS_H */
