/* libcorpvm's knob table (knobs.h), public through cor_pvm_knobs(), and its readers. */
#include "knobs.h"

#include <stdlib.h>

#include "cor/pvm.h"

#define CPVM_KNOB_ROW(id, name, type, def, lo, hi, shown, meaning)                                 \
    {name, COR_KNOB_##type, def, lo, hi, shown, meaning},
static const cor_knob_t table[] = {CPVM_KNOBS(CPVM_KNOB_ROW)};

COR_API const cor_knob_t *cor_pvm_knobs(size_t *n)
{
    if (n) *n = CPVM_K_COUNT;
    return table;
}

long long cpvm_knob(int id)
{
    return cor_knob_int(&table[id]);
}

const char *cpvm_knob_str(int id)
{
    return getenv(table[id].name);
}
