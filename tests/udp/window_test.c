/* Units of CoRudpRoute's pure logic: wire parser, send/receive windows (acks, selective acks,
 * retransmission timer), reassembly and the fault injector. No sockets; time is a parameter. */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "udp_fault.h"
#include "udp_reasm.h"
#include "udp_window.h"
#include "udp_wire.h"

#define MS 1000000ull
#define US 1000ull

static struct udp_hdr data_hdr(uint32_t seq, uint32_t frame_len, uint32_t off, uint32_t len)
{
    struct udp_hdr h = {.type = UDP_T_DATA,
                        .cookie = 7,
                        .src = 1,
                        .dst = 0,
                        .ack = 3,
                        .sack = 5,
                        .seq = seq,
                        .frame_len = frame_len,
                        .frag_off = off,
                        .len = len};
    return h;
}

static void test_wire(void)
{
    uint8_t b[UDP_HDR_LEN + 16];
    struct udp_hdr h = data_hdr(0xfffffffeu, 100, 90, 10), g;
    h.flags = UDP_F_ACKREQ;
    h.sack = 0x8000000000000001ull;
    h.tsval = 0xdeadbeef;
    h.tsecr = 17;
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN + 10, 1000, &g), UDP_W_OK);
    CU_ASSERT_EQUAL(g.seq, h.seq);
    CU_ASSERT_EQUAL(g.sack, h.sack);
    CU_ASSERT_EQUAL(g.cookie, 7);
    CU_ASSERT_EQUAL(g.flags, UDP_F_ACKREQ);
    CU_ASSERT_EQUAL(g.tsval, 0xdeadbeef);
    CU_ASSERT_EQUAL(g.tsecr, 17);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN - 1, 1000, &g), UDP_W_SHORT);
    CU_ASSERT_EQUAL(udp_wire_parse(NULL, 0, 1000, &g), UDP_W_SHORT);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN + 9, 1000, &g), UDP_W_LEN);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN + 10, 99, &g), UDP_W_FRAME);
    h.frag_off = 91; /* 91 + 10 > 100 */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN + 10, 1000, &g), UDP_W_FRAG);
    h = data_hdr(0, 100, 0xfffffff8u, 16); /* would wrap in 32 bits */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN + 16, 1000, &g), UDP_W_FRAG);
    h = data_hdr(0, 5, 0, 0); /* empty fragment of a non-empty frame */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_FRAG);
    h = data_hdr(0, 0, 0, 0); /* empty frame */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_OK);
    h.type = 9;
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_TYPE);
    h.type = UDP_T_ACK;
    h.flags = 0x100;
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_TYPE);
    h.flags = UDP_F_PING; /* an awaited peer's PING: an ACK asking for one back */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_OK);
    CU_ASSERT_EQUAL(g.flags, UDP_F_PING);
    h.type = UDP_T_DATA; /* but never on data */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_TYPE);
    h.type = UDP_T_ACK;
    h.flags = 0;
    h.seq = 4; /* acks carry no sequence */
    udp_wire_put(b, &h);
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_FRAG);
    b[0] ^= 1;
    CU_ASSERT_EQUAL(udp_wire_parse(b, UDP_HDR_LEN, 1000, &g), UDP_W_MAGIC);
}

static int nrel;
static uint32_t rel_off[64];
static void on_release(void *ctx, struct udp_sslot *s)
{
    (void)ctx;
    if (nrel < 64) rel_off[nrel] = s->off;
    nrel++;
}

