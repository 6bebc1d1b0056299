# The checks of an example PVM program run relinked over libcorpvm (sourced by threads.sh and
# mixed.sh, which set NAME, EXAMPLE, EXAMPLE_ARGS, SUMMARY_RE, MASTER_SENDS, WORKER_SENDS and
# PVM_PATH_MAX): in a private one-host PVM virtual machine, once per CoR route, the exit
# status, the summary line, and from the COR_PVM_STATS lines (the master's stderr, the
# worker's in pvmd's log) that the messages went routed: each side's sends add up, what one
# side sent routed the other received routed, nothing dropped, at most PVM_PATH_MAX messages
# on PVM's path (those sent before the handshake's switch).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin "$NAME"
PROG=$BUILD/apps/examples/$EXAMPLE
[ -x "$PROG" ] || fail "$PROG is not built"
export COR_PVM_STATS=1 PVM_EXAMPLE_TIMEOUT=${PVM_EXAMPLE_TIMEOUT:-60}
# The worker gets only what PVM_EXPORT names (pvmd's environment is clean).
PVM_EXPORT=$(pvm_exports COR_PVM_STATS PVM_EXAMPLE_TIMEOUT)
export PVM_EXPORT
# The master runs as "${RUN[@]}" PROG ARGS (with COR_PVM_LIB: under env LD_PRELOAD=..., which
# the worker inherits through PVM_EXPORT; this script's own commands never get it).
RUN=()
if [ -n "${COR_PVM_LIB:-}" ]; then
    [ -f "$COR_PVM_LIB" ] || { say "FAIL: COR_PVM_LIB=$COR_PVM_LIB not found"; exit 1; }
    RUN=(env "LD_PRELOAD=$COR_PVM_LIB${LD_PRELOAD:+:$LD_PRELOAD}")
    PVM_EXPORT=$PVM_EXPORT:LD_PRELOAD
fi
# stats TEXT: the fields of the first libcorpvm stats line in TEXT for tid $2 (or any):
# "tid routed_sent routed_bytes_sent routed_recv routed_bytes_recv pvm_sent pvm_recv dropped"
stats() {
    printf '%s\n' "$1" | sed -nE 's/.*libcorpvm\[t([0-9a-f]+)\]: routed sent ([0-9]+) \(([0-9]+) B\) received ([0-9]+) \(([0-9]+) B\); via pvm sent ([0-9]+) received ([0-9]+);.* dropped ([0-9]+).*/\1 \2 \3 \4 \5 \6 \7 \8/p' |
        { if [ -n "${2:-}" ]; then grep -v "^$2 " || true; else cat; fi; } | head -1
}

