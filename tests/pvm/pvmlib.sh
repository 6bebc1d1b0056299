# pvmlib.sh - private PVM 3.4 virtual machines for process tests (bash, sourced).
#
#   . "$(dirname "$0")/pvmlib.sh"
#   pvm_available || { echo "SKIP: $PVM_WHY"; exit 77; }
#   pvm_vm_start || exit 1          # private PVM_TMP, pvmd running, cleanup registered
#   pvm_run_master hello.pvm        # -> $PVM_OUT, $PVM_ERR, $PVM_RC
#   pvm_log                         # pvmd's log: the output of spawned tasks
#   pvm_vm_stop                     # also runs from the EXIT trap; idempotent
#
# Functions (details above each one):
#   pvm_available, pvm_netns_available   can a VM / a two-host VM be made here (PVM_WHY)
#   pvm_vm_start, pvm_vm_stop            one-host VM
#   pvm_twohosts_start, pvm_twohosts_stop   two hosts in two network namespaces
#   pvm_addhost ADDR                     console `add`
#   pvm_run_master [-t S] [-i FILE] CMD  a master program, bounded, output captured (its
#                                        stacks printed if it times out)
#   pvm_stacks PID...                    processes' thread stacks and counters (gdb)
#   pvm_console CMD...                   console commands (conf, ps -a, spawn ..., reset)
#   pvm_hosts                            number of hosts (console conf)
#   pvm_log [B], pvm_log_size [B], pvm_log_since OFFSET [B]   pvmd's log (tasks' output)
#   pvm_cleanup_all                      stop whatever is running (for traps)
#
# Works under `set -euo pipefail` and without it; every function reports failure by its
# return status and a message on stderr (never by exiting), so `pvm_vm_start || die ...`.
#
# Cleanup: the first start installs an EXIT trap that calls pvm_cleanup_all (both kinds of
# VM), chained in front of an EXIT trap the caller had already set, and INT/TERM traps that
# exit (only if the caller had none). A caller that sets its own EXIT trap AFTER starting a
# VM replaces ours: it must then call pvm_cleanup_all (or pvm_vm_stop / pvm_twohosts_stop)
# from that trap. All stops are idempotent.
#
# What a stop kills: the pvmd this library started (its pid), then every process whose
# environment carries this VM's marker COR_PVMLIB_VM=<id> (pvmd passes its environment to
# the tasks it spawns, so that is exactly this VM's tasks, its group server and a slave
# pvmd), and for the two-host VM every process left in its two network namespaces. Never
# anything by name.
#
# Variables read (all optional):
#   EXTRA_EP           colon-separated folders appended to the hostfile's ep=/usr/bin (our
#                      build's bin dirs), so spawn finds programs there too
#   PVM_VM_ENV         extra VAR=value words for pvmd's environment (both hosts' pvmds,
#                      hence the tasks they spawn);
#                      LD_PRELOAD* words are dropped: pvmd and the console link libpvm3
#   PVM_VM_TMPDIR      pvmd's TMPDIR (default: the caller's); PVM_VM_NO_TMPDIR=1: none
#                      at all (a pvmd started from another shell, or by rsh)
#   PVM_MASTER_TIMEOUT seconds a pvm_run_master may run (default 60)
#   PVM_MASTER_FSIZE_KB largest file a master may write (ulimit -f; default 65536 KiB), so
#                      that a runaway loop printing prompts cannot fill the disk
#   PVM_START_TIMEOUT  seconds to wait for pvmd (default 10; the two-host VM 20)
#   PVM_KEEP=1         keep the VM's directories after the stop (debugging)
#   PVM_LIB_QUIET=1    no progress messages on stderr
#   PVM_NS_TAG         suffix of the namespace names (default: the shell's pid)
#   PVM_TWOHOSTS_ADD   hostfile (default: host B listed in the hostfile) or console
#                      (host B added after the start by the console's `add`)
# Variables set:
#   PVM_TMP, PVM_ALLOW_ROOT, PVM_ROOT (exported), PVM_WORK (this VM's scratch dir, holds
#   PVM_TMP), PVM_PVMD_PID, PVM_HOSTFILE; after pvm_run_master: PVM_OUT, PVM_ERR, PVM_RC;
#   PVM_EXEC: an array, the prefix that runs a command where the VM's masters run (empty
#   on one host, `ip netns exec <A>` for two), for masters a test starts by itself:
#       timeout -k 10 30 "${PVM_EXEC[@]}" prog >out &
#   two hosts: PVM_NS_A, PVM_NS_B, PVM_ADDR_A, PVM_ADDR_B, PVM_TMP_B, PVM_RSH_SCRIPT.

