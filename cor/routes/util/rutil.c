/* Logging, "auto" addresses and the port base's set-up of the route layer (rutil.h). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rutil.h"

void rutil_log(const char *who, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", who, line);
}

int rutil_auto_ipv4(char *ip, char *ifname)
{
    struct ifaddrs *ifs = NULL;
    int found = 0;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) ||
                !(i->ifa_flags & IFF_RUNNING) || (ntohl(a.s_addr) >> 24) == 127)
                continue;
            inet_ntop(AF_INET, &a, ip, INET_ADDRSTRLEN);
            if (ifname) snprintf(ifname, IF_NAMESIZE, "%s", i->ifa_name);
            found = 1;
        }
        freeifaddrs(ifs);
    }
    if (!found) strcpy(ip, "127.0.0.1");
    return found ? 0 : -1;
}

int rutil_port_init(struct rutil_port *b, const char *who, const struct cor_route_config *cfg,
                    const struct cor_route_upcalls *up, uint32_t max_peers)
{
    if (!cfg || !up || !up->deliver || !up->send_done || !up->peer_failed || cfg->npeers == 0 ||
        cfg->npeers > max_peers || cfg->self >= cfg->npeers) {
        rutil_log(who, "open: invalid configuration or upcalls");
        return COR_EINVAL;
    }
    b->up = *up;
    b->cookie = cfg->session_cookie;
    b->self = cfg->self;
    b->npeers = cfg->npeers;
    b->port_index = cfg->port_index;
    /* A peer fails at most once: npeers entries always suffice. */
    b->fails.n = 0;
    b->fails.v = calloc(cfg->npeers, sizeof *b->fails.v);
    b->fails.out = calloc(cfg->npeers, sizeof *b->fails.out);
    if (!b->fails.v || !b->fails.out) {
        rutil_port_fini(b);
        return COR_ENOMEM;
    }
    return COR_OK;
}

void rutil_port_fini(struct rutil_port *b)
{
    free(b->fails.v);
    free(b->fails.out);
    b->fails.v = b->fails.out = NULL;
    b->fails.n = 0;
}
