/*
 * life: the life of routed PVM tasks, for the process tests of libcorpvm (lifecycle.sh).
 * Linked -lcorpvm -lpvm3; the route comes from COR_PVM_ROUTE. Modes:
 *
 *   life idle SECS      spawns a worker, exchanges a few messages (the pair switches to the
 *                       route), then leaves the worker blocked in pvm_recv for SECS seconds
 *                       and wakes it with a routed message, then (after a second) with one
 *                       on PVM's path (the master switches itself to PvmDontRoute). Prints
 *                       "life: idle cpu C s over S s (N sleeps); wake routed R ms, pvm P ms": the
 *                       worker's CPU time and its threads' sleeps (getrusage) while it was blocked,
 *                       and how long each wake-up took from send to answer.
 *   life spawn N [ROUNDS]  spawns N children one after another; each tells the master its
 *                       CoR domain rank and whether its message to the master travels the
 *                       route (ROUNDS messages each way first, default 1), takes the
 *                       master's last message and ends at once.
 *                       Prints "life: child K rank R routed Y|N" for each and
 *                       "life: spawned N, routed M, last rank R routed Y|N".
 *   life churn N K [ROUNDS]  lives while N children come and go, K at a time (at most 16):
 *                       each exchanges ROUNDS (default 3) numbered messages with the
 *                       master, checked both ways, reports its rank and whether it is
 *                       routed, and ends; the next ones start once those ended. Prints
 *                       "life: churn N by K: routed M, bad B, last rank R routed Y|N".
 *   life end HOW        spawns a child that exchanges routed messages with the master and
 *                       ends without pvm_exit: HOW = return (from main), exit (exit(0)) or
 *                       kill (the master kills it with SIGKILL). Prints "life: end HOW ok".
 *   life giveup N SECS [HOW]  spawns a child, exchanges a few messages (the pair switches to
 *                       the route both ways), stops the child (SIGSTOP), sends it N numbered
 *                       messages, and then (HOW):
 *                       wait (default): waits SECS in pvm_trecv (the route gives the silent
 *                         child up), lets it go on (SIGCONT) and sends 5 more;
 *                       recv: sends the 5 more at once and blocks in pvm_recv for the child's
 *                         answer, while a thread of its own lets the child go on after SECS;
 *                       exit: sends the 5 more, calls pvm_exit at once, then lets the child
 *                         go on after SECS and ends;
 *                       atexit: the same, but ends with exit(0) instead of pvm_exit (the
 *                         child goes on from an atexit handler that runs after libcorpvm's);
 *                       compute: sends the 5 more, makes no pvm call for SECS, lets the child
 *                         go on, and still none for COMPUTE_S (8) seconds ("computes"), then
 *                         waits for the answer.
 *                       The child checks that it got all of them exactly once and in order
 *                       (in time: each within 30 s), then (but after exit) sends 5 numbered
 *                       messages back (its own route has not given the master up). Prints
 *                       "life: giveup got G of T, bad B, back K of 5, bad D, routed Y|N,
 *                       all in A s" (A: from SIGCONT until the child had the last message);
 *                       after exit, the child prints "life: giveup-child got G of T, bad B".
 *                       GIVEUP_STOP_IN_LOCK=LIB (gm route): the child stops itself inside its
 *                       hold of its own shm queue lock (LIB: stopinlock.so) instead.
 *   life hold SECS      a routed task that lives on: prints "life: holding rank R" (its CoR
 *                       domain rank, -1 if it has none), then stays (keeping its session
 *                       alive) until its standard input ends or SECS pass, and leaves.
 *
 * Every wait is bounded (trecv with a timeout); exit status 0 when the run did what it
 * says, 1 when something failed, 2 when PVM could not start it.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cor/pvm.h>
#include <pvm3.h>

#define TAG_HELLO 1
#define TAG_WAKE 2
#define TAG_ANSWER 3
#define TAG_DATA 4
#define TAG_EXIT 99
#define WAIT_S 30 /* no wait of this program lasts longer */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* The times the process's threads went to sleep and woke (voluntary context switches). */
static double sleeps(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_nvcsw;
}

