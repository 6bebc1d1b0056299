#!/bin/sh
# Runs the README's DSM example on 3 domains: each counter must be 1000; the README must show
# the same program.
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
out=$(mktemp)
trap 'rm -f "$out" "$out.readme"' EXIT INT TERM
timeout -k 10 60 "$b/cor-run" -n 3 "$b/examples/dsm_count" >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: cor-run -n 3 dsm_count exited with status $rc, expected 0"; exit 1; }
for d in 0 1 2; do
    grep -qxF "domain $d added 1000" "$out" || { echo "FAIL: expected 'domain $d added 1000'"; exit 1; }
done
readme=${COR_SRCDIR:-}/README.md
if [ -f "$readme" ]; then
    awk '/^### Shared objects in brief/ { f = 1 } f && /^```c$/ { on = 1; next }
         on && /^```$/ { exit } on { print }' "$readme" >"$out.readme"
    # The file starts with a comment the README leaves out.
    sed '1,/^ \*\/$/d' "$COR_SRCDIR/apps/examples/dsm_count.c" | diff -u - "$out.readme" ||
        { echo "FAIL: the DSM example in README.md differs from apps/examples/dsm_count.c"; exit 1; }
fi
echo "PASS: 3 counters of 1000"
