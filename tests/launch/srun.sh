#!/bin/sh
# Every CoR program unchanged under Slurm's srun --mpi=pmix: a private one-node Slurm
# (slurmctld + slurmd in this test's scratch folder, stopped at the end) runs the examples and
# cor-bench (every mode) over udp and gm.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/programs.sh"
launch_need_slurm
"$B/apps/cor-info" --no-open 2>&1 | grep -q "bootstrap .*pmix" ||
    skip "libcor built without PMIx (libpmix-dev)"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES COR_BOOT
slurm_start
launch_private_shm
say "Slurm up (SLURM_CONF=$SLURM_CONF)"
for route in udp gm; do
    launch_examples launch_srun $route
    launch_bench launch_srun $route
done
say "PASS"
