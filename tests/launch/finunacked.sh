#!/bin/sh
# A domain whose launcher does not acknowledge its finalize sync within PMIx's 2 s stays
# 10 s more before it exits (cor/core/boot_pmix.c, pb_finish), so that mpirun reads the sync
# before it reaps the domain and does not end the job "exiting improperly" (exit 1) although
# every domain finalized: what 256 domains on a loaded machine met (mpirun starved of CPU).
# finstall.so stops mpirun (SIGSTOP) inside domain 0's PMIx_Finalize; the test resumes it 4 s
# later. Without the stay mpirun called the exit improper in 1 of 3 runs (rank 0 with PID 0,
# both domains' finalize unacknowledged), with it in none.
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
[ "$RC" = 0 ] || { show fin; die "mpirun exited $RC (a finalize not seen before the exit?)"; }
grep -q "improperly" "$WORK/fin.out" "$WORK/fin.err" && { show fin; die "mpirun: exiting improperly"; }
grep -q "did not acknowledge our finalize" "$WORK/fin.err" ||
    { show fin; die "domain 0 did not say its finalize went unacknowledged"; }
[ "$(grep -c ' got "hello from' "$WORK/fin.out")" = 4 ] ||
    { show fin; die "not every greeting arrived"; }
say "mpirun stopped 4 s inside domain 0's finalize: the domains stayed, mpirun exited 0"
say "PASS"
