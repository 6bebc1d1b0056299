/*
 * Joining a session: how a domain learns its rank, the session, and its peers' route
 * addresses, and hears that a peer died. Private to libcor; the other side is cor-run.
 *
 * cor-run sets, for each domain it starts:
 *   COR_BOOT     path of cor-run's rendezvous UNIX socket (mode 0600)
 *   COR_RANK     this domain's number, COR_SIZE the number of domains
 *   COR_SESSION  64-bit session cookie, 16 hex digits (also the idp macro part: low 32 bits)
 *   COR_ROUTE    default route name; COR_PORTS hard ports per route; COR_BIND address hint
 * Without COR_BOOT the program is a one-domain session (rank 0, size 1, random cookie).
 *
 * The connection stays open until cor__boot_finish: it carries barriers and death notices,
 * and cor-run takes its loss as the domain's death.
 */
#ifndef COR_BOOTSTRAP_H
#define COR_BOOTSTRAP_H

#include <stdint.h>

#include "route.h"

struct cor_boot_addr {
    char route[32];
    int port_index; /* hard port index on that route; raw ports use index -1 - k */
    char addr[COR_ADDR_MAX];
};

/* Called from a bootstrap thread when domain `rank` died; `why` is text from cor-run. */
typedef void (*cor_boot_death_fn)(void *arg, int rank, const char *why);

struct cor_boot;

/* Reads the environment and connects to cor-run (if any). Errors: COR_EBOOT (logged). */
int cor__boot_init(struct cor_boot **boot, int *rank, int *size, uint64_t *cookie);
/* Publishes this domain's addresses and returns everyone's: *all gets size * n entries,
 * rank r's at [r * n .. r * n + n), in the same order as `mine` (every domain publishes the
 * same routes and port indices). Blocks until all domains published. Free *all with free(). */
int cor__boot_exchange(struct cor_boot *boot, int n, const struct cor_boot_addr *mine,
                       struct cor_boot_addr **all);
/* Registers the death callback (called at most once per dead rank). */
void cor__boot_on_death(struct cor_boot *boot, cor_boot_death_fn fn, void *arg);
/* Blocks until every domain entered the barrier with the same sequence number, or a domain
 * died (COR_EPEERDEAD). Thread-safe; one barrier at a time per domain. */
int cor__boot_barrier(struct cor_boot *boot);
/* This domain's routes gave `rank` up: cor-run declares it dead for the whole session (and
 * stops it). Nothing in a one-domain session or once cor-run announced that death. */
void cor__boot_lost(struct cor_boot *boot, int rank);
/* Says this domain finalized normally and closes the connection; frees boot. */
void cor__boot_finish(struct cor_boot *boot);

#endif
