#!/bin/bash
# A peer the route gives up never makes the waiting side hang, and loses or doubles no
# message (issue 31, item 8). life giveup stops its routed child (SIGSTOP), sends it N
# numbered messages, and waits while the route, hearing nothing from the child for its dead
# time (COR_UDP_DEAD_MS, COR_GM_DEAD_MS: 500 ms here), gives it up; then lets it go on
# (SIGCONT) and sends 5 more. The child must get each exactly once, in order, though the route
# delivers late what it had taken before the stop (the child was only slow) and the master
# sends again PVM's way what the child had not confirmed; then the child's 5 messages back,
# on the route the master gave up, must reach it too. Over both routes, with pvmd started with
# the caller's environment and with an empty one (env -i: no TMPDIR), the master's TMPDIR
# differing from pvmd's. Before the message numbers, small routed sends were complete once
# the route had them, and what the route held for the stopped child was lost: the child
# waited until its timeout. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin giveup
LIFE=$BUILD/tests/pvm/life
N=${GIVEUP_MESSAGES:-200} # beyond the routes' windows and credits: some wait in the core
[ -x "$LIFE" ] || { say "FAIL: $LIFE not built"; exit 1; }
exports=$(pvm_exports COR_PVM_STATS COR_UDP_DEAD_MS COR_GM_DEAD_MS)
B=$(mktemp -d "${TMPDIR:-/tmp}/corgiveup.XXXXXX")
trap 'pvm_cleanup_all; rm -rf "$B"' EXIT
rc=0
for variant in env noenv; do
    if [ $variant = noenv ]; then export PVM_VM_NO_TMPDIR=1; else unset PVM_VM_NO_TMPDIR; fi
    EXTRA_EP=$(dirname "$LIFE") PVM_LIB_QUIET=1 pvm_vm_start || { say "FAIL: cannot start pvmd"; exit 1; }
    for route in ${COR_PVM_TEST_ROUTES:-udp myrinet}; do
        log0=$(pvm_log_size)
        pvm_run_master -t 120 env TMPDIR="$B" COR_PVM_ROUTE=$route COR_UDP_DEAD_MS=500 \
            COR_GM_DEAD_MS=500 COR_PVM_STATS=1 PVM_EXPORT=$exports "$LIFE" giveup "$N" 2
        out=$(grep '^life: giveup' "$PVM_OUT" || true)
        # The counters: the master's (what it sent again PVM's way) and, in pvmd's log, the
        # child's (what came twice and was dropped).
        pvm_log_since "$log0" >"$B/child.log"
        dups=$({ grep -o 'duplicates [0-9]*' "$B/child.log" || true; } | awk '{s += $2} END {print s + 0}')
        resent=$({ grep -o 'resent [0-9]*' "$PVM_ERR" || true; } | awk '{s += $2} END {print s + 0}')
        want="life: giveup got $((N + 5)) of $((N + 5)), bad 0, back 5 of 5, bad 0, routed Y"
        if [ "$PVM_RC" != 0 ] || [ "$out" != "$want" ]; then
            say "FAIL $variant $route: exit $PVM_RC$([ "$PVM_RC" != 124 ] || echo ' (hung)'), '$out'"
            cat "$PVM_OUT" "$PVM_ERR" "$B/child.log" | grep -v '^ *$' | tail -30 | sed 's/^/  | /'
            rc=1
        elif grep -q 'Sanitizer' "$B/child.log"; then
            say "FAIL $variant $route: the child's sanitizer report (pvmd's log):"
            grep -A20 'Sanitizer' "$B/child.log" | head -40 | sed 's/^/  | /'
            rc=1
        elif [ "$resent" = 0 ]; then
            say "FAIL $variant $route: the route never gave the stopped child up (nothing resent)"
            rc=1
        else
            say "PASS $variant $route: ${out#life: }; resent $resent, duplicates dropped $dups"
        fi
    done
    pvm_vm_stop
done
[ $rc = 0 ] && say PASS
exit $rc
