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

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define GMX_EXPORT __attribute__((visibility("default")))

#define GMX_NUM_PORTS 16
#define GMX_SEND_TOKENS 61
#define GMX_RECV_TOKENS 254
#define GMX_MTU 4096
#define GMX_MIN_SIZE 3
#define GMX_MAX_SIZE 40 /* largest size class accepted */
#define GMX_MAX_NODE_ID 65535

/* ---- tag layout -------------------------------------------------------
 * bits  0-5  size class            (MSG)
 * bit   6    priority
 * bits  7-9  kind
 * bits 10-31 sequence number: per (sender, target port, priority) for MSG and
 *            CTRL, which the receiver uses to deliver in send order; the
 *            transfer id for PUTDATA/GETDATA, which are matched exactly.
 * bits 32-47 sender node id
 * bits 48-55 sender port id
 * bit  63    error flag (GETDATA refused by the target)
 */
enum gmx_kind {
    GMX_KIND_MSG = 0,
    GMX_KIND_CTRL = 1,
    GMX_KIND_PUTDATA = 2,
    GMX_KIND_GETDATA = 3,
    GMX_KIND_ACK = 4, /* receiver processed stream item `seq' (0 bytes) */
};
#define GMX_TAG_SIZE_MASK 0x3fULL
#define GMX_TAG_PRIO_SHIFT 6
#define GMX_TAG_KIND_SHIFT 7
#define GMX_TAG_KIND_MASK (7ULL << GMX_TAG_KIND_SHIFT)
#define GMX_TAG_SEQ_SHIFT 10
#define GMX_SEQ_MASK 0x3fffffU
#define GMX_TAG_NODE_SHIFT 32
#define GMX_TAG_PORT_SHIFT 48
#define GMX_TAG_ERR (1ULL << 63)
#define GMX_TAG_SENDER_MASK (0xffffffULL << GMX_TAG_NODE_SHIFT)
#define GMX_TAG_SEQ_MASK ((uint64_t)GMX_SEQ_MASK << GMX_TAG_SEQ_SHIFT)

static inline uint64_t gmx_tag(unsigned kind, unsigned size, unsigned prio,
                               uint32_t seq, uint64_t sender_bits)
{
    return (uint64_t)size | (uint64_t)prio << GMX_TAG_PRIO_SHIFT |
           (uint64_t)kind << GMX_TAG_KIND_SHIFT |
           (uint64_t)(seq & GMX_SEQ_MASK) << GMX_TAG_SEQ_SHIFT | sender_bits;
}
static inline uint64_t gmx_sender_bits(unsigned node, unsigned port)
{
    return (uint64_t)node << GMX_TAG_NODE_SHIFT | (uint64_t)port << GMX_TAG_PORT_SHIFT;
}

/* ---- control messages (puts and gets on the ordered channel) ---------- */
enum gmx_ctrl_op {
    GMX_CTRL_PUT_INLINE = 1, /* header + data; target copies */
    GMX_CTRL_PUT_RNDV = 2,   /* header; data follows as PUTDATA(xfer) */
    GMX_CTRL_GET_REQ = 3,    /* target answers with GETDATA(xfer) */
};
struct gmx_ctrl {
    uint32_t op;
    uint32_t xfer; /* transfer id for PUTDATA / GETDATA */
    uint64_t addr; /* target virtual address */
    uint64_t len;
};
#define GMX_PUT_INLINE_MAX 4096
#define GMX_CTRL_BUF_LEN (sizeof(struct gmx_ctrl) + GMX_PUT_INLINE_MAX)
#define GMX_CTRL_BUFS 16
#define GMX_ACK_BUFS 32
/* Stream items a sender may have unacknowledged per target port.  Bounds
 * what waits in the provider's unexpected queue (shm loses order beyond
 * a few dozen), and makes send callbacks mean "delivered", as in GM. */
#define GMX_WINDOW 16

/* ---- node map --------------------------------------------------------- */
struct gmx_node {
    unsigned id;
    char host[GM_MAX_HOST_NAME_LEN];
    int has_addr;
    uint32_t ipv4;      /* network order */
    unsigned port_base; /* TCP port of GM port 0 */
};

struct gmx_config {
    struct gmx_node *nodes;
    unsigned num_nodes;
    unsigned max_node_id;
    unsigned self;           /* own node id */
    char provider[64];
    char shm_ns[64];
    unsigned send_timeout_ms;
    int verbose;
};
extern struct gmx_config gmx_cfg;

