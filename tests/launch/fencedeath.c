/*
 * fencedeath: a barrier entered right after a domain was killed, before the routes can have
 * noticed (they need ~1 s), must fail with COR_EPEERDEAD, never return COR_OK.
 *
 *   fencedeath DIR
 * Every domain passes WARM_BARRIERS barriers, then writes DIR/pid.RANK. The last domain (the
 * victim) then sleeps until the test kills it (at most 120 s). The others wait for DIR/go (the test
 * writes it right after the kill), call cor_barrier at once, and then post a receive from the
 * victim, which must fail with COR_EPEERDEAD too (within 10 s). A survivor that sees both prints
 * "domain R: PASS" and exits with status 42.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cor/cor.h"

#define PASS_STATUS 42
#define WARM_BARRIERS 30

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int mark(const char *dir, const char *name, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fencedeath DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = cor_init(&argc, &argv);
    if (rc != COR_OK) {
        fprintf(stderr, "fencedeath: cor_init: %s\n", cor_strerror(rc));
        return 1;
    }
    int rank = cor_domain_rank(), n = cor_domain_count(), victim = n - 1;
    if (n < 2) {
        fprintf(stderr, "fencedeath: needs at least 2 domains\n");
        return 2;
    }
    /* Barriers with nobody dead succeed (a domain told of a fence's end first enters the
     * next one at once: the check must not take it for one that never entered). */
    for (int i = 0; i < WARM_BARRIERS; i++)
        if ((rc = cor_barrier()) != COR_OK) {
            fprintf(stderr, "fencedeath: domain %d: FAIL barrier %d with nobody dead: %s\n", rank,
                    i, cor_strerror(rc));
            return 1;
        }
    if (mark(dir, "pid", rank)) {
        fprintf(stderr, "fencedeath: cannot write in %s\n", dir);
        return 1;
    }
    if (rank == victim) {
        sleep(120); /* the test kills us long before */
        fprintf(stderr, "fencedeath: the victim was not killed within 120 s\n");
        _exit(5);
    }
    char go[4096];
    snprintf(go, sizeof go, "%s/go", dir);
    double t0 = now_s();
    while (access(go, F_OK) != 0) {
        if (now_s() - t0 > 120) {
            fprintf(stderr, "fencedeath: domain %d: no %s within 120 s\n", rank, go);
            _exit(6);
        }
        usleep(1000);
    }
    t0 = now_s();
    rc = cor_barrier();
    double ms = (now_s() - t0) * 1e3;
    printf("fencedeath: domain %d: barrier %s after %.0f ms\n", rank, cor_strerror(rc), ms);
    int fail = 0;
    if (rc != COR_EPEERDEAD) {
        fprintf(stderr,
                "fencedeath: domain %d: FAIL the barrier after domain %d's death returned "
                "%s, not COR_EPEERDEAD\n",
                rank, victim, cor_strerror(rc));
        fail = 1;
    }
    cor_req_t r = COR_REQ_NULL;
    void *p = NULL;
    rc = cor_recvI(cor_task_idp(victim, 1), COR_CTX_WORLD, COR_ANY_TAG, &p, &r);
    double t1 = now_s();
    while (rc == COR_OK && r != COR_REQ_NULL) {
        int done = 0;
        rc = cor_test(&r, &done, NULL);
        if (done) break;
        if (now_s() - t1 > 10) {
            rc = COR_ETIMEDOUT;
            break;
        }
        usleep(1000);
    }
    if (rc != COR_EPEERDEAD) {
        fprintf(stderr,
                "fencedeath: domain %d: FAIL a receive from the dead domain %d gave %s, not "
                "COR_EPEERDEAD\n",
                rank, victim, rc == COR_ETIMEDOUT ? "nothing for 10 s" : cor_strerror(rc));
        fail = 1;
    }
    fflush(stdout);
    if (fail) _exit(1);
    printf("fencedeath: domain %d: PASS\n", rank);
    fflush(stdout);
    _exit(PASS_STATUS); /* the session lost a domain: cor_finalize's barrier would only fail */
}
