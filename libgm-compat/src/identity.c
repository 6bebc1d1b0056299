/* identity.c - node ids, host names, global and unique ids, all from the
 * node map (the same on every node, so global id == node id). */
#include "gm_internal.h"

#include <string.h>

GMX_EXPORT gm_status_t gm_get_node_id(struct gm_port *p, unsigned int *n)
{
    if (!p || !n) return GM_INVALID_PARAMETER;
    *n = p->node_id;
    return GM_SUCCESS;
}

GMX_EXPORT unsigned int gm_get_port_id(struct gm_port *p)
{
    return p ? p->port_id : 0;
}

GMX_EXPORT gm_status_t gm_node_id_to_global_id(struct gm_port *p, unsigned int node_id,
                                               unsigned int *global_id)
{
    if (!p || !global_id || !gmx_node_find(node_id)) return GM_INVALID_PARAMETER;
    *global_id = node_id;
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_global_id_to_node_id(struct gm_port *p, unsigned int global_id,
                                               unsigned int *node_id)
{
    if (!p || !node_id || !gmx_node_find(global_id)) return GM_INVALID_PARAMETER;
    *node_id = global_id;
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_get_host_name(struct gm_port *p, char name[GM_MAX_HOST_NAME_LEN])
{
    const struct gmx_node *n = p ? gmx_node_find(p->node_id) : NULL;
    if (!n || !name) return GM_INVALID_PARAMETER;
    snprintf(name, GM_MAX_HOST_NAME_LEN, "%s", n->host);
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_host_name_to_node_id_ex(struct gm_port *p, unsigned int timeout_usecs,
                                                  const char *host_name, unsigned int *node_id)
{
    (void)timeout_usecs;
    const struct gmx_node *n = p ? gmx_node_by_name(host_name) : NULL;
    if (!node_id) return GM_INVALID_PARAMETER;
    if (!n) {
        *node_id = GM_NO_SUCH_NODE_ID;
        return GM_INVALID_PARAMETER;
    }
    *node_id = n->id;
    return GM_SUCCESS;
}

GMX_EXPORT unsigned int gm_host_name_to_node_id(struct gm_port *p, char *host_name)
{
    unsigned id = GM_NO_SUCH_NODE_ID;
    gm_host_name_to_node_id_ex(p, 0, host_name, &id);
    return id;
}

GMX_EXPORT gm_status_t gm_node_id_to_host_name_ex(struct gm_port *p, unsigned int timeout_usecs,
                                                  unsigned int node_id,
                                                  char (*name)[GM_MAX_HOST_NAME_LEN + 1])
{
    (void)timeout_usecs;
    const struct gmx_node *n = p ? gmx_node_find(node_id) : NULL;
    if (!n || !name) return GM_INVALID_PARAMETER;
    snprintf(*name, GM_MAX_HOST_NAME_LEN + 1, "%s", n->host);
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_node_set_address(unsigned int node_id, const char *ipv4,
                                           unsigned int port_base)
{
    return gmx_node_set_address(node_id, ipv4, port_base) ? GM_INVALID_PARAMETER : GM_SUCCESS;
}

GMX_EXPORT char *gm_node_id_to_host_name(struct gm_port *p, unsigned int node_id)
{
    /* The node map lives until the last gm_finalize. */
    struct gmx_node *n = p ? (struct gmx_node *)gmx_node_find(node_id) : NULL;
    return n ? n->host : NULL;
}

static void unique_of(unsigned id, char unique[6])
{
    unique[0] = 0x02; /* locally administered */
    unique[1] = 0x47; /* 'G' */
    unique[2] = 0x4d; /* 'M' */
    unique[3] = 0;
    unique[4] = (char)(id >> 8);
    unique[5] = (char)id;
}

GMX_EXPORT gm_status_t gm_node_id_to_unique_id(struct gm_port *p, unsigned int n, char unique[6])
{
    if (!p || !unique || !gmx_node_find(n)) return GM_INVALID_PARAMETER;
    unique_of(n, unique);
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_get_unique_board_id(struct gm_port *p, char unique[6])
{
    return p ? gm_node_id_to_unique_id(p, p->node_id, unique) : GM_INVALID_PARAMETER;
}

GMX_EXPORT gm_status_t gm_unique_id(struct gm_port *p, char unique[6])
{
    return gm_get_unique_board_id(p, unique);
}

GMX_EXPORT gm_status_t gm_get_mapper_unique_id(struct gm_port *p, char unique[6])
{
    return gm_get_unique_board_id(p, unique);
}

GMX_EXPORT gm_status_t gm_unique_id_to_node_id(struct gm_port *p, char unique[6],
                                               unsigned int *node_id)
{
    if (!p || !unique || !node_id) return GM_INVALID_PARAMETER;
    unsigned id = (unsigned)(unsigned char)unique[4] << 8 | (unsigned char)unique[5];
    char want[6];
    unique_of(id, want);
    if (memcmp(want, unique, 6) != 0 || !gmx_node_find(id)) {
        *node_id = GM_NO_SUCH_NODE_ID;
        return GM_INVALID_PARAMETER;
    }
    *node_id = id;
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_max_node_id(struct gm_port *p, unsigned int *n)
{
    if (!p || !n) return GM_INVALID_PARAMETER;
    *n = GMX_MAX_NODE_ID;
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_max_node_id_in_use(struct gm_port *p, unsigned int *n)
{
    if (!p || !n) return GM_INVALID_PARAMETER;
    *n = gmx_cfg.max_node_id;
    return GM_SUCCESS;
}

GMX_EXPORT gm_status_t gm_max_node_id_inuse(struct gm_port *p, unsigned int *n)
{
    return gm_max_node_id_in_use(p, n);
}

GMX_EXPORT gm_status_t gm_get_node_type(struct gm_port *p, int *node_type)
{
    if (!p || !node_type) return GM_INVALID_PARAMETER;
    *node_type = 0; /* a GM host */
    return GM_SUCCESS;
}
