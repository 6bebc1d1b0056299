/*
 * The PMIx backend of the bootstrap (boot.h): domains started by a PMIx server, Slurm's
 * `srun --mpi=pmix` or Open MPI's `mpirun`.
 *
 * - Rank from PMIx_Init; size (PMIX_JOB_SIZE), local size and local peers from PMIx_Get on
 *   the job (wildcard rank).
 * - Session cookie: rank 0 draws it and puts it (key "cor.cookie"); after a first fence the
 *   others get it. It must be secret (the routes drop frames without it), so it is not
 *   derived from the namespace; the routes need it to open, before the address exchange.
 * - Exchange: each domain puts all its hard ports' addresses once, as one binary-safe blob
 *   (cor__boot_blob_encode; key "cor.addrs", PMIX_GLOBAL), commits, then one PMIx_Fence with
 *   PMIX_COLLECT_DATA; every get after it is answered from the local copy of the data. Slurm
 *   supports no publish/lookup, so put/fence/get is the one way that works under both.
 * - The N blobs are got once per node, not once per domain: each get is a request to the
 *   node's PMIx server, and N domains of a node getting N blobs each made N^2 requests
 *   through it (at 256 domains on 2 cores, 1.4 s per domain after the fence; 56 ms now,
 *   docs/measurements/scale-2026-11-28c.md). The node's first domain (lowest rank of
 *   PMIX_LOCAL_PEERS) gets them and puts them as one blob (key "cor.table", PMIX_LOCAL: each
 *   blob after its 4-byte length); after a second fence the node's other domains get that one.
 *   Without PMIX_LOCAL_PEERS (or with COR_BOOT_NODE_TABLE=0) every domain gets the N blobs.
 * - Peers at first contact (the default, cor/core/connect.c): pb_publish puts and fences only,
 *   and pb_lookup gets one domain's blob when it is first talked to; the node's table below
 *   is the way of COR_LAZY_PEERS=0 (and of sessions whose routes need every address at
 *   init: gm), and of a launcher that gives no list of local peers.
 * - Barrier: PMIx_Fence, non-blocking, so that a domain that died or that our routes gave up
 *   (cor__boot_died, cor__boot_lost) ends the wait with COR_EPEERDEAD instead of leaving it
 *   hanging. A fence given up that way is never started again: after a loss every barrier
 *   fails at once. Under Slurm the barrier's fence collects data (PMIX_COLLECT_DATA, as the
 *   exchange's does): Slurm's pmix plugin runs a fence with no data to collect over its "tree"
 *   algorithm, and that one, with two nodes of two tasks (tests/hosts/slurm.sh), completed on
 *   the second node as soon as its own tasks had entered, before any task of the first node
 *   had (a barrier that let a home finalize while another domain still mapped its object);
 *   a fence with data goes over its "ring", which waited for every task in every run.
 *   mpirun's fence without data joins everyone and stays the cheaper one there.
 * - Deaths: the launchers report none to the survivors (Slurm and mpirun end the job when a
 *   task dies); the routes detect a dead peer and the core fails what was toward it. A
 *   survivor that never heard from the dead domain (no traffic to it) still enters the next
 *   barrier's fence and waits there until the launcher ends the job (mpirun
 *   --enable-recovery does not, and now and then never completes the fence: a barrier that
 *   waited COR_BARRIER_WATCH_MS has the routes watch every peer, boot.h, and their finding
 *   ends it).
 *   Under --enable-recovery a fence completes without a participant that died before
 *   entering it: barriers there collect each domain's barrier number and check them
 *   (fence_check, COR_BOOT_FENCE_CHECK).
 * - Domains on several hosts (PMIX_LOCAL_SIZE < PMIX_JOB_SIZE): unless the user chose, the gm
 *   route goes over libfabric's tcp provider (COR_GM_PROVIDER=tcp) and the routes bind to the
 *   address toward the peers (COR_BIND=auto); the gm route's node map then comes from the
 *   exchange (each address carries the node's TCP endpoint), never from GM_NODES by hand.
 */
#include "boot.h"
#include "knobs.h"
#ifdef COR_BOOT_PMIX_PLUGIN
#include "boot_host.h" /* libcor's helpers through its table: built as cor_boot_pmix.so */
#include "config.h"    /* PACKAGE_VERSION */
#endif

#include <errno.h>
#include <pmix.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define KEY_COOKIE "cor.cookie"
#define KEY_ADDRS "cor.addrs"
#define KEY_TABLE "cor.table" /* the node's table, put by its first domain */
#define KEY_BARRIER "cor.bar" /* a checked barrier's number (fence_check) */
#define LOSS_GRACE_S 2        /* how long a barrier waits for its fence once a domain is lost */
#define LEAVE_WAIT_S 10       /* the bound on cor_finalize's second fence (pb_leave) */
#define FIN_ACK_WAIT_MS 2000  /* PMIx_Finalize waits this long for its server's ack, at most */
#define FIN_LINGER_S 10       /* then, without the ack, we stay this long before exiting */

