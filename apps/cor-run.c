/*
 * cor-run: starts the N domains of a CoR session and supervises them.
 *
 * It makes a private rendezvous (a UNIX socket, mode 0600, in a fresh 0700 directory), starts
 * the domains with COR_* in their environment, answers their bootstrap (address table,
 * barriers; the line protocol is described in cor/core/bootstrap.c), forwards SIGINT, SIGTERM
 * and SIGHUP, and watches both the processes and their connections. A domain that exits or
 * drops its connection before saying FINISH has died: cor-run names it and how, tells the
 * survivors (their operations toward it then fail with COR_EPEERDEAD), gives them a grace
 * period to leave, then stops them with SIGTERM and SIGKILL. Every wait is bounded.
 *
 * Single-threaded: one poll() loop; signals arrive through a self-pipe. Everything read from
 * the socket is untrusted (lengths, ranks, duplicates and order are checked).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_ 1024      /* protocol line limit, newline included */
#define MAX_DOMAINS 4096    /* COR_MAX_DOMAINS */
#define MAX_ADDRS 64        /* addresses one domain may publish */
#define MAX_ADDR_HEX 510    /* 2 * (COR_ADDR_MAX - 1) */
#define OUT_MAX (64u << 20) /* a domain that does not read gets disconnected */
#define LOST_WAIT_S 0.5     /* after a connection drops, wait this long for the exit */
#define ANON_TIMEOUT_S 10.0 /* a connection must say HELLO within this */
#define KILL_WAIT_S 2.0     /* from SIGTERM to SIGKILL during teardown */
#define REAP_WAIT_S 5.0     /* from SIGKILL to giving up on a child */

static const char *progname = "cor-run";
static int verbose;

struct addr {
    char route[32];
    int port;
    char hex[MAX_ADDR_HEX + 2];
};

enum dstate { D_NEW, D_RUNNING, D_REAPED };

struct domain {
    int rank;
    pid_t pid;
    enum dstate state;
    int wstatus; /* valid when REAPED */
    int conn;    /* index in conns[], -1 if none */
    int joined;  /* said HELLO */
    int published, naddr;
    struct addr *addrs; /* [MAX_ADDRS] once it publishes */
    int finished;       /* said FINISH */
    int dead;           /* declared dead (reported, survivors told) */
    int killed_by_us;   /* teardown signaled it: its status is not the cause */
    unsigned barrier;   /* last barrier sequence entered */
    double lost_at;     /* >0: connection dropped before FINISH, waiting for the exit */
};

struct conn {
    int fd;
    int rank; /* -1 until HELLO */
    double opened;
    char in[2 * LINE_MAX_];
    size_t in_len;
    char *out;
    size_t out_len, out_off, out_cap;
    int closing; /* close once out is flushed */
};

static struct {
    int n, ports, nhosts;
    const char *route, *bind, *agent;
    char **hosts;
    double grace, start_timeout;
    uint64_t cookie;
    char dir[PATH_MAX], sock[PATH_MAX];
    int lfd, sigr, sigw;
    struct domain *dom;
    struct conn *conns;
    int nconns, conns_cap;
    double started;
    int table_sent;
    unsigned released;
    int any_joined, ndead, startup_failed, user_signal;
    int stage; /* 0 running, 1 grace after a death, 2 SIGTERM sent, 3 SIGKILL sent */
    double stage_deadline;
} g;

/* ---- utilities -------------------------------------------------------------------------- */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", progname, msg);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (!s || !*s) return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0) || v > 86400) return -1;
    *out = v;
    return 0;
}

static int route_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 31) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

static int hex_ok(const char *h)
{
    if (strcmp(h, "-") == 0) return 1;
    size_t n = strlen(h);
    if (n == 0 || n % 2 || n > MAX_ADDR_HEX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f') ||
              (h[i] >= 'A' && h[i] <= 'F')))
            return 0;
    return 1;
}

static void describe_status(int ws, char *buf, size_t len)
{
    if (WIFEXITED(ws)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(ws));
    } else if (WIFSIGNALED(ws)) {
        int sig = WTERMSIG(ws);
        const char *abbrev = sigabbrev_np(sig);
        snprintf(buf, len, "killed by signal %d (%s%s)%s", sig, abbrev ? "SIG" : "",
                 abbrev ? abbrev : "unknown", WCOREDUMP(ws) ? ", core dumped" : "");
    } else {
        snprintf(buf, len, "ended with wait status 0x%x", ws);
    }
}

static int status_code(int ws)
{
    if (WIFEXITED(ws)) return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws)) return 128 + WTERMSIG(ws);
    return 1;
}

/* ---- signals ------------------------------------------------------------------------------ */

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    if (write(g.sigw, &c, 1) < 0) {
        /* pipe full: a SIGCHLD is already pending, nothing is lost */
    }
    errno = saved;
}

/* cor-run itself crashed (or was sent a signal that crashes): the rendezvous goes (unlink
 * and rmdir are async-signal-safe), then the signal does what it would have done. */
static void on_fatal_signal(int sig)
{
    if (g.sock[0]) unlink(g.sock);
    if (g.dir[0]) rmdir(g.dir);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Signals passed on to the domains (all that end a process by default and can be caught,
 * but those that mean a crash); cor-run then exits with them, its rendezvous removed. */
static const int forwarded[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,   SIGUSR1, SIGUSR2,
                                SIGALRM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF};
static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP};

