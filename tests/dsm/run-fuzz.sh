#!/bin/sh
# Builds the libFuzzer target for libcordsm's request/reply parsers (fuzz_req.c) with clang
# (-fsanitize=fuzzer,address,undefined) in a temporary folder and runs it for SECONDS
# (default 30). Exits non-zero if the build fails or the fuzzer finds a crash.
# Needs clang and libclang-rt-dev (Debian: clang-14, libclang-rt-14-dev).
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup dsm "$@"
top=$fuzz_top
src="$top/cor/dsm"
fuzz_cc -I"$top/include" -I"$top/cor/core" -I"$src" "$fuzz_here/fuzz_req.c" \
    "$src/dsm_wire.c" "$src/dsm_obj.c" "$src/dsm_dir.c" "$src/dsm_shm.c" "$top/cor/core/idp.c" \
    -o "$fuzz_tmp/fuzz_req"
# Seeds: a valid PUT of 2 ints and a valid DIR_GET of "ab", so the fuzzer starts past the magic,
printf 'CDS1\002\003\000\000\001\000\000\000\000\000\000\000\005\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000\007\000\000\000\010\000\000\000' >"$fuzz_tmp/corpus/put"
printf 'CDS1\013\000\002\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000ab' >"$fuzz_tmp/corpus/dirget"
# a cached-protocol read request (C_REQ, flags = read), so the directory is reached,
printf 'CDS1\022\003\000\000\001\000\000\000\001\000\000\000\005\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$fuzz_tmp/corpus/creq"
# and a batch of one add (ADDV).
printf 'CDS1\027\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\005\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\003\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000' >"$fuzz_tmp/corpus/addv"
# A same-host segment's header: magic "SHM1", type COR_LONG, idp FUZZ_IDP, 8 elements of 8 bytes.
printf 'SHM1\004\000\000\000\210\167\146\125\104\063\042\021\010\000\000\000\000\000\000\000\010\000\000\000\000\000\000\000' >"$fuzz_tmp/corpus/segment"
fuzz_run fuzz_req -max_len=4608
