#!/bin/sh
# A small start-up scale run: 16 domains under cor-run (and under mpirun --oversubscribe when
# CoR has PMIx) each send one message to every other (alltoall) over udp; every domain must
# pass and report its cor_init time, RSS and descriptors, and no route may give a live peer up
# (a slow one is not a dead one: docs/scale.md). scripts/bench-scale runs the same program for
# 4..256 domains and checks the growth goals.
. "$(dirname "$0")/common.sh"
A=$PROC/alltoall
[ -x "$A" ] || die "alltoall not built"
N=16
run_bg a2a timeout -k 10 100 "$CORRUN" -n $N --route udp "$A"
wait_bg a2a
[ $RC = 0 ] || { show a2a; die "cor-run exited $RC"; }
[ "$(grep -c ': PASS ' "$WORK/a2a.out")" = $N ] || { show a2a; die "not every domain passed"; }
! grep -q "giving up" "$WORK/a2a.err" || { show a2a; die "a route gave a live peer up"; }
say "cor-run: $N domains, every message arrived; slowest init: $(sort -k8 -n "$WORK/a2a.out" | tail -n 1)"
if [ "${COR_HAVE_PMIX:-}" = yes ] && command -v mpirun >/dev/null 2>&1; then
    # Peers at first contact (the default, cor/core/connect.c): cor_init only publishes, and
    # each domain looks up the N-1 peers it talks to, one get each.
    run_bg lazy timeout -k 10 100 env COR_ROUTE=udp COR_BOOT_STATS=1 \
        mpirun --allow-run-as-root --oversubscribe -n $N "$A"
    wait_bg lazy
    [ $RC = 0 ] || { show lazy; die "mpirun exited $RC"; }
    [ "$(grep -c ': PASS ' "$WORK/lazy.out")" = $N ] || { show lazy; die "not every domain passed"; }
    pub=$(grep -c "publish: .*first contact" "$WORK/lazy.err")
    got=$(grep -c "looked up the addresses of $((N - 1)) of $((N - 1)) peers" "$WORK/lazy.err")
    [ "$pub $got" = "$N $N" ] ||
        { show lazy; die "lazy peers: $pub of $N published only, $got looked up $((N - 1))"; }
    # Every address at cor_init (COR_LAZY_PEERS=0): the node's table (boot_pmix.c): one
    # domain got the N addresses, the N-1 others one table from it (COR_BOOT_STATS says
    # which); with COR_BOOT_NODE_TABLE=0 each gets N.
    for nt in 1 0; do
        run_bg mpi$nt timeout -k 10 100 env COR_ROUTE=udp COR_BOOT_STATS=1 COR_BOOT_NODE_TABLE=$nt \
            COR_LAZY_PEERS=0 \
            mpirun --allow-run-as-root --oversubscribe -n $N "$A"
        wait_bg mpi$nt
        [ $RC = 0 ] || { show mpi$nt; die "mpirun exited $RC"; }
        [ "$(grep -c ': PASS ' "$WORK/mpi$nt.out")" = $N ] ||
            { show mpi$nt; die "not every domain passed"; }
        ! grep -q "giving up" "$WORK/mpi$nt.err" || { show mpi$nt; die "a route gave a live peer up"; }
        lead=$(grep -c "exchange: .*leader's gets" "$WORK/mpi$nt.err")
        wait=$(grep -c "exchange: .*, wait " "$WORK/mpi$nt.err")
        all=$(grep -c "exchange: .*all gets" "$WORK/mpi$nt.err")
        if [ $nt = 1 ]; then
            [ "$lead $wait $all" = "1 $((N - 1)) 0" ] ||
                { show mpi$nt; die "node table: $lead leader(s), $wait waiting, $all getting all"; }
        else
            [ "$lead $wait $all" = "0 0 $N" ] ||
                { show mpi$nt; die "without the node table: $all of $N got all addresses"; }
        fi
    done
    say "mpirun: $N domains, every message arrived (peers at first contact; all at init with and without the node's table)"
fi
say "PASS"