PVM_UID=$(id -u)
PVM_PVMD_BIN=${PVM_PVMD_BIN:-$(command -v pvmd 2>/dev/null || echo /usr/bin/pvmd)}
PVM_CONSOLE_BIN=${PVM_CONSOLE_BIN:-$(command -v pvm 2>/dev/null || echo /usr/bin/pvm)}
__PVM_VM_ID=""          # marker of the running VM ("" = none)
PVM_EXEC=()             # command prefix that enters the VM's network (ip netns exec A)
__PVM_TRAP_DONE=0
__PVM_MASTER_N=0

__pvm_say() { [ "${PVM_LIB_QUIET:-0}" = 1 ] || echo "pvmlib: $*" >&2; }
__pvm_err() { echo "pvmlib: ERROR: $*" >&2; }

# pvm_available: 0 if a VM can be started here (pvmd, pvm console, libpvm); else 1 with
# the reason in PVM_WHY.
pvm_available() {
    PVM_WHY=""
    if [ ! -x "$PVM_PVMD_BIN" ] || [ ! -x "$PVM_CONSOLE_BIN" ]; then
        PVM_WHY="pvmd/pvm not installed (apt-get install pvm pvm-dev pvm-examples)"
        return 1
    fi
    return 0
}

# pvm_test_begin NAME: the opening of a routed test. Sets NAME and BUILD (COR_BUILDDIR or
# the tree's build/), defines say and fail, skips (77) unless root with PVM installed, and
# exports the routes' plugin path of the build. Call it right after sourcing this file.
pvm_test_begin() {
    NAME=$1
    BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
    say() { echo "$NAME: $*"; }
    fail() { say "FAIL: $*"; exit 1; }
    [ "$PVM_UID" = 0 ] || { say "SKIP: not root (the tests run PVM as root with PVM_ALLOW_ROOT)"; exit 77; }
    pvm_available || { say "SKIP: $PVM_WHY"; exit 77; }
    export COR_ROUTE_PATH=${COR_ROUTE_PATH:-$BUILD/cor/routes/udp/.libs:$BUILD/cor/routes/gm/.libs}
}

# pvm_exports [VAR...]: the PVM_EXPORT list a spawned routed task needs, since pvmd's
# environment is clean: the route, the plugin path, the VARs given, and the library path and
# sanitizer options when they are set.
pvm_exports() {
    local list=COR_PVM_ROUTE:COR_ROUTE_PATH v
    for v in "$@"; do list=$list:$v; done
    for v in LD_LIBRARY_PATH ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
        [ -z "${!v:-}" ] || list=$list:$v
    done
    echo "$list"
}

# pvm_netns_available: 0 if network namespaces and veth pairs can be made (root, iproute2).
pvm_netns_available() {
    PVM_WHY=""
    command -v ip >/dev/null 2>&1 || { PVM_WHY="the ip command (iproute2) is missing"; return 1; }
    local probe=corpvmP$$
    if ! ip netns add "$probe" 2>/dev/null; then
        PVM_WHY="cannot create network namespaces (needs root/CAP_NET_ADMIN)"
        return 1
    fi
    ip netns del "$probe" 2>/dev/null || true
    return 0
}

