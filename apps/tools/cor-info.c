/*
 * cor-info: what this CoR build has and how it is set, as ompi_info and fi_info show it for
 * theirs: the version, the plugin folders, each route plugin found with its capabilities (or
 * the loader's message when it does not load), libgm-compat's provider and node map, and every
 * COR_* / GM_* knob with its default and current value.
 *
 *   cor-info [--json] [--no-open]
 *
 * Routes are probed with cor_route_probe (one loopback port each, opened and closed again);
 * libgm-compat by opening one GM port as gm-info does. --no-open skips both.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cor/cor.h"
#include "gm_knobs.h"
#include "knobs.h"
#include "udp_knobs.h"
#ifdef HAVE_LIBGM
#include <gm.h>
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
    "  -h, --help  this text\n";

struct knob {
    const char *name, *module, *dflt, *meaning;
};
#define KNOB_ROW(n, m, d, w) {n, m, d, w},
/* A row of a route's knob table (cor/routes/util/rutil.h): the default shown is the number
 * unless the row names one. */
#define SHOWN(def, shown) (sizeof(shown) > 1 ? shown : #def)
#define UDP_ROW(id, n, kind, def, lo, hi, shown, w) {n, "udp", SHOWN(def, shown), w},
#define GM_ROW(id, n, kind, def, lo, hi, shown, w) {n, "gm", SHOWN(def, shown), w},
static const struct knob knobs[] = {COR_KNOBS_CORE(KNOB_ROW) UDP_KNOBS(UDP_ROW) GM_KNOBS(GM_ROW)
                                        COR_KNOBS_OTHER(KNOB_ROW)};
#define NKNOBS (sizeof knobs / sizeof knobs[0])

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

/* ---- libgm-compat ------------------------------------------------------------------------ */

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
    if (open_port) {
        gm_status_t st = gm_init();
        int inited = st == GM_SUCCESS;
        struct gm_port *gp = NULL;
        /* the first free port of 2, 4, 5, ... (0, 1 and 3 are GM's own) */
        for (unsigned id = 2; st == GM_SUCCESS && id < gm_num_ports(NULL); id++) {
            if (id == 3) continue;
            st = gm_open(&gp, 0, id, "cor-info", (enum gm_api_version)GM_API_VERSION_2_0);
            if (st == GM_SUCCESS) break;
            if (st == GM_BUSY) st = GM_SUCCESS; /* try the next port */
        }
        if (gp) {
            opened = 1;
            gm_get_node_id(gp, &self);
            gm_max_node_id_in_use(gp, &in_use);
            for (unsigned id = 1; id <= in_use && nnodes < MAX_NODES; id++) {
                char name[GM_MAX_HOST_NAME_LEN + 1];
                if (gm_node_id_to_host_name_ex(gp, 1000000, id, &name) != GM_SUCCESS) continue;
                nodes[nnodes].id = id;
                snprintf(nodes[nnodes].host, sizeof nodes[nnodes].host, "%s", name);
                nnodes++;
            }
            gm_close(gp);
        } else if (!inited) {
            snprintf(error, sizeof error, "gm_init: %s", gm_strerror(st));
        } else {
            snprintf(error, sizeof error, "cannot open a GM port: %s",
                     st == GM_SUCCESS ? "every port is busy" : gm_strerror(st));
        }
        if (inited) gm_finalize();
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

static void knob_section(void)
{
    if (json) {
        printf("  \"knobs\": [");
        for (size_t i = 0; i < NKNOBS; i++) {
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
        printf("\n  ]\n");
        return;
    }
    printf("\nknobs (environment):\n");
    printf("  %-22s %-8s %-18s %-18s %s\n", "name", "module", "default", "current", "meaning");
    for (size_t i = 0; i < NKNOBS; i++) {
        const char *v = getenv(knobs[i].name);
        printf("  %-22s %-8s %-18s %-18s %s\n", knobs[i].name, knobs[i].module, knobs[i].dflt,
               v ? v : "-", knobs[i].meaning);
    }
}

int main(int argc, char **argv)
{
    int open_ports = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
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
    const char *route_path = getenv("COR_ROUTE_PATH");
    if (json) {
        printf("{\n  \"version\": ");
        json_str(cor_version());
        printf(",\n  \"plugin_dir\": ");
        json_str(cor_plugin_dir());
        printf(",\n  \"bootstrap\": ");
        json_str(cor_boot_backends());
        printf(",\n  \"route_path\": ");
        json_str(route_path ? route_path : "");
        printf(",\n  \"routes\": [");
    } else {
        printf("CoR %s\n", cor_version());
        printf("  plugin folder    %s\n", cor_plugin_dir());
        printf("  bootstrap        %s\n", cor_boot_backends());
        printf("  COR_ROUTE_PATH   %s\n", route_path && *route_path ? route_path : "-");
        printf("\nroutes:\n");
    }
    static char names[MAX_ROUTES][32];
    int n = route_names(names, MAX_ROUTES);
    for (int i = 0; i < n; i++)
        show_route(names[i], open_ports, i == 0);
    if (json) printf("\n  ],\n");
    gm_section(open_ports);
    knob_section();
    if (json) printf("}\n");
    return fflush(stdout) == 0 ? 0 : 1;
}
