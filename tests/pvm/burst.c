/*
 * burst: messages sent right at start-up, while the pair switches from PVM's path to the
 * route, arrive complete and in order, both ways.
 *
 * The master spawns a worker (this program with "worker") and sends it numbered messages
 * at once and on, a message every 200 us while the worker is still starting (not on the
 * route yet: PVM's path), until the worker's first message arrives (the worker took the
 * route and asked for the pair's switch); then `burst` more without a pause (across the
 * switch) and an end marker carrying how many it sent. The worker sends `burst` numbered
 * messages right after its enrolment, then takes the master's and checks number and order.
 * Each side checks what it got; exit status 0 when all arrived, in order.
 *
 * `burst reply WAIT_MS [count]` is the way back after the handshake: the worker sends one
 * message (its first: it waits WAIT_MS for the master's answer to its HELLO, the master's
 * COR_PVM_CONNECT_MS is the environment's), and with WAIT_MS 0 then sleeps 300 ms before any
 * other pvm call; the master answers with `count` messages at once. The master's HELLO for
 * the way back goes out when it accepts the worker's: the test script checks that none of
 * its answers took PVM's path (the first waits for the worker's answer; a worker that
 * waited answered before its SWITCH).
 *
 * `burst domain` is pvm_cor_domain after a first message whose wait for the handshake ran out:
 * the master sleeps 1.5 s without a pvm call after the spawn, so the worker's first message
 * (COR_PVM_CONNECT_MS 1000) takes PVM's path; then the worker asks pvm_cor_domain for the
 * master's rank, which must wait for the answer under way instead of failing (PvmNoTask).
 *
 *   burst [count]                  (default 500)
 *   burst reply WAIT_MS [count]
 *   burst domain
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pvm3.h>

#include <cor/pvm.h>

#define TAG_SEQ 21
#define TAG_END 22
#define TAG_VERDICT 23
#define MAX_WAIT_SENDS 50000 /* 200 us apart: at most 10 s for the worker to start */

static int send_seq(int to, int seq)
{
    int hdr[2] = {seq, ~seq};
    pvm_initsend(PvmDataDefault);
    pvm_pkint(hdr, 2, 1);
    return pvm_send(to, TAG_SEQ);
}

/* Takes messages from `from` until its end marker (or `expect` of them, if >= 0); returns
 * the number of errors (wrong number, order or content). */
static int take(int from, int expect, const char *who)
{
    int next = 0, errors = 0;
    for (;;) {
        int buf = pvm_recv(from, -1);
        int bytes = 0, tag = 0, src = 0;
        if (buf < 0 || pvm_bufinfo(buf, &bytes, &tag, &src) < 0) {
            fprintf(stderr, "burst %s: receive failed (%d)\n", who, buf);
            return errors + 1;
        }
        if (tag == TAG_END) {
            int sent = -1;
            pvm_upkint(&sent, 1, 1);
            if (sent != next) {
                fprintf(stderr, "burst %s: %d sent, %d received\n", who, sent, next);
                errors++;
            }
            return errors;
        }
        int hdr[2] = {-1, 0};
        if (tag != TAG_SEQ || pvm_upkint(hdr, 2, 1) < 0 || hdr[1] != ~hdr[0] || hdr[0] != next) {
            if (errors++ < 5)
                fprintf(stderr, "burst %s: message %d is #%d (tag %d)\n", who, next, hdr[0], tag);
        }
        next++;
        if (expect >= 0 && next == expect) return errors;
    }
}

static int worker(int master, int count)
{
    for (int i = 0; i < count; i++)
        if (send_seq(master, i) < 0) return 1;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&count, 1, 1);
    pvm_send(master, TAG_END);
    int errors = take(master, -1, "worker");
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&errors, 1, 1);
    pvm_send(master, TAG_VERDICT);
    return errors != 0;
}

/* The reply test's worker: one message, then (if it did not wait for the handshake) 300 ms
 * without a pvm call, then the master's. */
static int reply_worker(int master, int wait_ms)
{
    if (send_seq(master, 0) < 0) return 1;
    if (wait_ms == 0) nanosleep(&(struct timespec){0, 300000000}, NULL);
    int errors = take(master, -1, "worker");
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&errors, 1, 1);
    pvm_send(master, TAG_VERDICT);
    return errors != 0;
}

static int reply_master(const char *wait_ms, int count)
{
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    char *args[] = {"replyworker", (char *)wait_ms, n, NULL};
    int tid = -1, theirs = -1, hdr[2] = {-1, 0};
    if (pvm_spawn("burst", args, PvmTaskDefault, "", 1, &tid) != 1 || tid < 0) {
        fprintf(stderr, "burst: cannot spawn the worker (%d)\n", tid);
        return 1;
    }
    if (pvm_recv(tid, TAG_SEQ) < 0 || pvm_upkint(hdr, 2, 1) < 0 || hdr[0] != 0 || hdr[1] != ~0) {
        fprintf(stderr, "burst: the worker's message is not #0 (%d)\n", hdr[0]);
        return 1;
    }
    for (int i = 0; i < count; i++)
        if (send_seq(tid, i) < 0) return 1;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&count, 1, 1);
    pvm_send(tid, TAG_END);
    if (pvm_recv(tid, TAG_VERDICT) < 0 || pvm_upkint(&theirs, 1, 1) < 0 || theirs != 0) {
        fprintf(stderr, "burst: the worker saw %d errors\n", theirs);
        return 1;
    }
    printf("burst: reply (worker's wait %s ms): 1 to the master and %d back, complete and in "
           "order\n",
           wait_ms, count);
    return 0;
}

