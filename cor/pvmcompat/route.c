/*
 * CoR routes for PVM messages: the task's route option, its CoR domain, and the handshake
 * that switches a sender->receiver pair from PVM's path to the route without reordering.
 *
 * The handshake follows PVM's own direct route (TC_CONREQ/TC_CONACK), without blocking:
 * control messages travel on PVM's path in a context of their own (CTL_CTX).
 *   S -> R  HELLO  (S's session, rank, inbox task, route and addresses)
 *   R -> S  ACK    (the same of R's) after R made S reachable; or NAK (no common route)
 *   S -> R  SWITCH after S made R reachable; from then on S's messages to R go routed.
 * Until the ACK, S keeps sending on PVM's path. SWITCH is the last message of S's on PVM's
 * path before the routed ones, so R takes routed messages from S only after SWITCH (earlier
 * ones are held): PVM's per-pair order survives the switch. A peer that never answers (plain
 * PVM) just keeps PVM's path.
 *
 * Control messages are read by a PVM message handler inside whichever libpvm3 call reads
 * them; the handler only queues an event, handled when the outermost pvm_* call leaves.
 *
 * Domain ranks come from pvmd's mailbox: a multi-instance entry per rank, claimed with
 * PvmMboxFirstAvail, which PVM removes with its task: ranks are unique among the living and
 * reused once their task is gone (peers re-admit the rank: connect_peer); the session
 * cookie is a persistent entry.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/random.h>

#include "pmsg.h"
#include "route.h"

struct cpvm_route cpvm_rt = {.opt = PvmAllowDirect, .connect_ms = -1};
#define rt cpvm_rt

/* ---- peers ---------------------------------------------------------------------------- */

static struct cpvm_peer **by_tid; /* open addressing on tid, size tid_cap (power of 2) */
static unsigned tid_cap, tid_used;

static unsigned tid_hash(int tid, unsigned cap)
{
    return ((unsigned)tid * 2654435761u >> 7) & (cap - 1);
}

struct cpvm_peer *cpvm_peer_find(int tid)
{
    if (!tid_cap) return NULL;
    for (unsigned h = tid_hash(tid, tid_cap);; h = (h + 1) & (tid_cap - 1)) {
        if (!by_tid[h]) return NULL;
        if (by_tid[h]->tid == tid) return by_tid[h];
    }
}

static bool table_insert(struct cpvm_peer **t, unsigned cap, struct cpvm_peer *p)
{
    for (unsigned h = tid_hash(p->tid, cap);; h = (h + 1) & (cap - 1))
        if (!t[h]) {
            t[h] = p;
            return true;
        }
}

struct cpvm_peer *cpvm_peer_get(int tid)
{
    struct cpvm_peer *p = cpvm_peer_find(tid);
    if (p) return p;
    if (2 * (tid_used + 1) > tid_cap) {
        unsigned cap = tid_cap ? 2 * tid_cap : 64;
        struct cpvm_peer **t = calloc(cap, sizeof *t);
        if (!t) return NULL;
        for (unsigned i = 0; i < tid_cap; i++)
            if (by_tid[i]) table_insert(t, cap, by_tid[i]);
        free(by_tid);
        by_tid = t;
        tid_cap = cap;
    }
    if (!(p = calloc(1, sizeof *p))) return NULL;
    pthread_mutex_init(&p->lock, NULL);
    p->tid = tid;
    p->rank = -1;
    table_insert(by_tid, tid_cap, p);
    tid_used++;
    return p;
}

struct cpvm_peer *cpvm_peer_of_rank(int rank)
{
    return rank >= 0 && rank < rt.capacity && rt.by_rank ? rt.by_rank[rank] : NULL;
}

void cpvm_peer_set_tx(struct cpvm_peer *p, enum tx_state tx)
{
    pthread_mutex_lock(&p->lock);
    p->tx = tx;
    pthread_mutex_unlock(&p->lock);
}

/* ---- control messages ------------------------------------------------------------------ */

static struct cpvm_ctl *events;
static size_t nevents, cap_events;

/* Ranks the route gave up (the core's death notice, from a core thread): handled under the
 * lock, by cpvm_run_deferred. */
static _Atomic bool *gave_up; /* [gave_up_cap], never freed: a late notice may still come */
static int gave_up_cap;
static _Atomic bool gave_up_any;

/* What a give-up needs (sending again PVM's way what the peer did not confirm) cannot wait
 * for the program's next pvm call: a sender that computes, or sleeps, would hold its messages
 * back that long. The death notice hands it to a thread of libcorpvm's own (`rescuer`, made
 * at join, asleep until then), which takes the big lock as any thread's call does (libpvm3
 * then holds that thread's buffers and context) and runs the deferred work. */
static pthread_mutex_t rescue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rescue_cond = PTHREAD_COND_INITIALIZER;
static bool rescue_due, rescue_stop; /* rescue_lock */
static pthread_t rescuer;
static bool rescuer_on; /* big lock */

static void *rescue_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&rescue_lock);
    for (;;) {
        while (!rescue_due && !rescue_stop)
            pthread_cond_wait(&rescue_cond, &rescue_lock);
        if (rescue_stop) break;
        rescue_due = false;
        pthread_mutex_unlock(&rescue_lock);
        cpvm_enter();
        if (rt.joined && !rt.leaving) {
            atomic_fetch_add(&cpvm_stats.rescues, 1);
            cpvm_run_deferred();
        }
        cpvm_leave();
        pthread_mutex_lock(&rescue_lock);
    }
    pthread_mutex_unlock(&rescue_lock);
    return NULL;
}

