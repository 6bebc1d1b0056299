/* CoR -> PVM status codes, in one place; counters and the log. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "route.h"

struct cpvm_stats cpvm_stats;

int cpvm_error(int err)
{
    switch (err) {
    case COR_OK:
        return PvmOk;
    case COR_EINVAL:
    case COR_ETYPE:
        return PvmBadParam;
    case COR_ENOMEM:
    case COR_ELIMIT:
        return PvmNoMem;
    case COR_ETRUNC:
        return PvmNoData;
    case COR_EPEERDEAD:
    case COR_ENOTFOUND:
        return PvmNoTask;
    case COR_EEXIST:
        return PvmExists;
    case COR_EPROTO:
        return PvmBadMsg;
    case COR_EAGAIN:
    case COR_EBUSY:
        return PvmOutOfRes;
    case COR_ETIMEDOUT:
        return PvmSysErr;
    default:
        return PvmSysErr; /* route, bootstrap, system call: the transport failed */
    }
}

void cpvm_log(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "libcorpvm[t%x]: %s\n", pvmmytid > 0 ? (unsigned)pvmmytid : 0u, msg);
}

void cpvm_stats_print(void)
{
    if (!cpvm_knob(CPVM_K_STATS)) return;
    struct cpvm_stats *c = &cpvm_stats;
    cpvm_log(
        "routed sent %llu (%llu B) received %llu (%llu B); via pvm sent %llu received "
        "%llu; hello %llu ack %llu nak %llu switch %llu held %llu dropped %llu gone %llu "
        "readmitted %llu resent %llu resent-received %llu duplicates %llu rescues %llu; copied "
        "without the lock: packs %llu unpacks %llu; waits for the lock %llu (%llu us), in sends "
        "%llu (%llu us), in receives %llu (%llu us); routed messages received without the "
        "lock %llu; without the lock: initsends %llu, routed sends %llu; late wakes %llu; "
        "received into spares %llu",
        (unsigned long long)c->routed_sent, (unsigned long long)c->routed_bytes_sent,
        (unsigned long long)c->routed_recv, (unsigned long long)c->routed_bytes_recv,
        (unsigned long long)c->pvm_sent, (unsigned long long)c->pvm_recv,
        (unsigned long long)c->hello_sent, (unsigned long long)c->acks, (unsigned long long)c->naks,
        (unsigned long long)c->switches, (unsigned long long)c->held,
        (unsigned long long)c->dropped, (unsigned long long)c->peers_gone,
        (unsigned long long)c->readmitted, (unsigned long long)c->resent,
        (unsigned long long)c->resent_recv, (unsigned long long)c->duplicates,
        (unsigned long long)c->rescues, (unsigned long long)c->packs_unlocked,
        (unsigned long long)c->unpacks_unlocked, (unsigned long long)c->lock_waits,
        (unsigned long long)(c->lock_wait_ns / 1000), (unsigned long long)c->send_lock_waits,
        (unsigned long long)(c->send_lock_wait_ns / 1000), (unsigned long long)c->recv_lock_waits,
        (unsigned long long)(c->recv_lock_wait_ns / 1000), (unsigned long long)c->recv_unlocked,
        (unsigned long long)c->initsends_unlocked, (unsigned long long)c->sends_unlocked,
        (unsigned long long)c->late_wakes, (unsigned long long)c->recv_spares);
    cor_stats_t k;
    if (cpvm_rt.joined && cor_stats_get(&k) == COR_OK)
        cpvm_log("core: sent %llu (eager %llu, rendezvous %llu) received %llu; credit frames "
                 "%llu, stalls %llu; frames dropped %llu",
                 (unsigned long long)k.msgs_sent, (unsigned long long)k.eager_sent,
                 (unsigned long long)k.rndv_sent, (unsigned long long)k.msgs_received,
                 (unsigned long long)k.credit_frames, (unsigned long long)k.credit_stalls,
                 (unsigned long long)k.frames_dropped);
}
