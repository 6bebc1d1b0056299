/*
 * launch_cor: what scripts/bench-launch measures against launch_pmix: cor_init and
 * cor_finalize, nothing else (the session, the routes' hard ports and threads, the address
 * exchange, the finalize barrier). `launch_cor --trace` prints the time of each step on
 * stderr. Exit status 0 when both worked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cor/cor.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    int trace = argc > 1 && !strcmp(argv[1], "--trace");
    double t0 = now_ms();
    int err = cor_init(&argc, &argv);
    if (err) {
        fprintf(stderr, "launch_cor: cor_init: %s\n", cor_strerror(err));
        return 1;
    }
    double t1 = now_ms();
    err = cor_finalize();
    double t2 = now_ms();
    if (trace)
        fprintf(stderr, "launch_cor: cor_init %.2f ms, cor_finalize %.2f ms\n", t1 - t0, t2 - t1);
    if (err) fprintf(stderr, "launch_cor: cor_finalize: %s\n", cor_strerror(err));
    return err ? 1 : 0;
}