fails=0 runs=0
reasons=() # one line per failed run, said again at the end (CI shows a failure's last lines)
# run_one ROUTE: one run in a VM of its own (CoR domain ranks are never reused in a VM).
run_one() {
    local route=$1 off log why="" t0 t1 ms i tries
    runs=$((runs + 1))
    if ! EXTRA_EP=$(dirname "$PROG") PVM_LIB_QUIET=1 pvm_vm_start; then
        say "FAIL $route: cannot start a PVM virtual machine"
        fails=$((fails + 1))
        return 0
    fi
    off=$(pvm_log_size)
    t0=$(date +%s%N)
    COR_PVM_ROUTE=$route pvm_run_master -t "${PVM_TEST_TIMEOUT:-90}" "${RUN[@]}" "$PROG" ${EXAMPLE_ARGS[@]+"${EXAMPLE_ARGS[@]}"}
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    local m w
    m=$(stats "$(cat "$PVM_ERR")")
    local mtid=${m%% *}
    # The worker's line reaches pvmd's log when it exits: wait for it a little (a worker
    # that failed may never write it).
    local tries=100
    [ "$PVM_RC" = 0 ] || tries=10
    for ((i = 0; i < tries; i++)); do
        log=$(pvm_log_since "$off")
        w=$(stats "$log" "${mtid:-none}")
        [ -n "$w" ] && break
        sleep 0.1
    done
    if [ "$PVM_RC" != 0 ]; then
        why="exit status $PVM_RC"
        [ "$PVM_RC" != 124 ] || why="$why (timed out)"
        [ "$PVM_RC" != 3 ] || why="$why (the program's watchdog: stuck)"
    elif [ "$(grep -cE "^$EXAMPLE: ok: $SUMMARY_RE" "$PVM_OUT")" != 1 ]; then
        why="no summary line '$EXAMPLE: ok: $SUMMARY_RE ...'"
    elif [ -z "$m" ]; then
        why="no COR_PVM_STATS line on the master's stderr"
    elif [ -z "$w" ]; then
        why="no COR_PVM_STATS line of the worker in pvmd's log"
    else
        local _t mrs mrb mrr mrrb mps mpr md wrs wrb wrr wrrb wps wpr wd
        read -r _t mrs mrb mrr mrrb mps mpr md <<<"$m"
        read -r _t wrs wrb wrr wrrb wps wpr wd <<<"$w"
        if [ "$mrs" -eq 0 ] || [ "$wrs" -eq 0 ]; then
            why="nothing went routed (master sent $mrs, worker sent $wrs routed)"
        elif [ $((mrs + mps)) -ne "$MASTER_SENDS" ] || [ $((wrs + wps)) -ne "$WORKER_SENDS" ]; then
            why="sends counted: master $mrs routed + $mps PVM (expected $MASTER_SENDS), worker $wrs + $wps (expected $WORKER_SENDS)"
        elif [ "$mrs" -ne "$wrr" ] || [ "$mrb" -ne "$wrrb" ] || [ "$wrs" -ne "$mrr" ] || [ "$wrb" -ne "$mrrb" ]; then
            why="routed counts differ: master sent $mrs ($mrb B), worker received $wrr ($wrrb B); worker sent $wrs ($wrb B), master received $mrr ($mrrb B)"
        elif [ "$mps" -gt "$PVM_PATH_MAX" ] || [ "$wps" -gt "$PVM_PATH_MAX" ] ||
             [ "$mpr" -gt "$PVM_PATH_MAX" ] || [ "$wpr" -gt "$PVM_PATH_MAX" ]; then
            why="too much on PVM's path: master sent $mps received $mpr, worker sent $wps received $wpr (at most $PVM_PATH_MAX)"
        elif [ "$md" -ne 0 ] || [ "$wd" -ne 0 ]; then
            why="dropped messages: master $md, worker $wd"
        fi
    fi
    if [ -z "$why" ]; then
        say "PASS $route: $(sed -n "s/^$EXAMPLE: //p" "$PVM_OUT" | head -1) [run ${ms} ms; routed sent master $mrs, worker $wrs; PVM's path master $mps, worker $wps]"
    else
        say "FAIL $route: $why (run ${ms} ms)"
        reasons+=("$route, run $runs: $why (run ${ms} ms; stats master ${m:-none}; worker ${w:-none})")
        # The programs' own complaints (a wrong message, where the watchdog found them).
        local said
        said=$({ cat "$PVM_OUT" "$PVM_ERR"; printf '%s\n' "$log"; } | grep -E "$EXAMPLE(\[|:)|libcorpvm\[.*(gave|given|cannot)" |
            grep -v 'routed sent' | head -6 | sed 's/^/    /' || true)
        [ -z "$said" ] || reasons+=("$route, run $runs, the tasks said:"$'\n'"$said")
        { echo "--- master stdout"; cat "$PVM_OUT"; echo "--- master stderr"; cat "$PVM_ERR"
          echo "--- pvmd log of the run"; printf '%s\n' "$log"; } | sed 's/^/  | /'
        fails=$((fails + 1))
    fi
    pvm_vm_stop
}

for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    for ((n = 0; n < ${PVM_TEST_REPEAT:-1}; n++)); do run_one "$route"; done
done
[ "$runs" -gt 0 ] || { say "FAIL: nothing ran (COR_PVM_TEST_ROUTES empty?)"; exit 1; }
if [ "$fails" -ne 0 ]; then
    for r in "${reasons[@]}"; do say "FAIL $r"; done
    say "(stats: tid, routed sent, B, routed received, B, PVM's path sent, received, dropped)"
    say "FAIL: $fails of $runs run(s) failed"
    exit 1
fi
say "PASS ($runs runs)"
exit 0
