/*
 * libcorpvm internals (prefix cpvm_). Nothing here is exported: the library exports pvm_*
 * only.
 *
 * The library sits between a PVM program and the system's libpvm3: every pvm_* call enters
 * here first (link order or LD_PRELOAD), takes the one big lock, installs the calling
 * thread's active buffers and context in libpvm3, and calls the real function found with
 * dlsym(RTLD_NEXT). Message calls toward peers that also run libcorpvm with a CoR route go
 * over that route instead (route.c); everything else is libpvm3's own work.
 *
 * libpvm3 calls its own exported functions through the PLT, so its inner calls land here too;
 * while a real call runs (cpvm_in_real > 0 in that thread) they pass straight through.
 */
#ifndef CPVM_PVMCOMPAT_H
#define CPVM_PVMCOMPAT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pvm3.h>
#include <pvmtev.h>

#include "cor/cor.h"
#include "cor/pvm.h"
#include "knobs.h"

#define CPVM_API __attribute__((visibility("default")))

/* ---- the real libpvm3 (real.c) ---- */

/* Exported by libpvm3 but not declared in pvm3.h. */
struct pmsg;
int pvm_vpackf(const char *fmt, va_list ap);
int pvm_vunpackf(const char *fmt, va_list ap);
struct pmsg *midtobuf(int mid);
int mesg_input(struct pmsg *up);
struct frag;
struct pmsg *umbuf_new(void);
struct frag *fr_new(int len);
struct frag *fr_snew(char *buf, int len); /* a frame over memory of the caller's (InPlace) */
void fr_unref(struct frag *fp);           /* a frame back to libpvm3 (not its memory) */
int pmsg_setlen(struct pmsg *mp);
int pmsg_setenc(struct pmsg *mp, int enc);
int lpvmerr(char *f, int n);
int pvmdisplaymhfinfo(const char *who, const char *message, int tid); /* dump of handlers */
extern int pvmmytid, pvmmydsig;
/* The resource manager pvmd told this task of (pvm_reg_rm), 0 if none: libpvm3 sends it what
 * pvm_config, pvm_notify, pvm_spawn ... ask for (SM_* requests), else pvmd (TM_*). */
extern int pvmschedtid;
/* libpvm3's request and answer: sends the active send buffer to `other` (pvmd:
 * CPVM_TIDPVMD) with tag `code` in context `ctx`, waits for the answer and makes it the
 * active receive buffer; returns its id (> 0) or an error. */
int msendrecv(int other, int code, int ctx);
#define CPVM_TIDPVMD ((int)0x80000000)
#define CPVM_TM_CONFIG ((int)0x80010006) /* pvmproto.h: TM_FIRST + 5 */
#define CPVM_SYSCTX_TM 0x7fffe           /* pvmproto.h: SYSCTX_FIRST - 1 */

