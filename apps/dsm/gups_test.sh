#!/bin/sh
# gups (apps/dsm/gups.c): the baseline, then 2 domains x 2 tasks over udp and over gm with
# every count checked exactly; --drop-one (one add skipped) must be caught; bad arguments
# get a usage error. A few seconds.
. "$(dirname "$0")/../../tests/proc/common.sh"
G=$B/apps/dsm/gups
[ -x "$G" ] || die "gups not built at $G"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
ARGS="-T 4096 -u 20000"
LIMIT=60

# expect_ok TAG cmd...: exit 0 and the rate line saying every count is exact.
expect_ok() {
    tag=$1
    shift
    run_bg $tag timeout $LIMIT "$@"
    wait_bg $tag
    [ $RC = 0 ] || { show $tag; die "$tag: exited $RC (124 = timed out after $LIMIT s)"; }
    grep -q "^gups: .*M updates/s (counts exact in every domain)$" "$WORK/$tag.out" ||
        { show $tag; die "$tag: no rate line with exact counts"; }
    grep "^gups:" "$WORK/$tag.out" | sed 's/^/  /'
}

say "baseline: the streams of 2 domains x 2 tasks, one thread each"
expect_ok base "$G" --baseline -d 2 -t 2 $ARGS
for route in udp gm; do
    say "$route: 2 domains x 2 tasks"
    expect_ok dsm$route "$CORRUN" -n 2 --route $route "$G" -t 2 $ARGS
    n=$(grep -c "^domain [01]: PASS" "$WORK/dsm$route.out")
    [ "$n" = 2 ] || { show dsm$route; die "dsm$route: $n of 2 domains passed their check"; }
done
say "udp: 3 domains x 1 task (slices of unequal size)"
expect_ok dsm3 "$CORRUN" -n 3 --route udp "$G" -T 4099 -u 20000

say "the check catches one lost add (--drop-one)"
run_bg drop timeout $LIMIT "$CORRUN" -n 2 --route udp "$G" --drop-one $ARGS
wait_bg drop
[ $RC != 0 ] && [ $RC != 124 ] || { show drop; die "drop: exited $RC, expected a failure"; }
grep -q "^gups: FAIL: the counts of 1 of 2 domains differ" "$WORK/drop.out" ||
    { show drop; die "drop: domain 0 did not report the failed domain"; }

say "bad arguments are usage errors"
for bad in "-T 0" "-u 1x" "-t 65" "-t" "--bogus" "--baseline -d 5 -T 4"; do
    # shellcheck disable=SC2086 # split the arguments
    "$G" $bad >"$WORK/bad.out" 2>&1
    rc=$?
    [ $rc = 2 ] || { cat "$WORK/bad.out"; die "gups $bad exited $rc, expected 2"; }
    grep -q "^gups: " "$WORK/bad.out" || die "gups $bad: no message"
done
say "PASS"