# The environment of pvmd and of the console: nothing from the caller but what PVM needs;
# never LD_PRELOAD. TMPDIR too: the tasks pvmd spawns must find the master's gm lock files
# (scripts/test runs everything with a private TMPDIR).
__pvm_clean_env() {
    local w out=(PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="${HOME:-/root}"
                 PVM_TMP="$PVM_TMP" PVM_ALLOW_ROOT=1 PVM_ROOT="$PVM_ROOT"
                 COR_PVMLIB_VM="$__PVM_VM_ID")
    [ "${PVM_VM_NO_TMPDIR:-0}" = 1 ] || out+=(TMPDIR="${PVM_VM_TMPDIR:-${TMPDIR:-/tmp}}")
    __PVM_EXTRA=()
    for w in ${PVM_VM_ENV:-}; do
        case $w in LD_PRELOAD*|LD_AUDIT*)
                       [ -n "${__PVM_DROP_SAID:-}" ] || __pvm_say "dropping $w from pvmd's environment"
                       __PVM_DROP_SAID=1;;
                   *=*) __PVM_EXTRA+=("$w");; esac
    done
    out+=("${__PVM_EXTRA[@]}")
    [ -n "${__PVM_RSH:-}" ] && out+=(PVM_RSH="$__PVM_RSH")
    __PVM_ENV=("${out[@]}")
}

__pvm_register_cleanup() {
    [ "$__PVM_TRAP_DONE" = 1 ] && return 0
    __PVM_TRAP_DONE=1
    local t old=""
    t=$(trap -p EXIT)
    if [ -n "$t" ]; then eval "set -- $t"; old=$3; fi
    # The caller's trap runs after ours and sees the exit status the script had ($?), with
    # errexit off (setting $? takes a failing command).
    if [ -n "$old" ]; then
        trap "__pvm_rc=\$?; pvm_cleanup_all; set +e; (exit \$__pvm_rc); $old" EXIT
    else
        trap "__pvm_rc=\$?; pvm_cleanup_all; exit \$__pvm_rc" EXIT
    fi
    [ -n "$(trap -p INT)" ] || trap 'exit 130' INT
    [ -n "$(trap -p TERM)" ] || trap 'exit 143' TERM
}

# __pvm_wait_for SECONDS CMD...: polls CMD every 0.1 s; 1 on timeout.
__pvm_wait_for() {
    local n=$(($1 * 10)) i=0
    shift
    while ! "$@"; do
        i=$((i + 1))
        [ $i -ge $n ] && return 1
        sleep 0.1
    done
    return 0
}
__pvm_alive() { [ -n "${PVM_PVMD_PID:-}" ] && kill -0 "$PVM_PVMD_PID" 2>/dev/null; }
__pvm_pvmd_ready() {
    __pvm_alive || return 0            # dead: stop waiting, the caller checks
    [ -s "$PVM_TMP/pvmd.$PVM_UID" ]
}

# __pvm_start_pvmd HOSTFILE [pvmd options...]: starts pvmd (inside PVM_EXEC) in the
# background with the clean environment and waits until $PVM_TMP/pvmd.<uid> exists.
__pvm_start_pvmd() {
    local hf=$1 limit=${PVM_START_TIMEOUT:-10}
    shift
    __pvm_clean_env
    # A stale pvmd.<uid> blocks the start, an old log silently disables logging.
    rm -f "$PVM_TMP/pvmd.$PVM_UID" "$PVM_TMP/pvml.$PVM_UID"
    ( unset LD_PRELOAD LD_AUDIT
      exec "${PVM_EXEC[@]}" env -i "${__PVM_ENV[@]}" "$PVM_PVMD_BIN" "$@" "$hf" \
          </dev/null >"$PVM_WORK/pvmd.out" 2>&1 ) &
    PVM_PVMD_PID=$!
    if ! __pvm_wait_for "$limit" __pvm_pvmd_ready || ! __pvm_alive; then
        __pvm_err "pvmd did not start within ${limit}s; its output and log:"
        sed 's/^/  | /' "$PVM_WORK/pvmd.out" "$PVM_TMP/pvml.$PVM_UID" >&2 2>/dev/null || true
        return 1
    fi
    return 0
}

