/* Routed messages from and into libpvm3's own fragments (see pmsg.h). Lock: the big lock, but
 * for the copies of cpvm_pack_finish and cpvm_unpack into the calling thread's own message,
 * and cpvm_out_build from it (the spare image buffers have a lock of their own). */
#include <stdlib.h>
#include <string.h>

#include "pmsg.h"

/* A fragment this large travels detached, without a copy (COR_PVM_DETACH_MIN). */
static long detach_min = -1;
#define DETACH_MIN detach_min

static int headroom = -1;      /* libpvm3 keeps this much room before a fragment's data */
static int send_headroom = -1; /* the same in a fragment libpvm3 packs into (its headers') */

static struct lp_msg *msg_of(int mid)
{
    return (struct lp_msg *)REAL(midtobuf, mid);
}

/* Packs a known int into a Raw message, copies it with pvm_pkmesg/pvm_upkmesg, and reads
 * both through the mirror: the sender's side and a received message's (its headroom). */
bool cpvm_layout_check(void)
{
    if (headroom >= 0) return true;
    const int magic = 0x5a17c0de;
    int ok = 0, mid = REAL(pvm_mkbuf, PvmDataRaw), img = REAL(pvm_mkbuf, PvmDataRaw), copy = -1;
    int old_s = REAL(pvm_setsbuf, mid);
    REAL(pvm_pkint, (int *)&magic, 1, 1);
    REAL(pvm_setsbuf, img);
    if (REAL(pvm_pkmesg, mid) >= 0) {
        int old_r = REAL(pvm_setrbuf, img);
        copy = REAL(pvm_upkmesg);
        REAL(pvm_setrbuf, old_r);
    }
    REAL(pvm_setsbuf, old_s);
    struct lp_msg *m = mid > 0 ? msg_of(mid) : NULL, *c = copy > 0 ? msg_of(copy) : NULL;
    if (m && c && m->mid == mid && c->mid == copy && m->enc == pvmmydsig && c->enc == pvmmydsig &&
        m->frag && !m->frag->buf && c->frag && !c->frag->buf) {
        struct lp_frag *f = m->frag->link, *g = c->frag->link;
        ok = f != m->frag && f->link == m->frag && f->len == 4 && !memcmp(f->dat, &magic, 4) &&
             g != c->frag && g->link == c->frag && g->len == 4 && !memcmp(g->dat, &magic, 4) &&
             g->dat >= g->buf && g->dat - g->buf < 4096 && g->max >= 4 + (g->dat - g->buf) &&
             f->dat >= f->buf && f->dat - f->buf < 4096;
        /* The decoders' vector too: the copy's int read back through its slot (pack.c). */
        int back = 0, old_rb = ok ? REAL(pvm_setrbuf, copy) : 0;
        if (ok) {
            ok = c->codef && LP_DECODER(c, LP_INT)(c, &back, 1, 1, sizeof back) == 0 &&
                 back == magic;
            REAL(pvm_setrbuf, old_rb);
        }
        if (ok) {
            send_headroom = (int)(f->dat - f->buf);
            headroom = (int)(g->dat - g->buf);
        }
    }
    REAL(pvm_freebuf, mid);
    REAL(pvm_freebuf, img);
    if (copy > 0) REAL(pvm_freebuf, copy);
    return ok;
}

/* ---- packing and unpacking without the lock ---- */

extern struct lp_msg *pvmsbuf, *pvmrbuf; /* the active buffers (the lock holder's) */
extern struct Pvmtracer pvmtrc;          /* trctid > 0: libpvm3 traces calls */

/* A pack this large copies without the lock into a fragment of its own (smaller ones are
 * libpvm3's, under the lock: the copy costs less than a second turn of the lock). */
#define PACK_OWN_MIN 16384

