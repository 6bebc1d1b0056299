#!/bin/sh
# A peer that stops answering over gm: domain 0 is stopped (SIGSTOP) while domain 1 streams to
# it, so domain 1's frames wait in the gm route for receive credits that never come back. After
# COR_GM_DEAD_MS (2 s here) the route must give domain 0 up (its log line) and domain 1's
# sends must fail instead of waiting forever, whether its frames wait for domain 0's receive
# credits or for the send tokens its unacknowledged sends hold (both happen, depending on how
# far the stream got). Over shm GM there is no other sign of a stopped process. Domain 1 then
# tells cor-run, which declares domain 0 dead for the session and stops it: cor-run ends.
. "$(dirname "$0")/common.sh"
F=$PROC/flood
[ -x "$F" ] || die "flood not built"
found=0
for d in $(echo "${COR_ROUTE_PATH:-}" | tr : ' ') "$B/cor/routes/gm/.libs"; do
    [ -f "$d/cor_route_gm.so" ] && found=1
done
[ $found = 1 ] || skip "gm route not built"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
# 2 s, not less: a domain that gets no CPU for that long (ASan beside two CPU hogs on a busy
# 2-core machine: 1 run in 12 with 500 ms) is given up while it still runs, before the stop.
DEAD_MS=${STARVE_DEAD_MS:-2000}
export COR_GM_DEAD_MS=$DEAD_MS COR_PORTS=1 COR_EAGER_LIMIT=16384 COR_CREDITS=32
LIMIT=20

say "domain 1 streams small messages to domain 0, which is stopped in the middle"
run_bg st timeout 120 "$CORRUN" -n 2 --route gm --grace 3 "$F" -b $((8 << 30)) -e 200 \
    -r 1000 -i 1 -w 128 -L $((1 << 30))
corrun=$(cat "$WORK/st.corrun.pid")
# domain 0: the child of cor-run whose environment says COR_RANK=0 (bounded wait)
p0=
i=0
while [ -z "$p0" ] && [ $i -lt 300 ]; do
    for c in $(pgrep -P "$(pgrep -P "$corrun" | head -1)" 2>/dev/null) $(pgrep -P "$corrun"); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx 'COR_RANK=0' && p0=$c
    done
    i=$((i + 1))
    sleep 0.1
done
[ -n "$p0" ] || { show st; die "domain 0 not found"; }
add_cleanup "kill -CONT $p0 2>/dev/null; kill -KILL $p0 2>/dev/null"
# Stop domain 0 only once both domains run the stream (flood says so on stderr): stopped
# earlier (a loaded machine under TSan takes seconds to start domains), it leaves domain 1
# waiting at the core's level, in cor_init or for a rendezvous answer, with no frame waiting
# in the route, which is not what this test is about.
i=0
gave_up="domain 0 was silent for $DEAD_MS ms while our frames waited for it: giving up"
until grep -q "flood: sender: streaming" "$WORK/st.err" &&
    grep -q "flood: receiver: receiving" "$WORK/st.err"; do
    i=$((i + 1))
    [ $i -gt 600 ] && { show st; die "the domains did not start the stream within 60 s"; }
    grep -q "$gave_up" "$WORK/st.err" &&
        { show st; die "domain 0 was given up before it was stopped (no CPU for $DEAD_MS ms?)"; }
    sleep 0.1
done
sleep 1 # the stream flows at full speed
# Stopped while it held its own queue's lock (libfabric's shm provider takes the target's lock
# for every send, and the target takes it to read its queue), domain 0 leaves domain 1's next
# send spinning inside the provider, with the gm port, until domain 0 runs again: the route's
# timer never runs then, whatever its bound (libgm-compat's unstick.c frees such a call only
# once the holder is gone). On a loaded machine that stop is likely enough (domain 0 may be
# preempted inside its short hold; under ASan 1 run in 7 with two CPU hogs). libgm-compat says
# so ("stuck on node ... naps while it waits"); this test is about a peer silent outside that
# lock, so it then lets domain 0 go on and stops it again.
stuck="stuck on node .* the call naps while it waits"
attempt=0
while :; do
    attempt=$((attempt + 1))
    stuck_before=$(grep -c "$stuck" "$WORK/st.err")
    kill -STOP "$p0"
    start=$(date +%s.%N)
    i=0 retry=0
    until grep -q "$gave_up" "$WORK/st.err"; do
        i=$((i + 1))
        [ $i -gt $((LIMIT * 10)) ] && { show st; die "domain 0 not given up within $LIMIT s"; }
        # stuck behind its lock and still not given up 3 s after the bound: try again
        if [ $i -ge $((DEAD_MS / 100 + 30)) ] &&
            [ "$(grep -c "$stuck" "$WORK/st.err")" -gt "$stuck_before" ]; then
            retry=1
            break
        fi
        sleep 0.1
    done
    [ $retry = 0 ] && break
    [ $attempt -ge 5 ] && { show st; die "domain 0 stopped holding its queue lock 5 times"; }
    say "domain 0 was stopped holding its queue lock (attempt $attempt): resumed, stopped again"
    kill -CONT "$p0"
    sleep 1
done
el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
say "domain 0 given up $el s after it stopped"
# domain 1's sends to it failed instead of waiting forever
i=0
until grep -q "peer domain died or is unreachable" "$WORK/st.err"; do
    i=$((i + 1))
    [ $i -gt $((LIMIT * 10)) ] && { show st; die "domain 1's sends did not fail within $LIMIT s"; }
    sleep 0.1
done
# domain 1 told cor-run (LOST): the session declares domain 0 dead and stops it (SIGTERM waits
# for a stopped process; the teardown's SIGKILL does not), so domain 1's finalize barrier does
# not wait for a process that lives on stopped, and cor-run ends
i=0
while kill -0 "$corrun" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt $((LIMIT * 10)) ] && { show st; die "cor-run still runs $LIMIT s after domain 0 was given up"; }
    sleep 0.1
done
wait_bg st
grep -q "domain 0 (pid $p0) given up by domain 1" "$WORK/st.err" || \
    { show st; die "cor-run did not say that domain 1 gave domain 0 up"; }
[ $RC != 0 ] || { show st; die "cor-run exited 0 although domain 0 was lost"; }
say "PASS"
