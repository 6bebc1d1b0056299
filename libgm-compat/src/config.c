/* config.c - the node map and the knobs: gm_compat_configure's settings,
 * else environment variables, else defaults (see README.md). */
#include "gm_internal.h"
#include "gm_compat.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gmx_config gmx_cfg;

/* What gm_compat_configure gave (copies); guarded by gmx_lock like gmx_cfg. */
static struct {
    char *nodes, *provider, *shm_ns;
    unsigned node_id, port_base, send_timeout_ms;
} given;

const struct gmx_node *gmx_node_find(unsigned id)
{
    for (unsigned i = 0; i < gmx_cfg.num_nodes; i++)
        if (gmx_cfg.nodes[i].id == id) return &gmx_cfg.nodes[i];
    return NULL;
}

/* Accepts "host" and GM's "host:board" form (board 0 only). */
const struct gmx_node *gmx_node_by_name(const char *name)
{
    if (!name) return NULL;
    size_t n = strnlen(name, GM_MAX_HOST_NAME_LEN + 1);
    const char *colon = memchr(name, ':', n);
    if (colon) {
        if (strcmp(colon, ":0") != 0) return NULL;
        n = (size_t)(colon - name);
    }
    for (unsigned i = 0; i < gmx_cfg.num_nodes; i++) {
        const char *h = gmx_cfg.nodes[i].host;
        if (strlen(h) == n && strncmp(h, name, n) == 0) return &gmx_cfg.nodes[i];
    }
    return NULL;
}

/* Nodes are never added after the map is read, only given an address (for peers learnt at
 * run time): readers take has_addr with acquire, so they see ipv4 and port_base too. */
int gmx_node_set_address(unsigned id, const char *ipv4, unsigned port_base)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    struct gmx_node *n = (struct gmx_node *)gmx_node_find(id);
    struct in_addr in;
    if (!n || !ipv4 || inet_pton(AF_INET, ipv4, &in) != 1 || port_base == 0 ||
        port_base > 65535 - GMX_NUM_PORTS || strncmp(gmx_cfg.provider, "shm", 3) == 0)
        return -1;
    pthread_mutex_lock(&lock);
    int rc = 0;
    if (__atomic_load_n(&n->has_addr, __ATOMIC_ACQUIRE)) {
        rc = n->ipv4 == in.s_addr && n->port_base == port_base ? 0 : -1;
    } else {
        n->ipv4 = in.s_addr;
        n->port_base = port_base;
        __atomic_store_n(&n->has_addr, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    if (!s || !isdigit((unsigned char)*s)) return -1;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

/* One entry: "<id> <host> [<ipv4>[:<port_base>]]"; where names the source. */
static int parse_entry(char *line, const char *where, unsigned lineno)
{
    char *save = NULL;
    char *id_s = strtok_r(line, " \t\r\n", &save);
    if (!id_s) return 0; /* blank */
    char *host = strtok_r(NULL, " \t\r\n", &save);
    char *addr = strtok_r(NULL, " \t\r\n", &save);
    char *extra = strtok_r(NULL, " \t\r\n", &save);
    unsigned long id, base = 0;
    if (parse_uint(id_s, GMX_MAX_NODE_ID, &id) || id == 0 || !host || extra) {
        fprintf(stderr,
                "libgm: %s:%u: expected '<node_id 1..65535> <host> "
                "[<ipv4>[:<port_base>]]'\n",
                where, lineno);
        return -1;
    }
    if (strlen(host) >= GM_MAX_HOST_NAME_LEN || strchr(host, ':')) {
        fprintf(stderr, "libgm: %s:%u: bad host name '%s' (max %d chars, no ':')\n", where, lineno,
                host, GM_MAX_HOST_NAME_LEN - 1);
        return -1;
    }
    if (gmx_node_find((unsigned)id)) {
        fprintf(stderr, "libgm: %s:%u: node id %lu listed twice\n", where, lineno, id);
        return -1;
    }
    struct gmx_node node = {.id = (unsigned)id};
    strcpy(node.host, host);
    if (addr) {
        char *colon = strchr(addr, ':');
        if (colon) {
            *colon = '\0';
            if (parse_uint(colon + 1, 65535 - GMX_NUM_PORTS, &base) || base == 0) {
                fprintf(stderr, "libgm: %s:%u: bad port base '%s'\n", where, lineno, colon + 1);
                return -1;
            }
        }
        struct in_addr in;
        if (inet_pton(AF_INET, addr, &in) != 1) {
            fprintf(stderr, "libgm: %s:%u: bad IPv4 address '%s'\n", where, lineno, addr);
            return -1;
        }
        node.has_addr = 1;
        node.ipv4 = in.s_addr;
    }
    node.port_base = (unsigned)base;
    struct gmx_node *grown = realloc(gmx_cfg.nodes, (gmx_cfg.num_nodes + 1) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "libgm: out of memory reading the node map\n");
        return -1;
    }
    gmx_cfg.nodes = grown;
    gmx_cfg.nodes[gmx_cfg.num_nodes++] = node;
    if (id > gmx_cfg.max_node_id) gmx_cfg.max_node_id = (unsigned)id;
    return 0;
}

static int parse_text(char *text, const char *seps, const char *where)
{
    unsigned lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, seps, &save); line; line = strtok_r(NULL, seps, &save)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        if (parse_entry(line, where, lineno)) return -1;
    }
    return 0;
}

