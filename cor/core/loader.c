/*
 * The route loader: cor_route_<name>.so from COR_ROUTE_PATH (a colon-separated list) or the
 * installed plugin folder, checked once here so the rest of the core can call its slots.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int check_ops(const struct cor_route_ops *ops, const char *name)
{
    if (ops->size < offsetof(struct cor_route_ops, counters) || ops->abi != COR_ROUTE_ABI) {
        cor__log("route '%s': ABI %u, size %zu; this core needs ABI %u", name, ops->abi,
                 ops->size, COR_ROUTE_ABI);
        return COR_EROUTE;
    }
    if (!ops->open || !ops->close || !ops->address || !ops->add_peer || !ops->send ||
        !ops->progress || !ops->wait_fd || !ops->timeout_ms || !ops->caps) {
        cor__log("route '%s': a mandatory operation is missing", name);
        return COR_EROUTE;
    }
    return COR_OK;
}

/* Optional slots exist only if the plugin was built with a table that long. */
#define ROUTE_HAS(ops, slot)                                                                 \
    ((ops)->size >= offsetof(struct cor_route_ops, slot) + sizeof((ops)->slot) && (ops)->slot)

int cor__route_load(const char *name, bool quiet, struct cor_route **out)
{
    if (!name || !*name || strlen(name) >= 32 || strpbrk(name, "/.")) {
        cor__log("route name '%s' is not valid", name ? name : "(null)");
        return COR_EINVAL;
    }
    char file[64], sym[64], path[4096], why[512] = "not found in any plugin folder";
    snprintf(file, sizeof file, "cor_route_%s.so", name);
    snprintf(sym, sizeof sym, "cor_route_%s", name);

    const char *env = getenv("COR_ROUTE_PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s%s%s", env ? env : "", env && *env ? ":" : "", COR_PLUGINDIR);
    void *dl = NULL;
    for (char *save, *dir = strtok_r(dirs, ":", &save); dir && !dl;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/%s", dir, file);
        dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            const char *e = dlerror();
            /* a missing file in one folder is normal; remember any other failure */
            if (e && !strstr(e, "No such file")) snprintf(why, sizeof why, "%s", e);
        }
    }
    if (!dl) {
        if (quiet) return COR_EROUTE;
        cor__log("cannot load route '%s' (%s): %s; set COR_ROUTE_PATH to its folder", name,
                 file, why);
        return COR_EROUTE;
    }
    const struct cor_route_ops *ops = dlsym(dl, sym);
    if (!ops) {
        cor__log("route '%s': %s has no symbol %s: %s", name, path, sym, dlerror());
        dlclose(dl);
        return COR_EROUTE;
    }
    int err = check_ops(ops, name);
    if (err) {
        dlclose(dl);
        return err;
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
