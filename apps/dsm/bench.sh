#!/bin/sh
# Measures the DSM applications beside their baselines, alternating A/B in one run so the
# machine's load hits both alike; prints every round and the medians of the per-round ratios.
#
#   sh apps/dsm/bench.sh [BUILD_DIR] [ROUNDS] [ROUTE]      (defaults: build 5 gm)
#
# LU (N = 1024, B = 128; LU_ARGS overrides): the baseline (plain arrays, 1 process), the DSM
# version on 1 domain (overhead = its time / the baseline's - 1) and on 2 domains x 1 task
# (speedup = the baseline's time / its time); as a control, 1 domain x 2 tasks (threads, no
# message at all: the speedup two threads could get from the machine at that moment). GUPS (GUPS_ARGS, default 1M slots, 1M updates
# per task): the baseline with the streams of 2 domains (2 threads, atomics) and 2 domains
# over ROUTE.
set -u
B=$(cd "${1:-build}" && pwd) || exit 2
ROUNDS=${2:-5}
ROUTE=${3:-gm}
LU_ARGS=${LU_ARGS:--n 1024 -b 128}
GUPS_ARGS=${GUPS_ARGS:--T 1M -u 1M}
COR_ROUTE_PATH=$B/cor/routes/udp/.libs:$B/cor/routes/gm/.libs
export COR_ROUTE_PATH
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
RUN="$B/apps/cor-run"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/cor-appbench.XXXXXX") || exit 1
trap 'rm -rf "$OUT"' EXIT INT TERM

# lu_time CMD...: runs CMD (bounded) and prints "WALL CPU" from its result line; fails
# loudly if the run failed its check. gups_rate: the M updates/s of the rate line.
lu_time() {
    timeout -k 10 300 "$@" >"$OUT/o" 2>&1 || { cat "$OUT/o" >&2; echo "bench: FAIL: $*" >&2; exit 1; }
    sed -n 's/^lu: .*: \([0-9.]*\) s, .*GFLOP\/s (domain 0 used \([0-9.]*\) s of CPU)$/\1 \2/p' "$OUT/o"
}
gups_rate() {
    timeout -k 10 300 "$@" >"$OUT/o" 2>&1 || { cat "$OUT/o" >&2; echo "bench: FAIL: $*" >&2; exit 1; }
    sed -n 's/^gups: .* \([0-9.]*\) M updates\/s.*/\1/p' "$OUT/o"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds; route $ROUTE; lu $LU_ARGS; gups $GUPS_ARGS"
echo "round  lu_base_s (cpu)     lu_dsm1_s (cpu)     lu_dsm2_s  overhead1 (cpu)  speedup2  (1x2 tasks) | gups_base_M  gups_dsm2_M"
r=1
while [ $r -le "$ROUNDS" ]; do
    # shellcheck disable=SC2086 # split the arguments
    {
        base=$(lu_time "$B/apps/dsm/lu" --baseline $LU_ARGS)
        one=$(lu_time "$B/apps/dsm/lu" $LU_ARGS)
        two=$(lu_time "$RUN" -n 2 --route "$ROUTE" "$B/apps/dsm/lu" -t 1 $LU_ARGS)
        thr=$(lu_time "$B/apps/dsm/lu" -t 2 $LU_ARGS | cut -d' ' -f1)
        gb=$(gups_rate "$B/apps/dsm/gups" --baseline -d 2 $GUPS_ARGS)
        gd=$(gups_rate "$RUN" -n 2 --route "$ROUTE" "$B/apps/dsm/gups" $GUPS_ARGS)
    } || exit 1
    # columns: 1 round, 2-3 base wall cpu, 4-5 dsm1 wall cpu, 6-7 dsm2 wall cpu, 8 gb, 9 gd,
    # 10 1 domain x 2 tasks wall
    echo "$r $base $one $two $gb $gd $thr" | awk '{ printf "%5d  %8.4f (%6.4f)  %8.4f (%6.4f)  %9.4f  %+6.1f%% (%+5.1f%%)  %8.2f  (%5.2f) | %11.3f  %11.3f\n",
        $1, $2, $3, $4, $5, $6, ($4 / $2 - 1) * 100, ($5 / $3 - 1) * 100, $2 / $6, $2 / $10, $8, $9 }'
    echo "$r $base $one $two $gb $gd $thr" >>"$OUT/rows"
    r=$((r + 1))
done
col() { awk -v c="$1" '{ print $c }' "$OUT/rows"; }
ratio() { awk -v a="$1" -v b="$2" '{ print $a / $b }' "$OUT/rows" | median; }
minratio() { echo "$(col "$1" | sort -g | head -1) $(col "$2" | sort -g | head -1)" | awk '{ print $1 / $2 }'; }
echo "LU overhead of DSM on 1 domain (dsm1 / baseline - 1): median of rounds $(ratio 4 2 | awk '{ printf "%+.1f%%", ($1 - 1) * 100 }'),"
echo "   best against best $(minratio 4 2 | awk '{ printf "%+.1f%%", ($1 - 1) * 100 }'), CPU time $(ratio 5 3 | awk '{ printf "%+.1f%%", ($1 - 1) * 100 }') (goal <= 5%)"
echo "LU speedup on 2 domains (baseline / dsm2): median of rounds $(ratio 2 6), best against best $(minratio 2 6) (goal >= 1.6)"
echo "   control, 1 domain x 2 tasks (baseline / its time): median of rounds $(ratio 2 10), best against best $(minratio 2 10)"
echo "GUPS on 2 domains over $ROUTE: median $(col 9 | median) M updates/s (goal >= 0.5), baseline (2 threads) $(col 8 | median) M"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
