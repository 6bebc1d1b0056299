#!/bin/sh
# Flooding (issue 13 item 4): domain 1 streams 1 GiB of eager-size and rendezvous-size
# messages to domain 0, which posts nothing for 10 s. Its resident memory must stay within
# the core's bound for unexpected messages (cor/core/README.md, "Memory for unexpected
# messages"), the sender must be slowed (not failed), and once the receives are posted every
# byte must arrive in order (flood.c checks all three). Over udp, then gm (shm) when built.
# COR_TEST_SCALE=small: 64 MiB and 3 s of idle time.
. "$(dirname "$0")/common.sh"
F=$PROC/flood
[ -x "$F" ] || die "flood not built"
if [ $SMALL = 1 ]; then BYTES=$((64 << 20)) IDLE=3 LIMIT=300; else BYTES=$((1 << 30)) IDLE=10 LIMIT=120; fi
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
# Fixed knobs, so the bound is known here: eager limit 16 KiB (both routes), 32 credits.
export COR_EAGER_LIMIT=16384 COR_CREDITS=32 COR_PORTS=1
WINDOW=128 EMSG=12288 RMSG=262144
# The bound (cor/core/README.md): credits x eager limit of eager data plus 2 KiB per
# unexpected message (flood.c checks their number against the window), plus SLACK for the
# allocator's arenas and the route's buffers in flight.
SLACK=$((4 << 20))
if [ "${COR_SANITIZED:-}" = yes ]; then
    # ASan's quarantine and shadow memory and TSan's history grow RSS whatever the core does:
    # there only the core's own counters (unexpected eager bytes and messages) bound it.
    SLACK=$((512 << 20))
    say "sanitizer build: RSS slack $((SLACK >> 20)) MiB (the core's counters are still checked)"
fi

found_route() {
    for d in $(echo "${COR_ROUTE_PATH:-}" | tr : ' ') "$B/cor/routes/$1/.libs"; do
        [ -f "$d/cor_route_$1.so" ] && return 0
    done
    return 1
}

ran=0
for route in udp gm; do
    if ! found_route $route; then say "$route: route not built, not run"; continue; fi
    say "$route: $BYTES bytes ($EMSG and $RMSG byte messages, $WINDOW sends outstanding) to a" \
        "receiver idle for $IDLE s"
    run_bg $route timeout $LIMIT "$CORRUN" -n 2 --route $route "$F" -b $BYTES -e $EMSG \
        -r $RMSG -i $IDLE -w $WINDOW -L $SLACK
    wait_bg $route
    [ $RC = 0 ] || { show $route; die "$route: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    [ "$(grep -c ': PASS' "$WORK/$route.out")" = 2 ] || { show $route; die "$route: not both domains passed"; }
    sed 's/^/  /' "$WORK/$route.out"
    ran=$((ran + 1))
done
[ $ran -gt 0 ] || skip "no route built"
say "PASS"
