/* Suite gm_config: gm_compat_configure (gm_compat.h), the configuration call
 * that stands in for the GM_* environment.  The suite holds one gm_init
 * (gmt.c); each test gives it back first, since the call only acts while GM
 * is not initialized, and takes it again at the end. */
#include "gmt.h"

#include <gm_compat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The GM_* variables this suite sets to values the call must override, and
 * what they were (gmt.c's setup: shm, or tcp with a one-node map). */
static const char *const decoys[][2] = {
    {"GM_NODES", "1 decoy-one; 7 decoy-seven"},
    {"GM_NODE_ID", "7"},
    {"GM_PROVIDER", "no-such-provider"},
    {"GM_SEND_TIMEOUT_MS", "3600000"},
};
#define NDECOYS (sizeof decoys / sizeof decoys[0])
static char *saved[NDECOYS];

static void decoy_env(void)
{
    for (size_t i = 0; i < NDECOYS; i++) {
        const char *v = getenv(decoys[i][0]);
        saved[i] = v ? strdup(v) : NULL;
        setenv(decoys[i][0], decoys[i][1], 1);
    }
}

static void restore_env(void)
{
    for (size_t i = 0; i < NDECOYS; i++) {
        if (saved[i])
            setenv(decoys[i][0], saved[i], 1);
        else
            unsetenv(decoys[i][0]);
        free(saved[i]);
        saved[i] = NULL;
    }
}

static void test_init_fills_defaults(void)
{
    gm_compat_config_t c;
    memset(&c, 0x5a, sizeof c);
    gm_compat_config_init(&c);
    GMT_EQ("version", c.version, GM_COMPAT_CONFIG_VERSION);
    GMT_TRUE("nodes unset", c.nodes == NULL);
    GMT_TRUE("provider unset", c.provider == NULL);
    GMT_TRUE("shm_namespace unset", c.shm_namespace == NULL);
    GMT_EQ("node_id unset", c.node_id, 0);
    GMT_EQ("port_base unset", c.port_base, 0);
    GMT_EQ("send_timeout_ms unset", c.send_timeout_ms, 0);
}

/* Issue 31 item 9: a send to a port not open yet is retried long enough for a person to
 * start the receiver: GM_SEND_TIMEOUT_MS unset means at least a minute (it was 1 s). The
 * table's default is what config.c reads when the variable is unset. */
static void test_send_timeout_default(void)
{
    unsigned n = 0;
    const gm_compat_knob_t *k = gm_compat_knobs(&n);
    long long def = -1;
    for (unsigned i = 0; k && i < n; i++)
        if (!strcmp(k[i].name, "GM_SEND_TIMEOUT_MS")) def = k[i].def;
    GMT_TRUE("GM_SEND_TIMEOUT_MS defaults to at least 60000 ms", def >= 60000);
}

static void test_busy_while_initialized(void)
{
    gm_compat_config_t c;
    gm_compat_config_init(&c);
    GMT_EQ("configure while the suite holds gm_init", gm_compat_configure(&c), GM_BUSY);
    GMT_EQ("configure(NULL) while initialized", gm_compat_configure(NULL), GM_BUSY);
}

static void test_rejects_bad_settings(void)
{
    gm_finalize();
    gm_compat_config_t c;
    gm_compat_config_init(&c);
    c.version = 99;
    GMT_EQ("unknown version", gm_compat_configure(&c), GM_INVALID_PARAMETER);
    gm_compat_config_init(&c);
    c.node_id = 65536;
    GMT_EQ("node id above 65535", gm_compat_configure(&c), GM_INVALID_PARAMETER);
    gm_compat_config_init(&c);
    c.port_base = 65520;
    GMT_EQ("port base above 65519", gm_compat_configure(&c), GM_INVALID_PARAMETER);
    gm_compat_config_init(&c);
    c.send_timeout_ms = 3600001;
    GMT_EQ("send timeout above an hour", gm_compat_configure(&c), GM_INVALID_PARAMETER);
    c.version = 1; /* callers built before send_timeout_ms: the field is not read */
    GMT_EQ("version 1 ignores send_timeout_ms", gm_compat_configure(&c), GM_SUCCESS);
    GMT_EQ("forget them", gm_compat_configure(NULL), GM_SUCCESS);
    gm_compat_config_init(&c);
    c.shm_namespace = "has/slash";
    GMT_EQ("namespace with '/'", gm_compat_configure(&c), GM_INVALID_PARAMETER);
    c.shm_namespace = "an-overly-long-namespace-of-more-than-forty-chars";
    GMT_EQ("namespace over 40 chars", gm_compat_configure(&c), GM_INVALID_PARAMETER);
    /* A map with errors is found by gm_init, as with GM_NODES. */
    gm_compat_config_init(&c);
    c.nodes = "1 ok; zero bad-line";
    GMT_EQ("a map is taken as given", gm_compat_configure(&c), GM_SUCCESS);
    GMT_EQ("gm_init with a bad map fails", gm_init(), GM_FAILURE);
    GMT_EQ("forget the settings", gm_compat_configure(NULL), GM_SUCCESS);
    GMT_EQ("gm_init again (suite's reference)", gm_init(), GM_SUCCESS);
}

/* The call's settings win over the environment, which it leaves alone. */
static void test_overrides_environment(void)
{
    gm_finalize();
    decoy_env();
    char ns[64], nodes[64];
    snprintf(ns, sizeof ns, "gmtcfg%ld", (long)getpid());
    snprintf(nodes, sizeof nodes, "1 alpha; 2 beta");
    gm_compat_config_t c;
    gm_compat_config_init(&c);
    c.nodes = nodes;
    c.node_id = 2;
    c.provider = "shm";
    c.shm_namespace = ns;
    c.send_timeout_ms = 200; /* the environment says an hour */
    GMT_EQ("configure", gm_compat_configure(&c), GM_SUCCESS);
    /* The library keeps copies. */
    memset(nodes, 'x', sizeof nodes - 1);
    strcpy(ns, "clobbered");
    GMT_EQ("gm_init", gm_init(), GM_SUCCESS);
    GMT_TRUE("GM_NODES untouched", strcmp(getenv("GM_NODES"), "1 decoy-one; 7 decoy-seven") == 0);
    GMT_TRUE("GM_NODE_ID untouched", strcmp(getenv("GM_NODE_ID"), "7") == 0);
    struct gmt_pair pr;
    if (gmt_pair_open(&pr) != 0) {
        GMT_TRUE("open two ports on the configured node", 0);
    } else {
        GMT_EQ("own node id from the call", pr.node_a, 2);
        GMT_EQ("beta is node 2", gm_host_name_to_node_id(pr.a, "beta"), 2);
        GMT_EQ("decoy map unknown", gm_host_name_to_node_id(pr.a, "decoy-seven"),
               GM_NO_SUCH_NODE_ID);
        /* In the directory of the host, never the process's TMPDIR (README, "shm addresses"). */
        char path[256];
        snprintf(path, sizeof path, "/dev/shm/gmtcfg%ld-2-%u.lock", (long)getpid(), pr.port_a);
        GMT_TRUE("lock file in the configured namespace, in /dev/shm", access(path, F_OK) == 0);
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/gmtcfg%ld-2-%u.lock", tmp && *tmp ? tmp : "/tmp",
                 (long)getpid(), pr.port_a);
        GMT_TRUE("no lock file in TMPDIR", access(path, F_OK) != 0);
        GMT_EQ("configure while ports are open", gm_compat_configure(NULL), GM_BUSY);
        /* A message from a to b through the configured provider and namespace. */
        void *in = gm_dma_malloc(pr.b, 64), *out = gm_dma_malloc(pr.a, 64);
        GMT_TRUE_FATAL("dma buffers", in && out);
        gm_provide_receive_buffer(pr.b, in, 7, GM_LOW_PRIORITY);
        gmt_fill(out, 40, 11);
        struct gmt_send sent = {0};
        gm_send_with_callback(pr.a, out, 7, 40, GM_LOW_PRIORITY, pr.node_b, pr.port_b, gmt_send_cb,
                              &sent);
        struct gmt_msg m;
        GMT_TRUE("message arrives", gmt_wait_msg(pr.b, pr.a, &m, GMT_WAIT_US, NULL));
        GMT_EQ("length", m.length, 40);
        GMT_EQ("content", gmt_check(m.data, 40, 11), -1);
        GMT_TRUE("send completes", gmt_wait_sent(pr.a, pr.b, &sent.calls, 1, GMT_WAIT_US));
        /* The call's send timeout, not the environment's hour: a port nobody opens. */
        unsigned never = gm_num_ports(NULL) - 1;
        while (never == pr.port_a || never == pr.port_b)
            never--;
        struct gmt_send lost = {0};
        uint64_t t0 = gmt_now_us();
        gm_send_with_callback(pr.a, out, 7, 40, GM_HIGH_PRIORITY, 1, never, gmt_send_cb, &lost);
        gmt_wait_sent(pr.a, pr.b, &lost.calls, 1, 15000000);
        GMT_EQ("send to a port never opened: status", lost.status, GM_SEND_TARGET_PORT_CLOSED);
        GMT_TRUE("... after the call's 200 ms (within 10 s)", gmt_now_us() - t0 < 10000000);
        gm_dma_free(pr.b, in);
        gm_dma_free(pr.a, out);
        gmt_pair_close(&pr);
    }
    gm_finalize();
    restore_env();
    GMT_EQ("forget the settings", gm_compat_configure(NULL), GM_SUCCESS);
    GMT_EQ("gm_init again (suite's reference)", gm_init(), GM_SUCCESS);
}

