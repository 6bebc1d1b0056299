/*
 * The pvm_* entry points that need nothing but the lock: each runs the real call with the
 * calling thread's buffers and context installed. The message calls live in msgio.c,
 * pvm_initsend in sbuf.c, the options and exit in route.c.
 */
#include "pmsg.h"

#define WRAP0(fn)                                                                                  \
    CPVM_API int fn(void)                                                                          \
    {                                                                                              \
        CPVM_WRAP(fn);                                                                             \
    }
#define WRAP1(fn, t1)                                                                              \
    CPVM_API int fn(t1 a)                                                                          \
    {                                                                                              \
        CPVM_WRAP(fn, a);                                                                          \
    }
#define WRAP2(fn, t1, t2)                                                                          \
    CPVM_API int fn(t1 a, t2 b)                                                                    \
    {                                                                                              \
        CPVM_WRAP(fn, a, b);                                                                       \
    }
#define WRAP3(fn, t1, t2, t3)                                                                      \
    CPVM_API int fn(t1 a, t2 b, t3 c)                                                              \
    {                                                                                              \
        CPVM_WRAP(fn, a, b, c);                                                                    \
    }
#define WRAP4(fn, t1, t2, t3, t4)                                                                  \
    CPVM_API int fn(t1 a, t2 b, t3 c, t4 d)                                                        \
    {                                                                                              \
        CPVM_WRAP(fn, a, b, c, d);                                                                 \
    }

/*
 * Packing and unpacking the thread's active buffers. The message is the thread's own: the
 * lock is taken to find it (and to allocate from libpvm3), but the copies run without it
 * where libpvm3 would only copy (pmsg.c): a large PvmDataRaw pack, any unpack of native
 * data. A PvmDataRaw pack that fits the room of the thread's own send buffer (a spare of
 * pvm_initsend's, sbuf.c), and a PvmDataInPlace pack into it (a frame of the thread's over the
 * data), take no lock at all. Threads moving large messages then do not wait for
 * each other's copies. An unpack takes no lock at all when the thread's receive buffer is known
 * since its last call.
 */
