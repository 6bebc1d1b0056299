#!/bin/sh
# kill -9 of one domain under mpirun: with --enable-recovery (the others keep running) the
# survivors' pending operations toward it fail with COR_EPEERDEAD through the routes' own
# detection (PMIx tells them nothing) and they exit by themselves; without it mpirun ends the
# whole job. Neither may hang: every wait is bounded.
# The gm route over shm sees no error from a killed peer (its messages land in the dead
# process's shared memory): it probes the lock file each live peer's port holds while its
# process lives (cor/routes/gm/README.md, "Peer death"), so its survivors, waiting for a
# rendezvous answer that will never come, find out too. The udp route learns a peer's death
# from its host refusing a datagram (ICMP port unreachable); when every datagram to the victim
# was acknowledged before it died, nothing more goes to it unless the route probes silent
# peers (cor/routes/udp/README.md, "Peer death"), which the quiet-victim case needs.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
launch_need_mpirun
P=$PROC/peerdeath
[ -x "$P" ] || die "peerdeath not built"
LIMIT=30
LAUNCH_TIMEOUT=150
launch_private_shm

# start_and_kill TAG ROUTE [peerdeath options]: 3 domains of peerdeath, domain 2 killed once
# every survivor hears from it.
start_and_kill() {
    tag=$1 sk_route=$2
    shift 2
    rm -f "$WORK"/pid.* "$WORK"/flowing.*
    launch_shm_next
    run_bg "$tag" env COR_ROUTE="$sk_route" sh -c '. "$1"; shift; launch_mpirun "$@"' sh \
        "$(dirname "$0")/lib.sh" 3 "$P" "$WORK" -t 4 "$@"
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
    launch_shm_swept "$tag"
}

# recgmq, recudpq: the victim goes quiet before it dies (peerdeath -q): the survivors only
# wait for its clear-to-send, with nothing in flight toward it, so no send of theirs can fail;
# over shm only the gm route's probe of the peers' ports (gmr_probe) finds the death, over udp
# only its probe of silent peers (a datagram the dead port's host refuses). Before them, such
# survivors waited until the watchdog ("nothing completed for 15 s"), for gm 1 run in 7 of the
# plain case too (a survivor with no credit left to return).
# recudpn, recgmn: nobody talks (peerdeath -n): each survivor waits for a message from the
# victim, which it never sent anything; over udp only the sweep of peers never talked to
# (cor/routes/udp/README.md, "Probes") finds the death. Before it, the survivors waited until
# their 15 s watchdog.
for c in "udp udp" "udpq udp -q" "udpn udp -n" "gm gm" "gmq gm -q" "gmn gm -n"; do
    set -- $c
    tag=rec$1
    say "$tag: $2 ${3:-}, mpirun --enable-recovery: the survivors find out by themselves"
    LAUNCH_MPIRUN_ARGS=--enable-recovery
    export LAUNCH_MPIRUN_ARGS
    start_and_kill $tag $2 ${3:-}
    for r in 0 1; do
        grep -q "domain $r: PASS" "$WORK/$tag.out" ||
            { show $tag; die "$tag: survivor $r did not pass (status $RC)"; }
    done
    grep -q "bootstrap (pmix): domain 2 died" "$WORK/$tag.err" ||
        { show $tag; die "$tag: the PMIx bootstrap was not told of the death"; }
    say "  survivors passed; the job ended $el s after the kill"
done

for route in udp gm; do
    say "$route, plain mpirun: the launcher ends the job"
    LAUNCH_MPIRUN_ARGS=
    start_and_kill plain$route $route
    [ $RC != 0 ] || { show plain$route; die "plain$route: mpirun exited 0 after a kill -9"; }
    say "  mpirun exited with status $RC, $el s after the kill"
done
say "PASS"
