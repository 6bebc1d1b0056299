/*
 * gm_internal.h - private state of libgm-compat.
 *
 * Locking: the node map and the registry of open ports are global and
 * guarded by gmx_lock (the map is set up by gm_init and read-only while any
 * port is open).  Everything reachable from a struct gm_port (endpoint,
 * lists, pools, regions) is guarded by its `lock', which every entry point
 * takes (uncontended in the normal case: GM clients serialise calls on a
 * port) and drops around client callbacks.  It exists because a port of
 * this process may progress another one: GM's NIC moved data without the
 * host, so a program that sends on port A and then polls only port B must
 * see A's stuck sends (and B's connection setup) move on.  Alarms are
 * touched only by the port's own caller.
 */
#ifndef GM_INTERNAL_H
#define GM_INTERNAL_H

#include "gm.h"

/* libgm is not linked with libfabric: its few real symbols are looked up when a port first
 * needs it (fabric_load.c), through these renames. */
#define fi_getinfo gmx_fi_getinfo
#define fi_freeinfo gmx_fi_freeinfo
#define fi_dupinfo gmx_fi_dupinfo
#define fi_fabric gmx_fi_fabric
#define fi_strerror gmx_fi_strerror
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>

#define GMX_EXPORT __attribute__((visibility("default")))

#define GMX_NUM_PORTS 16
#define GMX_SEND_TOKENS 61
#define GMX_RECV_TOKENS 254
#define GMX_MTU 4096
#define GMX_MIN_SIZE 3
#define GMX_MAX_SIZE 40 /* largest size class accepted */
#define GMX_MAX_NODE_ID 65535

#include "knobs.h" /* the knob table: GMX_KNOBS, gmx_knob_uint, gmx_knob_str */

/* ---- wire format ------------------------------------------------------
 * Two kinds of traffic, both tagged sends with EXACT tags: libfabric 1.17's
 * shm provider ignores the ignore mask when a newly posted receive is
 * matched against messages that arrived before it (only equal tags match),
 * so nothing here may depend on a wildcard receive catching a message that
 * is already waiting.
 *
 * - The eager channel (tag GMX_TAG_EAGER): every library message (client
 *   messages up to GMX_EAGER_MAX bytes, headers of larger ones, puts, gets,
 *   acks) starts with a struct gmx_hdr and lands in a library bounce
 *   buffer; the library matches client messages to provided buffers by
 *   (size, priority) itself, and a message without a buffer waits in the
 *   library.  The provider delivers one sender's eager messages in order
 *   (FI_ORDER_SAS), which gives GM's per-priority order.
 * - Bulk data of large messages and puts (DATA) and get answers (GETDATA):
 *   tag = kind | transfer id | sender; DATA is received with the exact tag
 *   into the final buffer once its header is processed (no copy).
 *
 * tag bits 7-9 kind, 10-31 transfer id, 32-47 sender node, 48-55 sender
 * port, 63 error flag (GETDATA refused by the target). */
enum gmx_tag_kind {
    GMX_TK_EAGER = 0,
    GMX_TK_DATA = 2,
    GMX_TK_GETDATA = 3,
};
#define GMX_TAG_KIND_SHIFT 7
#define GMX_TAG_SEQ_SHIFT 10
#define GMX_SEQ_MASK 0x3fffffU
#define GMX_TAG_NODE_SHIFT 32
#define GMX_TAG_PORT_SHIFT 48
#define GMX_TAG_ERR (1ULL << 63)
#define GMX_TAG_EAGER 0ULL

static inline uint64_t gmx_tag(unsigned kind, uint32_t xfer, uint64_t sender_bits)
{
    return (uint64_t)kind << GMX_TAG_KIND_SHIFT |
           (uint64_t)(xfer & GMX_SEQ_MASK) << GMX_TAG_SEQ_SHIFT | sender_bits;
}
static inline uint64_t gmx_sender_bits(unsigned node, unsigned port)
{
    return (uint64_t)node << GMX_TAG_NODE_SHIFT | (uint64_t)port << GMX_TAG_PORT_SHIFT;
}

/* Eager-channel message kinds.  Stream items (MSG..GET) carry a sequence
 * number per (sender, target port, priority) and are acknowledged once the
 * target processed them. */
enum gmx_kind {
    GMX_K_MSG = 1,      /* client message, payload follows */
    GMX_K_MSG_RNDV = 2, /* client message header; payload comes as DATA(xfer) */
    GMX_K_PUT = 3,      /* put, payload follows; addr = target address */
    GMX_K_PUT_RNDV = 4, /* put header; payload comes as DATA(xfer) */
    GMX_K_GET = 5,      /* get request; answered with GETDATA(xfer) */
    GMX_K_ACK = 6,      /* only the piggy-backed acks */
    GMX_K_NACK = 7,     /* item (prio, seq) failed with status (acks earlier ones) */
    GMX_K_KEY = 8,      /* registration of the target: addr, len, key */
    GMX_K_UNKEY = 9,    /* that registration is gone: addr */
};
#define GMX_IS_STREAM(k) ((k) >= GMX_K_MSG && (k) <= GMX_K_GET)

