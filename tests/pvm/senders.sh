#!/bin/bash
# Threads of one task each sending to a routed peer of its own (tests/pvm/peers.c, "own"): four
# threads, four workers, each thread its own way (pvm_initsend with PvmDataRaw, pvm_psend,
# PvmDataInPlace, a buffer of pvm_mkbuf/pvm_setsbuf/pvm_freebuf); each worker checks that its
# thread's messages arrive exactly once, in order and whole. Both routes, small messages, then
# 64 KiB more in each (a detached piece after each image). The master's counters must show
# that most routed sends, and pvm_initsend calls, took no big lock (libcorpvm's send path,
# README "Routed sends without the lock"). Then threads that end right after such a
# pvm_initsend: no message buffer may stay behind. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin senders
. "$HERE/threadtest.sh"
pairs=4
threads_begin peers
one_case() { # ROUTE BYTES N WHAT
    local n=$3 what=$4 routed sends initsends
    threads_run "$what" env COR_PVM_ROUTE=$1 COR_PVM_STATS=1 PVM_EXPORT=$exports \
        "$PROG" $pairs $pairs "$n" 0 "$2" own
    routed=$(threads_sum "routed sent" "$PVM_ERR")
    sends=$(threads_sum "routed sends" "$PVM_ERR")
    initsends=$(threads_sum "initsends" "$PVM_ERR")
    [ "$routed" -ge $((pairs * n)) ] ||
        { cat "$PVM_ERR"; fail "$what: $routed of $((pairs * n)) messages went routed"; }
    # (a thread's first message to its peer finds it under the big lock)
    [ "$sends" -ge $((routed / 2)) ] ||
        { cat "$PVM_ERR"; fail "$what: $sends of $routed routed sends without the big lock"; }
    [ "$initsends" -gt 0 ] || { cat "$PVM_ERR"; fail "$what: no pvm_initsend without the big lock"; }
    say "$what: $(cat "$PVM_OUT"); routed $routed, without the big lock: sends $sends, initsends $initsends"
}
threads_cases one_case 400 60
# Threads that end right after a pvm_initsend made without the big lock: their send buffers,
# which libpvm3 had not installed yet, must not stay behind (peers.c's `exits`).
threads_run "threads ending" env COR_PVM_ROUTE=myrinet PVM_EXPORT=$exports \
    "$PROG" $pairs $pairs 50 0 0 exits
say "threads ending: $(head -1 "$PVM_OUT")"
pvm_vm_stop
say "PASS"
