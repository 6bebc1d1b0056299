#!/bin/sh
# Both transports stay tested.  By default (GM_COMPAT_TRANSPORT=auto) the suites above run on
# libgm-compat's own shared-memory rings wherever the provider is shm (their tcp cases run on
# libfabric); this pass runs the in-process CUnit suites and the one-host process tests once
# more on libfabric's shm provider (GM_COMPAT_TRANSPORT=fabric).  (gm-env.sh is left out: it
# starts a process with an empty environment, which takes the default transport, and the two
# sides of a pair must use the same one.)  The process tests run their shm cases only
# (GMT_SHM_ONLY=1): their tcp halves, on libfabric either way, ran in this build's own
# gm-forgive.sh and gm-peer-death.sh.  At COR_TEST_SCALE=small (the sanitizer builds) they are
# only the pair and the peer death: the tools, lock file and forgiving cases run on libfabric
# in the normal build.
. "$(dirname "$0")/gm-proc-lib.sh"
here=$(dirname "$0")
fail=0
gmt_need "$GMT_INFO"
# The default (unset), on one host: the rings.
(unset GM_COMPAT_TRANSPORT GM_PROVIDER GM_NODES GM_NODE_MAP
    GM_VERBOSE=1 timeout -k 10 60 "$GMT_INFO") >"$GMT_TMP/default.log" 2>&1
if grep -q "opened port .* over own shm rings" "$GMT_TMP/default.log"; then
    echo "PASS: GM_COMPAT_TRANSPORT unset opens ports on the rings"
else
    echo "FAIL: GM_COMPAT_TRANSPORT unset did not open a port on the rings:"
    cat "$GMT_TMP/default.log"
    exit 1
fi
export GM_COMPAT_TRANSPORT=fabric GMT_SHM_ONLY=1
# The setting must reach the library: a port opened here says which transport it is on.
GM_VERBOSE=1 timeout -k 10 60 "$GMT_INFO" >"$GMT_TMP/info.log" 2>&1
if grep -q "opened port .* over libfabric" "$GMT_TMP/info.log"; then
    echo "PASS: GM_COMPAT_TRANSPORT=fabric opens ports on libfabric"
else
    echo "FAIL: GM_COMPAT_TRANSPORT=fabric did not open a port on libfabric:"
    cat "$GMT_TMP/info.log"
    exit 1
fi
for t in gm_basic_test gm_sizes_test gm_tokens_test gm_callbacks_test gm_order_test \
    gm_rdma_test gm_errors_test gm_config_test gm_wait_test; do
    gmt_need "$GMT_BUILDDIR/tests/$t"
    t0=$(date +%s)
    if timeout -k 10 300 "$GMT_BUILDDIR/tests/$t" >"$GMT_TMP/$t.log" 2>&1; then
        echo "PASS: $t on libfabric ($(($(date +%s) - t0)) s)"
    else
        echo "FAIL: $t on libfabric (exit $?)"
        tail -30 "$GMT_TMP/$t.log"
        fail=1
    fi
done
procs="gm-two-proc-shm gm-tools-smoke gm-peer-death gm-lockfile gm-forgive"
if [ "${COR_TEST_SCALE:-}" = small ]; then
    procs="gm-two-proc-shm gm-peer-death"
    echo "SKIP (COR_TEST_SCALE=small): gm-tools-smoke.sh gm-lockfile.sh gm-forgive.sh on libfabric"
fi
for t in $procs; do
    t0=$(date +%s)
    if timeout -k 10 600 sh "$here/$t.sh" >"$GMT_TMP/$t.log" 2>&1; then
        echo "PASS: $t.sh on libfabric ($(($(date +%s) - t0)) s)"
    else
        rc=$?
        if [ $rc = 77 ]; then
            echo "SKIP: $t.sh on libfabric"
        else
            echo "FAIL: $t.sh on libfabric (exit $rc)"
            tail -30 "$GMT_TMP/$t.log"
            fail=1
        fi
    fi
done
exit $fail