bool cpvm_pack_prepare(const void *data, int cnt, int std, int size, struct cpvm_pack_job *job)
{
    struct lp_msg *m = pvmsbuf;
    long bytes = (long)cnt * size;
    /* Only PvmDataRaw keeps the bytes as they are; a group call's buffers stay under its
     * lock; libpvm3's tracing of pvm_pk* would miss the event. */
    if (send_headroom < 0 || !m || m->enc != pvmmydsig || !(m->flag & LP_MM_PACK) || !data ||
        (std != 1 && cnt > 1) || bytes < PACK_OWN_MIN || bytes > INT32_MAX || cpvm_nested() ||
        pvmtrc.trctid > 0)
        return false;
    struct lp_frag *last = m->frag->rlink;
    int room = last == m->frag ? 0 : last->max - (int)(last->dat - last->buf) - last->len;
    if (room < 0) room = 0;
    if (room > bytes) room = (int)bytes;
    *job = (struct cpvm_pack_job){m, NULL, data, room, (int)bytes};
    if (room < bytes) {
        /* (fr_new takes the frame from libpvm3's shared free list: here, under the lock) */
        job->frag = (struct lp_frag *)REAL(fr_new, (int)bytes - room + send_headroom);
        if (!job->frag) return false; /* libpvm3 reports it */
    }
    return true;
}

void cpvm_pack_finish(const struct cpvm_pack_job *job)
{
    struct lp_msg *m = job->msg;
    if (job->room) {
        struct lp_frag *last = m->frag->rlink;
        memcpy(last->dat + last->len, job->src, (size_t)job->room);
        last->len += job->room;
    }
    atomic_fetch_add_explicit(&cpvm_stats.packs_unlocked, 1, memory_order_relaxed);
    struct lp_frag *fp = job->frag;
    if (!fp) return;
    fp->dat += send_headroom;
    fp->len = job->bytes - job->room;
    memcpy(fp->dat, job->src + job->room, (size_t)fp->len);
    fp->link = m->frag; /* at the end of the list, before the master */
    fp->rlink = m->frag->rlink;
    m->frag->rlink->link = fp;
    m->frag->rlink = fp;
}

struct lp_msg *cpvm_pack_target(void)
{
    struct lp_msg *m = pvmsbuf;
    /* (pvm_initsend and the packs mark Raw messages being packed; InPlace ones never are) */
    bool raw = m && m->enc == pvmmydsig && (m->flag & LP_MM_PACK);
    if (send_headroom < 0 || !m || !m->frag || pvmtrc.trctid > 0 ||
        (!raw && m->enc != CPVM_ENC_INPLACE))
        return NULL;
    return m;
}

int cpvm_sbuf_mid(void)
{
    return pvmsbuf ? pvmsbuf->mid : 0;
}

/* An InPlace pack as libpvm3's: a fragment over the program's memory at the end of the list
 * (its own buffer pointer, not freed with the message), none for an empty pack; only a stride
 * of 1 (libpvm3 refuses others). The frame is one of the thread's, made under the lock. */
static bool pack_inplace(struct lp_msg *m, const void *data, int cnt, int std, long bytes)
{
    if (!data || cnt <= 0 || std != 1 || bytes > INT32_MAX) return false;
    struct lp_frag *fp = cpvm_frame_take();
    if (!fp) return false;
    fp->buf = fp->dat = (char *)data;
    fp->max = fp->len = (int)bytes;
    fp->link = m->frag; /* at the end of the list, before the master */
    fp->rlink = m->frag->rlink;
    m->frag->rlink->link = fp;
    m->frag->rlink = fp;
    atomic_fetch_add_explicit(&cpvm_stats.packs_unlocked, 1, memory_order_relaxed);
    return true;
}

bool cpvm_pack_unlocked(struct lp_msg *m, const void *data, int cnt, int std, int size)
{
    long bytes = (long)cnt * size;
    if (m->enc == CPVM_ENC_INPLACE) return pack_inplace(m, data, cnt, std, bytes);
    if (m->enc != pvmmydsig || !data || cnt < 0 || (std != 1 && cnt > 1) || bytes > INT32_MAX)
        return false;
    struct lp_frag *last = m->frag->rlink;
    if (last == m->frag) return false;
    long room = last->max - (long)(last->dat - last->buf) - last->len;
    if (room < bytes) return false;
    memcpy(last->dat + last->len, data, (size_t)bytes);
    last->len += (int)bytes;
    atomic_fetch_add_explicit(&cpvm_stats.packs_unlocked, 1, memory_order_relaxed);
    return true;
}

