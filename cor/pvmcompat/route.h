/* libcorpvm's route state, shared by route.c, msgio.c and wait.c. Lock: the big lock, and for
 * the pair's sending state a peer's own lock (struct cpvm_peer). */
#ifndef CPVM_ROUTE_H
#define CPVM_ROUTE_H

#include "pvmcompat.h"
#include "wire.h"

#define CTL_CTX 0x7fff5    /* PVM context of control messages: below PVM's system contexts */
#define CTL_TAG 0x434f5201 /* "COR" 1 */
#define EXIT_TAG 0x434f5202
#define RESEND_TAG 0x434f5203 /* a routed image sent again on PVM's path (msgio.c) */
#define NEVER_TAG 0x434f52ff  /* no message has it: a probe for it reads PVM's sockets */

#define CPVM_MBOX_SESSION "CoR.session"
#define CPVM_MBOX_RANKS "CoR.ranks"
#define CPVM_MBOX_TID "CoR.tid." /* + the tid in hex: the task runs a CoR route */
#define CPVM_COR_CTX 0x7f5       /* local index of the CoR context of routed PVM messages */
#define CPVM_DATA_TAG 1
#define CPVM_TIDLOCAL 0x3ffff

enum tx_state { TX_NEW = 0, TX_HELLO, TX_ROUTED, TX_REFUSED, TX_GONE };

struct held;   /* a routed message waiting for its sender's SWITCH (msgio.c) */
struct unconf; /* a routed message the peer has not confirmed yet (msgio.c) */

/*
 * A peer. Lock order: the big lock, then the backlog's lock (msgio.c), then one peer's lock;
 * a thread holding a peer's lock takes no other lock and does not enter libpvm3 unless it
 * holds the big lock too. The fields marked [peer] are written under the big lock and the
 * peer's lock both (a routed send reads them under the peer's lock alone), or, by a routed
 * send that does not hold the big lock, under the peer's lock: read them under the peer's
 * lock unless the big lock is held and the field is big-written only. Unmarked fields: the
 * big lock. rank and inbox_index are set before tx becomes TX_ROUTED and never change.
 */
struct cpvm_peer {
    pthread_mutex_t lock;
    int tid;
    int rank;             /* CoR domain, -1 until connected */
    unsigned inbox_index; /* its reserved task */
    enum tx_state tx;     /* our messages to it [peer: written under both] */
    bool connected, rx_switched, said_bye, gone;
    /* Our HELLO went out answering its own (handle): our next message to it waits for the
     * answer, as a first message does (cpvm_route_touch), instead of taking PVM's path. */
    bool answer_due;
    uint64_t next_look_ns, look_gap_ns; /* when to look for its mailbox entry again */
    struct held *held_head, *held_tail;
    /* The pair's message numbers (see msgio.c, "numbers"): ours to it, the last it
     * confirmed, what we keep until it does; its to us: the last we took, and the last we
     * confirmed. */
    uint32_t tx_seq, tx_confirmed, rx_seq, rx_confirmed; /* [peer] (rx_seq: written under both) */
    struct unconf *unconf_head, *unconf_tail;            /* [peer] */
    unsigned nunconf;                                    /* [peer] */
    bool confirm_due;
};

struct cpvm_route {
    bool setup;
    int opt;       /* PvmRoute as the program set it (or COR_PVM_ROUTE) */
    int env_route; /* COR_PVM_ROUTE's choice, 0 none */
    int route;     /* the CoR route we joined with (PvmRouteDirectUDP/Myrinet) */
    bool joined, join_failed, leaving;
    bool hooked; /* the inbox's arrival hook is in place: sleepers hear routed messages */
    /* Registered as resource manager, tasker or hoster: a part of PVM itself, whose
     * messages are PVM's protocol (replies libpvm3 waits for inside its own calls). */
    bool system_role;
    uint64_t session;
    int rank, capacity;
    cor_idp_t inbox, ctx;
    unsigned inbox_index;
    char addr[CPVM_ADDR_MAX];
    struct cpvm_peer **by_rank; /* [capacity] */
    long connect_ms;            /* COR_PVM_CONNECT_MS, -1 until read */
};
extern struct cpvm_route cpvm_rt;

struct cpvm_peer *cpvm_peer_find(int tid);
struct cpvm_peer *cpvm_peer_get(int tid); /* made if new; NULL out of memory */
struct cpvm_peer *cpvm_peer_of_rank(int rank);
/* Sets p->tx (big lock held; takes p's lock). */
void cpvm_peer_set_tx(struct cpvm_peer *p, enum tx_state tx);
/* The route failed a send to rank: the give-up runs under the big lock, at the next call or
 * in libcorpvm's own thread (as for the core's death notice). Any lock, or none. */
void cpvm_route_lost(int rank);
bool cpvm_routing(void); /* the task's option names the route it joined */
/* Whether a message with this tag, sent in the current context, is PVM's own protocol:
 * then it takes PVM's path whatever the route option. Lock held. */
bool cpvm_pvm_protocol(int tag);
bool cpvm_pvm_protocol_in(int tag, int ctx); /* the same in context ctx; no lock needed */
/* A control message of `kind` to tid on PVM's path, `value` in its rank field. Lock held. */
void cpvm_ctl_send(int tid, int kind, int value);
/* Reads what PVM's sockets hold now (control messages run their handlers). Lock held. */
void cpvm_read_sockets(void);

/* mbox.c: the layer's entries in pvmd's mailbox, and its message handlers */
/* Before the session is read: takes the mailbox lock, marks the task alive. */
void cpvm_mbox_join(void);
void cpvm_mbox_unlock(void); /* once the rank is claimed (or the join failed) */
/* Leaves the session: gives `rank` back (if >= 0; the route is closed), or, the last one alive,
 * removes the session's entries. Takes the lock (or keeps join's) and releases it. */
void cpvm_mbox_leave(int rank);
int cpvm_addmhf_own(int src, int tag, int ctx, int (*fn)(int));

/* msgio.c */
int cpvm_inbound_start(void);
void cpvm_inbound_stop(void);
void cpvm_release_held(struct cpvm_peer *p);
void cpvm_sends_drain(void);        /* waits for the sends still going on in the background */
void cpvm_unconfirmed_forget(void); /* after cor_finalize: what peers did not confirm */
void cpvm_sends_forget_peers(void); /* leaving: no send without the big lock from here on */
/* The route gave peer p up (or p says it gave us up: told = true): what p has not confirmed
 * goes PVM's way, in order, and so does everything after. Lock held. */
void cpvm_route_gave_up(struct cpvm_peer *p, bool told);
/* p confirmed our messages up to number seq. Lock held. */
void cpvm_confirmed(struct cpvm_peer *p, uint32_t seq);
/* Sends the confirmations that are due. Lock held, outermost level. */
void cpvm_send_confirms(void);
extern bool cpvm_confirms_due;
/* The handler of RESEND_TAG: a routed image that came PVM's way. */
int cpvm_resend_handler(int mid);

#endif
