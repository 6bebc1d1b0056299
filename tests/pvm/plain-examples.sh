#!/bin/bash
# The Debian pvm-examples programs in a private one-host PVM virtual machine, each checked
# against what PVM normally prints. Exit 0 pass, 1 fail, 77 skip (not root, no pvm).
#
#   PVM_EXAMPLE_LIST="hello.pvm master1"   run only these (names from the table below;
#                                           aliases: hello inherita inherit2 slave1 ...)
#   PVM_EXAMPLE_WRAP="env LD_PRELOAD=... COR_PVM_ROUTE=myrinet"
#                                           a command prefix put before every program this
#                                           script starts itself: the masters, both copies
#                                           of a bwtest, mhf_server and mhf_tickle, and
#                                           (console `spawn`) the spmd tasks. Slaves that a
#                                           master spawns get only what the master passes
#                                           on (PVM_EXPORT). Never given to pvmd or the
#                                           console.
#   PVM_EXAMPLE_ROUTED="timing dbwtest"     examples whose messages must have travelled a
#                                           CoR route: the libcorpvm counters (COR_PVM_STATS=1
#                                           in the wrap) of the run must show routed sends and
#                                           receives, and no dropped frame (counts need not
#                                           match: a task killed by its master prints none)
#   PVM_EXAMPLE_RM="cor-pvm --route udp"    start srm.pvm (pvm-examples' resource manager)
#                                           with this prefix ("plain": none) before the
#                                           examples: pvm_spawn, pvm_config, pvm_notify ...
#                                           of every task then go through it
#   PVM_EXAMPLE_SAVE=DIR                    keep each example's output (DIR/NAME.out, .log)
#   PVM_EXAMPLE_MAX_MS=4000                 an example that takes longer fails
#   PVM_EXAMPLE_REPEAT=8                    run the list that many times
#   EXTRA_EP                                more folders for spawn to search (pvmlib.sh)
#   PVM_EXAMPLE_VERBOSE=1                   show every example's output
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
NAME=plain-examples
say() { echo "$NAME: $*"; }
[ "$(id -u)" = 0 ] || { say "SKIP: not root (the tests run PVM as root with PVM_ALLOW_ROOT)"; exit 77; }
pvm_available || { say "SKIP: $PVM_WHY"; exit 77; }
[ -x /usr/bin/hello.pvm ] || { say "SKIP: pvm-examples is not installed"; exit 77; }
# Plain PVM runs none of our code: once, in the normal build, is enough.
[ -n "${PVM_EXAMPLE_WRAP:-}" ] || [ -z "${COR_SANITIZED:-}" ] || { say "SKIP: sanitizer build"; exit 77; }
read -r -a WRAP <<<"${PVM_EXAMPLE_WRAP:-}"
# limited CMD...: execs CMD with files limited to 64 MiB (a program looping on EOF of its
# stdin prints prompts forever); pvm_run_master does the same for masters. It replaces the
# shell it runs in: use it only as a background job or a pipeline element (then $! is
# CMD's pid).
limited() { ulimit -f $((64 * 1024 * 2)); exec "$@"; }

# ---------------------------------------------------------------------------------------
# The table. One entry per run:
#   HOW   master  CMD run from the shell (pvm_run_master), output = its stdout+stderr
#         pair    two copies of CMD at once (bwtest: they pair up through the group
#                 "bwtest", instance 0 is the master); output = both outputs
#         console the console runs `spawn CMD` (CMD = spawn options + program); the tasks
#                 print into pvmd's log; output = the console's reply
#         mhf     mhf_server in the background, then mhf_tickle driven through its menu
#                 (run_mhf); output = the server's stdout
#   CMD   the command words
#   IN    stdin for a master (printf format); masters get /dev/null otherwise
#   RC    expected exit status of the master(s): a number, or * (main() falls off its end)
#   SECS  time limit of each run
#   WANT  lines "WHERE COUNT ERE": WHERE is out (see HOW) or log (what pvmd logged during
#         the run); COUNT is the exact number of matching lines, or + (at least one)
#   CHECK extra shell function that checks the output (contexts of the inherit tests)
declare -A HOW CMD IN RC SECS WANT CHECK
ORDER=()
ex() { ORDER+=("$1"); HOW[$1]=$2; CMD[$1]=$3; IN[$1]=$4; RC[$1]=$5; SECS[$1]=$6; WANT[$1]=$7; CHECK[$1]=${8:-}; }

# hello.pvm spawns hello_other (found through ep=/usr/bin), which sends back a string.
ex hello.pvm master "hello.pvm" "" 0 20 "\
out 1 ^i'm t[0-9a-f]+\$
out 1 ^from t[0-9a-f]+: hello, world from .+
out 0 can't start hello_other"

