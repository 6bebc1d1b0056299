#!/bin/sh
# A peer that stops answering over gm: domain 0 is stopped (SIGSTOP) while domain 1 streams to
# it, so domain 1's frames wait in the gm route for receive credits that never come back. After
# COR_GM_DEAD_MS (2 s here) the route must give domain 0 up (its log line) and domain 1's
# sends must fail instead of waiting forever, whether its frames wait for domain 0's receive
# credits or for the send tokens its unacknowledged sends hold (both happen, depending on how
# far the stream got). Over shm GM there is no other sign of a stopped process. Domain 1 then
# tells cor-run, which declares domain 0 dead for the session and stops it: cor-run ends.
# Three times: stopped anywhere (SIGSTOP); stopped while domain 1 only waits for its answers
# to rendezvous requests, with nothing held in the route (answer: only the route's probes of
# the peers the core waits for find it, cor/routes/gm/gm_live.c); then stopped right inside
# its hold of its own shm queue lock (stopinlock.so), where domain 1's next send spins inside
# libfabric in the port's owner and only the gm route's watch thread can give domain 0 up.
. "$(dirname "$0")/common.sh"
F=$PROC/flood
[ -x "$F" ] || die "flood not built"
need_gm_route
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
# 2 s, not less: a domain that gets no CPU for that long (ASan beside two CPU hogs on a busy
# 2-core machine: 1 run in 12 with 500 ms) is given up while it still runs, before the stop.
DEAD_MS=${STARVE_DEAD_MS:-2000}
export COR_GM_DEAD_MS=$DEAD_MS COR_PORTS=1 COR_EAGER_LIMIT=16384 COR_CREDITS=32
LIMIT=20

STOPLIB=$PROC/.libs/stopinlock.so
[ -f "$STOPLIB" ] || die "stopinlock.so not built"

# start_stop HOW: starts a session where domain 1 streams to domain 0 and stops domain 0 once
# in the middle (HOW = plain: SIGSTOP from here, wherever domain 0 is; lock: stopinlock.so
# stops it right after it took its own shm queue lock; answer: domain 0 idles, posting no
# receive, so domain 1 ends up waiting for the clear-to-send of its window of rendezvous
# sends (65 KiB, above the eager limit) with nothing in the route; SIGSTOP then). Sets
# corrun, p0 and start.
start_stop() {
    how=$1
    rm -f "$WORK/st.out" "$WORK/st.err" "$WORK/trigger"
    # -r: the odd messages' size; -i: how long domain 0 posts nothing
    if [ "$how" = answer ]; then msgs="-r 65536 -i 600 -w 8"; else msgs="-r 1000 -i 1 -w 128"; fi
    # Preloaded into both domains, active in domain 0 only once $WORK/trigger exists; the
    # sanitizers' runtime need not come first in the library list for that. GM_VERBOSE: libgm
    # says when a call is stuck on a peer's lock.
    # The lock case needs libfabric's shm provider (the only transport with a queue lock a
    # sender takes in its target's region); the others run on libgm-compat's default.
    transport=${GM_COMPAT_TRANSPORT:-}
    [ "$how" = lock ] && transport=fabric
    run_bg st env ${transport:+GM_COMPAT_TRANSPORT=$transport} \
        LD_PRELOAD="$STOPLIB" STOPINLOCK_FILE="$WORK/trigger" GM_VERBOSE=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        timeout -k 10 120 "$CORRUN" -n 2 --route gm --grace 3 "$F" -b $((8 << 30)) -e 200 \
        $msgs -L $((1 << 30))
    corrun=$(cat "$WORK/st.corrun.pid")
    p0=$(domain_pid st 0) || { show st; die "$how: domain 0 not found"; }
    add_cleanup "kill -CONT $p0 2>/dev/null; kill -KILL $p0 2>/dev/null"
    # Stop domain 0 only once both domains run the stream (flood says so on stderr): stopped
    # earlier (a loaded machine under TSan takes seconds to start domains), it leaves domain 1
    # waiting in cor_init, which is not what this test is about. In the answer case domain 0
    # idles: once domain 1's window is full of rendezvous sends (milliseconds after it
    # streams), it waits with nothing in the route; it waits so, while domain 0 lives, longer
    # than the dead time, and across a short stop of domain 0, neither of which may give a
    # live domain up (it answers the probes, late after the short stop).
    i=0
    until grep -q "flood: sender: streaming" "$WORK/st.err" &&
        { [ "$how" = answer ] || grep -q "flood: receiver: receiving" "$WORK/st.err"; }; do
        i=$((i + 1))
        [ $i -gt 600 ] && { show st; die "$how: the domains did not start the stream within 60 s"; }
        given_up_early
        sleep 0.1
    done
    if [ "$how" = answer ]; then
        sleep $((DEAD_MS / 1000 + 2))
        # A domain stopped for a moment is slow, not dead: a quarter of the dead time, then on
        kill -STOP "$p0"
        sleep "$(echo "$DEAD_MS" | awk '{print $1 / 4000}')"
        kill -CONT "$p0"
        sleep $((DEAD_MS / 1000 + 1))
    else
        sleep 1
    fi
    given_up_early
    # libgm's "stuck" lines so far: a domain 0 preempted inside its hold (ASan beside CPU hogs)
    # holds domain 1 100 ms and more before any stop
    stuck_before=$(grep -Ec "$stuck" "$WORK/st.err")
    if [ "$how" != lock ]; then
        kill -STOP "$p0"
    else
        : >"$WORK/trigger"
        wait_until 10 grep -q "stopinlock: stopped holding our shm queue lock" "$WORK/st.err" ||
            { show st; die "$how: domain 0 did not stop inside its lock within 10 s"; }
    fi
    start=$(date +%s.%N)
}

