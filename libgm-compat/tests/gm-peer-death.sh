#!/bin/sh
# A target killed with SIGKILL while messages to it (100 B: in flight;
# 32 KiB: their data waiting at the sender) are outstanding:
# every send completes (GM_SEND_TARGET_PORT_CLOSED / GM_SEND_TIMED_OUT, the
# held rest GM_SEND_DROPPED after gm_drop_sends), never a hang.  shm (the
# dead port's lock file goes) and tcp;ofi_rxm (in-flight timeout, 60 x
# GM_SEND_TIMEOUT_MS).  GMT_SHM_ONLY=1 (gm-fabric-pass.sh): the shm cases only.
. "$(dirname "$0")/gm-proc-lib.sh"
GMT_BLAST="$GMT_BUILDDIR/tests/gm-blast"
gmt_need "$GMT_BLAST"
unset GM_NODE_MAP
fail=0

# start_sink NAME: the sink (node 1, port 5) started as NAME_sink, its pid in $sink, once
# it says it is ready (at most 10 s).
start_sink() {
    gmt_bg "${1}_sink" env GM_NODE_ID=1 "$GMT_BLAST" --sink --port 5 --timeout 60
    eval "sink=\$GMT_PID_${1}_sink"
    i=0
    until grep -q ready "$GMT_TMP/${1}_sink.log" 2>/dev/null || [ $i -ge 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
}

# run_case NAME LEN: the sink (node 1) takes messages but provides no
# buffer; the sender (node 2) sends 40 of LEN bytes; the sink is killed.
run_case() {
    cn=$1 len=$2
    start_sink "$cn"
    gmt_bg "${cn}_sender" env GM_NODE_ID=2 "$GMT_BLAST" --to 1 --port 5 --count 40 \
        --len "$len" --timeout 40
    sleep 1
    # timeout(1) runs the sink as its child: kill that one.
    pkill -KILL -P "$sink" 2>/dev/null
    kill -KILL "$sink" 2>/dev/null
    if gmt_wait "${cn}_sender"; then
        echo "PASS: $cn: $(tail -n 1 "$GMT_TMP/${cn}_sender.log")"
    else
        echo "FAIL: $cn"
        fail=1
    fi
}

export GM_NODES='1 gmt-sink; 2 gmt-sender' GM_PROVIDER=shm GM_SHM_NAMESPACE="gmtpd$$"
export GM_SEND_TIMEOUT_MS=300
run_case shm_kill_small 100
run_case shm_kill_large 32768

# A target stopped (SIGSTOP) before our first message: its port is open (a live process holds
# its lock) but it takes nothing. The sends end GM_SEND_TIMED_OUT, GM's status for an open
# port that takes nothing in time. On libfabric's shm provider (gm-fabric-pass.sh) the first
# send is refused ("try again": the target never takes our connection request) for the whole
# send timeout, which was reported as GM_SEND_TARGET_PORT_CLOSED, as at 256 domains
# (docs/measurements/scale-2026-11-29.md).
stopped_case() {
    cn=shm_stopped
    start_sink "$cn"
    # timeout(1) runs the sink as its child: stop that one.
    child=$(pgrep -P "$sink" | head -n 1)
    kill -STOP "${child:-$sink}"
    gmt_bg "${cn}_sender" env GM_NODE_ID=2 "$GMT_BLAST" --to 1 --port 5 --count 4 --len 100 \
        --timeout 40
    gmt_wait "${cn}_sender"
    src=$? # (gmt_wait sets rc)
    kill -KILL "${child:-$sink}" 2>/dev/null
    kill -CONT "${child:-$sink}" 2>/dev/null
    gmt_wait "${cn}_sink" >/dev/null 2>&1
    # (its files in /dev/shm go when a process opens a port on this host)
    gmt_bg "${cn}_sweep" env GM_NODE_ID=1 "$GMT_BLAST" --sink --port 6 --timeout 0
    gmt_wait "${cn}_sweep" || fail=1
    if [ $src = 0 ] && grep -q "first failure: send timed out" "$GMT_TMP/${cn}_sender.log"; then
        echo "PASS: $cn: $(tail -n 1 "$GMT_TMP/${cn}_sender.log")"
    else
        echo "FAIL: $cn (sender exit $src; want GM_SEND_TIMED_OUT)"
        cat "$GMT_TMP/${cn}_sender.log"
        fail=1
    fi
}
stopped_case
[ "${GMT_SHM_ONLY:-0}" = 1 ] && exit $fail

base=$(gmt_port_base)
export GM_NODES="1 gmt-sink 127.0.0.1:$base; 2 gmt-sender 127.0.0.1:$((base + 100))"
export GM_PROVIDER='tcp;ofi_rxm' GM_SEND_TIMEOUT_MS=100
run_case tcp_kill_small 100
# The killed tcp sink's lock file (nobody probes it over tcp) goes when a
# process opens a port on this host.
lockf="/dev/shm/$GM_SHM_NAMESPACE-1-5.lock"
gmt_bg sweep env GM_NODE_ID=1 "$GMT_BLAST" --sink --port 6 --timeout 0
gmt_wait sweep || fail=1
if [ -e "$lockf" ]; then
    echo "FAIL: the killed sink's lock file $lockf is still there"
    fail=1
fi
exit $fail
