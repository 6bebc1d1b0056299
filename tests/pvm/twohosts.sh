#!/bin/bash
# A two-host virtual machine (network namespaces joined by a veth pair, the second pvmd
# started through PVM_RSH): a master spawns workers over both hosts (spread.c: a token ring,
# then echoes of 16 B to 64 KiB) over the udp route on the veth addresses (32 workers per
# host; not in sanitizer builds) and, with COR_PVM_TEST_TWOHOSTS_GM=1, over the gm route on
# libgm-compat's TCP provider (4 per host). The gm run is opt-in: the gm listener polls libgm,
# which has no descriptor to sleep on, and beside the other tests of `make -j2 check` a run
# sometimes outlived its 240 s (once with a dropped remote-write completion in the log: left
# for an issue). The counters must show that the route carried the messages, and there were
# as many workers on each host.
# Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin twohosts
SP=$BUILD/tests/pvm/spread
pvm_netns_available || { say "SKIP: $PVM_WHY"; exit 77; }
[ -x "$SP" ] || fail "$SP not built"
udp_per_host=${COR_TWOHOSTS_PER_HOST:-32}
# 65 processes on 2 cores beside the other tests: once, in the normal build, is enough (the
# relinked tests run libcorpvm under the sanitizers).
[ -z "${COR_SANITIZED:-}" ] || { say "SKIP: sanitizer build"; exit 77; }
EXTRA_EP=$(dirname "$SP") pvm_twohosts_start || fail "cannot start the two-host VM"
exports=$(pvm_exports COR_PVM_STATS COR_PVM_DOMAINS COR_PVM_SPIN_US)
routes="udp"
[ "${COR_PVM_TEST_TWOHOSTS_GM:-0}" = 1 ] && routes="udp myrinet"
for route in ${COR_PVM_TEST_ROUTES:-$routes}; do
    per_host=$udp_per_host
    [ "$route" = udp ] || per_host=${COR_TWOHOSTS_GM_PER_HOST:-4}
    workers=$((2 * per_host))
    off=$(pvm_log_size)
    # Every task of the VM takes a route (two runs, and the master). On 2 cores the workers
    # should not spin long while they wait.
    PVM_MASTER_TIMEOUT=240 pvm_run_master env COR_PVM_ROUTE=$route COR_PVM_STATS=1 \
        COR_PVM_DOMAINS=256 COR_PVM_SPIN_US=100 PVM_EXPORT=$exports "$SP" $workers
    pvm_log_since "$off" >"$PVM_WORK/$route.log"
    grep -q "spread: $workers workers, ring and echoes ok" "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
        { cat "$PVM_OUT" "$PVM_ERR"; tail -30 "$PVM_WORK/$route.log"; fail "$route: exit $PVM_RC"; }
    for addr in "$PVM_ADDR_A" "$PVM_ADDR_B"; do
        grep -q "spread: $per_host workers on $addr" "$PVM_OUT" ||
            { cat "$PVM_OUT"; fail "$route: not $per_host workers on $addr"; }
    done
    sums=$(cat "$PVM_ERR" "$PVM_WORK/$route.log" | grep -o 'routed sent [0-9]* ([0-9]* B) received [0-9]*.*dropped [0-9]*' |
        awk '{s += $3; r += $7; d += $NF; n++} END {printf "%d %d %d %d", s, r, d, n}')
    read -r s r d n <<<"$sums"
    # The master's echoes (4 per worker) and the ring went routed: at least 4 per worker.
    [ "$n" -ge $((workers + 1)) ] && [ "$s" -ge $((4 * workers)) ] && [ "$s" = "$r" ] && [ "$d" = 0 ] ||
        fail "$route: $n tasks reported routed sent $s received $r dropped $d"
    say "$route: $workers workers over 2 hosts; routed sent $s received $r by $n tasks"
done
pvm_twohosts_stop
say "PASS"
