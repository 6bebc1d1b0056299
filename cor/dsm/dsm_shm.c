/*
 * What the domains of one host share in /dev/shm (see dsm_internal.h): home-only objects
 * (below), barriers' files and locks' ticket locks (their sections further down).
 *
 * The home keeps such an object in a file of /dev/shm named after its idp; another domain of
 * the host maps that file the first time one of its tasks operates on the object and from then
 * on runs every operation itself, under a process-shared robust mutex in the file's header, as
 * OpenSHMEM does on one node: no message, and no thread of the home involved. Each operation
 * is still one indivisible step with respect to every other on the object, wherever it runs.
 *
 * A domain that dies holding the mutex leaves it to the next taker (EOWNERDEAD). If it was
 * writing the data then, the object may be torn: it is poisoned, and every later operation
 * fails with COR_EPEERDEAD (as a cached object whose dirty copy died with its domain).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dsm_internal.h"

#define SHM_DIR "/dev/shm"
#define SHM_MAGIC 0x314d4853u /* "SHM1" */
#define SHM_HDR 4096u         /* the data starts on the next page */

enum { SHM_LIVE = 0, SHM_DESTROYED = 1, SHM_POISONED = 2 };

/* The file's first page. Written by the home before it sets magic; then only under mu. */
struct shm_hdr {
    _Atomic uint32_t magic;
    uint32_t type;
    uint64_t idp, count, tsize;
    pthread_mutex_t mu; /* robust, process-shared */
    uint32_t state;
    uint32_t writing; /* an operation that writes the data is under way */
    uint64_t appended;
};

_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR, "the header fits its page");

struct dsm_shm {
    struct shm_hdr *h;
    size_t len;         /* of the mapping */
    int fd;             /* until published (the home), else -1 */
    bool retired;       /* the home unlinked it (once: its index may name a new file later) */
    struct dsm_obj obj; /* type, count and data as this process sees them */
};

int dsm_shm_path(char *buf, size_t cap, cor_idp_t idp)
{
    int n = snprintf(buf, cap, SHM_DIR "/cor-%08x-dsm-%u-%u", cor_idp_macro(idp),
                     cor_idp_domain(idp), cor_idp_index(idp));
    return n > 0 && (size_t)n < cap ? COR_OK : COR_EINVAL;
}

static struct dsm_shm *map_fd(int fd, size_t len)
{
    struct dsm_shm *s = calloc(1, sizeof *s);
    void *p = s ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(s);
        return NULL;
    }
    s->h = p;
    s->len = len;
    s->fd = -1;
    return s;
}

void dsm_shm_close(struct dsm_shm *s)
{
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    munmap(s->h, s->len);
    free(s);
}

struct dsm_shm *dsm_shm_create(cor_type_t type, size_t count)
{
    size_t ts = cor_type_size(type);
    if (!ts || count > COR_DSM_MAX_BYTES / ts) return NULL;
    size_t len = SHM_HDR + count * ts;
    /* unnamed until published: a domain killed before that leaves nothing behind */
    int fd = open(SHM_DIR, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return NULL;
    /* tmpfs memory is taken now: a full /dev/shm fails here, not with SIGBUS later */
    struct dsm_shm *s = posix_fallocate(fd, 0, (off_t)len) == 0 ? map_fd(fd, len) : NULL;
    if (!s) {
        close(fd);
        return NULL;
    }
    s->fd = fd;
    struct shm_hdr *h = s->h;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int err = pthread_mutex_init(&h->mu, &a);
    pthread_mutexattr_destroy(&a);
    if (err) {
        dsm_shm_close(s);
        return NULL;
    }
    h->type = (uint32_t)type;
    h->count = count;
    h->tsize = ts;
    s->obj = (struct dsm_obj){.type = type, .tsize = ts, .count = count};
    s->obj.data = (unsigned char *)h + SHM_HDR;
    return s;
}

int dsm_shm_publish(struct dsm_shm *s, cor_idp_t idp)
{
    char path[128], self[64];
    if (!s || s->fd < 0 || dsm_shm_path(path, sizeof path, idp)) return COR_EINVAL;
    s->h->idp = idp;
    atomic_store_explicit(&s->h->magic, SHM_MAGIC, memory_order_release);
    snprintf(self, sizeof self, "/proc/self/fd/%d", s->fd);
    unlink(path); /* a file a killed domain of a session with this number left */
    int err = linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) ? COR_EIO : COR_OK;
    close(s->fd);
    s->fd = -1;
    return err;
}

