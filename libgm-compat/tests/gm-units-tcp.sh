#!/bin/sh
# The in-process CUnit suites again, over tcp;ofi_rxm on loopback (a one-node
# map; gmt.c sets it up when GM_TEST_PROVIDER=tcp), and gm_rdma_test over shm
# without RMA (GM_RMA=0).  Ordering uses 20,000
# messages here to keep the run short.  At COR_TEST_SCALE=small (the sanitizer
# builds) gm_rdma_test and gm_errors_test, the slowest under TSan (30 s each),
# and gm_sizes_test and gm_tokens_test (16 and 12 s) run over shm only: over tcp
# their paths (messages for puts, error statuses, sizes and token counts) are
# the ones shm takes with GM_RMA=0, and the normal build runs them here.
. "$(dirname "$0")/gm-proc-lib.sh"
fail=0
order_count=20000
suites="gm_basic_test gm_sizes_test gm_tokens_test gm_callbacks_test gm_rdma_test gm_errors_test"
suites="$suites gm_order_test gm_config_test gm_wait_test"
if [ "$COR_TEST_SCALE" = small ]; then
    order_count=5000
    suites=$(echo "$suites" | sed 's/gm_rdma_test //; s/gm_errors_test //; s/gm_sizes_test //; s/gm_tokens_test //')
fi
for t in $suites; do
    gmt_need "$GMT_BUILDDIR/tests/$t"
    gmt_bg "$t" env GM_TEST_PROVIDER=tcp GMT_ORDER_COUNT="$order_count" "$GMT_BUILDDIR/tests/$t"
    if gmt_wait "$t"; then
        echo "PASS: $t over tcp"
    else
        echo "FAIL: $t over tcp"
        fail=1
    fi
done
# The message path of puts and gets (providers without RMA), over shm.
gmt_bg rdma_no_rma env GM_RMA=0 "$GMT_BUILDDIR/tests/gm_rdma_test"
if gmt_wait rdma_no_rma; then
    echo "PASS: gm_rdma_test with GM_RMA=0"
else
    echo "FAIL: gm_rdma_test with GM_RMA=0"
    fail=1
fi
exit $fail