__pvm_new_vm() {
    if [ -n "$__PVM_VM_ID" ]; then
        __pvm_err "a VM from this library is already running ($__PVM_VM_ID): stop it first"
        return 1
    fi
    pvm_available || { __pvm_err "$PVM_WHY"; return 1; }
    PVM_WORK=$(mktemp -d "${TMPDIR:-/tmp}/corpvm.XXXXXX") || { __pvm_err "mktemp failed"; return 1; }
    __PVM_VM_ID=$(basename "$PVM_WORK")-$$
    __PVM_DROP_SAID=""
    export PVM_TMP=$PVM_WORK/tmp PVM_ALLOW_ROOT=1
    export PVM_ROOT=${PVM_ROOT:-/usr/lib/pvm3}
    mkdir -p "$PVM_TMP"
    PVM_HOSTFILE=$PVM_WORK/hostfile
    __PVM_EP=/usr/bin${EXTRA_EP:+:$EXTRA_EP}
    __pvm_register_cleanup
}

# pvm_vm_start: a one-host VM on this machine (see the header).
pvm_vm_start() {
    __pvm_new_vm || return 1
    PVM_EXEC=()
    __PVM_RSH=""
    echo "* ep=$__PVM_EP" >"$PVM_HOSTFILE"
    __pvm_start_pvmd "$PVM_HOSTFILE" || { pvm_vm_stop; return 1; }
    __pvm_say "pvmd $PVM_PVMD_PID up, PVM_TMP=$PVM_TMP, ep=$__PVM_EP"
}

# pvm_console CMD...: runs console commands (one per argument) in this VM, prints what the
# console printed. Refuses when our pvmd is not running: a console with no pvmd would
# start a new one by itself.
pvm_console() {
    if ! __pvm_alive; then
        __pvm_err "pvm_console: pvmd is not running"
        return 1
    fi
    __pvm_clean_env
    printf '%s\n' "$@" | ( unset LD_PRELOAD LD_AUDIT
        exec timeout -k 2 "${PVM_CONSOLE_TIMEOUT:-10}" "${PVM_EXEC[@]}" \
            env -i "${__PVM_ENV[@]}" "$PVM_CONSOLE_BIN" ) 2>&1
}

# pvm_hosts: number of hosts in the VM (console `conf`); 0 if it cannot tell.
pvm_hosts() {
    local n
    n=$(pvm_console conf 2>/dev/null | sed -n 's/^\([0-9][0-9]*\) hosts\{0,1\}, .*/\1/p' | head -1) || true
    echo "${n:-0}"
}

# pvm_log [B]: prints pvmd's log (spawned tasks' output goes there); B: host B's pvmd.
pvm_log() {
    local f=$PVM_TMP/pvml.$PVM_UID
    [ "${1:-}" = B ] && f=${PVM_TMP_B:-/nonexistent}/pvml.$PVM_UID
    cat "$f" 2>/dev/null || true
}
# pvm_log_size [B]: current size of the log, for `pvm_log_since`.
pvm_log_size() {
    local f=$PVM_TMP/pvml.$PVM_UID
    [ "${1:-}" = B ] && f=${PVM_TMP_B:-/nonexistent}/pvml.$PVM_UID
    stat -c %s "$f" 2>/dev/null || echo 0
}
# pvm_log_since OFFSET [B]: the log from byte OFFSET on.
pvm_log_since() {
    pvm_log "${2:-}" | tail -c +$(($1 + 1))
}

