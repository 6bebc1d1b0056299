/* libcordsm's knob table (dsm_knobs.h), public through cor_dsm_knobs(), and its reader. */
#include "dsm_knobs.h"

#include "cor/dsm.h"

#define DSM__KNOB_ROW(id, name, type, def, lo, hi, shown, meaning)                                 \
    {name, COR_KNOB_##type, def, lo, hi, shown, meaning},
static const cor_knob_t table[] = {DSM__KNOBS(DSM__KNOB_ROW)};

COR_API const cor_knob_t *cor_dsm_knobs(size_t *n)
{
    if (n) *n = DSM__K_COUNT;
    return table;
}

long long dsm__knob(int id)
{
    return cor_knob_int(&table[id]);
}
