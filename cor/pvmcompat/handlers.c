/*
 * The layer's own message handlers (its control messages on PVM's path), kept out of the
 * program's sight.
 *
 * libpvm3 keeps handlers in two tables: dhandles[], indexed by the id pvm_addmhf returns
 * (free ids on a list, reused last-freed first), and handles[], dense (a deleted entry is
 * replaced by the last one). The layer adds its handlers once, before the program's first
 * pvm call returns, and never deletes them, so the program's ids are the real ones less the
 * number of ours below, and its handles[] entries sit above ours as they would above
 * libpvm3's own: every id pvm_addmhf returns and pvm_delmhf takes is translated, and
 * pvmdisplaymhfinfo (libpvm3's dump of both tables, its free list and sizes, on stdout) is
 * captured and printed again without our rows, every id, index and count translated. A
 * program thus sees the ids, errors and dump it would see without libcorpvm.
 */
#define _GNU_SOURCE /* memmem, open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmsg.h"
#include "route.h"

#define OWN_MAX 4
static int own_id[OWN_MAX]; /* our handlers' ids, ascending */
static int n_own;

int cpvm_addmhf_own(int src, int tag, int ctx, int (*fn)(int))
{
    if (n_own == OWN_MAX) return PvmSysErr; /* (a programming error: raise OWN_MAX) */
    int id = REAL(pvm_addmhf, src, tag, ctx, fn);
    if (id < 0) return id;
    int k = n_own++;
    for (; k > 0 && own_id[k - 1] > id; k--)
        own_id[k] = own_id[k - 1];
    own_id[k] = id;
    return id;
}

/* How many of `set` (ascending, n entries) are below `v`. */
static int below(const int *set, int n, int v)
{
    int c = 0;
    while (c < n && set[c] < v)
        c++;
    return c;
}

static bool in_set(const int *set, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (set[i] == v) return true;
    return false;
}

static int user_id(int real)
{
    return real < 0 ? real : real - below(own_id, n_own, real);
}

static int real_id(int user)
{
    int r = user;
    for (int i = 0; i < n_own; i++) /* ascending: each of ours at or below shifts it up */
        if (own_id[i] <= r) r++;
    return r;
}

typedef int (*handler_fn)(int);

CPVM_API int pvm_addmhf(int src, int tag, int ctx, handler_fn fn)
{
    if (CPVM_PASS) return cpvm_real.pvm_addmhf(src, tag, ctx, fn);
    cpvm_enter();
    int id = user_id(REAL(pvm_addmhf, src, tag, ctx, fn));
    if (id >= 0) cpvm_user_handlers++; /* (routed messages then go through mesg_input) */
    cpvm_leave();
    return id;
}

CPVM_API int pvm_delmhf(int id)
{
    if (CPVM_PASS) return cpvm_real.pvm_delmhf(id);
    cpvm_enter();
    int rc = REAL(pvm_delmhf, id < 0 ? id : real_id(id));
    if (rc >= 0 && cpvm_user_handlers > 0) cpvm_user_handlers--;
    cpvm_leave();
    return rc;
}

/* ---- the dump ---------------------------------------------------------------------------- */

/* One row of the dump: dhandles[i] (id, handle index) beside handles[i] (id, then the rest
 * of the line as printed: source, context, tag). */
struct row {
    int i, d_id, d_handle, h_id;
    const char *tail; /* into the captured text, up to the line's end */
    size_t tail_len;
};

#define ROWS_MAX 4096

static const char *line_end(const char *s, const char *end)
{
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    return nl ? nl + 1 : end;
}

/* Parses a row line ("... dhandles[ 9].mhid =  9  .handle =  9     handles[ 9].mhid =  9  .header
 * ..."); its prefix length in *pre. false if the line is not one. */
