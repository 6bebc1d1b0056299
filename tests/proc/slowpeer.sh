#!/bin/sh
# A slow peer is not a dead one, also before it ever heard from us: over the gm route on
# libfabric's tcp provider, domain 0's first message goes to a domain 1 that is stopped
# (SIGSTOP: no CPU at all, what ThreadSanitizer on a loaded 2-core machine does to a domain for
# a second or more), so its connection waits until domain 1 runs. Domain 1 goes on after
# HOLD_S (2.5 s): the exchange must complete, nobody given up (the route waits COR_GM_DEAD_MS,
# 5 s, for a port that does not answer; it used to call it closed after 1 s, and CI's
# hosts/mpirun.sh failed so under TSan). Then the same with COR_GM_DEAD_MS=1000 and domain 1
# held stopped: domain 0 must give it up promptly (COR_EPEERDEAD, within 3 s) and cor-run end.
. "$(dirname "$0")/common.sh"
S=$PROC/slowpeer
[ -x "$S" ] || die "slowpeer not built"
need_gm_route
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE GM_SEND_TIMEOUT_MS COR_ROUTES \
    COR_GM_DEAD_MS
export COR_GM_PROVIDER=tcp
HOLD_S=2.5
LIMIT=120

# stopped PID: 0 if the process is stopped (state T).
stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }

# start TAG [ENV...]: a session of 2; waits (bounded) until domain 1 stopped itself, then lets
# domain 0 send. Sets corrun, p1 and t0 (when domain 0 was let go).
start() {
    tag=$1
    shift
    rm -f "$WORK/pid.1" "$WORK/go"
    run_bg $tag env "$@" timeout $LIMIT "$CORRUN" -n 2 --route gm --grace 0.5 "$S" "$WORK"
    corrun=$(cat "$WORK/$tag.corrun.pid")
    wait_file "$WORK/pid.1" 60 || { show $tag; die "$tag: domain 1 did not start"; }
    p1=$(cat "$WORK/pid.1")
    add_cleanup "kill -CONT $p1 2>/dev/null"
    i=0
    until stopped "$p1"; do
        i=$((i + 1))
        [ $i -gt 100 ] && { show $tag; die "$tag: domain 1 (pid $p1) did not stop"; }
        sleep 0.1
    done
    t0=$(date +%s.%N)
    : >"$WORK/go"
}
since() { echo "$(date +%s.%N) $1" | awk '{printf "%.1f", $1 - $2}'; }

say "gm over tcp: domain 1 gets no CPU for $HOLD_S s before it heard from domain 0"
start slow
sleep $HOLD_S
kill -CONT "$p1"
wait_bg slow
[ $RC = 0 ] || { show slow; die "slow: cor-run exited $RC: a domain stopped for $HOLD_S s was given up"; }
n=$(grep -c '^slowpeer: domain [01]: PASS$' "$WORK/slow.out")
[ "$n" = 2 ] || { show slow; die "slow: $n of 2 domains passed"; }
say "  both domains passed, $(since "$t0") s after domain 0 sent"

say "gm over tcp, COR_GM_DEAD_MS=1000: domain 1 stays stopped; domain 0 must give it up"
start dead COR_GM_DEAD_MS=1000
# cor-run kills domain 1 once domain 0 gives it up; bounded: 30 s
i=0
while kill -0 "$corrun" 2>/dev/null && [ $i -lt 300 ]; do
    i=$((i + 1))
    sleep 0.1
done
el=$(since "$t0")
kill -CONT "$p1" 2>/dev/null
wait_bg dead
[ $RC != 0 ] && [ $RC != 124 ] || { show dead; die "dead: cor-run exited $RC after $el s"; }
# "FAIL (peer domain died or is unreachable) S s after go"
g=$(sed -n 's/^slowpeer: domain 0: FAIL (peer domain died[^)]*) \([0-9.]*\) s after go$/\1/p' \
    "$WORK/dead.err")
[ -n "$g" ] || { show dead; die "dead: domain 0 did not give domain 1 up"; }
# 1 s and the time to notice; the default's 5 s would be too late
awk -v g="$g" 'BEGIN { exit !(g < 3) }' ||
    { show dead; die "dead: domain 0 gave domain 1 up only $g s after it sent (COR_GM_DEAD_MS=1000)"; }
say "  domain 0 gave domain 1 up $g s after it sent; cor-run ended after $el s"

# A late peer that never heard from us (peers at first contact): domain 1 sleeps $HOLD_S s
# before the barrier, domain 0 waits in it and (COR_BARRIER_WATCH_MS=100) pings domain 1,
# whose route never added domain 0. Domain 1 must admit the PING's sender (checked as a first
# data frame is) and answer: before, it dropped the PING and domain 0 gave it up after
# COR_GM_DEAD_MS=1000 (lazypeers.sh's gm tcp ring under ThreadSanitizer, "7 pings sent, 0
# answered"). Over tcp, then over the default transport (shm).
for how in tcp shm; do
    unset_provider=
    [ $how = shm ] && unset_provider="-u COR_GM_PROVIDER"
    say "gm over $how: domain 1 alive but late ($HOLD_S s) to a barrier, never added domain 0"
    run_bg late$how env $unset_provider COR_GM_DEAD_MS=1000 COR_BARRIER_WATCH_MS=100 \
        COR_GM_STATS=1 timeout $LIMIT "$CORRUN" -n 2 --route gm --grace 0.5 "$S" "$WORK" late $HOLD_S
    wait_bg late$how
    [ $RC = 0 ] || { show late$how; die "late$how: cor-run exited $RC: a late, live domain was given up"; }
    n=$(grep -c '^slowpeer: domain [01]: PASS$' "$WORK/late$how.out")
    [ "$n" = 2 ] || { show late$how; die "late$how: $n of 2 domains passed"; }
    # (the case is about pings: domain 0 must have sent some, or it proved nothing)
    grep -q "liveness: [1-9][0-9]* pings sent" "$WORK/late$how.err" ||
        { show late$how; die "late$how: domain 0 sent no ping: the case tested nothing"; }
    # and domain 1 dropped none of them
    bad=$(grep "cor route gm: port" "$WORK/late$how.err" | grep -vc ", dropped 0 ")
    [ "$bad" = 0 ] || { show late$how; die "late$how: $bad gm ports dropped frames"; }
    say "  both domains passed; domain 1 answered the pings of a domain it had not added"
done
say "PASS"