more_stuck() { [ "$(grep -Ec "$stuck" "$WORK/st.err")" -gt "$stuck_before" ]; }
corrun_ended() { ! kill -0 "$corrun" 2>/dev/null; }
given_up_early() {
    grep -Eq "$gave_up" "$WORK/st.err" &&
        { show st; die "$how: domain 0 was given up before it was stopped (no CPU for $DEAD_MS ms?)"; }
    return 0
}

# gave_up_within HOW: waits for domain 1's log line that it gave domain 0 up, then for its
# sends' failure; fails the test if either does not come within $LIMIT s.
gave_up_within() {
    wait_until $LIMIT grep -Eq "$gave_up" "$WORK/st.err" ||
        { show st; die "$1: domain 0 not given up within $LIMIT s"; }
    el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
    # domain 1's sends to it failed instead of waiting forever
    wait_until $LIMIT grep -q "peer domain died or is unreachable" "$WORK/st.err" ||
        { show st; die "$1: domain 1's sends did not fail within $LIMIT s"; }
}

# run_case HOW: one stop of domain 0 (for lock: sessions until domain 1's send is held in
# domain 0's lock, at most 8, else the case is said not checked). Domain 0 must be given up
# within $LIMIT s, domain 1's sends must fail, and cor-run must declare domain 0 dead and end.
run_case() {
    how=$1
    attempt=0
    while :; do
        attempt=$((attempt + 1))
        say "$how: domain 1 streams small messages to domain 0, which is stopped in the middle"
        start_stop "$how"
        [ "$how" != lock ] && break
        # Domain 1 meets the held lock only if it sends to domain 0 after the stop; when its
        # frames wait for domain 0's credits instead, or it waits for domain 0 with nothing
        # held in the route (the route cannot tell then: README), this session shows nothing
        # of the lock. libgm says "stuck" 50-300 ms after the call met the lock.
        wait_until 2 more_stuck && break
        say "$how: domain 1 sent nothing to domain 0 after the stop (session $attempt)"
        # End this session as a death ends it (cor-run sees domain 0 killed and stops domain
        # 1): a SIGTERM to cor-run left an ASan cor-run hung in LeakSanitizer at its exit,
        # once. Bounded, then killed.
        kill -KILL "$p0" 2>/dev/null
        wait_until $LIMIT corrun_ended
        for c in $(pgrep -P "$corrun"); do kill -KILL "$c" 2>/dev/null; done
        kill -KILL "$corrun" 2>/dev/null
        wait_bg st
        # Beside CPU hogs domain 1 meets the lock less often (1 session in 3 to 8): the case
        # is then not checked in this run, and the run says so (the plain case was).
        [ $attempt -ge 8 ] && { say "$how: NOT CHECKED: domain 1 never met the held lock in 8 sessions"; return 0; }
    done
    # One stop. Held inside domain 0's lock, domain 1's next send spins inside libfabric in the
    # port's owner, and the route's watch thread gives domain 0 up (cor/routes/gm/gm_watch.c):
    # without it, domain 0 is never given up. (Now and then the call is freed early and the
    # frames' check gives domain 0 up: either line will do.) In the answer case only the
    # probes can: without them domain 1 waits for ever.
    gave_up_within "$how"
    if grep -q "$held" "$WORK/st.err"; then
        say "$how: domain 0 given up $el s after it stopped (it held domain 1's send in its lock)"
    elif grep -q "$unanswered" "$WORK/st.err"; then
        say "$how: domain 0 given up $el s after it stopped (it answered no probe)"
    else
        say "$how: domain 0 given up $el s after it stopped (frames waited for its credits)"
    fi
    [ "$how" != answer ] || grep -q "$unanswered" "$WORK/st.err" ||
        { show st; die "$how: domain 0 was given up, but not for the unanswered probes"; }
    # domain 1 told cor-run (LOST): the session declares domain 0 dead and stops it (SIGKILL
    # for a stopped process, which would hold a SIGTERM), so domain 1's finalize barrier does
    # not wait for a process that lives on stopped, and a send held in its lock is freed
    # (libgm-compat's watchdog: its holder is gone), and cor-run ends
    wait_until $LIMIT corrun_ended ||
        { show st; die "$how: cor-run still runs $LIMIT s after domain 0 was given up"; }
    wait_bg st
    grep -q "domain 0 (pid $p0) given up by domain 1" "$WORK/st.err" ||
        { show st; die "$how: cor-run did not say that domain 1 gave domain 0 up"; }
    [ $RC != 0 ] || { show st; die "$how: cor-run exited 0 although domain 0 was lost"; }
}

# libgm met domain 0's held lock: a call inside it (before libgm looked at the lock first), or
# sends left waiting in libgm's backlog (libgm-compat/src/qlock.c)
stuck="stuck on node .* the call naps while it waits|sends to node .* wait: its queue lock is held"
held="domain 0 was silent for [0-9]* ms while our send waited inside libgm for its lock: giving up"
unanswered="domain 0 answered no probe for $DEAD_MS ms while we waited for its answer: giving up"
gave_up="domain 0 was silent for $DEAD_MS ms while our frames waited for it: giving up|$held|$unanswered"
run_case plain
run_case answer
run_case lock
say "PASS"
