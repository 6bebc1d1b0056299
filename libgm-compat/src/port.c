/* port.c - gm_init/gm_finalize, opening and closing ports on libfabric, and
 * the deterministic (node, port) -> fabric address mapping. */
#include "gm_internal.h"
#include "gm_compat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t gmx_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned gmx_init_count;      /* guarded by gmx_lock */
static struct gm_port *gmx_registry; /* open ports; guarded by gmx_lock */
atomic_int gmx_backlogged_ports;
atomic_uint gmx_close_epoch;
atomic_int gmx_open_ports;
static pthread_once_t gmx_atexit_once = PTHREAD_ONCE_INIT;

/* Fabric objects of shm ports closed while other ports of this process were
 * open.  libfabric's shm provider does not survive an endpoint closing under
 * a peer endpoint of the same process that has talked to it, so those wait
 * here (receives cancelled, address unpublished) until the last port
 * closes.  Guarded by gmx_lock. */
struct zombie {
    struct zombie *next;
    char region[GMX_REGION_NAME]; /* its shm region's name ("" if none) */
    dev_t dev;                    /* ... and the file it named when the port closed */
    ino_t ino;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
};
static struct zombie *gmx_zombies;
static int gmx_watchdog_running; /* guarded by gmx_lock */

/* While shm ports are open: frees provider calls stuck on a dead peer (unstick.c).  Ends
 * when no port is open; the next shm open starts another. */
static void *watchdog_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "gm-watchdog", 0, 0, 0); /* for top -H, perf, gdb */
    int busy = 1;
    for (;;) {
        uint64_t period = gmx_unstick_period_ns(busy);
        struct timespec nap = {(time_t)(period / 1000000000u), (long)(period % 1000000000u)};
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&gmx_lock);
        if (!gmx_registry) {
            gmx_watchdog_running = 0;
            pthread_mutex_unlock(&gmx_lock);
            return NULL;
        }
        busy = gmx_unstick_scan(gmx_registry);
        pthread_mutex_unlock(&gmx_lock);
    }
}

/* Called with gmx_lock held, after p joined the registry. */
static void watchdog_start(struct gm_port *p)
{
    if (!p->addr_is_str || p->shm || gmx_watchdog_running) return; /* (rings have no locks) */
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The watchdog must not take signals meant for the program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, &attr, watchdog_main, NULL) == 0)
        gmx_watchdog_running = 1;
    else
        gmx_log("no watchdog thread: a send to a killed shm peer may hang\n");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}
/* initial-exec: libgm is often loaded with dlopen (by the gm route's plugin), which would make
 * this dynamic TLS, a block glibc mallocs per thread and frees when a later thread reuses an
 * ended thread's stack, a hand-over ThreadSanitizer cannot see (it reported the free as racing
 * with the ended thread's last write here: conformance/gm-proc.sh, shm with 2 ports). The
 * static TLS block glibc keeps for dlopen'ed libraries holds it instead (4 bytes). */
static _Thread_local int gmx_helping __attribute__((tls_model("initial-exec")));

/* Progresses the other open ports of this process that we can lock right
 * now (never waits: the caller holds its own port lock). */
void gmx_help_others(struct gm_port *self)
{
    if (gmx_helping || pthread_mutex_trylock(&gmx_lock) != 0) return;
    gmx_helping = 1;
    for (struct gm_port *q = gmx_registry; q; q = q->reg_next) {
        if (q == self || pthread_mutex_trylock(&q->lock) != 0) continue;
        gmx_progress(q);
        gmx_port_unlock(q);
    }
    gmx_helping = 0;
    pthread_mutex_unlock(&gmx_lock);
}

uint64_t gmx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same clock at tick resolution (a few ms), cheaper: for timeouts and
 * liveness, never for alarms. */