static int setup_signals(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
        say("pipe: %s", strerror(errno));
        return -1;
    }
    g.sigr = p[0];
    g.sigw = p[1];
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
        sigaction(forwarded[i], &sa, NULL);
    struct sigaction fa = {.sa_handler = on_fatal_signal, .sa_flags = SA_RESETHAND};
    sigemptyset(&fa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
        sigaction(fatal[i], &fa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static void signal_live(int sig, int mark)
{
    for (int r = 0; r < g.n; r++) {
        struct domain *d = &g.dom[r];
        if (d->pid > 0 && d->state == D_RUNNING) {
            kill(d->pid, sig);
            if (mark) d->killed_by_us = 1;
        }
    }
}

/* ---- connections -------------------------------------------------------------------------- */

static void conn_close(int i);

static void conn_write(int i, const char *text, size_t len)
{
    struct conn *c = &g.conns[i];
    if (c->fd < 0 || c->closing) return;
    if (c->out_len - c->out_off + len > OUT_MAX) {
        say("a domain does not read its bootstrap connection; dropping it");
        c->closing = 1;
        c->out_len = c->out_off = 0;
        return;
    }
    if (c->out_len + len > c->out_cap && c->out) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    if (c->out_len + len > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + len)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) {
            say("out of memory");
            c->closing = 1;
            return;
        }
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, text, len);
    c->out_len += len;
}

static void conn_printf(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void conn_printf(int i, const char *fmt, ...)
{
    char line[LINE_MAX_ + 64];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len > 0 && (size_t)len < sizeof line) conn_write(i, line, (size_t)len);
}

/* Writes what the socket takes now; returns -1 when the connection broke. */
static int conn_flush(int i)
{
    struct conn *c = &g.conns[i];
    while (c->out_off < c->out_len) {
        ssize_t k =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (k <= 0) return -1;
        c->out_off += (size_t)k;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

static void conn_send_domain(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void conn_send_domain(int rank, const char *fmt, ...)
{
    struct domain *d = &g.dom[rank];
    if (d->conn < 0 || d->finished) return;
    char line[LINE_MAX_ + 64];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len > 0 && (size_t)len < sizeof line) conn_write(d->conn, line, (size_t)len);
}

/* ---- deaths and teardown ------------------------------------------------------------------- */

static void begin_teardown(void)
{
    if (g.stage == 0) {
        g.stage = 1;
        g.stage_deadline = now_s() + g.grace;
        int live = 0;
        for (int r = 0; r < g.n; r++)
            live += g.dom[r].state == D_RUNNING && !g.dom[r].dead;
        if (live) say("stopping the other domains (grace period %.1f s)", g.grace);
    }
}

/* Declares domain r dead: reports it, tells the survivors, starts the teardown. */
static void declare_dead(int r, const char *why)
{
    struct domain *d = &g.dom[r];
    if (d->dead || d->finished) return;
    d->dead = 1;
    g.ndead++;
    if (d->pid > 0)
        say("domain %d (pid %ld) %s", r, (long)d->pid, why);
    else
        say("domain %d %s", r, why);
    for (int s = 0; s < g.n; s++)
        if (s != r && !g.dom[s].dead) conn_send_domain(s, "DEAD %d %s\n", r, why);
    if (d->state == D_RUNNING && d->pid > 0) {
        /* Alive but cut off from the session (no connection, never joined): stop it now;
         * the teardown escalates to SIGKILL if needed. */
        kill(d->pid, SIGTERM);
        d->killed_by_us = 1;
    }
    begin_teardown();
}

/* A domain's process ended. Its connection was drained by the caller. */
static void domain_exited(struct domain *d)
{
    char why[160];
    describe_status(d->wstatus, why, sizeof why);
    if (d->finished || d->dead) {
        if (verbose || (!d->killed_by_us && status_code(d->wstatus) != 0))
            say("domain %d (pid %ld) %s%s", d->rank, (long)d->pid, why,
                d->killed_by_us ? " (stopped by cor-run)" : "");
        return;
    }
    if (d->killed_by_us && g.stage >= 2) {
        d->dead = 1; /* a survivor stopped by the teardown, not a new death */
        say("domain %d (pid %ld) stopped by cor-run: %s", d->rank, (long)d->pid, why);
        return;
    }
    if (!d->joined && status_code(d->wstatus) == 0 && !g.any_joined) {
        /* Not a CoR program (or not yet): nobody waits for it. */
        if (verbose)
            say("domain %d (pid %ld) %s without joining the session", d->rank, (long)d->pid, why);
        return;
    }
    char full[200];
    snprintf(full, sizeof full, "%s %s", why,
             d->joined ? "before finishing" : "before joining the session");
    if (WIFSIGNALED(d->wstatus)) snprintf(full, sizeof full, "%s", why);
    declare_dead(d->rank, full);
}

static void check_unjoined_exits(void)
{
    /* Once the session is a CoR session, an earlier quiet exit without joining is a death. */
    for (int r = 0; r < g.n; r++) {
        struct domain *d = &g.dom[r];
        if (d->state == D_REAPED && !d->joined && !d->dead && !d->finished) {
            char why[160];
            describe_status(d->wstatus, why, sizeof why);
            char full[200];
            snprintf(full, sizeof full, "%s before joining the session", why);
            declare_dead(r, full);
        }
    }
}

/* ---- the protocol ---------------------------------------------------------------------------- */

static void send_table(void)
{
    int n = g.dom[0].naddr;
    for (int r = 1; r < g.n; r++) {
        if (g.dom[r].naddr != n) {
            say("domains published different numbers of addresses (domain 0: %d, domain %d: "
                "%d)",
                n, r, g.dom[r].naddr);
            for (int s = 0; s < g.n; s++)
                conn_send_domain(s, "ERR domains published different numbers of addresses\n");
            g.startup_failed = 1;
            begin_teardown();
            return;
        }
    }
    g.table_sent = 1;
    for (int s = 0; s < g.n; s++) {
        struct domain *to = &g.dom[s];
        if (to->conn < 0 || to->finished) continue;
        conn_printf(to->conn, "TABLE %d %d\n", g.n, n);
        for (int r = 0; r < g.n; r++)
            for (int k = 0; k < n; k++) {
                struct addr *a = &g.dom[r].addrs[k];
                conn_printf(to->conn, "A %d %d %s %d %s\n", r, k, a->route, a->port, a->hex);
            }
        conn_printf(to->conn, "END\n");
    }
    if (verbose) say("address table sent (%d domains x %d addresses)", g.n, n);
}

static void try_release(void)
{
    for (;;) {
        unsigned next = g.released + 1;
        int waiting = 0, gone = -1;
        for (int r = 0; r < g.n; r++) {
            if (g.dom[r].barrier >= next && !g.dom[r].finished)
                waiting = 1;
            else if (g.dom[r].barrier < next && g.dom[r].finished)
                gone = r;
        }
        if (waiting && gone >= 0) {
            /* A domain that finished will never enter: fail the barrier, do not hang it. */
            for (int r = 0; r < g.n; r++)
                if (g.dom[r].barrier >= next)
                    conn_send_domain(r,
                                     "ERR barrier %u cannot complete: domain %d finished "
                                     "without entering it\n",
                                     next, gone);
            return;
        }
        for (int r = 0; r < g.n; r++)
            if (g.dom[r].barrier < next) return;
        g.released = next;
        for (int r = 0; r < g.n; r++)
            conn_send_domain(r, "RELEASE %u\n", next);
    }
}

static int split_words(char *line, char **w, int max)
{
    int n = 0;
    char *p = line;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        if (n == max) return max + 1; /* too many words */
        w[n++] = p;
        while (*p && *p != ' ')
            p++;
        if (*p) *p++ = 0;
    }
    return n;
}

static int check_peer_uid(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid != getuid()) {
        say("refused a bootstrap connection from uid %ld", (long)cr.uid);
        return -1;
    }
    return 0;
}

