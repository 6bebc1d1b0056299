#!/bin/sh
# Builds the libFuzzer target for cor-run's bootstrap line parser (fuzz_corrun.c over
# apps/cor-run.c) with clang (-fsanitize=fuzzer,address,undefined) in a temporary folder and
# runs it for SECONDS (default 30). Exits non-zero if the build fails or the fuzzer finds a
# crash. Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup corrun "$@"
fuzz_cc -I"$fuzz_top/apps" "$fuzz_here/fuzz_corrun.c" -o "$fuzz_tmp/fuzz_corrun"
# rec CONN TEXT: one record of the input (connection, length, bytes; TEXT in printf %b form).
rec() {
    printf '%b' "$2" >"$fuzz_tmp/rec"
    printf "\\$(printf %03o "$1")\\$(printf %03o "$(wc -c <"$fuzz_tmp/rec")")"
    cat "$fuzz_tmp/rec"
}
# Seeds: a whole two-domain session (join, publish, two barriers, finish) on connections 0
# and 1, and a one-domain session whose HELLO arrives in two reads.
{
    printf '\001'
    rec 0 'HELLO 1 0 2 0123456789abcdef 100\n'
    rec 1 'HELLO 1 1 2 0123456789ABCDEF 101\nADDR 0 udp 0 3132372e302e302e313a31\n'
    rec 0 'ADDR 0 udp 0 3132372e302e302e313a32\nADDR 1 gm -1 -\nPUB 2\n'
    rec 1 'ADDR 1 gm -1 41\nPUB 2\nBARRIER 1\n'
    rec 0 'BARRIER 1\nBARRIER 2\n'
    rec 1 'BARRIER 2\nFINISH\n'
    rec 0 'FINISH\n'
} >"$fuzz_tmp/corpus/session"
{
    printf '\000'
    rec 3 'HELLO 1 0 1 0123456'
    rec 3 '789abcdef 7\nADDR 0 tcp 3 -\nPUB 1\nFINISH\n'
} >"$fuzz_tmp/corpus/split"
rm -f "$fuzz_tmp/rec"
# libFuzzer's -close_fd_mask=2: cor-run reports every protocol error on stderr.
fuzz_run fuzz_corrun -max_len=8192 -close_fd_mask=2 -dict="$fuzz_here/corrun.dict"
