#!/bin/sh
# bench-gm.sh: the gm route's performance targets, measured beside raw GM (gm-pingpong) and
# raw libfabric (fi_pingpong -p shm) in the same run, on shm:
#   one-way small-message latency through the task API <= 2 us and <= 3x gm-pingpong's;
#   1 MiB one-way rate (cor-bench stream) >= 60% of fi_pingpong's;
#   multiport: aggregate rate over 1..4 GM ports at 64 KiB (reported);
#   multitask: 16 task pairs >= 80% of one pair (64 KiB), the pairs of a domain sharing one
#   send and one receive buffer as a single pair does; beside it (reported) the same with
#   --distinct-buffers, a send buffer per task and a receive buffer per message in flight,
#   whose megabytes per domain leave the L2 cache;
#   message rate (cor-bench rate, windows of 64) at the small size through the task API >= 50%
#   of gm-pingpong's stream, and 16 task pairs' aggregate >= 1 pair's.
# A benchmark, not a test: it reports and exits 0 unless a tool is missing.
# usage: bench-gm.sh BUILDDIR [--reps N] [--small BYTES] [--csv FILE]
# Each latency/rate is the best of REPS runs (default 3), the tools alternating.
set -u
B=${1:?usage: bench-gm.sh BUILDDIR [--reps N] [--small BYTES] [--csv FILE]}
shift
reps=3 small=8 csv=
while [ $# -gt 0 ]; do
    case $1 in
    --reps) reps=$2; shift 2 ;;
    --small) small=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    *) echo "bench-gm.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
CORRUN=$B/apps/cor-run BENCH=$B/apps/cor-bench PP=$B/libgm-compat/tools/gm-pingpong
FIPAIR=$(dirname "$0")/../../../libgm-compat/tools/fi-pingpong-pair.sh
GMPAIR=$(dirname "$0")/../../../libgm-compat/tools/gm-pingpong-pair.sh
for t in "$CORRUN" "$BENCH" "$PP"; do
    [ -x "$t" ] || { echo "bench-gm.sh: $t not built" >&2; exit 1; }
done
command -v fi_pingpong >/dev/null || { echo "bench-gm.sh: fi_pingpong missing (libfabric-bin)" >&2; exit 1; }
export COR_ROUTE_PATH=$B/cor/routes/gm/.libs:$B/cor/routes/udp/.libs
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gmbench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
big=1048576
ctl=$((41000 + $$ % 4000))

fi_run() { # SIZE ITERS -> "one_way_us"
    ctl=$((ctl + 1))
    "$FIPAIR" shm $ctl 120 -S "$1" -I "$2" >"$tmp/fc.log" 2>/dev/null
    awk 'NR == 2 { print $7 }' "$tmp/fc.log"
}
gm_run() { # SIZE ITERS -> "pingpong_one_way_us stream_MBps stream_us_per_message"
    rm -f "$tmp/gm.csv"
    GM_NODES='1 gmb-a; 2 gmb-b' GM_SHM_NAMESPACE=gmb$$ "$GMPAIR" "$PP" 120 --port 5 \
        --timeout 100 --min-size "$1" --max-size "$1" --iters "$2" --csv "$tmp/gm.csv" \
        >"$tmp/gc.log" 2>&1
    awk -F, '$2 == "pingpong" { p = $6 } $2 == "stream" { s = $7; m = $6 }
        END { print (p ? p : "-"), (s ? s : "-"), (m ? m : "-") }' "$tmp/gm.csv" 2>/dev/null ||
        echo "- - -"
}
cor_run() { # CSVTAG [cor-run options] -- cor-bench args: appends rows to $tmp/TAG.csv
    tag=$1
    shift
    ro=""
    while [ "$1" != -- ]; do ro="$ro $1"; shift; done
    shift
    # shellcheck disable=SC2086
    timeout 300 "$CORRUN" -n 2 --route gm $ro "$BENCH" "$@" --quiet --csv "$tmp/run.csv" \
        >"$tmp/cor.log" 2>&1 || { echo "bench-gm.sh: cor-bench $* failed" >&2; sed 's/^/  /' "$tmp/cor.log" >&2; }
    # cor-bench writes its CSV anew: keep the rows of every rep (and one header)
    [ -f "$tmp/run.csv" ] || return 0
    if [ -f "$tmp/$tag.csv" ]; then
        tail -n +2 "$tmp/run.csv" >>"$tmp/$tag.csv"
    else
        mv "$tmp/run.csv" "$tmp/$tag.csv"
    fi
    rm -f "$tmp/run.csv"
}
best() { # FILE COLUMN min|max
    awk -v c="$2" -v m="$3" '$c != "-" && $c != "" { v = $c + 0
        if (!n++ || (m == "min" ? v < b : v > b)) b = v } END { print n ? b : "-" }' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
