#!/bin/sh
# A route built out of tree (doc/route-authors.md): apps/examples/route_pipe.c compiled here
# with the compiler and -I include only (the public headers, nothing of cor/), loaded from
# COR_ROUTE_PATH. It must pass the whole conformance suite (foreign data included), carry
# tests/proc's exchange under cor-run (2 domains x 8 tasks, 4 domains polling), show its knob
# table in cor-info and report a bad knob value.
. "$(dirname "$0")/../proc/common.sh"
src=${COR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
X=$PROC/exchange
[ -x "$X" ] || die "tests/proc/exchange not built"
if [ $SMALL = 1 ]; then MSGS=2000 MAX=262144 LIMIT=300; else MSGS=20000 MAX=1048576 LIMIT=120; fi
unset COR_ROUTES

say "build: ${CC:-cc} -shared -fPIC -I include route_pipe.c"
mkdir "$WORK/plugins"
${CC:-cc} -shared -fPIC -O2 -Wall -Wextra -Werror -I"$src/include" \
    -o "$WORK/plugins/cor_route_pipe.so" "$src/apps/examples/route_pipe.c" 2>"$WORK/cc.err" ||
    { cat "$WORK/cc.err"; die "the example route does not build from the public headers"; }
COR_ROUTE_PATH=$WORK/plugins
export COR_ROUTE_PATH

say "conformance suite"
timeout -k 10 300 "$B/tests/conformance/route_conf" pipe >"$WORK/conf.out" 2>&1 ||
    { cat "$WORK/conf.out"; die "route_conf pipe failed"; }
grep -q "foreign messages, [1-9][0-9]* dropped and counted" "$WORK/conf.out" ||
    { cat "$WORK/conf.out"; die "the foreign-data case did not run"; }
grep -E 'tests |asserts' "$WORK/conf.out" | sed 's/^/  /'

say "2 domains x 8 tasks, $MSGS messages of 0..$MAX bytes, under cor-run"
run_bg x2 timeout $LIMIT "$CORRUN" -n 2 --route pipe "$X" -t 8 -m $MSGS -x $MAX
wait_bg x2
[ $RC = 0 ] || { show x2; die "2 domains over pipe: cor-run exited $RC"; }
[ "$(grep -c ": PASS " "$WORK/x2.out")" = 2 ] || { show x2; die "not both domains passed"; }
say "4 domains x 4 tasks polling"
run_bg p4 timeout $LIMIT "$CORRUN" -n 4 --route pipe "$X" -P -t 4 -m 500 -x 262144
wait_bg p4
[ $RC = 0 ] || { show p4; die "4 domains over pipe: cor-run exited $RC"; }
[ "$(grep -c ": PASS " "$WORK/p4.out")" = 4 ] || { show p4; die "not all 4 domains passed"; }
sed 's/^/  /' "$WORK/x2.out" "$WORK/p4.out"

say "knobs"
"$B/apps/cor-info" --knobs-markdown pipe >"$WORK/knobs.md" 2>&1 ||
    { cat "$WORK/knobs.md"; die "cor-info lists no knobs of the pipe route"; }
grep -q '^| `COR_PIPE_FRAME_MAX` | 65536 | 4096..131072 |' "$WORK/knobs.md" ||
    { cat "$WORK/knobs.md"; die "cor-info's table lacks COR_PIPE_FRAME_MAX as declared"; }
COR_PIPE_FRAME_MAX=12x timeout -k 10 60 "$B/tests/conformance/route_conf" pipe >"$WORK/bad.out" 2>&1 ||
    { cat "$WORK/bad.out"; die "a bad COR_PIPE_FRAME_MAX broke the route (it should use 65536)"; }
grep -q "ignoring COR_PIPE_FRAME_MAX=12x: expected an integer in \[4096, 131072\]" "$WORK/bad.out" ||
    die "a bad COR_PIPE_FRAME_MAX was not reported"
grep -q "frame_max 65520" "$WORK/bad.out" || die "a bad COR_PIPE_FRAME_MAX did not leave the default"
say "PASS"
