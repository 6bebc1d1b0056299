#!/bin/sh
# A stranger's datagrams (random bytes, wrong cookie, truncated, absurd lengths, unknown
# source) fired at a running domain's udp port are dropped and counted
# (cor_stats_get().frames_dropped), and the exchange running meanwhile completes intact.
. "$(dirname "$0")/common.sh"
X=$PROC/exchange
[ -x "$X" ] || die "exchange not built"
command -v python3 >/dev/null || skip "python3 is needed to send the datagrams"
if [ $SMALL = 1 ]; then MSGS=4000 MAX=1048576 JUNK=1000 LIMIT=300;
else MSGS=50000 MAX=4194304 JUNK=5000 LIMIT=150; fi

say "2 domains x 8 tasks exchange $MSGS messages while $JUNK junk datagrams hit domain 0"
run_bg bad timeout $LIMIT "$CORRUN" -n 2 "$X" -t 8 -m $MSGS -x $MAX -a "$WORK/addr" -H "$WORK/hold"
wait_file "$WORK/addr" 60 || { touch "$WORK/hold"; show bad; die "domain 0 did not write its address"; }
grep -q "^RC 0" "$WORK/addr" || { cat "$WORK/addr"; die "cor_route_address(udp, 0) failed"; }
say "domain 0 is at $(sed -n 's/^ADDR //p' "$WORK/addr")"
sent=$(timeout -k 10 60 python3 "$(dirname "$0")/garbage.py" "$WORK/addr" $JUNK 7 | sed -n 's/^sent //p')
if [ -e "$WORK/addr.tasks-done" ]; then
    say "note: the exchange finished before all the junk was sent (still checked)"
else
    say "all junk was sent while the exchange ran"
fi
touch "$WORK/hold"
wait_bg bad
[ $RC = 0 ] || { show bad; die "the exchange under junk failed (cor-run exited $RC)"; }
[ "$(grep -c ': PASS ' "$WORK/bad.out")" = 2 ] || { show bad; die "not every domain passed"; }
dropped=$(sed -n 's/^exchange: domain 0: .*frames_dropped=\([0-9]*\).*/\1/p' "$WORK/bad.out")
say "sent ${sent:-0} junk datagrams; domain 0 counted ${dropped:-?} frames dropped"
[ -n "$sent" ] && [ "$sent" -gt 0 ] || die "garbage.py sent nothing"
# The kernel may lose a few datagrams when the socket buffer is full; the route must count
# at least 90% of them.
[ -n "$dropped" ] && [ "$dropped" -ge $((sent * 9 / 10)) ] || \
    { show bad; die "frames_dropped=${dropped:-none}, expected at least 90% of $sent"; }
sed 's/^/  /' "$WORK/bad.out"
say "PASS"
