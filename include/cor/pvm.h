/*
 * CoR for PVM programs (libcorpvm). Link with -lcorpvm -lpvm3, in that order, or run an
 * unmodified program with LD_PRELOAD=libcorpvm.so (cor-pvm does it for you).
 *
 * pvm_setopt(PvmRoute, PvmRouteDirectUDP) or pvm_setopt(PvmRoute, PvmRouteDirectMyrinet)
 * sends the task's messages over CoR's udp route (CoRudpRoute) or gm route (CoRgmRoute) to
 * every peer that also runs libcorpvm with a CoR route; other peers, pvmd and system messages
 * keep PVM's own path. The values are bits above PVM's 2-bit route policy, so they never
 * collide with PvmDontRoute (1), PvmAllowDirect (2) or PvmRouteDirect (3). The environment
 * variable COR_PVM_ROUTE (udp, myrinet or gm, none) sets the option at enrolment and also
 * answers a program's own request for PvmRouteDirect.
 *
 * Every pvm_* call is thread-safe; each thread has its own active send buffer, receive buffer
 * and context.
 */
#ifndef COR_PVM_H
#define COR_PVM_H

#include <pvm3.h>

#include "cor/cor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PvmRouteDirectUDP 4     /* CoR's udp route (CoRudpRoute) */
#define PvmRouteDirectMyrinet 8 /* CoR's gm route (CoRgmRoute), GM on libfabric */

/*
 * The CoR–PVM bridge. A PVM task that runs a CoR route is a CoR domain; these calls name its
 * resources so CoR's task API (cor_sendI/cor_recvI...) can reach them. They return PVM status
 * codes (PvmOk, PvmNoTask: tid runs no CoR route or never reached us, PvmBadParam...).
 */
/* The CoR domain rank of task `tid` (this task's own for pvm_mytid()). Contacts the peer
 * through PVM if it is new, and waits (bounded) for its answer. */
int pvm_cor_domain(int tid, int *rank);
/* The idp of task `index` of tid's domain (0 is the thread that enrolled first). */
int pvm_cor_task(int tid, unsigned index, cor_idp_t *task);

/* libcorpvm's knobs (COR_PVM_*): the table and its length, as cor_knobs() gives the core's
 * (cor-info lists them, loading this library with dlopen). */
COR_API const cor_knob_t *cor_pvm_knobs(size_t *n);

#ifdef __cplusplus
}
#endif
#endif
