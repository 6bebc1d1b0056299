#!/bin/sh
# The PMIx bootstrap backend alone (launch/pmix_check) under mpirun: addresses with odd bytes
# go through the exchange intact; a domain the core reports dead (cor__boot_died, as when a
# route says its peer closed) releases a barrier waiting in its fence with COR_EPEERDEAD, and
# later barriers fail at once. Bounded: mpirun is stopped after LAUNCH_TIMEOUT.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
launch_need_mpirun
P=$B/tests/launch/pmix_check
[ -x "$P" ] || skip "pmix_check not built (libcor without PMIx)"
LAUNCH_TIMEOUT=60
for n in 2 4; do
    run_bg ex$n launch_mpirun $n "$P" exchange
    wait_bg ex$n
    [ $RC = 0 ] || { show ex$n; die "exchange on $n: exited $RC"; }
    [ "$(grep -c 'PASS exchange' "$WORK/ex$n.out")" = $n ] || { show ex$n; die "exchange on $n"; }
done
say "exchange: 2 and 4 domains, odd bytes intact"
LAUNCH_MPIRUN_ARGS=--enable-recovery
run_bg died launch_mpirun 3 "$P" died
wait_bg died
[ $RC != 124 ] || { show died; die "died: timed out (a barrier waited for the dead domain)"; }
[ "$(grep -c 'PASS barrier released' "$WORK/died.out")" = 2 ] || { show died; die "died: $RC"; }
grep 'PASS' "$WORK/died.out" | sed 's/^/  /'
say "PASS"
