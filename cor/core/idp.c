/* Identifiers and data types. */
#include <inttypes.h>

#include "internal.h"

COR_API char *cor_idp_format(cor_idp_t idp, char *buf, size_t len)
{
    static const char *kinds[] = {"none", "domain", "task", "port", "ldomain", "object", "context"};
    unsigned k = cor_idp_kind(idp);
    if (buf && len)
        snprintf(buf, len, "%08" PRIx32 ":%s:%u.%u", cor_idp_macro(idp),
                 k < sizeof kinds / sizeof *kinds ? kinds[k] : "?", cor_idp_domain(idp),
                 cor_idp_index(idp));
    return buf;
}

COR_API size_t cor_type_size(cor_type_t type)
{
    switch (type) {
    case COR_BYTE:
    case COR_CHAR:
        return 1;
    case COR_SHORT:
        return sizeof(short);
    case COR_INT:
        return sizeof(int);
    case COR_LONG:
        return sizeof(long);
    case COR_FLOAT:
        return sizeof(float);
    case COR_DOUBLE:
        return sizeof(double);
    case COR_INT64:
    case COR_UINT64:
        return 8;
    default:
        return 0;
    }
}
