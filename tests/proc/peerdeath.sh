#!/bin/sh
# kill -9 of one domain mid-exchange: cor-run exits non-zero within seconds naming it; the
# survivors' pending operations toward it complete with COR_EPEERDEAD (they exit 42).
. "$(dirname "$0")/common.sh"
P=$PROC/peerdeath
[ -x "$P" ] || die "peerdeath not built"
if [ $SMALL = 1 ]; then LIMIT=25; else LIMIT=15; fi

say "3 domains; domain 2 streams to the others and is killed with SIGKILL"
run_bg pd timeout -k 10 120 "$CORRUN" -n 3 --grace $LIMIT "$P" "$WORK" -t 4
for r in 0 1 2; do
    wait_file "$WORK/pid.$r" 60 || { show pd; die "domain $r did not start"; }
done
# Messages from the victim reached every survivor task (slow under sanitizers).
for r in 0 1; do
    wait_file "$WORK/flowing.$r" 60 || { show pd; die "survivor $r got nothing from the victim"; }
done
sleep 0.2
vpid=$(cat "$WORK/pid.2")
kill -KILL "$vpid"
start=$(date +%s.%N)
watch_cpu pd $LIMIT "$(cat "$WORK/pid.0")" "$(cat "$WORK/pid.1")"
wait_bg pd
el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
show pd
[ $RC != 0 ] || die "cor-run exited 0 after a domain was killed"
grep -q "domain 2 (pid $vpid) killed by signal 9 (SIGKILL)" "$WORK/pd.err" || \
    die "cor-run did not name domain 2 (pid $vpid) and SIGKILL"
for r in 0 1; do
    grep -q "domain $r: PASS" "$WORK/pd.out" || die "survivor $r did not pass"
    grep -q "domain $r (pid [0-9]*) exited with status 42" "$WORK/pd.err" || \
        die "survivor $r did not exit by itself with status 42 (hung and was stopped?)"
done
awk "BEGIN{exit !($el < $LIMIT)}" || die "cor-run took $el s after the kill (limit $LIMIT s)"
say "cor-run exited with status $RC, $el s after the kill; $CPU_NOTE"
say "PASS"
