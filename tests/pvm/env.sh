#!/bin/bash
# A program's environment may differ from pvmd's: spawned tasks get pvmd's, not the
# spawner's (clusters set TMPDIR per job; pvmd is often started from another shell or by
# rsh). Over each route, hello.pvm (its hello_other sends one routed message back) and
# life.c spawn (children exchanging messages with the master) under cor-pvm, with
#   tmpdir: the master's TMPDIR differs from pvmd's (and so from its tasks')
#   noenv:  pvmd runs without TMPDIR at all (env -i), the master with one
# must end, in time and with their output, never hang: a peer the route gives up turns into
# an error or PVM's own path for the side that waits. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin env
COR_PVM=$BUILD/apps/cor-pvm
LIFE=$BUILD/tests/pvm/life
[ -x "$COR_PVM" ] && [ -x "$LIFE" ] || { say "FAIL: $COR_PVM or $LIFE not built"; exit 1; }
[ -z "${COR_SANITIZED:-}" ] || { say "SKIP: sanitizer build (preloads into Debian's binaries)"; exit 77; }
[ -x /usr/bin/hello.pvm ] || { say "SKIP: pvm-examples is not installed"; exit 77; }
A=$(mktemp -d "${TMPDIR:-/tmp}/corenvA.XXXXXX") B=$(mktemp -d "${TMPDIR:-/tmp}/corenvB.XXXXXX")
trap 'pvm_cleanup_all; rm -rf "$A" "$B"' EXIT
rc=0
for variant in tmpdir noenv; do
    if [ $variant = tmpdir ]; then export PVM_VM_TMPDIR=$A; unset PVM_VM_NO_TMPDIR
    else export PVM_VM_NO_TMPDIR=1; unset PVM_VM_TMPDIR; fi
    EXTRA_EP=$(dirname "$LIFE") PVM_LIB_QUIET=1 pvm_vm_start || { say "FAIL: cannot start pvmd"; exit 1; }
    for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
        why=""
        pvm_run_master -t 30 env TMPDIR="$B" "$COR_PVM" --route $route hello.pvm
        grep -q 'hello, world' "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
            why="hello.pvm: exit $PVM_RC$([ "$PVM_RC" != 124 ] || echo ' (hung)'): $(cat "$PVM_OUT" "$PVM_ERR" | head -4 | tr '\n' ' ')"
        pvm_run_master -t 60 env TMPDIR="$B" COR_PVM_ROUTE=$route \
            PVM_EXPORT=COR_PVM_ROUTE:COR_ROUTE_PATH "$LIFE" spawn 3 3
        grep -q '^life: spawned 3' "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
            why="${why:+$why; }life spawn: exit $PVM_RC$([ "$PVM_RC" != 124 ] || echo ' (hung)'): $(cat "$PVM_OUT" "$PVM_ERR" | head -4 | tr '\n' ' ')"
        if [ -n "$why" ]; then say "FAIL $variant $route: $why"; rc=1
        else say "PASS $variant $route: $(grep '^life: spawned' "$PVM_OUT" | sed 's/^life: //')"; fi
    done
    pvm_vm_stop
done
[ $rc = 0 ] && say PASS
exit $rc
