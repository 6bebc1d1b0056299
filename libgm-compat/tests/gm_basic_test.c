/* Suite gm_basic: constants, size-class formulas, byte order, the event
 * layout, ports, identity and memory calls (gm-api.md sections 1-4). */
#include "gmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_api_version_macros(void)
{
    GMT_EQ("GM_API_VERSION default", GM_API_VERSION, 0x20010);
    GMT_EQ("GM_API_VERSION_2_0", GM_API_VERSION_2_0, 0x200);
    GMT_EQ("GM_API_VERSION_2_0_6", GM_API_VERSION_2_0_6, 0x20006);
    GMT_EQ("GM_API_VERSION_2_0_12", GM_API_VERSION_2_0_12, 0x2000c);
    GMT_EQ("GM_API_VERSION_1_6", GM_API_VERSION_1_6, 0x106);
    GMT_EQ("GM_API_MAJOR", GM_API_MAJOR, 2);
    GMT_EQ("GM_API_MINOR", GM_API_MINOR, 0);
    GMT_EQ("GM_API_SUBMINOR", GM_API_SUBMINOR, 16);
}

static void test_constants(void)
{
    GMT_EQ("GM_LOW_PRIORITY", GM_LOW_PRIORITY, 0);
    GMT_EQ("GM_HIGH_PRIORITY", GM_HIGH_PRIORITY, 1);
    GMT_EQ("GM_NUM_PRIORITIES", GM_NUM_PRIORITIES, 2);
    GMT_EQ("GM_NO_SUCH_NODE_ID", GM_NO_SUCH_NODE_ID, 0);
    GMT_EQ("GM_MAX_HOST_NAME_LEN", GM_MAX_HOST_NAME_LEN, 128);
    GMT_EQ("GM_MAX_PORT_NAME_LEN", GM_MAX_PORT_NAME_LEN, 32);
    GMT_EQ("GM_RDMA_GRANULARITY", GM_RDMA_GRANULARITY, 64);
    GMT_EQ("GM_DMA_GRANULARITY", GM_DMA_GRANULARITY, 8);
    GMT_EQ("GM_SEND_TIMED_OUT", GM_SEND_TIMED_OUT, 15);
    GMT_EQ("GM_SEND_REJECTED", GM_SEND_REJECTED, 16);
    GMT_EQ("GM_SEND_TARGET_PORT_CLOSED", GM_SEND_TARGET_PORT_CLOSED, 17);
    GMT_EQ("GM_SEND_TARGET_NODE_UNREACHABLE", GM_SEND_TARGET_NODE_UNREACHABLE, 18);
    GMT_EQ("GM_SEND_DROPPED", GM_SEND_DROPPED, 19);
    GMT_EQ("GM_TIMED_OUT", GM_TIMED_OUT, 35);
    GMT_EQ("GM_INVALID_PORT_NUMBER", GM_INVALID_PORT_NUMBER, 42);
    GMT_EQ("GM_RECV_EVENT", GM_RECV_EVENT, 11);
    GMT_EQ("GM_FAST_HIGH_PEER_RECV_EVENT", GM_FAST_HIGH_PEER_RECV_EVENT, 18);
    GMT_EQ("GM_ALARM_EVENT", GM_ALARM_EVENT, 2);
    GMT_EQ("_GM_SLEEP_EVENT", _GM_SLEEP_EVENT, 4);
    GMT_EQ("sizeof(gm_remote_ptr_t)", sizeof(gm_remote_ptr_t), 8);
    GMT_EQ("sizeof(gm_up_t)", sizeof(gm_up_t), sizeof(void *));
    GMT_TRUE("gm_strerror(GM_SUCCESS) is text", gm_strerror(GM_SUCCESS) != NULL);
    GMT_TRUE("gm_strerror(GM_SEND_DROPPED) is text", gm_strerror(GM_SEND_DROPPED) != NULL);
    GMT_TRUE("gm_strerror(unknown code) is text", gm_strerror((gm_status_t)9999) != NULL);
}

static void test_size_formulas(void)
{
    static const struct {
        unsigned long len;
        unsigned size;
    } cases[] = {
        {0, 3},     {1, 4},     {8, 4},     {9, 5},      {24, 5},     {25, 6},       {4088, 12},
        {4089, 13}, {8184, 13}, {8185, 14}, {65528, 16}, {65529, 17}, {1048576, 21},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "gm_min_size_for_length(%lu)", cases[i].len);
        GMT_EQ(what, gm_min_size_for_length(cases[i].len), cases[i].size);
    }
    for (unsigned s = 3; s <= 30; s++) {
        char what[64];
        snprintf(what, sizeof what, "gm_max_length_for_size(%u)", s);
        GMT_EQ(what, gm_max_length_for_size(s), (1ull << s) - 8);
        snprintf(what, sizeof what, "round trip size %u", s);
        GMT_EQ(what, gm_min_size_for_length(gm_max_length_for_size(s)), s);
    }
    GMT_EQ("gm_max_length_for_size(2) (undefined: 0)", gm_max_length_for_size(2), 0);
    GMT_EQ("gm_max_length_for_size(0) (undefined: 0)", gm_max_length_for_size(0), 0);
}

