#!/bin/bash
# Debian's pvm-examples, unmodified, under cor-pvm (LD_PRELOAD of libcorpvm) with the route
# forced to myrinet (CoR's gm route on libgm-compat's shm provider), then to udp: each must
# print what it prints under plain PVM (plain-examples.sh's table), and the examples that
# exchange several messages per pair of tasks must show in libcorpvm's counters that their
# messages travelled the route. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
COR_PVM=$BUILD/apps/cor-pvm
[ -x "$COR_PVM" ] || { echo "examples: SKIP: $COR_PVM not built"; exit 77; }
# A sanitizer runtime cannot be preloaded late into Debian's binaries: the relinked tests
# (pingpong, killpeer, threads, mixed) cover libcorpvm in sanitizer builds.
[ -z "${COR_SANITIZED:-}" ] || { echo "examples: SKIP: sanitizer build"; exit 77; }
# Every message of these goes between the same pairs more than once, or they time the routes.
# (matrix.sh reads this line)
export PVM_EXAMPLE_ROUTED="timing dbwtest ibwtest rbwtest pbwtest inherit1 inherit3 master1 fmaster1 hitc fgexample frsg trsg"
rc=0
for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    echo "examples: --route $route"
    PVM_EXAMPLE_WRAP="$COR_PVM --route $route --stats" bash "$HERE/plain-examples.sh" || rc=$?
    [ $rc = 0 ] || [ $rc = 77 ] || break
done
exit $rc