struct pboot {
    struct cor_boot base;  /* rank, size, cookie: set at init, read-only after */
    pmix_proc_t self;      /* our namespace and rank */
    int local_size;        /* domains on our host (PMIX_LOCAL_SIZE) */
    int local_rank;        /* our rank among them (PMIX_LOCAL_RANK) */
    bool barrier_collects; /* Slurm: barriers fence with PMIX_COLLECT_DATA (see the top) */
    bool peers_listed;     /* base.local came from PMIX_LOCAL_PEERS (local_peers) */
    pmix_info_t collect;   /* that info; kept while a fence may still read it */

    pthread_mutex_t bmu; /* one barrier at a time */

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    unsigned fences_done; /* barrier fences completed (PMIx's progress thread counts them) */
    int fence_status;     /* the last one's status */
    int fence_abandoned;  /* a barrier gave up on its fence (a peer was lost) */
    int exchanged;
    int nlost;
    unsigned char *lost; /* [size]: our routes gave this rank up, or the launcher says gone */
    /* After each barrier's fence: ask the launcher which domains are gone (fence_check). */
    int check_fences;
    unsigned barrier_seq;              /* checked barriers entered (under bmu) */
    struct cor_boot_listener listener; /* the core's, for deaths a barrier's fence shows */
};

static const struct cor_boot_ops pb_ops;
static int fence_check_wanted(void);

static void plog(const struct pboot *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void plog(const struct pboot *b, const char *fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cor__boot_log(b ? &b->base : NULL, "pmix", "%s", msg);
}

/* Slurm names its namespaces "slurm.pmix.<job>.<step>". */
static bool under_slurm(void)
{
    const char *ns = getenv("PMIX_NAMESPACE");
    return ns && strncmp(ns, "slurm.pmix.", 11) == 0;
}

/* Who started us, for error messages. */
static const char *launcher_name(void)
{
    if (under_slurm()) return "Slurm's srun --mpi=pmix";
    if (getenv("OMPI_COMMAND") || getenv("OMPI_COMM_WORLD_SIZE") || getenv("OMPI_MCA_orte_hnp_uri"))
        return "Open MPI's mpirun";
    return "the PMIx launcher (srun --mpi=pmix or mpirun)";
}

/* Gets a job-level (wildcard rank) or own value as an unsigned integer of any PMIx width. */
static int get_uint(struct pboot *b, int wildcard, const char *key, unsigned long *out)
{
    pmix_proc_t who = b->self;
    if (wildcard) who.rank = PMIX_RANK_WILDCARD;
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&who, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || !v) return -1;
    int ok = 0;
    switch (v->type) {
    case PMIX_UINT32:
        *out = v->data.uint32;
        break;
    case PMIX_UINT16:
        *out = v->data.uint16;
        break;
    case PMIX_UINT64:
        *out = (unsigned long)v->data.uint64;
        break;
    case PMIX_UINT8:
        *out = v->data.uint8;
        break;
    case PMIX_INT:
        ok = v->data.integer < 0 ? -1 : 0;
        *out = (unsigned long)v->data.integer;
        break;
    default:
        ok = -1;
    }
    PMIX_VALUE_RELEASE(v);
    return ok;
}

/* A blocking fence of the whole job, collecting the data put before it (collect) or not, bounded
 * by COR_BOOT_TIMEOUT (for init and the exchange only: barriers may wait for long computations). */
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static pmix_status_t fence(struct pboot *b, bool collect)
{
    (void)b;
    pmix_info_t info[2];
    int timeout = cor__boot_timeout_s();
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(NULL, 0, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    return rc;
}

static void pb_free(struct pboot *b)
{
    PMIX_INFO_DESTRUCT(&b->collect);
    pthread_mutex_destroy(&b->bmu);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->lost);
    free(b->base.local);
    free(b);
}

/* Rank 0 draws the cookie and puts it; a fence later everyone gets it. A get from rank 0
 * without the fence (the server asks rank 0's server) returned NOT-FOUND under mpirun when
 * rank 0 had not committed yet. */
static int share_cookie(struct pboot *b)
{
    pmix_status_t rc = PMIX_SUCCESS;
    if (b->base.rank == 0) {
        pmix_value_t v;
        PMIX_VALUE_CONSTRUCT(&v);
        v.type = PMIX_UINT64;
        v.data.uint64 = b->base.cookie = cor__boot_random_cookie();
        if ((rc = PMIx_Put(PMIX_GLOBAL, KEY_COOKIE, &v)) != PMIX_SUCCESS ||
            (rc = PMIx_Commit()) != PMIX_SUCCESS) {
            plog(b, "cannot publish the session cookie: %s", PMIx_Error_string(rc));
            return COR_EBOOT;
        }
    }
    if ((rc = fence(b, 1)) != PMIX_SUCCESS) {
        plog(b, "the first fence failed: %s", PMIx_Error_string(rc));
        return COR_EBOOT;
    }
    if (b->base.rank == 0) return COR_OK;
    pmix_proc_t zero = b->self;
    zero.rank = 0;
    pmix_value_t *v = NULL;
    rc = PMIx_Get(&zero, KEY_COOKIE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || !v || v->type != PMIX_UINT64 || v->data.uint64 == 0) {
        plog(b, "cannot get the session cookie from domain 0: %s",
             rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "wrong type");
        if (v) PMIX_VALUE_RELEASE(v);
        return COR_EBOOT;
    }
    b->base.cookie = v->data.uint64;
    PMIX_VALUE_RELEASE(v);
    return COR_OK;
}