# master1 spawns 3 x (hosts) slave1 tasks, which pass data around a ring; every result
# line must show the value it expected.
ex master1 master "master1" "" '*' 20 "\
out 1 ^Spawning 3 worker tasks \\.\\.\\. SUCCESSFUL\$
out 3 ^I got [0-9.]+ from [0-2]; \\(expecting [0-9.]+\\)\$
out 3 ^I got ([0-9.]+) from [0-2]; \\(expecting \\1\\)\$
out 0 Trouble spawning"

# spmd must be spawned several at once (pvm_siblings); run from a shell it makes a ring of
# one. Spawned from the console, its output lands in pvmd's log. It exits 1 by design.
ex spmd console "-4 spmd" "" - 20 "\
out 1 ^4 successful\$
log 1 \\] Pass a token through the +4 tid ring:
log 1 \\] *[0-9]+ -> *[0-9]+ -> *[0-9]+ -> *[0-9]+ -> *[0-9]+ *\$
log 1 \\] token ring done\$"

# timing spawns timing_slave, both switch to PvmRouteDirect and PvmDataRaw: 20 round
# trips, then 20 x messages of 100 B .. 1 MB. It always exits 1 (exit(1) after "done").
ex timing master "timing" "" 1 30 "\
out 1 ^slave is task t[0-9a-f]+\$
out 1 ^RTT Avg uSec [0-9]+\$
out 5 ^Message size (100|1000|10000|100000|1000000)\$
out 1 ^done\$
out 0 can't|error"

# inherita creates a new context and spawns inherit1 (which spawns inherit2): both
# children must run in inherita's new context. inherit1/2/3 alone are only children.
ex inherit1 master "inherita inherit1" "" 0 20 "\
out 2 ^inherita: t[0-9a-f]+ on machine <.*> with changed context [0-9]+\\.\$
out 1 ^inherita: t[0-9a-f]+ inherit1: I just spawned inherit2 as tid t[0-9a-f]+ with context [0-9]+\\.\$
out 1 ^inherita: t[0-9a-f]+ inherit1: t[0-9a-f]+ 	inherit2 t[0-9a-f]+ on machine <.*> with context [0-9]+\\.\$
out 1 END - sent from inherit1
out 2 with original context 0\\.\$" check_inherit1

# inherita spawns inherit3, which makes its own new context before spawning inherit2:
# inherit2 must be in inherit3's new context, not inherita's.
ex inherit3 master "inherita inherit3" "" 0 20 "\
out 1 ^inherita: t[0-9a-f]+ inherit3: I just spawned inherit2 as tid t[0-9a-f]+ with context [0-9]+\\.\$
out 1 	inherit2 t[0-9a-f]+ on machine <.*> with context [0-9]+\\.\$
out 1 END - sent from inherit3" check_inherit3

# inheritb spawns two inherit2 under two new contexts and receives from each by context.
ex inheritb master "inheritb" "" 0 20 "\
out 1 ^3:inheritb: t[0-9a-f]+ 	inherit2 t[0-9a-f]+ on machine <.*> with context [0-9]+\\. <-- received from 2nd inherit2\\.\$
out 1 ^5:inheritb: t[0-9a-f]+ 	inherit2 t[0-9a-f]+ on machine <.*> with context [0-9]+\\. <-- received from 1st inherit2\\.\$" check_inheritb

# mhf_server registers itself in the mailbox; mhf_tickle (a menu on stdin) loads a
# message handler into it for (tickle, tag 77, context 0), sends "hello mhf" that way,
# asks it to list its handlers, and tells it to exit (run_mhf).
ex mhf_server mhf "mhf_server" "" 0 20 "\
out 1 ^mhf_server: t[0-9a-f]+ on machine <.*> with context [0-9]+\\.\$
out 1 ^register_server: mailbox\\.\\.\\. just inserted server <mhf_server> at mailbox [0-9]+
out 1 LMH: AFTER load with pvm_addmhf\\( src = t[0-9a-f]+, tag = 77, ctx = 0 \\)  -> loaded SC1\$
out 1 ^string_catcher1: string_catcher1 received message -->> <hello mhf>\$
out 1 ^mhf_server: HIT:  ping target 1 - SC1   strings match <hello mhf>\\.\$
out 1 PMH: Are you talking to me!!!\$
out 1 CEAT: Termiate Self\\.\\.\\.\$"

# gexample (groups: pvmgs is spawned from ep=/usr/bin) asks on stdin for the matrix
# dimension and the number of tasks, spawns the other 3, reduces over the group "matrix".
ex gexample master "gexample" '100\n4\n' '*' 30 "\
out 1 --> Using 4 processors <--
out 1 The 1-Norm is 5050 *\$
out 1 The product of column 1 is 9\\.33262e\\+157 *\$
out 0 Could not join|had an error|Barrier failed"

