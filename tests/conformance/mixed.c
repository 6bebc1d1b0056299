/*
 * mixed: both routes between the same domains at once (run with COR_ROUTES=udp,gm). Each
 * domain runs T sender tasks and T receiver tasks. Every sender sends M messages of mixed
 * sizes (0 B..-x, eager and rendezvous) to every receiver of the other domains; sender k uses
 * cor_setTransport("udp") when k is odd and ("gm") when it is even, and sender 1 switches
 * route every 16 messages (mid-stream). Receivers take messages with wildcard source and tag
 * and check, per sending task, content (checksum), size, and order (sequence numbers must
 * come 0, 1, 2, ... from each sender, whatever route carried them). Uses cor.h only.
 *
 *   mixed [-t TASKS] [-m MSGS] [-x MAXBYTES] [-w WINDOW]
 *   -t  senders (and receivers) per domain (4)     -m  messages per sender-receiver pair (200)
 *   -x  largest message (262144)                   -w  outstanding sends / receives per task (8)
 * Output: "mixed: domain R: PASS ..." or FAIL lines; exit 0 only if everything arrived once,
 * intact and in order. Gives up (FAIL) after 120 s.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cor/cor.h"
#include "../proc/proc_util.h"

#define MAGIC 0x4d697864u
#define SWITCH_EVERY 16
#define LIMIT_S 120

struct msg_hdr {
    uint32_t magic, src_domain, src_sender, seq;
    uint64_t len, sum;
};

static int ntasks = 4, window = 8, rank, ndom;
static long msgs = 200;
static size_t maxsize = 256u << 10;
static _Atomic long received, switches;
static _Atomic uint64_t sent_udp, sent_gm;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* Size of message seq from (domain, sender) to a receiver: mostly small, some large. */
static size_t msg_len(uint32_t dom, uint32_t snd, uint32_t rcv, uint32_t seq)
{
    uint64_t r = mix(((uint64_t)dom << 48) ^ ((uint64_t)snd << 32) ^ ((uint64_t)rcv << 20) ^ seq);
    size_t len = sizeof(struct msg_hdr);
    if (r % 8 == 0)
        len += (size_t)(r >> 8) % (maxsize - len + 1); /* any size up to the largest */
    else
        len += (size_t)(r >> 8) % 2048;
    return len > maxsize ? maxsize : len;
}

static uint64_t fill(uint8_t *b, size_t len, uint64_t seed)
{
    uint64_t sum = 0;
    for (size_t i = sizeof(struct msg_hdr); i < len; i++) {
        b[i] = (uint8_t)(mix(seed + i / 8) >> (8 * (i % 8)));
        sum = sum * 31 + b[i];
    }
    return sum;
}

static uint64_t checksum(const uint8_t *b, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = sizeof(struct msg_hdr); i < len; i++)
        sum = sum * 31 + b[i];
    return sum;
}

/* Receivers are tasks T+1..2T of each domain; senders 1..T. */
static cor_idp_t receiver(int dom, int k)
{
    return cor_task_idp(dom, (unsigned)(ntasks + 1 + k));
}