static void test_swin_ack(void)
{
    struct udp_swin sw;
    CU_ASSERT_EQUAL(udp_swin_init(&sw, 3, MS, MS, 10 * MS), -1); /* not a power of two */
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 8, 5 * MS, MS, 100 * MS), 0);
    for (uint32_t i = 0; i < 8; i++)
        CU_ASSERT_PTR_NOT_NULL(udp_swin_add(&sw, NULL, i * 10, 10, i == 7, 0));
    CU_ASSERT_PTR_NULL(udp_swin_add(&sw, NULL, 80, 10, 0, 0)); /* full: backpressure */
    CU_ASSERT_EQUAL(udp_swin_room(&sw), 0);
    CU_ASSERT_EQUAL(sw.bytes, 80);
    nrel = 0;
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 9, 0, MS, on_release, NULL), -1); /* beyond nxt */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 3, 0, MS, on_release, NULL), 3);
    CU_ASSERT_EQUAL(nrel, 3);
    CU_ASSERT_EQUAL(rel_off[0], 0);
    CU_ASSERT_EQUAL(rel_off[2], 20);
    CU_ASSERT_EQUAL(sw.una, 3);
    CU_ASSERT_EQUAL(sw.bytes, 50);
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 2, 0, MS, on_release, NULL), -1); /* stale */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 3, 0, MS, on_release, NULL), 0);  /* duplicate ack */
    /* Selective: 4 missing, 5 6 7 arrived (bits 0,1,2 above ack+1 = 4... ack=4 means 3 got). */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 4, 0x7, 2 * MS, on_release, NULL), 1);
    CU_ASSERT(udp_swin_at(&sw, 5)->sacked && udp_swin_at(&sw, 7)->sacked);
    CU_ASSERT(!udp_swin_at(&sw, 4)->sacked);
    /* Seq 4 has three acknowledged above it and was sent long enough ago: fast resend. */
    uint32_t out[8];
    CU_ASSERT_EQUAL(udp_swin_fast(&sw, 2 * MS, out, 8), 1);
    CU_ASSERT_EQUAL(out[0], 4);
    udp_swin_resent(&sw, 4, 2 * MS);
    CU_ASSERT_EQUAL(sw.retransmits, 1);
    CU_ASSERT_EQUAL(udp_swin_fast(&sw, 2 * MS, out, 8), 0); /* not again within an RTT */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 8, 0, 3 * MS, on_release, NULL), 4);
    CU_ASSERT_EQUAL(udp_swin_inflight(&sw), 0);
    CU_ASSERT_EQUAL(sw.bytes, 0);
    CU_ASSERT_EQUAL(udp_swin_deadline(&sw), 0);
    udp_swin_free(&sw);
}

/* The send ring starts small and grows to the window as datagrams pile up in flight, across
 * a sequence wrap, keeping every slot (and acks, sacks, the timer) right. */
static void test_swin_grow(void)
{
    struct udp_swin sw;
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 256, 5 * MS, MS, 100 * MS), 0);
    CU_ASSERT_EQUAL(sw.size, UDP_SWIN_FIRST);
    CU_ASSERT_EQUAL(udp_swin_room(&sw), 256);
    sw.una = sw.nxt = 0xffffff00u; /* the window wraps around 2^32 while it grows */
    for (uint32_t i = 0; i < 200; i++)
        CU_ASSERT_PTR_NOT_NULL(udp_swin_add(&sw, NULL, i, 1, 1, i * US));
    CU_ASSERT_EQUAL(sw.size, 256);
    CU_ASSERT_EQUAL(udp_swin_reserve(&sw, 100), 56); /* the ring holds the window, no more */
    for (uint32_t i = 0; i < 200; i++) {
        struct udp_sslot *s = udp_swin_at(&sw, 0xffffff00u + i);
        CU_ASSERT_FATAL(s != NULL);
        CU_ASSERT_EQUAL(s->off, i);
        CU_ASSERT_EQUAL(s->sent_ns, i * US);
    }
    CU_ASSERT_EQUAL(udp_swin_deadline(&sw), 5 * MS);
    nrel = 0;
    /* 100 released, then 102 and 103 selectively acknowledged */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 0xffffff00u + 100, 0x6, MS, on_release, NULL), 100);
    CU_ASSERT_EQUAL(rel_off[63], 63);
    CU_ASSERT(udp_swin_at(&sw, 0xffffff00u + 102)->sacked);
    CU_ASSERT(!udp_swin_at(&sw, 0xffffff00u + 101)->sacked);
    for (uint32_t i = 200; i < 356; i++)
        CU_ASSERT_PTR_NOT_NULL(udp_swin_add(&sw, NULL, i, 1, 1, MS));
    CU_ASSERT_PTR_NULL(udp_swin_add(&sw, NULL, 356, 1, 1, MS)); /* 256 in flight */
    CU_ASSERT_EQUAL(udp_swin_at(&sw, 0xffffff00u + 355)->off, 355);
    CU_ASSERT_EQUAL(udp_swin_at(&sw, 0xffffff00u + 100)->off, 100);
    udp_swin_free(&sw);
    /* a window smaller than the first ring gets a ring of its size */
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 4, MS, MS, 10 * MS), 0);
    CU_ASSERT_EQUAL(sw.size, 4);
    udp_swin_free(&sw);
}

