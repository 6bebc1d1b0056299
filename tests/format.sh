#!/bin/sh
# Every C source of the tree (.c and .h under cor/, include/, libgm-compat/, apps/ and tests/)
# must be as clang-format leaves it with the committed .clang-format: fails naming the files
# that are not (fix them with `clang-format -i FILE...`). The files are found in the source
# tree, not through git, so the check also runs from a distribution tarball. The tree is
# formatted with clang-format 14 (Debian bookworm's); another major version formats some
# constructs differently, so the check skips (77) with a reason, as it does without
# clang-format (Debian package clang-format). CLANG_FORMAT names another program.
# Skipped in sanitizer builds: the sources are the same as in the normal build's run.
set -u
want_major=14
top=${COR_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
skip() { echo "format: SKIP: $*"; exit 77; }
[ "${COR_SANITIZED:-}" = yes ] && skip "sanitizer build (the normal build checks the same sources)"
cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-$want_major clang-format; do
        if command -v "$c" >/dev/null 2>&1; then cf=$c; break; fi
    done
fi
[ -n "$cf" ] && command -v "$cf" >/dev/null 2>&1 ||
    skip "${cf:-clang-format} not found (Debian package clang-format)"
version=$("$cf" --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
[ "$version" = "$want_major" ] ||
    skip "$cf is version ${version:-unknown}; the tree is formatted with clang-format $want_major"
[ -f "$top/.clang-format" ] || { echo "format: FAIL: $top/.clang-format missing" >&2; exit 1; }

out=$(mktemp "${TMPDIR:-/tmp}/cor-format.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
cd "$top" || exit 99
n=$(find cor include libgm-compat apps tests -name '*.[ch]' -type f | wc -l)
[ "$n" -gt 0 ] || { echo "format: FAIL: no C source found under $top" >&2; exit 1; }
# --style=file finds the .clang-format above each file, i.e. the committed one.
find cor include libgm-compat apps tests -name '*.[ch]' -type f -print0 | sort -z |
    xargs -0 "$cf" --style=file --dry-run -Werror >"$out" 2>&1
st=$?
bad=$(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$out" |
    uniq)
if [ -n "$bad" ]; then
    echo "format: FAIL: $(echo "$bad" | wc -l) of $n C files differ from $cf's formatting:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    echo "format: the first differences:" >&2
    head -n 30 "$out" >&2
    echo "format: fix them with: clang-format -i $(echo "$bad" | tr '\n' ' ')" >&2
    exit 1
fi
if [ "$st" -ne 0 ] || [ -s "$out" ]; then # a file it cannot read, a bad style
    echo "format: FAIL: $cf exited with status $st:" >&2
    head -n 30 "$out" >&2
    exit 1
fi
echo "format: PASS: $n C files as $cf formats them"
