#!/bin/sh
# Two "hosts": two domains in two network namespaces joined by a veth pair, started through
# cor-run --agent 'ip netns exec NS{rank}', exchange messages over the udp route on the veth
# addresses. Skipped (77) only where namespaces cannot be created (no root/CAP_NET_ADMIN).
. "$(dirname "$0")/common.sh"
X=$PROC/exchange
[ -x "$X" ] || die "exchange not built"
command -v ip >/dev/null || skip "the ip command (iproute2) is missing"
if [ $SMALL = 1 ]; then MSGS=4000 MAX=1048576 LIMIT=300; else MSGS=40000 MAX=4194304 LIMIT=120; fi

PFX=cort$$-
NET=10.201.$(($$ % 250)).
ip netns add ${PFX}0 2>"$WORK/ns.err" || skip "cannot create network namespaces: $(cat "$WORK/ns.err")"
add_cleanup "ip netns del ${PFX}0 2>/dev/null"
ip netns add ${PFX}1 || die "cannot create a second namespace"
add_cleanup "ip netns del ${PFX}1 2>/dev/null"
ip link add veth0 netns ${PFX}0 type veth peer name veth1 netns ${PFX}1 || die "cannot make a veth pair"
for r in 0 1; do
    ip -n ${PFX}$r addr add ${NET}$((r + 1))/24 dev veth$r || die "cannot address veth$r"
    ip -n ${PFX}$r link set veth$r up || die "cannot bring veth$r up"
    ip -n ${PFX}$r link set lo up
done
# The carrier (IFF_RUNNING) comes up asynchronously; the udp route's "auto" wants it.
for r in 0 1; do
    i=0
    until ip -n ${PFX}$r link show veth$r | grep -q 'state UP'; do
        i=$((i + 1))
        [ $i -gt 100 ] && die "veth$r did not come up within 10 s"
        sleep 0.1
    done
done
say "namespaces ${PFX}0 (${NET}1) and ${PFX}1 (${NET}2) joined by a veth pair"

say "2 domains x 4 tasks, $MSGS messages of 0..$MAX bytes, started with --agent"
run_bg th timeout $LIMIT "$CORRUN" -n 2 --agent "ip netns exec ${PFX}{rank}" \
    "$X" -t 4 -m $MSGS -x $MAX -a "$WORK/addr"
wait_bg th
[ $RC = 0 ] || { show th; die "cor-run exited $RC"; }
[ "$(grep -c ': PASS ' "$WORK/th.out")" = 2 ] || { show th; die "not every domain passed"; }
addr=$(sed -n 's/^ADDR //p' "$WORK/addr")
case "$addr" in
${NET}1:*) say "domain 0 published $addr (its veth address)";;
*) show th; die "domain 0 published '$addr', expected an address on ${NET}1 (COR_BIND=auto)";;
esac
sed 's/^/  /' "$WORK/th.out"
say "PASS"
