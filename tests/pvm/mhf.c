/*
 * mhf: a PVM program that adds and deletes message handlers and lists them, built twice:
 * pvm/mhf-plain links libpvm3 only, pvm/mhf links libcorpvm before it (handlers.sh runs both
 * and compares their outputs: libcorpvm's own handlers must not show). It prints every id
 * pvm_addmhf returns and every pvm_delmhf result, dumps libpvm3's handler table
 * (pvmdisplaymhfinfo) after the adds, after the deletes and after adds that reuse freed
 * ids, then sends itself one message per tag that had a handler and prints which handler
 * ran for each (a deleted one must not; a reused id must call its new handler). With
 * COR_SHOW_ROUTE=1 (libcorpvm build), it says on stderr whether it joined a route.
 * Exit 0 when every message found its handler, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>

#include <pvm3.h>
#ifdef WITH_COR
#include <cor/pvm.h>
#endif

int pvmdisplaymhfinfo(const char *who, const char *message, int tid); /* libpvm3's */

#define NTAGS 8
static int ran[NTAGS + 1]; /* handler k ran for tag 100 + k (by the message's tag) */

static int run(int mid)
{
    int len, tag, src;
    pvm_bufinfo(mid, &len, &tag, &src);
    if (tag > 100 && tag <= 100 + NTAGS) ran[tag - 100]++;
    return 0;
}

int main(void)
{
    int me = pvm_mytid();
    if (me < 0) return 2;
#ifdef WITH_COR
    if (getenv("COR_SHOW_ROUTE")) {
        int rank = -1;
        fprintf(stderr, "mhf: route %s\n", pvm_cor_domain(me, &rank) == PvmOk ? "yes" : "no");
    }
#endif
    int id[NTAGS + 1];
    for (int k = 1; k <= 5; k++) /* tags 101..105 */
        printf("add tag %d: id %d\n", 100 + k, id[k] = pvm_addmhf(-1, 100 + k, 0, run));
    fflush(stdout);
    pvmdisplaymhfinfo("mhf", "five added", me);
    printf("delete id %d: %d\n", id[2], pvm_delmhf(id[2]));
    printf("delete id %d: %d\n", id[4], pvm_delmhf(id[4]));
    printf("delete id %d again: %d\n", id[4], pvm_delmhf(id[4]));
    printf("delete id 99: %d\n", pvm_delmhf(99));
    printf("delete id -1: %d\n", pvm_delmhf(-1));
    fflush(stdout);
    pvmdisplaymhfinfo("mhf", "two deleted", me);
    for (int k = 6; k <= NTAGS; k++) /* tags 106..108: two reuse freed ids */
        printf("add tag %d: id %d\n", 100 + k, id[k] = pvm_addmhf(-1, 100 + k, 0, run));
    fflush(stdout);
    pvmdisplaymhfinfo("mhf", "three more", me);
    for (int k = 1; k <= NTAGS; k++) {
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&k, 1, 1);
        pvm_send(me, 100 + k);
    }
    /* The handlers run inside the call that reads the messages: wait for the last one. */
    int bad = 0;
    for (int i = 0; i < 200 && ran[NTAGS] == 0; i++) {
        struct timeval tmo = {0, 10000};
        pvm_trecv(me, 999, &tmo);
    }
    for (int k = 1; k <= NTAGS; k++) {
        int want = k == 2 || k == 4 ? 0 : 1;
        printf("tag %d: handler ran %d time(s)%s\n", 100 + k, ran[k], ran[k] == want ? "" : " BAD");
        bad += ran[k] != want;
    }
    for (int k = 2; k <= 4; k += 2) /* deleted: their messages wait in the queue */
        if (pvm_nrecv(me, 100 + k) <= 0) {
            printf("tag %d: message not queued BAD\n", 100 + k);
            bad++;
        }
    printf("mhf: %s\n", bad ? "FAIL" : "ok");
    pvm_exit();
    return bad != 0;
}
