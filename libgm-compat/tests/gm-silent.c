/* gm-silent: helper of gm-forgive.sh's stalled case: a TCP listener on a GM port's address
 * that takes the first connection and never answers it, as a target whose answer to a
 * connection request never comes.
 *
 *   gm-silent ADDR PORT [--close] [--timeout S]
 *
 * Listens on ADDR:PORT, says "silent ready", accepts one connection, reads what arrives (the
 * sender's connection request), closes its listener (the real port may open on the address
 * then) and says "taken N bytes". Then keeps the connection open and silent until its peer
 * closes it (says "dropped by the peer after T s") or the timeout passes ("held T s"); with
 * --close it closes it at once instead, without a word (an end of stream where an answer
 * was due). Exit 0, or 1 with a message. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int close_it = 0;
    double timeout = 30;
    if (argc < 3) goto usage;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--close"))
            close_it = 1;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = atof(argv[++i]);
        else
            goto usage;
    }
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1) goto usage;
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(l, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(l, 4) != 0) {
        perror("gm-silent: listen");
        return 1;
    }
    printf("gm-silent: silent ready\n");
    fflush(stdout);
    double end = now_s() + timeout;
    struct pollfd pl = {l, POLLIN, 0};
    if (poll(&pl, 1, (int)(timeout * 1000)) != 1) {
        fprintf(stderr, "gm-silent: nobody connected within %.0f s\n", timeout);
        return 1;
    }
    int c = accept(l, NULL, NULL);
    if (c < 0) {
        perror("gm-silent: accept");
        return 1;
    }
    close(l);
    char buf[4096];
    struct pollfd pc = {c, POLLIN, 0};
    ssize_t got = poll(&pc, 1, 10000) == 1 ? read(c, buf, sizeof buf) : 0;
    printf("gm-silent: taken %zd bytes\n", got);
    fflush(stdout);
    if (close_it) {
        close(c);
        return 0;
    }
    double t0 = now_s();
    for (;;) {
        double left = end - now_s();
        if (left <= 0) {
            printf("gm-silent: held %.1f s\n", now_s() - t0);
            return 0;
        }
        if (poll(&pc, 1, (int)(left * 1000) + 1) == 1 && read(c, buf, sizeof buf) <= 0) {
            printf("gm-silent: dropped by the peer after %.1f s\n", now_s() - t0);
            return 0;
        }
    }
usage:
    fprintf(stderr, "usage: gm-silent ADDR PORT [--close] [--timeout S]\n");
    return 64;
}
