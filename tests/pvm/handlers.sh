#!/bin/bash
# Programs do not see libcorpvm's own message handlers (issue 31, item 4): mhf (mhf.c) adds
# and deletes handlers, lists them with libpvm3's dump (pvmdisplaymhfinfo) and sends itself a
# message per handler. Built without libcorpvm (pvm/mhf-plain) it shows what PVM shows; built
# with it (pvm/mhf), without a route and over both routes, its output must be the same after
# masking the task id: the same ids from pvm_addmhf, the same pvm_delmhf results, the same
# dump (rows, sizes, free list), the same handlers run. Before, the ids were shifted by one
# (the layer hid two of its three handlers) and the dump listed the layer's three.
# Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin handlers
for p in mhf mhf-plain; do
    [ -x "$BUILD/tests/pvm/$p" ] || { say "FAIL: $BUILD/tests/pvm/$p not built"; exit 1; }
done
D=$(mktemp -d "${TMPDIR:-/tmp}/corhandlers.XXXXXX")
trap 'pvm_cleanup_all; rm -rf "$D"' EXIT
PVM_LIB_QUIET=1 pvm_vm_start || { say "FAIL: cannot start pvmd"; exit 1; }
mask() { sed -E 's/\bt[0-9a-f]{5,8}\b/tX/g' "$1"; }
pvm_run_master -t 30 "$BUILD/tests/pvm/mhf-plain"
mask "$PVM_OUT" >"$D/plain"
if [ "$PVM_RC" != 0 ] || ! grep -q '^mhf: ok$' "$D/plain" || ! grep -q 'dhandles\[' "$D/plain"; then
    say "FAIL plain PVM: exit $PVM_RC"; cat "$PVM_OUT" "$PVM_ERR" | tail -20 | sed 's/^/  | /'; exit 1
fi
rc=0
for route in none ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    pvm_run_master -t 30 env COR_PVM_ROUTE=$route COR_SHOW_ROUTE=1 "$BUILD/tests/pvm/mhf"
    mask "$PVM_OUT" >"$D/$route"
    want=yes
    [ $route != none ] || want=no
    if [ "$PVM_RC" != 0 ] || ! grep -q "^mhf: route $want\$" "$PVM_ERR"; then
        say "FAIL $route: exit $PVM_RC, $(grep '^mhf: route' "$PVM_ERR" || echo 'no route line')"
        tail -20 "$PVM_ERR" | sed 's/^/  | /'; rc=1
    elif ! diff -u "$D/plain" "$D/$route" >"$D/diff"; then
        say "FAIL $route: the program sees something else than under plain PVM:"
        head -40 "$D/diff" | sed 's/^/  | /'; rc=1
    else
        say "PASS $route: $(grep -c 'dhandles\[' "$D/$route") dump rows, ids and results as plain PVM's"
    fi
done
pvm_vm_stop
[ $rc = 0 ] && say PASS
exit $rc