/* Lock held. Signals blocked in the thread: the program's handlers run in its own. */
static void rescuer_start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rescue_stop = false;
    rescuer_on = pthread_create(&rescuer, NULL, rescue_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rescuer_on) cpvm_log("no thread for give-ups: they wait for the next pvm call");
}

/* Lock held; let go while the thread ends (it may wait for the lock). Inside a nested call
 * (pvm_exit from a message handler) it cannot be: the thread is left to end by itself. */
static void rescuer_stop(void)
{
    if (!rescuer_on) return;
    rescuer_on = false;
    pthread_mutex_lock(&rescue_lock);
    rescue_stop = true;
    pthread_cond_signal(&rescue_cond);
    pthread_mutex_unlock(&rescue_lock);
    if (cpvm_nested()) {
        pthread_detach(rescuer);
        return;
    }
    int depth = cpvm_unlock_all();
    pthread_join(rescuer, NULL);
    cpvm_relock_all(depth);
}

static void on_death(int rank, int err, void *arg)
{
    (void)err;
    (void)arg;
    cpvm_route_lost(rank);
}

void cpvm_route_lost(int rank)
{
    if (!gave_up || rank < 0 || rank >= gave_up_cap) return;
    atomic_store(&gave_up[rank], true);
    atomic_store(&gave_up_any, true);
    cpvm_arrival(NULL, 0); /* a sleeping waiter runs it, or else the rescuer */
    pthread_mutex_lock(&rescue_lock);
    rescue_due = true;
    pthread_cond_signal(&rescue_cond);
    pthread_mutex_unlock(&rescue_lock);
}

static void handle_gave_up(void)
{
    if (!atomic_exchange(&gave_up_any, false)) return;
    for (int r = 0; r < gave_up_cap; r++) {
        if (!atomic_exchange(&gave_up[r], false)) continue;
        struct cpvm_peer *p = cpvm_peer_of_rank(r);
        if (p) cpvm_route_gave_up(p, false);
    }
}

bool cpvm_has_deferred(void)
{
    return nevents > 0 || atomic_load(&gave_up_any) || cpvm_confirms_due;
}

/* Sends a control message of `kind` to tid on PVM's path; `value` goes in the rank's place
 * (CTL_CONFIRM's number). Lock held. */
static void ctl_send_value(int tid, int kind, int value)
{
    int buf = REAL(pvm_mkbuf, PvmDataDefault);
    if (buf < 0) return;
    int old = REAL(pvm_setsbuf, buf);
    int head[CPVM_CTL_INTS];
    cpvm_ctl_encode(kind, rt.session, value, (int)rt.inbox_index, rt.route, head);
    int alen = (int)strlen(rt.addr);
    REAL(pvm_pkint, head, CPVM_CTL_INTS, 1);
    REAL(pvm_pkint, &alen, 1, 1);
    if (alen) REAL(pvm_pkbyte, rt.addr, alen, 1);
    int ctx = REAL(pvm_setcontext, CTL_CTX);
    REAL(pvm_send, tid, CTL_TAG);
    REAL(pvm_setcontext, ctx);
    REAL(pvm_setsbuf, old);
    REAL(pvm_freebuf, buf);
}

static void ctl_send(int tid, int kind)
{
    ctl_send_value(tid, kind, rt.rank);
}

void cpvm_ctl_send(int tid, int kind, int value)
{
    ctl_send_value(tid, kind, value);
}

static void queue_event(const struct cpvm_ctl *c)
{
    if (nevents == cap_events) {
        size_t cap = cap_events ? 2 * cap_events : 16;
        struct cpvm_ctl *e = realloc(events, cap * sizeof *e);
        if (!e) {
            atomic_fetch_add(&cpvm_stats.dropped, 1);
            return;
        }
        events = e;
        cap_events = cap;
    }
    events[nevents++] = *c;
}

/* Runs inside libpvm3 (a real call is under way): unpack, check, queue. */
static int ctl_handler(int mid)
{
    int bytes = 0, tag = 0, src = 0, alen = -1;
    int head[CPVM_CTL_INTS];
    char addr[CPVM_ADDR_MAX];
    struct cpvm_ctl c;
    /* The message is the active receive buffer while the handler runs. */
    if (REAL(pvm_bufinfo, mid, &bytes, &tag, &src) >= 0 &&
        bytes <= (int)sizeof head + 4 + CPVM_ADDR_MAX + 64 &&
        REAL(pvm_upkint, head, CPVM_CTL_INTS, 1) >= 0 && REAL(pvm_upkint, &alen, 1, 1) >= 0 &&
        alen >= 0 && alen < CPVM_ADDR_MAX && (!alen || REAL(pvm_upkbyte, addr, alen, 1) >= 0) &&
        cpvm_ctl_decode(head, alen, addr, src, &c))
        queue_event(&c);
    else
        atomic_fetch_add(&cpvm_stats.dropped, 1);
    return 0;
}

/* pvm_notify's PvmTaskExit: one int, the tid that ended (also after a SIGKILL). */
static int exit_handler(int mid)
{
    int tid = 0;
    (void)mid;
    if (REAL(pvm_upkint, &tid, 1, 1) >= 0 && tid > 0)
        queue_event(&(struct cpvm_ctl){.kind = CTL_EXITED, .tid = tid});
    return 0;
}

/* The tid that holds `rank` in pvmd's mailbox now; 0 if none or unknown. Lock held. */
static int rank_holder(int rank)
{
    int saved = REAL(pvm_setrbuf, 0); /* recvinfo frees the active receive buffer */
    int buf = REAL(pvm_recvinfo, CPVM_MBOX_RANKS, rank, PvmMboxDefault), tid = 0;
    if (buf > 0) {
        REAL(pvm_setrbuf, buf);
        if (REAL(pvm_upkint, &tid, 1, 1) < 0) tid = 0;
        REAL(pvm_freebuf, buf);
    }
    REAL(pvm_setrbuf, saved);
    return tid;
}

