/*
 * libcordsm's same-host segments (dsm_shm.c) alone: a home's segment and a second mapping of
 * it operate on one object; a file that does not fit its name or its header is refused;
 * destruction reaches every mapping; a process that dies holding the object's mutex leaves
 * it poisoned when it was writing and intact when it was reading; views map on first use and
 * keep concurrent fetch-adds exact; a barrier's file lets no member leave an episode early; a
 * ticket lock passes over a dead holder (telling the next) and a dead waiter (telling nobody).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsm_internal.h"
#include "../ctest.h"

/* An idp of a session nobody else runs here: this process's own number. */
static cor_idp_t idp_of(unsigned index)
{
    return cor_idp_make(0xd5000000u | ((uint32_t)getpid() & 0xffffff), COR_KIND_OBJECT, 1, index);
}

static struct dsm_req req(uint8_t op, cor_idp_t obj, size_t offset, size_t count, const void *data,
                          size_t data_len)
{
    return (struct dsm_req){.op = op,
                            .type = COR_LONG,
                            .obj = obj,
                            .offset = offset,
                            .count = count,
                            .data = data,
                            .data_len = data_len};
}

/* A published segment of count longs for idp, or NULL (the test then fails). */
static struct dsm_shm *home_of(cor_idp_t idp, size_t count)
{
    struct dsm_shm *s = dsm_shm_create(COR_LONG, count);
    EXPECT_TRUE(s != NULL);
    if (s) EXPECT_ERR(dsm_shm_publish(s, idp), COR_OK);
    return s;
}

static void test_two_mappings(void)
{
    cor_idp_t idp = idp_of(1);
    struct dsm_shm *h = home_of(idp, 8);
    struct dsm_shm *c = dsm_shm_open(idp);
    EXPECT_TRUE(c != NULL);
    if (!h || !c) return;
    long v[3] = {5, 6, 7}, out[3] = {0}, one = 1, old = -1;
    struct dsm_req r = req(DSM_OP_PUT, idp, 2, 3, v, sizeof v);
    EXPECT_ERR(dsm_shm_apply(h, &r, NULL, NULL), COR_OK);
    r = req(DSM_OP_GET, idp, 2, 3, NULL, 0);
    EXPECT_ERR(dsm_shm_apply(c, &r, out, NULL), COR_OK);
    EXPECT_EQ(out[0] + out[1] * 10 + out[2] * 100, 765);
    r = req(DSM_OP_FADD, idp, 2, 1, &one, sizeof one);
    EXPECT_ERR(dsm_shm_apply(c, &r, &old, NULL), COR_OK);
    EXPECT_EQ(old, 5);
    long cas[2] = {6, 60};
    r = req(DSM_OP_CAS, idp, 2, 1, cas, sizeof cas);
    EXPECT_ERR(dsm_shm_apply(h, &r, &old, NULL), COR_OK);
    EXPECT_EQ(old, 6);
    r = req(DSM_OP_GET, idp, 2, 1, NULL, 0);
    EXPECT_ERR(dsm_shm_apply(c, &r, &old, NULL), COR_OK);
    EXPECT_EQ(old, 60);
    /* the FIFO counter lives in the segment: appends from both mappings share it */
    uint64_t slot = 99, taken = 0;
    r = req(DSM_OP_APPEND, idp, 0, 3, v, sizeof v);
    EXPECT_ERR(dsm_shm_apply(h, &r, NULL, &slot), COR_OK);
    EXPECT_EQ(slot, 0);
    EXPECT_ERR(dsm_shm_apply(c, &r, NULL, &slot), COR_OK);
    EXPECT_EQ(slot, 3);
    EXPECT_ERR(dsm_shm_apply(c, &r, NULL, &slot), COR_ELIMIT); /* 2 slots left */
    EXPECT_ERR(dsm_shm_appended(h, &taken), COR_OK);
    EXPECT_EQ(taken, 6);
    /* the operation's own errors come through unchanged */
    r = req(DSM_OP_GET, idp, 7, 2, NULL, 0);
    EXPECT_ERR(dsm_shm_apply(c, &r, out, NULL), COR_DSM_ERANGE);
    r.type = COR_INT;
    EXPECT_ERR(dsm_shm_apply(c, &r, out, NULL), COR_ETYPE);
    /* destroyed by the home: every mapping sees it, and the name is gone */
    dsm_shm_retire(h);
    r = req(DSM_OP_GET, idp, 0, 1, NULL, 0);
    EXPECT_ERR(dsm_shm_apply(c, &r, out, NULL), COR_ENOTFOUND);
    EXPECT_ERR(dsm_shm_apply(h, &r, out, NULL), COR_ENOTFOUND);
    EXPECT_TRUE(dsm_shm_open(idp) == NULL);
    dsm_shm_close(c);
    dsm_shm_close(h);
}

