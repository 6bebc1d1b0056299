#!/bin/sh
# cor-run and the bootstrap protocol, with a domain that links only the bootstrap
# (proc/boot_check): address table, barriers, deaths, startup failures, junk on the
# rendezvous socket, --agent, signals, exit statuses.
. "$(dirname "$0")/common.sh"
BC=$PROC/boot_check
[ -x "$BC" ] || die "boot_check not built"

t0() { date +%s.%N; }
elapsed() { echo "$(date +%s.%N) $1" | awk '{printf "%.1f", $1 - $2}'; }

say "--help documents the agent placeholders"
"$CORRUN" --help >"$WORK/help" 2>&1 || die "--help failed"
grep -q '{rank}' "$WORK/help" || die "--help does not mention {rank}"

say "usage errors exit 2"
rc=0; "$CORRUN" ./x >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || die "cor-run without -n exited $rc, expected 2"
rc=0; "$CORRUN" -n 0 true >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || die "cor-run -n 0 exited $rc, expected 2"

say "a program alone is a one-domain session"
(unset COR_BOOT; timeout -k 10 20 "$BC" exchange) || die "boot_check alone failed"

for n in 1 2 4; do
    say "-n $n: address table and 40 barriers from two threads"
    run_bg ex$n timeout -k 10 60 "$CORRUN" -n $n "$BC" exchange
    wait_bg ex$n
    [ $RC = 0 ] || { show ex$n; die "-n $n exited $RC, expected 0"; }
done

say "exit status is the worst of the domains"
rc=0; timeout -k 10 20 "$CORRUN" -n 3 sh -c 'exit $((COR_RANK + 3))' 2>"$WORK/st.err" || rc=$?
[ $rc = 5 ] || { cat "$WORK/st.err"; die "exited $rc, expected 5"; }

say "a program that cannot be started is named, status 127"
rc=0; timeout -k 10 20 "$CORRUN" -n 2 "$WORK/no-such-program" 2>"$WORK/ns.err" || rc=$?
[ $rc = 127 ] || die "exited $rc, expected 127"
grep -q "cannot start domain 0: .*no-such-program" "$WORK/ns.err" || \
    { cat "$WORK/ns.err"; die "no clear message"; }

say "a program whose exec fails after it was found is named too, status 127"
printf '#!/nonexistent/interpreter\n' >"$WORK/badinterp"
chmod +x "$WORK/badinterp"
rc=0; timeout -k 10 20 "$CORRUN" -n 2 "$WORK/badinterp" 2>"$WORK/bi.err" || rc=$?
[ $rc = 127 ] || { cat "$WORK/bi.err"; die "exited $rc, expected 127"; }
grep -q "cannot start domain [01]: .*badinterp: No such file" "$WORK/bi.err" || \
    { cat "$WORK/bi.err"; die "no clear message for a failed exec"; }
! grep -q "got TERM" "$WORK/bi.err" || \
    { cat "$WORK/bi.err"; die "the stop of the other domains was taken for a signal to cor-run"; }

say "kill -9 of a domain: named, survivors told (COR_EPEERDEAD), status non-zero"
start=$(t0)
run_bg die timeout -k 10 30 "$CORRUN" -n 3 --grace 5 "$BC" die 1
wait_bg die
el=$(elapsed "$start")
[ $RC != 0 ] || { show die; die "exited 0 after a domain died"; }
grep -q "domain 1 (pid [0-9]*) killed by signal 9 (SIGKILL)" "$WORK/die.err" || \
    { show die; die "the death of domain 1 is not named"; }
n42=$(grep -c "exited with status 42" "$WORK/die.err")
[ "$n42" = 2 ] || { show die; die "$n42 survivors saw the death, expected 2"; }
awk "BEGIN{exit !($el < 4)}" || die "took $el s, expected the survivors to leave at once"
say "  ok: status $RC in $el s"

say "a domain that never joins: named after --start-timeout, others fail the exchange"
start=$(t0)
# 6 s: a sanitized domain that does join can take 2 s to start on a loaded machine.
run_bg nojoin timeout -k 10 30 "$CORRUN" -n 3 --start-timeout 6 "$BC" nojoin 2
wait_bg nojoin
el=$(elapsed "$start")
[ $RC != 0 ] || { show nojoin; die "exited 0"; }
grep -q "domain 2 (pid [0-9]*) did not join the session within 6 s" "$WORK/nojoin.err" || \
    { show nojoin; die "no clear message"; }
