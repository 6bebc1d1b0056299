#!/bin/sh
# Builds the libFuzzer target for CoRudpRoute's datagram parser (fuzz_parse.c) with clang
# (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it for SECONDS
# (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
# Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup udp "$@"
top=$fuzz_top
src="$top/cor/routes/udp"
fuzz_cc -D_GNU_SOURCE -I"$top/include" -I"$top/cor/core" -I"$src" \
    "$fuzz_here/fuzz_parse.c" "$src/udp_wire.c" "$src/udp_window.c" "$src/udp_reasm.c" \
    -o "$fuzz_tmp/fuzz_parse"
# A seed: two fragments of a frame, so the fuzzer starts past the magic and version checks.
printf '\074\000CoRu\001\001\000\000\000\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\010\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' \
    >"$fuzz_tmp/corpus/seed0"
fuzz_run fuzz_parse -max_len=70000
