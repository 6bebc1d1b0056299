#!/bin/bash
# apps/examples/pvm_mixed (CoR and PVM calls between the same two PVM tasks: pvm_mytid joins
# the CoR session, cor_init shares it, pvm_cor_task names the peer's CoR tasks; the main
# threads alternate cor_sendI/cor_recvI and pvm_send/pvm_recv, spawned CoR tasks talk to
# each other), relinked over libcorpvm, over COR_PVM_ROUTE=myrinet (CoR's gm route) and udp:
# the checks of example-check.sh. Exit 0 pass, 1 fail, 77 skip (not root, no PVM).
#
# Environment:
#   COR_BUILDDIR        build tree (default: build/ beside tests/); the program is
#                       $COR_BUILDDIR/apps/examples/pvm_mixed
#   COR_ROUTE_PATH      route plugins (default the build tree's udp and gm .libs)
#   COR_PVM_TEST_ROUTES routes to run (default "myrinet udp")
#   PVM_TEST_REPEAT     runs per route (default 1)
#   PVM_TEST_TIMEOUT    seconds per run (default 90; the program's own watchdog fires at
#                       PVM_EXAMPLE_TIMEOUT, default 60, and says where it was)
#   COR_PVM_LIB         a libcorpvm.so to preload into both tasks instead of the linked one
#   LD_LIBRARY_PATH, ASAN_OPTIONS, LSAN_OPTIONS, UBSAN_OPTIONS, TSAN_OPTIONS: passed on to
#                       the worker too
set -euo pipefail
NAME=mixed EXAMPLE=pvm_mixed
EXAMPLE_ARGS=()
SUMMARY_RE='CoR domains [0-9]+ and [0-9]+; 20 ping-pong rounds alternating cor_sendI/pvm_send'
# PVM messages each side sends: the partner index, 10 ping-pong halves, 20 stream messages,
# the partner task's message and TAG_DONE (pvm_mixed.c).
MASTER_SENDS=33
WORKER_SENDS=33
# Sends that may precede the switch: the first one (the peer had not announced itself yet),
# and those of the other thread (main or partner) while a first one waits for the answer.
# The master's HELLO for its way back goes out when it accepts the worker's, and its next
# message waits for that answer as a first message does: before libcorpvm did so, every
# master message until the worker's ACK came through pvmd went PVM's way, as many as the
# ping-pong rounds done meanwhile (2 in 7 of 40 runs here, over 4 when pvmd lagged a few ms).
PVM_PATH_MAX=4
. "$(dirname "$0")/example-check.sh"
