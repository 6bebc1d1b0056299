#!/bin/sh
# A barrier entered right after a domain's kill -9, before the routes can have noticed it
# (~1 s), fails with COR_EPEERDEAD:
# - under mpirun --enable-recovery, whose fence completes without the dead participant: each
#   domain puts the barrier's number for the fence to collect, and a domain whose number is
#   missing never entered (cor/core/boot_pmix.c, fence_check; without that check the barrier
#   returned COR_OK in 2 runs of 3);
# - under cor-run, whose rendezvous releases a barrier only once every domain entered it and
#   tells the survivors of the death.
# A receive from the dead domain fails too. Three domains over udp, the last one killed; no
# domain ever sent anything to it (with peers at first contact its routes do not know it).
# mpirun does not always complete that fence (~1 run in 3 it waited for ever, and nothing
# else told the survivors: the routes knew no such peer), so a barrier that waited
# COR_BARRIER_WATCH_MS has the routes watch every peer (cor/core/boot.h). The "stop" cases
# make that wait certain: domain 2 is stopped (SIGSTOP), not killed, so no launcher completes
# the fence or tells anyone, and only the routes' watch ends the barrier (the stopped domain
# answers none of their pings for COR_UDP_DEAD_MS, 2 s here); before the watch they hung.
# Under srun --mpi=pmix (a private Slurm) the stop case, which hung before the watch too. A
# kill there needs no case: Slurm cancels the step within ~1 s (the survivors are killed
# before they can report), though once a barrier entered meanwhile returned COR_OK (Slurm's
# fence completed without the killed task; COR_BOOT_FENCE_CHECK=1 made it fail).
# FENCEDEATH_CASES="mpirunrec mpirunstop" runs only those (default: all of $ALL_CASES).
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
P=$B/tests/launch/fencedeath
[ -x "$P" ] || die "fencedeath not built"
LIMIT=30
LAUNCH_TIMEOUT=120
COR_ROUTE=udp
export COR_ROUTE

# one TAG SIG cmd...: runs the 3 domains with cmd, sends domain 2 SIG once all are up (KILL,
# or STOP: it stays alive and mute until the survivors are done, then it is killed), writes go.
one() {
    tag=$1
    sig=$2
    shift 2
    rm -f "$WORK"/pid.* "$WORK/go"
    run_bg "$tag" "$@"
    for r in 0 1 2; do
        wait_file "$WORK/pid.$r" 60 || { show "$tag"; die "$tag: domain $r did not start"; }
    done
    victim=$(cat "$WORK/pid.2")
    kill -"$sig" "$victim"
    : >"$WORK/go"
    start=$(date +%s)
    if [ "$sig" = STOP ]; then
        # The job cannot end while domain 2 lives: the survivors' end first, then its kill.
        p0=$(cat "$WORK/pid.0") p1=$(cat "$WORK/pid.1")
        if ! wait_until $LIMIT sh -c '! kill -0 $1 2>/dev/null && ! kill -0 $2 2>/dev/null' sh \
            "$p0" "$p1"; then
            kill -KILL "$victim" "$p0" "$p1" 2>/dev/null
            wait_bg "$tag"
            show "$tag"
            die "$tag: the survivors still waited $LIMIT s after domain 2 was stopped"
        fi
        kill -KILL "$victim" 2>/dev/null
    fi
    wait_bg "$tag"
    el=$(($(date +%s) - start))
    [ $el -le $LIMIT ] || { show "$tag"; die "$tag: the job took $el s after the $sig (limit $LIMIT)"; }
    for r in 0 1; do
        grep -q "domain $r: PASS" "$WORK/$tag.out" ||
            { show "$tag"; die "$tag: survivor $r did not pass (status $RC)"; }
    done
    say "$tag: $(grep -h 'barrier' "$WORK/$tag.out" | sed 's/^fencedeath: //' | tr '\n' ';')"
}

# Only some cases: FENCEDEATH_CASES="mpirunrec mpirunstop" (default: all).
ALL_CASES="corrun corrunstop mpirunrec mpirunstop srunstop"
want() { case " ${FENCEDEATH_CASES:-$ALL_CASES} " in *" $1 "*) ;; *) return 1 ;; esac; }
STOP_ENV="env COR_UDP_DEAD_MS=2000"

want corrun && one corrun KILL timeout -k 10 120 "$CORRUN" -n 3 --grace $LIMIT "$P" "$WORK"
want corrunstop && one corrunstop STOP $STOP_ENV timeout -k 10 120 "$CORRUN" -n 3 --grace $LIMIT "$P" "$WORK"
if command -v mpirun >/dev/null 2>&1; then
    LAUNCH_MPIRUN_ARGS=--enable-recovery
    export LAUNCH_MPIRUN_ARGS
    if want mpirunrec; then
        one mpirunrec KILL sh -c '. "$1"; shift; launch_mpirun "$@"' sh "$(dirname "$0")/lib.sh" 3 \
            "$P" "$WORK"
        grep -q "never entered the barrier" "$WORK/mpirunrec.err" ||
            say "mpirunrec: (the routes found the death before the barrier's check did)"
    fi
    want mpirunstop && one mpirunstop STOP $STOP_ENV sh -c '. "$1"; shift; launch_mpirun "$@"' sh \
        "$(dirname "$0")/lib.sh" 3 "$P" "$WORK"
else
    say "mpirun not found (Debian package openmpi-bin): not tested under mpirun"
fi
have_slurm() {
    for hs_b in slurmctld slurmd srun sinfo; do
        command -v "$hs_b" >/dev/null 2>&1 || return 1
    done
    "$B/apps/cor-info" --no-open 2>&1 | grep -q "bootstrap .*pmix"
}
if ! want srunstop; then
    :
elif ! have_slurm; then
    say "Slurm (slurmctld, slurmd, slurm-client) or CoR's PMIx missing: not tested under srun"
else
    slurm_start
    one srunstop STOP $STOP_ENV sh -c '. "$1"; shift; launch_srun "$@"' sh "$(dirname "$0")/lib.sh" \
        3 "$P" "$WORK"
fi
say "PASS"
