#!/bin/sh
# kill -9 of a DSM home (3 domains, over udp and over gm on tcp): the victim homes an object
# and a lock, and holds that lock and one homed at domain 0; it also dies inside a write
# section on a cached object homed at domain 0 (its dirty copy is lost: survivors' sections
# fail with COR_EPEERDEAD), inside a read section on another (a survivor's write waiting for
# it is granted) and inside a write section on a cached object it homes (reads fail). The survivors' fetch-adds on the
# victim's object, their wait for its lock and their all-domain barrier must end with
# COR_EPEERDEAD, the lock homed at domain 0 must pass to exactly one survivor with
# COR_DSM_EOWNERDEAD (and, over messages, so must a lock homed there that the victim took and
# released: its domain kept it), new operations toward the victim fail at once, the survivors still work
# together and exit by themselves (status 42) within the time limit.
. "$(dirname "$0")/../proc/common.sh"
P=$B/tests/dsm/dsm_proc
[ -x "$P" ] || die "dsm_proc not built"
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
if [ $SMALL = 1 ]; then LIMIT=25; else LIMIT=15; fi

kill_run() { # TAG ROUTE [env assignments...]; KILL_ARGS: more dsm_proc options
    tag=$1 route=$2
    shift 2
    rm -f "$WORK"/pid.* "$WORK"/ready.*
    run_bg $tag env "$@" timeout -k 10 120 "$CORRUN" -n 3 --route $route --grace $LIMIT "$P" kill "$WORK" -t 7 ${KILL_ARGS:-}
    for r in 0 1 2; do
        wait_file "$WORK/ready.$r" 60 || { show $tag; die "$tag: domain $r never got ready"; }
    done
    sleep 0.5 # the survivors' tasks are now blocked in their calls
    vpid=$(cat "$WORK/pid.2")
    kill -KILL "$vpid"
    start=$(date +%s.%N)
    wait_bg $tag
    el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
    show $tag
    [ $RC != 0 ] || die "$tag: cor-run exited 0 after a domain was killed"
    grep -q "domain 2 (pid $vpid) killed by signal 9" "$WORK/$tag.err" || die "$tag: cor-run did not name the victim"
    for r in 0 1; do
        grep -q "^domain $r: PASS kill" "$WORK/$tag.out" || die "$tag: survivor $r did not pass"
        grep -q "domain $r (pid [0-9]*) exited with status 42" "$WORK/$tag.err" ||
            die "$tag: survivor $r did not exit by itself with status 42"
        for what in "fetch-add on the dead home's object" "lock homed at the dead domain" \
            "barrier with a dead member" "a new fetch-add on the dead home" \
            "write section on a copy that died dirty" "read section on it afterwards" \
            "read section homed at the dead domain"; do
            grep -q "^domain $r: $what -> peer domain died" "$WORK/$tag.out" ||
                die "$tag: survivor $r: '$what' did not fail with COR_EPEERDEAD"
        done
        grep -q "^domain $r: write section after a reader died -> granted" "$WORK/$tag.out" ||
            die "$tag: survivor $r: a write waiting for a dead reader was not granted"
    done
    n=$(grep -c "lock held by the dead domain -> lock acquired, but its previous holder" "$WORK/$tag.out")
    [ "$n" = 1 ] || die "$tag: $n survivors were told the lock's holder died, expected 1"
    n=$(grep -c "lock kept by the dead domain -> lock acquired, but its previous holder" "$WORK/$tag.out")
    [ "$n" = "$KEPT" ] || die "$tag: $n survivors were told the kept lock's holder died, expected $KEPT"
    awk "BEGIN{exit !($el < $LIMIT)}" || die "$tag: survivors took $el s after the kill (limit $LIMIT s)"
    say "$tag: survivors done $el s after the kill"
}

# Over udp every request and barrier goes as messages, and the cached objects have 32 KiB
# (grants straight into the copies: receives posted for data that never comes are taken back);
# over gm the victim's home-only object and the barrier are in shared memory (COR_DSM_SHM's
# default), and must fail just the same.
say "udp: kill -9 of a home (cached objects of 32 KiB)"
KEPT=1 KILL_ARGS="-B 4096" kill_run udp udp COR_DSM_SHM=0
BASE=$((31000 + ($$ % 400) * 64))
MAP="1 d0 127.0.0.1:$BASE; 2 d1 127.0.0.1:$((BASE + 16)); 3 d2 127.0.0.1:$((BASE + 32))"
SLOWTCP=GM_SEND_TIMEOUT_MS=1000
[ $SMALL = 1 ] && SLOWTCP=GM_SEND_TIMEOUT_MS=10000
say "gm (tcp): kill -9 of a home"
KEPT=0 kill_run gmtcp gm "GM_NODES=$MAP" COR_GM_NODE_ID=rank COR_RMA=0 $SLOWTCP
say "PASS"
