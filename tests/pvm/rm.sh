#!/bin/bash
# PVM's own protocol never takes a CoR route: pvm-examples' resource manager srm.pvm
# registered with pvm_reg_rm (then every pvm_spawn, pvm_config, pvm_notify ... of a task is a
# request to it, answered by messages libpvm3 awaits inside its own calls), itself under
# cor-pvm with a route or plain, and the examples that spawn, use groups or the mailbox run
# under cor-pvm over each route: each must print what it prints under plain PVM, in time.
# Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
COR_PVM=$BUILD/apps/cor-pvm
[ -x "$COR_PVM" ] || { echo "rm: SKIP: $COR_PVM not built"; exit 77; }
[ -z "${COR_SANITIZED:-}" ] || { echo "rm: SKIP: sanitizer build (preloads into Debian's binaries)"; exit 77; }
[ -x /usr/bin/srm.pvm ] || { echo "rm: SKIP: pvm-examples' srm.pvm is not installed"; exit 77; }
# (not the inherit examples: srm.pvm itself cannot spawn into a new context, plain PVM hangs)
export PVM_EXAMPLE_LIST=${PVM_EXAMPLE_LIST:-"hello.pvm master1 spmd timing gexample mhf_server dbwtest"}
rc=0
for rm in "$COR_PVM --route myrinet" plain; do
    for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
        echo "rm: manager '$rm', programs --route $route"
        PVM_EXAMPLE_RM=$rm PVM_EXAMPLE_WRAP="$COR_PVM --route $route" \
            bash "$HERE/plain-examples.sh" || rc=$?
        [ $rc = 0 ] || [ $rc = 77 ] || exit $rc
    done
done
exit $rc