# bwtest in four builds: default (XDR) packing, InPlace, Raw, psend/precv. Ping-pong of
# 0..800000 bytes, 20 samples each; instance 1 waits for instance 0 with pvmsleep(1).
for v in d:PvmDataDefault i:PvmDataInPlace r:PvmDataRaw p:Psend/Precv; do
    ex "${v%%:*}bwtest" pair "${v%%:*}bwtest" "" '*' 30 "\
out 1 ^ [0-9a-f]+ myinst is 0 *\$
out 1 ^ [0-9a-f]+ myinst is 1 *\$
out 1 ^ Using pack option: ${v#*:} *\$
out 1 ^[0-9a-f]+ -- I am the master *\$
out 1 ^[0-9a-f]+ -- I am the slave *\$
out 2 ^t[0-9a-f]+: 100000 doubles received correctly\$
out 7 ^Roundtrip T = [0-9]+ \\(us\\)  \\([0-9.]+ MB/s\\)  Data size: (0|8|80|800|8000|80000|800000)\$
out 0 ^error:"
done

# The Fortran master/slave: fmaster1 spawns 3 fslave1 that pass data around a ring.
ex fmaster1 master "fmaster1" "" 0 20 "\
out 1 ^ Spawning +3 tasks
out 1 SUCCESSFUL
out 3 ^ I got +([0-9.]+) from +[0-2] \\(expected +\\1 \\)\$
out 0 Trouble"

# hitc (Fortran) hands out work to hitc_slave tasks until done, then sends no-more-work.
ex hitc master "hitc" "" 0 30 "\
out 1 hosts? detected in configuration
out + ^ I got result from tid: +[0-9]+\$
log + received no-more-work flag: exiting"

# fgexample: gexample in Fortran (groups, reductions; pvmgs from ep=/usr/bin).
ex fgexample master "fgexample" "" 0 30 "\
out 1 The 1-Norm is +5050\$
out 1 The product of column 1 is +9\\.332621544394[0-9]*E\\+157\$"

# frsg (Fortran) and trsg (C): reduce, scatter and gather over a group of 16 tasks, 4
# elements each (asked on stdin). trsg's main falls off its end. frsg.f never sets PSum
# before adding its row to it, so its Sum1 (the gathered partial sums) holds whatever each
# task's stack held: right on some machines, garbage on others (plain PVM too). Its Sum2
# (the reduce) is the check: "Test OK" or the error line that names Sum2 right.
ex frsg master "frsg" '16\n4\n' 0 30 "\
out 1 (Test OK: Sum of Squares of first +64 +integers is +89440|and by Sum2 as +89440 +for both)
out 1 Test Ok: Received \\( +4\\.0+ +, +8\\.0+ +\\)"
ex trsg master "trsg" '16\n4\n' '*' 30 "\
out 1 Test OK: Sum of Squares of first 64 integers is 89440
out 1 Test Ok: Received \\(4\\.000000, 8\\.000000\\)"

# fspmd: spmd in Fortran, spawned from the console the same way.
ex fspmd console "-4 fspmd" "" - 20 "\
out 1 ^4 successful\$
log 1 \\] +Pass a token through the +4 +tid ring:
log 1 \\] *[0-9]+ -> *[0-9]+ -> *[0-9]+ -> *[0-9]+ -> *[0-9]+ *\$
log 1 \\] +token ring done\$"

# The group tests of gexamples. gexamp N: instance 0 spawns N-1 more (the group is named
# after the program), barrier, every member broadcasts its instance and tid, each checks
# pvm_getinst/pvm_gettid of all; the children print into pvmd's log (argv[0] a full path).
ex gexamp master "gexamp 4" "" 0 30 "\
out 1 ^gexamp 0x[0-9a-f]+ enrolled\$
out 1 ^gexamp 0x[0-9a-f]+ 0\$
out 3 ^0x[0-9a-f]+\$
out 1 ^gexamp 0: sync\$
out 0 match up|usage
log 3 \\] /usr/bin/gexamp 0x[0-9a-f]+ enrolled\$
log 3 \\] /usr/bin/gexamp [1-3]: sync\$
log 0 match up"

# (Not ge, gexamp's sibling: each member leaves the group right after its own checks, with no
# barrier before, so a slower member's pvm_getinst of one that left fails, "gid N doesn't
# match up!", under plain PVM too whenever timing allows.)

# joinleave N: joins and leaves one group N+1 times, a line every 100.
ex joinleave master "joinleave 100" "" 0 30 "\
out 1 ^Joined 100 times\$
out 0 JoinLeave:"

# thb N: joins 32 groups, checks its instances, spawns N tnb that join the last group named
# and meet it at a barrier, then leaves them all.
ex thb master "thb 4" "" 0 30 "\
out 32 ^joined group[0-9]+\$
out 1 ^spawning \\.\\.\\. barrier on group0 *\$
out 1 ^ leaving all the groups *\$
out 1 ^done\\.\$
out 0 not myself|trouble|joining|pvm_lvgroup"

