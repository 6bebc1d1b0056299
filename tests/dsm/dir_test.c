/*
 * The cached protocol's state machines (dsm_dir.c): the home's directory and a domain's copy,
 * alone (grants, rounds of invalidation, stale acknowledgments, upgrades, flushes, deaths) and
 * together in a simulation of several domains whose messages travel in per-pair FIFO channels
 * delivered in random order, where every read section must see the last write.
 */
#include <stdlib.h>
#include <string.h>

#include "dsm_internal.h"
#include "../ctest.h"

/* ---- The directory alone, with recording callbacks ------------------------------------ */

struct rec {
    int ninv, ngrant;
    struct {
        int dom;
        uint32_t seq;
        bool wb, keep;
    } inv[16];
    struct {
        struct dsm_dreq r;
        bool data;
        int status;
    } grant[16];
    bool home_now; /* the home's invalidation completes at once */
};

static bool rec_inv(void *ctx, int dom, uint32_t seq, bool wb, bool keep)
{
    struct rec *k = ctx;
    k->inv[k->ninv].dom = dom;
    k->inv[k->ninv].seq = seq;
    k->inv[k->ninv].wb = wb;
    k->inv[k->ninv].keep = keep;
    k->ninv++;
    return dom == 0 && k->home_now;
}

static void rec_grant(void *ctx, const struct dsm_dreq *r, bool data, int status)
{
    struct rec *k = ctx;
    k->grant[k->ngrant].r = *r;
    k->grant[k->ngrant].data = data;
    k->grant[k->ngrant].status = status;
    k->ngrant++;
}

static const struct dsm_dir_cb rec_cb = {rec_inv, rec_grant};

static struct dsm_dreq sec(int who, int mode)
{
    return (struct dsm_dreq){.who = who, .mode = (uint8_t)mode, .kind = DSM_DREQ_SECTION};
}

static void test_dir_readers_writer(void)
{
    struct rec k = {.home_now = true};
    struct dsm_dir d;
    REQUIRE(dsm_dir_init(&d, 4, 0, &rec_cb, &k) == COR_OK);
    EXPECT_EQ(dsm_dir_holds(&d, 0), DSM_MODE_WRITE); /* born writable at home */
    /* domain 1 reads: the home's write copy is invalidated at once, 1 gets the data */
    struct dsm_dreq r1 = sec(1, DSM_MODE_READ);
    EXPECT_ERR(dsm_dir_request(&d, &r1), COR_OK);
    EXPECT_EQ(k.ninv, 1);
    EXPECT_EQ(k.inv[0].dom, 0);
    EXPECT_EQ(k.ngrant, 1);
    EXPECT_EQ(k.grant[0].r.who, 1);
    EXPECT_EQ(k.grant[0].data, true);
    EXPECT_EQ(k.grant[0].r.recalled, true);
    /* domains 2 and 3 read: no invalidation */
    struct dsm_dreq r2 = sec(2, DSM_MODE_READ), r3 = sec(3, DSM_MODE_READ);
    dsm_dir_request(&d, &r2);
    dsm_dir_request(&d, &r3);
    EXPECT_EQ(k.ninv, 1);
    EXPECT_EQ(k.ngrant, 3);
    EXPECT_EQ(dsm_dir_holds(&d, 3), DSM_MODE_READ);
    /* a write while three readers hold copies: all three invalidated in one round */
    struct dsm_dreq w0 = sec(0, DSM_MODE_WRITE);
    dsm_dir_request(&d, &w0);
    EXPECT_EQ(k.ninv, 4);
    EXPECT_EQ(k.ngrant, 3);
    uint32_t seq = k.inv[1].seq;
    EXPECT_EQ(k.inv[2].seq, seq);
    EXPECT_EQ(k.inv[3].seq, seq);
    EXPECT_EQ(k.inv[1].wb, false);
    /* a request arriving meanwhile waits its turn */
    struct dsm_dreq r1b = sec(1, DSM_MODE_READ);
    dsm_dir_request(&d, &r1b);
    EXPECT_EQ(k.ngrant, 3);
    EXPECT_EQ(dsm_dir_ack(&d, 1, seq + 1), false); /* wrong round: stale */
    EXPECT_EQ(dsm_dir_ack(&d, 2, seq), true);
    EXPECT_EQ(dsm_dir_ack(&d, 2, seq), false); /* twice */
    EXPECT_EQ(dsm_dir_ack(&d, 1, seq), true);
    EXPECT_EQ(k.ngrant, 3);
    EXPECT_EQ(dsm_dir_ack(&d, 3, seq), true);
    /* the writer is granted (the home needs no data), then the queued reader recalls it */
    EXPECT_EQ(k.ngrant, 5);
    EXPECT_EQ(k.grant[3].r.who, 0);
    EXPECT_EQ(k.grant[3].data, false);
    EXPECT_EQ(k.ninv, 5);
    EXPECT_EQ(k.inv[4].dom, 0);
    EXPECT_EQ(k.inv[4].wb, true);
    EXPECT_EQ(k.grant[4].r.who, 1);
    /* grants are numbered per domain (an invalidation names the one it revokes): 1 twice,
     * 2 and 3 once, the home once */
    EXPECT_EQ(d.granted[1], 2);
    EXPECT_EQ(d.granted[2], 1);
    EXPECT_EQ(d.granted[3], 1);
    EXPECT_EQ(d.granted[0], 1);
    dsm_dir_free(&d);
}

