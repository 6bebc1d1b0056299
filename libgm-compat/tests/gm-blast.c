/* gm-blast: helper of gm-peer-death.sh.
 *
 *   gm-blast --sink [--port N] [--timeout S] [--no-close]
 *       opens the port, provides no buffer and polls until killed or the
 *       timeout: messages sent to it are taken but never processed.  Then
 *       closes the port, or with --no-close exits with it open.
 *   gm-blast --to NODE [--port N] [--count N] [--len BYTES] [--timeout S]
 *       sends COUNT messages of LEN bytes to (NODE, port) at low priority;
 *       after the first failed send calls gm_drop_sends once (GM holds the
 *       rest until then).  Waits for every callback.
 *
 * The sender exits 0 when every callback ran and at least one reported an
 * error (the sink was killed meanwhile), 1 otherwise, 2 on timeout; it says
 * the first error's status ("gm-blast: first failure: ..."). */
#include <gm.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned done_calls, failed, dropped, drop_called;
static gm_status_t first_failure = GM_SUCCESS;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sent_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    (void)p;
    (void)ctx;
    done_calls++;
    if (st == GM_SEND_DROPPED)
        dropped++;
    else if (st != GM_SUCCESS && !failed++)
        first_failure = st;
}

static void drop_cb(struct gm_port *p, void *ctx, gm_status_t st)
{
    (void)p;
    (void)ctx;
    (void)st;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gm-blast --sink [--port N] [--no-close] | --to NODE [--port N] [--count N] "
            "[--len BYTES] [--timeout S]\n");
    exit(64);
}

int main(int argc, char **argv)
{
    unsigned port_id = 2, node = 0, count = 40, timeout = 30;
    unsigned long len = 32768;
    int sink = 0, no_close = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sink"))
            sink = 1;
        else if (!strcmp(argv[i], "--no-close"))
            no_close = 1;
        else if (!strcmp(argv[i], "--to") && i + 1 < argc)
            node = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port_id = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc)
            len = strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = (unsigned)strtoul(argv[++i], NULL, 0);
        else
            usage();
    }
    if (sink == (node != 0) || count == 0 || count > 100000 || len > (1ul << 24)) usage();
    struct gm_port *p;
    gm_status_t st = gm_open(&p, 0, port_id, "gm-blast", (enum gm_api_version)GM_API_VERSION_2_0);
    if (st != GM_SUCCESS) {
        gm_perror("gm-blast: gm_open", st);
        return 1;
    }
    uint64_t deadline = now_ms() + (uint64_t)timeout * 1000u;
    if (sink) {
        printf("gm-blast: sink ready\n");
        fflush(stdout);
        while (now_ms() < deadline) {
            gm_recv_event_t *e = gm_receive(p);
            if (GM_RECV_EVENT_TYPE(e) != GM_NO_RECV_EVENT) gm_unknown(p, e);
        }
        if (!no_close) gm_close(p);
        return 0;
    }
    unsigned size = gm_min_size_for_length(len);
    char *buf = gm_dma_malloc(p, len ? len : 1);
    if (!buf) return 1;
    memset(buf, 0x5a, len);
    for (unsigned i = 0; i < count; i++)
        gm_send_with_callback(p, buf, size, len, GM_LOW_PRIORITY, node, port_id, sent_cb, NULL);
    while (done_calls < count && now_ms() < deadline) {
        gm_recv_event_t *e = gm_receive(p);
        if (GM_RECV_EVENT_TYPE(e) != GM_NO_RECV_EVENT) gm_unknown(p, e);
        if (failed && !drop_called) {
            drop_called = 1;
            gm_drop_sends(p, GM_LOW_PRIORITY, node, port_id, drop_cb, NULL);
        }
    }
    printf("gm-blast: %u of %u callbacks (%u failed, %u dropped, %u succeeded)\n", done_calls,
           count, failed, dropped, done_calls - failed - dropped);
    if (failed) printf("gm-blast: first failure: %s\n", gm_strerror(first_failure));
    int rc = done_calls < count ? 2 : failed ? 0 : 1;
    if (rc == 0) gm_close(p); /* with nothing in flight */
    return rc;
}