# tjl: joins 32 groups, checks them, leaves them. tjf: one group more (its table of 32
# instances overflows into the group name, as under plain PVM: the 33rd line names none).
ex tjl master "tjl" "" 0 20 "\
out 32 ^joined group[0-9]+\$
out 0 not myself|joining|pvm_lvgroup"
ex tjf master "tjf" "" 0 20 "\
out 32 ^joined group[0-9]+\$
out 1 ^joined \$
out 0 not myself|joining|pvm_lvgroup"

# tst: joins and leaves a group, printing pvm_joingroup's and pvm_lvgroup's results.
ex tst master "tst" "" 0 20 "\
out 1 ^joined prognosis 0, negative 0\$
out 1 ^left prognosis 0, negative 0\$"

# The mailbox examples (run_mbox): task0 puts a service in the mailbox and serves in a new
# context; task1 finds it there and talks to it; gmbi lists it, and finds no CoR.* entry
# (a routed task's own entries are not the program's); task_end ends task0; lmbi puts two
# persistent entries, gmbi lists both, rme removes each, gmbi lists none.
ex mbox mbox "" "" 0 30 "\
out 1 ^task0: just inserted service name <svc> at index 0\\.\$
out 1 ^task1: t[0-9a-f]+  from task t[0-9a-f]+ welcome to my server - you are service request number 1\\.\$
out 1 ^task0: t[0-9a-f]+ 	task1 t[0-9a-f]+ on machine <.*> with context [0-9]+\\.  Request number 1\\.\$
out 1 ^task0: handled 2 service requests\\.\$
out 1 ^gmbi: 1 mbox entries returned\\.\$
out 1 ^gmbi: 2 mbox entries returned\\.\$
out 2 ^gmbi: 0 mbox entries returned\\.\$
out 1 ^gmbi: class name: <svc>\$
out 2 ^gmbi: class name: <t[0-9a-f]+lmbi[01]>\$
out 0 CoR\\.|no service running|Invalid|can't delete|error"

declare -A ALIAS=([hello]=hello.pvm [hello_other]=hello.pvm [slave1]=master1
    [timing_slave]=timing [inherita]="inherit1 inherit3" [inherit2]="inherit1 inherit3 inheritb"
    [mhf_tickle]=mhf_server [bwtest]="dbwtest ibwtest rbwtest pbwtest" [fslave1]=fmaster1
    [hitc_slave]=hitc [rsg]="frsg trsg" [tnb]=thb [task0]=mbox [task1]=mbox [task_end]=mbox
    [gmbi]=mbox [lmbi]=mbox [rme]=mbox [groups]="gexample gexamp joinleave thb tjl tjf tst")

# ---------------------------------------------------------------------------------------
# Context checks (the numbers differ from run to run).
check_inherit1() {
    local c i1 i2
    c=$(sed -n 's/^inherita: .* with changed context \([0-9]*\)\.$/\1/p' "$OUT" | head -1)
    i1=$(sed -n 's/^inherita: t[0-9a-f]* inherit1 t[0-9a-f]* on machine <.*> with context \([0-9]*\)\.$/\1/p' "$OUT" | head -1)
    i2=$(sed -n 's/^.*	inherit2 t[0-9a-f]* on machine <.*> with context \([0-9]*\)\.$/\1/p' "$OUT" | head -1)
    [ -n "$c" ] && [ "$c" != 0 ] && [ "$i1" = "$c" ] && [ "$i2" = "$c" ] ||
        { WHY="contexts: inherita's new $c, inherit1 $i1, inherit2 $i2 (all must be equal)"; return 1; }
}
check_inherit3() {
    local c i3 i3n i2
    c=$(sed -n 's/^inherita: .* with changed context \([0-9]*\)\.$/\1/p' "$OUT" | head -1)
    i3=$(sed -n 's/^inherita: t[0-9a-f]* inherit3 t[0-9a-f]* on machine <.*> with context \([0-9]*\)\.$/\1/p' "$OUT" | sed -n 1p)
    i3n=$(sed -n 's/^inherita: t[0-9a-f]* inherit3 t[0-9a-f]* on machine <.*> with context \([0-9]*\)\.$/\1/p' "$OUT" | sed -n 2p)
    i2=$(sed -n 's/^.*	inherit2 t[0-9a-f]* on machine <.*> with context \([0-9]*\)\.$/\1/p' "$OUT" | head -1)
    [ -n "$c" ] && [ "$i3" = "$c" ] && [ -n "$i3n" ] && [ "$i3n" != "$c" ] && [ "$i2" = "$i3n" ] ||
        { WHY="contexts: inherita's new $c, inherit3 $i3 then its own $i3n, inherit2 $i2 (want inherit3=$c, inherit2=inherit3's own)"; return 1; }
}
check_inheritb() {
    local c1 c2 r1 r2
    c1=$(sed -n 's/^1:inheritb: .* with new #1 context \([0-9]*\) --> .*/\1/p' "$OUT")
    c2=$(sed -n 's/^2:inheritb: .* with new #2 context \([0-9]*\) --> .*/\1/p' "$OUT")
    r2=$(sed -n 's/^3:inheritb: .* with context \([0-9]*\)\. <-- received from 2nd.*/\1/p' "$OUT")
    r1=$(sed -n 's/^5:inheritb: .* with context \([0-9]*\)\. <-- received from 1st.*/\1/p' "$OUT")
    [ -n "$c1" ] && [ -n "$c2" ] && [ "$c1" != "$c2" ] && [ "$r1" = "$c1" ] && [ "$r2" = "$c2" ] ||
        { WHY="contexts: #1 $c1 #2 $c2, 1st inherit2 in $r1, 2nd in $r2"; return 1; }
}