static void test_swin_rto(void)
{
    struct udp_swin sw;
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 16, 5 * MS, MS, 40 * MS), 0);
    CU_ASSERT_EQUAL(sw.rto, 5 * MS);
    udp_swin_add(&sw, NULL, 0, 1, 1, 100 * MS);
    udp_swin_add(&sw, NULL, 1, 1, 1, 100 * MS);
    CU_ASSERT_EQUAL(udp_swin_deadline(&sw), 105 * MS);
    uint32_t out[4];
    CU_ASSERT_EQUAL(udp_swin_timeout(&sw, 104 * MS, out, 4), 0); /* not yet */
    CU_ASSERT_EQUAL(udp_swin_timeout(&sw, 105 * MS, out, 4), 2);
    CU_ASSERT_EQUAL(out[0], 0);
    CU_ASSERT_EQUAL(out[1], 1);
    CU_ASSERT_EQUAL(sw.rto, 10 * MS); /* backoff */
    udp_swin_resent(&sw, 0, 105 * MS);
    udp_swin_resent(&sw, 1, 105 * MS);
    CU_ASSERT_EQUAL(udp_swin_deadline(&sw), 115 * MS);
    for (int i = 0; i < 5; i++)
        udp_swin_timeout(&sw, 1000 * MS, out, 4);
    CU_ASSERT_EQUAL(sw.rto, 40 * MS); /* clamped at rto_max */
    /* Acks alone give no RTT sample (samples come from echoed timestamps). */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 2, 0, 1001 * MS, NULL, NULL), 2);
    CU_ASSERT_EQUAL(sw.srtt, 0);
    /* Samples of 100 us bring the timeout down to its floor. */
    for (int i = 0; i < 20; i++)
        udp_swin_rtt(&sw, 100 * US);
    CU_ASSERT(sw.srtt > 90 * US && sw.srtt < 110 * US);
    CU_ASSERT_EQUAL(sw.rto, MS);
    /* Slower samples raise it again. */
    for (int i = 0; i < 20; i++)
        udp_swin_rtt(&sw, 3 * MS);
    CU_ASSERT(sw.rto > 3 * MS && sw.rto < 10 * MS);
    udp_swin_free(&sw);
}

/* After a timeout, acks of the resent datagrams release the next old ones at once. */
static void test_swin_recovery(void)
{
    struct udp_swin sw;
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 64, 5 * MS, MS, 40 * MS), 0);
    for (int i = 0; i < 40; i++)
        udp_swin_add(&sw, NULL, 0, 1, 1, 10 * MS);
    uint32_t out[32];
    CU_ASSERT_EQUAL(udp_swin_recovery(&sw, 5, out, 32), 0);     /* no timeout yet */
    CU_ASSERT_EQUAL(udp_swin_timeout(&sw, 20 * MS, out, 4), 4); /* all 40 lost: resend 4 */
    for (int i = 0; i < 4; i++)
        udp_swin_resent(&sw, out[i], 20 * MS);
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 4, 0, 21 * MS, NULL, NULL), 4);
    int n = udp_swin_recovery(&sw, 4, out, 32);
    CU_ASSERT_EQUAL(n, 10); /* 2 * released + 2 */
    CU_ASSERT_EQUAL(out[0], 4);
    CU_ASSERT_EQUAL(out[9], 13);
    for (int i = 0; i < n; i++)
        udp_swin_resent(&sw, out[i], 21 * MS);
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 6, 0, 22 * MS, NULL, NULL), 2);
    n = udp_swin_recovery(&sw, 2, out, 32);
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT_EQUAL(out[0], 14); /* 6..13 were resent after the timeout: not again */
    /* An echo of a resend (sent after the timeout) is not a sign of a needless timeout. */
    udp_swin_echo(&sw, 21 * MS);
    CU_ASSERT_EQUAL(sw.in_recovery, 1);
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 40, 0, 23 * MS, NULL, NULL), 34);
    CU_ASSERT_EQUAL(udp_swin_recovery(&sw, 34, out, 32), 0);
    CU_ASSERT_EQUAL(sw.in_recovery, 0);
    udp_swin_free(&sw);
}