struct lp_msg *cpvm_spare_make(int enc, int room)
{
    if (send_headroom < 0) return NULL;
    int mid = REAL(pvm_mkbuf, enc);
    struct lp_msg *m = mid > 0 ? msg_of(mid) : NULL;
    if (!m || !m->frag || m->frag->link != m->frag) {
        if (mid > 0) REAL(pvm_freebuf, mid);
        return NULL;
    }
    if (enc != PvmDataRaw) return m;
    m->flag |= LP_MM_PACK; /* as pvm_initsend marks it */
    /* The fragment libpvm3's first pack would add, as large as the thread's messages. */
    struct lp_frag *fp = (struct lp_frag *)REAL(fr_new, room + send_headroom);
    if (!fp) {
        REAL(pvm_freebuf, mid);
        return NULL;
    }
    fp->dat += send_headroom;
    fp->len = 0;
    fp->link = fp->rlink = m->frag;
    m->frag->link = m->frag->rlink = fp;
    return m;
}

long cpvm_msg_body(const struct lp_msg *m)
{
    long body = 0;
    for (struct lp_frag *f = m->frag->link; f != m->frag; f = f->link)
        body += f->len;
    return body;
}

struct lp_msg *cpvm_unpack_target(void)
{
    struct lp_msg *m = pvmrbuf;
    /* Native data only: its decoders copy out of the fragments and move the message's read
     * position, nothing else (others convert through state of libpvm3's). */
    if (headroom < 0 || !m || m->enc != pvmmydsig || pvmtrc.trctid > 0) return NULL;
    return m;
}

int cpvm_unpack(struct lp_msg *m, enum lp_type type, void *data, int cnt, int std, int size,
                const char *name)
{
    atomic_fetch_add_explicit(&cpvm_stats.unpacks_unlocked, 1, memory_order_relaxed);
    int cc = LP_DECODER(m, type)(m, data, cnt, std, size);
    if (cc >= 0) return PvmOk;
    cpvm_enter(); /* libpvm3's error report: pvm_errno, the message if PvmAutoErr */
    cc = REAL(lpvmerr, (char *)name, cc);
    cpvm_leave();
    return cc;
}

/* ---- sending ---- */

/* Buffers of the core (sent without a copy), some kept for the next messages (sends going on
 * in the background hold theirs a while). */
#define SPARES 8
static struct {
    void *p;
    size_t cap;
} spare[SPARES]; /* spare_lock */
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER;

/* The smallest kept buffer that fits, else a new one. */
static void *buffer_get(size_t len, size_t *cap)
{
    pthread_mutex_lock(&spare_lock);
    int best = -1;
    for (int i = 0; i < SPARES; i++)
        if (spare[i].p && spare[i].cap >= len && (best < 0 || spare[i].cap < spare[best].cap))
            best = i;
    if (best >= 0) {
        void *b = spare[best].p;
        *cap = spare[best].cap;
        spare[best].p = NULL;
        pthread_mutex_unlock(&spare_lock);
        return b;
    }
    pthread_mutex_unlock(&spare_lock);
    *cap = len < 4096 ? 4096 : len;
    return cor_getBuffer(COR_BYTE, *cap);
}

/* Kept in a free place, else in place of the smallest kept one if it is larger. */
static void buffer_put(void *b, size_t cap)
{
    if (!b) return;
    void *drop = b;
    pthread_mutex_lock(&spare_lock);
    int slot = 0;
    for (int i = 0; i < SPARES; i++) {
        if (!spare[i].p) {
            slot = i;
            break;
        }
        if (spare[i].cap < spare[slot].cap) slot = i;
    }
    if (!spare[slot].p || spare[slot].cap < cap) {
        drop = spare[slot].p;
        spare[slot].p = b;
        spare[slot].cap = cap;
    }
    pthread_mutex_unlock(&spare_lock);
    if (drop) cor_releaseBuffer(drop);
}

void cpvm_image_release(void *image, size_t cap)
{
    buffer_put(image, cap);
}

void cpvm_out_release(struct cpvm_out *o)
{
    for (int i = 0; i < o->npiece; i++)
        buffer_put(o->piece[i].owned, o->piece[i].owned_cap);
    buffer_put(o->image, o->image_cap);
    memset(o, 0, sizeof *o);
}

struct span {
    const char *data;
    int len;
};

/* How the spans travel. Native data (Raw, InPlace, psend) may be regrouped: a span of at
 * least DETACH_MIN goes detached as it is, each run of smaller ones between them as one
 * fragment (detached, gathered into a buffer, if the run is that large). Other encodings
 * keep their fragments, inline. run_end[i] marks where a run starting at i ends. */