static void test_refused_files(void)
{
    char a[128], b[128];
    cor_idp_t ia = idp_of(2), ib = idp_of(3);
    EXPECT_TRUE(dsm_shm_open(ia) == NULL); /* nothing there */
    EXPECT_ERR(dsm_shm_path(a, sizeof a, ia), COR_OK);
    EXPECT_ERR(dsm_shm_path(b, sizeof b, ib), COR_OK);
    char small[8];
    EXPECT_ERR(dsm_shm_path(small, sizeof small, ia), COR_EINVAL);
    /* shorter than a header */
    int fd = open(a, O_CREAT | O_RDWR | O_EXCL, 0600);
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ(write(fd, "junk", 4), 4);
    close(fd);
    EXPECT_TRUE(dsm_shm_open(ia) == NULL);
    /* a header page of zeros: no magic */
    EXPECT_EQ(truncate(a, 8192), 0);
    EXPECT_TRUE(dsm_shm_open(ia) == NULL);
    unlink(a);
    /* a real segment under another object's name: its header names the other idp */
    struct dsm_shm *h = home_of(ia, 4);
    if (!h) return;
    EXPECT_EQ(link(a, b), 0);
    EXPECT_TRUE(dsm_shm_open(ib) == NULL);
    unlink(b);
    /* cut short: the header's count no longer fits the file */
    struct dsm_shm *big = home_of(ib, 4096);
    if (big) {
        EXPECT_EQ(truncate(b, 4096 + 8), 0);
        EXPECT_TRUE(dsm_shm_open(ib) == NULL);
        dsm_shm_retire(big);
        dsm_shm_close(big);
    }
    /* a symbolic link is not followed */
    EXPECT_EQ(symlink(a, b), 0);
    EXPECT_TRUE(dsm_shm_open(ib) == NULL);
    unlink(b);
    struct dsm_shm *c = dsm_shm_open(ia);
    EXPECT_TRUE(c != NULL);
    dsm_shm_close(c);
    dsm_shm_retire(h);
    dsm_shm_close(h);
    EXPECT_TRUE(access(a, F_OK) != 0);
}

/* A child maps the segment and dies inside an operation, holding the object's mutex: a PUT
 * whose source is unreadable, or a GET whose destination is. */
static void die_inside(cor_idp_t idp, uint8_t op)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_DUMPABLE, 0);
        signal(SIGSEGV, SIG_DFL);
        void *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        struct dsm_shm *c = dsm_shm_open(idp);
        if (!c || bad == MAP_FAILED) _exit(3);
        struct dsm_req r = req(op, idp, 0, 4, op == DSM_OP_PUT ? bad : NULL,
                               op == DSM_OP_PUT ? 4 * sizeof(long) : 0);
        dsm_shm_apply(c, &r, bad, NULL);
        _exit(4); /* not reached */
    }
    int st = 0;
    EXPECT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 3 && WEXITSTATUS(st) != 4));
}

static void test_holder_death(void)
{
    cor_idp_t idp = idp_of(4);
    struct dsm_shm *h = home_of(idp, 4);
    if (!h) return;
    long v[4] = {1, 2, 3, 4}, out[4] = {0};
    struct dsm_req put = req(DSM_OP_PUT, idp, 0, 4, v, sizeof v);
    struct dsm_req get = req(DSM_OP_GET, idp, 0, 4, NULL, 0);
    EXPECT_ERR(dsm_shm_apply(h, &put, NULL, NULL), COR_OK);
    /* died reading: the mutex is repaired and the object is whole */
    die_inside(idp, DSM_OP_GET);
    EXPECT_ERR(dsm_shm_apply(h, &get, out, NULL), COR_OK);
    EXPECT_EQ(out[3], 4);
    EXPECT_ERR(dsm_shm_apply(h, &put, NULL, NULL), COR_OK);
    /* died writing: the data may be torn, so the object is poisoned for good */
    die_inside(idp, DSM_OP_PUT);
    EXPECT_ERR(dsm_shm_apply(h, &get, out, NULL), COR_EPEERDEAD);
    EXPECT_ERR(dsm_shm_apply(h, &put, NULL, NULL), COR_EPEERDEAD);
    uint64_t taken;
    EXPECT_ERR(dsm_shm_appended(h, &taken), COR_EPEERDEAD);
    dsm_shm_retire(h);
    dsm_shm_close(h);
}

#define ADDERS 4
#define ADDS 20000

static cor_idp_t views_idp;

static void *adder(void *arg)
{
    (void)arg;
    long one = 1;
    struct dsm_req r = req(DSM_OP_ADD, views_idp, 1, 1, &one, sizeof one);
    for (int i = 0; i < ADDS; i++)
        if (dsm_shm_views_apply(&r, NULL, NULL) != COR_OK) return (void *)1;
    return NULL;
}

