#!/bin/sh
# Two "hosts" as two network namespaces joined by a veth pair
# (10.231.0.1/24 and 10.231.0.2/24, which exist only inside the namespaces
# this test creates), one GM node in each, over tcp;ofi_rxm: the peer test,
# then a short gm-pingpong run across.  Skips (77) where namespaces cannot
# be created (not root, no ip(8), no CAP_SYS_ADMIN).
. "$(dirname "$0")/gm-proc-lib.sh"
gmt_need "$GMT_PEER"

nsa="gmtA$$" nsb="gmtB$$"
if ! command -v ip >/dev/null 2>&1; then
    echo "SKIP: ip(8) not found (Debian package iproute2)"
    exit 77
fi
GMT_EXTRA_CLEANUP='ip netns del "$nsa" 2>/dev/null; ip netns del "$nsb" 2>/dev/null'
if ! ip netns add "$nsa" 2>"$GMT_TMP/netns.err"; then
    echo "SKIP: cannot create network namespaces: $(cat "$GMT_TMP/netns.err")"
    exit 77
fi
set -e
ip netns add "$nsb"
ip link add "gmtva$$" netns "$nsa" type veth peer name "gmtvb$$" netns "$nsb"
ip -n "$nsa" addr add 10.231.0.1/24 dev "gmtva$$"
ip -n "$nsb" addr add 10.231.0.2/24 dev "gmtvb$$"
ip -n "$nsa" link set lo up
ip -n "$nsb" link set lo up
ip -n "$nsa" link set "gmtva$$" up
ip -n "$nsb" link set "gmtvb$$" up
set +e
if ! timeout -k 10 10 ip netns exec "$nsa" ping -c 1 -W 2 10.231.0.2 >/dev/null 2>&1; then
    echo "note: ping across the veth failed (no ping?); trying GM anyway"
fi

unset GM_NODE_MAP
export GM_NODES='1 gmt-host-a 10.231.0.1; 2 gmt-host-b 10.231.0.2' GM_PROVIDER='tcp;ofi_rxm'
fail=0
gmt_bg ns_server ip netns exec "$nsa" env GM_NODE_ID=1 "$GMT_PEER" --server --port 6 \
    --count "$(gmt_scaled 2000)" --timeout 60
gmt_bg ns_client ip netns exec "$nsb" env GM_NODE_ID=2 "$GMT_PEER" --client gmt-host-a \
    --port 6 --count "$(gmt_scaled 2000)" --timeout 60
gmt_wait ns_client || fail=1
gmt_wait ns_server || fail=1
[ $fail -eq 0 ] && echo "PASS: peer test across namespaces: $(tail -n 1 "$GMT_TMP/ns_client.log")"

if [ -x "$GMT_PINGPONG" ]; then
    gmt_bg pp_server ip netns exec "$nsa" env GM_NODE_ID=1 "$GMT_PINGPONG" --server --port 5 \
        --timeout 60
    gmt_bg pp_client ip netns exec "$nsb" env GM_NODE_ID=2 "$GMT_PINGPONG" --client gmt-host-a \
        --port 5 --max-size 65536 --iters 200 --csv "$GMT_TMP/netns.csv"
    if gmt_wait pp_client && gmt_wait pp_server; then
        echo "PASS: gm-pingpong across namespaces"
        cat "$GMT_TMP/pp_client.log"
    else
        fail=1
    fi
fi
exit $fail