# wait_grep FILE ERE SECS
wait_grep() {
    local i=0 n=$(($3 * 10))
    until grep -qE -- "$2" "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -ge $n ] && return 1; sleep 0.1
    done
}

# mhf: server in the background; a probe tickle answering "8" (client exits, server not
# contacted) finds it in the mailbox once it is registered; then the real tickle, fed one
# menu action at a time, each after the server has flushed the previous one's output.
run_mhf() {
    local secs=$1 d=$PVM_WORK/mhf i=0 spid
    mkdir -p "$d"
    limited timeout -k 2 "$secs" "${PVM_EXEC[@]}" "${WRAP[@]}" mhf_server </dev/null >"$d/server.out" 2>&1 &
    spid=$!
    until printf '8\n' | limited timeout -k 2 10 "${PVM_EXEC[@]}" "${WRAP[@]}" mhf_tickle >"$d/probe.out" 2>&1; do
        i=$((i + 1))
        if [ $i -ge 50 ] || ! kill -0 $spid 2>/dev/null; then
            WHY="mhf_server never showed up in the mailbox"; kill $spid 2>/dev/null || true
            wait $spid 2>/dev/null || true; cp "$d/server.out" "$OUT"; cat "$d/probe.out" >>"$OUT"; return 1
        fi
        sleep 0.1
    done
    feed() {
        printf '1\n77\n0\n1\n'                          # LMH: tag 77, ctx 0, string_catcher1
        wait_grep "$d/server.out" 'loaded SC1' 10 || { printf '8\n%.0s' {1..40}; return; }
        printf '4\n77\n0\n1\nhello mhf\n'               # HIT: tag 77, ctx 0, catcher 1, text
        wait_grep "$d/server.out" 'HIT:' 10 || { printf '8\n%.0s' {1..40}; return; }
        printf '0\n'                                    # PMH: list the handlers
        wait_grep "$d/server.out" 'PMH:' 10 || { printf '8\n%.0s' {1..40}; return; }
        printf '9\n'                                    # SEAT: server exits
    }
    local trc=0 src=0
    feed | limited timeout -k 2 "$secs" "${PVM_EXEC[@]}" "${WRAP[@]}" mhf_tickle >"$d/tickle.out" 2>&1 || trc=$?
    wait_pid_bounded $spid 10 || true
    wait $spid 2>/dev/null || src=$?
    cp "$d/server.out" "$OUT"
    cp "$d/tickle.out" "$OUT.tickle"
    RCS="server $src, tickle $trc"
    [ "$trc" = 0 ] || { WHY="mhf_tickle exited $trc"; cat "$d/tickle.out" >>"$OUT"; return 1; }
    [ "$src" = 0 ] || { WHY="mhf_server exited $src"; return 1; }
}
# mbox: the mailbox examples one after another (see the table), every program wrapped; their
# outputs in order into $OUT, each after a line naming it. Then a plain gmbi (never wrapped)
# must find the mailbox empty: the layer's entries went with the last routed task.
run_mbox() {
    local secs=$1 d=$PVM_WORK/mbox t0 rc=0 i
    mkdir -p "$d"
    : >"$OUT"
    step() { # step NAME ARGS...: one program, bounded, its output appended
        local name=$1 r=0
        shift
        echo "== $*" >>"$OUT"
        (limited timeout -k 2 "$secs" "${PVM_EXEC[@]}" "${WRAP[@]}" "$@" </dev/null >"$d/$name.out" 2>&1) || r=$?
        cat "$d/$name.out" >>"$OUT"
        [ $r = 0 ] || { WHY="$* exited $r"; return 1; }
    }
    limited timeout -k 2 "$secs" "${PVM_EXEC[@]}" "${WRAP[@]}" task0 svc d </dev/null >"$d/task0.out" 2>&1 &
    t0=$!
    # (its output reaches the file when it ends: a plain gmbi tells when the service is in)
    for ((i = 0; i < 100; i++)); do
        timeout -k 10 10 "${PVM_EXEC[@]}" gmbi svc </dev/null 2>&1 | grep -q 'class name: <svc>' && break
        kill -0 $t0 2>/dev/null || break
        sleep 0.1
    done
    if [ $i = 100 ] || ! kill -0 $t0 2>/dev/null; then
        WHY="task0 did not put its service in the mailbox"; kill $t0 2>/dev/null || true
        wait $t0 2>/dev/null || true; cat "$d/task0.out" >>"$OUT"; return 1
    fi
    step task1 task1 svc 0 d && step gmbi1 gmbi svc && step gmbi0 gmbi 'CoR*' &&
        step task_end task_end svc 0 || rc=1
    wait_pid_bounded $t0 10 || true
    local r0=0
    wait $t0 2>/dev/null || r0=$?
    echo "== task0 svc d" >>"$OUT"
    cat "$d/task0.out" >>"$OUT"
    [ $rc = 0 ] || return 1
    [ $r0 = 0 ] || { WHY="task0 exited $r0"; return 1; }
    step lmbi lmbi 2 po e && step gmbi2 gmbi '*lmbi*' || return 1
    local names
    names=$(sed -n 's/^lmbi: just inserted entry <\(.*\)> at index 0\.$/\1/p' "$d/lmbi.out")
    [ "$(echo "$names" | wc -w)" = 2 ] || { WHY="lmbi did not name its 2 entries"; return 1; }
    for i in $names; do step rme rme "$i" 0 || return 1; done
    step gmbi3 gmbi '*lmbi*' || return 1
    # (a routed resource manager is a routed task that lives on: its session stays)
    if [ -n "${PVM_EXAMPLE_RM:-}" ] && [ "$PVM_EXAMPLE_RM" != plain ]; then return 0; fi
    for ((i = 0; i < 30; i++)); do
        timeout -k 10 10 "${PVM_EXEC[@]}" gmbi 'CoR*' </dev/null >"$d/plain-gmbi.out" 2>&1 || true
        grep -q '^gmbi: 0 mbox entries returned' "$d/plain-gmbi.out" && return 0
        sleep 0.1
    done
    WHY="the layer's entries are left in the mailbox once every task ended (a plain gmbi): $(grep -o '<[^>]*>' "$d/plain-gmbi.out" | tr '\n' ' ')"
    return 1
}
wait_pid_bounded() {
    local i=0
    while kill -0 "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -ge $(($2 * 10)) ] && { kill "$1" 2>/dev/null; return 1; }; sleep 0.1
    done
}

