#!/bin/sh
# Builds the libFuzzer target for libgm-compat's receive side (fuzz_recv.c over src/recv.c:
# eager message headers, stream order, item checks) with clang
# (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it for SECONDS
# (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
# Needs clang, libclang-rt-dev and libfabric-dev (Debian: clang-14, libclang-rt-14-dev).
. "$(dirname "$0")/../../tests/fuzz-lib.sh"
fuzz_setup gm "$@"
src="$fuzz_top/libgm-compat/src"
fuzz_cc -D_GNU_SOURCE -pthread -I"$fuzz_top/libgm-compat/include" -I"$src" \
    "$fuzz_here/fuzz_recv.c" "$src/sizes.c" -lfabric -o "$fuzz_tmp/fuzz_recv"
# Seeds (operations of fuzz_recv.c): buffers of sizes 5 and 7 on both priorities, then small
# and large messages from two senders, in and out of order, a duplicate, a restart, the DATA.
printf '\002\005\000\002\005\001\002\007\000\001\001\005\000\000\000\020\000\001\001\005\002\000\000\040\000\001\001\005\006\004\000\010\000\001\002\007\010\000\000\000\001\004\001\001\005\002\000\000\040\000\001\001\005\000\000\001\004\000\003\377\000\004' \
    >"$fuzz_tmp/corpus/streams"
# A raw header of the wire (64 bytes): a MSG of 4 bytes, size 5, from node 1 port 2, epoch 1.
printf '\000\104\000\001\005\000\000\001\000\002\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000\007\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\004\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000abcd' \
    >"$fuzz_tmp/corpus/raw"
fuzz_run fuzz_recv -max_len=16384 -close_fd_mask=2
