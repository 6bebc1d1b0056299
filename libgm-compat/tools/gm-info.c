/* gm-info: what gm_board_info showed for a Myrinet board, for libgm-compat:
 * provider, this node's id, host name and board id, the node map, port
 * states, token counts and size limits.
 *
 *   gm-info [--port N] [--no-probe]
 *
 * It opens one port (the first free among 2, 4, 5, ... unless --port) to ask
 * GM; port states come from trying gm_open on each port (GM_BUSY = in use),
 * which --no-probe skips. */
#include <gm.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The provider is not part of the GM API; report what the library's
 * documented defaults (README) select from the environment. */
static const char *provider_in_use(char *buf, size_t n)
{
    const char *p = getenv("GM_PROVIDER");
    if (p && *p) {
        snprintf(buf, n, "%s (GM_PROVIDER)", p);
        return buf;
    }
    const char *map = getenv("GM_NODE_MAP");
    const char *inl = getenv("GM_NODES");
    int has_addr = 0;
    if (map && *map) {
        FILE *f = fopen(map, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *hash = strchr(line, '#');
            if (hash) *hash = 0;
            char a[16], b[256], c[256];
            if (sscanf(line, "%15s %255s %255s", a, b, c) == 3) has_addr = 1;
        }
        if (f) fclose(f);
    } else if (inl && *inl) {
        char *copy = strdup(inl), *save = NULL;
        for (char *e = strtok_r(copy, ";", &save); e; e = strtok_r(NULL, ";", &save)) {
            char a[16], b[256], c[256];
            if (sscanf(e, "%15s %255s %255s", a, b, c) == 3) has_addr = 1;
        }
        free(copy);
    }
    snprintf(buf, n, "%s (default for a node map %s addresses)", has_addr ? "tcp;ofi_rxm" : "shm",
             has_addr ? "with" : "without");
    return buf;
}

static void print_uid(const char *uid)
{
    for (int i = 0; i < 6; i++)
        printf("%s%02x", i ? ":" : "", (unsigned char)uid[i]);
}

int main(int argc, char **argv)
{
    int want_port = -1, probe = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            want_port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-probe"))
            probe = 0;
        else {
            fprintf(stderr, "usage: gm-info [--port N] [--no-probe]\n");
            return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 64 : 0;
        }
    }
    gm_status_t st = gm_init();
    if (st != GM_SUCCESS) {
        gm_perror("gm-info: gm_init", st);
        return 1;
    }
    unsigned nports = gm_num_ports(NULL);
    struct gm_port *p = NULL;
    unsigned my_port = 0;
    if (want_port >= 0) {
        st =
            gm_open(&p, 0, (unsigned)want_port, "gm-info", (enum gm_api_version)GM_API_VERSION_2_0);
        my_port = (unsigned)want_port;
    } else {
        st = GM_BUSY;
        for (unsigned id = 2; id < nports && st != GM_SUCCESS; id++) {
            if (id == 3) continue;
            st = gm_open(&p, 0, id, "gm-info", (enum gm_api_version)GM_API_VERSION_2_0);
            my_port = id;
        }
    }
    if (st != GM_SUCCESS) {
        fprintf(stderr, "gm-info: cannot open a GM port: %s\n", gm_strerror(st));
        gm_finalize();
        return 1;
    }

    char prov[300], host[GM_MAX_HOST_NAME_LEN + 1] = "", uid[6] = {0};
    unsigned node = 0, global = 0, max_id = 0, in_use = 0;
    gm_get_node_id(p, &node);
    gm_node_id_to_global_id(p, node, &global);
    gm_get_host_name(p, host);
    gm_get_unique_board_id(p, uid);
    gm_max_node_id(p, &max_id);
    gm_max_node_id_in_use(p, &in_use);

    printf("GM board info (libgm-compat, GM API %d.%d.%d)\n", GM_API_MAJOR, GM_API_MINOR,
           GM_API_SUBMINOR);
    printf("  unit             0\n");
    printf("  provider         %s\n", provider_in_use(prov, sizeof prov));
    printf("  node id          %u (global id %u)\n", node, global);
    printf("  host name        %s\n", host);
    printf("  board id         ");
    print_uid(uid);
    printf("\n  max node id      %u (in use: %u)\n", max_id, in_use);
    printf("  ports            %u (0 daemon, 1 mapper, 3 ethernet reserved)\n", nports);
    printf("  send tokens      %u per port\n", gm_num_send_tokens(p));
    printf("  receive tokens   %u per port\n", gm_num_receive_tokens(p));
    printf("  min message size %u (size class)\n", gm_min_message_size(p));
    printf("  mtu              %u bytes\n", gm_mtu(p));
    printf("  size classes     3 (%lu B) .. 21 (%lu B, 1 MiB messages) .. 31 (%lu B)\n",
           (unsigned long)gm_max_length_for_size(3), (unsigned long)gm_max_length_for_size(21),
           (unsigned long)gm_max_length_for_size(31));

    if (probe) {
        printf("\nport states:\n");
        for (unsigned id = 0; id < nports; id++) {
            const char *state;
            if (id == my_port) {
                state = "open (this program)";
            } else {
                struct gm_port *q = NULL;
                gm_status_t s =
                    gm_open(&q, 0, id, "gm-info-probe", (enum gm_api_version)GM_API_VERSION_2_0);
                if (s == GM_SUCCESS) {
                    gm_close(q);
                    state = "free";
                } else if (id == 0 || id == 1 || id == 3) {
                    state = "reserved";
                } else if (s == GM_BUSY) {
                    state = "in use";
                } else {
                    state = gm_strerror(s);
                }
            }
            printf("  port %2u  %s\n", id, state);
        }
    }

    printf("\nnode map (%u node%s in use):\n", in_use, in_use == 1 ? "" : "s");
    printf("  %5s  %-24s %s\n", "id", "host", "board id");
    unsigned shown = 0;
    for (unsigned id = 1; id <= in_use && id <= 65535 && shown < 4096; id++) {
        char name[GM_MAX_HOST_NAME_LEN + 1];
        if (gm_node_id_to_host_name_ex(p, 1000000, id, &name) != GM_SUCCESS) continue;
        char u[6] = {0};
        gm_node_id_to_unique_id(p, id, u);
        printf("  %5u  %-24s ", id, name);
        print_uid(u);
        printf("%s\n", id == node ? "  (this node)" : "");
        shown++;
    }
    gm_close(p);
    gm_finalize();
    return 0;
}
