#!/bin/sh
# cor-run across hosts on the namespace test bed (tests/hosts/lib.sh: hosts h0 and h1 with
# their own addresses, hostnames and /etc/hosts, joined by a bridge). cor-run runs on h0 and
# starts one domain per host with --hosts h0,h1 --agent "on {host}": h1 is another host, so
# the rendezvous is TCP on h0's address (the secret goes to each domain on its stdin), and the
# routes bind to each domain's address toward cor-run (COR_BIND=auto). Checked: the udp route
# (an exchange of 0 B..1 MiB messages; domain 0 publishes h0's address), the gm route over
# libfabric's tcp provider (COR_GM_PROVIDER=tcp; its node map carries h0's address), libcordsm
# across the hosts over udp (cached objects, locks in the mixed workload, barriers), and kill -9
# of a domain on h1 (survivors get COR_EPEERDEAD and exit 42, cor-run names the victim and
# exits non-zero). Skipped (77) only where namespaces cannot be made.
. "$(dirname "$0")/common.sh"
. "${COR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/hosts/lib.sh"
X=$PROC/exchange
P=$PROC/peerdeath
D=$B/tests/dsm/dsm_proc
for p in "$X" "$P" "$D"; do [ -x "$p" ] || die "$p not built"; done
if [ $SMALL = 1 ]; then MSGS=2000 MAX=262144 LIMIT=300 T=2 I=10; else MSGS=20000 MAX=1048576 LIMIT=120 T=4 I=40; fi
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES COR_BIND
hosts_create 2
H0=$(host_addr h0)
say "hosts h0 ($H0) and h1 ($(host_addr h1)); cor-run on h0"

# corrun TAG ARGS...: cor-run on h0, one domain per host through the agent.
corrun() {
    tag=$1
    shift
    run_bg $tag timeout $LIMIT "$HOSTS_ON" h0 "$CORRUN" -v --hosts h0,h1 --agent "$HOSTS_ON {host}" "$@"
}
check_rendezvous() {
    grep -q "rendezvous on tcp:$H0:[0-9]*\$" "$WORK/$1.err" || \
        { show $1; die "$1: cor-run did not listen on TCP at h0's address $H0"; }
}

for route in udp gm; do
    say "$route: 2 domains x 2 tasks, $MSGS messages of 0..$MAX bytes across the hosts"
    if [ $route = gm ]; then export COR_GM_PROVIDER=tcp; fi
    corrun x$route -n 2 --route $route "$X" -t 2 -m $MSGS -x $MAX -a "$WORK/addr.$route" </dev/null
    wait_bg x$route
    [ $RC = 0 ] || { show x$route; die "$route: cor-run exited $RC"; }
    [ "$(grep -c ': PASS ' "$WORK/x$route.out")" = 2 ] || { show x$route; die "not every domain passed"; }
    check_rendezvous x$route
    addr=$(sed -n 's/^ADDR //p' "$WORK/addr.$route")
    case "$addr" in
    *"$H0"*) say "  domain 0 published $addr (h0's address)" ;;
    *) show x$route; die "$route: domain 0 published '$addr', expected h0's address $H0" ;;
    esac
    grep ': PASS ' "$WORK/x$route.out" | sed 's/^/  /'
    unset COR_GM_PROVIDER
done

# COR_DSM_SHM at its default: the hosts share /dev/shm, but the bootstrap calls the other
# domain remote (its host name differs), so the DSM sends it requests (counts -H 2 checks).
unset COR_DSM_SHM
for mode in counts cache mix barrier; do
    say "libcordsm over udp across the hosts: dsm_proc $mode, 2 domains x $T tasks"
    corrun dsm$mode -n 2 --route udp "$D" $mode "$WORK" -t $T -i $I -H 2 </dev/null
    wait_bg dsm$mode
    [ $RC = 0 ] || { show dsm$mode; die "dsm_proc $mode: cor-run exited $RC"; }
    [ "$(grep -c '^domain [0-9]*: PASS' "$WORK/dsm$mode.out")" = 2 ] || \
        { show dsm$mode; die "dsm_proc $mode: not every domain passed"; }
done

say "kill -9 of domain 2 on h1 while it streams to the others"
run_bg pd timeout $LIMIT "$HOSTS_ON" h0 "$CORRUN" -v -n 3 --grace 15 --hosts h0,h0,h1 \
    --agent "$HOSTS_ON {host}" "$P" "$WORK" -t 2 </dev/null
for r in 0 1 2; do
    wait_file "$WORK/pid.$r" 60 || { show pd; die "domain $r did not start"; }
done
for r in 0 1; do
    wait_file "$WORK/flowing.$r" 60 || { show pd; die "survivor $r got nothing from the victim"; }
done
vpid=$(cat "$WORK/pid.2")
[ "$(ip netns identify "$vpid")" = "$(host_ns h1)" ] || die "domain 2 (pid $vpid) does not run on h1"
kill -KILL "$vpid"
wait_bg pd
[ $RC != 0 ] || { show pd; die "cor-run exited 0 after a domain was killed"; }
grep -q "domain 2 (pid $vpid) killed by signal 9 (SIGKILL)" "$WORK/pd.err" || \
    { show pd; die "cor-run did not name domain 2 (pid $vpid) and SIGKILL"; }
for r in 0 1; do
    grep -q "domain $r: PASS" "$WORK/pd.out" || { show pd; die "survivor $r did not pass"; }
done
say "  cor-run exited $RC: $(grep 'domain 2 (pid [0-9]*) killed' "$WORK/pd.err" | sed 's/^cor-run: //')"
say "PASS"
