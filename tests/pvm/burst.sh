#!/bin/bash
# Order across the switch at start-up, both routes: tests/pvm/burst.c sends messages while
# its worker is still starting (PVM's path), then a burst as the pair switches to the route,
# and the worker a burst right after its enrolment; both sides check count and order. Each
# route runs with the first message waiting for the handshake (the default) and without
# (COR_PVM_CONNECT_MS=0: the worker's burst starts on PVM's path too). The counters must show
# both paths used, a switch, and nothing dropped. Then the way back (burst reply): the
# master's answers to the worker's first message all go routed, whether the worker waited
# for its handshake or not; and pvm_cor_domain waits for a handshake under way (burst
# domain). No wait may go on after PVM's sockets had data for it (the handshake's messages
# come that way): the counters' late wakes must stay 0 (a wait that saw them and spun on kept
# the first messages 2 ms, COR_PVM_SPIN_US, until 2026-11-29). Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin burst
PROG=$BUILD/tests/pvm/burst
[ -x "$PROG" ] || fail "$PROG not built"
count=500
[ "${COR_TEST_SCALE:-}" = small ] && count=200

EXTRA_EP=$(dirname "$PROG") pvm_vm_start || fail "cannot start a PVM virtual machine"
exports=$(pvm_exports COR_PVM_STATS COR_PVM_CONNECT_MS)

# Sums the counters over the master's output and what the worker logged.
counters() { # FILE... -> "routed_sent pvm_sent switches dropped"
    cat "$@" | grep -o 'routed sent [0-9]* .*dropped [0-9]*' |
        awk '{for (i = 1; i < NF; i++) {
                  if ($i == "routed" && $(i + 1) == "sent") r += $(i + 2)
                  if ($i == "pvm" && $(i + 1) == "sent") p += $(i + 2)
                  if ($i == "switch") s += $(i + 1)
                  if ($i == "dropped") d += $(i + 1) } }
             END {printf "%d %d %d %d", r, p, s, d}'
}

# Sums the late wakes over the same.
late_wakes() { # FILE... -> N
    cat "$@" | grep -o 'late wakes [0-9]*' | awk '{n += $3} END {print n + 0}'
}

for route in myrinet udp; do
    for wait_ms in 1000 0; do
        off=$(pvm_log_size)
        PVM_MASTER_TIMEOUT=90 pvm_run_master env COR_PVM_ROUTE=$route COR_PVM_STATS=1 \
            COR_PVM_CONNECT_MS=$wait_ms PVM_EXPORT=$exports "$PROG" $count
        pvm_log_since "$off" >"$PVM_WORK/$route.log"
        grep -q "complete and in order" "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
            { cat "$PVM_OUT" "$PVM_ERR" "$PVM_WORK/$route.log" | tail -40
              fail "$route (connect wait $wait_ms ms): exit $PVM_RC"; }
        read -r r p s d <<<"$(counters "$PVM_ERR" "$PVM_WORK/$route.log")"
        [ "$r" -gt 0 ] && [ "$p" -gt 0 ] && [ "$s" -ge 1 ] && [ "$d" = 0 ] ||
            { cat "$PVM_ERR" "$PVM_WORK/$route.log"
              fail "$route: counters say routed sent $r, pvm sent $p, switches $s, dropped $d"; }
        late=$(late_wakes "$PVM_ERR" "$PVM_WORK/$route.log")
        [ "$late" = 0 ] ||
            { cat "$PVM_ERR" "$PVM_WORK/$route.log"
              fail "$route: $late wait(s) went on after PVM's sockets had data (late wakes)"; }
        say "$route (connect wait $wait_ms ms): $(cat "$PVM_OUT"); routed $r, pvm $p, switches $s"
    done
    # The way back: the master answers the worker's first message with a burst; the HELLO
    # for its way went out when it accepted the worker's, so none of them may take PVM's
    # path: with a worker that did not wait for the handshake and sleeps (the master's first
    # answer waits for the worker's), and with a worker that waited (it answered the
    # master's HELLO before its SWITCH) while the master never waits.
    for mode in "0 5000" "5000 0"; do
        read -r worker_ms master_ms <<<"$mode"
        off=$(pvm_log_size)
        PVM_MASTER_TIMEOUT=90 pvm_run_master env COR_PVM_ROUTE=$route COR_PVM_STATS=1 \
            COR_PVM_CONNECT_MS=$master_ms PVM_EXPORT=$exports "$PROG" reply "$worker_ms" 50
        pvm_log_since "$off" >"$PVM_WORK/$route.log"
        what="$route reply (the worker's wait $worker_ms ms, the master's $master_ms ms)"
        grep -q "complete and in order" "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
            { cat "$PVM_OUT" "$PVM_ERR" "$PVM_WORK/$route.log" | tail -40
              fail "$what: exit $PVM_RC"; }
        mp=$(grep -o 'via pvm sent [0-9]*' "$PVM_ERR" | head -1 | grep -o '[0-9]*$' || true)
        [ "$mp" = 0 ] ||
            { cat "$PVM_ERR" "$PVM_WORK/$route.log"
              fail "$what: the master sent ${mp:-?} of its 51 answers PVM's way (expected 0)"; }
        say "$what: $(cat "$PVM_OUT"); the master's answers all routed"
    done
    # pvm_cor_domain after a first message whose wait for the handshake ran out (the master
    # busy for 1.5 s): it waits for the answer under way, not PvmNoTask.
    PVM_MASTER_TIMEOUT=90 pvm_run_master env COR_PVM_ROUTE=$route COR_PVM_CONNECT_MS=1000 \
        PVM_EXPORT=$exports "$PROG" domain
    grep -q "named the master's CoR domain" "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
        { cat "$PVM_OUT" "$PVM_ERR"; pvm_log | tail -20; fail "$route domain: exit $PVM_RC"; }
    say "$route domain: $(cat "$PVM_OUT")"
done
pvm_vm_stop
say "PASS"