static void remove_rendezvous(void);

static int all_joined(void)
{
    for (int r = 0; r < g.n; r++)
        if (!g.dom[r].joined) return 0;
    return 1;
}

static int handle_hello(int ci, char **w, int nw)
{
    struct conn *c = &g.conns[ci];
    long ver, rank, size, pid;
    if (nw != 6 || parse_int(w[1], 1, 1, &ver) || parse_int(w[2], 0, MAX_DOMAINS - 1, &rank) ||
        parse_int(w[3], 1, MAX_DOMAINS, &size) || parse_int(w[5], 1, LONG_MAX, &pid)) {
        conn_printf(ci, "ERR malformed HELLO\n");
        return -1;
    }
    char cookie[17];
    snprintf(cookie, sizeof cookie, "%016llx", (unsigned long long)g.cookie);
    if (strcasecmp(w[4], cookie) != 0) {
        say("refused a bootstrap connection with a wrong session cookie");
        conn_printf(ci, "ERR wrong session\n");
        return -1;
    }
    if (size != g.n || rank >= g.n) {
        say("refused a HELLO for rank %ld of %ld (this session has %d domains)", rank, size, g.n);
        conn_printf(ci, "ERR rank or size does not match the session\n");
        return -1;
    }
    struct domain *d = &g.dom[rank];
    if (d->joined || d->dead || d->conn >= 0) {
        say("refused a second HELLO for domain %ld", rank);
        conn_printf(ci, "ERR domain %ld already joined\n", rank);
        return -1;
    }
    if (verbose && !g.agent && pid != d->pid)
        say("domain %ld says pid %ld, started as pid %ld", rank, pid, (long)d->pid);
    c->rank = (int)rank;
    d->conn = ci;
    d->joined = 1;
    g.any_joined = 1;
    conn_printf(ci, "WELCOME\n");
    if (verbose) say("domain %ld (pid %ld) joined", rank, pid);
    if (all_joined())
        remove_rendezvous(); /* nobody connects any more: even kill -9 leaves nothing now */
    check_unjoined_exits();
    return 0;
}

