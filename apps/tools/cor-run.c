/*
 * cor-run: starts the N domains of a CoR session and supervises them.
 *
 * It makes a private rendezvous (a UNIX socket, mode 0600, in a fresh 0700 directory; or a TCP
 * socket when domains run on other hosts, where a connection must prove that it knows the
 * session secret before anything else), starts the domains with COR_* in their environment,
 * answers their bootstrap (address table, barriers; the lines are in cor/core/bootline.h,
 * shared with the domains' side), forwards SIGINT, SIGTERM
 * and SIGHUP, and watches both the processes and their connections. A domain that exits or
 * drops its connection before saying FINISH has died: cor-run names it and how, tells the
 * survivors (their operations toward it then fail with COR_EPEERDEAD), gives them a grace
 * period to leave, then stops them with SIGTERM and SIGKILL. Every wait is bounded.
 *
 * Single-threaded: one poll() loop; signals arrive through a self-pipe. Everything read from
 * the socket is untrusted (lengths, ranks, duplicates and order are checked).
 *
 * Scale: the work per session is O(N) plus the address table's bytes (N lines to each of N
 * domains, formatted once and shared by every connection). Domains are started without
 * waiting for their exec (an exec failure is learned when the child is reaped); the
 * connections are watched with epoll, so an event costs O(1) and not O(N); what each event
 * needs to know about the session (who joined, published, entered the next barrier, is
 * running) is kept in counters, not found by scanning the domains.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <dirent.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot_auth.h"
#include "bootline.h"

#define LINE_MAX_ COR_BOOT_LINE_MAX
#define MAX_DOMAINS COR_BOOT_MAX_DOMAINS
#define MAX_ADDRS COR_BOOT_MAX_ADDRS
#define OUT_MAX (64u << 20) /* a domain that does not read gets disconnected */
#define LOST_WAIT_S 0.5     /* after a connection drops, wait this long for the exit */
#define ANON_TIMEOUT_S 10.0 /* a connection must say HELLO within this */
#define AUTH_TIMEOUT_S 5.0  /* a TCP connection must prove the secret within this */
#define TCP_CROWD 256       /* unproven TCP connections kept at once, beyond one per domain */
#define KILL_WAIT_S 2.0     /* from SIGTERM to SIGKILL during teardown */
#define REAP_WAIT_S 5.0     /* from SIGKILL to giving up on a child */

static const char *progname = "cor-run";
static int verbose;

struct addr {
    char route[COR_BOOT_ROUTE_MAX];
    int port;
    char addr[COR_BOOT_ADDR_MAX]; /* decoded */
};

enum dstate { D_NEW, D_RUNNING, D_REAPED };

/* Why a connection was refused before it joined; counted when it is closed. */
enum refusal {
    REF_NONE,
    REF_GARBAGE, /* TCP: anything but a proof, or closed before one */
    REF_PROOF,   /* TCP: a wrong proof (another secret, a replayed exchange) */
    REF_SLOW,    /* TCP: no proof within AUTH_TIMEOUT_S */
    REF_CROWD,   /* too many connections that did not join yet */
    REF_HELLO,   /* a bad HELLO (wrong session, rank taken...), or none in time */
    REF_KINDS
};
static const char *const refusal_names[REF_KINDS] = {
    [REF_GARBAGE] = "sent garbage or closed before proving the secret",
    [REF_PROOF] = "gave a wrong proof",
    [REF_SLOW] = "were too slow to prove the secret",
    [REF_CROWD] = "met a full house (too many connections waiting)",
    [REF_HELLO] = "sent no valid HELLO",
};

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
    int tcp;  /* on the TCP rendezvous: must prove the secret first */
    int authed;
    /* Proven (tcp): every later line both ways is sealed (boot_auth.h). */
    int sealed;
    struct cor_boot_chan tx, rx;
    enum refusal refusal;                    /* set when refused; counted at close */
    unsigned char nonce[COR_BOOT_KEY_BYTES]; /* our challenge (tcp) */
    double opened;
    char in[2 * LINE_MAX_];
    size_t in_len;
    char *out;
    size_t out_len, out_off, out_cap;
    int closing;       /* close once out is flushed */
    int table_pending; /* the shared table (g.table) goes out before out[] */
    size_t table_off;  /* bytes of it sent */
    int dirty;         /* in g.dirty: has output to flush or is closing */
    int watching_out;  /* epoll watches it for POLLOUT */
};