static void test_dir_upgrade(void)
{
    struct rec k = {.home_now = true};
    struct dsm_dir d;
    REQUIRE(dsm_dir_init(&d, 3, 0, &rec_cb, &k) == COR_OK);
    struct dsm_dreq r1 = sec(1, DSM_MODE_READ), r2 = sec(2, DSM_MODE_READ);
    dsm_dir_request(&d, &r1);
    dsm_dir_request(&d, &r2);
    /* the home, owner at first, was only downgraded by 1's read: it reads on */
    EXPECT_EQ(k.inv[0].dom, 0);
    EXPECT_EQ(k.inv[0].keep, true);
    EXPECT_EQ(dsm_dir_holds(&d, 0), DSM_MODE_READ);
    /* 1 upgrades: 2 and the home are invalidated (not kept), 1 keeps its data (no data in
     * the grant) */
    struct dsm_dreq u = sec(1, DSM_MODE_WRITE);
    u.have_copy = true;
    int before = k.ninv;
    dsm_dir_request(&d, &u);
    EXPECT_EQ(k.ninv, before + 2);
    EXPECT_EQ(k.inv[before].dom, 0);
    EXPECT_EQ(k.inv[before + 1].dom, 2);
    EXPECT_EQ(k.inv[before + 1].keep, false);
    EXPECT_EQ(dsm_dir_ack(&d, 2, k.inv[before + 1].seq), true);
    EXPECT_EQ(k.grant[k.ngrant - 1].r.who, 1);
    EXPECT_EQ(k.grant[k.ngrant - 1].data, false);
    EXPECT_EQ(dsm_dir_holds(&d, 1), DSM_MODE_WRITE);
    EXPECT_EQ(dsm_dir_holds(&d, 2), DSM_MODE_NONE);
    /* 2 claims an upgrade but holds nothing by now: it gets the data */
    struct dsm_dreq u2 = sec(2, DSM_MODE_WRITE);
    u2.have_copy = true;
    dsm_dir_request(&d, &u2);
    EXPECT_EQ(k.inv[k.ninv - 1].dom, 1);
    EXPECT_EQ(k.inv[k.ninv - 1].wb, true);
    dsm_dir_ack(&d, 1, k.inv[k.ninv - 1].seq);
    EXPECT_EQ(k.grant[k.ngrant - 1].r.who, 2);
    EXPECT_EQ(k.grant[k.ngrant - 1].data, true);
    dsm_dir_free(&d);
}

static void test_dir_flush_and_ops(void)
{
    struct rec k = {.home_now = false};
    struct dsm_dir d;
    REQUIRE(dsm_dir_init(&d, 3, 0, &rec_cb, &k) == COR_OK);
    /* the home has a section open: a remote write waits for it */
    struct dsm_dreq w1 = sec(1, DSM_MODE_WRITE);
    dsm_dir_request(&d, &w1);
    EXPECT_EQ(k.ngrant, 0);
    EXPECT_EQ(dsm_dir_ack(&d, 0, k.inv[0].seq), true);
    EXPECT_EQ(k.ngrant, 1);
    /* an operation (a put) recalls the write copy; 1 flushes before it acknowledges: the
     * flush counts, its later acknowledgment is stale */
    struct dsm_dreq op = {.who = 0, .mode = DSM_MODE_WRITE, .kind = DSM_DREQ_OP};
    dsm_dir_request(&d, &op);
    EXPECT_EQ(k.inv[k.ninv - 1].dom, 1);
    uint32_t seq = k.inv[k.ninv - 1].seq;
    dsm_dir_release(&d, 1);
    EXPECT_EQ(k.ngrant, 2);
    EXPECT_EQ(k.grant[1].r.kind, DSM_DREQ_OP);
    EXPECT_EQ(k.grant[1].r.recalled, true);
    EXPECT_EQ(dsm_dir_ack(&d, 1, seq), false);
    /* nobody holds anything now: a get needs no round */
    struct dsm_dreq get = {.who = 0, .mode = DSM_MODE_READ, .kind = DSM_DREQ_OP};
    dsm_dir_request(&d, &get);
    EXPECT_EQ(k.ngrant, 3);
    EXPECT_EQ(k.grant[2].r.recalled, false);
    dsm_dir_free(&d);
}