static void test_byte_order(void)
{
    GMT_EQ("ntoh(hton u16)", gm_ntoh_u16(gm_hton_u16(0x1234)), 0x1234);
    GMT_EQ("ntoh(hton u32)", gm_ntoh_u32(gm_hton_u32(0x12345678u)), 0x12345678u);
    GMT_EQ("ntoh(hton u64)", gm_ntoh_u64(gm_hton_u64(0x0102030405060708ull)), 0x0102030405060708ll);
    GMT_EQ("ntoh(hton u8)", gm_ntoh_u8(gm_hton_u8(0xab)), 0xab);
    GMT_EQ("gm_ntohl(gm_htonl)", gm_ntohl(gm_htonl(77)), 77);
    GMT_EQ("gm_ntohs(gm_htons)", gm_ntohs(gm_htons(77)), 77);
    GMT_EQ("gm_ntohc(gm_htonc)", gm_ntohc(gm_htonc(77)), 77);
    GMT_EQ("gm_ntohll(gm_htonll)", gm_ntohll(gm_htonll(77)), 77);
    /* Network order means big-endian bytes in memory. */
    gm_u32_n_t n = gm_hton_u32(0x01020304u);
    unsigned char b[4];
    memcpy(b, &n, 4);
    GMT_EQ("hton_u32 first byte is the most significant", b[0], 1);
    GMT_EQ("hton_u32 last byte is the least significant", b[3], 4);
}

static void test_event_layout(void)
{
    gm_recv_event_t e;
    GMT_EQ("sizeof(gm_recv_event_t)", sizeof e, 64);
    memset(&e, 0, sizeof e);
    ((unsigned char *)&e)[63] = GM_HIGH_RECV_EVENT;
    GMT_EQ("event type is the last byte", GM_RECV_EVENT_TYPE(&e), GM_HIGH_RECV_EVENT);
}

static void test_ports(void)
{
    GMT_TRUE("gm_num_ports(NULL) >= 8", gm_num_ports(NULL) >= 8);
    struct gm_port *p = NULL, *q = NULL;
    unsigned id = 0;
    gm_status_t st = gmt_open_port(&p, &id, "basic");
    GMT_EQ("gm_open on a free port", st, GM_SUCCESS);
    if (st != GM_SUCCESS) return;
    GMT_EQ("gm_get_port_id", gm_get_port_id(p), id);
    GMT_EQ("gm_num_ports(port) == gm_num_ports(NULL)", gm_num_ports(p), gm_num_ports(NULL));
    st = gm_open(&q, 0, id, "basic-again", (enum gm_api_version)GM_API_VERSION_2_0);
    GMT_TRUE("second gm_open of an open port fails", st != GM_SUCCESS);
    GMT_EQ("second gm_open of an open port is GM_BUSY", st, GM_BUSY);
    st =
        gm_open(&q, 0, gm_num_ports(NULL), "out-of-range", (enum gm_api_version)GM_API_VERSION_2_0);
    GMT_TRUE("gm_open(port id == gm_num_ports) fails", st != GM_SUCCESS);
    st = gm_open(&q, 0, 100000, "out-of-range", (enum gm_api_version)GM_API_VERSION_2_0);
    GMT_TRUE("gm_open(port 100000) fails", st != GM_SUCCESS);
    st = gm_open(&q, 99, 2, "no-board", (enum gm_api_version)GM_API_VERSION_2_0);
    GMT_TRUE("gm_open(unit 99) fails", st != GM_SUCCESS);
    /* Ports 0, 1 and 3 belong to the daemon, mapper and ethernet. */
    static const unsigned reserved[] = {0, 1, 3};
    for (int i = 0; i < 3; i++) {
        st = gm_open(&q, 0, reserved[i], "reserved", (enum gm_api_version)GM_API_VERSION_2_0);
        char what[64];
        snprintf(what, sizeof what, "gm_open(reserved port %u) fails", reserved[i]);
        GMT_TRUE(what, st != GM_SUCCESS);
        if (st == GM_SUCCESS) gm_close(q);
    }
    GMT_TRUE("send tokens > 0", gm_num_send_tokens(p) > 0);
    GMT_TRUE("receive tokens > 0", gm_num_receive_tokens(p) > 0);
    GMT_EQ("gm_min_message_size", gm_min_message_size(p), 3);
    GMT_EQ("gm_mtu", gm_mtu(p), 4096);
    gm_close(p);
    /* A closed port id can be opened again. */
    st = gm_open(&p, 0, id, "reopen", (enum gm_api_version)GM_API_VERSION_2_0);
    GMT_EQ("gm_open after gm_close", st, GM_SUCCESS);
    if (st == GM_SUCCESS) gm_close(p);
}

