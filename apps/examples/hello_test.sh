#!/bin/sh
# Runs the example under cor-run with 2 domains and checks that every task got its greeting.
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
out=$(mktemp)
trap 'rm -f "$out" "$out.readme"' EXIT INT TERM
timeout -k 10 60 "$b/cor-run" -n 2 "$b/examples/hello" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: cor-run -n 2 hello exited with status $rc, expected 0"
    exit 1
fi
for line in 'domain 0 task 0 got "hello from task 0 of domain 1"' \
    'domain 0 task 1 got "hello from task 1 of domain 1"' \
    'domain 1 task 0 got "hello from task 0 of domain 0"' \
    'domain 1 task 1 got "hello from task 1 of domain 0"'; do
    if ! grep -qxF "$line" "$out"; then
        echo "FAIL: expected the line: $line"
        exit 1
    fi
done
# The README reproduces this program: it must be the same text.
readme=${COR_SRCDIR:-}/README.md
if [ -f "$readme" ]; then
    awk '/^### A complete program/ { f = 1 } f && /^```c$/ { on = 1; next }
         on && /^```$/ { exit } on { print }' "$readme" >"$out.readme"
    if ! diff -u "$COR_SRCDIR/apps/examples/hello.c" "$out.readme"; then
        rm -f "$out.readme"
        echo "FAIL: the example in README.md differs from apps/examples/hello.c (diff above)"
        exit 1
    fi
    rm -f "$out.readme"
fi
echo "PASS: 4 greetings"