/* Settings last until the next call; NULL returns to the environment. */
static void test_settings_persist_until_reset(void)
{
    gm_finalize();
    gm_compat_config_t c;
    gm_compat_config_init(&c);
    c.nodes = "3 gamma; 4 delta";
    c.node_id = 4;
    c.provider = "shm"; /* no addresses in this map */
    GMT_EQ("configure", gm_compat_configure(&c), GM_SUCCESS);
    for (int round = 0; round < 2; round++) {
        GMT_EQ("gm_init", gm_init(), GM_SUCCESS);
        struct gm_port *p = NULL;
        unsigned id, node = 0;
        if (gmt_open_port(&p, &id, "cfg-persist") == GM_SUCCESS) {
            GMT_EQ("gm_get_node_id", gm_get_node_id(p, &node), GM_SUCCESS);
            GMT_EQ("node from the call, each gm_init", node, 4);
            gm_close(p);
        } else {
            GMT_TRUE("open a port", 0);
        }
        gm_finalize();
    }
    GMT_EQ("forget the settings", gm_compat_configure(NULL), GM_SUCCESS);
    GMT_EQ("gm_init from the environment", gm_init(), GM_SUCCESS);
    struct gm_port *p = NULL;
    unsigned id, node = 0;
    if (gmt_open_port(&p, &id, "cfg-env") == GM_SUCCESS) {
        gm_get_node_id(p, &node);
        GMT_EQ("environment's node again (one-node map: 1)", node, 1);
        GMT_EQ("gamma unknown now", gm_host_name_to_node_id(p, "gamma"), GM_NO_SUCH_NODE_ID);
        gm_close(p);
    } else {
        GMT_TRUE("open a port from the environment's settings", 0);
    }
}

