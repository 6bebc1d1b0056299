#!/bin/bash
# cor-pvm's command line: --help prints the usage (the script's leading comment) and nothing
# else, bad arguments are clear errors with status 2, PVM's own programs are refused, the knobs
# spawned tasks need go into PVM_EXPORT. No PVM virtual
# machine needed. Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${COR_BUILDDIR:-$(cd "$HERE/../.." && pwd)/build}
COR_PVM=$BUILD/apps/cor-pvm
NAME=cli
say() { echo "$NAME: $*"; }
[ -x "$COR_PVM" ] || { say "SKIP: $COR_PVM not built"; exit 77; }
fails=0
fail() { say "FAIL: $*"; fails=$((fails + 1)); }

for opt in --help -h; do
    out=$(timeout -k 10 10 "$COR_PVM" $opt 2>&1); rc=$?
    [ $rc = 0 ] || fail "$opt exited $rc"
    # What it must print: the leading comment block, without its '# '.
    want=$(sed -n '2,/^[^#]/p' "$COR_PVM" | sed -n 's/^# \{0,1\}//p')
    [ "$out" = "$want" ] || { fail "$opt printed something else than the usage:"; diff <(echo "$want") <(echo "$out") | sed 's/^/  | /'; }
    grep -q 'cor-pvm \[--route' <<<"$out" || fail "$opt: no synopsis line"
    if grep -nE '^(set |route=|stats=|usage\(\)|while |case |esac|done|fi)' <<<"$out"; then
        fail "$opt printed the script's own code"
    fi
done
# expect STATUS WHAT-IN-STDERR ARGS...
expect() {
    local st=$1 re=$2 out rc
    shift 2
    out=$(timeout -k 10 10 "$COR_PVM" "$@" 2>&1 >/dev/null); rc=$?
    [ $rc = "$st" ] || fail "cor-pvm $*: exit $rc, expected $st"
    grep -qE -- "$re" <<<"$out" || fail "cor-pvm $*: stderr '$out' lacks /$re/"
}
expect 2 "unknown option '--bogus'" --bogus true
expect 2 "--route takes" --route ether true
expect 2 "--route needs a value" --route
expect 2 "no program given"
expect 2 "PVM's own program" pvmd
# Running a program preloads libcorpvm into it: in a sanitizer build the runtime would not come
# first in the program's libraries (the sanitizer refuses to start), so only the normal build.
[ "${COR_SANITIZED:-}" = yes ] || expect 0 "" --route none true
# The knobs spawned tasks must share with the program go into PVM_EXPORT (spawned tasks start
# with pvmd's environment): the route's, and the GM transport when set (both sides of a pair
# must use the same one).
if [ "${COR_SANITIZED:-}" != yes ]; then
    got=$(env -u PVM_EXPORT COR_PVM_DOMAINS=32 COR_PVM_SPIN_US=5 COR_BIND=loopback \
        GM_COMPAT_TRANSPORT=fabric timeout -k 10 10 "$COR_PVM" --route udp --stats \
        sh -c 'echo "$PVM_EXPORT"' 2>&1)
    for v in LD_PRELOAD COR_PVM_ROUTE COR_ROUTE_PATH COR_PVM_STATS COR_PVM_DOMAINS \
        COR_PVM_SPIN_US COR_BIND GM_COMPAT_TRANSPORT; do
        case ":$got:" in
        *":$v:"*) ;;
        *) fail "PVM_EXPORT '$got' lacks $v" ;;
        esac
    done
    got=$(env -u PVM_EXPORT -u GM_COMPAT_TRANSPORT timeout -k 10 10 "$COR_PVM" --route udp \
        sh -c 'echo "$PVM_EXPORT"' 2>&1)
    case ":$got:" in
    *:GM_COMPAT_TRANSPORT:*) fail "PVM_EXPORT '$got' names GM_COMPAT_TRANSPORT, which is unset" ;;
    esac
fi
[ $fails = 0 ] || exit 1
say PASS