# pvm_stacks PID...: prints each process's threads' stacks (gdb -batch, 60 s at most each)
# and, where libcorpvm is loaded, its counters (cpvm_stats), on stderr: what a hang needs
# to be understood. Reading memory only: no function of the process runs.
pvm_stacks() {
    local p
    if ! command -v gdb >/dev/null 2>&1; then
        __pvm_err "no gdb: no thread stacks (apt-get install gdb)"
        return 0
    fi
    for p in "$@"; do
        [ -d "/proc/$p" ] || continue
        echo "pvmlib: pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | head -c 200)):" \
            "state $(sed -n 's/^State:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)" >&2
        timeout -k 5 60 gdb -q -batch -nx -p "$p" -ex 'set pagination off' \
            -ex 'thread apply all bt 40' -ex 'print cpvm_stats' </dev/null 2>&1 |
            grep -v -e '^\[New LWP' -e '^warning: ' -e '^Download' -e 'libthread_db' | sed 's/^/  | /' >&2 || true
    done
}

# __pvm_vm_tasks: this VM's processes but pvmd (its tasks: what the master spawned).
__pvm_vm_tasks() {
    local f pid
    [ -n "$__PVM_VM_ID" ] || return 0
    for f in $(grep -lzxF "COR_PVMLIB_VM=$__PVM_VM_ID" /proc/[0-9]*/environ 2>/dev/null || true); do
        pid=${f#/proc/}; pid=${pid%/environ}
        [ "$pid" = "$$" ] || [ "$pid" = "${PVM_PVMD_PID:-}" ] || echo "$pid"
    done | head -4
}

# __pvm_tree PID: PID and its descendants (a master run through a shell or a wrapper).
__pvm_tree() {
    local p kids
    echo "$1"
    kids=$(awk -v pp="$1" '{ sub(/^[0-9]+ \(.*\) /, ""); if ($2 == pp) print FILENAME }' \
        /proc/[0-9]*/stat 2>/dev/null | sed 's,^/proc/,,; s,/stat$,,' || true)
    for p in $kids; do __pvm_tree "$p"; done
}

# __pvm_master_watch PID SECS FILE: the time limit of a master. After SECS, if PID still
# runs: its stacks and its tasks' (pvm_stacks), SIGTERM to it and its descendants, 5 s
# later SIGKILL; FILE gets the status a timeout gives (124, or 137 after the SIGKILL). Ended
# early by SIGTERM (the master finished in time).
__pvm_master_watch() {
    local pid=$1 secs=$2 file=$3 s="" k
    trap '[ -z "$s" ] || kill "$s" 2>/dev/null; exit 0' TERM
    sleep "$secs" &
    s=$!
    wait "$s" || true
    trap - TERM
    kill -0 "$pid" 2>/dev/null || exit 0
    echo 124 >"$file"
    echo "pvmlib: the master (pid $pid) still runs after ${secs} s: its stacks, then its tasks'" >&2
    # shellcheck disable=SC2046
    pvm_stacks "$pid" $(__pvm_vm_tasks)
    # shellcheck disable=SC2046
    kill -TERM $(__pvm_tree "$pid") 2>/dev/null || true
    for ((k = 0; k < 50; k++)); do
        kill -0 "$pid" 2>/dev/null || exit 0
        sleep 0.1
    done
    echo 137 >"$file"
    # shellcheck disable=SC2046
    kill -KILL $(__pvm_tree "$pid") 2>/dev/null || true
}

# pvm_run_master [-t SECS] [-i STDIN_FILE] CMD...: runs a master program in the VM's
# environment (inside host A's namespace for the two-host VM), bounded by a timeout
# (default $PVM_MASTER_TIMEOUT or 60 s). Its stdout goes to $PVM_OUT, stderr to $PVM_ERR
# (fresh files in $PVM_WORK), its exit status to PVM_RC (124: timed out, 137: it did not end
# on SIGTERM either, 5 s later). Stdin is /dev/null unless -i. A master that times out gets
# its threads' stacks and counters printed on stderr first, and its tasks' (pvm_stacks).
# Returns 0 if it ran at all (check PVM_RC), 1 if there is no VM.
# The caller's environment (LD_PRELOAD included) goes to the master, not to pvmd.
pvm_run_master() {
    local t=${PVM_MASTER_TIMEOUT:-60} in=/dev/null
    while [ $# -gt 0 ]; do
        case $1 in
        -t) t=$2; shift 2;;
        -i) in=$2; shift 2;;
        --) shift; break;;
        *) break;;
        esac
    done
    [ -n "$__PVM_VM_ID" ] || { __pvm_err "pvm_run_master: no VM"; PVM_RC=1; return 1; }
    __PVM_MASTER_N=$((__PVM_MASTER_N + 1))
    PVM_OUT=$PVM_WORK/run$__PVM_MASTER_N.stdout
    PVM_ERR=$PVM_WORK/run$__PVM_MASTER_N.stderr
    PVM_RC=0
    local pid watch late=$PVM_WORK/run$__PVM_MASTER_N.timedout
    ( ulimit -f $((${PVM_MASTER_FSIZE_KB:-65536} * 2))    # in 512-byte blocks
      exec "${PVM_EXEC[@]}" "$@" <"$in" >"$PVM_OUT" 2>"$PVM_ERR" ) &
    pid=$!
    __pvm_master_watch "$pid" "$t" "$late" &
    watch=$!
    wait "$pid" || PVM_RC=$?
    kill -TERM "$watch" 2>/dev/null || true
    wait "$watch" || true
    [ ! -s "$late" ] || PVM_RC=$(cat "$late")
    return 0
}

