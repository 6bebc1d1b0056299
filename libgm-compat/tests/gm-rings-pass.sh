#!/bin/sh
# Both transports stay tested.  By default (GM_COMPAT_TRANSPORT=fabric) the suites above run on
# libfabric's shm provider; this pass runs the in-process CUnit suites and the one-host process
# tests once more on libgm-compat's own shared-memory rings (GM_COMPAT_TRANSPORT=auto: the
# rings wherever the provider is shm; the tcp cases stay on libfabric).  (gm-env.sh is left
# out: it starts a process with an empty environment, which takes the default transport, and
# the two sides of a pair must use the same one.)  The process tests run their shm cases
# only (GMT_SHM_ONLY=1): their tcp halves, which the rings do not change, ran in this build's
# own gm-forgive.sh and gm-peer-death.sh.  At COR_TEST_SCALE=small (the sanitizer builds)
# they are only the pair and the peer death: the tools, lock file and forgiving cases run on
# the rings in the normal build.
. "$(dirname "$0")/gm-proc-lib.sh"
here=$(dirname "$0")
export GM_COMPAT_TRANSPORT=auto GMT_SHM_ONLY=1
fail=0
# The setting must reach the library: a port opened here says which transport it is on.
gmt_need "$GMT_INFO"
GM_VERBOSE=1 timeout 60 "$GMT_INFO" >"$GMT_TMP/info.log" 2>&1
if grep -q "opened port .* over own shm rings" "$GMT_TMP/info.log"; then
    echo "PASS: GM_COMPAT_TRANSPORT=auto opens ports on the rings"
else
    echo "FAIL: GM_COMPAT_TRANSPORT=auto did not open a port on the rings:"
    cat "$GMT_TMP/info.log"
    exit 1
fi
for t in gm_basic_test gm_sizes_test gm_tokens_test gm_callbacks_test gm_order_test \
    gm_rdma_test gm_errors_test gm_config_test gm_wait_test; do
    gmt_need "$GMT_BUILDDIR/tests/$t"
    t0=$(date +%s)
    if timeout 300 "$GMT_BUILDDIR/tests/$t" >"$GMT_TMP/$t.log" 2>&1; then
        echo "PASS: $t on the rings ($(($(date +%s) - t0)) s)"
    else
        echo "FAIL: $t on the rings (exit $?)"
        tail -30 "$GMT_TMP/$t.log"
        fail=1
    fi
done
procs="gm-two-proc-shm gm-tools-smoke gm-peer-death gm-lockfile gm-forgive"
if [ "${COR_TEST_SCALE:-}" = small ]; then
    procs="gm-two-proc-shm gm-peer-death"
    echo "SKIP (COR_TEST_SCALE=small): gm-tools-smoke.sh gm-lockfile.sh gm-forgive.sh on the rings"
fi
for t in $procs; do
    t0=$(date +%s)
    if timeout 600 sh "$here/$t.sh" >"$GMT_TMP/$t.log" 2>&1; then
        echo "PASS: $t.sh on the rings ($(($(date +%s) - t0)) s)"
    else
        rc=$?
        if [ $rc = 77 ]; then
            echo "SKIP: $t.sh on the rings"
        else
            echo "FAIL: $t.sh on the rings (exit $rc)"
            tail -30 "$GMT_TMP/$t.log"
            fail=1
        fi
    fi
done
exit $fail