struct gmx_hdr {
    uint8_t kind, size, prio, status;
    uint16_t node;                   /* sender */
    uint8_t port;                    /* sender */
    uint8_t acks;                    /* bit p: ack[p] is valid */
    uint32_t seq;                    /* stream items, NACK */
    uint32_t ack[GM_NUM_PRIORITIES]; /* last item of ours processed, per prio */
    uint32_t xfer;                   /* DATA / GETDATA transfer id */
    uint32_t epoch;                  /* incarnation of the sending port */
    uint32_t aepoch;                 /* incarnation of the receiving port the acks are for */
    uint32_t base;                   /* stream items: oldest item of this priority the sender
                                        still waits for (earlier ones are done or given up) */
    uint32_t flags;                  /* GMX_F_* */
    uint64_t addr;                   /* put/get target address; KEY/UNKEY region base */
    uint64_t len;                    /* payload or transfer length; KEY region length */
    uint64_t key;                    /* KEY */
};
/* flags: a stream item its sender does not want acknowledged (gm_compat_sendv_now: the
 * caller's own credits bound the target's buffers, and the send was done when injected). */
#define GMX_F_UNACKED 1u
#define GMX_EAGER_MAX 4096 /* larger payloads go as DATA; what a receiver takes eager */
#define GMX_BOUNCE_LEN (sizeof(struct gmx_hdr) + GMX_EAGER_MAX)
/* The largest client payload a sender puts on the eager channel.  shm injects
 * up to inject_size bytes (copied through its shared buffer, done at once)
 * and moves anything larger with process_vm_readv: a system call at the
 * receiver, a reply the sender must poll for, then our copy out of the
 * bounce buffer.  So where the provider injects pages, eager messages stay
 * injectable and larger payloads go as DATA (no copy).  Other providers
 * (tcp;ofi_rxm injects 64 bytes) keep GMX_EAGER_MAX. */
static inline size_t gmx_eager_max(size_t inject_size)
{
    size_t hdr = sizeof(struct gmx_hdr);
    if (inject_size < hdr + 1024 || inject_size - hdr >= GMX_EAGER_MAX) return GMX_EAGER_MAX;
    return inject_size - hdr;
}
/* The short form of a client message whose payload fits the provider's inject size but not
 * with the 64-byte header (4033-4096 bytes on libfabric's shm, which injects 4096): the
 * payload alone, injected, with the header's fields packed into the 64-bit remote CQ data
 * (fi_tinjectdata), so a 4 KiB message is one provider message as fi_pingpong's is, not a
 * header and its DATA.  Bits 0-15 sender node, 16-19 sender port, 20 prio, 21-26 size,
 * 27-31 seq - base, 32-53 seq, 54 an ack of prio is in 55-60 (the low 6 bits of the acked
 * seq: the receiver takes the one of its at most GMX_WINDOW items in flight that has them),
 * 61-63 GMX_SHORT_MAGIC.  epoch and aepoch are implied: a sender uses the form only toward a
 * target that acked this incarnation of its port since its address was last resolved (the
 * target knows our epoch, we know its), and a receiver takes it only from a sender whose
 * epoch it knows.  Wherever a condition fails the message goes with its header, not
 * injected.  Only on libfabric's shm (the rings carry header and 4 KiB in one slot). */
#define GMX_SHORT_MAGIC 5u
#define GMX_SHORT_BASE_MAX 31u /* seq - base */
struct gmx_short {
    unsigned node, port, prio, size, has_ack, ack_low;
    uint32_t seq, base;
};
static inline uint64_t gmx_short_pack(const struct gmx_short *s)
{
    return (uint64_t)(s->node & 0xffff) | (uint64_t)(s->port & 0xf) << 16 |
           (uint64_t)(s->prio & 1) << 20 | (uint64_t)(s->size & 0x3f) << 21 |
           (uint64_t)((s->seq - s->base) & GMX_SHORT_BASE_MAX) << 27 |
           (uint64_t)(s->seq & GMX_SEQ_MASK) << 32 | (uint64_t)(s->has_ack & 1) << 54 |
           (uint64_t)(s->ack_low & 0x3f) << 55 | (uint64_t)GMX_SHORT_MAGIC << 61;
}
/* 0, or -1 if data is not a short-form header. */
static inline int gmx_short_unpack(uint64_t data, struct gmx_short *s)
{
    if (data >> 61 != GMX_SHORT_MAGIC) return -1;
    s->node = data & 0xffff;
    s->port = (data >> 16) & 0xf;
    s->prio = (data >> 20) & 1;
    s->size = (data >> 21) & 0x3f;
    s->seq = (uint32_t)(data >> 32) & GMX_SEQ_MASK;
    s->base = (s->seq - (uint32_t)((data >> 27) & GMX_SHORT_BASE_MAX)) & GMX_SEQ_MASK;
    s->has_ack = (data >> 54) & 1;
    s->ack_low = (data >> 55) & 0x3f;
    return 0;
}
#define GMX_BOUNCE_POSTED 64 /* eager receives kept posted */
/* Stream items a sender may have unacknowledged per target port.  Bounds
 * what waits at the target, and makes send callbacks mean "delivered", as
 * in GM. */
