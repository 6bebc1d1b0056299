#!/bin/bash
# A two-host PVM virtual machine under plain PVM: host A and host B are two network
# namespaces joined by a veth pair (pvmlib.sh, pvm_twohosts_start); host B's pvmd is
# started by A's through PVM_RSH = `ip netns exec B`. Checks: both hosts in `conf`, B's
# pvmd inside namespace B, tasks spread over both hosts (`ps -a`), master1 with 3 x 2
# slaves, hello.pvm, spmd's token ring across hosts, timing (direct TCP route), gexample
# (group server on A, members on both). Exit 0 pass, 1 fail, 77 skip (not root, no pvm,
# no network namespaces).
#   PVM_EXAMPLE_WRAP  command prefix for the masters this script starts (as in
#                     plain-examples.sh); never given to pvmd or the console
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
NAME=twohosts-plain
say() { echo "$NAME: $*"; }
fail() { say "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || { say "SKIP: not root"; exit 77; }
pvm_available || { say "SKIP: $PVM_WHY"; exit 77; }
[ -x /usr/bin/master1 ] || { say "SKIP: pvm-examples is not installed"; exit 77; }
pvm_netns_available || { say "SKIP: $PVM_WHY"; exit 77; }
read -r -a WRAP <<<"${PVM_EXAMPLE_WRAP:-}"

pvm_twohosts_start || fail "cannot bring up the two-host VM"
NSA=$PVM_NS_A NSB=$PVM_NS_B A=$PVM_ADDR_A B=$PVM_ADDR_B
say "host A $A in $NSA, host B $B in $NSB"
show() { cut -c1-300 "$@" | head -80 | sed 's/^/  | /'; }
masterout() { cat "$PVM_OUT" "$PVM_ERR"; }

# 1. the VM has both hosts, and B's pvmd lives in namespace B
conf=$(pvm_console conf)
printf '%s\n' "$conf" | grep -q '^2 hosts, ' || { printf '%s\n' "$conf"; fail "conf does not show 2 hosts"; }
for h in "$A" "$B"; do
    printf '%s\n' "$conf" | grep -qE "^ *${h//./\\.} +[0-9a-f]+ +LINUX" || { printf '%s\n' "$conf"; fail "host $h not in conf"; }
done
bpvmd=""
for p in $(ip netns pids "$NSB"); do
    case $(cat "/proc/$p/comm" 2>/dev/null) in pvmd) bpvmd=$p;; esac
done
[ -n "$bpvmd" ] || fail "no pvmd process in namespace $NSB"
grep -q "rsh $B: .*pvmd -s " "$PVM_WORK/rsh.log" || fail "host B was not started through PVM_RSH"
say "ok: conf lists $A and $B; B's pvmd is pid $bpvmd in $NSB, started through PVM_RSH"

# 2. four tasks spawned at once spread over both hosts (round robin): ps -a shows where
out=$(pvm_console "spawn -4 timing_slave" "ps -a")
na=$(printf '%s\n' "$out" | grep -cE "^ *${A//./\\.} +[0-9a-f]+ .*timing_slave" || true)
nb=$(printf '%s\n' "$out" | grep -cE "^ *${B//./\\.} +[0-9a-f]+ .*timing_slave" || true)
[ "$na" -ge 1 ] && [ "$nb" -ge 1 ] && [ $((na + nb)) = 4 ] ||
    { printf '%s\n' "$out"; fail "timing_slave tasks: $na on A, $nb on B (want 4, on both)"; }
pvm_console reset >/dev/null
say "ok: spawn -4 put $na tasks on A and $nb on B (console ps -a)"

# 3. master1 sizes its work by the VM: 3 slaves per host
pvm_run_master -t 30 "${WRAP[@]}" master1
masterout >"$PVM_WORK/master1.txt"
grep -q '^Spawning 6 worker tasks \.\.\. SUCCESSFUL$' "$PVM_WORK/master1.txt" &&
    [ "$(grep -cE '^I got ([0-9.]+) from [0-5]; \(expecting \1\)$' "$PVM_WORK/master1.txt")" = 6 ] &&
    [ "$(grep -c '^I got ' "$PVM_WORK/master1.txt")" = 6 ] ||
    { show "$PVM_WORK/master1.txt"; fail "master1 (exit $PVM_RC)"; }
