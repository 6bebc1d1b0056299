#!/bin/sh
# The tools work: gm-info reports this node; gm-pingpong (two processes,
# shm) measures both modes over a short size range with data checks and
# writes well-formed cor-bench CSV rows.  Not a benchmark: no timing limits.
. "$(dirname "$0")/gm-proc-lib.sh"
gmt_need "$GMT_INFO" "$GMT_PINGPONG"

unset GM_NODE_MAP GM_NODES GM_NODE_ID
export GM_PROVIDER=shm GM_SHM_NAMESPACE="gmtt$$" GM_HOST_NAME=gmt-smoke
fail=0

out=$(timeout -k 10 30 "$GMT_INFO" 2>&1)
if [ $? -ne 0 ] || ! echo "$out" | grep -q 'node id *1 ' || ! echo "$out" | grep -q 'gmt-smoke'; then
    echo "FAIL: gm-info (expected node id 1 and host gmt-smoke):"
    echo "$out"
    fail=1
else
    echo "PASS: gm-info"
fi

# Two nodes on one host (shm), as any two GM programs would be started.
export GM_NODES='1 gmt-pp-srv; 2 gmt-pp-cli'
unset GM_HOST_NAME
csv="$GMT_TMP/pp.csv"
gmt_bg pp_server env GM_NODE_ID=1 "$GMT_PINGPONG" --server --port 5 --timeout 60
gmt_bg pp_client env GM_NODE_ID=2 "$GMT_PINGPONG" --client gmt-pp-srv --port 5 \
    --max-size 65536 --iters 300 --check --csv "$csv" --timeout 60
if gmt_wait pp_client && gmt_wait pp_server; then
    echo "PASS: gm-pingpong ran"
    cat "$GMT_TMP/pp_client.log"
else
    fail=1
fi

# CSV: the header once, then 18 rows (0 and 1..65536: 18 sizes) per mode.
if [ -f "$csv" ]; then
    hdr=$(head -n 1 "$csv")
    if [ "$hdr" != "route,mode,bytes,ports,pairs,one_way_us,MBps" ]; then
        echo "FAIL: csv header is '$hdr'"
        fail=1
    fi
    bad=$(awk -F, 'NR > 1 && !($1 == "gm-raw" && ($2 == "pingpong" || $2 == "stream") &&
        $3 ~ /^[0-9]+$/ && $4 == 1 && $5 == 1 && $6 + 0 > 0 && ($3 == 0 || $7 + 0 > 0))' "$csv")
    rows_pp=$(grep -c '^gm-raw,pingpong,' "$csv")
    rows_st=$(grep -c '^gm-raw,stream,' "$csv")
    if [ -n "$bad" ] || [ "$rows_pp" -ne 18 ] || [ "$rows_st" -ne 18 ]; then
        echo "FAIL: csv rows (expected 18 pingpong and 18 stream rows, all well formed;"
        echo "      got $rows_pp and $rows_st; malformed: $bad)"
        fail=1
    else
        echo "PASS: csv has 18 pingpong and 18 stream rows"
    fi
else
    echo "FAIL: gm-pingpong wrote no csv"
    fail=1
fi

# Without --check the server answers from a buffer of its own (as fi_pingpong does)
# and provides each receive buffer again at once: every size still completes.
gmt_bg an_server env GM_NODE_ID=1 "$GMT_PINGPONG" --server --port 7 --timeout 60
gmt_bg an_client env GM_NODE_ID=2 "$GMT_PINGPONG" --client gmt-pp-srv --port 7 \
    --mode pingpong --max-size 65536 --iters 300 --timeout 60
if gmt_wait an_client && gmt_wait an_server; then
    rows=$(grep -c '^pingpong ' "$GMT_TMP/an_client.log")
    if [ "$rows" = 18 ]; then
        echo "PASS: gm-pingpong without --check answered every size"
    else
        echo "FAIL: gm-pingpong without --check: $rows pingpong rows, expected 18"
        cat "$GMT_TMP/an_client.log"
        fail=1
    fi
else
    fail=1
fi

# Both sides sleeping in gm_blocking_receive: each message rings the other process's
# doorbell (bell.c), and a stream's acks go out while its receiver sleeps.
gmt_bg bl_server env GM_NODE_ID=1 "$GMT_PINGPONG" --server --port 6 --blocking --timeout 60
gmt_bg bl_client env GM_NODE_ID=2 "$GMT_PINGPONG" --client gmt-pp-srv --port 6 --blocking \
    --max-size 8192 --iters 300 --check --timeout 60
if gmt_wait bl_client && gmt_wait bl_server; then
    echo "PASS: gm-pingpong --blocking ran"
else
    fail=1
fi

# Bad options are refused with a usage message, not a crash.
timeout -k 10 10 "$GMT_PINGPONG" --client >/dev/null 2>&1
rc=$?
if [ $rc -ne 64 ]; then
    echo "FAIL: gm-pingpong --client without a peer exited $rc, expected 64"
    fail=1
fi
timeout -k 10 10 "$GMT_PINGPONG" --client x --max-size 99999999 >/dev/null 2>&1
rc=$?
if [ $rc -ne 64 ]; then
    echo "FAIL: gm-pingpong --max-size 99999999 exited $rc, expected 64"
    fail=1
fi
exit $fail
