#!/bin/bash
# A virtual machine that lives long keeps routing: 500 short routed programs (life.c spawn 1:
# a master and its child, one routed exchange) one after another in one VM, over udp and over
# myrinet (1000 routed tasks each, far more than COR_PVM_DOMAINS=64), while one routed task (life.c
# hold) lives on through all of them, so their session never ends: the last program's child
# must be routed (its pvm_cor_domain of the master succeeds) and its counters must show
# routed messages. A task that leaves gives its rank back (the next one to join takes it);
# before, ranks came back only when the session ended, and the 33rd program and every later
# one kept PVM's path ("domain rank 64 exceeds COR_PVM_DOMAINS=64") whenever some routed
# task outlived them (a long-lived one, or only the previous program's child still leaving
# while the next program joined). Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin reuse
LIFE=$BUILD/tests/pvm/life
[ -x "$LIFE" ] || { say "FAIL: $LIFE not built"; exit 1; }
exports=$(pvm_exports COR_PVM_STATS)
EXTRA_EP=$(dirname "$LIFE") PVM_LIB_QUIET=1 pvm_vm_start || { say "FAIL: cannot start pvmd"; exit 1; }
rc=0
for spec in "udp ${COR_PVM_REUSE_UDP:-500}" "myrinet ${COR_PVM_REUSE_GM:-500}"; do
    read -r route runs <<<"$spec"
    [ "${COR_TEST_SCALE:-}" != small ] || [ "$runs" -le 40 ] || runs=40
    t0=$(date +%s)
    # the task that outlives every program: its input open until they all ran
    coproc HOLD { exec timeout -k 5 900 env COR_PVM_ROUTE=$route "$LIFE" hold 600 2>&1; }
    hold_pid=$HOLD_PID
    held=""
    read -r -t 60 held <&"${HOLD[0]}" || true
    if [[ $held != "life: holding rank "[0-9]* ]]; then
        say "FAIL $route: the long-lived task did not join a route: '$held'"
        rc=1; break
    fi
    for ((i = 1; i <= runs; i++)); do
        off=$(pvm_log_size)
        stats=""
        [ $i != "$runs" ] || stats=1
        pvm_run_master -t 30 env COR_PVM_ROUTE=$route COR_PVM_STATS=$stats PVM_EXPORT=$exports \
            "$LIFE" spawn 1 1
        if [ "$PVM_RC" != 0 ]; then
            say "FAIL $route: program $i exited $PVM_RC"; cat "$PVM_OUT" "$PVM_ERR" | sed 's/^/  | /'
            rc=1; break
        fi
    done
    eval "exec ${HOLD[1]}>&-" # its input ends: it leaves
    wait "$hold_pid" || { say "FAIL $route: the long-lived task failed ($?)"; rc=1; }
    [ $rc = 0 ] || break
    last=$(grep '^life: spawned' "$PVM_OUT" || true)
    # the child's counters reach pvmd's log when it ends
    for ((k = 0; k < 50; k++)); do
        sent=$(pvm_log_since "$off" | { grep -o 'routed sent [0-9]*' || true; } | awk '{s += $3} END {print s + 0}')
        [ "$sent" -gt 0 ] && break
        sleep 0.1
    done
    sent=$((sent + $({ grep -o 'routed sent [0-9]*' "$PVM_ERR" || true; } | awk '{s += $3} END {print s + 0}')))
    if [[ $last != *"routed 1, last rank "*" routed Y"* ]] || [ "$sent" -eq 0 ]; then
        say "FAIL $route: program $runs of $runs: '$last', routed sends $sent"
        cat "$PVM_ERR" | sed 's/^/  | /'; rc=1
    else
        say "PASS $route: $runs programs beside a task of ${held#life: holding }" \
            "in $(($(date +%s) - t0)) s; the last: ${last#life: }, routed sends $sent"
    fi
done
pvm_vm_stop
[ $rc = 0 ] && say PASS
exit $rc
