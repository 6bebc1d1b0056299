# Namespace hosts (sourced): N network namespaces, each a "host" with its own name, address and
# hostname, joined by a Linux bridge that lives in a namespace of its own, so nothing of it is
# seen from the machine's own network. See README.md in this folder.
#
#   . tests/hosts/lib.sh
#   hosts_create 3            # h0 h1 h2; skips (exit 77) where namespaces cannot be made
#   "$HOSTS_ON" h1 hostname   # prints h1; any command runs this way on any host
#   host_addr h1              # 10.A.B.2
#
# Sets HOSTS_NAMES ("h0 h1 ..."), HOSTS_NET (the /24 prefix, "10.A.B."), HOSTS_DIR (the map, the
# hosts file, the hostfile), HOSTS_ON (the `on` script), HOSTS_AGENT (an rsh/ssh-like agent for
# launchers: AGENT HOST 'command line'), and exports COR_HOSTS_DIR for those two scripts.
# Everything it made goes on exit: through add_cleanup when the caller has it
# (tests/proc/common.sh), else through its own EXIT trap. Names contain $$ and the /24 is taken
# from $$, so runs side by side do not meet.
# Where `on` lives: HOSTS_SRC if the caller set it, else beside the sourcing script (tests in
# this folder), else $COR_SRCDIR/tests/hosts (make check sets COR_SRCDIR).
[ -n "${HOSTS_SRC:-}" ] || HOSTS_SRC=$(cd "$(dirname "${BASH_SOURCE:-$0}")" 2>/dev/null && pwd)
[ -x "$HOSTS_SRC/on" ] || HOSTS_SRC=${COR_SRCDIR:-.}/tests/hosts
HOSTS_ON=$HOSTS_SRC/on
HOSTS_AGENT=$HOSTS_SRC/rsh-agent
HOSTS_TAG=cor$$
HOSTS_NAMES=""
HOSTS_CLEAN=""

# hosts_say/hosts_fail/hosts_skip use the caller's say/die/skip when it has them.
hosts_say() { if command -v say >/dev/null 2>&1; then say "$*"; else echo "hosts: $*"; fi; }
hosts_fail() {
    if command -v die >/dev/null 2>&1; then die "$*"; fi
    echo "hosts: FAIL: $*" >&2
    exit 1
}
hosts_skip() {
    if command -v skip >/dev/null 2>&1; then skip "$*"; fi
    echo "hosts: SKIP: $*"
    exit 77
}

# hosts_cleanup: kills what still runs inside our namespaces (only ours: their names hold $$),
# deletes them (their links and the bridge go with them) and the UTS namespaces.
hosts_cleanup() {
    for hc_ns in $HOSTS_NSLIST; do
        hc_pids=$(ip netns pids "$hc_ns" 2>/dev/null)
        [ -n "$hc_pids" ] && kill -KILL $hc_pids 2>/dev/null
    done
    for hc_ns in $HOSTS_NSLIST; do
        ip netns del "$hc_ns" 2>/dev/null
    done
    for hc_u in "$HOSTS_DIR"/uts.*; do
        [ -e "$hc_u" ] || continue
        umount "$hc_u" 2>/dev/null
        rm -f "$hc_u"
    done
    [ -n "$HOSTS_OWNDIR" ] && rm -rf "$HOSTS_DIR"
    HOSTS_NSLIST=""
}
HOSTS_NSLIST=""
HOSTS_OWNDIR=""

# host_ns NAME, host_addr NAME: the namespace and the address of a host.
host_ns() { awk -v h="$1" '$1 == h { print $2; f = 1 } END { exit !f }' "$HOSTS_DIR/map"; }
host_addr() { awk -v h="$1" '$1 == h { print $3; f = 1 } END { exit !f }' "$HOSTS_DIR/map"; }

