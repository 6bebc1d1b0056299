/*
 * pvm_initsend without the big lock. libpvm3's pvm_initsend frees the active send buffer and
 * makes a new one: both change libpvm3's table of buffers and its free lists, which only the
 * big lock's holder may touch. A thread of a routed task therefore keeps a few new messages
 * made ahead under the lock (its spares: PvmDataRaw ones with the fragment its packs fill,
 * as large as its recent messages; PvmDataInPlace ones), and a pvm_initsend takes one without
 * the lock: the message becomes the thread's send buffer at once (installed in libpvm3 at its
 * next call, lock.c), and the one it replaces is freed by the next holder of the lock. The
 * spares are made again, a batch at a time, by the pvm_initsend that finds none left. Other
 * encodings, traced tasks and tasks without a route keep libpvm3's own call.
 */
#include <stdlib.h>

#include "pmsg.h"
#include "route.h"

#define SPARES_MAX 32
#define SPARE_ROOM_MIN 4096                 /* (libpvm3's own first fragment is about this) */
#define SPARE_ROOM_MAX (4 * 1024 * 1024)    /* larger messages allocate as they pack */
#define SPARE_BATCH_BYTES (8 * 1024 * 1024) /* fewer spares of large messages */

/* Fragment frames for InPlace packs without the lock: libpvm3 makes one per pack (over the
 * program's memory) from its shared free list; the thread takes them from a few made ahead. */
#define FRAMES_MAX 64

struct cpvm_spares {
    unsigned epoch; /* cpvm_buffers_epoch when made: older ones belong to a task that left */
    int enc, n, nframes;
    bool small; /* its Raw fragments are smaller than the thread's messages now: made again */
    struct lp_msg *msg[SPARES_MAX];
    struct lp_frag *frame[FRAMES_MAX];
};

/* The body of the thread's last message: the room of its next spares. */
static _Thread_local long recent_body;

void cpvm_spares_drop(struct cpvm_spares *s)
{
    if (!s) return;
    bool current = s->epoch == cpvm_buffers_epoch();
    for (int i = 0; current && i < s->n; i++)
        REAL(pvm_freebuf, s->msg[i]->mid);
    /* (frames outlive a pvm_exit: libpvm3 keeps its free list) */
    for (int i = 0; i < s->nframes; i++)
        cpvm_real.fr_unref((struct frag *)s->frame[i]);
    free(s);
}

void cpvm_spares_exit(void)
{
    struct cpvm_spares **own = cpvm_own_spares();
    if (!own) return;
    cpvm_spares_drop(*own);
    *own = NULL;
}

/* Lock held: the thread's frames for InPlace packs made up to FRAMES_MAX. Over an empty
 * buffer of ours, never a null one: libpvm3 takes a frame without a buffer for the head of
 * a list (fr_unref would walk it). */
static char no_data[1];

static void frames_refill(struct cpvm_spares *s)
{
    while (s->nframes < FRAMES_MAX) {
        struct lp_frag *f = (struct lp_frag *)REAL(fr_snew, no_data, 0);
        if (!f) break;
        s->frame[s->nframes++] = f;
    }
}

void cpvm_frames_topup(void)
{
    struct cpvm_spares **own = cpvm_own_spares();
    struct cpvm_spares *s = own ? *own : NULL;
    if (s && s->enc == PvmDataInPlace && s->epoch == cpvm_buffers_epoch() &&
        s->nframes < FRAMES_MAX / 2)
        frames_refill(s);
}

struct lp_frag *cpvm_frame_take(void)
{
    struct cpvm_spares **own = cpvm_own_spares();
    struct cpvm_spares *s = own ? *own : NULL;
    if (!s || !s->nframes || s->epoch != cpvm_buffers_epoch()) return NULL;
    return s->frame[--s->nframes];
}

/* Lock held, after the real pvm_initsend(enc): a new batch of spares (at most `most` more)
 * if the thread's next pvm_initsend can do without the lock. */
