#!/bin/sh
# A udp peer that stops answering while we only wait for it (cor/routes/udp/udp_await.c):
# domain 1 streams rendezvous messages (65 KiB, above the eager limit) to domain 0, which posts
# no receive for a long time, so domain 1 ends up waiting for the clear-to-send of its window
# of rendezvous requests; the route acknowledged them, so nothing of domain 1's is in flight,
# and only the route's PINGs of the peers the core awaits can tell a stopped domain 0 from a
# slow one. First domain 0 is stopped (SIGSTOP) for a quarter of COR_UDP_DEAD_MS (2 s here):
# slow, not dead, it answers the PINGs when it goes on and must NOT be given up; then it is
# stopped for good and must be given up ("answered no ping") within $LIMIT s, domain 1's sends
# must fail, and cor-run must declare domain 0 dead and end. Before await_peer over udp,
# domain 1 waited for ever (the probes of a silent peer need no answer: a stopped process's
# kernel takes them in). The gm route's twin is tests/proc/starve.sh's answer case.
. "$(dirname "$0")/common.sh"
F=$PROC/flood
[ -x "$F" ] || die "flood not built"
unset COR_ROUTES
# 2 s, as starve.sh: a domain without CPU that long on a busy machine is slow, not stopped.
DEAD_MS=${AWAIT_DEAD_MS:-2000}
export COR_UDP_DEAD_MS=$DEAD_MS COR_PORTS=1 COR_EAGER_LIMIT=16384 COR_UDP_STATS=1
LIMIT=20
unanswered="peer 0 answered no ping for $DEAD_MS ms while we waited for its answer: giving up"
gave_up="peer 0 .*giving up"

corrun_ended() { ! kill -0 "$corrun" 2>/dev/null; }
given_up_early() {
    grep -Eq "$gave_up" "$WORK/aw.err" &&
        { show aw; die "domain 0 was given up while it lived (no CPU for $DEAD_MS ms?)"; }
    return 0
}

say "domain 1 streams rendezvous messages to domain 0, which posts no receive"
run_bg aw timeout -k 10 120 "$CORRUN" -n 2 --route udp --grace 3 "$F" -b $((8 << 30)) -e 200 \
    -r 65536 -i 600 -w 8 -L $((1 << 30))
corrun=$(cat "$WORK/aw.corrun.pid")
p0=$(domain_pid aw 0) || { show aw; die "domain 0 not found"; }
add_cleanup "kill -CONT $p0 2>/dev/null; kill -KILL $p0 2>/dev/null"
wait_until 60 grep -q "flood: sender: streaming" "$WORK/aw.err" ||
    { show aw; die "domain 1 did not start its stream within 60 s"; }
# Domain 1's window of rendezvous requests is full milliseconds after it streams; it then
# waits, with domain 0 alive, longer than the dead time, and across a short stop of domain 0.
sleep $((DEAD_MS / 1000 + 2))
given_up_early
kill -STOP "$p0"
sleep "$(echo "$DEAD_MS" | awk '{print $1 / 4000}')"
kill -CONT "$p0"
sleep $((DEAD_MS / 1000 + 1))
given_up_early
say "domain 0, stopped for a quarter of the dead time, was not given up"
kill -STOP "$p0"
start=$(date +%s.%N)
wait_until $LIMIT grep -Eq "$gave_up" "$WORK/aw.err" ||
    { show aw; die "domain 0 not given up within $LIMIT s of its stop"; }
el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
grep -q "$unanswered" "$WORK/aw.err" ||
    { show aw; die "domain 0 was given up, but not for the unanswered pings"; }
say "domain 0 given up $el s after it stopped (it answered no ping)"
wait_until $LIMIT grep -q "peer domain died or is unreachable" "$WORK/aw.err" ||
    { show aw; die "domain 1's sends did not fail within $LIMIT s"; }
# domain 1 told cor-run (LOST): the session declares domain 0 dead, stops it, and ends
wait_until $LIMIT corrun_ended ||
    { show aw; die "cor-run still runs $LIMIT s after domain 0 was given up"; }
wait_bg aw
grep -q "domain 0 (pid $p0) given up by domain 1" "$WORK/aw.err" ||
    { show aw; die "cor-run did not say that domain 1 gave domain 0 up"; }
[ $RC != 0 ] || { show aw; die "cor-run exited 0 although domain 0 was lost"; }
grep -o 'pings [0-9]* pongs [0-9]*' "$WORK/aw.err" | sed "s/^/$NAME: a port's /"
say "PASS"
