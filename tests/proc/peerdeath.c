/*
 * peerdeath: the last domain (the victim) streams messages to the others until the test
 * script kills it with SIGKILL. The survivors keep receives and large sends toward it
 * pending; they must all complete (receives with COR_EPEERDEAD, sends with COR_OK or
 * COR_EPEERDEAD) within a few seconds, the death callback must name the victim, new
 * operations toward it must fail, and the survivors must still talk to each other. A survivor
 * that passes exits with status 42 (so the script can tell it from any other ending).
 *
 *   peerdeath DIR [-t TASKS] [-q | -n]
 * -q (quiet victim): the victim sends QUIET_MSGS messages to each survivor task, then sleeps
 * and posts no receive, so the survivors' large sends wait for its clear-to-send and nothing
 * of theirs is in flight toward it when it dies: only a route that notices a dead peer with
 * no traffic (or the launcher) can end their wait.
 * -n (never talked to): nobody sends anything to anybody; each survivor posts a receive from
 * the victim, writes its mark and waits: once the victim is killed the receive must complete
 * with COR_EPEERDEAD, the death callback name the victim, and a barrier fail with
 * COR_EPEERDEAD. Nothing of the survivors' ever went to the victim, and under mpirun
 * --enable-recovery the launcher tells nobody, so only a route that watches peers it never
 * talked to can end that wait. The victim sleeps (at most 120 s) until it is killed.
 * Each domain writes DIR/pid.RANK (its pid) once the session is up, and each survivor
 * DIR/flowing.RANK once every one of its tasks received a message from the victim (the
 * script kills the victim after that, however slow the start: sanitizers, tcp).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cor/cor.h"
#include "proc_util.h"

#define PASS_STATUS 42
#define NRECV 4
#define NSEND 2
#define BIG (256u << 10)
#define STALL_S 15 /* no completion for this long = something hangs */

#define QUIET_MSGS 4

static int rank, ndom, victim, ntasks = 4, quiet, never_talked;
static const char *dir;
static _Atomic long ticks;
static atomic_int death_rank = -1, death_err, death_calls, finished;
static _Atomic long first_err_ns, last_ok_ns;
static atomic_int tasks_flowing; /* survivor tasks that received from the victim */

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void write_mark(const char *name);

static void on_death(int r, int err, void *arg)
{
    atomic_store(&death_rank, r);
    atomic_store(&death_err, err);
    atomic_fetch_add(&death_calls, 1);
}

/* The victim's tasks: stream small messages to task i of every survivor, absorb what comes. */
static int victim_task(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;
    long deadline = now_ns() + 120L * 1000000000L; /* the script kills us long before */
    cor_req_t rr[NRECV] = {0};
    void *rp[NRECV];
    int seq = 0;
    while (now_ns() < deadline) {
        if (quiet && seq >= QUIET_MSGS) { /* wait to be killed, answering nothing */
            usleep(10000);
            continue;
        }
        for (int i = 0; i < NRECV && !quiet; i++)
            if (rr[i] == COR_REQ_NULL)
                cor_recvI(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, &rp[i], &rr[i]);
        for (int r = 0; r < ndom; r++) {
            if (r == victim) continue;
            char msg[64];
            snprintf(msg, sizeof msg, "message %d from the victim", seq);
            cor_send(cor_task_idp(r, index), COR_CTX_WORLD, seq, COR_BYTE, msg, sizeof msg);
        }
        seq++;
        for (int i = 0; i < NRECV; i++) {
            int done = 0;
            cor_status_t st;
            if (rr[i] != COR_REQ_NULL && cor_test(&rr[i], &done, &st) == COR_OK && done && rp[i])
                cor_releaseBuffer(rp[i]);
        }
        usleep(500);
    }
    fprintf(stderr, "peerdeath: victim %d was not killed within 120 s\n", rank);
    _exit(5);
}

