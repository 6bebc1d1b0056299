/*
 * Knobs of the gm route and the session setup of libgm-compat.
 *
 * libgm-compat reads its node map once, at the first gm_init() of the process. When the user
 * gave no map (GM_NODES / GM_NODE_MAP unset), each domain of the session becomes its own node
 * ("1 d0; 2 d1; ..."; node = rank + 1), so every domain has all 13 usable GM port ids, and
 * the shared-memory namespace is private to the session (a hash of its cookie). We hand these
 * to libgm-compat with gm_compat_configure (gm_compat.h), never through the environment: setenv
 * races with other threads reading it, and children of the domain must not inherit them.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm_knobs.h"
#include "gm_port.h"

#include <gm_compat.h>

const cor_knob_t gmr_knob_table[] = {GM_KNOBS(RUTIL_KNOB_ROW)};
enum { GM_KNOBS(RUTIL_KNOB_ENUM) NKNOBS };

int gmr_knobs_read(struct gmr_knobs *k)
{
    struct rutil_knob_val v[NKNOBS];
    if (rutil_knobs_read(GMR_LOG_WHO, gmr_knob_table, NKNOBS, v) != 0) return -1;
    unsigned long cls = v[K_CLASS].u, scls = v[K_SMALL_CLASS].u;
    if (scls && (scls < 8 || scls >= cls)) {
        gmr_log("COR_GM_SMALL_CLASS=%lu: expected 0 (none) or 8..%lu (below COR_GM_CLASS)", scls,
                cls - 1);
        return -1;
    }
    k->data_class = (unsigned)cls;
    k->small_class = (unsigned)scls;
    k->credits = (unsigned)v[K_CREDITS].u;
    k->small_credits = (unsigned)v[K_SMALL_CREDITS].u;
    k->eager = v[K_EAGER].u;
    k->tx_bytes = v[K_TX_BYTES].u;
    k->tx_frames = (unsigned)v[K_TX_FRAMES].u;
    k->regcache = (unsigned)v[K_REGCACHE].u;
    k->stats = (int)v[K_STATS].u;
    k->dead_ms = (unsigned)v[K_DEAD_MS].u;
    k->node_id = v[K_NODE_ID].s;
    k->provider = v[K_PROVIDER].s;
    size_t frame_max = gm_max_length_for_size(k->data_class) - GMR_HDR;
    if (k->eager > frame_max / 2) k->eager = frame_max / 2;
    if (k->tx_bytes < 2 * gm_max_length_for_size(k->data_class))
        k->tx_bytes = 2 * gm_max_length_for_size(k->data_class);
    return 0;
}

/* ---- session setup -------------------------------------------------------------------- */

/* How long libgm retries a send to a port that never answered, at least (GM_SEND_TIMEOUT_MS
 * unless the user set that; COR_GM_DEAD_MS when longer): see gmr_session_init. */
#define GMR_SEND_TIMEOUT_MS 1000
#define GMR_SEND_TIMEOUT_MAX_MS 3600000 /* the most gm_compat_configure takes */

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned session_refs; /* gm_init calls made by this route, guarded by session_lock */
/* COR_GM_PROVIDER=tcp without a user's node map: "ip:port_base" of our node, which we
 * publish with our address (peers give it to libgm with gm_node_set_address). */
static char tcp_self[64]; /* written at the first session init, under session_lock */

/* Node ids are ranks + 1 in every domain of the session: the node map is ours, or the user's
 * with COR_GM_NODE_ID=rank (and GM was not configured by the program before us). Written at
 * the first session init, under session_lock; read by the ports' owners after open. */
static int ranks_as_nodes;

int gmr_nodes_are_ranks(void)
{
    pthread_mutex_lock(&session_lock);
    int r = ranks_as_nodes;
    pthread_mutex_unlock(&session_lock);
    return r;
}

const char *gmr_tcp_address(void)
{
    return tcp_self[0] ? tcp_self : NULL;
}

/* Our node's TCP endpoint when domains learn each other at run time: the bind address the
 * core was given ("auto": the one rutil_auto_ipv4 picks, as the udp route does; domains on
 * several hosts need it, a loopback address would send each peer to itself) and a port base
 * of our own (GM_PORT_BASE + 16 x rank). */
