#!/bin/bash
# kill -9 of a routed task in the middle of an exchange (killpeer.c), over each route: the
# master gets PVM's exit notification, its sends to the dead task fail at once, nothing
# hangs, and it exits promptly. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin killpeer
KP=$BUILD/tests/pvm/killpeer
[ -x "$KP" ] || fail "$KP not built"
EXTRA_EP=$(dirname "$KP") pvm_vm_start || fail "cannot start a PVM virtual machine"
exports=$(pvm_exports)
for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    PVM_MASTER_TIMEOUT=60 pvm_run_master env COR_PVM_ROUTE=$route PVM_EXPORT=$exports "$KP"
    # killpeer checks its own times: the notice and the failed send within 5 s, pvm_exit
    # within 3 (the udp route would wait 5 s for a silent peer without the notice).
    grep -q 'exit notified yes' "$PVM_OUT" && [ "$PVM_RC" = 0 ] ||
        { cat "$PVM_OUT" "$PVM_ERR"; fail "$route: exit $PVM_RC"; }
    say "$route: $(grep '^killpeer:' "$PVM_OUT" | sed 's/^killpeer: //')"
done
pvm_vm_stop
say "PASS"
