/* keytab_test - the live registration table (src/keytab.c) against writers in other processes:
 * a writer inside its bracket holds a deregistration up, a writer killed inside it does not
 * (its slot names a dead process), and a withdrawn key or a range outside the region is
 * refused.  The table lives in anonymous shared memory here, as it does in the lock file. */
#include "../src/keytab.c"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

uint64_t gmx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "keytab_test: FAIL: " __VA_ARGS__);                                    \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { KEY = 0x5eed, BASE = 0x10000, LEN = 4096 };

/* A child that enters the bracket, tells the parent, then leaves after `hold_ms` or dies
 * there (hold_ms < 0: _exit inside the bracket, as a kill -9 would leave it). */
static pid_t writer(struct gmx_keytab *t, int hold_ms)
{
    int fds[2];
    if (pipe(fds) != 0) abort();
    pid_t pid = fork();
    if (pid < 0) abort();
    if (pid == 0) {
        int slot = gmx_keytab_enter(t, KEY, BASE + 64, 128);
        char c = slot >= 0 ? 'y' : 'n';
        if (write(fds[1], &c, 1) != 1) _exit(2);
        if (slot < 0) _exit(1);
        if (hold_ms < 0) _exit(0); /* gone inside the bracket */
        struct timespec nap = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L};
        nanosleep(&nap, NULL);
        gmx_keytab_leave(t, slot);
        _exit(0);
    }
    char c = 0;
    if (read(fds[0], &c, 1) != 1 || c != 'y') EXPECT(0, "the writer could not enter");
    close(fds[0]);
    close(fds[1]);
    return pid;
}

static double remove_s(struct gmx_keytab *t)
{
    uint64_t t0 = gmx_now_ns();
    gmx_keytab_remove(t, KEY);
    return (double)(gmx_now_ns() - t0) / 1e9;
}

int main(void)
{
    struct gmx_keytab *t =
        mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED) return 99;
    gmx_keytab_reset(t);

    /* refusals */
    EXPECT(gmx_keytab_add(t, KEY, BASE, LEN) == 0, "add");
    EXPECT(gmx_keytab_enter(t, KEY + 1, BASE, 8) < 0, "an unknown key entered");
    EXPECT(gmx_keytab_enter(t, KEY, BASE + LEN - 4, 8) < 0, "a range past the region entered");
    EXPECT(gmx_keytab_enter(t, KEY, UINT64_MAX - 2, 8) < 0, "a wrapping range entered");
    int s = gmx_keytab_enter(t, KEY, BASE, LEN);
    EXPECT(s >= 0, "the whole region refused");
    gmx_keytab_leave(t, s);

    /* a live writer holds the deregistration until it leaves */
    pid_t pid = writer(t, 300);
    double held = remove_s(t);
    EXPECT(held >= 0.2, "deregistration did not wait for a live writer (%.3f s)", held);
    waitpid(pid, NULL, 0);
    EXPECT(gmx_keytab_enter(t, KEY, BASE, 8) < 0, "a withdrawn key entered");

    /* a writer that died inside the bracket holds nothing (it held 10 s before) */
    EXPECT(gmx_keytab_add(t, KEY, BASE, LEN) == 0, "add again");
    pid = writer(t, -1);
    waitpid(pid, NULL, 0);
    double dead = remove_s(t);
    EXPECT(dead < 2.0, "a writer killed inside its bracket held deregistration %.1f s", dead);
    EXPECT(gmx_keytab_add(t, KEY, BASE, LEN) == 0, "the entry of a dead writer is not reusable");

    printf("keytab_test: live writer held %.3f s, dead writer %.3f s: %s\n", held, dead,
           failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