#define GMX_WINDOW 16
/* An ack waits for a header going back to its sender (a reply) until this
 * many items are owed or the oldest is this old; then it goes alone.  Acks
 * sent at once would cost every request/reply exchange a message each way:
 * a target's next progress round usually comes before its reply. */
#define GMX_ACK_BATCH (GMX_WINDOW / 2)
#define GMX_ACK_DELAY_NS 20000u
#define GMX_ACK_LOOK_EVERY 16 /* progress or send calls between looks at the acks' age */
#define GMX_KEY_CACHE 8       /* remote registrations remembered per target port */
/* Connection-based providers: a first connection to a target that the provider still calls
 * "try again" after this long is dropped and made anew (send.c, renew_stalled); each renewal
 * of the same target waits twice as long as the one before, up to GMX_STALL_MAX_NS. */
#define GMX_STALL_NS 1000000000ULL
#define GMX_STALL_MAX_NS 8000000000ULL

/* ---- node map --------------------------------------------------------- */
struct gmx_node {
    unsigned id;
    char host[GM_MAX_HOST_NAME_LEN];
    int has_addr;       /* set last (release) when gmx_node_set_address fills ipv4/port_base */
    uint32_t ipv4;      /* network order */
    unsigned port_base; /* TCP port of GM port 0 */
};

struct gmx_config {
    struct gmx_node *nodes;
    unsigned num_nodes;
    unsigned max_node_id;
    unsigned self; /* own node id */
    char provider[64];
    char shm_ns[64];
    unsigned send_timeout_ms; /* GM_SEND_TIMEOUT_MS: a port not open yet is retried this long */
    unsigned stuck_ms;        /* a target that processes nothing fails sends after this */
    unsigned close_linger_ms; /* GM_CLOSE_LINGER_MS: gm_close waits for acks this long */
    int verbose;
    int rma; /* GM_RMA: use the provider's RMA when it has it */
};
extern struct gmx_config gmx_cfg;

const struct gmx_node *gmx_node_find(unsigned id);
const struct gmx_node *gmx_node_by_name(const char *name);
int gmx_node_set_address(unsigned id, const char *ipv4, unsigned port_base); /* 0 or -1 */
int gmx_config_load(void); /* 0 or -1 with a message on stderr */
struct gm_compat_config;
/* Keeps gm_compat_configure's settings for gmx_config_load; gmx_lock held. */
gm_status_t gmx_config_set(const struct gm_compat_config *cfg);
void gmx_config_free(void);

/* ---- requests ------------------------------------------------------------ */
enum gmx_sreq_kind {
    GMX_S_CLIENT,   /* callback when done */
    GMX_S_INTERNAL, /* nothing to report (acks, get answers, DATA of a client item) */
};

struct gmx_peer;
struct gmx_rreq;

/* A port's lock file: its shm address at offset 0 (NUL-padded), its doorbell at
 * GMX_BELL_OFFSET, its live registration table at GMX_KEYTAB_OFFSET (keytab.c);
 * GMX_LOCKFILE_SIZE bytes, never fewer once written (mappers). */
#define GMX_LOCKFILE_SIZE 16384
#define GMX_KEYTAB_OFFSET 512
#define GMX_ADDR_AREA 256
#define GMX_BELL_OFFSET 256
#define GMX_REGION_NAME (GMX_ADDR_AREA + 2) /* "/" + an address's name + NUL */
struct gmx_bell {
    _Atomic uint32_t armed; /* threads about to sleep or asleep on seq */
    _Atomic uint32_t seq;   /* bumped by each ring that found armed set; the futex */
};

struct gmx_sreq {
    int is_recv;           /* 0: tells a CQ context apart from gmx_rreq */
    int in_use;            /* taken from the pool: its buf may still be read (gm_dma_free defers) */
    struct gmx_sreq *next; /* free list, backlog, unacked list, done list */
    enum gmx_sreq_kind kind;
    gm_status_t status;
    gm_send_completion_callback_t cb;
    void *ctx;
    struct gmx_peer *peer;
    /* what to (re)send */
    const void *buf;
    size_t len;
    uint64_t tag; /* DATA / GETDATA sends */
    unsigned prio;
    uint64_t first_try_ns;
    int eager;              /* hdr (+ buf) on the eager channel */
    int stream;             /* a stream item: acknowledged by the target */
    int rma;                /* 1 = fi_write, 2 = fi_read (buf = local buffer) */
    uint64_t raddr, rkey;   /* rma target */
    gm_status_t ack_status; /* what the target said */
    int acked;
    int retried;            /* requeued after a transient provider error */
    uint64_t retry_ns;      /* ... when */
    unsigned local_pending; /* provider completions still due (own + child) */
    uint32_t seq;
    struct gmx_hdr hdr;
    struct gmx_sreq *child;    /* DATA that follows this header */
    struct gmx_sreq *parent;   /* of a DATA send */
    struct gmx_rreq *get_rreq; /* GET: the GETDATA receive waiting */
};

