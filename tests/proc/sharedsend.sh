#!/bin/sh
# Threads sending as one reserved task at the same time, each to another of 4 domains
# (sharedsend.c): the task's lazily made table of message numbers and the numbers themselves
# are shared by them; every message arrives once, whole and in order, and under
# ThreadSanitizer nothing races. COR_TEST_SCALE=small: 8 rounds instead of 20.
. "$(dirname "$0")/common.sh"
X=$PROC/sharedsend
[ -x "$X" ] || die "sharedsend not built"
ROUNDS=20
[ $SMALL = 1 ] && ROUNDS=8
LIMIT=300
say "4 domains, $ROUNDS rounds of 3 threads sending as one fresh task"
run_bg s4 timeout $LIMIT "$CORRUN" -n 4 "$X" -r $ROUNDS -m 50
wait_bg s4
[ $RC = 0 ] || { show s4; die "cor-run exited $RC (124 = timed out after $LIMIT s)"; }
npass=$(grep -c ": PASS " "$WORK/s4.out")
[ "$npass" = 4 ] || { show s4; die "$npass of 4 domains passed"; }
sed 's/^/  /' "$WORK/s4.out"
say "PASS"