static void test_dir_death(void)
{
    struct rec k = {.home_now = true};
    struct dsm_dir d;
    REQUIRE(dsm_dir_init(&d, 4, 0, &rec_cb, &k) == COR_OK);
    struct dsm_dreq r1 = sec(1, DSM_MODE_READ), r2 = sec(2, DSM_MODE_READ);
    dsm_dir_request(&d, &r1);
    dsm_dir_request(&d, &r2);
    /* a writer waits for two readers; one of them dies: counted as acknowledged */
    struct dsm_dreq w3 = sec(3, DSM_MODE_WRITE);
    dsm_dir_request(&d, &w3);
    int g = k.ngrant;
    dsm_dir_peer_dead(&d, 1);
    EXPECT_EQ(k.ngrant, g);
    dsm_dir_ack(&d, 2, k.inv[k.ninv - 1].seq);
    EXPECT_EQ(k.ngrant, g + 1);
    EXPECT_EQ(k.grant[g].status, COR_OK);
    /* a queued request of a domain that dies is dropped; requests from the dead refused */
    struct dsm_dreq r2b = sec(2, DSM_MODE_READ);
    dsm_dir_request(&d, &r2b); /* waits for 3's acknowledgment */
    dsm_dir_peer_dead(&d, 2);
    EXPECT_ERR(dsm_dir_request(&d, &r2b), COR_EPEERDEAD);
    /* the owner (3) dies holding the write copy: its data is lost, every request fails */
    dsm_dir_peer_dead(&d, 3);
    EXPECT_EQ(d.lost, true);
    struct dsm_dreq r0 = sec(0, DSM_MODE_READ);
    g = k.ngrant;
    dsm_dir_request(&d, &r0);
    EXPECT_EQ(k.ngrant, g + 1);
    EXPECT_ERR(k.grant[g].status, COR_EPEERDEAD);
    dsm_dir_free(&d);
}

static int each_n, each_dom[8];
static void rec_each(void *ctx, int dom)
{
    (void)ctx;
    each_dom[each_n++] = dom;
}

static void test_dir_fail(void)
{
    struct rec k = {.home_now = false};
    struct dsm_dir d;
    REQUIRE(dsm_dir_init(&d, 4, 0, &rec_cb, &k) == COR_OK);
    struct dsm_dreq r1 = sec(1, DSM_MODE_READ), r2 = sec(2, DSM_MODE_READ);
    dsm_dir_request(&d, &r1); /* waits for the home's acknowledgment */
    dsm_dir_ack(&d, 0, k.inv[0].seq);
    dsm_dir_request(&d, &r2);
    struct dsm_dreq w3 = sec(3, DSM_MODE_WRITE), r0 = sec(0, DSM_MODE_READ);
    dsm_dir_request(&d, &w3); /* a round waiting for 1 and 2 */
    dsm_dir_request(&d, &r0); /* queued */
    int g = k.ngrant;
    each_n = 0;
    dsm_dir_fail(&d, COR_ENOTFOUND, rec_each, NULL);
    /* every holder told (the home kept a read copy when 1 read), the waiting and the queued
     * requests refused, in order */
    EXPECT_EQ(each_n, 3);
    EXPECT_EQ(each_dom[0], 0);
    EXPECT_EQ(each_dom[1], 1);
    EXPECT_EQ(each_dom[2], 2);
    EXPECT_EQ(k.ngrant, g + 2);
    EXPECT_EQ(k.grant[g].r.who, 3);
    EXPECT_ERR(k.grant[g].status, COR_ENOTFOUND);
    EXPECT_EQ(k.grant[g + 1].r.who, 0);
    EXPECT_ERR(k.grant[g + 1].status, COR_ENOTFOUND);
    EXPECT_EQ(dsm_dir_ack(&d, 1, k.inv[k.ninv - 1].seq), false); /* late: ignored */
    dsm_dir_request(&d, &r1);
    EXPECT_ERR(k.grant[k.ngrant - 1].status, COR_ENOTFOUND);
    dsm_dir_free(&d);
}

