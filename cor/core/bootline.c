/* The bootstrap protocol's line grammar (see bootline.h). No I/O, no state. */
#include "bootline.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const words[COR_BL_KINDS] = {
    [COR_BL_PROOF] = "PROOF",     [COR_BL_HELLO] = "HELLO",
    [COR_BL_ADDR] = "ADDR",       [COR_BL_PUB] = "PUB",
    [COR_BL_BARRIER] = "BARRIER", [COR_BL_FINISH] = "FINISH",
    [COR_BL_LOST] = "LOST",       [COR_BL_CHALLENGE] = "CHALLENGE",
    [COR_BL_PROVEN] = "PROVEN",   [COR_BL_WELCOME] = "WELCOME",
    [COR_BL_TABLE] = "TABLE",     [COR_BL_A] = "A",
    [COR_BL_END] = "END",         [COR_BL_RELEASE] = "RELEASE",
    [COR_BL_DEAD] = "DEAD",       [COR_BL_ERR] = "ERR",
    [COR_BL_BYE] = "BYE",
};

const char *cor__bootline_word(enum cor_bootline_kind kind)
{
    return (unsigned)kind < COR_BL_KINDS ? words[kind] : NULL;
}

/* ---- fields ------------------------------------------------------------------------------- */

int cor__bootline_long(const char *s, long lo, long hi, long *out)
{
    if (!s) return -1;
    int neg = *s == '-';
    const char *p = s + neg;
    size_t nd = strspn(p, "0123456789");
    if (nd == 0 || nd > 19 || p[nd]) return -1;
    unsigned long long v = 0;
    for (size_t i = 0; i < nd; i++)
        v = v * 10 + (unsigned)(p[i] - '0'); /* 19 digits fit in 64 bits */
    if (!neg && v > (unsigned long long)LONG_MAX) return -1;
    if (neg && v > (unsigned long long)LONG_MAX + 1) return -1;
    long x = neg ? (long)(0 - v) : (long)v;
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int cor__bootline_unhex(const char *s, unsigned char *out, size_t n)
{
    if (!s || strlen(s) != 2 * n) return -1;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

void cor__bootline_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = 0;
}

int cor__bootline_route_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= COR_BOOT_ROUTE_MAX) return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* An address: "-" (empty) or 2..COR_BOOT_HEX_MAX hex digits of bytes other than NUL. */
static int addr_decode(const char *h, char *out)
{
    if (strcmp(h, "-") == 0) {
        out[0] = 0;
        return 0;
    }
    size_t n = strlen(h);
    if (n == 0 || n % 2 || n > COR_BOOT_HEX_MAX) return -1;
    if (cor__bootline_unhex(h, (unsigned char *)out, n / 2)) return -1;
    if (memchr(out, 0, n / 2)) return -1;
    out[n / 2] = 0;
    return 0;
}

/* Splits line (a copy) at spaces into at most max words; returns the count, or max + 1 when
 * there are more. */
static int split(char *line, char **w, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p) return n;
        if (n == max) return max + 1;
        w[n++] = p;
        while (*p && *p != ' ')
            p++;
        if (*p) *p++ = 0;
    }
}

static void take_text(const char *s, char *out)
{
    while (*s == ' ')
        s++;
    size_t i = 0;
    for (; s[i]; i++)
        out[i] = (unsigned char)s[i] < 32 || (unsigned char)s[i] > 126 ? '?' : s[i];
    while (i > 0 && out[i - 1] == ' ') /* so that formatting gives the same line back */
        i--;
    out[i] = 0;
}

/* ---- lines ------------------------------------------------------------------------------- */

