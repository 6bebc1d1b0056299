/* cor_strerror, generated from the one error list in cor.h. */
#include "internal.h"

#define COR_ERR_TEXT_(name, value, text)                                                           \
    case COR_##name:                                                                               \
        return text;
COR_API const char *cor_strerror(int err)
{
    switch (err) {
        COR_ERRNO_MAP(COR_ERR_TEXT_)
    }
    return "unknown CoR error";
}