static int parse_inline(const char *text, const char *where)
{
    char *copy = strdup(text);
    if (!copy) return -1;
    int rc = parse_text(copy, ";\n", where);
    free(copy);
    return rc;
}

static int load_map(void)
{
    if (given.nodes) return parse_inline(given.nodes, "gm_compat_configure nodes");
    const char *path = gmx_knob_str(GMX_K_NODE_MAP);
    const char *inl = gmx_knob_str(GMX_K_NODES);
    if (path && *path) {
        FILE *f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "libgm: GM_NODE_MAP=%s: %s\n", path, strerror(errno));
            return -1;
        }
        char line[512];
        unsigned lineno = 0;
        int rc = 0;
        while (rc == 0 && fgets(line, sizeof line, f)) {
            lineno++;
            if (!strchr(line, '\n') && !feof(f)) {
                fprintf(stderr, "libgm: %s:%u: line too long\n", path, lineno);
                rc = -1;
                break;
            }
            char *hash = strchr(line, '#');
            if (hash) *hash = '\0';
            rc = parse_entry(line, path, lineno);
        }
        fclose(f);
        return rc;
    }
    if (inl && *inl) return parse_inline(inl, "GM_NODES");
    return 0;
}

/* A namespace names files in /dev/shm (lock files, the shm provider's regions). */
static int namespace_ok(const char *ns)
{
    return strlen(ns) <= 40 && !strpbrk(ns, "/: ");
}

static void own_host_name(char *buf, size_t len)
{
    const char *env = gmx_knob_str(GMX_K_HOST_NAME);
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    if (gethostname(buf, len) != 0) snprintf(buf, len, "localhost");
    buf[len - 1] = '\0';
    char *colon = strchr(buf, ':');
    if (colon) *colon = '\0';
}