# run_one NAME: runs it, checks it; sets WHY on failure.
run_one() {
    local n=$1 how=${HOW[$1]} secs=${SECS[$1]} line where count re got text rc
    local -a cmd
    read -r -a cmd <<<"${CMD[$1]}"
    WHY="" RCS=""
    OUT=$PVM_WORK/$n.out
    local logoff
    logoff=$(pvm_log_size)
    case $how in
    master)
        local in=/dev/null
        if [ -n "${IN[$n]}" ]; then in=$PVM_WORK/$n.in; printf "${IN[$n]}" >"$in"; fi
        pvm_run_master -t "$secs" -i "$in" "${WRAP[@]}" "${cmd[@]}"
        cat "$PVM_OUT" "$PVM_ERR" >"$OUT"
        RCS=$PVM_RC
        [ "$PVM_RC" != 124 ] && [ "$PVM_RC" != 137 ] || { WHY="timed out after ${secs}s"; return 1; }
        [ "${RC[$n]}" = '*' ] || [ "$PVM_RC" = "${RC[$n]}" ] ||
            { WHY="exit status $PVM_RC, expected ${RC[$n]}"; return 1; }
        ;;
    pair)
        local p1 p2 r1=0 r2=0
        limited timeout -k 2 "$secs" "${PVM_EXEC[@]}" "${WRAP[@]}" "${cmd[@]}" </dev/null >"$OUT.1" 2>&1 & p1=$!
        limited timeout -k 2 "$secs" "${PVM_EXEC[@]}" "${WRAP[@]}" "${cmd[@]}" </dev/null >"$OUT.2" 2>&1 & p2=$!
        wait $p1 || r1=$?
        wait $p2 || r2=$?
        cat "$OUT.1" "$OUT.2" >"$OUT"
        RCS="$r1 $r2"
        for rc in $r1 $r2; do
            [ "$rc" != 124 ] && [ "$rc" != 137 ] || { WHY="timed out after ${secs}s"; return 1; }
            [ "${RC[$n]}" = '*' ] || [ "$rc" = "${RC[$n]}" ] ||
                { WHY="exit status $rc, expected ${RC[$n]}"; return 1; }
        done
        ;;
    console)
        # the wrap goes in front of the program: `spawn -4 env LD_PRELOAD=... spmd`
        local opts=() prog=()
        for w in "${cmd[@]}"; do
            if [ ${#prog[@]} = 0 ] && [ "${w#-}" != "$w" ]; then opts+=("$w"); else prog+=("$w"); fi
        done
        pvm_console "spawn ${opts[*]} ${WRAP[*]} ${prog[*]}" >"$OUT" || true
        # the tasks are done when the last log pattern shows up
        re=$(printf '%s\n' "${WANT[$n]}" | sed -n 's/^log [0-9+]* //p' | tail -1)
        if [ -n "$re" ] && ! wait_grep_log "$logoff" "$re" "$secs"; then
            WHY="no '$re' in pvmd's log within ${secs}s"
        fi
        ;;
    mhf)
        run_mhf "$secs" || return 1
        ;;
    mbox)
        run_mbox "$secs" || return 1
        ;;
    esac
    pvm_log_since "$logoff" >"$OUT.log"
    [ -z "$WHY" ] || return 1
    # A route that gave a peer up (it stopped acknowledging: exited too early, or never
    # answered) made some task wait seconds, whatever the output says.
    local f outs=()
    for f in "$OUT" "$OUT.log" "$OUT.tickle" "$OUT.1" "$OUT.2"; do [ ! -f "$f" ] || outs+=("$f"); done
    if grep -hE 'acknowledged nothing|giving the domain up|giving up$' "${outs[@]}" >"$OUT.gaveup"; then
        WHY="a route gave a peer up: $(head -1 "$OUT.gaveup")"; return 1
    fi
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        where=${line%% *}; line=${line#* }
        count=${line%% *}; re=${line#* }
        case $where in out) text=$OUT;; log) text=$OUT.log;; esac
        got=$(grep -cE -- "$re" "$text" || true)
        if [ "$count" = + ]; then
            [ "$got" -ge 1 ] || { WHY="no line matches /$re/ ($where)"; return 1; }
        elif [ "$got" != "$count" ]; then
            WHY="$got lines match /$re/ ($where), expected $count"; return 1
        fi
    done <<<"${WANT[$n]}"
    if [ -n "${CHECK[$n]}" ]; then "${CHECK[$n]}" || return 1; fi
    case " ${PVM_EXAMPLE_ROUTED:-} " in *" $n "*) check_routed || return 1 ;; esac
    return 0
}

