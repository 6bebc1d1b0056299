/*
 * transport.c - the one way from GM's semantics (send.c, recv.c, calls.c, pool.c, port.c) to
 * the wire: libfabric's tagged endpoint, or libgm-compat's own shared-memory rings
 * (shmring.c) when every peer of the port is on this host.  The rings never load libfabric
 * (fabric_load.c), which costs a process 0.2-0.3 s to load.  Which one a port uses is decided
 * when it opens (gmx_transport_rings), the same way in every process of a job, since both
 * sides of a pair must agree (a port of one finds the other's address in its lock file).
 */
#include "gm_internal.h"

#include <string.h>

static int mode_named(const char *t)
{
    static const char *const names[] = {[GMX_TRANSPORT_FABRIC] = "fabric",
                                        [GMX_TRANSPORT_SHM] = "shm",
                                        [GMX_TRANSPORT_AUTO] = "auto"};
    for (int m = 0; m < (int)(sizeof names / sizeof names[0]); m++)
        if (strcmp(t, names[m]) == 0) return m;
    return -1;
}

/* GM_COMPAT_TRANSPORT, or its default (knobs.h: GMX_TRANSPORT_DEFAULT) when unset, empty or
 * not understood (then said on stderr). */
int gmx_transport_mode(void)
{
    const char *t = gmx_knob_str(GMX_K_TRANSPORT);
    int mode = t && *t ? mode_named(t) : -1;
    if (mode < 0 && t && *t)
        fprintf(stderr, "libgm: ignoring %s=%s (expected auto, fabric or shm)\n",
                gmx_knob_name(GMX_K_TRANSPORT), t);
    return mode >= 0 ? mode : mode_named(GMX_TRANSPORT_DEFAULT);
}

/* auto: the rings when the provider is libfabric's shm, i.e. the configuration names no other
 * host (config.c picks tcp;ofi_rxm when the node map gives addresses). */
int gmx_transport_rings(void)
{
    int mode = gmx_transport_mode();
    if (mode == GMX_TRANSPORT_AUTO) return strcmp(gmx_cfg.provider, "shm") == 0;
    return mode == GMX_TRANSPORT_SHM;
}

ssize_t gmx_tp_inject(struct gm_port *p, struct gmx_peer *peer, const struct iovec *iov,
                      size_t iovcnt, uint64_t tag)
{
    if (p->shm) return gmx_shm_inject(p->shm, peer->addr, iov, iovcnt, tag); /* one copy */
    if (iovcnt == 1) return fi_tinject(p->ep, iov[0].iov_base, iov[0].iov_len, peer->addr, tag);
    char b[GMX_BOUNCE_LEN];
    size_t len = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > sizeof b - len) return -FI_EMSGSIZE;
        memcpy(b + len, iov[i].iov_base, iov[i].iov_len);
        len += iov[i].iov_len;
    }
    return fi_tinject(p->ep, b, len, peer->addr, tag);
}

ssize_t gmx_tp_injectdata(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                          uint64_t data, uint64_t tag)
{
    return fi_tinjectdata(p->ep, buf, len, data, peer->addr, tag);
}

ssize_t gmx_tp_send(struct gm_port *p, struct gmx_peer *peer, const struct iovec *iov,
                    size_t iovcnt, uint64_t tag, void *ctx)
{
    if (p->shm) return gmx_shm_send(p->shm, peer->addr, iov, iovcnt, tag, ctx);
    if (iovcnt == 1)
        return fi_tsend(p->ep, iov[0].iov_base, iov[0].iov_len, NULL, peer->addr, tag, ctx);
    struct fi_msg_tagged msg = {
        .msg_iov = iov, .iov_count = iovcnt, .addr = peer->addr, .tag = tag, .context = ctx};
    return fi_tsendmsg(p->ep, &msg, FI_COMPLETION);
}

ssize_t gmx_tp_recv(struct gm_port *p, void *buf, size_t len, uint64_t tag, uint64_t ignore,
                    void *ctx)
{
    if (p->shm) return gmx_shm_recv(p->shm, buf, len, tag, ignore, ctx);
    return fi_trecv(p->ep, buf, len, NULL, FI_ADDR_UNSPEC, tag, ignore, ctx);
}

/* RMA (p->rma): a write that landed when it completes, a read.
 *
 * On this host (shm addresses: the rings, libfabric's shm) the copy is the initiator's
 * (process_vm_writev/readv), and libfabric's shm checks no key on that path either; so the
 * copy is bracketed by the target's live registration table (keytab.c): a key the target
 * withdrew, or that does not cover [raddr, raddr + len), fails the call with -FI_EACCES
 * (GM_PERMISSION_DENIED) and nothing is copied; a deregistration waits for a copy in the
 * bracket.  Where libfabric's shm leaves the copy to the target (not its fast path), the
 * target's provider checks the key against its registrations, which deregistration closed
 * first.  Other providers check keys at the target. */