enum gmx_rreq_kind {
    GMX_R_EAGER,   /* library bounce buffer on the eager channel */
    GMX_R_CLIENT,  /* a gm_provide_receive_buffer buffer */
    GMX_R_PUTDATA, /* direct receive of put data into target memory */
    GMX_R_GETDATA, /* direct receive of get data into local buffer */
};

struct gmx_rreq {
    int is_recv;           /* 1 */
    struct gmx_rreq *next; /* free list, buffer list, held list, post backlog */
    enum gmx_rreq_kind kind;
    void *buf;
    unsigned size, prio, gmtag;
    /* filled at completion */
    uint64_t rtag;
    size_t rlen;
    struct gmx_sreq *get;  /* GETDATA: the client's request */
    struct gmx_peer *peer; /* CLIENT/PUTDATA receiving DATA: whose stream waits */
    uint32_t seq;          /* ... and which item it is */
    int truncated;
    int short_form; /* eager: the header came as remote CQ data (cqdata), see gmx_short */
    uint64_t cqdata;
    int posted; /* handed to the provider, not completed */
    /* for a post the provider refused for now (post backlog) */
    size_t post_len;
    uint64_t post_tag, post_ignore;
    unsigned char sink[8]; /* a refused put's DATA is received here (recv.c, post_data) */
    void *sink_map;        /* ... or, on libfabric's shm provider, here (sink_len bytes) */
    size_t sink_len;
};

/* A registration of a remote port that allows RMA (learnt from GMX_K_KEY). */
struct gmx_rkey {
    uint64_t base, len, key;
};

/* What this port knows of one remote (node, port). */
struct gmx_peer {
    unsigned node, port;
    struct gmx_bell *bell; /* shm: its doorbell (bell.c), mapped when resolved */
    /* libfabric's shm: its region's queue lock, mapped read-only when resolved (qlock.c);
     * NULL if not looked at. qlock_held_ns: since when our calls found it held (0: free). */
    const _Atomic int *qlock;
    uint64_t qlock_held_ns;
    uint64_t bits; /* gmx_sender_bits(node, port) */
    fi_addr_t addr;
    int resolved;           /* addr valid */
    char shm_name[128];     /* shm: the address addr was made from */
    uint64_t last_check_ns; /* shm: last look at the target's lock file */
    unsigned close_epoch;   /* gmx_close_epoch when last validated */
    int reached;            /* a send to it ever completed */
    int knows_us;           /* it acked this incarnation of our port since its address was
                               last resolved: short-form messages may go to it (gmx_short) */
    int told_refused;       /* shm: stderr said it is open but refused our sends (send.c) */
    int existed;            /* it was open once since we started: its address was read,
                               it sent to us, or its dead owner's lock file was found (a
                               port gone, not one that has not opened yet) */
    uint64_t heard_ns;      /* shm: last sign of life (message, completion) */
    uint64_t gone_ns;       /* shm: when its lock was last found free */
    uint64_t stall_ns;      /* tcp: last renewal of a first connection that made no progress */
    unsigned stalls;        /* ... how many (each waits twice as long as the one before) */
    /* sending */
    uint32_t send_seq[GM_NUM_PRIORITIES];
    int disabled[GM_NUM_PRIORITIES];             /* a send failed: hold the rest */
    struct gmx_sreq *backlog, *backlog_tail;     /* waiting for the window / provider */
    struct gmx_sreq *dataq, *dataq_tail;         /* DATA behind sent headers: first */
    struct gmx_sreq *unacked[GM_NUM_PRIORITIES]; /* stream items sent, in order */
    struct gmx_sreq *unacked_tail[GM_NUM_PRIORITIES];
    unsigned inflight; /* length of unacked */
    unsigned rma_busy; /* puts by fi_write not completed */
    struct gmx_peer *next_backlogged;
    int in_backlog_list;
    struct gmx_peer *next_watch; /* in p->watch: has items in flight */
    int in_watch;
    struct gmx_rkey keys[GMX_KEY_CACHE];
    unsigned nkeys, key_next;
    /* receiving */
    uint32_t rx_epoch;                             /* incarnation of the peer we hear from */
    uint32_t recv_seq[GM_NUM_PRIORITIES];          /* next item to process */
    int seen[GM_NUM_PRIORITIES];                   /* recv_seq is valid */
    unsigned stall[GM_NUM_PRIORITIES];             /* DATA of the item in process not landed */
    struct gmx_rreq *stall_req[GM_NUM_PRIORITIES]; /* ... its posted receive */
    int blocked[GM_NUM_PRIORITIES];                /* head item waits for a buffer */
    struct gmx_rreq *held[GM_NUM_PRIORITIES];      /* items not processed yet, by seq */
    struct gmx_rreq *held_tail[GM_NUM_PRIORITIES];
    uint32_t ack_due[GM_NUM_PRIORITIES]; /* last processed seq to ack */
    int ack_pending[GM_NUM_PRIORITIES];
    unsigned acks_owed;   /* items processed since an ack last went */
    uint64_t ack_owed_ns; /* when a look first saw them owed (0: none yet) */
    struct gmx_peer *next_ack;
    int in_ack_list;
    struct gmx_peer *next_wait;
    int in_wait_list;
    int keyed; /* was sent a GMX_K_KEY (gets GMX_K_UNKEY when it goes) */
};

