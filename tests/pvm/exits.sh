#!/bin/bash
# Exit is prompt over the udp route: programs whose tasks end right after their last routed
# messages (mhf_tickle telling mhf_server to exit, master1 and hello.pvm whose spawned tasks
# end at once), run several times each under cor-pvm --route udp. A route must never give a
# peer up (it waited 5 s for acknowledgements that a task leaving had dropped), and each run
# stays well under those 5 s. Exit 0 pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
COR_PVM=$BUILD/apps/cor-pvm
[ -x "$COR_PVM" ] || { echo "exits: SKIP: $COR_PVM not built"; exit 77; }
[ -z "${COR_SANITIZED:-}" ] || { echo "exits: SKIP: sanitizer build (preloads into Debian's binaries)"; exit 77; }
PVM_EXAMPLE_LIST="mhf_server master1 hello.pvm" PVM_EXAMPLE_REPEAT=${COR_PVM_EXIT_RUNS:-6} \
    PVM_EXAMPLE_MAX_MS=4000 PVM_EXAMPLE_WRAP="$COR_PVM --route udp --stats" \
    exec bash "$HERE/plain-examples.sh"