static int plan(const struct span *s, int n, bool native, bool *detach, int *run_end)
{
    int ndetached = 0;
    for (int i = 0; i < n;) {
        if (!native || s[i].len >= DETACH_MIN) {
            detach[i] = native;
            ndetached += native;
            run_end[i] = i + 1;
            i++;
            continue;
        }
        int j = i;
        long bytes = 0;
        while (j < n && s[j].len < DETACH_MIN)
            bytes += s[j++].len;
        detach[i] = bytes >= DETACH_MIN;
        ndetached += detach[i];
        run_end[i] = j;
        i = j;
    }
    return ndetached;
}

/* The bytes of spans [from, to), copied to dst (unless NULL); returns how many. */
static size_t concat(char *dst, const struct span *s, int from, int to)
{
    size_t bytes = 0;
    for (int j = from; j < to; j++) {
        if (dst) memcpy(dst + bytes, s[j].data, (size_t)s[j].len);
        bytes += (size_t)s[j].len;
    }
    return bytes;
}

static int build(const struct span *s, int n, long body, bool native, int wid, int enc, int tid,
                 int tag, int ctx, struct cpvm_out *o)
{
    memset(o, 0, sizeof *o);
    bool detach_few[16];
    int run_end_few[16];
    bool *detach = n <= 16 ? detach_few : malloc((size_t)n * sizeof *detach);
    int *run_end = n <= 16 ? run_end_few : malloc((size_t)n * sizeof *run_end);
    int rc = PvmNoMem;
    if (!detach || !run_end) goto out;
    if (plan(s, n, native, detach, run_end) > CPVM_DETACH_MAX) {
        /* Too many pieces: all of it one gathered run. */
        for (int i = 0; i < n; i++)
            detach[i] = false;
        detach[0] = body >= DETACH_MIN;
        run_end[0] = n;
    }
    size_t len = CPVM_HDR_BYTES;
    for (int i = 0; i < n; i = run_end[i])
        len += sizeof(int) + (detach[i] ? 0 : (size_t)concat(NULL, s, i, run_end[i]));
    if (!(o->image = buffer_get(len, &o->image_cap))) goto out;
    cpvm_image_header(o->image, (int)body, ctx, tag, wid, enc, pvmmytid, tid);
    size_t off = CPVM_HDR_BYTES;
    for (int i = 0; i < n; i = run_end[i]) {
        int bytes = (int)concat(NULL, s, i, run_end[i]);
        if (!detach[i]) { /* inline: the run's bytes after their length */
            off = cpvm_image_open(o->image, off, bytes);
            off += concat((char *)o->image + off, s, i, run_end[i]);
            continue;
        }
        struct cpvm_piece *p = &o->piece[o->npiece++];
        p->len = bytes;
        p->data = s[i].data;
        if (run_end[i] > i + 1) { /* a run of small ones, gathered */
            if (!(p->owned = buffer_get((size_t)bytes, &p->owned_cap))) goto out;
            concat(p->owned, s, i, run_end[i]);
            p->data = p->owned;
        }
        off = cpvm_image_put(o->image, off, NULL, p->len);
    }
    o->image_len = off;
    rc = PvmOk;
out:
    if (detach != detach_few) free(detach);
    if (run_end != run_end_few) free(run_end);
    if (rc < 0) cpvm_out_release(o);
    return rc;
}

void cpvm_out_init(void)
{
    if (detach_min < 0) detach_min = (long)cpvm_knob(CPVM_K_DETACH_MIN);
}

struct lp_msg *cpvm_out_prepare(int mid)
{
    struct lp_msg *m = mid > 0 ? msg_of(mid) : NULL;
    if (!m || !m->frag) return NULL;
    if (m->flag & LP_MM_PACK) REAL(pmsg_setlen, (struct pmsg *)m); /* XDR's lengths */
    cpvm_out_init();
    return m;
}

int cpvm_out_message(int mid, int tid, int tag, int ctx, struct cpvm_out *o)
{
    struct lp_msg *m = cpvm_out_prepare(mid);
    return m ? cpvm_out_build(m, tid, tag, ctx, o) : PvmNoSuchBuf;
}

