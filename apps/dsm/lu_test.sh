#!/bin/sh
# lu (apps/dsm/lu.c): the baseline, 1 domain (1 and 2 tasks), then 2 domains over udp and
# over gm (also with --trace), 3 domains x 2 tasks, and 64 x 64 blocks (more held
# sections than a task may have at once: epochs of 4 steps, which both domains must agree on;
# domain 0 alone would have chosen 4 and domain 1 5, and they hung), each solve checked
# against a sequential unblocked LU (residual and difference);
# --perturb (one factor changed) must be caught; bad arguments get a usage error. Seconds.
. "$(dirname "$0")/../../tests/proc/common.sh"
L=$B/apps/dsm/lu
[ -x "$L" ] || die "lu not built at $L"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
ARGS="-n 256 -b 32"
LIMIT=90

# expect_ok TAG cmd...: exit 0, the check passed and the time line is there.
expect_ok() {
    tag=$1
    shift
    run_bg $tag timeout $LIMIT "$@"
    wait_bg $tag
    [ $RC = 0 ] || { show $tag; die "$tag: exited $RC (124 = timed out after $LIMIT s)"; }
    grep -q "^lu: check PASS: " "$WORK/$tag.out" || { show $tag; die "$tag: the check did not pass"; }
    grep -q "^lu: .* s, .* GFLOP/s (domain 0 used .* s of CPU)$" "$WORK/$tag.out" || { show $tag; die "$tag: no time line"; }
    grep "^lu:" "$WORK/$tag.out" | sed 's/^/  /'
}

say "baseline: N = 256, B = 32, plain arrays"
expect_ok base "$L" --baseline $ARGS
say "dsm, 1 domain"
expect_ok dsm1 "$L" $ARGS
say "dsm, 1 domain x 2 tasks"
expect_ok dsm1t2 "$L" -t 2 $ARGS
for route in udp gm; do
    say "$route: 2 domains x 1 task"
    expect_ok dsm$route "$CORRUN" -n 2 --route $route "$L" $ARGS
done
say "gm: 2 domains x 1 task, --trace"
expect_ok trace "$CORRUN" -n 2 --route gm "$L" --trace $ARGS
for d in 0 1; do
    grep -q "^lu: trace: domain $d task 0: epochs of 8 steps; barriers .* page faults$" "$WORK/trace.err" ||
        { show trace; die "trace: no trace line of domain $d"; }
done
say "gm: 3 domains x 2 tasks, N = 192, B = 16"
expect_ok dsm3 "$CORRUN" -n 3 --route gm "$L" -n 192 -b 16 -t 2
say "gm: 2 domains, N = 128, B = 2 (64 x 64 blocks), --trace"
expect_ok epochs "$CORRUN" -n 2 --route gm "$L" -n 128 -b 2 --trace
for d in 0 1; do
    grep -q "^lu: trace: domain $d task 0: epochs of 4 steps; barriers .* (18)," "$WORK/epochs.err" ||
        { show epochs; die "epochs: domain $d did not run 16 epochs of 4 steps (18 barriers)"; }
done

say "the check catches a wrong factor (--perturb)"
run_bg pert timeout $LIMIT "$CORRUN" -n 2 --route udp "$L" --perturb $ARGS
wait_bg pert
[ $RC != 0 ] && [ $RC != 124 ] || { show pert; die "pert: exited $RC, expected a failure"; }
grep -q "^lu: check FAIL: " "$WORK/pert.out" || { show pert; die "pert: no FAIL line"; }

say "bad arguments are usage errors"
for bad in "-n 0" "-n 100 -b 32" "-b 1x" "-n 4096 -b 16" "-t 0" "--baseline -t 2" "--bogus"; do
    # shellcheck disable=SC2086 # split the arguments
    "$L" $bad >"$WORK/bad.out" 2>&1
    rc=$?
    [ $rc = 2 ] || { cat "$WORK/bad.out"; die "lu $bad exited $rc, expected 2"; }
    grep -q "^lu: " "$WORK/bad.out" || die "lu $bad: no message"
done
say "PASS"