struct gmx_deferred {
    void *mem;
    size_t len;
};

struct gmx_region {
    uintptr_t base;
    size_t len;
    unsigned refs;
    int dma;           /* from gm_dma_malloc */
    struct fid_mr *mr; /* registered with the provider for RMA (lazily) */
    int exported;      /* key valid: mr registered, or (rings) the key made up */
    uint64_t key;
};

struct gm_port {
    pthread_mutex_t lock;
    struct gm_port *reg_next; /* registry of open ports; gmx_lock */
    unsigned node_id, port_id;
    uint32_t epoch; /* this incarnation of (node, port), in every header */
    uint64_t self_bits;
    char name[GM_MAX_PORT_NAME_LEN + 1];
    int lock_fd;
    char region[GMX_REGION_NAME]; /* shm: the provider's region, "/<name>" ("" if none) */
    struct gmx_bell *bell;        /* what wakes a sleeper on this port: own_bell or mapped */
    struct gmx_bell own_bell;     /* when the lock file could not be mapped */
    _Atomic int wake_req;         /* gm_compat_wake came: the next (or current) wait returns */

    struct gmx_shm *shm; /* own rings (shmring.c) instead of libfabric; NULL: libfabric */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    size_t inject_size;
    size_t eager_max; /* client payloads sent eager (gmx_eager_max) */
    int short_form;   /* libfabric's shm with remote CQ data: client messages up to
                         inject_size may go in the short form (gmx_short) */
    int addr_is_str;  /* shm-style names */
    int rma;          /* provider does fi_write/fi_read without our help */
    int mr_virt;      /* RMA addresses are virtual addresses (else offsets) */
    int mr_prov_key;  /* the provider picks keys */
    uint64_t next_key;

    /* peers: peers[node][port], node rows allocated lazily */
    struct gmx_peer ***peers;
    unsigned peers_rows;
    struct gmx_peer *backlogged; /* peers with a backlog */
    struct gmx_peer *watch;      /* peers with items in flight */
    uint64_t watch_ns;           /* last look at them */
    uint64_t round_ns;           /* clock of the last progress round with work */
    unsigned watch_tick;

    /* request pools */
    struct gmx_sreq *sfree;
    struct gmx_rreq *rfree;
    void **chunks;
    unsigned nchunks, chunks_cap;
    void **rchunks; /* receive request chunks, to cancel at close */
    unsigned nrchunks, rchunks_cap;

    /* eager bounce buffers */
    struct gmx_rreq *bfree; /* not posted, not held */
    unsigned bposted;       /* posted to the provider */
    char **bmem;            /* every bounce buffer, freed at close */
    unsigned nbmem, bmem_cap;

    /* provided client buffers, FIFO per (priority, size) */
    struct gmx_rreq *bufs[GM_NUM_PRIORITIES][GMX_MAX_SIZE + 1];
    struct gmx_rreq *bufs_tail[GM_NUM_PRIORITIES][GMX_MAX_SIZE + 1];
    struct gmx_peer *wait_list; /* peers whose stream waits for a buffer */
    int kick;                   /* a buffer came: retry the waiting streams */

    /* send completions waiting for gm_unknown */
    struct gmx_sreq *done, *done_tail;

    /* event ring */
    gm_recv_event_t *ring;
    unsigned ring_cap, ring_head, ring_count;
    gm_recv_event_t cur; /* the event last returned */

    /* alarms, sorted by deadline */
    gm_alarm_t *alarms;

    /* memory */
    struct gmx_region *regions;
    unsigned nregions, regions_cap;
    /* gm_dma_free'd memory that sends still use: freed once none does (or at close) */
    struct gmx_deferred *deferred;
    unsigned ndeferred, deferred_cap;
    uint64_t deferred_ns; /* last look at them */
    int remote_access;
    gm_size_t acceptable[GM_NUM_PRIORITIES];

    uint32_t next_xfer;
    struct gmx_peer *ack_list; /* peers owed an ack */
    int ack_urgent;            /* some peer is owed a whole batch */
    unsigned ack_tick;         /* gmx_acks_maybe calls since the last look */

    struct gmx_rreq *post_backlog, *post_backlog_tail;
    int in_progress; /* guards against progress re-entering itself */
    int token_pool[GM_NUM_PRIORITIES];
    unsigned spin_polls;

