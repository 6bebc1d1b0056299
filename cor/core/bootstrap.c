/*
 * The cor-run backend of the bootstrap (boot.h): a connection to cor-run's rendezvous socket.
 *
 * cor-run sets, for each domain it starts:
 *   COR_BOOT     path of cor-run's rendezvous UNIX socket (mode 0600)
 *   COR_RANK     this domain's number, COR_SIZE the number of domains
 *   COR_SESSION  64-bit session cookie, 16 hex digits (also the idp macro part: low 32 bits)
 *   COR_ROUTE    default route name; COR_PORTS hard ports per route; COR_BIND address hint
 * The connection stays open until finish: it carries barriers and death notices, and cor-run
 * takes its loss as the domain's death.
 *
 * Wire protocol (version 1, shared with apps/cor-run.c). Both directions carry lines of
 * printable ASCII ending in '\n', at most BOOT_LINE_MAX bytes with the newline; a longer line
 * or an unknown word is a protocol error and ends the connection. Addresses travel hex-encoded
 * ("-" for an empty one) so that they may hold any byte.
 *
 *   domain -> cor-run                         cor-run -> domain
 *   HELLO 1 <rank> <size> <session> <pid>     WELCOME            (or ERR <why>, then close)
 *   ADDR <k> <route> <port_index> <hex>       TABLE <size> <n>
 *   PUB <n>   (after ADDR 0..n-1)             A <rank> <k> <route> <port_index> <hex>  x size*n
 *   BARRIER <seq>   (seq = 1, 2, ...)         END
 *   FINISH                                    RELEASE <seq>
 *   LOST <rank>                               DEAD <rank> <why>
 *                                             BYE                (answer to FINISH)
 *
 * LOST: this domain's routes gave `rank` up (it answered nothing for their dead time, as a
 * stopped or wedged process does): cor-run declares it dead for everyone and stops it, so the
 * others' barriers and finalize do not wait for a process that still lives but is lost.
 *
 * A background thread reads the socket (WELCOME, TABLE, RELEASE, DEAD, BYE) so that the rest
 * of libcor never blocks on it; callers wait on a condition variable, and writes are
 * serialized by their own mutex. Losing the connection before cor__boot_finish means cor-run
 * is gone: the session is over, and the domain ends itself with SIGTERM (unless
 * COR_BOOT_ORPHAN=keep) so that no domain outlives its launcher.
 */
#include "boot.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BOOT_LINE_MAX 1024
#define BOOT_MAX_ADDRS COR_BOOT_MAX_ADDRS
#define BOOT_BYE_TIMEOUT_MS 5000 /* how long finish waits for cor-run's BYE */

struct corrun_boot {
    struct cor_boot base; /* rank, size, cookie: set at init, read-only after */
    int fd; /* -1 in a one-domain session; written under wmu, read by the reader thread */

    pthread_mutex_t wmu;  /* serializes writes to fd */
    pthread_mutex_t bmu;  /* one barrier at a time */
    unsigned barrier_seq; /* under bmu */

    pthread_t reader;
    int reader_started;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    int welcomed, bye, lost, finishing, exchanged;
    char err[256];     /* ERR text from cor-run, "" if none */
    unsigned released; /* highest RELEASE seq */
    int ndead;
    unsigned char *dead;     /* [size]: death notice received */
    unsigned char *notified; /* [size]: death callback made */
    cor_boot_death_fn death_fn;
    void *death_arg;
    /* Table being received (reader thread) and the finished one (table_ready). */
    struct cor_boot_addr *table;
    unsigned char *table_seen;
    int table_n, table_got, table_open, table_ready;
};

static void boot_log(const struct corrun_boot *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void boot_log(const struct corrun_boot *b, const char *fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cor__boot_log(b ? &b->base : NULL, "cor-run", "%s", msg);
}

static const struct cor_boot_ops corrun_ops;

/* ---- small parsers (all input is checked) ------------------------------------------------ */

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (!s || !*s) return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || strlen(s) != 16) return -1;
    for (int i = 0; i < 16; i++) {
        int c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

static void hex_encode(const char *s, char *out)
{
    static const char digits[] = "0123456789abcdef";
    if (!*s) {
        strcpy(out, "-");
        return;
    }
    for (; *s; s++) {
        *out++ = digits[(unsigned char)*s >> 4];
        *out++ = digits[(unsigned char)*s & 15];
    }
    *out = 0;
}

/* Decodes into out[cap]; rejects odd lengths, non-hex, NUL bytes and overflow. */
static int hex_decode(const char *h, char *out, size_t cap)
{
    if (strcmp(h, "-") == 0) {
        out[0] = 0;
        return 0;
    }
    size_t n = strlen(h);
    if (n == 0 || n % 2 || n / 2 >= cap) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int v = 0;
        for (int j = 0; j < 2; j++) {
            char c = h[2 * i + j];
            int d = (c >= '0' && c <= '9')   ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        if (v == 0) return -1;
        out[i] = (char)v;
    }
    out[n / 2] = 0;
    return 0;
}

/* Splits line into at most max words (in place); the last word keeps the rest of the line
 * when rest_last is set (for free text). Returns the word count. */
static int split_words(char *line, char **w, int max, int rest_last)
{
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        w[n++] = p;
        if (rest_last && n == max) break;
        while (*p && *p != ' ')
            p++;
        if (*p) *p++ = 0;
    }
    return n;
}

