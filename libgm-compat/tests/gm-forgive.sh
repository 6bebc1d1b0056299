#!/bin/sh
# GM's forgiving behaviour that real clients lean on (gm-forgive.c), two processes as two
# nodes, on shm and on tcp;ofi_rxm over 127.0.0.1:
#   late   the sender starts first: its sends wait for the target port to open (3 s after
#          they were issued; the default GM_SEND_TIMEOUT_MS, a minute, leaves a person time to
#          start it) instead of failing with GM_SEND_TARGET_PORT_CLOSED;
#   closed with GM_SEND_TIMEOUT_MS=500 and no target ever: GM_SEND_TARGET_PORT_CLOSED after
#          0.5 s (not much earlier, not a minute later);
#   killed (shm) the target took a first message and was then killed (SIGKILL): a port
#          gone, not one not open yet, so the next sends get GM_SEND_TARGET_PORT_CLOSED
#          within 5 s (its lock file) although the send timeout is the default minute (over
#          tcp a dead target shows only as one that stopped taking sends: GM_SEND_TIMED_OUT
#          after a minute, as with the old 1 s default);
#   stalled (tcp) the sender's first connection is taken by a listener that never answers it
#          (gm-silent), then the sink opens the port: libgm makes a new connection after 1 s
#          of "try again" and every send completes (before 2026-11-28 the first one waited
#          for ever: the sends failed with GM_SEND_TARGET_PORT_CLOSED at the send timeout);
#   learnt (tcp) the sink's map has no address for the sender's node: it learns it
#          (gm_node_set_address) only once 16 messages arrived, the sender's whole window of
#          unacked items, as CoR's gm route does for a peer met by its first frames. The acks
#          owed meanwhile must wait for the address: before 2026-11-28 a batch of 8 due at
#          the first look was dropped, the window stayed full, nothing more came to carry a
#          later ack, and the sends never completed (timed out here);
#   free   gm_dma_free of each 1 MiB message right after its send: still sent intact;
#   close  gm_close 50 ms after the last send, no callback awaited: nothing lost.
# GMT_SHM_ONLY=1 (gm-fabric-pass.sh): the shm cases only.
. "$(dirname "$0")/gm-proc-lib.sh"
GMT_FORGIVE="$GMT_BUILDDIR/tests/gm-forgive"
GMT_SILENT="$GMT_BUILDDIR/tests/gm-silent"
gmt_need "$GMT_FORGIVE" "$GMT_SILENT"
unset GM_NODE_MAP GM_NODE_ID GM_SEND_TIMEOUT_MS
base=$(gmt_port_base)
fail=0

# wait_line NAME TEXT: until NAME's log holds TEXT (at most 60 s).
wait_line() {
    i=0
    until grep -q "$2" "$GMT_TMP/$1.log" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 600 ] && { echo "FAIL: $1 never said '$2'"; cat "$GMT_TMP/$1.log"; return 1; }
        sleep 0.1
    done
}

# run TAG PORT ORDER ENV MODE ARGS...: both with the environment words ENV; ORDER sink-first starts the sender once the sink is ready;
# sender-first starts the sink once the sender issued its sends (the target not open yet), LATE
# seconds later (0.5 unless set).
run() {
    tag=$1 p=$2 order=$3 envw=$4 mode=$5
    shift 5
    if [ "$order" = sink-first ]; then
        gmt_bg "${tag}_sink" env GM_NODE_ID=1 $envw "$GMT_FORGIVE" --sink --port "$p" "$@"
        wait_line "${tag}_sink" "sink ready" || { fail=1; return; }
        gmt_bg "${tag}_send" env GM_NODE_ID=2 $envw "$GMT_FORGIVE" $mode --port "$p" --to 1 "$@"
    else
        gmt_bg "${tag}_send" env GM_NODE_ID=2 $envw "$GMT_FORGIVE" $mode --port "$p" --to 1 "$@"
        wait_line "${tag}_send" "sends issued" || { fail=1; return; }
        sleep "${LATE:-0.5}"
        gmt_bg "${tag}_sink" env GM_NODE_ID=1 $envw "$GMT_FORGIVE" --sink --port "$p" "$@"
    fi
    gmt_wait "${tag}_send" && gmt_wait "${tag}_sink" || { echo "FAIL: $tag"; fail=1; return; }
    echo "PASS: $tag: $(tail -n 1 "$GMT_TMP/${tag}_send.log") / $(tail -n 1 "$GMT_TMP/${tag}_sink.log")"
}

# closed_ok NAME MIN MAX: NAME's log says PORT_CLOSED after a time in [MIN, MAX) seconds.
closed_ok() {
    if gmt_wait "$1" &&
        awk -v lo="$2" -v hi="$3" '/PORT_CLOSED after/ { t = $(NF - 1) + 0; ok = t >= lo && t < hi }
            END { exit !ok }' "$GMT_TMP/$1.log"; then
        echo "PASS: $1: $(tail -n 1 "$GMT_TMP/$1.log")"
    else
        echo "FAIL: $1: $(cat "$GMT_TMP/$1.log")"
        fail=1
    fi
}

