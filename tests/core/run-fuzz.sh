#!/bin/sh
# Builds the one libFuzzer target of the bootstrap protocol's lines (fuzz_bootline.c: the
# grammar of cor/core/bootline.c, the domain's reader in cor/core/bootstrap.c and cor-run's
# connections in apps/tools/cor-run.c) with clang (-fsanitize=fuzzer,address,undefined) in a
# temporary folder and runs it for SECONDS (default 30). Exits non-zero if the build fails or
# the fuzzer finds a crash. Needs clang, libclang-rt-dev and python3 (for the proof seed).
. "$(dirname "$0")/../fuzz-lib.sh"
fuzz_setup bootline "$@"
top=$fuzz_top
fuzz_cc -pthread -I"$top/include" -I"$top/cor/core" -I"$top/apps/tools" \
    "$fuzz_here/fuzz_bootline.c" "$top/cor/core/bootline.c" "$top/cor/core/boot_auth.c" \
    -o "$fuzz_tmp/fuzz_bootline"
c=$fuzz_tmp/corpus
# Grammar (byte 0 = 0): one line of each kind.
printf '\000HELLO 1 0 2 0123456789abcdef 100\nADDR 0 udp 0 3132372e302e302e313a31\nPUB 1\nBARRIER 1\nFINISH\nLOST 1\nWELCOME\nTABLE 2 1\nA 1 0 gm -1 -\nEND\nRELEASE 1\nDEAD 1 killed by signal 9\nERR no\nBYE\nCHALLENGE 1 %064d\nPROOF %064d %064d\nPROVEN %064d\n' 0 0 0 0 >"$c/grammar"
# Domain (byte 0 = 1; then size 2, rank 0; reads of 64 bytes): a whole session from cor-run,
# and one with a death notice and an error.
printf '\001\001\077WELCOME\nTABLE 2 2\nA 0 0 udp 0 3132372e302e302e313a31303030\nA 0 1 gm -1 -\nA 1 0 udp 0 3132372e302e302e313a31303031\nA 1 1 gm -1 41\nEND\nRELEASE 1\nRELEASE 2\nBYE\n' \
    >"$c/session"
printf '\001\012\000WELCOME\nDEAD 1 killed by signal 9\nERR barrier 1 cannot complete\nDEAD 0\n' \
    >"$c/death"
# cor-run (byte 0 = 2): rec CONN TEXT is one record (connection, length, bytes; TEXT in
# printf %b form).
rec() {
    printf '%b' "$2" >"$fuzz_tmp/rec"
    printf "\\$(printf %03o "$1")\\$(printf %03o "$(wc -c <"$fuzz_tmp/rec")")"
    cat "$fuzz_tmp/rec"
}
# A whole two-domain session (join, publish, two barriers, finish) on UNIX connections 0 and 1.
{
    printf '\002\001\000'
    rec 0 'HELLO 1 0 2 0123456789abcdef 100\n'
    rec 1 'HELLO 1 1 2 0123456789ABCDEF 101\nADDR 0 udp 0 3132372e302e302e313a31\n'
    rec 0 'ADDR 0 udp 0 3132372e302e302e313a32\nADDR 1 gm -1 -\nPUB 2\n'
    rec 1 'ADDR 1 gm -1 41\nPUB 2\nBARRIER 1\n'
    rec 0 'BARRIER 1\nBARRIER 2\n'
    rec 1 'BARRIER 2\nFINISH\n'
    rec 0 'FINISH\n'
} >"$c/corrun-session"
# One domain on TCP connection 2 (unproven at first): a valid proof (secret and challenge of
# zeros, domain nonce of ones), then the session; and a HELLO split over two reads.
proof=$(python3 -c 'import hmac,hashlib
nd=b"\x11"*32
m=hmac.new(bytes(32),b"cor-boot 1 domain\0"+bytes(32)+nd,hashlib.sha256).hexdigest()
print(nd.hex()+" "+m)')
{
    printf '\002\000\004'
    rec 2 "PROOF $proof\\n"
    rec 2 'HELLO 1 0 1 0123456'
    rec 2 '789abcdef 7\nADDR 0 tcp 3 -\nPUB 1\nFINISH\n'
} >"$c/corrun-tcp"
rm -f "$fuzz_tmp/rec"
# libFuzzer's -close_fd_mask=2: both parsers report every protocol error on stderr.
fuzz_run fuzz_bootline -max_len=8192 -close_fd_mask=2 -dict="$fuzz_here/bootline.dict"