/* gm_compat_prepare: callable from several threads at once, before and while GM is
 * initialized, any number of times; ports open as before. */
static void *prepare_thread(void *arg)
{
    (void)arg;
    gm_compat_prepare();
    gm_compat_prepare();
    return NULL;
}

static void test_prepare_from_threads(void)
{
    pthread_t t[4];
    int started = 0;
    for (int i = 0; i < 4; i++)
        started += pthread_create(&t[i], NULL, prepare_thread, NULL) == 0;
    GMT_EQ("threads started", started, 4);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    gm_compat_prepare();
    struct gm_port *p = NULL;
    unsigned id;
    GMT_EQ("a port opens after prepare", gmt_open_port(&p, &id, "cfg-prepare"), GM_SUCCESS);
    if (p) gm_close(p);
}

int main(void)
{
    static const struct ct_test tests[] = {
        {"gm_compat_config_init fills 'nothing set'", test_init_fills_defaults},
        {"GM_SEND_TIMEOUT_MS defaults to a minute or more", test_send_timeout_default},
        {"GM_BUSY while GM is initialized", test_busy_while_initialized},
        {"bad settings rejected; a bad map fails gm_init", test_rejects_bad_settings},
        {"settings override the environment and leave it alone", test_overrides_environment},
        {"settings persist until reset; NULL means environment", test_settings_persist_until_reset},
        {"gm_compat_prepare from several threads, then a port", test_prepare_from_threads},
        {NULL, NULL},
    };
    return gmt_run_suite("gm_config", tests);
}