/* A reader's request downgrades a remote owner: its data comes back and it keeps reading; a
 * flush during the round keeps nothing; a writer's request invalidates (no keep). */
static void test_dir_downgrade(void)
{
    struct rec k = {.home_now = true};
    struct dsm_dir d;
    REQUIRE(dsm_dir_init(&d, 4, 0, &rec_cb, &k) == COR_OK);
    struct dsm_dreq w1 = sec(1, DSM_MODE_WRITE), r2 = sec(2, DSM_MODE_READ);
    dsm_dir_request(&d, &w1);
    EXPECT_EQ(k.inv[0].keep, false); /* a writer's request: the home's copy goes */
    EXPECT_EQ(dsm_dir_holds(&d, 0), DSM_MODE_NONE);
    EXPECT_EQ(dsm_dir_holds(&d, 1), DSM_MODE_WRITE);
    dsm_dir_request(&d, &r2);
    EXPECT_EQ(k.inv[k.ninv - 1].dom, 1);
    EXPECT_EQ(k.inv[k.ninv - 1].wb, true);
    EXPECT_EQ(k.inv[k.ninv - 1].keep, true);
    int g = k.ngrant;
    EXPECT_EQ(dsm_dir_ack(&d, 1, k.inv[k.ninv - 1].seq), true);
    EXPECT_EQ(k.ngrant, g + 1);
    EXPECT_EQ(k.grant[g].data, true);
    EXPECT_EQ(dsm_dir_holds(&d, 1), DSM_MODE_READ);
    EXPECT_EQ(dsm_dir_holds(&d, 2), DSM_MODE_READ);
    /* 1 writes again: an upgrade (no data), 2 invalidated */
    struct dsm_dreq u1 = sec(1, DSM_MODE_WRITE);
    u1.have_copy = true;
    dsm_dir_request(&d, &u1);
    EXPECT_EQ(k.inv[k.ninv - 1].dom, 2);
    dsm_dir_ack(&d, 2, k.inv[k.ninv - 1].seq);
    EXPECT_EQ(k.grant[k.ngrant - 1].r.who, 1);
    EXPECT_EQ(k.grant[k.ngrant - 1].data, false);
    /* 3 reads while 1 flushes during the downgrade: 1 keeps nothing */
    struct dsm_dreq r3 = sec(3, DSM_MODE_READ);
    dsm_dir_request(&d, &r3);
    EXPECT_EQ(k.inv[k.ninv - 1].keep, true);
    dsm_dir_release(&d, 1);
    EXPECT_EQ(dsm_dir_holds(&d, 1), DSM_MODE_NONE);
    EXPECT_EQ(dsm_dir_holds(&d, 3), DSM_MODE_READ);
    EXPECT_EQ(dsm_dir_ack(&d, 1, k.inv[k.ninv - 1].seq), false); /* its late ack: stale */
    dsm_dir_free(&d);
}

/* ---- A copy alone --------------------------------------------------------------------- */

