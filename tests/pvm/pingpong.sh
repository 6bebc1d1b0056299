#!/bin/bash
# A relinked PVM program (pingpong: -lcorpvm -lpvm3) over each CoR route: messages of every
# encoding and of sizes up to 256 KiB both ways, then a burst one way, each checked byte by
# byte and in order across the switch from PVM's path to the route; the counters must show
# the route carried them. Then a preloaded task talking to a plain PVM task (timing, whose
# slave gets no preload): PVM's path, same answers, no handshake. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin pingpong
PP=$BUILD/tests/pvm/pingpong
[ -x "$PP" ] || fail "$PP not built"
rounds=200 max=262144
[ "${COR_TEST_SCALE:-}" = small ] && rounds=60 max=65536

EXTRA_EP=$(dirname "$PP") pvm_vm_start || fail "cannot start a PVM virtual machine"
# What the spawned worker needs (pvmd's environment is clean): the route, the counters and,
# in sanitizer builds, the sanitizers' options.
exports=$(pvm_exports COR_PVM_STATS)

# Sums a counter over the master's output and what the worker logged.
counter() { # FILE... -> "sent received dropped"
    cat "$@" | grep -o 'routed sent [0-9]* ([0-9]* B) received [0-9]*.*dropped [0-9]*' |
        awk '{s += $3; r += $7; d += $NF} END {printf "%d %d %d", s, r, d}'
}

for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    off=$(pvm_log_size)
    PVM_MASTER_TIMEOUT=120 pvm_run_master env COR_PVM_ROUTE=$route COR_PVM_STATS=1 \
        PVM_EXPORT=$exports "$PP" $rounds $max
    pvm_log_since "$off" >"$PVM_WORK/$route.log"
    grep -q "pingpong: $rounds rounds up to $max bytes: ok" "$PVM_OUT" ||
        { cat "$PVM_OUT" "$PVM_ERR" "$PVM_WORK/$route.log" | tail -40; fail "$route: exchange failed (exit $PVM_RC)"; }
    [ "$PVM_RC" = 0 ] || fail "$route: exit status $PVM_RC"
    read -r s r d <<<"$(counter "$PVM_ERR" "$PVM_WORK/$route.log")"
    # Both sides' messages travel the route once the worker joined (its first few may not).
    [ "$s" -ge $((2 * rounds)) ] && [ "$s" = "$r" ] && [ "$d" = 0 ] ||
        { cat "$PVM_ERR" "$PVM_WORK/$route.log"; fail "$route: counters say routed sent $s received $r dropped $d"; }
    say "$route: $rounds rounds up to $max bytes intact and in order; routed sent $s received $r"
done

# PVM's path for messages libcorpvm packed (large PvmDataRaw packs get fragments of their
# own, pmsg.c): the worker finds the session's only rank taken, so both keep PVM's path.
off=$(pvm_log_size)
PVM_MASTER_TIMEOUT=120 pvm_run_master env COR_PVM_ROUTE=myrinet COR_PVM_STATS=1 \
    COR_PVM_DOMAINS=1 PVM_EXPORT=$exports:COR_PVM_DOMAINS "$PP" $rounds $max
pvm_log_since "$off" >"$PVM_WORK/pvmpath.log"
grep -q "pingpong: $rounds rounds up to $max bytes: ok" "$PVM_OUT" ||
    { cat "$PVM_OUT" "$PVM_ERR" "$PVM_WORK/pvmpath.log" | tail -40; fail "PVM's path: exchange failed (exit $PVM_RC)"; }
read -r s r d <<<"$(counter "$PVM_ERR" "$PVM_WORK/pvmpath.log")"
packs=$(cat "$PVM_ERR" "$PVM_WORK/pvmpath.log" | grep -o 'without the lock: packs [0-9]*' |
    awk '{s += $NF} END {print s + 0}')
[ "$s" = 0 ] && [ "$r" = 0 ] && [ "$packs" -gt 0 ] ||
    { cat "$PVM_ERR" "$PVM_WORK/pvmpath.log"; fail "PVM's path: counters say routed sent $s received $r, $packs packs off the lock"; }
say "PVM's path: $rounds rounds up to $max bytes intact and in order, none routed, $packs packs off the lock"

# A preloaded master and a plain slave (no preload exported): PVM's path only.
LIB=$BUILD/cor/pvmcompat/.libs/libcorpvm.so
if [ -n "${COR_SANITIZED:-}" ]; then
    say "mixed with a plain task: skipped in sanitizer builds (a preload into a foreign binary)"
else
    off=$(pvm_log_size)
    pvm_run_master env LD_PRELOAD="$LIB" COR_PVM_ROUTE=myrinet COR_PVM_STATS=1 \
        PVM_EXPORT=COR_ROUTE_PATH timing
    grep -q '^RTT Avg uSec' "$PVM_OUT" && grep -q '^done$' "$PVM_OUT" ||
        { cat "$PVM_OUT" "$PVM_ERR"; fail "timing with a plain slave failed"; }
    grep -q 'routed sent 0 (0 B) received 0 (0 B).*hello 0 ' "$PVM_ERR" ||
        { cat "$PVM_ERR"; fail "the plain slave was sent routed traffic or a handshake"; }
    pvm_log_since "$off" | grep -q 'libcorpvm' && fail "the slave was preloaded"
    say "a preloaded task and a plain one talk over PVM's path"
fi
pvm_vm_stop
say "PASS"