/* Receives from tid with tag within WAIT_S; the message id, or <= 0. */
static int recv_bounded(int tid, int tag)
{
    struct timeval tmo = {WAIT_S, 0};
    int mid = pvm_trecv(tid, tag, &tmo);
    if (mid <= 0)
        fprintf(stderr, "life: t%x: nothing from t%x tag %d within %d s (%d)\n",
                (unsigned)pvm_mytid(), (unsigned)tid, tag, WAIT_S, mid);
    return mid;
}

static int send_int(int tid, int tag, int v)
{
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&v, 1, 1);
    return pvm_send(tid, tag);
}

static int spawn_one(const char *self, char **args, int *tid)
{
    if (pvm_spawn((char *)self, args, PvmTaskDefault, "", 1, tid) != 1 || *tid < 0) {
        fprintf(stderr, "life: cannot spawn %s %s: %d\n", self, args[0], *tid);
        return -1;
    }
    return 0;
}

/* ---- idle ---- */

static int idle_worker(void)
{
    int parent = pvm_parent();
    for (int i = 0; i < 3; i++) { /* warm: the pair switches to the route */
        if (recv_bounded(parent, TAG_DATA) <= 0) return 1;
        send_int(parent, TAG_DATA, i);
    }
    for (int round = 0; round < 2; round++) {
        double c0 = cpu_seconds(), t0 = now(), s0 = sleeps();
        struct timeval tmo = {120, 0}; /* the master's sleep, and then some */
        if (pvm_trecv(parent, TAG_WAKE, &tmo) <= 0) return 1;
        double cpu = cpu_seconds() - c0, wall = now() - t0, woke = sleeps() - s0;
        pvm_initsend(PvmDataDefault);
        pvm_pkdouble(&cpu, 1, 1);
        pvm_pkdouble(&wall, 1, 1);
        pvm_pkdouble(&woke, 1, 1);
        pvm_send(parent, TAG_ANSWER);
    }
    pvm_exit();
    return 0;
}

/* Wakes the worker after `secs`; its CPU time while blocked and the wake-up time. */
static double master_cpu; /* the master's own CPU time while it slept (its CoR threads) */

static int wake(int w, double secs, double *cpu, double *wall, double *woke, double *ms)
{
    struct timespec nap = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    double c0 = cpu_seconds();
    nanosleep(&nap, NULL);
    master_cpu = cpu_seconds() - c0;
    double t0 = now();
    send_int(w, TAG_WAKE, 0);
    if (recv_bounded(w, TAG_ANSWER) <= 0) return -1;
    *ms = (now() - t0) * 1e3;
    pvm_upkdouble(cpu, 1, 1);
    pvm_upkdouble(wall, 1, 1);
    pvm_upkdouble(woke, 1, 1);
    return 0;
}

static int idle_master(const char *self, double secs)
{
    char *args[] = {"idle-worker", NULL};
    int w;
    if (spawn_one(self, args, &w)) return 2;
    for (int i = 0; i < 3; i++) {
        send_int(w, TAG_DATA, i);
        if (recv_bounded(w, TAG_DATA) <= 0) return 1;
    }
    double cpu = -1, wall = 0, woke = -1, routed_ms = -1, pvm_ms = -1, cpu2, wall2, woke2;
    if (wake(w, secs, &cpu, &wall, &woke, &routed_ms)) return 1;
    double sleeper = master_cpu;
    int old = pvm_setopt(PvmRoute, PvmDontRoute); /* the next one goes PVM's way */
    if (wake(w, 1, &cpu2, &wall2, &woke2, &pvm_ms)) return 1;
    pvm_setopt(PvmRoute, old);
    printf("life: idle cpu %.3f s over %.1f s (%.0f sleeps); wake routed %.2f ms, pvm %.2f ms; "
           "sleeping master %.3f s\n",
           cpu, wall, woke, routed_ms, pvm_ms, sleeper);
    pvm_exit();
    return 0;
}

/* ---- spawn ---- */