/* ---- writing -------------------------------------------------------------------------- */

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t k = send(fd, buf, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        buf += k;
        len -= (size_t)k;
    }
    return 0;
}

/* Sends one whole message (one or more lines) atomically with respect to other writers. */
static int boot_send(struct corrun_boot *b, const char *text, size_t len)
{
    pthread_mutex_lock(&b->wmu);
    int rc = write_all(b->fd, text, len);
    pthread_mutex_unlock(&b->wmu);
    if (rc) {
        boot_log(b, "cannot write to cor-run: %s", strerror(errno));
        return COR_EBOOT;
    }
    return COR_OK;
}

static void corrun_lost(struct cor_boot *base, int rank)
{
    struct corrun_boot *b = (struct corrun_boot *)base;
    if (b->fd < 0) return;
    pthread_mutex_lock(&b->mu);
    int known = b->dead[rank] || b->lost || b->finishing;
    pthread_mutex_unlock(&b->mu);
    if (known) return; /* cor-run told us first, or the session is over for us */
    char line[32];
    int n = snprintf(line, sizeof line, "LOST %d\n", rank);
    boot_send(b, line, (size_t)n);
}

/* ---- the reader thread ------------------------------------------------------------------ */

static void deliver_death(struct corrun_boot *b, int rank, const char *why)
{
    pthread_mutex_lock(&b->mu);
    int first = !b->dead[rank];
    if (first) {
        b->dead[rank] = 1;
        b->ndead++;
    }
    cor_boot_death_fn fn = NULL;
    void *arg = NULL;
    if (b->death_fn && !b->notified[rank]) {
        b->notified[rank] = 1;
        fn = b->death_fn;
        arg = b->death_arg;
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (first) boot_log(b, "domain %d died: %s", rank, why);
    if (fn) fn(arg, rank, why);
}

/* Handles one line from cor-run; returns -1 on a protocol error. Called without mu. */
static int handle_line(struct corrun_boot *b, char *line)
{
    char *w[7];
    long v[4];
    if (strncmp(line, "DEAD ", 5) == 0) {
        int n = split_words(line, w, 3, 1);
        if (n < 2 || parse_long(w[1], 0, b->base.size - 1, &v[0])) return -1;
        deliver_death(b, (int)v[0], n == 3 ? w[2] : "(no reason given)");
        return 0;
    }
    if (strncmp(line, "ERR ", 4) == 0) {
        pthread_mutex_lock(&b->mu);
        snprintf(b->err, sizeof b->err, "%.200s", line + 4);
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        boot_log(b, "cor-run says: %s", line + 4);
        return 0;
    }
    int n = split_words(line, w, 7, 0);
    if (n == 0) return -1;
    int rc = 0;
    pthread_mutex_lock(&b->mu);
    if (strcmp(w[0], "WELCOME") == 0 && n == 1) {
        b->welcomed = 1;
    } else if (strcmp(w[0], "BYE") == 0 && n == 1) {
        b->bye = 1;
    } else if (strcmp(w[0], "RELEASE") == 0 && n == 2 && !parse_long(w[1], 1, 0x7fffffffL, &v[0])) {
        if ((unsigned)v[0] > b->released) b->released = (unsigned)v[0];
    } else if (strcmp(w[0], "TABLE") == 0 && n == 3 && !b->table_open && !b->table_ready &&
               !parse_long(w[1], b->base.size, b->base.size, &v[0]) &&
               !parse_long(w[2], 1, BOOT_MAX_ADDRS, &v[1])) {
        size_t cnt = (size_t)b->base.size * (size_t)v[1];
        b->table = calloc(cnt, sizeof *b->table);
        b->table_seen = calloc(cnt, 1);
        if (!b->table || !b->table_seen) {
            rc = -1;
        } else {
            b->table_n = (int)v[1];
            b->table_got = 0;
            b->table_open = 1;
        }
    } else if (strcmp(w[0], "A") == 0 && n == 6 && b->table_open &&
               !parse_long(w[1], 0, b->base.size - 1, &v[0]) &&
               !parse_long(w[2], 0, b->table_n - 1, &v[1]) &&
               !parse_long(w[4], -1000000, 1000000, &v[2]) && cor__boot_route_name_ok(w[3])) {
        size_t i = (size_t)v[0] * (size_t)b->table_n + (size_t)v[1];
        struct cor_boot_addr *a = &b->table[i];
        if (b->table_seen[i] || hex_decode(w[5], a->addr, sizeof a->addr)) {
            rc = -1;
        } else {
            snprintf(a->route, sizeof a->route, "%s", w[3]);
            a->port_index = (int)v[2];
            b->table_seen[i] = 1;
            b->table_got++;
        }
    } else if (strcmp(w[0], "END") == 0 && n == 1 && b->table_open &&
               b->table_got == b->base.size * b->table_n) {
        b->table_open = 0;
        b->table_ready = 1;
    } else {
        rc = -1;
    }
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 32 || (unsigned char)*s > 126) *s = '?';
}