/* Handles one line from connection ci; returns -1 to drop the connection. */
static int handle_line(int ci, char *line)
{
    struct conn *c = &g.conns[ci];
    char *w[8];
    int nw = split_words(line, w, 7);
    if (nw < 1 || nw > 7) return -1;
    if (c->rank < 0) return strcmp(w[0], "HELLO") == 0 ? handle_hello(ci, w, nw) : -1;
    struct domain *d = &g.dom[c->rank];
    long v1, v2;
    if (d->finished) return -1; /* nothing may follow FINISH */
    if (strcmp(w[0], "ADDR") == 0 && nw == 5 && !d->published) {
        if (parse_int(w[1], 0, MAX_ADDRS - 1, &v1) || v1 != d->naddr || !route_name_ok(w[2]) ||
            parse_int(w[3], -1000000, 1000000, &v2) || !hex_ok(w[4]))
            return -1;
        if (!d->addrs && !(d->addrs = calloc(MAX_ADDRS, sizeof *d->addrs))) return -1;
        struct addr *a = &d->addrs[d->naddr++];
        snprintf(a->route, sizeof a->route, "%s", w[2]);
        a->port = (int)v2;
        snprintf(a->hex, sizeof a->hex, "%s", w[4]);
        return 0;
    }
    if (strcmp(w[0], "PUB") == 0 && nw == 2 && !d->published) {
        if (parse_int(w[1], 1, MAX_ADDRS, &v1) || v1 != d->naddr) return -1;
        d->published = 1;
        int all = 1;
        for (int r = 0; r < g.n; r++)
            all &= g.dom[r].published;
        if (all && !g.table_sent) send_table();
        return 0;
    }
    if (strcmp(w[0], "BARRIER") == 0 && nw == 2) {
        if (parse_int(w[1], 1, INT_MAX, &v1) || (unsigned)v1 != d->barrier + 1) return -1;
        d->barrier = (unsigned)v1;
        try_release();
        return 0;
    }
    if (strcmp(w[0], "LOST") == 0 && nw == 2) {
        /* d's routes gave a peer up (silent for their dead time: stopped or wedged): the
         * session loses it, or the others' barriers would wait for it as long as it lives */
        if (parse_int(w[1], 0, g.n - 1, &v1) || v1 == d->rank) return -1;
        char why[96];
        snprintf(why, sizeof why, "given up by domain %d (its routes heard nothing from it)",
                 d->rank);
        declare_dead((int)v1, why);
        return 0;
    }
    if (strcmp(w[0], "FINISH") == 0 && nw == 1) {
        if (!d->published && !g.table_sent) /* the others' exchange cannot complete */
            declare_dead(d->rank, "left the session before publishing its addresses");
        d->finished = 1;
        conn_printf(ci, "BYE\n");
        if (verbose) say("domain %d finished", d->rank);
        try_release();
        return 0;
    }
    return -1;
}

/* Handles the complete lines in connection ci's input buffer and keeps a partial last line.
 * Returns 0, -1 to drop the connection, or -2 to drop it after flushing what was written to it
 * (an ERR). No socket I/O: conn_read feeds it, and tests/proc/fuzz_corrun.c feeds it anything. */
static int conn_take_lines(int ci)
{
    struct conn *c = &g.conns[ci];
    size_t start = 0;
    char *nl;
    while ((nl = memchr(c->in + start, '\n', c->in_len - start)) != NULL) {
        size_t len = (size_t)(nl - (c->in + start));
        char line[LINE_MAX_];
        if (len + 1 > LINE_MAX_ || memchr(c->in + start, 0, len)) {
            say("bootstrap line too long or with a NUL byte from %s%d; dropping it",
                c->rank < 0 ? "unidentified connection " : "domain ", c->rank < 0 ? ci : c->rank);
            return -1;
        }
        memcpy(line, c->in + start, len);
        line[len] = 0;
        start += len + 1;
        if (handle_line(ci, line)) {
            say("protocol error from %s%d on the bootstrap socket; dropping it",
                c->rank < 0 ? "an unidentified connection " : "domain ",
                c->rank < 0 ? ci : c->rank);
            return -2;
        }
    }
    memmove(c->in, c->in + start, c->in_len - start);
    c->in_len -= start;
    if (c->in_len >= LINE_MAX_) {
        say("bootstrap line too long from %s%d; dropping it",
            c->rank < 0 ? "unidentified connection " : "domain ", c->rank < 0 ? ci : c->rank);
        return -1;
    }
    return 0;
}

/* Reads what is there (nonblocking); returns -1 at EOF, error or a protocol error. */
static int conn_read(int ci)
{
    struct conn *c = &g.conns[ci];
    for (;;) {
        ssize_t k = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (k <= 0) return -1;
        c->in_len += (size_t)k;
        int rc = conn_take_lines(ci);
        if (rc == -2) conn_flush(ci); /* let an ERR reach it */
        if (rc) return -1;
    }
}

static void conn_close(int ci)
{
    struct conn *c = &g.conns[ci];
    if (c->fd < 0) return;
    close(c->fd);
    c->fd = -1;
    c->in_len = 0; /* what it sent and nobody will read (a line too long, say) */
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = c->out_cap = 0;
    if (c->rank >= 0) {
        struct domain *d = &g.dom[c->rank];
        d->conn = -1;
        if (!d->finished && !d->dead && d->state == D_RUNNING)
            d->lost_at = now_s(); /* decided in check_timers: exit status or lost link */
    }
}

