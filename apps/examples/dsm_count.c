/*
 * dsm_count: the README's libcordsm example. Every domain adds 1000 times to its own counter
 * in a home-only object homed at domain 0, with batched non-fetching adds; domain 0 prints
 * the counters.
 *
 *   cor-run -n 2 ./dsm_count
 */
#include <stdio.h>

#include <cor/cor.h>
#include <cor/dsm.h>

int main(int argc, char **argv)
{
    if (cor_init(&argc, &argv) || cor_dsm_init()) return 1;
    int rank = cor_domain_rank(), n = cor_domain_count();
    cor_idp_t hits; /* n counters, homed at domain 0 (a home-only object) */
    if (rank == 0) cor_dsm_create("hits", COR_LONG, (size_t)n, COR_DSM_HOME_ONLY, &hits);
    cor_barrier(); /* "hits" exists everywhere now */
    cor_dsm_lookup("hits", &hits);
    long one = 1;
    for (int i = 0; i < 1000; i++)
        cor_dsm_add(hits, (size_t)rank, COR_LONG, &one); /* batched: no round trip each */
    int err = cor_dsm_quiet(); /* every add applied at the home (or the first error) */
    cor_barrier();
    for (int d = 0; rank == 0 && d < n; d++) {
        long c = 0;
        cor_dsm_get(hits, (size_t)d, 1, COR_LONG, &c);
        printf("domain %d added %ld\n", d, c); /* 1000 each */
    }
    cor_dsm_finalize();
    return cor_finalize() || err;
}