/* Our peer `old` had the rank that `tid` now says is its own. Ranks are freed by PVM when
 * their task ends, so this is a new occupant if pvmd's mailbox says so: then the earlier
 * one is gone (its exit notice may still be on its way) and the rank is re-admitted (the
 * core forgets the earlier one: cor_domain_connect). Else a forgery or a confusion. */
static bool rank_taken_over(struct cpvm_peer *old, int tid)
{
    if (!old->gone && rank_holder(old->rank) != tid) return false;
    if (!old->gone) {
        old->gone = true;
        cpvm_peer_set_tx(old, TX_GONE);
        atomic_fetch_add(&cpvm_stats.peers_gone, 1);
        cor_domain_leave(old->rank, 0);
        cpvm_route_gave_up(old, false);
    }
    rt.by_rank[old->rank] = NULL;
    atomic_fetch_add(&cpvm_stats.readmitted, 1);
    return true;
}

/* The layer's own requests go to pvmd itself, never to a resource manager (pvm_reg_rm): libpvm3
 * would send the manager pvm_notify as SM_NOTIFY, which the manager takes and logs as a
 * request of the program's. pvmd serves TM_NOTIFY whoever manages the tasks. Lock held. */
static void notify_exit(int tid)
{
    int rm = pvmschedtid, ctx = REAL(pvm_setcontext, CTL_CTX);
    pvmschedtid = 0;
    REAL(pvm_notify, PvmTaskExit, EXIT_TAG, 1, &tid);
    pvmschedtid = rm;
    REAL(pvm_setcontext, ctx);
}

/* Makes peer p (rank, addresses) reachable over our route; false if it cannot be. */
static bool connect_peer(struct cpvm_peer *p, const struct cpvm_ctl *c)
{
    if (c->session != rt.session || c->route != rt.route || c->rank >= rt.capacity ||
        c->rank == rt.rank)
        return false;
    struct cpvm_peer *other = cpvm_peer_of_rank(c->rank);
    /* A rank we knew held by another task: a forgery, or the rank given back (mbox.c) and
     * taken by a new task, which we re-admit once pvmd's mailbox confirms the claim. */
    if (other && other != p && !rank_taken_over(other, p->tid)) return false;
    if (p->connected) return p->rank == c->rank && p->inbox_index == (unsigned)c->inbox;
    int err = cor_domain_connect(c->rank, c->addr);
    if (err) {
        cpvm_log("cannot reach t%x (domain %d at '%s'): %s; it stays on PVM's path",
                 (unsigned)p->tid, c->rank, c->addr, cor_strerror(err));
        return false;
    }
    p->rank = c->rank;
    p->inbox_index = (unsigned)c->inbox;
    p->connected = true;
    rt.by_rank[c->rank] = p;
    /* Its exit makes its rank unreachable (a kill is detected the same way). */
    notify_exit(p->tid);
    return true;
}

static void handle(const struct cpvm_ctl *c)
{
    struct cpvm_peer *p = cpvm_peer_get(c->tid);
    if (!p) return;
    /* After pvm_exit began only exits matter (they release what cor_finalize waits for). */
    if (rt.leaving && c->kind != CTL_HELLO && c->kind != CTL_EXITED) return;
    switch (c->kind) {
    case CTL_HELLO:
        if (rt.joined && !rt.system_role && !rt.leaving && connect_peer(p, c)) {
            /* It takes our route: ask for the way back now, not at our first message to it
             * (no mailbox look-up then), and before our ACK: a peer waiting for the ACK
             * (its first message) reads our HELLO first and answers it before its SWITCH,
             * so its first routed message reaches us after its answer and ours back go
             * routed at once. A peer that did not wait answers at its next pvm call: our
             * next message waits for that (answer_due, at most COR_PVM_CONNECT_MS), and
             * only what other threads send meanwhile goes PVM's way (SWITCH keeps the
             * order). */
            if (p->tx == TX_NEW && cpvm_routing()) {
                ctl_send(c->tid, CTL_HELLO);
                cpvm_peer_set_tx(p, TX_HELLO);
                p->answer_due = true;
                atomic_fetch_add(&cpvm_stats.hello_sent, 1);
            }
            ctl_send(c->tid, CTL_ACK);
            atomic_fetch_add(&cpvm_stats.acks, 1);
        } else {
            ctl_send(c->tid, CTL_NAK);
            atomic_fetch_add(&cpvm_stats.naks, 1);
        }
        break;
    case CTL_ACK:
        if (p->tx != TX_HELLO) break; /* not asked: ignore */
        if (connect_peer(p, c)) {
            ctl_send(c->tid, CTL_SWITCH);
            cpvm_peer_set_tx(p, TX_ROUTED);
        } else {
            cpvm_peer_set_tx(p, TX_REFUSED);
        }
        break;
    case CTL_NAK:
        if (p->tx == TX_HELLO) cpvm_peer_set_tx(p, TX_REFUSED);
        break;
    case CTL_SWITCH:
        if (!p->connected) {
            atomic_fetch_add(&cpvm_stats.dropped, 1);
            break;
        }
        p->rx_switched = true;
        atomic_fetch_add(&cpvm_stats.switches, 1);
        cpvm_release_held(p);
        break;
    case CTL_BYE:
        p->said_bye = true;
        break;
    case CTL_GAVEUP: /* its route gave us up: ours to it goes PVM's way too */
        if (p->connected && !p->gone) cpvm_route_gave_up(p, true);
        break;
    case CTL_CONFIRM:
        if (p->connected && !p->gone) cpvm_confirmed(p, (uint32_t)c->rank);
        break;
    case CTL_EXITED:
        if (p->connected && !p->gone) {
            p->gone = true;
            cpvm_peer_set_tx(p, TX_GONE);
            atomic_fetch_add(&cpvm_stats.peers_gone, 1);
            cor_domain_leave(p->rank, p->said_bye ? 0 : COR_EPEERDEAD);
            cpvm_route_gave_up(p, false); /* (gone: what it did not confirm is dropped) */
        }
        break;
    }
}