static void refill(int enc, int most)
{
    struct cpvm_spares **own = cpvm_own_spares();
    if (!own || cpvm_nested() || !cpvm_routing() || !cpvm_pack_target()) return;
    if (enc != PvmDataRaw && enc != PvmDataInPlace) return;
    struct cpvm_spares *s = *own;
    if (s && (s->enc != enc || s->epoch != cpvm_buffers_epoch() || s->small)) {
        cpvm_spares_drop(s);
        *own = s = NULL;
    }
    if (!s && !(s = *own = calloc(1, sizeof *s))) return;
    s->enc = enc;
    s->epoch = cpvm_buffers_epoch();
    long room = recent_body < SPARE_ROOM_MIN   ? SPARE_ROOM_MIN
                : recent_body > SPARE_ROOM_MAX ? SPARE_ROOM_MAX
                                               : recent_body + 64;
    int want = enc == PvmDataRaw ? (int)(SPARE_BATCH_BYTES / room) : SPARES_MAX;
    if (want > SPARES_MAX) want = SPARES_MAX;
    if (want < 2) want = 2;
    while (s->n < want && most-- > 0) {
        struct lp_msg *m = cpvm_spare_make(enc, (int)room);
        if (!m) break;
        s->msg[s->n++] = m;
    }
    if (enc == PvmDataInPlace) frames_refill(s);
}

/* A receive's wait tops the spares up a few at a time (cpvm_chores): the next pvm_initsend
 * finds one ready instead of making a batch on the message's way. */
#define SPARES_LOW 8
#define TOP_UP_MOST 2

bool cpvm_spares_low(void)
{
    struct cpvm_spares **own = cpvm_own_spares();
    struct cpvm_spares *s = own ? *own : NULL;
    return s && s->epoch == cpvm_buffers_epoch() &&
           (s->n < SPARES_LOW || s->small ||
            (s->enc == PvmDataInPlace && s->nframes < FRAMES_MAX / 2));
}

void cpvm_spares_top_up(void)
{
    struct cpvm_spares **own = cpvm_own_spares();
    if (!own || !*own) return;
    if ((*own)->n < SPARES_LOW || (*own)->small) refill((*own)->enc, TOP_UP_MOST);
    cpvm_frames_topup();
}

/* Without the lock: a spare of encoding enc made the thread's send buffer; its mid, or 0. */
static int initsend_unlocked(int enc)
{
    struct lp_msg *old = cpvm_own_sbuf();
    struct cpvm_spares **own = cpvm_own_spares();
    struct cpvm_spares *s = own ? *own : NULL;
    if (!old || !s || s->enc != enc || !s->n || s->small || s->epoch != cpvm_buffers_epoch())
        return 0;
    long body = cpvm_msg_body(old);
    if (body > recent_body || body < recent_body / 2) recent_body = body;
    struct lp_msg *m = s->msg[--s->n];
    /* A fragment too small for the thread's messages now: the locked path makes larger ones. */
    if (enc == PvmDataRaw && m->frag->link->max < recent_body) {
        s->msg[s->n++] = m;
        s->small = true; /* (dropped under the lock, by refill) */
        return 0;
    }
    cpvm_adopt_sbuf(m);
    atomic_fetch_add_explicit(&cpvm_stats.initsends_unlocked, 1, memory_order_relaxed);
    return m->mid;
}

CPVM_API int pvm_initsend(int enc)
{
    if (CPVM_PASS) return cpvm_real.pvm_initsend(enc);
    int mid = initsend_unlocked(enc);
    if (mid > 0) return mid;
    cpvm_enter();
    struct lp_msg *old = cpvm_pack_target();
    if (old) {
        long body = cpvm_msg_body(old);
        if (body > recent_body || body < recent_body / 2) recent_body = body;
    }
    mid = REAL(pvm_initsend, enc);
    if (mid > 0) refill(enc, SPARES_MAX);
    cpvm_leave();
    return mid;
}
