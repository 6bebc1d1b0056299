#!/bin/sh
# The conformance suite against the gm route on libgm-compat's shm provider: no node map,
# so the route makes its own (private namespace from the session cookie).
D=$(dirname "$0")
B=${COR_BUILDDIR:-$(cd "$D/../.." && pwd)}
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE
exec timeout -k 10 300 "$B/tests/conformance/route_conf" gm
