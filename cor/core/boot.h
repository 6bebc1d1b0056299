/*
 * Joining a session: how a domain learns its rank, the session, and its peers' route
 * addresses, and hears that a peer died. Private to libcor.
 *
 * One interface, several backends chosen at run time by cor__boot_init from the environment
 * (boot.c; the order is the README's "Bootstrap" section):
 *   cor-run  COR_BOOT is set (bootstrap.c: cor-run's rendezvous socket)
 *   pmix     PMIx variables are set (boot_pmix.c: Slurm's srun --mpi=pmix, Open MPI's mpirun;
 *            the plugin cor_boot_pmix.so, loaded only then: boot_host.h)
 *   none     neither: a one-domain session (rank 0, size 1, random cookie)
 * A program that looks launched but cannot reach its launcher gets COR_EBOOT with a log line
 * naming the launcher, never a silent one-domain session. libcorpvm's dynamic sessions do not
 * come through here: libcorpvm joins with cor_init_join and connects peers itself.
 *
 * Every backend's state starts with struct cor_boot (rank, size, cookie, ops), and the
 * cor__boot_* calls below go through its ops table.
 */
#ifndef COR_BOOT_H
#define COR_BOOT_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "bootline.h" /* the limits (COR_BOOT_MAX_ADDRS...), shared with cor-run */
#include "cor/route.h"

struct cor_boot_addr {
    char route[32];
    int port_index; /* hard port index on that route; raw ports use index -1 - k */
    char addr[COR_ADDR_MAX];
};

/* Called from a bootstrap thread when domain `rank` died; `why` is text from the launcher. */
typedef void (*cor_boot_death_fn)(void *arg, int rank, const char *why);

struct cor_boot;

/* The core's death callback as a backend keeps it, under the backend's own mutex `mu`; calls
 * run outside mu, and cv is broadcast when one ends. */
struct cor_boot_listener {
    cor_boot_death_fn fn;
    void *arg;
    int calls; /* calls running now: clearing the callback waits until none is */
};
/* With mu held: sets the callback, or clears it (fn NULL) and waits on cv until no call of
 * the old one runs (the core frees what the callback touches once on_death returns). */
void cor__boot_listener_set(struct cor_boot_listener *l, pthread_cond_t *cv, pthread_mutex_t *mu,
                            cor_boot_death_fn fn, void *arg);
/* With mu held: 0 if no callback is set; else counts a call and gives the callback, which the
 * caller then calls without mu and ends with cor__boot_listener_end (which takes mu). */
int cor__boot_listener_begin(struct cor_boot_listener *l, cor_boot_death_fn *fn, void **arg);
void cor__boot_listener_end(struct cor_boot_listener *l, pthread_cond_t *cv, pthread_mutex_t *mu);

/* The core's watch of the peers a slow barrier waits for. A launcher's barrier (a PMIx fence)
 * may never end when a domain dies before it entered: mpirun --enable-recovery tells nobody
 * and may not complete the fence, and with peers at first contact (connect.c) the routes do
 * not even know a domain this one never talked to, so nothing would find the death. So a
 * barrier that waited COR_BARRIER_WATCH_MS calls the core's watch (on = 1), which gives the
 * routes every peer it does not know yet and tells them it waits for each (await_peer,
 * route.h): a dead peer's closed port or a stopped peer's silence is found, the core reports
 * it lost (cor__boot_lost), and the barrier ends with COR_EPEERDEAD. At the barrier's end the
 * watch is called with on = 0. Quick barriers (every domain there within the time) cost
 * nothing. Set once by the core before any barrier, never cleared. */
typedef void (*cor_boot_watch_fn)(void *arg, int on);
/* A barrier's wait, for the backends (boot.c): the caller holds mu and loops on its own
 * condition around cor__boot_wait, which waits once on cv (a CLOCK_MONOTONIC condition
 * variable) and, once the barrier waited COR_BARRIER_WATCH_MS, calls the watch instead (mu
 * released meanwhile: the caller checks its condition again after every return). Begin it
 * before the barrier's first wait; end it (mu not held) before the barrier returns. */
struct cor_boot_wait {
    struct timespec watch_at; /* when the watch starts */
    int watching;             /* the watch was told on = 1 */
    int timed;                /* a watch is set and watch_at applies */
};
void cor__boot_wait_begin(struct cor_boot *b, struct cor_boot_wait *w);
void cor__boot_wait(struct cor_boot *b, struct cor_boot_wait *w, pthread_cond_t *cv,
                    pthread_mutex_t *mu);
