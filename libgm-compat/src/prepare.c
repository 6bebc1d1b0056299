/*
 * gm_compat_prepare (gm_compat.h): libfabric's one-time initialization of the process, done
 * ahead of the first gm_open, from any thread.
 *
 * The first fi_getinfo of a process initializes every built-in provider. In libfabric 1.17
 * (Debian) the verbs provider then reads /proc/kallsyms twice, on hosts without an RDMA
 * device too: 0.05-0.2 s of CPU per process, over 1 s when four processes start at once on two
 * cores. A runtime that knows early that it will open ports calls this in a thread of its own
 * while it waits for something else (its launcher), and its gm_open then finds libfabric
 * initialized. The query asks for the provider that gm_open will ask for, and its answer is
 * dropped: what stays is libfabric's own state.
 */
#include "gm_internal.h" /* first: its renames of libfabric's functions (fabric_load.c) */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gm_compat.h"
#include "knobs.h"

static pthread_once_t prepared = PTHREAD_ONCE_INIT;

/* Whether ports will need libfabric, from what is known before gm_init: the transport
 * (transport.c) and, under auto, GM_PROVIDER (only a provider other than shm loads it). */
static int fabric_wanted(void)
{
    int mode = gmx_transport_mode();
    const char *prov = gmx_knob_str(GMX_K_PROVIDER);
    if (mode != GMX_TRANSPORT_AUTO) return mode == GMX_TRANSPORT_FABRIC;
    return prov && *prov && strcmp(prov, "shm") != 0;
}

static void initialize_libfabric(void)
{
    if (!fabric_wanted()) return;
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    if (!hints) return;
    const char *prov = gmx_knob_str(GMX_K_PROVIDER);
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "shm");
    if (fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, &info) == 0) fi_freeinfo(info);
    fi_freeinfo(hints);
}

GMX_EXPORT void gm_compat_prepare(void)
{
    pthread_once(&prepared, initialize_libfabric);
}