static int rma_enter(struct gm_port *p, struct gmx_peer *peer, uint64_t raddr, size_t len,
                     uint64_t rkey, struct gmx_keytab **kt)
{
    *kt = NULL;
    if (!p->addr_is_str) return 0;
    *kt = gmx_keytab_of(peer->bell);
    int slot = *kt && p->mr_virt ? gmx_keytab_enter(*kt, rkey, raddr, len) : -1;
    if (slot < 0)
        gmx_log("RMA of %zu bytes at %#llx on node %u port %u: key %#llx not live there\n", len,
                (unsigned long long)raddr, peer->node, peer->port, (unsigned long long)rkey);
    return slot;
}

ssize_t gmx_tp_write(struct gm_port *p, struct gmx_peer *peer, const void *buf, size_t len,
                     uint64_t raddr, uint64_t rkey, void *ctx)
{
    struct gmx_keytab *kt;
    int slot = rma_enter(p, peer, raddr, len, rkey, &kt);
    if (slot < 0) return -FI_EACCES;
    ssize_t rc;
    if (p->shm) {
        rc = gmx_shm_rma(p->shm, peer->addr, (void *)buf, len, raddr, 1, ctx);
    } else {
        struct iovec iov = {(void *)buf, len};
        struct fi_rma_iov riov = {raddr, len, rkey};
        struct fi_msg_rma msg = {.msg_iov = &iov,
                                 .iov_count = 1,
                                 .addr = peer->addr,
                                 .rma_iov = &riov,
                                 .rma_iov_count = 1,
                                 .context = ctx};
        /* The callback means "landed": shm's writes are synchronous copies (or answered by
         * the target); other providers must be asked for delivery completion (which would
         * slow shm down). */
        rc = fi_writemsg(p->ep, &msg, FI_COMPLETION | (p->addr_is_str ? 0 : FI_DELIVERY_COMPLETE));
    }
    if (kt) gmx_keytab_leave(kt, slot);
    return rc;
}

ssize_t gmx_tp_read(struct gm_port *p, struct gmx_peer *peer, void *buf, size_t len, uint64_t raddr,
                    uint64_t rkey, void *ctx)
{
    struct gmx_keytab *kt;
    int slot = rma_enter(p, peer, raddr, len, rkey, &kt);
    if (slot < 0) return -FI_EACCES;
    ssize_t rc = p->shm ? gmx_shm_rma(p->shm, peer->addr, buf, len, raddr, 0, ctx)
                        : fi_read(p->ep, buf, len, NULL, peer->addr, raddr, rkey, ctx);
    if (kt) gmx_keytab_leave(kt, slot);
    return rc;
}

void gmx_tp_cancel(struct gm_port *p, void *ctx)
{
    if (p->shm)
        gmx_shm_cancel(p->shm, ctx);
    else if (p->ep)
        fi_cancel(&p->ep->fid, ctx);
}

ssize_t gmx_tp_cq_read(struct gm_port *p, struct fi_cq_tagged_entry *ce, size_t n)
{
    if (p->shm) return gmx_shm_cq_read(p->shm, ce, n);
    return fi_cq_read(p->cq, ce, n);
}

int gmx_tp_cq_readerr(struct gm_port *p, struct fi_cq_err_entry *err)
{
    if (p->shm) return gmx_shm_cq_readerr(p->shm, err);
    return fi_cq_readerr(p->cq, err, 0) == 1;
}

/* addr: a string from the peer's lock file (shm), else a struct sockaddr_in. */
int gmx_tp_insert(struct gm_port *p, struct gmx_peer *peer, const void *addr)
{
    if (p->addr_is_str && (strncmp(addr, GMX_SHM_ADDR_PREFIX, strlen(GMX_SHM_ADDR_PREFIX)) == 0) !=
                              (p->shm != NULL)) {
        gmx_log("node %u port %u uses the other transport (%s differs); not reached\n", peer->node,
                peer->port, gmx_knob_name(GMX_K_TRANSPORT));
        return 0;
    }
    peer->knows_us = 0; /* a new address may be a new incarnation of the port */
    if (p->shm) return gmx_shm_insert(p->shm, peer->node, peer->port, addr, &peer->addr) == 0;
    int rc = fi_av_insert(p->av, addr, 1, &peer->addr, 0, NULL);
    if (rc != 1) gmx_log("fi_av_insert(node %u port %u) -> %d\n", peer->node, peer->port, rc);
    return rc == 1;
}

void gmx_tp_remove(struct gm_port *p, struct gmx_peer *peer)
{
    peer->knows_us = 0;
    if (p->shm)
        gmx_shm_remove(p->shm, peer->addr);
    else
        fi_av_remove(p->av, &peer->addr, 1, 0);
}

void gmx_tp_drive(struct gm_port *p)
{
    if (p->shm)
        gmx_shm_drive(p->shm);
    else
        fi_cq_read(p->cq, NULL, 0); /* the provider's progress, no completion taken */
}

int gmx_tp_busy(struct gm_port *p)
{
    return p->shm && gmx_shm_busy(p->shm);
}