static int tcp_endpoint(const struct cor_route_config *cfg)
{
    const char *ip = cfg->bind_hint;
    char picked[INET_ADDRSTRLEN];
    if (ip && !strcmp(ip, "auto")) {
        rutil_auto_ipv4(picked, NULL);
        ip = picked;
    }
    if (!ip || !strcmp(ip, "loopback")) ip = "127.0.0.1";
    const char *b = getenv("GM_PORT_BASE");
    unsigned long base = b && *b ? strtoul(b, NULL, 10) : 27000;
    base += 16ul * cfg->self;
    if (base == 0 || base > 65535 - 16) {
        gmr_log("domain %u: no TCP port base left for it (GM_PORT_BASE + 16 x rank > 65519)",
                cfg->self);
        return -1;
    }
    snprintf(tcp_self, sizeof tcp_self, "%s:%lu", ip, base);
    return 0;
}

/* The node id COR_GM_NODE_ID (s) asks for: "rank" = rank + 1, a number, or 0 (not set). */
static int node_knob(const struct cor_route_config *cfg, const char *s, unsigned *node)
{
    *node = 0;
    if (!s || !*s) return 0;
    if (strcmp(s, "rank") == 0) {
        if (cfg->self >= 65535) return -1;
        *node = cfg->self + 1;
        return 0;
    }
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v == 0 || v > 65535) {
        gmr_log("COR_GM_NODE_ID='%s': expected 'rank' or a node id 1..65535", s);
        return -1;
    }
    *node = (unsigned)v;
    return 0;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The namespace names every shm endpoint and lock file, which anyone on the host can list
 * (/dev/shm, /tmp): it must not spell the session cookie, which the udp route and our frame
 * header check. Each mix is invertible, their xor is not simply so (not cryptographic: it
 * only keeps the cookie out of plain sight). */
uint64_t gmr_namespace_hash(uint64_t cookie)
{
    return mix64(cookie ^ 0x636f722d6e73ull) ^ mix64(((cookie << 32) | (cookie >> 32)) + 1);
}