int cor__bootline_parse(const char *line, struct cor_bootline *l)
{
    size_t len = strlen(line);
    if (len + 1 > COR_BOOT_LINE_MAX) return -1;
    char copy[COR_BOOT_LINE_MAX];
    memcpy(copy, line, len + 1);
    memset(l, 0, offsetof(struct cor_bootline, route));
    l->route[0] = l->addr[0] = l->text[0] = 0;
    memset(l->nonce, 0, sizeof l->nonce);
    memset(l->mac, 0, sizeof l->mac);
    l->digest = 0;

    /* Free text first: ERR and DEAD keep the rest of the line. */
    const char *rest = NULL;
    if (strncmp(line, "ERR", 3) == 0 && (line[3] == 0 || line[3] == ' ')) {
        l->kind = COR_BL_ERR;
        take_text(line + 3, l->text);
        return 0;
    }
    if (strncmp(line, "DEAD ", 5) == 0) {
        const char *p = line + 5;
        while (*p == ' ')
            p++;
        size_t nd = strcspn(p, " ");
        if (nd == 0 || nd > 19) return -1;
        char num[20];
        memcpy(num, p, nd);
        num[nd] = 0;
        if (cor__bootline_long(num, 0, COR_BOOT_MAX_DOMAINS - 1, &l->rank)) return -1;
        rest = p + nd;
        l->kind = COR_BL_DEAD;
        take_text(rest, l->text);
        return 0;
    }

    char *w[8];
    int n = split(copy, w, 7);
    if (n < 1 || n > 7) return -1;
    int k;
    for (k = 0; k < COR_BL_KINDS; k++)
        if (k != COR_BL_ERR && k != COR_BL_DEAD && strcmp(w[0], words[k]) == 0) break;
    if (k == COR_BL_KINDS) return -1;
    l->kind = (enum cor_bootline_kind)k;
#define NUM(i, field, lo, hi) (cor__bootline_long(w[i], lo, hi, &l->field) == 0)
    switch (l->kind) {
    case COR_BL_PROOF:
        return n == 3 && !cor__bootline_unhex(w[1], l->nonce, COR_BOOT_KEY_BYTES) &&
                       !cor__bootline_unhex(w[2], l->mac, COR_BOOT_KEY_BYTES)
                   ? 0
                   : -1;
    case COR_BL_CHALLENGE:
        return n == 3 && NUM(1, version, COR_BOOT_VERSION, COR_BOOT_VERSION) &&
                       !cor__bootline_unhex(w[2], l->nonce, COR_BOOT_KEY_BYTES)
                   ? 0
                   : -1;
    case COR_BL_PROVEN:
        return n == 2 && !cor__bootline_unhex(w[1], l->mac, COR_BOOT_KEY_BYTES) ? 0 : -1;
    case COR_BL_HELLO: {
        unsigned char s[8];
        if (n != 6 || !NUM(1, version, COR_BOOT_VERSION, COR_BOOT_VERSION) ||
            !NUM(2, rank, 0, COR_BOOT_MAX_DOMAINS - 1) || !NUM(3, size, 1, COR_BOOT_MAX_DOMAINS) ||
            cor__bootline_unhex(w[4], s, 8) || !NUM(5, pid, 1, LONG_MAX))
            return -1;
        for (int i = 0; i < 8; i++)
            l->session = l->session << 8 | s[i];
        return 0;
    }
    case COR_BL_ADDR:
    case COR_BL_A: {
        int o = l->kind == COR_BL_A; /* A has the rank first */
        if (n != 5 + o || (o && !NUM(1, rank, 0, COR_BOOT_MAX_DOMAINS - 1)) ||
            !NUM(1 + o, k, 0, COR_BOOT_MAX_ADDRS - 1) || !cor__bootline_route_ok(w[2 + o]) ||
            !NUM(3 + o, port, -COR_BOOT_PORT_LIMIT, COR_BOOT_PORT_LIMIT) ||
            addr_decode(w[4 + o], l->addr))
            return -1;
        strcpy(l->route, w[2 + o]);
        return 0;
    }
    case COR_BL_PUB:
        return n == 2 && NUM(1, n, 1, COR_BOOT_MAX_ADDRS) ? 0 : -1;
    case COR_BL_TABLE:
        if ((n != 3 && n != 4) || !NUM(1, size, 1, COR_BOOT_MAX_DOMAINS) ||
            !NUM(2, n, 1, COR_BOOT_MAX_ADDRS))
            return -1;
        if (n == 4 && cor__bootline_unhex(w[3], l->mac, COR_BOOT_KEY_BYTES)) return -1;
        l->digest = n == 4;
        return 0;
    case COR_BL_BARRIER:
    case COR_BL_RELEASE:
        return n == 2 && NUM(1, seq, 1, COR_BOOT_SEQ_MAX) ? 0 : -1;
    case COR_BL_LOST:
        return n == 2 && NUM(1, rank, 0, COR_BOOT_MAX_DOMAINS - 1) ? 0 : -1;
    case COR_BL_FINISH:
    case COR_BL_WELCOME:
    case COR_BL_END:
    case COR_BL_BYE:
        return n == 1 ? 0 : -1;
    default:
        return -1;
    }
#undef NUM
}

static int in(long v, long lo, long hi)
{
    return v >= lo && v <= hi;
}

