#!/bin/bash
# Nothing left behind: over each CoR route, a routed task that ends without pvm_exit
# (life.c end: returns from main, calls exit, is killed with SIGKILL) leaves no file of its
# session in /dev/shm or the temp dir once the master has left, and the session's mailbox
# entries (CoR.*) are gone (Debian's gmbi, a plain PVM program, lists the mailbox). Exit 0
# pass, 1 fail, 77 skip.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pvmlib.sh"
pvm_test_begin leftovers
LIFE=$BUILD/tests/pvm/life
[ -x "$LIFE" ] || fail "$LIFE not built"
[ -x /usr/bin/gmbi ] || { say "SKIP: pvm-examples' gmbi is not installed"; exit 77; }
# A temp dir of our own: pvmd and the tasks it spawns get it too.
T=$(mktemp -d "${TMPDIR:-/tmp}/corleft.XXXXXX")
export TMPDIR=$T
trap 'pvm_cleanup_all; rm -rf "$T"' EXIT
EXTRA_EP=$(dirname "$LIFE") pvm_vm_start || fail "cannot start a PVM virtual machine"
exports=$(pvm_exports)
# (other tests may run at once: only the files of this run's session count)
shm_list() { [ -z "$SESSION" ] || find /dev/shm -maxdepth 1 -name "cor*$SESSION*" 2>/dev/null | sort; }
tmp_list() { find "$T" -mindepth 1 -maxdepth 1 ! -path "$PVM_WORK" ! -name stamp 2>/dev/null | sort; }
rc=0
for route in ${COR_PVM_TEST_ROUTES:-myrinet udp}; do
    for how in return exit kill; do
        touch "$T/stamp"
        pvm_run_master -t 60 env COR_PVM_ROUTE=$route PVM_EXPORT=$exports "$LIFE" end $how
        why=""
        SESSION=$(sed -n 's/^life: end .* session \([0-9a-f]*\)$/\1/p' "$PVM_OUT")
        if [ "$PVM_RC" != 0 ] || ! grep -q "^life: end $how ok" "$PVM_OUT" || [ -z "$SESSION" ]; then
            why="exit $PVM_RC: $(cat "$PVM_OUT" "$PVM_ERR" | head -5)"
        fi
        # the child's exit went through pvmd before the master's notice: give files a moment
        for ((i = 0; i < 30; i++)); do
            [ -z "$(shm_list)$(tmp_list)" ] && break
            sleep 0.1
        done
        left="$(shm_list) $(tmp_list)"
        [ -z "${left// /}" ] || why="${why:+$why; }left behind:$(echo $left)"
        mbox=$(timeout -k 10 10 gmbi '*' 2>&1 | grep -o '<CoR\.[^>]*>' | sort -u | tr '\n' ' ' || true)
        [ -z "$mbox" ] || why="${why:+$why; }mailbox entries left: $mbox"
        if [ -n "$why" ]; then say "FAIL $route $how: $why"; rc=1; else say "PASS $route $how"; fi
        # what one case left must not count against the next
        [ -z "$SESSION" ] || find /dev/shm -maxdepth 1 -name "cor*$SESSION*" -delete 2>/dev/null || true
    done
done
[ $rc = 0 ] && say PASS
exit $rc
