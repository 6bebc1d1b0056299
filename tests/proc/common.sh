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
# wait_file PATH SECONDS: waits until PATH exists; returns 1 on timeout.
wait_file() {
    i=0
    while [ ! -e "$1" ]; do
        i=$((i + 1))
        [ $i -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}