/* The domains on our node, from PMIX_LOCAL_PEERS ("0,2,5": the launcher's own idea of a
 * node, by host name) into b->base.local. Without it: every domain if PMIX_LOCAL_SIZE says
 * they all are here, else left to the host names of the exchange (cor__boot_exchange). A
 * list that names a rank out of range, is malformed or leaves us out is not used. */
static void local_peers(struct pboot *b)
{
    int size = b->base.size;
    unsigned char *local = calloc((size_t)size, 1);
    if (!local) return;
    pmix_proc_t job = b->self;
    job.rank = PMIX_RANK_WILDCARD;
    pmix_value_t *v = NULL;
    int ok = 0, count = 0;
    if (PMIx_Get(&job, PMIX_LOCAL_PEERS, NULL, 0, &v) == PMIX_SUCCESS && v &&
        v->type == PMIX_STRING && v->data.string) {
        ok = 1;
        for (const char *p = v->data.string; ok && *p;) {
            char *end;
            errno = 0;
            long r = strtol(p, &end, 10);
            if (end == p || errno || r < 0 || r >= size || (*end && *end != ','))
                ok = 0;
            else {
                count += !local[r];
                local[r] = 1;
                p = *end ? end + 1 : end;
            }
        }
        ok = ok && local[b->base.rank];
        b->peers_listed = ok;
    }
    if (v) PMIX_VALUE_RELEASE(v);
    if (!ok && b->local_size == size) {
        memset(local, 1, (size_t)size);
        ok = 1;
        count = size;
    }
    if (!ok) {
        free(local);
        return;
    }
    if (count != b->local_size)
        plog(b, "PMIX_LOCAL_PEERS names %d domains, PMIX_LOCAL_SIZE says %d: using the list", count,
             b->local_size);
    b->base.local = local;
}

/* Domains on several hosts: the defaults that reach across them, unless the user chose. */
static void across_hosts(struct pboot *b)
{
    if (b->local_size <= 0 || b->local_size >= b->base.size) return;
    const char *p = getenv("COR_GM_PROVIDER"), *m1 = getenv("GM_NODES"),
               *m2 = getenv("GM_NODE_MAP"), *bind = cor__knob_str(COR_K_BIND);
    /* No thread of ours runs yet; PMIx's progress thread reads no COR_ or GM_ variable. */
    if (!(p && *p) && !(m1 && *m1) && !(m2 && *m2)) setenv("COR_GM_PROVIDER", "tcp", 1);
    if (!(bind && *bind)) setenv(cor__knob_name(COR_K_BIND), "auto", 1);
}

static int pmix_init(struct cor_boot **bootp)
{
    *bootp = NULL;
    struct pboot *b = calloc(1, sizeof *b);
    if (!b) return COR_ENOMEM;
    pthread_mutex_init(&b->bmu, NULL);
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->base.ops = &pb_ops;
    b->base.rank = -1;
    bool yes = true;
    PMIX_INFO_LOAD(&b->collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);

    pmix_status_t rc = PMIx_Init(&b->self, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        const char *ns = getenv("PMIX_NAMESPACE");
        plog(NULL,
             "PMIx variables say %s started this program (PMIX_NAMESPACE=%.64s), but its PMIx "
             "server cannot be reached: PMIx_Init: %s",
             launcher_name(), ns ? ns : "(unset)", PMIx_Error_string(rc));
        pb_free(b);
        return COR_EBOOT;
    }
    unsigned long size, lsize = 0, lrank = 0;
    if (b->self.rank > (pmix_rank_t)COR_MAX_DOMAINS || get_uint(b, 1, PMIX_JOB_SIZE, &size) ||
        size < 1 || size > COR_MAX_DOMAINS || b->self.rank >= size) {
        plog(NULL, "%s gave no usable job size or rank (rank %u; 1..%d domains allowed)",
             launcher_name(), (unsigned)b->self.rank, COR_MAX_DOMAINS);
        goto fail;
    }
    b->base.rank = (int)b->self.rank;
    b->base.size = (int)size;
    /* Local size and rank are optional (1 host assumed without them). */
    if (get_uint(b, 1, PMIX_LOCAL_SIZE, &lsize) || lsize < 1 || lsize > size) lsize = size;
    if (get_uint(b, 0, PMIX_LOCAL_RANK, &lrank) || lrank >= lsize) lrank = 0;
    b->local_size = (int)lsize;
    b->local_rank = (int)lrank;
    local_peers(b);
    b->barrier_collects = under_slurm();
    b->check_fences = fence_check_wanted();
    b->lost = calloc(size, 1);
    if (!b->lost) goto fail;
    if (share_cookie(b)) goto fail;
    across_hosts(b);
    *bootp = &b->base;
    return COR_OK;

fail:
    PMIx_Finalize(NULL, 0);
    pb_free(b);
    return COR_EBOOT;
}

