/* The core's knob table (knobs.h), public through cor_knobs(), and its readers. */
#include "knobs.h"
#include "internal.h"

#define COR_KNOB_TYPE_INT COR_KNOB_INT
#define COR_KNOB_TYPE_STR COR_KNOB_STR
#define COR_KNOB_TYPE_SET COR_KNOB_SET
#define COR_KNOB_ROW(id, name, type, def, lo, hi, shown, meaning)                                  \
    {name, COR_KNOB_TYPE_##type, def, lo, hi, shown, meaning},
static const cor_knob_t table[] = {COR_CORE_KNOBS(COR_KNOB_ROW)};

COR_API const cor_knob_t *cor_knobs(size_t *n)
{
    if (n) *n = COR_K_COUNT;
    return table;
}

long cor__knob_long(int id)
{
    return cor__env_long(table[id].name, (long)table[id].def, (long)table[id].lo,
                         (long)table[id].hi);
}

long cor__knob_long_in(int id, long dflt, long hi)
{
    return cor__env_long(table[id].name, dflt, (long)table[id].lo, hi);
}