void cor__boot_wait_end(struct cor_boot *b, struct cor_boot_wait *w);

/* A backend. Every slot but `died` and `leave` is mandatory (NULL: nothing to do); the calls'
 * contracts are those of cor__boot_* below. */
struct cor_boot_ops {
    const char *name; /* "cor-run", "pmix", "none": what logs and cor-info call it */
    int (*exchange)(struct cor_boot *b, int n, const struct cor_boot_addr *mine,
                    struct cor_boot_addr **all);
    int (*barrier)(struct cor_boot *b);
    /* Optional pair (NULL: cor__boot_publish keeps the exchange's table): publish returns
     * COR_ENOTSUP, having done nothing, when it cannot serve lookups (PMIx without the list
     * of local peers, which then come from the host names in the table). */
    int (*publish)(struct cor_boot *b, int n, const struct cor_boot_addr *mine);
    int (*lookup)(struct cor_boot *b, int rank, int n, struct cor_boot_addr *out);
    void (*leave)(struct cor_boot *b); /* NULL: the finalize barrier's end is enough */
    void (*lost)(struct cor_boot *b, int rank);
    void (*died)(struct cor_boot *b, int rank);
    void (*on_death)(struct cor_boot *b, cor_boot_death_fn fn, void *arg);
    void (*finish)(struct cor_boot *b);
};

/* The base every backend's state embeds first. Set once by the backend's init. */
struct cor_boot {
    const struct cor_boot_ops *ops;
    int rank, size;
    uint64_t cookie;
    /* This domain's IP address toward its peers, when the backend knows it (cor-run over
     * TCP: our end of the connection to cor-run), else "". COR_BIND=auto binds the routes
     * there (hport.c). */
    char local_addr[48];
    /* [size]: local[r] != 0 if domain r runs on this host, sharing its memory (/dev/shm); our
     * own rank included. The backend sets it when its launcher says which domains share the
     * node (PMIx: PMIX_LOCAL_PEERS); else cor__boot_exchange sets it from the host names every
     * domain publishes beside its addresses. Freed by cor__boot_finish. The one answer to
     * "which domains share memory with me" (cor_domain_local). */
    unsigned char *local;
    /* cor__boot_publish's kept table, for backends without lookup: domain r's addresses are
     * the blob (cor__boot_blob_encode) at kept[kept_at[r] .. kept_at[r + 1]). Read-only once
     * set; freed by cor__boot_finish. */
    unsigned char *kept;
    size_t *kept_at;
    int published;           /* n given to cor__boot_publish (0: not called) */
    unsigned lookups;        /* cor__boot_lookup calls (atomic; COR_BOOT_STATS says it at finish) */
    cor_boot_watch_fn watch; /* the core's (cor__boot_set_watch); NULL: none */
    void *watch_arg;
};

/* Reads the environment and joins the session through the backend it names.
 * Errors: COR_EBOOT (logged, naming the launcher), COR_ENOMEM, COR_EINVAL. */
int cor__boot_init(struct cor_boot **boot, int *rank, int *size, uint64_t *cookie);
/* Publishes this domain's addresses and returns everyone's: *all gets size * n entries,
 * rank r's at [r * n .. r * n + n), in the same order as `mine` (every domain publishes the
 * same routes and port indices). Blocks until all domains published. Once per session.
 * Free *all with free(). Beside the addresses each domain publishes its host name (one
 * more entry, route COR_BOOT_HOST_ROUTE, taken out of *all again): where the backend did not
 * set boot->local, the domains of our host name are the local ones. n < COR_BOOT_MAX_ADDRS. */
#define COR_BOOT_HOST_ROUTE "cor.host"
int cor__boot_exchange(struct cor_boot *boot, int n, const struct cor_boot_addr *mine,
                       struct cor_boot_addr **all);
/* The lazy form of cor__boot_exchange (COR_LAZY_PEERS): publishes our n addresses (and host
 * name) and returns once every domain published, without the table: a domain's addresses come
 * from cor__boot_lookup when it is first talked to. Backends that cannot look one domain up
 * (cor-run: its rendezvous sends the whole table to everyone) take the table here and keep
 * it, one compact blob per domain (~30 B an address), for cor__boot_lookup. Once per session,
 * instead of cor__boot_exchange. Errors as cor__boot_exchange. */
