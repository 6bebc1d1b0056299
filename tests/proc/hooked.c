/*
 * hooked: a mailbox served by its arrival hook (cor_task_on_arrival) across a route. Domain 0
 * reserves a task whose hook receives every message and echoes it back from inside the hook;
 * domain 1 sends messages of mixed sizes (eager and rendezvous: 0 B up to -x bytes) and checks
 * each echo's size, content and order. Two phases, so that both kinds of thread bring
 * messages: in the first, domain 0's main thread sleeps in a receive and domain 1 pauses now
 * and then, so the core's listeners bring them (COR_ARRIVAL_LISTENER); in the second, domain
 * 0's main thread polls (cor_progress) and brings them itself. Domain 0 checks that every
 * message was served by the hook and that both kinds of call came. Uses cor.h only.
 *
 *   hooked [-m MESSAGES per phase] [-x MAXBYTES]
 * Output: "hooked: domain R: PASS ..." or FAIL lines; exit 0 only on PASS.
 */
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

#include "cor/cor.h"
#include "proc_util.h"

#define TAG_DONE 1
#define TAG_ECHO_BASE 100 /* the echo of message k has tag TAG_ECHO_BASE + k */
#define MAX_PENDING 64

static int rank;
static long per_phase = 2000;
static size_t maxsize = 256 * 1024;

/* Message k: its size (mostly small, some beyond any eager limit) and its bytes. */
static size_t size_of(long k)
{
    uint64_t r = mix64((uint64_t)k + 1);
    size_t s = (r & 7) == 0 ? (size_t)(r >> 8) % (maxsize + 1) : (size_t)(r >> 8) % 512;
    return s;
}

static void fill(unsigned char *b, size_t n, long k)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(mix64((uint64_t)k * 1000003u + i / 8) >> (8 * (i % 8)));
}

/* ---- domain 0: the hooked mailbox ---- */

static struct {
    cor_idp_t box;
    pthread_mutex_t turn; /* one thread receives on the box at a time */
    _Atomic int pending;
    cor_req_t rr; /* the box's receive (turn) */
    void *msg;
    struct {
        cor_req_t req;
        void *buf;
    } out[MAX_PENDING]; /* echoes under way (turn) */
    int nout;
    _Atomic long served, by_listener, by_others;
} E = {.turn = PTHREAD_MUTEX_INITIALIZER};

/* Frees the echoes whose sends completed; all: waits for every one. Under the turn. */
static void reap(bool all)
{
    for (int i = 0; i < E.nout;) {
        int done = 1;
        if (all)
            cor_wait(&E.out[i].req, NULL);
        else if (cor_peek(E.out[i].req, &done) == COR_OK && done)
            cor_test(&E.out[i].req, &done, NULL);
        if (!done) {
            i++;
            continue;
        }
        cor_releaseBuffer(E.out[i].buf);
        E.out[i] = E.out[--E.nout];
    }
}

/* Echoes every complete message of the box. Under the turn. */
static void serve_all(void)
{
    for (;;) {
        if (E.rr == COR_REQ_NULL &&
            cor_recvI_as(E.box, COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, &E.msg, &E.rr)) {
            pt_fail("cor_recvI_as in the hook");
            return;
        }
        int done = 0;
        if (cor_peek(E.rr, &done) != COR_OK || !done) return; /* a rendezvous still moving */
        cor_status_t st;
        if (cor_test(&E.rr, &done, &st) != COR_OK) {
            pt_fail("a message to the box completed with an error");
            continue;
        }
        if (E.nout == MAX_PENDING) reap(true); /* the sends are ours to keep until done */
        cor_req_t sr;
        int err = cor_sendI_as(E.box, st.source, COR_CTX_WORLD, TAG_ECHO_BASE + st.tag, COR_BYTE,
                               E.msg, st.count, &sr);
        if (err) {
            pt_fail("echo of message %d: %s", st.tag, cor_strerror(err));
            cor_releaseBuffer(E.msg);
        } else {
            E.out[E.nout].req = sr;
            E.out[E.nout++].buf = E.msg;
        }
        E.msg = NULL;
        atomic_fetch_add(&E.served, 1);
    }
}

static void on_arrival(void *arg, int flags)
{
    (void)arg;
    atomic_fetch_add((flags & COR_ARRIVAL_LISTENER) ? &E.by_listener : &E.by_others, 1);
    atomic_store(&E.pending, 1);
    while (atomic_load(&E.pending)) {
        if (pthread_mutex_trylock(&E.turn)) return; /* the holder sees `pending` */
        while (atomic_exchange(&E.pending, 0)) {
            serve_all();
            reap(false);
        }
        pthread_mutex_unlock(&E.turn);
    }
}