static struct {
    int n, ports, nhosts;
    const char *route, *bind, *agent;
    char **hosts;
    double grace, start_timeout;
    uint64_t cookie;
    char dir[PATH_MAX], sock[PATH_MAX];
    int lfd, sigr, sigw;
    /* TCP rendezvous (--listen, or --hosts naming other hosts): its address as the domains
     * reach it, and the session secret they must prove they know. */
    const char *listen_arg;
    int tcp;
    char boot_addr[300]; /* "tcp:HOST:PORT" */
    unsigned char secret[COR_BOOT_KEY_BYTES];
    char secret_hex[COR_BOOT_KEY_HEX + 1];
    /* Domain 0 through an agent on TCP: its stdin is a pipe that first carries the secret,
     * then what cor-run reads on its own stdin. */
    int relay_fd;
    char relay[4096];
    size_t relay_len;
    int stdin_open;
    /* Connections refused before they joined (strangers), by why (enum refusal). */
    unsigned refused[REF_KINDS];
    /* Lines dropped on proven TCP connections for their seal: injected or replayed. */
    unsigned long forged, replayed;
    struct domain *dom;
    struct conn *conns;
    int nconns, conns_cap;
    int *free_slots; /* closed connections' slots, reused first */
    int nfree;
    int *dirty; /* connections with output queued by the handlers of this turn */
    int ndirty, dirty_cap;
    int epfd; /* the connections (the loop's other descriptors are poll()ed) */
    double started;
    int table_sent;
    char *table; /* TABLE, the A lines and END: formatted once, sent to every domain */
    size_t table_len, table_lines;
    /* The A lines inside g.table (table[a_off .. a_off + a_len)) and their SHA-256: a sealed
     * connection gets them as one block (bootline.h), hashed once for all connections. */
    size_t table_a_off, table_a_len;
    unsigned char table_digest[COR_SHA256_BYTES];
    int table_n; /* addresses per domain */
    unsigned released;
    /* Counters that replace scans of the N domains at every event (O(N^2) a session). */
    int nlive;       /* domains in D_RUNNING */
    int njoined;     /* said HELLO */
    int npublished;  /* said PUB */
    int nanon;       /* open connections that did not join yet */
    int nlost_wait;  /* domains with lost_at > 0 */
    int at_next;     /* domains whose barrier >= released + 1 */
    int at_next_fin; /* of these, finished */
    int behind_fin;  /* finished domains whose barrier < released + 1 */
    int behind_fin_rank;
    unsigned barrier_failed; /* barrier seq already failed (ERR sent) */
    double next_anon_check;
    /* Children: pid -> rank (open addressing), and the errno of a failed exec per rank (a
     * shared page written by the child between fork and exec). */
    int *pid_rank;
    unsigned pid_mask;
    int *exec_err;
    const char *exec_name; /* the program or agent started (for the message) */
    int start_failed;      /* a domain could not be started: stop the rest, exit 127 */
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

/* In a child before its exec: our handlers would write into cor-run's signal pipe (a TERM
 * sent to stop the child would read as one sent to cor-run), so every signal goes back to its
 * default, then is unblocked. The parent blocks all signals around fork for this. */
static void child_signals_default(void)
{
    signal(SIGCHLD, SIG_DFL);
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
        signal(forwarded[i], SIG_DFL);
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
        signal(fatal[i], SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
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

/* Connection i has output to flush (or is to be closed) at the end of this turn. */
static void mark_dirty(int i)
{
    struct conn *c = &g.conns[i];
    if (c->dirty) return;
    if (g.ndirty == g.dirty_cap) {
        int cap = g.dirty_cap ? 2 * g.dirty_cap : 64;
        int *p = realloc(g.dirty, (size_t)cap * sizeof *p);
        if (!p) {
            say("out of memory");
            c->closing = 1; /* nothing can be queued for it; conn_write stops at closing */
            return;
        }
        g.dirty = p;
        g.dirty_cap = cap;
    }
    c->dirty = 1;
    g.dirty[g.ndirty++] = i;
}

/* Whether epoll tells us when connection i can take more output. */
static void watch_out(int i, int on)
{
    struct conn *c = &g.conns[i];
    if (c->watching_out == on || c->fd < 0 || g.epfd < 0) return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u32 = (uint32_t)i};
    if (epoll_ctl(g.epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->watching_out = on;
}

static void conn_write(int i, const char *text, size_t len)
{
    struct conn *c = &g.conns[i];
    if (c->fd < 0 || c->closing) return;
    mark_dirty(i);
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

/* Queues one protocol line on connection i, sealed once the connection is proven. */
static void conn_line(int i, const struct cor_bootline *l)
{
    struct conn *c = &g.conns[i];
    char line[LINE_MAX_ + 1], sealed[LINE_MAX_ + 1];
    int len = cor__bootline_format(l, line, sizeof line);
    if (len <= 0) return;
    if (!c->sealed) {
        conn_write(i, line, (size_t)len);
        return;
    }
    if (len - 1 > COR_BOOT_BODY_MAX && (l->kind == COR_BL_ERR || l->kind == COR_BL_DEAD)) {
        /* Our own text (a reason), too long to seal: it is cut, not the protocol. */
        struct cor_bootline shorter = *l;
        shorter.text[COR_BOOT_BODY_MAX - 32] = 0;
        len = cor__bootline_format(&shorter, line, sizeof line);
        if (len <= 0) return;
    }
    int k = cor__boot_seal(&c->tx, line, (size_t)len - 1, sealed, sizeof sealed);
    if (k > 0) conn_write(i, sealed, (size_t)k);
}

/* ERR with printf-style text. */
static void conn_err(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void conn_err(int i, const char *fmt, ...)
{
    struct cor_bootline l = {.kind = COR_BL_ERR};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l.text, sizeof l.text, fmt, ap);
    va_end(ap);
    conn_line(i, &l);
}

/* Queues the shared address table on connection i. It is not copied unless lines wait
 * before it (they must go first); conn_flush sends it from g.table. */
static void conn_table(int i)
{
    struct conn *c = &g.conns[i];
    if (c->fd < 0 || c->closing) return;
    if (c->sealed) {
        /* One sealed block (bootline.h): TABLE with the A lines' digest and END are sealed
         * for this connection, the A lines shared by all go as they are. Two seals per
         * connection: sealing every line was N x (N x n + 2) seals a session (~0.6 s of
         * cor-run's CPU at 256 domains, docs/measurements/scale-2026-11-28d.md). */
        struct cor_bootline l = {.kind = COR_BL_TABLE, .size = g.n, .n = g.table_n, .digest = 1};
        memcpy(l.mac, g.table_digest, sizeof l.mac);
        char body[LINE_MAX_ + 1], head[LINE_MAX_ + 1], tail[LINE_MAX_ + 1];
        int bl = cor__bootline_format(&l, body, sizeof body);
        int hk = bl > 0 ? cor__boot_seal(&c->tx, body, (size_t)bl - 1, head, sizeof head) : -1;
        l.kind = COR_BL_END;
        bl = hk > 0 ? cor__bootline_format(&l, body, sizeof body) : -1;
        int tk = bl > 0 ? cor__boot_seal(&c->tx, body, (size_t)bl - 1, tail, sizeof tail) : -1;
        if (tk < 0) { /* not with lines that cor__bootline_format made */
            say("cannot seal the address table for domain %d", c->rank);
            c->closing = 1;
            mark_dirty(i);
            return;
        }
        conn_write(i, head, (size_t)hk);
        conn_write(i, g.table + g.table_a_off, g.table_a_len);
        conn_write(i, tail, (size_t)tk);
        return;
    }
    if (c->out_len > c->out_off || c->table_pending) {
        conn_write(i, g.table, g.table_len);
        return;
    }
    c->table_pending = 1;
    c->table_off = 0;
    mark_dirty(i);
}

/* Writes what the socket takes now; returns -1 when the connection broke. */
static int conn_flush(int i)
{
    struct conn *c = &g.conns[i];
    while (c->table_pending) {
        ssize_t k = send(c->fd, g.table + c->table_off, g.table_len - c->table_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch_out(i, 1);
            return 0;
        }
        if (k <= 0) return -1;
        c->table_off += (size_t)k;
        if (c->table_off == g.table_len) c->table_pending = 0;
    }
    while (c->out_off < c->out_len) {
        ssize_t k =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch_out(i, 1);
            return 0;
        }
        if (k <= 0) return -1;
        c->out_off += (size_t)k;
    }
    c->out_off = c->out_len = 0;
    watch_out(i, 0);
    return 0;
}

/* Queues a line for domain `rank`, if it is connected and did not finish. */
static void domain_line(int rank, const struct cor_bootline *l)
{
    struct domain *d = &g.dom[rank];
    if (d->conn < 0 || d->finished) return;
    conn_line(d->conn, l);
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

/* Whether process pid is stopped (state T in /proc/PID/stat); 0 if unknown. */
static int process_stopped(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *end = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return end && end[1] == ' ' && end[2] == 'T';
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
    struct cor_bootline l = {.kind = COR_BL_DEAD, .rank = r};
    snprintf(l.text, sizeof l.text, "%s", why);
    for (int s = 0; s < g.n; s++)
        if (s != r && !g.dom[s].dead) domain_line(s, &l);
    if (d->state == D_RUNNING && d->pid > 0) {
        /* Alive but cut off from the session (no connection, never joined, or given up by a
         * peer's routes): stop it now; the teardown escalates to SIGKILL if needed. A
         * stopped one (SIGSTOP) gets SIGKILL at once: it would hold a SIGTERM until the
         * teardown's SIGKILL, after the grace period, and a gm peer may be held inside libgm
         * until it is gone (a domain stopped holding its shm queue lock: gm_watch.c). Not
         * SIGCONT: the SIGTERM would then run libfabric's shm signal handler, which frees
         * memory (ThreadSanitizer reports it). */
        kill(d->pid, process_stopped(d->pid) ? SIGKILL : SIGTERM);
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
            struct cor_bootline e = {.kind = COR_BL_ERR};
            snprintf(e.text, sizeof e.text, "domains published different numbers of addresses");
            for (int s = 0; s < g.n; s++)
                domain_line(s, &e);
            g.startup_failed = 1;
            begin_teardown();
            return;
        }
    }
    g.table_sent = 1;
    /* Formatted once (N lines), then shared by the N connections: formatting it per domain
     * was N^2 lines of work and N^2 bytes of buffers. */
    size_t cap = ((size_t)g.n * (size_t)n + 2) * (LINE_MAX_ + 1), len = 0;
    char *t = malloc(cap);
    if (!t) {
        say("out of memory for the address table (%d domains x %d addresses)", g.n, n);
        struct cor_bootline e = {.kind = COR_BL_ERR};
        snprintf(e.text, sizeof e.text, "cor-run is out of memory");
        for (int s = 0; s < g.n; s++)
            domain_line(s, &e);
        g.startup_failed = 1;
        begin_teardown();
        return;
    }
    struct cor_bootline l = {.kind = COR_BL_TABLE, .size = g.n, .n = n};
    g.table_lines = (size_t)g.n * (size_t)n + 2;
    g.table_n = n;
    int k = cor__bootline_format(&l, t, cap);
    len += k > 0 ? (size_t)k : 0;
    g.table_a_off = len;
    l.kind = COR_BL_A;
    for (int r = 0; r < g.n; r++)
        for (int a = 0; a < n; a++) {
            const struct addr *x = &g.dom[r].addrs[a];
            l.rank = r;
            l.k = a;
            l.port = x->port;
            memcpy(l.route, x->route, sizeof l.route);
            memcpy(l.addr, x->addr, sizeof l.addr);
            k = cor__bootline_format(&l, t + len, cap - len);
            len += k > 0 ? (size_t)k : 0;
        }
    g.table_a_len = len - g.table_a_off;
    struct cor_sha256 h;
    cor__sha256_init(&h);
    cor__sha256_update(&h, t + g.table_a_off, g.table_a_len);
    cor__sha256_final(&h, g.table_digest);
    l.kind = COR_BL_END;
    k = cor__bootline_format(&l, t + len, cap - len);
    len += k > 0 ? (size_t)k : 0;
    char *shrunk = realloc(t, len);
    g.table = shrunk ? shrunk : t;
    g.table_len = len;
    for (int s = 0; s < g.n; s++) {
        struct domain *to = &g.dom[s];
        if (to->conn >= 0 && !to->finished) conn_table(to->conn);
    }
    if (verbose) say("address table sent (%d domains x %d addresses)", g.n, n);
}

/* The barrier counters (g.at_next, at_next_fin, behind_fin) counted afresh for the barrier
 * after g.released: once per barrier released, O(N). */
static void count_barrier(void)
{
    unsigned next = g.released + 1;
    g.at_next = g.at_next_fin = g.behind_fin = 0;
    for (int r = 0; r < g.n; r++) {
        const struct domain *d = &g.dom[r];
        if (d->barrier >= next) {
            g.at_next++;
            g.at_next_fin += d->finished;
        } else if (d->finished) {
            g.behind_fin++;
            g.behind_fin_rank = r;
        }
    }
}

/* Domain d entered barrier d->barrier (BARRIER) or finished (FINISH): the counters follow. */
static void barrier_entered(const struct domain *d)
{
    if (d->barrier == g.released + 1) g.at_next++;
}

static void barrier_finished(const struct domain *d)
{
    if (d->barrier >= g.released + 1) {
        g.at_next_fin++;
    } else {
        g.behind_fin++;
        g.behind_fin_rank = d->rank;
    }
}

/* A barrier may complete, or fail, after domain `who` (-1: none) entered it or finished. */
static void try_release(int who)
{
    for (;;) {
        unsigned next = g.released + 1;
        int waiting = g.at_next > g.at_next_fin;
        if (waiting && g.behind_fin > 0) {
            /* A domain that finished will never enter: fail the barrier, do not hang it. */
            struct cor_bootline e = {.kind = COR_BL_ERR};
            snprintf(e.text, sizeof e.text,
                     "barrier %u cannot complete: domain %d finished without entering it", next,
                     g.behind_fin_rank);
            if (g.barrier_failed == next) { /* the others were told: only a newcomer */
                if (who >= 0 && g.dom[who].barrier >= next) domain_line(who, &e);
                return;
            }
            g.barrier_failed = next;
            for (int r = 0; r < g.n; r++)
                if (g.dom[r].barrier >= next) domain_line(r, &e);
            return;
        }
        if (g.at_next < g.n) return;
        g.released = next;
        struct cor_bootline l = {.kind = COR_BL_RELEASE, .seq = next};
        for (int r = 0; r < g.n; r++)
            domain_line(r, &l);
        count_barrier();
    }
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

static const char *conn_name(int ci, char *buf, size_t cap)
{
    const struct conn *c = &g.conns[ci];
    if (c->rank >= 0)
        snprintf(buf, cap, "domain %d", c->rank);
    else
        snprintf(buf, cap, "an unidentified %sconnection", c->tcp ? "TCP " : "");
    return buf;
}

/* The first line on a TCP connection: PROOF of the secret for our challenge. */
static int handle_proof(int ci, const struct cor_bootline *l)
{
    struct conn *c = &g.conns[ci];
    if (l->kind != COR_BL_PROOF) {
        c->refusal = REF_GARBAGE;
        if (verbose) say("refused a TCP connection that did not answer the challenge");
        return -1;
    }
    unsigned char want[COR_BOOT_KEY_BYTES];
    cor__boot_mac(g.secret, COR_BOOT_ROLE_DOMAIN, c->nonce, l->nonce, want);
    if (!cor__boot_mac_equal(want, l->mac, sizeof want)) {
        c->refusal = REF_PROOF;
        say("refused a TCP connection with a wrong proof of the session secret");
        conn_err(ci, "wrong proof of the session secret");
        return -1;
    }
    c->authed = 1;
    struct cor_bootline p = {.kind = COR_BL_PROVEN};
    cor__boot_mac(g.secret, COR_BOOT_ROLE_CORRUN, c->nonce, l->nonce, p.mac);
    conn_line(ci, &p);
    /* From here on, both ways, every line is sealed with this connection's keys. */
    cor__boot_chan_init(&c->tx, g.secret, COR_BOOT_ROLE_CORRUN, c->nonce, l->nonce);
    cor__boot_chan_init(&c->rx, g.secret, COR_BOOT_ROLE_DOMAIN, c->nonce, l->nonce);
    c->sealed = 1;
    return 0;
}

static int handle_hello(int ci, const struct cor_bootline *l)
{
    struct conn *c = &g.conns[ci];
    if (l->kind != COR_BL_HELLO) {
        c->refusal = REF_HELLO;
        conn_err(ci, "expected HELLO");
        return -1;
    }
    if (l->session != g.cookie) {
        c->refusal = REF_HELLO;
        say("refused a bootstrap connection with a wrong session cookie");
        conn_err(ci, "wrong session");
        return -1;
    }
    if (l->size != g.n || l->rank >= g.n) {
        c->refusal = REF_HELLO;
        say("refused a HELLO for rank %ld of %ld (this session has %d domains)", l->rank, l->size,
            g.n);
        conn_err(ci, "rank or size does not match the session");
        return -1;
    }
    long rank = l->rank, pid = l->pid;
    struct domain *d = &g.dom[rank];
    if (d->joined || d->dead || d->conn >= 0) {
        c->refusal = REF_HELLO;
        say("refused a second HELLO for domain %ld", rank);
        conn_err(ci, "domain %ld already joined", rank);
        return -1;
    }
    if (verbose && !g.agent && pid != d->pid)
        say("domain %ld says pid %ld, started as pid %ld", rank, pid, (long)d->pid);
    c->rank = (int)rank;
    g.nanon--;
    d->conn = ci;
    d->joined = 1;
    g.njoined++;
    int first = !g.any_joined;
    g.any_joined = 1;
    struct cor_bootline w = {.kind = COR_BL_WELCOME};
    conn_line(ci, &w);
    if (verbose) say("domain %ld (pid %ld) joined", rank, pid);
    if (g.njoined == g.n)
        remove_rendezvous(); /* nobody connects any more: even kill -9 leaves nothing now */
    /* From now on domain_exited takes a quiet exit without joining as a death; before, it
     * did not: look back once. */
    if (first) check_unjoined_exits();
    return 0;
}

#define SEAL_SAY_MAX 8 /* lines dropped for their seal that are said one by one */

/* Handles one line from connection ci; returns -1 to drop the connection. */
static int domain_says(int ci, const char *text)
{
    struct conn *c = &g.conns[ci];
    struct cor_bootline l;
    if (c->sealed) {
        const char *body;
        enum cor_boot_seal_check sc = cor__boot_unseal(&c->rx, text, &body);
        if (sc == COR_SEAL_FORGED || sc == COR_SEAL_REPLAYED) {
            /* Not from the domain that proved the secret on this connection (injected into
             * the stream, or a copy of an earlier line): dropped, counted, reported. */
            unsigned long *count = sc == COR_SEAL_FORGED ? &g.forged : &g.replayed;
            char who[64];
            if (++*count + (sc == COR_SEAL_FORGED ? g.replayed : g.forged) <= SEAL_SAY_MAX)
                say("dropped a %s line on the connection of %s",
                    sc == COR_SEAL_FORGED ? "forged" : "replayed", conn_name(ci, who, sizeof who));
            return 0;
        }
        if (sc == COR_SEAL_GAP) {
            char who[64];
            say("lines from %s went missing (a sealed line out of sequence)",
                conn_name(ci, who, sizeof who));
            return -1;
        }
        text = body;
    }
    int bad = cor__bootline_parse(text, &l);
    if (c->tcp && !c->authed) {
        if (bad) {
            c->refusal = REF_GARBAGE;
            if (verbose) say("refused a TCP connection that sent garbage");
            return -1;
        }
        return handle_proof(ci, &l);
    }
    if (c->rank < 0) {
        if (bad) {
            c->refusal = REF_HELLO;
            return -1;
        }
        return handle_hello(ci, &l);
    }
    if (bad) return -1;
    struct domain *d = &g.dom[c->rank];
    if (d->finished) return -1; /* nothing may follow FINISH */
    switch (l.kind) {
    case COR_BL_ADDR: {
        if (d->published || l.k != d->naddr) return -1;
        if (!d->addrs && !(d->addrs = calloc(MAX_ADDRS, sizeof *d->addrs))) return -1;
        struct addr *a = &d->addrs[d->naddr++];
        memcpy(a->route, l.route, sizeof a->route);
        memcpy(a->addr, l.addr, sizeof a->addr);
        a->port = (int)l.port;
        return 0;
    }
    case COR_BL_PUB: {
        if (d->published || l.n != d->naddr) return -1;
        d->published = 1;
        g.npublished++;
        if (g.npublished == g.n && !g.table_sent) send_table();
        return 0;
    }
    case COR_BL_BARRIER:
        if ((unsigned long)l.seq != (unsigned long)d->barrier + 1) return -1;
        d->barrier = (unsigned)l.seq;
        barrier_entered(d);
        try_release(d->rank);
        return 0;
    case COR_BL_LOST: {
        /* d's routes gave a peer up (silent for their dead time: stopped or wedged): the
         * session loses it, or the others' barriers would wait for it as long as it lives */
        if (l.rank >= g.n || l.rank == d->rank) return -1;
        char why[96];
        snprintf(why, sizeof why, "given up by domain %d (its routes heard nothing from it)",
                 d->rank);
        declare_dead((int)l.rank, why);
        return 0;
    }
    case COR_BL_FINISH: {
        if (!d->published && !g.table_sent) /* the others' exchange cannot complete */
            declare_dead(d->rank, "left the session before publishing its addresses");
        d->finished = 1;
        barrier_finished(d);
        struct cor_bootline bye = {.kind = COR_BL_BYE};
        conn_line(ci, &bye);
        if (verbose) say("domain %d finished", d->rank);
        try_release(-1);
        return 0;
    }
    default:
        return -1;
    }
}

static int conn_take_one(void *arg, char *line)
{
    int ci = (int)(intptr_t)arg;
    if (domain_says(ci, line) == 0) return 0;
    char who[64];
    struct conn *c = &g.conns[ci];
    if (!c->tcp || c->authed)
        say("protocol error from %s on the bootstrap socket; dropping it",
            conn_name(ci, who, sizeof who));
    return -2;
}

/* Handles the complete lines in connection ci's input buffer and keeps a partial last line.
 * Returns 0, -1 to drop the connection, or -2 to drop it after flushing what was written to it
 * (an ERR). No socket I/O: conn_read feeds it, and tests/core/fuzz_bootline.c feeds it
 * anything. */
static int conn_take_lines(int ci)
{
    struct conn *c = &g.conns[ci];
    int rc = cor__bootline_take(c->in, &c->in_len, conn_take_one, (void *)(intptr_t)ci);
    if (rc == COR_BL_TOO_LONG || rc == COR_BL_NUL) {
        char who[64];
        if (c->tcp && !c->authed) {
            c->refusal = REF_GARBAGE;
            if (verbose) say("refused a TCP connection that sent garbage");
        } else {
            say("bootstrap line too long or with a NUL byte from %s; dropping it",
                conn_name(ci, who, sizeof who));
        }
        return -1;
    }
    return rc;
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
    if (c->rank < 0) {
        enum refusal why = c->refusal;
        if (why == REF_NONE && c->tcp && !c->authed) why = REF_GARBAGE;
        if (why != REF_NONE) g.refused[why]++;
        if (g.nanon > 0) g.nanon--;
    }
    if (g.epfd >= 0) epoll_ctl(g.epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->sealed = 0;
    cor__boot_chan_clear(&c->tx);
    cor__boot_chan_clear(&c->rx);
    c->in_len = 0; /* what it sent and nobody will read (a line too long, say) */
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = c->out_cap = 0;
    c->table_pending = 0;
    c->watching_out = 0;
    if (g.free_slots) g.free_slots[g.nfree++] = ci; /* room for every slot: see accept_conns */
    if (c->rank >= 0) {
        struct domain *d = &g.dom[c->rank];
        d->conn = -1;
        if (!d->finished && !d->dead && d->state == D_RUNNING) {
            d->lost_at = now_s(); /* decided in check_timers: exit status or lost link */
            g.nlost_wait++;
        }
    }
}

static void accept_conns(void)
{
    for (;;) {
        int fd = accept4(g.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        if (g.nanon > g.n + (g.tcp ? TCP_CROWD : 16)) {
            int oldest = -1; /* a scan, but only with a full house */
            for (int i = 0; i < g.nconns; i++) {
                struct conn *c = &g.conns[i];
                if (c->fd < 0 || c->rank >= 0) continue;
                if (c->tcp && !c->authed && (oldest < 0 || c->opened < g.conns[oldest].opened))
                    oldest = i;
            }
            /* Anyone may knock on TCP: a stranger that proved nothing for a second makes
             * room (a domain proves the secret within a round trip of connecting), else the
             * newcomer is turned away. */
            if (oldest >= 0 && now_s() - g.conns[oldest].opened > 1.0) {
                g.conns[oldest].refusal = REF_CROWD;
                conn_close(oldest);
            } else {
                g.refused[REF_CROWD]++;
                close(fd);
                continue;
            }
        }
        if (!g.tcp && check_peer_uid(fd)) {
            g.refused[REF_HELLO]++;
            close(fd);
            continue;
        }
        int slot = -1;
        if (g.nfree > 0) {
            slot = g.free_slots[--g.nfree];
        } else {
            if (g.nconns == g.conns_cap) {
                int cap = g.conns_cap ? 2 * g.conns_cap : 16;
                struct conn *p = realloc(g.conns, (size_t)cap * sizeof *p);
                int *f = p ? realloc(g.free_slots, (size_t)cap * sizeof *f) : NULL;
                if (p) g.conns = p;
                if (!f) {
                    close(fd);
                    return;
                }
                g.free_slots = f;
                g.conns_cap = cap;
            }
            slot = g.nconns++;
        }
        struct conn *c = &g.conns[slot];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->rank = -1;
        c->opened = now_s();
        g.nanon++;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)slot};
        if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, fd, &ev)) {
            say("epoll_ctl: %s", strerror(errno));
            conn_close(slot);
            continue;
        }
        if (g.tcp) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            c->tcp = 1;
            struct cor_bootline ch = {.kind = COR_BL_CHALLENGE, .version = COR_BOOT_VERSION};
            if (cor__boot_random(c->nonce, sizeof c->nonce)) {
                say("getrandom: %s", strerror(errno));
                conn_close(slot);
                continue;
            }
            memcpy(ch.nonce, c->nonce, sizeof ch.nonce);
            conn_line(slot, &ch);
        }
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

#define NENV 8

/* The domain's COR_* settings; returns how many. COR_BOOT_SECRET (TCP only) is the secret
 * itself for a child of ours (in its environment, which only its user can read) and "-" for
 * one started through an agent, whose command line anyone on both hosts may read: that one
 * reads the secret from its stdin, a pipe from us (ssh carries it encrypted). */
static int make_env(int rank, char env[NENV][PATH_MAX + 16])
{
    snprintf(env[0], sizeof env[0], "COR_BOOT=%s", g.tcp ? g.boot_addr : g.sock);
    snprintf(env[1], sizeof env[1], "COR_RANK=%d", rank);
    snprintf(env[2], sizeof env[2], "COR_SIZE=%d", g.n);
    snprintf(env[3], sizeof env[3], "COR_SESSION=%016llx", (unsigned long long)g.cookie);
    snprintf(env[4], sizeof env[4], "COR_ROUTE=%s", g.route);
    snprintf(env[5], sizeof env[5], "COR_PORTS=%d", g.ports);
    snprintf(env[6], sizeof env[6], "COR_BIND=%s", g.bind);
    if (!g.tcp) return 7;
    snprintf(env[7], sizeof env[7], "COR_BOOT_SECRET=%s", g.agent ? "-" : g.secret_hex);
    return 8;
}

/* May we read our stdin for domain 0? Not when it is a terminal we do not own (cor-run in a
 * shell's background: reading would stop us with SIGTTIN). */
static int stdin_relayable(void)
{
    if (fcntl(0, F_GETFL) < 0) return 0;
    return !isatty(0) || tcgetpgrp(0) == getpgrp();
}

/* pid -> rank, for reaping in O(1). */
static void pid_insert(pid_t pid, int rank)
{
    unsigned h = (unsigned)pid * 2654435761u;
    for (unsigned i = h & g.pid_mask;; i = (i + 1) & g.pid_mask)
        if (g.pid_rank[i] < 0) {
            g.pid_rank[i] = rank;
            return;
        }
}

static int pid_lookup(pid_t pid)
{
    unsigned h = (unsigned)pid * 2654435761u;
    for (unsigned i = h & g.pid_mask;; i = (i + 1) & g.pid_mask) {
        int r = g.pid_rank[i];
        if (r < 0) return -1;
        if (g.dom[r].pid == pid && g.dom[r].state == D_RUNNING) return r;
    }
}

/* The table of children and the shared page of exec failures; -1 if out of memory. */
static int children_alloc(void)
{
    unsigned cap = 16;
    while (cap < 2u * (unsigned)g.n)
        cap *= 2;
    g.pid_mask = cap - 1;
    g.pid_rank = malloc(cap * sizeof *g.pid_rank);
    g.exec_err = mmap(NULL, (size_t)g.n * sizeof *g.exec_err, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!g.pid_rank || g.exec_err == MAP_FAILED) {
        say("out of memory");
        g.exec_err = NULL;
        return -1;
    }
    for (unsigned i = 0; i < cap; i++)
        g.pid_rank[i] = -1;
    return 0;
}

/* 0 if execve could run `path`, else the errno it would fail with. */
static int exec_error(const char *path)
{
    struct stat st;
    if (stat(path, &st)) return errno;
    if (S_ISDIR(st.st_mode)) return EACCES;
    return access(path, X_OK) ? errno : 0;
}

/* 0 if execvp would find `file` runnable (on PATH when it has no '/'), else why not. Checked
 * before any domain starts, so a missing program is named for domain 0 every time instead of
 * for whichever child lost the race with the others' stop. */
static int program_error(const char *file)
{
    if (!*file) return ENOENT;
    if (strchr(file, '/')) return exec_error(file);
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    int err = ENOENT;
    for (const char *dir = path;; dir++) {
        const char *end = strchrnul(dir, ':');
        char full[PATH_MAX];
        int len = snprintf(full, sizeof full, "%.*s/%s", end == dir ? 1 : (int)(end - dir),
                           end == dir ? "." : dir, file);
        if (len > 0 && (size_t)len < sizeof full) {
            int e = exec_error(full);
            if (!e) return 0;
            if (e == EACCES) err = EACCES; /* as execvp: a found but unrunnable file wins */
        }
        if (!*end) return err;
        dir = end;
    }
}

/* Starts domain `rank` without waiting for its exec: a failed exec is learned when the child
 * is reaped (exit 127 with g.exec_err[rank] set). Returns -1 (after saying why) when it could
 * not even be forked. */
static int start_domain(int rank, char **prog_argv, int prog_argc)
{
    static char env[NENV][PATH_MAX + 16];
    int nenv = make_env(rank, env);
    int secret_pipe = g.tcp && g.agent; /* the secret goes on the domain's stdin */
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
    size_t argc = (size_t)nw + (g.agent ? 1 + (size_t)nenv : 0) + (size_t)prog_argc + 1;
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
        for (int i = 0; i < nenv; i++)
            argv[k++] = env[i];
    }
    for (int i = 0; i < prog_argc; i++)
        argv[k++] = prog_argv[i];
    argv[k] = NULL;

    int sp[2] = {-1, -1};
    if (secret_pipe && pipe2(sp, O_CLOEXEC)) {
        say("pipe: %s", strerror(errno));
        free(argv);
        free(agent);
        return -1;
    }
    pid_t parent = getpid();
    sigset_t all, old_mask;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old_mask);
    pid_t pid = fork();
    if (pid != 0) sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (pid < 0) {
        say("cannot start domain %d: fork: %s", rank, strerror(errno));
        if (secret_pipe) {
            close(sp[0]);
            close(sp[1]);
        }
        free(argv);
        free(agent);
        return -1;
    }
    if (pid == 0) {
        /* Child: cor-run is single-threaded, so setenv is safe here. */
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive cor-run */
        if (getppid() != parent) _exit(127);
        child_signals_default();
        if (secret_pipe) {
            dup2(sp[0], 0); /* dup2 clears close-on-exec on 0 */
        } else if (rank > 0) {
            int nul = open("/dev/null", O_RDONLY);
            if (nul >= 0) {
                dup2(nul, 0);
                close(nul);
            }
        }
        for (int i = 0; i < nenv; i++)
            putenv(env[i]);
        execvp(argv[0], argv);
        g.exec_err[rank] = errno ? errno : ENOEXEC; /* a shared page: the parent reads it */
        _exit(127);
    }
    g.dom[rank].pid = pid;
    g.dom[rank].state = D_RUNNING;
    g.nlive++;
    pid_insert(pid, rank);
    if (!g.exec_name) g.exec_name = strdup(argv[0]);
    if (secret_pipe) {
        close(sp[0]);
        /* 65 bytes into an empty pipe: never blocks. Domain 0 then reads our stdin through
         * the same pipe (relay_stdin); the others see its end, as /dev/null. */
        char line[COR_BOOT_KEY_HEX + 2];
        int n = snprintf(line, sizeof line, "%s\n", g.secret_hex);
        if (write(sp[1], line, (size_t)n) != n && errno != EPIPE) /* EPIPE: its exec failed */
            say("cannot give domain %d the session secret: %s", rank, strerror(errno));
        memset(line, 0, sizeof line);
        if (rank == 0 && stdin_relayable()) {
            fcntl(sp[1], F_SETFL, O_NONBLOCK);
            g.relay_fd = sp[1];
            g.stdin_open = 1;
        } else {
            close(sp[1]);
        }
    }
    if (verbose) say("domain %d started as pid %ld", rank, (long)pid);
    free(argv);
    free(agent);
    return 0;
}

/* Domain 0's stdin when it is our pipe: what cor-run reads on its stdin, passed on. */
static void relay_stdin(short in_events, short out_events)
{
    if (g.stdin_open && g.relay_len == 0 && (in_events & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t k = read(0, g.relay, sizeof g.relay);
        if (k > 0)
            g.relay_len = (size_t)k;
        else if (k == 0 || (errno != EINTR && errno != EAGAIN))
            g.stdin_open = 0;
    }
    if (g.relay_fd >= 0 && g.relay_len > 0 && (out_events & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t k = write(g.relay_fd, g.relay, g.relay_len);
        if (k > 0) {
            memmove(g.relay, g.relay + k, g.relay_len - (size_t)k);
            g.relay_len -= (size_t)k;
        } else if (k < 0 && errno != EINTR && errno != EAGAIN) {
            g.relay_len = 0;
            g.stdin_open = 0; /* domain 0 closed its stdin: nobody reads it any more */
        }
    }
    if (g.relay_fd >= 0 && !g.stdin_open && g.relay_len == 0) {
        close(g.relay_fd);
        g.relay_fd = -1;
    }
}

/* ---- the loop ----------------------------------------------------------------------------------
 */

static void reap(void)
{
    for (;;) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid <= 0) return;
        int r = pid_lookup(pid);
        if (r >= 0) {
            struct domain *d = &g.dom[r];
            d->state = D_REAPED;
            d->wstatus = ws;
            g.nlive--;
            if (g.exec_err && g.exec_err[r] && WIFEXITED(ws) && WEXITSTATUS(ws) == 127) {
                /* Its exec failed: nothing useful can run. Stop what started, at once; the
                 * first such domain is named at the end (they fail alike). */
                d->dead = 1;
                g.ndead++;
                if (!g.start_failed) {
                    g.start_failed = 1;
                    for (int s = 0; s < g.n; s++)
                        g.dom[s].dead = 1;
                    signal_live(SIGTERM, 1);
                    g.stage = 2;
                    g.stage_deadline = now_s() + KILL_WAIT_S;
                }
            }
            /* The process is gone, so its connection holds all it ever wrote (FINISH...). */
            if (d->conn >= 0) {
                int ci = d->conn;
                conn_read(ci);
                conn_flush(ci);
                conn_close(ci);
            }
            if (d->lost_at > 0) g.nlost_wait--;
            d->lost_at = 0;
            if (!g.start_failed) domain_exited(d);
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
    return g.nlive;
}

static void check_timers(void)
{
    double t = now_s();
    for (int r = 0; r < g.n && g.nlost_wait > 0; r++) {
        struct domain *d = &g.dom[r];
        if (d->lost_at > 0 && t - d->lost_at >= LOST_WAIT_S) {
            d->lost_at = 0;
            g.nlost_wait--;
            if (d->state == D_RUNNING)
                declare_dead(r, "closed its bootstrap connection before finishing (still "
                                "running)");
        }
    }
    /* Connections that did not join: their timeouts are seconds, so a look every 100 ms
     * (not at every event: that was O(N) per event) is exact enough. */
    int look = g.nanon > 0 && t >= g.next_anon_check;
    if (look) g.next_anon_check = t + 0.1;
    for (int i = 0; look && i < g.nconns; i++) {
        struct conn *c = &g.conns[i];
        if (c->fd < 0 || c->rank >= 0) continue;
        if (c->tcp && !c->authed && t - c->opened > AUTH_TIMEOUT_S) {
            c->refusal = REF_SLOW;
            if (verbose) say("refused a TCP connection that did not prove the secret in time");
            conn_close(i);
        } else if (t - c->opened > ANON_TIMEOUT_S) {
            c->refusal = REF_HELLO;
            conn_close(i);
        }
    }
    if (g.any_joined && g.stage == 0 && g.njoined < g.n && t - g.started > g.start_timeout) {
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
    for (int r = 0; r < g.n && g.nlost_wait > 0; r++)
        if (g.dom[r].lost_at > 0 && g.dom[r].lost_at + LOST_WAIT_S < next)
            next = g.dom[r].lost_at + LOST_WAIT_S;
    if (g.stage > 0 && g.stage_deadline < next) next = g.stage_deadline;
    double ms = (next - t) * 1000.0 + 1;
    return ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms;
}

/* Output pending on connection i (lines, or the shared table)? */
static int conn_pending(const struct conn *c)
{
    return c->table_pending || c->out_len > c->out_off;
}

/* Flushes connection i after an event or a handler queued output; closes it when it broke,
 * or when it was given up (closing) and what it still had to say is out. */
static void conn_service(int i)
{
    struct conn *c = &g.conns[i];
    if (c->fd < 0) return;
    if (conn_pending(c) && conn_flush(i) < 0)
        conn_close(i);
    else if (c->closing && !conn_pending(c))
        conn_close(i); /* gave up on it (does not read, or out of memory) */
}

static void run_loop(void)
{
    enum { MAX_EVENTS = 256 };
    struct epoll_event ev[MAX_EVENTS];
    while (live_domains() > 0) {
        if (g.stage == 3 && now_s() >= g.stage_deadline) {
            say("%d domain(s) did not go away after SIGKILL; giving up on them", live_domains());
            break;
        }
        struct pollfd pf[5];
        pf[0] = (struct pollfd){.fd = g.sigr, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = g.lfd, .events = POLLIN};
        int relaying = g.relay_fd >= 0;
        pf[2] = (struct pollfd){.fd = relaying && g.stdin_open && !g.relay_len ? 0 : -1,
                                .events = POLLIN};
        pf[3] = (struct pollfd){.fd = relaying && g.relay_len ? g.relay_fd : -1, .events = POLLOUT};
        pf[4] = (struct pollfd){.fd = g.epfd, .events = POLLIN}; /* the connections */
        int k = poll(pf, 5, next_timeout_ms());
        if (k < 0 && errno != EINTR) {
            say("poll: %s", strerror(errno));
            break;
        }
        if (k > 0) {
            /* Connections first: a slot closed here is not reused before the next turn
             * (accept comes after), so no event below names a newcomer by mistake. */
            int ne = pf[4].revents ? epoll_wait(g.epfd, ev, MAX_EVENTS, 0) : 0;
            for (int e = 0; e < ne; e++) {
                int i = (int)ev[e].data.u32;
                if (i >= g.nconns) continue;
                struct conn *c = &g.conns[i];
                if (c->fd < 0) continue; /* closed by an earlier event of this batch */
                int bad = 0;
                if (ev[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) bad = conn_read(i) < 0;
                if (bad)
                    conn_close(i);
                else
                    conn_service(i);
            }
            if (pf[0].revents) handle_signals();
            if (pf[1].revents & POLLIN) accept_conns();
            if (pf[2].revents || pf[3].revents) relay_stdin(pf[2].revents, pf[3].revents);
        }
        reap();
        check_timers();
        /* Sends queued by handlers (DEAD, RELEASE, TABLE) go out without waiting a turn. */
        for (int d = 0; d < g.ndirty; d++) {
            int i = g.dirty[d];
            g.conns[i].dirty = 0;
            conn_service(i);
        }
        g.ndirty = 0;
    }
}

/* ---- setup and main ------------------------------------------------------------------------ */

/* Is host `h` this machine? 1 yes, 0 no (*ai then holds its first address), -1 cannot tell. */
static int host_is_local(const char *h, struct sockaddr_storage *out, socklen_t *outlen)
{
    char me[256] = "";
    gethostname(me, sizeof me - 1);
    size_t ml = strcspn(me, ".");
    if (!strcmp(h, "localhost") || !strcmp(h, me) || (strlen(h) == ml && !strncmp(h, me, ml)))
        return 1;
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res;
    if (getaddrinfo(h, NULL, &hints, &res)) return -1;
    int local = 0;
    for (struct addrinfo *ai = res; ai && !local; ai = ai->ai_next) {
        /* An address we can bind is ours. */
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        struct sockaddr_storage ss;
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        ((struct sockaddr_in *)&ss)->sin_port = 0; /* same offset in sockaddr_in6 */
        local = bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) == 0;
        close(fd);
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *outlen = res->ai_addrlen;
    freeaddrinfo(res);
    return local;
}

/* The listening address when --hosts names other hosts and --listen is not given: our
 * address toward the first of them (the kernel's route choice, by a connected UDP socket,
 * which sends nothing). Returns 1 and fills host[] if TCP is needed, 0 if every host is this
 * one, -1 after saying why it cannot choose. */
static int listen_for_hosts(char *host, size_t cap)
{
    for (int i = 0; i < g.nhosts; i++) {
        struct sockaddr_storage peer, me;
        socklen_t pl = 0, ml = sizeof me;
        int local = host_is_local(g.hosts[i], &peer, &pl);
        if (local == 1) continue;
        if (local < 0) {
            say("--hosts: cannot resolve '%s' to choose the address other hosts reach cor-run "
                "on; give it with --listen ADDR[:PORT]",
                g.hosts[i]);
            return -1;
        }
        int fd = socket(peer.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ((struct sockaddr_in *)&peer)->sin_port = htons(9); /* any port: nothing is sent */
        if (fd < 0 || connect(fd, (struct sockaddr *)&peer, pl) ||
            getsockname(fd, (struct sockaddr *)&me, &ml) ||
            getnameinfo((struct sockaddr *)&me, ml, host, (socklen_t)cap, NULL, 0,
                        NI_NUMERICHOST)) {
            say("--hosts: no route to '%s' (%s); give the address to listen on with --listen",
                g.hosts[i], strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        close(fd);
        return 1;
    }
    return 0;
}

/* --listen ADDR[:PORT] or [ADDR6][:PORT] into host[] and port[] ("0": any free port). */
static int split_listen(const char *s, char *host, size_t cap, char *port)
{
    const char *h = s, *p = NULL;
    size_t hn;
    if (*s == '[') {
        const char *e = strchr(s, ']');
        if (!e) return -1;
        h = s + 1;
        hn = (size_t)(e - h);
        if (e[1] == ':')
            p = e + 2;
        else if (e[1])
            return -1;
    } else {
        const char *colon = strrchr(s, ':');
        if (colon && strchr(s, ':') == colon) { /* one colon: ADDR:PORT */
            hn = (size_t)(colon - s);
            p = colon + 1;
        } else { /* none, or a bare IPv6 address */
            hn = strlen(s);
        }
    }
    if (hn == 0 || hn >= cap) return -1;
    memcpy(host, h, hn);
    host[hn] = 0;
    long v = 0;
    if (p && parse_int(p, 0, 65535, &v)) return -1;
    snprintf(port, 8, "%ld", v);
    return 0;
}

/* Every domain may connect before cor-run accepts the first (they start together). */
static int backlog(void)
{
    return g.n + 16 > 128 ? g.n + 16 : 128;
}

static int make_tcp_rendezvous(void)
{
    char host[256], port[8] = "0";
    if (g.listen_arg) {
        if (split_listen(g.listen_arg, host, sizeof host, port)) {
            say("--listen wants ADDR[:PORT] or [ADDR6][:PORT], not '%s'", g.listen_arg);
            return -1;
        }
    } else if (listen_for_hosts(host, sizeof host) != 1) {
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int e = getaddrinfo(host, port, &hints, &res);
    if (e) {
        say("--listen: cannot resolve '%s': %s", host, gai_strerror(e));
        return -1;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai && g.lfd < 0; ai = ai->ai_next) {
        char num[INET6_ADDRSTRLEN];
        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, num, sizeof num, NULL, 0, NI_NUMERICHOST))
            continue;
        if (!strcmp(num, "0.0.0.0") || !strcmp(num, "::")) {
            say("--listen: '%s' is every address; the domains need one they can reach", host);
            freeaddrinfo(res);
            return -1;
        }
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1;
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, backlog())) {
            err = errno;
            if (fd >= 0) close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char pnum[8];
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        getnameinfo((struct sockaddr *)&ss, sl, num, sizeof num, pnum, sizeof pnum,
                    NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(g.boot_addr, sizeof g.boot_addr,
                 ss.ss_family == AF_INET6 ? "tcp:[%s]:%s" : "tcp:%s:%s", num, pnum);
        g.lfd = fd;
    }
    freeaddrinfo(res);
    if (g.lfd < 0) {
        say("cannot listen on %s port %s: %s", host, port, strerror(err));
        return -1;
    }
    if (cor__boot_random(g.secret, sizeof g.secret)) {
        say("getrandom: %s (no secret for the session)", strerror(errno));
        return -1;
    }
    cor__bootline_hex(g.secret, sizeof g.secret, g.secret_hex);
    if (verbose) say("rendezvous on %s", g.boot_addr);
    return 0;
}

static int make_rendezvous(void)
{
    if (g.tcp) return make_tcp_rendezvous();
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
    if (rc || chmod(g.sock, 0600) || listen(g.lfd, backlog())) {
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

/* Strangers are said at the end, on stderr, whatever -v says: someone knocked. */
static void report_refused(void)
{
    if (g.forged || g.replayed)
        say("dropped %lu forged and %lu replayed line(s) on proven connections", g.forged,
            g.replayed);
    unsigned total = 0;
    for (int i = 0; i < REF_KINDS; i++)
        total += g.refused[i];
    if (!total) return;
    char why[512];
    size_t n = 0;
    why[0] = 0;
    for (int i = 1; i < REF_KINDS; i++)
        if (g.refused[i])
            n += (size_t)snprintf(why + n, sizeof why - n, "%s%u %s", n ? ", " : "", g.refused[i],
                                  refusal_names[i]);
    say("refused %u connection(s) to the rendezvous: %s", total, why);
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
        "                         (COR_BIND; default loopback, or auto with --agent or TCP;\n"
        "                         auto: the domain's address toward cor-run on TCP, else its\n"
        "                         first interface that is up and not loopback)\n"
        "      --agent CMD        start each domain through CMD, e.g. 'ssh {host}' or\n"
        "                         'ip netns exec ns{rank}'. CMD is split at spaces ('...' and\n"
        "                         \"...\" group words); in it {rank} is the domain number, {size}\n"
        "                         is N, {host} the domain's host from --hosts, {{ a literal '{'.\n"
        "                         The domain runs as CMD env COR_...=... PROGRAM ARGS.\n"
        "      --hosts H1,H2,...  hosts for {host}, given out round-robin (default localhost).\n"
        "                         If one is not this host, the rendezvous is TCP on our address\n"
        "                         toward the first such host (unless --listen says where)\n"
        "      --listen ADDR[:PORT]  make the rendezvous TCP on ADDR ([ADDR] for IPv6), port\n"
        "                         PORT (default: any free port). Domains on other hosts connect\n"
        "                         there and must prove they know the session secret (HMAC\n"
        "                         challenge; the secret never travels on the connection). With\n"
        "                         --agent the secret goes to each domain on its stdin (ssh\n"
        "                         carries it encrypted; nothing shows in ps), otherwise in its\n"
        "                         environment. Without --listen and remote --hosts: a UNIX\n"
        "                         socket, so the agent must run the domains on this host\n"
        "                         (namespaces, containers, sudo)\n"
        "      --grace SEC        after a domain dies, how long the others may take to exit\n"
        "                         before SIGTERM (then SIGKILL %.0f s later); default 3\n"
        "      --start-timeout SEC  how long domains may take to join the session; default 60\n"
        "  -v, --verbose          say what happens\n"
        "  -h, --help             this text\n"
        "\n"
        "Each domain gets COR_BOOT (rendezvous socket path, or tcp:ADDR:PORT), COR_RANK,\n"
        "COR_SIZE, COR_SESSION (16 hex digits), COR_ROUTE, COR_PORTS, COR_BIND and, on TCP,\n"
        "COR_BOOT_SECRET (the secret, or - for a line on stdin). Only domain 0 reads the\n"
        "terminal. Connections refused at the rendezvous (wrong secret, garbage, too slow) are\n"
        "counted and reported on stderr at the end; the session goes on.\n"
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
    enum { O_ROUTE = 256, O_PORTS, O_BIND, O_AGENT, O_HOSTS, O_LISTEN, O_GRACE, O_START };
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},
        {"route", required_argument, NULL, O_ROUTE},
        {"ports", required_argument, NULL, O_PORTS},
        {"bind", required_argument, NULL, O_BIND},
        {"agent", required_argument, NULL, O_AGENT},
        {"hosts", required_argument, NULL, O_HOSTS},
        {"listen", required_argument, NULL, O_LISTEN},
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
    g.lfd = g.sigr = g.sigw = g.relay_fd = g.epfd = -1;
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
            if (!cor__bootline_route_ok(optarg)) {
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
        case O_LISTEN:
            if (!*optarg || strlen(optarg) > 255) {
                say("--listen wants ADDR[:PORT], not '%s'", optarg);
                return 2;
            }
            g.listen_arg = optarg;
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
    static char auto_listen[INET6_ADDRSTRLEN + 2];
    if (g.listen_arg) {
        g.tcp = 1;
    } else if (g.nhosts) {
        char a[INET6_ADDRSTRLEN];
        int need = listen_for_hosts(a, sizeof a);
        if (need < 0) return 2;
        /* IPv6 as [ADDR] for split_listen */
        snprintf(auto_listen, sizeof auto_listen, strchr(a, ':') ? "[%s]" : "%s", a);
        g.tcp = need;
        if (need) g.listen_arg = auto_listen;
    }
    if (!g.bind) g.bind = g.agent || g.tcp ? "auto" : "loopback";
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
    g.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g.epfd < 0) {
        say("epoll_create1: %s", strerror(errno));
        remove_rendezvous();
        return 1;
    }
    if (children_alloc()) {
        remove_rendezvous();
        return 1;
    }
    int perr = g.agent ? 0 : program_error(argv[optind]);
    if (perr) {
        say("cannot start domain 0: %s: %s (no domain was started)", argv[optind], strerror(perr));
        remove_rendezvous();
        return 127;
    }
    g.started = now_s();
    int fork_failed = 0;
    for (int r = 0; r < g.n && !fork_failed; r++)
        if (start_domain(r, argv + optind, argc - optind)) fork_failed = 1;
    if (fork_failed && !g.start_failed) {
        /* Nothing useful can run: stop what started, at once. */
        g.start_failed = 1;
        for (int r = 0; r < g.n; r++)
            g.dom[r].dead = 1;
        signal_live(SIGTERM, 1);
        g.stage = 2;
        g.stage_deadline = now_s() + KILL_WAIT_S;
    }
    run_loop();
    /* Domains whose exec failed (they were started without waiting): the first is named,
     * with how many more failed alike (the rest were stopped, often before their own exec). */
    int nfailed = 0, first_failed = -1;
    for (int r = 0; r < g.n && g.exec_err; r++)
        if (g.exec_err[r] && g.dom[r].state == D_REAPED) {
            nfailed++;
            if (first_failed < 0) first_failed = r;
        }
    if (nfailed == 1)
        say("cannot start domain %d: %s: %s", first_failed, g.exec_name ? g.exec_name : "?",
            strerror(g.exec_err[first_failed]));
    else if (nfailed > 1)
        say("cannot start domain %d: %s: %s (and %d more domains alike)", first_failed,
            g.exec_name ? g.exec_name : "?", strerror(g.exec_err[first_failed]), nfailed - 1);
    remove_rendezvous();
    remove_session_files();
    for (int i = 0; i < g.nconns; i++)
        conn_close(i); /* strangers still waiting are counted too */
    report_refused();

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
    if (g.start_failed) return 127;
    if ((died || g.startup_failed) && worst == 0) worst = 1;
    if (g.user_signal && worst == 0) worst = 128 + g.user_signal;
    return worst;
}