# __pvm_kill_marked: kills every process whose environment has this VM's marker.
__pvm_kill_marked() {
    local id=$1 f pid killed=""
    [ -n "$id" ] || return 0
    # one grep over every environment (NUL-separated entries)
    for f in $(grep -lzxF "COR_PVMLIB_VM=$id" /proc/[0-9]*/environ 2>/dev/null || true); do
        pid=${f#/proc/}; pid=${pid%/environ}
        [ "$pid" = "$$" ] && continue
        kill -KILL "$pid" 2>/dev/null && killed="$killed $pid"
    done
    [ -z "$killed" ] || __pvm_say "killed leftover processes of this VM:$killed"
    __pvm_wait_gone 3 $killed || true
}

# __pvm_wait_gone SECONDS PID...: waits until every PID has exited (a zombie waiting for
# its parent counts as exited); 1 on timeout.
__pvm_gone() {
    local p st
    for p in "$@"; do
        st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$p/stat" 2>/dev/null) || true
        [ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ] || return 1
    done
    return 0
}
__pvm_wait_gone() {
    local t=$1
    shift
    [ $# -gt 0 ] || return 0
    __pvm_wait_for "$t" __pvm_gone "$@"
}

# Stops the VM of the current __PVM_* state: halt through the console, then kills.
__pvm_halt_and_kill() {
    if __pvm_alive; then
        pvm_console halt >/dev/null 2>&1 || true
        __pvm_wait_for 5 eval '! __pvm_alive' || true
    fi
    if __pvm_alive; then
        kill -TERM "$PVM_PVMD_PID" 2>/dev/null || true
        __pvm_wait_for 2 eval '! __pvm_alive' || kill -KILL "$PVM_PVMD_PID" 2>/dev/null || true
    fi
    [ -n "${PVM_PVMD_PID:-}" ] && { wait "$PVM_PVMD_PID" 2>/dev/null || true; }
    __pvm_kill_marked "$__PVM_VM_ID"
}

__pvm_forget() {
    if [ "${PVM_KEEP:-0}" = 1 ]; then
        __pvm_say "kept $PVM_WORK"
    else
        rm -rf "$PVM_WORK"
    fi
    __PVM_VM_ID=""
    PVM_EXEC=()
    __PVM_RSH=""
    PVM_PVMD_PID=""
}

# pvm_vm_stop: halts the one-host VM and removes what it made. Idempotent.
pvm_vm_stop() {
    [ -n "$__PVM_VM_ID" ] || return 0
    if [ -n "${PVM_NS_A:-}" ]; then pvm_twohosts_stop; return 0; fi
    __pvm_halt_and_kill
    __pvm_forget
    return 0
}

# pvm_cleanup_all: whatever this library started (for traps).
pvm_cleanup_all() {
    if [ -n "${PVM_NS_A:-}" ]; then pvm_twohosts_stop; else pvm_vm_stop; fi
}

# ---------------------------------------------------------------------------------------
# Two hosts: namespaces $PVM_NS_A / $PVM_NS_B joined by a veth pair, 10.203.N.1 and
# 10.203.N.2/24 (N from the pid; the addresses exist only inside the two namespaces).
# The master pvmd runs in A with -n<addrA>; it starts host B's pvmd through PVM_RSH, a
# generated script that runs the command in B via `ip netns exec` with B's own PVM_TMP.
# Host B is added from the hostfile (PVM_TWOHOSTS_ADD=hostfile, the default) or later by
# the console's `add` (PVM_TWOHOSTS_ADD=console, see pvm_addhost).

pvm_twohosts_start() {
    command -v ip >/dev/null 2>&1 || { __pvm_err "no ip command"; return 1; }
    __pvm_new_vm || return 1
    local tag=${PVM_NS_TAG:-$$} net
    PVM_NS_A=corpvmA$tag
    PVM_NS_B=corpvmB$tag
    net=10.203.$(( $$ % 250 + 1 ))
    PVM_ADDR_A=$net.1
    PVM_ADDR_B=$net.2
    PVM_TMP_B=$PVM_WORK/tmpB
    mkdir -p "$PVM_TMP_B"
    if ! ip netns add "$PVM_NS_A" 2>"$PVM_WORK/ns.err"; then
        __pvm_err "cannot create namespace $PVM_NS_A: $(cat "$PVM_WORK/ns.err")"
        PVM_NS_A=""; PVM_NS_B=""; __pvm_forget; return 1
    fi
    if ! ip netns add "$PVM_NS_B" ||
       ! ip link add veth0 netns "$PVM_NS_A" type veth peer name veth1 netns "$PVM_NS_B" ||
       ! ip -n "$PVM_NS_A" addr add "$PVM_ADDR_A/24" dev veth0 ||
       ! ip -n "$PVM_NS_B" addr add "$PVM_ADDR_B/24" dev veth1 ||
       ! ip -n "$PVM_NS_A" link set lo up || ! ip -n "$PVM_NS_B" link set lo up ||
       ! ip -n "$PVM_NS_A" link set veth0 up || ! ip -n "$PVM_NS_B" link set veth1 up; then
        __pvm_err "cannot set up the namespaces' network"
        pvm_twohosts_stop; return 1
    fi
    __pvm_veth_up() { ip -n "$PVM_NS_A" link show veth0 | grep -q 'state UP' &&
                      ip -n "$PVM_NS_B" link show veth1 | grep -q 'state UP'; }
    if ! __pvm_wait_for 10 __pvm_veth_up; then
        __pvm_err "the veth pair did not come up"; pvm_twohosts_stop; return 1
    fi

    # PVM_RSH: pvmd runs "$PVM_RSH host [-l user] [-n] 'command'" and reads the slave
    # pvmd's first line from its stdout.
    PVM_RSH_SCRIPT=$PVM_WORK/pvm-rsh
    local extra="" w
    __pvm_clean_env
    for w in "${__PVM_EXTRA[@]}"; do extra+="$(printf '%q' "$w") "; done
    cat >"$PVM_RSH_SCRIPT" <<EOF
#!/bin/sh
# generated by pvmlib.sh: runs a command "on" host $PVM_ADDR_B = namespace $PVM_NS_B
host=\$1; shift
while [ \$# -gt 1 ]; do
    case \$1 in -l) shift 2;; -n) shift;; *) break;; esac
done
echo "\$(date +%T) rsh \$host: \$*" >>"$PVM_WORK/rsh.log"
case \$host in
$PVM_ADDR_B) ;;
*) echo "pvm-rsh: unknown host \$host" >&2; exit 1;;
esac
exec ip netns exec "$PVM_NS_B" env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="${HOME:-/root}" \\
    PVM_TMP="$PVM_TMP_B" PVM_ALLOW_ROOT=1 PVM_ROOT="$PVM_ROOT" COR_PVMLIB_VM="$__PVM_VM_ID" \\
    $extra/bin/sh -c "\$*"
