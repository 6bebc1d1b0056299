#!/bin/sh
# CoR's gm route on libfabric's shm provider (GM_COMPAT_TRANSPORT=fabric; the default on one
# host is libgm-compat's own shared-memory rings, which gm-shm.sh and gm-proc.sh use), so both
# transports stay tested: a domain must say its ports opened on libfabric (GM_VERBOSE=1), then
# the conformance suite (route_conf gm), tests/proc's exchange on 2 and 4 domains (RMA
# rendezvous, then 4 hard ports per domain with striped frames), and the DSM's cached objects
# over gm (dsm_proc cache, 2 domains, then 32 KiB blocks whose grants come straight into the
# copies). COR_TEST_SCALE=small (the sanitizer builds): fewer and smaller messages, and neither
# the 4-domain exchange nor the 32 KiB blocks (the normal build runs them on libfabric; the
# sanitizer builds run both on the default transport in gm-proc.sh and dsm/proc.sh).
. "$(dirname "$0")/../proc/common.sh"
need_gm_route
X=$PROC/exchange
DP=$B/tests/dsm/dsm_proc
RC_=$B/tests/conformance/route_conf
[ -x "$X" ] && [ -x "$DP" ] && [ -x "$RC_" ] || die "test programs not built"
if [ $SMALL = 1 ]; then
    MSGS=3000 MAX=262144 LIMIT=300 T=4 C=60
else
    MSGS=20000 MAX=1048576 LIMIT=120 T=8 C=300
fi
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
export GM_COMPAT_TRANSPORT=fabric

# (each case's time: date +%s at its start)
t0=$(date +%s)
took() { echo "  ($(($(date +%s) - t0)) s)"; t0=$(date +%s); }

say "2 domains x 8 tasks, $MSGS messages of 0..$MAX bytes (RMA rendezvous); the ports must say they opened on libfabric"
gm_exchange ex2 2 GM_VERBOSE=1
grep -q "opened port .* over libfabric" "$WORK/ex2.err" ||
    { show ex2; die "GM_COMPAT_TRANSPORT=fabric: no port said it opened on libfabric"; }
took

say "the conformance suite (route_conf gm)"
run_bg conf timeout -k 10 300 "$RC_" gm
wait_bg conf
[ $RC = 0 ] || { show conf; die "route_conf gm on libfabric exited $RC"; }
tail -n 3 "$WORK/conf.out" | sed 's/^/  /'
took

if [ $SMALL = 0 ]; then
    say "4 domains x 8 tasks, $MSGS messages of 0..$MAX bytes (RMA rendezvous)"
    gm_exchange ex4 4
    took
fi
say "2 domains x 8 tasks, 4 hard ports per domain, striped frames (COR_RMA=0)"
NPORTS=4 gm_exchange exp4 2 COR_RMA=0 COR_STRIPE_MIN=65536
took

# dsm TAG N [dsm_proc options...]: every domain must print PASS.
dsm() {
    tag=$1 n=$2
    shift 2
    run_bg $tag env COR_DSM_SHM=1 timeout $LIMIT "$CORRUN" -n $n --route gm "$DP" cache "$WORK" "$@"
    wait_bg $tag
    [ $RC = 0 ] || { show $tag; die "$tag: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    npass=$(grep -c "^domain [0-9]*: PASS" "$WORK/$tag.out")
    [ "$npass" = $n ] || { show $tag; die "$tag: $npass of $n domains passed"; }
    sed 's/^/  /' "$WORK/$tag.out"
}
say "DSM cached objects over gm, 2 domains x $T tasks x $C rounds"
dsm cache2 2 -t $T -i $C
took
if [ $SMALL = 0 ]; then
    say "DSM cached blocks of 32 KiB (grants straight into the copies), 2 domains"
    dsm cachebig2 2 -t $T -i $C -B 4096
    took
fi