static int server(cor_idp_t client)
{
    cor_idp_t box;
    int err = cor_task_reserve("echo", &box);
    if (err) return err;
    E.box = box;
    E.rr = COR_REQ_NULL;
    if ((err = cor_task_on_arrival(box, on_arrival, NULL))) return err;
    if ((err = cor_barrier())) return err;
    /* phase 1: asleep in a receive (after the core's spin): the listeners bring them */
    long token;
    if ((err = cor_recv(client, COR_CTX_WORLD, TAG_DONE, COR_LONG, &token, 1, NULL))) return err;
    long listener_calls = atomic_load(&E.by_listener);
    /* phase 2: this thread polls until the client is done */
    cor_req_t r;
    if ((err = cor_recvI_into(client, COR_CTX_WORLD, TAG_DONE, COR_LONG, &token, 1, &r)))
        return err;
    int done = 0;
    double t0 = now_s();
    while (!done && now_s() - t0 < 120) {
        cor_progress();
        cor_peek(r, &done);
    }
    if (!done) {
        pt_fail("phase 2 did not end within 120 s");
        cor_cancel(&r);
    }
    cor_wait(&r, NULL);
    cor_task_on_arrival(box, NULL, NULL);
    pthread_mutex_lock(&E.turn);
    reap(true);
    if (E.rr != COR_REQ_NULL) {
        cor_cancel(&E.rr);
        if (cor_wait(&E.rr, NULL) == COR_OK) pt_fail("a message to the box was left unserved");
        if (E.msg) cor_releaseBuffer(E.msg);
    }
    pthread_mutex_unlock(&E.turn);
    long served = atomic_load(&E.served);
    if (served != 2 * per_phase)
        pt_fail("served %ld messages, expected %ld", served, 2 * per_phase);
    if (listener_calls == 0) pt_fail("no message was brought by a listener in phase 1");
    if (atomic_load(&E.by_others) == 0) pt_fail("no message was brought by a task");
    if (atomic_load(&pt_failures) == 0)
        printf("hooked: domain 0: PASS served %ld; hook calls by listeners %ld, by tasks %ld\n",
               served, atomic_load(&E.by_listener), atomic_load(&E.by_others));
    return COR_OK;
}

/* ---- domain 1: the client ---- */

static int client(cor_idp_t server_main)
{
    cor_idp_t box;
    int err = cor_barrier();
    if (err) return err;
    if ((err = cor_task_lookup(0, "echo", 0, &box))) return err;
    unsigned char *out = malloc(maxsize + 1), *in = malloc(maxsize + 1);
    if (!out || !in) return COR_ENOMEM;
    long k = 0, bytes = 0;
    for (int phase = 1; phase <= 2; phase++) {
        for (long i = 0; i < per_phase; i++, k++) {
            /* phase 1: pause now and then, long enough for domain 0 to fall asleep */
            if (phase == 1 && i % 100 == 0) usleep(20000);
            size_t n = size_of(k);
            fill(out, n, k);
            if ((err = cor_send(box, COR_CTX_WORLD, (int)k, COR_BYTE, out, n))) return err;
            cor_status_t st;
            err = cor_recv(box, COR_CTX_WORLD, TAG_ECHO_BASE + (int)k, COR_BYTE, in, maxsize + 1,
                           &st);
            if (err) return err;
            if (st.count != n || memcmp(in, out, n)) pt_fail("echo %ld: wrong size or bytes", k);
            bytes += (long)n;
        }
        long token = phase;
        if ((err = cor_send(server_main, COR_CTX_WORLD, TAG_DONE, COR_LONG, &token, 1))) return err;
    }
    free(out);
    free(in);
    if (atomic_load(&pt_failures) == 0)
        printf("hooked: domain 1: PASS %ld echoes, %ld bytes\n", k, bytes);
    return COR_OK;
}

int main(int argc, char **argv)
{
    pt_name = "hooked";
    int opt;
    while ((opt = getopt(argc, argv, "m:x:")) != -1) {
        switch (opt) {
        case 'm':
            per_phase = atol(optarg);
            break;
        case 'x':
            maxsize = (size_t)atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: hooked [-m MESSAGES] [-x MAXBYTES]\n");
            return 2;
        }
    }
    int err = cor_init(&argc, &argv);
    if (err) {
        fprintf(stderr, "hooked: cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    rank = pt_rank = cor_domain_rank();
    if (cor_domain_count() != 2) {
        fprintf(stderr, "hooked: run with cor-run -n 2\n");
        cor_finalize();
        return 2;
    }
    err = rank == 0 ? server(cor_task_idp(1, 0)) : client(cor_task_idp(0, 0));
    if (err) pt_fail("%s", cor_strerror(err));
    int fin = cor_finalize();
    if (fin) pt_fail("cor_finalize: %s", cor_strerror(fin));
    return atomic_load(&pt_failures) ? 1 : 0;
}
