#!/bin/bash
# PVM's own protocol never takes a CoR route: pvm-examples' resource manager srm.pvm
# registered with pvm_reg_rm (then every pvm_spawn, pvm_config, pvm_notify ... of a task is a
# request to it, answered by messages libpvm3 awaits inside its own calls), itself under
# cor-pvm with a route or plain, and the examples that spawn, use groups or the mailbox run
# under cor-pvm over each route: each must print what it prints under plain PVM, in time, and
# the manager must be asked exactly what it is asked when the same examples run plainly (the
# SM_* requests of tasks it logs, counted by kind): libcorpvm's own requests (the host table
# its route binds by, the exit notices of its peers) go to pvmd, never to the manager.
# Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
COR_PVM=$BUILD/apps/cor-pvm
[ -x "$COR_PVM" ] || { echo "rm: SKIP: $COR_PVM not built"; exit 77; }
[ -z "${COR_SANITIZED:-}" ] || { echo "rm: SKIP: sanitizer build (preloads into Debian's binaries)"; exit 77; }
[ -x /usr/bin/srm.pvm ] || { echo "rm: SKIP: pvm-examples' srm.pvm is not installed"; exit 77; }
# (not the inherit examples: srm.pvm itself cannot spawn into a new context, plain PVM hangs)
export PVM_EXAMPLE_LIST=${PVM_EXAMPLE_LIST:-"hello.pvm master1 spmd timing gexample mhf_server dbwtest mbox"}
D=$(mktemp -d "${TMPDIR:-/tmp}/corrm.XXXXXX")
trap 'rm -rf "$D"' EXIT
# requests DIR: the requests tasks made of the manager during the examples, by kind
# ("N SM_KIND" lines; pvmd's own notices, from t8..., are not requests)
requests() {
    sed -n 's/^PVMd message is \(SM_[A-Z]*\) from t[0-7][0-9a-f]*$/\1/p' "$1/srm.out" |
        sort | uniq -c | awk '{print $1, $2}'
}
echo "rm: manager 'plain', programs plain (the requests of reference)"
PVM_EXAMPLE_RM=plain PVM_EXAMPLE_SAVE=$D/ref bash "$HERE/plain-examples.sh" || exit 1
requests "$D/ref" >"$D/ref.req"
[ -s "$D/ref.req" ] || { echo "rm: FAIL: the manager logged no request of the plain examples"; exit 1; }
echo "rm: requests of the plain examples: $(tr '\n' ' ' <"$D/ref.req")"
rc=0 n=0
for rm in "$COR_PVM --route myrinet" plain; do
    for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
        n=$((n + 1))
        echo "rm: manager '$rm', programs --route $route"
        r=0
        PVM_EXAMPLE_RM=$rm PVM_EXAMPLE_WRAP="$COR_PVM --route $route" PVM_EXAMPLE_SAVE=$D/$n \
            bash "$HERE/plain-examples.sh" || r=$?
        [ $r = 0 ] || [ $r = 77 ] || { rc=$r; continue; }
        requests "$D/$n" >"$D/$n.req"
        if ! diff "$D/ref.req" "$D/$n.req" >"$D/diff"; then
            echo "rm: FAIL manager '$rm', programs --route $route: the manager was asked other" \
                "requests than by the plain programs (< plain, > routed; count kind):"
            sed 's/^/  | /' "$D/diff"
            rc=1
        fi
    done
done
[ $rc = 0 ] && echo "rm: PASS"
exit $rc
