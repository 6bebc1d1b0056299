/*
 * spread: a master spawns N workers over the whole virtual machine (PVM places them round
 * robin over the hosts), passes a token around the ring of workers, then exchanges a few
 * messages of growing size with every worker. Prints how many workers ran on each host.
 * Exit 0 when everything arrived intact.
 *
 *   spread [workers]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pvm3.h>

#define TAG_SETUP 1
#define TAG_RING 2
#define TAG_ECHO 3
#define SIZES 4

static int echo_size(int i)
{
    return 16 << (4 * i);
} /* 16 B .. 64 KiB */

static int worker(void)
{
    int parent = pvm_parent(), n, me, *tids;
    pvm_recv(parent, TAG_SETUP);
    pvm_upkint(&n, 1, 1);
    tids = malloc((size_t)n * sizeof *tids);
    pvm_upkint(tids, n, 1);
    pvm_upkint(&me, 1, 1);
    /* the ring: from the previous worker (or the master), to the next (or the master) */
    int from = me ? tids[me - 1] : parent, to = me + 1 < n ? tids[me + 1] : parent, token;
    pvm_recv(from, TAG_RING);
    pvm_upkint(&token, 1, 1);
    token++;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&token, 1, 1);
    pvm_send(to, TAG_RING);
    char *buf = malloc((size_t)echo_size(SIZES - 1));
    for (int i = 0; i < SIZES; i++) {
        int bytes = 0, t, s, mid = pvm_recv(parent, TAG_ECHO);
        pvm_bufinfo(mid, &bytes, &t, &s);
        pvm_upkbyte(buf, bytes, 1);
        pvm_initsend(PvmDataRaw);
        pvm_pkbyte(buf, bytes, 1);
        pvm_send(parent, TAG_ECHO);
    }
    free(buf);
    free(tids);
    pvm_exit();
    return 0;
}

int main(int argc, char **argv)
{
    if (pvm_mytid() < 0) return 2;
    if (argc > 1 && !strcmp(argv[1], "worker")) return worker();
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (n < 1 || n > 4096) return 2;
    int *tids = malloc((size_t)n * sizeof *tids);
    char *args[] = {"worker", NULL};
    int got = 0;
    while (got < n) { /* spawn hands out at most a host's worth at a time on some builds */
        int k = pvm_spawn(argv[0], args, PvmTaskDefault, "", n - got, tids + got);
        if (k <= 0) {
            fprintf(stderr, "spread: spawn failed after %d workers (%d)\n", got, tids[got]);
            return 1;
        }
        got += k;
    }
    for (int i = 0; i < n; i++) {
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&n, 1, 1);
        pvm_pkint(tids, n, 1);
        pvm_pkint(&i, 1, 1);
        pvm_send(tids[i], TAG_SETUP);
    }
    int token = 0, ok = 1;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&token, 1, 1);
    pvm_send(tids[0], TAG_RING);
    pvm_recv(tids[n - 1], TAG_RING);
    pvm_upkint(&token, 1, 1);
    if (token != n) {
        fprintf(stderr, "spread: the token came back as %d, expected %d\n", token, n);
        ok = 0;
    }
    char *out = malloc((size_t)echo_size(SIZES - 1)), *in = malloc((size_t)echo_size(SIZES - 1));
    for (int i = 0; i < SIZES && ok; i++) {
        int size = echo_size(i);
        for (int b = 0; b < size; b++)
            out[b] = (char)(b * 13 + i);
        pvm_initsend(PvmDataRaw);
        pvm_pkbyte(out, size, 1);
        pvm_mcast(tids, n, TAG_ECHO);
        for (int w = 0; w < n; w++) {
            int bytes = 0, t, s, mid = pvm_recv(tids[w], TAG_ECHO);
            pvm_bufinfo(mid, &bytes, &t, &s);
            pvm_upkbyte(in, bytes, 1);
            if (bytes != size || memcmp(in, out, (size_t)size)) {
                fprintf(stderr, "spread: echo %d of t%x wrong (%d bytes)\n", i, tids[w], bytes);
                ok = 0;
            }
        }
    }
    /* where they ran */
    int nhost = 0, narch = 0;
    struct pvmhostinfo *hosts;
    pvm_config(&nhost, &narch, &hosts);
    for (int h = 0; h < nhost; h++) {
        int count = 0;
        for (int w = 0; w < n; w++)
            count += pvm_tidtohost(tids[w]) == hosts[h].hi_tid;
        printf("spread: %d workers on %s\n", count, hosts[h].hi_name);
    }
    printf("spread: %d workers, ring and echoes %s\n", n, ok ? "ok" : "FAILED");
    free(out);
    free(in);
    free(tids);
    pvm_exit();
    return ok ? 0 : 1;
}
