/*
 * pvm_mixed: CoR and PVM calls between the same two tasks. Under libcorpvm a PVM task that
 * runs a CoR route is also a CoR domain: pvm_mytid() joins the virtual machine's CoR session,
 * cor_init() then shares that session, and pvm_cor_task() names a peer task's CoR tasks.
 *
 * The master spawns one worker (this program with the argument "worker"). Each side:
 *  1. pvm_mytid(), cor_init(), and cor_task_spawn() of a "partner" task; the partner's index
 *     (tasks are numbered in spawn order) and the domain rank go to the peer in a PVM message;
 *  2. pvm_cor_task(peer, 0, &idp) names the peer's main thread (task 0: the thread that
 *     enrolled), pvm_cor_task(peer, index, &idp) its partner;
 *  3. ping-pong between the main threads, each round one way with cor_sendI/cor_recvI and back
 *     with pvm_send/pvm_recv, then the other way round (up to 280 KB);
 *  4. both send a stream whose messages alternate between cor_sendI and pvm_send, while
 *     receiving the peer's with pre-posted cor_recvI and pvm_recv in the same alternation;
 *  5. meanwhile the two partners play ping-pong over CoR in a context of their own (up to
 *     256 KiB) and then exchange a PVM message from their own threads;
 *  6. cor_finalize(), pvm_exit().
 * Every message carries its sequence number and checked contents. The master prints one
 * summary line; the exit status is 0 when everything arrived intact and in order.
 *
 *   cor-pvm --route myrinet ./pvm_mixed            (pvmd running; the worker is found
 *   COR_PVM_ROUTE=udp PVM_EXPORT=COR_PVM_ROUTE ./pvm_mixed    through ep= or this path)
 * (link with -lcorpvm -lcor before -lpvm3; from a build tree, also export COR_ROUTE_PATH,
 * the folders of the route plugins, which cor-pvm finds by itself). Without COR_PVM_ROUTE
 * the program asks for the udp route itself, with pvm_setopt(PvmRoute, PvmRouteDirectUDP).
 * PVM_EXAMPLE_TIMEOUT (seconds, default 60) bounds a run: a task stuck that long says where
 * and exits with status 3 (status 1 two seconds after a wrong message, as the peer would
 * wait for ever).
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cor/pvm.h>

/* PVM tags */
#define TAG_INFO 200   /* partner index and domain rank */
#define TAG_PVM_PP 201 /* ping-pong, PVM half */
#define TAG_PVM_STREAM 202
#define TAG_TASK_PVM 203 /* the partners' PVM message */
#define TAG_DONE 204
/* CoR tags */
#define TAG_COR_PP 10
#define TAG_COR_STREAM 11
#define TAG_PEER 12 /* main -> its partner: the peer's partner idp */
#define TAG_TASK 13 /* partner <-> partner */

#define PP_ROUNDS 20
#define STREAM 40 /* messages per stream, half of them CoR */
#define TASK_ROUNDS 10
#define HDR 4 /* ints: magic, side, seq, n */
#define MAGIC 0x6d697864
#define MAX_INTS (70000 + HDR)
#define TASK_MAX (256 * 1024)

static int me, peer, is_worker, side; /* side: 0 master, 1 worker */
static const char *who;
static _Atomic int failures;
static _Atomic int stage; /* where main is, for the watchdog */
static _Atomic int task_stage;
static _Atomic int step;          /* the message main is at (stages 2 and 3) */
static const char *_Atomic doing; /* the call main is in */

