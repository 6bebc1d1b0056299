/*
 * What libcor lends a bootstrap backend built as a plugin of its own (boot.h, "PMIx").
 *
 * The PMIx backend (boot_pmix.c) is cor_boot_pmix.so, loaded by boot_pmix_load.c only when
 * the environment says a PMIx launcher started the program: libcor itself does not link
 * libpmix, so a program nobody launched through PMIx (a PVM task, a one-domain session) does
 * not pay for loading libpmix and the libraries it pulls in (~13 ms a process here:
 * docs/measurements/pvm.md). The plugin calls back into libcor only through this table (libcor
 * exports no internal symbol): boot_pmix.c keeps calling cor__boot_log, cor__knob_long...,
 * which the macros below turn into calls through the table when it is compiled as the plugin
 * (COR_BOOT_PMIX_PLUGIN); linked into a test program with boot.c it calls them directly.
 * Private to libcor and its plugin, built from the same tree: the loader and the plugin check
 * that both come from the same version.
 */
#ifndef COR_BOOT_HOST_H
#define COR_BOOT_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "boot.h"

#define COR_BOOT_HOST_ABI 1
/* The plugin's one exported symbol: joins the session as cor__boot_pmix_init does. */
#define COR_BOOT_PMIX_ENTRY "cor_boot_pmix_plugin_init"
#define COR_BOOT_PMIX_FILE "cor_boot_pmix.so"

struct cor_boot_host {
    size_t size;         /* sizeof(struct cor_boot_host) as libcor built it */
    unsigned abi;        /* COR_BOOT_HOST_ABI */
    const char *version; /* libcor's PACKAGE_VERSION: the plugin must have been built with it */
    void (*log)(const struct cor_boot *b, const char *backend, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    int (*timeout_s)(void);
    uint64_t (*random_cookie)(void);
    int (*check_addrs)(const struct cor_boot *b, const char *backend, int n,
                       const struct cor_boot_addr *mine);
    int (*blob_encode)(int n, const struct cor_boot_addr *mine, unsigned char **blob, size_t *len);
    int (*blob_decode)(const unsigned char *blob, size_t len, int n, struct cor_boot_addr *out);
    void (*listener_set)(struct cor_boot_listener *l, pthread_cond_t *cv, pthread_mutex_t *mu,
                         cor_boot_death_fn fn, void *arg);
    int (*listener_begin)(struct cor_boot_listener *l, cor_boot_death_fn *fn, void **arg);
    void (*listener_end)(struct cor_boot_listener *l, pthread_cond_t *cv, pthread_mutex_t *mu);
    void (*wait_begin)(struct cor_boot *b, struct cor_boot_wait *w);
    void (*wait)(struct cor_boot *b, struct cor_boot_wait *w, pthread_cond_t *cv,
                 pthread_mutex_t *mu);
    void (*wait_end)(struct cor_boot *b, struct cor_boot_wait *w);
    long (*knob_long)(int id);
    const char *(*knob_str)(int id);
    const char *(*knob_name)(int id);
};

typedef int (*cor_boot_pmix_entry_fn)(const struct cor_boot_host *host, struct cor_boot **boot);

#ifdef COR_BOOT_PMIX_PLUGIN
/* In the plugin: the table given at init (include this after boot.h and knobs.h). */
extern const struct cor_boot_host *cor__boot_host;
#define cor__boot_log (*cor__boot_host->log)
#define cor__boot_timeout_s (*cor__boot_host->timeout_s)
#define cor__boot_random_cookie (*cor__boot_host->random_cookie)
#define cor__boot_check_addrs (*cor__boot_host->check_addrs)
#define cor__boot_blob_encode (*cor__boot_host->blob_encode)
#define cor__boot_blob_decode (*cor__boot_host->blob_decode)
#define cor__boot_listener_set (*cor__boot_host->listener_set)
#define cor__boot_listener_begin (*cor__boot_host->listener_begin)
#define cor__boot_listener_end (*cor__boot_host->listener_end)
#define cor__boot_wait_begin (*cor__boot_host->wait_begin)
#define cor__boot_wait (*cor__boot_host->wait)
#define cor__boot_wait_end (*cor__boot_host->wait_end)
#define cor__knob_long (*cor__boot_host->knob_long)
#define cor__knob_str (*cor__boot_host->knob_str)
#define cor__knob_name (*cor__boot_host->knob_name)
#endif

#endif