/* A survivor's task: receives from and large sends to the victim's task of the same index. */
static int survivor_task(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;
    cor_idp_t peer = cor_task_idp(victim, index);
    cor_req_t reqs[NRECV + NSEND] = {0};
    void *rp[NRECV] = {0};
    void *sbuf[NSEND];
    long oks = 0, recv_dead = 0, send_done = 0;
    int dead_seen = 0;
    for (int i = 0; i < NSEND; i++) {
        sbuf[i] = cor_getBuffer(COR_BYTE, BIG);
        if (!sbuf[i]) {
            pt_fail("cor_getBuffer");
            return 1;
        }
        memset(sbuf[i], 0x5a, BIG);
    }
    for (;;) {
        if (!dead_seen) {
            for (int i = 0; i < NRECV && !dead_seen; i++) {
                if (reqs[i] != COR_REQ_NULL) continue;
                int rc = cor_recvI(peer, COR_CTX_WORLD, COR_ANY_TAG, &rp[i], &reqs[i]);
                if (rc == COR_EPEERDEAD) {
                    /* the core heard of the death before one of our requests showed it:
                     * a new receive from a dead domain is refused at once, as it should */
                    long expect = 0;
                    atomic_compare_exchange_strong(&first_err_ns, &expect, now_ns());
                    recv_dead++;
                    dead_seen = 1;
                } else if (rc != COR_OK) {
                    pt_fail("recvI from the victim: %s", cor_strerror(rc));
                }
            }
            for (int i = 0; i < NSEND; i++) {
                int rc;
                if (reqs[NRECV + i] == COR_REQ_NULL &&
                    (rc = cor_sendI(peer, COR_CTX_WORLD, 7, sbuf[i], BIG, &reqs[NRECV + i])) !=
                        COR_OK &&
                    rc != COR_EPEERDEAD)
                    pt_fail("sendI to the victim: %s", cor_strerror(rc));
            }
        }
        int pending = 0;
        for (int i = 0; i < NRECV + NSEND; i++)
            pending += reqs[i] != COR_REQ_NULL;
        if (!pending) break;
        size_t idx;
        cor_status_t st;
        int rc = cor_waitany(NRECV + NSEND, reqs, &idx, &st);
        atomic_fetch_add(&ticks, 1);
        if (idx >= NRECV + NSEND) {
            pt_fail("waitany: index %zu, %s", idx, cor_strerror(rc));
            return 1;
        }
        if (idx < NRECV) {
            if (rc == COR_OK) {
                if (oks++ == 0 && atomic_fetch_add(&tasks_flowing, 1) + 1 == ntasks)
                    write_mark("flowing");
                /* (also fine after a death: it matched before) */
                atomic_store(&last_ok_ns, now_ns());
                if (rp[idx]) cor_releaseBuffer(rp[idx]);
                rp[idx] = NULL;
            } else if (rc == COR_EPEERDEAD) {
                recv_dead++;
                long expect = 0;
                atomic_compare_exchange_strong(&first_err_ns, &expect, now_ns());
                dead_seen = 1;
            } else {
                pt_fail("receive from the victim completed with %s, expected COR_OK or "
                        "COR_EPEERDEAD",
                        cor_strerror(rc));
                dead_seen = 1;
            }
        } else {
            send_done++;
            if (rc == COR_EPEERDEAD) {
                dead_seen = 1;
                long expect = 0;
                atomic_compare_exchange_strong(&first_err_ns, &expect, now_ns());
            } else if (rc != COR_OK) {
                pt_fail("send to the victim completed with %s", cor_strerror(rc));
            }
        }
    }
    if (oks == 0) pt_fail("task %u received nothing from the victim before it died", index);
    if (recv_dead == 0) pt_fail("task %u: no receive completed with COR_EPEERDEAD", index);
    for (int i = 0; i < NSEND; i++)
        cor_releaseBuffer(sbuf[i]);

    /* After the death: new operations toward the victim fail, promptly. */
    cor_req_t r = COR_REQ_NULL;
    void *p = NULL;
    int rc = cor_recvI(peer, COR_CTX_WORLD, COR_ANY_TAG, &p, &r);
    if (rc == COR_OK) rc = cor_wait(&r, NULL);
    atomic_fetch_add(&ticks, 1);
    if (rc != COR_EPEERDEAD)
        pt_fail("a receive from the dead victim returned %s, expected COR_EPEERDEAD",
                cor_strerror(rc));
    char one = 1;
    rc = cor_send(peer, COR_CTX_WORLD, 1, COR_BYTE, &one, 1);
    atomic_fetch_add(&ticks, 1);
    if (rc != COR_EPEERDEAD)
        pt_fail("a send to the dead victim returned %s, expected COR_EPEERDEAD", cor_strerror(rc));
    return 0;
}

