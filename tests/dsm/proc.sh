#!/bin/sh
# libcordsm across real domains (dsm_proc under cor-run): the mixed workload on 2 and 4
# domains x 8 tasks over udp and gm (exact counters, FIFO complete and ordered per task, no
# torn block), cached objects under sections mixed with remote operations (2 and 4 domains,
# with a cache budget of 0, and blocks of 32 KiB whose grants come straight into the copies),
# both on 2 domains over udp under the fault injector (5% drop), and on 3 (writes in three
# hops: an upgrade's readers acknowledge to the writer), FIFO lock
# fairness on 4 domains x 2 tasks, kept locks (2 and 3 domains over udp, gm messages, 5% drop), barriers (all domains, and a logical domain's subset), a
# destroyed object's index reused by a new object (3 domains over gm with same-host objects, 2
# over udp), and the mixed workload over both routes at once (4 domains, the odd ones sending
# over udp).
# Over udp every request is a message (COR_DSM_SHM=0); over gm home-only objects are operated
# on in the memory their home shares (the default); in the run over both routes the odd
# domains send requests while the even ones use that memory, on objects homed at both kinds.
# COR_TEST_SCALE=small: fewer tasks and operations (sanitizer builds).
. "$(dirname "$0")/../proc/common.sh"
P=$B/tests/dsm/dsm_proc
[ -x "$P" ] || die "dsm_proc not built"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
# Fairness: the issue's bound, 1.1, holds over 10^4 acquisitions (cor-bench dsm measures it).
# The sanitizer builds' 1000 give each task ~125, where one re-request that lands late (threads
# 10x slower under TSan) moves a task's count by a turn or more: 143/127 = 1.13 was seen.
if [ $SMALL = 1 ]; then
    T=4 I2=40 I4=10 FAIR=1000 FAIR_MAX=1.25 EPS=100 LIMIT=300 C2=60 C4=15
else
    T=8 I2=200 I4=40 FAIR=4000 FAIR_MAX=1.1 EPS=300 LIMIT=120 C2=300 C4=60
fi

