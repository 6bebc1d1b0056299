/*
 * hello: a complete CoR program. Every domain spawns two tasks; task k of domain r sends a
 * greeting to task k of domain r+1 (the last domain wraps around to domain 0) and receives the
 * one from domain r-1.
 *
 *   cor-run -n 2 ./hello      (run alone, it is a one-domain session that greets itself)
 */
#include <stdint.h>
#include <stdio.h>

#include <cor/cor.h>

#define TASKS 2
#define TAG_HELLO 1
#define TEXT_MAX 64

static int greet(void *arg)
{
    int k = (int)(intptr_t)arg;
    int rank = cor_domain_rank(), n = cor_domain_count();
    /* Tasks get local indices in spawn order, the same in every domain, so the peer's task
     * has our index. */
    unsigned index = cor_idp_index(cor_task_self());
    cor_idp_t next = cor_task_idp((rank + 1) % n, index);
    cor_idp_t prev = cor_task_idp((rank + n - 1) % n, index);

    /* Send buffers come from the core (getBuffer), so a route can send them without a copy. */
    char *text = cor_getBuffer(COR_CHAR, TEXT_MAX);
    if (!text) return COR_ENOMEM;
    int len = snprintf(text, TEXT_MAX, "hello from task %d of domain %d", k, rank) + 1;

    /* Both operations start at once and return handles; wait completes them. The receive lets
     * the core allocate the buffer and hands back its pointer. */
    cor_req_t recv_req, send_req;
    void *in = NULL;
    cor_status_t st;
    int err = cor_recvI(prev, COR_CTX_WORLD, TAG_HELLO, &in, &recv_req);
    if (err) goto out;
    err = cor_sendI(next, COR_CTX_WORLD, TAG_HELLO, text, (size_t)len, &send_req);
    if (err) {
        cor_cancel(&recv_req);
        cor_wait(&recv_req, NULL);
        goto out;
    }
    err = cor_wait(&send_req, NULL);
    int rerr = cor_wait(&recv_req, &st);
    if (!err) err = rerr;
    if (!err) printf("domain %d task %d got \"%.*s\"\n", rank, k, (int)st.count, (const char *)in);
    if (in) cor_releaseBuffer(in);
out:
    if (err) fprintf(stderr, "hello: domain %d task %d: %s\n", rank, k, cor_strerror(err));
    cor_releaseBuffer(text);
    return err;
}

int main(int argc, char **argv)
{
    int err = cor_init(&argc, &argv);
    if (err) {
        fprintf(stderr, "hello: cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    cor_idp_t tasks[TASKS];
    int failed = 0, spawned = 0;
    for (int k = 0; k < TASKS; k++) {
        err = cor_task_spawn("greeter", greet, (void *)(intptr_t)k, &tasks[k]);
        if (err) {
            fprintf(stderr, "hello: cor_task_spawn: %s\n", cor_strerror(err));
            failed = 1;
            break;
        }
        spawned++;
    }
    for (int k = 0; k < spawned; k++) {
        int status = 0;
        if (cor_task_join(tasks[k], &status) != COR_OK || status != 0) failed = 1;
    }
    /* A domain that fails leaves without finalize: cor-run then stops the others. */
    if (failed) return 1;
    err = cor_finalize();
    if (err) {
        fprintf(stderr, "hello: cor_finalize: %s\n", cor_strerror(err));
        return 1;
    }
    return 0;
}
