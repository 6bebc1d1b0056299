/*
 * cor-bench --plot FILE.png: the rows of this run drawn by gnuplot. Domain 0 keeps every row it
 * prints; at the end it writes a gnuplot script (the rows inline as data blocks) to a gnuplot
 * process through a pipe. Size modes give two panels by message size: time per message (or
 * messages/s for the rate modes) and MB/s; multiport and multitask give the aggregate rate by
 * port or pair count, one curve per size. An axis is logarithmic where its values span a decade
 * or more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cor/cor.h"

#define PLOT_MAX_ROWS 4096
#define SIZE_TICS "'1' 1, '16' 16, '256' 256, '4K' 4096, '64K' 65536, '1M' 1048576, '16M' 16777216"

struct plot_row {
    char route[32], mode[32];
    size_t bytes;
    int ports, pairs;
    double one_way_us, mbps;
};

static struct plot_row rows[PLOT_MAX_ROWS];
static int nrows;

int bench_plot_available(void)
{
    const char *path = getenv("PATH");
    char buf[4096], dir[4096];
    if (!path || snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return 0;
    for (char *save, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(dir, sizeof dir, "%s/gnuplot", *d ? d : ".");
        if (access(dir, X_OK) == 0) return 1;
    }
    return 0;
}

void bench_plot_keep(const struct bench_row *r)
{
    if (nrows == PLOT_MAX_ROWS) return;
    struct plot_row *p = &rows[nrows++];
    snprintf(p->route, sizeof p->route, "%s", r->route);
    snprintf(p->mode, sizeof p->mode, "%s", r->mode);
    p->bytes = r->bytes;
    p->ports = r->ports;
    p->pairs = r->pairs;
    p->one_way_us = r->one_way_us;
    p->mbps = r->mbps;
}

/* A curve: the rows with the same route and mode, and by count the same size, by size the same
 * port and pair counts (a mode may measure several). */
static int same_curve(const struct plot_row *a, const struct plot_row *b, int by_count)
{
    return !strcmp(a->route, b->route) && !strcmp(a->mode, b->mode) &&
           (by_count ? a->bytes == b->bytes : a->ports == b->ports && a->pairs == b->pairs);
}

static double row_x(const struct plot_row *r, int multiport, int multitask)
{
    return multiport ? r->ports : multitask ? r->pairs : (double)r->bytes;
}

/* 1 when the positive values of a column span a decade or more. */
static int spans_decades(int col, int multiport, int multitask)
{
    double lo = 0, hi = 0;
    for (int i = 0; i < nrows; i++) {
        double v = col == 0   ? row_x(&rows[i], multiport, multitask)
                   : col == 1 ? rows[i].one_way_us
                              : rows[i].mbps;
        if (v <= 0) continue;
        lo = lo == 0 || v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    return lo > 0 && hi / lo >= 10;
}

/* Data blocks $c0, $c1 ... one per curve, and their titles; rows with x <= 0 are left out on a
 * log x axis. Returns the number of curves. */
static int write_blocks(FILE *g, int by_count, int multiport, int multitask, int logx,
                        char titles[][128], int max)
{
    int ncurves = 0;
    int done[PLOT_MAX_ROWS] = {0};
    for (int i = 0; i < nrows && ncurves < max; i++) {
        if (done[i]) continue;
        if (by_count)
            snprintf(titles[ncurves], sizeof titles[ncurves], "%.31s %.31s, %zu B", rows[i].route,
                     rows[i].mode, rows[i].bytes);
        else if (rows[i].pairs > 1 || rows[i].ports > 1)
            snprintf(titles[ncurves], sizeof titles[ncurves], "%.31s %.31s, %d port(s), %d pair(s)",
                     rows[i].route, rows[i].mode, rows[i].ports, rows[i].pairs);
        else
            snprintf(titles[ncurves], sizeof titles[ncurves], "%.31s %.31s", rows[i].route,
                     rows[i].mode);
        fprintf(g, "$c%d << EOD\n", ncurves);
        for (int j = i; j < nrows; j++) {
            if (done[j] || !same_curve(&rows[i], &rows[j], by_count)) continue;
            done[j] = 1;
            double x = row_x(&rows[j], multiport, multitask);
            if (logx && x <= 0) continue;
            double per_s = rows[j].one_way_us > 0 ? 1e6 / rows[j].one_way_us : 0;
            fprintf(g, "%.17g %.6g %.6g %.6g\n", x, rows[j].one_way_us, rows[j].mbps, per_s);
        }
        fprintf(g, "EOD\n");
        ncurves++;
    }
    return ncurves;
}

/* gnuplot strings in single quotes: a quote is doubled. */
static void put_quoted(FILE *g, const char *s)
{
    fputc('\'', g);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', g);
        fputc(*s, g);
    }
    fputc('\'', g);
}