static void test_views(void)
{
    views_idp = idp_of(5);
    long out = 0, one = 1;
    struct dsm_req get = req(DSM_OP_GET, views_idp, 1, 1, NULL, 0);
    EXPECT_ERR(dsm_shm_views_apply(&get, &out, NULL), DSM_SHM_NONE); /* no segment yet */
    dsm_shm_views_clear(); /* forget that there was none */
    struct dsm_shm *h = home_of(views_idp, 2);
    if (!h) return;
    pthread_t t[ADDERS];
    for (int i = 0; i < ADDERS; i++)
        EXPECT_EQ(pthread_create(&t[i], NULL, adder, NULL), 0);
    struct dsm_req add = req(DSM_OP_ADD, views_idp, 1, 1, &one, sizeof one);
    for (int i = 0; i < ADDS; i++) /* the home's own adds meanwhile */
        EXPECT_ERR(dsm_shm_apply(h, &add, NULL, NULL), COR_OK);
    for (int i = 0; i < ADDERS; i++) {
        void *res = NULL;
        pthread_join(t[i], &res);
        EXPECT_TRUE(res == NULL);
    }
    EXPECT_ERR(dsm_shm_views_apply(&get, &out, NULL), COR_OK);
    EXPECT_EQ(out, (long)(ADDERS + 1) * ADDS);
    /* a run of adds in one hold of the mutex: the bad one refused, the others applied */
    struct dsm_req run[3] = {add, add, add};
    run[1].offset = 2; /* out of range */
    EXPECT_ERR(dsm_shm_views_apply_all(run, 3, NULL, NULL), COR_DSM_ERANGE);
    EXPECT_ERR(dsm_shm_views_apply(&get, &out, NULL), COR_OK);
    EXPECT_EQ(out, (long)(ADDERS + 1) * ADDS + 2);
    /* the idp names a new object (its index reused) while the view still maps the destroyed
     * segment: the first operation finds the new one, not an error */
    for (long k = 1; k <= 2; k++) {
        dsm_shm_retire(h);
        dsm_shm_close(h);
        h = home_of(views_idp, 4);
        if (!h) return;
        struct dsm_req put = req(DSM_OP_PUT, views_idp, 3, 1, &k, sizeof k);
        EXPECT_ERR(dsm_shm_apply(h, &put, NULL, NULL), COR_OK);
        get.offset = 3;
        EXPECT_ERR(dsm_shm_views_apply(&get, &out, NULL), COR_OK);
        EXPECT_EQ(out, k);
    }
    dsm_shm_retire(h);
    dsm_shm_close(h);
    /* destroyed with nothing new: the view lets the segment go and looks again, finds
     * nothing, and the home answers (the operation goes as a message) */
    EXPECT_ERR(dsm_shm_views_apply(&get, &out, NULL), DSM_SHM_NONE);
    dsm_shm_views_clear();
}

#define MEMBERS 3
#define EPISODES 3000

static struct dsm_shm_bar *bars[MEMBERS];
static _Atomic int arrivals;

/* One thread per member domain, each with its own mapping of the file. */
static void *member(void *arg)
{
    struct dsm_shm_bar *s = arg;
    for (int e = 0; e < EPISODES; e++) {
        atomic_fetch_add(&arrivals, 1);
        uint32_t gen;
        if (!dsm_shm_bar_arrive(s, MEMBERS, &gen))
            for (int k = 0; !dsm_shm_bar_passed(s, gen); k++)
                if (k > 100) dsm_shm_bar_sleep(s, gen);
        /* nobody leaves an episode before every member arrived in it */
        if (atomic_load(&arrivals) < (e + 1) * MEMBERS) return (void *)1;
    }
    return NULL;
}

static void test_barrier(void)
{
    uint32_t session = 0xd5000000u | ((uint32_t)getpid() & 0xffffff);
    for (int i = 0; i < MEMBERS; i++) {
        bars[i] = dsm_shm_bar_join(session, 0xabcdefull, 1);
        EXPECT_TRUE(bars[i] != NULL);
        if (!bars[i]) return;
    }
    EXPECT_TRUE(dsm_shm_bar_all_here(bars[0], MEMBERS));
    EXPECT_TRUE(!dsm_shm_bar_all_here(bars[0], MEMBERS + 1)); /* one member elsewhere */
    /* the next creation of the name is another file: nobody has joined it */
    struct dsm_shm_bar *again = dsm_shm_bar_join(session, 0xabcdefull, 2);
    EXPECT_TRUE(again != NULL && !dsm_shm_bar_all_here(again, 2));
    dsm_shm_bar_leave(again);
    pthread_t t[MEMBERS];
    for (int i = 0; i < MEMBERS; i++)
        EXPECT_EQ(pthread_create(&t[i], NULL, member, bars[i]), 0);
    for (int i = 0; i < MEMBERS; i++) {
        void *res = NULL;
        pthread_join(t[i], &res);
        EXPECT_TRUE(res == NULL);
    }
    EXPECT_EQ(atomic_load(&arrivals), MEMBERS * EPISODES);
    for (int i = 0; i < MEMBERS; i++)
        dsm_shm_bar_leave(bars[i]);
}

