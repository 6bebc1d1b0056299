#!/bin/sh
# Open MPI's mpirun across 2 namespace hosts: mpirun runs on h0 and starts its daemon on h1
# through the rsh agent (rsh-agent: `on HOST sh -c LINE`), the ranks are CoR programs that
# bootstrap over PMIx. Over udp and gm (libfabric tcp): an exchange; the DSM (cached objects,
# locks, barriers); kill -9 of a domain on h1 (mpirun ends the job and names it). Skipped
# (77) where namespaces cannot be made, mpirun is missing or CoR was built without PMIx.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null 2>&1 || skip "no mpirun (Debian package openmpi-bin)"
[ "${COR_HAVE_PMIX:-}" = yes ] || skip "CoR built without PMIx (COR_HAVE_PMIX is not yes)"
hosts_create 2
. "$(dirname "$0")/workload.sh"
# Two slots a host; oob_tcp_if_include keeps the daemons' wire-up on the bridge.
launch() {
    l_n=$1
    shift
    timeout $LIMIT "$HOSTS_ON" h0 mpirun --allow-run-as-root --oversubscribe \
        --hostfile "$HOSTS_DIR/hostfile" --map-by node -n $l_n \
        --mca plm_rsh_agent "$HOSTS_AGENT" --mca oob_tcp_if_include eth0 "$@"
}
KILLED_RE='process rank 3 with PID @PID@ on node h1 exited on signal 9'
workload_run mpirun
say "PASS"
