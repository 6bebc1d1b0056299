#!/bin/sh
# A barrier entered right after a domain's kill -9, before the routes can have noticed it
# (~1 s), fails with COR_EPEERDEAD:
# - under mpirun --enable-recovery, whose fence completes without the dead participant: each
#   domain puts the barrier's number for the fence to collect, and a domain whose number is
#   missing never entered (cor/core/boot_pmix.c, fence_check; without that check the barrier
#   returned COR_OK in 2 runs of 3);
# - under cor-run, whose rendezvous releases a barrier only once every domain entered it and
#   tells the survivors of the death.
# A receive from the dead domain fails too. Three domains over udp, the last one killed.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
P=$B/tests/launch/fencedeath
[ -x "$P" ] || die "fencedeath not built"
LIMIT=30
LAUNCH_TIMEOUT=120
COR_ROUTE=udp
export COR_ROUTE

# one TAG cmd...: runs the 3 domains with cmd, kills domain 2 once all are up, writes go.
one() {
    tag=$1
    shift
    rm -f "$WORK"/pid.* "$WORK/go"
    run_bg "$tag" "$@"
    for r in 0 1 2; do
        wait_file "$WORK/pid.$r" 60 || { show "$tag"; die "$tag: domain $r did not start"; }
    done
    kill -KILL "$(cat "$WORK/pid.2")"
    : >"$WORK/go"
    start=$(date +%s)
    wait_bg "$tag"
    el=$(($(date +%s) - start))
    [ $el -le $LIMIT ] || { show "$tag"; die "$tag: the job took $el s after the kill (limit $LIMIT)"; }
    for r in 0 1; do
        grep -q "domain $r: PASS" "$WORK/$tag.out" ||
            { show "$tag"; die "$tag: survivor $r did not pass (status $RC)"; }
    done
    say "$tag: $(grep -h 'barrier' "$WORK/$tag.out" | sed 's/^fencedeath: //' | tr '\n' ';')"
}

one corrun timeout 120 "$CORRUN" -n 3 --grace $LIMIT "$P" "$WORK"
if command -v mpirun >/dev/null 2>&1; then
    LAUNCH_MPIRUN_ARGS=--enable-recovery
    export LAUNCH_MPIRUN_ARGS
    one mpirunrec sh -c '. "$1"; shift; launch_mpirun "$@"' sh "$(dirname "$0")/lib.sh" 3 \
        "$P" "$WORK"
    grep -q "never entered the barrier" "$WORK/mpirunrec.err" ||
        say "mpirunrec: (the routes found the death before the barrier's check did)"
else
    say "mpirun not found (Debian package openmpi-bin): only cor-run tested"
fi
say "PASS"