int cpvm_out_build(const struct lp_msg *m, int tid, int tag, int ctx, struct cpvm_out *o)
{
    int n = 0;
    long body = 0;
    for (struct lp_frag *f = m->frag->link; f != m->frag; f = f->link)
        n += f->len > 0;
    struct span one, *s = n <= 1 ? &one : malloc((size_t)n * sizeof *s);
    if (!s) return PvmNoMem;
    n = 0;
    for (struct lp_frag *f = m->frag->link; f != m->frag; f = f->link)
        if (f->len > 0) {
            s[n++] = (struct span){f->dat, f->len};
            body += f->len;
        }
    int rc = PvmBadParam;
    if (body <= INT32_MAX) {
        /* InPlace data is read now: native bytes from here on. */
        int enc = m->enc == CPVM_ENC_INPLACE ? pvmmydsig : m->enc;
        rc = build(s, n, body, enc == pvmmydsig, m->wid, enc, tid, tag, ctx, o);
    }
    if (s != &one) free(s);
    return rc;
}

int cpvm_out_bytes(const void *data, int len, int tid, int tag, int ctx, struct cpvm_out *o)
{
    struct span s = {data, len};
    return build(&s, len > 0, len, true, 0, pvmmydsig, tid, tag, ctx, o);
}

/* ---- receiving ---- */

/* Receive spares: libpvm3 messages made ahead (a receive's wait makes them, cpvm_chores: off
 * the message's way), each with one native fragment of RX_SPARE_ROOM bytes and its decoding
 * already set up (what pvm_setrbuf does to a message it is given). A small routed image (one
 * inline fragment, native data) is copied into one, so the pump makes no libpvm3 call for it:
 * no umbuf_new, fr_new, pmsg_setenc, and no pvm_setrbuf pair in cpvm_in_deliver. Big lock. */
#define RX_SPARES 8
#define RX_SPARE_ROOM 1024
static struct lp_msg *rx_spare[RX_SPARES]; /* big lock */
static _Atomic int rx_nspares;             /* (written under the big lock) */
static bool rx_spares_on;                  /* big lock: the route's inbound is open */

static struct lp_msg *rx_spare_make(void)
{
    struct lp_msg *m = (struct lp_msg *)REAL(umbuf_new);
    if (!m) return NULL;
    struct lp_frag *fp = (struct lp_frag *)REAL(fr_new, RX_SPARE_ROOM + headroom);
    if (!fp) {
        REAL(pvm_freebuf, m->mid);
        return NULL;
    }
    fp->dat += headroom;
    fp->len = 0;
    fp->link = fp->rlink = m->frag;
    m->frag->link = m->frag->rlink = fp;
    REAL(pmsg_setenc, (struct pmsg *)m, pvmmydsig);
    m->flag |= LP_MM_ROUTED;
    int old = REAL(pvm_setrbuf, m->mid); /* its decoding: at its fragment's start */
    REAL(pvm_setrbuf, old);
    m->flag |= LP_MM_SPARE;
    return m;
}

bool cpvm_mid_hidden(int mid)
{
    struct lp_msg *m =
        mid > 0 && atomic_load_explicit(&rx_nspares, memory_order_relaxed) ? msg_of(mid) : NULL;
    return m && (m->flag & LP_MM_SPARE);
}

bool cpvm_in_spares_low(void)
{
    return atomic_load_explicit(&rx_nspares, memory_order_relaxed) < RX_SPARES / 2;
}

void cpvm_in_spares_top_up(void)
{
    if (!rx_spares_on || headroom < 0 || pvmtrc.trctid > 0) return;
    int n = atomic_load_explicit(&rx_nspares, memory_order_relaxed);
    for (int most = 4; n < RX_SPARES && most > 0; most--) {
        struct lp_msg *m = rx_spare_make();
        if (!m) break;
        rx_spare[n++] = m;
    }
    atomic_store_explicit(&rx_nspares, n, memory_order_relaxed);
}

void cpvm_in_spares_open(bool on)
{
    rx_spares_on = on;
    if (on) return;
    int n = atomic_load_explicit(&rx_nspares, memory_order_relaxed);
    while (n > 0)
        REAL(pvm_freebuf, rx_spare[--n]->mid);
    atomic_store_explicit(&rx_nspares, 0, memory_order_relaxed);
}

/* The image's one native inline fragment copied into a spare, or NULL (the caller builds the
 * message as libpvm3 would). */
