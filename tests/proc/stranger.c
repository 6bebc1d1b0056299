/*
 * stranger: a process outside a session that fires traffic at it (proc/sessions.sh).
 *
 *   stranger udp ADDRFILE OTHER_COOKIE COUNT SEED
 *     COUNT datagrams at the udp address in ADDRFILE ("ADDR ip:port", "SESSION <hex>" lines,
 *     as exchange -a writes them), round-robin: random bytes; well-formed data datagrams of
 *     plausible sequence numbers with a guessed cookie, with OTHER_COOKIE (another session's
 *     traffic replayed here) and with the session's own cookie (its traffic replayed from
 *     an address that is not a member's); acks with the session's cookie.
 *   stranger gm ADDRFILE NDOMAINS COUNT SEED    (when built with libgm-compat)
 *     opens a GM port in the session's shared-memory namespace (derived from its cookie, as
 *     the gm route does: the worst case, a stranger that knows the cookie) as node 1 on a port id
 * the session does not use, and sends COUNT messages to GM port 2 of nodes 1..NDOMAINS in the
 * route's size classes: random bytes and headers carrying the session's cookie. Prints "sent N"
 * (and for gm "completed N"): what the session must have dropped and counted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "udp_wire.h"
#include "proc_util.h"
#ifdef STRANGER_GM
#include "gm.h"
#endif

static uint64_t rng;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Reads ADDR and SESSION from an exchange -a file; 0 on success. */
static int read_addrfile(const char *path, char *addr, size_t alen, uint64_t *cookie)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int have = 0;
    if (!f) {
        perror(path);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "ADDR ", 5) && strlen(line + 5) < alen) {
            strcpy(addr, line + 5);
            have |= 1;
        } else if (!strncmp(line, "SESSION ", 8) && sscanf(line + 8, "%" SCNx64, cookie) == 1) {
            have |= 2;
        }
    }
    fclose(f);
    if (have != 3) fprintf(stderr, "stranger: %s lacks ADDR or SESSION\n", path);
    return have == 3 ? 0 : -1;
}

static int run_udp(const char *addrfile, uint64_t other, long count)
{
    char addr[256];
    uint64_t cookie;
    if (read_addrfile(addrfile, addr, sizeof addr, &cookie)) return 1;
    char *colon = strrchr(addr, ':');
    struct sockaddr_in to = {.sin_family = AF_INET};
    if (!colon || inet_pton(AF_INET, (*colon = '\0', addr), &to.sin_addr) != 1) {
        fprintf(stderr, "stranger: bad udp address in %s\n", addrfile);
        return 1;
    }
    to.sin_port = htons((uint16_t)atoi(colon + 1));
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) {
        perror("socket");
        return 1;
    }
    static uint8_t d[1500];
    long sent = 0;
    for (long i = 0; i < count; i++) {
        size_t n;
        struct udp_hdr h = {.type = UDP_T_DATA,
                            .src = 1,
                            .dst = 0,
                            .ack = (uint32_t)(i / 4),
                            .seq = (uint32_t)(i / 4 + 1),
                            .frame_len = 64,
                            .len = 64};
        switch (i % 5) {
        case 0: /* random bytes */
            n = 1 + next_rand() % sizeof d;
            for (size_t k = 0; k < n; k++)
                d[k] = (uint8_t)next_rand();
            break;
        case 1:
            h.cookie = next_rand() | 1;
            goto data; /* a guess */
        case 2:
            h.cookie = other;
            goto data; /* another session's */
        case 3:
            h.cookie = cookie;
            goto data; /* the session's own, replayed */
        default:       /* an ack that would release its window */
            h = (struct udp_hdr){.type = UDP_T_ACK,
                                 .cookie = cookie,
                                 .src = 1,
                                 .dst = 0,
                                 .ack = (uint32_t)i,
                                 .sack = ~0ull};
            udp_wire_put(d, &h);
            n = UDP_HDR_LEN;
            break;
        data:
            udp_wire_put(d, &h);
            for (size_t k = 0; k < 64; k++)
                d[UDP_HDR_LEN + k] = (uint8_t)next_rand();
            n = UDP_HDR_LEN + 64;
            break;
        }
        if (sendto(s, d, n, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)n) sent++;
        if (i % 64 == 63) usleep(1000); /* do not just overflow the socket buffer */
    }
    close(s);
    printf("sent %ld\n", sent);
    return 0;
}

