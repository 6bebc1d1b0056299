#!/bin/sh
# Builds the libFuzzer target for libcorpvm's wire checks (fuzz_wire.c over wire.c) with clang
# (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it for SECONDS
# (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
set -eu
secs=${1:-30}
case $secs in '' | *[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cc=${CLANG:-}
for c in clang clang-14 clang-15 clang-16; do
    [ -z "$cc" ] && command -v "$c" >/dev/null 2>&1 && cc=$c
done
[ -n "$cc" ] || { echo "run-fuzz.sh: clang not found (Debian package clang)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pvm-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
src="$top/cor/pvmcompat"
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src" \
    "$here/fuzz_wire.c" "$src/wire.c" -o "$tmp/fuzz_wire"
mkdir -p "$tmp/corpus"
# Seeds: an empty message image (a native header: len 0), a HELLO's words with an address.
printf '\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$tmp/corpus/image0"
printf '\001\000\000\000\001\000\000\000\000\000\000\000\005\000\000\000\003\000\000\000\001\000\000\000\010\000\000\000\004\000\000\000gm 0' >"$tmp/corpus/hello"
cd "$tmp"
"$tmp/fuzz_wire" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 "$tmp/corpus" \
    >"$tmp/log" 2>&1 || {
    tail -50 "$tmp/log" >&2
    echo "run-fuzz.sh: the fuzzer found a crash (see above)" >&2
    exit 1
}
grep -E '^stat::number_of_executed_units' "$tmp/log" || true
echo "run-fuzz.sh: no crash in ${secs}s"