static void test_init_refcount(void)
{
    /* The suite holds one gm_init; a nested pair must leave GM usable. */
    GMT_EQ("nested gm_init", gm_init(), GM_SUCCESS);
    gm_finalize();
    struct gm_port *p = NULL;
    unsigned id;
    gm_status_t st = gmt_open_port(&p, &id, "after-nested-finalize");
    GMT_EQ("gm_open after a balanced nested init/finalize", st, GM_SUCCESS);
    if (st == GM_SUCCESS) gm_close(p);
}

static void test_identity(void)
{
    struct gm_port *p = NULL;
    unsigned id, node = 0, global = 0, back = 0;
    if (gmt_open_port(&p, &id, "identity") != GM_SUCCESS) {
        GMT_TRUE_FATAL("open a port", 0);
        return;
    }
    GMT_EQ("gm_get_node_id", gm_get_node_id(p, &node), GM_SUCCESS);
    GMT_TRUE("own node id is not GM_NO_SUCH_NODE_ID", node != GM_NO_SUCH_NODE_ID);
    GMT_EQ("gm_node_id_to_global_id", gm_node_id_to_global_id(p, node, &global), GM_SUCCESS);
    GMT_EQ("gm_global_id_to_node_id", gm_global_id_to_node_id(p, global, &back), GM_SUCCESS);
    GMT_EQ("global id round trip", back, node);

    char name[GM_MAX_HOST_NAME_LEN + 1];
    memset(name, 0, sizeof name);
    GMT_EQ("gm_get_host_name", gm_get_host_name(p, name), GM_SUCCESS);
    GMT_TRUE("host name is not empty", name[0] != 0);
    GMT_EQ("gm_host_name_to_node_id(own name)", gm_host_name_to_node_id(p, name), node);
    unsigned by_name = 0;
    GMT_EQ("gm_host_name_to_node_id_ex(own name)",
           gm_host_name_to_node_id_ex(p, 1000000, name, &by_name), GM_SUCCESS);
    GMT_EQ("gm_host_name_to_node_id_ex result", by_name, node);
    char *n2 = gm_node_id_to_host_name(p, node);
    GMT_TRUE("gm_node_id_to_host_name(own id) is not NULL", n2 != NULL);
    if (n2) GMT_TRUE("gm_node_id_to_host_name(own id) == own name", strcmp(n2, name) == 0);
    char n3[GM_MAX_HOST_NAME_LEN + 1];
    GMT_EQ("gm_node_id_to_host_name_ex", gm_node_id_to_host_name_ex(p, 1000000, node, &n3),
           GM_SUCCESS);

    char uid[6] = {0}, uid2[6] = {0};
    unsigned from_uid = 0;
    GMT_EQ("gm_get_unique_board_id", gm_get_unique_board_id(p, uid), GM_SUCCESS);
    GMT_EQ("gm_unique_id", gm_unique_id(p, uid2), GM_SUCCESS);
    GMT_TRUE("gm_unique_id == gm_get_unique_board_id", memcmp(uid, uid2, 6) == 0);
    GMT_EQ("gm_unique_id_to_node_id", gm_unique_id_to_node_id(p, uid, &from_uid), GM_SUCCESS);
    GMT_EQ("unique id maps to own node id", from_uid, node);

    unsigned max = 0, in_use = 0;
    GMT_EQ("gm_max_node_id", gm_max_node_id(p, &max), GM_SUCCESS);
    GMT_EQ("gm_max_node_id_in_use", gm_max_node_id_in_use(p, &in_use), GM_SUCCESS);
    GMT_TRUE("own node id <= max node id in use", node <= in_use);
    GMT_TRUE("max node id in use <= max node id", in_use <= max);

    GMT_EQ("unknown host name -> GM_NO_SUCH_NODE_ID",
           gm_host_name_to_node_id(p, "no-such-host.invalid"), GM_NO_SUCH_NODE_ID);
    uint64_t t0 = gmt_now_us();
    gm_status_t st = gm_host_name_to_node_id_ex(p, 200000, "no-such-host.invalid", &by_name);
    GMT_TRUE("gm_host_name_to_node_id_ex(unknown) fails", st != GM_SUCCESS);
    GMT_TRUE("gm_host_name_to_node_id_ex(unknown) returns within 5 s", gmt_now_us() - t0 < 5000000);
    GMT_TRUE("gm_node_id_to_host_name(unknown id) is NULL",
             gm_node_id_to_host_name(p, 60000) == NULL);
    gm_close(p);
}

