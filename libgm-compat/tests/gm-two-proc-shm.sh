#!/bin/sh
# Two GM processes on one host over shm: a node map with two nodes and no
# addresses; mixed-size messages both ways, put/notify, get.  The second
# round starts the client first (it must retry until the server's port
# opens).
. "$(dirname "$0")/gm-proc-lib.sh"
gmt_need "$GMT_PEER"

unset GM_NODE_MAP
export GM_NODES='1 gmt-srv; 2 gmt-cli' GM_PROVIDER=shm GM_SHM_NAMESPACE="gmt2p$$"
fail=0
gmt_pair shm_server_first "GM_NODE_ID=1" "GM_NODE_ID=2" gmt-srv --port 6 --count "$(gmt_scaled 3000)" \
    --timeout 60 || fail=1

gmt_bg late_client env GM_NODE_ID=2 "$GMT_PEER" --client 1 --port 7 --count 500 --timeout 60
sleep 1
gmt_bg late_server env GM_NODE_ID=1 "$GMT_PEER" --server --port 7 --count 500 --timeout 60
gmt_wait late_client || fail=1
gmt_wait late_server || fail=1
[ $fail -eq 0 ] && echo "PASS: shm client-first (hello retried until the server port opened)"
exit $fail