static int sender_task(void *arg)
{
    int me = (int)(intptr_t)arg; /* 1..T */
    const char *route = me % 2 ? "udp" : "gm";
    int rc = cor_setTransport(route);
    if (rc != COR_OK) {
        pt_fail("sender %d: cor_setTransport(\"%s\"): %s", me, route, cor_strerror(rc));
        return 1;
    }
    cor_req_t *reqs = calloc((size_t)window, sizeof *reqs);
    uint8_t **bufs = calloc((size_t)window, sizeof *bufs);
    for (int i = 0; i < window; i++)
        bufs[i] = malloc(maxsize);
    double t0 = now_s();
    for (long seq = 0; seq < msgs && now_s() - t0 < LIMIT_S; seq++) {
        if (me == 1 && seq > 0 && seq % SWITCH_EVERY == 0) {
            route = strcmp(route, "udp") == 0 ? "gm" : "udp";
            if ((rc = cor_setTransport(route)) != COR_OK)
                pt_fail("sender 1: switch to %s: %s", route, cor_strerror(rc));
            atomic_fetch_add(&switches, 1);
        }
        for (int d = 0; d < ndom; d++) {
            if (d == rank) continue;
            for (int k = 0; k < ntasks; k++) {
                int slot = -1;
                for (int i = 0; i < window && slot < 0; i++)
                    if (reqs[i] == COR_REQ_NULL) slot = i;
                if (slot < 0) {
                    size_t idx;
                    cor_status_t st;
                    rc = cor_waitany((size_t)window, reqs, &idx, &st);
                    if (rc != COR_OK || idx >= (size_t)window) {
                        pt_fail("sender %d: send completed with %s", me, cor_strerror(rc));
                        goto out;
                    }
                    slot = (int)idx;
                }
                size_t len = msg_len((uint32_t)rank, (uint32_t)me, (uint32_t)k, (uint32_t)seq);
                struct msg_hdr h = {MAGIC, (uint32_t)rank, (uint32_t)me, (uint32_t)seq, len, 0};
                h.sum = fill(bufs[slot], len, mix(h.len ^ ((uint64_t)h.seq << 32) ^ h.src_sender));
                memcpy(bufs[slot], &h, sizeof h);
                rc = cor_sendI_typed(receiver(d, k), COR_CTX_WORLD, (int)seq, COR_BYTE, bufs[slot],
                                     len, &reqs[slot]);
                if (rc != COR_OK) {
                    pt_fail("sender %d: sendI seq %ld: %s", me, seq, cor_strerror(rc));
                    goto out;
                }
                atomic_fetch_add(strcmp(route, "udp") == 0 ? &sent_udp : &sent_gm, 1);
            }
        }
    }
out:
    if (cor_waitall((size_t)window, reqs, NULL) != COR_OK)
        pt_fail("sender %d: a send failed at the end", me);
    for (int i = 0; i < window; i++)
        free(bufs[i]);
    free(bufs);
    free(reqs);
    return 0;
}

/* Checks one received message (the next in the order its receive was posted). */
static void check(int me, uint32_t *next, int rc, const cor_status_t *st, const uint8_t *b)
{
    struct msg_hdr h;
    size_t n = st->count;
    if (rc != COR_OK || !b || n < sizeof h) {
        pt_fail("receiver %d: message of %zu B, %s", me, n, cor_strerror(rc));
        return;
    }
    memcpy(&h, b, sizeof h);
    if (h.magic != MAGIC || h.src_domain >= (uint32_t)ndom || h.src_domain == (uint32_t)rank ||
        h.src_sender < 1 || h.src_sender > (uint32_t)ntasks) {
        pt_fail("receiver %d: foreign header", me);
        return;
    }
    if (st->source != cor_task_idp((int)h.src_domain, h.src_sender)) {
        pt_fail("receiver %d: status source %#llx, header says %u.%u", me,
                (unsigned long long)st->source, h.src_domain, h.src_sender);
        return;
    }
    uint32_t *nx = &next[h.src_domain * (uint32_t)(ntasks + 1) + h.src_sender];
    if (h.seq != *nx)
        pt_fail("receiver %d: from %u.%u expected seq %u, got %u (order)", me, h.src_domain,
                h.src_sender, *nx, h.seq);
    *nx = h.seq + 1;
    size_t want = msg_len(h.src_domain, h.src_sender, (uint32_t)me, h.seq);
    if (h.len != n || n != want || st->tag != (int)h.seq)
        pt_fail("receiver %d: from %u.%u seq %u: %zu B (header %llu, expected %zu)", me,
                h.src_domain, h.src_sender, h.seq, n, (unsigned long long)h.len, want);
    else if (checksum(b, n) != h.sum)
        pt_fail("receiver %d: from %u.%u seq %u: content damaged", me, h.src_domain, h.src_sender,
                h.seq);
}

/* Posted receives match in the order they were posted, so messages are checked in post
 * order (waitany may complete them in any order). */
struct rslot {
    long post; /* -1: free */
    int done, rc;
    cor_status_t st;
    void *ptr;
};

