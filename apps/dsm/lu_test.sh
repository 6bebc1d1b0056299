#!/bin/sh
# lu (apps/dsm/lu.c): the baseline, 1 domain (1 and 2 tasks), then 2 domains over udp and
# over gm (also with --trace), 3 domains x 2 tasks, and 64 x 64 blocks (more held
# sections than a task may have at once: epochs of 4 steps, which both domains must agree on;
# domain 0 alone would have chosen 4 and domain 1 5, and they hung), each solve checked
# against a sequential unblocked LU (residual and difference);
# --perturb (one factor changed) must be caught; bad arguments get a usage error. Seconds.
LIMIT=90
. "$(dirname "$0")/app_test.sh"
L=$(app_path lu) || exit 1
ARGS="-n 256 -b 32"

# expect_ok TAG cmd...: exit 0, the check passed and the time line is there.
expect_ok() {
    run_ok "$@"
    has "$1" out "^lu: check PASS: " "the check did not pass"
    has "$1" out "^lu: .* s, .* GFLOP/s (domain 0 used .* s of CPU)$" "no time line"
    grep "^lu:" "$WORK/$1.out" | sed 's/^/  /'
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
    has trace err "^lu: trace: domain $d task 0: epochs of 8 steps; barriers .* page faults$" \
        "no trace line of domain $d"
done
say "gm: 3 domains x 2 tasks, N = 192, B = 16"
expect_ok dsm3 "$CORRUN" -n 3 --route gm "$L" -n 192 -b 16 -t 2
say "gm: 2 domains, N = 128, B = 2 (64 x 64 blocks), --trace"
expect_ok epochs "$CORRUN" -n 2 --route gm "$L" -n 128 -b 2 --trace
for d in 0 1; do
    has epochs err "^lu: trace: domain $d task 0: epochs of 4 steps; barriers .* (18)," \
        "domain $d did not run 16 epochs of 4 steps (18 barriers)"
done

say "the check catches a wrong factor (--perturb)"
run_caught pert "^lu: check FAIL: " "no FAIL line" "$CORRUN" -n 2 --route udp "$L" --perturb $ARGS

say "bad arguments are usage errors"
usage_errors "$L" "-n 0" "-n 100 -b 32" "-b 1x" "-n 4096 -b 16" "-t 0" "--baseline -t 2" "--bogus"
say "PASS"
