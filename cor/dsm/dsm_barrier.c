/*
 * Dissemination barrier between n member domains: in round k the member at position p sends
 * to (p + 2^k) mod n and waits for the message from (p - 2^k) mod n; after ceil(log2 n)
 * rounds every member has heard, directly or not, from every other. Messages are counted per
 * round over all episodes, so a fast member's message for the next episode (which may
 * overtake a slower one: they come from different tasks) is simply counted ahead: episode e
 * needs e + 1 messages in each round.
 */
#include <string.h>

#include "dsm_internal.h"

void dsm_bar_setup(struct dsm_bar *b, int n, int pos, int local_tasks)
{
    b->n = n;
    b->pos = pos;
    b->rounds = 0;
    while ((1 << b->rounds) < n)
        b->rounds++;
    b->local_tasks = local_tasks;
    b->arrived = 0;
    b->running = false;
    b->round = 0;
    b->sent = false;
    /* epoch and recvd are kept: messages may have come before the local setup */
}

bool dsm_bar_arrive(struct dsm_bar *b)
{
    if (++b->arrived < b->local_tasks) return false;
    b->running = true;
    b->round = 0;
    b->sent = false;
    return true;
}

void dsm_bar_done(struct dsm_bar *b)
{
    b->epoch++;
    b->running = false;
    b->arrived = 0;
}

int dsm_bar_recv(struct dsm_bar *b, uint64_t round)
{
    if (round >= DSM_MAX_ROUNDS || (b->n > 0 && round >= (uint64_t)b->rounds)) return COR_EPROTO;
    b->recvd[round]++;
    return COR_OK;
}

int dsm_bar_advance(struct dsm_bar *b, struct dsm_bar_msg *out, bool *completed)
{
    int nout = 0;
    *completed = false;
    while (b->running) {
        if (b->round == b->rounds) {
            dsm_bar_done(b);
            *completed = true;
            break;
        }
        if (!b->sent) {
            out[nout++] =
                (struct dsm_bar_msg){(b->pos + (1 << b->round)) % b->n, b->round, b->epoch};
            b->sent = true;
        }
        if (b->recvd[b->round] < b->epoch + 1) break;
        b->round++;
        b->sent = false;
    }
    return nout;
}