static void test_copy_states(void)
{
    struct dsm_copy c = {0};
    bool have, dirty;
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), false);
    EXPECT_EQ(dsm_copy_miss(&c, DSM_MODE_READ, &have), DSM_MODE_READ);
    EXPECT_EQ(have, false);
    /* one request at a time */
    EXPECT_EQ(dsm_copy_miss(&c, DSM_MODE_WRITE, &have), DSM_MODE_NONE);
    dsm_copy_grant(&c, DSM_MODE_READ, COR_OK);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), true);
    dsm_copy_start(&c, DSM_MODE_READ);
    dsm_copy_start(&c, DSM_MODE_READ); /* another task of the domain */
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_WRITE), false);
    /* upgrade: asked with have = true; new readers wait behind it */
    EXPECT_EQ(dsm_copy_miss(&c, DSM_MODE_WRITE, &have), DSM_MODE_WRITE);
    EXPECT_EQ(have, true);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), false);
    /* an invalidation while two sections are open is deferred to the last end */
    EXPECT_EQ(dsm_copy_inv(&c, 7, false, &dirty), false);
    EXPECT_EQ(dsm_copy_end(&c, DSM_MODE_READ), false);
    EXPECT_EQ(dsm_copy_end(&c, DSM_MODE_READ), true);
    EXPECT_EQ(c.inv_seq, 7);
    EXPECT_EQ(dsm_copy_drop(&c), false);
    EXPECT_EQ(c.state, DSM_MODE_NONE);
    /* the upgrade's grant comes with data; a write section; an invalidation then is dirty */
    dsm_copy_grant(&c, DSM_MODE_WRITE, COR_OK);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_WRITE), true);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), true); /* exclusive serves reads too */
    dsm_copy_start(&c, DSM_MODE_WRITE);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), false);
    EXPECT_EQ(dsm_copy_inv(&c, 8, false, &dirty), false);
    EXPECT_EQ(dsm_copy_end(&c, DSM_MODE_WRITE), true);
    EXPECT_EQ(dsm_copy_drop(&c), true);
    /* an idle copy is invalidated at once */
    dsm_copy_miss(&c, DSM_MODE_WRITE, &have);
    dsm_copy_grant(&c, DSM_MODE_WRITE, COR_OK);
    EXPECT_EQ(dsm_copy_inv(&c, 9, false, &dirty), true);
    EXPECT_EQ(dirty, true);
    /* a grant while tasks wait keeps the copy for one section before an invalidation */
    c.waiters = 1;
    dsm_copy_miss(&c, DSM_MODE_READ, &have);
    dsm_copy_grant(&c, DSM_MODE_READ, COR_OK);
    EXPECT_EQ(dsm_copy_inv(&c, 10, false, &dirty), false);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), true);
    dsm_copy_start(&c, DSM_MODE_READ);
    c.waiters = 0;
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), false); /* the invalidation is next */
    EXPECT_EQ(dsm_copy_end(&c, DSM_MODE_READ), true);
    dsm_copy_drop(&c);
    /* a downgrade: an idle write copy becomes a read copy at once, its data goes back */
    dsm_copy_miss(&c, DSM_MODE_WRITE, &have);
    dsm_copy_grant(&c, DSM_MODE_WRITE, COR_OK);
    EXPECT_EQ(dsm_copy_inv(&c, 11, true, &dirty), true);
    EXPECT_EQ(dirty, true);
    EXPECT_EQ(c.state, DSM_MODE_READ);
    EXPECT_EQ(dsm_copy_can_start(&c, DSM_MODE_READ), true);
    /* ... and waits for an open write section, then keeps reading */
    dsm_copy_miss(&c, DSM_MODE_WRITE, &have);
    EXPECT_EQ(have, true);
    dsm_copy_grant(&c, DSM_MODE_WRITE, COR_OK);
    dsm_copy_start(&c, DSM_MODE_WRITE);
    EXPECT_EQ(dsm_copy_inv(&c, 12, true, &dirty), false);
    EXPECT_EQ(dsm_copy_end(&c, DSM_MODE_WRITE), true);
    EXPECT_EQ(dsm_copy_drop(&c), true);
    EXPECT_EQ(c.state, DSM_MODE_READ);
    /* a read copy asked to downgrade (it was flushed and asked again meanwhile) keeps only
     * what it had; a flushed one, nothing */
    EXPECT_EQ(dsm_copy_inv(&c, 13, true, &dirty), true);
    EXPECT_EQ(dirty, false);
    EXPECT_EQ(c.state, DSM_MODE_NONE);
    /* a refused grant is sticky */
    dsm_copy_miss(&c, DSM_MODE_READ, &have);
    dsm_copy_grant(&c, DSM_MODE_READ, COR_EPEERDEAD);
    EXPECT_ERR(dsm_copy_miss(&c, DSM_MODE_READ, &have), COR_EPEERDEAD);
}

/* ---- Simulation: n domains, FIFO channels, random delivery ---------------------------- */

#define SIM_N 4
#define SIM_Q 256
#define SIM_T 3 /* tasks per domain */

struct smsg {
    uint8_t op;
    uint32_t flags;
    uint32_t seq;
    long data; /* -1: none */
};