const struct gmx_node *gmx_node_find(unsigned id);
const struct gmx_node *gmx_node_by_name(const char *name);
int gmx_config_load(void);   /* 0 or -1 with a message on stderr */
void gmx_config_free(void);

/* ---- requests ------------------------------------------------------------ */
enum gmx_sreq_kind {
    GMX_S_CLIENT,   /* callback when done */
    GMX_S_INTERNAL, /* nothing to report (put header, get answer) */
};

struct gmx_peer;

struct gmx_sreq {
    int is_recv; /* 0: tells a CQ context apart from gmx_rreq */
    struct gmx_sreq *next; /* free list, backlog, done list */
    enum gmx_sreq_kind kind;
    gm_status_t status;
    gm_send_completion_callback_t cb;
    void *ctx;
    struct gmx_peer *peer;
    /* what to (re)send */
    const void *buf;
    size_t len;
    uint64_t tag;
    unsigned prio;
    uint64_t first_try_ns;
    int use_hdr;          /* send hdr, then buf, as one message */
    int stream;           /* an ordered-stream item (MSG, CTRL): acked */
    gm_status_t ack_status; /* what the target said */
    int local_done, acked;
    uint32_t seq;
    struct gmx_ctrl hdr;  /* put/get header */
    struct gmx_rreq *get_rreq; /* GET_REQ: the GETDATA receive waiting */
};

enum gmx_rreq_kind {
    GMX_R_CLIENT,  /* a gm_provide_receive_buffer buffer */
    GMX_R_CTRL,    /* library buffer for control messages */
    GMX_R_PUTDATA, /* direct receive of put data into target memory */
    GMX_R_GETDATA, /* direct receive of get data into local buffer */
    GMX_R_ACK,     /* zero-length acknowledgement */
    GMX_R_REJECT,  /* catches messages of a size the client does not accept */
};

struct gmx_rreq {
    int is_recv; /* 1 */
    struct gmx_rreq *next; /* free list, held list, post backlog */
    enum gmx_rreq_kind kind;
    void *buf;
    unsigned size, prio, gmtag;
    /* filled at completion */
    uint64_t rtag;
    size_t rlen;
    struct gmx_sreq *get; /* GETDATA: the client's request */
    struct gmx_peer *peer; /* PUTDATA: whose stream waits for it */
    int truncated;
    int posted; /* handed to the provider, not completed */
    /* for a post the provider refused for now (post backlog) */
    size_t post_len;
    uint64_t post_tag, post_ignore;
};

/* What this port knows of one remote (node, port). */
struct gmx_peer {
    unsigned node, port;
    fi_addr_t addr;
    int resolved;              /* addr valid */
    char shm_name[128];        /* shm: the address addr was made from */
    uint64_t last_check_ns;    /* shm: last look at the target's lock file */
    unsigned close_epoch;      /* gmx_close_epoch when last validated */
    int reached;               /* a send to it ever completed */
    uint32_t send_seq[GM_NUM_PRIORITIES];
    uint32_t recv_seq[GM_NUM_PRIORITIES]; /* next expected */
    unsigned put_stall[GM_NUM_PRIORITIES]; /* PUTDATA not yet landed */
    int seen_prio[GM_NUM_PRIORITIES];      /* recv_seq valid */
    int disabled[GM_NUM_PRIORITIES];       /* a send failed: hold the rest */
    struct gmx_rreq *held[GM_NUM_PRIORITIES]; /* out of order, by seq */
    struct gmx_sreq *backlog, *backlog_tail; /* sends that got EAGAIN */
    struct gmx_sreq *unacked[GM_NUM_PRIORITIES]; /* stream items sent, in order */
    struct gmx_sreq *unacked_tail[GM_NUM_PRIORITIES];
    unsigned inflight;                        /* length of unacked */
    uint32_t ack_due[GM_NUM_PRIORITIES];      /* last processed seq to ack */
    int ack_pending[GM_NUM_PRIORITIES];
    struct gmx_peer *next_ack;
    int in_ack_list;
    struct gmx_peer *next_backlogged;
    int in_backlog_list;
};

struct gmx_region {
    uintptr_t base;
    size_t len;
    unsigned refs;
    int dma; /* from gm_dma_malloc */
};

struct gm_port {
    pthread_mutex_t lock;
    struct gm_port *reg_next; /* registry of open ports; gmx_lock */
    unsigned node_id, port_id;
    uint64_t self_bits;
    char name[GM_MAX_PORT_NAME_LEN + 1];
    int lock_fd;

    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    size_t inject_size;
    int addr_is_str; /* shm-style names */

