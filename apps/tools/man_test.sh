#!/bin/sh
# The man pages: each renders with `man -l` without a warning, has its sections, names every
# option its tool's --help lists, and `make install-man` installs it.
set -u
top=${COR_BUILDDIR:?run me through make check}
src=${COR_SRCDIR:?run me through make check}
. "$src/apps/check_lib.sh"
if ! command -v man >/dev/null 2>&1; then
    echo "FAIL: man is not installed (Debian packages man-db and groff-base, scripts/lib.sh)"
    exit 1
fi

# check PAGE HELP-COMMAND...: renders cleanly and lists every --option of the tool's help.
check() {
    page=$1
    shift
    name=$(basename "$page" .1)
    if [ ! -f "$page" ]; then
        fail "$name: no page $page"
        return
    fi
    LC_ALL=C MANWIDTH=80 timeout 30 man --warnings -l "$page" >"$dir/$name.txt" 2>"$dir/$name.err"
    if [ -s "$dir/$name.err" ]; then
        fail "$name: man -l warns:"
        cat "$dir/$name.err"
    fi
    for section in NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS' 'SEE ALSO'; do
        grep -q "^$section" "$dir/$name.txt" || fail "$name: no $section section"
    done
    grep -qE "^ *$name +- " "$dir/$name.txt" || fail "$name: NAME does not start with '$name - '"
    # the options of --help (stdout or stderr), each in the page as \-\-option
    timeout 30 "$@" --help >"$dir/$name.help" 2>&1 || fail "$name: $* --help failed"
    opts=$(grep -oE -- '--[a-z][a-z-]*[a-z]' "$dir/$name.help" | sort -u)
    [ -n "$opts" ] || fail "$name: no option found in its --help"
    for o in $opts; do
        roff=$(printf '%s' "$o" | sed 's/-/\\-/g')
        grep -qF -- "$roff" "$page" || fail "$name: option $o of --help is not in the page"
    done
    echo "ok: $name ($(echo "$opts" | wc -w) options)"
}

check "$src/apps/man/cor-run.1" "$top/apps/cor-run"
check "$src/apps/man/cor-bench.1" "$top/apps/cor-bench"
check "$src/apps/man/cor-info.1" "$top/apps/cor-info"
if [ -x "$top/apps/cor-pvm" ]; then
    check "$src/apps/man/cor-pvm.1" "$top/apps/cor-pvm"
else
    echo "skip: cor-pvm (built with --disable-pvm)"
fi
if [ -x "$top/libgm-compat/tools/gm-info" ]; then
    check "$src/libgm-compat/tools/gm-info.1" "$top/libgm-compat/tools/gm-info"
    check "$src/libgm-compat/tools/gm-pingpong.1" "$top/libgm-compat/tools/gm-pingpong"
else
    echo "skip: gm-info, gm-pingpong (built with --disable-libgm)"
fi

# make install puts them in man1
for sub in apps libgm-compat; do
    [ -f "$top/$sub/Makefile" ] || continue
    make -s -C "$top/$sub" install-man DESTDIR="$dir/inst" >"$dir/install.log" 2>&1 ||
        fail "make -C $sub install-man failed: $(cat "$dir/install.log")"
done
want="cor-run.1 cor-bench.1 cor-info.1"
[ -x "$top/apps/cor-pvm" ] && want="$want cor-pvm.1"
[ -x "$top/libgm-compat/tools/gm-info" ] && want="$want gm-info.1 gm-pingpong.1"
for p in $want; do
    find "$dir/inst" -path "*/man1/$p" | grep -q . || fail "make install-man did not install $p"
done
echo "ok: install-man ($want)"

[ "$fails" -eq 0 ] || exit 1
