/*
 * boot_check: a domain that exercises the bootstrap (cor/core/bootstrap.c, linked in
 * directly, without the rest of libcor) under cor-run. Used by proc/boot.sh.
 *
 *   boot_check exchange        publish addresses, check the table, barriers, finish
 *   boot_check die R           rank R kills itself (SIGKILL) after the exchange; the others
 *                              wait in a barrier, expect COR_EPEERDEAD and the death
 *                              callback for R, and exit 42
 *   boot_check nojoin R        rank R sleeps instead of joining; the others try to exchange
 *   boot_check garbage         rank 0 first sends junk to cor-run on side connections
 *   boot_check agent           like exchange, and checks AGENT_RANK == COR_RANK
 *   boot_check hold            joins, says "joined" on stdout, then sleeps until killed
 *   boot_check stdin           like exchange, then prints "stdin RANK: LINE" for the first
 *                              line of its standard input, or "stdin RANK: EOF"
 *   boot_check wait PATH       like exchange, but between the exchange and the barriers
 *                              waits (at most 120 s) until PATH exists
 * Exit 0 = all checks passed; 1 = a check failed (the reason is printed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "boot_table.h"

/* The table is made once: a second exchange is refused (a one-domain session answers). */
static void check_exchange_once(struct cor_boot *boot)
{
    struct cor_boot_addr mine[NADDR], *all = NULL;
    check_exchange(boot);
    make_addrs(rank, mine);
    int rc = cor__boot_exchange(boot, NADDR, mine, &all);
    CHECK(rc == COR_ESTATE || size == 1, "second exchange returned %d, expected COR_ESTATE", rc);
    free(all); /* a one-domain session answers again */
}

static void *barrier_thread(void *arg)
{
    struct cor_boot *boot = arg;
    for (int i = 0; i < 20; i++) {
        int rc = cor__boot_barrier(boot);
        CHECK(rc == COR_OK, "barrier %d in a thread returned %d", i, rc);
    }
    return NULL;
}

/* Barriers from two threads at once: each domain enters 40 in total, so they pair up. */
static void check_barriers(struct cor_boot *boot)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, barrier_thread, boot) == 0, "pthread_create");
    barrier_thread(boot);
    pthread_join(t, NULL);
}

static pthread_mutex_t death_mu = PTHREAD_MUTEX_INITIALIZER;
static int death_rank = -1, death_calls;

static void on_death(void *arg, int r, const char *why)
{
    pthread_mutex_lock(&death_mu);
    death_rank = r;
    death_calls++;
    pthread_mutex_unlock(&death_mu);
    fprintf(stderr, "boot_check[%d]: death of domain %d: %s\n", rank, r, why);
}

/* Sends junk on side connections to cor-run: it must drop them and carry on. */
static void send_garbage(void)
{
    const char *path = getenv("COR_BOOT");
    CHECK(path, "COR_BOOT unset");
    static char big[5000];
    memset(big, 'A', sizeof big);
    const char *junk[] = {
        "HELLO 1 0 1 0000000000000000 1\n", /* wrong cookie */
        "HELLO 9 0 1 0000000000000000 1\n", /* wrong version */
        "BARRIER 1\n",                      /* before HELLO */
        "\x01\x02\x03\xff\n",               /* binary */
        big,                                /* a line longer than the limit */
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect to cor-run");
        size_t len = junk[i] == big ? sizeof big : strlen(junk[i]);
        ssize_t k = send(fd, junk[i], len, MSG_NOSIGNAL);
        (void)k;
        char buf[256];
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        /* cor-run answers ERR and closes, or just closes: either way we read EOF. */
        ssize_t got, total = 0;
        while ((got = recv(fd, buf, sizeof buf, 0)) > 0)
            total += got;
        /* A reset is fine too: cor-run closed with our junk unread. */
        CHECK(got == 0 || (got < 0 && errno == ECONNRESET),
              "cor-run did not close a connection that sent junk %zu", i);
        close(fd);
    }
}

