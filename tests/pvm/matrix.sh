#!/bin/bash
# The pvm-examples matrix: every example of plain-examples.sh's table (C and Fortran) under
# plain PVM, then under cor-pvm --route myrinet and --route udp (each checked as there, the
# routed counters of the examples that exchange several messages per pair included), and
# their outputs compared with plain PVM's once tids, times, sizes chosen at random and
# libcorpvm's own lines are masked (lines sorted: tasks print in any order). Then the
# resource-manager runs (rm.sh). Each example is bounded by its timeout. Exit 0 pass, 1 fail,
# 77 skip.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
COR_PVM=$BUILD/apps/cor-pvm
NAME=matrix
say() { echo "$NAME: $*"; }
[ -x "$COR_PVM" ] || { say "SKIP: $COR_PVM not built"; exit 77; }
[ -z "${COR_SANITIZED:-}" ] || { say "SKIP: sanitizer build (preloads into Debian's binaries)"; exit 77; }
[ -x /usr/bin/hello.pvm ] || { say "SKIP: pvm-examples is not installed"; exit 77; }
D=$(mktemp -d "${TMPDIR:-/tmp}/cormatrix.XXXXXX")
trap 'rm -rf "$D"' EXIT
# mask FILE: what must be equal between plain PVM and a route (the console's echo of a spawn
# shows the wrap; timing's and bwtest's figures are times)
mask() {
    local all=cat
    case $(basename "$1") in timing.out | *bwtest.out) all="sed -E s/\\b[0-9a-f]*[0-9][0-9a-f]*\\b/N/g" ;; esac
    # (mhf_server's dumps of libpvm3's handler table, pvmdisplaymhfinfo, are compared too)
    grep -v -e '^libcorpvm\[' -e '^cor ' -e '^pvm> spawn' "$1" 2>/dev/null | $all |
        sed -E -e 's/t[0-9a-f]{5,8}/tX/g' -e 's/0x[0-9a-f]+/0xX/g' -e 's/\b[0-9]{5,}\b/N/g' \
            -e 's/(task of size: +)[0-9]+/\1N/' -e 's/[0-9]+\.[0-9]+ (ms|us|sec|s)\b/T \1/g' \
            -e 's/[[:space:]]+/ /g' -e 's/ $//' | grep -v '^$' | sort
}
# The examples whose messages must have travelled the route: examples.sh's list.
ROUTED=$(sed -n 's/^export PVM_EXAMPLE_ROUTED="\(.*\)"$/\1/p' "$HERE/examples.sh")
[ -n "$ROUTED" ] || { say "FAIL: no PVM_EXAMPLE_ROUTED line in examples.sh"; exit 1; }
rc=0
for route in plain ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    say "--- $route"
    wrap=""
    [ $route = plain ] || wrap="$COR_PVM --route $route --stats"
    PVM_EXAMPLE_SAVE=$D/$route PVM_EXAMPLE_WRAP=$wrap \
        PVM_EXAMPLE_ROUTED="${wrap:+$ROUTED}" \
        bash "$HERE/plain-examples.sh" || rc=1
    [ $route = plain ] && continue
    for f in "$D/plain"/*.out; do
        n=$(basename "$f" .out)
        if ! diff <(mask "$f") <(mask "$D/$route/$n.out") >"$D/diff" 2>&1; then
            say "FAIL $n: $route's output differs from plain PVM's (masked, sorted):"
            sed 's/^/  | /' "$D/diff" | head -20
            rc=1
        fi
    done
done
say "--- resource manager"
bash "$HERE/rm.sh" || rc=1
[ $rc = 0 ] && say PASS
exit $rc
