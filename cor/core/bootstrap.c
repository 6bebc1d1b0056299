/*
 * The cor-run backend of the bootstrap (boot.h): a connection to cor-run's rendezvous, a UNIX
 * socket on this host or TCP across hosts. The lines, their limits and the authentication
 * exchange on TCP are in bootline.h, shared with apps/tools/cor-run.c.
 *
 * cor-run sets, for each domain it starts:
 *   COR_BOOT     path of cor-run's rendezvous UNIX socket (mode 0600), or tcp:HOST:PORT
 *   COR_BOOT_SECRET  with tcp: the session secret, 64 hex digits, or "-": a line on stdin
 *   COR_RANK     this domain's number, COR_SIZE the number of domains
 *   COR_SESSION  64-bit session cookie, 16 hex digits (also the idp macro part: low 32 bits)
 *   COR_ROUTE    default route name; COR_PORTS hard ports per route; COR_BIND address hint
 * The connection stays open until finish: it carries barriers and death notices, and cor-run
 * takes its loss as the domain's death.
 *
 * LOST: this domain's routes gave `rank` up (it answered nothing for their dead time, as a
 * stopped or wedged process does): cor-run declares it dead for everyone and stops it, so the
 * others' barriers and finalize do not wait for a process that still lives but is lost.
 *
 * On TCP, before anything else, the domain and cor-run prove to each other that they know the
 * session secret (COR_BOOT_SECRET: 64 hex digits, or "-" for a line on standard input, which
 * cor-run writes there for domains it starts through an agent). That exchange is done here,
 * synchronously, before the reader thread starts. Our end of that connection is the address
 * toward the other hosts: COR_BIND=auto binds the routes there (cor_boot.local_addr).
 *
 * A background thread reads the socket (WELCOME, TABLE, RELEASE, DEAD, BYE) so that the rest
 * of libcor never blocks on it; callers wait on a condition variable, and writes are
 * serialized by their own mutex. Losing the connection before cor__boot_finish means cor-run
 * is gone: the session is over, and the domain ends itself with SIGTERM (unless
 * COR_BOOT_ORPHAN=keep) so that no domain outlives its launcher.
 */
#include "boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

#include "boot_auth.h"
#include "bootline.h"
#include "knobs.h"

#define BOOT_BYE_TIMEOUT_MS 5000   /* how long finish waits for cor-run's BYE */
#define BOOT_AUTH_TIMEOUT_MS 10000 /* the secret on stdin, and the TCP challenge */
#define BOOT_SEAL_LOG_MAX 8        /* lines dropped for their seal that are said one by one */

struct corrun_boot {
    struct cor_boot base; /* rank, size, cookie: set at init, read-only after */
    int fd; /* -1 in a one-domain session; written under wmu, read by the reader thread */

    pthread_mutex_t wmu; /* serializes writes to fd */
    /* TCP: every line after the proof is sealed (boot_auth.h). tx under wmu, so that numbers
     * go out in the order of the writes; rx, forged and replayed: the reader thread's. */
    int sealed; /* set before the reader thread starts */
    struct cor_boot_chan tx, rx;
    unsigned long forged, replayed;
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
    unsigned char *dead;               /* [size]: death notice received */
    unsigned char *notified;           /* [size]: death callback made */
    struct cor_boot_listener listener; /* the core's death callback */
    /* Table being received (reader thread) and the finished one (table_ready). */
    struct cor_boot_addr *table;
    unsigned char *table_seen;
    int table_n, table_got, table_open, table_ready;
    /* A sealed connection's table is one block (bootline.h): between the sealed TABLE, which
     * carries the digest, and the sealed END, the A lines come unsealed and are hashed here.
     * The reader thread's. */
    int block;
    struct cor_sha256 block_hash;
    unsigned char block_digest[COR_SHA256_BYTES];
};

static void boot_log(const struct corrun_boot *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 32 || (unsigned char)*s > 126) *s = '?';
}

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

