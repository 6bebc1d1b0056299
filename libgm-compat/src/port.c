/* port.c - gm_init/gm_finalize, opening and closing ports on libfabric, and
 * the deterministic (node, port) -> fabric address mapping. */
#include "gm_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t gmx_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned gmx_init_count; /* guarded by gmx_lock */

uint64_t gmx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

GMX_EXPORT gm_status_t gm_init(void)
{
    gm_status_t st = GM_SUCCESS;
    pthread_mutex_lock(&gmx_lock);
    if (gmx_init_count == 0 && gmx_config_load() != 0)
        st = GM_FAILURE;
    else
        gmx_init_count++;
    pthread_mutex_unlock(&gmx_lock);
    return st;
}

GMX_EXPORT void gm_finalize(void)
{
    pthread_mutex_lock(&gmx_lock);
    if (gmx_init_count > 0 && --gmx_init_count == 0)
        gmx_config_free();
    pthread_mutex_unlock(&gmx_lock);
}

/* The fabric address of (node, port) in the provider's format. */
static int peer_address(struct gm_port *p, const struct gmx_node *n, unsigned port,
                        void *buf, size_t *len)
{
    if (p->addr_is_str) {
        int w = snprintf(buf, *len, "fi_shm://%s-%u-%u%s", gmx_cfg.shm_ns, n->id, port,
                         p->shm_suffix);
        if (w < 0 || (size_t)w >= *len)
            return -1;
        *len = (size_t)w + 1;
        return 0;
    }
    if (!n->has_addr || *len < sizeof(struct sockaddr_in))
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = n->ipv4;
    sin.sin_port = htons((uint16_t)(n->port_base + port));
    memcpy(buf, &sin, sizeof sin);
    *len = sizeof sin;
    return 0;
}

/* The peer record for (node, port), created on first use; NULL if the node is
 * not in the map (or memory ran out). */
struct gmx_peer *gmx_peer_get(struct gm_port *p, unsigned node, unsigned port)
{
    if (node == 0 || node > gmx_cfg.max_node_id || port >= GMX_NUM_PORTS)
        return NULL;
    if (!p->peers[node]) {
        p->peers[node] = calloc(GMX_NUM_PORTS, sizeof(struct gmx_peer *));
        if (!p->peers[node])
            return NULL;
    }
    struct gmx_peer *peer = p->peers[node][port];
    if (peer)
        return peer;
    const struct gmx_node *n = gmx_node_find(node);
    if (!n)
        return NULL;
    peer = calloc(1, sizeof *peer);
    if (!peer)
        return NULL;
    peer->node = node;
    peer->port = port;
    char addr[160];
    size_t alen = sizeof addr;
    if (peer_address(p, n, port, addr, &alen) == 0) {
        int rc = fi_av_insert(p->av, addr, 1, &peer->addr, 0, NULL);
        peer->resolved = rc == 1;
        if (rc != 1)
            gmx_log("fi_av_insert(node %u port %u) -> %d\n", node, port, rc);
    }
    p->peers[node][port] = peer;
    return peer;
}

/* One process per (namespace, node, port): GM says GM_BUSY to the second. */
static int take_port_lock(unsigned node, unsigned port)
{
    const char *dir = getenv("TMPDIR");
    char path[256];
    snprintf(path, sizeof path, "%s/%s-%u-%u.lock", dir && *dir ? dir : "/tmp",
             gmx_cfg.shm_ns, node, port);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -2;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static gm_status_t open_fabric(struct gm_port *p, const struct gmx_node *self)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints)
        return GM_OUT_OF_MEMORY;
    gm_status_t st = GM_NO_SUCH_DEVICE;
    int rc;
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->mode = 0;
    hints->domain_attr->mr_mode = 0;
    /* Ports are independent and each is used by one thread at a time. */
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    hints->fabric_attr->prov_name = strdup(gmx_cfg.provider);

    struct sockaddr_in sin;
    char name[128];
    int is_str = strstr(gmx_cfg.provider, "shm") == gmx_cfg.provider;
    if (is_str) {
        snprintf(name, sizeof name, "fi_shm://%s-%u-%u", gmx_cfg.shm_ns, p->node_id,
                 p->port_id);
        hints->addr_format = FI_ADDR_STR;
        hints->src_addr = strdup(name);
        hints->src_addrlen = strlen(name) + 1;
    } else {
        if (!self->has_addr) {
            fprintf(stderr, "libgm: provider %s needs an address for node %u in the "
                            "node map\n", gmx_cfg.provider, self->id);
            goto out;
        }
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = self->ipv4;
        sin.sin_port = htons((uint16_t)(self->port_base + p->port_id));
        hints->addr_format = FI_SOCKADDR_IN;
        hints->src_addr = malloc(sizeof sin);
        if (hints->src_addr) {
            memcpy(hints->src_addr, &sin, sizeof sin);
            hints->src_addrlen = sizeof sin;
        }
    }
    rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &p->info);
    if (rc) {
        fprintf(stderr, "libgm: no libfabric provider '%s' with tagged RDM endpoints: %s\n",
                gmx_cfg.provider, fi_strerror(-rc));
        goto out;
    }
    p->addr_is_str = is_str;
    p->inject_size = p->info->tx_attr->inject_size;
    if ((rc = fi_fabric(p->info->fabric_attr, &p->fabric, NULL)) ||
        (rc = fi_domain(p->fabric, p->info, &p->domain, NULL))) {
        fprintf(stderr, "libgm: fabric/domain: %s\n", fi_strerror(-rc));
        goto out;
    }
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 4096,
                                 .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    if ((rc = fi_cq_open(p->domain, &cq_attr, &p->cq, NULL)) ||
        (rc = fi_av_open(p->domain, &av_attr, &p->av, NULL)) ||
        (rc = fi_endpoint(p->domain, p->info, &p->ep, NULL)) ||
        (rc = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(p->ep, &p->av->fid, 0)) || (rc = fi_enable(p->ep))) {
        fprintf(stderr, "libgm: opening endpoint for port %u: %s\n", p->port_id,
                fi_strerror(-rc));
        st = rc == -FI_EADDRINUSE ? GM_BUSY : GM_NO_SUCH_DEVICE;
        goto out;
    }
    if (is_str) {
        /* Peers' names carry the same suffix the provider appended to ours. */
        char got[160];
        size_t glen = sizeof got;
        size_t plen = strlen(name);
        if (fi_getname(&p->ep->fid, got, &glen) == 0 && glen <= sizeof got &&
            strncmp(got, name, plen) == 0 && strlen(got + plen) < sizeof p->shm_suffix)
            strcpy(p->shm_suffix, got + plen);
    }
    st = GM_SUCCESS;