/* DIR/NAME.RANK, holding our pid, written whole (rename). */
static void write_mark(const char *name)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        pt_fail("cannot write %s", tmp);
        return;
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    rename(tmp, path);
}

/* Survivors ping each other: the session goes on without the victim. */
static void survivors_talk(void)
{
    int next = (rank + 1) % ndom, prev = (rank - 1 + ndom) % ndom;
    if (next == victim) next = (next + 1) % ndom;
    if (prev == victim) prev = (prev - 1 + ndom) % ndom;
    if (next == rank) return; /* the only survivor */
    int v = rank, got = -1;
    cor_req_t r;
    int rc = cor_recvI_into(cor_task_idp(prev, 0), COR_CTX_WORLD, 99, COR_INT, &got, 1, &r);
    if (rc == COR_OK) rc = cor_send(cor_task_idp(next, 0), COR_CTX_WORLD, 99, COR_INT, &v, 1);
    if (rc == COR_OK) rc = cor_wait(&r, NULL);
    atomic_fetch_add(&ticks, 1);
    if (rc != COR_OK || got != prev)
        pt_fail("survivors' ring after the death: %s, got %d from domain %d", cor_strerror(rc), got,
                prev);
}

/* -n: a receive from a domain nobody talked to, which dies. */
static int never_talked_main(void)
{
    int rc = cor_barrier();
    if (rc != COR_OK) pt_fail("first barrier: %s", cor_strerror(rc));
    write_mark("pid");
    if (rank == victim) {
        for (int i = 0; i < 1200; i++)
            usleep(100000);
        return 5; /* not reached: the victim is killed */
    }
    pt_watchdog_start(&ticks, &finished, STALL_S, 1,
                      "a receive waits for a dead domain nobody talked to");
    cor_req_t r = COR_REQ_NULL;
    void *p = NULL;
    rc = cor_recvI(cor_task_idp(victim, 1), COR_CTX_WORLD, COR_ANY_TAG, &p, &r);
    if (rc != COR_OK) pt_fail("recvI from the victim: %s", cor_strerror(rc));
    write_mark("flowing");
    long t0 = now_ns();
    if (rc == COR_OK) rc = cor_wait(&r, NULL);
    double waited = (double)(now_ns() - t0) / 1e9;
    atomic_fetch_add(&ticks, 1);
    if (rc != COR_EPEERDEAD)
        pt_fail("a receive from domain %d, killed: %s, expected COR_EPEERDEAD", victim,
                cor_strerror(rc));
    if (p) cor_releaseBuffer(p);
    for (int i = 0; i < 500 && atomic_load(&death_calls) == 0; i++)
        usleep(10000);
    if (atomic_load(&death_calls) != 1 || atomic_load(&death_rank) != victim)
        pt_fail("death callback: %d calls, last for domain %d; expected 1 call for domain %d",
                atomic_load(&death_calls), atomic_load(&death_rank), victim);
    rc = cor_barrier(); /* its death is known: the launcher's fence is not waited for */
    atomic_fetch_add(&ticks, 1);
    if (rc != COR_EPEERDEAD)
        pt_fail("barrier after domain %d died: %s, expected COR_EPEERDEAD", victim,
                cor_strerror(rc));
    printf("peerdeath: domain %d: %s: a receive from domain %d (never talked to) failed %.3f s "
           "after it was posted (the kill came meanwhile)\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", victim, waited);
    fflush(stdout);
    atomic_store(&finished, 1);
    alarm(20);
    rc = cor_finalize();
    if (rc != COR_OK && rc != COR_EPEERDEAD) pt_fail("cor_finalize: %s", cor_strerror(rc));
    return atomic_load(&pt_failures) ? 1 : PASS_STATUS;
}