static void test_memory(void)
{
    struct gm_port *p = NULL;
    unsigned id;
    if (gmt_open_port(&p, &id, "memory") != GM_SUCCESS) {
        GMT_TRUE_FATAL("open a port", 0);
        return;
    }
    char *m = gm_dma_malloc(p, 100000);
    GMT_TRUE("gm_dma_malloc(100000)", m != NULL);
    if (m) {
        memset(m, 0x5a, 100000);
        gm_dma_free(p, m);
    }
    unsigned char *c = gm_dma_calloc(p, 100, 40);
    GMT_TRUE("gm_dma_calloc(100, 40)", c != NULL);
    if (c) {
        int zero = 1;
        for (int i = 0; i < 4000; i++)
            zero &= c[i] == 0;
        GMT_TRUE("gm_dma_calloc memory is zeroed", zero);
        gm_dma_free(p, c);
    }
    size_t len = 3 * 4096;
    char *u = malloc(len);
    GMT_EQ("gm_register_memory", gm_register_memory(p, u, len), GM_SUCCESS);
    GMT_EQ("gm_register_memory nested", gm_register_memory(p, u, len), GM_SUCCESS);
    GMT_EQ("gm_deregister_memory (inner)", gm_deregister_memory(p, u, len), GM_SUCCESS);
    GMT_EQ("gm_deregister_memory (outer)", gm_deregister_memory(p, u, len), GM_SUCCESS);
    free(u);

    char src[32] = "memorize me", dst[32] = {0};
    void *r = gm_memorize_message(src, dst, sizeof src);
    GMT_TRUE("gm_memorize_message copies", strcmp(dst, "memorize me") == 0);
    GMT_TRUE("gm_memorize_message returns the buffer", r == dst);
    r = gm_memorize_message(dst, dst, sizeof dst);
    GMT_TRUE("gm_memorize_message(same) returns the buffer", r == dst);
    gm_close(p);
}

static void test_send_token_pool(void)
{
    struct gm_port *p = NULL;
    unsigned id;
    if (gmt_open_port(&p, &id, "pool") != GM_SUCCESS) {
        GMT_TRUE_FATAL("open a port", 0);
        return;
    }
    GMT_EQ("pool starts empty (low)", gm_alloc_send_token(p, GM_LOW_PRIORITY) != 0, 0);
    GMT_EQ("pool starts empty (high)", gm_alloc_send_token(p, GM_HIGH_PRIORITY) != 0, 0);
    gm_free_send_tokens(p, GM_LOW_PRIORITY, 3);
    gm_free_send_token(p, GM_LOW_PRIORITY);
    for (int i = 0; i < 4; i++)
        GMT_TRUE("alloc from a pool of 4 (low)", gm_alloc_send_token(p, GM_LOW_PRIORITY) != 0);
    GMT_EQ("fifth alloc from a pool of 4 fails", gm_alloc_send_token(p, GM_LOW_PRIORITY) != 0, 0);
    GMT_EQ("high pool unaffected by low frees", gm_alloc_send_token(p, GM_HIGH_PRIORITY) != 0, 0);
    gm_free_send_token(p, GM_HIGH_PRIORITY);
    GMT_TRUE("alloc after free (high)", gm_alloc_send_token(p, GM_HIGH_PRIORITY) != 0);
    GMT_EQ("high pool empty again", gm_alloc_send_token(p, GM_HIGH_PRIORITY) != 0, 0);
    gm_close(p);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"API version macros", test_api_version_macros},
        {"constants and status codes", test_constants},
        {"size-class formulas", test_size_formulas},
        {"byte order helpers", test_byte_order},
        {"receive event layout", test_event_layout},
        {"ports: open, busy, range, reserved, reopen", test_ports},
        {"gm_init reference count", test_init_refcount},
        {"identity: node, global, host name, unique id", test_identity},
        {"memory: dma malloc/calloc, register nesting, memorize", test_memory},
        {"send token pool starts empty, per priority", test_send_token_pool},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_basic", tests);
}
