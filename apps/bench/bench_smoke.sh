#!/bin/sh
# cor-bench smoke test (tiny sizes and counts, correctness not speed): every mode runs to the
# end with --verify under cor-run and writes the CSV rows it should; dsm on 2 and 3 domains.
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
fails=0

# run NAME ROWS [--route R] [--ports P] [--shared] cor-bench args: expects ROWS data rows in
# the CSV; --route and --ports go to cor-run.
# Every run checks the data (--verify) except with --shared, which keeps the default shared
# buffers that --verify would replace.
run() {
    name=$1 rows=$2
    shift 2
    ropts= verify=--verify
    if [ "$1" = --route ]; then ropts="--route $2"; shift 2; fi
    if [ "$1" = --ports ]; then ropts="$ropts --ports $2"; shift 2; fi
    if [ "$1" = --shared ]; then verify=; shift; fi
    csv=$dir/$name.csv
    # shellcheck disable=SC2086
    if ! timeout -k 10 120 "$b/cor-run" -n 2 $ropts "$b/cor-bench" "$@" $verify --quiet --csv "$csv" \
        >"$dir/$name.out" 2>&1; then
        echo "FAIL: $name: cor-bench $* exited with an error:"
        cat "$dir/$name.out"
        fails=$((fails + 1))
        return
    fi
    got=$(($(wc -l <"$csv") - 1))
    if [ "$(head -n 1 "$csv")" != "route,mode,bytes,ports,pairs,one_way_us,MBps" ] ||
        [ "$got" -ne "$rows" ]; then
        echo "FAIL: $name: expected a header and $rows rows in the CSV, got:"
        cat "$csv"
        fails=$((fails + 1))
        return
    fi
    # Every row has a positive time.
    if awk -F, 'NR > 1 && !($6 > 0) { bad = 1 } END { exit !bad }' "$csv"; then
        echo "FAIL: $name: a row without a positive one_way_us:"
        cat "$csv"
        fails=$((fails + 1))
        return
    fi
    # stderr is a file here: no progress line
    if grep -q 'elapsed' "$dir/$name.out"; then
        echo "FAIL: $name: progress written to a file:"
        cat "$dir/$name.out"
        fails=$((fails + 1))
        return
    fi
    echo "ok: $name"
}

sizes=0,1,1000,70000,300000
run pingpong 5 pingpong --sizes $sizes --iters 0.02
run stream 5 stream --sizes $sizes --iters 0.02
run stream-alloc 5 stream --sizes $sizes --iters 0.02 --recv-alloc
run raw-pingpong 5 pingpong --raw --sizes $sizes --iters 0.02
run raw-stream 5 stream --raw --sizes $sizes --iters 0.02
run udp-raw 10 udp-raw --sizes $sizes --iters 0.02
run multiport 4 --ports 2 multiport --sizes 1000,70000 --iters 0.02
run multitask 6 multitask --sizes 1000,70000 --pairs 1,2,3 --iters 0.02
# rate: windows of 64 (the default), each acked, on both routes; a short window with a tail
# that does not fill the last one.
for r in udp gm; do
    run rate-$r 4 --route $r rate --sizes 1,4K --pairs 1,3 --iters 0.02
    run rate-raw-$r 2 --route $r rate --raw --sizes 1,4K --iters 0.02
done
run rate-socket 2 rate --baseline udp --sizes 1,4K --iters 0.02
run rate-window 2 rate --sizes 0,1000 --pairs 2 --window 5 --iters 0.02
# The default buffers are shared: the pairs' receives write into one buffer at once, on
# purpose (as osu_bw's window does). ThreadSanitizer rightly calls that a race of the
# benchmark's, so its build checks only the distinct buffers above.
if grep -q '^SAN_CFLAGS = -fsanitize=thread' "$COR_BUILDDIR/Makefile" 2>/dev/null; then
    echo "skip: multitask-shared (ThreadSanitizer build)"
else
    run multitask-shared 4 --shared multitask --sizes 1000,70000 --pairs 1,3 --iters 0.02
fi

