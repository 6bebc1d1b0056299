/*
 * Loading the PMIx backend (boot_host.h), and which backends can serve (cor_boot_backends,
 * cor_boot_unavailable: compiled into libcor alone, with or without PMIx): cor__boot_pmix_init
 * dlopens cor_boot_pmix.so, the plugin built from boot_pmix.c with libpmix, the first time the
 * environment says a PMIx launcher started us (boot.c's order), and hands it the table of libcor's
 * helpers. libcor does not link libpmix: a program that no PMIx launcher started loads neither.
 *
 * Where: libcor's own folder first (the build tree's cor/core/.libs, or $libdir), then the
 * installed folder (COR_BOOTDIR, $libdir/cor). A plugin that is missing, does not load
 * (libpmix not installed) or comes from another version of CoR is a COR_EBOOT naming the
 * file and the reason: PMIx variables are set, so a one-domain session would be wrong.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "boot_host.h"
#include "config.h" /* PACKAGE_VERSION */
#include "cor/cor.h"
#include "knobs.h"

#ifdef COR_HAVE_PMIX

static const struct cor_boot_host host = {
    .size = sizeof(struct cor_boot_host),
    .abi = COR_BOOT_HOST_ABI,
    .version = PACKAGE_VERSION,
    .log = cor__boot_log,
    .timeout_s = cor__boot_timeout_s,
    .random_cookie = cor__boot_random_cookie,
    .check_addrs = cor__boot_check_addrs,
    .blob_encode = cor__boot_blob_encode,
    .blob_decode = cor__boot_blob_decode,
    .listener_set = cor__boot_listener_set,
    .listener_begin = cor__boot_listener_begin,
    .listener_end = cor__boot_listener_end,
    .wait_begin = cor__boot_wait_begin,
    .wait = cor__boot_wait,
    .wait_end = cor__boot_wait_end,
    .knob_long = cor__knob_long,
    .knob_str = cor__knob_str,
    .knob_name = cor__knob_name,
};

/* libcor's folder ("" if unknown) into dir[len]. */
static void own_folder(char *dir, size_t len)
{
    Dl_info di;
    dir[0] = 0;
    if (!dladdr((void *)&host, &di) || !di.dli_fname) return;
    const char *slash = strrchr(di.dli_fname, '/');
    if (!slash) return;
    size_t n = (size_t)(slash - di.dli_fname);
    if (n >= len) return;
    memcpy(dir, di.dli_fname, n);
    dir[n] = 0;
}

/* dlopens the plugin (kept for the process: PMIx's threads run its code until the end). */
static void *open_plugin(char *why, size_t wlen)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static void *dl;
    pthread_mutex_lock(&mu);
    char dirs[2][4096], path[sizeof dirs + 64];
    own_folder(dirs[0], sizeof dirs[0]);
    snprintf(dirs[1], sizeof dirs[1], "%s", COR_BOOTDIR);
    snprintf(why, wlen, "%s is in neither %s nor %s", COR_BOOT_PMIX_FILE,
             dirs[0][0] ? dirs[0] : "libcor's folder", dirs[1]);
    for (int i = 0; i < 2 && !dl; i++) {
        if (!dirs[i][0]) continue;
        snprintf(path, sizeof path, "%s/%s", dirs[i], COR_BOOT_PMIX_FILE);
        dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
            const char *e = dlerror();
            /* a file missing in one folder is normal; remember any other failure */
            if (e && !strstr(e, "No such file")) snprintf(why, wlen, "%s", e);
        }
    }
    void *got = dl;
    pthread_mutex_unlock(&mu);
    return got;
}

/* The plugin's entry point, or NULL with why[wlen] saying what is wrong. */
static cor_boot_pmix_entry_fn plugin_entry(char *why, size_t wlen)
{
    void *dl = open_plugin(why, wlen);
    cor_boot_pmix_entry_fn entry =
        dl ? (cor_boot_pmix_entry_fn)dlsym(dl, COR_BOOT_PMIX_ENTRY) : NULL;
    if (dl && !entry) snprintf(why, wlen, "%s has no %s", COR_BOOT_PMIX_FILE, COR_BOOT_PMIX_ENTRY);
    return entry;
}

int cor__boot_pmix_init(struct cor_boot **bootp)
{
    *bootp = NULL;
    char why[4400];
    cor_boot_pmix_entry_fn entry = plugin_entry(why, sizeof why);
    if (!entry) {
        cor__boot_log(NULL, "pmix",
                      "PMIx variables say a PMIx launcher (srun --mpi=pmix, mpirun) started this "
                      "program, but CoR's PMIx backend cannot be loaded: %s",
                      why);
        return COR_EBOOT;
    }
    return entry(&host, bootp);
}

/* Whether the plugin would serve, looked at once (cor-info asks; no session needed). */
static pthread_once_t pmix_once = PTHREAD_ONCE_INIT;
static char pmix_problem[4400]; /* "" if it loads */

static void pmix_look(void)
{
    char why[sizeof pmix_problem - 8];
    if (!plugin_entry(why, sizeof why))
        snprintf(pmix_problem, sizeof pmix_problem, "pmix: %s", why);
}
#endif /* COR_HAVE_PMIX */

/* The backends listed by what can serve now: PMIx needs its plugin (boot.c's order). */
COR_API const char *cor_boot_backends(void)
{
#ifdef COR_HAVE_PMIX
    pthread_once(&pmix_once, pmix_look);
    if (!pmix_problem[0]) return "cor-run pmix none";
#endif
    return "cor-run none";
}

COR_API const char *cor_boot_unavailable(void)
{
#ifdef COR_HAVE_PMIX
    pthread_once(&pmix_once, pmix_look);
    return pmix_problem;
#else
    return "pmix: this libcor was built without PMIx (configure found no libpmix-dev, or "
           "--without-pmix)";
#endif
}
