/*
 * Foreign data fed to a route's hard port, per route: what a stray or hostile sender can do.
 * udp: datagrams of random bytes and truncated headers to the port's address.
 * gm: GM messages from a port that is not a peer, with a wrong cookie, too short, and
 * garbage at high priority (needs libgm: built with CONF_HAVE_GM); control messages and data
 * frames as a rank's earlier port would send them.
 * pipe (the out-of-tree example, apps/examples/route_pipe.c): connections from another
 * process carrying a short frame, a bad magic, a wrong cookie, a rank outside the session,
 * and the right cookie with the rank of a peer that is another process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "conf_inject.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef CONF_HAVE_GM
#include "gm.h"
#include "gm_ctrl.h" /* the gm route's headers (cor/routes/gm) */
#endif

static int inject_udp(const char *addr)
{
    char ip[64];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof ip) return -1;
    memcpy(ip, addr, (size_t)(colon - addr));
    ip[colon - addr] = '\0';
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) return -1;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) return -1;
    unsigned seed = 99;
    int sent = 0;
    for (int i = 0; i < 50; i++) {
        uint8_t buf[1500];
        size_t len = (size_t)(rand_r(&seed) % (i < 25 ? 40 : 1500)) + 1;
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)rand_r(&seed);
        if (sendto(fd, buf, len, 0, (struct sockaddr *)&sin, sizeof sin) == (ssize_t)len) sent++;
    }
    close(fd);
    return sent;
}

#ifdef CONF_HAVE_GM
struct gm_sent_count {
    int pending;
};

static void sent_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    (void)p;
    (void)st;
    ((struct gm_sent_count *)ctx)->pending--;
}

/* addr is "node:port:host". */
static int inject_gm(const char *addr, uint64_t cookie, void (*pump)(void *), void *arg)
{
    unsigned node, port;
    if (sscanf(addr, "%u:%u:", &node, &port) != 2) return -1;
    struct gm_port *gp = NULL;
    unsigned id;
    for (id = 15; id > 3; id--)
        if (gm_open(&gp, 0, id, "conf-inject", (enum gm_api_version)GM_API_VERSION_2_0_16) ==
            GM_SUCCESS)
            break;
    if (!gp) return -1;
    char *m = gm_dma_malloc(gp, 4096);
    if (!m) {
        gm_close(gp);
        return -1;
    }
    struct gm_sent_count c = {0};
    int sent = 0;
    /* 1: a well-formed data frame (right cookie) from a port that is not a peer */
    memcpy(m, &cookie, 8);
    memset(m + 8, 0x5a, 100);
    c.pending++;
    const char *cls = getenv("COR_GM_CLASS"); /* the route's data size class */
    gm_send_with_callback(gp, m, cls && *cls ? (unsigned)atoi(cls) : 15, 108, GM_LOW_PRIORITY, node,
                          port, sent_cb, &c);
    sent++;
    /* 2: high-priority garbage from a non-peer */
    memset(m + 1024, 0xee, 16);
    c.pending++;
    gm_send_with_callback(gp, m + 1024, 6, 16, GM_HIGH_PRIORITY, node, port, sent_cb, &c);
    sent++;
    for (int i = 0; i < 200000 && c.pending > 0; i++) {
        gm_recv_event_t *e = gm_receive(gp);
        if (GM_RECV_EVENT_TYPE(e) != GM_NO_RECV_EVENT)
            gm_unknown(gp, e);
        else if (pump)
            pump(arg); /* GM completes a send once the target took it into a buffer */
    }
    gm_dma_free(gp, m);
    gm_close(gp);
    return c.pending == 0 ? sent : -1;
}

struct conf_gm_ctrl {
    struct gm_port *gp;
    char *m;
};

struct conf_gm_ctrl *conf_gm_ctrl_open(unsigned as_port)
{
    struct conf_gm_ctrl *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (gm_open(&c->gp, 0, as_port, "conf-stale", (enum gm_api_version)GM_API_VERSION_2_0_16) !=
            GM_SUCCESS ||
        !(c->m = gm_dma_malloc(c->gp, 4096))) {
        conf_gm_ctrl_close(c);
        return NULL;
    }
    return c;
}

int conf_gm_ctrl_send(struct conf_gm_ctrl *c, const char *to_addr, uint64_t cookie,
                      const uint32_t (*msgs)[4], int n, void (*pump)(void *), void *arg)
{
    unsigned node, port;
    if (!c || n > 64 || sscanf(to_addr, "%u:%u:", &node, &port) != 2) return -1;
    struct gm_sent_count sc = {0};
    for (int i = 0; i < n; i++) {
        char *m = c->m + 64 * i;
        memcpy(m, &cookie, 8);
        memcpy(m + 8, msgs[i], 16);
        sc.pending++;
        gm_send_with_callback(c->gp, m, 6, 24, GM_HIGH_PRIORITY, node, port, sent_cb, &sc);
    }
    for (int i = 0; i < 200000 && sc.pending > 0; i++) {
        gm_recv_event_t *e = gm_receive(c->gp);
        if (GM_RECV_EVENT_TYPE(e) != GM_NO_RECV_EVENT)
            gm_unknown(c->gp, e);
        else if (pump)
            pump(arg);
    }
    return sc.pending == 0 ? 0 : -1;
}

