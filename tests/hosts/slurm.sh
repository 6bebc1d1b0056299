#!/bin/sh
# Slurm across namespace hosts: slurmctld on h0, one slurmd on each of h1 and h2 (each finds
# its NodeName by its hostname; same port, its own spool, pid, log and TmpFS), and the CoR
# workload (workload.sh) under `srun --mpi=pmix -N 2 -n 4` from h0: the bootstrap's barriers
# (launch/pmix_check order), udp and gm exchanges, the DSM, kill -9 of a domain on h2 (srun
# ends the step and names it). Skipped (77) where namespaces cannot be made, Slurm is missing
# or CoR was built without PMIx.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
for c in slurmctld slurmd srun sinfo; do
    command -v $c >/dev/null 2>&1 || skip "no $c (Debian packages slurmctld, slurmd, slurm-client)"
done
[ "${COR_HAVE_PMIX:-}" = yes ] || skip "CoR built without PMIx (COR_HAVE_PMIX is not yes)"
hosts_create 3
# h0 is the head (slurmctld, srun), h1 and h2 the compute nodes; the workload's "h0" and "h1"
# are the first and second compute node.
S=$WORK/slurm
mkdir -p "$S/state" "$S/tmp.h0" "$S/tmp.h1" "$S/tmp.h2" || die "cannot make $S"
cat >"$S/slurm.conf" <<EOC
ClusterName=cor$$
SlurmctldHost=h0($(host_addr h0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool.%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.%n.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
SlurmctldPort=6817
SlurmdPort=6818
DebugFlags=NO_CONF_HASH
NodeName=h1 NodeAddr=$(host_addr h1) CPUs=2 State=UNKNOWN
NodeName=h2 NodeAddr=$(host_addr h2) CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=h1,h2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOC
# One file per host, differing only in TmpFS: slurmstepd's PMIx plugin makes
# TmpFS/spmix_appdir_UID_JOB.STEP on every node of a step, and on one shared /tmp the second
# node's mkdir fails ("File exists") and the step with it. NO_CONF_HASH: the files differ.
for h in h0 h1 h2; do
    { cat "$S/slurm.conf"; echo "TmpFS=$S/tmp.$h"; } >"$S/slurm.$h.conf"
done
export SLURM_CONF=$S/slurm.h0.conf
run_bg ctld "$HOSTS_ON" h0 slurmctld -D -i -f "$S/slurm.h0.conf"
for h in h1 h2; do
    run_bg slurmd.$h "$HOSTS_ON" $h slurmd -D -f "$S/slurm.$h.conf"
done
i=0
until [ "$("$HOSTS_ON" h0 sinfo -h -o '%T' 2>/dev/null | sort -u)" = idle ]; do
    i=$((i + 1))
    if [ $i -gt 150 ]; then
        show ctld; show slurmd.h1; show slurmd.h2
        die "the nodes did not become idle within 30 s: $("$HOSTS_ON" h0 sinfo -h -o '%n %T' 2>&1)"
    fi
    sleep 0.2
done
say "slurmctld on h0, slurmd on h1 and h2: idle after $((i / 5)).$((i % 5 * 2)) s"
WL_HOSTS="h1 h2"
. "$(dirname "$0")/workload.sh"
# -m cyclic: rank r on the (r mod 2)-th node, as the workload expects; --overcommit: 4 tasks
# on 2 x 2 CPUs whatever they hold.
launch() {
    l_n=$1
    shift
    timeout $LIMIT "$HOSTS_ON" h0 srun --mpi=pmix -N 2 -n $l_n -m cyclic --overcommit \
        -K1 "$@"
}
KILLED_RE='(task 3: Killed|tasks? [0-9,-]*3[0-9,-]*: Killed)'
WL_HOSTS="h1 h2"
# The bootstrap's barrier alone: none returns before every domain entered it (Slurm's fence
# without data returned on each node once its own tasks were in: cor/core/boot_pmix.c).
say "srun: 10 bootstrap barriers, 4 domains on 2 hosts, each host late in turn"
mkdir -p "$WORK/order"
wl_step order 4 "$B/tests/launch/pmix_check" order "$WORK/order"
wl_expect order 4 '^pmix_check\[[0-9]+\]: PASS'
workload_run srun
say "PASS"