/* The lowest rank on our node (PMIX_LOCAL_PEERS), or -1 if PMIx does not say or says
 * something that does not include us. */
static int node_leader(struct pboot *b)
{
    if (!b->peers_listed) return -1;
    for (int r = 0; r < b->base.size; r++) /* base.local holds us (local_peers checked) */
        if (b->base.local[r]) return r;
    return -1;
}

/* The byte object `key` that domain `rank` put, from the data the fence collected
 * (PMIX_OPTIONAL: no request beyond it, a missing key is an error); NULL after a message
 * "`what` from domain R: why". Released with PMIX_VALUE_RELEASE. */
static pmix_value_t *get_bytes(struct pboot *b, int rank, const char *key, const char *what)
{
    pmix_info_t opt;
    bool optional = true;
    PMIX_INFO_LOAD(&opt, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    pmix_proc_t who = b->self;
    who.rank = (pmix_rank_t)rank;
    pmix_value_t *got = NULL;
    pmix_status_t rc = PMIx_Get(&who, key, &opt, 1, &got);
    PMIX_INFO_DESTRUCT(&opt);
    if (rc == PMIX_SUCCESS && got && got->type == PMIX_BYTE_OBJECT) return got;
    plog(b, "%s from domain %d: %s", what, rank,
         rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "wrong type");
    if (got) PMIX_VALUE_RELEASE(got);
    return NULL;
}

/* Gets every domain's blob after the exchange's fence, decodes it into table[size * n] and,
 * when node is not NULL, makes *node the node's table: the N blobs, each after its length
 * (4 bytes, big-endian), for the other domains of the node (get_node_table). */
static int get_blobs(struct pboot *b, int n, struct cor_boot_addr *table, unsigned char **node,
                     size_t *node_len)
{
    int err = 0;
    size_t cap = 0, len = 0;
    unsigned char *out = NULL;
    for (int r = 0; r < b->base.size && !err; r++) {
        pmix_value_t *got = get_bytes(b, r, KEY_ADDRS, "exchange: no addresses");
        if (!got) {
            err = COR_EBOOT;
        } else if (cor__boot_blob_decode((const unsigned char *)got->data.bo.bytes,
                                         got->data.bo.size, n, &table[(size_t)r * n])) {
            plog(b,
                 "exchange: domain %d published %zu bytes that are not %d addresses (all "
                 "domains must open the same routes and ports)",
                 r, got->data.bo.size, n);
            err = COR_EBOOT;
        } else if (node) {
            size_t k = got->data.bo.size;
            if (len + 4 + k > cap) {
                size_t c = cap ? cap : 4096;
                while (c < len + 4 + k)
                    c *= 2;
                unsigned char *p = realloc(out, c);
                if (!p) {
                    err = COR_ENOMEM;
                } else {
                    out = p;
                    cap = c;
                }
            }
            if (!err) {
                for (int s = 24; s >= 0; s -= 8)
                    out[len++] = (unsigned char)(k >> s);
                memcpy(out + len, got->data.bo.bytes, k);
                len += k;
            }
        }
        if (got) PMIX_VALUE_RELEASE(got);
    }
    if (err || !node) {
        free(out);
        return err;
    }
    *node = out;
    *node_len = len;
    return COR_OK;
}

/* The node's table from its leader (one get), decoded into table[size * n]. */
static int get_node_table(struct pboot *b, int leader, int n, struct cor_boot_addr *table)
{
    pmix_value_t *got =
        get_bytes(b, leader, KEY_TABLE, "exchange: no address table (this node's first)");
    int err = 0;
    if (!got) {
        err = COR_EBOOT;
    } else {
        const unsigned char *p = (const unsigned char *)got->data.bo.bytes;
        size_t len = got->data.bo.size, k = 0;
        for (int r = 0; r < b->base.size && !err; r++) {
            size_t bl = 0;
            if (len - k < 4) {
                err = COR_EBOOT;
                break;
            }
            for (int s = 0; s < 4; s++)
                bl = bl << 8 | p[k++];
            if (bl > len - k || cor__boot_blob_decode(p + k, bl, n, &table[(size_t)r * (size_t)n]))
                err = COR_EBOOT;
            k += bl;
        }
        if (!err && k != len) err = COR_EBOOT;
        if (err)
            plog(b, "exchange: the address table from domain %d is malformed (%zu bytes)", leader,
                 len);
    }
    if (got) PMIX_VALUE_RELEASE(got);
    return err;
}

/* The exchange's first half, shared with pb_publish: checks, then puts our blob (KEY_ADDRS),
 * commits and fences collecting the data; *t1 is when the fence began (COR_BOOT_STATS). */
static int put_and_fence(struct pboot *b, int n, const struct cor_boot_addr *mine, double *t1)
{
    int err = cor__boot_check_addrs(&b->base, "pmix", n, mine);
    if (err) return err;
    pthread_mutex_lock(&b->mu);
    int again = b->exchanged;
    b->exchanged = 1;
    pthread_mutex_unlock(&b->mu);
    if (again) {
        plog(b, "exchange: called twice (once per session)");
        return COR_ESTATE;
    }
    unsigned char *blob;
    size_t len;
    if ((err = cor__boot_blob_encode(n, mine, &blob, &len))) return err;
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)blob;
    v.data.bo.size = len;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, KEY_ADDRS, &v); /* copies the blob */
    free(blob);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
        plog(b, "exchange: cannot put our addresses: %s", PMIx_Error_string(rc));
        return COR_EBOOT;
    }
    *t1 = now_ms();
    rc = fence(b, 1);
    if (rc != PMIX_SUCCESS) {
        plog(b, "exchange: the fence failed: %s", PMIx_Error_string(rc));
        return rc == PMIX_ERR_TIMEOUT ? COR_ETIMEDOUT : COR_EBOOT;
    }
    return COR_OK;
}