/* Handles the complete lines in buf[0 .. *have) and moves a partial last line to the start of
 * buf (BOOT_BUF bytes). Returns NULL, or why the connection must end. No I/O: the reader
 * thread feeds it what read() returns, and tests/core/fuzz_boot.c feeds it anything. */
#define BOOT_BUF (2 * BOOT_LINE_MAX)
static const char *boot_take_lines(struct corrun_boot *b, char *buf, size_t *have)
{
    size_t start = 0;
    char *nl;
    while ((nl = memchr(buf + start, '\n', *have - start)) != NULL) {
        *nl = 0;
        char *line = buf + start;
        size_t len = (size_t)(nl - line);
        start += len + 1;
        if (len + 1 > BOOT_LINE_MAX || memchr(line, 0, len)) return "protocol error";
        char copy[BOOT_LINE_MAX];
        memcpy(copy, line, len + 1);
        if (handle_line(b, copy)) {
            sanitize(line);
            boot_log(b, "protocol error from cor-run on line '%.80s'", line);
            return "protocol error";
        }
    }
    memmove(buf, buf + start, *have - start);
    *have -= start;
    if (*have >= BOOT_LINE_MAX) return "line too long from cor-run";
    return NULL;
}

static void *reader_main(void *arg)
{
    struct corrun_boot *b = arg;
    prctl(PR_SET_NAME, "cor-boot", 0, 0, 0); /* (bootstrap.c stands apart from the core) */
    char buf[BOOT_BUF];
    size_t have = 0;
    const char *why = "connection closed by cor-run";
    for (;;) {
        ssize_t k = read(b->fd, buf + have, sizeof buf - have);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k < 0) why = strerror(errno);
            break;
        }
        have += (size_t)k;
        const char *bad = boot_take_lines(b, buf, &have);
        if (bad) {
            why = bad;
            break;
        }
    }
    pthread_mutex_lock(&b->mu);
    int expected = b->finishing;
    b->lost = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (!expected) {
        boot_log(b, "lost the connection to cor-run (%s): the session is over", why);
        const char *orphan = getenv("COR_BOOT_ORPHAN");
        if (!orphan || strcmp(orphan, "keep") != 0) kill(getpid(), SIGTERM);
    }
    return NULL;
}

/* ---- waiting ----------------------------------------------------------------------------- */

static struct timespec deadline_in_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Waits on cv (mu held) until the deadline; returns ETIMEDOUT when it passed. */
static int wait_until(struct corrun_boot *b, const struct timespec *deadline)
{
    if (!deadline) {
        pthread_cond_wait(&b->cv, &b->mu);
        return 0;
    }
    return pthread_cond_timedwait(&b->cv, &b->mu, deadline);
}

/* ---- the interface ------------------------------------------------------------------------ */

static void boot_free(struct corrun_boot *b)
{
    if (!b) return;
    if (b->fd >= 0) close(b->fd);
    pthread_mutex_destroy(&b->wmu);
    pthread_mutex_destroy(&b->bmu);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->dead);
    free(b->notified);
    free(b->table);
    free(b->table_seen);
    free(b);
}