static void accept_conns(void)
{
    for (;;) {
        int fd = accept4(g.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        int open_anon = 0;
        for (int i = 0; i < g.nconns; i++)
            open_anon += g.conns[i].fd >= 0 && g.conns[i].rank < 0;
        if (open_anon > g.n + 16 || check_peer_uid(fd)) {
            close(fd);
            continue;
        }
        int slot = -1;
        for (int i = 0; i < g.nconns; i++)
            if (g.conns[i].fd < 0) {
                slot = i;
                break;
            }
        if (slot < 0) {
            if (g.nconns == g.conns_cap) {
                int cap = g.conns_cap ? 2 * g.conns_cap : 16;
                struct conn *p = realloc(g.conns, (size_t)cap * sizeof *p);
                if (!p) {
                    close(fd);
                    return;
                }
                g.conns = p;
                g.conns_cap = cap;
            }
            slot = g.nconns++;
        }
        struct conn *c = &g.conns[slot];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->rank = -1;
        c->opened = now_s();
    }
}

/* ---- starting domains ------------------------------------------------------------------------ */

/* Expands {rank}, {size}, {host} and {{ in s; returns NULL (after saying why) on error. */
static char *substitute(const char *s, int rank)
{
    size_t cap = strlen(s) * 2 + 256, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    while (*s) {
        char piece[512];
        const char *add = piece;
        if (s[0] == '{' && s[1] == '{') {
            add = "{";
            s += 2;
        } else if (strncmp(s, "{rank}", 6) == 0) {
            snprintf(piece, sizeof piece, "%d", rank);
            s += 6;
        } else if (strncmp(s, "{size}", 6) == 0) {
            snprintf(piece, sizeof piece, "%d", g.n);
            s += 6;
        } else if (strncmp(s, "{host}", 6) == 0) {
            add = g.nhosts ? g.hosts[rank % g.nhosts] : "localhost";
            s += 6;
        } else if (s[0] == '{') {
            say("--agent: unknown placeholder in '%s' (known: {rank} {size} {host} {{)", s);
            free(out);
            return NULL;
        } else {
            piece[0] = *s++;
            piece[1] = 0;
        }
        size_t k = strlen(add);
        if (len + k + 1 > cap) {
            cap = 2 * (len + k + 1);
            char *p = realloc(out, cap);
            if (!p) {
                free(out);
                return NULL;
            }
            out = p;
        }
        memcpy(out + len, add, k);
        len += k;
    }
    out[len] = 0;
    return out;
}

/* Splits an agent command into words: spaces separate, '...' and "..." group. */
static int split_command(char *s, char **w, int max)
{
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s) break;
        if (n == max) return -1;
        char *dst = s;
        w[n++] = dst;
        while (*s && *s != ' ' && *s != '\t') {
            if (*s == '\'' || *s == '"') {
                char q = *s++;
                while (*s && *s != q)
                    *dst++ = *s++;
                if (*s != q) return -1;
                s++;
            } else {
                *dst++ = *s++;
            }
        }
        if (*s) s++;
        *dst = 0;
    }
    return n;
}

#define NENV 7

static void make_env(int rank, char env[NENV][PATH_MAX + 16])
{
    snprintf(env[0], sizeof env[0], "COR_BOOT=%s", g.sock);
    snprintf(env[1], sizeof env[1], "COR_RANK=%d", rank);
    snprintf(env[2], sizeof env[2], "COR_SIZE=%d", g.n);
    snprintf(env[3], sizeof env[3], "COR_SESSION=%016llx", (unsigned long long)g.cookie);
    snprintf(env[4], sizeof env[4], "COR_ROUTE=%s", g.route);
    snprintf(env[5], sizeof env[5], "COR_PORTS=%d", g.ports);
    snprintf(env[6], sizeof env[6], "COR_BIND=%s", g.bind);
}

/* Starts domain `rank`; returns -1 (after saying why) when it could not be started. */
static int start_domain(int rank, char **prog_argv, int prog_argc)
{
    static char env[NENV][PATH_MAX + 16];
    make_env(rank, env);
    enum { MAXW = 64 };
    char *words[MAXW];
    int nw = 0;
    char *agent = NULL;
    if (g.agent) {
        agent = substitute(g.agent, rank);
        if (!agent) return -1;
        nw = split_command(agent, words, MAXW);
        if (nw <= 0) {
            say("--agent: cannot split '%s' into words (unbalanced quotes or more than %d)",
                g.agent, MAXW);
            free(agent);
            return -1;
        }
    }
    size_t argc = (size_t)nw + (g.agent ? 1 + NENV : 0) + (size_t)prog_argc + 1;
    char **argv = calloc(argc, sizeof *argv);
    if (!argv) {
        free(agent);
        return -1;
    }
    size_t k = 0;
    for (int i = 0; i < nw; i++)
        argv[k++] = words[i];
    if (g.agent) {
        /* The agent may not pass our environment on (ssh, sudo): say it on the command. */
        argv[k++] = "env";
        for (int i = 0; i < NENV; i++)
            argv[k++] = env[i];
    }
    for (int i = 0; i < prog_argc; i++)
        argv[k++] = prog_argv[i];
    argv[k] = NULL;

    int ep[2];
    if (pipe2(ep, O_CLOEXEC)) {
        say("pipe: %s", strerror(errno));
        free(argv);
        free(agent);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        say("cannot start domain %d: fork: %s", rank, strerror(errno));
        close(ep[0]);
        close(ep[1]);
        free(argv);
        free(agent);
        return -1;
    }
    if (pid == 0) {
        /* Child: cor-run is single-threaded, so setenv is safe here. */
        close(ep[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive cor-run */
        if (getppid() != parent) _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (rank > 0) {
            int nul = open("/dev/null", O_RDONLY);
            if (nul >= 0) {
                dup2(nul, 0);
                close(nul);
            }
        }
        for (int i = 0; i < NENV; i++)
            putenv(env[i]);
        execvp(argv[0], argv);
        int e = errno;
        if (write(ep[1], &e, sizeof e) < 0) {
            /* the parent sees a bare EOF and exit 127 */
        }
        _exit(127);
    }
    close(ep[1]);
    int e = 0;
    ssize_t got;
    do
        got = read(ep[0], &e, sizeof e);
    while (got < 0 && errno == EINTR);
    close(ep[0]);
    g.dom[rank].pid = pid;
    g.dom[rank].state = D_RUNNING;
    if (got == (ssize_t)sizeof e) {
        say("cannot start domain %d: %s: %s", rank, argv[0], strerror(e));
        free(argv);
        free(agent);
        return -1;
    }
    if (verbose) say("domain %d started as pid %ld", rank, (long)pid);
    free(argv);
    free(agent);
    return 0;
}

/* ---- the loop ----------------------------------------------------------------------------------
 */

static void reap(void)
{
    for (;;) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid <= 0) return;
        for (int r = 0; r < g.n; r++) {
            struct domain *d = &g.dom[r];
            if (d->pid != pid || d->state != D_RUNNING) continue;
            d->state = D_REAPED;
            d->wstatus = ws;
            /* The process is gone, so its connection holds all it ever wrote (FINISH...). */
            if (d->conn >= 0) {
                int ci = d->conn;
                conn_read(ci);
                conn_flush(ci);
                conn_close(ci);
            }
            d->lost_at = 0;
            domain_exited(d);
        }
    }
}

