#!/bin/sh
# kill -9 of one domain under mpirun: with --enable-recovery (the others keep running) the
# survivors' pending operations toward it fail with COR_EPEERDEAD through the routes' own
# detection (PMIx tells them nothing) and they exit by themselves; without it mpirun ends the
# whole job. Neither may hang: every wait is bounded.
# The gm route over shm does not notice a peer killed while nothing of ours waits in the route
# (a rendezvous waiting for the dead peer's answer is the core's, not the route's), so with
# --enable-recovery its survivors would wait: gm runs the plain case only (cor/core/README.md,
# "Bootstrap", says so).
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
launch_need_mpirun
P=$PROC/peerdeath
[ -x "$P" ] || die "peerdeath not built"
LIMIT=30
LAUNCH_TIMEOUT=150
launch_private_shm

# start TAG ROUTE: 3 domains of peerdeath, domain 2 killed once every survivor hears from it.
start_and_kill() {
    tag=$1
    rm -f "$WORK"/pid.* "$WORK"/flowing.*
    launch_shm_next
    run_bg "$tag" env COR_ROUTE="$2" sh -c '. "$1"; shift; launch_mpirun "$@"' sh \
        "$(dirname "$0")/lib.sh" 3 "$P" "$WORK" -t 4
    for r in 0 1 2; do
        wait_file "$WORK/pid.$r" 60 || { show "$tag"; die "$tag: domain $r did not start"; }
    done
    for r in 0 1; do
        wait_file "$WORK/flowing.$r" 60 || { show "$tag"; die "$tag: survivor $r got nothing"; }
    done
    sleep 0.2
    kill -KILL "$(cat "$WORK/pid.2")"
    start=$(date +%s)
    wait_bg "$tag"
    el=$(($(date +%s) - start))
    [ $el -le $LIMIT ] || { show "$tag"; die "$tag: the job took $el s after the kill (limit $LIMIT)"; }
}

say "udp, mpirun --enable-recovery: the survivors find out by themselves"
LAUNCH_MPIRUN_ARGS=--enable-recovery
export LAUNCH_MPIRUN_ARGS
start_and_kill recudp udp
for r in 0 1; do
    grep -q "domain $r: PASS" "$WORK/recudp.out" ||
        { show recudp; die "recudp: survivor $r did not pass (status $RC)"; }
done
grep -q "bootstrap (pmix): domain 2 died" "$WORK/recudp.err" ||
    { show recudp; die "recudp: the PMIx bootstrap was not told of the death"; }
say "  survivors passed; the job ended $el s after the kill"

for route in udp gm; do
    say "$route, plain mpirun: the launcher ends the job"
    LAUNCH_MPIRUN_ARGS=
    start_and_kill plain$route $route
    [ $RC != 0 ] || { show plain$route; die "plain$route: mpirun exited 0 after a kill -9"; }
    say "  mpirun exited with status $RC, $el s after the kill"
done
say "PASS"