static struct sim {
    struct smsg ch[SIM_N][SIM_N][SIM_Q]; /* [from][to] FIFO */
    int head[SIM_N][SIM_N], len[SIM_N][SIM_N];
    struct dsm_dir dir;
    struct dsm_copy c[SIM_N];
    long copy[SIM_N];       /* copy[0] is the memory */
    long version;           /* value of the last completed write */
    int task[SIM_N][SIM_T]; /* 0 idle, else the mode of its open section */
    int wanting[SIM_N][SIM_T];
    long seen[SIM_N][SIM_T]; /* version at the start of the open section */
    long errors, sections;
    /* writes in three hops (S.dir.forward): where each domain's deferred acknowledgment goes
     * (-1 the home); at a writer, the grant waiting for its readers (fwant, round fseq), the
     * acknowledgments come (facked, of round fseq, maybe before the grant), an invalidation
     * that came meanwhile (dinv) */
    int inv_to[SIM_N];
    bool fwaiting[SIM_N], fseq_set[SIM_N], dinv[SIM_N], dinv_keep[SIM_N];
    uint64_t fwant[SIM_N], facked[SIM_N];
    uint32_t fseq[SIM_N], dinv_seq[SIM_N];
    int dinv_to[SIM_N];
    uint8_t fmode[SIM_N];
    long forwarded;
} S;

static void sim_send(int from, int to, struct smsg m)
{
    int *n = &S.len[from][to];
    REQUIRE(*n < SIM_Q);
    S.ch[from][to][(S.head[from][to] + *n) % SIM_Q] = m;
    (*n)++;
}

static bool sim_inv(void *ctx, int dom, uint32_t seq, bool wb, bool keep)
{
    (void)ctx;
    if (dom == 0) {
        bool dirty;
        return dsm_copy_inv(&S.c[0], seq, keep, &dirty);
    }
    uint32_t flags = (wb ? DSM_CF_WRITEBACK : 0) | (keep ? DSM_CF_KEEP : 0);
    sim_send(0, dom, (struct smsg){DSM_OP_C_INV, flags, seq, -1});
    return false;
}

static void sim_grant(void *ctx, const struct dsm_dreq *r, bool data, int status)
{
    (void)ctx;
    if (r->who == 0) {
        dsm_copy_grant(&S.c[0], r->mode, status);
        return;
    }
    if (r->forwarded) { /* the readers it waits for, as a mask in data */
        REQUIRE(!data && status == COR_OK);
        sim_send(
            0, r->who,
            (struct smsg){DSM_OP_C_GRANT, r->mode | DSM_CF_FWD, S.dir.seq, (long)S.dir.fwd[0]});
        return;
    }
    sim_send(0, r->who, (struct smsg){DSM_OP_C_GRANT, r->mode, 0, data ? S.copy[0] : -1});
}

static void sim_finv(void *ctx, int dom, uint32_t seq, int to)
{
    (void)ctx;
    uint32_t flags = DSM_CF_FWD | ((uint32_t)to << DSM_CF_TO_SHIFT);
    sim_send(0, dom, (struct smsg){DSM_OP_C_INV, flags, seq, -1});
}

static const struct dsm_dir_cb sim_cb = {sim_inv, sim_grant, sim_finv};

/* d acknowledges round seq: to the home (to < 0) or, a reader, to the writer `to` */
static void sim_ack_to(int d, int to, uint32_t seq, bool dirty)
{
    if (to >= 0) {
        if (dirty) S.errors++; /* a reader has nothing to write back */
        sim_send(d, to, (struct smsg){DSM_OP_C_FACK, 0, seq, -1});
    } else {
        sim_send(d, 0, (struct smsg){DSM_OP_C_ACK, 0, seq, dirty ? S.copy[d] : -1});
    }
}

static void sim_ack(int d, uint32_t seq)
{
    bool dirty = dsm_copy_drop(&S.c[d]);
    if (d == 0)
        dsm_dir_ack(&S.dir, 0, seq);
    else
        sim_ack_to(d, S.inv_to[d], seq, dirty);
    S.inv_to[d] = -1;
}

/* An invalidation at copy d (to: where its acknowledgment goes). */
static void sim_inv_at(int d, uint32_t seq, bool keep, int to)
{
    bool dirty;
    if (dsm_copy_inv(&S.c[d], seq, keep, &dirty))
        sim_ack_to(d, to, seq, dirty);
    else
        S.inv_to[d] = to;
}

/* A writer in three hops: granted once every reader named acknowledged round fseq. */
static void sim_fwd_try(int d)
{
    if (!S.fwaiting[d] || (S.fwant[d] & ~S.facked[d])) return;
    S.fwaiting[d] = false;
    S.forwarded++;
    dsm_copy_grant(&S.c[d], S.fmode[d], COR_OK);
    if (S.dinv[d]) {
        S.dinv[d] = false;
        sim_inv_at(d, S.dinv_seq[d], S.dinv_keep[d], S.dinv_to[d]);
    }
}

