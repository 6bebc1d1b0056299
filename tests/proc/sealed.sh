#!/bin/sh
# Lines on a proven TCP rendezvous connection are sealed (cor/core/boot_auth.h): a stranger
# who sits in the middle of the connection (hijack.py, which relays the challenge and the
# proof untouched, so both ends prove themselves) then injects, into both directions of each
# domain's connection, a plain DEAD/LOST line, the same with a made-up seal, and a copy of a
# line it relayed. A 2-domain session (boot_check exchange, through an agent that points the
# domains at the stranger) must complete (exit 0) with every injected line dropped and
# counted: cor-run reports 4 forged and 2 replayed lines, each domain 2 forged and 1
# replayed. Before lines were sealed, the injected DEAD failed the session. Then a stranger
# changes one address inside the address table (one sealed block): the session must fail.
. "$(dirname "$0")/common.sh"
BC=$PROC/boot_check
[ -x "$BC" ] || die "boot_check not built"
command -v python3 >/dev/null || skip "python3 is missing"

timeout -k 10 120 python3 "$(dirname "$0")/hijack.py" "$WORK/port" "$WORK/target" \
    >"$WORK/hijack.out" 2>&1 &
hpid=$!
add_cleanup "kill $hpid 2>/dev/null"
wait_file "$WORK/port" 30 || { cat "$WORK/hijack.out"; die "the stranger did not listen"; }
port=$(cat "$WORK/port")

# The agent sends the domain to the stranger instead of cor-run's rendezvous.
cat >"$WORK/agent.sh" <<AGENT
#!/bin/sh
n=\$#
for a; do
    case \$a in
    COR_BOOT=tcp:*) printf '%s\n' "\${a#COR_BOOT=tcp:}" >"$WORK/target.\$\$"
        mv -f "$WORK/target.\$\$" "$WORK/target" ;; # whole: the stranger may read it now
    esac
    case \$a in
    COR_BOOT=tcp:*)
        a=COR_BOOT=tcp:127.0.0.1:$port ;;
    esac
    set -- "\$@" "\$a"
done
shift \$n
exec "\$@"
AGENT

say "a 2-domain session on TCP with a stranger in the middle of each connection"
rc=0
timeout -k 10 60 "$CORRUN" -n 2 --listen 127.0.0.1 --agent "sh $WORK/agent.sh" "$BC" exchange \
    </dev/null >"$WORK/s.out" 2>"$WORK/s.err" || rc=$?
sed 's/^/  stranger: /' "$WORK/hijack.out"
[ "$(grep -o injected "$WORK/hijack.out" | wc -l)" = 4 ] || { show s; die "the stranger did not inject into both directions of 2 connections"; }
[ $rc = 0 ] || { show s; die "the session exited $rc with injected lines, expected 0"; }
grep -q "dropped 4 forged and 2 replayed line(s) on proven connections" "$WORK/s.err" ||
    { show s; die "cor-run did not count 4 forged and 2 replayed lines"; }
n=$(grep -c "dropped 2 forged and 1 replayed lines from the connection to cor-run" "$WORK/s.err")
[ "$n" = 2 ] || { show s; die "$n domains of 2 counted 2 forged and 1 replayed lines"; }
grep -q "domain 1 died" "$WORK/s.err" && { show s; die "an injected DEAD was believed"; }
say "  $(grep 'dropped .* on proven' "$WORK/s.err" | sed 's/^cor-run: //')"
kill $hpid 2>/dev/null
wait $hpid 2>/dev/null

# The address table goes as one block (a sealed TABLE with the digest of the A lines, which
# travel unsealed, and a sealed END): a stranger who changes one address in it makes the
# domain refuse the whole table, and the session fails.
say "the same stranger changes an address inside the sealed table"
rm -f "$WORK/port"
timeout -k 10 120 python3 "$(dirname "$0")/hijack.py" "$WORK/port" "$WORK/target" table \
    >"$WORK/hijack.out" 2>&1 &
hpid=$!
add_cleanup "kill $hpid 2>/dev/null"
wait_file "$WORK/port" 30 || { cat "$WORK/hijack.out"; die "the stranger did not listen"; }
port=$(cat "$WORK/port")
sed -i "s/tcp:127.0.0.1:[0-9]*/tcp:127.0.0.1:$port/" "$WORK/agent.sh"
rc=0
COR_BOOT_TIMEOUT=20 timeout -k 10 60 "$CORRUN" -n 2 --listen 127.0.0.1 --agent "sh $WORK/agent.sh" \
    "$BC" exchange </dev/null >"$WORK/t.out" 2>"$WORK/t.err" || rc=$?
sed 's/^/  stranger: /' "$WORK/hijack.out"
grep -q "changed the table" "$WORK/hijack.out" || { show t; die "the stranger changed nothing"; }
[ $rc != 0 ] || { show t; die "the session passed with a changed address table"; }
grep -q "does not match its sealed digest" "$WORK/t.err" ||
    { show t; die "no domain refused the changed table for its digest"; }
say "  refused: $(grep -h -m1 'sealed digest' "$WORK/t.err")"
say "PASS"
