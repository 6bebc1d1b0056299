/* Local address selection and peer address parsing of CoRudpRoute (see udp_sock.h). */
#include "udp_sock.h"
#include "udp_wire.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* IPv4 + UDP headers: what the MTU must also carry. */
#define UDP_IP_OVERHEAD 28

static uint32_t iface_dgram(const char *ifname)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
    int mtu = 1500;
    if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &ifr) == 0) mtu = ifr.ifr_mtu;
    if (fd >= 0) close(fd);
    if (mtu < 576) mtu = 576;
    uint32_t d = (uint32_t)mtu - UDP_IP_OVERHEAD;
    return d > UDP_DGRAM_MAX ? UDP_DGRAM_MAX : d;
}

static int is_loop(struct in_addr a)
{
    return (ntohl(a.s_addr) >> 24) == 127;
}

int udp_addr_pick(const char *hint, char *ip, uint32_t *dgram, int *loopback)
{
    if (!hint || !*hint || !strcmp(hint, "loopback")) {
        strcpy(ip, "127.0.0.1");
        *dgram = UDP_DGRAM_MAX;
        *loopback = 1;
        return 0;
    }
    if (!strcmp(hint, "auto")) {
        char ifname[IF_NAMESIZE];
        if (rutil_auto_ipv4(ip, ifname) == 0) {
            *dgram = iface_dgram(ifname);
            *loopback = 0;
        } else { /* no usable interface: loopback still works for one host */
            *dgram = UDP_DGRAM_MAX;
            *loopback = 1;
        }
        return 0;
    }
    struct in_addr want;
    if (inet_pton(AF_INET, hint, &want) != 1) return -1;
    if (is_loop(want)) {
        snprintf(ip, INET_ADDRSTRLEN, "%s", hint);
        *dgram = UDP_DGRAM_MAX;
        *loopback = 1;
        return 0;
    }
    struct ifaddrs *ifs = NULL;
    int found = 0;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if (a.s_addr != want.s_addr) continue;
            inet_ntop(AF_INET, &a, ip, INET_ADDRSTRLEN);
            *dgram = (i->ifa_flags & IFF_LOOPBACK) ? UDP_DGRAM_MAX : iface_dgram(i->ifa_name);
            *loopback = !!(i->ifa_flags & IFF_LOOPBACK);
            found = 1;
        }
        freeifaddrs(ifs);
    }
    if (found) return 0;
    /* An explicit address we cannot see (e.g. not yet configured): bind() will tell. */
    snprintf(ip, INET_ADDRSTRLEN, "%s", hint);
    *dgram = 1500 - UDP_IP_OVERHEAD;
    *loopback = 0;
    return 0;
}

int udp_addr_parse(const char *s, struct sockaddr_in *sa)
{
    if (!s) return -1;
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= INET_ADDRSTRLEN) return -1;
    char ip[INET_ADDRSTRLEN];
    memcpy(ip, s, (size_t)(colon - s));
    ip[colon - s] = '\0';
    const char *p = colon + 1;
    if (*p < '0' || *p > '9' || strlen(p) > 5) return -1;
    char *end;
    unsigned long port = strtoul(p, &end, 10);
    if (*end || port == 0 || port > 65535) return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

int udp_addr_is_local(struct in_addr a)
{
    if (is_loop(a)) return 1;
    struct ifaddrs *ifs = NULL;
    int local = 0;
    if (getifaddrs(&ifs) != 0) return 0;
    for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr)
            local = 1;
    freeifaddrs(ifs);
    return local;
}
