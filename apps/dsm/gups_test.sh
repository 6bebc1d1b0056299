#!/bin/sh
# gups (apps/dsm/gups.c): the baseline, then 2 domains x 2 tasks over udp and over gm with
# every count checked exactly; --drop-one (one add skipped) must be caught; bad arguments
# get a usage error. A few seconds.
LIMIT=60
. "$(dirname "$0")/app_test.sh"
G=$(app_path gups) || exit 1
ARGS="-T 4096 -u 20000"

# expect_ok TAG cmd...: exit 0 and the rate line saying every count is exact.
expect_ok() {
    run_ok "$@"
    has "$1" out "^gups: .*M updates/s (counts exact in every domain)$" "no rate line with exact counts"
    grep "^gups:" "$WORK/$1.out" | sed 's/^/  /'
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
run_caught drop "^gups: FAIL: the counts of 1 of 2 domains differ" \
    "domain 0 did not report the failed domain" "$CORRUN" -n 2 --route udp "$G" --drop-one $ARGS

say "bad arguments are usage errors"
usage_errors "$G" "-T 0" "-u 1x" "-t 65" "-t" "--bogus" "--baseline -d 5 -T 4"
say "PASS"