static int dead_rank = -1;

static bool is_dead(int rank, void *arg)
{
    (void)arg;
    return rank == dead_rank;
}

#define LOCKERS 4
#define LOCKS 5000

static struct dsm_shm_lock *the_lock;
static long guarded; /* written only under the_lock */

static void *locker(void *arg)
{
    int rank = (int)(intptr_t)arg, status;
    for (int i = 0; i < LOCKS; i++) {
        uint32_t t = dsm_shm_lock_ticket(the_lock, rank);
        for (int k = 0; !dsm_shm_lock_turn(the_lock, t, rank, is_dead, NULL, &status); k++)
            if (k > 100) dsm_shm_lock_sleep(the_lock, t);
        guarded++;
        dsm_shm_lock_release(the_lock);
    }
    return NULL;
}

static void test_lock(void)
{
    struct dsm_shm_lock *k = dsm_shm_lock_view(idp_of(7));
    EXPECT_TRUE(k != NULL);
    if (!k) return;
    EXPECT_TRUE(dsm_shm_lock_view(idp_of(7)) == k); /* one view per lock */
    int status = -1;
    uint32_t t0, t1, t2, t3, t4;
    EXPECT_ERR(dsm_shm_lock_try(k, 0, &t0), COR_OK); /* free: held at once */
    EXPECT_EQ(dsm_shm_lock_turn(k, t0, 0, is_dead, NULL, &status), 1);
    EXPECT_ERR(status, COR_OK);
    EXPECT_ERR(dsm_shm_lock_try(k, 1, &t1), COR_EBUSY);
    t1 = dsm_shm_lock_ticket(k, 1);
    t2 = dsm_shm_lock_ticket(k, 2);
    EXPECT_EQ(dsm_shm_lock_turn(k, t1, 1, is_dead, NULL, &status), 0);
    /* domain 0 dies holding it: the next in line gets it, and the news */
    dead_rank = 0;
    EXPECT_EQ(dsm_shm_lock_turn(k, t2, 2, is_dead, NULL, &status), 0); /* not its turn yet */
    EXPECT_EQ(dsm_shm_lock_turn(k, t1, 1, is_dead, NULL, &status), 1);
    EXPECT_ERR(status, COR_DSM_EOWNERDEAD);
    dsm_shm_lock_release(k);
    EXPECT_EQ(dsm_shm_lock_turn(k, t2, 2, is_dead, NULL, &status), 1);
    EXPECT_ERR(status, COR_OK); /* told once only */
    /* domain 3 dies waiting: passed over, and nobody is told of a holder's death */
    t3 = dsm_shm_lock_ticket(k, 3);
    t4 = dsm_shm_lock_ticket(k, 4);
    dsm_shm_lock_release(k);
    dead_rank = 3;
    EXPECT_EQ(dsm_shm_lock_turn(k, t4, 4, is_dead, NULL, &status), 1);
    EXPECT_ERR(status, COR_OK);
    (void)t3;
    dsm_shm_lock_release(k);
    dead_rank = -1;
    /* first come, first served, and mutual exclusion, between threads as domains */
    the_lock = k;
    pthread_t t[LOCKERS];
    for (int i = 0; i < LOCKERS; i++)
        EXPECT_EQ(pthread_create(&t[i], NULL, locker, (void *)(intptr_t)i), 0);
    for (int i = 0; i < LOCKERS; i++)
        pthread_join(t[i], NULL);
    EXPECT_EQ(guarded, (long)LOCKERS * LOCKS);
    EXPECT_ERR(dsm_shm_lock_try(k, 0, &t0), COR_OK); /* free again */
    dsm_shm_lock_release(k);
    dsm_shm_lock_views_clear();
}

int main(void)
{
    static const struct ct_test tests[] = {{"two mappings of one object", test_two_mappings},
                                           {"files refused", test_refused_files},
                                           {"holder death", test_holder_death},
                                           {"views", test_views},
                                           {"barrier file", test_barrier},
                                           {"ticket lock", test_lock},
                                           {NULL, NULL}};
    return ct_main("dsm same-host segments", NULL, NULL, tests, 60);
}
