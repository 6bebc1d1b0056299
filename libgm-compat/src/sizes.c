/* sizes.c - size classes, counts and the client's per-priority token pool. */
#include "gm_internal.h"

GMX_EXPORT unsigned int gm_min_size_for_length(gm_size_t length)
{
    if (length > ((gm_size_t)1 << 62)) return 63;
    unsigned s = GMX_MIN_SIZE;
    while (((gm_size_t)1 << s) < length + 8)
        s++;
    return s;
}

GMX_EXPORT gm_size_t gm_max_length_for_size(unsigned int size)
{
    if (size < GMX_MIN_SIZE || size > 63) return 0;
    return ((gm_size_t)1 << size) - 8;
}

GMX_EXPORT unsigned int gm_min_message_size(struct gm_port *p)
{
    (void)p;
    return GMX_MIN_SIZE;
}

GMX_EXPORT unsigned int gm_mtu(struct gm_port *p)
{
    (void)p;
    return GMX_MTU;
}

GMX_EXPORT unsigned int gm_num_ports(struct gm_port *p)
{
    (void)p;
    return GMX_NUM_PORTS;
}

GMX_EXPORT unsigned int gm_num_send_tokens(struct gm_port *p)
{
    (void)p;
    return GMX_SEND_TOKENS;
}

GMX_EXPORT unsigned int gm_num_receive_tokens(struct gm_port *p)
{
    (void)p;
    return GMX_RECV_TOKENS;
}

GMX_EXPORT int gm_alloc_send_token(struct gm_port *p, unsigned int priority)
{
    if (!p || priority >= GM_NUM_PRIORITIES || p->token_pool[priority] <= 0) return 0;
    p->token_pool[priority]--;
    return 1;
}

GMX_EXPORT void gm_free_send_tokens(struct gm_port *p, unsigned int priority, unsigned int count)
{
    if (!p || priority >= GM_NUM_PRIORITIES) return;
    long v = (long)p->token_pool[priority] + count;
    p->token_pool[priority] = v > 1 << 30 ? 1 << 30 : (int)v;
}

GMX_EXPORT void gm_free_send_token(struct gm_port *p, unsigned int priority)
{
    gm_free_send_tokens(p, priority, 1);
}

GMX_EXPORT int gm_send_token_available(struct gm_port *p, unsigned int priority)
{
    return p && priority < GM_NUM_PRIORITIES && p->token_pool[priority] > 0;
}

GMX_EXPORT gm_status_t gm_set_acceptable_sizes(struct gm_port *p, enum gm_priority priority,
                                               gm_size_t mask)
{
    if (!p || (unsigned)priority >= GM_NUM_PRIORITIES) return GM_INVALID_PARAMETER;
    gmx_port_lock(p);
    p->acceptable[priority] = mask;
    if (p->wait_list) p->kick = 1; /* a waiting message may be rejected now */
    gmx_port_unlock(p);
    return GM_SUCCESS;
}