/* A timeout followed by the echo of an original: needless, undone. */
static void test_swin_spurious(void)
{
    struct udp_swin sw;
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 64, 4 * MS, MS, 40 * MS), 0);
    for (int i = 0; i < 10; i++)
        udp_swin_add(&sw, NULL, 0, 1, 1, 10 * MS);
    uint32_t out[4];
    CU_ASSERT_EQUAL(udp_swin_timeout(&sw, 14 * MS, out, 4), 4);
    CU_ASSERT_EQUAL(sw.rto, 8 * MS);
    udp_swin_echo(&sw, 10 * MS);
    CU_ASSERT_EQUAL(sw.in_recovery, 0);
    CU_ASSERT_EQUAL(sw.rto, 4 * MS);
    CU_ASSERT_EQUAL(sw.spurious, 1);
    udp_swin_free(&sw);
}

static void test_swin_dead_and_wrap(void)
{
    struct udp_swin sw;
    CU_ASSERT_EQUAL_FATAL(udp_swin_init(&sw, 4, MS, MS, 10 * MS), 0);
    sw.una = sw.nxt = 0xfffffffeu;                          /* sequence numbers wrap */
    CU_ASSERT_EQUAL(udp_swin_dead(&sw, 99999 * MS, MS), 0); /* nothing outstanding */
    for (int i = 0; i < 4; i++)
        udp_swin_add(&sw, NULL, 0, 1, 1, 10 * MS);
    CU_ASSERT_EQUAL(sw.nxt, 2);
    CU_ASSERT_EQUAL(udp_swin_dead(&sw, 14 * MS, 5 * MS), 0);
    CU_ASSERT_EQUAL(udp_swin_dead(&sw, 15 * MS, 5 * MS), 1);
    /* A selective ack is progress too. */
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 0xffffffffu, 0x1, 15 * MS, NULL, NULL), 1);
    CU_ASSERT_EQUAL(udp_swin_dead(&sw, 19 * MS, 5 * MS), 0);
    CU_ASSERT_EQUAL(udp_swin_ack(&sw, 2, 0, 16 * MS, NULL, NULL), 3);
    CU_ASSERT_EQUAL(udp_swin_inflight(&sw), 0);
    udp_swin_free(&sw);
}

