/*
 * slowpeer: domain 0's first message goes to a domain 1 that gets no CPU meanwhile (the test
 * script holds it stopped): a peer that is slow before it ever heard from us. 2 domains.
 *
 *   slowpeer DIR
 * Domain 1 spawns its task (a receive from domain 0, then the reply), writes DIR/pid.1 and
 * stops itself (SIGSTOP); the script, once it sees it stopped, writes DIR/go and lets it go on
 * (SIGCONT) some time later. Domain 0 waits for DIR/go (60 s at most), then sends one message
 * to domain 1's task and waits for the reply. Nothing went between the two domains before, so
 * over the gm route on tcp domain 0's message waits for a connection that domain 1 takes only
 * once it runs. Each domain prints "slowpeer: domain R: PASS" when its exchange completed, and
 * exits 3 when an operation ended with COR_EPEERDEAD or COR_ETIMEDOUT (domain 0 gave domain 1
 * up; it says how long after DIR/go), 1 on any other failure.
 *
 *   slowpeer DIR late SECONDS
 * A peer that is late, not stopped, and has never heard from us: domain 1 sleeps SECONDS (its
 * core's threads run) before the barrier both domains then enter, with no message between
 * them before; domain 0 enters the barrier at once. With a short COR_BARRIER_WATCH_MS domain
 * 0's barrier watches domain 1 (the route pings it), whose route never added domain 0 (peers
 * at first contact): it must answer the pings all the same. Prints "slowpeer: domain R: PASS"
 * after the barrier, exits 3 if domain 0 gave domain 1 up, 1 on any other failure.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cor/cor.h"
#include "proc_util.h"

#define TAG_PING 7
#define TAG_PONG 8
#define GIVEN_UP 3

static const char *dir;
static _Atomic int given_up;
static double go_at; /* domain 0: when it saw DIR/go (now_s) */

static int note(int err, const char *what)
{
    if (err == COR_EPEERDEAD || err == COR_ETIMEDOUT) atomic_store(&given_up, 1);
    if (err) pt_fail("%s: %s", what, cor_strerror(err));
    return err;
}

/* One message from `from` to `to` (tasks of index 0 in domain 0 and 1). */
static int send_one(cor_idp_t to, int tag, const char *text)
{
    size_t len = strlen(text) + 1;
    char *buf = cor_getBuffer(COR_CHAR, len);
    if (!buf) return note(COR_ENOMEM, "getBuffer");
    memcpy(buf, text, len);
    cor_req_t req;
    int err = note(cor_sendI(to, COR_CTX_WORLD, tag, buf, len, &req), "sendI");
    if (!err) err = note(cor_wait(&req, NULL), "send");
    cor_releaseBuffer(buf);
    return err;
}

static int recv_one(cor_idp_t from, int tag, const char *want)
{
    void *in = NULL;
    cor_req_t req;
    cor_status_t st;
    int err = note(cor_recvI(from, COR_CTX_WORLD, tag, &in, &req), "recvI");
    if (!err) err = note(cor_wait(&req, &st), "receive");
    if (!err && (st.count != strlen(want) + 1 || memcmp(in, want, st.count) != 0)) {
        pt_fail("received %zu bytes, not \"%s\"", (size_t)st.count, want);
        err = COR_EPROTO;
    }
    if (in) cor_releaseBuffer(in);
    return err;
}

static int task_main(void *arg)
{
    (void)arg;
    cor_idp_t other = cor_task_idp(1 - pt_rank, cor_idp_index(cor_task_self()));
    if (pt_rank == 0) {
        int err = send_one(other, TAG_PING, "ping");
        return err ? err : recv_one(other, TAG_PONG, "pong");
    }
    int err = recv_one(other, TAG_PING, "ping");
    return err ? err : send_one(other, TAG_PONG, "pong");
}

static void write_pid(void)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/pid.%d", dir, pt_rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path)) {
        pt_fail("cannot write %s", path);
        exit(1);
    }
}

/* Domain 0: until the script says domain 1 is stopped (DIR/go), 60 s at most. */
static int wait_go(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/go", dir);
    for (int i = 0; i < 6000; i++) {
        if (access(path, F_OK) == 0) {
            go_at = now_s();
            return 0;
        }
        usleep(10000);
    }
    pt_fail("no %s after 60 s", path);
    return -1;
}

/* This domain passed: says so, then finalizes; the exit status. */
static int pass_and_finalize(void)
{
    printf("slowpeer: domain %d: PASS\n", pt_rank);
    fflush(stdout);
    int err = cor_finalize();
    if (err) {
        fprintf(stderr, "slowpeer: domain %d: cor_finalize: %s\n", pt_rank, cor_strerror(err));
        return 1;
    }
    return pt_failures ? 1 : 0;
}

/* The "late" mode: domain 1 sleeps `late` seconds before the barrier, domain 0 does not. */
static int late_barrier(double late)
{
    if (pt_rank == 1) usleep((useconds_t)(late * 1e6));
    double t0 = now_s();
    int err = note(cor_barrier(), "barrier");
    if (err) {
        fprintf(stderr, "slowpeer: domain %d: FAIL (%s) %.2f s into the barrier\n", pt_rank,
                cor_strerror(err), now_s() - t0);
        return atomic_load(&given_up) ? GIVEN_UP : 1;
    }
    return pass_and_finalize();
}

int main(int argc, char **argv)
{
    pt_name = "slowpeer";
    double late = -1;
    if (argc == 4 && strcmp(argv[2], "late") == 0) {
        char *end;
        late = strtod(argv[3], &end);
        if (*end || !(late >= 0 && late <= 60)) late = -2;
    }
    if ((argc != 2 && late < 0) || late < -1) {
        fprintf(stderr, "usage: slowpeer DIR [late SECONDS (0..60)]\n");
        return 2;
    }
    dir = argv[1];
    int err = cor_init(&argc, &argv);
    if (err) {
        fprintf(stderr, "slowpeer: cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    pt_rank = cor_domain_rank();
    if (cor_domain_count() != 2) {
        pt_fail("needs 2 domains, not %d", cor_domain_count());
        return 1;
    }
    if (late >= 0) return late_barrier(late);
    if (pt_rank == 0 && wait_go()) return 1;
    cor_idp_t task;
    err = note(cor_task_spawn("slowpeer", task_main, NULL, &task), "task_spawn");
    if (err) return 1;
    if (pt_rank == 1) {
        write_pid();
        raise(SIGSTOP); /* the script lets us go on */
    }
    int status = 0;
    if (note(cor_task_join(task, &status), "task_join") || status) {
        fprintf(stderr, "slowpeer: domain %d: FAIL (%s) %.2f s after go\n", pt_rank,
                cor_strerror(status), pt_rank == 0 ? now_s() - go_at : 0.0);
        return atomic_load(&given_up) ? GIVEN_UP : 1;
    }
    return pass_and_finalize();
}
