# The CoR workload every launcher test runs on the namespace hosts (sourced after
# ../proc/common.sh and lib.sh, with 2 hosts made). The test defines:
#   launch N PROG ARGS...   starts N domains of PROG on the two compute hosts WL_HOSTS
#                           (default "h0 h1"), placed round robin (rank r on the (r mod 2)-th),
#                           and waits (bounded by $LIMIT itself); output as the launcher's
#   KILLED_RE               an extended regex the launcher's output must match after rank 3
#                           (on the second host) was killed; @PID@ stands for the victim's pid
# and calls workload_run LAUNCHER-NAME. Each step checks every domain's verdict, not just the
# launcher's status.
X=$PROC/exchange
PD=$PROC/peerdeath
DSMP=$B/tests/dsm/dsm_proc
WL_HOSTS=${WL_HOSTS:-h0 h1}
WL_A=${WL_HOSTS% *}
WL_B=${WL_HOSTS#* }
for p in "$X" "$PD" "$DSMP"; do [ -x "$p" ] || die "$p not built"; done
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES COR_BIND COR_GM_PROVIDER \
    COR_DSM_SHM
# Sanitizer builds: libpmix leaks a few bytes of its own in every domain (LeakSanitizer:
# "Direct leak of 3 byte(s) ... pmix_rte_init", 2 more in pmix_bfrops_base_value_load), which
# fails every step at exit; AddressSanitizer stays on, and the same programs' leaks are
# checked under cor-run by the other suites (as tests/launch/lib.sh does).
if [ "${COR_SANITIZED:-}" = yes ]; then
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
    export ASAN_OPTIONS
fi
if [ $SMALL = 1 ]; then MSGS=2000 DSMI=4 LIMIT=110; else MSGS=6000 DSMI=10 LIMIT=60; fi

# wl_step TAG N PROG ARGS...: runs it in the background (killed at exit if it hangs) and
# waits; sets RC.
wl_step() {
    wl_tag=$1
    shift
    run_bg "$wl_tag" launch "$@"
    wait_bg "$wl_tag"
}

# wl_expect TAG N PATTERN: N lines of TAG's output match PATTERN (grep -E), and status 0.
wl_expect() {
    # (the status alone: "exited 1 (124: timed out ...)" read as a timeout that was none)
    if [ $RC = 124 ]; then
        show "$1"
        die "$1: the launcher did not end within $LIMIT s (stopped)"
    fi
    [ $RC = 0 ] || { show "$1"; die "$1: the launcher exited $RC"; }
    wl_n=$(grep -cE "$3" "$WORK/$1.out")
    [ "$wl_n" = "$2" ] || { show "$1"; die "$1: $wl_n of $2 domains passed"; }
}

workload_run() {
    wl_l=$1
    for route in udp gm; do
        say "$wl_l: $route route, 4 domains x 2 tasks on 2 hosts, $MSGS messages of 0..1 MiB"
        rm -f "$WORK/addr"
        COR_ROUTE=$route wl_step ex$route 4 "$X" -t 2 -m $MSGS -x 1048576 -a "$WORK/addr"
        wl_expect ex$route 4 ': PASS '
        a=$(sed -n 's/^ADDR //p' "$WORK/addr")
        case "$a" in
        "$(host_addr $WL_A)":* | *"$(host_addr $WL_A)"*) ;;
        *) show ex$route; die "ex$route: domain 0 published '$a', not $WL_A's $(host_addr $WL_A)" ;;
        esac
        say "  every domain passed; domain 0 (on $WL_A) published $a"
    done
    # The DSM across hosts, over gm/tcp (udp is the route the kill step uses): cached objects
    # (sections, recalls), locks inside the mixed workload, barriers over all domains and
    # over a logical domain. COR_DSM_SHM is the default (1): namespace hosts share /dev/shm,
    # but the DSM uses shared memory only with the domains the bootstrap calls local
    # (cor_domain_local: the launcher's local peers), so between the hosts requests, grants
    # and barriers travel over the route, as between real hosts, and within a host in
    # shared memory. `counts` checks where each operation ran: the next domain (rank + 1) is
    # always on the other host, so its adds must be requests, never shared memory.
    for mode in counts cache mix barrier; do
        say "$wl_l: DSM $mode, 4 domains x 2 tasks on 2 hosts (gm)"
        COR_ROUTE=gm wl_step dsm$mode 4 "$DSMP" $mode "$WORK" -t 2 -i $DSMI -H 2
        wl_expect dsm$mode 4 '^domain [0-9]+: PASS'
    done
    grep '^domain 0: PASS counts' "$WORK/dsmcounts.out" | sed 's/^/  /'

    say "$wl_l: kill -9 of domain 3 (on $WL_B) while it streams to the others (udp)"
    rm -f "$WORK"/pid.* "$WORK"/flowing.*
    run_bg kill launch 4 "$PD" "$WORK" -t 2
    for r in 0 1 2 3; do
        wait_file "$WORK/pid.$r" 60 || { show kill; die "kill: domain $r did not start"; }
    done
    for r in 0 1 2; do
        wait_file "$WORK/flowing.$r" 60 || { show kill; die "kill: domain $r got nothing from 3"; }
    done
    vpid=$(cat "$WORK/pid.3")
    kill -KILL "$vpid"
    start=$(date +%s.%N)
    wait_bg kill
    el=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
    [ $RC != 0 ] || { show kill; die "kill: the launcher exited 0 after a domain was killed"; }
    [ $RC != 124 ] || { show kill; die "kill: the launcher hung (stopped after $LIMIT s)"; }
    re=$(echo "$KILLED_RE" | sed "s/@PID@/$vpid/g")
    grep -qE "$re" "$WORK/kill.out" "$WORK/kill.err" ||
        { show kill; die "kill: the launcher did not report the death (expected /$re/)"; }
    # The launcher's daemons end the others by signal, asynchronously: 10 s at most.
    for r in 0 1 2; do
        p=$(cat "$WORK/pid.$r")
        i=0
        while kill -0 "$p" 2>/dev/null; do
            i=$((i + 1))
            [ $i -gt 100 ] && die "kill: domain $r (pid $p) still runs 10 s after the launcher ended"
            sleep 0.1
        done
    done
    np=$(grep -c "domain [0-9]: PASS" "$WORK/kill.out")
    say "  launcher exited $RC $el s after the kill and reported it; $np survivors saw the death first"
}
