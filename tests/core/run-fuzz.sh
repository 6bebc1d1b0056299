#!/bin/sh
# Builds the libFuzzer target for the domain's bootstrap line parser (fuzz_boot.c over
# cor/core/bootstrap.c) with clang (-fsanitize=fuzzer,address,undefined) in a temporary folder
# and runs it for SECONDS (default 30). Exits non-zero if the build fails or the fuzzer finds
# a crash. Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup boot "$@"
top=$fuzz_top
fuzz_cc -D_GNU_SOURCE -pthread -I"$top/include" -I"$top/cor/core" "$fuzz_here/fuzz_boot.c" \
    -o "$fuzz_tmp/fuzz_boot"
# Seeds (byte 0: size 2, rank 0; byte 1: reads of 64 bytes): a whole session from cor-run,
# and one with a death notice and an error.
printf '\001\077WELCOME\nTABLE 2 2\nA 0 0 udp 0 3132372e302e302e313a31303030\nA 0 1 gm -1 -\nA 1 0 udp 0 3132372e302e302e313a31303031\nA 1 1 gm -1 41\nEND\nRELEASE 1\nRELEASE 2\nBYE\n' \
    >"$fuzz_tmp/corpus/session"
printf '\012\000WELCOME\nDEAD 1 killed by signal 9\nERR barrier 1 cannot complete\nDEAD 0\n' \
    >"$fuzz_tmp/corpus/death"
# libFuzzer's -close_fd_mask=2: the parser logs every protocol error to stderr.
fuzz_run fuzz_boot -max_len=8192 -close_fd_mask=2 -dict="$fuzz_here/boot.dict"