# The libcorpvm counter lines of this run (the master's output and the tasks' lines in
# pvmd's log): routed messages were sent and received, nothing was dropped.
check_routed() {
    local sums
    sums=$(cat "$OUT" "$OUT.log" | grep -o 'routed sent [0-9]* ([0-9]* B) received [0-9]*.*dropped [0-9]*' |
        awk '{s += $3; r += $7; d += $NF} END {printf "%d %d %d", s, r, d}')
    read -r ROUTED_SENT ROUTED_RECV DROPPED <<<"${sums:-0 0 0}"
    ROUTED_NOTE="routed sent $ROUTED_SENT received $ROUTED_RECV"
    [ "$ROUTED_SENT" -gt 0 ] || { WHY="no message travelled a CoR route ($ROUTED_NOTE)"; return 1; }
    [ "$ROUTED_RECV" -gt 0 ] || { WHY="routed messages never arrived: $ROUTED_NOTE"; return 1; }
    [ "$DROPPED" = 0 ] || { WHY="$DROPPED frames or control messages dropped"; return 1; }
}
wait_grep_log() {
    local i=0 n=$(($3 * 10))
    until pvm_log_since "$1" | grep -qE -- "$2"; do
        i=$((i + 1)); [ $i -ge $n ] && return 1; sleep 0.1
    done
}

# ---------------------------------------------------------------------------------------
LIST=()
if [ -n "${PVM_EXAMPLE_LIST:-}" ]; then
    for w in $PVM_EXAMPLE_LIST; do
        if [ -n "${HOW[$w]:-}" ]; then LIST+=("$w")
        elif [ -n "${ALIAS[$w]:-}" ]; then for a in ${ALIAS[$w]}; do LIST+=("$a"); done
        else say "unknown example '$w' (known: ${ORDER[*]})"; exit 1; fi
    done
else
    LIST=("${ORDER[@]}")
fi

