#!/bin/sh
# Builds the libFuzzer target for the core's frame checks (fuzz_frame.c over cor/core/proto.h
# and idp.c) with clang (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it
# for SECONDS (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
# Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup frame "$@"
top=$fuzz_top
fuzz_cc -D_GNU_SOURCE -I"$top/include" -I"$top/cor/core" "$fuzz_here/fuzz_frame.c" \
    "$top/cor/core/idp.c" -o "$fuzz_tmp/fuzz_frame"
# le VALUE BYTES: VALUE in BYTES little-endian bytes.
le() {
    n=$1 i=0
    while [ "$i" -lt "$2" ]; do
        printf "\\$(printf %03o $((n & 255)))"
        n=$((n >> 8)) i=$((i + 1))
    done
}
# hdr TYPE DTYPE TAG COUNT LEN OFFSET: a frame header (struct frame_hdr, 64 bytes).
hdr() {
    le "$1" 1; le "$2" 1; le 0 2; le 1 2; le 2 2; le 0 4; le "$3" 4; le 0 8
    le "$4" 8; le "$5" 8; le 7 8; le 0 8; le "$6" 8
}
# Seeds (byte 0: the eager limit): an EAGER of one int, an RTS of 600 ints with a 16-byte tail.
{ le 1 1; hdr 1 3 5 1 4 0; printf 'abcd'; } >"$fuzz_tmp/corpus/eager"
{ le 2 1; hdr 2 3 5 600 2400 2384; printf '0123456789abcdef'; } >"$fuzz_tmp/corpus/rts"
fuzz_run fuzz_frame -max_len=4096
