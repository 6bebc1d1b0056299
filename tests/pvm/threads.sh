#!/bin/bash
# apps/examples/pvm_threads (threads of two PVM tasks exchanging messages, each thread with
# its own active buffers, plus a blocked pvm_recv), relinked over libcorpvm, over
# COR_PVM_ROUTE=myrinet (CoR's gm route) and udp: the checks of example-check.sh. Exit 0
# pass, 1 fail, 77 skip (not root, no PVM).
#
# Environment:
#   COR_BUILDDIR        build tree (default: build/ beside tests/); the program is
#                       $COR_BUILDDIR/apps/examples/pvm_threads
#   COR_ROUTE_PATH      route plugins (default the build tree's udp and gm .libs)
#   COR_PVM_TEST_ROUTES routes to run (default "myrinet udp")
#   PVM_TEST_REPEAT     runs per route (default 1)
#   PVM_TEST_TIMEOUT    seconds per run (default 90; the program's own watchdog fires at
#                       PVM_EXAMPLE_TIMEOUT, default 60, and says where it was)
#   COR_PVM_LIB         a libcorpvm.so to preload into both tasks instead of the linked one
#   LD_LIBRARY_PATH, ASAN_OPTIONS, LSAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS: passed on to
#                       the worker too
#   COR_TEST_SCALE=small  2 threads x 6 rounds instead of 4 x 16 (sanitizer builds)
set -euo pipefail
NAME=threads EXAMPLE=pvm_threads
if [ "${COR_TEST_SCALE:-}" = small ]; then THREADS=2 ROUNDS=6; else THREADS=4 ROUNDS=16; fi
BURST=32 # pvm_threads' burst per thread
EXAMPLE_ARGS=("$THREADS" "$ROUNDS")
SUMMARY_RE="$THREADS thread pairs x \\($ROUNDS round trips \\+ $BURST burst\\)"
# Messages each side sends: the master its configuration, ping-pong, burst, TAG_LATE and
# TAG_DONE; the worker its answers, TAG_LATE and TAG_DONE.
MASTER_SENDS=$((1 + THREADS * (ROUNDS + BURST) + 2))
WORKER_SENDS=$((THREADS * ROUNDS + 2))
# Sends that may precede the switch: the configuration, and each thread's first messages
# (a thread whose first answer came back quickly may send once more before its task read
# the peer's ACK).
PVM_PATH_MAX=$((2 * THREADS + 2))
. "$(dirname "$0")/example-check.sh"