int cor__bootline_format(const struct cor_bootline *l, char *buf, size_t cap)
{
    char h1[COR_BOOT_HEX_MAX + 2], h2[COR_BOOT_KEY_HEX + 1];
    const char *w = cor__bootline_word(l->kind);
    int len = -1;
    if (!w) return -1;
    switch (l->kind) {
    case COR_BL_PROOF:
        cor__bootline_hex(l->nonce, COR_BOOT_KEY_BYTES, h1);
        cor__bootline_hex(l->mac, COR_BOOT_KEY_BYTES, h2);
        len = snprintf(buf, cap, "%s %s %s\n", w, h1, h2);
        break;
    case COR_BL_CHALLENGE:
        if (l->version != COR_BOOT_VERSION) return -1;
        cor__bootline_hex(l->nonce, COR_BOOT_KEY_BYTES, h1);
        len = snprintf(buf, cap, "%s %ld %s\n", w, l->version, h1);
        break;
    case COR_BL_PROVEN:
        cor__bootline_hex(l->mac, COR_BOOT_KEY_BYTES, h2);
        len = snprintf(buf, cap, "%s %s\n", w, h2);
        break;
    case COR_BL_HELLO:
        if (l->version != COR_BOOT_VERSION || !in(l->rank, 0, COR_BOOT_MAX_DOMAINS - 1) ||
            !in(l->size, 1, COR_BOOT_MAX_DOMAINS) || l->pid < 1)
            return -1;
        len = snprintf(buf, cap, "%s %ld %ld %ld %016llx %ld\n", w, l->version, l->rank, l->size,
                       (unsigned long long)l->session, l->pid);
        break;
    case COR_BL_ADDR:
    case COR_BL_A: {
        size_t an = strnlen(l->addr, sizeof l->addr);
        if (an == sizeof l->addr || strnlen(l->route, sizeof l->route) == sizeof l->route ||
            !cor__bootline_route_ok(l->route) || !in(l->k, 0, COR_BOOT_MAX_ADDRS - 1) ||
            !in(l->port, -COR_BOOT_PORT_LIMIT, COR_BOOT_PORT_LIMIT) ||
            (l->kind == COR_BL_A && !in(l->rank, 0, COR_BOOT_MAX_DOMAINS - 1)))
            return -1;
        if (an == 0)
            strcpy(h1, "-");
        else
            cor__bootline_hex((const unsigned char *)l->addr, an, h1);
        if (l->kind == COR_BL_A)
            len = snprintf(buf, cap, "%s %ld %ld %s %ld %s\n", w, l->rank, l->k, l->route, l->port,
                           h1);
        else
            len = snprintf(buf, cap, "%s %ld %s %ld %s\n", w, l->k, l->route, l->port, h1);
        break;
    }
    case COR_BL_PUB:
        if (!in(l->n, 1, COR_BOOT_MAX_ADDRS)) return -1;
        len = snprintf(buf, cap, "%s %ld\n", w, l->n);
        break;
    case COR_BL_TABLE:
        if (!in(l->size, 1, COR_BOOT_MAX_DOMAINS) || !in(l->n, 1, COR_BOOT_MAX_ADDRS)) return -1;
        if (l->digest) {
            cor__bootline_hex(l->mac, COR_BOOT_KEY_BYTES, h2);
            len = snprintf(buf, cap, "%s %ld %ld %s\n", w, l->size, l->n, h2);
        } else {
            len = snprintf(buf, cap, "%s %ld %ld\n", w, l->size, l->n);
        }
        break;
    case COR_BL_BARRIER:
    case COR_BL_RELEASE:
        if (!in(l->seq, 1, COR_BOOT_SEQ_MAX)) return -1;
        len = snprintf(buf, cap, "%s %ld\n", w, l->seq);
        break;
    case COR_BL_LOST:
        if (!in(l->rank, 0, COR_BOOT_MAX_DOMAINS - 1)) return -1;
        len = snprintf(buf, cap, "%s %ld\n", w, l->rank);
        break;
    case COR_BL_DEAD:
    case COR_BL_ERR: {
        char text[COR_BOOT_LINE_MAX];
        if (strnlen(l->text, sizeof l->text) == sizeof l->text) return -1;
        take_text(l->text, text); /* printable, no edge spaces: parses back to itself */
        if (l->kind == COR_BL_DEAD && !in(l->rank, 0, COR_BOOT_MAX_DOMAINS - 1)) return -1;
        if (l->kind == COR_BL_DEAD)
            len = snprintf(buf, cap, "%s %ld%s%s\n", w, l->rank, text[0] ? " " : "", text);
        else
            len = snprintf(buf, cap, "%s%s%s\n", w, text[0] ? " " : "", text);
        break;
    }
    case COR_BL_FINISH:
    case COR_BL_WELCOME:
    case COR_BL_END:
    case COR_BL_BYE:
        len = snprintf(buf, cap, "%s\n", w);
        break;
    default:
        return -1;
    }
    if (len < 0 || (size_t)len >= cap || len > COR_BOOT_LINE_MAX) return -1;
    return len;
}

int cor__bootline_take(char *buf, size_t *have, int (*fn)(void *arg, char *line), void *arg)
{
    size_t start = 0;
    int rc = 0;
    char *nl;
    while ((nl = memchr(buf + start, '\n', *have - start)) != NULL) {
        char *line = buf + start;
        size_t len = (size_t)(nl - line);
        if (len + 1 > COR_BOOT_LINE_MAX) return COR_BL_TOO_LONG;
        if (memchr(line, 0, len)) return COR_BL_NUL;
        *nl = 0;
        start += len + 1;
        rc = fn(arg, line);
        if (rc) break;
    }
    memmove(buf, buf + start, *have - start);
    *have -= start;
    if (rc) return rc;
    if (*have >= COR_BOOT_LINE_MAX) return COR_BL_TOO_LONG;
    return 0;
}
