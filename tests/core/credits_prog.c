/*
 * Two-domain credit check, run by credits.sh under cor-run with COR_CREDITS=4 and
 * COR_EAGER_LIMIT=256: domain 1 bursts 100 small messages at domain 0, which looks only after
 * a pause. Expected: the sender stalls on credits and falls back to rendezvous, the receiver
 * keeps at most the eager payloads the credit units allow, returns credits in credit-only frames,
 * and every message arrives in order. Exit status 0 = all held; each failure is printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cor/cor.h"
#include "../proc/proc_util.h"

#define N 100

int main(void)
{
    pt_name = "credits_prog";
    alarm(60);
    int err = cor_init(NULL, NULL);
    if (err) {
        fprintf(stderr, "cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    pt_rank = cor_domain_rank();
    PT_CHECK(cor_domain_count() == 2, "2 domains, got %d", cor_domain_count());
    long credits = getenv("COR_CREDITS") ? atol(getenv("COR_CREDITS")) : 32;
    long elimit = getenv("COR_EAGER_LIMIT") ? atol(getenv("COR_EAGER_LIMIT")) : 256;
    /* Credits are units of 256 bytes (cor/core/README.md): the sender holds credits slots of
     * 1 + ceil(eager limit / 256) units (2 at most 256), an int message costs 2, and the last
     * unit is never spent. */
    long slot = elimit <= 256 ? 2 : 1 + (elimit + 255) / 256;
    long eager_max = (credits * slot - 1) / 2;
    cor_stats_t st;
    if (cor_domain_rank() == 1) {
        static int v[N];
        static cor_req_t r[N];
        cor_idp_t to = cor_task_idp(0, 0);
        for (int i = 0; i < N; i++) {
            v[i] = i;
            err = cor_sendI_typed(to, COR_CTX_WORLD, 5, COR_INT, &v[i], 1, &r[i]);
            PT_CHECK(err == COR_OK, "sendI %d: %s", i, cor_strerror(err));
        }
        err = cor_waitall(N, r, NULL);
        PT_CHECK(err == COR_OK, "waitall: %s", cor_strerror(err));
        cor_stats_get(&st);
        PT_CHECK(st.credit_stalls > 0, "credit_stalls = %llu",
                 (unsigned long long)st.credit_stalls);
        PT_CHECK(st.rndv_sent > 0, "rndv_sent = %llu", (unsigned long long)st.rndv_sent);
        PT_CHECK(st.eager_sent >= (uint64_t)eager_max, "eager_sent = %llu",
                 (unsigned long long)st.eager_sent);
        printf("sender: eager %llu, rendezvous %llu, stalls %llu\n",
               (unsigned long long)st.eager_sent, (unsigned long long)st.rndv_sent,
               (unsigned long long)st.credit_stalls);
    } else {
        usleep(300000); /* let the burst arrive unexpected */
        cor_stats_get(&st);
        PT_CHECK(st.unexpected_bytes_now <= (uint64_t)eager_max * sizeof(int),
                 "unexpected_bytes_now = %llu with %ld credits (%ld eager messages at most)",
                 (unsigned long long)st.unexpected_bytes_now, credits, eager_max);
        PT_CHECK(st.unexpected_now >= 1, "unexpected_now = %llu",
                 (unsigned long long)st.unexpected_now);
        for (int i = 0; i < N; i++) {
            int x = -1;
            cor_status_t s;
            err = cor_recv(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, COR_INT, &x, 1, &s);
            PT_CHECK(err == COR_OK && x == i, "message %d in order, got %d (%s)", i, x,
                     cor_strerror(err));
            if (err) break;
        }
        cor_stats_get(&st);
        PT_CHECK(st.credit_frames > 0, "credit_frames = %llu",
                 (unsigned long long)st.credit_frames);
        PT_CHECK(st.unexpected_now == 0, "unexpected_now = %llu",
                 (unsigned long long)st.unexpected_now);
        printf("receiver: credit frames %llu\n", (unsigned long long)st.credit_frames);
    }
    err = cor_finalize();
    PT_CHECK(err == COR_OK, "finalize: %s", cor_strerror(err));
    return pt_failures ? 1 : 0;
}
