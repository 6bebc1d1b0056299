/*
 * receivers: threads of one task receive from different routed peers at once. The master
 * spawns `senders` sender tasks (this program with "sender") and starts one receiving thread
 * per sender, plus one that takes every sender's messages of a second tag by source -1; once
 * all are routed and running, every sender sends `count` numbered messages of tag TAG_SEQ and
 * one of tag TAG_WILD after every WILD_EVERY of them, all at once. Receiving thread s takes
 * sender s's TAG_SEQ messages in a way of its own (s % 4): pvm_recv, pvm_trecv with a timeout,
 * a pvm_probe/pvm_nrecv loop, or pvm_precv; the wildcard thread takes TAG_WILD with
 * pvm_recv(-1, TAG_WILD). Each checks every message: the numbers come 0, 1, 2, ... per sender
 * (none lost, none twice, none out of order), pvm_bufinfo's length, tag and source, and the
 * contents (with `bytes` > 0 a PvmDataRaw payload that differs per sender and number; from
 * COR_PVM_DETACH_MIN it travels as a detached piece). Exit status 0 when everything came whole
 * and in order.
 *
 *   receivers [senders [count [bytes]]]     (default 4 300 0)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pvm3.h>

#include "pairs.h"

#define TAG_SEQ 41
#define TAG_WILD 42
#define TAG_READY 43
#define TAG_GO 44
#define TAG_DONE 45
#define WILD_EVERY 10
#define MAX_SENDERS 8
#define WAIT_S PAIRS_WAIT_S

static int nsenders = 4, count = 300, bytes = 0;
static int sender_tid[MAX_SENDERS];
static int errors[MAX_SENDERS + 1];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A sender: READY, wait for GO, send, wait for DONE (the master checked everything). */
static int sender(int s, int n)
{
    int master = pvm_parent(), rc = 0;
    struct timeval tv = {WAIT_S, 0};
    char *data = bytes ? malloc((size_t)bytes) : NULL;
    if (bytes && !data) return 1;
    pairs_ready(TAG_READY);
    if (pvm_trecv(master, TAG_GO, &tv) <= 0) return 1;
    for (int k = 0; k < n && rc >= 0; k++) {
        int msg[3] = {s, k, ~k};
        rc = pvm_initsend(bytes ? PvmDataRaw : PvmDataDefault);
        if (rc >= 0) rc = pvm_pkint(msg, 3, 1);
        if (rc >= 0 && bytes) {
            pairs_pattern(data, bytes, s, k);
            rc = pvm_pkbyte(data, bytes, 1);
        }
        if (rc >= 0) rc = pvm_send(master, TAG_SEQ);
        if (rc >= 0 && k % WILD_EVERY == 0) {
            int w[2] = {s, k / WILD_EVERY};
            rc = pvm_initsend(PvmDataDefault);
            if (rc >= 0) rc = pvm_pkint(w, 2, 1);
            if (rc >= 0) rc = pvm_send(master, TAG_WILD);
        }
    }
    if (rc < 0) fprintf(stderr, "receivers sender %d: send failed (%d)\n", s, rc);
    tv = (struct timeval){WAIT_S, 0};
    pvm_trecv(master, TAG_DONE, &tv);
    free(data);
    pvm_exit();
    return rc < 0;
}

static bool report(int slot, const char *fmt, int a, int b, int c)
{
    if (errors[slot]++ < 5) {
        fprintf(stderr, "receivers: ");
        fprintf(stderr, fmt, a, b, c);
        fputc('\n', stderr);
    }
    return false;
}

/* Receives sender s's next message (tag TAG_SEQ) the thread's way; its buffer id (0 for
 * precv, whose contents are then in *msg and data), or <= 0 after a report. */
static int take(int s, int k, int msg[3], char *data, int *len)
{
    int tid = sender_tid[s], size = 3 * (int)sizeof(int) + bytes;
    struct timeval tv = {WAIT_S, 0};
    double give_up = now_s() + WAIT_S;
    switch (s % 4) {
    case 0:
        return pvm_recv(tid, TAG_SEQ);
    case 1:
        return pvm_trecv(tid, TAG_SEQ, &tv);
    case 2:
        while (now_s() < give_up) {
            int b = pvm_probe(tid, TAG_SEQ);
            if (b < 0) return b;
            if (b > 0) {
                int got = pvm_nrecv(tid, TAG_SEQ);
                if (got != b) report(s, "sender %d, message %d: probe said %d", s, k, b);
                return got;
            }
            b = pvm_nrecv(tid, TAG_SEQ); /* (nothing yet; or it came since the probe) */
            if (b != 0) return b;
        }
        return 0;
    default: {
        /* precv: the bytes of the message; the ints and the payload are native (Raw) or
         * XDR (Default: the ints' bytes as packed, so only Raw is compared byte for byte). */
        char *all = malloc((size_t)size);
        int rtid = 0, rtag = 0,
            rc = all ? pvm_precv(tid, TAG_SEQ, all, size, PVM_BYTE, &rtid, &rtag, len) : PvmNoMem;
        if (rc < 0) {
            free(all);
            return rc;
        }
        if (rtid != tid || rtag != TAG_SEQ)
            report(s, "sender %d, message %d: precv says t%x", s, k, rtid);
        if (bytes) {
            memcpy(msg, all, 3 * sizeof(int));
            memcpy(data, all + 3 * sizeof(int), (size_t)bytes);
        } else {
            msg[0] = s, msg[1] = k, msg[2] = ~k; /* (XDR: checked by length only) */
        }
        free(all);
        return 0;
    }
    }
}

