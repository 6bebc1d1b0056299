# Shared by the libgm-compat process tests (sourced, not run).
# Runs from the libgm-compat build directory (automake's test cwd) unless
# GMT_BUILDDIR says otherwise.  Every process runs under timeout(1); every
# background process is killed and every temp file removed by the trap.

GMT_BUILDDIR=${GMT_BUILDDIR:-.}
GMT_PEER="$GMT_BUILDDIR/tests/gm-test-peer"
GMT_PINGPONG="$GMT_BUILDDIR/tools/gm-pingpong"
GMT_INFO="$GMT_BUILDDIR/tools/gm-info"
GMT_TIMEOUT=${GMT_TIMEOUT:-90}
GMT_PIDS=""
GMT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gmt.XXXXXX") || exit 99
# Every port holds a lock file named by namespace, node and port, on every provider: tests
# that run at once (make -j) must not share one, or the second opener gets GM_BUSY.  Tests
# that name their own override this.
export GM_SHM_NAMESPACE="gmtp$$"

gmt_cleanup() {
    for p in $GMT_PIDS; do
        kill "$p" 2>/dev/null
    done
    for p in $GMT_PIDS; do
        wait "$p" 2>/dev/null
    done
    [ -n "$GMT_EXTRA_CLEANUP" ] && eval "$GMT_EXTRA_CLEANUP"
    rm -rf "$GMT_TMP"
}
trap gmt_cleanup EXIT
trap 'exit 130' INT TERM

gmt_need() {
    for f in "$@"; do
        if [ ! -x "$f" ]; then
            echo "SKIP: $f not built" >&2
            exit 77
        fi
    done
}

# A TCP port base unlikely to collide with a concurrent run (below the
# ephemeral range); each node uses base..base+15.
gmt_port_base() {
    echo $((12000 + ($$ % 40) * 200))
}

# gmt_bg NAME CMD...: start CMD in the background under timeout, output to
# $GMT_TMP/NAME.log; its pid is remembered for the trap and gmt_wait.
gmt_bg() {
    name=$1
    shift
    timeout -k 5 "$GMT_TIMEOUT" "$@" >"$GMT_TMP/$name.log" 2>&1 &
    GMT_PIDS="$GMT_PIDS $!"
    eval "GMT_PID_$name=$!"
}

# gmt_wait NAME: wait for it; prints its log on failure; returns its status.
gmt_wait() {
    eval "pid=\$GMT_PID_$1"
    wait "$pid"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "--- $1 exited with $rc (124 = timed out); its output:" >&2
        cat "$GMT_TMP/$1.log" >&2
    fi
    return "$rc"
}

# gmt_pair TAG SERVER_ENV CLIENT_ENV PEER [ARGS...]: run gm-test-peer as
# server and client (server first), each with its own environment words.
gmt_pair() {
    tag=$1 senv=$2 cenv=$3 peer=$4
    shift 4
    gmt_bg "${tag}_server" env $senv "$GMT_PEER" --server "$@"
    gmt_bg "${tag}_client" env $cenv "$GMT_PEER" --client "$peer" "$@"
    gmt_wait "${tag}_client"
    c=$?
    gmt_wait "${tag}_server"
    s=$?
    if [ "$c" -eq 0 ] && [ "$s" -eq 0 ]; then
        echo "PASS: $tag: $(tail -n 1 "$GMT_TMP/${tag}_client.log")"
        return 0
    fi
    echo "FAIL: $tag (client $c, server $s)"
    return 1
}

# gmt_scaled N: N, or N/4 under COR_TEST_SCALE=small (sanitizer builds).
gmt_scaled() {
    if [ "$COR_TEST_SCALE" = small ]; then echo $(($1 / 4)); else echo "$1"; fi
}
