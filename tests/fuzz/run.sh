#!/usr/bin/env bash
# Builds the libFuzzer targets (`make fuzz` in BUILDDIR) and runs each for its time; exits 1
# if a target does not build or the fuzzer finds a crash, 77 when configure found no clang.
#
#   tests/fuzz/run.sh [-b BUILDDIR] [-s SECONDS] [-j JOBS] [TARGET[=SECONDS]...]
#
#   -b  the configured build (default $COR_BUILDDIR, else build/ at the top of the tree)
#   -s  seconds per target (default 30); TARGET=SECONDS sets one target's time
#   -j  targets run at once (default 1; each takes one core)
#   TARGET  runs only the targets named: fuzz_udp, fuzz_dsm, ... (default: every target the
#           build has; `make -s -C BUILDDIR/tests/fuzz fuzz-targets` lists them)
#
# Each target starts from a fresh corpus made of the seeds in tests/fuzz/TARGET.fuzz, which
# also holds its libFuzzer options (lines starting with '-'; a relative -dict= path is taken
# from the top of the tree). A crash prints the end of the fuzzer's log (without its progress
# lines) and keeps the input that crashed in BUILDDIR/tests/fuzz/crashes/; run the target on
# that file to reproduce it. Nothing else is left behind.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${COR_BUILDDIR:-$top/build}
secs=30 jobs=1
usage() { sed -n '4,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts b:s:j:h opt; do
    case $opt in
    b) build=$OPTARG ;;
    s) secs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
isnum() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }
isnum "$secs" && isnum "$jobs" && [ "$jobs" -ge 1 ] || usage
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
dir=$build/tests/fuzz
[ -f "$dir/Makefile" ] || { echo "fuzz: $dir/Makefile missing: configure $build first" >&2; exit 1; }

mlog=$(mktemp "${TMPDIR:-/tmp}/cor-fuzz-make.XXXXXX") || exit 1
if ! make -s -C "$dir" fuzz >"$mlog" 2>&1; then
    cat "$mlog" >&2
    rm -f "$mlog"
    echo "fuzz: make fuzz failed in $dir" >&2
    exit 1
fi
rm -f "$mlog"
built=$(make -s -C "$dir" fuzz-targets)
if [ -z "$built" ]; then
    echo "fuzz: SKIP: configure found no clang that links libFuzzer programs" \
        "(Debian packages clang and libclang-rt-14-dev)"
    exit 77
fi
times= names=
for arg in "$@"; do
    case $arg in
    *=*) isnum "${arg#*=}" || usage; times="$times $arg" ;;
    *) names="$names $arg" ;;
    esac
done
[ -n "$names" ] || names=$built

# run_one TARGET SECONDS: one fuzzing run; prints one line, 1 on a crash.
run_one() {
    name=$1 t=$2
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cor-$name.XXXXXX") || return 1
    mkdir "$tmp/corpus"
    set --
    conf=$here/$name.fuzz
    if [ -f "$conf" ]; then
        while read -r word rest; do
            case $word in
            '' | '#'*) ;;
            -dict=/*) set -- "$@" "$word" ;;
            -dict=*) set -- "$@" "-dict=$top/${word#-dict=}" ;;
            -*) set -- "$@" "$word" ;;
            *) printf "$rest" >"$tmp/corpus/$word" ;; # a seed: its bytes as a printf format
            esac
        done <"$conf"
    fi
    # The outer bound: libFuzzer stops after -max_total_time, but only between inputs.
    (cd "$tmp" && timeout $((t + 120)) "$dir/$name" -max_total_time="$t" -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$tmp/" "$@" "$tmp/corpus" >"$tmp/log" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        grep -v '^#' "$tmp/log" | tail -n 50 >&2
        mkdir -p "$dir/crashes"
        for a in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-*; do
            [ -f "$a" ] || continue
            cp "$a" "$dir/crashes/$name-${a##*/}"
            echo "fuzz: $name: input kept in $dir/crashes/$name-${a##*/}" >&2
        done
        echo "fuzz: $name: FAIL: the fuzzer found a crash or stopped (status $rc; see above)" >&2
        rm -rf "$tmp"
        return 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$tmp/log")
    echo "fuzz: $name: no crash in $t s (${runs:-?} inputs, peak RSS ${rss:-?} MB)"
    rm -rf "$tmp"
    return 0
}

failed=0 running=0 pids=
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; exit 130' INT TERM
for name in $names; do
    t=$secs
    for o in $times; do [ "${o%%=*}" = "$name" ] && t=${o#*=}; done
    case " $built " in
    *" $name "*) ;;
    *) echo "fuzz: $name: no such target in this build (targets: $built)" >&2; failed=1; continue ;;
    esac
    while [ "$running" -ge "$jobs" ]; do # a free core: the next target starts
        wait -n || failed=1
        running=$((running - 1))
    done
    run_one "$name" "$t" &
    pids="$pids $!" running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
exit $failed