static void plot_curves(FILE *g, int ncurves, char titles[][128], int column)
{
    fprintf(g, "plot ");
    for (int c = 0; c < ncurves; c++) {
        fprintf(g, "%s$c%d using 1:%d with linespoints title ", c ? ", " : "", c, column);
        put_quoted(g, titles[c]);
    }
    fprintf(g, "\n");
}

static void write_script(FILE *g, const struct bench *b, const char *png)
{
    int multiport = !strcmp(b->mode, "multiport"), multitask = !strcmp(b->mode, "multitask");
    int by_count = multiport || multitask;
    int rate = !strncmp(b->mode, "rate", 4);
    int logx = !multiport && spans_decades(0, multiport, multitask);
    char titles[64][128];
    int ncurves = write_blocks(g, by_count, multiport, multitask, logx, titles, 64);

    fprintf(g,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size %d,560 noenhanced font ',10'\n"
            "} else {\n"
            "  set terminal png size %d,560 noenhanced\n"
            "}\n",
            by_count ? 760 : 1300, by_count ? 760 : 1300);
    fprintf(g, "set output ");
    put_quoted(g, png);
    fprintf(g, "\nset grid\nset key below box\nset bmargin 6\n");
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    if (by_count) {
        fprintf(g, "set title 'cor-bench %s, %s route, %s: aggregate one-way rate'\n", b->mode,
                b->route, host);
        fprintf(g, "set xlabel '%s'\nset ylabel 'aggregate rate (MB/s, 10^6 B/s)'\n",
                multiport ? "hard ports (one task pair each)" : "task pairs per domain");
        if (multitask)
            fprintf(g, "set logscale x 2\nset xtics (1, 2, 4, 8, 16)\n");
        else
            fprintf(g, "set xtics 1\n");
        if (spans_decades(2, multiport, multitask)) fprintf(g, "set logscale y\n");
        plot_curves(g, ncurves, titles, 3);
        return;
    }
    fprintf(g, "set multiplot layout 1,2 title 'cor-bench %s, %s route, %s%s'\n", b->mode, b->route,
            host, logx ? " (0 B left out of the log size axis)" : "");
    fprintf(g, "set xlabel 'message size (bytes; K = 1024)'\n");
    if (logx) fprintf(g, "set logscale x 2\nset xtics (%s)\n", SIZE_TICS);
    if (rate) {
        fprintf(g, "set ylabel 'messages per second (one way)'\n");
        fprintf(g, "set logscale y\n");
        plot_curves(g, ncurves, titles, 4);
    } else {
        fprintf(g, "set ylabel 'time per message (us; pingpong: half the round trip)'\n");
        if (spans_decades(1, multiport, multitask)) fprintf(g, "set logscale y\n");
        plot_curves(g, ncurves, titles, 2);
    }
    fprintf(g, "unset logscale y\nset ylabel 'one-way rate (MB/s, 10^6 B/s)'\n");
    if (spans_decades(2, multiport, multitask)) fprintf(g, "set logscale y\n");
    plot_curves(g, ncurves, titles, 3);
    fprintf(g, "unset multiplot\n");
}

int bench_plot_write(const struct bench *b, const char *png)
{
    if (nrows == 0) {
        fprintf(stderr, "cor-bench: --plot: no rows to draw\n");
        return COR_EINVAL;
    }
    /* gnuplot's own messages go to our stderr; its stdout is not used */
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        fprintf(stderr, "cor-bench: --plot: cannot start gnuplot: %s\n", strerror(errno));
        return COR_EIO;
    }
    write_script(g, b, png);
    int status = pclose(g);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "cor-bench: --plot: gnuplot failed (status %d) drawing %s\n", status, png);
        return COR_EIO;
    }
    return COR_OK;
}
