#!/bin/sh
# bench-vs-fabric.sh: raw GM (gm-pingpong over libgm-compat) beside raw
# libfabric (fi_pingpong, Debian libfabric-bin) in the same run, on shm and
# on tcp (127.0.0.1), with the ratios the libgm-compat targets name:
#   shm: small-message one-way latency <= 1.5x fi_pingpong's;
#        1 MiB one-way rate >= 70% of fi_pingpong's;
#   tcp: small-message one-way latency <= 1.5x fi_pingpong's;
#   shm, every size from --sweep-min to --sweep-max (powers of two, default
#        1 KiB .. 64 KiB): pingpong one-way <= 1.5x fi_pingpong's, and no
#        step of more than 2x between neighbouring sizes (pingpong one-way or
#        stream time per message: "STEP" marks one).
# A benchmark, not a test: it reports, it never fails because of timing
# (exit 0 unless a tool is missing or the options are wrong).
#
# usage: bench-vs-fabric.sh [--builddir DIR] [--providers "shm tcp"]
#                           [--small BYTES] [--iters N] [--reps N] [--csv FILE]
#                           [--sweep-min BYTES] [--sweep-max BYTES] [--sweep-iters N]
#                           [--no-sweep | --sweep-only] [--fifo]
# Each measurement runs REPS times (default 3), fi_pingpong and gm-pingpong
# alternating, and the best of each is kept (lowest latency, highest rate):
# shared machines are noisy.
# --fifo runs both tools' processes at SCHED_FIFO priority 1 (chrt; needs the
# right to): on a machine loaded by others, whole runs of either tool otherwise
# last 20-300x their round trip (each process waits for a CPU), and only this
# measures the tools (docs/measurements/libgm-compat.md, 2026-11-28).
# DIR is the libgm-compat build directory (default: the current directory,
# else /tmp/b-gmtests/libgm-compat).  fi_pingpong's usec/xfer is one way
# (half a round trip); its MB/sec at 1 MiB is size / one-way time.

builddir=
providers="shm tcp"
small=8
iters=20000
reps=3
big=1048576
big_iters=300
csv=
sweep_min=1024
sweep_max=65536
sweep_iters=5000
sweep_only=0
fifo=
while [ $# -gt 0 ]; do
    case $1 in
    --builddir) builddir=$2; shift 2 ;;
    --providers) providers=$2; shift 2 ;;
    --small) small=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --sweep-min) sweep_min=$2; shift 2 ;;
    --sweep-max) sweep_max=$2; shift 2 ;;
    --sweep-iters) sweep_iters=$2; shift 2 ;;
    --no-sweep) sweep_max=0; shift ;;
    --sweep-only) sweep_only=1; shift ;;
    --fifo) fifo="chrt -f 1"; shift ;;
    -h | --help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "bench-vs-fabric.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
if [ -z "$builddir" ]; then
    if [ -x ./tools/gm-pingpong ]; then builddir=.; else builddir=/tmp/b-gmtests/libgm-compat; fi
fi
pp="$builddir/tools/gm-pingpong"
if [ ! -x "$pp" ]; then
    echo "bench-vs-fabric.sh: $pp not built (make -C libgm-compat)" >&2
    exit 1
fi
if ! command -v fi_pingpong >/dev/null 2>&1; then
    echo "bench-vs-fabric.sh: fi_pingpong not found (Debian package libfabric-bin)" >&2
    exit 1
fi

if [ -n "$fifo" ] && ! $fifo true 2>/dev/null; then
    echo "bench-vs-fabric.sh: --fifo: chrt -f 1 is not allowed here" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gmbench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

ctl_port=$((40000 + $$ % 5000))

# fi_one PROV SIZE ITERS: prints "one_way_us MBps" from the client's line.
fi_one() {
    prov=$1 size=$2 n=$3
    ctl_port=$((ctl_port + 1))
    $fifo "$(dirname "$0")/fi-pingpong-pair.sh" "$prov" "$ctl_port" 120 -S "$size" -I "$n" \
        >"$tmp/fi_cli.log" 2>&1
    # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    awk 'NR == 2 { print $7, $6 }' "$tmp/fi_cli.log"
}

# gm_run PROV MIN MAX ITERS OUT: one gm-pingpong client/server pair over the
# sizes MIN..MAX, both modes; its CSV rows go to OUT.  Fails (with the logs
# on stderr) if the client did.
gm_run() {
    prov=$1 min=$2 max=$3 n=$4 out=$5
    case $prov in
    shm)
        nodes='1 gmbench-a; 2 gmbench-b'
        fprov=shm
        ;;
    tcp)
        base=$((12000 + ($$ % 40) * 200))
        nodes="1 gmbench-a 127.0.0.1:$base; 2 gmbench-b 127.0.0.1:$((base + 100))"
        fprov='tcp;ofi_rxm'
        ;;
    esac
    rm -f "$out"
    env GM_NODES="$nodes" GM_PROVIDER="$fprov" GM_SHM_NAMESPACE="gmbench$$" \
        $fifo "$(dirname "$0")/gm-pingpong-pair.sh" "$pp" 300 --port 5 --timeout 280 \
        --min-size "$min" --max-size "$max" --iters "$n" --csv "$out" >"$tmp/gm_cli.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || [ ! -f "$out" ]; then
        echo "gm-pingpong ($prov, $min..$max B) failed (exit $rc):" >&2
        cat "$tmp/gm_cli.log" >&2
        return 1
    fi
    [ -n "$csv" ] && tail -n +2 "$out" >>"$csv.gmrows"
    return 0
}

