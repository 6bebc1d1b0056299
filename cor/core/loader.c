/*
 * The route loader: cor_route_<name>.so from COR_ROUTE_PATH (a colon-separated list) or the
 * installed plugin folder, checked once here so the rest of the core can call its slots.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h" /* PACKAGE_VERSION */
#include "internal.h"
#include "knobs.h"

/* Checks the table once; on failure `why` says what is wrong. */
static int check_ops(const struct cor_route_ops *ops, const char *name, char *why, size_t wlen)
{
    if (ops->size < offsetof(struct cor_route_ops, counters) || ops->abi != COR_ROUTE_ABI) {
        snprintf(why, wlen, "route '%s': ABI %u, size %zu; this core needs ABI %u", name, ops->abi,
                 ops->size, COR_ROUTE_ABI);
        return COR_EROUTE;
    }
    if (!ops->open || !ops->close || !ops->address || !ops->add_peer || !ops->send ||
        !ops->progress || !ops->wait_fd || !ops->timeout_ms || !ops->caps) {
        snprintf(why, wlen, "route '%s': a mandatory operation is missing", name);
        return COR_EROUTE;
    }
    return COR_OK;
}

/* Optional slots exist only if the plugin was built with a table that long. */
#define ROUTE_HAS(ops, slot)                                                                       \
    ((ops)->size >= offsetof(struct cor_route_ops, slot) + sizeof((ops)->slot) && (ops)->slot)

/* Finds, dlopens and checks cor_route_<name>.so: the first folder of COR_ROUTE_PATH that has
 * it, else the installed one. Fails with `why` set: COR_ENOTFOUND when no folder's file
 * loads, COR_EROUTE when its table is bad; `path` gets the file tried last. Used by cor_init and by
 * cor_route_probe (cor-info). */
static int plugin_open(const char *name, char *path, size_t plen, char *why, size_t wlen,
                       void **dlp, const struct cor_route_ops **opsp)
{
    char file[64], sym[64], dirs[4096];
    snprintf(file, sizeof file, "cor_route_%s.so", name);
    snprintf(sym, sizeof sym, "cor_route_%s", name);
    snprintf(why, wlen, "%s not found in any plugin folder; set COR_ROUTE_PATH to its folder",
             file);
    *path = 0;
    const char *env = cor__knob_str(COR_K_ROUTE_PATH);
    snprintf(dirs, sizeof dirs, "%s%s%s", env ? env : "", env && *env ? ":" : "", COR_PLUGINDIR);
    void *dl = NULL;
    for (char *save, *dir = strtok_r(dirs, ":", &save); dir && !dl;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(path, plen, "%s/%s", dir, file);
        dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            const char *e = dlerror();
            /* a missing file in one folder is normal; remember any other failure */
            if (e && !strstr(e, "No such file")) snprintf(why, wlen, "%s", e);
        }
    }
    if (!dl) return COR_ENOTFOUND;
    const struct cor_route_ops *ops = dlsym(dl, sym);
    if (!ops) {
        snprintf(why, wlen, "route '%s': %s has no symbol %s", name, path, sym);
        dlclose(dl);
        return COR_EROUTE;
    }
    if (check_ops(ops, name, why, wlen)) {
        dlclose(dl);
        return COR_EROUTE;
    }
    *why = 0;
    *dlp = dl;
    *opsp = ops;
    return COR_OK;
}

static int name_ok(const char *name)
{
    return name && *name && strlen(name) < 32 && !strpbrk(name, "/.");
}

int cor__route_load(const char *name, bool quiet, struct cor_route **out)
{
    if (!name_ok(name)) {
        cor__log("route name '%s' is not valid", name ? name : "(null)");
        return COR_EINVAL;
    }
    char path[4096], why[1024];
    void *dl;
    const struct cor_route_ops *ops;
    int err = plugin_open(name, path, sizeof path, why, sizeof why, &dl, &ops);
    if (err) {
        /* quiet: an implicit route that does not load is no error, but a broken table is */
        if (!quiet || err != COR_ENOTFOUND) cor__log("cannot load route '%s': %s", name, why);
        return COR_EROUTE;
    }
    struct cor_route *r = calloc(1, sizeof *r);
    if (!r) {
        dlclose(dl);
        return COR_ENOMEM;
    }
    r->ops = ops;
    r->dl = dl;
    snprintf(r->name, sizeof r->name, "%s", name);
    *out = r;
    return COR_OK;
}

/* ---- preparing the routes while the launcher answers ---------------------------------------
 * A route's libraries may take long to load and initialize: libfabric 1.17, which the gm
 * route's libgm loads at its first fabric port or in prepare(), sleeps 0.2 s in a constructor
 * (libinfinipath's clock calibration) and reads /proc/kallsyms twice at its first query (0.05-0.2 s
 * of CPU, over 1 s with four domains starting at once on two cores). None of it needs the session,
 * so cor_init starts it in a thread of its own before it asks the launcher for the session
 * (PMIx_Init and a fence: tens to hundreds of ms spent waiting), and waits for the thread before it
 * opens the first port. The plugins are loaded here, in the caller's thread (dlopen: their
 * libraries and constructors, which may touch the environment, as libgm's does, and must not do it
 * beside the launcher's getenv and setenv); the thread calls each route's prepare(). The plugins
 * stay loaded; cor__route_load then finds them mapped. */

#define COR_PREPARE_MAX 8

static struct {
    pthread_t thread;
    bool running;
    int n;
    void (*prepare[COR_PREPARE_MAX])(void);
} preparing;

static void *prepare_routes(void *arg)
{
    (void)arg;
    for (int i = 0; i < preparing.n; i++)
        preparing.prepare[i]();
    return NULL;
}