static void *receiver(void *arg)
{
    int s = (int)(long)arg, expect_len = 3 * (int)sizeof(int) + bytes;
    char *data = bytes ? malloc((size_t)bytes) : NULL, *want = bytes ? malloc((size_t)bytes) : NULL;
    if (bytes && (!data || !want)) {
        report(s, "out of memory", 0, 0, 0);
        return NULL;
    }
    for (int k = 0; k < count; k++) {
        int msg[3] = {-1, -1, 0}, len = -1, tag = -1, src = -1;
        int b = take(s, k, msg, data, &len);
        if (b < 0 || (b == 0 && s % 4 != 3)) {
            report(s, "sender %d: message %d did not come (%d)", s, k, b);
            break;
        }
        if (b > 0) {
            if (pvm_bufinfo(b, &len, &tag, &src) < 0 || tag != TAG_SEQ || src != sender_tid[s])
                report(s, "sender %d, message %d: bufinfo tag %d", s, k, tag);
            if (pvm_upkint(msg, 3, 1) < 0 || (bytes && pvm_upkbyte(data, bytes, 1) < 0))
                report(s, "sender %d, message %d: unpack failed", s, k, 0);
        }
        /* XDR pads nothing here (ints); Raw is exact. */
        if (len != expect_len) report(s, "sender %d, message %d: %d bytes", s, k, len);
        if (msg[0] != s || msg[1] != k || msg[2] != ~k)
            report(s, "sender %d: message %d came as #%d", s, msg[1], k);
        if (bytes) {
            pairs_pattern(want, bytes, s, k);
            if (memcmp(data, want, (size_t)bytes))
                report(s, "sender %d, message %d: wrong payload", s, k, 0);
        }
    }
    free(data);
    free(want);
    return NULL;
}

/* Takes every sender's TAG_WILD messages by source -1: each sender's in its order. */
static void *wild(void *arg)
{
    (void)arg;
    int next[MAX_SENDERS] = {0}, per = (count + WILD_EVERY - 1) / WILD_EVERY;
    for (int got = 0; got < per * nsenders; got++) {
        int b = pvm_recv(-1, TAG_WILD), w[2] = {-1, -1}, src = 0, tag = 0;
        if (b <= 0 || pvm_bufinfo(b, NULL, &tag, &src) < 0 || pvm_upkint(w, 2, 1) < 0) {
            report(MAX_SENDERS, "wildcard: message %d did not come (%d)", got, b, 0);
            return NULL;
        }
        if (w[0] < 0 || w[0] >= nsenders || src != sender_tid[w[0]] || tag != TAG_WILD) {
            report(MAX_SENDERS, "wildcard: a message of sender %d from t%x, tag %d", w[0], src,
                   tag);
            continue;
        }
        if (w[1] != next[w[0]])
            report(MAX_SENDERS, "wildcard: sender %d's message %d came as #%d", w[0], w[1],
                   next[w[0]]);
        next[w[0]] = w[1] + 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (pvm_mytid() < 0) return 1;
    if (argc == 5 && !strcmp(argv[1], "sender")) {
        bytes = (int)pairs_number(argv[4], 0, 1 << 24, "bytes");
        return sender((int)pairs_number(argv[2], 0, MAX_SENDERS - 1, "sender"),
                      (int)pairs_number(argv[3], 1, 1000000, "count"));
    }
    if (argc > 1) nsenders = (int)pairs_number(argv[1], 1, MAX_SENDERS, "senders");
    if (argc > 2) count = (int)pairs_number(argv[2], 1, 1000000, "count");
    if (argc > 3) bytes = (int)pairs_number(argv[3], 0, 1 << 24, "bytes");
    char s_arg[16], n_arg[16], b_arg[16], *sargv[] = {"sender", s_arg, n_arg, b_arg, NULL};
    snprintf(n_arg, sizeof n_arg, "%d", count);
    snprintf(b_arg, sizeof b_arg, "%d", bytes);
    if (!pairs_start(argv[0], sargv, s_arg, nsenders, sender_tid, TAG_READY)) return 1;
    pthread_t th[MAX_SENDERS + 1];
    for (int s = 0; s <= nsenders; s++)
        if (pthread_create(&th[s], NULL, s < nsenders ? receiver : wild, (void *)(long)s)) {
            fprintf(stderr, "receivers: cannot start thread %d\n", s);
            return 1; /* (the senders end at their timeout) */
        }
    pvm_initsend(PvmDataDefault);
    pvm_mcast(sender_tid, nsenders, TAG_GO);
    int bad = 0;
    for (int s = 0; s <= nsenders; s++) {
        pthread_join(th[s], NULL);
        bad += errors[s];
    }
    pvm_initsend(PvmDataDefault);
    pvm_mcast(sender_tid, nsenders, TAG_DONE);
    if (!bad)
        printf("receivers: %d threads x %d messages of %d B more, and a wildcard thread: complete "
               "and in order\n",
               nsenders, count, bytes);
    pvm_exit();
    return bad != 0;
}
