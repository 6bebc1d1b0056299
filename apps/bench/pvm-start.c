/*
 * pvm-start: what a PVM task's start-up costs, for scripts/bench-pvm-start.
 *
 * The parent spawns a copy of itself; the child enrols and sends one message back at once.
 * Then the parent sends the child two pings in turn, each answered by a pong:
 *   start_ms   pvm_spawn called -> the child's first message received (a task's start)
 *   first_us   the pair's first round trip parent -> child -> parent
 *   second_us  the second one (the steady state, for comparison)
 * One line on stdout: "start_ms first_us second_us". Plain libpvm3 only: run under
 * `cor-pvm --route R` for CoR's routes (the child inherits the route through PVM_EXPORT).
 * Usage: pvm-start [BYTES]   (ping size, default 8)
 */
#include <pvm3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_UP = 11, TAG_PING = 12, TAG_PONG = 13 };

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int child(int parent)
{
    int one = 1;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&one, 1, 1);
    pvm_send(parent, TAG_UP);
    for (int i = 0; i < 2; i++) {
        int buf = pvm_recv(parent, TAG_PING);
        if (buf < 0) return 1;
        int bytes = 0, tag = 0, src = 0;
        pvm_bufinfo(buf, &bytes, &tag, &src);
        char *data = malloc(bytes > 0 ? (size_t)bytes : 1);
        if (!data) return 1;
        pvm_upkbyte(data, bytes, 1);
        pvm_initsend(PvmDataDefault);
        pvm_pkbyte(data, bytes, 1);
        pvm_send(parent, TAG_PONG);
        free(data);
    }
    return 0;
}

static double round_trip(int tid, char *data, int bytes)
{
    double t0 = now_us();
    pvm_initsend(PvmDataDefault);
    pvm_pkbyte(data, bytes, 1);
    if (pvm_send(tid, TAG_PING) < 0 || pvm_recv(tid, TAG_PONG) < 0) return -1;
    return now_us() - t0;
}

int main(int argc, char **argv)
{
    int bytes = argc > 1 ? atoi(argv[1]) : 8;
    if (bytes < 0 || bytes > (1 << 24)) {
        fprintf(stderr, "pvm-start: BYTES must be 0..16777216\n");
        return 2;
    }
    int me = pvm_mytid();
    if (me < 0) {
        fprintf(stderr, "pvm-start: not in a PVM virtual machine (%d)\n", me);
        return 1;
    }
    int parent = pvm_parent();
    if (parent > 0) {
        int rc = child(parent);
        pvm_exit();
        return rc;
    }
    char *data = calloc((size_t)bytes + 1, 1);
    int tid = -1, rc = 1;
    double t0 = now_us();
    if (!data ||
        pvm_spawn("pvm-start", argc > 1 ? argv + 1 : NULL, PvmTaskDefault, "", 1, &tid) != 1 ||
        tid < 0) {
        fprintf(stderr, "pvm-start: cannot spawn %s (%d)\n", argv[0], tid);
        goto out;
    }
    if (pvm_recv(tid, TAG_UP) < 0) goto out;
    double start = now_us() - t0;
    double first = round_trip(tid, data, bytes);
    double second = round_trip(tid, data, bytes);
    if (first < 0 || second < 0) goto out;
    printf("%.2f %.1f %.1f\n", start / 1e3, first, second);
    rc = 0;
out:
    free(data);
    pvm_exit();
    return rc;
}