static void handle_signals(void)
{
    unsigned char buf[64];
    ssize_t k;
    while ((k = read(g.sigr, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < k; i++) {
            int sig = buf[i];
            if (sig == SIGCHLD) continue;
            g.user_signal = sig;
            if (g.stage >= 2) {
                say("got %s again: killing the domains", sigabbrev_np(sig));
                signal_live(SIGKILL, 0);
                g.stage = 3;
                g.stage_deadline = now_s() + REAP_WAIT_S;
            } else {
                say("got SIG%s: passing it to the domains", sigabbrev_np(sig));
                signal_live(sig, 0);
                g.stage = 2;
                g.stage_deadline = now_s() + g.grace + KILL_WAIT_S;
            }
        }
    }
    reap();
}

static int live_domains(void)
{
    int live = 0;
    for (int r = 0; r < g.n; r++)
        live += g.dom[r].state == D_RUNNING;
    return live;
}

static void check_timers(void)
{
    double t = now_s();
    for (int r = 0; r < g.n; r++) {
        struct domain *d = &g.dom[r];
        if (d->lost_at > 0 && t - d->lost_at >= LOST_WAIT_S) {
            d->lost_at = 0;
            if (d->state == D_RUNNING)
                declare_dead(r, "closed its bootstrap connection before finishing (still "
                                "running)");
        }
    }
    for (int i = 0; i < g.nconns; i++)
        if (g.conns[i].fd >= 0 && g.conns[i].rank < 0 && t - g.conns[i].opened > ANON_TIMEOUT_S)
            conn_close(i);
    if (g.any_joined && g.stage == 0 && t - g.started > g.start_timeout) {
        for (int r = 0; r < g.n; r++)
            if (!g.dom[r].joined && !g.dom[r].dead) {
                char why[128];
                snprintf(why, sizeof why, "did not join the session within %.0f s",
                         g.start_timeout);
                g.startup_failed = 1;
                declare_dead(r, why);
            }
    }
    if (g.stage > 0 && t >= g.stage_deadline) {
        if (g.stage == 1) {
            if (live_domains()) say("grace period over: sending SIGTERM to the remaining domains");
            signal_live(SIGTERM, 1);
            g.stage = 2;
            g.stage_deadline = t + KILL_WAIT_S;
        } else if (g.stage == 2) {
            if (live_domains()) say("sending SIGKILL to the remaining domains");
            signal_live(SIGKILL, 1);
            g.stage = 3;
            g.stage_deadline = t + REAP_WAIT_S;
        }
    }
}

static int next_timeout_ms(void)
{
    double t = now_s(), next = t + 1.0;
    for (int r = 0; r < g.n; r++)
        if (g.dom[r].lost_at > 0 && g.dom[r].lost_at + LOST_WAIT_S < next)
            next = g.dom[r].lost_at + LOST_WAIT_S;
    if (g.stage > 0 && g.stage_deadline < next) next = g.stage_deadline;
    double ms = (next - t) * 1000.0 + 1;
    return ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms;
}

static void run_loop(void)
{
    struct pollfd *pf = NULL;
    size_t pf_cap = 0;
    while (live_domains() > 0) {
        if (g.stage == 3 && now_s() >= g.stage_deadline) {
            say("%d domain(s) did not go away after SIGKILL; giving up on them", live_domains());
            break;
        }
        size_t need = 2 + (size_t)g.nconns;
        if (need > pf_cap) {
            struct pollfd *p = realloc(pf, need * sizeof *p);
            if (!p) {
                say("out of memory");
                signal_live(SIGKILL, 1);
                break;
            }
            pf = p;
            pf_cap = need;
        }
        pf[0] = (struct pollfd){.fd = g.sigr, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = g.lfd, .events = POLLIN};
        for (int i = 0; i < g.nconns; i++) {
            struct conn *c = &g.conns[i];
            pf[2 + i] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            if (c->fd >= 0 && c->out_len > c->out_off) pf[2 + i].events |= POLLOUT;
        }
        int k = poll(pf, need, next_timeout_ms());
        if (k < 0 && errno != EINTR) {
            say("poll: %s", strerror(errno));
            break;
        }
        if (k > 0) {
            if (pf[0].revents) handle_signals();
            if (pf[1].revents & POLLIN) accept_conns();
            for (int i = 0; i < g.nconns && 2 + (size_t)i < need; i++) {
                struct conn *c = &g.conns[i];
                short re = pf[2 + i].revents;
                if (c->fd < 0 || c->fd != pf[2 + i].fd || !re) continue;
                int bad = 0;
                if (re & (POLLIN | POLLHUP | POLLERR)) bad = conn_read(i) < 0;
                if (!bad && c->fd >= 0) bad = conn_flush(i) < 0;
                if (bad) conn_close(i);
            }
        }
        /* Sends queued by handlers (DEAD, RELEASE, TABLE) go out without waiting a turn. */
        for (int i = 0; i < g.nconns; i++) {
            if (g.conns[i].fd >= 0 && g.conns[i].out_len > g.conns[i].out_off && conn_flush(i) < 0)
                conn_close(i);
            else if (g.conns[i].fd >= 0 && g.conns[i].closing)
                conn_close(i); /* gave up on it (does not read, or out of memory) */
        }
        reap();
        check_timers();
    }
    free(pf);
}

/* ---- setup and main ------------------------------------------------------------------------ */

static int make_rendezvous(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    if (snprintf(g.dir, sizeof g.dir, "%s/cor-run.XXXXXX", tmp) >= (int)sizeof g.dir) {
        say("TMPDIR too long");
        return -1;
    }
    if (!mkdtemp(g.dir)) {
        say("cannot make a private directory in %s: %s", tmp, strerror(errno));
        g.dir[0] = 0;
        return -1;
    }
    chmod(g.dir, 0700);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int len = snprintf(g.sock, sizeof g.sock, "%s/boot", g.dir);
    if (len < 0 || (size_t)len >= sizeof sa.sun_path) {
        say("socket path %s is too long for a UNIX socket (set TMPDIR shorter)", g.sock);
        g.sock[0] = 0;
        return -1;
    }
    strcpy(sa.sun_path, g.sock);
    g.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (g.lfd < 0) {
        say("socket: %s", strerror(errno));
        return -1;
    }
    mode_t old = umask(077);
    int rc = bind(g.lfd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc || chmod(g.sock, 0600) || listen(g.lfd, 128)) {
        say("cannot listen on %s: %s", g.sock, strerror(errno));
        return -1;
    }
    return 0;
}

/* The listening socket stays open (accept still sees junk connections); only the names go. */
static void remove_rendezvous(void)
{
    if (g.sock[0]) unlink(g.sock);
    if (g.dir[0]) rmdir(g.dir);
    g.sock[0] = g.dir[0] = 0;
}

/* What the domains' libraries left in /dev/shm (cor.h: files named cor-<session>-...), which
 * a domain killed before its cleanup cannot remove itself. */
static void remove_session_files(void)
{
    char prefix[32];
    uint32_t macro = (uint32_t)g.cookie ? (uint32_t)g.cookie : 1; /* cor_session() */
    int n = snprintf(prefix, sizeof prefix, "cor-%08x-", macro);
    DIR *dir = opendir("/dev/shm");
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (!strncmp(e->d_name, prefix, (size_t)n)) unlinkat(dirfd(dir), e->d_name, 0);
    closedir(dir);
}

static uint64_t session_cookie(void)
{
    uint64_t c = 0;
    if (getrandom(&c, sizeof c, 0) != (ssize_t)sizeof c) {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&c, sizeof c, 1, f) != 1)
            c = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        if (f) fclose(f);
    }
    return c ? c : 1;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: cor-run -n N [options] PROGRAM [ARGS...]\n"
        "Starts N domains of a CoR session running PROGRAM and supervises them.\n"
        "\n"
        "Options:\n"
        "  -n, --np N             number of domains (1..%d)\n"
        "      --route NAME       default route of the domains (COR_ROUTE, default udp)\n"
        "      --ports P          hard ports per route in each domain (COR_PORTS, default 1)\n"
        "      --bind ADDR        address hint for routes: loopback, auto or an IP address\n"
        "                         (COR_BIND; default loopback, or auto with --agent)\n"
        "      --agent CMD        start each domain through CMD, e.g. 'ip netns exec ns{rank}'.\n"
        "                         CMD is split at spaces ('...' and \"...\" group words); in it\n"
        "                         {rank} is the domain number, {size} is N, {host} the domain's\n"
        "                         host from --hosts, {{ a literal '{'. The domain runs as\n"
        "                         CMD env COR_...=... PROGRAM ARGS. The rendezvous is a UNIX\n"
        "                         socket on this host, so the agent must run the domain on this\n"
        "                         host (namespaces, containers, sudo).\n"
        "      --hosts H1,H2,...  hosts for {host}, given out round-robin (default localhost)\n"
        "      --grace SEC        after a domain dies, how long the others may take to exit\n"
        "                         before SIGTERM (then SIGKILL %.0f s later); default 3\n"
        "      --start-timeout SEC  how long domains may take to join the session; default 60\n"
        "  -v, --verbose          say what happens\n"
        "  -h, --help             this text\n"
        "\n"
        "Each domain gets COR_BOOT (rendezvous socket), COR_RANK, COR_SIZE, COR_SESSION (16 hex\n"
        "digits), COR_ROUTE, COR_PORTS and COR_BIND. Only domain 0 reads the terminal.\n"
        "SIGINT, SIGTERM and SIGHUP are passed to the domains. If a domain exits or loses its\n"
        "connection before finishing, cor-run says which and how, tells the others (their\n"
        "operations toward it fail with COR_EPEERDEAD) and stops them after the grace period.\n"
        "\n"
        "Exit status: the worst exit status of the domains (death by signal S counts as 128+S;\n"
        "domains stopped by cor-run do not count), at least 1 if a domain died, 127 if a\n"
        "domain could not be started, 2 for a usage error.\n",
        MAX_DOMAINS, KILL_WAIT_S);
}

