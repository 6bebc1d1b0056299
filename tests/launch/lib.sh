# The cluster launchers for tests (sourced after tests/proc/common.sh, whose WORK, say, die,
# skip and add_cleanup it uses): Open MPI's mpirun and a private Slurm, both PMIx servers.
#
#   . tests/proc/common.sh; . tests/launch/lib.sh
#   launch_need_mpirun                 # skips (77) naming what is missing
#   launch_mpirun 4 prog args...       # mpirun -n 4 on this host, COR_*/GM_*/FI_* passed on
#   launch_need_slurm
#   slurm_start                        # slurmctld + slurmd in $WORK/slurm, until idle
#   launch_srun 4 prog args...         # srun --mpi=pmix -n 4
#   (slurm_stop runs on exit by itself)
#
# Several nodes (the namespace test bed, tests/hosts): set before slurm_start
#   SLURM_NODES="h0=10.1.2.1 h1=10.1.2.2"  NodeName=address pairs (default: this host on
#                                          127.0.0.1); the controller listens on the first
#   slurm_node_prefix() { ... }            prints the command prefix that runs a daemon on
#                                          node $1 (default: nothing: this host), e.g.
#                                          "$HOSTS_ON $1"; slurmctld runs on the first node
# and mpirun takes extra words from LAUNCH_MPIRUN_ARGS (--hostfile, --mca plm_rsh_agent ...).
# Every wait is bounded; the daemons are stopped by pid.

LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-120} # seconds any one launched job may take

launch_need_mpirun() {
    command -v mpirun >/dev/null 2>&1 || skip "mpirun not found (Debian package openmpi-bin)"
}

launch_need_slurm() {
    for lns_b in slurmctld slurmd srun sinfo; do
        command -v "$lns_b" >/dev/null 2>&1 ||
            skip "$lns_b not found (Debian packages slurmctld, slurmd, slurm-client)"
    done
}

# In sanitizer builds, LeakSanitizer's exit-time check crashes in its own tracer ("Tracer
# caught signal 11 ... LeakSanitizer has encountered a fatal error", exit 86) in domains that
# mpirun started over gm, with no leak reported: AddressSanitizer stays on for the launched
# domains, and the same programs' leaks are checked under cor-run by the other suites.
if [ "${COR_SANITIZED:-}" = yes ]; then
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
    export ASAN_OPTIONS
fi

# The -x VAR words that pass our knobs (and the sanitizers' options) to every rank (mpirun
# passes no variable to remote daemons by itself).
launch_mpirun_env() {
    env | sed -n 's/^\(\(COR\|GM\|FI\)_[A-Za-z0-9_]*\|[AT]SAN_OPTIONS\|UBSAN_OPTIONS\)=.*/-x \1/p' |
        tr '\n' ' '
}

# launch_mpirun N cmd...: runs cmd as N ranks under mpirun (at most LAUNCH_TIMEOUT s).
launch_mpirun() {
    lm_n=$1
    shift
    launch_shm_next
    # shellcheck disable=SC2046,SC2086 # words on purpose
    timeout -k 5 "$LAUNCH_TIMEOUT" mpirun --allow-run-as-root --oversubscribe --bind-to none \
        ${LAUNCH_MPIRUN_ARGS:-} $(launch_mpirun_env) -n "$lm_n" "$@"
}

# launch_private_shm: the gm route's shared-memory files get names of this test's
# (GM_SHM_NAMESPACE corl<pid>s<job>, one per job: sessions must not share one), removed on
# exit: a launcher that ends a job kills its domains, which leave their files in /dev/shm.
launch_private_shm() {
    LAUNCH_SHM=corl$$s
    add_cleanup "rm -f /dev/shm/$LAUNCH_SHM*"
}

# launch_shm_swept TAG: nothing of the last job may stay in /dev/shm once libgm-compat's next
# opener came: gm-info opens a port, and gm_open sweeps every lock file nobody holds (its owner
# died: kill -9, or a launcher that ended the job) with the region it names. The job's own
# files (GM_SHM_NAMESPACE) are looked at, for up to 10 s (domains a launcher killed may still
# be exiting); what is left is a leak of the product, not of the test: the test fails.
launch_shm_swept() {
    [ -n "${GM_SHM_NAMESPACE:-}" ] || return 0
    lss_i=0
    while :; do
        "$B/libgm-compat/tools/gm-info" >/dev/null 2>&1 || true
        lss_left=$(find /dev/shm -maxdepth 1 -name "$GM_SHM_NAMESPACE-*" -printf '%f ' 2>/dev/null)
        [ -n "$lss_left" ] || return 0
        lss_i=$((lss_i + 1))
        [ $lss_i -lt 10 ] || die "$1: left in /dev/shm after the sweep: $lss_left"
        sleep 1
    done
}

# The next job's GM_SHM_NAMESPACE, when launch_private_shm was called (a counter in $WORK:
# jobs may start from subshells).
launch_shm_next() {
    [ -n "${LAUNCH_SHM:-}" ] || return 0
    lsn=$(cat "$WORK/shm.seq" 2>/dev/null || echo 0)
    echo $((lsn + 1)) >"$WORK/shm.seq"
    GM_SHM_NAMESPACE=$LAUNCH_SHM$lsn
    export GM_SHM_NAMESPACE
}