    /* shm: the provider call toward a peer in progress, for the watchdog (unstick.c).
     * Written by the caller inside the call (port lock held), read by the watchdog. */
    _Atomic uint64_t guard_seq; /* odd while inside a call */
    _Atomic unsigned long guard_thread;
    _Atomic unsigned guard_node, guard_port;
    uint64_t guard_seen;     /* guard_seq at the watchdog's last look; watchdog only */
    unsigned guard_looks;    /* looks that found the same call inside; watchdog only */
    uint64_t guard_first_ns; /* the first look that found that call inside; watchdog only */
    /* The call the watchdog found stuck (its guard_seq, 0 none) and since when, for
     * gm_compat_port_stuck from any thread; written by the watchdog. */
    _Atomic uint64_t stuck_seq, stuck_ns;
    /* A target whose queue lock our calls found held, so that sends to it wait in the
     * backlog (qlock.c): node << 8 | port, and since when (0: none). Written by the caller
     * (port lock held), read by gm_compat_port_stuck and the watchdog. The report ends when
     * the lock is found free or the target's backlog is empty (sent, failed or dropped). */
    _Atomic uint64_t held_since_ns;
    _Atomic unsigned held_target;
    /* gm_compat_set_stuck_notify: called by the watchdog (gmx_lock held) at each look that
     * finds a call on this port stuck toward a live peer. Set under gmx_lock. */
    void (*stuck_fn)(void *arg);
    void *stuck_arg;
};

/* port.c */
extern atomic_int gmx_backlogged_ports; /* ports with sends waiting */
extern atomic_uint gmx_close_epoch;     /* bumped by every gm_close */
extern atomic_int gmx_open_ports;       /* ports open in this process */
void gmx_help_others(struct gm_port *self);
static inline void gmx_port_lock(struct gm_port *p)
{
    if (pthread_mutex_lock(&p->lock) != 0) abort(); /* a broken invariant of our own */
}
static inline void gmx_port_unlock(struct gm_port *p)
{
    if (pthread_mutex_unlock(&p->lock) != 0) abort();
}
struct gmx_peer *gmx_peer_get(struct gm_port *p, unsigned node, unsigned port);
int gmx_peer_resolve(struct gm_port *p, struct gmx_peer *peer);
/* lockfile.c: the per-port lock file (see there).  take: an fd holding the lock, -1 busy,
 * -2 error; release: unpublishes and removes it (region_too: the provider's shm region
 * named in it as well, for a process exiting with the port open); unheld: nonzero if nobody
 * holds it, GMX_PORT_DEAD if a file was there (its owner died: it and its region are
 * removed); sweep: does that for every lock file of this user on the host, returns how many
 * it found dead; open: a lock file of this user (-1, errno EPERM for another user's). */
enum { GMX_PORT_HELD = 0, GMX_PORT_NONE = 1, GMX_PORT_DEAD = 2 };
const char *gmx_lock_dir(void);
void gmx_lock_path(unsigned node, unsigned port, char *buf, size_t len);
int gmx_lock_open(const char *path, int flags);
int gmx_lock_take(unsigned node, unsigned port);
void gmx_lock_release(unsigned node, unsigned port, int fd, int region_too);
int gmx_lock_unheld(unsigned node, unsigned port);
unsigned gmx_lock_sweep(void);
/* bell.c: the doorbell that wakes a thread sleeping for a port's events (see there). */
struct gmx_bell *gmx_bell_map_own(int lock_fd);
struct gmx_bell *gmx_bell_map_peer(unsigned node, unsigned port);
void gmx_bell_unmap(struct gmx_bell *b);
void gmx_bell_ring(struct gmx_bell *b);
uint32_t gmx_bell_arm(struct gmx_bell *b);
void gmx_bell_sleep(struct gmx_bell *b, uint32_t seen, uint64_t ns);
void gmx_bell_disarm(struct gmx_bell *b);
int gmx_peer_closed(struct gm_port *p, struct gmx_peer *peer);
int gmx_peer_gone(struct gm_port *p, struct gmx_peer *peer);
void gmx_peer_renew(struct gm_port *p, struct gmx_peer *peer);
uint64_t gmx_now_ns(void);
uint64_t gmx_coarse_ns(void);

/* keytab.c: the live registration table in a port's lock file (see there).  of: the table
 * beside a mapped doorbell (NULL for NULL).  The owner (port lock held): reset at open, add
 * (0, or -1 when full), remove (returns once no copy under that key is in progress).  A
 * writer on this host: enter before a copy under key into [addr, addr + len) (an index, or
 * -1: the key is not live there: fail the put or get), leave after it. */
struct gmx_keytab;
struct gmx_keytab *gmx_keytab_of(struct gmx_bell *b);
void gmx_keytab_reset(struct gmx_keytab *t);
int gmx_keytab_add(struct gmx_keytab *t, uint64_t key, uint64_t base, uint64_t len);
void gmx_keytab_remove(struct gmx_keytab *t, uint64_t key);
int gmx_keytab_enter(struct gmx_keytab *t, uint64_t key, uint64_t addr, uint64_t len);
void gmx_keytab_leave(struct gmx_keytab *t, int i);

/* unstick.c: see there.  enter/leave bracket a provider call toward peer on a shm port;
 * scan runs in the watchdog thread with gmx_lock held. */