/* Lazy peers: put and fence only; each domain's blob is got when it is first talked to
 * (pb_lookup): no get at all at init, one fence instead of two, and a domain that talks to k
 * peers makes k gets. Needs the launcher's list of local peers (else the local ones come from
 * the host names of the whole table: COR_ENOTSUP, the table is exchanged). */
static int pb_publish(struct cor_boot *base, int n, const struct cor_boot_addr *mine)
{
    struct pboot *b = (struct pboot *)base;
    if (!b->base.local) return COR_ENOTSUP;
    double t0 = now_ms(), t1 = t0;
    int err = put_and_fence(b, n, mine, &t1);
    if (!err && cor__knob_long(COR_K_BOOT_STATS))
        plog(b, "publish: put %.1f ms, fence %.1f ms (addresses got at first contact)", t1 - t0,
             now_ms() - t1);
    return err;
}

/* One domain's blob, after pb_publish's fence: a get answered by the node's server from the
 * data the fence collected (PMIX_OPTIONAL: no request beyond it). */
static int pb_lookup(struct cor_boot *base, int rank, int n, struct cor_boot_addr *out)
{
    struct pboot *b = (struct pboot *)base;
    pmix_value_t *got = get_bytes(b, rank, KEY_ADDRS, "no addresses");
    int err = COR_OK;
    if (!got) {
        err = COR_EBOOT;
    } else if (cor__boot_blob_decode((const unsigned char *)got->data.bo.bytes, got->data.bo.size,
                                     n, out)) {
        plog(b, "domain %d published %zu bytes that are not %d addresses", rank, got->data.bo.size,
             n);
        err = COR_EBOOT;
    }
    if (got) PMIX_VALUE_RELEASE(got);
    return err;
}

static int pb_exchange(struct cor_boot *base, int n, const struct cor_boot_addr *mine,
                       struct cor_boot_addr **all)
{
    struct pboot *b = (struct pboot *)base;
    double t0 = now_ms(), t1 = t0;
    int err = put_and_fence(b, n, mine, &t1);
    if (err) return err;
    pmix_status_t rc;
    pmix_value_t v;
    double t2 = now_ms();
    struct cor_boot_addr *table = calloc((size_t)b->base.size * (size_t)n, sizeof *table);
    if (!table) return COR_ENOMEM;
    int leader = cor__knob_long(COR_K_BOOT_NODE_TABLE) ? node_leader(b) : -1;
    double t3 = t2;
    if (leader < 0) {
        /* Who else is on this node is not known: every domain gets the N blobs itself. */
        err = get_blobs(b, n, table, NULL, NULL);
        t3 = now_ms();
    } else {
        /* One domain per node gets the N blobs and puts them as one (PMIX_LOCAL); a second
         * fence later the others get that one: N + local gets per node, not N x local. The
         * leader enters the fence whatever happened, or the others would wait for it. */
        unsigned char *node = NULL;
        size_t node_len = 0;
        if (b->base.rank == leader) {
            err = get_blobs(b, n, table, &node, &node_len);
            if (!err) {
                PMIX_VALUE_CONSTRUCT(&v);
                v.type = PMIX_BYTE_OBJECT;
                v.data.bo.bytes = (char *)node;
                v.data.bo.size = node_len;
                rc = PMIx_Put(PMIX_LOCAL, KEY_TABLE, &v);
                if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
                if (rc != PMIX_SUCCESS) {
                    plog(b, "exchange: cannot put the node's table: %s", PMIx_Error_string(rc));
                    err = COR_EBOOT;
                }
            }
            free(node);
        }
        t3 = now_ms();
        rc = fence(b, b->barrier_collects);
        if (rc != PMIX_SUCCESS) {
            plog(b, "exchange: the second fence failed: %s", PMIx_Error_string(rc));
            if (!err) err = rc == PMIX_ERR_TIMEOUT ? COR_ETIMEDOUT : COR_EBOOT;
        }
        if (!err && b->base.rank != leader) err = get_node_table(b, leader, n, table);
    }
    if (err) {
        free(table);
        return err;
    }
    if (cor__knob_long(COR_K_BOOT_STATS))
        plog(b, "exchange: put %.1f ms, fence %.1f ms, %s %.1f ms, then %.1f ms", t1 - t0, t2 - t1,
             leader < 0               ? "all gets"
             : b->base.rank == leader ? "leader's gets"
                                      : "wait",
             t3 - t2, now_ms() - t3);
    *all = table;
    return COR_OK;
}

