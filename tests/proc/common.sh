# Shared by the proc/*.sh scripts (sourced). Sets:
#   CORRUN, PROC  paths in the build tree       SMALL  1 if COR_TEST_SCALE=small
#   WORK          a private scratch directory, removed (with stray domains) on exit
# and offers: say, die (exit 1), skip (exit 77), cleanup hooks (add_cleanup "cmd").
set -u
B=${COR_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
CORRUN=$B/apps/cor-run
PROC=$B/tests/proc
NAME=$(basename "$0" .sh)
SMALL=0
[ "${COR_TEST_SCALE:-}" = small ] && SMALL=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cor-$NAME.XXXXXX") || exit 99
CLEANUP=""
say() { echo "$NAME: $*"; }
die() { echo "$NAME: FAIL: $*" >&2; exit 1; }
skip() { echo "$NAME: SKIP: $*"; exit 77; }
add_cleanup() { CLEANUP="$1; $CLEANUP"; }
on_exit() {
    rc=$?
    trap - EXIT INT TERM
    # cor-run instances we started take their domains with them; kill them by pid.
    for f in "$WORK"/*.corrun.pid; do
        [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    eval "$CLEANUP"
    rm -rf "$WORK"
    exit $rc
}
trap on_exit EXIT
trap 'exit 1' INT TERM
[ -x "$CORRUN" ] || die "cor-run not built at $CORRUN"

# need_gm_route: skips (77) unless the gm route's plugin is on COR_ROUTE_PATH or in the build.
need_gm_route() {
    for d in $(echo "${COR_ROUTE_PATH:-}" | tr : ' ') "$B/cor/routes/gm/.libs"; do
        [ -f "$d/cor_route_gm.so" ] && return 0
    done
    skip "gm route not built"
}
# run_bg TAG cmd...: runs cmd in the background, stdout/stderr in $WORK/TAG.{out,err}.
run_bg() {
    tag=$1; shift
    "$@" >"$WORK/$tag.out" 2>"$WORK/$tag.err" &
    echo $! >"$WORK/$tag.corrun.pid"
}
# wait_bg TAG: waits for it; sets RC.
wait_bg() {
    RC=0
    wait "$(cat "$WORK/$1.corrun.pid")" || RC=$?
    rm -f "$WORK/$1.corrun.pid"
}
# show TAG: prints its output, indented.
show() {
    sed 's/^/  | /' "$WORK/$1.out" "$WORK/$1.err"
}
# wait_until SECONDS cmd...: runs cmd every 0.1 s until it succeeds; returns 1 if it did not
# within SECONDS.
wait_until() {
    wu_n=$(($1 * 10))
    shift
    wu_i=0
    until "$@"; do
        wu_i=$((wu_i + 1))
        [ $wu_i -gt $wu_n ] && return 1
        sleep 0.1
    done
    return 0
}
# domain_pid TAG RANK: prints the pid of the domain of TAG's cor-run (run_bg) whose environment
# says COR_RANK=RANK: a child of cor-run, or of its first child (a launcher between them);
# waits for it 30 s at most; returns 1 (printing nothing) if none appeared.
domain_pid() {
    dp_corrun=$(cat "$WORK/$1.corrun.pid")
    dp_i=0
    while [ $dp_i -lt 300 ]; do
        for dp_c in $(pgrep -P "$(pgrep -P "$dp_corrun" | head -1)" 2>/dev/null) \
            $(pgrep -P "$dp_corrun"); do
            if tr '\0' '\n' <"/proc/$dp_c/environ" 2>/dev/null | grep -qx "COR_RANK=$2"; then
                echo "$dp_c"
                return 0
            fi
        done
        dp_i=$((dp_i + 1))
        sleep 0.1
    done
    return 1
}
# gm_exchange TAG N [env assignments...]: tests/proc's exchange on N domains x 8 tasks over the
# gm route (NPORTS hard ports per domain, default 1), MSGS messages of 0..MAX bytes, within
# LIMIT s; every domain must print PASS (dies otherwise), then its lines are shown.
gm_exchange() {
    ge_tag=$1 ge_n=$2
    shift 2
    run_bg $ge_tag env "$@" timeout $LIMIT "$CORRUN" -n $ge_n --route gm --ports ${NPORTS:-1} \
        "$PROC/exchange" -t 8 -m $MSGS -x $MAX
    wait_bg $ge_tag
    [ $RC = 0 ] ||
        { show $ge_tag; die "$ge_tag: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    ge_pass=$(grep -c ": PASS " "$WORK/$ge_tag.out")
    [ "$ge_pass" = $ge_n ] || { show $ge_tag; die "$ge_tag: $ge_pass of $ge_n domains passed"; }
    sed 's/^/  /' "$WORK/$ge_tag.out"
}
# wait_file PATH SECONDS: waits until PATH exists; returns 1 on timeout.
wait_file() {
    wait_until "$2" test -e "$1"
}

# watch_cpu TAG SECONDS PIDS...: while TAG's cor-run runs (at most SECONDS), samples the CPU
# time (utime + stime) of PIDS every 0.2 s; fails if one of them, watched for 1 s or more,
# used more than a quarter of a core (a survivor spinning while it waits on a dead peer would
# use a whole one); half a core under the sanitizers (COR_SANITIZED=yes), whose bookkeeping
# makes the listeners' naps cost more (TSan measured 0.26). Sets CPU_NOTE to what it saw.
watch_cpu() {
    wc_tag=$1 wc_secs=$2
    shift 2
    wc_bg=$(cat "$WORK/$wc_tag.corrun.pid")
    wc_log=$WORK/$wc_tag.cpu
    : >"$wc_log"
    wc_i=0
    while kill -0 "$wc_bg" 2>/dev/null && [ $wc_i -lt $((wc_secs * 5)) ]; do
        for wc_p; do
            wc_t=$(awk '{print $14 + $15}' "/proc/$wc_p/stat" 2>/dev/null) &&
                echo "$wc_p $(date +%s.%N) $wc_t" >>"$wc_log"
        done
        sleep 0.2
        wc_i=$((wc_i + 1))
    done
    wc_max=0.25
    [ "${COR_SANITIZED:-}" = yes ] && wc_max=0.5
    CPU_NOTE=$(awk -v hz="$(getconf CLK_TCK)" -v max=$wc_max '
        !($1 in t0) { t0[$1] = $2; c0[$1] = $3 }
        { t1[$1] = $2; c1[$1] = $3 }
        END {
            worst = -1
            for (p in t0) {
                dt = t1[p] - t0[p]
                if (dt < 1) continue
                f = (c1[p] - c0[p]) / hz / dt
                if (f > worst) { worst = f; wdt = dt }
            }
            if (worst < 0) { print "survivors done within 1 s, no CPU window"; exit 0 }
            printf "busiest survivor used %.2f of a core over %.1f s of waiting\n", worst, wdt
            exit worst > max
        }' "$wc_log") || die "$wc_tag: a survivor spins while it waits: $CPU_NOTE"
}