uint64_t gmx_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The file in /dev/shm of a shm region name ("/name"). */
static int region_stat(const char *region, struct stat *st)
{
    char path[GMX_REGION_NAME + 16];
    snprintf(path, sizeof path, "/dev/shm%s", region);
    return lstat(path, st);
}

/* At exit, acks the open ports still owe go out: their senders' callbacks
 * must not wait for a process that is gone.  Their lock files go too, and
 * the shm provider's regions, which it removes only when an endpoint is
 * closed: those of open ports (under their locks) and of ports closed
 * while others were open (zombies: if the name still names their file). */
static void flush_at_exit(void)
{
    if (pthread_mutex_trylock(&gmx_lock) != 0) return;
    for (struct gm_port *q = gmx_registry; q; q = q->reg_next) {
        if (pthread_mutex_trylock(&q->lock) != 0) continue;
        gmx_acks_flush(q, 1);
        gmx_lock_release(q->node_id, q->port_id, q->lock_fd, 1);
        q->lock_fd = -1;
        gmx_port_unlock(q);
    }
    for (struct zombie *z = gmx_zombies; z; z = z->next) {
        struct stat st;
        if (z->region[0] && region_stat(z->region, &st) == 0 && st.st_dev == z->dev &&
            st.st_ino == z->ino)
            shm_unlink(z->region);
    }
    pthread_mutex_unlock(&gmx_lock);
}

static void register_atexit(void)
{
    atexit(flush_at_exit);
}

GMX_EXPORT gm_status_t gm_init(void)
{
    pthread_once(&gmx_atexit_once, register_atexit);
    gm_status_t st = GM_SUCCESS;
    pthread_mutex_lock(&gmx_lock);
    if (gmx_init_count == 0 && gmx_config_load() != 0)
        st = GM_FAILURE;
    else
        gmx_init_count++;
    pthread_mutex_unlock(&gmx_lock);
    return st;
}

GMX_EXPORT gm_status_t gm_compat_configure(const gm_compat_config_t *cfg)
{
    pthread_mutex_lock(&gmx_lock);
    gm_status_t st = gmx_init_count ? GM_BUSY : gmx_config_set(cfg);
    pthread_mutex_unlock(&gmx_lock);
    return st;
}

GMX_EXPORT void gm_finalize(void)
{
    pthread_mutex_lock(&gmx_lock);
    if (gmx_init_count > 0 && --gmx_init_count == 0) gmx_config_free();
    pthread_mutex_unlock(&gmx_lock);
}

/* The fabric address of (node, port) in the provider's format. */
static int peer_address(struct gm_port *p, const struct gmx_node *n, unsigned port, void *buf,
                        size_t *len)
{
    if (p->addr_is_str) {
        char path[256];
        gmx_lock_path(n->id, port, path, sizeof path);
        int fd = gmx_lock_open(path, O_RDONLY);
        if (fd < 0) return -1;
        ssize_t got = pread(fd, buf, *len - 1, 0);
        close(fd);
        if (got <= 0) return -1;
        ((char *)buf)[got] = '\0';
        *len = strlen(buf) + 1;
        return *len > 1 ? 0 : -1;
    }
    if (!__atomic_load_n(&n->has_addr, __ATOMIC_ACQUIRE) || *len < sizeof(struct sockaddr_in))
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = n->ipv4;
    sin.sin_port = htons((uint16_t)(n->port_base + port));
    memcpy(buf, &sin, sizeof sin);
    *len = sizeof sin;
    return 0;
}

/* (Re)resolves peer->addr; 1 if resolved.  For shm this follows the target
 * if another process reopened it since. */