int conf_gm_data_send(struct conf_gm_ctrl *c, const char *to_addr, uint64_t cookie,
                      const uint32_t (*frames)[3], int n, void (*pump)(void *), void *arg)
{
    unsigned node, port;
    if (!c || n > 4 || sscanf(to_addr, "%u:%u:", &node, &port) != 2) return -1;
    const char *cls = getenv("COR_GM_CLASS"); /* the route's large data class */
    unsigned size = cls && *cls ? (unsigned)atoi(cls) : 15;
    uint32_t cookie32 = (uint32_t)(cookie ^ (cookie >> 32));
    struct gm_sent_count sc = {0};
    for (int i = 0; i < n; i++) {
        char *m = c->m + 1024 * i;
        gmr_data_encode(m, cookie32, frames[i][0], frames[i][1], frames[i][2]);
        memset(m + GMR_HDR, 0x5a, 64); /* the core's frame: anything, the harness counts it */
        sc.pending++;
        gm_send_with_callback(c->gp, m, size, GMR_HDR + 64, GM_LOW_PRIORITY, node, port, sent_cb,
                              &sc);
    }
    for (int i = 0; i < 200000 && sc.pending > 0; i++) {
        gm_recv_event_t *e = gm_receive(c->gp);
        if (GM_RECV_EVENT_TYPE(e) != GM_NO_RECV_EVENT)
            gm_unknown(c->gp, e);
        else if (pump)
            pump(arg);
    }
    return sc.pending == 0 ? 0 : -1;
}

void conf_gm_ctrl_close(struct conf_gm_ctrl *c)
{
    if (!c) return;
    if (c->m) gm_dma_free(c->gp, c->m);
    if (c->gp) gm_close(c->gp);
    free(c);
}
#else
struct conf_gm_ctrl *conf_gm_ctrl_open(unsigned as_port)
{
    (void)as_port;
    return NULL;
}

int conf_gm_ctrl_send(struct conf_gm_ctrl *c, const char *to_addr, uint64_t cookie,
                      const uint32_t (*msgs)[4], int n, void (*pump)(void *), void *arg)
{
    (void)c, (void)to_addr, (void)cookie, (void)msgs, (void)n, (void)pump, (void)arg;
    return -1;
}

int conf_gm_data_send(struct conf_gm_ctrl *c, const char *to_addr, uint64_t cookie,
                      const uint32_t (*frames)[3], int n, void (*pump)(void *), void *arg)
{
    (void)c, (void)to_addr, (void)cookie, (void)frames, (void)n, (void)pump, (void)arg;
    return -1;
}

void conf_gm_ctrl_close(struct conf_gm_ctrl *c)
{
    (void)c;
}
#endif

/* The child's part: one connection per junk frame; exits 0 when all were sent. */
static void pipe_stranger(const struct sockaddr_un *sa, socklen_t salen, uint64_t cookie)
{
    uint8_t f[5][32];
    size_t len[5] = {5, 32, 32, 32, 32};
    uint32_t magic = 0x70697065u, bad = 0x12345678u, rank1 = 1, far = 99;
    uint64_t wrong = cookie ^ 1;
    memset(f, 0xa5, sizeof f);
    memcpy(f[1], &bad, 4); /* bad magic */
    memcpy(f[2], &magic, 4), memcpy(f[2] + 4, &rank1, 4), memcpy(f[2] + 8, &wrong, 8);
    memcpy(f[3], &magic, 4), memcpy(f[3] + 4, &far, 4), memcpy(f[3] + 8, &cookie, 8);
    memcpy(f[4], &magic, 4), memcpy(f[4] + 4, &rank1, 4), memcpy(f[4] + 8, &cookie, 8);
    for (int i = 0; i < 5; i++) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (fd < 0 || connect(fd, (const struct sockaddr *)sa, salen) != 0 ||
            send(fd, f[i], len[i], MSG_NOSIGNAL) != (ssize_t)len[i])
            _exit(1);
        close(fd);
    }
    _exit(0);
}

static int inject_pipe(const char *addr, uint64_t cookie, void (*pump)(void *), void *arg)
{
    if (strncmp(addr, "unix:@", 6) != 0 ||
        strlen(addr + 6) >= sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, addr + 6, strlen(addr + 6));
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(addr + 6));
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) pipe_stranger(&sa, salen, cookie);
    int st = -1;
    for (int i = 0; i < 5000 && waitpid(pid, &st, WNOHANG) == 0; i++) { /* at most ~5 s */
        if (pump) pump(arg);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (st == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 5 : -1;
}

int conf_inject(const char *route, const char *addr, uint64_t cookie, void (*pump)(void *),
                void *arg)
{
    (void)cookie;
    (void)pump;
    (void)arg;
    if (strcmp(route, "udp") == 0) return inject_udp(addr);
    if (strcmp(route, "pipe") == 0) return inject_pipe(addr, cookie, pump, arg);
#ifdef CONF_HAVE_GM
    if (strcmp(route, "gm") == 0) return inject_gm(addr, cookie, pump, arg);
#endif
    return -1;
}
