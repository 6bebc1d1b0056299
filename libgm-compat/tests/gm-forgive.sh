#!/bin/sh
# GM's forgiving behaviour that real clients lean on (gm-forgive.c), two processes as two
# nodes, on shm and on tcp;ofi_rxm over 127.0.0.1:
#   late   the sender starts first: its sends wait for the target port to open (0.5 s after
#          they were issued) instead of failing with GM_SEND_TARGET_PORT_CLOSED;
#   free   gm_dma_free of each 1 MiB message right after its send: still sent intact;
#   close  gm_close 50 ms after the last send, no callback awaited: nothing lost.
. "$(dirname "$0")/gm-proc-lib.sh"
GMT_FORGIVE="$GMT_BUILDDIR/tests/gm-forgive"
gmt_need "$GMT_FORGIVE"
unset GM_NODE_MAP GM_NODE_ID
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
# sender-first starts the sink once the sender issued its sends (the target not open yet).
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
        sleep 0.5
        gmt_bg "${tag}_sink" env GM_NODE_ID=1 $envw "$GMT_FORGIVE" --sink --port "$p" "$@"
    fi
    gmt_wait "${tag}_send" && gmt_wait "${tag}_sink" || { echo "FAIL: $tag"; fail=1; return; }
    echo "PASS: $tag: $(tail -n 1 "$GMT_TMP/${tag}_send.log") / $(tail -n 1 "$GMT_TMP/${tag}_sink.log")"
}

for prov in shm tcp; do
    if [ $prov = shm ]; then
        export GM_PROVIDER=shm GM_NODES='1 fsink; 2 fsend' GM_SHM_NAMESPACE="gmtfg$$"
    else
        export GM_PROVIDER='tcp;ofi_rxm'
        export GM_NODES="1 fsink 127.0.0.1:$base; 2 fsend 127.0.0.1:$((base + 100))"
    fi
    # The send timeout (20 s) is well above the time the sink takes to open (a loaded
    # machine, sanitizers).
    run ${prov}_late 6 sender-first GM_SEND_TIMEOUT_MS=20000 late --count 20 --len 100 \
        --timeout 60
    run ${prov}_free 7 sink-first GM_VERBOSE=0 free --count "$(gmt_scaled 8)" --len 1048576 --timeout 60
    # gm_close waits up to GM_CLOSE_LINGER_MS for the sink's acks (2 s by default; more for
    # slow machines: it returns as soon as they came).
    run ${prov}_close 8 sink-first GM_CLOSE_LINGER_MS=20000 close --count 32 --len 65536 \
        --timeout 60
done
exit $fail
