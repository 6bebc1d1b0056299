#!/bin/sh
# The gm route under cor-run: tests/proc's exchange (2 and 4 domains x 8 tasks, mixed sizes,
# order and checksums) on libgm-compat's shm provider and on tcp (a node map on 127.0.0.1,
# one node per domain), then peerdeath (kill -9 of a domain) on tcp and shm.
# COR_TEST_SCALE=small: fewer and smaller messages.
. "$(dirname "$0")/../proc/common.sh"
X=$PROC/exchange
P=$PROC/peerdeath
[ -x "$X" ] && [ -x "$P" ] || die "tests/proc programs not built"
if [ $SMALL = 1 ]; then MSGS=3000 MAX=262144 LIMIT=300; else MSGS=20000 MAX=1048576 LIMIT=120; fi
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
# cor-run sets COR_ROUTE from --route (default udp)

# RMA rendezvous (the default: puts straight into the receiver's buffer) on 2 and 4 domains,
# and once with frames only (COR_RMA=0).
for n in 2 4; do
    say "shm: $n domains x 8 tasks, $MSGS messages of 0..$MAX bytes over gm (RMA rendezvous)"
    gm_exchange shm$n $n
done
say "shm: 4 domains x 8 tasks over gm, rendezvous data as frames (COR_RMA=0)"
gm_exchange shmframes4 4 COR_RMA=0

# Several ports: 4 GM ports (hard ports) per domain, soft-ports mapped over them; with
# COR_RMA=0 the core also stripes large rendezvous messages over the 4 ports.
NPORTS=4
say "shm: 2 domains x 8 tasks over gm, 4 hard ports per domain (RMA)"
gm_exchange shm2p4 2
say "shm: 2 domains x 8 tasks over gm, 4 hard ports per domain, striped frames (COR_RMA=0)"
gm_exchange shm2p4s 2 COR_RMA=0 COR_STRIPE_MIN=65536
NPORTS=1

BASE=$((30000 + ($$ % 500) * 64))
MAP="1 d0 127.0.0.1:$BASE; 2 d1 127.0.0.1:$((BASE + 16)); 3 d2 127.0.0.1:$((BASE + 32)); 4 d3 127.0.0.1:$((BASE + 48))"
# tcp: rendezvous data as frames (COR_RMA=0) by default: with puts over tcp;ofi_rxm
# libgm-compat now and then reports a live port closed (FI_ENOTCONN, see /tmp/gm-bugs.md and
# cor/routes/gm/README.md). COR_GM_TEST_TCP_RMA=1 runs them with RMA rendezvous instead.
# (route_conf's RMA case covers gm_put over tcp in one process: gm-tcp.sh.)
# Sanitizer builds (COR_TEST_SCALE=small) set up TCP connections slowly: libgm-compat calls
# a port it never reached closed after GM_SEND_TIMEOUT_MS (1 s), so give them 10 s.
SLOWTCP=GM_SEND_TIMEOUT_MS=1000
[ $SMALL = 1 ] && SLOWTCP=GM_SEND_TIMEOUT_MS=10000
TCPRMA=COR_RMA=0
[ "${COR_GM_TEST_TCP_RMA:-0}" = 1 ] && TCPRMA=COR_RMA=1
for n in 2 4; do
    say "tcp: $n domains x 8 tasks over gm ($TCPRMA), node map on 127.0.0.1 (TCP ports $BASE..$((BASE + 63)))"
    gm_exchange tcp$n $n "GM_NODES=$MAP" COR_GM_NODE_ID=rank $TCPRMA $SLOWTCP
done

# kill -9 of a domain: cor-run tells the survivors, the core calls the route's peer_dead, and
# frames held for the victim finish with COR_EPEERDEAD, on tcp and on shm (where libgm-compat
# frees sends stuck on a lock the victim died holding, its own or a survivor's:
# libgm-compat/src/unstick.c). A survivor still waiting 1 s after the kill must not use more
# than a quarter of a core. Once cor-run ended, none of the files in /dev/shm the victim had
# open (its lock files and 16 MiB shm region, those of its peers) may be left.
run_peerdeath() { # TAG [env assignments...]
    tag=$1
    shift
    rm -f "$WORK"/pid.* "$WORK"/flowing.*
    run_bg $tag env "$@" timeout -k 10 120 "$CORRUN" -n 3 --route gm --grace 25 "$P" "$WORK" -t 4
    for r in 0 1 2; do
        wait_file "$WORK/pid.$r" 60 || { show $tag; die "$tag: domain $r did not start"; }
    done
    # Messages from the victim reached every survivor task (slow under sanitizers, on tcp).
    for r in 0 1; do
        wait_file "$WORK/flowing.$r" 60 || { show $tag; die "$tag: survivor $r got nothing from the victim"; }
    done
    sleep 0.2
    vpid=$(cat "$WORK/pid.2")
    # The victim's files in /dev/shm (its lock files, its shm region, the peers' regions it
    # mapped): none may outlive the session.
    shmfiles=$({ grep -o ' /dev/shm/[^ ]*$' "/proc/$vpid/maps"; ls -l "/proc/$vpid/fd" |
        grep -o '/dev/shm/[^ ]*$'; } 2>/dev/null | sed 's/^ //' | sort -u)
    [ -n "$shmfiles" ] || { show $tag; die "$tag: the victim has no file in /dev/shm open"; }
    kill -KILL "$vpid"
    start=$(date +%s.%N)
    watch_cpu $tag 30 "$(cat "$WORK/pid.0")" "$(cat "$WORK/pid.1")"
    wait_bg $tag
    el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
    [ $RC != 0 ] || { show $tag; die "$tag: cor-run exited 0 after a domain was killed"; }
    for r in 0 1; do
        grep -q "domain $r: PASS" "$WORK/$tag.out" || { show $tag; die "$tag: survivor $r did not pass"; }
        grep -q "domain $r (pid [0-9]*) exited with status 42" "$WORK/$tag.err" ||
            { show $tag; die "$tag: survivor $r did not exit by itself with status 42"; }
    done
    left=
    for f in $shmfiles; do [ -e "$f" ] && left="$left $f"; done
    [ -z "$left" ] || die "$tag: left in /dev/shm after the session:$left"
    say "$tag: survivors passed, cor-run exited $RC, $el s after the kill; $CPU_NOTE;" \
        "none of the victim's $(echo "$shmfiles" | wc -l) files in /dev/shm is left"
}
MAP3="1 d0 127.0.0.1:$BASE; 2 d1 127.0.0.1:$((BASE + 16)); 3 d2 127.0.0.1:$((BASE + 32))"
say "tcp: peerdeath over gm, domain 2 of 3 killed with SIGKILL"
run_peerdeath pdtcp "GM_NODES=$MAP3" COR_GM_NODE_ID=rank
say "shm: peerdeath over gm, domain 2 of 3 killed with SIGKILL"
run_peerdeath pdshm GM_VERBOSE=1
# A stuck provider call the watchdog freed (libgm-compat/src/unstick.c) says so: show it.
grep "libgm: port .* stuck" "$WORK/pdshm.err" | sed 's/^/  /' || true
say "PASS"