static void sim_fwd_round(int d, uint32_t seq)
{
    if (S.fseq_set[d] && S.fseq[d] == seq) return;
    if (S.fseq_set[d] && (int32_t)(seq - S.fseq[d]) < 0) S.errors++; /* rounds only grow */
    S.facked[d] = 0;
    S.fseq[d] = seq;
    S.fseq_set[d] = true;
}

static void sim_deliver(int from, int to)
{
    struct smsg m = S.ch[from][to][S.head[from][to]];
    S.head[from][to] = (S.head[from][to] + 1) % SIM_Q;
    S.len[from][to]--;
    if (to == 0) { /* at the home */
        if (m.op == DSM_OP_C_REQ) {
            struct dsm_dreq q = sec(from, (int)(m.flags & DSM_CF_MODE));
            q.have_copy = (m.flags & DSM_CF_HAVE) != 0;
            q.task = q.have_copy; /* a waiting task's upgrade: may go in three hops */
            dsm_dir_request(&S.dir, &q);
        } else if (m.op == DSM_OP_C_ACK) {
            if (!dsm_dir_ack_expected(&S.dir, from, m.seq)) return;
            if (dsm_dir_holds(&S.dir, from) == DSM_MODE_WRITE) {
                if (m.data < 0) S.errors++;
                S.copy[0] = m.data;
            }
            dsm_dir_ack(&S.dir, from, m.seq);
        } else if (m.op == DSM_OP_C_FLUSH) {
            if (dsm_dir_holds(&S.dir, from) == DSM_MODE_WRITE) S.copy[0] = m.data;
            dsm_dir_release(&S.dir, from);
        }
        return;
    }
    struct dsm_copy *c = &S.c[to];
    if (m.op == DSM_OP_C_FACK) { /* a reader's, to this writer */
        if (from == 0 || from == to) S.errors++;
        if (S.fseq_set[to] && (int32_t)(m.seq - S.fseq[to]) < 0) { /* no death: never stale */
            S.errors++;
            return;
        }
        sim_fwd_round(to, m.seq);
        S.facked[to] |= 1ull << from;
        sim_fwd_try(to);
        return;
    }
    if (m.op == DSM_OP_C_GRANT && (m.flags & DSM_CF_FWD)) { /* names its readers (data) */
        if (!c->pending || c->state != DSM_MODE_READ) S.errors++;
        sim_fwd_round(to, m.seq);
        S.fwant[to] = (uint64_t)m.data;
        S.fwaiting[to] = true;
        S.fmode[to] = (uint8_t)(m.flags & DSM_CF_MODE);
        sim_fwd_try(to);
        return;
    }
    if (m.op == DSM_OP_C_INV && S.fwaiting[to]) { /* of the grant still waiting: due after it */
        S.dinv[to] = true;
        S.dinv_seq[to] = m.seq;
        S.dinv_keep[to] = (m.flags & DSM_CF_KEEP) != 0;
        S.dinv_to[to] = (m.flags & DSM_CF_FWD) ? (int)(m.flags >> DSM_CF_TO_SHIFT) : -1;
        return;
    }
    if (m.op == DSM_OP_C_GRANT) {
        if (!c->pending) S.errors++;
        if (m.data >= 0)
            S.copy[to] = m.data;
        else if (c->state == DSM_MODE_NONE)
            S.errors++;
        dsm_copy_grant(c, (int)m.flags, COR_OK);
    } else if (m.op == DSM_OP_C_INV) {
        int ack_to = (m.flags & DSM_CF_FWD) ? (int)(m.flags >> DSM_CF_TO_SHIFT) : -1;
        sim_inv_at(to, m.seq, (m.flags & DSM_CF_KEEP) != 0, ack_to);
    }
}

