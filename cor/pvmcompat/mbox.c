/*
 * The layer's own entries in pvmd's mailbox (CoR.*) and message handlers, and keeping them out
 * of the program's sight.
 *
 * A task that takes a route marks itself alive with an instance of CoR.live, an entry PVM
 * removes when the task ends, even killed. The session (CoR.session) is persistent and
 * over-writable, so that any task may remove it: the last routed task that leaves removes
 * it with the rank claims, and a task that joins while no task is alive (the last one was
 * killed) removes what is left before it makes a new session. A rank claim (CoR.ranks) is an
 * entry PVM removes with its task too (a killed one included), and a task that leaves while
 * others live gives it back itself once its route is closed (after cor_finalize: its files
 * are gone): the next task to join takes the rank, so a session that never ends (programs
 * that overlap, a task that lives for days) does not run out of ranks. A peer that knew
 * the rank's earlier task re-admits the rank for the new one once the mailbox confirms the
 * claim (route.c, connect_peer; the core forgets the earlier one: cor_domain_connect).
 *
 * Programs do not see them: pvm_getmboxinfo leaves CoR.* out (the layer's message handlers
 * are hidden in handlers.c).
 */
#include <string.h>
#include <time.h>

#include "route.h"

#define MBOX_LIVE "CoR.live"
#define MBOX_LOCK "CoR.lock"
#define MBOX_PREFIX "CoR."

/* Instances of `name` (its info from pvm_getmboxinfo); -1 if it cannot tell. Lock held. */
static int instances(const char *name, int skip_owner)
{
    int n = 0;
    struct pvmmboxinfo *mi = NULL;
    if (REAL(pvm_getmboxinfo, (char *)name, &n, &mi) < 0) return -1;
    int count = 0;
    for (int i = 0; i < n && mi; i++) {
        if (strcmp(mi[i].mi_name, name)) continue;
        for (int k = 0; k < mi[i].mi_nentries; k++)
            if (mi[i].mi_owners[k] != skip_owner) count++;
    }
    return count;
}

/* Removes every instance of `name`. Lock held. */
static void remove_all(const char *name)
{
    int n = 0, idx[256], nidx = 0;
    struct pvmmboxinfo *mi = NULL;
    if (REAL(pvm_getmboxinfo, (char *)name, &n, &mi) < 0) return;
    for (int i = 0; i < n && mi; i++)
        if (!strcmp(mi[i].mi_name, name))
            for (int k = 0; k < mi[i].mi_nentries && nidx < 256; k++)
                idx[nidx++] = mi[i].mi_indices[k];
    /* (the info array is libpvm3's until its next call: copied first) */
    for (int k = 0; k < nidx; k++)
        REAL(pvm_delinfo, (char *)name, idx[k], PvmMboxDefault);
}

static void remove_session(void)
{
    remove_all(CPVM_MBOX_SESSION);
    remove_all(CPVM_MBOX_RANKS);
}

/* Puts an empty entry `name` with `flags`; its index, or a PVM error. Lock held. */
static int put_empty(const char *name, int flags)
{
    int buf = REAL(pvm_mkbuf, PvmDataDefault), old = REAL(pvm_setsbuf, buf);
    int rc = REAL(pvm_putinfo, (char *)name, buf, flags);
    REAL(pvm_setsbuf, old);
    REAL(pvm_freebuf, buf);
    return rc;
}

/* Joining and leaving tasks take turns (CoR.lock: a plain entry, which only one task can
 * hold and PVM removes with its task): one that joins while the last one leaves, or two
 * that join at once after a killed session, must agree on the session. Waits at most 2 s
 * (then goes on: at worst two sessions, whose tasks talk PVM's way). */
static bool locked;

static void mbox_lock(void)
{
    for (int i = 0; i < 2000 && !locked; i++) {
        if (put_empty(MBOX_LOCK, PvmMboxDefault) >= 0)
            locked = true;
        else
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

void cpvm_mbox_unlock(void)
{
    if (locked) REAL(pvm_delinfo, MBOX_LOCK, 0, PvmMboxDefault);
    locked = false;
}

void cpvm_mbox_join(void)
{
    mbox_lock();
    if (put_empty(MBOX_LIVE, PvmMboxMultiInstance) < 0) return;
    /* Nobody else alive: what a session left (its last task killed) goes first. */
    if (instances(MBOX_LIVE, pvmmytid) == 0) remove_session();
}

/* Removes our instances of `name` (all of them, or only index `only` if >= 0). Lock held. */
static void remove_own(const char *name, int only)
{
    int n = 0;
    struct pvmmboxinfo *mi = NULL;
    int idx[16], nidx = 0;
    if (REAL(pvm_getmboxinfo, (char *)name, &n, &mi) >= 0)
        for (int i = 0; i < n && mi; i++) {
            if (strcmp(mi[i].mi_name, name)) continue;
            for (int k = 0; k < mi[i].mi_nentries && nidx < 16; k++)
                if (mi[i].mi_owners[k] == pvmmytid && (only < 0 || mi[i].mi_indices[k] == only))
                    idx[nidx++] = mi[i].mi_indices[k];
        }
    /* (the info array is libpvm3's until its next call: copied first) */
    for (int k = 0; k < nidx; k++)
        REAL(pvm_delinfo, (char *)name, idx[k], PvmMboxDefault);
}

void cpvm_mbox_leave(int rank)
{
    mbox_lock();
    if (instances(MBOX_LIVE, pvmmytid) == 0)
        remove_session();
    else if (rank >= 0)
        remove_own(CPVM_MBOX_RANKS, rank); /* the next task to join takes it */
    remove_own(MBOX_LIVE, -1);
    cpvm_mbox_unlock();
}

/* ---- out of the program's sight ---------------------------------------------------------- */

CPVM_API int pvm_getmboxinfo(char *pattern, int *nclasses, struct pvmmboxinfo **classes)
{
    if (CPVM_PASS) return cpvm_real.pvm_getmboxinfo(pattern, nclasses, classes);
    cpvm_enter();
    int rc = REAL(pvm_getmboxinfo, pattern, nclasses, classes);
    if (rc >= 0 && nclasses && classes && *classes) {
        /* Ours go to the end (swapped, not overwritten: libpvm3 frees the array's entries
         * at its next call) and are not counted. */
        struct pvmmboxinfo *mi = *classes;
        int n = *nclasses, keep = 0;
        for (int i = 0; i < n; i++) {
            if (mi[i].mi_name && !strncmp(mi[i].mi_name, MBOX_PREFIX, strlen(MBOX_PREFIX)))
                continue;
            if (i != keep) {
                struct pvmmboxinfo t = mi[keep];
                mi[keep] = mi[i];
                mi[i] = t;
            }
            keep++;
        }
        *nclasses = keep;
    }
    cpvm_leave();
    return rc;
}