void cpvm_run_deferred(void)
{
    handle_gave_up();
    if (cpvm_confirms_due && !rt.leaving) cpvm_send_confirms();
    if (!nevents) return;
    /* handle() may send, and sending may read more control messages: take a batch. */
    for (int rounds = 0; nevents && rounds < 64; rounds++) {
        size_t n = nevents;
        struct cpvm_ctl *batch = malloc(n * sizeof *batch);
        if (!batch) return;
        memcpy(batch, events, n * sizeof *batch);
        memmove(events, events + n, (nevents - n) * sizeof *events);
        nevents -= n;
        for (size_t i = 0; i < n; i++)
            handle(&batch[i]);
        free(batch);
    }
    /* A peer connected, switched or left: a thread waiting for that (a first send waiting
     * for its answer) looks again, though libpvm3's queue did not change. */
    cpvm_wake_waiters();
}

/* ---- the route option and the task's domain -------------------------------------------- */

static int route_of_env(void)
{
    const char *s = cpvm_knob_str(CPVM_K_ROUTE);
    if (!s || !*s || !strcmp(s, "none") || !strcmp(s, "pvm")) return 0;
    if (!strcmp(s, "udp")) return PvmRouteDirectUDP;
    if (!strcmp(s, "myrinet") || !strcmp(s, "gm")) return PvmRouteDirectMyrinet;
    cpvm_log("COR_PVM_ROUTE='%s': expected udp, myrinet (or gm) or none; using PVM's routes", s);
    return 0;
}

static const char *route_name(int opt)
{
    return opt == PvmRouteDirectUDP ? "udp" : opt == PvmRouteDirectMyrinet ? "gm" : NULL;
}

/* The session cookie: instance 0 of CoR.session, made if missing. Entries are persistent and
 * over-writable (any task may remove them when the session ends: mbox.c); the one who gets
 * index 0 of the class made the session, a task that lost that race reads it. */
#define MBOX_SHARED                                                                                \
    (PvmMboxPersistent | PvmMboxMultiInstance | PvmMboxFirstAvail | PvmMboxOverWritable)
static int mailbox_session(uint64_t *session)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        /* recvinfo frees the active receive buffer and makes its own active: keep ours. */
        int saved = REAL(pvm_setrbuf, 0);
        int buf = REAL(pvm_recvinfo, CPVM_MBOX_SESSION, 0, PvmMboxDefault);
        if (buf > 0) {
            int w[2] = {0, 0};
            REAL(pvm_setrbuf, buf);
            int rc = REAL(pvm_upkint, w, 2, 1);
            REAL(pvm_setrbuf, saved);
            REAL(pvm_freebuf, buf);
            *session = (uint64_t)(uint32_t)w[0] << 32 | (uint32_t)w[1];
            return rc < 0 || *session == 0 ? PvmBadMsg : PvmOk;
        }
        REAL(pvm_setrbuf, saved);
        uint64_t s = 0;
        while (s == 0 || (uint32_t)s == 0)
            if (getrandom(&s, sizeof s, 0) != sizeof s) return PvmSysErr;
        int mine = REAL(pvm_mkbuf, PvmDataDefault), old = REAL(pvm_setsbuf, mine);
        int w[2] = {(int)(uint32_t)(s >> 32), (int)(uint32_t)s};
        REAL(pvm_pkint, w, 2, 1);
        int rc = REAL(pvm_putinfo, CPVM_MBOX_SESSION, mine, MBOX_SHARED);
        REAL(pvm_setsbuf, old);
        REAL(pvm_freebuf, mine);
        if (rc == 0) {
            *session = s;
            return PvmOk;
        }
        /* Somebody else made it first: read theirs. */
        if (rc > 0) REAL(pvm_delinfo, CPVM_MBOX_SESSION, rc, PvmMboxDefault);
    }
    return PvmSysErr;
}

/* A rank of our own: the first free instance of a multi-instance entry holding our tid,
 * which PVM removes with its task (even killed), so the rank is free again once we are gone:
 * a VM that lives long, with a task that lives on while others come and go, keeps routing.
 * Peers that knew the rank's earlier occupant re-admit it for us (connect_peer). */
static int mailbox_rank(int *rank)
{
    int mine = REAL(pvm_mkbuf, PvmDataDefault), old = REAL(pvm_setsbuf, mine);
    int tid = pvmmytid;
    REAL(pvm_pkint, &tid, 1, 1);
    int rc = REAL(pvm_putinfo, CPVM_MBOX_RANKS, mine,
                  PvmMboxMultiInstance | PvmMboxFirstAvail | PvmMboxOverWritable);
    REAL(pvm_setsbuf, old);
    REAL(pvm_freebuf, mine);
    if (rc < 0) return rc;
    *rank = rc;
    return PvmOk;
}

/* The virtual machine's number of hosts and our host's name as pvmd knows it (in `name`, or
 * "" if not found), asked of pvmd itself (TM_CONFIG, the answer laid out as pvm_config reads
 * it: hosts, archs, then tid, name, arch, speed, signature of each host). Not pvm_config: under
 * a resource manager that asks the manager (SM_CONFIG, a request the program never made), and
 * it frees the host table the program's own pvm_config gave it. -1 if pvmd did not answer.
 * Lock held. */
