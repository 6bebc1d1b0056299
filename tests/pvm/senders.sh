#!/bin/bash
# Threads of one task each sending to a routed peer of its own (tests/pvm/peers.c, "own"): four
# threads, four workers, each thread its own way (pvm_initsend with PvmDataRaw, pvm_psend,
# PvmDataInPlace, a buffer of pvm_mkbuf/pvm_setsbuf/pvm_freebuf); each worker checks that its
# thread's messages arrive exactly once, in order and whole. Both routes, small messages, then
# 64 KiB more in each (a detached piece after each image). The master's counters must show
# that most routed sends, and pvm_initsend calls, took no big lock (libcorpvm's send path,
# README "Routed sends without the lock"). Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin senders
. "$HERE/threadtest.sh"
PROG=$BUILD/tests/pvm/peers
[ -x "$PROG" ] || fail "$PROG not built"
pairs=4 count=400 big_count=60
[ "${COR_TEST_SCALE:-}" = small ] && count=150 big_count=30

EXTRA_EP=$(dirname "$PROG") pvm_vm_start || fail "cannot start a PVM virtual machine"
exports=$(pvm_exports COR_PVM_STATS)
for route in myrinet udp; do
    for bytes in 0 65536; do
        n=$count
        [ "$bytes" = 0 ] || n=$big_count
        what="$route, $bytes B more"
        threads_run "$what" env COR_PVM_ROUTE=$route COR_PVM_STATS=1 PVM_EXPORT=$exports \
            "$PROG" $pairs $pairs "$n" 0 $bytes own
        routed=$(threads_sum "routed sent" "$PVM_ERR")
        sends=$(threads_sum "routed sends" "$PVM_ERR")
        initsends=$(threads_sum "initsends" "$PVM_ERR")
        [ "$routed" -ge $((pairs * n)) ] ||
            { cat "$PVM_ERR"; fail "$what: $routed of $((pairs * n)) messages went routed"; }
        # (a thread's first message to its peer finds it under the big lock)
        [ "$sends" -ge $((routed / 2)) ] ||
            { cat "$PVM_ERR"; fail "$what: $sends of $routed routed sends without the big lock"; }
        [ "$initsends" -gt 0 ] ||
            { cat "$PVM_ERR"; fail "$what: no pvm_initsend without the big lock"; }
        say "$what: $(cat "$PVM_OUT"); routed $routed, without the big lock: sends $sends, initsends $initsends"
    done
done
pvm_vm_stop
say "PASS"