# gm_one PROV SIZE ITERS: runs both modes; prints
# "pingpong_one_way_us pingpong_MBps stream_one_way_us stream_MBps".
gm_one() {
    out="$tmp/gm_$1_$2.csv"
    if ! gm_run "$1" "$2" "$2" "$3" "$out"; then
        echo "- - - -"
        return
    fi
    awk -F, '$2 == "pingpong" { p = $6 " " $7 } $2 == "stream" { s = $6 " " $7 }
        END { print (p ? p : "- -"), (s ? s : "- -") }' "$out"
}

# best_of FILE: per column, the lowest (odd columns: latencies) or highest
# (even columns: rates) value of the lines in FILE, "-" kept where a run failed.
best_of() {
    awk '{ for (i = 1; i <= NF; i++) if ($i != "-") {
               if (!(i in b) || (i % 2 ? $i + 0 < b[i] : $i + 0 > b[i])) b[i] = $i + 0 }
           if (NF > n) n = NF }
         END { for (i = 1; i <= n; i++) printf "%s%s", (i in b ? sprintf("%.3f", b[i]) : "-"),
               (i < n ? " " : "\n") }' "$1"
}

# measure PROV SIZE FI_ITERS GM_ITERS: REPS alternating runs; sets fi_res
# ("lat rate") and gm_res ("pp_lat pp_rate stream_lat stream_rate"), best of each.
measure() {
    : >"$tmp/fi_runs"
    : >"$tmp/gm_runs"
    r=0
    while [ $r -lt "$reps" ]; do
        fi_one "$2" "$3" "$4" >>"$tmp/fi_runs"
        gm_one "$1" "$3" "$5" >>"$tmp/gm_runs"
        r=$((r + 1))
    done
    fi_res=$(best_of "$tmp/fi_runs")
    gm_res=$(best_of "$tmp/gm_runs")
}

ratio() { # ratio A B -> A/B with 2 decimals, or "-"
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}
verdict() { # verdict RATIO OP LIMIT
    awk -v r="$1" -v op="$2" -v l="$3" 'BEGIN {
        if (r == "-") { print "n/a"; exit }
        ok = (op == "le") ? (r + 0 <= l + 0) : (r + 0 >= l + 0)
        print ok ? "meets target" : "MISSES target" }'
}

echo "# bench-vs-fabric: gm-pingpong (libgm-compat) vs fi_pingpong, same run, $(date -u +%FT%TZ)"
echo "# host $(uname -n), $(nproc) cpus, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
    "small message = $small B, large = $big B; best of $reps${fifo:+; both tools at SCHED_FIFO}"
printf "%-5s %-28s %12s %12s %7s  %s\n" prov measure fi_pingpong gm-pingpong ratio target
for prov in $providers; do
    [ "$sweep_only" = 1 ] && break
    case $prov in
    shm) fprov=shm ;;
    tcp) fprov='tcp;ofi_rxm' ;;
    *) echo "bench-vs-fabric.sh: provider $prov not known (shm, tcp)" >&2; continue ;;
    esac
    measure "$prov" "$fprov" "$small" "$iters" "$iters"
    set -- $fi_res
    fi_lat=${1:--}
    set -- $gm_res
    gm_lat=${1:--} gm_stream_small=${4:--}
    r=$(ratio "$gm_lat" "$fi_lat")
    printf "%-5s %-28s %12s %12s %7s  %s\n" "$prov" "one-way us, $small B (pingpong)" \
        "$fi_lat" "$gm_lat" "$r" "<= 1.5: $(verdict "$r" le 1.5)"
    [ -n "$csv" ] && [ "$fi_lat" != - ] &&
        echo "fi_pingpong-$prov,pingpong,$small,1,1,$fi_lat,$(awk -v s="$small" -v l="$fi_lat" 'BEGIN{printf "%.3f", s/l}')" >>"$csv.firows"
    if [ "$prov" = shm ]; then
        measure "$prov" "$fprov" "$big" "$big_iters" "$iters"
        set -- $fi_res
        fi_big_lat=${1:--}
        set -- $gm_res
        gm_big_pp_rate=${2:--} gm_big_stream_rate=${4:--}
        # fi_pingpong's MB/sec counts both directions of the round trip:
        # size / one-way time, the same as its one-way rate.
        fi_rate=$(awk -v s="$big" -v l="$fi_big_lat" 'BEGIN { if (l + 0 > 0) printf "%.1f", s / l; else print "-" }')
        r=$(ratio "$gm_big_stream_rate" "$fi_rate")
        printf "%-5s %-28s %12s %12s %7s  %s\n" "$prov" "MB/s, 1 MiB (gm stream)" "$fi_rate" \
            "$gm_big_stream_rate" "$r" ">= 0.70: $(verdict "$r" ge 0.70)"
        r=$(ratio "$gm_big_pp_rate" "$fi_rate")
        printf "%-5s %-28s %12s %12s %7s  %s\n" "$prov" "MB/s, 1 MiB (gm pingpong)" "$fi_rate" \
            "$gm_big_pp_rate" "$r" "(for reference)"
        [ -n "$csv" ] && [ "$fi_big_lat" != - ] &&
            echo "fi_pingpong-$prov,pingpong,$big,1,1,$fi_big_lat,$fi_rate" >>"$csv.firows"
    fi
    echo "      (gm stream rate at $small B: $gm_stream_small MB/s)"
