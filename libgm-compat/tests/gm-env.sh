#!/bin/sh
# Whether a port is open does not depend on a process's settings (issue 31 item 8): two GM
# processes of one host over shm, each with its own TMPDIR (a program and the task pvmd
# started for it differ so), then one of them with an empty environment (env -i: no TMPDIR,
# no HOME, no PATH, no GM_* variable; it gets the node map and namespace from
# gm_compat_configure, as CoR's gm route gives them).  Both rounds exchange messages both
# ways, a put and a get (gm-test-peer).  The sanitizers' own option variables are kept.
. "$(dirname "$0")/gm-proc-lib.sh"
gmt_need "$GMT_PEER"
unset GM_NODE_MAP GM_NODE_ID GM_PROVIDER
ns="gmtenv$$"
map='1 gmt-srv; 2 gmt-cli'
export GM_NODES="$map" GM_SHM_NAMESPACE="$ns"
mkdir -p "$GMT_TMP/a" "$GMT_TMP/b"
san=$(env | grep -E '^(ASAN|LSAN|TSAN|UBSAN)_OPTIONS=' || true)
count=$(gmt_scaled 400)
fail=0

gmt_pair tmpdirs "GM_NODE_ID=1 TMPDIR=$GMT_TMP/a" "GM_NODE_ID=2 TMPDIR=$GMT_TMP/b" gmt-srv \
    --port 6 --count "$count" --timeout 60 || fail=1

# The server under env -i, the client with a TMPDIR of its own; then the other way round.
gmt_bg empty_server env -i $san "$GMT_PEER" --server --port 7 --count "$count" --timeout 60 \
    --nodes "$map" --node 1 --ns "$ns"
gmt_bg empty_client env GM_NODE_ID=2 TMPDIR="$GMT_TMP/b" "$GMT_PEER" --client 1 --port 7 \
    --count "$count" --timeout 60
gmt_wait empty_client && gmt_wait empty_server && echo "PASS: server with an empty environment" ||
    { echo "FAIL: server with an empty environment"; fail=1; }
gmt_bg empty_server2 env GM_NODE_ID=1 TMPDIR="$GMT_TMP/a" "$GMT_PEER" --server --port 8 \
    --count "$count" --timeout 60
gmt_bg empty_client2 env -i $san "$GMT_PEER" --client 1 --port 8 --count "$count" --timeout 60 \
    --nodes "$map" --node 2 --ns "$ns"
gmt_wait empty_client2 && gmt_wait empty_server2 && echo "PASS: client with an empty environment" ||
    { echo "FAIL: client with an empty environment"; fail=1; }
for d in a b; do
    if [ -n "$(ls -A "$GMT_TMP/$d")" ]; then
        echo "FAIL: TMPDIR $d is not empty: $(ls -A "$GMT_TMP/$d")"
        fail=1
    fi
done
exit $fail