struct dsm_shm *dsm_shm_open(cor_idp_t idp)
{
    char path[128];
    if (dsm_shm_path(path, sizeof path, idp)) return NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return NULL;
    struct stat st;
    struct dsm_shm *s = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)SHM_HDR)
        s = map_fd(fd, (size_t)st.st_size);
    close(fd);
    if (!s) return NULL;
    if (dsm_shm_check(s->h, s->len, idp, &s->obj)) {
        dsm_shm_close(s);
        return NULL;
    }
    return s;
}

int dsm_shm_check(const void *file, size_t len, cor_idp_t idp, struct dsm_obj *obj)
{
    /* Another process wrote this: believe nothing that does not fit the file. */
    if (len < SHM_HDR) return COR_EPROTO;
    const struct shm_hdr *h = file;
    size_t ts = h->type < COR_TYPE_COUNT ? cor_type_size((cor_type_t)h->type) : 0;
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_MAGIC || h->idp != idp ||
        !ts || h->tsize != ts || h->count == 0 || h->count > (len - SHM_HDR) / ts)
        return COR_EPROTO;
    *obj = (struct dsm_obj){.type = (cor_type_t)h->type, .tsize = ts, .count = h->count};
    obj->data = (unsigned char *)file + SHM_HDR;
    return COR_OK;
}

/* Takes the object's mutex: COR_OK, or the error every operation on it gets now. */
static int shm_lock(struct shm_hdr *h)
{
    int rc = pthread_mutex_lock(&h->mu);
    if (rc == EOWNERDEAD) { /* its holder's domain died inside an operation */
        if (h->writing) h->state = SHM_POISONED;
        h->writing = 0;
        pthread_mutex_consistent(&h->mu);
    } else if (rc) {
        return COR_EPEERDEAD; /* ENOTRECOVERABLE: only if a holder's death went unrepaired */
    }
    if (h->state == SHM_LIVE) return COR_OK;
    int err = h->state == SHM_DESTROYED ? COR_ENOTFOUND : COR_EPEERDEAD;
    pthread_mutex_unlock(&h->mu);
    return err;
}

/* Applies n requests in one hold of the object's mutex (adds of a batch): the first error
 * of theirs in *first; returns the segment's own error (destroyed, poisoned) if any. */
static int apply_all(struct dsm_shm *s, const struct dsm_req *r, size_t n, void *out,
                     uint64_t *value, int *first)
{
    struct shm_hdr *h = s->h;
    int err = shm_lock(h);
    if (err) return err;
    struct dsm_obj o = s->obj;
    o.appended = h->appended;
    *first = COR_OK;
    for (size_t i = 0; i < n; i++) {
        h->writing = r[i].op != DSM_OP_GET;
        int e = dsm_obj_apply(&o, &r[i], out, value);
        if (e && !*first) *first = e;
    }
    h->writing = 0;
    h->appended = o.appended;
    pthread_mutex_unlock(&h->mu);
    return COR_OK;
}

int dsm_shm_apply(struct dsm_shm *s, const struct dsm_req *r, void *out, uint64_t *value)
{
    int first, err = apply_all(s, r, 1, out, value, &first);
    return err ? err : first;
}

int dsm_shm_appended(struct dsm_shm *s, uint64_t *appended)
{
    int err = shm_lock(s->h);
    if (err) return err;
    *appended = s->h->appended;
    pthread_mutex_unlock(&s->h->mu);
    return COR_OK;
}

void dsm_shm_retire(struct dsm_shm *s)
{
    char path[128];
    if (s->retired) return;
    s->retired = true;
    if (shm_lock(s->h) == COR_OK) {
        s->h->state = SHM_DESTROYED;
        pthread_mutex_unlock(&s->h->mu);
    }
    if (s->fd < 0 && dsm_shm_path(path, sizeof path, s->h->idp) == COR_OK) unlink(path);
}

/* ---- Other domains' objects ---------------------------------------------------------------
 *
 * A domain keeps one view per object of another home it operated on: the segment mapped, or
 * the news that there is none (an object of another host, a cached one, one whose home could
 * not share it). Views stay until dsm_shm_views_clear; a view's mapping goes when its object
 * is found destroyed (tmpfs keeps the memory while any domain maps it).
 */

/* Tables keyed by idp, one per kind of view: looked up without a lock, entries added under
 * mu and removed only all at once (no operation runs then). An entry begins with its node. */
#define TABLE_BUCKETS 256

