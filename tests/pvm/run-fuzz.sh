#!/bin/sh
# Builds the libFuzzer target for libcorpvm's wire checks (fuzz_wire.c over wire.c) with clang
# (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it for SECONDS
# (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup pvm "$@"
src="$fuzz_top/cor/pvmcompat"
fuzz_cc -I"$src" "$fuzz_here/fuzz_wire.c" "$src/wire.c" -o "$fuzz_tmp/fuzz_wire"
# Seeds: an empty message image (a native header: len 0), a HELLO's words with an address.
printf '\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$fuzz_tmp/corpus/image0"
printf '\001\000\000\000\001\000\000\000\000\000\000\000\005\000\000\000\003\000\000\000\001\000\000\000\010\000\000\000\004\000\000\000gm 0' >"$fuzz_tmp/corpus/hello"
fuzz_run fuzz_wire -max_len=4096
