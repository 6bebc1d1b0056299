#!/bin/sh
# 2 and 4 domains x 8 tasks exchange 100,000 messages of 0 B..4 MiB with checksums over the
# udp route; every message must arrive exactly once and in order per sending task.
# COR_TEST_SCALE=small: 10,000 messages of at most 1 MiB (sanitizer builds).
. "$(dirname "$0")/common.sh"
X=$PROC/exchange
[ -x "$X" ] || die "exchange not built"
if [ $SMALL = 1 ]; then MSGS=10000 MAX=1048576 LIMIT=600; else MSGS=100000 MAX=4194304 LIMIT=150; fi

for n in 2 4; do
    say "$n domains x 8 tasks, $MSGS messages of 0..$MAX bytes"
    run_bg x$n timeout $LIMIT "$CORRUN" -n $n "$X" -t 8 -m $MSGS -x $MAX
    wait_bg x$n
    [ $RC = 0 ] || { show x$n; die "$n domains: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    npass=$(grep -c ": PASS " "$WORK/x$n.out")
    [ "$npass" = $n ] || { show x$n; die "$npass of $n domains passed"; }
    sed 's/^/  /' "$WORK/x$n.out"
done

# Tasks that never block: progress comes from their cor_progress and cor_test calls (and the
# listeners); every message still arrives once and in order, and cor_progress handled some.
PM=4000
[ $SMALL = 1 ] && PM=1000
say "2 domains x 4 tasks polling (-P), $PM messages of 0..256 KiB, over udp and gm"
for route in udp gm; do
    run_bg p$route timeout $LIMIT "$CORRUN" -n 2 --route $route "$X" -P -t 4 -m $PM -x 262144
    wait_bg p$route
    [ $RC = 0 ] || { show p$route; die "polling over $route: cor-run exited $RC"; }
    [ "$(grep -c ": PASS " "$WORK/p$route.out")" = 2 ] || { show p$route; die "polling over $route: not both domains passed"; }
    grep -q "polled_events=[1-9]" "$WORK/p$route.out" || { show p$route; die "polling over $route: cor_progress handled nothing"; }
    sed 's/^/  /' "$WORK/p$route.out"
done
say "PASS"