static struct lp_msg *rx_spare_fill(const void *image, size_t len)
{
    int n = atomic_load_explicit(&rx_nspares, memory_order_relaxed);
    if (!n || cpvm_image_word(image, H_ENC) != pvmmydsig || pvmtrc.trctid > 0) return NULL;
    size_t pos = CPVM_HDR_BYTES;
    struct cpvm_frag f, more;
    if (!cpvm_image_next(image, len, &pos, &f) || f.detached || !f.len || f.len > RX_SPARE_ROOM ||
        cpvm_image_next(image, len, &pos, &more))
        return NULL;
    struct lp_msg *m = rx_spare[--n];
    atomic_store_explicit(&rx_nspares, n, memory_order_relaxed);
    struct lp_frag *fp = m->frag->link;
    /* As made (nothing else knows its id): else it is given back and the slow way taken. */
    m->flag &= ~LP_MM_SPARE;
    if (fp == m->frag || fp->link != m->frag || m->cfrag != fp || m->cpos != 0 ||
        !(m->flag & LP_MM_UPACK) || m->enc != pvmmydsig) {
        REAL(pvm_freebuf, m->mid);
        return NULL;
    }
    memcpy(fp->dat, (const char *)image + f.off, (size_t)f.len);
    fp->len = f.len;
    m->len = f.len;
    m->flag |= LP_MM_READY;
    return m;
}

/* The message's header fields from the image's. */
static void in_header(struct lp_msg *m, const void *image)
{
    m->ctx = cpvm_image_word(image, H_CTX);
    m->tag = cpvm_image_word(image, H_TAG);
    m->wid = cpvm_image_word(image, H_WID);
    m->crc = cpvm_image_word(image, H_CRC);
    m->src = cpvm_image_word(image, H_SRC);
    m->dst = cpvm_image_word(image, H_DST);
}

struct lp_msg *cpvm_in_message(const void *image, size_t len, char *dst[CPVM_DETACH_MAX],
                               int dlen[CPVM_DETACH_MAX], int *ndetached)
{
    *ndetached = 0;
    struct lp_msg *m = rx_spare_fill(image, len);
    if (m) {
        in_header(m, image);
        atomic_fetch_add_explicit(&cpvm_stats.recv_spares, 1, memory_order_relaxed);
        return m;
    }
    m = (struct lp_msg *)REAL(umbuf_new);
    if (!m) return NULL;
    in_header(m, image);
    m->len = 0;
    size_t pos = CPVM_HDR_BYTES;
    struct cpvm_frag f;
    while (cpvm_image_next(image, len, &pos, &f)) {
        if (!f.len) continue;
        struct lp_frag *fp = (struct lp_frag *)REAL(fr_new, f.len + headroom);
        if (!fp) {
            cpvm_in_discard(m);
            return NULL;
        }
        fp->dat += headroom;
        fp->len = f.len;
        if (f.detached) {
            dst[*ndetached] = fp->dat;
            dlen[(*ndetached)++] = f.len;
        } else {
            memcpy(fp->dat, (const char *)image + f.off, (size_t)f.len);
        }
        /* at the end of the list, before the master */
        fp->link = m->frag;
        fp->rlink = m->frag->rlink;
        m->frag->rlink->link = fp;
        m->frag->rlink = fp;
        m->len += f.len;
    }
    REAL(pmsg_setenc, (struct pmsg *)m, cpvm_image_word(image, H_ENC));
    m->flag |= LP_MM_ROUTED;
    return m;
}

void cpvm_in_discard(struct lp_msg *m)
{
    REAL(pvm_freebuf, m->mid);
}

/* ---- looking at the receive queue ---- */

extern struct lp_msg *pvmrxlist; /* its head: a master node */
extern int pvmmyctx;
bool cpvm_custom_match;

bool cpvm_queued(int tid, int tag)
{
    if (!pvmrxlist) return false;
    for (struct lp_msg *m = pvmrxlist->link; m != pvmrxlist; m = m->link)
        if (cpvm_custom_match || ((tid == -1 || tid == m->src) && (tag == -1 || tag == m->tag) &&
                                  (pvmmyctx == -1 || pvmmyctx == m->ctx)))
            return true;
    return false;
}

uint64_t cpvm_queue_signature(void)
{
    if (!pvmrxlist) return 0;
    uint64_t sig = 0;
    for (struct lp_msg *m = pvmrxlist->link; m != pvmrxlist; m = m->link)
        sig = sig * 31 + (uint64_t)(uintptr_t)m + (uint64_t)m->mid;
    return sig;
}

int cpvm_rbuf_mid(void)
{
    return pvmrbuf ? pvmrbuf->mid : 0;
}

int cpvm_current_context(void)
{
    return pvmmyctx;
}

bool cpvm_msg_routed(int mid)
{
    struct lp_msg *m = msg_of(mid);
    return m && (m->flag & LP_MM_ROUTED);
}
