/* keytab.c - a port's live registration table: which of its keys other processes on this host
 * may still write with (puts) or read with (gets).
 *
 * On one host a put by key is a copy by the writer (the rings' process_vm_writev, or
 * libfabric's shm provider, whose fast RMA path checks no key at the target).  A key can go
 * stale while a writer holds it: the target deregisters (or gm_dma_free's) the region, the
 * withdrawal (GMX_K_UNKEY) is still on its way, or the key was handed out of band
 * (gm_compat_export) and is never withdrawn; the memory may be in other use by then.  So the
 * target publishes its live keys here, in its lock file (beside the doorbell, mapped by every
 * port on the host that sends to it), and a writer brackets each copy:
 *
 *   writer (gmx_keytab_enter .. leave)      target, deregistering (gmx_keytab_remove)
 *   a writer slot := our pid (seq_cst)      key = 0                 (seq_cst)
 *   key still ours, range inside? else out  wait until no slot names a live process
 *   copy; slot := 0         (release)       then the memory may go
 *
 * Each side writes before it reads with sequentially consistent operations, so at least one
 * sees the other: the writer finds the key gone and fails the put (GM_PERMISSION_DENIED), or
 * the target waits for the copy to finish before gm_deregister_memory returns.  A slot is
 * reused only once its writers are gone, so base and len read after a matching key are that
 * key's.  Each writer inside the bracket names its process in one of the entry's slots, so a
 * writer killed there (kill -9 of a peer in the middle of a large put) is seen to be gone
 * (kill(pid, 0): ESRCH) and its slot cleared at once.  A writer stopped inside the bracket
 * holds the deregistration up to KEYTAB_WAIT_NS; then the entry is retired (never reused) and
 * the wait given up, with a message: a put from a process frozen for that long between its
 * check and its copy is the one case this does not cover.  (Processes on one host share a pid
 * namespace here; a writer in another one would be taken for gone.)
 *
 * The table is shared memory other processes write: every index stays inside it, and what a
 * writer reads only names memory of the target that published it. */
#include "gm_internal.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#define KEY_FREE 0ULL
#define KEY_RETIRED UINT64_MAX
#define KEYTAB_WAIT_NS 10000000000ULL /* a writer inside the bracket for 10 s is gone or frozen */

#define WRITER_SLOTS 6 /* copies into one region at once; more wait for a slot */

struct gmx_keyent {
    _Atomic uint64_t key; /* KEY_FREE, a live key, or KEY_RETIRED */
    _Atomic uint64_t base, len;
    _Atomic int32_t writer[WRITER_SLOTS]; /* pid of a copy between its check and its end, or 0 */
};
#define KEYTAB_ENTRIES ((GMX_LOCKFILE_SIZE - GMX_KEYTAB_OFFSET) / sizeof(struct gmx_keyent))
_Static_assert(GMX_KEYTAB_OFFSET >= GMX_BELL_OFFSET + sizeof(struct gmx_bell), "after the bell");
_Static_assert(KEYTAB_ENTRIES >= 256, "room for the registrations of a busy port");

struct gmx_keytab {
    struct gmx_keyent e[KEYTAB_ENTRIES];
};

struct gmx_keytab *gmx_keytab_of(struct gmx_bell *b)
{
    return b ? (struct gmx_keytab *)((char *)b - GMX_BELL_OFFSET + GMX_KEYTAB_OFFSET) : NULL;
}

void gmx_keytab_reset(struct gmx_keytab *t)
{
    for (size_t i = 0; i < KEYTAB_ENTRIES; i++) {
        atomic_store(&t->e[i].key, KEY_FREE);
        for (int j = 0; j < WRITER_SLOTS; j++)
            atomic_store(&t->e[i].writer[j], 0);
    }
}

/* A writer slot's process, if it still lives; a dead one's slot is cleared. */
static bool writer_live(_Atomic int32_t *slot)
{
    int32_t pid = atomic_load(slot);
    if (pid <= 0) return false;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) return true;
    atomic_compare_exchange_strong(slot, &pid, 0); /* (only if it is still that process) */
    return false;
}

static bool has_writers(struct gmx_keyent *e, bool check_live)
{
    bool any = false;
    for (int j = 0; j < WRITER_SLOTS; j++)
        if (check_live ? writer_live(&e->writer[j]) : atomic_load(&e->writer[j]) != 0) any = true;
    return any;
}

