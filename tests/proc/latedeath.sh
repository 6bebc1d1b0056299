#!/bin/sh
# A death notice that reaches a domain after cor_finalize freed its state (a peer given up or
# killed while the others finalize) must be ignored, not crash the domain: latedeath.py plays
# cor-run and sends "DEAD 1" between the domain's FINISH and its BYE. (256 domains on 2 cores
# crashed this way: the bootstrap thread's death callback read the freed death flags.)
. "$(dirname "$0")/common.sh"
A=$PROC/alltoall
[ -x "$A" ] || die "alltoall not built"
command -v python3 >/dev/null 2>&1 || skip "no python3"
: "${COR_ROUTE:=udp}"
export COR_ROUTE
run_bg ld timeout -k 10 100 python3 "$(dirname "$0")/latedeath.py" "$WORK/rv" "$A" -s
wait_bg ld
[ $RC = 0 ] || { show ld; die "the domain did not end normally"; }
grep -q "domain 1 died" "$WORK/ld.err" || { show ld; die "the death notice was not heard"; }
say "$(cat "$WORK/ld.out" | tail -n 1)"
say "PASS"
