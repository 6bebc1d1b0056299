/*
 * killpeer: a routed task killed with SIGKILL in the middle of an exchange. The master spawns
 * a worker, asks PVM to notify it of the worker's exit, exchanges routed messages with it
 * (some large, so transfers are under way), then kills it. The master must get the exit
 * notification, its sends to the dead task must return (an error or PVM's own success), and
 * nothing may hang. Exit 0 on success.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pvm3.h>

#define TAG_DATA 1
#define TAG_EXIT 99
#define BIG (1 << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int worker(void)
{
    int parent = pvm_parent();
    char *buf = malloc(BIG);
    for (;;) { /* echo everything until killed */
        int mid = pvm_recv(parent, TAG_DATA), n = 0, t, s;
        if (mid < 0) return 1;
        pvm_bufinfo(mid, &n, &t, &s);
        pvm_upkbyte(buf, n, 1);
        pvm_initsend(PvmDataRaw);
        pvm_pkbyte(buf, n, 1);
        pvm_send(parent, TAG_DATA);
    }
}

int main(int argc, char **argv)
{
    if (pvm_mytid() < 0) return 2;
    if (argc > 1 && !strcmp(argv[1], "worker")) return worker();
    char *args[] = {"worker", NULL};
    int w;
    if (pvm_spawn(argv[0], args, PvmTaskDefault, "", 1, &w) != 1) {
        fprintf(stderr, "killpeer: spawn failed\n");
        return 2;
    }
    pvm_notify(PvmTaskExit, TAG_EXIT, 1, &w);
    char *buf = calloc(1, BIG);
    for (int i = 0; i < 50; i++) { /* warm: the pair switches to the route */
        pvm_initsend(PvmDataRaw);
        pvm_pkbyte(buf, i % 2 ? BIG : 64, 1);
        pvm_send(w, TAG_DATA);
        if (pvm_recv(w, TAG_DATA) < 0) return 1;
    }
    /* Its pid, from PVM's task list. */
    int ntask = 0, pid = 0;
    struct pvmtaskinfo *ti;
    pvm_tasks(0, &ntask, &ti);
    for (int i = 0; i < ntask; i++)
        if (ti[i].ti_tid == w) pid = ti[i].ti_pid;
    if (pid <= 0) {
        fprintf(stderr, "killpeer: no pid for t%x\n", w);
        return 1;
    }
    /* Large messages in flight both ways when it dies. */
    for (int i = 0; i < 3; i++) {
        pvm_initsend(PvmDataRaw);
        pvm_pkbyte(buf, BIG, 1);
        pvm_send(w, TAG_DATA);
    }
    kill(pid, SIGKILL);
    double t0 = now();
    int got_exit = 0, rc;
    for (int i = 0; i < 200 && !got_exit && now() - t0 < 30; i++) {
        struct timeval tmo = {1, 0};
        int mid = pvm_trecv(-1, -1, &tmo), n, tag, src;
        if (mid > 0 && pvm_bufinfo(mid, &n, &tag, &src) == 0 && tag == TAG_EXIT) {
            int dead = 0;
            pvm_upkint(&dead, 1, 1);
            got_exit = dead == w;
        }
    }
    /* Sends to the dead task return at once (PvmNoTask from the route, or PVM's own OK). */
    double t1 = now();
    pvm_initsend(PvmDataRaw);
    pvm_pkbyte(buf, BIG, 1);
    rc = pvm_send(w, TAG_DATA);
    double send_s = now() - t1;
    free(buf);
    double t2 = now();
    pvm_exit(); /* nothing of the dead task's may hold it up */
    double exit_s = now() - t2;
    printf("killpeer: exit notified %s after %.2f s; send to the dead task: %d after %.3f s; "
           "pvm_exit took %.2f s\n",
           got_exit ? "yes" : "NO", t1 - t0, rc, send_s, exit_s);
    return got_exit && send_s < 5 && exit_s < 3 ? 0 : 1;
}