#ifdef STRANGER_GM
/* The session's shm namespace: the same function as gmr_namespace_hash in
 * cor/routes/gm/gm_env.c (a stranger that knows the cookie can compute it). */
static uint64_t namespace_hash(uint64_t cookie)
{
    return mix64(cookie ^ 0x636f722d6e73ull) ^ mix64(((cookie << 32) | (cookie >> 32)) + 1);
}

static long completed;
static void sent_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    gm_dma_free(p, ctx);
    if (st == GM_SUCCESS) completed++;
}

static int run_gm(const char *addrfile, int ndom, long count)
{
    char addr[256], ns[32], nodes[64 * 17] = "";
    uint64_t cookie;
    if (read_addrfile(addrfile, addr, sizeof addr, &cookie)) return 1;
    if (ndom < 1 || ndom > 64) return 1;
    /* The session's node map and namespace, as cor/routes/gm/gm_env.c makes them. */
    for (int r = 0; r < ndom; r++)
        snprintf(nodes + strlen(nodes), sizeof nodes - strlen(nodes), "%d d%d;", r + 1, r);
    uint32_t session = (uint32_t)cookie ? (uint32_t)cookie : 1;
    snprintf(ns, sizeof ns, "cor-%08" PRIx32 "-%016" PRIx64, session, namespace_hash(cookie));
    setenv("GM_NODES", nodes, 1);
    setenv("GM_NODE_ID", "1", 1);
    setenv("GM_SHM_NAMESPACE", ns, 1);
    unsetenv("GM_PROVIDER");
    struct gm_port *p = NULL;
    if (gm_init() != GM_SUCCESS ||
        gm_open(&p, 0, 15, "stranger", (enum gm_api_version)GM_API_VERSION_2_0) != GM_SUCCESS) {
        fprintf(stderr, "stranger: cannot open GM port 15 of node 1 in namespace %s\n", ns);
        return 1;
    }
    static const unsigned sizes[] = {6, 11, 15};
    uint32_t c32 = (uint32_t)(cookie ^ (cookie >> 32));
    long sent = 0;
    for (long i = 0; i < count; i++) {
        unsigned size = sizes[i % 3], prio = size == 6 ? GM_HIGH_PRIORITY : GM_LOW_PRIORITY;
        size_t len = 8 + next_rand() % (size == 6 ? 48 : 1000);
        uint8_t *m = gm_dma_malloc(p, len);
        if (!m) break;
        for (size_t k = 0; k < len; k++)
            m[k] = (uint8_t)next_rand();
        if ((i / ndom) % 2) memcpy(m, &c32, 4); /* the session's cookie, as in the route's header */
        while (gm_num_send_tokens(p) == 0) {
            gm_recv_event_t *e = gm_receive(p);
            gm_unknown(p, e);
        }
        gm_send_with_callback(p, m, size, len, prio, (unsigned)(1 + i % ndom), 2, sent_cb, m);
        sent++;
    }
    /* Wait (at most 5 s) for the sends to land in the session's buffers. */
    time_t until = time(NULL) + 5;
    while (completed < sent && time(NULL) < until) {
        gm_recv_event_t *e = gm_receive(p);
        gm_unknown(p, e);
    }
    printf("sent %ld\ncompleted %ld\n", sent, completed);
    gm_close(p);
    gm_finalize();
    return 0;
}
#endif

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: stranger udp ADDRFILE OTHER_COOKIE COUNT SEED\n"
                        "       stranger gm ADDRFILE NDOMAINS COUNT SEED\n");
        return 2;
    }
    long count = atol(argv[4]);
    rng = strtoull(argv[5], NULL, 0) * 0x9e3779b97f4a7c15ull | 1;
    if (count < 1 || count > 10000000) {
        fprintf(stderr, "stranger: COUNT must be 1..10000000\n");
        return 2;
    }
    if (!strcmp(argv[1], "udp")) return run_udp(argv[2], strtoull(argv[3], NULL, 16), count);
#ifdef STRANGER_GM
    if (!strcmp(argv[1], "gm")) return run_gm(argv[2], atoi(argv[3]), count);
#endif
    fprintf(stderr, "stranger: unknown or not built mode '%s'\n", argv[1]);
    return 2;
}