int gmx_config_load(void)
{
    memset(&gmx_cfg, 0, sizeof gmx_cfg);
    gmx_cfg.verbose = (int)gmx_knob_uint(GMX_K_VERBOSE);
    if (load_map()) goto fail;

    char host[GM_MAX_HOST_NAME_LEN];
    own_host_name(host, sizeof host);
    if (gmx_cfg.num_nodes == 0) {
        char line[GM_MAX_HOST_NAME_LEN + 8];
        snprintf(line, sizeof line, "1 %s", host);
        if (parse_entry(line, "default node map", 1)) goto fail;
    }

    const char *id_s = gmx_knob_str(GMX_K_NODE_ID);
    if (given.node_id) {
        if (!gmx_node_find(given.node_id)) {
            fprintf(stderr,
                    "libgm: node id %u (gm_compat_configure) is not a node of the "
                    "node map\n",
                    given.node_id);
            goto fail;
        }
        gmx_cfg.self = given.node_id;
    } else if (id_s && *id_s) {
        unsigned long id;
        if (parse_uint(id_s, GMX_MAX_NODE_ID, &id) || !gmx_node_find((unsigned)id)) {
            fprintf(stderr, "libgm: GM_NODE_ID=%s is not a node of the node map\n", id_s);
            goto fail;
        }
        gmx_cfg.self = (unsigned)id;
    } else {
        const struct gmx_node *me = gmx_node_by_name(host);
        if (!me && gmx_cfg.num_nodes == 1) me = &gmx_cfg.nodes[0];
        if (!me) {
            fprintf(stderr,
                    "libgm: host '%s' is not in the node map; set GM_NODE_ID "
                    "or GM_HOST_NAME\n",
                    host);
            goto fail;
        }
        gmx_cfg.self = me->id;
    }

    unsigned base = given.port_base ? given.port_base : (unsigned)gmx_knob_uint(GMX_K_PORT_BASE);
    int any_addr = 0;
    for (unsigned i = 0; i < gmx_cfg.num_nodes; i++) {
        if (gmx_cfg.nodes[i].port_base == 0) gmx_cfg.nodes[i].port_base = base;
        any_addr |= gmx_cfg.nodes[i].has_addr;
    }

    const char *prov = given.provider ? given.provider : gmx_knob_str(GMX_K_PROVIDER);
    snprintf(gmx_cfg.provider, sizeof gmx_cfg.provider, "%s",
             prov && *prov ? prov
             : any_addr    ? "tcp;ofi_rxm"
                           : "shm");
    const char *ns = given.shm_ns ? given.shm_ns : gmx_knob_str(GMX_K_SHM_NAMESPACE);
    if (ns && *ns) {
        if (!namespace_ok(ns)) {
            fprintf(stderr, "libgm: GM_SHM_NAMESPACE must be <= 40 chars without '/', ':' "
                            "or spaces\n");
            goto fail;
        }
        snprintf(gmx_cfg.shm_ns, sizeof gmx_cfg.shm_ns, "%s", ns);
    } else {
        snprintf(gmx_cfg.shm_ns, sizeof gmx_cfg.shm_ns, "gm%u", (unsigned)getuid());
    }
    /* A person must have time to start the receiver of a sender started first. */
    gmx_cfg.send_timeout_ms = given.send_timeout_ms
                                  ? given.send_timeout_ms
                                  : (unsigned)gmx_knob_uint(GMX_K_SEND_TIMEOUT_MS);
    /* A target that took sends and then processes nothing (no buffer, a dead TCP peer):
     * 60 times the timeout, but no more than a minute unless the timeout itself is longer
     * (tests shorten both with a short timeout). */
    unsigned t = gmx_cfg.send_timeout_ms;
    gmx_cfg.stuck_ms = t <= 1000 ? 60 * t : t > 60000 ? t : 60000;
    gmx_cfg.close_linger_ms = (unsigned)gmx_knob_uint(GMX_K_CLOSE_LINGER_MS);
    /* RMA by default only on shm: with tcp;ofi_rxm (libfabric 1.17) RMA
     * traffic sometimes leaves a connection failing every send with
     * FI_ENOTCONN for good, and the target's CPU is needed there anyway. */
    int is_shm = strncmp(gmx_cfg.provider, "shm", 3) == 0;
    gmx_cfg.rma = (int)gmx_knob_uint_or(GMX_K_RMA, is_shm ? 1 : 0);
    gmx_log("node %u of %u, provider %s, shm namespace %s\n", gmx_cfg.self, gmx_cfg.num_nodes,
            gmx_cfg.provider, gmx_cfg.shm_ns);
    return 0;
fail:
    gmx_config_free();
    return -1;
}

void gmx_config_free(void)
{
    free(gmx_cfg.nodes);
    gmx_cfg.nodes = NULL;
    gmx_cfg.num_nodes = 0;
}

/* Copies s (NULL or empty: unset) into *slot; -1 when out of memory. */
static int keep_copy(char **slot, const char *s)
{
    *slot = NULL;
    if (!s || !*s) return 0;
    *slot = strdup(s);
    return *slot ? 0 : -1;
}

static void forget_given(void)
{
    free(given.nodes);
    free(given.provider);
    free(given.shm_ns);
    memset(&given, 0, sizeof given);
}

/* Called by gm_compat_configure with gmx_lock held, GM not initialized. */
gm_status_t gmx_config_set(const gm_compat_config_t *c)
{
    forget_given();
    if (!c) return GM_SUCCESS;
    if (c->version < 1 || c->version > GM_COMPAT_CONFIG_VERSION || c->node_id > GMX_MAX_NODE_ID ||
        c->port_base > 65535 - GMX_NUM_PORTS ||
        (c->provider && strlen(c->provider) >= sizeof gmx_cfg.provider) ||
        (c->shm_namespace && *c->shm_namespace && !namespace_ok(c->shm_namespace)))
        return GM_INVALID_PARAMETER;
    if (keep_copy(&given.nodes, c->nodes) || keep_copy(&given.provider, c->provider) ||
        keep_copy(&given.shm_ns, c->shm_namespace)) {
        forget_given();
        return GM_OUT_OF_MEMORY;
    }
    given.node_id = c->node_id;
    given.port_base = c->port_base;
    if (c->version >= 2) { /* version 1 callers' structure ends before it */
        if (c->send_timeout_ms > 3600000) {
            forget_given();
            return GM_INVALID_PARAMETER;
        }
        given.send_timeout_ms = c->send_timeout_ms;
    }
    return GM_SUCCESS;
}

GMX_EXPORT void gm_compat_config_init(gm_compat_config_t *c)
{
    if (c) {
        memset(c, 0, sizeof *c);
        c->version = GM_COMPAT_CONFIG_VERSION;
    }
}
