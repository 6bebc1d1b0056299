/*
 * json_check: reads one JSON document on standard input, checks its syntax (RFC 8259: one
 * value, nothing after it but white space) and prints each scalar as PATH=VALUE lines, e.g.
 * .routes[0].name=udp, so shell tests can check a structure without python or jq.
 * Exit status 0 = valid, 1 = invalid (with the byte offset and why on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_INPUT (16u << 20)

static const char *in;
static size_t pos, len;
static char path[4096];

static int fail(const char *why)
{
    fprintf(stderr, "json_check: invalid JSON at byte %zu: %s\n", pos, why);
    return -1;
}

static void skip_ws(void)
{
    while (pos < len && strchr(" \t\r\n", in[pos]))
        pos++;
}

/* Parses a string into out (escapes kept as written, enough for paths and checks). */
static int string(char *out, size_t cap)
{
    size_t n = 0;
    if (pos >= len || in[pos] != '"') return fail("expected a string");
    pos++;
    while (pos < len && in[pos] != '"') {
        unsigned char c = (unsigned char)in[pos];
        if (c < 0x20) return fail("control character in a string");
        if (c == '\\') {
            pos++;
            if (pos >= len) break;
            if (in[pos] == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (pos + i >= len || !strchr("0123456789abcdefABCDEF", in[pos + i]))
                        return fail("bad \\u escape");
                pos += 4;
            } else if (!strchr("\"\\/bfnrt", in[pos])) {
                return fail("bad escape");
            }
        }
        if (n + 1 < cap) out[n++] = in[pos];
        pos++;
    }
    if (pos >= len) return fail("unterminated string");
    pos++;
    out[n] = 0;
    return 0;
}

static int number(char *out, size_t cap)
{
    size_t start = pos;
    if (pos < len && in[pos] == '-') pos++;
    if (pos < len && in[pos] == '0')
        pos++;
    else if (pos < len && in[pos] >= '1' && in[pos] <= '9')
        while (pos < len && in[pos] >= '0' && in[pos] <= '9')
            pos++;
    else
        return fail("bad number");
    if (pos < len && in[pos] == '.') {
        pos++;
        if (pos >= len || in[pos] < '0' || in[pos] > '9') return fail("bad fraction");
        while (pos < len && in[pos] >= '0' && in[pos] <= '9')
            pos++;
    }
    if (pos < len && (in[pos] == 'e' || in[pos] == 'E')) {
        pos++;
        if (pos < len && (in[pos] == '+' || in[pos] == '-')) pos++;
        if (pos >= len || in[pos] < '0' || in[pos] > '9') return fail("bad exponent");
        while (pos < len && in[pos] >= '0' && in[pos] <= '9')
            pos++;
    }
    snprintf(out, cap, "%.*s", (int)(pos - start), in + start);
    return 0;
}

static int value(int depth);

static int members(int depth, int array)
{
    size_t base = strlen(path);
    pos++;
    skip_ws();
    char close = array ? ']' : '}';
    if (pos < len && in[pos] == close) {
        pos++;
        return 0;
    }
    for (int i = 0;; i++) {
        skip_ws();
        if (array) {
            snprintf(path + base, sizeof path - base, "[%d]", i);
        } else {
            char key[256];
            if (string(key, sizeof key)) return -1;
            skip_ws();
            if (pos >= len || in[pos] != ':') return fail("expected ':'");
            pos++;
            snprintf(path + base, sizeof path - base, ".%s", key);
        }
        if (value(depth + 1)) return -1;
        path[base] = 0;
        skip_ws();
        if (pos < len && in[pos] == ',') {
            pos++;
            continue;
        }
        if (pos < len && in[pos] == close) {
            pos++;
            return 0;
        }
        return fail(array ? "expected ',' or ']'" : "expected ',' or '}'");
    }
}

static int value(int depth)
{
    if (depth > MAX_DEPTH) return fail("nested too deeply");
    skip_ws();
    if (pos >= len) return fail("expected a value");
    char text[4096];
    switch (in[pos]) {
    case '{':
    case '[':
        return members(depth, in[pos] == '[');
    case '"':
        if (string(text, sizeof text)) return -1;
        break;
    default:
        if (!strncmp(in + pos, "true", 4) || !strncmp(in + pos, "null", 4)) {
            snprintf(text, sizeof text, "%.4s", in + pos);
            pos += 4;
        } else if (!strncmp(in + pos, "false", 5)) {
            snprintf(text, sizeof text, "false");
            pos += 5;
        } else if (number(text, sizeof text)) {
            return -1;
        }
    }
    printf("%s=%s\n", *path ? path : ".", text);
    return 0;
}

int main(void)
{
    static char buf[MAX_INPUT + 1];
    len = fread(buf, 1, sizeof buf, stdin);
    if (len > MAX_INPUT) {
        fprintf(stderr, "json_check: input larger than %u bytes\n", MAX_INPUT);
        return 1;
    }
    in = buf;
    if (value(0)) return 1;
    skip_ws();
    if (pos != len) return fail("text after the value"), 1;
    return 0;
}