done
# ---- shm size sweep: per size, gm-pingpong (one run over all sizes) against
# fi_pingpong (a run per size), REPS alternating rounds, best of each.
sweep_sizes() {
    s=$sweep_min
    while [ "$s" -le "$sweep_max" ]; do
        echo "$s"
        s=$((s * 2))
    done
}
if [ "$sweep_max" -gt 0 ] && echo " $providers " | grep -q ' shm '; then
    : >"$tmp/sweep_gm"
    : >"$tmp/sweep_fi"
    r=0
    while [ $r -lt "$reps" ]; do
        for size in $(sweep_sizes); do
            echo "$size $(fi_one shm "$size" "$sweep_iters")" >>"$tmp/sweep_fi"
        done
        # size pingpong_us stream_us
        gm_run shm "$sweep_min" "$sweep_max" "$sweep_iters" "$tmp/sweep.csv" &&
            awk -F, '$2 == "pingpong" { p[$3] = $6 } $2 == "stream" { s[$3] = $6 }
                END { for (k in p) print k, p[k], (k in s ? s[k] : "-") }' \
                "$tmp/sweep.csv" >>"$tmp/sweep_gm"
        r=$((r + 1))
    done
    echo "# shm by size, best of $reps: one-way us (gm stream: us per message)"
    printf "%-8s %11s %11s %7s  %-22s %11s\n" bytes fi_pingpong gm-pingpong ratio \
        "<= 1.5x fi_pingpong" "gm stream"
    # Per size: best fi, best gm pingpong and stream; then ratio, verdict and
    # steps (> 2x the previous size's time) of gm pingpong and stream.
    awk -v sizes="$(sweep_sizes | tr '\n' ' ')" '
        function keep(a, k, v) { if (v != "-" && v + 0 > 0 && (!(k in a) || v + 0 < a[k])) a[k] = v + 0 }
        FILENAME ~ /sweep_fi$/ { keep(fi, $1, $2) }
        FILENAME ~ /sweep_gm$/ { keep(gp, $1, $2); keep(gs, $1, $3) }
        END {
            n = split(sizes, sz, " ")
            for (i = 1; i <= n; i++) {
                k = sz[i]
                f = (k in fi) ? sprintf("%.3f", fi[k]) : "-"
                g = (k in gp) ? sprintf("%.3f", gp[k]) : "-"
                st = (k in gs) ? sprintf("%.3f", gs[k]) : "-"
                r = ((k in fi) && (k in gp)) ? sprintf("%.2f", gp[k] / fi[k]) : "-"
                v = (r == "-") ? "n/a" : (r + 0 <= 1.5 ? "meets target" : "MISSES target")
                step = ""
                if (i > 1 && (k in gp) && (sz[i - 1] in gp) && gp[k] > 2 * gp[sz[i - 1]])
                    step = step " STEP(pingpong " sprintf("%.1f", gp[k] / gp[sz[i - 1]]) "x" \
                        ((k in fi) && (sz[i - 1] in fi) && fi[k] > 2 * fi[sz[i - 1]] ? ", fi_pingpong too)" : ")")
                if (i > 1 && (k in gs) && (sz[i - 1] in gs) && gs[k] > 2 * gs[sz[i - 1]])
                    step = step " STEP(stream " sprintf("%.1f", gs[k] / gs[sz[i - 1]]) "x)"
                printf "%-8s %11s %11s %7s  %-22s %11s%s\n", k, f, g, r, v, st, step
            }
        }' "$tmp/sweep_fi" "$tmp/sweep_gm"
fi
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$csv" ]; then
    [ -s "$csv" ] || echo "route,mode,bytes,ports,pairs,one_way_us,MBps" >"$csv"
    cat "$csv.gmrows" "$csv.firows" 2>/dev/null >>"$csv"
    rm -f "$csv.gmrows" "$csv.firows"
    echo "# rows appended to $csv"
fi
exit 0
