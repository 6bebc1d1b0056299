#!/bin/sh
# The conformance suite against the gm route on libgm-compat's tcp provider (tcp;ofi_rxm):
# one node on 127.0.0.1 with a TCP port base picked from our pid (ports base+2..base+15).
D=$(dirname "$0")
B=${COR_BUILDDIR:-$(cd "$D/../.." && pwd)}
unset GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE
BASE=$((20000 + ($$ % 1500) * 16))
GM_NODES="1 n1 127.0.0.1:$BASE" GM_NODE_ID=1 exec timeout -k 10 300 "$B/tests/conformance/route_conf" gm
