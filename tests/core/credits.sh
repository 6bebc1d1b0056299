#!/bin/sh
# Credit flow control between two domains over the udp route (cor-run -n 2, COR_CREDITS=4,
# COR_EAGER_LIMIT=256: 8 credit units, 3 eager int messages):
# see credits_prog.c for what is checked. Skips (77) when cor-run or the udp route is missing.
set -u
B=${COR_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
RUN=$B/apps/cor-run
PROG=$B/tests/core/credits_prog
found=
for d in $(echo "${COR_ROUTE_PATH:-}" | tr : ' '); do
    [ -f "$d/cor_route_udp.so" ] && found=1
done
if [ ! -x "$RUN" ] || [ -z "$found" ]; then
    echo "credits.sh: cor-run or cor_route_udp.so not built: skipped"
    exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM
COR_CREDITS=4 COR_CREDIT_THRESHOLD=2 COR_EAGER_LIMIT=256 timeout -k 10 60 "$RUN" -n 2 --route udp "$PROG" >"$out" 2>&1
rc=$?
cat "$out"
if [ $rc -ne 0 ]; then
    echo "credits.sh: expected exit 0 from both domains, got $rc"
    exit 1
fi
grep -q "receiver: credit frames" "$out" || { echo "credits.sh: receiver did not report"; exit 1; }
grep -q "sender: eager" "$out" || { echo "credits.sh: sender did not report"; exit 1; }
exit 0