out:
    fi_freeinfo(hints);
    return st;
}

static void close_fabric(struct gm_port *p)
{
    if (p->ep)
        fi_close(&p->ep->fid);
    if (p->av)
        fi_close(&p->av->fid);
    if (p->cq)
        fi_close(&p->cq->fid);
    if (p->domain)
        fi_close(&p->domain->fid);
    if (p->fabric)
        fi_close(&p->fabric->fid);
    if (p->info)
        fi_freeinfo(p->info);
    p->ep = NULL;
    p->av = NULL;
    p->cq = NULL;
    p->domain = NULL;
    p->fabric = NULL;
    p->info = NULL;
}

static void free_port(struct gm_port *p)
{
    close_fabric(p);
    if (p->peers) {
        for (unsigned n = 0; n < p->peers_rows; n++) {
            if (!p->peers[n])
                continue;
            for (unsigned q = 0; q < GMX_NUM_PORTS; q++)
                free(p->peers[n][q]);
            free(p->peers[n]);
        }
        free(p->peers);
    }
    gmx_regions_free(p);
    gmx_pool_free(p);
    free(p->ring);
    free(p->ctrl_mem);
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    free(p);
}

GMX_EXPORT gm_status_t gm_open(struct gm_port **pp, unsigned int unit, unsigned int port,
                               const char *port_name, enum gm_api_version version)
{
    if (!pp)
        return GM_INVALID_PARAMETER;
    *pp = NULL;
    unsigned v = (unsigned)version;
    int v_ok = (v >= GM_API_VERSION_1_0 && v <= GM_API_VERSION_1_6) ||
               v == GM_API_VERSION_2_0 ||
               (v >= GM_API_VERSION_2_0 << 8 && v <= GM_API_VERSION_2_0_16);
    if (!v_ok)
        return GM_INCOMPATIBLE_LIB_AND_DRIVER;
    if (unit != 0)
        return GM_NO_SUCH_DEVICE;
    if (port >= GMX_NUM_PORTS)
        return GM_INVALID_PARAMETER;
    if (port == 0 || port == 1 || port == 3)
        return GM_BUSY; /* daemon, mapper, ethernet */
    if (gm_init() != GM_SUCCESS)
        return GM_FAILURE;

    gm_status_t st = GM_OUT_OF_MEMORY;
    struct gm_port *p = calloc(1, sizeof *p);
    if (!p)
        goto fail_init;
    p->lock_fd = -1;
    p->node_id = gmx_cfg.self;
    p->port_id = port;
    p->self_bits = gmx_sender_bits(p->node_id, port);
    snprintf(p->name, sizeof p->name, "%s", port_name ? port_name : "");
    p->acceptable[0] = p->acceptable[1] = ~(gm_size_t)0;

    p->lock_fd = take_port_lock(p->node_id, port);
    if (p->lock_fd < 0) {
        st = p->lock_fd == -1 ? GM_BUSY : GM_FAILURE;
        goto fail;
    }
    p->peers_rows = gmx_cfg.max_node_id + 1;
    p->peers = calloc(p->peers_rows, sizeof *p->peers);
    p->ring_cap = 512;
    p->ring = malloc(p->ring_cap * sizeof *p->ring);
    p->ctrl_mem = malloc(GMX_CTRL_BUFS * GMX_CTRL_BUF_LEN);
    if (!p->peers || !p->ring || !p->ctrl_mem)
        goto fail;

    st = open_fabric(p, gmx_node_find(p->node_id));
    if (st != GM_SUCCESS)
        goto fail;
    for (unsigned i = 0; i < GMX_CTRL_BUFS; i++) {
        struct gmx_rreq *r = gmx_rreq_get(p);
        if (!r) {
            st = GM_OUT_OF_MEMORY;
            goto fail;
        }
        r->kind = GMX_R_CTRL;
        r->buf = p->ctrl_mem + (size_t)i * GMX_CTRL_BUF_LEN;
        p->ctrl_reqs[i] = r;
        if (gmx_post_ctrl(p, r) != 0) {
            st = GM_NO_SUCH_DEVICE;
            goto fail;
        }
    }
    gmx_log("opened port %u on node %u\n", port, p->node_id);
    *pp = p;
    return GM_SUCCESS;
fail:
    if (p)
        free_port(p);
fail_init:
    gm_finalize();
    return st;
}

GMX_EXPORT void gm_close(struct gm_port *p)
{
    if (!p)
        return;
    free_port(p);
    gm_finalize();
}