static struct corrun_boot *boot_alloc(int rank, int size)
{
    struct corrun_boot *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->base.rank = rank;
    b->base.size = size;
    b->fd = -1;
    pthread_mutex_init(&b->wmu, NULL);
    pthread_mutex_init(&b->bmu, NULL);
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->dead = calloc((size_t)size, 1);
    b->notified = calloc((size_t)size, 1);
    if (!b->dead || !b->notified) {
        boot_free(b);
        return NULL;
    }
    return b;
}

static int env_long(const char *name, long lo, long hi, long *out)
{
    const char *s = getenv(name);
    if (!s) {
        boot_log(NULL, "COR_BOOT is set but %s is missing", name);
        return -1;
    }
    if (parse_long(s, lo, hi, out)) {
        boot_log(NULL, "%s='%.40s' is not a number in %ld..%ld", name, s, lo, hi);
        return -1;
    }
    return 0;
}

static int boot_connect(struct corrun_boot *b, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        boot_log(b, "COR_BOOT path too long (%zu bytes)", strlen(path));
        return -1;
    }
    strcpy(sa.sun_path, path);
    b->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->fd < 0) {
        boot_log(b, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(b->fd, (struct sockaddr *)&sa, sizeof sa)) {
        boot_log(b, "cannot connect to cor-run at %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int cor__boot_corrun_init(struct cor_boot **bootp)
{
    *bootp = NULL;
    const char *path = getenv("COR_BOOT");

    long r, n;
    uint64_t c;
    if (env_long("COR_SIZE", 1, COR_MAX_DOMAINS, &n) || env_long("COR_RANK", 0, n - 1, &r))
        return COR_EBOOT;
    if (parse_hex64(getenv("COR_SESSION"), &c)) {
        boot_log(NULL, "COR_SESSION must be 16 hex digits");
        return COR_EBOOT;
    }
    struct corrun_boot *b = boot_alloc((int)r, (int)n);
    if (!b) return COR_ENOMEM;
    b->base.cookie = c;
    if (boot_connect(b, path)) goto fail;
    if (pthread_create(&b->reader, NULL, reader_main, b)) {
        boot_log(b, "cannot start the bootstrap thread");
        goto fail;
    }
    b->reader_started = 1;

    char hello[128];
    int len = snprintf(hello, sizeof hello, "HELLO 1 %d %d %016llx %ld\n", b->base.rank,
                       b->base.size, (unsigned long long)c, (long)getpid());
    if (boot_send(b, hello, (size_t)len)) goto fail;

    struct timespec dl = deadline_in_ms(1000L * cor__boot_timeout_s());
    int rc = COR_OK;
    pthread_mutex_lock(&b->mu);
    while (!b->welcomed && !b->lost && !b->err[0] && rc == COR_OK)
        if (wait_until(b, &dl) == ETIMEDOUT) rc = COR_ETIMEDOUT;
    if (!b->welcomed && rc == COR_OK) rc = COR_EBOOT;
    pthread_mutex_unlock(&b->mu);
    if (rc) {
        boot_log(b, "cor-run did not accept this domain (%s)",
                 rc == COR_ETIMEDOUT ? "timed out" : "refused or closed");
        goto fail;
    }
    b->base.ops = &corrun_ops;
    *bootp = &b->base;
    return COR_OK;

fail:
    if (b->reader_started) {
        pthread_mutex_lock(&b->mu);
        b->finishing = 1; /* a failed join is not the launcher's death */
        pthread_mutex_unlock(&b->mu);
        shutdown(b->fd, SHUT_RDWR);
        pthread_join(b->reader, NULL);
    }
    boot_free(b);
    return COR_EBOOT;
}

static int corrun_exchange(struct cor_boot *base, int n, const struct cor_boot_addr *mine,
                           struct cor_boot_addr **all)
{
    struct corrun_boot *b = (struct corrun_boot *)base;
    int rc = cor__boot_check_addrs(&b->base, "cor-run", n, mine);
    if (rc) return rc;
    pthread_mutex_lock(&b->mu);
    int again = b->exchanged;
    b->exchanged = 1;
    pthread_mutex_unlock(&b->mu);
    if (again) {
        boot_log(b, "exchange: called twice (once per session)");
        return COR_ESTATE;
    }

    /* One message: the ADDR lines and PUB. */
    size_t cap = (size_t)n * (BOOT_LINE_MAX) + 32, len = 0;
    char *msg = malloc(cap);
    if (!msg) return COR_ENOMEM;
    for (int i = 0; i < n; i++) {
        char hex[2 * COR_ADDR_MAX + 2];
        hex_encode(mine[i].addr, hex);
        len += (size_t)snprintf(msg + len, cap - len, "ADDR %d %s %d %s\n", i, mine[i].route,
                                mine[i].port_index, hex);
    }
    len += (size_t)snprintf(msg + len, cap - len, "PUB %d\n", n);
    rc = boot_send(b, msg, len);
    free(msg);
    if (rc) return rc;

    struct timespec dl = deadline_in_ms(1000L * cor__boot_timeout_s());
    pthread_mutex_lock(&b->mu);
    while (!b->table_ready && !b->lost && !b->err[0] && b->ndead == 0 && rc == COR_OK)
        if (wait_until(b, &dl) == ETIMEDOUT) rc = COR_ETIMEDOUT;
    if (b->table_ready) {
        rc = COR_OK;
        if (b->table_n != n) {
            boot_log(b,
                     "exchange: domains published different numbers of addresses (%d here, "
                     "%d in the table)",
                     n, b->table_n);
            rc = COR_EBOOT;
        } else {
            *all = b->table;
            b->table = NULL;
        }
    } else if (rc == COR_OK) {
        rc = b->ndead ? COR_EPEERDEAD : COR_EBOOT;
    }
    pthread_mutex_unlock(&b->mu);
    if (rc)
        boot_log(b, "exchange failed (%s)",
                 rc == COR_EPEERDEAD   ? "a domain died"
                 : rc == COR_ETIMEDOUT ? "timed out"
                                       : "cor-run refused or left");
    return rc;
}

static void corrun_on_death(struct cor_boot *base, cor_boot_death_fn fn, void *arg)
{
    struct corrun_boot *b = (struct corrun_boot *)base;
    pthread_mutex_lock(&b->mu);
    b->death_fn = fn;
    b->death_arg = arg;
    pthread_mutex_unlock(&b->mu);
    if (!fn) return;
    /* Deaths heard before registration are replayed here, in the caller's thread. */
    for (int r = 0; r < b->base.size; r++) {
        pthread_mutex_lock(&b->mu);
        int call = b->dead[r] && !b->notified[r];
        if (call) b->notified[r] = 1;
        pthread_mutex_unlock(&b->mu);
        if (call) fn(arg, r, "died before the death callback was registered");
    }
}

static int corrun_barrier(struct cor_boot *base)
{
    struct corrun_boot *b = (struct corrun_boot *)base;
    pthread_mutex_lock(&b->bmu);
    unsigned seq = ++b->barrier_seq;
    pthread_mutex_lock(&b->mu);
    int rc = b->ndead ? COR_EPEERDEAD : (b->lost || b->err[0]) ? COR_EBOOT : COR_OK;
    pthread_mutex_unlock(&b->mu);
    if (rc == COR_OK) {
        char line[64];
        int len = snprintf(line, sizeof line, "BARRIER %u\n", seq);
        rc = boot_send(b, line, (size_t)len);
    }
    if (rc == COR_OK) {
        pthread_mutex_lock(&b->mu);
        /* No timeout: a barrier may wait for a long computation; a death or the loss of
         * cor-run ends it. */
        while (b->released < seq && !b->ndead && !b->lost && !b->err[0])
            wait_until(b, NULL);
        if (b->released < seq) rc = b->ndead ? COR_EPEERDEAD : COR_EBOOT;
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&b->bmu);
    return rc;
}

static void corrun_finish(struct cor_boot *base)
{
    struct corrun_boot *b = (struct corrun_boot *)base;
    if (b->fd >= 0) {
        pthread_mutex_lock(&b->mu);
        b->finishing = 1;
        int lost = b->lost;
        pthread_mutex_unlock(&b->mu);
        /* Wait for BYE so that cor-run has read FINISH before this process exits. */
        if (!lost && boot_send(b, "FINISH\n", 7) == COR_OK) {
            struct timespec dl = deadline_in_ms(BOOT_BYE_TIMEOUT_MS);
            pthread_mutex_lock(&b->mu);
            while (!b->bye && !b->lost)
                if (wait_until(b, &dl) == ETIMEDOUT) break;
            pthread_mutex_unlock(&b->mu);
        }
        shutdown(b->fd, SHUT_RDWR);
        if (b->reader_started) pthread_join(b->reader, NULL);
    }
    boot_free(b);
}

static const struct cor_boot_ops corrun_ops = {
    .name = "cor-run",
    .exchange = corrun_exchange,
    .barrier = corrun_barrier,
    .lost = corrun_lost,
    .on_death = corrun_on_death,
    .finish = corrun_finish,
};
