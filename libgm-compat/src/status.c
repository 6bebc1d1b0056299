/* status.c - the one place where libfabric errors become GM status codes. */
#include "gm_internal.h"

#include <errno.h>

gm_status_t gmx_status_from_fi(int fi_err, const struct gmx_peer *peer)
{
    if (fi_err < 0) fi_err = -fi_err;
    switch (fi_err) {
    case 0:
        return GM_SUCCESS;
    case FI_ECONNREFUSED:
    case FI_ENOTCONN:
    case FI_ECONNRESET:
    case FI_ESHUTDOWN:
    case FI_ECONNABORTED:
        return GM_SEND_TARGET_PORT_CLOSED;
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EADDRNOTAVAIL:
        return GM_SEND_TARGET_NODE_UNREACHABLE;
    case FI_ETIMEDOUT:
    case FI_EAGAIN:
        /* A target we never reached is most likely not open. */
        return peer && peer->reached ? GM_SEND_TIMED_OUT : GM_SEND_TARGET_PORT_CLOSED;
    case FI_ECANCELED:
        return GM_SEND_DROPPED;
    case FI_ENOMEM:
        return GM_OUT_OF_MEMORY;
    case FI_EINVAL:
    case FI_EMSGSIZE:
    case FI_ETOOSMALL:
    case FI_ETRUNC:
        return GM_INVALID_PARAMETER;
    case FI_EACCES:
    case FI_EPERM:
        return GM_PERMISSION_DENIED;
    default:
        return GM_FAILURE;
    }
}
