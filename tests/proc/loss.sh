#!/bin/sh
# The udp route under injected faults (5% drop, 1% duplication, 2% reordering with 200 us
# delay): the same exchange as exchange.sh completes, everything delivered once, in order.
# The route's counters (COR_UDP_STATS) must show retransmissions, so the faults really bit.
. "$(dirname "$0")/common.sh"
X=$PROC/exchange
[ -x "$X" ] || die "exchange not built"
if [ $SMALL = 1 ]; then MSGS=10000 MAX=1048576 LIMIT=600; else MSGS=100000 MAX=4194304 LIMIT=200; fi
export COR_UDP_FAULTS="drop=0.05,dup=0.01,reorder=0.02,delay_us=200,seed=42"
export COR_UDP_STATS=1

for n in 2 4; do
    say "$n domains x 8 tasks, $MSGS messages of 0..$MAX bytes, COR_UDP_FAULTS=$COR_UDP_FAULTS"
    run_bg l$n timeout $LIMIT "$CORRUN" -n $n "$X" -t 8 -m $MSGS -x $MAX
    wait_bg l$n
    [ $RC = 0 ] || { show l$n; die "$n domains: cor-run exited $RC (124 = timed out after $LIMIT s)"; }
    npass=$(grep -c ": PASS " "$WORK/l$n.out")
    [ "$npass" = $n ] || { show l$n; die "$npass of $n domains passed"; }
    grep -q "retransmits [1-9]" "$WORK/l$n.err" || \
        { show l$n; die "no retransmission counted: were the faults injected?"; }
    sed 's/^/  /' "$WORK/l$n.out"
    grep "retransmits" "$WORK/l$n.err" | head -4 | sed 's/^/  /'
done
say "PASS"