static void at(int seq, const char *call)
{
    atomic_store(&step, seq);
    atomic_store(&doing, call);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pvm_mixed[t%x %s]: %s\n", (unsigned)me, who, msg);
    atomic_fetch_add(&failures, 1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- message contents ----------------------------------------------------------------- */

/* Message (s, seq) of n data ints: a header, then values derived from all three. */
static void fill_ints(int *b, int s, int seq, int n)
{
    b[0] = MAGIC, b[1] = s, b[2] = seq, b[3] = n;
    for (int i = 0; i < n; i++)
        b[HDR + i] = (int)((unsigned)seq * 2654435761u ^ (unsigned)i * 40503u ^ (unsigned)s << 30);
}

static int check_ints(const int *b, size_t count, int s, int seq, int n, const char *what)
{
    if (count != (size_t)(n + HDR) || b[0] != MAGIC || b[1] != s || b[2] != seq || b[3] != n) {
        fail("%s: expected message (side %d, seq %d, %d ints), got %zu ints (magic %x, side %d, "
             "seq %d, n %d)",
             what, s, seq, n, count, count >= 4 ? (unsigned)b[0] : 0u, count >= 4 ? b[1] : -1,
             count >= 4 ? b[2] : -1, count >= 4 ? b[3] : -1);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (b[HDR + i] !=
            (int)((unsigned)seq * 2654435761u ^ (unsigned)i * 40503u ^ (unsigned)s << 30)) {
            fail("%s: message (side %d, seq %d): data int %d of %d corrupt", what, s, seq, i, n);
            return -1;
        }
    return 0;
}

/* ---- the CoR half ---------------------------------------------------------------------- */

static cor_idp_t peer_main; /* the peer's task 0 */

/* Starts sending message (side, seq) of n ints to the peer's main thread. */
static int cor_start_send(int seq, int n, int tag, int **buf, cor_req_t *req)
{
    *buf = cor_getBuffer(COR_INT, (size_t)(n + HDR));
    if (!*buf) {
        fail("cor_getBuffer(%d ints) failed", n + HDR);
        return -1;
    }
    fill_ints(*buf, side, seq, n);
    int err = cor_sendI(peer_main, COR_CTX_WORLD, tag, *buf, (size_t)(n + HDR), req);
    if (err) {
        fail("cor_sendI of message %d: %s", seq, cor_strerror(err));
        cor_releaseBuffer(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

static int cor_finish_send(int seq, int *buf, cor_req_t *req)
{
    cor_status_t st;
    at(seq, "cor_wait of its cor_sendI");
    int err = cor_wait(req, &st);
    cor_releaseBuffer(buf);
    if (err) fail("cor_sendI of message %d completed with %s", seq, cor_strerror(err));
    return err ? -1 : 0;
}

/* Checks a completed CoR receive of message (peer's side, seq) of n ints. */
static int cor_check_recv(int err, const cor_status_t *st, const int *data, int seq, int n, int tag,
                          const char *what)
{
    if (err) {
        fail("%s %d: cor_recvI completed with %s", what, seq, cor_strerror(err));
        return -1;
    }
    if (st->source != peer_main || st->tag != tag || st->type != COR_INT ||
        st->context != COR_CTX_WORLD) {
        char a[64], b[64];
        fail("%s %d: status says source %s tag %d type %d, expected %s tag %d type %d", what, seq,
             cor_idp_format(st->source, a, sizeof a), st->tag, (int)st->type,
             cor_idp_format(peer_main, b, sizeof b), tag, (int)COR_INT);
        return -1;
    }
    return check_ints(data, st->count, 1 - side, seq, n, what);
}

/* Receives message seq over CoR: with a core buffer on even seq, into ours on odd. */
static int cor_recv_one(int seq, int n, int tag, int *mine)
{
    cor_req_t req;
    cor_status_t st;
    void *ptr = NULL;
    at(seq, "cor_wait of its cor_recvI");
    int err = seq % 2 ? cor_recvI_into(peer_main, COR_CTX_WORLD, tag, COR_INT, mine, MAX_INTS, &req)
                      : cor_recvI(peer_main, COR_CTX_WORLD, tag, &ptr, &req);
    if (!err) err = cor_wait(&req, &st);
    int rc = cor_check_recv(err, &st, seq % 2 ? mine : ptr, seq, n, tag, "CoR message");
    if (ptr) cor_releaseBuffer(ptr);
    return rc;
}

/* ---- the PVM half ---------------------------------------------------------------------- */

static int pvm_send_one(int seq, int n, int tag, int *tmp)
{
    fill_ints(tmp, side, seq, n);
    at(seq, "pvm_send");
    int rc = pvm_initsend(seq % 2 ? PvmDataRaw : PvmDataDefault);
    if (rc >= 0) rc = pvm_pkint(tmp, n + HDR, 1);
    if (rc >= 0) rc = pvm_send(peer, tag);
    if (rc < 0) fail("pvm_send of message %d (tag %d): PVM error %d", seq, tag, rc);
    return rc < 0 ? -1 : 0;
}

static int pvm_recv_one(int seq, int n, int tag, int *tmp)
{
    at(seq, "pvm_recv");
    int bufid = pvm_recv(peer, tag);
    int bytes = 0, rtag = 0, src = 0;
    if (bufid <= 0 || pvm_bufinfo(bufid, &bytes, &rtag, &src) < 0 || rtag != tag || src != peer) {
        fail("pvm_recv of message %d (tag %d from t%x): %d, tag %d from t%x", seq, tag,
             (unsigned)peer, bufid, rtag, (unsigned)src);
        return -1;
    }
    int hdr[HDR];
    if (pvm_upkint(hdr, HDR, 1) < 0 || hdr[3] != n) {
        fail("PVM message %d: header says %d ints, expected %d", seq, hdr[3], n);
        return -1;
    }
    memcpy(tmp, hdr, sizeof hdr);
    if (n && pvm_upkint(tmp + HDR, n, 1) < 0) {
        fail("PVM message %d: cannot unpack %d ints", seq, n);
        return -1;
    }
    pvm_freebuf(bufid);
    return check_ints(tmp, (size_t)(n + HDR), 1 - side, seq, n, "PVM message");
}

/* ---- the partner task ------------------------------------------------------------------ */

static cor_idp_t task_ctx; /* the partners' own context */
static int task_bytes_max;

static void fill_bytes(unsigned char *b, int n, int s, int seq)
{
    for (int i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 13 + seq * 7 + s * 101 + (i >> 9));
}

static int partner(void *arg)
{
    (void)arg;
    int bad = 0;
    cor_idp_t buddy = 0, self = cor_task_self();
    cor_status_t st;
    /* Our main thread tells us the peer's partner (a CoR message inside this domain). */
    int err = cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, TAG_PEER, COR_UINT64, &buddy, 1, &st);
    if (err || cor_idp_index(st.source) != 0 || cor_idp_domain(st.source) != cor_idp_domain(self)) {
        fail("partner: no peer from the main thread (%s)", cor_strerror(err));
        return 1;
    }
    if (cor_idp_domain(buddy) == cor_idp_domain(self))
        return 1; /* main failed before it knew the peer */
    atomic_store(&task_stage, 1);
    unsigned char *out = cor_getBuffer(COR_BYTE, TASK_MAX), *want = malloc(TASK_MAX);
    if (!out || !want) {
        fail("partner: out of memory");
        return 1;
    }
    /* Ping-pong, the master's partner first, sizes up to 256 KiB. */
    for (int seq = 0; seq < TASK_ROUNDS && !bad; seq++) {
        int n = seq == TASK_ROUNDS - 1 ? TASK_MAX : (seq * 28657) % TASK_MAX;
        for (int turn = 0; turn < 2 && !bad; turn++) {
            if (turn == side) { /* our turn to send */
                fill_bytes(out, n, side, seq);
                err = cor_send(buddy, task_ctx, TAG_TASK, COR_BYTE, out, (size_t)n);
                if (err) fail("partner: cor_send %d: %s", seq, cor_strerror(err)), bad = 1;
            } else {
                void *in = NULL;
                cor_req_t req;
                err = cor_recvI(buddy, task_ctx, TAG_TASK, &in, &req);
                if (!err) err = cor_wait(&req, &st);
                fill_bytes(want, n, 1 - side, seq);
                if (err || st.source != buddy || st.count != (size_t)n || st.context != task_ctx ||
                    memcmp(in, want, (size_t)n)) {
                    fail("partner: message %d (%d B) from the peer's partner: %s, %zu B, "
                         "source %s",
                         seq, n, cor_strerror(err), st.count,
                         st.source == buddy ? "right" : "WRONG");
                    bad = 1;
                }
                if (in) cor_releaseBuffer(in);
                if (n > task_bytes_max) task_bytes_max = n;
            }
        }
    }
    atomic_store(&task_stage, 2);
    /* A PVM message from this thread too: (partner index, the peer's partner index). */
    if (!bad) {
        int v[2] = {(int)cor_idp_index(self), (int)cor_idp_index(buddy)}, got[2] = {-1, -1};
        pvm_initsend(PvmDataDefault);
        pvm_pkint(v, 2, 1);
        if (pvm_send(peer, TAG_TASK_PVM) < 0 || pvm_recv(peer, TAG_TASK_PVM) <= 0 ||
            pvm_upkint(got, 2, 1) < 0 || got[0] != v[1] || got[1] != v[0]) {
            fail("partner: PVM message from the peer's partner says (%d, %d), expected (%d, %d)",
                 got[0], got[1], v[1], v[0]);
            bad = 1;
        }
    }
    atomic_store(&task_stage, 3);
    cor_releaseBuffer(out);
    free(want);
    return bad;
}

/* ---- main ------------------------------------------------------------------------------ */

/* Watchdog: a run that hangs, or that failed (its peer then waits for ever), says where it
 * was and ends: status 3 after `limit` seconds, 1 two seconds after a failure. */
static _Atomic int finished;
static void *watchdog(void *arg)
{
    double limit = *(double *)arg, t0 = now(), failed_at = 0;
    while (!atomic_load(&finished)) {
        if (!failed_at && atomic_load(&failures)) failed_at = now();
        bool stuck = now() - t0 > limit, given_up = failed_at && now() - failed_at > 2;
        if (stuck || given_up) {
            const char *call = atomic_load(&doing);
            fprintf(stderr,
                    "pvm_mixed[t%x %s]: %s %.0f s: main at stage %d (message %d, in %s), "
                    "partner at stage %d\n",
                    (unsigned)me, who,
                    stuck ? "still running after" : "giving up after a failure, at",
                    stuck ? limit : now() - t0, atomic_load(&stage), atomic_load(&step),
                    call ? call : "none of them", atomic_load(&task_stage));
            cor_stats_t k;
            if (stuck && cor_stats_get(&k) == COR_OK)
                fprintf(stderr,
                        "pvm_mixed[t%x %s]: core: sent %llu (eager %llu, rendezvous %llu) "
                        "received %llu; credit frames %llu, stalls %llu; unexpected now %llu; "
                        "frames dropped %llu\n",
                        (unsigned)me, who, (unsigned long long)k.msgs_sent,
                        (unsigned long long)k.eager_sent, (unsigned long long)k.rndv_sent,
                        (unsigned long long)k.msgs_received, (unsigned long long)k.credit_frames,
                        (unsigned long long)k.credit_stalls, (unsigned long long)k.unexpected_now,
                        (unsigned long long)k.frames_dropped);
            if (!is_worker) {
                printf("pvm_mixed: FAILED (%s; details on stderr and in the pvmd log)\n",
                       stuck ? "stuck" : "wrong message");
                fflush(stdout);
            }
            _exit(stuck ? 3 : 1);
        }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int spawn_worker(const char *argv0)
{
    char *args[] = {"worker", NULL};
    const char *base = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
    int tid = 0;
    if (pvm_spawn((char *)base, args, PvmTaskDefault, "", 1, &tid) == 1) return tid;
    char path[PATH_MAX];
    if (realpath(argv0, path) && pvm_spawn(path, args, PvmTaskDefault, "", 1, &tid) == 1)
        return tid;
    fprintf(stderr, "pvm_mixed: cannot spawn the worker %s (PVM error %d)\n", argv0, tid);
    return -1;
}

static int pp_size(int r)
{
    static const int s[] = {0, 1, 100, 5000, 70000};
    return s[r % 5];
}
static int stream_size(int i)
{
    return (i * 997) % 4096;
}

int main(int argc, char **argv)
{
    /* 1. Enrol in PVM first: with a route chosen, this joins the CoR session. */
    me = pvm_mytid();
    if (me < 0) {
        fprintf(stderr, "pvm_mixed: pvm_mytid: %d (is pvmd running?)\n", me);
        return 2;
    }
    is_worker = argc > 1 && !strcmp(argv[1], "worker");
    side = is_worker;
    who = is_worker ? "worker" : "master";
    double limit = getenv("PVM_EXAMPLE_TIMEOUT") ? atof(getenv("PVM_EXAMPLE_TIMEOUT")) : 60;
    if (limit <= 0) limit = 60;
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, &limit);
    int opt = pvm_getopt(PvmRoute);
    if (opt != PvmRouteDirectUDP && opt != PvmRouteDirectMyrinet)
        pvm_setopt(PvmRoute, PvmRouteDirectUDP); /* no route from the environment: ask */
    opt = pvm_getopt(PvmRoute);
    int rank = -1;
    if (pvm_cor_domain(me, &rank) != PvmOk) {
        fprintf(stderr,
                "pvm_mixed[t%x %s]: this task joined no CoR session (route option %d; "
                "route plugins not found? COR_ROUTE_PATH)\n",
                (unsigned)me, who, opt);
        pvm_exit();
        return 2;
    }
    if (is_worker) {
        peer = pvm_parent();
    } else if ((peer = spawn_worker(argv[0])) < 0) {
        pvm_exit();
        return 2;
    }

    /* cor_init shares the session libcorpvm joined. */
    int err = cor_init(NULL, NULL);
    if (err || cor_domain_rank() != rank) {
        fprintf(stderr, "pvm_mixed[t%x %s]: cor_init: %s (domain rank %d, libcorpvm says %d)\n",
                (unsigned)me, who, cor_strerror(err), cor_domain_rank(), rank);
        pvm_exit();
        return 2;
    }
    double t0 = now();
    task_ctx = cor_idp_make(cor_session(), COR_KIND_CONTEXT, 0, 42);
    cor_idp_t mytask;
    if ((err = cor_task_spawn("partner", partner, NULL, &mytask))) {
        fprintf(stderr, "pvm_mixed[t%x %s]: cor_task_spawn: %s\n", (unsigned)me, who,
                cor_strerror(err));
        cor_finalize();
        pvm_exit();
        return 2;
    }
    atomic_store(&stage, 1);
    int told_partner = 0;
    /* Tell the peer our partner's index and our rank (PVM), learn theirs. */
    int info[2] = {(int)cor_idp_index(mytask), rank}, pinfo[2] = {-1, -1};
    pvm_initsend(PvmDataDefault);
    pvm_pkint(info, 2, 1);
    pvm_send(peer, TAG_INFO);
    if (pvm_recv(peer, TAG_INFO) <= 0 || pvm_upkint(pinfo, 2, 1) < 0) {
        fail("no partner index from the peer");
        goto done;
    }

    /* 2. The peer's CoR tasks: its main thread (0) and its partner. */
    cor_idp_t peer_task = 0;
    int prc = pvm_cor_task(peer, 0, &peer_main),
        prc2 = pvm_cor_task(peer, (unsigned)pinfo[0], &peer_task);
    if (prc != PvmOk || prc2 != PvmOk || cor_idp_domain(peer_main) != (unsigned)pinfo[1] ||
        cor_idp_domain(peer_task) != (unsigned)pinfo[1] ||
        cor_idp_index(peer_task) != (unsigned)pinfo[0]) {
        fail("pvm_cor_task(t%x): %d/%d, domain %u, expected domain %d (task %d)", (unsigned)peer,
             prc, prc2, cor_idp_domain(peer_main), pinfo[1], pinfo[0]);
        goto done;
    }
    if ((err = cor_send(mytask, COR_CTX_WORLD, TAG_PEER, COR_UINT64, &peer_task, 1))) {
        fail("telling the partner its peer: %s", cor_strerror(err));
        goto done;
    }
    told_partner = 1;
    atomic_store(&stage, 2);

    /* 3. Ping-pong of the main threads: one way over CoR, back over PVM, then swapped. */
    int *tmp = malloc(MAX_INTS * sizeof *tmp);
    if (!tmp) {
        fail("out of memory");
        goto done;
    }
    for (int r = 0; r < PP_ROUNDS && !atomic_load(&failures); r++) {
        int n = pp_size(r), cor_first = r % 2 == 0, ok;
        if (side == 0) {
            int *b;
            cor_req_t q;
            if (cor_first)
                ok = !cor_start_send(r, n, TAG_COR_PP, &b, &q) && !cor_finish_send(r, b, &q) &&
                     !pvm_recv_one(r, n, TAG_PVM_PP, tmp);
            else
                ok = !pvm_send_one(r, n, TAG_PVM_PP, tmp) && !cor_recv_one(r, n, TAG_COR_PP, tmp);
        } else {
            int *b;
            cor_req_t q;
            if (cor_first)
                ok = !cor_recv_one(r, n, TAG_COR_PP, tmp) && !pvm_send_one(r, n, TAG_PVM_PP, tmp);
            else
                ok = !pvm_recv_one(r, n, TAG_PVM_PP, tmp) &&
                     !cor_start_send(r, n, TAG_COR_PP, &b, &q) && !cor_finish_send(r, b, &q);
        }
        (void)ok;
    }
    atomic_store(&stage, 3);

    /* 4. Streams both ways at once, alternating CoR (even) and PVM (odd) messages. */
    if (!atomic_load(&failures)) {
        cor_req_t rreq[STREAM / 2], sreq[STREAM / 2];
        int *sbuf[STREAM / 2];
        void *rptr[STREAM / 2];
        int posted = 0, started = 0;
        for (int i = 0; i < STREAM / 2; i++, posted++) {
            rptr[i] = NULL;
            if ((err = cor_recvI(peer_main, COR_CTX_WORLD, TAG_COR_STREAM, &rptr[i], &rreq[i]))) {
                fail("cor_recvI %d: %s", i, cor_strerror(err));
                break;
            }
        }
        for (int i = 0; i < STREAM && !atomic_load(&failures); i++) {
            if (i % 2 == 0) {
                if (cor_start_send(i, stream_size(i), TAG_COR_STREAM, &sbuf[i / 2], &sreq[i / 2]) ==
                    0)
                    started++;
            } else {
                pvm_send_one(i, stream_size(i), TAG_PVM_STREAM, tmp);
            }
        }
        /* The peer's, in the order sent: the kinds interleave, each in order. */
        for (int i = 0; i < STREAM && !atomic_load(&failures); i++) {
            if (i % 2 == 0) {
                cor_status_t st;
                at(i, "cor_wait of its cor_recvI");
                err = cor_wait(&rreq[i / 2], &st);
                cor_check_recv(err, &st, rptr[i / 2], i, stream_size(i), TAG_COR_STREAM,
                               "CoR stream message");
            } else {
                pvm_recv_one(i, stream_size(i), TAG_PVM_STREAM, tmp);
            }
        }
        for (int i = 0; i < started; i++)
            cor_finish_send(2 * i, sbuf[i], &sreq[i]);
        for (int i = 0; i < posted; i++) {
            if (rreq[i]) { /* left over after a failure */
                cor_cancel(&rreq[i]);
                cor_wait(&rreq[i], NULL);
            }
            if (rptr[i]) cor_releaseBuffer(rptr[i]);
        }
    }
    free(tmp);
    atomic_store(&stage, 4);

done:;
    /* 5. The partner's verdict, then both tasks'. */
    int task_status = -1;
    if (!told_partner) {
        /* It never got its peer: name ourselves, it gives up at once. */
        cor_idp_t none = cor_task_idp(rank, 0);
        cor_send(mytask, COR_CTX_WORLD, TAG_PEER, COR_UINT64, &none, 1);
    }
    if ((err = cor_task_join(mytask, &task_status)) || task_status != 0)
        fail("partner task: join %s, status %d", cor_strerror(err), task_status);
    int ok = atomic_load(&failures) == 0, peer_ok = 0;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&ok, 1, 1);
    pvm_send(peer, TAG_DONE);
    if (pvm_recv(peer, TAG_DONE) <= 0 || pvm_upkint(&peer_ok, 1, 1) < 0) peer_ok = 0;
    double elapsed = now() - t0;
    atomic_store(&stage, 5);

    /* 6. cor_finalize leaves our share of the session; pvm_exit ends it. */
    if ((err = cor_finalize())) {
        fail("cor_finalize: %s", cor_strerror(err));
        ok = 0;
    }
    atomic_store(&finished, 1);
    pthread_join(wd, NULL);
    if (!is_worker) {
        if (ok && peer_ok)
            printf("pvm_mixed: ok: CoR domains %d and %d; %d ping-pong rounds alternating "
                   "cor_sendI/pvm_send (0-%d ints), interleaved streams of %d messages both "
                   "ways, partner tasks %u and %d exchanged %d messages (up to %d B) and a PVM "
                   "message; %.2f s\n",
                   rank, pinfo[1], PP_ROUNDS, MAX_INTS - HDR, STREAM, cor_idp_index(mytask),
                   pinfo[0], 2 * TASK_ROUNDS, TASK_MAX, elapsed);
        else
            printf("pvm_mixed: FAILED (master %s, worker %s; details on stderr and in the pvmd "
                   "log)\n",
                   ok ? "ok" : "failed", peer_ok ? "ok" : "failed");
        fflush(stdout);
    }
    pvm_exit();
    return ok && peer_ok ? 0 : 1;
}
