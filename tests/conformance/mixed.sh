#!/bin/sh
# Both routes at once between the same domains (COR_ROUTES=udp,gm): tasks on udp, tasks on
# gm, and one task switching route every 16 messages, all sending to the same receivers;
# order per sending task, size and content checked (mixed.c). On gm's shm provider, then on
# tcp (node map on 127.0.0.1). COR_TEST_SCALE=small: fewer messages.
. "$(dirname "$0")/../proc/common.sh"
M=$B/tests/conformance/mixed
[ -x "$M" ] || die "mixed not built"
if [ $SMALL = 1 ]; then MSGS=60 LIMIT=300; else MSGS=200 LIMIT=120; fi
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE

run_mixed() { # TAG [env assignments...]
    tag=$1
    shift
    run_bg $tag env COR_ROUTES=udp,gm "$@" timeout $LIMIT "$CORRUN" -n 2 --route gm "$M" -t 4 \
        -m $MSGS -x 262144
    wait_bg $tag
    [ $RC = 0 ] || { show $tag; die "$tag: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    [ "$(grep -c ': PASS ' "$WORK/$tag.out")" = 2 ] || { show $tag; die "$tag: not every domain passed"; }
    grep -q "udp 0 msgs\|gm 0," "$WORK/$tag.out" && { show $tag; die "$tag: a route carried nothing"; }
    sed 's/^/  /' "$WORK/$tag.out"
}
say "2 domains, udp and gm at once (gm on shm), 4 senders x 4 receivers, $MSGS messages per pair"
run_mixed shm
BASE=$((40000 + ($$ % 500) * 32))
# tcp: gm's rendezvous data as frames unless COR_GM_TEST_TCP_RMA=1 (see gm-proc.sh)
RMA=0
[ "${COR_GM_TEST_TCP_RMA:-0}" = 1 ] && RMA=1
say "the same with gm on tcp (COR_RMA=$RMA, node map on 127.0.0.1, TCP ports $BASE..$((BASE + 31)))"
run_mixed tcp "GM_NODES=1 d0 127.0.0.1:$BASE; 2 d1 127.0.0.1:$((BASE + 16))" COR_GM_NODE_ID=rank \
    COR_RMA=$RMA GM_SEND_TIMEOUT_MS=$((SMALL ? 10000 : 1000))
say "PASS"