static int parse_long(const char *s, long lo, long hi, long *out)
{
    return cor__bootline_long(s, lo, hi, out);
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

/* Seals each line of text[len] (whole lines) into a new buffer: its length in *out_len. */
static char *seal_lines(struct corrun_boot *b, const char *text, size_t len, size_t *out_len)
{
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    size_t cap = len + lines * COR_BOOT_SEAL_MAX + 1, n = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* callers send whole lines */
        int k = cor__boot_seal(&b->tx, p, (size_t)(nl - p), out + n, cap - n);
        if (k < 0) {
            free(out);
            errno = EMSGSIZE;
            return NULL;
        }
        n += (size_t)k;
        p = nl + 1;
    }
    *out_len = n;
    return out;
}

/* Sends one whole message (one or more lines) atomically with respect to other writers,
 * sealed on TCP. */
static int boot_send(struct corrun_boot *b, const char *text, size_t len)
{
    pthread_mutex_lock(&b->wmu);
    int rc = -1;
    if (b->sealed) {
        size_t n;
        char *sealed = seal_lines(b, text, len, &n);
        if (sealed) rc = write_all(b->fd, sealed, n);
        free(sealed);
    } else {
        rc = write_all(b->fd, text, len);
    }
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
    struct cor_bootline l = {.kind = COR_BL_LOST, .rank = rank};
    char line[64];
    int n = cor__bootline_format(&l, line, sizeof line);
    if (n > 0) boot_send(b, line, (size_t)n);
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
    cor_boot_death_fn fn;
    void *arg;
    int call = !b->notified[rank] && cor__boot_listener_begin(&b->listener, &fn, &arg);
    if (call) b->notified[rank] = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (first) boot_log(b, "domain %d died: %s", rank, why);
    if (!call) return;
    fn(arg, rank, why);
    cor__boot_listener_end(&b->listener, &b->cv, &b->mu);
}

