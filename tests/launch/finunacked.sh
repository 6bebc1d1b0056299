#!/bin/sh
# A domain whose launcher does not acknowledge its finalize sync within PMIx's 2 s says so
# (cor/core/boot_pmix.c, pb_finish): PMIx_Finalize returns success either way, and mpirun
# may then call the domain's exit improper (a starved mpirun at 256 domains). finstall.so
# stops mpirun (SIGSTOP) inside domain 0's PMIx_Finalize; the test resumes it 4 s later.
# mpirun still read the sync before it reaped the domain here (it exits 0): a stop of the
# whole launcher does not reproduce the improper exit, which needs its threads starved
# unevenly.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
launch_need_mpirun
"$B/apps/cor-info" --no-open 2>&1 | grep -q "bootstrap .*pmix" ||
    skip "libcor built without PMIx (libpmix-dev)"
H=$B/apps/examples/hello
SO=$B/tests/launch/.libs/finstall.so
[ -x "$H" ] && [ -f "$SO" ] || die "examples/hello or finstall.so not built"
unset COR_ROUTES COR_BOOT
COR_ROUTE=udp
export COR_ROUTE
LAUNCH_TIMEOUT=90
# (the preload reaches the domains only, not mpirun: -x)
run_bg fin launch_mpirun 2 -x LD_PRELOAD="$SO" -x FINSTALL_FILE="$WORK/stopped" \
    -x ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" "$H"
if wait_file "$WORK/stopped" 60; then
    sleep 4
    kill -CONT "$(cat "$WORK/stopped")" 2>/dev/null
else
    show fin
    die "domain 0 never reached PMIx_Finalize"
fi
wait_bg fin
[ "$RC" = 0 ] || { show fin; die "mpirun exited $RC"; }
grep -q "did not acknowledge our finalize" "$WORK/fin.err" ||
    { show fin; die "domain 0 did not say its finalize went unacknowledged"; }
[ "$(grep -c ' got "hello from' "$WORK/fin.out")" = 4 ] ||
    { show fin; die "not every greeting arrived"; }
say "mpirun stopped 4 s inside domain 0's finalize: the domain said so, mpirun exited 0"
say "PASS"
