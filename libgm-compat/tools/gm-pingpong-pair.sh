#!/bin/sh
# gm-pingpong-pair.sh GM_PINGPONG SECONDS [gm-pingpong options...]: raw GM's ping-pong, its
# server as GM node 1 and its client as node 2 (GM_NODES, GM_PROVIDER and GM_SHM_NAMESPACE
# from the environment; the node map must hold nodes 1 and 2), each bounded to SECONDS; the
# options go to both (the server ignores the client's). The client's report on stdout, exit
# status the client's. The client itself waits for the server's port to open; a client that
# failed stops the server, which would otherwise wait out its own --timeout for it.
set -u
pp=${1:?usage: gm-pingpong-pair.sh GM_PINGPONG SECONDS [gm-pingpong options...]}
limit=${2:?}
shift 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gmpair.XXXXXX") || exit 1
GM_NODE_ID=1 timeout -k 5 "$limit" "$pp" --server "$@" >"$tmp/server" 2>&1 &
spid=$!
trap 'kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
rc=0
GM_NODE_ID=2 timeout -k 5 "$limit" "$pp" --client 1 "$@" 2>"$tmp/client.err" || rc=$?
cat "$tmp/client.err" >&2
if [ "$rc" = 0 ]; then
    wait "$spid" 2>/dev/null # the client said it is done: the server ends by itself
else
    cat "$tmp/server" >&2
fi
exit "$rc"
