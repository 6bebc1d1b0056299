#!/bin/bash
# Threads of one task sending to several routed peers at once (tests/pvm/peers.c): every
# thread sends to every worker, so threads send to different peers and to the same peer
# concurrently; each worker checks every thread's messages arrive exactly once and in order.
# Both routes, first without a stop, then with worker 0 stopped mid-stream beyond the route's
# dead time (the route gives it up: what it did not confirm goes PVM's way, in order); then
# with 64 KiB more in every message (a detached piece after each image: threads sending to
# one peer at once must keep each image with its piece). The counters must show routed sends,
# and the give-up resends. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin peers
. "$HERE/threadtest.sh"
workers=3 threads=4 count=300
[ "${COR_TEST_SCALE:-}" = small ] && count=100

threads_begin peers COR_UDP_DEAD_MS COR_GM_DEAD_MS

big_count=40
for route in myrinet udp; do
    for run in "0 0" "1500 0" "0 65536"; do
        read -r stop_ms bytes <<<"$run"
        n=$count
        [ "$bytes" = 0 ] || n=$big_count
        what="$route, stop $stop_ms ms, $bytes B more"
        threads_run "$what" env COR_PVM_ROUTE=$route COR_PVM_STATS=1 \
            COR_GM_DEAD_MS=500 COR_UDP_DEAD_MS=500 PVM_EXPORT=$exports \
            "$PROG" $workers $threads $n $stop_ms $bytes
        routed=$(threads_sum "routed sent" "$PVM_ERR")
        resent=$(threads_sum "resent" "$PVM_ERR")
        [ "$routed" -gt 0 ] || { cat "$PVM_ERR"; fail "$what: nothing went routed"; }
        [ "$stop_ms" = 0 ] || [ "$resent" -gt 0 ] ||
            { cat "$PVM_ERR"; fail "$what: the route never gave the stopped worker up (nothing resent)"; }
        say "$what: $(cat "$PVM_OUT"); routed $routed, resent $resent"
    done
done
pvm_vm_stop
say "PASS"
