#!/bin/sh
# Builds the libFuzzer target for libcordsm's request/reply parsers (fuzz_req.c) with clang
# (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it for SECONDS
# (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
# Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
set -eu
secs=${1:-30}
case $secs in '' | *[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cc=${CLANG:-}
if [ -z "$cc" ]; then
    for c in clang clang-14 clang-15 clang-16; do
        if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
    done
fi
[ -n "$cc" ] || { echo "run-fuzz.sh: clang not found (Debian package clang)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsm-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
src="$top/cor/dsm"
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -D_GNU_SOURCE -I"$top/include" -I"$top/cor/core" -I"$src" "$here/fuzz_req.c" \
    "$src/dsm_wire.c" "$src/dsm_obj.c" "$src/dsm_dir.c" "$top/cor/core/idp.c" -o "$tmp/fuzz_req"
mkdir -p "$tmp/corpus"
# Seeds: a valid PUT of 2 ints and a valid DIR_GET of "ab", so the fuzzer starts past the magic,
printf 'CDS1\002\003\000\000\001\000\000\000\000\000\000\000\005\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000\007\000\000\000\010\000\000\000' >"$tmp/corpus/put"
printf 'CDS1\013\000\002\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000ab' >"$tmp/corpus/dirget"
# and a cached-protocol read request (C_REQ, flags = read), so the directory is reached.
printf 'CDS1\022\003\000\000\001\000\000\000\001\000\000\000\005\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$tmp/corpus/creq"
# and a batch of one add (ADDV).
printf 'CDS1\027\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\005\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\003\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000' >"$tmp/corpus/addv"
cd "$tmp"
"$tmp/fuzz_req" -max_total_time="$secs" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
    "$tmp/corpus" >"$tmp/log" 2>&1 || {
    grep -v "^#" "$tmp/log" | tail -40 >&2
    echo "run-fuzz.sh: the fuzzer found a crash (see above)" >&2
    exit 1
}
grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$tmp/log" || true
echo "run-fuzz.sh: no crash in ${secs}s"