/* Every libpvm3/libgpvm3 function libcorpvm calls or wraps. */
/* clang-format off: it reflows a long list of X() differently at each run */
#define CPVM_REAL_CALLS(X)                                                                         \
    X(pvm_addhosts)                                                                                \
    X(pvm_addmhf)                                                                                  \
    X(pvm_archcode)                                                                                \
    X(pvm_bufinfo)                                                                                 \
    X(pvm_catchout)                                                                                \
    X(pvm_config)                                                                                  \
    X(pvm_delete)                                                                                  \
    X(pvm_delhosts)                                                                                \
    X(pvm_delinfo)                                                                                 \
    X(pvm_delmhf)                                                                                  \
    X(pvm_exit)                                                                                    \
    X(pvm_export)                                                                                  \
    X(pvm_freebuf)                                                                                 \
    X(pvm_freecontext)                                                                             \
    X(pvm_getcontext)                                                                              \
    X(pvm_getfds)                                                                                  \
    X(pvm_getmboxinfo)                                                                             \
    X(pvm_getminfo)                                                                                \
    X(pvm_getnoresets)                                                                             \
    X(pvm_getopt)                                                                                  \
    X(pvm_getrbuf)                                                                                 \
    X(pvm_getsbuf)                                                                                 \
    X(pvm_gettmask)                                                                                \
    X(pvm_halt)                                                                                    \
    X(pvm_hostsync)                                                                                \
    X(pvm_initsend)                                                                                \
    X(pvm_insert)                                                                                  \
    X(pvm_kill)                                                                                    \
    X(pvm_lookup)                                                                                  \
    X(pvm_mcast)                                                                                   \
    X(pvm_mkbuf)                                                                                   \
    X(pvm_mstat)                                                                                   \
    X(pvm_mytid)                                                                                   \
    X(pvm_newcontext)                                                                              \
    X(pvm_notify)                                                                                  \
    X(pvm_nrecv)                                                                                   \
    X(pvm_parent)                                                                                  \
    X(pvm_perror)                                                                                  \
    X(pvm_pkbyte)                                                                                  \
    X(pvm_pkcplx)                                                                                  \
    X(pvm_pkdcplx)                                                                                 \
    X(pvm_pkdouble)                                                                                \
    X(pvm_pkfloat)                                                                                 \
    X(pvm_pkint)                                                                                   \
    X(pvm_pklong)                                                                                  \
    X(pvm_pkmesg)                                                                                  \
    X(pvm_pkmesgbody)                                                                              \
    X(pvm_pkshort)                                                                                 \
    X(pvm_pkstr)                                                                                   \
    X(pvm_pkuint)                                                                                  \
    X(pvm_pkulong)                                                                                 \
    X(pvm_pkushort)                                                                                \
    X(pvm_precv)                                                                                   \
    X(pvm_probe)                                                                                   \
    X(pvm_psend)                                                                                   \
    X(pvm_pstat)                                                                                   \
    X(pvm_putinfo)                                                                                 \
    X(pvm_recv)                                                                                    \
    X(pvm_recvf)                                                                                   \
    X(pvm_recvinfo)                                                                                \
    X(pvm_reg_hoster)                                                                              \
    X(pvm_reg_rm)                                                                                  \
    X(pvm_reg_tasker)                                                                              \
    X(pvm_reg_tracer)                                                                              \
    X(pvm_send)                                                                                    \
    X(pvm_sendsig)                                                                                 \
    X(pvm_setcontext)                                                                              \
    X(pvm_setminfo)                                                                                \
    X(pvm_setopt)                                                                                  \
    X(pvm_setrbuf)                                                                                 \
    X(pvm_setsbuf)                                                                                 \
    X(pvm_settmask)                                                                                \
    X(pvm_siblings)                                                                                \
    X(pvm_spawn)                                                                                   \
    X(pvm_start_pvmd)                                                                              \
    X(pvm_tasks)                                                                                   \
    X(pvm_tickle)                                                                                  \
    X(pvm_tidtohost)                                                                               \
    X(pvm_trecv)                                                                                   \
    X(pvm_unexport)                                                                                \
    X(pvm_upkbyte)                                                                                 \
    X(pvm_upkcplx)                                                                                 \
    X(pvm_upkdcplx)                                                                                \
    X(pvm_upkdouble)                                                                               \
    X(pvm_upkfloat)                                                                                \
    X(pvm_upkint)                                                                                  \
    X(pvm_upklong)                                                                                 \
    X(pvm_upkmesg)                                                                                 \
    X(pvm_upkshort)                                                                                \
    X(pvm_upkstr)                                                                                  \
    X(pvm_upkuint)                                                                                 \
    X(pvm_upkulong)                                                                                \
    X(pvm_upkushort)                                                                               \
    X(pvm_version)                                                                                 \
    X(pvm_vpackf)                                                                                  \
    X(pvm_vunpackf)                                                                                \
    X(midtobuf)                                                                                    \
    X(mesg_input)                                                                                  \
    X(umbuf_new)                                                                                   \
    X(fr_new)                                                                                      \
    X(fr_snew)                                                                                     \
    X(fr_unref)                                                                                    \
    X(pmsg_setlen)                                                                                 \
    X(pmsg_setenc)                                                                                 \
    X(lpvmerr)                                                                                     \
    X(pvmdisplaymhfinfo)
/* clang-format on */

/* libgpvm3, present only in programs that link it. */
/* clang-format off: it reflows a long list of X() differently at each run */
#define CPVM_GROUP_CALLS(X)                                                                        \
    X(pvm_barrier)                                                                                 \
    X(pvm_bcast)                                                                                   \
    X(pvm_freezegroup)                                                                             \
    X(pvm_gather)                                                                                  \
    X(pvm_getinst)                                                                                 \
    X(pvm_gettid)                                                                                  \
    X(pvm_gsize)                                                                                   \
    X(pvm_joingroup)                                                                               \
    X(pvm_lvgroup)                                                                                 \
    X(pvm_reduce)                                                                                  \
    X(pvm_scatter)
