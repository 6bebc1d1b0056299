/*
 * pvm_threads: a threaded PVM program, which plain PVM cannot run. libpvm3 keeps one active
 * send buffer, one receive buffer and one context per process, so two threads packing or
 * unpacking at once corrupt each other's messages; under libcorpvm every thread has its own.
 *
 * The master spawns one worker (this program with the argument "worker"). Each task runs T
 * threads (default 4); thread k of the master plays ping-pong with thread k of the worker on
 * tag TAG_BASE+k (messages of 0 B to 256 KiB, encodings PvmDataDefault/Raw/InPlace in turn),
 * then sends it a burst whose order the worker checks. Every message carries its (thread,
 * sequence) and a checksummed payload, packed and unpacked in pieces with sched_yield()
 * between them so the threads' pack and unpack calls interleave. Each receiver calls
 * pvm_recv(peer, its own tag), so the threads never take each other's messages.
 * One more thread per task sits in a blocking pvm_recv for a tag the peer sends only at the
 * very end: all the exchanges complete while it waits, so a blocked receive blocks nobody.
 * The master prints one summary line; the exit status is 0 when both tasks saw every
 * message intact and in order.
 *
 *   pvm_threads [threads [rounds]]     (pvmd must be running; the worker is found through
 *                                       the hostfile's ep= or by this program's path)
 *   cor-pvm --route myrinet ./pvm_threads        messages over CoR's gm route
 *   COR_PVM_ROUTE=udp PVM_EXPORT=COR_PVM_ROUTE ./pvm_threads     over CoR's udp route
 * (link with -lcorpvm before -lpvm3; from a build tree, also export COR_ROUTE_PATH, the
 * folders of the route plugins, which cor-pvm finds by itself). PVM_EXAMPLE_TIMEOUT (seconds,
 * default 60) bounds a run: a task stuck that long prints what each thread did and exits with
 * status 3 (status 1 two seconds after a wrong message, as the peer would wait for ever).
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
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

#define MAX_THREADS 64
#define TAG_CONFIG 100 /* master -> worker: threads, rounds, burst */
#define TAG_LATE 101   /* sent once every exchange is over: the blocked receive's tag */
#define TAG_DONE 102   /* each task's verdict */
#define TAG_BASE 1000  /* thread k uses TAG_BASE + k */
#define MAGIC 0x70767468
#define MAX_SIZE (256 * 1024)
#define PIECES 4

static const int sizes[] = {0, 1, 7, 1000, 4096, 65536, 100003, MAX_SIZE};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
static const int encodings[] = {PvmDataDefault, PvmDataRaw, PvmDataInPlace};
static const char *const enc_names[] = {"default", "raw", "inplace"};

static int peer, me, is_worker, nthreads = 4, rounds = 16, burst = 32;

/* Progress, for the checks and the watchdog. */
static _Atomic int round_trips; /* ping-pong rounds completed in this task */
static _Atomic int threads_done;
static _Atomic int failures;
static _Atomic int late_entered, late_returned;
static _Atomic int progress[MAX_THREADS]; /* last sequence number each thread handled */

