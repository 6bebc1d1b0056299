/*
 * fabric_load.c - libfabric, loaded when a port first needs it.
 *
 * Loading libfabric costs ~0.2-0.3 s per process before any call (a library it needs,
 * libinfinipath, calibrates a clock in its constructor with an unconditional sleep), and a
 * process that loaded it holds its exit that long too.  Ports whose peers are all on this host
 * use libgm-compat's own rings (shmring.c) and never need it, so libgm is not linked with
 * libfabric: the few functions of libfabric that are real symbols (the rest are inline calls
 * through its objects' operation tables) are looked up here at the first fabric port, and
 * gm_internal.h renames libgm's calls to them to the wrappers below.
 */
#include "gm_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GMX_FABRIC_SONAME "libfabric.so.1"

static struct {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
} fab;
static int fab_ok;
static pthread_once_t fab_once = PTHREAD_ONCE_INIT;

/* libfabric reads its settings from the environment at its first call.  libgm needs one that
 * is off by default: FI_AV_REMOVE_CLEANUP=1, without which taking an address out of an AV
 * leaves ofi_rxm's connection to it (and one that never completed, for ever: send.c,
 * renew_stalled) in place, so that inserting it again renews nothing.  A value the user set is
 * left alone.  It is set when libgm is loaded (a constructor): at a program's start, or in the
 * thread that dlopens the gm route, never in a thread of ours beside the program's own getenv
 * and setenv (a launcher's client library, PMIx, calls both in cor_init).  Not setenv: a
 * setenv beside a getenv in another thread may free the array the getenv reads; a new array is
 * swapped in instead and the old one never freed (both stay valid; the new one stays
 * referenced here, for leak checkers).  Processes the program starts inherit the setting. */
extern char **environ;
static char **fab_environ;

__attribute__((constructor)) static void fab_environment(void)
{
    static char entry[] = "FI_AV_REMOVE_CLEANUP=1";
    if (getenv("FI_AV_REMOVE_CLEANUP")) return;
    char **old = environ;
    size_t n = 0;
    while (old && old[n])
        n++;
    char **env = malloc((n + 2) * sizeof *env);
    if (!env) return;
    if (n) memcpy(env, old, n * sizeof *env);
    env[n] = entry;
    env[n + 1] = NULL;
    fab_environ = env;
    __atomic_store_n(&environ, env, __ATOMIC_RELEASE);
}

static void fab_load(void)
{
    void *h = dlopen(GMX_FABRIC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "libgm: cannot load %s: %s\n", GMX_FABRIC_SONAME, dlerror());
        return;
    }
    *(void **)&fab.getinfo = dlsym(h, "fi_getinfo");
    *(void **)&fab.freeinfo = dlsym(h, "fi_freeinfo");
    *(void **)&fab.dupinfo = dlsym(h, "fi_dupinfo");
    *(void **)&fab.fabric = dlsym(h, "fi_fabric");
    *(void **)&fab.strerror = dlsym(h, "fi_strerror");
    if (!fab.getinfo || !fab.freeinfo || !fab.dupinfo || !fab.fabric || !fab.strerror) {
        fprintf(stderr, "libgm: %s lacks the functions libgm needs\n", GMX_FABRIC_SONAME);
        return; /* the handle stays: it may already have run constructors */
    }
    __atomic_store_n(&fab_ok, 1, __ATOMIC_RELEASE);
}

int gmx_fabric_load(void)
{
    pthread_once(&fab_once, fab_load);
    return __atomic_load_n(&fab_ok, __ATOMIC_ACQUIRE) ? 0 : -1;
}

int gmx_fabric_loaded(void)
{
    return __atomic_load_n(&fab_ok, __ATOMIC_ACQUIRE);
}

/* The wrappers: the names below are gm_internal.h's renames of libfabric's. */
int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
               const struct fi_info *hints, struct fi_info **info)
{
    if (gmx_fabric_load() != 0) return -FI_ENOSYS;
    return fab.getinfo(version, node, service, flags, hints, info);
}

void fi_freeinfo(struct fi_info *info)
{
    if (info && gmx_fabric_load() == 0) fab.freeinfo(info);
}

struct fi_info *fi_dupinfo(const struct fi_info *info)
{
    return gmx_fabric_load() == 0 ? fab.dupinfo(info) : NULL;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    if (gmx_fabric_load() != 0) return -FI_ENOSYS;
    return fab.fabric(attr, fabric, context);
}

/* Messages never load libfabric: its error numbers are errno values below FI_ERRNO_OFFSET. */
const char *fi_strerror(int errnum)
{
    if (gmx_fabric_loaded()) return fab.strerror(errnum);
    if (errnum < 0) errnum = -errnum;
    return errnum < 256 ? strerror(errnum) : "libfabric error";
}