/* clang-format on */

#define CPVM_REAL_MEMBER(name) __typeof__(name) *name;
struct cpvm_real {
    CPVM_REAL_CALLS(CPVM_REAL_MEMBER)
    CPVM_GROUP_CALLS(CPVM_REAL_MEMBER)
};
extern struct cpvm_real cpvm_real;
extern bool cpvm_bypass;   /* this process is pvmd, the console or pvmgs: pass everything */
void cpvm_real_load(void); /* once, before the first call; aborts if libpvm3 is missing */

/* ---- the big lock and per-thread state (lock.c) ---- */

extern _Thread_local int cpvm_in_real; /* > 0 while this thread runs a real libpvm3 call */

/* Calls real libpvm3 function `fn`: its inner calls into pvm_* pass straight through. */
#define REAL(fn, ...)                                                                              \
    ({                                                                                             \
        cpvm_in_real++;                                                                            \
        __typeof__(cpvm_real.fn(__VA_ARGS__)) r_ = cpvm_real.fn(__VA_ARGS__);                      \
        cpvm_in_real--;                                                                            \
        r_;                                                                                        \
    })

/* Takes the big lock (re-entrant) and installs this thread's buffers and context. */
void cpvm_enter(void);
/* The same if the lock is free or this thread's; false if another thread holds it. */
bool cpvm_try_enter(void);
/* cpvm_enter for a receive that pumps the message it waits for: the buffers that receives and
 * initsends without the lock replaced (the trash) are left to cpvm_chores, off that path. */
void cpvm_enter_to_pump(void);
/* Outside any pvm_* call, before a receive waits (nothing arrived): if the big lock is free,
 * what its next holder would do on a message's way is done now (the thread's new buffers
 * installed in libpvm3, the trash freed, a spare send buffer made: sbuf.c). */
void cpvm_chores(void);
/* At the outermost level: runs deferred protocol work, wakes waiters, releases the lock. */
void cpvm_leave(void);
/* For waiting: releases the lock entirely (all levels) and takes it back. */
int cpvm_unlock_all(void);
void cpvm_relock_all(int depth);
/* Nonzero while this thread is in pvm_send, pvm_mcast or pvm_psend: its waits for the lock
 * count as the send path's too (COR_PVM_STATS). */
extern _Thread_local int cpvm_in_send;
/* The same for pvm_recv, trecv, nrecv, probe, precv and the pvm_upk* calls. */
extern _Thread_local int cpvm_in_recv;
/* Nonzero when this thread holds the lock more than once (inside a group call). */
bool cpvm_nested(void);
/* True while only one thread ever called into libcorpvm. */
bool cpvm_single_thread(void);
/* The base context of new threads. */
int cpvm_base_context(void);
/* Outside any pvm_* call: the calling thread's receive buffer if it can be unpacked without
 * the lock (as cpvm_unpack_target found it when the thread last left the lock), else NULL. */
struct lp_msg;
struct lp_msg *cpvm_own_rbuf(void);
/* Outside any pvm_* call, once the thread left the lock: its context (as it left), true;
 * else false. */
bool cpvm_own_context(int *ctx);
/* Without the lock: message m (NULL: none) is now the thread's receive buffer, `unpackable`
 * (m or NULL) what its unpacks read without the lock; the buffer it replaces is freed by the
 * next holder of the lock (PVM frees it at every receive), and m is installed in libpvm3 at
 * the thread's next call. */
void cpvm_adopt_rbuf(struct lp_msg *m, struct lp_msg *unpackable);
/* Without the lock: message mid (no thread's buffer) is freed by the next holder of the lock. */
void cpvm_trash(int mid);
/* Outside any pvm_* call: the calling thread's send buffer if it can be packed and sent without
 * the lock (as cpvm_pack_target found it when the thread last left the lock, or as a
 * pvm_initsend without the lock made it), else NULL. */
