# What the threaded PVM tests (peers.sh, receivers.sh, senders.sh) share: sourced after
# pvmlib.sh and pvm_test_begin, with the test's virtual machine started.

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