int cor__boot_publish(struct cor_boot *boot, int n, const struct cor_boot_addr *mine);
/* Domain `rank`'s n addresses (as it published them with cor__boot_publish) into out[n].
 * Thread-safe; a backend may ask its launcher (PMIx: one get from the node's server).
 * COR_EBOOT (logged) if the launcher has none or they are malformed, COR_EINVAL for a bad
 * rank or a call before cor__boot_publish. */
int cor__boot_lookup(struct cor_boot *boot, int rank, int n, struct cor_boot_addr *out);
/* Registers the death callback (called at most once per dead rank the launcher reports).
 * fn NULL unregisters it: when that returns, no call of the old callback is running or will
 * start (the core does this before freeing what the callback touches). */
void cor__boot_on_death(struct cor_boot *boot, cor_boot_death_fn fn, void *arg);
/* Sets the core's watch of a slow barrier's peers (cor_boot_watch_fn above), once, before
 * any barrier. */
void cor__boot_set_watch(struct cor_boot *boot, cor_boot_watch_fn fn, void *arg);
/* Blocks until every domain entered the barrier, or a domain died (COR_EPEERDEAD).
 * Thread-safe; one barrier at a time per domain. */
int cor__boot_barrier(struct cor_boot *boot);
/* Called by cor_finalize after its barrier succeeded, before it closes any port: returns once
 * every domain passed that barrier (or after a bound), so no domain closes its ports while
 * another still waits in the barrier and would take the closed port for a death. What happens
 * meanwhile (peers closing their ports after it) is a normal end: nothing fails. */
void cor__boot_leave(struct cor_boot *boot);
/* This domain's routes gave `rank` up. cor-run declares it dead for the whole session (and
 * stops it); launchers that cannot (PMIx) mark it dead here, so barriers fail instead of
 * waiting for it. Nothing in a one-domain session or once the death is known. */
void cor__boot_lost(struct cor_boot *boot, int rank);
/* The core saw domain `rank` die (its routes, or the launcher's notice): a backend whose
 * launcher tells nobody (PMIx) fails its barriers from now on rather than wait for it. */
void cor__boot_died(struct cor_boot *boot, int rank);
/* 1 if domain `rank` shares this host (boot->local; every domain while it is not set),
 * 0 if not or out of range. */
int cor__boot_local(const struct cor_boot *boot, int rank);
/* Says this domain finalized normally and leaves the session; frees boot. */
void cor__boot_finish(struct cor_boot *boot);

/* ---- for the backends (boot.c) ---- */

/* "cor[rank]: bootstrap (backend): msg" on stderr; b may be NULL (rank -1). */
void cor__boot_log(const struct cor_boot *b, const char *backend, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* COR_BOOT_TIMEOUT (seconds, 1..86400, default 120): how long init and exchange wait. */
int cor__boot_timeout_s(void);
/* A random nonzero 64-bit session cookie. */
uint64_t cor__boot_random_cookie(void);
/* Checks addresses before they are published: count 1..COR_BOOT_MAX_ADDRS, route names of
 * [A-Za-z0-9_.-], terminated addresses. COR_EINVAL (logged) if not. */
int cor__boot_check_addrs(const struct cor_boot *b, const char *backend, int n,
                          const struct cor_boot_addr *mine);
int cor__boot_route_name_ok(const char *s);
/* A domain's addresses as one binary-safe blob, for backends that move bytes (PMIx):
 * 'C', 1 (version), count, then per address: route length (1 byte), route, port index (4
 * bytes, big-endian, two's complement), address length (2 bytes, big-endian), address bytes.
 * encode: *blob from malloc (free it), COR_ENOMEM or COR_EINVAL. decode: the blob is
 * untrusted; it must hold exactly n well-formed addresses (route names as above, no NUL in an
 * address, nothing left over), else COR_EINVAL; out[n] is filled. */
int cor__boot_blob_encode(int n, const struct cor_boot_addr *mine, unsigned char **blob,
                          size_t *len);
int cor__boot_blob_decode(const unsigned char *blob, size_t len, int n, struct cor_boot_addr *out);

/* Backends' entry points: each allocates its state, fills the base, joins. */
int cor__boot_corrun_init(struct cor_boot **boot); /* bootstrap.c */
#ifdef COR_HAVE_PMIX
int cor__boot_pmix_init(struct cor_boot **boot); /* boot_pmix.c */
#endif

#endif