/* The child's report: its rank (-1 none) and whether its messages to the parent go routed. */
static int report(int parent, int rounds)
{
    int rank = -1, prank = -1;
    pvm_cor_domain(pvm_mytid(), &rank);
    for (int i = 0; i < rounds; i++) {
        if (i > 0 && recv_bounded(parent, TAG_DATA) <= 0) return 1;
        send_int(parent, TAG_DATA, i);
    }
    int routed = pvm_cor_domain(parent, &prank) == PvmOk;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&rank, 1, 1);
    pvm_pkint(&routed, 1, 1);
    return pvm_send(parent, TAG_HELLO) < 0;
}

static int spawn_child(int rounds)
{
    int rc = report(pvm_parent(), rounds);
    /* The master's last word; the child ends as soon as it has it (its acknowledgement, if
     * the route owes one, must still reach the master). */
    if (!rc && recv_bounded(pvm_parent(), TAG_DATA) <= 0) rc = 1;
    /* The master, done, leaves at once: its goodbye reaches us before we leave too. */
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    pvm_exit();
    return rc;
}

static int spawn_master(const char *self, int n, int rounds)
{
    char r[16];
    snprintf(r, sizeof r, "%d", rounds);
    char *args[] = {"spawn-child", r, NULL};
    int routed = 0, rank = -1, yes = 0;
    for (int k = 0; k < n; k++) {
        int c;
        if (spawn_one(self, args, &c)) return 2;
        for (int i = 0; i < rounds; i++) {
            if (recv_bounded(c, TAG_DATA) <= 0) return 1;
            if (i + 1 < rounds) send_int(c, TAG_DATA, i);
        }
        if (recv_bounded(c, TAG_HELLO) <= 0) return 1;
        pvm_upkint(&rank, 1, 1);
        pvm_upkint(&yes, 1, 1);
        send_int(c, TAG_DATA, -1);
        routed += yes;
        printf("life: child %d rank %d routed %c\n", k, rank, yes ? 'Y' : 'N');
    }
    printf("life: spawned %d, routed %d, last rank %d routed %c\n", n, routed, rank,
           yes ? 'Y' : 'N');
    pvm_exit();
    return 0;
}

/* ---- churn ---- */

/* A child of churn: ROUNDS numbered exchanges with the master (each checked), its report,
 * then it ends. Values: 1000 * its number + the round, each way. */
static int churn_child(int rounds)
{
    int parent = pvm_parent(), me = -1, v = -1, bad = 0;
    struct timeval tmo = {WAIT_S, 0};
    if (pvm_trecv(parent, TAG_WAKE, &tmo) <= 0) return 1;
    pvm_upkint(&me, 1, 1);
    for (int i = 0; i < rounds; i++) {
        send_int(parent, TAG_DATA, 1000 * me + i);
        if (recv_bounded(parent, TAG_DATA) <= 0) return 1;
        pvm_upkint(&v, 1, 1);
        if (v != -(1000 * me + i)) bad++;
    }
    int rank = -1, prank = -1;
    pvm_cor_domain(pvm_mytid(), &rank);
    int routed = pvm_cor_domain(parent, &prank) == PvmOk;
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&rank, 1, 1);
    pvm_pkint(&routed, 1, 1);
    pvm_pkint(&bad, 1, 1);
    pvm_send(parent, TAG_HELLO);
    pvm_exit();
    return bad != 0;
}

/* The master lives while N children come and go, K at a time: ranks of children gone are
 * taken by new ones (more than COR_PVM_DOMAINS over the master's life), and every exchange
 * must carry the right value. Prints "life: churn N by K: routed M, bad B, last rank R
 * routed Y|N". */
