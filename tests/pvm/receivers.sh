#!/bin/bash
# Threads of one task receiving from different routed peers at once (tests/pvm/receivers.c):
# one thread per sender task, each with its own receive call (pvm_recv, pvm_trecv, a
# pvm_probe/pvm_nrecv loop, pvm_precv), and one thread taking every sender's messages of a
# second tag by source -1; every message is checked (order per sender, pvm_bufinfo, contents).
# Both routes, small messages, then 64 KiB more in each (a detached piece after each image).
# The counters must show routed messages taken without the big lock (libcorpvm's receive
# path, README "Receiving without the lock"). Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin receivers
PROG=$BUILD/tests/pvm/receivers
[ -x "$PROG" ] || fail "$PROG not built"
senders=4 count=400 big_count=60
[ "${COR_TEST_SCALE:-}" = small ] && count=150 big_count=30

EXTRA_EP=$(dirname "$PROG") pvm_vm_start || fail "cannot start a PVM virtual machine"
exports=$(pvm_exports COR_PVM_STATS)
sum() { # WORD FILE...: the sum of the numbers after WORD in the counters' lines
    local w=$1
    shift
    cat "$@" | { grep -o "$w [0-9]*" || true; } | awk '{s += $NF} END {print s + 0}'
}

for route in myrinet udp; do
    for bytes in 0 65536; do
        n=$count
        [ "$bytes" = 0 ] || n=$big_count
        off=$(pvm_log_size)
        PVM_MASTER_TIMEOUT=120 pvm_run_master env COR_PVM_ROUTE=$route COR_PVM_STATS=1 \
            PVM_EXPORT=$exports "$PROG" $senders "$n" $bytes
        pvm_log_since "$off" >"$PVM_WORK/$route.log"
        what="$route, $bytes B more"
        grep -q "complete and in order" "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
            { cat "$PVM_OUT" "$PVM_ERR" "$PVM_WORK/$route.log" | tail -40
              fail "$what: exit $PVM_RC"; }
        ! grep -q Sanitizer "$PVM_WORK/$route.log" ||
            { grep -A20 Sanitizer "$PVM_WORK/$route.log" | head -40; fail "$what: a sender's sanitizer report"; }
        routed=$(sum "routed sent" "$PVM_WORK/$route.log")
        unlocked=$(sum "received without the lock" "$PVM_ERR")
        [ "$routed" -gt 0 ] || { cat "$PVM_WORK/$route.log"; fail "$what: nothing went routed"; }
        [ "$unlocked" -gt 0 ] ||
            { cat "$PVM_ERR"; fail "$what: no routed message was taken without the big lock"; }
        say "$what: $(cat "$PVM_OUT"); routed $routed, without the lock $unlocked"
    done
done
pvm_vm_stop
say "PASS"