ok() { awk -v r="$1" -v op="$2" -v l="$3" 'BEGIN { if (r == "-") { print "n/a"; exit }
    print ((op == "le") ? (r + 0 <= l + 0) : (r + 0 >= l + 0)) ? "meets" : "MISSES" }'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$tmp/fi_s" ; : >"$tmp/fi_b" ; : >"$tmp/gm_s" ; : >"$tmp/gm_b"
r=0
while [ $r -lt "$reps" ]; do
    fi_run "$small" 20000 >>"$tmp/fi_s"
    fi_run $big 300 >>"$tmp/fi_b"
    gm_run "$small" 20000 >>"$tmp/gm_s"
    gm_run $big 300 >>"$tmp/gm_b"
    # 20000 round trips at the small size, as gm-pingpong and fi_pingpong make (cor-bench's
    # default 2000 in a fresh process measured its warm-up: 3.9-8.3 us one-way against 2.3-2.5)
    cor_run pp -- pingpong --sizes "$small" --reps 1 --iters 10
    cor_run pp -- pingpong --sizes "$big" --reps 1
    cor_run st -- stream --sizes "64K,$big" --reps 1
    cor_run rt -- rate --sizes "$small" --pairs 1,16 --reps 1
    r=$((r + 1))
done
cor_run mp --ports 4 -- multiport --sizes 64K --reps "$reps"
cor_run mt -- multitask --sizes 64K --pairs 1,2,4,8,16 --reps "$reps"
cor_run md -- multitask --sizes 64K --pairs 1,16 --reps "$reps" --distinct-buffers

fi_lat=$(best "$tmp/fi_s" 1 min)
fi_big=$(best "$tmp/fi_b" 1 min)
fi_rate=$(awk -v l="$fi_big" -v s=$big 'BEGIN { if (l + 0 > 0) printf "%.1f", s / l; else print "-" }')
gm_lat=$(best "$tmp/gm_s" 1 min)
gm_rate=$(best "$tmp/gm_b" 2 max)
gm_msg_us=$(best "$tmp/gm_s" 3 min)
F='BEGIN { FS = "," }'
cor_lat=$(awk "$F"' $2 == "pingpong" && $3 == '"$small"' { print $6 }' "$tmp/pp.csv" | sort -g | head -1)
cor_pp_big=$(awk "$F"' $2 == "pingpong" && $3 == '$big' { print $7 }' "$tmp/pp.csv" | sort -g | tail -1)
cor_rate=$(awk "$F"' $2 == "stream" && $3 == '$big' { print $7 }' "$tmp/st.csv" | sort -g | tail -1)
cor_64k=$(awk "$F"' $2 == "stream" && $3 == 65536 { print $7 }' "$tmp/st.csv" | sort -g | tail -1)
# message rates in M msg/s: one message every one_way_us
rate_of() { awk "$F"' $2 == "rate" && $3 == '"$small"' && $5 == '"$1"' { print 1 / $6 }' \
    "$tmp/rt.csv" 2>/dev/null | sort -g | tail -1; }
cor_mr=$(rate_of 1) cor_mr16=$(rate_of 16)
gm_mr=$(awk -v u="$gm_msg_us" 'BEGIN { if (u + 0 > 0) printf "%.3f", 1 / u; else print "-" }')