int gmx_peer_resolve(struct gm_port *p, struct gmx_peer *peer)
{
    const struct gmx_node *n = gmx_node_find(peer->node);
    if (!n) return 0;
    if (peer->resolved && !p->addr_is_str) return 1;
    char addr[sizeof peer->shm_name];
    size_t alen = sizeof addr;
    if (peer_address(p, n, peer->port, addr, &alen) != 0) return peer->resolved;
    if (peer->resolved) {
        if (strcmp(addr, peer->shm_name) == 0) return 1;
        gmx_tp_remove(p, peer);
        peer->resolved = 0;
    }
    peer->nkeys = 0; /* a new incarnation: its registrations are unknown */
    if (!gmx_tp_insert(p, peer, addr)) return 0;
    if (p->addr_is_str) {
        memcpy(peer->shm_name, addr, alen);
        gmx_bell_unmap(peer->bell); /* of the incarnation before, if any */
        peer->bell = gmx_bell_map_peer(peer->node, peer->port);
        gmx_qlock_unmap(peer->qlock);
        peer->qlock = p->shm ? NULL : gmx_qlock_map(addr);
        peer->qlock_held_ns = 0;
    }
    peer->resolved = 1;
    if (p->addr_is_str) peer->existed = 1; /* its lock file had an address: it was open */
    return 1;
}

/* Nonzero if the target port is known not to be open (shm: nobody holds its lock);
 * GMX_PORT_DEAD if its lock file showed it had been open (its owner died). */
int gmx_peer_closed(struct gm_port *p, struct gmx_peer *peer)
{
    if (!p->addr_is_str) return 0;
    int st = gmx_lock_unheld(peer->node, peer->port);
    if (st == GMX_PORT_HELD) return 0;
    if (st == GMX_PORT_DEAD) peer->existed = 1;
    if (p->shm && peer->resolved) {
        /* Rings: let go of its region now, so what still waits in our queue for room in its
         * ring (the DATA of a large message) fails at once. It would wait forever: once its
         * header failed (the stream to a closed port), that DATA's completion is the only
         * one left to run the message's callback. */
        gmx_tp_remove(p, peer);
        peer->resolved = 0;
        peer->shm_name[0] = '\0';
    }
    gmx_note_peer_lost();
    return st;
}

GMX_EXPORT gm_status_t gm_compat_port_probe(struct gm_port *p, unsigned int node, unsigned int port)
{
    if (!p || !p->addr_is_str) return GM_SUCCESS; /* no lock files: the provider will tell */
    if (gmx_lock_unheld(node, port) == GMX_PORT_HELD) return GM_SUCCESS;
    gmx_note_peer_lost();
    return GM_SEND_TARGET_PORT_CLOSED;
}

GMX_EXPORT void gm_compat_set_stuck_notify(struct gm_port *p, void (*fn)(void *arg), void *arg)
{
    if (!p) return;
    pthread_mutex_lock(&gmx_lock); /* the watchdog reads them under it */
    p->stuck_fn = fn;
    p->stuck_arg = arg;
    pthread_mutex_unlock(&gmx_lock);
}

/* shm: 1 if peer must not be touched through libfabric now.  A process
 * killed while it held its shm region's spin lock leaves every later send
 * to it spinning forever inside the provider, so a peer silent for more
 * than a clock tick (1-4 ms) is checked (its lock file) before each
 * operation; a dead one is remembered for 10 ms.  Otherwise one coarse
 * clock read. */
int gmx_peer_gone(struct gm_port *p, struct gmx_peer *peer)
{
    if (!p->addr_is_str) return 0;
    uint64_t now = gmx_coarse_ns();
    if (now - peer->heard_ns < 1000000u) return 0;
    if (peer->gone_ns && now - peer->gone_ns < 10000000u) return 1;
    if (!gmx_peer_closed(p, peer)) {
        peer->gone_ns = 0;
        /* Open, but perhaps by a new owner since we last heard (a port id is reused): its
         * region has a name of its own, which the lock file gives; sending on to the
         * earlier owner's would lose everything until the new one speaks first. */
        if (peer->resolved) gmx_peer_resolve(p, peer);
        return 0;
    }
    peer->gone_ns = now;
    return 1;
}

/* Drops the provider's connection to peer (its address leaves the AV, which closes it) and
 * inserts the address again: the next send connects anew. */