static void test_rwin(void)
{
    struct udp_rwin rw;
    CU_ASSERT_EQUAL_FATAL(udp_rwin_init(&rw, 8, 25), 0);
    rw.next = 0xfffffffeu;
    uint8_t pay[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 0xfffffffeu), UDP_RX_NEXT);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 0xfffffffdu), UDP_RX_DUP);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 6), UDP_RX_BEYOND); /* 8 ahead, window 8 */
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 5), UDP_RX_STORE);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 4), UDP_RX_STORE);
    struct udp_hdr h = data_hdr(0, 10, 0, 10);
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), 0);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 0), UDP_RX_DUP); /* already stored */
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), -1);
    h.seq = 1;
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), 0);
    h.seq = 3;
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), -1); /* over the 25-byte budget */
    CU_ASSERT_EQUAL(udp_rwin_sack(&rw), 0x6ull);       /* 0 and 1 are next+2, next+3 */
    CU_ASSERT_PTR_NULL(udp_rwin_ready(&rw));
    CU_ASSERT_PTR_NULL(udp_rwin_advance(&rw)); /* 0xfffffffe processed directly */
    CU_ASSERT_PTR_NULL(udp_rwin_ready(&rw));
    CU_ASSERT_PTR_NULL(udp_rwin_advance(&rw)); /* 0xffffffff too */
    struct udp_rslot *s = udp_rwin_ready(&rw);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->hdr.seq, 0);
    uint8_t *d = udp_rwin_advance(&rw);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(memcmp(d, pay, 10), 0);
    free(d);
    free(udp_rwin_advance(&rw));
    CU_ASSERT_EQUAL(rw.next, 2);
    CU_ASSERT_EQUAL(rw.stored, 0);
    CU_ASSERT_EQUAL(rw.stored_bytes, 0);
    CU_ASSERT_EQUAL(udp_rwin_sack(&rw), 0);
    h.seq = 5; /* left stored: freed by udp_rwin_free */
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), 0);
    udp_rwin_free(&rw);
}

/* No ring while datagrams come in order; one as large as the farthest early datagram needs,
 * growing (entries keep their place by seq) up to the window. */
static void test_rwin_grow(void)
{
    struct udp_rwin rw;
    CU_ASSERT_EQUAL(udp_rwin_init(&rw, 3, 100), -1);
    CU_ASSERT_EQUAL_FATAL(udp_rwin_init(&rw, 512, 1 << 20), 0);
    uint8_t pay[4] = {1, 2, 3, 4};
    for (uint32_t i = 0; i < 1000; i++) {
        CU_ASSERT_EQUAL(udp_rwin_classify(&rw, i), UDP_RX_NEXT);
        CU_ASSERT_PTR_NULL(udp_rwin_advance(&rw));
    }
    CU_ASSERT_EQUAL(rw.size, 0);
    CU_ASSERT_PTR_NULL(rw.slot);
    struct udp_hdr h = data_hdr(1002, 4, 0, 4); /* next is 1000 */
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), 0);
    CU_ASSERT_EQUAL(rw.size, UDP_RWIN_FIRST);
    CU_ASSERT_EQUAL(udp_rwin_sack(&rw), 0x2ull);
    h.seq = 1000 + 300; /* far ahead: the ring grows to 512, 1002 keeps its place */
    CU_ASSERT_EQUAL(udp_rwin_store(&rw, &h, pay), 0);
    CU_ASSERT_EQUAL(rw.size, 512);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 1002), UDP_RX_DUP);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 1300), UDP_RX_DUP);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 1001), UDP_RX_STORE);
    CU_ASSERT_EQUAL(udp_rwin_classify(&rw, 1000 + 512), UDP_RX_BEYOND);
    CU_ASSERT_EQUAL(udp_rwin_sack(&rw), 0x2ull);
    CU_ASSERT_PTR_NULL(udp_rwin_advance(&rw)); /* 1000 processed directly */
    CU_ASSERT_PTR_NULL(udp_rwin_advance(&rw)); /* 1001 too */
    struct udp_rslot *s = udp_rwin_ready(&rw);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->hdr.seq, 1002);
    free(udp_rwin_advance(&rw));
    CU_ASSERT_EQUAL(rw.stored, 1);
    udp_rwin_free(&rw); /* frees 1300 */
}