int gmx_keytab_add(struct gmx_keytab *t, uint64_t key, uint64_t base, uint64_t len)
{
    if (key == KEY_FREE || key == KEY_RETIRED) return -1;
    for (size_t i = 0; i < KEYTAB_ENTRIES; i++) {
        struct gmx_keyent *e = &t->e[i];
        if (atomic_load(&e->key) != KEY_FREE || has_writers(e, false)) continue;
        atomic_store_explicit(&e->base, base, memory_order_relaxed);
        atomic_store_explicit(&e->len, len, memory_order_relaxed);
        atomic_store_explicit(&e->key, key, memory_order_release); /* base, len before it */
        return 0;
    }
    return -1;
}

void gmx_keytab_remove(struct gmx_keytab *t, uint64_t key)
{
    if (key == KEY_FREE || key == KEY_RETIRED) return;
    for (size_t i = 0; i < KEYTAB_ENTRIES; i++) {
        struct gmx_keyent *e = &t->e[i];
        if (atomic_load_explicit(&e->key, memory_order_relaxed) != key) continue;
        atomic_store(&e->key, KEY_FREE); /* seq_cst: before the look at writers */
        uint64_t start = 0;
        for (unsigned spins = 0; has_writers(e, spins >= 64); spins++) {
            if (spins < 64) continue; /* a copy in progress ends within microseconds */
            uint64_t now = gmx_now_ns();
            if (!start) start = now;
            if (now - start >= KEYTAB_WAIT_NS) {
                /* Retired before the wait ends: a late leave must not free it for reuse. */
                atomic_store(&e->key, KEY_RETIRED);
                fprintf(stderr,
                        "libgm: a put or get into a region being deregistered did not finish "
                        "in %llu s (its process stopped?); deregistered anyway\n",
                        (unsigned long long)(KEYTAB_WAIT_NS / 1000000000u));
                break;
            }
            struct timespec nap = {0, 20000};
            nanosleep(&nap, NULL);
        }
        return;
    }
}

/* A free writer slot of e taken for this process, or -1 once the key is gone. */
static int take_slot(struct gmx_keyent *e, uint64_t key)
{
    int32_t me = (int32_t)getpid();
    for (unsigned tries = 0;; tries++) {
        for (int j = 0; j < WRITER_SLOTS; j++) {
            int32_t none = 0;
            if (atomic_compare_exchange_strong(&e->writer[j], &none, me)) return j; /* seq_cst */
        }
        if (atomic_load(&e->key) != key) return -1;
        if (tries > 16) sched_yield(); /* every slot busy: copies end within microseconds */
    }
}

int gmx_keytab_enter(struct gmx_keytab *t, uint64_t key, uint64_t addr, uint64_t len)
{
    if (key == KEY_FREE || key == KEY_RETIRED || addr + len < addr) return -1;
    for (size_t i = 0; i < KEYTAB_ENTRIES; i++) {
        struct gmx_keyent *e = &t->e[i];
        if (atomic_load_explicit(&e->key, memory_order_relaxed) != key) continue;
        int j = take_slot(e, key); /* seq_cst: before the look at the key */
        if (j < 0) return -1;
        int slot = (int)i * WRITER_SLOTS + j;
        if (atomic_load(&e->key) != key) { /* removed meanwhile */
            gmx_keytab_leave(t, slot);
            return -1;
        }
        uint64_t base = atomic_load_explicit(&e->base, memory_order_relaxed);
        uint64_t rlen = atomic_load_explicit(&e->len, memory_order_relaxed);
        if (base + rlen >= base && addr >= base && addr + len <= base + rlen) return slot;
        gmx_keytab_leave(t, slot);
        return -1;
    }
    return -1;
}

void gmx_keytab_leave(struct gmx_keytab *t, int slot)
{
    if (slot < 0 || (size_t)slot >= KEYTAB_ENTRIES * WRITER_SLOTS) return;
    /* Only our own mark: a table reset by a new owner of the lock file may have given the
     * slot to another writer meanwhile. */
    int32_t me = (int32_t)getpid();
    atomic_compare_exchange_strong_explicit(&t->e[slot / WRITER_SLOTS].writer[slot % WRITER_SLOTS],
                                            &me, 0, memory_order_release, memory_order_relaxed);
}