static int parse_hosts(char *list)
{
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
        char **h = realloc(g.hosts, (size_t)(g.nhosts + 1) * sizeof *h);
        if (!h) return -1;
        g.hosts = h;
        g.hosts[g.nhosts++] = p;
    }
    return g.nhosts ? 0 : -1;
}

int main(int argc, char **argv)
{
    enum { O_ROUTE = 256, O_PORTS, O_BIND, O_AGENT, O_HOSTS, O_GRACE, O_START };
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},
        {"route", required_argument, NULL, O_ROUTE},
        {"ports", required_argument, NULL, O_PORTS},
        {"bind", required_argument, NULL, O_BIND},
        {"agent", required_argument, NULL, O_AGENT},
        {"hosts", required_argument, NULL, O_HOSTS},
        {"grace", required_argument, NULL, O_GRACE},
        {"start-timeout", required_argument, NULL, O_START},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    g.n = 0;
    g.ports = 1;
    g.route = "udp";
    g.grace = 3.0;
    g.start_timeout = 60.0;
    g.lfd = g.sigr = g.sigw = -1;
    long v;
    int opt;
    while ((opt = getopt_long(argc, argv, "+n:vh", opts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            if (parse_int(optarg, 1, MAX_DOMAINS, &v)) {
                say("-n wants a number of domains in 1..%d, not '%s'", MAX_DOMAINS, optarg);
                return 2;
            }
            g.n = (int)v;
            break;
        case O_ROUTE:
            if (!route_name_ok(optarg)) {
                say("--route: '%s' is not a route name", optarg);
                return 2;
            }
            g.route = optarg;
            break;
        case O_PORTS:
            if (parse_int(optarg, 1, MAX_ADDRS, &v)) {
                say("--ports wants a number in 1..%d, not '%s'", MAX_ADDRS, optarg);
                return 2;
            }
            g.ports = (int)v;
            break;
        case O_BIND:
            if (!*optarg || strlen(optarg) > 200 || strpbrk(optarg, " \n=")) {
                say("--bind: '%s' is not an address", optarg);
                return 2;
            }
            g.bind = optarg;
            break;
        case O_AGENT:
            g.agent = optarg;
            break;
        case O_HOSTS:
            if (parse_hosts(optarg)) {
                say("--hosts wants a comma-separated list of hosts");
                return 2;
            }
            break;
        case O_GRACE:
            if (parse_seconds(optarg, &g.grace)) {
                say("--grace wants seconds, not '%s'", optarg);
                return 2;
            }
            break;
        case O_START:
            if (parse_seconds(optarg, &g.start_timeout)) {
                say("--start-timeout wants seconds, not '%s'", optarg);
                return 2;
            }
            break;
        case 'v':
            verbose = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (g.n == 0 || optind >= argc) {
        say(g.n == 0 ? "-n N is required" : "no program to run");
        usage(stderr);
        return 2;
    }
    if (!g.bind) g.bind = g.agent ? "auto" : "loopback";
    g.cookie = session_cookie();
    g.dom = calloc((size_t)g.n, sizeof *g.dom);
    if (!g.dom) {
        say("out of memory");
        return 1;
    }
    for (int r = 0; r < g.n; r++) {
        g.dom[r].rank = r;
        g.dom[r].conn = -1;
    }
    if (setup_signals() || make_rendezvous()) {
        remove_rendezvous();
        return 1;
    }
    g.started = now_s();
    int start_failed = 0;
    for (int r = 0; r < g.n && !start_failed; r++)
        if (start_domain(r, argv + optind, argc - optind)) start_failed = 1;
    if (start_failed) {
        /* Nothing useful can run: stop what started, at once. */
        for (int r = 0; r < g.n; r++)
            g.dom[r].dead = 1;
        signal_live(SIGTERM, 1);
        g.stage = 2;
        g.stage_deadline = now_s() + KILL_WAIT_S;
    }
    run_loop();
    remove_rendezvous();
    remove_session_files();

    int worst = 0, died = g.ndead > 0;
    for (int r = 0; r < g.n; r++) {
        struct domain *d = &g.dom[r];
        if (d->state == D_RUNNING) {
            died = 1; /* could not be reaped */
            continue;
        }
        if (d->state != D_REAPED || (d->killed_by_us && !g.user_signal)) continue;
        int code = status_code(d->wstatus);
        if (code > worst) worst = code;
    }
    if (start_failed) return 127;
    if ((died || g.startup_failed) && worst == 0) worst = 1;
    if (g.user_signal && worst == 0) worst = 128 + g.user_signal;
    return worst;
}