pvm_vm_start || { say "FAIL: cannot start a PVM virtual machine"; exit 1; }
[ ${#WRAP[@]} = 0 ] || say "wrap: ${WRAP[*]}"
RM_PID=""
stop_rm() {
    [ -n "$RM_PID" ] || return 0
    kill "$RM_PID" 2>/dev/null || true
    wait_pid_bounded "$RM_PID" 5 || kill -9 "$RM_PID" 2>/dev/null || true
    wait "$RM_PID" 2>/dev/null || true
    RM_PID=""
}
if [ -n "${PVM_EXAMPLE_RM:-}" ]; then
    RMWRAP=()
    [ "$PVM_EXAMPLE_RM" = plain ] || read -r -a RMWRAP <<<"$PVM_EXAMPLE_RM"
    # (stdbuf: its lines reach the file at once)
    limited timeout -k 2 600 "${PVM_EXEC[@]}" stdbuf -oL "${RMWRAP[@]}" srm.pvm </dev/null >"$PVM_WORK/rm.out" 2>&1 &
    RM_PID=$!
    trap 'stop_rm; pvm_cleanup_all' EXIT
    wait_grep "$PVM_WORK/rm.out" 'registered as Resource Manager' 10 ||
        { say "FAIL: srm.pvm did not register as resource manager"; sed 's/^/  | /' "$PVM_WORK/rm.out"; exit 1; }
    say "resource manager: ${RMWRAP[*]} srm.pvm (pid $RM_PID)"
fi
PASS=0 FAIL=0 FAILED=()
declare -A DONE
RUNS=()
for ((rep = 0; rep < ${PVM_EXAMPLE_REPEAT:-1}; rep++)); do
    DONE=()
    for n in "${LIST[@]}"; do
        [ -z "${DONE[$n]:-}" ] || continue
        DONE[$n]=1
        RUNS+=("$n")
    done
done
for n in "${RUNS[@]}"; do
    t0=$(date +%s%N)
    ROUTED_NOTE=""
    rmoff=0
    [ -z "$RM_PID" ] || rmoff=$(stat -c %s "$PVM_WORK/rm.out")
    if run_one "$n"; then ok=1; else ok=0; fi
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if [ $ok = 1 ] && [ -n "${PVM_EXAMPLE_MAX_MS:-}" ] && [ "$ms" -gt "$PVM_EXAMPLE_MAX_MS" ]; then
        ok=0 WHY="took $ms ms, more than PVM_EXAMPLE_MAX_MS=$PVM_EXAMPLE_MAX_MS"
    fi
    if [ -n "${PVM_EXAMPLE_SAVE:-}" ]; then # the run's output, for matrix.sh
        mkdir -p "$PVM_EXAMPLE_SAVE"
        cat "$OUT" "$OUT.tickle" "$OUT.1" "$OUT.2" 2>/dev/null >>"$PVM_EXAMPLE_SAVE/$n.out" || true
        sed 's/^\[t[0-9a-f]*\] [0-9/]* [0-9:]* //' "$OUT.log" 2>/dev/null >>"$PVM_EXAMPLE_SAVE/$n.log" || true
        # what the resource manager was asked meanwhile (rm.sh compares it)
        [ -z "$RM_PID" ] || tail -c +$((rmoff + 1)) "$PVM_WORK/rm.out" >>"$PVM_EXAMPLE_SAVE/$n.rm"
    fi
    if [ $ok = 1 ]; then
        PASS=$((PASS + 1))
        say "PASS $n (${ms} ms, exit ${RCS:-n/a})${ROUTED_NOTE:+, $ROUTED_NOTE}"
        [ "${PVM_EXAMPLE_VERBOSE:-0}" != 1 ] || sed 's/^/  | /' "$OUT" "$OUT.log" 2>/dev/null || true
    else
        FAIL=$((FAIL + 1)); FAILED+=("$n")
        say "FAIL $n (${ms} ms, exit ${RCS:-n/a}): $WHY"
        echo "  output (first 60 lines, cut at 300 columns):"
        { head -60 "$OUT" | cut -c1-300 | sed 's/^/  | /'; } 2>/dev/null || true
        echo "  pvmd log during the run:"
        { head -30 "$OUT.log" | cut -c1-300 | sed 's/^/  | /'; } 2>/dev/null || true
        # kill whatever it left behind so that the next example starts clean
        pvm_console reset >/dev/null 2>&1 || true
    fi
done
if [ -n "$RM_PID" ]; then
    # The manager saw the examples' requests, and nothing of libcorpvm's protocol.
    grep -q 'PVMd message is SM_' "$PVM_WORK/rm.out" ||
        { FAIL=$((FAIL + 1)); FAILED+=("srm.pvm"); say "FAIL srm.pvm: no request went through the resource manager"; }
    if [ -n "${PVM_EXAMPLE_SAVE:-}" ]; then # all it logged, once its log stood still 0.5 s
        rmsize=-1
        for ((i = 0; i < 50; i++)); do
            rmnow=$(stat -c %s "$PVM_WORK/rm.out"); [ "$rmnow" != "$rmsize" ] || break
            rmsize=$rmnow; sleep 0.5
        done
        cp "$PVM_WORK/rm.out" "$PVM_EXAMPLE_SAVE/srm.out"
    fi
    stop_rm
fi
pvm_vm_stop
[ $FAIL = 0 ] || say "failed: ${FAILED[*]}"
echo "$PASS passed, $FAIL failed"
[ $FAIL = 0 ]
