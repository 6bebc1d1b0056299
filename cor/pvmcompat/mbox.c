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
#include <stdlib.h>
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

/* What pvm_getmboxinfo gave the program: a copy of libpvm3's answer without our entries, in
 * one block of ours, valid until the program's next pvm_getmboxinfo (as libpvm3's own is).
 * Not libpvm3's array: the layer's own look-ups (instances, remove_own ...) run at any later
 * pvm_* call, the first right as this one leaves, and libpvm3 frees its array at each (the
 * program then read freed memory: Debian's gmbi crashed under a route). Lock held. */
static struct pvmmboxinfo *user_info;

static int copy_for_user(const struct pvmmboxinfo *mi, int n, struct pvmmboxinfo **out)
{
    size_t prefix = strlen(MBOX_PREFIX), ints = 0, chars = 0;
    int keep = 0;
    for (int i = 0; i < n; i++) {
        if (!mi[i].mi_name || !strncmp(mi[i].mi_name, MBOX_PREFIX, prefix)) continue;
        keep++;
        ints += 3 * (size_t)(mi[i].mi_nentries > 0 ? mi[i].mi_nentries : 0);
        chars += strlen(mi[i].mi_name) + 1;
    }
    free(user_info);
    user_info = NULL;
    if (!keep) {
        *out = NULL;
        return 0;
    }
    struct pvmmboxinfo *c =
        malloc((size_t)keep * sizeof *c + ints * sizeof(int) + chars); /* structs, ints, names */
    if (!c) return PvmNoMem;
    int *iv = (int *)(c + keep);
    char *cv = (char *)(iv + ints);
    for (int i = 0, k = 0; i < n; i++) {
        if (!mi[i].mi_name || !strncmp(mi[i].mi_name, MBOX_PREFIX, prefix)) continue;
        int e = mi[i].mi_nentries > 0 ? mi[i].mi_nentries : 0;
        c[k] = (struct pvmmboxinfo){.mi_name = strcpy(cv, mi[i].mi_name),
                                    .mi_nentries = mi[i].mi_nentries};
        cv += strlen(cv) + 1;
        int **col[3] = {&c[k].mi_indices, &c[k].mi_owners, &c[k].mi_flags};
        int *src[3] = {mi[i].mi_indices, mi[i].mi_owners, mi[i].mi_flags};
        for (int j = 0; j < 3; j++, iv += e) {
            *col[j] = iv;
            if (e && src[j])
                memcpy(iv, src[j], (size_t)e * sizeof(int));
            else if (e)
                memset(iv, 0, (size_t)e * sizeof(int));
        }
        k++;
    }
    *out = user_info = c;
    return keep;
}

CPVM_API int pvm_getmboxinfo(char *pattern, int *nclasses, struct pvmmboxinfo **classes)
{
    if (CPVM_PASS) return cpvm_real.pvm_getmboxinfo(pattern, nclasses, classes);
    cpvm_enter();
    int n = 0;
    struct pvmmboxinfo *mi = NULL, *mine = NULL;
    int rc = REAL(pvm_getmboxinfo, pattern, &n, &mi);
    if (rc >= 0) {
        int keep = copy_for_user(mi, mi ? n : 0, &mine);
        if (keep < 0) {
            rc = REAL(lpvmerr, "pvm_getmboxinfo", keep);
        } else {
            if (nclasses) *nclasses = keep;
            if (classes) *classes = mine;
        }
    }
    cpvm_leave();
    return rc;
}
