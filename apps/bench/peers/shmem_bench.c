/*
 * shmem_bench: the OpenSHMEM peer of `cor-bench dsm`, for scripts/bench's dsm section. Two
 * PEs; PE 1 acts on PE 0's symmetric memory and measures, as cor-bench dsm's domain 1 does
 * on domain 0's objects:
 *   8 B round trip (put + wait_until both ways; the peer's own R), atomic fetch-add, CAS,
 *   set_lock + clear_lock (uncontended), barrier_all, putmem SIZE + quiet;
 * medians and p99 over COUNT operations. Not built by make (it needs oshcc):
 *
 *   oshcc -O2 -o shmem_bench shmem_bench.c
 *   oshrun --allow-run-as-root --mca sshmem mmap -np 2 ./shmem_bench [COUNT [CSV]]
 *
 * PE 1 prints the table and writes CSV rows shaped like cor-bench dsm's (route "shmem"), and
 * flushes both before shmem_finalize: Open MPI 4.1's oshmem may crash while finalizing on
 * some machines, after the work is done.
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PUT ((size_t)1 << 20)
#define PUT_BYTES_PER_SIZE ((size_t)1 << 30) /* caps the count of large puts, as cor-bench */

static long counter, cas_word, lock_word, ping, pong;
static unsigned char putbuf[MAX_PUT];
static FILE *csv;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* PE 1 prints "what median p99" and the CSV row. */
static void report(const char *key, const char *what, double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double med = v[n / 2], p99 = v[n * 99 / 100];
    printf("%-46s %8ld %10.2f %10.2f us\n", what, n, med, p99);
    fflush(stdout);
    if (csv) {
        fprintf(csv, "shmem,2,%s,%ld,%.4f,%.4f,us,,,\n", key, n, med, p99);
        fflush(csv);
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    if (n < 10 || n > 10000000) {
        fprintf(stderr, "shmem_bench: COUNT must be 10..10000000\n");
        return 2;
    }
    shmem_init();
    int me = shmem_my_pe();
    if (shmem_n_pes() != 2) {
        if (me == 0) fprintf(stderr, "shmem_bench: runs on exactly 2 PEs (oshrun -np 2)\n");
        shmem_finalize();
        return 2;
    }
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        fprintf(stderr, "shmem_bench: no memory for %ld samples\n", n);
        shmem_global_exit(1);
    }
    if (me == 1 && argc > 2) {
        csv = fopen(argv[2], "w");
        if (!csv) {
            perror(argv[2]);
            shmem_global_exit(1);
        }
        fprintf(csv, "route,domains,what,count,median,p99,unit,per_R,goal,met\n");
    }
    if (me == 1) {
        printf("shmem_bench: 2 PEs, PE 1 -> PE 0, medians and p99 over %ld operations\n", n);
        printf("%-46s %8s %10s %10s\n", "what", "count", "median", "p99");
    }
    shmem_barrier_all();

    /* 8 B round trip: PE 1 puts i into PE 0's ping, PE 0 waits for it and puts it into PE 1's
     * pong. */
    for (long i = 1; i <= n + n / 10; i++) {
        if (me == 1) {
            double t = now_us();
            shmem_long_p(&ping, i, 0);
            shmem_long_wait_until(&pong, SHMEM_CMP_EQ, i);
            if (i > n / 10) v[i - n / 10 - 1] = now_us() - t;
        } else {
            shmem_long_wait_until(&ping, SHMEM_CMP_EQ, i);
            shmem_long_p(&pong, i, 1);
        }
    }
    if (me == 1) report("R", "8 B round trip (put + wait_until, each way)", v, n);
    shmem_barrier_all();

    if (me == 1) {
        for (long i = -n / 10; i < n; i++) {
            double t = now_us();
            shmem_long_atomic_fetch_add(&counter, 1, 0);
            if (i >= 0) v[i] = now_us() - t;
        }
        report("fetch_add", "shmem_long_atomic_fetch_add", v, n);
        for (long i = -n / 10; i < n; i++) {
            double t = now_us();
            shmem_long_atomic_compare_swap(&cas_word, 0, 0, 0);
            if (i >= 0) v[i] = now_us() - t;
        }
        report("cas", "shmem_long_atomic_compare_swap", v, n);
        for (long i = -n / 10; i < n; i++) {
            double t = now_us();
            shmem_set_lock(&lock_word);
            shmem_clear_lock(&lock_word);
            if (i >= 0) v[i] = now_us() - t;
        }
        report("lock", "shmem_set_lock + shmem_clear_lock", v, n);
    }
    shmem_barrier_all();
    if (me == 1 && shmem_long_g(&counter, 0) != n + n / 10) {
        fprintf(stderr, "shmem_bench: counter %ld, expected %ld\n", shmem_long_g(&counter, 0),
                n + n / 10);
        shmem_global_exit(1);
    }

    for (long i = -n / 10; i < n; i++) {
        double t = now_us();
        shmem_barrier_all();
        if (i >= 0) v[i] = now_us() - t;
    }
    if (me == 1) report("barrier", "shmem_barrier_all, 2 PEs", v, n);

    static const size_t sizes[] = {64, 1024, 16384, 262144, 1 << 20};
    unsigned char *src = malloc(MAX_PUT);
    if (!src) shmem_global_exit(1);
    memset(src, 0x5a, MAX_PUT);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t size = sizes[s];
        long m = n;
        if ((double)m * (double)size > (double)PUT_BYTES_PER_SIZE)
            m = (long)(PUT_BYTES_PER_SIZE / size);
        m = m < 100 ? 100 : m;
        shmem_barrier_all();
        if (me == 1) {
            for (long i = -m / 10; i < m; i++) {
                double t = now_us();
                shmem_putmem(putbuf, src, size, 0);
                shmem_quiet();
                if (i >= 0) v[i] = now_us() - t;
            }
            char key[32], what[64];
            snprintf(key, sizeof key, "put_%zu", size);
            snprintf(what, sizeof what, "shmem_putmem %zu B + shmem_quiet", size);
            report(key, what, v, m);
        }
    }
    shmem_barrier_all();
    if (me == 1) {
        printf("shmem_bench: done\n");
        fflush(stdout);
        if (csv && fclose(csv) != 0) perror("shmem_bench: csv");
    }
    free(src);
    free(v);
    shmem_finalize();
    return 0;
}
