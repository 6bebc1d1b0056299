#!/bin/bash
# A task that lives while many others come and go keeps routing (issue 31, item 5): one
# master (life churn) lives while 200 short routed children come and go, over udp 1 then 3
# at a time, and over myrinet (gm) 3 at a time: 200 is more than COR_PVM_DOMAINS=64, so children take the
# ranks of children gone, and the master re-admits each rank for its new occupant. Every
# exchange carries a checked value; the last children must be routed (pvm_cor_domain) and
# the master's counters must show routed messages and re-admitted ranks. Before ranks were
# freed with their task and re-admitted, the 64th child and every later one kept PVM's path.
# COR_PVM_CHURN (default 200) sets the number. COR_TEST_SCALE=small (the sanitizer builds): 80
# children, and only the cases 3 at a time (concurrent joins and leaves, what the sanitizers
# look at; the normal build runs udp 1 at a time too). Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin churn
LIFE=$BUILD/tests/pvm/life
[ -x "$LIFE" ] || { say "FAIL: $LIFE not built"; exit 1; }
exports=$(pvm_exports COR_PVM_STATS)
n=${COR_PVM_CHURN:-200}
specs=("udp 1" "udp 3" "myrinet 3")
if [ "${COR_TEST_SCALE:-}" = small ]; then
    [ "$n" -le 80 ] || n=80
    specs=("udp 3" "myrinet 3")
fi
EXTRA_EP=$(dirname "$LIFE") PVM_LIB_QUIET=1 pvm_vm_start || { say "FAIL: cannot start pvmd"; exit 1; }
rc=0
for spec in "${specs[@]}"; do
    read -r route k <<<"$spec"
    t0=$(date +%s)
    pvm_run_master -t 900 env COR_PVM_ROUTE=$route COR_PVM_STATS=1 PVM_EXPORT=$exports \
        "$LIFE" churn "$n" "$k" 3
    out=$(grep '^life: churn' "$PVM_OUT" || true)
    readm=$({ grep -o 'readmitted [0-9]*' "$PVM_ERR" || true; } | awk '{s += $2} END {print s + 0}')
    sent=$({ grep -o 'routed sent [0-9]*' "$PVM_ERR" || true; } | awk '{s += $3} END {print s + 0}')
    # every child routed, every value right, the last one routed; the master re-admitted ranks
    if [ "$PVM_RC" != 0 ] || [[ $out != *": routed $n, bad 0, last rank "*" routed Y" ]] ||
        [ "$sent" -eq 0 ] || [ "$readm" -eq 0 ]; then
        say "FAIL $route by $k: exit $PVM_RC, '$out', master routed sends $sent, ranks re-admitted $readm"
        cat "$PVM_OUT" "$PVM_ERR" | tail -40 | sed 's/^/  | /'
        # the children's own output (a stuck child's last words, a sanitizer's report)
        say "pvmd's log (the children's output), last 60 lines:"
        pvm_log | tail -60 | sed 's/^/  | /'
        rc=1
    else
        say "PASS $route by $k: ${out#life: } in $(($(date +%s) - t0)) s; master routed sends $sent, ranks re-admitted $readm"
    fi
done
pvm_vm_stop
[ $rc = 0 ] && say PASS
exit $rc