# run TAG N MODE ROUTE [dsm_proc options...]: every domain must print PASS, cor-run exit 0.
run() {
    tag=$1 n=$2 mode=$3 route=$4
    shift 4
    run_bg $tag timeout $LIMIT "$CORRUN" -n $n --route $route "$P" $mode "$WORK" "$@"
    wait_bg $tag
    [ $RC = 0 ] || { show $tag; die "$tag: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    npass=$(grep -c "^domain [0-9]*: PASS" "$WORK/$tag.out")
    [ "$npass" = $n ] || { show $tag; die "$tag: $npass of $n domains passed"; }
    sed 's/^/  /' "$WORK/$tag.out"
}

for route in udp gm; do
    if [ $route = udp ]; then COR_DSM_SHM=0; else COR_DSM_SHM=1; fi
    export COR_DSM_SHM
    say "$route (COR_DSM_SHM=$COR_DSM_SHM): counters, 2 domains (where each add ran)"
    run counts$route 2 counts $route
    say "$route (COR_DSM_SHM=$COR_DSM_SHM): mix, 2 domains x $T tasks x $I2 rounds"
    run mix2$route 2 mix $route -t $T -i $I2
    say "$route (COR_DSM_SHM=$COR_DSM_SHM): mix, 4 domains x $T tasks x $I4 rounds"
    run mix4$route 4 mix $route -t $T -i $I4
    say "$route: cached objects, 2 domains x $T tasks x $C2 rounds (sections + operations)"
    run cache2$route 2 cache $route -t $T -i $C2
    say "$route: cached objects, 4 domains x $T tasks x $C4 rounds"
    run cache4$route 4 cache $route -t $T -i $C4
    # over gm the lock is a ticket lock in shared memory; fairness counts the acquisitions
    # made once every task took the lock once (cor/dsm/README.md, "Same-host objects, barriers and locks")
    say "$route: lock fairness, 4 domains x 2 tasks, $FAIR acquisitions (max/min <= $FAIR_MAX)"
    run fair$route 4 lockfair $route -t 2 -i $FAIR -f $FAIR_MAX
    say "$route: barriers, 4 domains x 4 tasks, $EPS episodes; then the even domains"
    run bar$route 4 barrier $route -t 4 -i $EPS
    say "$route: barriers, 3 domains x 2 tasks (not a power of 2)"
    run bar3$route 3 barrier $route -t 2 -i $EPS
done
say "gm (COR_DSM_SHM=1): a destroyed object's index reused, 3 domains (cached, home-only)"
COR_DSM_SHM=1 run reuse3 3 reuse gm
COR_DSM_SHM=0
say "udp: kept locks (retakes without a message, recalls while held, domains in turn), 2 and 3 domains"
run keep2 2 lockkeep udp -i $EPS
run keep3 3 lockkeep udp -i $EPS
say "gm messages (COR_DSM_SHM=0): kept locks, 2 domains"
run keepgm 2 lockkeep gm -i $EPS
say "udp with 5% of the datagrams dropped: kept locks, 2 domains"
COR_UDP_FAULTS="drop=0.05,seed=14" run keeplossy 2 lockkeep udp -i $((EPS / 3))
say "udp: a destroyed object's index reused, 2 domains"
run reuse2 2 reuse udp
say "gm: cached objects with a cache budget of 0 (every idle copy evicted), 2 domains"
run cache0 2 cache gm -t $T -i $C2 -b 0
# blocks of 32 KiB: the home sends a grant's data alone, straight into the posted copy
# (dsm_proc fails a run whose count of such grants does not match its block size)
say "gm: cached blocks of 32 KiB (grants straight into the copies), 2 and 4 domains"
run cachebig2 2 cache gm -t $T -i $C2 -B 4096
run cachebig4 4 cache gm -t $T -i $C4 -B 4096
say "udp with 5% of the datagrams dropped: mix, 2 domains x $T tasks"
COR_UDP_FAULTS="drop=0.05,seed=11" COR_UDP_STATS=1 run lossy 2 mix udp -t $T -i $((I2 / 4))
grep -q "retransmits [1-9]" "$WORK/lossy.err" || { show lossy; die "no retransmission counted: were the faults injected?"; }
grep "retransmits" "$WORK/lossy.err" | head -2 | sed 's/^/  /'
say "udp with 5% of the datagrams dropped: cached objects, 2 domains x $T tasks"
COR_UDP_FAULTS="drop=0.05,seed=12" COR_UDP_STATS=1 run lossyc 2 cache udp -t $T -i $((C2 / 3))
grep -q "retransmits [1-9]" "$WORK/lossyc.err" || { show lossyc; die "no retransmission counted: were the faults injected?"; }
say "udp with 5% of the datagrams dropped: cached blocks of 32 KiB, 2 domains x $T tasks"
COR_UDP_FAULTS="drop=0.05,seed=13" COR_UDP_STATS=1 run lossycb 2 cache udp -t $T -i $((C2 / 3)) -B 4096
say "udp with 5% of the datagrams dropped: cached objects, 3 domains x $T tasks (writes in three hops)"
COR_UDP_FAULTS="drop=0.05,seed=14" COR_UDP_STATS=1 run lossyc3 3 cache udp -t $T -i $((C4 / 2))
grep -q "writes in three hops [1-9]" "$WORK/lossyc3.out" || { show lossyc3; die "no write in three hops"; }
say "both routes at once: mix, 4 domains x $T tasks, the odd domains sending over udp, the even over gm"
cat >"$WORK/by-rank.sh" <<EOF
#!/bin/sh
if [ \$((COR_RANK % 2)) = 1 ]; then COR_ROUTE=udp COR_DSM_SHM=0; else COR_DSM_SHM=1; fi
export COR_ROUTE COR_DSM_SHM
exec "$P" "\$@"
EOF
chmod +x "$WORK/by-rank.sh"
saved=$P
P=$WORK/by-rank.sh
COR_ROUTES=udp,gm COR_UDP_STATS=1 run mixed 4 mix gm -t $T -i $I4
P=$saved
grep -q "cor udp: port 1.0" "$WORK/mixed.err" || { show mixed; die "mixed: domain 1 did not use the udp route"; }
say "PASS"
