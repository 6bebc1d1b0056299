#!/bin/bash
# A task blocked in pvm_recv sleeps (life.c idle): over each CoR route, a routed worker
# waits 10 s for a message; its CPU time meanwhile (all its threads: getrusage) must stay at
# or below 0.05 s, its threads may go to sleep at most 100 times a second (a wait that looked
# at PVM's sockets every millisecond would sleep 1000 times: ~5 a second here), and it must
# still wake for a routed message and for one that comes PVM's way (from pvmd's socket),
# each answered within a second. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin idle
LIFE=$BUILD/tests/pvm/life
[ -x "$LIFE" ] || fail "$LIFE not built"
SECS=${COR_PVM_IDLE_SECS:-10}
# The budget: 0.05 s of CPU per 10 s of waiting.
MAX_CPU=$(awk -v s="$SECS" 'BEGIN {printf "%.3f", 0.05 * s / 10}')
MAX_SLEEPS=${COR_PVM_IDLE_MAX_SLEEPS:-$(awk -v s="$SECS" 'BEGIN {printf "%d", 100 * s}')}
EXTRA_EP=$(dirname "$LIFE") pvm_vm_start || fail "cannot start a PVM virtual machine"
exports=$(pvm_exports)
rc=0
for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    pvm_run_master -t $((SECS + 60)) env COR_PVM_ROUTE=$route PVM_EXPORT=$exports "$LIFE" idle "$SECS"
    line=$(grep '^life: idle cpu' "$PVM_OUT" || true)
    if [ "$PVM_RC" != 0 ] || [ -z "$line" ]; then
        say "FAIL $route: exit $PVM_RC"; cat "$PVM_OUT" "$PVM_ERR" | sed 's/^/  | /'; pvm_log | tail -20 | sed 's/^/  log| /'
        rc=1; continue
    fi
    read -r cpu sleeps routed pvm <<<"$(sed -E 's/.*idle cpu ([0-9.]+) s .*\(([0-9]+) sleeps\).* wake routed ([0-9.]+) ms, pvm ([0-9.]+) ms.*/\1 \2 \3 \4/' <<<"$line")"
    why=""
    awk -v c="$cpu" -v m="$MAX_CPU" 'BEGIN {exit !(c <= m)}' || why="the idle receiver used $cpu s of CPU (at most $MAX_CPU)"
    awk -v n="$sleeps" -v m="$MAX_SLEEPS" 'BEGIN {exit !(n <= m)}' ||
        why="${why:+$why; }the idle receiver's threads slept and woke $sleeps times (at most $MAX_SLEEPS)"
    awk -v r="$routed" -v p="$pvm" 'BEGIN {exit !(r < 1000 && p < 1000)}' ||
        why="${why:+$why; }a wake-up took more than a second (routed $routed ms, PVM's path $pvm ms)"
    if [ -n "$why" ]; then say "FAIL $route: $why"; rc=1; else say "PASS $route: ${line#life: }"; fi
done
pvm_vm_stop
[ $rc = 0 ] && say PASS
exit $rc
