#!/bin/sh
# Runs the example under cor-run with 2 domains and checks that every task got its greeting.
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM
timeout 60 "$b/cor-run" -n 2 "$b/examples/hello" >"$out" 2>&1
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
echo "PASS: 4 greetings"
