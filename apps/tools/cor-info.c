/*
 * cor-info: what this CoR build has and how it is set, as ompi_info and fi_info show it for
 * theirs: the version, the plugin folders, each route plugin found with its capabilities (or
 * the loader's message when it does not load), libgm-compat's provider and node map, and every
 * COR_* / GM_* knob with its default and current value.
 *
 *   cor-info [--json] [--no-open]
 *   cor-info --knobs-markdown MODULE   (core, a route's name, dsm, pvm, libgm)
 *
 * Routes are probed with cor_route_probe (one loopback port each, opened and closed again);
 * libgm-compat by opening one GM port as gm-info does (libgm is dlopen'ed, not linked: it is
 * the gm route's dependency). --no-open skips both. Knobs come from the tables the modules
 * read them with: the core's (cor_knobs), each route plugin's own (cor_route_knobs: its ops
 * table), libcordsm's (cor_dsm_knobs, linked), libcorpvm's (cor_pvm_knobs) and libgm-compat's
 * (gm_compat_knobs), both dlopen'ed: libcorpvm interposes on libpvm3 and libgm is the gm
 * route's, neither belongs in this program.
 */
#define _GNU_SOURCE /* dladdr */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cor/cor.h"
#include "cor/dsm.h"
#ifdef HAVE_LIBGM
#include <gm.h>
#include <gm_compat.h>
#endif

#define MAX_ROUTES 64
#define MAX_NODES 4096 /* node map entries shown */

static const char usage[] =
    "usage: cor-info [--json] [--no-open]\n"
    "Shows the CoR version, the route plugins found (with their capabilities, or why they\n"
    "do not load), libgm-compat's provider and node map, and every COR_*/GM_* knob with its\n"
    "default and current value.\n"
    "  --json      one JSON object on standard output, for scripts\n"
    "  --no-open   do not open ports: no route capabilities, no GM node map\n"
    "  --knobs-markdown MODULE\n"
    "              the knob table of MODULE (core, a route, dsm, pvm, libgm) in\n"
    "              Markdown, as the READMEs have it\n"
    "  -h, --help  this text\n";

struct knob {
    const char *name, *module, *meaning;
    char dflt[48], range[48];
};
#define MAX_KNOBS 512
static struct knob knobs[MAX_KNOBS];
static size_t nknobs;

/* Modules whose knobs could not be listed (a library that did not load), and why. */
#define MAX_UNLISTED 8
static struct {
    const char *module;
    char why[256];
} unlisted[MAX_UNLISTED];
static int nunlisted;

static int json;

/* ---- output helpers: the same calls write text or JSON ------------------------------------ */

static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

/* ---- routes ------------------------------------------------------------------------------ */

/* Route names: the ones this build makes, then every cor_route_<name>.so in the folders the
 * loader searches (COR_ROUTE_PATH, then the plugin folder), each once. */
static int route_names(char names[][32], int max)
{
    int n = 0;
    static const char *built[] = {BUILT_ROUTES};
    for (size_t i = 0; i < sizeof built / sizeof built[0] && n < max; i++)
        if (*built[i]) snprintf(names[n++], 32, "%s", built[i]);

    const char *env = getenv("COR_ROUTE_PATH");
    char dirs[8192];
    snprintf(dirs, sizeof dirs, "%s%s%s", env ? env : "", env && *env ? ":" : "", cor_plugin_dir());
    for (char *save, *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        DIR *d = opendir(dir);
        if (!d) continue;
        for (struct dirent *e; (e = readdir(d)) && n < max;) {
            size_t len = strlen(e->d_name);
            if (strncmp(e->d_name, "cor_route_", 10) || len < 14 || len - 13 >= 32 ||
                strcmp(e->d_name + len - 3, ".so"))
                continue;
            char name[32];
            snprintf(name, sizeof name, "%.*s", (int)(len - 13), e->d_name + 10);
            int seen = 0;
            for (int i = 0; i < n && !seen; i++)
                seen = !strcmp(names[i], name);
            if (!seen) snprintf(names[n++], 32, "%s", name);
        }
        closedir(d);
    }
    return n;
}

static const char *yes_no(int v)
{
    return v ? "yes" : "no";
}