static void fence_done(pmix_status_t status, void *cbdata)
{
    struct pboot *b = cbdata;
    pthread_mutex_lock(&b->mu);
    b->fences_done++;
    b->fence_status = status;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* COR_BOOT_FENCE_CHECK: 1 always, 0 never, -1 (default) when the launcher keeps a job whose
 * domain died: mpirun --enable-recovery (which puts OMPI_MCA_orte_enable_recovery in every
 * rank's environment). Without recovery the launcher ends the job at a death. */
static int fence_check_wanted(void)
{
    long k = cor__knob_long(COR_K_BOOT_FENCE_CHECK);
    if (k >= 0) return (int)k;
    const char *r = getenv("OMPI_MCA_orte_enable_recovery");
    return r && (strcmp(r, "1") == 0 || strcasecmp(r, "true") == 0 || strcasecmp(r, "yes") == 0);
}

/* Before a checked barrier's fence: puts this barrier's number (KEY_BARRIER) for the fence
 * to collect. Returns 0, or -1 (logged) if PMIx refused. */
static int put_barrier_seq(struct pboot *b)
{
    uint32_t seq = b->barrier_seq;
    pmix_value_t v;
    PMIX_VALUE_LOAD(&v, &seq, PMIX_UINT32);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, KEY_BARRIER, &v);
    PMIX_VALUE_DESTRUCT(&v);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) plog(b, "barrier: PMIx_Put/Commit: %s", PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : -1;
}

/* After a barrier's fence completed: under a launcher that completes a fence without a dead
 * participant (mpirun --enable-recovery: its PMIx server completes the local part once the
 * dead client's connection closed) the fence's status says nothing, and the routes may not
 * have noticed yet (~1 s). What the fence collected does: each domain put this barrier's
 * number before entering it, so a domain whose number is missing or older never entered (one
 * newer by one passed this fence already and entered the next one)
 * (the launcher's proc table, asked instead, lagged behind the fence in 1 run of 4). Every
 * such domain is marked lost and returned in found[size] (newly found ones only); the barrier
 * fails. The gets are local (PMIX_OPTIONAL: the fence brought the data): N per barrier,
 * which is why only COR_BOOT_FENCE_CHECK (auto: --enable-recovery) asks for them. Under bmu. */
static int fence_check(struct pboot *b, unsigned char *found)
{
    /* Optional: what the fence brought, no request to another node; refreshed: never a
     * number this client read at an earlier barrier. */
    pmix_info_t opt[2];
    bool yes = true;
    PMIX_INFO_LOAD(&opt[0], PMIX_OPTIONAL, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&opt[1], PMIX_GET_REFRESH_CACHE, &yes, PMIX_BOOL);
    int n = 0;
    for (int r = 0; r < b->base.size; r++) {
        if (r == b->base.rank) continue;
        pmix_proc_t who = b->self;
        who.rank = (pmix_rank_t)r;
        pmix_value_t *v = NULL;
        pmix_status_t rc = PMIx_Get(&who, KEY_BARRIER, opt, 2, &v);
        /* A domain told of the fence's end before us may have put the next number already. */
        uint32_t seq = (uint32_t)b->barrier_seq;
        int entered = rc == PMIX_SUCCESS && v && v->type == PMIX_UINT32 &&
                      (v->data.uint32 == seq || v->data.uint32 == seq + 1);
        long got = rc == PMIX_SUCCESS && v && v->type == PMIX_UINT32 ? (long)v->data.uint32 : -1;
        if (v) PMIX_VALUE_RELEASE(v);
        if (entered) continue;
        plog(b, "barrier %u: domain %d's number is %ld (%s)", seq, r, got, PMIx_Error_string(rc));
        n++;
        pthread_mutex_lock(&b->mu);
        if (!b->lost[r]) {
            b->lost[r] = 1;
            b->nlost++;
            found[r] = 1;
        }
        pthread_mutex_unlock(&b->mu);
    }
    PMIX_INFO_DESTRUCT(&opt[0]);
    PMIX_INFO_DESTRUCT(&opt[1]);
    return n;
}

/* Tells the core of the deaths fence_check found (outside bmu: the core's death handlers may
 * take their own locks and call back into us). */
static void report_found(struct pboot *b, const unsigned char *found)
{
    for (int r = 0; r < b->base.size; r++) {
        if (!found[r]) continue;
        plog(b,
             "domain %d never entered the barrier that %s completed: it is gone, the barrier fails",
             r, launcher_name());
        cor_boot_death_fn fn;
        void *arg;
        pthread_mutex_lock(&b->mu);
        int call = cor__boot_listener_begin(&b->listener, &fn, &arg);
        pthread_mutex_unlock(&b->mu);
        if (!call) continue;
        fn(arg, r, "it is missing from a barrier the launcher completed");
        cor__boot_listener_end(&b->listener, &b->cv, &b->mu);
    }
}

static int pb_barrier(struct cor_boot *base)
{
    struct pboot *b = (struct pboot *)base;
    pthread_mutex_lock(&b->bmu);
    pthread_mutex_lock(&b->mu);
    int rc = b->nlost || b->fence_abandoned ? COR_EPEERDEAD : COR_OK;
    unsigned want = b->fences_done + 1;
    pthread_mutex_unlock(&b->mu);
    /* A checked barrier's fence collects every domain's barrier number (fence_check). */
    bool collect = b->barrier_collects || b->check_fences;
    if (rc == COR_OK && b->check_fences) {
        b->barrier_seq++;
        if (put_barrier_seq(b)) rc = COR_EBOOT;
    }
    if (rc == COR_OK) {
        /* Slurm picks its fence algorithm by whether data is collected (see the top). */
        pmix_status_t st =
            PMIx_Fence_nb(NULL, 0, collect ? &b->collect : NULL, collect ? 1 : 0, fence_done, b);
        if (st != PMIX_SUCCESS) {
            plog(b, "barrier: PMIx_Fence_nb: %s", PMIx_Error_string(st));
            rc = COR_EBOOT;
        }
    }
    struct cor_boot_wait w;
    cor__boot_wait_begin(&b->base, &w);
    if (rc == COR_OK) {
        pthread_mutex_lock(&b->mu);
        /* No timeout: a barrier may wait for a long computation; a loss ends it. The launcher
         * may never end the fence when a domain died (mpirun --enable-recovery): a slow
         * barrier has the routes watch every peer (boot.h), whose death then ends it. */
        while (b->fences_done < want && !b->nlost)
            cor__boot_wait(&b->base, &w, &b->cv, &b->mu);
        /* A domain is gone. One that passed this very fence may have closed a port of a
         * session that does not finalize through cor_finalize's leave fence (pb_leave, which
         * keeps finalizing domains' ports open until everyone passed): give the fence a
         * moment before calling the barrier failed. */
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += LOSS_GRACE_S;
        while (b->fences_done < want && pthread_cond_timedwait(&b->cv, &b->mu, &dl) != ETIMEDOUT)
            ;
        if (b->fences_done < want) {
            b->fence_abandoned = 1;
            rc = COR_EPEERDEAD;
        } else if (b->fence_status != PMIX_SUCCESS) {
            /* PARTIAL SUCCESS: a participant left (mpirun --enable-recovery, a domain that
             * exited or died): the barrier did not join everyone, and no later one will. */
            int gone = b->fence_status == PMIX_ERR_PARTIAL_SUCCESS ||
                       b->fence_status == PMIX_ERR_PROC_ABORTED ||
                       b->fence_status == PMIX_ERR_PROC_TERM_WO_SYNC;
            plog(b, "barrier: the fence failed: %s", PMIx_Error_string(b->fence_status));
            rc = gone ? COR_EPEERDEAD : COR_EBOOT;
            if (gone) b->fence_abandoned = 1;
        }
        pthread_mutex_unlock(&b->mu);
    }
    cor__boot_wait_end(&b->base, &w);
    unsigned char *found = NULL;
    if (rc == COR_OK && b->check_fences && (found = calloc((size_t)b->base.size, 1)) &&
        fence_check(b, found))
        rc = COR_EPEERDEAD;
    pthread_mutex_unlock(&b->bmu);
    if (found) report_found(b, found);
    free(found);
    return rc;
}

/* cor_finalize's second fence (cor__boot_leave), after its barrier succeeded. PMIx tells each
 * domain that a fence completed at its own time: without this one, a domain told first closed
 * its ports while another still waited for the same news, took the closed port for a death
 * and failed its cor_finalize (hello over gm-tcp under TSan, 4 domains). Once this fence
 * completes for us, every domain has returned from the barrier, so closing ours breaks no
 * one's. A domain lost meanwhile passed this fence and closed its ports (a normal end) or died
 * after the barrier: neither changes what finalize returns, so the wait is bounded (a launcher
 * may never end a fence that lost a participant) and its outcome only logged. */
static void pb_leave(struct cor_boot *base)
{
    struct pboot *b = (struct pboot *)base;
    pthread_mutex_lock(&b->bmu);
    pthread_mutex_lock(&b->mu);
    unsigned want = b->fences_done + 1;
    int usable = !b->fence_abandoned; /* else fences_done no longer counts our fences */
    pthread_mutex_unlock(&b->mu);
    pmix_status_t st = PMIX_ERROR;
    if (usable)
        st = PMIx_Fence_nb(NULL, 0, b->barrier_collects ? &b->collect : NULL,
                           b->barrier_collects ? 1 : 0, fence_done, b);
    if (st != PMIX_SUCCESS) {
        if (usable) plog(b, "leave: PMIx_Fence_nb: %s", PMIx_Error_string(st));
        pthread_mutex_unlock(&b->bmu);
        return;
    }
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += LEAVE_WAIT_S;
    pthread_mutex_lock(&b->mu);
    while (b->fences_done < want && pthread_cond_timedwait(&b->cv, &b->mu, &dl) != ETIMEDOUT)
        ;
    if (b->fences_done < want) {
        b->fence_abandoned = 1;
        plog(b, "leave: the last fence did not complete within %d s; finalizing anyway",
             LEAVE_WAIT_S);
    }
    pthread_mutex_unlock(&b->mu);
    pthread_mutex_unlock(&b->bmu);
}

static void pb_lost(struct cor_boot *base, int rank)
{
    struct pboot *b = (struct pboot *)base;
    pthread_mutex_lock(&b->mu);
    int first = !b->lost[rank];
    if (first) {
        b->lost[rank] = 1;
        b->nlost++;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    if (first)
        plog(b,
             "domain %d died or was given up by the routes; %s tells the other domains "
             "nothing, so barriers fail from now on instead of waiting for it",
             rank, launcher_name());
}

/* The launchers send survivors no death notice (PMIx events never came, under Slurm or
 * mpirun --enable-recovery): the routes report deaths, and the one other source is the
 * launcher's proc table read after a barrier's fence (fence_check, report_found). */
static void pb_on_death(struct cor_boot *base, cor_boot_death_fn fn, void *arg)
{
    struct pboot *b = (struct pboot *)base;
    pthread_mutex_lock(&b->mu);
    cor__boot_listener_set(&b->listener, &b->cv, &b->mu, fn, arg);
    pthread_mutex_unlock(&b->mu);
}

/* PMIx_Finalize sends the server our finalize sync and waits for its ack, but 2 s at most
 * (PMIx 4's client; it returns success either way), then tears down and lets us exit. Open
 * MPI's mpirun calls a rank's exit improper ("process rank R with PID 0 ... exiting
 * improperly", exit 1) if it reaps the process before it has recorded that sync: at 256
 * domains on a loaded machine mpirun, starved of CPU, did not answer the syncs sent at once
 * after cor_finalize's last fence within 2 s, and now and then ended the job so although
 * every domain had finalized (tests/launch/finunacked.sh makes it with mpirun stopped for
 * 4 s inside the finalize). The sync is in the server's socket by then: a domain whose
 * PMIx_Finalize took the whole bound stays FIN_LINGER_S more before it goes on to exit, which
 * gives the launcher that time to read it first. Logged (a starved launcher). */
static void pb_finish(struct cor_boot *base)
{
    struct pboot *b = (struct pboot *)base;
    /* PMIx_Finalize stops PMIx's progress thread: no fence_done may run after it. */
    double t0 = now_ms();
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    double took = now_ms() - t0;
    if (rc != PMIX_SUCCESS) plog(b, "PMIx_Finalize: %s", PMIx_Error_string(rc));
    if (took >= FIN_ACK_WAIT_MS - 50) {
        plog(b,
             "PMIx_Finalize took %.0f ms: %s did not acknowledge our finalize within PMIx's "
             "%d ms; staying %d s before exiting, so that it reads it before it sees us exit",
             took, launcher_name(), FIN_ACK_WAIT_MS, FIN_LINGER_S);
        struct timespec d = {FIN_LINGER_S, 0};
        while (nanosleep(&d, &d) != 0 && errno == EINTR)
            ;
    } else if (cor__knob_long(COR_K_BOOT_STATS)) {
        plog(b, "finish: PMIx_Finalize %.1f ms", took);
    }
    pb_free(b);
}

static const struct cor_boot_ops pb_ops = {
    .name = "pmix",
    .exchange = pb_exchange,
    .barrier = pb_barrier,
    .publish = pb_publish,
    .lookup = pb_lookup,
    .leave = pb_leave,
    .lost = pb_lost,
    .died = pb_lost,
    .on_death = pb_on_death,
    .finish = pb_finish,
};

#ifdef COR_BOOT_PMIX_PLUGIN
const struct cor_boot_host *cor__boot_host;

/* The plugin's entry (boot_host.h), called by libcor's loader (boot_pmix_load.c). */
__attribute__((visibility("default"))) int cor_boot_pmix_plugin_init(const struct cor_boot_host *h,
                                                                     struct cor_boot **bootp)
{
    *bootp = NULL;
    if (!h || h->abi != COR_BOOT_HOST_ABI || h->size != sizeof *h || !h->version ||
        strcmp(h->version, PACKAGE_VERSION) != 0) {
        fprintf(stderr,
                "cor: bootstrap (pmix): %s is from CoR %s, libcor from %s: install matching "
                "versions\n",
                COR_BOOT_PMIX_FILE, PACKAGE_VERSION, h && h->version ? h->version : "?");
        return COR_EBOOT;
    }
    cor__boot_host = h;
    return pmix_init(bootp);
}
#else
int cor__boot_pmix_init(struct cor_boot **bootp)
{
    return pmix_init(bootp);
}
#endif