/* The domain test: the worker's pvm_cor_domain of the master, after its first message. */
static int domain_worker(int master)
{
    int rank = -1;
    if (send_seq(master, 0) < 0) return 1;
    int rc = pvm_cor_domain(master, &rank), v[2] = {rc, rank};
    pvm_initsend(PvmDataDefault);
    pvm_pkint(v, 2, 1);
    pvm_send(master, TAG_VERDICT);
    return rc != PvmOk;
}

static int domain_master(void)
{
    char *args[] = {"domainworker", NULL};
    int tid = -1, v[2] = {1, -1}, mine = -1, hdr[2];
    if (pvm_spawn("burst", args, PvmTaskDefault, "", 1, &tid) != 1 || tid < 0) {
        fprintf(stderr, "burst: cannot spawn the worker (%d)\n", tid);
        return 1;
    }
    nanosleep(&(struct timespec){1, 500000000}, NULL); /* busy: the worker's wait runs out */
    if (pvm_recv(tid, TAG_SEQ) < 0 || pvm_upkint(hdr, 2, 1) < 0 || pvm_recv(tid, TAG_VERDICT) < 0 ||
        pvm_upkint(v, 2, 1) < 0 || pvm_cor_domain(pvm_mytid(), &mine) != PvmOk) {
        fprintf(stderr, "burst: no verdict from the worker\n");
        return 1;
    }
    if (v[0] != PvmOk || v[1] != mine) {
        fprintf(stderr, "burst: the worker's pvm_cor_domain of the master: %d, rank %d (ours %d)\n",
                v[0], v[1], mine);
        return 1;
    }
    printf("burst: domain: the worker named the master's CoR domain (%d) after its first "
           "message's wait ran out\n",
           mine);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "domain") || !strcmp(argv[1], "domainworker"))) {
        if (pvm_mytid() < 0) return 1;
        int rc = strcmp(argv[1], "domain") ? domain_worker(pvm_parent()) : domain_master();
        pvm_exit();
        return rc;
    }
    int reply = argc > 2 && !strcmp(argv[1], "reply");
    int reply_wk = argc > 3 && !strcmp(argv[1], "replyworker");
    int worker_mode = !reply_wk && argc > 1 && argv[1][0] == 'w';
    int skip = reply || reply_wk ? 2 : worker_mode;
    int count = atoi(argc > 1 + skip ? argv[1 + skip] : "500");
    if (count < 1 || count > 1000000) {
        fprintf(stderr, "burst: count must be 1..1000000\n");
        return 2;
    }
    if ((reply || reply_wk) && (atoi(argv[2]) < 0 || strspn(argv[2], "0123456789") == 0)) {
        fprintf(stderr, "burst: reply WAIT_MS: a number of milliseconds\n");
        return 2;
    }
    /* The worker's first message waits WAIT_MS for the handshake (read at its first send). */
    if (reply_wk) setenv("COR_PVM_CONNECT_MS", argv[2], 1);
    if (pvm_mytid() < 0) return 1;
    if (reply || reply_wk) {
        int rc = reply ? reply_master(argv[2], count) : reply_worker(pvm_parent(), atoi(argv[2]));
        pvm_exit();
        return rc;
    }
    if (worker_mode) {
        int rc = worker(pvm_parent(), count);
        pvm_exit();
        return rc;
    }
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    char *args[] = {"worker", n, NULL};
    int tid = -1, sent = 0, rc = 1;
    if (pvm_spawn("burst", args, PvmTaskDefault, "", 1, &tid) != 1 || tid < 0) {
        fprintf(stderr, "burst: cannot spawn the worker (%d)\n", tid);
        goto out;
    }
    /* While the worker starts: PVM's path. */
    while (sent < MAX_WAIT_SENDS && pvm_probe(tid, TAG_SEQ) == 0) {
        if (send_seq(tid, sent++) < 0) goto out;
        nanosleep(&(struct timespec){0, 200000}, NULL);
    }
    int before = sent;
    for (int i = 0; i < count; i++)
        if (send_seq(tid, sent++) < 0) goto out;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&sent, 1, 1);
    pvm_send(tid, TAG_END);
    int errors = take(tid, -1, "master"), theirs = -1;
    if (pvm_recv(tid, TAG_VERDICT) < 0 || pvm_upkint(&theirs, 1, 1) < 0) theirs = -1;
    if (errors || theirs != 0) {
        fprintf(stderr, "burst: master saw %d errors, the worker %d\n", errors, theirs);
        goto out;
    }
    printf("burst: %d+%d to the worker and %d back, complete and in order\n", before, count, count);
    rc = 0;
out:
    pvm_exit();
    return rc;
}