static int pvmd_hosts(char *name, size_t len)
{
    int sbf = REAL(pvm_setsbuf, REAL(pvm_mkbuf, PvmDataDefault)), rbf = REAL(pvm_setrbuf, 0);
    cpvm_in_real++;
    int mid = msendrecv(CPVM_TIDPVMD, CPVM_TM_CONFIG, CPVM_SYSCTX_TM);
    cpvm_in_real--;
    int nhost = -1, narch = 0, bytes = 0, me = REAL(pvm_tidtohost, pvmmytid);
    name[0] = 0;
    char *s = NULL;
    /* (every string of the answer fits in its length) */
    if (mid > 0 && REAL(pvm_bufinfo, mid, &bytes, NULL, NULL) >= 0 && bytes > 0 &&
        (s = malloc((size_t)bytes + 1)) && REAL(pvm_upkint, &nhost, 1, 1) >= 0 &&
        REAL(pvm_upkint, &narch, 1, 1) >= 0) {
        for (int i = 0, tid, word[2]; i < nhost; i++) {
            if (REAL(pvm_upkint, &tid, 1, 1) < 0 || REAL(pvm_upkstr, s) < 0) break;
            if (tid == me) {
                snprintf(name, len, "%s", s);
                break;
            }
            if (REAL(pvm_upkstr, s) < 0 || REAL(pvm_upkint, word, 2, 1) < 0) break;
        }
    }
    free(s);
    if (mid > 0)
        REAL(pvm_freebuf, REAL(pvm_setrbuf, rbf));
    else
        REAL(pvm_setrbuf, rbf);
    REAL(pvm_freebuf, REAL(pvm_setsbuf, sbf));
    return nhost;
}

/* Where our route listens: loopback while the virtual machine has one host, else the
 * address of our host as pvmd knows it (what the other hosts reach us at). */
static const char *bind_address(char *ip, size_t len)
{
    char host[256];
    if (pvmd_hosts(host, sizeof host) <= 1) return "loopback";
    struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
    if (!host[0] || getaddrinfo(host, NULL, &hints, &res) || !res) return "auto";
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, ip, (socklen_t)len);
    freeaddrinfo(res);
    return ip;
}

static void tid_entry(int tid, char *name, size_t len);

/* Tells senders (through pvmd's mailbox) that this task takes CoR routes; the entry goes
 * with the task. */
static void announce(void)
{
    char name[64];
    tid_entry(pvmmytid, name, sizeof name);
    int buf = REAL(pvm_mkbuf, PvmDataDefault), old = REAL(pvm_setsbuf, buf);
    REAL(pvm_pkint, &rt.rank, 1, 1);
    if (REAL(pvm_putinfo, name, buf, PvmMboxDefault) < 0)
        cpvm_log("cannot announce the route in pvmd's mailbox: peers keep PVM's path");
    REAL(pvm_setsbuf, old);
    REAL(pvm_freebuf, buf);
}

/* libpvm3 packs into fragments it mallocs and frees message by message; glibc gives freed
 * memory back to the kernel (heap trimmed, large blocks unmapped), so every message pays page
 * faults again (1 MiB of PvmDataRaw: 3-5 ms on a virtual machine instead of 0.2) and routes
 * re-register buffers. Keep it, as MPI libraries with registration caches do, unless
 * COR_PVM_KEEP_MEMORY=0. */