void gmx_peer_renew(struct gm_port *p, struct gmx_peer *peer)
{
    if (peer->resolved) gmx_tp_remove(p, peer);
    peer->resolved = 0;
    gmx_peer_resolve(p, peer);
}

/* The peer record for (node, port), created on first use; NULL if the node is
 * not in the map (or memory ran out). */
struct gmx_peer *gmx_peer_get(struct gm_port *p, unsigned node, unsigned port)
{
    if (node == 0 || node > gmx_cfg.max_node_id || port >= GMX_NUM_PORTS) return NULL;
    if (!p->peers[node]) {
        p->peers[node] = calloc(GMX_NUM_PORTS, sizeof(struct gmx_peer *));
        if (!p->peers[node]) return NULL;
    }
    struct gmx_peer *peer = p->peers[node][port];
    if (peer) return peer;
    if (!gmx_node_find(node)) return NULL;
    peer = calloc(1, sizeof *peer);
    if (!peer) return NULL;
    peer->node = node;
    peer->port = port;
    peer->bits = gmx_sender_bits(node, port);
    gmx_peer_resolve(p, peer);
    p->peers[node][port] = peer;
    return peer;
}

static gm_status_t open_fabric(struct gm_port *p, const struct gmx_node *self)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints) return GM_OUT_OF_MEMORY;
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
        /* Each opening of a port id gets a region name of its own (the process and its count
         * of openings after the port's stem): a peer that knew an earlier owner of this port
         * id follows the lock file to the new name (gmx_peer_resolve), never the earlier
         * owner's region, which the provider may still have mapped under the old name. */
        static _Atomic unsigned openings;
        snprintf(name, sizeof name, "fi_shm://%s-%u-%u.%x.%x", gmx_cfg.shm_ns, p->node_id,
                 p->port_id, (unsigned)getpid(), atomic_fetch_add(&openings, 1));
        hints->addr_format = FI_ADDR_STR;
        hints->src_addr = strdup(name);
        hints->src_addrlen = strlen(name) + 1;
    } else {
        if (!self->has_addr) {
            fprintf(stderr,
                    "libgm: provider %s needs an address for node %u in the "
                    "node map\n",
                    gmx_cfg.provider, self->id);
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
    /* RMA if the provider has it without local registration (then puts and
     * gets need no target CPU); else messages only. */
    rc = -FI_ENODATA;
    if (gmx_cfg.rma) {
        hints->caps = FI_TAGGED | FI_RMA;
        hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
        rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &p->info);
        p->rma = rc == 0;
    }
    if (rc) {
        hints->caps = FI_TAGGED;
        hints->domain_attr->mr_mode = 0;
        rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &p->info);
    }
    if (rc) {
        fprintf(stderr, "libgm: no libfabric provider '%s' with tagged RDM endpoints: %s\n",
                gmx_cfg.provider, fi_strerror(-rc));
        goto out;
    }
    p->addr_is_str = is_str;
    p->inject_size = p->info->tx_attr->inject_size;
    p->eager_max = gmx_eager_max(p->inject_size);
    /* shm injects a page: a client message that fills it may go in the short form
     * (gmx_short), one injected message, instead of a header and its DATA. */
    p->short_form = is_str && p->info->domain_attr->cq_data_size >= sizeof(uint64_t) &&
                    p->inject_size > p->eager_max && p->inject_size <= GMX_EAGER_MAX;
    if (p->rma) {
        int mode = p->info->domain_attr->mr_mode;
        p->mr_virt = (mode & FI_MR_VIRT_ADDR) != 0;
        p->mr_prov_key = (mode & FI_MR_PROV_KEY) != 0;
        /* Requested keys differ between incarnations of a port, so a
         * sender's stale key never names a new registration. */
        p->next_key = (gmx_now_ns() & 0xffffffffffULL) << 20;
        gmx_log("port %u: RMA on (mr_mode %#x)\n", p->port_id, mode);
    }
    if ((rc = fi_fabric(p->info->fabric_attr, &p->fabric, NULL)) ||
        (rc = fi_domain(p->fabric, p->info, &p->domain, NULL))) {
        fprintf(stderr, "libgm: fabric/domain: %s\n", fi_strerror(-rc));
        goto out;
    }
    struct fi_cq_attr cq_attr = {
        .format = FI_CQ_FORMAT_TAGGED, .size = 4096, .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    if ((rc = fi_cq_open(p->domain, &cq_attr, &p->cq, NULL)) ||
        (rc = fi_av_open(p->domain, &av_attr, &p->av, NULL)) ||
        (rc = fi_endpoint(p->domain, p->info, &p->ep, NULL)) ||
        (rc = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(p->ep, &p->av->fid, 0)) || (rc = fi_enable(p->ep))) {
        fprintf(stderr, "libgm: opening endpoint for port %u: %s\n", p->port_id, fi_strerror(-rc));
        st = rc == -FI_EADDRINUSE ? GM_BUSY : GM_NO_SUCH_DEVICE;
        goto out;
    }
    if (is_str) {
        /* Publish our exact address for peers (see lock_path). */
        char got[128];
        size_t glen = sizeof got;
        if ((rc = fi_getname(&p->ep->fid, got, &glen)) != 0 || glen > sizeof got ||
            pwrite(p->lock_fd, got, strnlen(got, glen), 0) <= 0) {
            fprintf(stderr, "libgm: cannot publish the address of port %u\n", p->port_id);
            goto out;
        }
        /* Its region's name, "/<name>" for "fi_shm://<name>" (for the cleanup at exit). */
        char addr[sizeof got + 1];
        snprintf(addr, sizeof addr, "%.*s", (int)strnlen(got, glen), got);
        const char *nm = strstr(addr, "://");
        if (nm) snprintf(p->region, sizeof p->region, "/%s", nm + 3);
    }
    st = GM_SUCCESS;
out:
    fi_freeinfo(hints);
    return st;
}