# learnt_case: tcp only (an address is a node's IPv4 and port base). The sender's window is 16
# items (GMX_WINDOW): the 17th send waits for the acks the sink owed before it learnt.
learnt_case() {
    gmt_bg learnt_sink env GM_NODE_ID=1 GM_NODES="1 fsink 127.0.0.1:$base; 2 fsend" \
        "$GMT_FORGIVE" --sink --learn 2 127.0.0.1:$((base + 100)) --after 16 --port 12 \
        --count 40 --len 100 --timeout 50
    wait_line learnt_sink "sink ready" || { fail=1; return; }
    gmt_bg learnt_send env GM_NODE_ID=2 "$GMT_FORGIVE" late --port 12 --to 1 --count 40 \
        --len 100 --timeout 40
    if gmt_wait learnt_send && gmt_wait learnt_sink &&
        grep -q "learnt node 2's address after 16" "$GMT_TMP/learnt_sink.log"; then
        echo "PASS: tcp_learnt: $(tail -n 1 "$GMT_TMP/learnt_send.log")"
    else
        echo "FAIL: tcp_learnt"
        cat "$GMT_TMP/learnt_send.log" "$GMT_TMP/learnt_sink.log"
        fail=1
    fi
}

# stalled_case: tcp only (the address is a TCP port). The send timeout is the default minute,
# the sender's limit 50 s (the sink takes 20 s to open under ThreadSanitizer on a loaded
# machine): a first connection that is never renewed holds the sends until the limit.
stalled_case() {
    gmt_bg stalled_silent "$GMT_SILENT" 127.0.0.1 $((base + 11)) --timeout 70
    wait_line stalled_silent "silent ready" || { fail=1; return; }
    gmt_bg stalled_send env GM_NODE_ID=2 GM_VERBOSE=1 "$GMT_FORGIVE" \
        late --port 11 --to 1 --count 4 --len 100 --timeout 50
    wait_line stalled_silent "taken" || { fail=1; return; }
    gmt_bg stalled_sink env GM_NODE_ID=1 "$GMT_FORGIVE" --sink --port 11 --count 4 --len 100 \
        --timeout 60
    if gmt_wait stalled_send && gmt_wait stalled_sink && gmt_wait stalled_silent &&
        grep -q "dropped by the peer" "$GMT_TMP/stalled_silent.log"; then
        echo "PASS: tcp_stalled: $(tail -n 1 "$GMT_TMP/stalled_silent.log") /" \
            "$(grep 'late:' "$GMT_TMP/stalled_send.log")"
    else
        echo "FAIL: tcp_stalled"
        cat "$GMT_TMP/stalled_silent.log" "$GMT_TMP/stalled_send.log" "$GMT_TMP/stalled_sink.log"
        fail=1
    fi
}

killed_case() { # PROVIDER
    gmt_bg $1_ksink env GM_NODE_ID=1 "$GMT_FORGIVE" --sink --port 10 --count 100 --len 100
    wait_line $1_ksink "sink ready" || { fail=1; return; }
    gmt_bg $1_killed env GM_NODE_ID=2 "$GMT_FORGIVE" closed --port 10 --to 1 --count 4 \
        --len 100 --timeout 40 --delay 2
    wait_line $1_killed "reached" || { fail=1; return; }
    eval "kp=\$GMT_PID_$1_ksink"
    pkill -KILL -P "$kp" 2>/dev/null # timeout(1) runs it as its child
    wait "$kp" 2>/dev/null
    closed_ok $1_killed 0 5
}

provs="shm tcp"
[ "${GMT_SHM_ONLY:-0}" = 1 ] && provs=shm
for prov in $provs; do
    if [ $prov = shm ]; then
        export GM_PROVIDER=shm GM_NODES='1 fsink; 2 fsend' GM_SHM_NAMESPACE="gmtfg$$"
    else
        export GM_PROVIDER='tcp;ofi_rxm'
        export GM_NODES="1 fsink 127.0.0.1:$base; 2 fsend 127.0.0.1:$((base + 100))"
    fi
    # The default send timeout, a minute, is well above the 3 s (and the time the sink takes
    # to open on a loaded machine, under sanitizers).
    LATE=3 run ${prov}_late 6 sender-first GM_VERBOSE=0 late --count 20 --len 100 --timeout 60
    # Nobody opens the port: the short timeout still gives PORT_CLOSED, and not before it.
    gmt_bg ${prov}_closed env GM_NODE_ID=2 GM_SEND_TIMEOUT_MS=500 "$GMT_FORGIVE" closed --port 9 \
        --to 1 --count 4 --len 100 --timeout 30
    closed_ok ${prov}_closed 0.45 10
    [ $prov = shm ] && killed_case $prov
    [ $prov = tcp ] && stalled_case
    [ $prov = tcp ] && learnt_case
    run ${prov}_free 7 sink-first GM_VERBOSE=0 free --count "$(gmt_scaled 8)" --len 1048576 --timeout 60
    # gm_close waits up to GM_CLOSE_LINGER_MS for the sink's acks (2 s by default; more for
    # slow machines: it returns as soon as they came).
    run ${prov}_close 8 sink-first GM_CLOSE_LINGER_MS=20000 close --count 32 --len 65536 \
        --timeout 60
done
exit $fail