static void keep_memory(void)
{
    if (!cpvm_knob(CPVM_K_KEEP_MEMORY)) return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest: blocks below come from the heap */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

/* A routed task that ends without pvm_exit (returns from main, calls exit) leaves its
 * session as pvm_exit would have it: goodbyes, the route's files (gm: its shared memory
 * region) and the session's mailbox entries if it was the last. Not from inside a libpvm3
 * call (a message handler that exits), nor while another thread holds the lock. */
static void leave_at_exit(void)
{
    if (!rt.joined || rt.leaving || cpvm_in_real || !cpvm_try_enter()) return;
    cpvm_route_exit();
    cpvm_leave();
}

/* Joins the VM's CoR session over route `opt`. Lock held. */
static int join(int opt)
{
    if (rt.joined) return opt == rt.route ? PvmOk : PvmNotImpl;
    if (rt.join_failed) return PvmSysErr;
    rt.join_failed = true; /* until it worked: one attempt per task */
    keep_memory();
    if (!cpvm_layout_check()) {
        cpvm_log("this libpvm3's messages are not laid out as 3.4.6's: PVM's routes only");
        return PvmNotImpl;
    }
    const char *name = route_name(opt);
    rt.capacity = (int)cpvm_knob(CPVM_K_DOMAINS);
    cpvm_mbox_join();
    int rc = mailbox_session(&rt.session);
    if (rc < 0) {
        cpvm_mbox_leave(-1);
        cpvm_log("no CoR session in pvmd's mailbox (%d): PVM's routes only", rc);
        return rc;
    }
    rc = mailbox_rank(&rt.rank);
    if (rc < 0) {
        cpvm_mbox_leave(-1);
        cpvm_log("cannot claim a CoR domain rank in pvmd's mailbox (%d)", rc);
        return rc;
    }
    if (rt.rank >= rt.capacity) {
        cpvm_mbox_leave(rt.rank); /* not ours to keep: a rank given back goes to a later task */
        cpvm_log("domain rank %d exceeds COR_PVM_DOMAINS=%d (that many routed tasks alive): "
                 "PVM's routes only",
                 rt.rank, rt.capacity);
        return PvmOutOfRes;
    }
    cpvm_mbox_unlock();
    int err;
    if (cor_initialized()) {
        cpvm_mbox_leave(rt.rank);
        cpvm_log("CoR is already initialized in this process (cor_init before the first pvm "
                 "call?): PVM's routes only");
        return PvmExists;
    }
    /* The route the core opens: ours, whatever COR_ROUTE says. */
    setenv("COR_ROUTE", name, 1);
    unsetenv("COR_ROUTES");
    char ip[64];
    const char *bind = getenv("COR_BIND");
    if (!bind) setenv("COR_BIND", bind = bind_address(ip, sizeof ip), 1);
    /* Between hosts, the gm route runs libgm-compat over TCP, peers' endpoints learnt at
     * run time; on one host, over shared memory. */
    if (opt == PvmRouteDirectMyrinet && strcmp(bind, "loopback") && !getenv("COR_GM_PROVIDER"))
        setenv("COR_GM_PROVIDER", "tcp", 1);
    err = cor_init_join(&(cor_join_t){rt.session, rt.rank, rt.capacity});
    if (err) {
        cpvm_mbox_leave(rt.rank);
        cpvm_log("cannot start CoR's %s route: %s; PVM's routes only", name, cor_strerror(err));
        return cpvm_error(err);
    }
    if (!(rt.by_rank = calloc((size_t)rt.capacity, sizeof *rt.by_rank)) ||
        (err = cor_task_reserve("pvm", &rt.inbox)) ||
        (err = cor_domain_address(rt.addr, sizeof rt.addr))) {
        cpvm_log("CoR domain setup: %s", cor_strerror(err ? err : COR_ENOMEM));
        cor_finalize();
        cpvm_mbox_leave(rt.rank);
        return PvmNoMem;
    }
    rt.inbox_index = cor_idp_index(rt.inbox);
    /* A peer the route gives up: what it did not confirm goes PVM's way (msgio.c). */
    if (!gave_up && (gave_up = calloc((size_t)rt.capacity, sizeof *gave_up)))
        gave_up_cap = rt.capacity;
    if (!gave_up || (err = cor_domain_on_death_add(on_death, NULL)))
        cpvm_log("no death notices (%s): a peer the route gives up is noticed at a send",
                 cor_strerror(err ? err : COR_ENOMEM));
    else if (!rescuer_on)
        rescuer_start();
    /* A waiter asleep (wait.c) wakes when a routed message reaches the inbox. */
    if ((err = cor_task_on_arrival(rt.inbox, cpvm_arrival, NULL)))
        cpvm_log("no arrival hook (%s): blocked receives look every millisecond",
                 cor_strerror(err));
    rt.hooked = !err;
    rt.ctx = cor_idp_make(cor_session(), COR_KIND_CONTEXT, 0, CPVM_COR_CTX);
    rt.route = opt;
    rt.joined = true;
    rt.join_failed = false;
    static bool at_exit; /* registered after cor_init_join's own: runs before them */
    if (!at_exit) at_exit = atexit(leave_at_exit) == 0;
    announce();
    if ((err = cpvm_inbound_start())) {
        cpvm_log("cannot post routed receives: %s", cor_strerror(err));
        return cpvm_error(err);
    }
    return PvmOk;
}

void cpvm_read_sockets(void)
{
    /* probe reads the sockets only when nothing queued matches: ask for what never comes. */
    int ctx = REAL(pvm_setcontext, CTL_CTX);
    REAL(pvm_probe, -1, NEVER_TAG);
    REAL(pvm_setcontext, ctx);
}

bool cpvm_is_setup(void)
{
    return rt.setup;
}

void cpvm_setup(void)
{
    rt.setup = true;
    cpvm_addmhf_own(-1, CTL_TAG, CTL_CTX, ctl_handler);
    cpvm_addmhf_own(-1, EXIT_TAG, CTL_CTX, exit_handler);
    cpvm_addmhf_own(-1, RESEND_TAG, CTL_CTX, cpvm_resend_handler);
    rt.env_route = route_of_env();
    if (rt.env_route) {
        rt.opt = rt.env_route;
        join(rt.env_route);
    }
}

int cpvm_route_get(void)
{
    return rt.opt;
}

/* Called with the lock held by pvm_setopt. */
int cpvm_route_set(int value)
{
    int old = rt.opt;
    if (value == PvmRouteDirectUDP || value == PvmRouteDirectMyrinet) {
        if (pvmmytid > 0 && !rt.setup) cpvm_setup();
        int rc = join(value);
        if (rc == PvmNotImpl) { /* joined with the other route: a task has one */
            cpvm_log("PvmRoute %d: this task already runs CoR's %s route; option unchanged", value,
                     route_name(rt.route));
            return PvmNotImpl;
        }
        if (rc < 0) cpvm_log("PvmRoute %d: messages keep PVM's path", value);
        rt.opt = value;
        cpvm_sends_forget_peers();
        return old;
    }
    int rc = REAL(pvm_setopt, PvmRoute, value);
    if (rc < 0) return rc;
    /* A program asking for PvmRouteDirect gets the CoR route the environment chose. */
    rt.opt = value == PvmRouteDirect && rt.env_route ? rt.env_route : value;
    cpvm_sends_forget_peers();
    return old;
}

bool cpvm_routing(void)
{
    return rt.joined && rt.opt == rt.route && !rt.system_role && !rt.leaving;
}

/* PVM's system contexts (pvmproto.h: SYSCTX_TC 0x7ffff down to 0x7fff6), and the one of
 * dynamic groups, whose traffic between members is the program's own (libgpvm3 waits for it
 * through pvm_recv, which takes routed messages in). */
#define SYSCTX_FIRST 0x7ffff
#define SYSCTX_LAST 0x7fff6
#define SYSCTX_DG 0x7fffc

bool cpvm_pvm_protocol_in(int tag, int ctx)
{
    /* Reserved tags (bit 31: TM_, TC_, SM_ ... codes, e.g. a resource manager's replies to
     * a pvm_spawn that libpvm3 awaits in its own select) and system contexts. */
    return tag < 0 || (ctx >= SYSCTX_LAST && ctx <= SYSCTX_FIRST && ctx != SYSCTX_DG);
}

bool cpvm_pvm_protocol(int tag)
{
    return tag < 0 || cpvm_pvm_protocol_in(tag, REAL(pvm_getcontext));
}

/* pvm_reg_rm, pvm_reg_tasker, pvm_reg_hoster: the task becomes part of PVM. From then on
 * all it sends takes PVM's path (its replies are awaited inside libpvm3's calls, which look
 * at PVM's sockets only), and it turns down handshakes. */
static void system_role(int rc, const char *what)
{
    if (rc < 0 || rt.system_role) return;
    rt.system_role = true;
    cpvm_sends_forget_peers();
    if (rt.joined) cpvm_log("registered as %s: everything it sends takes PVM's path", what);
}

CPVM_API int pvm_reg_rm(struct pvmhostinfo **hip)
{
    if (CPVM_PASS) return cpvm_real.pvm_reg_rm(hip);
    cpvm_enter();
    int rc = REAL(pvm_reg_rm, hip);
    system_role(rc, "resource manager");
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_reg_tasker(void)
{
    if (CPVM_PASS) return cpvm_real.pvm_reg_tasker();
    cpvm_enter();
    int rc = REAL(pvm_reg_tasker);
    system_role(rc, "tasker");
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_reg_hoster(void)
{
    if (CPVM_PASS) return cpvm_real.pvm_reg_hoster();
    cpvm_enter();
    int rc = REAL(pvm_reg_hoster);
    system_role(rc, "hoster");
    cpvm_leave();
    return rc;
}

/* The name of a task's mailbox entry saying it runs libcorpvm with a route. */
static void tid_entry(int tid, char *name, size_t len)
{
    snprintf(name, len, "%s%x", CPVM_MBOX_TID, (unsigned)tid);
}

/* True if tid said (in pvmd's mailbox) that it takes CoR routes. Lock held. */
static bool runs_cor(int tid)
{
    char name[64];
    tid_entry(tid, name, sizeof name);
    int saved = REAL(pvm_setrbuf, 0); /* recvinfo frees the active receive buffer */
    int buf = REAL(pvm_recvinfo, name, 0, PvmMboxDefault);
    if (buf > 0) REAL(pvm_freebuf, buf);
    REAL(pvm_setrbuf, saved);
    return buf > 0;
}

/* Waits until the peer answered our HELLO (its handler runs inside our reads), at most
 * COR_PVM_CONNECT_MS. Lock held (let go while waiting). */
static void await_answer(struct cpvm_peer *p)
{
    if (rt.connect_ms < 0) rt.connect_ms = (long)cpvm_knob(CPVM_K_CONNECT_MS);
    uint64_t deadline = cpvm_now_ns() + (uint64_t)rt.connect_ms * 1000000u;
    uint64_t spin_end = cpvm_spin_end();
    while (p->tx == TX_HELLO) {
        cpvm_read_sockets(); /* the answer runs the handler */
        cpvm_run_deferred();
        if (p->tx != TX_HELLO || cpvm_now_ns() >= deadline) break;
        cpvm_wait_activity(deadline, spin_end);
    }
}

void cpvm_route_touch(int tid)
{
    if (!cpvm_routing() || tid == pvmmytid || tid <= 0) return;
    struct cpvm_peer *p = cpvm_peer_get(tid);
    if (p && p->tx == TX_HELLO && p->answer_due) {
        /* Our HELLO answered its own: this first message of ours waits for the answer
         * too (once; other threads' messages meanwhile go PVM's way). */
        p->answer_due = false;
        await_answer(p);
        return;
    }
    if (!p || p->tx != TX_NEW) return;
    /* Only tasks that said so can answer (not pvmd, whose tids have no local part, nor a
     * plain PVM task, nor the group server). A task that has not said so may still be
     * starting: look again later, less and less often (1 ms doubling to 1 s: a pvmd round
     * trip each time). */
    if ((tid & CPVM_TIDLOCAL) == 0) {
        cpvm_peer_set_tx(p, TX_REFUSED);
        return;
    }
    uint64_t now = cpvm_now_ns();
    if (now < p->next_look_ns) return;
    if (!runs_cor(tid)) {
        p->look_gap_ns = p->look_gap_ns ? p->look_gap_ns * 2 : 1000000;
        if (p->look_gap_ns > 1000000000u) p->look_gap_ns = 1000000000u;
        p->next_look_ns = now + p->look_gap_ns;
        return;
    }
    ctl_send(tid, CTL_HELLO);
    cpvm_peer_set_tx(p, TX_HELLO);
    atomic_fetch_add(&cpvm_stats.hello_sent, 1);
    /* Like PVM's PvmRouteDirect, the first message waits for the answer (the peer gives it
     * from inside any pvm call), so even a program that sends one message per pair gets
     * the route; but at most COR_PVM_CONNECT_MS (default 1000): a busy peer's first
     * messages go PVM's way and the switch happens when it answers. */
    await_answer(p);
}

/* cor_finalize waits until peers acknowledged all our frames; a peer that exits meanwhile
 * (or ended before our last frames reached it) never will, and the route would give it up
 * only after seconds (udp: 5). While it waits, a thread reads PVM's exit notices (and only
 * those: rt.leaving) and gives such peers up at once. The big lock is let go meanwhile: the
 * watcher takes it for its reads; other threads' calls find the task leaving (PVM's path). */
static _Atomic bool finalizing;

/* arg: an eventfd written once cor_finalize is over (-1: none; it then looks every ms). */
static void *exit_watcher(void *arg)
{
    int done_fd = (int)(intptr_t)arg;
    while (atomic_load(&finalizing)) {
        cpvm_enter();
        int *fds = NULL, n = REAL(pvm_getfds, &fds);
        struct pollfd pfd[9];
        if (n < 0 || !fds) n = 0;
        if (n > 8) n = 8;
        for (int i = 0; i < n; i++)
            pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        cpvm_read_sockets();
        cpvm_run_deferred();
        cpvm_leave();
        /* Sleep until PVM has something or the finalize is over (a 1 ms look at `finalizing`
         * without the eventfd: ~0.9 ms of every routed task's exit). */
        pfd[n] = (struct pollfd){.fd = done_fd, .events = POLLIN};
        if (n > 0 || done_fd >= 0)
            poll(pfd, (nfds_t)(n + (done_fd >= 0)), done_fd >= 0 ? 100 : 1);
        else
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return NULL;
}

static void finalize_watching_exits(void)
{
    pthread_t w;
    atomic_store(&finalizing, true);
    int done_fd = cpvm_nested() ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    bool watching =
        !cpvm_nested() && pthread_create(&w, NULL, exit_watcher, (void *)(intptr_t)done_fd) == 0;
    int depth = watching ? cpvm_unlock_all() : 0;
    cor_finalize();
    atomic_store(&finalizing, false);
    if (done_fd >= 0) (void)eventfd_write(done_fd, 1); /* (failing: it looks in 100 ms) */
    if (watching) {
        pthread_join(w, NULL);
        cpvm_relock_all(depth);
    }
    if (done_fd >= 0) close(done_fd);
}

void cpvm_route_exit(void)
{
    cpvm_stats_print();
    if (!rt.joined) return;
    cpvm_sends_forget_peers();
    rescuer_stop(); /* from here on, the exit's own waits run give-ups */
    /* Exit notices and goodbyes already on PVM's path: peers gone need not acknowledge our
     * last frames (the udp route would wait 5 s for them). */
    cpvm_sends_drain(); /* our last messages before our goodbyes */
    cpvm_read_sockets();
    cpvm_run_deferred();
    rt.leaving = true;
    /* A peer that said goodbye is in its own cor_finalize, still acknowledging our frames:
     * it is given up only when PVM says it exited. */
    for (unsigned i = 0; i < tid_cap; i++) {
        struct cpvm_peer *p = by_tid[i];
        if (p && p->connected && !p->gone && !p->said_bye) ctl_send(p->tid, CTL_BYE);
    }
    cpvm_inbound_stop();
    /* A peer the route gives up meanwhile (stopped: it acknowledges nothing) still gets what
     * it did not confirm, PVM's way: the watcher runs the give-up, and so does this thread
     * after cor_finalize (before pvm_exit closes PVM's path). */
    finalize_watching_exits();
    handle_gave_up();
    cpvm_unconfirmed_forget();
    rt.joined = false;
    cpvm_mbox_leave(rt.rank); /* after cor_finalize: the route's files are gone */
}

CPVM_API int pvm_setopt(int what, int value)
{
    if (CPVM_PASS || what != PvmRoute) CPVM_WRAP(pvm_setopt, what, value);
    cpvm_enter();
    int rc = cpvm_route_set(value);
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_getopt(int what)
{
    if (CPVM_PASS || what != PvmRoute) CPVM_WRAP(pvm_getopt, what);
    cpvm_enter();
    int rc = cpvm_route_get();
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_exit(void)
{
    if (CPVM_PASS) return cpvm_real.pvm_exit();
    cpvm_enter();
    cpvm_route_exit();
    cpvm_rxq_publish(); /* (the route is closed: what waits in the routed queue is libpvm3's) */
    cpvm_spares_exit();
    cpvm_buffers_forget();
    int rc = REAL(pvm_exit);
    cpvm_leave();
    return rc;
}

/* ---- the bridge ----------------------------------------------------------------------- */

CPVM_API int pvm_cor_domain(int tid, int *rank)
{
    if (!rank) return PvmBadParam;
    cpvm_enter();
    int rc = PvmNoTask;
    if (tid == pvmmytid && rt.joined) {
        *rank = rt.rank;
        rc = PvmOk;
    } else if (cpvm_routing()) {
        /* Connected already (its own HELLO reached us): no need to ask. */
        struct cpvm_peer *p = cpvm_peer_find(tid);
        if (!p || !p->connected) {
            cpvm_route_touch(tid);
            p = cpvm_peer_find(tid);
            /* Our HELLO went out earlier and a first message's wait for the answer ran out
             * (a busy peer): the caller needs the answer, wait for it again (bounded). */
            if (p && !p->connected && p->tx == TX_HELLO) await_answer(p);
        }
        if (p && p->connected) {
            *rank = p->rank;
            rc = PvmOk;
        }
    }
    cpvm_leave();
    return rc;
}

CPVM_API int pvm_cor_task(int tid, unsigned index, cor_idp_t *task)
{
    int rank;
    if (!task || index > COR_MAX_INDEX) return PvmBadParam;
    int rc = pvm_cor_domain(tid, &rank);
    if (rc == PvmOk) *task = cor_task_idp(rank, index);
    return rc;
}
