/*
 * pmix_check: the PMIx bootstrap backend alone (boot.c + boot_pmix.c linked in, no rest of
 * libcor) under mpirun, as proc/boot_check tests the cor-run one. Used by launch/backend.sh.
 *
 *   pmix_check exchange   addresses with spaces, tabs and high bytes survive the exchange;
 *                         two barriers; finish
 *   pmix_check died       the last rank stays out of the barrier (sleeps 8 s, then exits);
 *                         the others tell the backend it died (as the core does when a route
 *                         reports it) while a thread waits in a barrier: the barrier returns
 *                         COR_EPEERDEAD at once, and so does the next one
 *   pmix_check order DIR  ten barriers; before each, the ranks of one parity (one host of
 *                         two, placed round robin) sleep 0.3 s, in turn, then every rank
 *                         marks DIR/in.ROUND.RANK; after it, every rank's mark must be there:
 *                         a barrier that returned before every rank entered fails this
 * Exit 0 = all checks passed; 1 = a check failed (the reason is printed); the last rank of
 * `died` exits 3.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../proc/boot_table.h"

struct waiter {
    struct cor_boot *boot;
    int rc;
};

static void *barrier_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = cor__boot_barrier(w->boot);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    bt_name = "pmix_check";
    const char *mode = argc > 1 ? argv[1] : "exchange";
    struct cor_boot *boot = NULL;
    uint64_t cookie;
    int rc = cor__boot_init(&boot, &rank, &size, &cookie);
    CHECK(rc == COR_OK, "init returned %d", rc);
    CHECK(!strcmp(boot->ops->name, "pmix"), "backend %s, expected pmix", boot->ops->name);
    CHECK(size >= 2 && cookie != 0, "size %d, cookie %llx", size, (unsigned long long)cookie);
    check_exchange(boot);
    if (!strcmp(mode, "exchange")) {
        CHECK((rc = cor__boot_barrier(boot)) == COR_OK, "barrier 1 returned %d", rc);
        CHECK((rc = cor__boot_barrier(boot)) == COR_OK, "barrier 2 returned %d", rc);
        cor__boot_finish(boot);
        printf("pmix_check[%d]: PASS exchange of %d domains\n", rank, size);
        return 0;
    }
    if (!strcmp(mode, "order")) {
        CHECK(argc > 2, "usage: pmix_check order DIR");
        char path[4096];
        for (int k = 0; k < 10; k++) {
            if (rank % 2 == k % 2) usleep(300000);
            snprintf(path, sizeof path, "%s/in.%d.%d", argv[2], k, rank);
            FILE *f = fopen(path, "w");
            CHECK(f && fclose(f) == 0, "cannot create %s", path);
            double t0 = now_s();
            CHECK((rc = cor__boot_barrier(boot)) == COR_OK, "barrier %d returned %d", k, rc);
            for (int r = 0; r < size; r++) {
                snprintf(path, sizeof path, "%s/in.%d.%d", argv[2], k, r);
                CHECK(access(path, F_OK) == 0,
                      "barrier %d returned after %.3f s, before rank %d entered it", k,
                      now_s() - t0, r);
            }
        }
        cor__boot_finish(boot);
        printf("pmix_check[%d]: PASS 10 barriers of %d domains, none left before all entered\n",
               rank, size);
        return 0;
    }
    int victim = size - 1;
    CHECK(!strcmp(mode, "died"), "unknown mode %s", mode);
    if (rank == victim) {
        sleep(8); /* alive, never in the barrier: only the survivors' word ends their wait */
        _exit(3);
    }
    struct waiter arg = {boot, -99};
    pthread_t t;
    pthread_create(&t, NULL, barrier_thread, &arg);
    usleep(300000); /* the thread waits in the fence, which the victim never enters */
    double t0 = now_s();
    cor__boot_died(boot, victim);
    pthread_join(t, NULL);
    double waited = now_s() - t0;
    CHECK(arg.rc == COR_EPEERDEAD, "the waiting barrier returned %d, expected %d", arg.rc,
          COR_EPEERDEAD);
    CHECK(waited < 10, "the waiting barrier took %.1f s to return", waited);
    CHECK((rc = cor__boot_barrier(boot)) == COR_EPEERDEAD, "the next barrier returned %d", rc);
    printf("pmix_check[%d]: PASS barrier released %.3f s after the death\n", rank, waited);
    fflush(stdout);
    cor__boot_finish(boot); /* PMIx_Finalize with the abandoned fence still pending */
    return 0;
}
