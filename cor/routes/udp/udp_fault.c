/* Seeded fault injector (see udp_fault.h). */
#include <stdlib.h>
#include <string.h>

#include "udp_fault.h"

/* splitmix64: tiny, well mixed, and deterministic per seed. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(next_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int prob(const char *v, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= 0.0 && d <= 1.0)) return -1;
    *out = d;
    return 0;
}

static int uint_val(const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    if (*v == '-' || *v == '\0') return -1;
    unsigned long long x = strtoull(v, &end, 0);
    if (*end || x > max) return -1;
    *out = x;
    return 0;
}

int udp_faults_parse(const char *spec, struct udp_faults *f)
{
    memset(f, 0, sizeof(*f));
    f->delay_ns = 200000;
    f->seed = 1;
    if (!spec || !*spec) return 0;
    char buf[256];
    size_t n = strlen(spec);
    /* strtok would skip empty items: refuse them, a typo should not pass silently. */
    if (n >= sizeof(buf) || spec[0] == ',' || spec[n - 1] == ',' || strstr(spec, ",,")) return -1;
    strcpy(buf, spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return -1;
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        uint64_t u = 0;
        int rc;
        if (!strcmp(k, "drop"))
            rc = prob(v, &f->drop);
        else if (!strcmp(k, "dup"))
            rc = prob(v, &f->dup);
        else if (!strcmp(k, "reorder"))
            rc = prob(v, &f->reorder);
        else if (!strcmp(k, "delay_us")) {
            rc = uint_val(v, 10000000, &u);
            f->delay_ns = u * 1000;
        } else if (!strcmp(k, "seed"))
            rc = uint_val(v, UINT64_MAX, &f->seed);
        else
            rc = -1;
        if (rc) return -1;
    }
    if (f->drop + f->dup + f->reorder > 1.0) return -1;
    f->on = 1;
    f->rng = f->seed;
    return 0;
}

void udp_faults_reseed(struct udp_faults *f, uint64_t salt)
{
    uint64_t s = f->seed ^ (salt * 0x9e3779b97f4a7c15ull);
    f->rng = next_rand(&s);
}

int udp_faults_decide(struct udp_faults *f)
{
    if (!f->on) return UDP_FX_SEND;
    double u = uniform(&f->rng);
    if (u < f->drop) {
        f->dropped++;
        return UDP_FX_DROP;
    }
    u -= f->drop;
    if (u < f->dup) {
        f->duplicated++;
        return UDP_FX_DUP;
    }
    u -= f->dup;
    if (u < f->reorder) {
        f->held++;
        return UDP_FX_HOLD;
    }
    return UDP_FX_SEND;
}