int gmr_session_init(const struct cor_route_config *cfg, const struct gmr_knobs *k)
{
    unsigned node;
    if (node_knob(cfg, k->node_id, &node)) return COR_EINVAL;
    pthread_mutex_lock(&session_lock);
    if (session_refs > 0) { /* the process already configured libgm */
        session_refs++;
        pthread_mutex_unlock(&session_lock);
        return gm_init() == GM_SUCCESS ? COR_OK : COR_EROUTE;
    }
    gm_compat_config_t gc;
    gm_compat_config_init(&gc);
    int err = COR_OK;
    char *map = NULL;
    char ns_name[48];
    const char *m1 = getenv("GM_NODES"), *m2 = getenv("GM_NODE_MAP");
    int user_map = (m1 && *m1) || (m2 && *m2);
    const char *want = k->provider;
    int tcp = !user_map && want && !strcmp(want, "tcp");
    if (tcp) {
        if (tcp_endpoint(cfg)) {
            err = COR_EINVAL;
            goto out;
        }
        gc.provider = "tcp;ofi_rxm";
    }
    if (!user_map) {
        if (cfg->npeers > 65535) {
            err = COR_ELIMIT;
            goto out;
        }
        /* "N dK; " per domain: at most 16 bytes each, and our address. */
        size_t cap = (size_t)cfg->npeers * 16 + sizeof tcp_self + 1, used = 0;
        map = malloc(cap);
        if (!map) {
            err = COR_ENOMEM;
            goto out;
        }
        map[0] = '\0';
        for (uint32_t i = 0; i < cfg->npeers; i++)
            used += (size_t)snprintf(map + used, cap - used, "%u d%u%s%s;", i + 1, i,
                                     tcp && i == cfg->self ? " " : "",
                                     tcp && i == cfg->self ? tcp_self : "");
        if (!node) node = cfg->self + 1;
        gc.nodes = map;
    }
    const char *id = getenv("GM_NODE_ID");
    if (node && !(id && *id)) gc.node_id = node;
    const char *ns = getenv("GM_SHM_NAMESPACE");
    if (!(ns && *ns)) {
        /* cor-<session>-...: the names cor-run removes when the session ends (cor.h,
         * cor_session(): the cookie's low 32 bits, 1 for 0), so a domain killed with its
         * port open leaves neither its lock file nor its shm region behind. */
        uint32_t session = (uint32_t)cfg->session_cookie ? (uint32_t)cfg->session_cookie : 1;
        snprintf(ns_name, sizeof ns_name, "cor-%08" PRIx32 "-%016" PRIx64, session,
                 gmr_namespace_hash(cfg->session_cookie));
        gc.shm_namespace = ns_name;
    }
    /* Every peer address the route sends to was published by an open port: a port not open
     * is a domain gone, not one still starting, so libgm's wait for a port to open (a minute
     * by default, for GM programs started by hand) is cut to the route's own limit on
     * silence, COR_GM_DEAD_MS (a second at least). Not to a second alone: over tcp libgm
     * cannot tell a port that is not open from one whose process has not yet taken our
     * connection (tcp;ofi_rxm completes it only when the target polls), and a live domain
     * that got no CPU for a second (ThreadSanitizer on a loaded 2-core machine) was called
     * closed and given up before it ever heard from us. On shm the lock file still says at
     * once that a port closed; the probe finds a killed domain. */
    const char *to = getenv("GM_SEND_TIMEOUT_MS");
    if (!(to && *to)) {
        unsigned t = k->dead_ms > GMR_SEND_TIMEOUT_MS ? k->dead_ms : GMR_SEND_TIMEOUT_MS;
        gc.send_timeout_ms = t < GMR_SEND_TIMEOUT_MAX_MS ? t : GMR_SEND_TIMEOUT_MAX_MS;
    }
    /* GM_BUSY: the program itself started GM before us; its settings stand (as before). */
    gm_status_t st = gm_compat_configure(&gc);
    if (st != GM_SUCCESS && st != GM_BUSY) {
        gmr_log("gm_compat_configure: %s", gm_strerror(st));
        err = st == GM_OUT_OF_MEMORY ? COR_ENOMEM : COR_EINVAL;
        goto out;
    }
    const char *rank_knob = k->node_id;
    ranks_as_nodes = st == GM_SUCCESS && node == cfg->self + 1 && !(id && *id) &&
                     (!user_map || (rank_knob && !strcmp(rank_knob, "rank")));
    if (gm_init() != GM_SUCCESS) {
        gmr_log("gm_init failed (node map / GM_* environment; libgm said why above)");
        err = COR_EROUTE;
    } else {
        session_refs++;
    }
out:
    free(map);
    pthread_mutex_unlock(&session_lock);
    return err;
}

void gmr_session_fini(void)
{
    pthread_mutex_lock(&session_lock);
    if (session_refs > 0) {
        session_refs--;
        gm_finalize();
        /* A later gm_init by other code of this process reads the environment alone (GM_BUSY
         * while that code still has GM started: our settings are in use, nothing changes). */
        if (session_refs == 0) gm_compat_configure(NULL);
    }
    pthread_mutex_unlock(&session_lock);
}

/* ---- ports of this process ------------------------------------------------------------ */

static struct cor_rport *local_ports; /* guarded by session_lock */

void gmr_local_add(struct cor_rport *p)
{
    pthread_mutex_lock(&session_lock);
    p->local_next = local_ports;
    local_ports = p;
    pthread_mutex_unlock(&session_lock);
}

int gmr_local_is(unsigned node, unsigned port)
{
    int found = 0;
    pthread_mutex_lock(&session_lock);
    for (struct cor_rport *q = local_ports; q && !found; q = q->local_next)
        found = q->node_id == node && q->port_id == port;
    pthread_mutex_unlock(&session_lock);
    return found;
}

/* Unlinks p; every other local port that has p as a peer marks it closed (as a BYE would),
 * by a note its owner takes at its next call. */
void gmr_local_remove_and_notify(struct cor_rport *p)
{
    pthread_mutex_lock(&session_lock);
    for (struct cor_rport **l = &local_ports; *l; l = &(*l)->local_next)
        if (*l == p) {
            *l = p->local_next;
            break;
        }
    for (struct cor_rport *q = local_ports; q; q = q->local_next) {
        uint32_t rank;
        if (gmr_lookup(q, p->node_id, p->port_id, &rank) == 0) {
            atomic_store(&q->peers[rank].closed_note, 1);
            atomic_store(&q->notes, 1);
        }
    }
    pthread_mutex_unlock(&session_lock);
}