int main(int argc, char **argv)
{
    pt_name = "peerdeath";
    if (argc < 2) {
        fprintf(stderr, "usage: peerdeath DIR [-t TASKS] [-q | -n]\n");
        return 2;
    }
    dir = argv[1];
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            ntasks = atoi(argv[++i]);
        else if (strcmp(argv[i], "-q") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "-n") == 0)
            never_talked = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "peerdeath: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (ntasks < 1 || ntasks > 64) return 2;
    int rc = cor_init(&argc, &argv);
    if (rc != COR_OK) {
        fprintf(stderr, "peerdeath: cor_init: %s\n", cor_strerror(rc));
        return 1;
    }
    rank = pt_rank = cor_domain_rank();
    ndom = cor_domain_count();
    victim = ndom - 1;
    if (ndom < 2) {
        fprintf(stderr, "peerdeath: needs at least 2 domains\n");
        return 2;
    }
    cor_domain_on_death(on_death, NULL);
    if (never_talked) return never_talked_main();
    cor_idp_t ids[64];
    for (int i = 0; i < ntasks; i++) {
        rc = cor_task_spawn("pd", rank == victim ? victim_task : survivor_task,
                            (void *)(uintptr_t)(i + 1), &ids[i]);
        if (rc != COR_OK) {
            pt_fail("spawn: %s", cor_strerror(rc));
            return 1;
        }
    }
    rc = cor_barrier();
    if (rc != COR_OK) pt_fail("first barrier: %s", cor_strerror(rc));
    write_mark("pid");
    if (rank == victim) {
        for (int i = 0; i < ntasks; i++)
            cor_task_join(ids[i], NULL);
        return 5; /* not reached: the victim is killed */
    }
    pt_watchdog_start(&ticks, &finished, STALL_S, 1, "operations toward the dead domain hang");
    for (int i = 0; i < ntasks; i++) {
        int st = 0;
        rc = cor_task_join(ids[i], &st);
        if (rc != COR_OK || st != 0)
            pt_fail("task %d: join %s, status %d", i + 1, cor_strerror(rc), st);
    }
    survivors_talk();
    for (int i = 0; i < 100 && atomic_load(&death_calls) == 0; i++)
        usleep(10000);
    if (atomic_load(&death_calls) != 1 || atomic_load(&death_rank) != victim)
        pt_fail("death callback: %d calls, last for domain %d; expected 1 call for domain %d",
                atomic_load(&death_calls), atomic_load(&death_rank), victim);
    long lag = atomic_load(&first_err_ns) - atomic_load(&last_ok_ns);
    printf("peerdeath: domain %d: %s: pending operations toward domain %d failed %.3f s after "
           "its last message arrived\n",
           rank, atomic_load(&pt_failures) ? "FAIL" : "PASS", victim, (double)lag / 1e9);
    fflush(stdout);
    atomic_store(&finished, 1);
    alarm(20); /* cor_finalize with a dead domain must not hang either */
    rc = cor_finalize();
    if (rc != COR_OK && rc != COR_EPEERDEAD) pt_fail("cor_finalize: %s", cor_strerror(rc));
    return atomic_load(&pt_failures) ? 1 : PASS_STATUS;
}
