/*
 * What the bootstrap test programs share (proc/boot_check for cor-run's backend,
 * launch/pmix_check for PMIx's): a fatal check that names the program and its rank, and the
 * address-table check, where every rank publishes NADDR addresses made from its rank (spaces,
 * a tab, a control byte and high bytes in them must survive the trip) and finds everyone's in
 * the table the exchange returns. Included by one file per program (the state is static).
 */
#ifndef COR_TESTS_PROC_BOOT_TABLE_H
#define COR_TESTS_PROC_BOOT_TABLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"

/* Set first: the program's name, then its rank and the session's size once known. */
__attribute__((unused)) static const char *bt_name = "boot test";
__attribute__((unused)) static int rank = -1, size;

/* CHECK(cond, fmt, ...): when cond is false, says where and what was seen, and exits 1. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s[%d]: FAIL %s:%d: ", bt_name, rank, __FILE__, __LINE__);            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define NADDR 3

/* Rank r's addresses: two udp ports and one gm (port -1). */
static void make_addrs(int r, struct cor_boot_addr *a)
{
    for (int k = 0; k < NADDR; k++) {
        memset(&a[k], 0, sizeof a[k]);
        snprintf(a[k].route, sizeof a[k].route, "%s", k == 2 ? "gm" : "udp");
        a[k].port_index = k == 2 ? -1 : k;
        snprintf(a[k].addr, sizeof a[k].addr, "10.0.%d.%d:%d with spaces\t\xc3\xa9\x01", r, k,
                 4000 + r);
    }
}

/* Publishes this rank's addresses and checks the whole table the exchange returns. */
__attribute__((unused)) static void check_exchange(struct cor_boot *boot)
{
    struct cor_boot_addr mine[NADDR], want[NADDR], *all = NULL;
    make_addrs(rank, mine);
    int rc = cor__boot_exchange(boot, NADDR, mine, &all);
    CHECK(rc == COR_OK, "exchange returned %d, expected 0", rc);
    for (int r = 0; r < size; r++) {
        make_addrs(r, want);
        for (int k = 0; k < NADDR; k++) {
            const struct cor_boot_addr *a = &all[r * NADDR + k];
            CHECK(!strcmp(a->route, want[k].route) && a->port_index == want[k].port_index &&
                      !strcmp(a->addr, want[k].addr),
                  "rank %d address %d: got %s %d '%s'", r, k, a->route, a->port_index, a->addr);
        }
    }
    free(all);
}

#endif
