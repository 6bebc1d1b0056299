# Deprecated: fuzz targets are built by `make fuzz` and run by tests/fuzz/run.sh (see
# tests/README.md); this stays until no run-fuzz.sh script uses it.
# Shared part of the tests/*/run-fuzz.sh scripts (sourced, POSIX sh). A script does:
#   . "$(dirname "$0")/../fuzz-lib.sh"
#   fuzz_setup NAME "$@"        # checks SECONDS, finds clang, makes $fuzz_tmp/corpus
#   fuzz_cc SOURCES... -o "$fuzz_tmp/BIN"   # clang -fsanitize=fuzzer,address,undefined
#   printf ... >"$fuzz_tmp/corpus/seed"     # seeds
#   fuzz_run BIN [libFuzzer options]        # runs for SECONDS, fails on a crash
# Sets fuzz_top (the source tree), fuzz_here (the script's folder), fuzz_secs, fuzz_tmp.
# The temporary folder goes on exit. Needs clang and libclang-rt-dev (Debian: clang-14,
# libclang-rt-14-dev); CLANG names another compiler.
set -eu

fuzz_setup() {
    fuzz_me=$0
    fuzz_secs=${2:-30}
    case $fuzz_secs in '' | *[!0-9]*) echo "usage: $fuzz_me SECONDS" >&2; exit 2 ;; esac
    fuzz_here=$(cd "$(dirname "$0")" && pwd)
    fuzz_top=$(cd "$fuzz_here/../.." && pwd)
    fuzz_clang=${CLANG:-}
    if [ -z "$fuzz_clang" ]; then
        for c in clang clang-14 clang-15 clang-16; do
            if command -v "$c" >/dev/null 2>&1; then fuzz_clang=$c; break; fi
        done
    fi
    [ -n "$fuzz_clang" ] || { echo "$fuzz_me: clang not found (Debian package clang)" >&2; exit 1; }
    fuzz_tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1-fuzz.XXXXXX")
    trap 'rm -rf "$fuzz_tmp"' EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$fuzz_tmp/corpus"
}

fuzz_cc() {
    "$fuzz_clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Werror=incompatible-function-pointer-types "$@"
}

# fuzz_run BIN [options]: runs $fuzz_tmp/BIN on $fuzz_tmp/corpus for fuzz_secs seconds; on a
# crash prints the end of its log (without the progress lines) and exits 1.
fuzz_run() {
    fuzz_bin=$1
    shift
    cd "$fuzz_tmp"
    "$fuzz_tmp/$fuzz_bin" -max_total_time="$fuzz_secs" -rss_limit_mb=2048 -print_final_stats=1 \
        "$@" "$fuzz_tmp/corpus" >"$fuzz_tmp/log" 2>&1 || {
        grep -v '^#' "$fuzz_tmp/log" | tail -50 >&2
        echo "$fuzz_me: the fuzzer found a crash (see above)" >&2
        exit 1
    }
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$fuzz_tmp/log" || true
    echo "$fuzz_me: no crash in ${fuzz_secs}s"
}
