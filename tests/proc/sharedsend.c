/*
 * sharedsend: threads that send as one reserved task at the same time, each to another domain,
 * as libcorpvm's threads send as its inbox. A task's first sends race to install its table of
 * message numbers (proto.c, cor__send_start), and later ones take numbers side by side: under
 * ThreadSanitizer either would be a report. Every round, each domain reserves a fresh task and
 * starts one thread per other domain; they leave a barrier together and send -m messages each
 * to that domain's mailbox "rx", which a receiving thread empties: every message must arrive
 * exactly once, in order per sending task, with its content. Uses cor.h only. Run under
 * cor-run (see proc/sharedsend.sh).
 *
 *   sharedsend [-r ROUNDS] [-m MESSAGES]   (defaults 20 and 50)
 * Output: "sharedsend: domain R: PASS ..." (exit 0) or FAIL lines (exit 1; 3 when stalled).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cor/cor.h"
#include "proc_util.h"

enum { MAX_DOMAINS = 16, MAX_ROUNDS = 500, MAX_MSGS = 10000, WORDS = 4 };

static int rounds = 20, msgs = 50, rank, ndom;
static cor_idp_t rx, dest[MAX_DOMAINS];
static _Atomic long ticks;
static atomic_int done;

/* One round's sending thread: to domain `to`, as task `as`, after the round's barrier. */
struct sender {
    pthread_t thread;
    cor_idp_t as;
    int to, round;
    pthread_barrier_t *start;
};

static void *send_main(void *arg)
{
    struct sender *s = arg;
    pthread_barrier_wait(s->start);
    for (int i = 0; i < msgs; i++) {
        long w[WORDS] = {rank, s->round, i, (long)mix64((uint64_t)(rank * 1000003 + i))};
        cor_req_t r;
        int err = cor_sendI_as(s->as, dest[s->to], COR_CTX_WORLD, s->round * msgs + i, COR_LONG, w,
                               WORDS, &r);
        if (!err) err = cor_wait(&r, NULL);
        if (err) {
            pt_fail("round %d: send %d to domain %d: %s", s->round, i, s->to, cor_strerror(err));
            break;
        }
        atomic_fetch_add(&ticks, 1);
    }
    return NULL;
}

/* Empties rx: (ndom - 1) x rounds x msgs messages; next[d][round] is the index expected. */
static void *recv_main(void *arg)
{
    (void)arg;
    static int next[MAX_DOMAINS][MAX_ROUNDS];
    long want = (long)(ndom - 1) * rounds * msgs;
    for (long k = 0; k < want; k++) {
        long w[WORDS];
        cor_req_t r;
        cor_status_t st;
        int err = cor_recvI_into_as(rx, COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_LONG, w,
                                    WORDS, &r);
        if (!err) err = cor_wait(&r, &st);
        if (err) {
            pt_fail("receive %ld of %ld: %s", k, want, cor_strerror(err));
            return NULL;
        }
        atomic_fetch_add(&ticks, 1);
        long from = w[0], round = w[1], i = w[2];
        if (from < 0 || from >= ndom || from == rank || round < 0 || round >= rounds || i < 0 ||
            i >= msgs || st.tag != round * msgs + i ||
            w[3] != (long)mix64((uint64_t)(from * 1000003 + i))) {
            pt_fail("message %ld: bad content (from %ld, round %ld, index %ld, tag %d)", k, from,
                    round, i, st.tag);
            continue;
        }
        if (next[from][round] != i)
            pt_fail("from domain %ld, round %ld: message %ld where %d was next", from, round, i,
                    next[from][round]);
        next[from][round] = (int)i + 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pt_name = "sharedsend";
    int c;
    while ((c = getopt(argc, argv, "r:m:")) != -1) {
        if (c == 'r')
            rounds = atoi(optarg);
        else if (c == 'm')
            msgs = atoi(optarg);
        else {
            fprintf(stderr, "usage: sharedsend [-r ROUNDS] [-m MESSAGES]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || msgs < 1 || msgs > MAX_MSGS) {
        fprintf(stderr, "sharedsend: -r 1..%d, -m 1..%d\n", MAX_ROUNDS, MAX_MSGS);
        return 2;
    }
    int err = cor_init(&argc, &argv);
    if (err) {
        fprintf(stderr, "sharedsend: cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    rank = pt_rank = cor_domain_rank();
    ndom = cor_domain_count();
    if (ndom < 3 || ndom > MAX_DOMAINS) {
        pt_fail("needs 3..%d domains (two threads sending at once), not %d", MAX_DOMAINS, ndom);
        cor_finalize();
        return 1;
    }
    pt_watchdog_start(&ticks, &done, 60, 3, "sends or receives of the shared tasks");
    if ((err = cor_task_reserve("rx", &rx)) || (err = cor_barrier())) {
        pt_fail("reserve rx / barrier: %s", cor_strerror(err));
        return 1;
    }
    for (int d = 0; d < ndom; d++)
        if (d != rank && (err = cor_task_lookup(d, "rx", 0, &dest[d])))
            pt_fail("look up domain %d's rx: %s", d, cor_strerror(err));
    pthread_t receiver;
    if (pthread_create(&receiver, NULL, recv_main, NULL)) pt_fail("pthread_create");
    double t0 = now_s();
    struct sender s[MAX_DOMAINS];
    for (int round = 0; round < rounds && !atomic_load(&pt_failures); round++) {
        char name[32];
        cor_idp_t as;
        snprintf(name, sizeof name, "shared.%d", round);
        if ((err = cor_task_reserve(name, &as))) {
            pt_fail("reserve %s: %s", name, cor_strerror(err));
            break;
        }
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)ndom - 1);
        int n = 0;
        for (int d = 0; d < ndom; d++) {
            if (d == rank) continue;
            s[n] = (struct sender){.as = as, .to = d, .round = round, .start = &start};
            if (pthread_create(&s[n].thread, NULL, send_main, &s[n])) {
                pt_fail("pthread_create");
                exit(1); /* the others wait at the barrier for it */
            }
            n++;
        }
        for (int i = 0; i < n; i++)
            pthread_join(s[i].thread, NULL);
        pthread_barrier_destroy(&start);
    }
    if (!atomic_load(&pt_failures)) pthread_join(receiver, NULL);
    long failures = atomic_load(&pt_failures);
    if (!failures && (err = cor_barrier())) pt_fail("last barrier: %s", cor_strerror(err));
    atomic_store(&done, 1);
    failures = atomic_load(&pt_failures);
    if (failures) {
        fflush(stderr);
        _exit(1); /* the receiver may still wait for what will not come */
    }
    printf("sharedsend: domain %d: PASS %d rounds x %d threads x %d messages (%.2f s)\n", rank,
           rounds, ndom - 1, msgs, now_s() - t0);
    fflush(stdout);
    cor_finalize();
    return 0;
}