say "ok: master1 with 6 slaves on 2 hosts, every result as expected"

# 4. hello.pvm: hello_other on either host
pvm_run_master -t 20 "${WRAP[@]}" hello.pvm
masterout >"$PVM_WORK/hello.txt"
grep -qE '^from t[0-9a-f]+: hello, world from ' "$PVM_WORK/hello.txt" && [ "$PVM_RC" = 0 ] ||
    { show "$PVM_WORK/hello.txt"; fail "hello.pvm (exit $PVM_RC)"; }
say "ok: hello.pvm: $(grep '^from' "$PVM_WORK/hello.txt")"

# 5. spmd x4 from the console: a token ring through tasks on both hosts; all tasks'
#    output (B's too) lands in the master pvmd's log
off=$(pvm_log_size)
out=$(pvm_console "spawn -4 ${WRAP[*]} spmd")
printf '%s\n' "$out" | grep -q '^4 successful' || { printf '%s\n' "$out"; fail "spawn -4 spmd"; }
printf '%s\n' "$out" | grep -q '^t4[0-9a-f]\{4\}$' && printf '%s\n' "$out" | grep -q '^t8[0-9a-f]\{4\}$' ||
    { printf '%s\n' "$out"; fail "the spmd tasks are not on both hosts"; }
i=0
until pvm_log_since "$off" | grep -q '\] token ring done$'; do
    i=$((i + 1)); [ $i -le 200 ] || { pvm_log_since "$off"; fail "spmd: no 'token ring done' within 20 s"; }
    sleep 0.1
done
say "ok: spmd ring across hosts: $(pvm_log_since "$off" | grep -E '\] *[0-9]+ -> ' | sed 's/.*\] *//')"

# 6. timing: master on A, timing_slave where spawn puts it (round robin: it alternates),
#    both with PvmRouteDirect, so a TCP link across the veth pair. Up to 3 runs until the
#    slave is on host B (tid t8xxxx).
onb=0
for try in 1 2 3; do
    pvm_run_master -t 60 "${WRAP[@]}" timing
    masterout >"$PVM_WORK/timing.txt"
    grep -q '^slave is task t' "$PVM_WORK/timing.txt" && grep -q '^Message size 1000000$' "$PVM_WORK/timing.txt" &&
        grep -q '^done$' "$PVM_WORK/timing.txt" && [ "$PVM_RC" = 1 ] ||
        { show "$PVM_WORK/timing.txt"; fail "timing (exit $PVM_RC; it exits 1 when done)"; }
    say "ok: timing, $(grep '^slave is task' "$PVM_WORK/timing.txt"), $(grep '^RTT Avg' "$PVM_WORK/timing.txt")"
    if grep -q '^slave is task t8' "$PVM_WORK/timing.txt"; then onb=1; break; fi
done
[ $onb = 1 ] || fail "timing_slave never landed on host B in 3 runs"

# 7. gexample: 4 members of group "matrix" over both hosts, reductions to instance 0
printf '100\n4\n' >"$PVM_WORK/gexample.in"
pvm_run_master -t 30 -i "$PVM_WORK/gexample.in" "${WRAP[@]}" gexample
masterout >"$PVM_WORK/gexample.txt"
grep -q 'Using 4 processors' "$PVM_WORK/gexample.txt" && grep -q 'The 1-Norm is 5050 ' "$PVM_WORK/gexample.txt" &&
    grep -q 'The product of column 1 is 9.33262e+157 ' "$PVM_WORK/gexample.txt" ||
    { show "$PVM_WORK/gexample.txt"; fail "gexample (exit $PVM_RC)"; }
say "ok: gexample over 2 hosts (1-norm 5050, 100!)"

# 8. teardown leaves nothing: no namespace, no process of this VM
pvm_twohosts_stop
ip netns list | grep -qE "^($NSA|$NSB)( |\$)" && fail "namespaces left after the stop"
st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$bpvmd/stat" 2>/dev/null) || true
[ -z "$st" ] || [ "$st" = Z ] || fail "host B's pvmd ($bpvmd) still runs after the stop (state $st)"
say "ok: torn down (namespaces deleted, pvmds gone)"
say "PASS"
