/* The threaded PVM tests' shared set-up (pairs.h). */
#include "pairs.h"

#include <stdio.h>
#include <stdlib.h>

#include <pvm3.h>

long pairs_number(const char *s, long lo, long hi, const char *what)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s || v < lo || v > hi) {
        fprintf(stderr, "bad %s '%s' (%ld..%ld)\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

void pairs_pattern(char *data, int len, int a, int n)
{
    for (int i = 0; i < len; i++)
        data[i] = (char)(a * 131 + n * 7 + i / 8);
}

bool pairs_start(const char *argv0, char **args, char *index_arg, int n, int *tids, int ready_tag)
{
    for (int i = 0; i < n; i += index_arg ? 1 : n) {
        int want = index_arg ? 1 : n;
        if (index_arg) snprintf(index_arg, 16, "%d", i);
        if (pvm_spawn((char *)argv0, args, PvmTaskDefault, "", want, &tids[i]) != want) {
            fprintf(stderr, "cannot spawn %d of %s\n", want, argv0);
            pvm_exit();
            return false;
        }
    }
    for (int i = 0; i < n; i++) { /* every pair routed before the messages */
        struct timeval tv = {PAIRS_WAIT_S, 0};
        if (pvm_trecv(tids[i], ready_tag, &tv) <= 0) {
            fprintf(stderr, "task t%x did not start\n", tids[i]);
            pvm_exit();
            return false;
        }
    }
    return true;
}

void pairs_ready(int ready_tag)
{
    pvm_initsend(PvmDataDefault); /* enrolled: the pair switches to the route */
    pvm_send(pvm_parent(), ready_tag);
}
