/*
 * finstall.so - preloaded into the domains of tests/launch/finunacked.sh. In the domain whose
 * PMIX_RANK is FINSTALL_RANK (default 0), PMIx_Finalize first stops its parent, the mpirun
 * that started it (SIGSTOP), then writes the parent's pid to FINSTALL_FILE, then goes on into
 * the real PMIx_Finalize: the launcher cannot acknowledge the finalize sync within PMIx's 2 s,
 * as a launcher starved of CPU (256 domains on a loaded machine) did not. The test resumes
 * the launcher a few seconds later. Without FINSTALL_FILE it only calls the real one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo): the types do not matter
 * to the call passed on (an int status, a pointer, a size). */
int PMIx_Finalize(const void *info, size_t ninfo);

int PMIx_Finalize(const void *info, size_t ninfo)
{
    int (*real)(const void *, size_t) =
        (int (*)(const void *, size_t))dlsym(RTLD_NEXT, "PMIx_Finalize");
    const char *file = getenv("FINSTALL_FILE"), *rank = getenv("PMIX_RANK");
    const char *want = getenv("FINSTALL_RANK");
    if (file && rank && strcmp(rank, want && *want ? want : "0") == 0) {
        pid_t parent = getppid();
        if (parent > 1 && kill(parent, SIGSTOP) == 0) {
            FILE *f = fopen(file, "w");
            if (f) {
                fprintf(f, "%d\n", (int)parent);
                fclose(f);
            }
        }
    }
    if (!real) {
        fprintf(stderr, "finstall: no PMIx_Finalize after this library\n");
        return -1;
    }
    return real(info, ninfo);
}
