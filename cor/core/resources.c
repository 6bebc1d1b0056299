/*
 * Names and logical domains. Task names live in their domain and are looked up there; the
 * registry of logical domains lives in domain 0 (the root of the domain tree). Other domains
 * reach both through small service calls carried by the default route.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "proto.h"

enum svc_op {
    SVC_TASK_LOOKUP = 1,
    SVC_LD_CREATE,
    SVC_LD_LOOKUP,
    SVC_LD_JOIN,
    SVC_LD_LEAVE,
    SVC_LD_RANK,
    SVC_LD_SIZE,
    SVC_LD_MEMBER,
    SVC_LD_DESTROY,
};

/* A group's idp is its handle: index = slot of lds, domain field = the slot's generation,
 * bumped when the group is destroyed, so a destroyed or forged idp is recognised. */
#define LD_GEN_MAX 0xfff
struct ldomain {
    char name[COR_NAME_MAX]; /* "" while the slot is free */
    cor_idp_t *members;      /* in rank order; a leaver's successors move down */
    int n, cap;
    unsigned gen; /* 1..LD_GEN_MAX */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ldomain *lds; /* reg_lock; only domain 0 uses it */
static int nlds;

void cor__resources_fini(void)
{
    COR_LOCK(&reg_lock);
    for (int i = 0; i < nlds; i++)
        free(lds[i].members);
    free(lds);
    lds = NULL;
    nlds = 0;
    COR_UNLOCK(&reg_lock);
}

static int ld_find(const char *name)
{
    for (int i = 0; i < nlds; i++)
        if (lds[i].name[0] && !strcmp(lds[i].name, name)) return i;
    return -1;
}

/* The wire form of a group's handle: generation << 16 | slot (the idp's micro part). */
static uint64_t ld_handle(int i)
{
    return (uint64_t)lds[i].gen << 16 | (unsigned)i;
}

/* The group a handle names, or NULL (free slot, old generation, out of range). */
static struct ldomain *ld_get(uint64_t h)
{
    uint64_t i = h & 0xffff;
    if (i >= (uint64_t)nlds || !lds[i].name[0] || lds[i].gen != h >> 16) return NULL;
    return &lds[i];
}

static int ld_rank(struct ldomain *ld, cor_idp_t m)
{
    for (int i = 0; i < ld->n; i++)
        if (ld->members[i] == m) return i;
    return -1;
}

/* Answers a service call in place (the registry part runs in domain 0 only). */
void cor__svc_handle(struct svc_msg *m)
{
    m->name[COR_NAME_MAX - 1] = 0;
    if (m->op == SVC_TASK_LOOKUP) {
        unsigned idx;
        m->status = cor__task_find(m->name, (unsigned)m->b, &idx);
        m->a = idx;
        return;
    }
    if (g.rank != 0 || m->op < SVC_LD_CREATE || m->op > SVC_LD_DESTROY) {
        m->status = COR_EINVAL;
        return;
    }
    COR_LOCK(&reg_lock);
    struct ldomain *ld = NULL;
    if (m->op != SVC_LD_CREATE && m->op != SVC_LD_LOOKUP) {
        if (!(ld = ld_get(m->a))) {
            m->status = COR_EINVAL;
            goto out;
        }
    }
    m->status = COR_OK;
    switch (m->op) {
    case SVC_LD_CREATE: {
        if (!m->name[0]) {
            m->status = COR_EINVAL;
        } else if (ld_find(m->name) >= 0) {
            m->status = COR_EEXIST;
        } else {
            int i = 0; /* a destroyed group's slot first */
            while (i < nlds && lds[i].name[0])
                i++;
            if (i == nlds) {
                struct ldomain *n =
                    nlds > COR_MAX_INDEX ? NULL : realloc(lds, (size_t)(nlds + 1) * sizeof *lds);
                if (!n) {
                    m->status = nlds > COR_MAX_INDEX ? COR_ELIMIT : COR_ENOMEM;
                    break;
                }
                lds = n;
                memset(&lds[nlds++], 0, sizeof *lds);
                lds[i].gen = 1;
            }
            memcpy(lds[i].name, m->name, sizeof m->name);
            m->a = ld_handle(i);
        }
        break;
    }
    case SVC_LD_LOOKUP: {
        int i = ld_find(m->name);
        if (i < 0)
            m->status = COR_ENOTFOUND;
        else
            m->a = ld_handle(i);
        break;
    }
    case SVC_LD_JOIN: {
        int r = ld_rank(ld, m->b);
        if (r < 0) {
            if (ld->n == ld->cap) {
                int cap = ld->cap ? 2 * ld->cap : 8;
                cor_idp_t *n = realloc(ld->members, (size_t)cap * sizeof *n);
                if (!n) {
                    m->status = COR_ENOMEM;
                    break;
                }
                ld->members = n;
                ld->cap = cap;
            }
            r = ld->n++;
            ld->members[r] = m->b;
        }
        m->a = (uint64_t)r;
        break;
    }
    case SVC_LD_LEAVE: {
        int r = ld_rank(ld, m->b);
        if (r < 0) {
            m->status = COR_ENOTFOUND;
            break;
        }
        memmove(&ld->members[r], &ld->members[r + 1], (size_t)(ld->n - r - 1) * sizeof(cor_idp_t));
        ld->n--;
        break;
    }
    case SVC_LD_RANK: {
        int r = ld_rank(ld, m->b);
        if (r < 0)
            m->status = COR_ENOTFOUND;
        else
            m->a = (uint64_t)r;
        break;
    }
    case SVC_LD_SIZE:
        m->a = (uint64_t)ld->n;
        break;
    case SVC_LD_MEMBER:
        if (m->b >= (uint64_t)ld->n)
            m->status = COR_ENOTFOUND;
        else
            m->a = ld->members[m->b];
        break;
    case SVC_LD_DESTROY:
        free(ld->members);
        *ld = (struct ldomain){.gen = ld->gen % LD_GEN_MAX + 1};
        break;
    }
out:
    COR_UNLOCK(&reg_lock);
}

int cor__svc_call(unsigned rank, struct svc_msg *m)
{
    if (rank == (unsigned)g.rank) {
        cor__svc_handle(m);
        return m->status;
    }
    if (rank >= (unsigned)g.size) return COR_EINVAL;
    if (atomic_load(&g.dead[rank])) return COR_EPEERDEAD;
    struct cor_route *rt = cor__route_find(NULL);
    if (!rt || !rt->nports) return COR_EROUTE;
    struct cor_req *r = cor__req_new(REQ_SVC, cor__task_self());
    if (!r) return COR_ENOMEM;
    r->svc_reply = m;
    r->peer_rank = rank;
    r->remote_rank = (int)rank;
    r->hp = rt->ports[0];
    cor__await_begin(r); /* its reply */
    struct frame_hdr h = {.type = F_SVC_REQ, .sreq = r->handle};
    int err = cor__frame_send_copy(rt->ports[0], rank, &h, sizeof h, m, sizeof *m);
    if (err == COR_OK) {
        cor__req_block(r);
        err = r->status.error;
    } else {
        cor__await_end(r);
    }
    cor__req_free(r);
    return err ? err : m->status;
}

static int ld_call(enum svc_op op, cor_idp_t ldom, cor_idp_t member, const char *name,
                   uint64_t *out)
{
    int err = cor__check_init();
    if (err) return err;
    struct svc_msg m = {.op = op, .b = member};
    if (name) {
        if (strlen(name) >= COR_NAME_MAX) return COR_EINVAL;
        strcpy(m.name, name);
    } else {
        if (cor_idp_kind(ldom) != COR_KIND_LDOMAIN || cor_idp_macro(ldom) != g.macro)
            return COR_EINVAL;
        m.a = cor_idp_micro(ldom) & 0x0fffffff; /* generation << 16 | slot */
    }
    err = cor__svc_call(0, &m);
    if (!err && out) *out = m.a;
    return err;
}

static cor_idp_t ld_idp(uint64_t handle)
{
    return cor_idp_make(g.macro, COR_KIND_LDOMAIN, (unsigned)(handle >> 16),
                        (unsigned)handle & 0xffff);
}

COR_API int cor_ldomain_create(const char *name, cor_idp_t *ldom)
{
    uint64_t i;
    if (!name || !ldom) return COR_EINVAL;
    int err = ld_call(SVC_LD_CREATE, 0, 0, name, &i);
    if (!err) *ldom = ld_idp(i);
    return err;
}

COR_API int cor_ldomain_lookup(const char *name, cor_idp_t *ldom)
{
    uint64_t i;
    if (!name || !ldom) return COR_EINVAL;
    int err = ld_call(SVC_LD_LOOKUP, 0, 0, name, &i);
    if (!err) *ldom = ld_idp(i);
    return err;
}

COR_API int cor_ldomain_destroy(cor_idp_t ldom)
{
    return ld_call(SVC_LD_DESTROY, ldom, 0, NULL, NULL);
}

COR_API int cor_ldomain_join(cor_idp_t ldom, cor_idp_t member, int *rank)
{
    uint64_t r;
    if (cor_idp_kind(member) == COR_KIND_NONE || cor_idp_kind(member) > COR_KIND_CONTEXT)
        return COR_EINVAL; /* COR_IDP_NULL, COR_ANY_SOURCE: no resource */
    int err = ld_call(SVC_LD_JOIN, ldom, member, NULL, &r);
    if (!err && rank) *rank = (int)r;
    return err;
}

COR_API int cor_ldomain_leave(cor_idp_t ldom, cor_idp_t member)
{
    return ld_call(SVC_LD_LEAVE, ldom, member, NULL, NULL);
}

COR_API int cor_ldomain_rank(cor_idp_t ldom, cor_idp_t member, int *rank)
{
    uint64_t r;
    if (!rank) return COR_EINVAL;
    int err = ld_call(SVC_LD_RANK, ldom, member, NULL, &r);
    if (!err) *rank = (int)r;
    return err;
}

COR_API int cor_ldomain_size(cor_idp_t ldom, int *size)
{
    uint64_t n;
    if (!size) return COR_EINVAL;
    int err = ld_call(SVC_LD_SIZE, ldom, 0, NULL, &n);
    if (!err) *size = (int)n;
    return err;
}

COR_API int cor_ldomain_member(cor_idp_t ldom, int rank, cor_idp_t *member)
{
    uint64_t v;
    if (!member || rank < 0) return COR_EINVAL;
    int err = ld_call(SVC_LD_MEMBER, ldom, (cor_idp_t)rank, NULL, &v);
    if (!err) *member = v;
    return err;
}

COR_API int cor_task_lookup(int domain_rank, const char *name, unsigned index, cor_idp_t *task)
{
    int err = cor__check_init();
    if (err) return err;
    if (!name || !task || strlen(name) >= COR_NAME_MAX || domain_rank < 0 || domain_rank >= g.size)
        return COR_EINVAL;
    struct svc_msg m = {.op = SVC_TASK_LOOKUP, .b = index};
    strcpy(m.name, name);
    err = cor__svc_call((unsigned)domain_rank, &m);
    if (!err) *task = cor__task_idp((unsigned)domain_rank, (unsigned)m.a);
    return err;
}
