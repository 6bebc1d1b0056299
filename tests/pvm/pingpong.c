/*
 * pingpong: a PVM master spawns one worker (this program with "worker") and they exchange
 * messages of growing sizes in every encoding; each side checks every byte and the order.
 * Exit status 0 when all arrived intact and in order.
 *
 *   pingpong [rounds] [max_bytes]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pvm3.h>

#define TAG_DATA 7
#define TAG_DONE 8

static int fill(char *b, int n, int seq)
{
    for (int i = 0; i < n; i++)
        b[i] = (char)(seq * 31 + i * 7);
    return n;
}

static int check(const char *b, int n, int seq)
{
    for (int i = 0; i < n; i++)
        if (b[i] != (char)(seq * 31 + i * 7)) return i;
    return -1;
}

/* Sends message `seq` (an int header, then n bytes) with `enc`. */
static int send_one(int to, int seq, int n, int enc, char *buf)
{
    pvm_initsend(enc);
    fill(buf, n, seq);
    int hdr[2] = {seq, n};
    pvm_pkint(hdr, 2, 1);
    pvm_pkbyte(buf, n, 1);
    return pvm_send(to, TAG_DATA);
}

/* Receives message `seq` from `from` and checks it. */
static int recv_one(int from, int seq, char *buf)
{
    if (pvm_recv(from, TAG_DATA) < 0) return -1;
    int hdr[2];
    pvm_upkint(hdr, 2, 1);
    if (hdr[0] != seq) {
        fprintf(stderr, "t%x: expected message %d, got %d\n", pvm_mytid(), seq, hdr[0]);
        return -1;
    }
    pvm_upkbyte(buf, hdr[1], 1);
    int bad = check(buf, hdr[1], seq);
    if (bad >= 0) {
        fprintf(stderr, "t%x: message %d byte %d of %d corrupt\n", pvm_mytid(), seq, bad, hdr[1]);
        return -1;
    }
    return 0;
}

static int encoding(int seq)
{
    static const int encs[] = {PvmDataDefault, PvmDataRaw, PvmDataInPlace};
    return encs[seq % 3];
}

static int size_of(int seq, int max)
{
    int n = seq % 17 == 0 ? max : (seq * 97) % (max + 1);
    return n;
}

int main(int argc, char **argv)
{
    int me = pvm_mytid();
    if (me < 0) return 2;
    int worker = argc > 1 && !strcmp(argv[1], "worker");
    int rounds = 200, max = 100000, peer;
    if (worker) {
        peer = pvm_parent();
        pvm_recv(peer, TAG_DONE);
        pvm_upkint(&rounds, 1, 1);
        pvm_upkint(&max, 1, 1);
    } else {
        if (argc > 1) rounds = atoi(argv[1]);
        if (argc > 2) max = atoi(argv[2]);
        char *args[] = {"worker", NULL};
        if (pvm_spawn(argv[0], args, PvmTaskDefault, "", 1, &peer) != 1) {
            fprintf(stderr, "pingpong: spawn failed (%d)\n", peer);
            pvm_exit();
            return 2;
        }
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&rounds, 1, 1);
        pvm_pkint(&max, 1, 1);
        pvm_send(peer, TAG_DONE);
    }
    char *buf = malloc((size_t)max + 1);
    int failed = 0;
    for (int seq = 0; seq < rounds && !failed; seq++) {
        int n = size_of(seq, max);
        if (!worker) {
            failed |= send_one(peer, seq, n, encoding(seq), buf) < 0;
            failed |= recv_one(peer, seq, buf) < 0;
        } else {
            failed |= recv_one(peer, seq, buf) < 0;
            failed |= send_one(peer, seq, n, encoding(seq + 1), buf) < 0;
        }
    }
    /* A burst one way: order under load. */
    for (int seq = rounds; seq < 2 * rounds && !failed; seq++) {
        if (!worker)
            failed |= send_one(peer, seq, size_of(seq, max) % 4096, encoding(seq), buf) < 0;
        else
            failed |= recv_one(peer, seq, buf) < 0;
    }
    int ok = !failed, peer_ok = 0;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&ok, 1, 1);
    pvm_send(peer, TAG_DONE);
    pvm_recv(peer, TAG_DONE);
    pvm_upkint(&peer_ok, 1, 1);
    if (!worker)
        printf("pingpong: %d rounds up to %d bytes: %s\n", rounds, max,
               ok && peer_ok ? "ok" : "FAILED");
    free(buf);
    pvm_exit();
    return ok && peer_ok ? 0 : 1;
}
