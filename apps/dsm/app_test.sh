# Sourced by the DSM applications' check scripts (gups_test.sh, lu_test.sh), after LIMIT is
# set: the process-test helpers (tests/proc/common.sh: say, die, show, run_bg, wait_bg, $B,
# $WORK, $CORRUN) and the checks both apps make.
. "$(dirname "$0")/../../tests/proc/common.sh"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES

# app_path NAME: the built program, or the test dies saying it is not built.
app_path() {
    [ -x "$B/apps/dsm/$1" ] || die "$1 not built at $B/apps/dsm/$1"
    echo "$B/apps/dsm/$1"
}

# run_ok TAG cmd...: runs cmd (at most LIMIT seconds) and dies unless it exits 0.
run_ok() {
    tag=$1
    shift
    run_bg "$tag" timeout "$LIMIT" "$@"
    wait_bg "$tag"
    [ "$RC" = 0 ] || { show "$tag"; die "$tag: exited $RC (124 = timed out after $LIMIT s)"; }
}

# has TAG FILE REGEX WHAT: dies saying WHAT is missing unless a line of $WORK/TAG.FILE
# (out or err) matches REGEX.
has() {
    grep -q "$3" "$WORK/$1.$2" || { show "$1"; die "$1: $4"; }
}

# run_caught TAG REGEX WHAT cmd...: cmd must fail (not time out) and print a line matching
# REGEX, which says WHAT it caught.
run_caught() {
    tag=$1 re=$2 what=$3
    shift 3
    run_bg "$tag" timeout "$LIMIT" "$@"
    wait_bg "$tag"
    [ "$RC" != 0 ] && [ "$RC" != 124 ] || { show "$tag"; die "$tag: exited $RC, expected a failure"; }
    has "$tag" out "$re" "$what"
}

# usage_errors PROGRAM ARGS...: each ARGS string (split on spaces) must be refused with
# exit status 2 and a message starting with the program's name.
usage_errors() {
    prog=$1 name=$(basename "$1")
    shift
    for bad in "$@"; do
        # shellcheck disable=SC2086 # split the arguments
        "$prog" $bad >"$WORK/bad.out" 2>&1
        rc=$?
        [ $rc = 2 ] || { cat "$WORK/bad.out"; die "$name $bad exited $rc, expected 2"; }
        grep -q "^$name: " "$WORK/bad.out" || die "$name $bad: no message"
    done
}