int main(int argc, char **argv)
{
    bt_name = "boot_check";
    const char *mode = argc > 1 ? argv[1] : "exchange";
    int target = argc > 2 ? atoi(argv[2]) : -1;
    struct cor_boot *boot = NULL;
    uint64_t cookie = 0;

    if (strcmp(mode, "nojoin") == 0 && getenv("COR_RANK") && atoi(getenv("COR_RANK")) == target) {
        sleep(60);
        return 0;
    }
    if (strcmp(mode, "garbage") == 0 && getenv("COR_RANK") && atoi(getenv("COR_RANK")) == 0)
        send_garbage();

    int rc = cor__boot_init(&boot, &rank, &size, &cookie);
    CHECK(rc == COR_OK, "init returned %d", rc);
    CHECK(cookie != 0, "zero session cookie");
    if (getenv("COR_BOOT")) {
        CHECK(rank == atoi(getenv("COR_RANK")), "rank %d, COR_RANK %s", rank, getenv("COR_RANK"));
        CHECK(size == atoi(getenv("COR_SIZE")), "size %d", size);
    } else {
        CHECK(rank == 0 && size == 1, "alone: rank %d size %d, expected 0 and 1", rank, size);
    }
    if (strcmp(mode, "hold") == 0) {
        printf("joined %d\n", rank);
        fflush(stdout);
        for (;;)
            pause();
    }
    if (strcmp(mode, "agent") == 0) {
        const char *ar = getenv("AGENT_RANK");
        CHECK(ar && atoi(ar) == rank, "AGENT_RANK %s, expected %d", ar ? ar : "(unset)", rank);
    }

    if (strcmp(mode, "die") == 0) {
        cor__boot_on_death(boot, on_death, NULL);
        check_exchange_once(boot);
        if (rank == target) {
            usleep(200000);
            raise(SIGKILL);
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = cor__boot_barrier(boot);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        CHECK(rc == COR_EPEERDEAD, "barrier returned %d, expected COR_EPEERDEAD (%d)", rc,
              COR_EPEERDEAD);
        for (int i = 0; i < 100; i++) { /* the callback runs right after the wake-up */
            pthread_mutex_lock(&death_mu);
            int seen = death_calls;
            pthread_mutex_unlock(&death_mu);
            if (seen) break;
            usleep(10000);
        }
        pthread_mutex_lock(&death_mu);
        CHECK(death_calls == 1 && death_rank == target,
              "death callback: %d calls, rank %d; expected 1 call for rank %d", death_calls,
              death_rank, target);
        pthread_mutex_unlock(&death_mu);
        rc = cor__boot_barrier(boot);
        CHECK(rc == COR_EPEERDEAD, "barrier after a death returned %d", rc);
        fprintf(stderr, "boot_check[%d]: saw domain %d die after %.2f s\n", rank, target, s);
        cor__boot_finish(boot);
        return 42;
    }
    if (strcmp(mode, "nojoin") == 0) {
        struct cor_boot_addr mine[NADDR], *all = NULL;
        make_addrs(rank, mine);
        rc = cor__boot_exchange(boot, NADDR, mine, &all);
        CHECK(rc == COR_EPEERDEAD, "exchange with a domain missing returned %d, expected %d", rc,
              COR_EPEERDEAD);
        cor__boot_finish(boot);
        return 43;
    }

    check_exchange_once(boot);
    if (strcmp(mode, "wait") == 0 && argc > 2) {
        printf("exchanged %d\n", rank);
        fflush(stdout);
        for (int i = 0; i < 1200 && access(argv[2], F_OK) != 0; i++)
            usleep(100000);
        CHECK(access(argv[2], F_OK) == 0, "%s did not appear within 120 s", argv[2]);
    }
    check_barriers(boot);
    if (strcmp(mode, "stdin") == 0) {
        char line[256];
        if (fgets(line, sizeof line, stdin))
            printf("stdin %d: %s", rank, line);
        else
            printf("stdin %d: EOF\n", rank);
        fflush(stdout);
    }
    cor__boot_finish(boot);
    return 0;
}
