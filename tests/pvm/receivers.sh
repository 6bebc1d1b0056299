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
. "$HERE/threadtest.sh"
senders=4
threads_begin receivers
one_case() { # ROUTE BYTES N WHAT
    local what=$4 routed unlocked
    threads_run "$what" env COR_PVM_ROUTE=$1 COR_PVM_STATS=1 PVM_EXPORT=$exports \
        "$PROG" $senders "$3" "$2"
    routed=$(threads_sum "routed sent" "$THREADS_LOG")
    unlocked=$(threads_sum "received without the lock" "$PVM_ERR")
    [ "$routed" -gt 0 ] || { cat "$THREADS_LOG"; fail "$what: nothing went routed"; }
    [ "$unlocked" -gt 0 ] ||
        { cat "$PVM_ERR"; fail "$what: no routed message was taken without the big lock"; }
    say "$what: $(cat "$PVM_OUT"); routed $routed, without the lock $unlocked"
}
threads_cases one_case 300 60
pvm_vm_stop
say "PASS"