struct lp_msg *cpvm_own_sbuf(void);
/* Without the lock: message m (the thread's own, made under the lock) is now its send buffer,
 * installed in libpvm3 at its next call; the one it replaces is freed by the next holder of
 * the lock (as pvm_initsend frees it). */
void cpvm_adopt_sbuf(struct lp_msg *m);
/* The thread's ready-made send buffers (sbuf.c); NULL before its first call. */
struct cpvm_spares;
struct cpvm_spares **cpvm_own_spares(void);
void cpvm_spares_drop(struct cpvm_spares *s); /* lock held: spares and frames freed */
/* pvm_exit (lock held): what threads know of their send buffers and spares is forgotten
 * (libpvm3's buffers end with the task); the epoch tells them. */
void cpvm_buffers_forget(void);
unsigned cpvm_buffers_epoch(void);
void cpvm_spares_exit(void); /* lock held: the calling thread's spares freed */
/* Fragment frames for the thread's InPlace packs without the lock (sbuf.c): one taken
 * (NULL: none left, the pack takes the lock); topped up under the lock. */
struct lp_frag;
struct lp_frag *cpvm_frame_take(void);
void cpvm_frames_topup(void);
/* Whether the calling thread's spares run low; lock held: a few more made (cpvm_chores). */
bool cpvm_spares_low(void);
void cpvm_spares_top_up(void);

/* Straight to libpvm3: inside a real call, or in PVM's own programs. */
#define CPVM_PASS (cpvm_in_real || cpvm_bypass)

/* Wrapper bodies: pass through inside real calls, else lock around the real call. */
#define CPVM_WRAP(fn, ...)                                                                         \
    do {                                                                                           \
        if (CPVM_PASS) return cpvm_real.fn(__VA_ARGS__);                                           \
        cpvm_enter();                                                                              \
        __typeof__(cpvm_real.fn(__VA_ARGS__)) w_ = REAL(fn, __VA_ARGS__);                          \
        cpvm_leave();                                                                              \
        return w_;                                                                                 \
    } while (0)

/* ---- waiting for messages (wait.c) ---- */

/* Somebody may have queued a message: waiters look again. Lock held. */
void cpvm_wake_waiters(void);
/* What libpvm3's receive queue holds, as a number that changes when it does (up to collisions,
 * which cost a waiter a millisecond at most). Lock held. */
uint64_t cpvm_queue_signature(void);
int cpvm_waiters(void);
/* Blocks without the lock until a routed message completed, PVM's sockets have data, another
 * thread queued something, or `deadline_ns` (0 = none) passed: polling until `spin_end_ns`
 * (a wait's cpvm_spin_end() taken when it began), asleep after that. Lock held on entry and
 * exit. */
void cpvm_wait_activity(uint64_t deadline_ns, uint64_t spin_end_ns);
uint64_t cpvm_spin_end(void); /* now + COR_PVM_SPIN_US */
/* Reads PVM's sockets' list for the waits without the lock (they sleep on it). Lock held. */
void cpvm_note_fds(void);
/* The arrival hook of the task's CoR inbox (cor_task_on_arrival): wakes a sleeping waiter. */
void cpvm_arrival(void *arg, int flags);
uint64_t cpvm_now_ns(void);
/* Whether a receive that found nothing queued should let libpvm3 read PVM's sockets now
 * (`waiting`: a blocking receive, whose waits poll the sockets). */
bool cpvm_sockets_due(bool waiting);
/* For receives without the lock: */
void cpvm_watch_begin(void); /* counts the thread as a waiter (before it looks) */
void cpvm_watch_end(void);
uint64_t cpvm_generation(void);        /* bumped whenever waiters should look again */
uint64_t cpvm_arrivals(void);          /* routed arrivals the inbox's hook saw */
bool cpvm_sockets_flagged(void);       /* a waiter saw data on PVM's sockets */
bool cpvm_sockets_stale(uint64_t now); /* libpvm3 last read them 20 us ago or more */
bool cpvm_sockets_known(void);         /* a locked wait read PVM's sockets (for unlocked waits) */
/* Waits without the lock (the thread counted by cpvm_watch_begin) until something changed
 * since gen0/arr0 or `deadline_ns` (not 0) passed: spinning until `spin_end_ns`, asleep
 * after (on PVM's sockets as a locked wait last saw them, and the bell). */
