#!/bin/sh
# Two sessions on one host at once (issue 13 item 5), over udp, then over gm (shm) when
# built: sessions A and B run the exchange (every message checked for content and order)
# side by side, while a stranger process (proc/stranger.c) fires at A's domain 0 random and
# replayed traffic: over udp, datagrams with a guessed cookie, with B's cookie and with A's
# own cookie from a non-member address; over gm, messages from a port it opened in A's
# shared-memory namespace. Expected: both sessions pass, A counts the stranger's traffic as
# dropped (frames_dropped) and B, which nobody targets, drops nothing: neither session saw
# the other's traffic.
. "$(dirname "$0")/common.sh"
X=$PROC/exchange
S=$PROC/stranger
[ -x "$X" ] && [ -x "$S" ] || die "exchange or stranger not built"
if [ $SMALL = 1 ]; then MSGS=2000 MAX=262144 JUNK=500 LIMIT=300;
else MSGS=8000 MAX=524288 JUNK=3000 LIMIT=120; fi
# The machine may be shared and loaded: peer death is not what this tests.
export COR_UDP_DEAD_MS=30000
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES

have_route() {
    for d in $(echo "${COR_ROUTE_PATH:-}" | tr : ' ') "$B/cor/routes/$1/.libs"; do
        [ -f "$d/cor_route_$1.so" ] && return 0
    done
    return 1
}
dropped_of() { sed -n 's/^exchange: domain 0: .*frames_dropped=\([0-9]*\).*/\1/p' "$WORK/$1.out"; }

ran=0
for route in udp gm; do
    have_route $route || { say "$route: route not built, not run"; continue; }
    if [ $route = gm ] && ! "$S" gm /dev/null 1 1 1 2>&1 | grep -q "lacks\|No such"; then
        say "gm: stranger built without libgm-compat, not run"; continue
    fi
    say "$route: sessions A and B, 2 domains x 4 tasks, $MSGS messages each; a stranger sends $JUNK to A"
    for s in A B; do
        run_bg $route$s timeout $LIMIT "$CORRUN" -n 2 --route $route "$X" -t 4 -m $MSGS -x $MAX \
            -a "$WORK/$route$s.addr" -H "$WORK/$route.hold"
    done
    for s in A B; do
        wait_file "$WORK/$route$s.addr" 60 || { touch "$WORK/$route.hold"; show $route$s; die "$route$s: no address file"; }
        grep -q "^RC 0" "$WORK/$route$s.addr" || { cat "$WORK/$route$s.addr"; die "$route$s: no address"; }
    done
    ca=$(sed -n 's/^SESSION //p' "$WORK/${route}A.addr")
    cb=$(sed -n 's/^SESSION //p' "$WORK/${route}B.addr")
    [ -n "$ca" ] && [ "$ca" != "$cb" ] || die "$route: sessions A ($ca) and B ($cb) must have distinct cookies"
    # The gm route's shm endpoints and lock files are named after a hash of the cookie:
    # anyone can list those names, and the udp route trusts the cookie.
    if ls /dev/shm "${TMPDIR:-/tmp}" 2>/dev/null | grep -qi -e "$ca" -e "$cb"; then
        ls /dev/shm "${TMPDIR:-/tmp}" | grep -i -e "$ca" -e "$cb"
        die "$route: a file name on this host shows a session cookie"
    fi
    if [ $route = udp ]; then
        timeout -k 10 60 "$S" udp "$WORK/${route}A.addr" "$cb" $JUNK 7 >"$WORK/stranger.out" 2>&1
    else
        timeout -k 10 60 "$S" gm "$WORK/${route}A.addr" 2 $JUNK 7 >"$WORK/stranger.out" 2>&1
    fi
    src=$?
    touch "$WORK/$route.hold"
    [ $src = 0 ] || { cat "$WORK/stranger.out"; die "$route: the stranger failed ($src)"; }
    for s in A B; do
        wait_bg $route$s
        [ $RC = 0 ] || { show $route$s; die "$route$s: cor-run exited $RC (124 = timed out)"; }
        [ "$(grep -c ': PASS ' "$WORK/$route$s.out")" = 2 ] || { show $route$s; die "$route$s: not both domains passed"; }
    done
    sent=$(sed -n 's/^sent //p' "$WORK/stranger.out")
    done_=$(sed -n 's/^completed //p' "$WORK/stranger.out")
    da=$(dropped_of ${route}A) db=$(dropped_of ${route}B)
    say "$route: the stranger sent ${sent:-0}${done_:+ (${done_} delivered into A's buffers)};" \
        "A dropped ${da:-?} frames, B dropped ${db:-?}"
    [ -n "$sent" ] && [ "$sent" -gt 0 ] || die "$route: the stranger sent nothing"
    [ "${db:-x}" = 0 ] || { show ${route}B; die "$route: B dropped ${db:-?} frames: it saw traffic not meant for it"; }
    if [ $route = udp ]; then
        # The kernel may lose a few datagrams when the socket buffer is full: at least 90%.
        [ -n "$da" ] && [ "$da" -ge $((sent * 9 / 10)) ] || { show ${route}A; die "udp: A dropped ${da:-none} of $sent"; }
    else
        # Half the messages go to domain 0 (the other half to domain 1): at least 90% of
        # them must be counted there (completions only show the messages went in).
        [ -n "$da" ] && [ "$da" -ge $((sent / 2 * 9 / 10)) ] || { show ${route}A; die "gm: A's domain 0 dropped ${da:-none}, expected at least $((sent / 2 * 9 / 10))"; }
    fi
    ran=$((ran + 1))
done
[ $ran -gt 0 ] || skip "no route built"
say "PASS"
