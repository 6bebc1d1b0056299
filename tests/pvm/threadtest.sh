# What the threaded PVM tests (peers.sh, receivers.sh, senders.sh) share: sourced after
# pvmlib.sh and pvm_test_begin.

# threads_begin PROGRAM [VAR...]: $PROG (tests/pvm/PROGRAM, built), the test's virtual machine
# started, and $exports: the PVM_EXPORT list with COR_PVM_STATS and the VARs.
threads_begin() {
    PROG=$BUILD/tests/pvm/$1
    shift
    [ -x "$PROG" ] || fail "$PROG not built"
    EXTRA_EP=$(dirname "$PROG") pvm_vm_start || fail "cannot start a PVM virtual machine"
    exports=$(pvm_exports COR_PVM_STATS "$@")
}

# threads_sum WORD FILE...: the sum of the numbers after WORD in libcorpvm's counters' lines.
threads_sum() {
    local w=$1
    shift
    cat "$@" | { grep -o "$w [0-9]*" || true; } | awk '{s += $NF} END {print s + 0}'
}

# threads_run WHAT COMMAND...: runs a master (pvm_run_master, at most 120 s) and keeps what its
# spawned tasks wrote meanwhile (pvmd's log) in $THREADS_LOG; fails WHAT unless the master
# said "complete and in order" and exited 0, and no task reported a sanitizer error.
threads_run() {
    local what=$1 off
    shift
    off=$(pvm_log_size)
    PVM_MASTER_TIMEOUT=120 pvm_run_master "$@"
    THREADS_LOG=$PVM_WORK/run$__PVM_MASTER_N.tasks
    pvm_log_since "$off" >"$THREADS_LOG"
    grep -q "complete and in order" "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
        { cat "$PVM_OUT" "$PVM_ERR" "$THREADS_LOG" | tail -40; fail "$what: exit $PVM_RC"; }
    ! grep -q Sanitizer "$THREADS_LOG" ||
        { grep -A20 Sanitizer "$THREADS_LOG" | head -40; fail "$what: a task's sanitizer report"; }
}

# threads_cases FN COUNT BIG_COUNT: runs `FN ROUTE BYTES N WHAT` over both routes, first with
# small messages (BYTES 0, N = COUNT), then with 64 KiB more in each (N = BIG_COUNT; a detached
# piece after each image); COR_TEST_SCALE=small runs COUNT and BIG_COUNT halved.
threads_cases() {
    local fn=$1 count=$2 big=$3 route bytes n
    if [ "${COR_TEST_SCALE:-}" = small ]; then count=$((count / 2)) big=$((big / 2)); fi
    for route in myrinet udp; do
        for bytes in 0 65536; do
            n=$count
            [ "$bytes" = 0 ] || n=$big
            "$fn" "$route" "$bytes" "$n" "$route, $bytes B more"
        done
    done
}