# hosts_create N: makes hosts h0..h{N-1} (1 <= N <= 250) at HOSTS_NET{1..N}.
hosts_create() {
    hn=$1
    case "$hn" in '' | *[!0-9]*) hosts_fail "hosts_create: N must be a number, got '$hn'" ;; esac
    [ "$hn" -ge 1 ] && [ "$hn" -le 250 ] || hosts_fail "hosts_create: N must be 1..250, got $hn"
    [ -z "$HOSTS_NAMES" ] || hosts_fail "hosts_create: called twice"
    command -v ip >/dev/null 2>&1 || hosts_skip "the ip command (iproute2) is missing"
    command -v unshare >/dev/null 2>&1 || hosts_skip "unshare (util-linux) is missing"
    [ -x "$HOSTS_ON" ] || hosts_fail "no $HOSTS_ON: set HOSTS_SRC or COR_SRCDIR"
    if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
        HOSTS_DIR=$WORK/hosts
        mkdir -p "$HOSTS_DIR" || hosts_fail "cannot make $HOSTS_DIR"
    else
        HOSTS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cor-hosts.XXXXXX") || hosts_fail "no scratch dir"
        HOSTS_OWNDIR=1
    fi
    if command -v add_cleanup >/dev/null 2>&1; then
        add_cleanup hosts_cleanup
    else
        trap 'hosts_cleanup' EXIT
        trap 'exit 1' INT TERM
    fi
    export COR_HOSTS_DIR=$HOSTS_DIR
    # One /24 per pid (pid_max is 32768 here; 4194304 wraps, but two live runs need two live
    # pids 32768 apart with the same low 15 bits before they can share a /24, and even then
    # their bridges are in separate namespaces, so they could not see each other anyway).
    HOSTS_NET=10.$((64 + ($$ >> 8) % 128)).$(($$ & 255)).
    hsw=${HOSTS_TAG}sw
    ip netns add "$hsw" 2>"$HOSTS_DIR/ns.err" ||
        hosts_skip "cannot create network namespaces: $(cat "$HOSTS_DIR/ns.err")"
    HOSTS_NSLIST=$hsw
    ip -n "$hsw" link add br0 type bridge forward_delay 0 stp_state 0 ||
        hosts_fail "cannot make a bridge"
    ip -n "$hsw" link set br0 up || hosts_fail "cannot bring the bridge up"
    : >"$HOSTS_DIR/map"
    printf '127.0.0.1 localhost\n::1 localhost\n' >"$HOSTS_DIR/hosts"
    : >"$HOSTS_DIR/hostfile"
    hi=0
    while [ $hi -lt "$hn" ]; do
        hname=h$hi
        hns=${HOSTS_TAG}h$hi
        haddr=$HOSTS_NET$((hi + 1))
        ip netns add "$hns" || hosts_fail "cannot create namespace $hns"
        HOSTS_NSLIST="$HOSTS_NSLIST $hns"
        ip link add eth0 netns "$hns" type veth peer name p$hi netns "$hsw" ||
            hosts_fail "cannot make the veth pair of $hname"
        ip -n "$hsw" link set p$hi master br0 up || hosts_fail "cannot plug $hname in the bridge"
        ip -n "$hns" addr add "$haddr/24" dev eth0 || hosts_fail "cannot address $hname"
        ip -n "$hns" link set eth0 up || hosts_fail "cannot bring eth0 of $hname up"
        ip -n "$hns" link set lo up || hosts_fail "cannot bring lo of $hname up"
        # Its own hostname: a UTS namespace kept alive by a bind mount (`on` enters it).
        : >"$HOSTS_DIR/uts.$hname"
        unshare --uts="$HOSTS_DIR/uts.$hname" hostname "$hname" 2>"$HOSTS_DIR/uts.err" ||
            hosts_skip "cannot create a UTS namespace: $(cat "$HOSTS_DIR/uts.err")"
        echo "$hname $hns $haddr $HOSTS_DIR/uts.$hname" >>"$HOSTS_DIR/map"
        echo "$haddr $hname" >>"$HOSTS_DIR/hosts"
        echo "$hname" >>"$HOSTS_DIR/hostfile"
        HOSTS_NAMES="$HOSTS_NAMES${HOSTS_NAMES:+ }$hname"
        hi=$((hi + 1))
    done
    # The carrier (and the bridge port's forwarding state) come up asynchronously; routes
    # that pick their interface by carrier want it. 10 s at most.
    hi=0
    while [ $hi -lt "$hn" ]; do
        hw=0
        until ip -n "${HOSTS_TAG}h$hi" link show eth0 | grep -q 'state UP' &&
            ip -d -n "$hsw" link show p$hi | grep -q 'state forwarding'; do
            hw=$((hw + 1))
            [ $hw -gt 100 ] && hosts_fail "eth0 of h$hi did not come up within 10 s"
            sleep 0.1
        done
        hi=$((hi + 1))
    done
    hosts_say "$hn hosts ($HOSTS_NAMES) on ${HOSTS_NET}0/24, bridge in namespace $hsw"
}