static int churn_master(const char *self, int n, int k, int rounds)
{
    char r[16];
    snprintf(r, sizeof r, "%d", rounds);
    char *args[] = {"churn-child", r, NULL};
    int routed = 0, bad = 0, rank = -1, yes = 0, done = 0;
    if (k < 1) k = 1;
    if (k > 16) k = 16;
    while (done < n) {
        int tids[16], m = n - done < k ? n - done : k;
        for (int j = 0; j < m; j++) {
            if (spawn_one(self, args, &tids[j])) return 2;
            pvm_notify(PvmTaskExit, TAG_EXIT, 1, &tids[j]);
            send_int(tids[j], TAG_WAKE, done + j);
        }
        for (int i = 0; i < rounds; i++)
            for (int j = 0; j < m; j++) {
                int v = -1, want = 1000 * (done + j) + i;
                if (recv_bounded(tids[j], TAG_DATA) <= 0) return 1;
                pvm_upkint(&v, 1, 1);
                if (v != want) {
                    fprintf(stderr, "life: child %d round %d sent %d, expected %d\n", done + j, i,
                            v, want);
                    bad++;
                }
                send_int(tids[j], TAG_DATA, -want);
            }
        for (int j = 0; j < m; j++) {
            int cbad = 0;
            if (recv_bounded(tids[j], TAG_HELLO) <= 0) return 1;
            pvm_upkint(&rank, 1, 1);
            pvm_upkint(&yes, 1, 1);
            pvm_upkint(&cbad, 1, 1);
            bad += cbad;
            routed += yes;
        }
        for (int j = 0; j < m; j++) /* gone before the next ones start: their ranks are free */
            if (recv_bounded(-1, TAG_EXIT) <= 0) return 1;
        done += m;
    }
    printf("life: churn %d by %d: routed %d, bad %d, last rank %d routed %c\n", n, k, routed, bad,
           rank, yes ? 'Y' : 'N');
    pvm_exit();
    return bad != 0;
}

/* ---- end ---- */

static int end_child(const char *how)
{
    int parent = pvm_parent();
    if (report(parent, 3)) return 1;
    if (!strcmp(how, "kill")) {
        for (int i = 0; i < 10 * WAIT_S; i++) /* the master kills it */
            sleep(1);
        return 1;
    }
    if (!strcmp(how, "exit")) exit(0);
    return 0; /* from main, without pvm_exit */
}

static int end_master(const char *self, const char *how)
{
    char *args[] = {"end-child", (char *)how, NULL};
    int c, rank = -1, yes = 0;
    if (spawn_one(self, args, &c)) return 2;
    pvm_notify(PvmTaskExit, TAG_EXIT, 1, &c);
    for (int i = 0; i < 3; i++) {
        if (recv_bounded(c, TAG_DATA) <= 0) return 1;
        if (i + 1 < 3) send_int(c, TAG_DATA, i);
    }
    if (recv_bounded(c, TAG_HELLO) <= 0) return 1;
    pvm_upkint(&rank, 1, 1);
    pvm_upkint(&yes, 1, 1);
    if (!strcmp(how, "kill")) {
        int ntask = 0, pid = 0;
        struct pvmtaskinfo *ti;
        pvm_tasks(0, &ntask, &ti);
        for (int i = 0; i < ntask; i++)
            if (ti[i].ti_tid == c) pid = ti[i].ti_pid;
        if (pid <= 0 || kill(pid, SIGKILL)) {
            fprintf(stderr, "life: cannot kill t%x (pid %d)\n", (unsigned)c, pid);
            return 1;
        }
    }
    if (recv_bounded(-1, TAG_EXIT) <= 0) return 1;
    /* The session names the files of its routes (cor-<session>-...). */
    printf("life: end %s ok (child rank %d routed %c) session %08x\n", how, rank, yes ? 'Y' : 'N',
           (unsigned)cor_session());
    pvm_exit();
    return yes ? 0 : 1;
}

/* ---- giveup ---- */

#define GIVEUP_AFTER 5 /* messages sent after the give-up, each way */
#define COMPUTE_S 8    /* giveup compute: how long the master makes no pvm call */