slurm_node_prefix() { :; }

# A free TCP port pair (P, P+1) on loopback, from a range kept away from the routes' ports.
slurm_free_port() {
    sfp_i=0
    while [ $sfp_i -lt 50 ]; do
        sfp_p=$((30000 + ($$ * 7 + sfp_i * 131) % 20000))
        if ! ss -Htan "( sport = :$sfp_p or sport = :$((sfp_p + 1)) )" 2>/dev/null | grep -q .; then
            echo $sfp_p
            return 0
        fi
        sfp_i=$((sfp_i + 1))
    done
    return 1
}

SLURM_DIR=""
SLURM_PIDS=""

slurm_stop() {
    [ -n "$SLURM_PIDS" ] || return 0
    for ss_p in $SLURM_PIDS; do kill -TERM "$ss_p" 2>/dev/null; done
    ss_i=0
    for ss_p in $SLURM_PIDS; do
        while kill -0 "$ss_p" 2>/dev/null && [ $ss_i -lt 100 ]; do
            sleep 0.1
            ss_i=$((ss_i + 1))
        done
        kill -KILL "$ss_p" 2>/dev/null
    done
    SLURM_PIDS=""
}

# slurm_start: a controller and one slurmd per node of SLURM_NODES, private to this test.
slurm_start() {
    SLURM_DIR=$WORK/slurm
    mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/tmp"
    sl_nodes=${SLURM_NODES:-"$(hostname -s)=127.0.0.1"}
    sl_first=${sl_nodes%% *}
    sl_port=$(slurm_free_port) || die "no free TCP port pair for Slurm"
    SLURM_CONF=$SLURM_DIR/slurm.conf
    export SLURM_CONF
    {
        echo "ClusterName=cor$$"
        echo "SlurmctldHost=${sl_first%%=*}(${sl_first#*=})"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/none"
        echo "CredType=cred/none"
        echo "StateSaveLocation=$SLURM_DIR/state"
        echo "SlurmdSpoolDir=$SLURM_DIR/spool/%n"
        echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
        echo "SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid"
        echo "SlurmdLogFile=$SLURM_DIR/slurmd.%n.log"
        echo "SlurmctldLogFile=$SLURM_DIR/slurmctld.log"
        # (slurmstepd's PMIx plugin makes TmpFS/spmix_appdir_UID_JOB.STEP; every private Slurm
        # numbers its jobs from 1, so on the shared /tmp two at once, or one left behind by a
        # killed step, make the next step 1.0 fail: "task launch failed: Unspecified error")
        echo "TmpFS=$SLURM_DIR/tmp"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SchedulerType=sched/builtin"
        echo "MpiDefault=none"
        echo "ReturnToService=2"
        echo "MailProg=/bin/true"
        echo "SlurmctldPort=$sl_port"
        echo "SlurmdPort=$((sl_port + 1))"
        sl_names=""
        for sl_n in $sl_nodes; do
            echo "NodeName=${sl_n%%=*} NodeAddr=${sl_n#*=} CPUs=2 State=UNKNOWN"
            sl_names="$sl_names${sl_names:+,}${sl_n%%=*}"
        done
        echo "PartitionName=debug Nodes=$sl_names Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
    } >"$SLURM_CONF"
    add_cleanup slurm_stop
    # shellcheck disable=SC2046 # the prefix is words
    $(slurm_node_prefix "${sl_first%%=*}") slurmctld -D -i -f "$SLURM_CONF" \
        >"$SLURM_DIR/slurmctld.out" 2>&1 &
    SLURM_PIDS="$SLURM_PIDS $!"
    for sl_n in $sl_nodes; do
        mkdir -p "$SLURM_DIR/spool/${sl_n%%=*}"
        # shellcheck disable=SC2046
        $(slurm_node_prefix "${sl_n%%=*}") slurmd -D -f "$SLURM_CONF" \
            >"$SLURM_DIR/slurmd.${sl_n%%=*}.out" 2>&1 &
        SLURM_PIDS="$SLURM_PIDS $!"
    done
    sl_want=$(echo "$sl_nodes" | wc -w)
    sl_i=0
    while [ "$(sinfo -h -o '%T %D' 2>/dev/null | awk '$1 == "idle" { n += $2 } END { print n + 0 }')" \
        -lt "$sl_want" ]; do
        sl_i=$((sl_i + 1))
        if [ $sl_i -gt 300 ]; then
            sed 's/^/  | /' "$SLURM_DIR"/*.out "$SLURM_DIR"/*.log 2>/dev/null | tail -40
            die "Slurm did not get $sl_want node(s) idle within 30 s"
        fi
        sleep 0.1
    done
}

# launch_srun N cmd...: N tasks of cmd under the private Slurm (at most LAUNCH_TIMEOUT s).
launch_srun() {
    ls_n=$1
    shift
    launch_shm_next
    # shellcheck disable=SC2086
    timeout -k 5 "$LAUNCH_TIMEOUT" srun --mpi=pmix --overcommit -n "$ls_n" ${LAUNCH_SRUN_ARGS:-} \
        "$@"
}
