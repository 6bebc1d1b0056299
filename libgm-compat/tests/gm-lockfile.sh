#!/bin/sh
# Nothing left behind: a port's lock file (/dev/shm/<namespace>-<node>-<port>.lock, never
# in TMPDIR) and the shm provider's region (/dev/shm/<namespace>-<node>-<port>.<pid>.<n>:...)
# exist while the port is open and go when it closes, when its process exits with the port open,
# and, when its process was killed, as soon as a sender probes the port or any process of
# this user opens a port on this host (any node, any namespace).  A second opener of an
# open port still gets GM_BUSY.  shm, in a private TMPDIR that must stay empty.
. "$(dirname "$0")/gm-proc-lib.sh"
GMT_BLAST="$GMT_BUILDDIR/tests/gm-blast"
gmt_need "$GMT_BLAST"
unset GM_NODE_MAP
fail=0
export TMPDIR="$GMT_TMP/tmp"
mkdir -p "$TMPDIR"
ns="gmtlf$$"
export GM_NODES='1 gmt-sink; 2 gmt-sender' GM_PROVIDER=shm GM_SHM_NAMESPACE="$ns"
export GM_SEND_TIMEOUT_MS=300
lock() { echo "/dev/shm/$ns-$1-$2.lock"; }
# region NODE PORT: 0 if the port's shm region exists
region() { ls /dev/shm 2>/dev/null | grep -q "^$ns-$1-$2[:.]"; }
no_region() { ! region "$@"; }
GMT_EXTRA_CLEANUP='rm -f /dev/shm/"$ns"-* /dev/shm/"$ns"x-*'

check() { # check WHAT CONDITION...
    what=$1
    shift
    if "$@"; then
        echo "PASS: $what"
    else
        echo "FAIL: $what"
        ls -la "$TMPDIR" >&2
        ls -la /dev/shm | grep "$ns" >&2
        fail=1
    fi
}
absent() { [ ! -e "$1" ]; }

# sink NAME PORT [ARGS]: a node-1 sink on PORT, ready when this returns.
sink() {
    sn=$1 sp=$2
    shift 2
    gmt_bg "$sn" env GM_NODE_ID=1 "$GMT_BLAST" --sink --port "$sp" "$@"
    i=0
    until grep -q ready "$GMT_TMP/$sn.log" 2>/dev/null || [ $i -ge 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}
# kill9 NAME: SIGKILL to the program (timeout(1) runs it as its child).
kill9() {
    eval "kp=\$GMT_PID_$1"
    pkill -KILL -P "$kp" 2>/dev/null
    kill -KILL "$kp" 2>/dev/null
    wait "$kp" 2>/dev/null
}

# Long enough that the second opener comes while it is open, even on a loaded machine.
sink open 5 --timeout 8
check "an open port has its lock file" test -e "$(lock 1 5)"
check "an open port has its shm region" region 1 5
gmt_bg busy env GM_NODE_ID=1 "$GMT_BLAST" --sink --port 5 --timeout 1
gmt_wait busy 2>/dev/null
check "a second opener gets busy" grep -q -i busy "$GMT_TMP/busy.log"
gmt_wait open
check "gm_close removes it" absent "$(lock 1 5)"
check "gm_close removes the region" no_region 1 5

sink noclose 5 --timeout 1 --no-close
gmt_wait noclose
check "exit with the port open removes it" absent "$(lock 1 5)"
check "exit with the port open removes the region" no_region 1 5

sink killed 5 --timeout 60
kill9 killed
check "a killed owner leaves its file (for now)" test -e "$(lock 1 5)"
check "... and its region (for now)" region 1 5
gmt_bg probe env GM_NODE_ID=2 "$GMT_BLAST" --to 1 --port 5 --count 1 --len 100 --timeout 20
gmt_wait probe
check "a sender to the dead port removes it" absent "$(lock 1 5)"
check "... and its region" no_region 1 5

sink killed2 5 --timeout 60
kill9 killed2
check "a killed owner leaves its file and region (for now)" region 1 5
# Another namespace, another node: the opener sweeps the whole host.
GM_SHM_NAMESPACE="${ns}x" sink other 6 --timeout 1
check "opening a port anywhere on the host removes it" absent "$(lock 1 5)"
check "... and its region" no_region 1 5
gmt_wait other
check "nothing is left in TMPDIR" test -z "$(ls -A "$TMPDIR")"
check "nothing of the namespace is left in /dev/shm" test -z "$(ls /dev/shm | grep "^$ns")"
exit $fail