static void show_route(const char *name, int open_port, int first)
{
    cor_route_probe_t p;
    int err = cor_route_probe(name, open_port, &p);
    if (json) {
        printf("%s\n    {\"name\": ", first ? "" : ",");
        json_str(name);
        printf(", \"loaded\": %s, \"path\": ", p.loaded ? "true" : "false");
        json_str(p.path);
        printf(", \"error\": ");
        json_str(p.error);
        if (p.loaded)
            printf(", \"rma\": %s, \"own_memory\": %s, \"counters\": %s, \"blocking_wait\": %s, "
                   "\"ports_max\": %d",
                   p.rma ? "true" : "false", p.own_memory ? "true" : "false",
                   p.counters ? "true" : "false", p.blocking_wait ? "true" : "false", p.ports_max);
        if (p.opened)
            printf(", \"frame_max\": %zu, \"eager_limit\": %zu, \"frame_pref\": %zu, "
                   "\"zero_copy_send\": %s",
                   p.frame_max, p.eager_limit, p.frame_pref, p.zero_copy_send ? "true" : "false");
        printf("}");
        return;
    }
    if (err != COR_OK) {
        printf("  %-8s NOT LOADED: %s\n", name, p.error);
        return;
    }
    printf("  %-8s %s\n", name, p.path);
    if (p.opened) {
        char pref[48] = "any size (no preference)";
        if (p.frame_pref) snprintf(pref, sizeof pref, "up to %zu B", p.frame_pref);
        printf("           frame max %zu B, eager limit %zu B, one-piece frames %s\n", p.frame_max,
               p.eager_limit, pref);
        printf("           zero-copy send %s, ", yes_no(p.zero_copy_send));
    } else {
        printf("           port capabilities unknown: %s\n           ",
               *p.error ? p.error : "not opened (--no-open)");
    }
    printf("RMA %s, own memory %s, counters %s, blocking wait %s, hard ports 1..%d\n",
           yes_no(p.rma), yes_no(p.own_memory), yes_no(p.counters), yes_no(p.blocking_wait),
           p.ports_max);
}

/* ---- libraries cor-info loads rather than links ------------------------------------------- */

/* dlopen(file), else the file beside libcor (installed: one lib folder), else where a build
 * tree has it (`build_rel`, from libcor's folder cor/core/.libs). NULL with *why set. */
