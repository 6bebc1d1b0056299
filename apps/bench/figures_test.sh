#!/bin/sh
# scripts/figures and cor-bench --plot, small: a quick run without PVM writes every figure as
# a valid PNG of some size and a report with its tables, and nothing but its summary when its
# output is a file; cor-bench --plot draws a size mode and a count mode, and says so clearly
# when gnuplot is missing. Skips (77) when gnuplot is missing and cannot be installed.
set -u
top=${COR_BUILDDIR:?run me through make check}
src=${COR_SRCDIR:?run me through make check}
b=$top/apps
. "$src/apps/check_lib.sh"

if ! command -v gnuplot >/dev/null 2>&1; then
    # scripts/lib.sh installs it as root (scripts/test lists it); a subshell: lib.sh sets -e
    (. "$src/scripts/lib.sh" && cor_install_packages gnuplot-nox) >"$dir/install.out" 2>&1
    command -v gnuplot >/dev/null 2>&1 || {
        echo "SKIP: gnuplot is missing and cannot be installed (Debian package gnuplot-nox)"
        exit 77
    }
fi

# png FILE: exists, starts with the PNG signature and is more than a blank canvas.
png() {
    if [ ! -f "$1" ]; then
        fail "$1 was not written"
        return
    fi
    magic=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
    [ "$magic" = 89504e470d0a1a0a ] || fail "$1 is not a PNG (first bytes $magic)"
    size=$(wc -c <"$1")
    [ "$size" -gt 8000 ] || fail "$1 is only $size bytes"
    [ "$magic" = 89504e470d0a1a0a ] && [ "$size" -gt 8000 ] && echo "ok: $(basename "$1") ($size bytes)"
}

# ---- scripts/figures --quick --no-pvm: stdout to a file, so no progress lines ----
# Not under the sanitizers: their figures mean nothing, and the default shared buffers are a
# race ThreadSanitizer rightly reports (bench_smoke.sh). cor-bench --plot below still runs.
figures() {
    out=$dir/figures
    # longer than the bound of its longest step (300 s), so a step that hangs is named in
    # figures.err instead of the whole run being cut off silently
    if ! timeout -k 10 600 "$src/scripts/figures" --quick --no-pvm --builddir "$top" --out "$out" \
        >"$dir/figures.out" 2>"$dir/figures.err"; then
        fail "scripts/figures --quick --no-pvm exited with an error:"
        cat "$dir/figures.out" "$dir/figures.err"
        for log in $(sed -n 's/^figures: .* failed .*, see \(.*\.log\)$/\1/p' "$dir/figures.err"); do
            echo "--- $log"
            tail -n 20 "$log"
        done
    fi
    for f in fig5-rtt fig5-rate fig6-multiport fig6-multitask blocking-rtt blocking-rate; do
        png "$out/$f.png"
    done
    if "$b/cor-bench" --help | grep -qE '^ +rate '; then png "$out/rate.png"; fi
    r=$out/README.md
    if [ -f "$r" ]; then
        before=$fails
        for want in '^# CoR figures' 'cores (nproc)' 'Load average' '^## Figure 5' '^## Figure 6' \
            '^## Blocking' '^## Message rate' '^| size | udp-socket | udp-route | udp ' \
            '^| udp-route | udp-socket | ' '^| route, size | 1 ports ' '^| route, size | 1 pairs ' \
            '^| udp-block | udp | ' '!\[Figure 5, round trip\](fig5-rtt.png)'; do
            grep -q -- "$want" "$r" || fail "the report has no line matching '$want'"
        done
        # every row of the udp task API's tables has numbers in it
        grep -qE '^\| 1 MiB \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|' "$r" ||
            fail "the report's Figure 5 table has no 1 MiB row of numbers"
        [ "$fails" -eq "$before" ] && echo "ok: the report's sections and tables"
    else
        fail "no $r"
    fi
    if grep -q 'elapsed' "$dir/figures.out"; then
        fail "progress written to a file:"
        cat "$dir/figures.out"
    fi
    grep -q '^figures: .* plots and ' "$dir/figures.out" || fail "no summary line in the output"
    # On a terminal (a pty from script(1)): which measurement, the time elapsed and an estimate.
    if command -v script >/dev/null 2>&1; then
        timeout -k 10 300 script -qec "'$src/scripts/figures' --quick --no-pvm --only fig6 --builddir '$top' \
            --out '$dir/tty'" /dev/null >"$dir/tty.out" 2>&1
        if grep -q 'figures \[1/4\] udp-multiport: [0-9]* s elapsed, about [0-9]* s left' "$dir/tty.out"; then
            echo "ok: progress on a terminal"
        else
            fail "no progress line on a terminal; got:"
            cat "$dir/tty.out"
        fi
    else
        echo "skip: progress on a terminal (script(1) from util-linux is not installed)"
    fi
}
if grep -q '^SAN_CFLAGS = -fsanitize' "$top/Makefile" 2>/dev/null; then
    echo "skip: scripts/figures (sanitizer build)"
else
    figures
fi

# ---- cor-bench --plot ----
timeout -k 10 120 "$b/cor-run" -n 2 "$b/cor-bench" pingpong --sizes 0,1K,64K --iters 0.02 --reps 1 \
    --quiet --plot "$dir/pingpong.png" >"$dir/pp.out" 2>&1 || {
    fail "cor-bench pingpong --plot failed:"
    cat "$dir/pp.out"
}
png "$dir/pingpong.png"
timeout -k 10 120 "$b/cor-run" -n 2 "$b/cor-bench" multitask --sizes 64K --pairs 1,2 --iters 0.02 \
    --reps 1 --distinct-buffers --quiet --plot "$dir/multitask.png" >"$dir/mt.out" 2>&1 || {
    fail "cor-bench multitask --plot failed:"
    cat "$dir/mt.out"
}
png "$dir/multitask.png"
# No gnuplot in PATH: a clear error before any measurement (the binary itself, not libtool's
# wrapper script, which needs a PATH).
bin=$b/.libs/cor-bench
[ -x "$bin" ] || bin=$b/cor-bench
if env PATH="$dir/empty" LD_LIBRARY_PATH="$top/cor/core/.libs:$top/cor/dsm/.libs" "$bin" \
    pingpong --plot "$dir/none.png" >"$dir/nognuplot.out" 2>&1 ||
    ! grep -q 'needs gnuplot' "$dir/nognuplot.out"; then
    fail "without gnuplot: expected an error saying it needs gnuplot; got:"
    cat "$dir/nognuplot.out"
else
    echo "ok: --plot without gnuplot is a clear error"
fi
if "$b/cor-bench" dsm --plot "$dir/dsm.png" >"$dir/dsm.out" 2>&1 ||
    ! grep -q -- '--plot draws the transfer modes' "$dir/dsm.out"; then
    fail "dsm --plot: expected a usage error; got:"
    cat "$dir/dsm.out"
fi

[ "$fails" -eq 0 ] && echo "PASS" && exit 0
echo "FAIL: $fails case(s)"
exit 1