static void test_reasm(void)
{
    struct udp_reasm r = {0};
    uint8_t a[4] = {1, 2, 3, 4}, *f = NULL;
    size_t len = 0;
    struct udp_hdr h = data_hdr(0, 4, 0, 4);
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_SINGLE);
    CU_ASSERT_PTR_EQUAL(f, a);
    CU_ASSERT_EQUAL(len, 4);
    h = data_hdr(0, 0, 0, 0);
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, NULL, &f, &len), UDP_RA_SINGLE);
    CU_ASSERT_EQUAL(len, 0);
    h = data_hdr(0, 10, 4, 4); /* a frame cannot start in the middle */
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_BAD);
    h = data_hdr(0, 10, 0, 4);
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_MORE);
    h = data_hdr(0, 10, 5, 4); /* gap */
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_BAD);
    h = data_hdr(0, 11, 4, 4); /* frame length changed */
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_BAD);
    h = data_hdr(0, 10, 4, 4);
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_MORE);
    h = data_hdr(0, 10, 8, 4); /* runs past the end */
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_BAD);
    h = data_hdr(0, 10, 8, 2);
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_DONE);
    CU_ASSERT_EQUAL(len, 10);
    uint8_t want[10] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
    CU_ASSERT_EQUAL(memcmp(f, want, 10), 0);
    free(f);
    CU_ASSERT_PTR_NULL(r.buf);
    h = data_hdr(0, 10, 0, 4);
    CU_ASSERT_EQUAL(udp_reasm_feed(&r, &h, a, &f, &len), UDP_RA_MORE);
    udp_reasm_reset(&r);
    CU_ASSERT_PTR_NULL(r.buf);
}

static void test_faults(void)
{
    struct udp_faults f, g;
    CU_ASSERT_EQUAL(udp_faults_parse(NULL, &f), 0);
    CU_ASSERT_EQUAL(f.on, 0);
    CU_ASSERT_EQUAL(udp_faults_decide(&f), UDP_FX_SEND);
    CU_ASSERT_EQUAL(udp_faults_parse("drop=2", &f), -1);
    CU_ASSERT_EQUAL(udp_faults_parse("drop=0.5,dup=0.6", &f), -1);
    CU_ASSERT_EQUAL(udp_faults_parse("lose=0.1", &f), -1);
    CU_ASSERT_EQUAL(udp_faults_parse("drop", &f), -1);
    CU_ASSERT_EQUAL(udp_faults_parse("delay_us=-1", &f), -1);
    CU_ASSERT_EQUAL_FATAL(
        udp_faults_parse("drop=0.05,dup=0.01,reorder=0.02,delay_us=200,seed=42", &f), 0);
    CU_ASSERT_EQUAL(f.delay_ns, 200000);
    udp_faults_parse("drop=0.05,dup=0.01,reorder=0.02,delay_us=200,seed=42", &g);
    int counts[4] = {0};
    int same = 1;
    for (int i = 0; i < 100000; i++) {
        int a = udp_faults_decide(&f);
        same &= a == udp_faults_decide(&g);
        counts[a]++;
    }
    CU_ASSERT(same); /* deterministic per seed */
    CU_ASSERT(counts[UDP_FX_DROP] > 4500 && counts[UDP_FX_DROP] < 5500);
    CU_ASSERT(counts[UDP_FX_DUP] > 800 && counts[UDP_FX_DUP] < 1200);
    CU_ASSERT(counts[UDP_FX_HOLD] > 1700 && counts[UDP_FX_HOLD] < 2300);
    udp_faults_reseed(&g, 1);
    int differ = 0;
    for (int i = 0; i < 1000; i++)
        differ += udp_faults_decide(&f) != udp_faults_decide(&g);
    CU_ASSERT(differ > 0); /* another port, another stream */
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("udp_window", NULL, NULL);
    CU_add_test(s, "wire format and parser", test_wire);
    CU_add_test(s, "send window: cumulative/selective acks, fast resend", test_swin_ack);
    CU_add_test(s, "send window: the ring grows to the window", test_swin_grow);
    CU_add_test(s, "send window: timeout, backoff, RTT estimate, Karn", test_swin_rto);
    CU_add_test(s, "send window: recovery after a timeout", test_swin_recovery);
    CU_add_test(s, "send window: needless timeout detected", test_swin_spurious);
    CU_add_test(s, "send window: dead peer, sequence wrap", test_swin_dead_and_wrap);
    CU_add_test(s, "receive window: classify, store, sack, budget", test_rwin);
    CU_add_test(s, "receive window: no ring in order, grows for early datagrams", test_rwin_grow);
    CU_add_test(s, "reassembly", test_reasm);
    CU_add_test(s, "fault injector", test_faults);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
