/*
 * launch_fabric: the second start-up reference of scripts/bench-launch, PMIx and libfabric
 * alone, as a plain libfabric program starts: linked with libfabric (its libraries' constructors
 * run before main), PMIx_Init, fi_getinfo for the shm provider (tagged RDM, our own address
 * string), fabric, domain, completion queue, address vector, one endpoint enabled, its
 * fi_getname put (PMIX_GLOBAL), commit, one fence collecting the data, everything closed,
 * PMIx_Finalize. What the gm route cannot start faster than, libfabric being what it is. Exit
 * status 0 when all worked.
 */
#include <pmix.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fabric {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
};

static void fabric_close(struct fabric *f)
{
    if (f->ep) fi_close(&f->ep->fid);
    if (f->av) fi_close(&f->av->fid);
    if (f->cq) fi_close(&f->cq->fid);
    if (f->domain) fi_close(&f->domain->fid);
    if (f->fabric) fi_close(&f->fabric->fid);
    if (f->info) fi_freeinfo(f->info);
}

/* One shm endpoint named launch_fabric-<pid>-<rank>; its address in name/len. */
static int fabric_open(struct fabric *f, unsigned rank, char *name, size_t *len)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints) return -FI_ENOMEM;
    char src[64];
    snprintf(src, sizeof src, "fi_shm://launch_fabric-%ld-%u", (long)getpid(), rank);
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->addr_format = FI_ADDR_STR;
    hints->src_addr = strdup(src);
    hints->src_addrlen = strlen(src) + 1;
    hints->fabric_attr->prov_name = strdup("shm");
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int rc;
    if ((rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &f->info)) ||
        (rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL)) ||
        (rc = fi_domain(f->fabric, f->info, &f->domain, NULL)) ||
        (rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL)) ||
        (rc = fi_av_open(f->domain, &av_attr, &f->av, NULL)) ||
        (rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)) ||
        (rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(f->ep, &f->av->fid, 0)) || (rc = fi_enable(f->ep)))
        goto out;
    rc = fi_getname(&f->ep->fid, name, len);
out:
    fi_freeinfo(hints);
    return rc;
}

int main(void)
{
    pmix_proc_t self;
    pmix_status_t rc = PMIx_Init(&self, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "launch_fabric: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    struct fabric f = {0};
    char name[256];
    size_t len = sizeof name;
    int frc = fabric_open(&f, self.rank, name, &len);
    if (frc || len > sizeof name) {
        fprintf(stderr, "launch_fabric: libfabric shm endpoint: %s\n",
                frc ? fi_strerror(-frc) : "name too long");
        fabric_close(&f);
        PMIx_Finalize(NULL, 0);
        return 1;
    }
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = name;
    v.data.bo.size = len;
    bool collect = true;
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if ((rc = PMIx_Put(PMIX_GLOBAL, "ref.fabric", &v)) != PMIX_SUCCESS ||
        (rc = PMIx_Commit()) != PMIX_SUCCESS ||
        (rc = PMIx_Fence(NULL, 0, &info, 1)) != PMIX_SUCCESS)
        fprintf(stderr, "launch_fabric: %s\n", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&info);
    fabric_close(&f);
    pmix_status_t fin = PMIx_Finalize(NULL, 0);
    return rc == PMIX_SUCCESS && fin == PMIX_SUCCESS ? 0 : 1;
}