# cor-bench dsm (libcordsm beside R): every measure gives a row with a positive median, on
# 2 domains over udp and on 3 over gm (there also the write at a third domain invalidating 1
# and 2 readers, each beside its messages relayed by the task API and their ratio, and the
# added cost per reader of both, which may be negative in a tiny run; and the barrier's rounds
# relayed; the lock's release apart, the lock in turns). Over udp
# every request is a message (COR_DSM_SHM=0: rows labelled udp), over gm home-only objects are
# in shared memory (rows labelled gm+shm).
# dsm_run NAME ROWS DOMAINS ROUTE COR_DSM_SHM cor-bench-dsm-args
dsm_run() {
    name=$1 rows=$2 n=$3 route=$4 shm=$5
    shift 5
    csv=$dir/$name.csv
    label=$route
    [ "$shm" = 0 ] || label=$route+shm
    if ! COR_DSM_SHM=$shm timeout -k 10 120 "$b/cor-run" -n "$n" --route "$route" "$b/cor-bench" dsm "$@" --csv "$csv" \
        >"$dir/$name.out" 2>&1; then
        echo "FAIL: $name: cor-bench dsm $* exited with an error:"
        cat "$dir/$name.out"
        fails=$((fails + 1))
        return
    fi
    got=$(($(wc -l <"$csv") - 1))
    if [ "$(head -n 1 "$csv")" != "route,domains,what,count,median,p99,unit,per_R,goal,met" ] ||
        [ "$got" -ne "$rows" ] || ! grep -q "^$label,$n,R," "$csv"; then
        echo "FAIL: $name: expected a header and $rows rows of $label on $n domains, got:"
        cat "$csv"
        fails=$((fails + 1))
        return
    fi
    if awk -F, 'NR > 1 && $3 !~ /_per_extra_reader$/ && !($5 > 0) { bad = 1 }
        END { exit !bad }' "$csv"; then
        echo "FAIL: $name: a row without a positive median:"
        cat "$csv"
        fails=$((fails + 1))
        return
    fi
    echo "ok: $name"
}
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES # as tests/dsm/proc.sh
dsm_run dsm-udp 30 2 udp 0 --count 20 --sizes 64,70000 --tasks 2
dsm_run dsm-gm3 38 3 gm 1 --count 20 --sizes 64
# --only: R, the atomics (fetch-add, CAS), the locks (uncontended, fairness, contended), R_end
dsm_run dsm-only 9 2 udp 0 --count 20 --only atomics,lock
if "$b/cor-bench" dsm --count 5 >"$dir/bad.out" 2>&1 || ! grep -q -- "--count takes" "$dir/bad.out"; then
    echo "FAIL: dsm --count 5: expected exit status 2 and '--count takes'; got:"
    cat "$dir/bad.out"
    fails=$((fails + 1))
fi

# On a terminal (a pty from script(1)) domain 0 shows the size, elapsed and estimated time.
if command -v script >/dev/null 2>&1; then
    timeout -k 10 120 script -qec "'$b/cor-run' -n 2 '$b/cor-bench' udp-raw --sizes 0,1000 \
        --iters 0.02 --quiet" /dev/null >"$dir/tty.out" 2>&1
    if grep -q 'udp-raw: 1000 B ([0-9]*/[0-9]*), [0-9.]* s elapsed, about [0-9.]* s left' "$dir/tty.out"; then
        echo "ok: progress on a terminal"
    else
        echo "FAIL: no progress line on a terminal; got:"
        cat "$dir/tty.out"
        fails=$((fails + 1))
    fi
else
    echo "skip: progress on a terminal (script(1) from util-linux is not installed)"
fi

# Bad input is an error with a message, not a crash.
if "$b/cor-bench" pingpong --sizes 1,banana >"$dir/bad.out" 2>&1 ||
    ! grep -q "bad --sizes" "$dir/bad.out"; then
    echo "FAIL: --sizes banana: expected exit status 2 and 'bad --sizes'; got:"
    cat "$dir/bad.out"
    fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] && echo "PASS" && exit 0
echo "FAIL: $fails case(s)"
exit 1
