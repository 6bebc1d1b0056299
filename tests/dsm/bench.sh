#!/bin/sh
# The DSM benchmark: dsm_proc bench under cor-run, 2 domains over gm and over udp, then 4
# domains over gm (a write at a third domain invalidating 1 and 2 readers, the 4-domain
# barrier). Each run prints, beside the task API's 8 B round trip R measured in the same run:
# read section hit beside a pthread_rwlock read pair, 64 B read miss, a write invalidating a
# reader, remote lock, fetch-add, CAS, pipelined adds, fetch-add while the home computes,
# barrier (medians and p99 over ITERS operations). Not a pass/fail test: run it by hand from
# a build tree (sh tests/dsm/bench.sh [BUILD_DIR] [ITERS]) on a quiet machine.
set -eu
b=$(cd "${1:-build}" && pwd)
iters=${2:-10000}
COR_ROUTE_PATH=$b/cor/routes/udp/.libs:$b/cor/routes/gm/.libs
export COR_ROUTE_PATH
unset GM_NODES GM_NODE_MAP GM_NODE_ID GM_PROVIDER GM_SHM_NAMESPACE COR_ROUTES
work=$(mktemp -d "${TMPDIR:-/tmp}/dsm-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
run() { # DOMAINS ROUTE
    echo "== $1 domains over $2"
    timeout 600 "$b/apps/cor-run" -n "$1" --route "$2" "$b/tests/dsm/dsm_proc" bench "$work" \
        -i "$iters" 2>"$work/err" | sort -s -k2,2n || {
        cat "$work/err" >&2
        echo "bench.sh: $1 domains over $2 failed" >&2
        exit 1
    }
}
run 2 gm
run 2 udp
run 4 gm