static bool parse_row(const char *s, const char *e, struct row *r, size_t *pre)
{
    char buf[512];
    size_t n = (size_t)(e - s);
    if (n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *at = strstr(buf, "dhandles[");
    int used = 0;
    if (!at || sscanf(at, "dhandles[%d].mhid =%d .handle =%d handles[%*d].mhid =%d%n", &r->i,
                      &r->d_id, &r->d_handle, &r->h_id, &used) != 4)
        return false;
    *pre = (size_t)(at - buf);
    r->tail = s + (at - buf) + used;
    r->tail_len = n - (size_t)(at - buf) - (size_t)used;
    return true;
}

/* The header line's three numbers ("ndhandles = N\tnhandles = M\tfl_dhandles = F"). */
static bool print_header(FILE *out, const char *s, const char *e)
{
    const char *at = memmem(s, (size_t)(e - s), "ndhandles = ", 12);
    int nd, nh, fl;
    if (!at || sscanf(at, "ndhandles = %d nhandles = %d fl_dhandles = %d", &nd, &nh, &fl) != 3)
        return false;
    fprintf(out, "%.*sndhandles = %d\tnhandles = %d\tfl_dhandles = %d\n", (int)(at - s), s,
            nd - n_own, nh - n_own, user_id(fl));
    return true;
}

/* The free list line ("... head <- 10 4 -< tail"): its ids translated. */
static bool print_free_list(FILE *out, const char *s, const char *e)
{
    const char *head = memmem(s, (size_t)(e - s), "head <- ", 8);
    const char *tail = head ? memmem(head, (size_t)(e - head), "-<", 2) : NULL;
    if (!tail) return false;
    fprintf(out, "%.*s", (int)(head + 8 - s), s);
    for (const char *p = head + 8; p < tail;) {
        char *q;
        long v = strtol(p, &q, 10);
        if (q == p) break;
        fprintf(out, "%d ", user_id((int)v));
        p = q;
        while (p < tail && *p == ' ')
            p++;
    }
    fwrite(tail, 1, (size_t)(e - tail), out);
    return true;
}

/* Prints the rows without ours: dhandles[] less our ids, handles[] less our entries (the
 * handle indices our ids name), every id and index renumbered. */
static void print_rows(FILE *out, const char *prefix, size_t pre, const struct row *rows, int n)
{
    int own_h[OWN_MAX], nh = 0;
    for (int k = 0; k < n; k++)
        if (in_set(own_id, n_own, rows[k].i) && nh < OWN_MAX) own_h[nh++] = rows[k].d_handle;
    for (int a = 1; a < nh; a++) /* ascending */
        for (int b = a; b > 0 && own_h[b - 1] > own_h[b]; b--) {
            int t = own_h[b];
            own_h[b] = own_h[b - 1];
            own_h[b - 1] = t;
        }
    int d = 0, h = 0, out_i = 0;
    for (;;) {
        while (d < n && in_set(own_id, n_own, rows[d].i))
            d++;
        while (h < n && in_set(own_h, nh, rows[h].i))
            h++;
        if (d >= n || h >= n) break;
        const struct row *rd = &rows[d], *rh = &rows[h];
        int dh = rd->d_handle < 0 ? rd->d_handle : rd->d_handle - below(own_h, nh, rd->d_handle);
        fprintf(out, "%.*sdhandles[%2d].mhid = %2d  .handle = %2d     handles[%2d].mhid = %2d%.*s",
                (int)pre, prefix, out_i, user_id(rd->d_id), dh, out_i, user_id(rh->h_id),
                (int)rh->tail_len, rh->tail);
        out_i++, d++, h++;
    }
}

/* Prints the captured dump `text` again without the layer's handlers. Lines that are not the
 * dump's (another thread's output meanwhile) pass unchanged; a dump it cannot read whole
 * passes unchanged too. */
static void print_dump(FILE *out, const char *text, size_t len)
{
    const char *end = text + len;
    static struct row rows[ROWS_MAX];
    int n = 0;
    size_t pre = 0;
    const char *prefix = NULL, *first = NULL, *after = NULL;
    for (const char *s = text; s < end; s = line_end(s, end)) {
        struct row r;
        size_t p;
        if (!parse_row(s, line_end(s, end), &r, &p)) continue;
        if (n == ROWS_MAX || r.i != n) { /* not the table as expected: leave it alone */
            fwrite(text, 1, len, out);
            return;
        }
        if (!first) first = s, prefix = s, pre = p;
        rows[n++] = r;
        after = line_end(s, end);
    }
    for (const char *s = text; s < end;) {
        const char *e = line_end(s, end);
        if (s == first) {
            print_rows(out, prefix, pre, rows, n);
            for (; s < after; s = line_end(s, end)) { /* others' lines among the rows */
                struct row r;
                size_t p;
                const char *le = line_end(s, end);
                if (!parse_row(s, le, &r, &p)) fwrite(s, 1, (size_t)(le - s), out);
            }
            continue;
        }
        if (!print_header(out, s, e) && !print_free_list(out, s, e))
            fwrite(s, 1, (size_t)(e - s), out);
        s = e;
    }
}

CPVM_API int pvmdisplaymhfinfo(const char *who, const char *message, int tid)
{
    if (CPVM_PASS) return cpvm_real.pvmdisplaymhfinfo(who, message, tid);
    cpvm_enter();
    char *text = NULL;
    size_t len = 0;
    FILE *mem = n_own ? open_memstream(&text, &len) : NULL;
    int rc;
    if (!mem) {
        rc = REAL(pvmdisplaymhfinfo, who, message, tid);
    } else {
        /* libpvm3 prints to stdout (printf, puts): there, for the time of the call. */
        FILE *out = stdout;
        fflush(out);
        stdout = mem;
        rc = REAL(pvmdisplaymhfinfo, who, message, tid);
        stdout = out;
        fclose(mem);
        print_dump(out, text, len);
        fflush(out);
    }
    free(text);
    cpvm_leave();
    return rc;
}
