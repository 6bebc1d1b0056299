/*
 * A hard port's send side as the protocol (proto.c) sees it: the frames it hands to the port
 * (send ops), the eager credits it spends and gets back, and the hold a rendezvous send keeps
 * while the port still has frames of it. Everything else of a hard port (its owner, inbox,
 * queue, dispatch, polling and threads) is hport.c's alone; internal.h declares what the rest
 * of the core calls (open, close, poll, ownership for raw ports).
 */
#ifndef COR_HPORT_H
#define COR_HPORT_H

#include "internal.h"
#include "proto.h"

enum op_kind { OP_FRAME, OP_DATA_JOB, OP_GET };

struct send_op {
    struct send_op *next;
    enum op_kind kind;
    struct cor_hport *hp;
    uint32_t peer;
    uint32_t epoch; /* the peer's incarnation when the op was made (hdr.dst_epoch) */
    struct frame_hdr hdr;
    const void *payload;
    size_t plen;
    struct cor_req *req;     /* OP_FRAME: complete when the route is done (eager, svc reply) */
    struct cor_req *data;    /* OP_FRAME of a DATA chunk, or OP_DATA_JOB: the send request */
    struct cor_req *into;    /* OP_GET: the receive the route reads into (hdr: its F_GOT, with
                              * the sender's address in offset and key in ctx until sent) */
    bool owned;              /* payload is a copy freed with the op */
    bool cached;             /* that copy is a block of hp's copy cache */
    bool in_room;            /* payload is a copy in room[], freed with the op */
    bool room_max;           /* room[] holds ROOM_MAX bytes: the op goes back to a cache */
    size_t job_off, job_end; /* OP_DATA_JOB: the byte range this port sends */
    unsigned char room[];    /* op_new_copy: the payload's copy */
};

/* Payloads up to this size are copied into their op's own allocation rather than into a block
 * of the port's copy cache (eager limit bytes each, under the cache's lock). */
#define ROOM_MAX 256

/* A new op for a frame to `peer` on hp (header and payload filled in by the caller), or NULL;
 * the same with a copy of the plen bytes at p in the op's own allocation. */
struct send_op *cor__op_new(struct cor_hport *hp, uint32_t peer);
struct send_op *cor__op_new_copy(struct cor_hport *hp, uint32_t peer, const void *p, size_t plen);
/* Hands op to its port: sent inline when the port is ours or free, else left in the inbox for
 * its owner, without waiting. The op belongs to the port from here on. */
void cor__hport_submit(struct cor_hport *hp, struct send_op *op);

/* proto.c: the route finished (status) or refused reading a rendezvous' data (OP_GET op): the
 * receive completes and the sender hears F_GOT, or the data is asked for by CTS. Takes op. */
void cor__proto_got(struct cor_hport *hp, struct send_op *op, int status);

/* Eager credits toward `peer` (atomics: no lock). Spends `cost` units if that leaves at least
 * one (the last is never spent); adds what the peer returned (never above the budget). */
bool cor__credits_spend(struct cor_hport *hp, uint32_t peer, int cost);
void cor__credits_returned(struct cor_hport *hp, uint32_t peer, int units);
void cor__credits_reset(struct cor_hport *hp, uint32_t peer); /* a new occupant of the rank */

/* A rendezvous send is held by its data jobs and by every data frame or put the route holds;
 * the last release completes it with the first error any of them saw. */
void cor__send_hold(struct cor_req *r);
void cor__send_release(struct cor_req *r, int err);
void cor__req_mr_release(struct cor_req *r); /* deregisters r's buffer, if registered */

#endif