static int giveup_child(const char *how)
{
    int parent = pvm_parent(), total = 0, got = 0, bad = 0, pid = (int)getpid();
    bool master_stays = strcmp(how, "exit") && strcmp(how, "atexit");
    for (int i = 0; i < 3; i++) { /* warm: the pair switches to the route both ways */
        if (recv_bounded(parent, TAG_DATA) <= 0) return 1;
        send_int(parent, TAG_DATA, i);
    }
    send_int(parent, TAG_HELLO, pid);
    if (recv_bounded(parent, TAG_HELLO) <= 0) return 1; /* how many will come */
    pvm_upkint(&total, 1, 1);
    for (int k = 0; k < total; k++) { /* each exactly once, in order: 1000 + k */
        int v = -1;
        if (recv_bounded(parent, TAG_DATA) <= 0) break;
        pvm_upkint(&v, 1, 1);
        got++;
        if (v != 1000 + k) bad++;
    }
    if (recv_bounded(parent, TAG_WAKE) <= 0) bad++; /* the end marker: nothing after it */
    double all_at = now(); /* (CLOCK_MONOTONIC: the master on this host compares) */
    struct timeval none = {0, 200000};
    if (pvm_trecv(parent, TAG_DATA, &none) > 0) bad++; /* a duplicate */
    if (!master_stays) { /* the master is gone: the test reads this in pvmd's log */
        printf("life: giveup-child got %d of %d, bad %d\n", got, total, bad);
        fflush(stdout);
        pvm_exit();
        return got == total && bad == 0 ? 0 : 1;
    }
    pvm_initsend(PvmDataDefault);
    pvm_pkint(&got, 1, 1);
    pvm_pkint(&bad, 1, 1);
    pvm_pkdouble(&all_at, 1, 1);
    pvm_send(parent, TAG_ANSWER);
    for (int k = 0; k < GIVEUP_AFTER; k++)
        send_int(parent, TAG_DATA, 2000 + k);
    if (recv_bounded(parent, TAG_EXIT) <= 0) return 1;
    pvm_exit();
    return 0;
}

/* Lets the stopped child go on after a while, from a thread of its own (the master is
 * blocked in pvm_recv meanwhile). */
struct resume {
    int pid;
    double secs, at; /* at: when it did */
};

static void *resume_later(void *arg)
{
    struct resume *r = arg;
    nanosleep(&(struct timespec){(time_t)r->secs, (long)((r->secs - (time_t)r->secs) * 1e9)}, NULL);
    r->at = now();
    kill(r->pid, SIGCONT);
    return NULL;
}

/* Whether every thread of process pid is stopped (state T in /proc/pid/task/TID/stat). */
static bool all_threads_stopped(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d) return false;
    bool all = true;
    int seen = 0;
    for (struct dirent *e; all && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char stat[128], line[512];
        snprintf(stat, sizeof stat, "/proc/%d/task/%.20s/stat", pid, e->d_name);
        FILE *f = fopen(stat, "r");
        if (!f) continue; /* a thread that just ended */
        size_t n = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[n] = 0;
        const char *paren = strrchr(line, ')'); /* the name may hold anything */
        all = paren && paren[1] == ' ' && paren[2] == 'T';
        seen++;
    }
    closedir(d);
    return all && seen > 0;
}

/* SIGSTOP stops a process with several threads only once the thread the kernel chose for
 * the signal runs and stops the others: until then they run on. The child's listener thread
 * could so take in and acknowledge every message (the master's route then had nothing
 * outstanding and nothing to give up). Waits until every thread is stopped, 10 s at most. */