echo "# gm route vs gm-pingpong vs fi_pingpong (shm), $(date -u +%FT%TZ), $(nproc) cpus"
echo "# load average before: $load0; best of $reps"
printf "%-44s %10s %10s %10s %7s  %s\n" measure fi_pingpong gm-pingpong cor-gm ratio target
r1=$(ratio "${cor_lat:--}" "$gm_lat")
printf "%-44s %10s %10s %10s %7s  %s\n" "one-way us, $small B (pingpong)" "$fi_lat" "$gm_lat" \
    "${cor_lat:--}" "$r1" "<= 2 us: $(ok "${cor_lat:--}" le 2); <= 3x gm: $(ok "$r1" le 3)"
r2=$(ratio "${cor_rate:--}" "$fi_rate")
printf "%-44s %10s %10s %10s %7s  %s\n" "MB/s, 1 MiB (cor stream vs fi one-way)" "$fi_rate" \
    "$gm_rate" "${cor_rate:--}" "$r2" ">= 0.60 x fi: $(ok "$r2" ge 0.60)"
printf "%-44s %10s %10s %10s\n" "MB/s, 1 MiB pingpong (reference)" "$fi_rate" "-" "${cor_pp_big:--}"
printf "%-44s %10s %10s %10s\n" "MB/s, 64 KiB stream (1 port, 1 pair)" "-" "-" "${cor_64k:--}"
r4=$(ratio "${cor_mr:--}" "$gm_mr")
printf "%-44s %10s %10s %10s %7s  %s\n" "M msg/s, $small B (cor rate vs gm stream)" "-" "$gm_mr" \
    "$(printf '%.3f' "${cor_mr:-0}")" "$r4" ">= 0.50 x gm: $(ok "$r4" ge 0.50)"
r5=$(ratio "${cor_mr16:--}" "${cor_mr:--}")
printf "%-44s %10s %10s %10s %7s  %s\n" "M msg/s, $small B, 16 pairs (vs 1 pair)" "-" "-" \
    "$(printf '%.3f' "${cor_mr16:-0}")" "$r5" ">= 1 pair: $(ok "$r5" ge 1.0)"
echo "# multiport (64 KiB, one task pair per port): ports MB/s"
awk -F, '$2 == "multiport" { if (!($4 in b) || $7 + 0 > b[$4]) b[$4] = $7 + 0 }
    END { for (p = 1; p <= 4; p++) if (p in b) printf "  %d %.1f\n", p, b[p] }' "$tmp/mp.csv" 2>/dev/null
echo "# multitask (64 KiB): pairs MB/s"
awk -F, '$2 == "multitask" { if (!($5 in b) || $7 + 0 > b[$5]) b[$5] = $7 + 0 }
    END { for (p in b) printf "  %d %.1f\n", p, b[p] }' "$tmp/mt.csv" 2>/dev/null | sort -n
one=$(awk -F, '$2 == "multitask" && $5 == 1 { print $7 }' "$tmp/mt.csv" 2>/dev/null | sort -g | tail -1)
six=$(awk -F, '$2 == "multitask" && $5 == 16 { print $7 }' "$tmp/mt.csv" 2>/dev/null | sort -g | tail -1)
r3=$(ratio "${six:--}" "${one:--}")
echo "  16 pairs / 1 pair = $r3 (>= 0.80: $(ok "$r3" ge 0.80))"
one=$(awk -F, '$2 == "multitask" && $5 == 1 { print $7 }' "$tmp/md.csv" 2>/dev/null | sort -g | tail -1)
six=$(awk -F, '$2 == "multitask" && $5 == 16 { print $7 }' "$tmp/md.csv" 2>/dev/null | sort -g | tail -1)
echo "# multitask, --distinct-buffers (64 KiB): 1 pair ${one:--}, 16 pairs ${six:--} MB/s"
echo "  16 pairs / 1 pair = $(ratio "${six:--}" "${one:--}") (reported: 16 pairs' buffers exceed a core's L2)"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$csv" ] && cat "$tmp"/pp.csv "$tmp"/st.csv "$tmp"/rt.csv "$tmp"/mp.csv "$tmp"/mt.csv \
    "$tmp"/md.csv >>"$csv" 2>/dev/null
exit 0