/* Handles one line from cor-run; returns -1 on a protocol error. Called without mu. */
static int corrun_line(struct corrun_boot *b, const char *text)
{
    struct cor_bootline l;
    if (cor__bootline_parse(text, &l)) return -1;
    if (l.kind == COR_BL_DEAD) {
        if (l.rank >= b->base.size) return -1;
        deliver_death(b, (int)l.rank, l.text[0] ? l.text : "(no reason given)");
        return 0;
    }
    if (l.kind == COR_BL_ERR) {
        pthread_mutex_lock(&b->mu);
        snprintf(b->err, sizeof b->err, "%.200s", l.text[0] ? l.text : "(no reason given)");
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        boot_log(b, "cor-run says: %s", l.text);
        return 0;
    }
    int rc = 0;
    pthread_mutex_lock(&b->mu);
    switch (l.kind) {
    case COR_BL_WELCOME:
        b->welcomed = 1;
        break;
    case COR_BL_BYE:
        b->bye = 1;
        break;
    case COR_BL_RELEASE:
        if ((unsigned)l.seq > b->released) b->released = (unsigned)l.seq;
        break;
    case COR_BL_TABLE: {
        if (b->table_open || b->table_ready || l.size != b->base.size) {
            rc = -1;
            break;
        }
        /* A digest only where lines are sealed: it is the seal of TABLE that vouches for it. */
        if (l.digest != b->sealed) {
            rc = -1;
            break;
        }
        if (l.digest) {
            b->block = 1;
            cor__sha256_init(&b->block_hash);
            memcpy(b->block_digest, l.mac, sizeof b->block_digest);
        }
        size_t cnt = (size_t)b->base.size * (size_t)l.n;
        b->table = calloc(cnt, sizeof *b->table);
        b->table_seen = calloc(cnt, 1);
        if (!b->table || !b->table_seen) {
            rc = -1;
        } else {
            b->table_n = (int)l.n;
            b->table_got = 0;
            b->table_open = 1;
        }
        break;
    }
    case COR_BL_A: {
        if (!b->table_open || l.rank >= b->base.size || l.k >= b->table_n) {
            rc = -1;
            break;
        }
        size_t i = (size_t)l.rank * (size_t)b->table_n + (size_t)l.k;
        struct cor_boot_addr *a = &b->table[i];
        if (b->table_seen[i]) {
            rc = -1;
            break;
        }
        _Static_assert(sizeof a->route == COR_BOOT_ROUTE_MAX, "route name sizes differ");
        _Static_assert(sizeof a->addr == COR_BOOT_ADDR_MAX, "address sizes differ");
        memcpy(a->route, l.route, sizeof a->route);
        memcpy(a->addr, l.addr, sizeof a->addr);
        a->port_index = (int)l.port;
        b->table_seen[i] = 1;
        b->table_got++;
        break;
    }
    case COR_BL_END:
        if (!b->table_open || b->table_got != b->base.size * b->table_n) {
            rc = -1;
            break;
        }
        if (b->block) {
            unsigned char got[COR_SHA256_BYTES];
            cor__sha256_final(&b->block_hash, got);
            b->block = 0;
            if (memcmp(got, b->block_digest, sizeof got) != 0) {
                pthread_mutex_unlock(&b->mu);
                boot_log(b, "the address table from cor-run does not match its sealed digest "
                            "(lines were injected into it or removed): refused whole");
                pthread_mutex_lock(&b->mu);
                rc = -1;
                break;
            }
        }
        b->table_open = 0;
        b->table_ready = 1;
        break;
    default: /* a line for the other direction, or authentication after it ended */
        rc = -1;
    }
    /* Nobody waits for a single table line: waking the waiters at each of the N lines made
     * N^2 wake-ups a session at start-up (docs/scale.md). */
    if (l.kind != COR_BL_A && l.kind != COR_BL_TABLE) pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* A line that failed its seal: dropped, counted, said (the first few: a stream of forgeries
 * must not flood the log; boot_free says the totals). */
static void seal_refused(struct corrun_boot *b, enum cor_boot_seal_check why, char *line)
{
    unsigned long n = why == COR_SEAL_REPLAYED ? ++b->replayed : ++b->forged;
    if (b->forged + b->replayed > BOOT_SEAL_LOG_MAX) return;
    sanitize(line);
    boot_log(b, "dropped a %s line on the connection to cor-run (%lu so far): '%.60s'",
             why == COR_SEAL_REPLAYED ? "replayed" : "forged", n, line);
}

static int reader_take_one(void *arg, char *line)
{
    struct corrun_boot *b = arg;
    if (b->sealed && b->block && line[0] != '@') {
        /* Inside the table's block: an unsealed address line, counted in the digest that the
         * sealed END checks. Anything else here is not cor-run's. */
        size_t n = strlen(line);
        cor__sha256_update(&b->block_hash, line, n);
        cor__sha256_update(&b->block_hash, "\n", 1);
        if (strncmp(line, "A ", 2) == 0 && corrun_line(b, line) == 0) return 0;
        sanitize(line);
        boot_log(b, "a line inside the sealed address table that is no address: '%.80s'", line);
        return -1;
    }
    if (b->sealed) {
        const char *body;
        enum cor_boot_seal_check sc = cor__boot_unseal(&b->rx, line, &body);
        if (sc == COR_SEAL_FORGED || sc == COR_SEAL_REPLAYED) {
            seal_refused(b, sc, line);
            return 0;
        }
        if (sc == COR_SEAL_GAP) {
            boot_log(b, "lines from cor-run went missing (a sealed line out of sequence)");
            return -1;
        }
        line += body - line; /* the body, in place */
    }
    if (corrun_line(b, line) == 0) return 0;
    sanitize(line);
    boot_log(b, "protocol error from cor-run on line '%.80s'", line);
    return -1;
}

/* Handles the complete lines in buf[0 .. *have) and moves a partial last line to the start of
 * buf (COR_BOOT_BUF bytes). Returns NULL, or why the connection must end. No I/O: the reader
 * thread feeds it what read() returns, and tests/core/fuzz_bootline.c feeds it anything. */
static const char *boot_take_lines(struct corrun_boot *b, char *buf, size_t *have)
{
    int rc = cor__bootline_take(buf, have, reader_take_one, b);
    if (rc == COR_BL_TOO_LONG) return "line too long from cor-run";
    if (rc) return "protocol error";
    return NULL;
}

static void *reader_main(void *arg)
{
    struct corrun_boot *b = arg;
    prctl(PR_SET_NAME, "cor-boot", 0, 0, 0); /* (bootstrap.c stands apart from the core) */
    char buf[COR_BOOT_BUF];
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
        const char *orphan = cor__knob_str(COR_K_BOOT_ORPHAN);
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
    if (b->forged + b->replayed > 0)
        boot_log(b, "dropped %lu forged and %lu replayed lines from the connection to cor-run",
                 b->forged, b->replayed);
    cor__boot_chan_clear(&b->tx);
    cor__boot_chan_clear(&b->rx);
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

static int env_long(int id, long lo, long hi, long *out)
{
    const char *name = cor__knob_name(id), *s = cor__knob_str(id);
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

static int connect_unix(struct corrun_boot *b, const char *path)
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

/* "HOST:PORT" or "[HOST]:PORT" (IPv6) into host[cap] and port[8]. */
static int split_host_port(const char *s, char *host, size_t cap, char *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || strlen(colon + 1) == 0 || strlen(colon + 1) > 5) return -1;
    const char *h = s;
    size_t hn = (size_t)(colon - s);
    if (*h == '[') {
        if (hn < 3 || h[hn - 1] != ']') return -1;
        h++;
        hn -= 2;
    }
    if (hn >= cap) return -1;
    memcpy(host, h, hn);
    host[hn] = 0;
    strcpy(port, colon + 1);
    return 0;
}

static int connect_tcp(struct corrun_boot *b, const char *where)
{
    char host[256], port[8];
    if (split_host_port(where, host, sizeof host, port)) {
        boot_log(b, "COR_BOOT=tcp:%.200s is not tcp:HOST:PORT", where);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int e = getaddrinfo(host, port, &hints, &res);
    if (e) {
        boot_log(b, "cannot resolve cor-run's address %s: %s", where, gai_strerror(e));
        return -1;
    }
    int err = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        b->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (b->fd < 0) {
            err = errno;
            continue;
        }
        if (connect(b->fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        err = errno;
        close(b->fd);
        b->fd = -1;
    }
    freeaddrinfo(res);
    if (b->fd < 0) {
        boot_log(b, "cannot connect to cor-run at %s: %s", where, strerror(err));
        return -1;
    }
    int one = 1;
    setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* barriers are small */
    /* Our end of this connection is our address toward cor-run's host: COR_BIND=auto. */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(b->fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, b->base.local_addr, sizeof b->base.local_addr, NULL,
                    0, NI_NUMERICHOST) != 0)
        b->base.local_addr[0] = 0;
    return 0;
}

/* Reads one line (up to its newline, no further) from fd within the deadline, into
 * line[COR_BOOT_LINE_MAX]. Byte by byte: what follows the line is not ours to take (stdin),
 * or must stay for the reader thread. */
static int read_line(int fd, char *line, const struct timespec *deadline)
{
    size_t n = 0;
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long ms = (deadline->tv_sec - t.tv_sec) * 1000 + (deadline->tv_nsec - t.tv_nsec) / 1000000;
        if (ms <= 0) return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int k = poll(&pf, 1, (int)ms);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -errno;
        if (k == 0) return -ETIMEDOUT;
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) return -errno;
        if (r == 0) return -EPIPE;
        if (c == '\n') {
            line[n] = 0;
            return 0;
        }
        if (c == 0 || n + 2 > COR_BOOT_LINE_MAX) return -EPROTO;
        line[n++] = c;
    }
}

/* The session secret: COR_BOOT_SECRET as 64 hex digits, or "-": one such line on stdin. */
static int read_secret(struct corrun_boot *b, unsigned char secret[COR_BOOT_KEY_BYTES])
{
    const char *s = cor__knob_str(COR_K_BOOT_SECRET);
    char line[COR_BOOT_LINE_MAX];
    if (!s || !*s) {
        boot_log(b, "COR_BOOT names a TCP rendezvous but COR_BOOT_SECRET is not set");
        return -1;
    }
    if (strcmp(s, "-") == 0) {
        struct timespec dl = deadline_in_ms(BOOT_AUTH_TIMEOUT_MS);
        int e = read_line(0, line, &dl);
        if (e) {
            boot_log(b, "cannot read the session secret from standard input: %s",
                     e == -EPROTO ? "line too long" : strerror(-e));
            return -1;
        }
        s = line;
    }
    int rc = cor__bootline_unhex(s, secret, COR_BOOT_KEY_BYTES);
    if (rc) boot_log(b, "the session secret is not %d hex digits", COR_BOOT_KEY_HEX);
    memset(line, 0, sizeof line);
    return rc;
}

/* The challenge on a TCP rendezvous (bootline.h): cor-run proves itself too, so that a
 * stranger listening in its place cannot feed this domain a table. */
static int authenticate(struct corrun_boot *b, const unsigned char secret[COR_BOOT_KEY_BYTES])
{
    struct timespec dl = deadline_in_ms(BOOT_AUTH_TIMEOUT_MS);
    char line[COR_BOOT_LINE_MAX], out[COR_BOOT_LINE_MAX + 1];
    struct cor_bootline ch, l;
    int e = read_line(b->fd, line, &dl);
    if (e || cor__bootline_parse(line, &ch) || ch.kind != COR_BL_CHALLENGE) {
        boot_log(b, "no challenge from cor-run (%s)", e ? strerror(-e) : "it sent something else");
        return -1;
    }
    memset(&l, 0, sizeof l);
    l.kind = COR_BL_PROOF;
    if (cor__boot_random(l.nonce, sizeof l.nonce)) {
        boot_log(b, "getrandom: %s", strerror(errno));
        return -1;
    }
    cor__boot_mac(secret, COR_BOOT_ROLE_DOMAIN, ch.nonce, l.nonce, l.mac);
    int n = cor__bootline_format(&l, out, sizeof out);
    if (n < 0 || boot_send(b, out, (size_t)n)) return -1;
    unsigned char want[COR_BOOT_KEY_BYTES];
    cor__boot_mac(secret, COR_BOOT_ROLE_CORRUN, ch.nonce, l.nonce, want);
    struct cor_bootline p;
    e = read_line(b->fd, line, &dl);
    if (e || cor__bootline_parse(line, &p) || (p.kind != COR_BL_PROVEN && p.kind != COR_BL_ERR)) {
        boot_log(b, "cor-run did not answer the proof (%s)", e ? strerror(-e) : "bad line");
        return -1;
    }
    if (p.kind == COR_BL_ERR) {
        boot_log(b, "cor-run refused this domain: %s", p.text);
        return -1;
    }
    if (!cor__boot_mac_equal(p.mac, want, sizeof want)) {
        boot_log(b, "the rendezvous does not know the session secret: not our cor-run");
        return -1;
    }
    cor__boot_chan_init(&b->tx, secret, COR_BOOT_ROLE_DOMAIN, ch.nonce, l.nonce);
    cor__boot_chan_init(&b->rx, secret, COR_BOOT_ROLE_CORRUN, ch.nonce, l.nonce);
    b->sealed = 1;
    return 0;
}

static int boot_connect(struct corrun_boot *b, const char *where)
{
    if (strncmp(where, "tcp:", 4) != 0) return connect_unix(b, where);
    unsigned char secret[COR_BOOT_KEY_BYTES];
    if (read_secret(b, secret)) return -1;
    int rc = connect_tcp(b, where + 4);
    if (rc == 0) rc = authenticate(b, secret);
    memset(secret, 0, sizeof secret);
    return rc;
}

int cor__boot_corrun_init(struct cor_boot **bootp)
{
    *bootp = NULL;
    const char *path = cor__knob_str(COR_K_BOOT);

    long r, n;
    uint64_t c;
    if (env_long(COR_K_SIZE, 1, COR_MAX_DOMAINS, &n) || env_long(COR_K_RANK, 0, n - 1, &r))
        return COR_EBOOT;
    unsigned char sb[8];
    if (cor__bootline_unhex(cor__knob_str(COR_K_SESSION), sb, sizeof sb)) {
        boot_log(NULL, "COR_SESSION must be 16 hex digits");
        return COR_EBOOT;
    }
    c = 0;
    for (int i = 0; i < 8; i++)
        c = c << 8 | sb[i];
    struct corrun_boot *b = boot_alloc((int)r, (int)n);
    if (!b) return COR_ENOMEM;
    b->base.cookie = c;
    if (boot_connect(b, path)) goto fail;
    if (pthread_create(&b->reader, NULL, reader_main, b)) {
        boot_log(b, "cannot start the bootstrap thread");
        goto fail;
    }
    b->reader_started = 1;

    struct cor_bootline hl = {.kind = COR_BL_HELLO, .version = COR_BOOT_VERSION};
    hl.rank = b->base.rank;
    hl.size = b->base.size;
    hl.session = c;
    hl.pid = (long)getpid();
    char hello[COR_BOOT_LINE_MAX + 1];
    int len = cor__bootline_format(&hl, hello, sizeof hello);
    if (len < 0 || boot_send(b, hello, (size_t)len)) goto fail;

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
    size_t cap = (size_t)(n + 1) * (COR_BOOT_LINE_MAX + 1), len = 0;
    char *msg = malloc(cap);
    if (!msg) return COR_ENOMEM;
    struct cor_bootline l = {.kind = COR_BL_ADDR};
    for (int i = 0; i < n && rc == COR_OK; i++) {
        l.k = i;
        memcpy(l.route, mine[i].route, sizeof l.route);
        memcpy(l.addr, mine[i].addr, sizeof l.addr);
        l.port = mine[i].port_index;
        int k = cor__bootline_format(&l, msg + len, cap - len);
        if (k < 0) rc = COR_EINVAL; /* check_addrs let nothing through that does not fit */
        len += k < 0 ? 0 : (size_t)k;
    }
    l.kind = COR_BL_PUB;
    l.n = n;
    int k = rc ? -1 : cor__bootline_format(&l, msg + len, cap - len);
    if (k < 0) {
        free(msg);
        return COR_EINVAL;
    }
    len += (size_t)k;
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
    /* A call the reader thread began before ends first (it never waits for us). */
    cor__boot_listener_set(&b->listener, &b->cv, &b->mu, fn, arg);
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
        struct cor_bootline l = {.kind = COR_BL_BARRIER, .seq = seq};
        char line[64];
        int len = cor__bootline_format(&l, line, sizeof line);
        rc = len < 0 ? COR_ELIMIT : boot_send(b, line, (size_t)len);
    }
    if (rc == COR_OK) {
        struct cor_boot_wait w;
        cor__boot_wait_begin(&b->base, &w);
        pthread_mutex_lock(&b->mu);
        /* No timeout: a barrier may wait for a long computation; a death or the loss of
         * cor-run ends it. cor-run tells of deaths, not of a domain stopped (SIGSTOP) before
         * it entered: a slow barrier has the routes watch every peer (boot.h), and one they
         * give up is lost to cor-run, which declares it dead. */
        while (b->released < seq && !b->ndead && !b->lost && !b->err[0])
            cor__boot_wait(&b->base, &w, &b->cv, &b->mu);
        if (b->released < seq) rc = b->ndead ? COR_EPEERDEAD : COR_EBOOT;
        pthread_mutex_unlock(&b->mu);
        cor__boot_wait_end(&b->base, &w);
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