static void fail(int k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int k, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char who[32];
    if (k >= 0)
        snprintf(who, sizeof who, "thread %d", k);
    else
        snprintf(who, sizeof who, k == -1 ? "main" : "blocked receiver");
    fprintf(stderr, "pvm_threads[t%x %s] %s: %s\n", (unsigned)me, is_worker ? "worker" : "master",
            who, msg);
    atomic_fetch_add(&failures, 1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- messages ------------------------------------------------------------------------- */

/* The payload of message (side, thread, seq): bytes from a xorshift stream. */
static void fill(unsigned char *b, int n, int side, int k, int seq)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ ((uint64_t)side << 56) ^ ((uint64_t)k << 40) ^
                 (uint64_t)(unsigned)seq * 0x100000001b3ull;
    for (int i = 0; i < n; i++) {
        if (i % 8 == 0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        b[i] = (unsigned char)(x >> (8 * (i % 8)));
    }
}

static uint32_t checksum(const unsigned char *b, int n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

/* The pieces a payload of n bytes is packed (and unpacked) in: XDR pads every pvm_pkbyte
 * to 4 bytes, so both sides must cut it the same way. */
static int piece(int n, int i, int *off)
{
    int step = n / PIECES;
    *off = i * step;
    return i == PIECES - 1 ? n - *off : step;
}

enum { H_MAGIC, H_SIDE, H_THREAD, H_SEQ, H_SIZE, H_SUM, H_WORDS };

/* Sends message (side, k, seq) of n bytes with encoding enc, from the thread's own active
 * send buffer. `out` holds the payload until pvm_send returns (InPlace packs references). */
static int send_msg(int k, int side, int seq, int n, int enc, unsigned char *out)
{
    fill(out, n, side, k, seq);
    int hdr[H_WORDS] = {MAGIC, side, k, seq, n, (int)checksum(out, n)};
    if (pvm_initsend(enc) < 0) {
        fail(k, "pvm_initsend(%d) failed", enc);
        return -1;
    }
    int rc = pvm_pkint(hdr, H_WORDS, 1);
    for (int i = 0; i < PIECES && rc >= 0; i++) {
        int off, len = piece(n, i, &off);
        sched_yield(); /* let the other threads pack into their buffers meanwhile */
        rc = pvm_pkbyte((char *)out + off, len, 1);
    }
    if (rc >= 0) rc = pvm_send(peer, TAG_BASE + k);
    if (rc < 0) {
        fail(k, "sending message %d (%d B, %s): PVM error %d", seq, n, enc_names[seq % 3], rc);
        return -1;
    }
    return 0;
}

/* Receives the thread's next message, which must be (side, k, seq) of n bytes. */
static int recv_msg(int k, int side, int seq, int n, unsigned char *in, unsigned char *want)
{
    if (n < 0 || n > MAX_SIZE) return -1;
    int bufid = pvm_recv(peer, TAG_BASE + k);
    if (bufid <= 0) {
        fail(k, "pvm_recv for message %d: PVM error %d", seq, bufid);
        return -1;
    }
    int bytes = 0, tag = 0, src = 0;
    if (pvm_bufinfo(bufid, &bytes, &tag, &src) < 0 || tag != TAG_BASE + k || src != peer) {
        fail(k, "message %d: bufinfo says tag %d from t%x, expected tag %d from t%x", seq, tag,
             (unsigned)src, TAG_BASE + k, (unsigned)peer);
        return -1;
    }
    if (pvm_getrbuf() != bufid) {
        fail(k, "message %d: the active receive buffer is %d, not the one received (%d)", seq,
             pvm_getrbuf(), bufid);
        return -1;
    }
    int hdr[H_WORDS];
    if (pvm_upkint(hdr, H_WORDS, 1) < 0) {
        fail(k, "message %d: cannot unpack the header", seq);
        return -1;
    }
    if (hdr[H_MAGIC] != MAGIC || hdr[H_SIDE] != side || hdr[H_THREAD] != k || hdr[H_SEQ] != seq ||
        hdr[H_SIZE] != n) {
        fail(k,
             "expected message (side %d, thread %d, seq %d, %d B), got (magic %x, side %d, "
             "thread %d, seq %d, %d B)",
             side, k, seq, n, (unsigned)hdr[H_MAGIC], hdr[H_SIDE], hdr[H_THREAD], hdr[H_SEQ],
             hdr[H_SIZE]);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < PIECES && rc >= 0; i++) {
        int off, len = piece(n, i, &off);
        sched_yield(); /* the other threads unpack their own messages meanwhile */
        rc = pvm_upkbyte((char *)in + off, len, 1);
    }
    if (rc < 0) {
        fail(k, "message %d: cannot unpack %d payload bytes (PVM error %d)", seq, n, rc);
        return -1;
    }
    fill(want, n, side, k, seq);
    uint32_t sum = checksum(in, n);
    if (sum != (uint32_t)hdr[H_SUM] || memcmp(in, want, (size_t)n)) {
        int at = 0;
        while (at < n && in[at] == want[at])
            at++;
        fail(k,
             "message %d (%d B): payload corrupt (checksum %08x, header says %08x, first "
             "bad byte %d)",
             seq, n, sum, (unsigned)hdr[H_SUM], at);
        return -1;
    }
    pvm_freebuf(bufid);
    return 0;
}

/* Message seq of thread k: its size and encoding (the worker's replies differ). */
static int size_of(int k, int seq, int side)
{
    return sizes[(seq + k + 3 * side) % NSIZES];
}
static int enc_of(int k, int seq, int side)
{
    return encodings[(seq + k + side) % 3];
}

/* ---- threads -------------------------------------------------------------------------- */

static void *exchange(void *arg)
{
    int k = (int)(intptr_t)arg;
    unsigned char *out = malloc(MAX_SIZE), *in = malloc(MAX_SIZE), *want = malloc(MAX_SIZE);
    int ok = out && in && want;
    if (!ok) fail(k, "out of memory");
    /* Ping-pong: the master sends (side 0), the worker answers (side 1). */
    for (int seq = 0; ok && seq < rounds; seq++) {
        if (!is_worker) {
            ok = send_msg(k, 0, seq, size_of(k, seq, 0), enc_of(k, seq, 0), out) == 0 &&
                 recv_msg(k, 1, seq, size_of(k, seq, 1), in, want) == 0;
            if (ok) atomic_fetch_add(&round_trips, 1);
        } else {
            /* Counted once the message is in: before the master can see the answer. */
            ok = recv_msg(k, 0, seq, size_of(k, seq, 0), in, want) == 0;
            if (ok) atomic_fetch_add(&round_trips, 1);
            ok = ok && send_msg(k, 1, seq, size_of(k, seq, 1), enc_of(k, seq, 1), out) == 0;
        }
        atomic_store(&progress[k], seq + 1);
    }
    /* A burst one way, master to worker: order and content under load. */
    for (int seq = rounds; ok && seq < rounds + burst; seq++) {
        int n = sizes[(seq + k) % (NSIZES - 2)]; /* up to 64 KiB */
        ok = !is_worker ? send_msg(k, 0, seq, n, enc_of(k, seq, 0), out) == 0
                        : recv_msg(k, 0, seq, n, in, want) == 0;
        atomic_store(&progress[k], seq + 1);
    }
    free(out);
    free(in);
    free(want);
    atomic_fetch_add(&threads_done, 1);
    return NULL;
}

static double late_waited;

/* Blocks in pvm_recv until the peer's last message, while the other threads work. */
static void *late(void *arg)
{
    (void)arg;
    double t0 = now();
    atomic_store(&late_entered, 1);
    int bufid = pvm_recv(peer, TAG_LATE);
    late_waited = now() - t0;
    int trips = atomic_load(&round_trips), peer_trips = -1;
    if (bufid <= 0 || pvm_upkint(&peer_trips, 1, 1) < 0) {
        fail(-2, "blocked pvm_recv(t%x, %d) failed: %d", (unsigned)peer, TAG_LATE, bufid);
    } else if (trips != nthreads * rounds || peer_trips != nthreads * rounds) {
        /* The peer sends it only after all its exchanges: ours must be over too. */
        fail(-2,
             "the blocked receive returned after %d round trips here, %d at the peer; "
             "expected %d",
             trips, peer_trips, nthreads * rounds);
    }
    if (bufid > 0) pvm_freebuf(bufid);
    atomic_store(&late_returned, 1);
    return NULL;
}

/* Watchdog: a run that hangs, or that failed (its peer then waits for ever), says where each
 * thread was and ends: status 3 after `limit` seconds, 1 two seconds after a failure. */
static _Atomic int finished;
static void *watchdog(void *arg)
{
    double limit = *(double *)arg, t0 = now(), failed_at = 0;
    while (!atomic_load(&finished)) {
        if (!failed_at && atomic_load(&failures)) failed_at = now();
        bool stuck = now() - t0 > limit, given_up = failed_at && now() - failed_at > 2;
        if (stuck || given_up) {
            /* One write: pvmd logs each write of a spawned task as a line. */
            char line[1024];
            int n = snprintf(line, sizeof line,
                             "pvm_threads[t%x %s]: %s %.0f s: round trips %d, "
                             "threads done %d of %d, blocked receive %s; sequence per thread:",
                             (unsigned)me, is_worker ? "worker" : "master",
                             stuck ? "still running after" : "giving up after a failure, at",
                             stuck ? limit : now() - t0, atomic_load(&round_trips),
                             atomic_load(&threads_done), nthreads,
                             atomic_load(&late_returned)  ? "returned"
                             : atomic_load(&late_entered) ? "waiting"
                                                          : "not started");
            for (int k = 0; k < nthreads && n < (int)sizeof line - 16; k++)
                n += snprintf(line + n, sizeof line - (size_t)n, " %d", atomic_load(&progress[k]));
            fprintf(stderr, "%s\n", line);
            if (!is_worker) {
                printf("pvm_threads: FAILED (%s; details on stderr and in the pvmd log)\n",
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

/* ---- main ----------------------------------------------------------------------------- */

/* Spawns the worker: by name (the hostfile's ep= path), else by this program's path. */
static int spawn_worker(const char *argv0)
{
    char *args[] = {"worker", NULL};
    const char *base = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
    int tid = 0;
    if (pvm_spawn((char *)base, args, PvmTaskDefault, "", 1, &tid) == 1) return tid;
    char path[PATH_MAX];
    if (realpath(argv0, path) && pvm_spawn(path, args, PvmTaskDefault, "", 1, &tid) == 1)
        return tid;
    fprintf(stderr, "pvm_threads: cannot spawn the worker %s (PVM error %d)\n", argv0, tid);
    return -1;
}

int main(int argc, char **argv)
{
    me = pvm_mytid();
    if (me < 0) {
        fprintf(stderr, "pvm_threads: pvm_mytid: %d (is pvmd running?)\n", me);
        return 2;
    }
    is_worker = argc > 1 && !strcmp(argv[1], "worker");
    double limit = getenv("PVM_EXAMPLE_TIMEOUT") ? atof(getenv("PVM_EXAMPLE_TIMEOUT")) : 60;
    if (limit <= 0) limit = 60;
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, &limit);

    int cfg[3];
    if (is_worker) {
        peer = pvm_parent();
        if (peer < 0 || pvm_recv(peer, TAG_CONFIG) <= 0 || pvm_upkint(cfg, 3, 1) < 0) {
            fprintf(stderr, "pvm_threads worker: no configuration from the master\n");
            pvm_exit();
            return 2;
        }
        nthreads = cfg[0], rounds = cfg[1], burst = cfg[2];
    } else {
        if (argc > 1) nthreads = atoi(argv[1]);
        if (argc > 2) rounds = atoi(argv[2]);
        if (nthreads < 1 || nthreads > MAX_THREADS || rounds < 1) {
            fprintf(stderr, "usage: pvm_threads [threads (1-%d) [rounds (>= 1)]]\n", MAX_THREADS);
            pvm_exit();
            return 2;
        }
        if ((peer = spawn_worker(argv[0])) < 0) {
            pvm_exit();
            return 2;
        }
        cfg[0] = nthreads, cfg[1] = rounds, cfg[2] = burst;
        pvm_initsend(PvmDataDefault);
        pvm_pkint(cfg, 3, 1);
        pvm_send(peer, TAG_CONFIG);
    }

    double t0 = now();
    /* The blocked receive first: the exchanges start only once it waits. */
    pthread_t lt, th[MAX_THREADS];
    pthread_create(&lt, NULL, late, NULL);
    while (!atomic_load(&late_entered))
        sched_yield();
    struct timespec settle = {0, 20000000};
    nanosleep(&settle, NULL);
    for (int k = 0; k < nthreads; k++)
        pthread_create(&th[k], NULL, exchange, (void *)(intptr_t)k);
    for (int k = 0; k < nthreads; k++)
        pthread_join(th[k], NULL);
    /* Every exchange is over here: release the peer's blocked receive. */
    int trips = atomic_load(&round_trips);
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&trips, 1, 1);
    pvm_send(peer, TAG_LATE);
    pthread_join(lt, NULL);
    double elapsed = now() - t0;

    /* Verdicts. */
    int ok = atomic_load(&failures) == 0, peer_ok = 0;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&ok, 1, 1);
    pvm_send(peer, TAG_DONE);
    if (pvm_recv(peer, TAG_DONE) <= 0 || pvm_upkint(&peer_ok, 1, 1) < 0) peer_ok = 0;
    atomic_store(&finished, 1);
    pthread_join(wd, NULL);
    if (!is_worker) {
        if (ok && peer_ok)
            printf("pvm_threads: ok: %d thread pairs x (%d round trips + %d burst), 0-%d B, "
                   "default/raw/inplace; a blocked pvm_recv waited %.2f s while %d round trips "
                   "completed; %.2f s\n",
                   nthreads, rounds, burst, MAX_SIZE, late_waited, trips, elapsed);
        else
            printf("pvm_threads: FAILED (master %s, worker %s; details on stderr and in the "
                   "pvmd log)\n",
                   ok ? "ok" : "failed", peer_ok ? "ok" : "failed");
        fflush(stdout);
    }
    pvm_exit();
    return ok && peer_ok ? 0 : 1;
}
