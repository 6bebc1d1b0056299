/* The real libpvm3 and libgpvm3 functions, found behind us in the symbol search order. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pvmcompat.h"

struct cpvm_real cpvm_real;
bool cpvm_bypass;

/* PVM's own programs link libpvm3 too and may inherit a preload through PVM_EXPORT (pvmgs,
 * started by a preloaded task's pvm_joingroup) or a careless environment (pvmd, the
 * console): in them every pvm_* call goes straight to libpvm3. */
__attribute__((constructor)) static void detect_pvm_programs(void)
{
    static const char *const own[] = {"pvmd", "pvmd3", "pvm", "pvmgs"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(program_invocation_short_name, own[i])) cpvm_bypass = true;
    cpvm_real_load();
}

static void load(void)
{
    /* RTLD_NEXT finds the definition after ours: libpvm3 when we are preloaded or linked
     * before it. Group calls exist only when the program links libgpvm3. */
#define LOAD_REQUIRED(name)                                                                        \
    if (!(cpvm_real.name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name))) {                         \
        fprintf(stderr,                                                                            \
                "libcorpvm: %s not found behind libcorpvm (link -lcorpvm before "                  \
                "-lpvm3, or preload libcorpvm into a PVM program)\n",                              \
                #name);                                                                            \
        abort();                                                                                   \
    }
#define LOAD_OPTIONAL(name) cpvm_real.name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);
    CPVM_REAL_CALLS(LOAD_REQUIRED)
    CPVM_GROUP_CALLS(LOAD_OPTIONAL)
}

void cpvm_real_load(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
}