struct idp_node {
    struct idp_node *next;
    cor_idp_t idp;
};

struct idp_table {
    pthread_mutex_t mu; /* insertions */
    struct idp_node *_Atomic b[TABLE_BUCKETS];
};

static struct idp_node *table_find(struct idp_node *n, cor_idp_t idp)
{
    while (n && n->idp != idp)
        n = n->next;
    return n;
}

/* The entry for idp; made by make(idp) if there is none (NULL if that fails). */
static struct idp_node *table_get(struct idp_table *t, cor_idp_t idp,
                                  struct idp_node *(*make)(cor_idp_t))
{
    struct idp_node *_Atomic *b =
        &t->b[(unsigned)((idp * 0x9e3779b97f4a7c15ull) >> 56) % TABLE_BUCKETS];
    struct idp_node *n = table_find(atomic_load_explicit(b, memory_order_acquire), idp);
    if (n) return n;
    pthread_mutex_lock(&t->mu);
    n = table_find(atomic_load_explicit(b, memory_order_relaxed), idp);
    if (!n && (n = make(idp))) {
        n->idp = idp;
        n->next = atomic_load_explicit(b, memory_order_relaxed);
        atomic_store_explicit(b, n, memory_order_release);
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

static void table_clear(struct idp_table *t, void (*drop)(struct idp_node *))
{
    pthread_mutex_lock(&t->mu);
    for (int k = 0; k < TABLE_BUCKETS; k++) {
        struct idp_node *n = atomic_load_explicit(&t->b[k], memory_order_relaxed);
        atomic_store_explicit(&t->b[k], NULL, memory_order_relaxed);
        while (n) {
            struct idp_node *next = n->next;
            drop(n);
            n = next;
        }
    }
    pthread_mutex_unlock(&t->mu);
}

struct view {
    struct idp_node n;
    pthread_rwlock_t rw; /* read: an operation uses s; write: s changes */
    struct dsm_shm *s;
    bool looked; /* rw: s is what there is (NULL: no segment) */
};

static struct idp_table views = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct idp_node *view_make(cor_idp_t idp)
{
    (void)idp;
    struct view *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    /* the write lock is rare (first use, destruction): readers must not starve it */
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&v->rw, &a);
    pthread_rwlockattr_destroy(&a);
    return &v->n;
}

int dsm_shm_views_apply(const struct dsm_req *r, void *out, uint64_t *value)
{
    return dsm_shm_views_apply_all(r, 1, out, value);
}

int dsm_shm_views_apply_all(const struct dsm_req *r, size_t n, void *out, uint64_t *value)
{
    struct view *v = (struct view *)table_get(&views, r->obj, view_make);
    if (!v) return DSM_SHM_NONE; /* no memory for a view: the request goes as a message */
    for (int look = 0;; look++) {
        pthread_rwlock_rdlock(&v->rw);
        while (!v->looked) {
            pthread_rwlock_unlock(&v->rw);
            pthread_rwlock_wrlock(&v->rw);
            if (!v->looked) {
                v->s = dsm_shm_open(r->obj);
                v->looked = true;
            }
            pthread_rwlock_unlock(&v->rw);
            pthread_rwlock_rdlock(&v->rw);
        }
        struct dsm_shm *s = v->s;
        int first = COR_OK, err = s ? apply_all(s, r, n, out, value, &first) : DSM_SHM_NONE;
        if (!err) err = first;
        pthread_rwlock_unlock(&v->rw);
        if (err != COR_ENOTFOUND || look) return err;
        /* The segment we map was destroyed (nothing was applied): unmap it and look once more,
         * as the idp may name a new object of that home since (its index reused), whose
         * segment the next look finds; else the home answers. */
        pthread_rwlock_wrlock(&v->rw);
        if (v->s == s) {
            dsm_shm_close(s);
            v->s = NULL;
            v->looked = false;
        }
        pthread_rwlock_unlock(&v->rw);
    }
}

bool dsm_shm_views_has(cor_idp_t idp)
{
    long probe;
    struct dsm_req r = {.op = DSM_OP_GET, .type = COR_BYTE, .obj = idp}; /* 0 elements */
    return dsm_shm_views_apply(&r, &probe, NULL) != DSM_SHM_NONE;
}

static void view_drop(struct idp_node *n)
{
    struct view *v = (struct view *)n;
    dsm_shm_close(v->s);
    pthread_rwlock_destroy(&v->rw);
    free(v);
}

void dsm_shm_views_clear(void)
{
    table_clear(&views, view_drop);
}

/* ---- Barriers of one host's domains ----------------------------------------------------
 *
 * Every member domain maps the barrier's file (created by whichever comes first: all zeros
 * is the initial state) and counts itself in `joined`. Once an episode went by messages,
 * every member sees the same count: all of them created the barrier before arriving. If it
 * is the member count, the later episodes meet in the file instead: a counter of arrivals
 * and a generation, bumped by the last domain to arrive, which the others watch.
 */

struct shm_bar {
    _Atomic uint32_t joined;
    _Atomic uint32_t count;    /* domains arrived in this episode */
    _Atomic uint32_t gen;      /* episodes completed (the futex word) */
    _Atomic uint32_t sleepers; /* domains waiting in the kernel */
};

struct dsm_shm_bar {
    struct shm_bar *b;
    char path[96];
};

#define BAR_SLEEP_NS 5000000L /* a sleeping domain looks at its stop condition this often */

/* Maps the file at path, len bytes, made by whichever domain comes first (all zeros is the
 * initial state of what lives there); NULL if it cannot, or if the file has another size
 * (then not made by one of ours). */
static void *map_shared(const char *path, size_t len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct stat st;
    void *p = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (st.st_size == (off_t)len || (st.st_size == 0 && posix_fallocate(fd, 0, (off_t)len) == 0)))
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* A sleep in the kernel while *word == seen, BAR_SLEEP_NS at most (the waiter then looks at
 * deaths), counted in *sleepers so that a wake-up costs no system call when nobody sleeps. */
static void nap(_Atomic uint32_t *word, uint32_t seen, _Atomic uint32_t *sleepers)
{
    struct timespec t = {0, BAR_SLEEP_NS};
    atomic_fetch_add(sleepers, 1);
    if (atomic_load(word) == seen) syscall(SYS_futex, word, FUTEX_WAIT, seen, &t, NULL, 0);
    atomic_fetch_sub(sleepers, 1);
}

static void wake_all(_Atomic uint32_t *word, _Atomic uint32_t *sleepers)
{
    if (atomic_load(sleepers)) syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

struct dsm_shm_bar *dsm_shm_bar_join(uint32_t session, uint64_t id, unsigned gen)
{
    struct dsm_shm_bar *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    snprintf(s->path, sizeof s->path, SHM_DIR "/cor-%08x-bar-%016llx-%u", session,
             (unsigned long long)id, gen);
    if (!(s->b = map_shared(s->path, SHM_HDR))) {
        free(s);
        return NULL;
    }
    atomic_fetch_add(&s->b->joined, 1);
    return s;
}

bool dsm_shm_bar_all_here(const struct dsm_shm_bar *s, int n)
{
    return atomic_load(&s->b->joined) == (uint32_t)n;
}

bool dsm_shm_bar_arrive(struct dsm_shm_bar *s, int n, uint32_t *gen)
{
    struct shm_bar *b = s->b;
    *gen = atomic_load(&b->gen); /* before counting ourselves: it can move only after */
    if (atomic_fetch_add(&b->count, 1) + 1 != (uint32_t)n) return false;
    atomic_store(&b->count, 0); /* the last: open the next episode */
    atomic_fetch_add(&b->gen, 1);
    wake_all(&b->gen, &b->sleepers);
    return true;
}

bool dsm_shm_bar_passed(const struct dsm_shm_bar *s, uint32_t gen)
{
    return atomic_load(&s->b->gen) != gen;
}

void dsm_shm_bar_sleep(struct dsm_shm_bar *s, uint32_t gen)
{
    nap(&s->b->gen, gen, &s->b->sleepers);
}

void dsm_shm_bar_leave(struct dsm_shm_bar *s)
{
    if (!s) return;
    unlink(s->path); /* the first member to leave; the others' mappings stay theirs */
    munmap(s->b, SHM_HDR);
    free(s);
}

/* ---- Locks of a session whose domains all share this host ------------------------------
 *
 * A ticket lock in a file per lock (cor-<session>-lock-<home>-<index>, made by whoever maps
 * it first: all zeros is a free lock): a task takes the next ticket and holds the lock when
 * `serving` reaches it, so acquisitions are first come, first served by the time each task
 * asked, whether or not its domain had a CPU since. Each ticket's taker is recorded, so a
 * domain that died holding the lock or waiting for it is passed over by the next in line.
 */

#define LOCK_RING 4096 /* tickets whose takers are remembered at once */

struct shm_lock {
    _Atomic uint32_t next;             /* the next ticket to take */
    _Atomic uint32_t serving;          /* the ticket that holds the lock, or whose turn it is */
    _Atomic uint32_t sleepers;         /* waiters in the kernel (the futex word is serving) */
    _Atomic uint32_t owner_died;       /* the next holder is told its predecessor died holding */
    _Atomic uint64_t holder;           /* the holding ticket << 32 | rank + 1, or 0 */
    _Atomic uint64_t taker[LOCK_RING]; /* ticket << 32 | rank + 1, at ticket % LOCK_RING */
};

struct dsm_shm_lock {
    struct idp_node n;
    struct shm_lock *l;
    char path[96];
};

static struct idp_table locks = {.mu = PTHREAD_MUTEX_INITIALIZER};

static struct idp_node *lock_map(cor_idp_t idp)
{
    struct dsm_shm_lock *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    snprintf(k->path, sizeof k->path, SHM_DIR "/cor-%08x-lock-%u-%u", cor_idp_macro(idp),
             cor_idp_domain(idp), cor_idp_index(idp));
    if (!(k->l = map_shared(k->path, sizeof *k->l))) {
        free(k);
        return NULL;
    }
    return &k->n;
}

struct dsm_shm_lock *dsm_shm_lock_view(cor_idp_t idp)
{
    return (struct dsm_shm_lock *)table_get(&locks, idp, lock_map);
}

static uint64_t ticket_of(uint32_t t, int rank)
{
    return (uint64_t)t << 32 | (uint32_t)(rank + 1);
}

uint32_t dsm_shm_lock_ticket(struct dsm_shm_lock *k, int rank)
{
    uint32_t t = atomic_fetch_add(&k->l->next, 1);
    atomic_store(&k->l->taker[t % LOCK_RING], ticket_of(t, rank));
    return t;
}

int dsm_shm_lock_try(struct dsm_shm_lock *k, int rank, uint32_t *ticket)
{
    uint32_t s = atomic_load(&k->l->serving);
    /* free: nobody holds or waits (while so, serving cannot move) */
    if (!atomic_compare_exchange_strong(&k->l->next, &s, s + 1)) return COR_EBUSY;
    atomic_store(&k->l->taker[s % LOCK_RING], ticket_of(s, rank));
    *ticket = s;
    return COR_OK;
}

int dsm_shm_lock_turn(struct dsm_shm_lock *k, uint32_t t, int rank, bool (*dead)(int, void *),
                      void *arg, int *status)
{
    struct shm_lock *l = k->l;
    for (;;) {
        uint32_t s = atomic_load(&l->serving);
        if (s == t) {
            atomic_store(&l->holder, ticket_of(t, rank));
            *status = atomic_exchange(&l->owner_died, 0) ? COR_DSM_EOWNERDEAD : COR_OK;
            return 1;
        }
        uint64_t who = atomic_load(&l->taker[s % LOCK_RING]);
        /* not recorded yet, or the taker of an older ticket: alive as far as we know */
        if (who >> 32 != s || !dead((int)(uint32_t)who - 1, arg)) return 0;
        /* ticket s belongs to a dead domain, holding the lock or before its turn came */
        if (atomic_load(&l->holder) == who) { /* before serving moves: the next holder looks */
            atomic_store(&l->owner_died, 1);  /* (so does any other waiter passing s over) */
            atomic_store(&l->holder, 0);
        }
        uint32_t expect = s;
        if (atomic_compare_exchange_strong(&l->serving, &expect, s + 1))
            wake_all(&l->serving, &l->sleepers);
    }
}

void dsm_shm_lock_sleep(struct dsm_shm_lock *k, uint32_t t)
{
    uint32_t s = atomic_load(&k->l->serving);
    if (s != t) nap(&k->l->serving, s, &k->l->sleepers);
}

void dsm_shm_lock_release(struct dsm_shm_lock *k)
{
    struct shm_lock *l = k->l;
    atomic_store(&l->holder, 0);
    atomic_fetch_add(&l->serving, 1);
    wake_all(&l->serving, &l->sleepers);
}

static void lock_drop(struct idp_node *n)
{
    struct dsm_shm_lock *k = (struct dsm_shm_lock *)n;
    unlink(k->path); /* the session is over for every domain (finalize's barrier) */
    munmap(k->l, sizeof *k->l);
    free(k);
}

void dsm_shm_lock_views_clear(void)
{
    table_clear(&locks, lock_drop);
}
