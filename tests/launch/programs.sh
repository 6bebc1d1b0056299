# Every CoR program, unchanged, under a launcher (sourced after common.sh and lib.sh; used by
# mpirun.sh and srun.sh, and by the namespace hosts' tests with their own launch function).
#
#   launch_examples LAUNCH ROUTE       hello (4 domains), dsm_count (3)
#   launch_bench LAUNCH ROUTE          cor-bench, every mode, smallest sizes (2 domains; dsm 3)
#   launch_dsm_apps LAUNCH ROUTE       gups and lu, small sizes, checked (2 domains)
# LAUNCH is a function taking "N cmd args..." (launch_mpirun, launch_srun); ROUTE is udp, gm
# (libfabric shm on one host) or gm-tcp (gm over libfabric's tcp provider). Each run is
# checked by what the program prints; a failure ends the test (die) with its output.

HELLO=$B/apps/examples/hello
DSMCOUNT=$B/apps/examples/dsm_count
BENCH=$B/apps/cor-bench
GUPS=$B/apps/dsm/gups
LU=$B/apps/dsm/lu

# launch_route_env ROUTE: the environment words for ROUTE.
launch_route_env() {
    case $1 in
    udp) echo "COR_ROUTE=udp" ;;
    gm) echo "COR_ROUTE=gm" ;;
    gm-tcp) echo "COR_ROUTE=gm COR_GM_PROVIDER=tcp" ;;
    *) die "unknown route '$1'" ;;
    esac
}

# lrun TAG LAUNCH ROUTE N cmd...: runs it; sets RC; output in $WORK/TAG.{out,err}.
lrun() {
    lr_tag=$1 lr_launch=$2 lr_route=$3
    shift 3
    # shellcheck disable=SC2046 # the route's words
    (
        export $(launch_route_env "$lr_route")
        "$lr_launch" "$@"
    ) >"$WORK/$lr_tag.out" 2>"$WORK/$lr_tag.err"
    RC=$?
}

# lexpect TAG N PATTERN: the output has N lines matching PATTERN and the job exited 0.
lexpect() {
    [ "$RC" = 0 ] || { show "$1"; die "$1: exited $RC (124 = timed out)"; }
    le_n=$(grep -c -- "$3" "$WORK/$1.out")
    [ "$le_n" -ge "$2" ] || { show "$1"; die "$1: $le_n lines match '$3', expected $2"; }
}

launch_examples() {
    le_l=$1 le_r=$2
    lrun hello-$le_r "$le_l" "$le_r" 4 "$HELLO"
    lexpect hello-$le_r 8 '^domain [0-3] task [01] got "hello from task [01] of domain [0-3]"$'
    lrun count-$le_r "$le_l" "$le_r" 3 "$DSMCOUNT"
    lexpect count-$le_r 3 '^domain [0-2] added 1000$'
    say "  $le_r: hello (4 domains), dsm_count (3 domains)"
}

# lbench TAG LAUNCH ROUTE N ROWS cor-bench args: ROWS CSV rows, each with a positive time.
lbench() {
    lb_tag=$1 lb_l=$2 lb_r=$3 lb_n=$4 lb_rows=$5
    shift 5
    lrun "$lb_tag" "$lb_l" "$lb_r" "$lb_n" "$BENCH" "$@" --quiet --csv "$WORK/$lb_tag.csv"
    [ "$RC" = 0 ] || { show "$lb_tag"; die "$lb_tag: cor-bench $* exited $RC"; }
    lb_got=$(($(wc -l <"$WORK/$lb_tag.csv") - 1))
    [ "$lb_got" -eq "$lb_rows" ] || { cat "$WORK/$lb_tag.csv"; die "$lb_tag: $lb_got rows, expected $lb_rows"; }
}

launch_bench() {
    lB_l=$1 lB_r=$2 s=0,1,70000
    lbench pp-$lB_r "$lB_l" "$lB_r" 2 3 pingpong --sizes $s --iters 0.02 --verify
    lbench st-$lB_r "$lB_l" "$lB_r" 2 3 stream --sizes $s --iters 0.02 --verify
    lbench sta-$lB_r "$lB_l" "$lB_r" 2 3 stream --sizes $s --iters 0.02 --recv-alloc --verify
    lbench rpp-$lB_r "$lB_l" "$lB_r" 2 3 pingpong --raw --sizes $s --iters 0.02 --verify
    lbench rst-$lB_r "$lB_l" "$lB_r" 2 3 stream --raw --sizes $s --iters 0.02 --verify
    lbench mt-$lB_r "$lB_l" "$lB_r" 2 4 multitask --sizes 1000,70000 --pairs 1,2 --iters 0.02 --verify
    lbench rate-$lB_r "$lB_l" "$lB_r" 2 2 rate --sizes 1,4K --pairs 1 --iters 0.02 --verify
    lbench rrate-$lB_r "$lB_l" "$lB_r" 2 1 rate --raw --sizes 1 --iters 0.02 --verify
    (
        COR_PORTS=2
        export COR_PORTS
        lbench mp-$lB_r "$lB_l" "$lB_r" 2 4 multiport --sizes 1000,70000 --iters 0.02 --verify
    ) || exit 1
    if [ "$lB_r" = udp ]; then
        lbench uraw "$lB_l" udp 2 4 udp-raw --sizes 0,1000 --iters 0.02 --verify
        lbench rsock "$lB_l" udp 2 1 rate --baseline udp --sizes 1 --iters 0.02 --verify
    fi
    lrun dsm-$lB_r "$lB_l" "$lB_r" 3 "$BENCH" dsm --count 20 --sizes 64 --csv "$WORK/dsm-$lB_r.csv"
    [ "$RC" = 0 ] || { show dsm-$lB_r; die "dsm-$lB_r: cor-bench dsm exited $RC"; }
    grep -q ",3,R," "$WORK/dsm-$lB_r.csv" || { cat "$WORK/dsm-$lB_r.csv"; die "dsm-$lB_r: no R row"; }
    say "  $lB_r: cor-bench pingpong, stream (+recv-alloc), raw pingpong/stream, multitask, rate (+raw), multiport, dsm"
}

launch_dsm_apps() {
    ld_l=$1 ld_r=$2
    lrun gups-$ld_r "$ld_l" "$ld_r" 2 "$GUPS" -t 2 -T 4096 -u 20000
    lexpect gups-$ld_r 1 '^gups: .*M updates/s (counts exact in every domain)$'
    lrun lu-$ld_r "$ld_l" "$ld_r" 2 "$LU" -n 128 -b 32
    lexpect lu-$ld_r 1 '^lu: check PASS: '
    say "  $ld_r: gups, lu"
}
