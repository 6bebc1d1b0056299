/* Logging, open() checks, "auto" addresses and the failed-peer list of the route layer. */
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

int rutil_open_check(const char *who, const struct cor_route_config *cfg,
                     const struct cor_route_upcalls *up, uint32_t max_peers)
{
    if (!cfg || !up || !up->deliver || !up->send_done || !up->peer_failed || cfg->npeers == 0 ||
        cfg->npeers > max_peers || cfg->self >= cfg->npeers) {
        rutil_log(who, "open: invalid configuration or upcalls");
        return COR_EINVAL;
    }
    return COR_OK;
}

int rutil_fails_init(struct rutil_fails *f, uint32_t npeers)
{
    f->n = 0;
    f->v = calloc(npeers ? npeers : 1, sizeof *f->v);
    f->out = calloc(npeers ? npeers : 1, sizeof *f->out);
    if (!f->v || !f->out) {
        rutil_fails_fini(f);
        return -1;
    }
    return 0;
}

void rutil_fails_fini(struct rutil_fails *f)
{
    free(f->v);
    free(f->out);
    f->v = f->out = NULL;
    f->n = 0;
}
