#!/bin/sh
# Peers at first contact (cor/core/connect.c): a ring of 8 domains (examples/hello: each sends
# to the next and hears from the one before) looks up 2 addresses per domain, not 7: the next
# one when it first sends to it, the one before when the udp route first hears from it (the
# need_peer upcall). That first datagram is taken, not dropped and waited for again: the route
# drops nothing. With COR_LAZY_PEERS=0 every peer is given at cor_init
# and nothing is looked up later. Under cor-run, and under mpirun when CoR has PMIx (one get
# from the node's server per peer looked up).
. "$(dirname "$0")/common.sh"
H=$B/apps/examples/hello
[ -x "$H" ] || die "examples/hello not built"
N=8
# A barrier slower than COR_BARRIER_WATCH_MS (cor_finalize's, on a loaded machine) looks up
# every peer for the routes to watch (cor/core/boot.h): not what this test counts.
NO_WATCH=600000
check_ring() { # TAG LAZY
    [ $RC = 0 ] || { show $1; die "$1: exited $RC"; }
    [ "$(grep -c ' got "hello from' "$WORK/$1.out")" = $((2 * N)) ] ||
        { show $1; die "$1: not every greeting arrived"; }
    looked=$(grep -c "looked up the addresses of 2 of $((N - 1)) peers" "$WORK/$1.err")
    any=$(grep -c "looked up the addresses" "$WORK/$1.err")
    if [ $2 = 1 ]; then
        [ "$looked" = $N ] || { show $1; die "$1: $looked of $N domains looked up 2 peers"; }
        # Every domain's one port dropped nothing, at first contact too (a datagram from a
        # member not added yet is dropped and counted unless need_peer adds it first; a
        # retransmission from a slow acknowledgement under load is not a drop).
        bad=$(grep "cor udp: port" "$WORK/$1.err" | grep -vc ": dropped 0 ")
        [ "$bad" = 0 ] || { show $1; die "$1: $bad ports dropped datagrams"; }
    else
        [ "$any" = 0 ] || { show $1; die "$1: COR_LAZY_PEERS=0 still looked addresses up"; }
    fi
}
for lazy in 1 0; do
    run_bg run$lazy timeout 60 env COR_BARRIER_WATCH_MS=$NO_WATCH COR_BOOT_STATS=1 COR_UDP_STATS=1 COR_LAZY_PEERS=$lazy \
        "$CORRUN" -n $N --route udp "$H"
    wait_bg run$lazy
    check_ring run$lazy $lazy
done
say "cor-run: each of $N domains looked up its 2 peers at first contact; 0 with COR_LAZY_PEERS=0"
if [ "${COR_HAVE_PMIX:-}" = yes ] && command -v mpirun >/dev/null 2>&1; then
    for lazy in 1 0; do
        run_bg mpi$lazy timeout 60 env COR_BARRIER_WATCH_MS=$NO_WATCH COR_ROUTE=udp COR_BOOT_STATS=1 COR_UDP_STATS=1 \
            COR_LAZY_PEERS=$lazy mpirun --allow-run-as-root --oversubscribe -n $N "$H"
        wait_bg mpi$lazy
        check_ring mpi$lazy $lazy
    done
    say "mpirun: the same, one PMIx get per peer looked up"
fi
say "PASS"
