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
};

struct ldomain {
    char name[COR_NAME_MAX];
    cor_idp_t *members; /* in rank order; a leaver's successors move down */
    int n, cap;
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
        if (!strcmp(lds[i].name, name)) return i;
    return -1;
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
    if (g.rank != 0 || m->op < SVC_LD_CREATE || m->op > SVC_LD_MEMBER) {
        m->status = COR_EINVAL;
        return;
    }
    COR_LOCK(&reg_lock);
    struct ldomain *ld = NULL;
    if (m->op != SVC_LD_CREATE && m->op != SVC_LD_LOOKUP) {
        if (m->a >= (uint64_t)nlds) {
            m->status = COR_ENOTFOUND;
            goto out;
        }
        ld = &lds[m->a];
    }
    m->status = COR_OK;
    switch (m->op) {
    case SVC_LD_CREATE: {
        if (!m->name[0]) {
            m->status = COR_EINVAL;
        } else if (ld_find(m->name) >= 0) {
            m->status = COR_EEXIST;
        } else if (nlds > COR_MAX_INDEX) {
            m->status = COR_ELIMIT;
        } else {
            struct ldomain *n = realloc(lds, (size_t)(nlds + 1) * sizeof *lds);
            if (!n) {
                m->status = COR_ENOMEM;
                break;
            }
            lds = n;
            memset(&lds[nlds], 0, sizeof *lds);
            memcpy(lds[nlds].name, m->name, sizeof m->name);
            m->a = (uint64_t)nlds++;
        }
        break;
    }
    case SVC_LD_LOOKUP: {
        int i = ld_find(m->name);
        if (i < 0)
            m->status = COR_ENOTFOUND;
        else
            m->a = (uint64_t)i;
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
    struct frame_hdr h = {.type = F_SVC_REQ, .sreq = r->handle};
    int err = cor__frame_send_copy(rt->ports[0], rank, &h, sizeof h, m, sizeof *m);
    if (err == COR_OK) {
        cor__req_block(r);
        err = r->status.error;
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
        m.a = cor_idp_index(ldom);
    }
    err = cor__svc_call(0, &m);
    if (!err && out) *out = m.a;
    return err;
}

static cor_idp_t ld_idp(uint64_t index)
{
    return cor_idp_make(g.macro, COR_KIND_LDOMAIN, 0, (unsigned)index);
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

COR_API int cor_ldomain_join(cor_idp_t ldom, cor_idp_t member, int *rank)
{
    uint64_t r;
    if (member == COR_IDP_NULL) return COR_EINVAL;
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
