#!/bin/sh
# Two GM processes as two nodes over tcp;ofi_rxm on 127.0.0.1 (different
# port bases); mixed-size messages both ways, put/notify, get.
. "$(dirname "$0")/gm-proc-lib.sh"
gmt_need "$GMT_PEER"

base=$(gmt_port_base)
unset GM_NODE_MAP
export GM_NODES="1 gmt-srv 127.0.0.1:$base; 2 gmt-cli 127.0.0.1:$((base + 100))"
export GM_PROVIDER='tcp;ofi_rxm'
fail=0
gmt_pair tcp_loopback "GM_NODE_ID=1" "GM_NODE_ID=2" gmt-srv --port 6 --count "$(gmt_scaled 2000)" \
    --timeout 60 || fail=1
exit $fail