void cor__route_prepare_start(const char *list)
{
    if (preparing.running || !list || !*list || !cor__knob_long(COR_K_PREPARE)) return;
    char names[256];
    snprintf(names, sizeof names, "%s", list);
    preparing.n = 0;
    for (char *save, *name = strtok_r(names, ",", &save); name && preparing.n < COR_PREPARE_MAX;
         name = strtok_r(NULL, ",", &save)) {
        char path[4096], why[1024];
        void *dl;
        const struct cor_route_ops *ops;
        if (!name_ok(name) || plugin_open(name, path, sizeof path, why, sizeof why, &dl, &ops))
            continue; /* cor__route_load reports it */
        if (ROUTE_HAS(ops, prepare)) preparing.prepare[preparing.n++] = ops->prepare;
    }
    if (preparing.n)
        preparing.running = pthread_create(&preparing.thread, NULL, prepare_routes, NULL) == 0;
}

void cor__route_prepare_wait(void)
{
    if (!preparing.running) return;
    pthread_join(preparing.thread, NULL);
    preparing.running = false;
}

void cor__route_unload(struct cor_route *r)
{
    if (!r) return;
    /* Keep the object mapped: sanitizers and late frees may still point into it. */
    free(r);
}

struct cor_route *cor__route_find(const char *name)
{
    for (int i = 0; i < g.nroutes; i++)
        if (!name || !strcmp(g.routes[i]->name, name)) return g.routes[i];
    return NULL;
}

int cor__route_has_counters(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, counters);
}

int cor__route_has_rma(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, mem_register) && ROUTE_HAS(ops, mem_deregister) && ROUTE_HAS(ops, put);
}

int cor__route_has_get(const struct cor_route_ops *ops)
{
    return cor__route_has_rma(ops) && ROUTE_HAS(ops, get);
}

int cor__route_has_mem(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, mem_alloc) && ROUTE_HAS(ops, mem_free);
}

int cor__route_has_peer_dead(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, peer_dead);
}

int cor__route_has_wait(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, wait);
}

int cor__route_has_wake(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, wait) && ROUTE_HAS(ops, wake);
}

int cor__route_lazy_peers(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, lazy_peers) == 1;
}

int cor__route_has_await(const struct cor_route_ops *ops)
{
    return ROUTE_HAS(ops, await_peer);
}

/* ---- cor_route_probe: what cor-info shows ------------------------------------------------- */

static void probe_deliver(void *core, cor_peer_t peer, const void *frame, size_t len) {}
static void probe_send_done(void *core, void *cookie, int status) {}
static void probe_peer_failed(void *core, cor_peer_t peer, int err) {}

const char *cor_version(void)
{
    return PACKAGE_VERSION;
}

const char *cor_plugin_dir(void)
{
    return COR_PLUGINDIR;
}

int cor_route_probe(const char *name, int open_port, cor_route_probe_t *out)
{
    if (!out) return COR_EINVAL;
    memset(out, 0, sizeof *out);
    if (!name_ok(name)) {
        snprintf(out->error, sizeof out->error, "route name '%s' is not valid",
                 name ? name : "(null)");
        return COR_EINVAL;
    }
    out->ports_max = COR_HPORTS_MAX;
    void *dl;
    const struct cor_route_ops *ops;
    int err =
        plugin_open(name, out->path, sizeof out->path, out->error, sizeof out->error, &dl, &ops);
    if (err) return COR_EROUTE;
    out->loaded = 1;
    out->rma = cor__route_has_rma(ops);
    out->own_memory = cor__route_has_mem(ops);
    out->counters = cor__route_has_counters(ops);
    out->blocking_wait = cor__route_has_wait(ops);
    if (!open_port) return COR_OK;

    /* Caps are per port: open one on loopback, alone in a one-domain session, as cor_init
     * would, and close it again. */
    struct cor_route_config cfg = {.session_cookie = cor__now_ns() ^ ((uint64_t)getpid() << 32),
                                   .self = 0,
                                   .npeers = 1,
                                   .port_index = 0,
                                   .bind_hint = "loopback"};
    struct cor_route_upcalls up = {.core = NULL,
                                   .deliver = probe_deliver,
                                   .send_done = probe_send_done,
                                   .peer_failed = probe_peer_failed};
    struct cor_rport *port = NULL;
    err = ops->open(&cfg, &up, &port);
    if (err) {
        snprintf(out->error, sizeof out->error, "opening a loopback port failed: %s",
                 cor_strerror(err));
        return COR_OK; /* the plugin loads: what we know of it stays valid */
    }
    struct cor_route_caps caps = {0};
    ops->caps(port, &caps);
    ops->close(port);
    out->opened = 1;
    out->frame_max = caps.frame_max;
    out->eager_limit = caps.eager_limit;
    out->frame_pref = caps.frame_pref;
    out->zero_copy_send = caps.zero_copy_send;
    out->rma = out->rma && caps.has_rma;
    return COR_OK;
}

int cor_route_knobs(const char *name, const cor_knob_t **knobs, size_t *n)
{
    if (!knobs || !n || !name_ok(name)) return COR_EINVAL;
    *knobs = NULL;
    *n = 0;
    char path[4096], why[1024];
    void *dl;
    const struct cor_route_ops *ops;
    if (plugin_open(name, path, sizeof path, why, sizeof why, &dl, &ops)) return COR_EROUTE;
    /* The plugin stays loaded (as cor__route_unload keeps it): the table stays valid. */
    if (ROUTE_HAS(ops, knobs) &&
        ops->size >= offsetof(struct cor_route_ops, nknobs) + sizeof ops->nknobs) {
        *knobs = ops->knobs;
        *n = ops->nknobs;
    }
    return COR_OK;
}
