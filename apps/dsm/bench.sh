#!/bin/sh
# Measures the DSM applications beside their baselines, alternating A/B in one run so the
# machine's load hits both alike; prints every round and the medians of the per-round ratios.
#
#   sh apps/dsm/bench.sh [BUILD_DIR] [ROUNDS] [ROUTE]      (defaults: build 5 gm)
#
# LU (N = 1024, B = 128; LU_ARGS overrides): the baseline (plain arrays, 1 process), the DSM
# version on 1 domain (overhead = its time / the baseline's - 1) and on 2 domains x 1 task
# (speedup = the baseline's time / its time). GUPS (GUPS_ARGS, default 1M slots, 1M updates
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

# field CMD...: runs CMD (bounded), prints the number before " s" (LU) or " M updates/s"
# (GUPS) of its result line; fails loudly if the run failed its check.
lu_time() {
    timeout 300 "$@" >"$OUT/o" 2>&1 || { cat "$OUT/o" >&2; echo "bench: FAIL: $*" >&2; exit 1; }
    sed -n 's/^lu: .*: \([0-9.]*\) s, .*GFLOP\/s$/\1/p' "$OUT/o"
}
gups_rate() {
    timeout 300 "$@" >"$OUT/o" 2>&1 || { cat "$OUT/o" >&2; echo "bench: FAIL: $*" >&2; exit 1; }
    sed -n 's/^gups: .* \([0-9.]*\) M updates\/s.*/\1/p' "$OUT/o"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds; route $ROUTE; lu $LU_ARGS; gups $GUPS_ARGS"
echo "round  lu_base_s  lu_dsm1_s  lu_dsm2_s  overhead1  speedup2 | gups_base_M  gups_dsm2_M"
r=1
while [ $r -le "$ROUNDS" ]; do
    # shellcheck disable=SC2086 # split the arguments
    {
        base=$(lu_time "$B/apps/dsm/lu" --baseline $LU_ARGS)
        one=$(lu_time "$B/apps/dsm/lu" $LU_ARGS)
        two=$(lu_time "$RUN" -n 2 --route "$ROUTE" "$B/apps/dsm/lu" -t 1 $LU_ARGS)
        gb=$(gups_rate "$B/apps/dsm/gups" --baseline -d 2 $GUPS_ARGS)
        gd=$(gups_rate "$RUN" -n 2 --route "$ROUTE" "$B/apps/dsm/gups" $GUPS_ARGS)
    } || exit 1
    echo "$r $base $one $two $gb $gd" | awk '{ printf "%5d  %9.4f  %9.4f  %9.4f  %+8.1f%%  %8.2f | %11.3f  %11.3f\n",
        $1, $2, $3, $4, ($3 / $2 - 1) * 100, $2 / $4, $5, $6 }' | tee -a "$OUT/rows"
    r=$((r + 1))
done
ov=$(awk '{ print $5 + 0 }' "$OUT/rows" | median)
sp=$(awk '{ print $6 }' "$OUT/rows" | median)
gb=$(awk '{ print $8 }' "$OUT/rows" | median)
gd=$(awk '{ print $9 }' "$OUT/rows" | median)
echo "medians: lu overhead on 1 domain ${ov}% (goal <= 5%), lu speedup on 2 domains $sp (goal >= 1.6);"
echo "         gups 2 domains over $ROUTE $gd M updates/s (goal >= 0.5) beside the baseline's $gb M (2 threads)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