static int receiver_task(void *arg)
{
    int me = (int)(intptr_t)arg; /* 0..T-1 */
    long expect = (long)(ndom - 1) * ntasks * msgs, got = 0, posted = 0, checked = 0;
    /* next[d * (T+1) + s]: the sequence number expected from sender s of domain d */
    uint32_t *next = calloc((size_t)ndom * (size_t)(ntasks + 1), sizeof *next);
    cor_req_t *reqs = calloc((size_t)window, sizeof *reqs);
    struct rslot *sl = calloc((size_t)window, sizeof *sl);
    for (int i = 0; i < window; i++)
        sl[i].post = -1;
    double t0 = now_s();
    while (checked < expect && now_s() - t0 < LIMIT_S) {
        for (int i = 0; i < window && posted < expect; i++)
            if (sl[i].post < 0) {
                if (cor_recvI(COR_ANY_SOURCE, COR_CTX_WORLD, COR_ANY_TAG, &sl[i].ptr, &reqs[i]) !=
                    COR_OK) {
                    pt_fail("receiver %d: recvI failed", me);
                    goto out;
                }
                sl[i] = (struct rslot){.post = posted++, .ptr = sl[i].ptr};
            }
        size_t idx;
        cor_status_t st;
        int rc = cor_waitany((size_t)window, reqs, &idx, &st);
        if (idx >= (size_t)window) {
            pt_fail("receiver %d: waitany: %s", me, cor_strerror(rc));
            break;
        }
        got++;
        sl[idx].done = 1;
        sl[idx].rc = rc;
        sl[idx].st = st;
        for (int progress = 1; progress;) {
            progress = 0;
            for (int i = 0; i < window; i++)
                if (sl[i].post == checked && sl[i].done) {
                    check(me, next, sl[i].rc, &sl[i].st, sl[i].ptr);
                    if (sl[i].ptr) cor_releaseBuffer(sl[i].ptr);
                    sl[i].ptr = NULL;
                    sl[i].post = -1;
                    checked++;
                    progress = 1;
                }
        }
    }
out:
    atomic_fetch_add(&received, got);
    if (checked != expect)
        pt_fail("receiver %d: %ld of %ld messages in %d s", me, checked, expect, LIMIT_S);
    for (int i = 0; i < window; i++)
        if (reqs[i] != COR_REQ_NULL) {
            cor_cancel(&reqs[i]);
            if (cor_wait(&reqs[i], NULL) == COR_OK && sl[i].ptr) cor_releaseBuffer(sl[i].ptr);
        }
    free(sl);
    free(reqs);
    free(next);
    return 0;
}

int main(int argc, char **argv)
{
    pt_name = "mixed";
    if (cor_init(&argc, &argv) != COR_OK) {
        fprintf(stderr, "mixed: cor_init failed\n");
        return 2;
    }
    int c;
    while ((c = getopt(argc, argv, "t:m:x:w:")) != -1) {
        switch (c) {
        case 't':
            ntasks = atoi(optarg);
            break;
        case 'm':
            msgs = atol(optarg);
            break;
        case 'x':
            maxsize = (size_t)atol(optarg);
            break;
        case 'w':
            window = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: mixed [-t TASKS] [-m MSGS] [-x MAX] [-w WINDOW]\n");
            return 2;
        }
    }
    if (ntasks < 1 || ntasks > 64 || msgs < 1 || window < 1 || window > 256 ||
        maxsize < sizeof(struct msg_hdr) || maxsize > (64u << 20)) {
        fprintf(stderr, "mixed: bad arguments\n");
        return 2;
    }
    rank = pt_rank = cor_domain_rank();
    ndom = cor_domain_count();
    cor_idp_t tasks[130];
    /* senders first (indices 1..T), then receivers (T+1..2T): the same in every domain */
    for (int i = 0; i < ntasks; i++)
        if (cor_task_spawn("sender", sender_task, (void *)(intptr_t)(i + 1), &tasks[i]) != COR_OK)
            pt_fail("spawn sender %d", i + 1);
    for (int i = 0; i < ntasks; i++)
        if (cor_task_spawn("receiver", receiver_task, (void *)(intptr_t)i, &tasks[ntasks + i]) !=
            COR_OK)
            pt_fail("spawn receiver %d", i);
    double t0 = now_s();
    for (int i = 0; i < 2 * ntasks; i++) {
        int st = 0;
        if (cor_task_join(tasks[i], &st) != COR_OK || st != 0) pt_fail("task %d: exit %d", i, st);
    }
    double el = now_s() - t0;
    long f = atomic_load(&pt_failures);
    if (ndom < 2) pt_fail("needs at least 2 domains");
    printf("mixed: domain %d: %s %d domains, %d senders (udp %llu msgs, gm %llu, %ld route "
           "switches mid-stream) x %d receivers, %ld received in %.2f s\n",
           rank, f || ndom < 2 ? "FAIL" : "PASS", ndom, ntasks,
           (unsigned long long)atomic_load(&sent_udp), (unsigned long long)atomic_load(&sent_gm),
           atomic_load(&switches), ntasks, atomic_load(&received), el);
    fflush(stdout);
    int rc = cor_finalize();
    return f || rc != COR_OK || ndom < 2 ? 1 : 0;
}
