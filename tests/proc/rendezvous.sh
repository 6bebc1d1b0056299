#!/bin/sh
# cor-run's TCP rendezvous (--listen) with strangers knocking: a real 3-domain session
# (boot_check wait, started through an agent, so the secret travels on stdin) runs while
# knock.py connects and closes, sends garbage, an old session's HELLO without a proof, a proof
# made with another session's secret, a proof replayed from another connection's challenge,
# and a proof one byte a second. Each is refused and closed (the slow one within cor-run's 5 s
# bound) having been sent nothing but CHALLENGE/ERR; the session completes (exit 0) and
# cor-run reports the refusals by reason. Also: a crowd of 60 silent connections held open
# does not keep the domains out (room for 256 unproven connections beside the domains'); domain 0 reads cor-run's
# stdin after the secret (the others see its end); a domain given the wrong secret is refused and says so; the
# secret shows in no process's command line.
. "$(dirname "$0")/common.sh"
BC=$PROC/boot_check
[ -x "$BC" ] || die "boot_check not built"
command -v python3 >/dev/null || skip "python3 is missing"

# The agent keeps a copy of the secret line that cor-run writes on the domain's stdin, as a
# stranger who captured a real exchange would know a valid proof; then passes stdin on.
cat >"$WORK/agent.sh" <<'AGENT'
#!/bin/sh
IFS= read -r secret
[ -s "$CAPTURE" ] || printf '%s\n' "$secret" >"$CAPTURE"
{ printf '%s\n' "$secret"; exec cat; } | exec "$@"
AGENT
export CAPTURE="$WORK/secret"

say "a session on a TCP rendezvous, strangers knocking"
run_bg s timeout -k 10 90 "$CORRUN" -v -n 3 --listen 127.0.0.1 --agent "sh $WORK/agent.sh" \
    "$BC" wait "$WORK/go" </dev/null
wait_file "$WORK/secret" 30 || { show s; die "no domain started"; }
i=0
until [ "$(grep -c '^exchanged' "$WORK/s.out")" = 3 ]; do
    i=$((i + 1)); [ $i -gt 300 ] && { show s; die "the domains did not exchange within 30 s"; }
    sleep 0.1
done
addr=$(sed -n 's/.*rendezvous on tcp:\(.*\)$/\1/p' "$WORK/s.err")
[ -n "$addr" ] || { show s; die "cor-run -v did not say where it listens"; }
say "  rendezvous at $addr; domains exchanged"
if ps -eo args | grep -v grep | grep -q "$(cat "$WORK/secret")"; then
    die "the session secret shows on a command line"
fi
old=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
timeout -k 10 60 python3 "$(dirname "$0")/knock.py" "${addr%:*}" "${addr##*:}" "$WORK/secret" $old \
    >"$WORK/knock.out" 2>&1
krc=$?
sed 's/^/  /' "$WORK/knock.out"
[ $krc = 0 ] || { show s; die "a stranger was not refused as expected"; }
touch "$WORK/go"
wait_bg s
[ $RC = 0 ] || { show s; die "the session exited $RC with strangers around, expected 0"; }
line=$(grep "refused .* connection(s) to the rendezvous" "$WORK/s.err") || \
    { show s; die "cor-run did not report the refused connections"; }
say "  cor-run: ${line#cor-run: }"
for want in "4 sent garbage or closed before proving" "2 gave a wrong proof" \
    "1 were too slow"; do
    case $line in *"$want"*) ;; *) die "expected '$want' in the report";; esac
done

say "domain 0 reads cor-run's stdin after the secret; the others see its end"
printf 'line for domain 0\n' | timeout -k 10 60 "$CORRUN" -n 2 --listen 127.0.0.1 --agent env \
    "$BC" stdin >"$WORK/in.out" 2>"$WORK/in.err" || { cat "$WORK/in.out" "$WORK/in.err"; die "exited $?"; }
grep -q "^stdin 0: line for domain 0\$" "$WORK/in.out" && grep -q "^stdin 1: EOF\$" "$WORK/in.out" || \
    { cat "$WORK/in.out" "$WORK/in.err"; die "stdin was not passed on as expected"; }

say "a crowd of 60 silent connections does not keep the domains out"
cat >"$WORK/late.sh" <<AGENT
#!/bin/sh
i=0
while [ ! -e "$WORK/crowded" ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
exec "\$@"
AGENT
run_bg crowd timeout -k 10 60 "$CORRUN" -v -n 2 --listen 127.0.0.1 --agent "sh $WORK/late.sh" \
    "$BC" exchange </dev/null
i=0
until addr=$(sed -n 's/.*rendezvous on tcp:\(.*\)$/\1/p' "$WORK/crowd.err" 2>/dev/null) && [ -n "$addr" ]; do
    i=$((i + 1)); [ $i -gt 300 ] && { show crowd; die "cor-run did not listen within 30 s"; }
    sleep 0.1
done
timeout -k 10 60 python3 "$(dirname "$0")/crowd.py" "${addr%:*}" "${addr##*:}" 60 "$WORK/crowded" \
    "$WORK/crowd.stop" 40 >"$WORK/crowd.py.out" 2>&1 &
cpid=$!
wait_bg crowd
touch "$WORK/crowd.stop"
wait $cpid
sed 's/^/  /' "$WORK/crowd.py.out"
[ $RC = 0 ] || { show crowd; die "the session exited $RC with a crowd at the door, expected 0"; }
n=$(sed -n 's/.*refused \([0-9]*\) connection(s) to the rendezvous.*/\1/p' "$WORK/crowd.err")
[ "${n:-0}" -ge 60 ] || { show crowd; die "cor-run counted ${n:-no} refused connections, expected 60 or more"; }
say "  $(grep 'refused .* connection' "$WORK/crowd.err" | sed 's/^cor-run: //')"

say "a domain with the wrong secret is refused and says why"
printf '%s\n' "$old" >"$WORK/wrong"
cat >"$WORK/badagent.sh" <<AGENT
#!/bin/sh
IFS= read -r secret
exec "\$@" <"$WORK/wrong"
AGENT
rc=0
timeout -k 10 60 "$CORRUN" -n 1 --listen 127.0.0.1 --start-timeout 5 --agent "sh $WORK/badagent.sh" \
    "$BC" exchange </dev/null >"$WORK/bad.out" 2>"$WORK/bad.err" || rc=$?
[ $rc != 0 ] || { cat "$WORK/bad.err"; die "a domain with the wrong secret ran"; }
grep -q "wrong proof of the session secret" "$WORK/bad.err" || \
    { cat "$WORK/bad.err"; die "the domain did not say it was refused"; }
grep -q "refused 1 connection(s) to the rendezvous: 1 gave a wrong proof" "$WORK/bad.err" || \
    { cat "$WORK/bad.err"; die "cor-run did not count the refusal"; }
say "PASS"