static void *dlopen_beside_libcor(const char *file, const char *build_rel, char *why, size_t len)
{
    void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (dl) return dl;
    snprintf(why, len, "%s", dlerror());
    Dl_info info;
    if (!dladdr((void *)cor_version, &info) || !info.dli_fname) return NULL;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) return NULL;
    int dirlen = (int)(slash - info.dli_fname);
    char path[4096];
    snprintf(path, sizeof path, "%.*s/%s", dirlen, info.dli_fname, file);
    if ((dl = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return dl;
    snprintf(path, sizeof path, "%.*s/%s/%s", dirlen, info.dli_fname, build_rel, file);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* ---- libgm-compat ------------------------------------------------------------------------ */

#ifdef HAVE_LIBGM
/* libgm, found at run time: the gm route plugin's dependency (already mapped when its probe
 * loaded it), else the library search path. cor-info itself does not link it. */
static struct {
    __typeof__(gm_init) *init;
    __typeof__(gm_finalize) *finalize;
    __typeof__(gm_num_ports) *num_ports;
    __typeof__(gm_open) *open;
    __typeof__(gm_close) *close;
    __typeof__(gm_get_node_id) *get_node_id;
    __typeof__(gm_max_node_id_in_use) *max_node_id_in_use;
    __typeof__(gm_node_id_to_host_name_ex) *node_id_to_host_name_ex;
    __typeof__(gm_strerror) *strerror;
    __typeof__(gm_compat_knobs) *compat_knobs;
} G;

/* libgm, once; 0 when G is filled, else -1 with the reason in error. */
static int gm_load(char *error, size_t len)
{
    static int done, rc;
    static char why[256];
    if (done) {
        snprintf(error, len, "%s", why);
        return rc;
    }
    done = 1;
    rc = -1;
    char dlwhy[200] = "";
    void *dl =
        dlopen_beside_libcor("libgm.so.0", "../../../libgm-compat/.libs", dlwhy, sizeof dlwhy);
    if (!dl) {
        snprintf(why, sizeof why, "libgm not loaded: %s", dlwhy);
        snprintf(error, len, "%s", why);
        return -1;
    }
#define GM_SYM(f)                                                                                  \
    do {                                                                                           \
        if (!(*(void **)&G.f = dlsym(dl, "gm_" #f))) {                                             \
            snprintf(why, sizeof why, "libgm.so.0 has no gm_" #f);                                 \
            snprintf(error, len, "%s", why);                                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    GM_SYM(init);
    GM_SYM(finalize);
    GM_SYM(num_ports);
    GM_SYM(open);
    GM_SYM(close);
    GM_SYM(get_node_id);
    GM_SYM(max_node_id_in_use);
    GM_SYM(node_id_to_host_name_ex);
    GM_SYM(strerror);
    GM_SYM(compat_knobs);
#undef GM_SYM
    return rc = 0;
}
#endif

static void gm_section(int open_port)
{
    const char *prov = getenv("GM_PROVIDER"), *map = getenv("GM_NODE_MAP");
    const char *inl = getenv("GM_NODES");
    char provider[512], source[4200];
    if (prov && *prov)
        snprintf(provider, sizeof provider, "%s (GM_PROVIDER)", prov);
    else
        snprintf(provider, sizeof provider,
                 "default: shm, or tcp;ofi_rxm when the node map gives addresses");
    if (map && *map)
        snprintf(source, sizeof source, "GM_NODE_MAP=%s", map);
    else if (inl && *inl)
        snprintf(source, sizeof source, "GM_NODES");
    else
        snprintf(source, sizeof source, "none: this host is node 1, alone");

    int built = 0, opened = 0;
    char error[256] = "";
    unsigned self = 0, in_use = 0, nnodes = 0;
    static struct {
        unsigned id;
        char host[256];
    } nodes[MAX_NODES];
#ifdef HAVE_LIBGM
    built = 1;
    if (open_port && gm_load(error, sizeof error) == 0) {
        gm_status_t st = G.init();
        int inited = st == GM_SUCCESS;
        struct gm_port *gp = NULL;
        /* the first free port of 2, 4, 5, ... (0, 1 and 3 are GM's own) */
        for (unsigned id = 2; st == GM_SUCCESS && id < G.num_ports(NULL); id++) {
            if (id == 3) continue;
            st = G.open(&gp, 0, id, "cor-info", (enum gm_api_version)GM_API_VERSION_2_0);
            if (st == GM_SUCCESS) break;
            if (st == GM_BUSY) st = GM_SUCCESS; /* try the next port */
        }
        if (gp) {
            opened = 1;
            G.get_node_id(gp, &self);
            G.max_node_id_in_use(gp, &in_use);
            for (unsigned id = 1; id <= in_use && nnodes < MAX_NODES; id++) {
                char name[GM_MAX_HOST_NAME_LEN + 1];
                if (G.node_id_to_host_name_ex(gp, 1000000, id, &name) != GM_SUCCESS) continue;
                nodes[nnodes].id = id;
                snprintf(nodes[nnodes].host, sizeof nodes[nnodes].host, "%s", name);
                nnodes++;
            }
            G.close(gp);
        } else if (!inited) {
            snprintf(error, sizeof error, "gm_init: %s", G.strerror(st));
        } else {
            snprintf(error, sizeof error, "cannot open a GM port: %s",
                     st == GM_SUCCESS ? "every port is busy" : G.strerror(st));
        }
        if (inited) G.finalize();
    }
#endif
    if (!built)
        snprintf(error, sizeof error, "not built (--disable-libgm)");
    else if (!open_port)
        snprintf(error, sizeof error, "not opened (--no-open)");

    if (json) {
        printf("  \"libgm\": {\"built\": %s, \"provider\": ", built ? "true" : "false");
        json_str(provider);
        printf(", \"node_map\": ");
        json_str(source);
        printf(", \"opened\": %s, \"error\": ", opened ? "true" : "false");
        json_str(error);
        printf(", \"node_id\": %u, \"nodes\": [", self);
        for (unsigned i = 0; i < nnodes; i++) {
            printf("%s{\"id\": %u, \"host\": ", i ? ", " : "", nodes[i].id);
            json_str(nodes[i].host);
            printf("}");
        }
        printf("]},\n");
        return;
    }
    printf("\nlibgm-compat:\n");
    printf("  provider   %s\n", provider);
    printf("  node map   %s\n", source);
    if (!opened) {
        printf("  nodes      unknown: %s\n", error);
        return;
    }
    printf("  nodes      %u in use, this process is node %u\n", in_use, self);
    for (unsigned i = 0; i < nnodes; i++)
        printf("  %9u  %s%s\n", nodes[i].id, nodes[i].host,
               nodes[i].id == self ? "  (this node)" : "");
}

/* ---- knobs ------------------------------------------------------------------------------- */

static void knob_unlisted(const char *module, const char *why)
{
    if (nunlisted == MAX_UNLISTED) return;
    unlisted[nunlisted].module = module;
    snprintf(unlisted[nunlisted].why, sizeof unlisted[nunlisted].why, "%s", why);
    nunlisted++;
}

static void knob_add(const cor_knob_t *k, const char *module)
{
    if (nknobs == MAX_KNOBS || !k->name) return;
    struct knob *o = &knobs[nknobs++];
    o->name = k->name;
    o->module = module;
    o->meaning = k->meaning ? k->meaning : "";
    if (k->shown && *k->shown)
        snprintf(o->dflt, sizeof o->dflt, "%s", k->shown);
    else if (k->type == COR_KNOB_INT)
        snprintf(o->dflt, sizeof o->dflt, "%lld", k->def);
    else
        snprintf(o->dflt, sizeof o->dflt, "unset");
    o->range[0] = 0;
    if (k->type == COR_KNOB_INT) snprintf(o->range, sizeof o->range, "%lld..%lld", k->lo, k->hi);
}

static void knob_table_add(const cor_knob_t *t, size_t n, const char *module)
{
    for (size_t i = 0; t && i < n; i++)
        knob_add(&t[i], module);
}

/* libcorpvm's table: COR_PVM_LIB (the library cor-pvm preloads), else the one beside libcor. */
static void knobs_pvm(void)
{
#ifdef HAVE_PVM
    char why[256] = "";
    const char *lib = getenv("COR_PVM_LIB");
    void *dl = lib && *lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL)
                           : dlopen_beside_libcor("libcorpvm.so.0", "../../pvmcompat/.libs", why,
                                                  sizeof why);
    if (!dl && lib && *lib) snprintf(why, sizeof why, "%s", dlerror());
    const cor_knob_t *(*get)(size_t *) = NULL;
    if (dl) *(void **)&get = dlsym(dl, "cor_pvm_knobs");
    if (!get) {
        knob_unlisted("pvm", dl ? "libcorpvm has no cor_pvm_knobs" : why);
        return;
    }
    size_t n;
    const cor_knob_t *t = get(&n);
    knob_table_add(t, n, "pvm");
#endif
}

/* libgm-compat's table, converted to cor_knob_t rows (libgm knows nothing of CoR). */
static void knobs_libgm(void)
{
#ifdef HAVE_LIBGM
    char why[256];
    if (gm_load(why, sizeof why)) {
        knob_unlisted("libgm", why);
        return;
    }
    unsigned n;
    const gm_compat_knob_t *g = G.compat_knobs(&n);
    for (unsigned i = 0; g && i < n; i++) {
        cor_knob_t k = {.name = g[i].name, .def = g[i].def, .lo = g[i].lo, .hi = g[i].hi};
        k.type = g[i].type == GM_COMPAT_KNOB_NUMBER ? COR_KNOB_INT : COR_KNOB_STR;
        k.shown = g[i].shown;
        k.meaning = g[i].meaning;
        knob_add(&k, "libgm");
    }
#endif
}

/* Every knob, from the tables the modules read them with: the core's, each route's from its
 * plugin (routes that do not load have none to show), libcordsm's, libcorpvm's, libgm's. */
static void knobs_collect(char names[][32], int nroutes)
{
    size_t n;
    const cor_knob_t *t = cor_knobs(&n);
    knob_table_add(t, n, "core");
    for (int r = 0; r < nroutes; r++)
        if (cor_route_knobs(names[r], &t, &n) == COR_OK) knob_table_add(t, n, names[r]);
    t = cor_dsm_knobs(&n);
    knob_table_add(t, n, "dsm");
    knobs_pvm();
    knobs_libgm();
}

/* Whether this build has `module`: pvm and libgm can be configured away. */
static int module_built(const char *module)
{
#ifndef HAVE_PVM
    if (!strcmp(module, "pvm")) return 0;
#endif
#ifndef HAVE_LIBGM
    if (!strcmp(module, "libgm")) return 0;
#endif
    return 1;
}

/* The README table of one module's knobs; 1 when the module has none. */
static int knobs_markdown(const char *module)
{
    int found = 0;
    for (size_t i = 0; i < nknobs; i++) {
        if (strcmp(knobs[i].module, module)) continue;
        if (!found++)
            printf("| variable | default | range | meaning |\n| --- | --- | --- | --- |\n");
        printf("| `%s` | %s | %s | %s |\n", knobs[i].name, knobs[i].dflt, knobs[i].range,
               knobs[i].meaning);
    }
    return !found;
}

static void knob_section(void)
{
    if (json) {
        printf("  \"knobs\": [");
        for (size_t i = 0; i < nknobs; i++) {
            const char *v = getenv(knobs[i].name);
            printf("%s\n    {\"name\": ", i ? "," : "");
            json_str(knobs[i].name);
            printf(", \"module\": ");
            json_str(knobs[i].module);
            printf(", \"default\": ");
            json_str(knobs[i].dflt);
            printf(", \"set\": %s, \"value\": ", v ? "true" : "false");
            json_str(v ? v : "");
            printf(", \"meaning\": ");
            json_str(knobs[i].meaning);
            printf("}");
        }
        printf("\n  ],\n  \"knobs_unlisted\": [");
        for (int i = 0; i < nunlisted; i++) {
            printf("%s{\"module\": ", i ? ", " : "");
            json_str(unlisted[i].module);
            printf(", \"why\": ");
            json_str(unlisted[i].why);
            printf("}");
        }
        printf("]\n");
        return;
    }
    printf("\nknobs (environment):\n");
    printf("  %-22s %-8s %-18s %-18s %s\n", "name", "module", "default", "current", "meaning");
    for (size_t i = 0; i < nknobs; i++) {
        const char *v = getenv(knobs[i].name);
        printf("  %-22s %-8s %-18s %-18s %s\n", knobs[i].name, knobs[i].module, knobs[i].dflt,
               v ? v : "-", knobs[i].meaning);
    }
    for (int i = 0; i < nunlisted; i++)
        printf("  (the knobs of %s are not listed: %s)\n", unlisted[i].module, unlisted[i].why);
}

int main(int argc, char **argv)
{
    int open_ports = 1;
    const char *markdown = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--knobs-markdown")) {
            if (++i == argc) {
                fprintf(stderr, "cor-info: --knobs-markdown needs a module name\n");
                return 2;
            }
            markdown = argv[i];
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--no-open")) {
            open_ports = 0;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "cor-info: unknown argument '%s' (cor-info --help for the usage)\n",
                    argv[i]);
            return 2;
        }
    }
    static char names[MAX_ROUTES][32];
    int n = route_names(names, MAX_ROUTES);
    knobs_collect(names, n);
    if (markdown) {
        if (!module_built(markdown)) {
            fprintf(stderr, "cor-info: '%s' is not built (configured away)\n", markdown);
            return 3;
        }
        if (knobs_markdown(markdown)) {
            for (int i = 0; i < nunlisted; i++)
                if (!strcmp(unlisted[i].module, markdown)) {
                    fprintf(stderr, "cor-info: the knobs of '%s' are not listed: %s\n", markdown,
                            unlisted[i].why);
                    return 1;
                }
            fprintf(stderr,
                    "cor-info: no knobs of '%s' (a module: core, a route that loads, "
                    "dsm, pvm, libgm)\n",
                    markdown);
            return 1;
        }
        return fflush(stdout) == 0 ? 0 : 1;
    }
    const char *route_path = getenv("COR_ROUTE_PATH");
    if (json) {
        printf("{\n  \"version\": ");
        json_str(cor_version());
        printf(",\n  \"plugin_dir\": ");
        json_str(cor_plugin_dir());
        printf(",\n  \"bootstrap\": ");
        json_str(cor_boot_backends());
        printf(",\n  \"bootstrap_unavailable\": ");
        json_str(cor_boot_unavailable());
        printf(",\n  \"route_path\": ");
        json_str(route_path ? route_path : "");
        printf(",\n  \"routes\": [");
    } else {
        printf("CoR %s\n", cor_version());
        printf("  plugin folder    %s\n", cor_plugin_dir());
        printf("  bootstrap        %s\n", cor_boot_backends());
        const char *unavailable = cor_boot_unavailable();
        printf("  not available    %s\n", *unavailable ? unavailable : "-");
        printf("  COR_ROUTE_PATH   %s\n", route_path && *route_path ? route_path : "-");
        printf("\nroutes:\n");
    }
    for (int i = 0; i < n; i++)
        show_route(names[i], open_ports, i == 0);
    if (json) printf("\n  ],\n");
    gm_section(open_ports);
    knob_section();
    if (json) printf("}\n");
    return fflush(stdout) == 0 ? 0 : 1;
}