EOF
    chmod +x "$PVM_RSH_SCRIPT"
    __PVM_RSH=$PVM_RSH_SCRIPT
    PVM_EXEC=(ip netns exec "$PVM_NS_A")

    {
        echo "* ep=$__PVM_EP dx=$PVM_PVMD_BIN"
        if [ "${PVM_TWOHOSTS_ADD:-hostfile}" = hostfile ]; then echo "$PVM_ADDR_B"; fi
    } >"$PVM_HOSTFILE"
    PVM_START_TIMEOUT=${PVM_START_TIMEOUT:-20} \
        __pvm_start_pvmd "$PVM_HOSTFILE" "-n$PVM_ADDR_A" || { pvm_twohosts_stop; return 1; }
    if [ "${PVM_TWOHOSTS_ADD:-hostfile}" != hostfile ]; then
        pvm_addhost "$PVM_ADDR_B" || { pvm_twohosts_stop; return 1; }
    fi
    __pvm_two() { [ "$(pvm_hosts)" = 2 ]; }
    if ! __pvm_wait_for 20 __pvm_two; then
        __pvm_err "host B ($PVM_ADDR_B) did not join the VM; conf, logs, rsh calls:"
        { pvm_console conf; pvm_log; pvm_log B; cat "$PVM_WORK/rsh.log"; } 2>&1 | sed 's/^/  | /' >&2
        pvm_twohosts_stop; return 1
    fi
    __pvm_say "two-host VM up: A=$PVM_ADDR_A ($PVM_NS_A, pvmd $PVM_PVMD_PID), B=$PVM_ADDR_B ($PVM_NS_B)"
}

