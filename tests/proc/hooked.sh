#!/bin/sh
# A mailbox served by its arrival hook (proc/hooked.c) over the udp and gm routes: every
# message, eager or rendezvous, is echoed from inside the hook, in order, and both the core's
# listeners and a polling task bring some. COR_TEST_SCALE=small: fewer messages.
. "$(dirname "$0")/common.sh"
X=$PROC/hooked
[ -x "$X" ] || die "hooked not built"
M=1000
[ $SMALL = 1 ] && M=300
for route in udp gm; do
    say "2 domains over $route, 2 x $M messages of 0..256 KiB"
    run_bg h$route timeout -k 10 300 "$CORRUN" -n 2 --route $route "$X" -m $M -x 262144
    wait_bg h$route
    [ $RC = 0 ] || { show h$route; die "over $route: cor-run exited $RC (124 = timed out)"; }
    [ "$(grep -c ": PASS " "$WORK/h$route.out")" = 2 ] || { show h$route; die "over $route: not both domains passed"; }
    sed 's/^/  /' "$WORK/h$route.out"
done
say "PASS"
