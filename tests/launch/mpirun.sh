#!/bin/sh
# Every CoR program unchanged under Open MPI's mpirun (PMIx), on this host: the examples,
# cor-bench (every mode), the DSM apps, over udp and gm (libfabric shm and tcp).
# COR_TEST_SCALE=small (sanitizer builds): the examples on every route, the rest over udp
# and gm.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/programs.sh"
launch_need_mpirun
cor_info=$("$B/apps/cor-info" --no-open 2>&1)
echo "$cor_info" | grep -q "bootstrap .*pmix" || skip "libcor built without PMIx (libpmix-dev)"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES COR_BOOT
LAUNCH_TIMEOUT=120
launch_private_shm
for route in udp gm gm-tcp; do
    launch_examples launch_mpirun $route
done
for route in udp gm; do
    launch_bench launch_mpirun $route
    launch_dsm_apps launch_mpirun $route
done
if [ $SMALL = 0 ]; then
    launch_dsm_apps launch_mpirun gm-tcp
fi
say "PASS"