static int stop_child(int pid)
{
    if (kill(pid, SIGSTOP)) return -1;
    for (int k = 0; k < 10000; k++) {
        if (all_threads_stopped(pid)) return 0;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    fprintf(stderr, "life: pid %d's threads were not all stopped 10 s after SIGSTOP\n", pid);
    kill(pid, SIGCONT);
    return -1;
}

/* giveup with GIVEUP_STOP_IN_LOCK=LIB (the gm route over libfabric's shm): the child is not
 * stopped from here but stops itself right after it took its own shm queue lock (LIB:
 * tests/proc's stopinlock.so, preloaded into the child only, armed by a file this program
 * makes), so that every later send of ours to it spins inside libfabric until it goes on: only
 * the gm route's watch thread can give it up then. A plain SIGSTOP lands there only now and
 * then (a loaded machine; once in a CI run under TSan). */
static const char *stop_file; /* the trigger; NULL: SIGSTOP from here */

/* Before the first pvm call (setenv): what the spawned child gets through PVM_EXPORT. */
static void stop_in_lock_setup(void)
{
    static char file[512], exports[2048];
    const char *lib = getenv("GIVEUP_STOP_IN_LOCK"), *old = getenv("PVM_EXPORT");
    if (!lib || !*lib) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(file, sizeof file, "%s/life-stop.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    unlink(file);
    snprintf(exports, sizeof exports, "%s%sLD_PRELOAD:STOPINLOCK_FILE:STOPINLOCK_RANK",
             old ? old : "", old && *old ? ":" : "");
    setenv("PVM_EXPORT", exports, 1);
    setenv("LD_PRELOAD", lib, 1);
    setenv("STOPINLOCK_FILE", file, 1);
    setenv("STOPINLOCK_RANK", "any", 1); /* the child's: the master was started without it */
    stop_file = file;
}

/* Arms the child's stop (the trigger file), and gives its look (every 10 ms) time to see it:
 * the stream that follows then meets the lock (the child stops at its first hold after it
 * answered the stream's first messages; the rest of the stream, sent with what it answered,
 * finds the lock held). Armed later, the whole stream could be sent before the stop, and the
 * route's frames wait for credits instead. */
static int stop_in_lock_arm(void)
{
    FILE *f = fopen(stop_file, "w");
    if (!f) return -1;
    fclose(f);
    nanosleep(&(struct timespec){0, 100000000}, NULL);
    return 0;
}

/* Until the child stopped itself (10 s at most): it must, or the test tests nothing. */
static int stop_in_lock_wait(int pid)
{
    for (int k = 0; k < 10000; k++) {
        if (all_threads_stopped(pid)) return 0;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    fprintf(stderr, "life: pid %d did not stop itself in its lock within 10 s\n", pid);
    return -1;
}

/* giveup atexit: registered before the first pvm call, so it runs after libcorpvm's own
 * atexit handler (handlers run in reverse order). */
static struct resume at_exit_resume;

static void resume_at_exit(void)
{
    if (at_exit_resume.pid > 0) resume_later(&at_exit_resume);
}

static int giveup_master(const char *self, int n, double secs, const char *how)
{
    char *args[] = {"giveup-child", (char *)how, NULL};
    int c, pid = 0, rank = -1;
    if (strcmp(how, "wait") && strcmp(how, "recv") && strcmp(how, "exit") &&
        strcmp(how, "compute") && strcmp(how, "atexit"))
        return 2;
    if (spawn_one(self, args, &c)) return 2;
    for (int i = 0; i < 3; i++) {
        send_int(c, TAG_DATA, i);
        if (recv_bounded(c, TAG_DATA) <= 0) return 1;
    }
    if (recv_bounded(c, TAG_HELLO) <= 0) return 1;
    pvm_upkint(&pid, 1, 1);
    bool routed = pvm_cor_domain(c, &rank) == PvmOk;
    if (pid <= 0 || (stop_file ? stop_in_lock_arm() : stop_child(pid))) {
        fprintf(stderr, "life: cannot stop t%x (pid %d)\n", (unsigned)c, pid);
        return 1;
    }
    int total = n + GIVEUP_AFTER;
    send_int(c, TAG_HELLO, total);
    for (int k = 0; k < n; k++)
        send_int(c, TAG_DATA, 1000 + k);
    if (stop_file && stop_in_lock_wait(pid)) { /* it stopped as these began to reach it */
        kill(pid, SIGCONT);
        return 1;
    }
    struct resume r = {pid, secs, 0};
    pthread_t th;
    if (!strcmp(how, "wait")) {
        struct timeval wait = {(long)secs, (long)((secs - (long)secs) * 1e6)};
        pvm_trecv(c, TAG_ANSWER, &wait); /* nothing comes: the child is stopped */
        r.at = now();
        kill(pid, SIGCONT);
    } else if (!strcmp(how, "recv") && pthread_create(&th, NULL, resume_later, &r)) {
        kill(pid, SIGCONT);
        return 1;
    }
    for (int k = n; k < total; k++)
        send_int(c, TAG_DATA, 1000 + k);
    send_int(c, TAG_WAKE, 0);
    if (!strcmp(how, "compute")) { /* no pvm call: what the child must get cannot wait */
        resume_later(&r);
        nanosleep(&(struct timespec){COMPUTE_S, 0}, NULL);
    }
    if (!strcmp(how, "exit") || !strcmp(how, "atexit")) {
        printf("life: giveup master leaves, routed %c\n", routed ? 'Y' : 'N');
        fflush(stdout);
        if (!strcmp(how, "atexit")) { /* libcorpvm leaves from its atexit handler */
            at_exit_resume = r;
            exit(routed ? 0 : 1);
        }
        pvm_exit(); /* what the child did not confirm must still reach it */
        resume_later(&r);
        return routed ? 0 : 1;
    }
    int got = -1, bad = -1, back = 0, back_bad = 0;
    double all_at = 0;
    /* recv: blocked here (no timeout) while the thread lets the child go on; the child waits
     * 30 s at most for each message, so this ends. */
    int mid = !strcmp(how, "recv") ? pvm_recv(c, TAG_ANSWER) : recv_bounded(c, TAG_ANSWER);
    if (!strcmp(how, "recv")) pthread_join(th, NULL);
    if (mid > 0) {
        pvm_upkint(&got, 1, 1);
        pvm_upkint(&bad, 1, 1);
        pvm_upkdouble(&all_at, 1, 1);
    }
    for (int k = 0; k < GIVEUP_AFTER; k++) {
        int v = -1;
        if (recv_bounded(c, TAG_DATA) <= 0) break;
        pvm_upkint(&v, 1, 1);
        back++;
        if (v != 2000 + k) back_bad++;
    }
    struct timeval none = {0, 200000};
    if (pvm_trecv(c, TAG_DATA, &none) > 0) back_bad++; /* a duplicate */
    send_int(c, TAG_EXIT, 0);
    printf("life: giveup got %d of %d, bad %d, back %d of %d, bad %d, routed %c, all in %.1f s\n",
           got, total, bad, back, GIVEUP_AFTER, back_bad, routed ? 'Y' : 'N', all_at - r.at);
    fflush(stdout);
    pvm_exit();
    return got == total && bad == 0 && back == GIVEUP_AFTER && back_bad == 0 && routed ? 0 : 1;
}

/* ---- hold ---- */

static int hold(double secs)
{
    int rank = -1;
    if (pvm_cor_domain(pvm_mytid(), &rank) != PvmOk) rank = -1;
    printf("life: holding rank %d\n", rank);
    fflush(stdout);
    struct pollfd in = {.fd = 0, .events = POLLIN};
    char buf[64];
    double end = now() + secs;
    while (now() < end) { /* until stdin ends (or is an error) */
        int n = poll(&in, 1, (int)((end - now()) * 1e3) + 1);
        if (n > 0 && read(0, buf, sizeof buf) <= 0) break;
        if (n < 0) break;
    }
    pvm_exit();
    return rank >= 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 4 && !strcmp(argv[1], "giveup") && !strcmp(argv[4], "atexit"))
        atexit(resume_at_exit);
    if (argc > 1 && !strcmp(argv[1], "giveup")) stop_in_lock_setup();
    if (pvm_mytid() < 0) return 2;
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "idle-worker")) return idle_worker();
    if (!strcmp(mode, "spawn-child")) return spawn_child(argc > 2 ? atoi(argv[2]) : 1);
    if (!strcmp(mode, "end-child")) return end_child(argc > 2 ? argv[2] : "return");
    if (!strcmp(mode, "idle") && argc > 2) return idle_master(argv[0], atof(argv[2]));
    if (!strcmp(mode, "spawn") && argc > 2)
        return spawn_master(argv[0], atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 1);
    if (!strcmp(mode, "end") && argc > 2) return end_master(argv[0], argv[2]);
    if (!strcmp(mode, "hold") && argc > 2) return hold(atof(argv[2]));
    if (!strcmp(mode, "giveup-child")) return giveup_child(argc > 2 ? argv[2] : "wait");
    if (!strcmp(mode, "giveup") && argc > 3)
        return giveup_master(argv[0], atoi(argv[2]), atof(argv[3]), argc > 4 ? argv[4] : "wait");
    if (!strcmp(mode, "churn-child")) return churn_child(argc > 2 ? atoi(argv[2]) : 1);
    if (!strcmp(mode, "churn") && argc > 3)
        return churn_master(argv[0], atoi(argv[2]), atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 3);
    fprintf(stderr, "usage: life idle SECS | spawn N [ROUNDS] | end return|exit|kill | hold SECS | "
                    "churn N K [ROUNDS] | giveup N SECS [wait|recv|exit|atexit|compute]\n");
    pvm_exit();
    return 2;
}