void gmx_guard_enter(struct gm_port *p, const struct gmx_peer *peer);
void gmx_guard_leave(struct gm_port *p);
int gmx_unstick_scan(struct gm_port *registry); /* 1: a call since the last look */
uint64_t gmx_unstick_period_ns(int busy);
void gmx_note_peer_lost(void);
int gmx_peer_loss_recent(void);  /* a peer went away within GMX_LOSS_WINDOW_MS */
#define GMX_ORPHAN_MS 1000       /* a live target's lock held this long while we spin... */
#define GMX_LOSS_WINDOW_MS 60000 /* ...within this long of a peer going away: orphaned */

/* qlock.c: a shm target's queue lock, looked at before a provider call toward it */
#define GMX_QLOCK_SPIN_NS 20000  /* a lock first found held: wait this long for it */
#define GMX_QLOCK_RESPIN_NS 2000 /* ... found held again (a retry): this long */
const _Atomic int *gmx_qlock_map(const char *addr); /* NULL: not looked at */
void gmx_qlock_unmap(const _Atomic int *lock);
/* 1 if the call toward peer must not be made now: its lock stays held (port lock held). */
int gmx_qlock_busy(struct gm_port *p, struct gmx_peer *peer);
/* peer's sends wait no more (its backlog is empty): the report of its lock ends. */
void gmx_qlock_forget(struct gm_port *p, struct gmx_peer *peer);
/* How long (ms, 0: none) a target's held lock has kept our sends waiting, and which one. */
unsigned gmx_qlock_report(struct gm_port *p, unsigned *node, unsigned *port);

/* fabric_load.c: libfabric, loaded by the first port that needs it: 0 or -1 (reported). */
int gmx_fabric_load(void);
int gmx_fabric_loaded(void);

/* transport.c: the one way from GM's semantics to the wire.  A port moves its messages either
 * through libfabric (p->shm NULL) or through libgm-compat's own shared-memory rings (p->shm,
 * shmring.c), chosen when it opens (gmx_transport_rings).  Both give tagged messages with
 * exact-tag (masked) matching, per-sender order, and completions carrying the request:
 * inject (done at once, no completion), send (completion with ctx; iov of 1 or 2), recv,
 * cancel (an FI_ECANCELED error completion), and peer addresses (insert: 1 if resolved). */
enum { GMX_TRANSPORT_FABRIC, GMX_TRANSPORT_SHM, GMX_TRANSPORT_AUTO };
int gmx_transport_mode(void);  /* GM_COMPAT_TRANSPORT, or its default */
int gmx_transport_rings(void); /* 1 if ports of this configuration use the rings */
ssize_t gmx_tp_inject(struct gm_port *p, struct gmx_peer *peer, const struct iovec *iov,
                      size_t iovcnt, uint64_t tag); /* at most GMX_BOUNCE_LEN bytes */
ssize_t gmx_tp_injectdata(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                          uint64_t data, uint64_t tag); /* libfabric only (p->short_form) */
ssize_t gmx_tp_send(struct gm_port *p, struct gmx_peer *peer, const struct iovec *iov,
                    size_t iovcnt, uint64_t tag, void *ctx);
ssize_t gmx_tp_recv(struct gm_port *p, void *buf, size_t len, uint64_t tag, uint64_t ignore,
                    void *ctx);
void gmx_tp_cancel(struct gm_port *p, void *ctx);
ssize_t gmx_tp_write(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                     uint64_t raddr, uint64_t rkey, void *ctx);
ssize_t gmx_tp_read(struct gm_port *p, struct gmx_peer *peer, void *buf, size_t len, uint64_t raddr,
                    uint64_t rkey, void *ctx);
ssize_t gmx_tp_cq_read(struct gm_port *p, struct fi_cq_tagged_entry *ce, size_t n);
int gmx_tp_cq_readerr(struct gm_port *p, struct fi_cq_err_entry *err); /* 1 if one was read */
int gmx_tp_insert(struct gm_port *p, struct gmx_peer *peer, const void *addr);
void gmx_tp_remove(struct gm_port *p, struct gmx_peer *peer);
/* Work the transport still has without a new message: sends waiting for room, messages left
 * in the ring until the completions before them were read (rings). */
int gmx_tp_busy(struct gm_port *p);
void gmx_tp_drive(struct gm_port *p); /* moves waiting sends on, takes no completion */

/* shmring.c: the rings (see there); the gmx_tp_* calls above dispatch to these. */
#define GMX_SHM_ADDR_PREFIX "gmshm://"
struct gmx_shm;
gm_status_t gmx_shm_open(struct gm_port *p);
void gmx_shm_close(struct gm_port *p);
ssize_t gmx_shm_inject(struct gmx_shm *sh, fi_addr_t to, const struct iovec *iov, size_t iovcnt,
                       uint64_t tag);
ssize_t gmx_shm_send(struct gmx_shm *sh, fi_addr_t to, const struct iovec *iov, size_t iovcnt,
                     uint64_t tag, void *ctx);
ssize_t gmx_shm_recv(struct gmx_shm *sh, void *buf, size_t len, uint64_t tag, uint64_t ignore,
                     void *ctx);
