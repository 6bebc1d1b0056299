/* Knob tables of the route layer (rutil.h): one parser, one message for a bad value. */
#include <errno.h>
#include <stdlib.h>

#include "rutil.h"

int rutil_knobs_read(const char *who, const cor_knob_t *t, size_t n, struct rutil_knob_val *v)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = getenv(t[i].name);
        v[i].s = s;
        switch (t[i].type) {
        case COR_KNOB_SET:
            v[i].u = s != NULL;
            continue;
        case COR_KNOB_STR:
            v[i].u = 0;
            continue;
        case COR_KNOB_INT:
            break;
        }
        v[i].u = (unsigned long long)t[i].def;
        if (!s || !*s) continue;
        /* strtoull takes "-1" as a huge number: refuse any sign before the digits. */
        char *end;
        errno = 0;
        unsigned long long x = strtoull(s, &end, 0);
        if (*s == '-' || errno || *end || x < (unsigned long long)t[i].lo ||
            x > (unsigned long long)t[i].hi) {
            rutil_log(who, "%s='%s': expected an integer in [%lld, %lld]", t[i].name, s, t[i].lo,
                      t[i].hi);
            bad++;
            continue;
        }
        v[i].u = x;
    }
    return bad;
}