#define PACKER(T, pk, upk, type, size)                                                             \
    CPVM_API int pk(T *p, int cnt, int std)                                                        \
    {                                                                                              \
        if (CPVM_PASS) return cpvm_real.pk(p, cnt, std);                                           \
        struct lp_msg *own = cpvm_own_sbuf();                                                      \
        if (own && cpvm_pack_unlocked(own, p, cnt, std, size)) return PvmOk;                       \
        struct cpvm_pack_job job;                                                                  \
        cpvm_enter();                                                                              \
        if (!cpvm_pack_prepare(p, cnt, std, size, &job)) {                                         \
            if (own) cpvm_frames_topup();                                                          \
            int rc = REAL(pk, p, cnt, std);                                                        \
            cpvm_leave();                                                                          \
            return rc;                                                                             \
        }                                                                                          \
        cpvm_leave();                                                                              \
        cpvm_pack_finish(&job);                                                                    \
        return PvmOk;                                                                              \
    }                                                                                              \
    CPVM_API int upk(T *p, int cnt, int std)                                                       \
    {                                                                                              \
        if (CPVM_PASS) return cpvm_real.upk(p, cnt, std);                                          \
        struct lp_msg *m = cnt >= 0 ? cpvm_own_rbuf() : NULL;                                      \
        if (m) return cpvm_unpack(m, type, p, cnt, std, size, #upk);                               \
        cpvm_in_recv++;                                                                            \
        cpvm_enter();                                                                              \
        cpvm_in_recv--;                                                                            \
        m = cnt >= 0 && !cpvm_nested() ? cpvm_unpack_target() : NULL;                              \
        if (!m) {                                                                                  \
            int rc = REAL(upk, p, cnt, std);                                                       \
            cpvm_leave();                                                                          \
            return rc;                                                                             \
        }                                                                                          \
        cpvm_leave();                                                                              \
        return cpvm_unpack(m, type, p, cnt, std, size, #upk);                                      \
    }
PACKER(char, pvm_pkbyte, pvm_upkbyte, LP_BYTE, 1)
PACKER(float, pvm_pkcplx, pvm_upkcplx, LP_CPLX, 2 * (int)sizeof(float))
PACKER(double, pvm_pkdcplx, pvm_upkdcplx, LP_DCPLX, 2 * (int)sizeof(double))
PACKER(double, pvm_pkdouble, pvm_upkdouble, LP_DOUBLE, (int)sizeof(double))
PACKER(float, pvm_pkfloat, pvm_upkfloat, LP_FLOAT, (int)sizeof(float))
PACKER(int, pvm_pkint, pvm_upkint, LP_INT, (int)sizeof(int))
PACKER(long, pvm_pklong, pvm_upklong, LP_LONG, (int)sizeof(long))
PACKER(short, pvm_pkshort, pvm_upkshort, LP_SHORT, (int)sizeof(short))
PACKER(unsigned int, pvm_pkuint, pvm_upkuint, LP_UINT, (int)sizeof(int))
PACKER(unsigned long, pvm_pkulong, pvm_upkulong, LP_ULONG, (int)sizeof(long))
PACKER(unsigned short, pvm_pkushort, pvm_upkushort, LP_USHORT, (int)sizeof(short))
WRAP1(pvm_pkstr, char *)
WRAP1(pvm_upkstr, char *)
WRAP1(pvm_pkmesg, int)
WRAP1(pvm_pkmesgbody, int)
WRAP0(pvm_upkmesg)

/* packf/unpackf: their va_list forms do the work, under the lock unless inside libpvm3. */
static int formatted(int (*fn)(const char *, va_list), const char *fmt, va_list ap)
{
    if (CPVM_PASS) return fn(fmt, ap);
    cpvm_enter();
    cpvm_in_real++;
    int rc = fn(fmt, ap);
    cpvm_in_real--;
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_packf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = formatted(cpvm_real.pvm_vpackf, fmt, ap);
    va_end(ap);
    return rc;
}

CPVM_API int pvm_unpackf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = formatted(cpvm_real.pvm_vunpackf, fmt, ap);
    va_end(ap);
    return rc;
}

CPVM_API int pvm_vpackf(const char *fmt, va_list ap)
{
    CPVM_WRAP(pvm_vpackf, fmt, ap);
}

CPVM_API int pvm_vunpackf(const char *fmt, va_list ap)
{
    CPVM_WRAP(pvm_vunpackf, fmt, ap);
}

/* Buffers and contexts: per thread, because the lock installs the caller's. A call that
 * changes a message named by its id sees it in libpvm3's receive queue if it waits in the
 * routed one (rxq.c). */
/* A receive spare's id (pmsg.c) is no buffer of the program's: what libpvm3 answers for an
 * id it does not know (its error report). Lock held. */
static int no_such_buf(const char *name)
{
    return REAL(lpvmerr, (char *)name, PvmNoSuchBuf);
}

#define WRAP_MID(fn, ...)                                                                          \
    do {                                                                                           \
        if (CPVM_PASS) return cpvm_real.fn(mid, ##__VA_ARGS__);                                    \
        cpvm_enter();                                                                              \
        cpvm_rxq_release(mid);                                                                     \
        int w_ = cpvm_mid_hidden(mid) ? no_such_buf(#fn) : REAL(fn, mid, ##__VA_ARGS__);           \
        cpvm_leave();                                                                              \
        return w_;                                                                                 \
    } while (0)

CPVM_API int pvm_freebuf(int mid)
{
    WRAP_MID(pvm_freebuf);
}
CPVM_API int pvm_setsbuf(int mid)
{
    WRAP_MID(pvm_setsbuf);
}
CPVM_API int pvm_setrbuf(int mid)
{
    WRAP_MID(pvm_setrbuf);
}
CPVM_API int pvm_setminfo(int mid, struct pvmminfo *info)
{
    WRAP_MID(pvm_setminfo, info);
}

/* The thread's own receive buffer, known since a receive without the lock or its last call,
 * is answered without the lock (as libpvm3 would: a received message is not being packed). */
CPVM_API int pvm_bufinfo(int mid, int *len, int *tag, int *tid)
{
    struct lp_msg *m = !CPVM_PASS && mid > 0 ? cpvm_own_rbuf() : NULL;
    if (m && m->mid == mid && !(m->flag & LP_MM_PACK)) {
        if (len) *len = m->len;
        if (tag) *tag = m->tag;
        if (tid) *tid = m->src;
        return PvmOk;
    }
    if (CPVM_PASS) return cpvm_real.pvm_bufinfo(mid, len, tag, tid);
    cpvm_enter();
    int rc =
        cpvm_mid_hidden(mid) ? no_such_buf("pvm_bufinfo") : REAL(pvm_bufinfo, mid, len, tag, tid);
    cpvm_leave();
    return rc;
}

WRAP1(pvm_mkbuf, int)
WRAP0(pvm_getsbuf)
WRAP0(pvm_getrbuf)
WRAP2(pvm_getminfo, int, struct pvmminfo *)
WRAP0(pvm_newcontext)
WRAP1(pvm_freecontext, int)
WRAP1(pvm_setcontext, int)
WRAP0(pvm_getcontext)

/* Virtual-machine services: PVM's own. */
WRAP0(pvm_mytid)
WRAP0(pvm_parent)
WRAP3(pvm_addhosts, char **, int, int *)
WRAP3(pvm_delhosts, char **, int, int *)
WRAP1(pvm_archcode, char *)
WRAP1(pvm_catchout, FILE *)
WRAP3(pvm_config, int *, int *, struct pvmhostinfo **)
WRAP2(pvm_delete, char *, int)
WRAP3(pvm_insert, char *, int, int)
WRAP3(pvm_lookup, char *, int, int *)
WRAP3(pvm_delinfo, char *, int, int)
WRAP3(pvm_putinfo, char *, int, int)
WRAP3(pvm_recvinfo, char *, int, int)
typedef int (*handler_fn)(int);
WRAP1(pvm_export, char *)
WRAP1(pvm_unexport, char *)
WRAP1(pvm_getfds, int **)
WRAP2(pvm_getnoresets, int **, int *)
WRAP2(pvm_gettmask, int, Pvmtmask)
WRAP2(pvm_settmask, int, Pvmtmask)
WRAP0(pvm_halt)
WRAP3(pvm_hostsync, int, struct timeval *, struct timeval *)
WRAP1(pvm_kill, int)
WRAP1(pvm_mstat, char *)
WRAP1(pvm_perror, char *)
WRAP1(pvm_pstat, int)
WRAP2(pvm_sendsig, int, int)
WRAP1(pvm_siblings, int **)
WRAP3(pvm_start_pvmd, int, char **, int)
WRAP3(pvm_tasks, int, int *, struct pvmtaskinfo **)
WRAP4(pvm_tickle, int, int *, int *, int *)
WRAP1(pvm_tidtohost, int)

CPVM_API int pvm_reg_tracer(int a, int b, int c, int d, char *e, int f, int g)
{
    CPVM_WRAP(pvm_reg_tracer, a, b, c, d, e, f, g);
}

CPVM_API int pvm_spawn(char *file, char **argv, int flags, char *where, int n, int *tids)
{
    CPVM_WRAP(pvm_spawn, file, argv, flags, where, n, tids);
}

CPVM_API int pvm_notify(int what, int tag, int cnt, int *tids)
{
    CPVM_WRAP(pvm_notify, what, tag, cnt, tids);
}

typedef int (*match_fn)(int, int, int);
/* pvm3.h declares the old matcher as returned with this odd type; ours follows it. */
CPVM_API __typeof__(pvm_recvf((match_fn)0)) pvm_recvf(match_fn match)
{
    if (CPVM_PASS) return cpvm_real.pvm_recvf(match);
    cpvm_enter();
    __typeof__(pvm_recvf((match_fn)0)) old = REAL(pvm_recvf, match);
    typedef void (*any_fn)(void);
    static any_fn builtin; /* what libpvm3 answered first: its own matcher */
    if (!builtin) builtin = (any_fn)old;
    cpvm_custom_match = match && (any_fn)match != builtin;
    cpvm_leave();
    return old;
}

CPVM_API char *pvm_version(void)
{
    CPVM_WRAP(pvm_version);
}

/*
 * Group calls (libgpvm3): under the lock for their own state, but not as real calls, so the
 * messages they send and receive through pvm_mcast/pvm_send/pvm_recv take the task's route.
 * A group call that waits keeps the lock (libgpvm3 is not re-entrant): other threads' pvm
 * calls wait for it.
 */
#define GROUP(fn, ...)                                                                             \
    do {                                                                                           \
        if (CPVM_PASS) return cpvm_real.fn ? cpvm_real.fn(__VA_ARGS__) : PvmNotImpl;               \
        cpvm_enter();                                                                              \
        int g_ = cpvm_real.fn ? cpvm_real.fn(__VA_ARGS__) : PvmNotImpl;                            \
        cpvm_leave();                                                                              \
        return g_;                                                                                 \
    } while (0)

CPVM_API int pvm_joingroup(char *group)
{
    GROUP(pvm_joingroup, group);
}
CPVM_API int pvm_lvgroup(char *group)
{
    GROUP(pvm_lvgroup, group);
}
CPVM_API int pvm_getinst(char *group, int tid)
{
    GROUP(pvm_getinst, group, tid);
}
CPVM_API int pvm_gettid(char *group, int inst)
{
    GROUP(pvm_gettid, group, inst);
}
CPVM_API int pvm_gsize(char *group)
{
    GROUP(pvm_gsize, group);
}
CPVM_API int pvm_barrier(char *group, int count)
{
    GROUP(pvm_barrier, group, count);
}
CPVM_API int pvm_bcast(char *group, int tag)
{
    GROUP(pvm_bcast, group, tag);
}
CPVM_API int pvm_freezegroup(char *group, int size)
{
    GROUP(pvm_freezegroup, group, size);
}

CPVM_API int pvm_gather(void *result, void *data, int count, int type, int tag, char *group,
                        int root)
{
    GROUP(pvm_gather, result, data, count, type, tag, group, root);
}

CPVM_API int pvm_scatter(void *result, void *data, int count, int type, int tag, char *group,
                         int root)
{
    GROUP(pvm_scatter, result, data, count, type, tag, group, root);
}

CPVM_API int pvm_reduce(void (*func)(int *, void *, void *, int *, int *), void *data, int count,
                        int type, int tag, char *group, int root)
{
    GROUP(pvm_reduce, func, data, count, type, tag, group, root);
}
