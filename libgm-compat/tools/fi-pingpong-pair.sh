#!/bin/sh
# fi-pingpong-pair.sh PROV PORT SECONDS [fi_pingpong options...]: libfabric's own ping-pong,
# its server and its client on this host (control port PORT, each bounded to SECONDS); the
# client's report on stdout, exit status the client's. The client tries again while the
# server is not listening yet (on a loaded machine that took more than the half second the
# scripts used to wait, and the refused client left its server waiting out its whole bound),
# and the server is stopped once the client is done.
set -u
prov=${1:?usage: fi-pingpong-pair.sh PROV PORT SECONDS [fi_pingpong options...]}
port=${2:?} limit=${3:?}
shift 3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fipair.XXXXXX") || exit 1
timeout -k 5 "$limit" fi_pingpong -p "$prov" -e rdm "$@" -B "$port" >"$tmp/server" 2>&1 &
spid=$!
trap 'kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
rc=1 try=0
while [ "$try" -lt 40 ]; do # 10 s at most for the server to listen
    try=$((try + 1))
    sleep 0.25
    rc=0
    timeout -k 5 "$limit" fi_pingpong -p "$prov" -e rdm "$@" -P "$port" 127.0.0.1 \
        >"$tmp/client" 2>"$tmp/client.err" || rc=$?
    [ "$rc" = 0 ] && break
    grep -q "Connection refused" "$tmp/client.err" && kill -0 "$spid" 2>/dev/null || break
done
cat "$tmp/client"
[ "$rc" = 0 ] || cat "$tmp/client.err" "$tmp/server" >&2
exit "$rc"