/* A task acts: start (or keep trying to start) a section, or end its open one. */
static void sim_task(int d, int t)
{
    struct dsm_copy *c = &S.c[d];
    if (S.task[d][t]) {
        int mode = S.task[d][t];
        /* nothing else completed a write while the section was open, anywhere */
        if (S.version != S.seen[d][t] || S.copy[d] != S.version) S.errors++;
        if (mode == DSM_MODE_WRITE) S.version = ++S.copy[d];
        S.task[d][t] = 0;
        if (dsm_copy_end(c, mode)) sim_ack(d, c->inv_seq);
        return;
    }
    int mode = S.wanting[d][t];
    if (!mode) {
        mode = rand() % 3 == 0 ? DSM_MODE_WRITE : DSM_MODE_READ;
        S.wanting[d][t] = mode;
        c->waiters++;
    }
    if (dsm_copy_can_start(c, mode)) {
        dsm_copy_start(c, mode);
        c->waiters--;
        S.wanting[d][t] = 0;
        S.task[d][t] = mode;
        S.sections++;
        if (S.copy[d] != S.version) S.errors++; /* a stale view */
        S.seen[d][t] = S.version;
        return;
    }
    bool have;
    int m = dsm_copy_miss(c, mode, &have);
    if (m <= 0) return;
    if (d == 0) {
        struct dsm_dreq q = sec(0, m);
        q.have_copy = have;
        dsm_dir_request(&S.dir, &q);
    } else {
        sim_send(d, 0, (struct smsg){DSM_OP_C_REQ, (uint32_t)m | (have ? DSM_CF_HAVE : 0), 0, -1});
    }
}

/* Occasionally a domain flushes its idle copy. */
static void sim_flush(int d)
{
    struct dsm_copy *c = &S.c[d];
    if (d == 0 || c->readers || c->writers || c->pending || c->state == DSM_MODE_NONE) return;
    if (c->inv) {
        c->inv_keep = false; /* flushed: a due downgrade keeps nothing */
        sim_ack(d, c->inv_seq);
        return;
    }
    bool dirty = dsm_copy_drop(c);
    sim_send(d, 0, (struct smsg){DSM_OP_C_FLUSH, 0, 0, dirty ? S.copy[d] : -1});
}

static void simulate(bool forward)
{
    long forwarded = 0;
    for (unsigned seed = 1; seed <= 20; seed++) {
        memset(&S, 0, sizeof S);
        srand(seed);
        REQUIRE(dsm_dir_init(&S.dir, SIM_N, 0, &sim_cb, NULL) == COR_OK);
        S.dir.forward = forward;
        for (int d = 0; d < SIM_N; d++)
            S.inv_to[d] = -1;
        S.c[0].state = DSM_MODE_WRITE;
        for (long step = 0; step < 200000; step++) {
            int k = rand() % 10;
            if (k < 5) {
                int from = rand() % SIM_N, to = rand() % SIM_N;
                if (S.len[from][to]) sim_deliver(from, to);
            } else if (k < 9) {
                sim_task(rand() % SIM_N, rand() % SIM_T);
            } else if (rand() % 8 == 0) {
                sim_flush(rand() % SIM_N);
            }
        }
        EXPECT_EQ(S.errors, 0);
        /* progress: thousands of sections per run (a stuck protocol stops at a few) */
        EXPECT_EQ(S.sections >= 2000, true);
        /* drain: every message delivered and every task served in turn: all sections end */
        for (int round = 0; round < 1000; round++) {
            for (int f = 0; f < SIM_N; f++)
                for (int t = 0; t < SIM_N; t++)
                    while (S.len[f][t])
                        sim_deliver(f, t);
            for (int d = 0; d < SIM_N; d++)
                for (int t = 0; t < SIM_T; t++)
                    if (S.task[d][t] || S.wanting[d][t]) sim_task(d, t);
        }
        int busy = 0;
        for (int d = 0; d < SIM_N; d++)
            for (int t = 0; t < SIM_T; t++)
                busy += S.task[d][t] != 0 || S.wanting[d][t] != 0;
        EXPECT_EQ(busy, 0);
        EXPECT_EQ(S.errors, 0);
        forwarded += S.forwarded;
        dsm_dir_free(&S.dir);
    }
    /* the writes in three hops happened (~600 in all), or none without the flag */
    EXPECT_EQ(forward ? forwarded >= 200 : forwarded == 0, true);
}

static void test_simulation(void)
{
    simulate(false);
}

/* The same with writes in three hops: the readers of an upgrade acknowledge to the writer. */
static void test_simulation_forward(void)
{
    simulate(true);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"directory: readers then a writer", test_dir_readers_writer},
        {"directory: upgrade", test_dir_upgrade},
        {"directory: downgrade", test_dir_downgrade},
        {"directory: flush, operations", test_dir_flush_and_ops},
        {"directory: deaths", test_dir_death},
        {"directory: destroyed object", test_dir_fail},
        {"copy states", test_copy_states},
        {"simulated domains", test_simulation},
        {"simulated domains, writes in three hops", test_simulation_forward},
        {NULL, NULL}};
    return ct_main("dsm cached protocol", NULL, NULL, tests, 120);
}