    /* peers: peers[node][port], node rows allocated lazily */
    struct gmx_peer ***peers;
    unsigned peers_rows;
    struct gmx_peer *backlogged; /* peers with a backlog */

    /* request pools */
    struct gmx_sreq *sfree;
    struct gmx_rreq *rfree;
    void **chunks;
    unsigned nchunks, chunks_cap;
    void **rchunks; /* receive request chunks, to cancel at close */
    unsigned nrchunks, rchunks_cap;

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
    int remote_access;
    gm_size_t acceptable[GM_NUM_PRIORITIES];

    uint32_t next_xfer;
    struct gmx_rreq *ctrl_reqs[GMX_CTRL_BUFS];
    struct gmx_peer *ack_list; /* peers owed an ack */
    struct gmx_rreq *reject[GM_NUM_PRIORITIES][GMX_MAX_SIZE + 1];
    char *ctrl_mem;

    struct gmx_rreq *post_backlog, *post_backlog_tail;
    int in_progress; /* guards against progress re-entering itself */
    int token_pool[GM_NUM_PRIORITIES];
    unsigned spin_polls;
};

/* port.c */
extern atomic_int gmx_backlogged_ports; /* ports with sends waiting */
extern atomic_uint gmx_close_epoch;     /* bumped by every gm_close */
void gmx_help_others(struct gm_port *self);
static inline void gmx_port_lock(struct gm_port *p)
{
    if (pthread_mutex_lock(&p->lock) != 0)
        abort(); /* a broken invariant of our own */
}
static inline void gmx_port_unlock(struct gm_port *p)
{
    if (pthread_mutex_unlock(&p->lock) != 0)
        abort();
}
struct gmx_peer *gmx_peer_get(struct gm_port *p, unsigned node, unsigned port);
int gmx_peer_resolve(struct gm_port *p, struct gmx_peer *peer);
int gmx_peer_closed(struct gm_port *p, const struct gmx_peer *peer);
uint64_t gmx_now_ns(void);

/* pool.c */
struct gmx_sreq *gmx_sreq_get(struct gm_port *p);
void gmx_sreq_put(struct gm_port *p, struct gmx_sreq *s);
struct gmx_rreq *gmx_rreq_get(struct gm_port *p);
void gmx_rreq_put(struct gm_port *p, struct gmx_rreq *r);
void gmx_pool_free(struct gm_port *p);
void gmx_rreq_cancel_all(struct gm_port *p);

/* send.c */
void gmx_send_done(struct gm_port *p, struct gmx_sreq *s, gm_status_t st);
void gmx_stream_failed(struct gm_port *p, struct gmx_peer *peer, struct gmx_sreq *s,
                       gm_status_t st);
void gmx_backlog_progress(struct gm_port *p);
void gmx_backlog_fail_all(struct gm_port *p);
int gmx_send_internal(struct gm_port *p, struct gmx_peer *peer, const void *buf,
                      size_t len, uint64_t tag);

/* recv.c */
int gmx_progress(struct gm_port *p);
int gmx_post_recv(struct gm_port *p, struct gmx_rreq *r, void *buf, size_t len,
                  uint64_t tag, uint64_t ignore);
int gmx_post_ctrl(struct gm_port *p, struct gmx_rreq *r);
int gmx_post_ack(struct gm_port *p, struct gmx_rreq *r);
void gmx_send_local_done(struct gm_port *p, struct gmx_sreq *s);
void gmx_ack_arrived(struct gm_port *p, struct gmx_peer *peer, unsigned prio, uint32_t seq,
                     gm_status_t st);
void gmx_reject_update(struct gm_port *p, unsigned prio, gm_size_t old_mask, gm_size_t mask);
gm_recv_event_t *gmx_event_push(struct gm_port *p);

/* memory.c */
int gmx_region_covers(struct gm_port *p, uint64_t addr, uint64_t len);
void gmx_regions_free(struct gm_port *p);

/* alarm.c */
int gmx_alarm_due(struct gm_port *p, uint64_t now);
void gmx_alarms_run(struct gm_port *p);
uint64_t gmx_alarm_next(struct gm_port *p);

/* status.c */
gm_status_t gmx_status_from_fi(int fi_err, const struct gmx_peer *peer);

#define gmx_log(...)                                                          \
    do {                                                                      \
        if (gmx_cfg.verbose)                                                  \
            fprintf(stderr, "libgm: " __VA_ARGS__);                           \
    } while (0)

#endif