void gmx_shm_cancel(struct gmx_shm *sh, void *ctx);
ssize_t gmx_shm_cq_read(struct gmx_shm *sh, struct fi_cq_tagged_entry *ce, size_t n);
int gmx_shm_cq_readerr(struct gmx_shm *sh, struct fi_cq_err_entry *err);
int gmx_shm_insert(struct gmx_shm *sh, unsigned node, unsigned port, const char *addr,
                   fi_addr_t *out);
void gmx_shm_remove(struct gmx_shm *sh, fi_addr_t addr);
int gmx_shm_busy(struct gmx_shm *sh);
int gmx_shm_deferred(struct gmx_shm *sh);
void gmx_shm_drive(struct gmx_shm *sh);
ssize_t gmx_shm_rma(struct gmx_shm *sh, fi_addr_t to, void *buf, size_t len, uint64_t raddr,
                    int write, void *ctx); /* messages left in the ring for receives to come */

/* pool.c */
struct gmx_sreq *gmx_sreq_get(struct gm_port *p);
void gmx_sreq_put(struct gm_port *p, struct gmx_sreq *s);
struct gmx_rreq *gmx_rreq_get(struct gm_port *p);
void gmx_rreq_put(struct gm_port *p, struct gmx_rreq *r);
void gmx_pool_free(struct gm_port *p);
int gmx_sreq_uses(struct gm_port *p, uintptr_t base, size_t len);
void gmx_rreq_cancel_all(struct gm_port *p);

/* send.c */
void gmx_send_done(struct gm_port *p, struct gmx_sreq *s, gm_status_t st);
void gmx_stream_failed(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s,
                       gm_status_t st);
void gmx_submit(struct gm_port *p, struct gmx_sreq *s);
void gmx_backlog_progress(struct gm_port *p);
void gmx_watch_progress(struct gm_port *p);
void gmx_nack_held(struct gm_port *p);
void gmx_backlog_fail_all(struct gm_port *p);
int gmx_send_internal(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                      uint64_t tag);
void gmx_send_failed(struct gm_port *p, struct gmx_sreq *s, gm_status_t st);
int gmx_send_retry(struct gm_port *p, struct gmx_sreq *s);
int gmx_send_ctl(struct gm_port *p, struct gmx_peer *peer, const struct gmx_hdr *h);
/* gm_compat_sendv_now's message (gm_compat.h): injected now as stream item of (peer, prio),
 * unacknowledged; 0, or -FI_EAGAIN with nothing sent (the caller sends it the usual way). */
#define GMX_SENDV_MAX 4
ssize_t gmx_send_unacked(struct gm_port *p, struct gmx_peer *peer, unsigned prio, unsigned size,
                         const struct iovec *iov, unsigned iovcnt, size_t len);
void gmx_hdr_acks(struct gmx_peer *peer, struct gmx_hdr *h);
void gmx_key_learn(struct gmx_peer *peer, const struct gmx_hdr *h);
void gmx_key_forget(struct gmx_peer *peer, uint64_t base);

/* recv.c */
int gmx_progress(struct gm_port *p);
int gmx_post_recv(struct gm_port *p, struct gmx_rreq *r, void *buf, size_t len, uint64_t tag,
                  uint64_t ignore);
int gmx_bounce_fill(struct gm_port *p);
/* Returns once no put by messages into [base, base + len) can land any more (see there). */
void gmx_putdata_settle(struct gm_port *p, uintptr_t base, size_t len);
void gmx_bounce_free(struct gm_port *p);
/* Sends the acks that are due (all of them with `all`: close, exit). */
void gmx_acks_flush(struct gm_port *p, int all);
void gmx_acks_maybe(struct gm_port *p); /* the due ones, looking now and then (recv.c) */
void gmx_send_local_done(struct gm_port *p, struct gmx_sreq *s);
void gmx_ack_arrived(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                     gm_status_t st);
/* A short-form ack: the item in flight on prio whose seq ends in these 6 bits, if any. */
void gmx_ack_arrived_low(struct gm_port *p, struct gmx_peer *peer, unsigned prio, unsigned low);
gm_recv_event_t *gmx_event_push(struct gm_port *p);

/* memory.c */
int gmx_region_covers(struct gm_port *p, uint64_t addr, uint64_t len);
struct gmx_region *gmx_region_find(struct gm_port *p, uint64_t addr, uint64_t len);
int gmx_region_export(struct gm_port *p, struct gmx_region *g);
void gmx_regions_unexport_all(struct gm_port *p);
void gmx_regions_free(struct gm_port *p);
/* Frees the deferred gm_dma_free's no send uses any more (all: every one, at close). */
void gmx_deferred_free(struct gm_port *p, int all);

/* alarm.c */
int gmx_alarm_due(struct gm_port *p, uint64_t now);
void gmx_alarms_run(struct gm_port *p);
uint64_t gmx_alarm_next(struct gm_port *p);

/* status.c */
gm_status_t gmx_status_from_fi(int fi_err, const struct gmx_peer *peer);

#define gmx_log(...)                                                                               \
    do {                                                                                           \
        if (gmx_cfg.verbose) fprintf(stderr, "libgm: " __VA_ARGS__);                               \
    } while (0)

#endif