static void close_fids(struct fid_ep *ep, struct fid_av *av, struct fid_cq *cq,
                       struct fid_domain *domain, struct fid_fabric *fabric, struct fi_info *info)
{
    if (ep) fi_close(&ep->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) fi_freeinfo(info);
}

/* Called with gmx_lock held, when no port is open any more. */
static void bury_zombies(void)
{
    while (gmx_zombies) {
        struct zombie *z = gmx_zombies;
        gmx_zombies = z->next;
        close_fids(z->ep, z->av, z->cq, z->domain, z->fabric, z->info);
        free(z);
    }
}

static void close_fabric(struct gm_port *p)
{
    close_fids(p->ep, p->av, p->cq, p->domain, p->fabric, p->info);
    p->ep = NULL;
    p->av = NULL;
    p->cq = NULL;
    p->domain = NULL;
    p->fabric = NULL;
    p->info = NULL;
}

static void free_port(struct gm_port *p)
{
    for (unsigned i = 0; i < p->nregions; i++) {
        if (p->regions[i].mr) {
            fi_close(&p->regions[i].mr->fid);
            p->regions[i].mr = NULL;
        }
    }
    close_fabric(p);
    if (p->peers) { /* (before the rings go: their mappings of the peers go with them) */
        for (unsigned n = 0; n < p->peers_rows; n++) {
            if (!p->peers[n]) continue;
            for (unsigned q = 0; q < GMX_NUM_PORTS; q++) {
                if (p->peers[n][q]) {
                    gmx_bell_unmap(p->peers[n][q]->bell);
                    gmx_qlock_unmap(p->peers[n][q]->qlock);
                }
                free(p->peers[n][q]);
            }
            free(p->peers[n]);
        }
        free(p->peers);
    }
    gmx_shm_close(p);
    gmx_regions_free(p);
    gmx_pool_free(p);
    gmx_bounce_free(p);
    free(p->ring);
    gmx_lock_release(p->node_id, p->port_id, p->lock_fd, 0);
    if (p->bell != &p->own_bell) gmx_bell_unmap(p->bell);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

GMX_EXPORT gm_status_t gm_open(struct gm_port **pp, unsigned int unit, unsigned int port,
                               const char *port_name, enum gm_api_version version)
{
    if (!pp) return GM_INVALID_PARAMETER;
    *pp = NULL;
    unsigned v = (unsigned)version;
    int v_ok = (v >= GM_API_VERSION_1_0 && v <= GM_API_VERSION_1_6) || v == GM_API_VERSION_2_0 ||
               (v >= GM_API_VERSION_2_0 << 8 && v <= GM_API_VERSION_2_0_16);
    if (!v_ok) return GM_INCOMPATIBLE_LIB_AND_DRIVER;
    if (unit != 0) return GM_NO_SUCH_DEVICE;
    if (port >= GMX_NUM_PORTS) return GM_INVALID_PARAMETER;
    if (port == 0 || port == 1 || port == 3) return GM_BUSY; /* daemon, mapper, ethernet */
    if (gm_init() != GM_SUCCESS) return GM_FAILURE;

    gm_status_t st = GM_OUT_OF_MEMORY;
    struct gm_port *p = calloc(1, sizeof *p);
    if (!p) goto fail_init;
    p->lock_fd = -1;
    p->bell = &p->own_bell;
    pthread_mutex_init(&p->lock, NULL);
    p->node_id = gmx_cfg.self;
    p->port_id = port;
    p->self_bits = gmx_sender_bits(p->node_id, port);
    p->epoch = (uint32_t)(gmx_now_ns() ^ (uint64_t)getpid() << 16) | 1u;
    snprintf(p->name, sizeof p->name, "%s", port_name ? port_name : "");
    p->acceptable[0] = p->acceptable[1] = ~(gm_size_t)0;

    /* What killed processes left on this host (their lock files and shm regions) goes now,
     * whatever their namespace.  Then one process per (namespace, node, port): GM says
     * GM_BUSY to the second. */
    unsigned swept = gmx_lock_sweep();
    if (swept) gmx_log("removed %u port(s) left by dead processes\n", swept);
    p->lock_fd = gmx_lock_take(p->node_id, port);
    if (p->lock_fd < 0) {
        st = p->lock_fd == -1 ? GM_BUSY : GM_FAILURE;
        goto fail;
    }
    struct gmx_bell *mapped = gmx_bell_map_own(p->lock_fd);
    if (mapped) {
        p->bell = mapped;
        gmx_keytab_reset(gmx_keytab_of(mapped)); /* a dead owner's keys are not ours */
    }
    p->peers_rows = gmx_cfg.max_node_id + 1;
    p->peers = calloc(p->peers_rows, sizeof *p->peers);
    p->ring_cap = 512;
    p->ring = malloc(p->ring_cap * sizeof *p->ring);
    if (!p->peers || !p->ring) goto fail;

    st = gmx_transport_rings() ? gmx_shm_open(p) : open_fabric(p, gmx_node_find(p->node_id));
    if (st != GM_SUCCESS) goto fail;
    if (gmx_bounce_fill(p) != 0) {
        st = GM_NO_SUCH_DEVICE;
        goto fail;
    }
    gmx_log("opened port %u on node %u over %s (inject %zu B, eager payloads <= %zu B)\n", port,
            p->node_id, p->shm ? "own shm rings" : "libfabric", p->inject_size, p->eager_max);
    pthread_mutex_lock(&gmx_lock);
    p->reg_next = gmx_registry;
    gmx_registry = p;
    atomic_fetch_add(&gmx_open_ports, 1);
    watchdog_start(p);
    pthread_mutex_unlock(&gmx_lock);
    *pp = p;
    return GM_SUCCESS;
fail:
    if (p) free_port(p);
fail_init:
    gm_finalize();
    return st;
}

/* Before our endpoint goes, every live target must have processed what we sent it: GM's
 * NIC finished sends in flight after the process let go of them, so a client may close
 * right after its last send (on tcp nothing would progress it any more: the send was
 * lost).  On shm it also keeps libfabric 1.17's shm provider from crashing a target that
 * handles a connection request from an endpoint that no longer exists (it dereferences a
 * NULL region in fi_cq_read): processes that come and go at any time (PVM tasks) hit this
 * whenever one exits right after its first message to a peer.  Bounded by
 * GM_CLOSE_LINGER_MS; targets known dead (shm: lock file free) are not waited for. */
static void linger_for_acks(struct gm_port *p)
{
    if (!gmx_cfg.close_linger_ms) return;
    uint64_t deadline = gmx_now_ns() + (uint64_t)gmx_cfg.close_linger_ms * 1000000u;
    for (;;) {
        gmx_port_lock(p);
        gmx_progress(p);
        int waiting = 0;
        for (struct gmx_peer *q = p->watch; q && !waiting; q = q->next_watch)
            waiting = q->inflight && !gmx_peer_gone(p, q);
        /* (a stream held after an error waits for the client, not for the target) */
        for (struct gmx_peer *q = p->backlogged; q && !waiting; q = q->next_backlogged)
            waiting = (q->dataq || (q->backlog && !q->disabled[q->backlog->prio])) &&
                      !gmx_peer_gone(p, q);
        gmx_port_unlock(p);
        if (!waiting || gmx_now_ns() > deadline) return;
        struct timespec nap = {0, 50000};
        nanosleep(&nap, NULL);
    }
}

GMX_EXPORT void gm_close(struct gm_port *p)
{
    if (!p) return;
    linger_for_acks(p);
    /* Once out of the registry (under gmx_lock) no helper can reach it. */
    /* Acks we owe go out now (senders wait for them), and senders forget
     * our registrations. */
    gmx_port_lock(p);
    gmx_acks_flush(p, 1);
    gmx_nack_held(p);
    gmx_regions_unexport_all(p);
    gmx_port_unlock(p);
    pthread_mutex_lock(&gmx_lock);
    for (struct gm_port **link = &gmx_registry; *link; link = &(*link)->reg_next) {
        if (*link == p) {
            *link = p->reg_next;
            atomic_fetch_sub(&gmx_open_ports, 1);
            break;
        }
    }
    struct zombie *z = NULL;
    if (p->addr_is_str && gmx_registry && p->ep && (z = calloc(1, sizeof *z))) {
        gmx_rreq_cancel_all(p);
        *z = (struct zombie){.next = gmx_zombies,
                             .info = p->info,
                             .fabric = p->fabric,
                             .domain = p->domain,
                             .ep = p->ep,
                             .cq = p->cq,
                             .av = p->av};
        struct stat st;
        if (p->region[0] && region_stat(p->region, &st) == 0) {
            memcpy(z->region, p->region, sizeof z->region);
            z->dev = st.st_dev;
            z->ino = st.st_ino;
        }
        gmx_zombies = z;
        p->info = NULL;
        p->fabric = NULL;
        p->domain = NULL;
        p->ep = NULL;
        p->cq = NULL;
        p->av = NULL;
    }
    pthread_mutex_unlock(&gmx_lock);
    for (gm_alarm_t *a = p->alarms; a; a = a->next)
        a->state = GM_ALARM_FREE;
    if (p->backlogged) atomic_fetch_sub(&gmx_backlogged_ports, 1);
    free_port(p);
    atomic_fetch_add(&gmx_close_epoch, 1);
    pthread_mutex_lock(&gmx_lock);
    if (!gmx_registry) bury_zombies();
    pthread_mutex_unlock(&gmx_lock);
    gm_finalize();
}