# pvm_addhost ADDR: adds a host through the console's `add`; 1 if the console says no.
pvm_addhost() {
    local out
    out=$(PVM_CONSOLE_TIMEOUT=30 pvm_console "add $1") || true
    if ! printf '%s\n' "$out" | grep -q '1 successful'; then
        __pvm_err "console add $1 failed:"; printf '%s\n' "$out" | sed 's/^/  | /' >&2
        return 1
    fi
    return 0
}

# pvm_twohosts_stop: halts the VM (both pvmds), kills what is left in both namespaces,
# deletes them. Idempotent.
pvm_twohosts_stop() {
    [ -n "${PVM_NS_A:-}${__PVM_VM_ID}" ] || return 0
    if [ -n "$__PVM_VM_ID" ]; then
        __pvm_halt_and_kill
    fi
    local ns pids
    for ns in ${PVM_NS_A:-} ${PVM_NS_B:-}; do
        # what is still running there (host B's pvmd exits by itself after the halt,
        # give it a moment), then what is left is killed
        __pvm_wait_for 3 eval "[ -z \"\$(ip netns pids $ns 2>/dev/null)\" ]" || true
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        if [ -n "$pids" ]; then
            __pvm_say "killing what is left in $ns: $pids"
            kill -KILL $pids 2>/dev/null || true
            __pvm_wait_gone 3 $pids || true
        fi
        ip netns del "$ns" 2>/dev/null || true
    done
    PVM_NS_A=""; PVM_NS_B=""
    [ -n "$__PVM_VM_ID" ] && __pvm_forget
    return 0
}