[ "$(grep -c 'exited with status 43' "$WORK/nojoin.err")" = 2 ] || \
    { show nojoin; die "the others did not fail their exchange with COR_EPEERDEAD"; }
say "  ok: status $RC in $el s"

say "junk on the rendezvous socket is refused, the session goes on"
run_bg junk timeout -k 10 30 "$CORRUN" -n 2 "$BC" garbage
wait_bg junk
[ $RC = 0 ] || { show junk; die "exited $RC"; }
grep -q "wrong session cookie" "$WORK/junk.err" || { show junk; die "wrong cookie not reported"; }

say "--agent with {rank}"
run_bg agent timeout -k 10 30 "$CORRUN" -n 3 --agent 'env AGENT_RANK={rank}' "$BC" agent
wait_bg agent
[ $RC = 0 ] || { show agent; die "exited $RC"; }
rc=0; "$CORRUN" -n 1 --agent 'env X={nope}' true 2>"$WORK/ag.err" || rc=$?
[ $rc != 0 ] && grep -q "unknown placeholder" "$WORK/ag.err" || die "bad placeholder accepted"

say "SIGTERM to cor-run reaches the domains; nothing is left running"
mark="$WORK/sleeper"
ln -s "$(command -v sleep)" "$mark"
run_bg sig "$CORRUN" -n 2 "$mark" 300
sleep 0.5
kill -TERM "$(cat "$WORK/sig.corrun.pid")"
start=$(t0)
wait_bg sig
el=$(elapsed "$start")
[ $RC = 143 ] || { show sig; die "exited $RC after SIGTERM, expected 143"; }
sleep 0.2
pgrep -f "$mark" >/dev/null && die "domains survived cor-run"
say "  ok: status $RC in $el s"

say "kill -9 of cor-run itself takes the domains with it"
run_bg k9 env TMPDIR="$WORK" "$CORRUN" -n 2 "$mark" 301 # killed before any join: its dir stays
sleep 0.5
kill -KILL "$(cat "$WORK/k9.corrun.pid")"
wait_bg k9
sleep 0.3
pgrep -f "$mark 301" >/dev/null && die "domains survived kill -9 of cor-run"

# Nothing left behind: cor-run's rendezvous directory goes on every exit it can catch, and
# as soon as every domain joined (so even kill -9 of cor-run leaves nothing after that).
rdv=$WORK/rdv
mkdir -p "$rdv"
no_rendezvous() { [ -z "$(ls -A "$rdv")" ] || { ls -la "$rdv" >&2; die "$1: $(ls "$rdv") left in TMPDIR"; }; }
for sn in QUIT:3 USR1:10 ALRM:14; do
    sig=${sn%:*}
    say "SIG$sig to cor-run is passed on; its rendezvous goes"
    run_bg "s$sig" env TMPDIR="$rdv" "$CORRUN" -n 2 "$mark" 302
    sleep 0.5
    [ -n "$(ls -A "$rdv")" ] || die "no rendezvous in TMPDIR while domains start"
    kill -"$sig" "$(cat "$WORK/s$sig.corrun.pid")"
    wait_bg "s$sig"
    want=$((128 + ${sn#*:}))
    [ $RC = "$want" ] || { show "s$sig"; die "exited $RC after SIG$sig, expected $want"; }
    no_rendezvous "SIG$sig"
done
sleep 0.2
pgrep -f "$mark 302" >/dev/null && die "domains survived cor-run"

say "cor-run crashing (SIGSEGV) removes its rendezvous first"
run_bg segv env TMPDIR="$rdv" "$CORRUN" -n 2 "$mark" 303
sleep 0.5
kill -SEGV "$(cat "$WORK/segv.corrun.pid")"
wait_bg segv
[ $RC = 139 ] || { show segv; die "exited $RC after SIGSEGV, expected 139"; }
no_rendezvous "SIGSEGV"

say "once every domain joined, kill -9 of cor-run leaves nothing"
run_bg hold env TMPDIR="$rdv" "$CORRUN" -n 3 "$BC" hold
i=0
while [ "$(grep -c joined "$WORK/hold.out" 2>/dev/null)" != 3 ]; do
    i=$((i + 1))
    [ $i -gt 300 ] && { show hold; die "the domains did not join"; }
    sleep 0.1
done
sleep 0.2
no_rendezvous "all joined"
kill -KILL "$(cat "$WORK/hold.corrun.pid")"
wait_bg hold
no_rendezvous "kill -9"
say "  ok"

say "PASS"
