/* The core's knob table (knobs.h), public through cor_knobs(), and its readers. */
#include <errno.h>
#include <stdlib.h>

#include "knobs.h"
#include "internal.h"

/* Reads an integer knob; a malformed or out-of-range value is reported and ignored. */
static long knob_env_long(const char *name, long dflt, long min, long max)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || *end || v < min || v > max) {
        cor__log("ignoring %s=%s: expected an integer in [%ld, %ld]", name, s, min, max);
        return dflt;
    }
    return v;
}

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

COR_API long long cor_knob_int(const cor_knob_t *k)
{
    if (!k || k->type != COR_KNOB_INT) return 0;
    return knob_env_long(k->name, (long)k->def, (long)k->lo, (long)k->hi);
}

long cor__knob_long(int id)
{
    return (long)cor_knob_int(&table[id]);
}

const char *cor__knob_name(int id)
{
    return table[id].name;
}

const char *cor__knob_str(int id)
{
    return getenv(table[id].name);
}

long cor__knob_long_in(int id, long dflt, long hi)
{
    return knob_env_long(table[id].name, dflt, (long)table[id].lo, hi);
}
