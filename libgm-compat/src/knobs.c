/* libgm-compat's knob table (knobs.h), public through gm_compat_knobs(), and its readers. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gm_compat.h"
#include "gm_internal.h"

#define GMX_KNOB_ROW(id, name, type, def, lo, hi, shown, meaning)                                  \
    {name, GM_COMPAT_KNOB_##type, def, lo, hi, shown, meaning},
static const gm_compat_knob_t table[] = {GMX_KNOBS(GMX_KNOB_ROW)};

GMX_EXPORT const gm_compat_knob_t *gm_compat_knobs(unsigned *n)
{
    if (n) *n = GMX_K_COUNT;
    return table;
}

unsigned long gmx_knob_uint_or(int id, unsigned long dflt)
{
    const gm_compat_knob_t *k = &table[id];
    const char *s = getenv(k->name);
    if (!s || !*s) return dflt;
    char *end;
    errno = 0;
    unsigned long v = isdigit((unsigned char)*s) ? strtoul(s, &end, 10) : 0;
    if (!isdigit((unsigned char)*s) || errno || *end || v < (unsigned long)k->lo ||
        v > (unsigned long)k->hi) {
        fprintf(stderr, "libgm: ignoring %s=%s (expected a whole number in [%lld, %lld])\n",
                k->name, s, k->lo, k->hi);
        return dflt;
    }
    return v;
}

unsigned long gmx_knob_uint(int id)
{
    return gmx_knob_uint_or(id, (unsigned long)table[id].def);
}

const char *gmx_knob_str(int id)
{
    return getenv(table[id].name);
}

const char *gmx_knob_name(int id)
{
    return table[id].name;
}
