#!/bin/sh
# The namespace test bed itself (lib.sh): 3 hosts with their own hostnames and a shared
# /etc/hosts; one domain per host (cor-run --agent "$HOSTS_ON h{rank}") exchanging over the udp
# route on the hosts' addresses; nothing of the run left after cleanup. Skipped (77) only where
# namespaces cannot be made.
. "$(dirname "$0")/../proc/common.sh"
. "$(dirname "$0")/lib.sh"
X=$PROC/exchange
[ -x "$X" ] || die "exchange not built"
hosts_create 3
for h in $HOSTS_NAMES; do
    got=$("$HOSTS_ON" "$h" hostname) || die "on $h: hostname failed"
    [ "$got" = "$h" ] || die "hostname on $h is '$got'"
    for o in $HOSTS_NAMES; do
        a=$("$HOSTS_ON" "$h" getent hosts "$o" | awk '{print $1}')
        [ "$a" = "$(host_addr "$o")" ] || die "on $h, $o resolves to '$a', not $(host_addr "$o")"
    done
done
"$HOSTS_ON" h9 true 2>/dev/null && die "on accepted an unknown host"
out=$("$HOSTS_AGENT" h2 'echo "$(hostname)";' echo a b) || die "rsh-agent failed"
[ "$out" = "h2
a b" ] || die "rsh-agent ran '$out'"
say "hostnames, name resolution, on and rsh-agent: ok"

run_bg ex timeout -k 10 120 "$CORRUN" -n 3 --agent "$HOSTS_ON h{rank}" \
    "$X" -t 2 -m 3000 -x 262144 -a "$WORK/addr"
wait_bg ex
[ $RC = 0 ] || { show ex; die "cor-run exited $RC"; }
[ "$(grep -c ': PASS ' "$WORK/ex.out")" = 3 ] || { show ex; die "not every domain passed"; }
addr=$(sed -n 's/^ADDR //p' "$WORK/addr")
case "$addr" in
"$(host_addr h0)":*) say "domain 0 on h0 published $addr" ;;
*) show ex; die "domain 0 published '$addr', expected $(host_addr h0):PORT" ;;
esac

# Cleanup leaves nothing: run it now (it is idempotent) and look.
tag=$HOSTS_TAG
hosts_cleanup
left=$(ip netns list | grep "^$tag" ; grep "$WORK/hosts/uts" /proc/mounts)
[ -z "$left" ] || die "left behind: $left"
say "PASS"
