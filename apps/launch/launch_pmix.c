/*
 * launch_pmix: the start-up reference of scripts/bench-launch, PMIx alone: PMIx_Init, one put
 * (64 bytes, PMIX_GLOBAL), commit, one fence collecting the data, PMIx_Finalize. What a
 * runtime cannot start faster than under the same launcher. Exit status 0 when all worked.
 */
#include <pmix.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    pmix_proc_t self;
    pmix_status_t rc = PMIx_Init(&self, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "launch_pmix: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    char blob[64];
    memset(blob, (int)self.rank, sizeof blob);
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = blob;
    v.data.bo.size = sizeof blob;
    bool collect = true;
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if ((rc = PMIx_Put(PMIX_GLOBAL, "ref.addr", &v)) != PMIX_SUCCESS ||
        (rc = PMIx_Commit()) != PMIX_SUCCESS ||
        (rc = PMIx_Fence(NULL, 0, &info, 1)) != PMIX_SUCCESS)
        fprintf(stderr, "launch_pmix: %s\n", PMIx_Error_string(rc));
    PMIX_INFO_DESTRUCT(&info);
    pmix_status_t fin = PMIx_Finalize(NULL, 0);
    return rc == PMIX_SUCCESS && fin == PMIX_SUCCESS ? 0 : 1;
}