void cpvm_wait_unlocked(uint64_t gen0, uint64_t arr0, uint64_t deadline_ns, uint64_t spin_end_ns);
/* Asleep (no spin) until the generation moved from gen0 or deadline_ns passed. */
void cpvm_wait_news(uint64_t gen0, uint64_t deadline_ns);

/* ---- CoR routes (route.c) ---- */

/* After the task enrolled: reads COR_PVM_ROUTE, installs the control handler. Lock held. */
void cpvm_setup(void);
bool cpvm_is_setup(void);
/* Deferred work of control messages (handshakes, exits). Lock held, outermost level. */
void cpvm_run_deferred(void);
bool cpvm_has_deferred(void);
/* Moves completed routed messages into libpvm3's receive queue; returns how many. It never
 * polls the routes: what it finds complete is what waits and listeners completed. */
int cpvm_pump(void);
/* Posts the receives of the detached pieces of messages a pump took (a pump only notes
 * them: the read a post may start must not run under the big lock). Without the big lock
 * where possible: lock.c calls it as the lock goes. */
void cpvm_post_pieces(void);
/* True if the oldest routed message looks complete, without progress and without waiting
 * (false when another thread watches); for stop hooks. No lock needed. */
bool cpvm_routed_arrived(void);
/* Waits for the oldest routed message at most timeout_us (polling the routes at most
 * spin_us) or until stop(arg); true if there is something to pump; false at once when the
 * task has no route. No lock needed. */
bool cpvm_routed_wait(long spin_us, long timeout_us, int (*stop)(void *), void *arg);
/* True while the oldest routed message waits for its detached pieces and no thread waits for
 * them: their completion rings no bell (the arrival hook tells of new messages only), so a
 * sleeper waits for them in the core (wait.c). No lock needed. */
bool cpvm_routed_in_flight(void);

/* Route option of the task (PvmRoute), as the program set it. */
int cpvm_route_get(void);
int cpvm_route_set(int value); /* PVM status */

/* Sends the active send buffer `sbuf` to tid over the CoR route if the peer takes it.
 * Returns 1 if sent (status in *rc), 0 if the caller must use PVM's path. */
int cpvm_route_send(int tid, int tag, int *rc);
/* Before PVM's path carries a message to tid: start the handshake if it is new. */
void cpvm_route_touch(int tid);
/* At pvm_exit: says goodbye to routed peers and leaves the CoR session. */
void cpvm_route_exit(void);

/* ---- errors and counters ---- */
int cpvm_error(int cor_err); /* CoR status -> PVM status (errors.c) */

struct cpvm_stats {
    _Atomic uint64_t routed_sent, routed_recv, routed_bytes_sent, routed_bytes_recv;
    _Atomic uint64_t pvm_sent, pvm_recv; /* sends and receives that went PVM's way */
    _Atomic uint64_t hello_sent, acks, naks, switches, held, dropped, peers_gone;
    _Atomic uint64_t readmitted; /* ranks taken over by a new task (route.c) */
    /* A peer the route gave up (msgio.c): our unconfirmed messages sent again PVM's way, its
     * that came so, and those of its that the route brought after all (dropped). */
    _Atomic uint64_t resent, resent_recv, duplicates;
    _Atomic uint64_t rescues; /* deferred work run by libcorpvm's thread on a give-up */
    _Atomic uint64_t packs_unlocked, unpacks_unlocked;   /* copies made without the lock */
    _Atomic uint64_t lock_waits, lock_wait_ns;           /* the big lock found taken (lock.c) */
    _Atomic uint64_t send_lock_waits, send_lock_wait_ns; /* of them, inside a send call */
    _Atomic uint64_t recv_lock_waits, recv_lock_wait_ns; /* of them, in a receive or unpack */
    _Atomic uint64_t recv_unlocked; /* routed messages a receive took without the big lock */
    /* pvm_initsend and routed pvm_send/psend calls made without the big lock (sbuf.c) */
    _Atomic uint64_t initsends_unlocked, sends_unlocked;
    _Atomic uint64_t late_wakes;  /* spins that went on after PVM's sockets had data (wait.c) */
    _Atomic uint64_t recv_spares; /* routed messages made in a receive spare (pmsg.c) */
};
extern struct cpvm_stats cpvm_stats;
void cpvm_stats_print(void); /* stderr, when COR_PVM_STATS is set */

void cpvm_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
