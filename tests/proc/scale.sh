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
run_bg a2a timeout 100 "$CORRUN" -n $N --route udp "$A"
wait_bg a2a
[ $RC = 0 ] || { show a2a; die "cor-run exited $RC"; }
[ "$(grep -c ': PASS ' "$WORK/a2a.out")" = $N ] || { show a2a; die "not every domain passed"; }
! grep -q "giving up" "$WORK/a2a.err" || { show a2a; die "a route gave a live peer up"; }
say "cor-run: $N domains, every message arrived; $(sort -k9 -n "$WORK/a2a.out" | tail -n 1)"
if [ "${COR_HAVE_PMIX:-}" = yes ] && command -v mpirun >/dev/null 2>&1; then
    run_bg mpi timeout 100 env COR_ROUTE=udp mpirun --allow-run-as-root --oversubscribe -n $N "$A"
    wait_bg mpi
    [ $RC = 0 ] || { show mpi; die "mpirun exited $RC"; }
    [ "$(grep -c ': PASS ' "$WORK/mpi.out")" = $N ] || { show mpi; die "not every domain passed"; }
    ! grep -q "giving up" "$WORK/mpi.err" || { show mpi; die "a route gave a live peer up"; }
    say "mpirun: $N domains, every message arrived"
fi
say "PASS"
