#!/bin/sh
# The conformance suite against the udp route (a short dead-peer timeout for the death case).
D=$(dirname "$0")
B=${COR_BUILDDIR:-$(cd "$D/../.." && pwd)}
COR_UDP_DEAD_MS=1500 exec timeout -k 10 300 "$B/tests/conformance/route_conf" udp
