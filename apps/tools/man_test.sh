#!/bin/sh
# The man pages. Section 1: each renders with `man -l` without a warning, has its sections,
# names every option its tool's --help lists, and `make install-man` installs it. Section 3
# (man/): each renders without a warning and has its sections, every page is reached from
# cor(3), every public call of the headers is named in a page's NAME, and after
# `make install` every page is there and `man NAME` shows its page for every name. Every
# SEE ALSO reference of both sections is one of our pages or links (or one man finds here).
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
    LC_ALL=C MANWIDTH=80 timeout -k 10 30 man --warnings -l "$page" >"$dir/$name.txt" 2>"$dir/$name.err"
    if [ -s "$dir/$name.err" ]; then
        fail "$name: man -l warns:"
        cat "$dir/$name.err"
    fi
    for section in NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS' 'SEE ALSO'; do
        grep -q "^$section" "$dir/$name.txt" || fail "$name: no $section section"
    done
    grep -qE "^ *$name +- " "$dir/$name.txt" || fail "$name: NAME does not start with '$name - '"
    # the options of --help (stdout or stderr), each in the page as \-\-option
    timeout -k 10 30 "$@" --help >"$dir/$name.help" 2>&1 || fail "$name: $* --help failed"
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
    check "$src/apps/man/pvm-bench.1" "$top/apps/pvm-bench"
else
    echo "skip: cor-pvm, pvm-bench (built with --disable-pvm)"
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
[ -x "$top/apps/cor-pvm" ] && want="$want cor-pvm.1 pvm-bench.1"
[ -x "$top/libgm-compat/tools/gm-info" ] && want="$want gm-info.1 gm-pingpong.1"
for p in $want; do
    find "$dir/inst" -path "*/man1/$p" | grep -q . || fail "make install-man did not install $p"
done
echo "ok: install-man ($want)"


# ---- section 3 -------------------------------------------------------------------------
m3=$src/man
links=$m3/links.sh
pages=$(cd "$m3" && ls ./*.3 | sed 's|^\./||')
[ -n "$pages" ] || fail "man3: no page in $m3"
# every name a page answers to: its own and its links
(cd "$m3" && for p in $pages; do echo "$(basename "$p" .3) $(basename "$p" .3)"; done
    sh "$links" names $pages) | sort -u >"$dir/names"
# SEE ALSO of every page, sections 1 and 3: each reference is one of our pages or links, or
# a page man finds on this machine (pvm(1), from Debian's pvm).
man1="$src/apps/man/cor-run.1 $src/apps/man/cor-bench.1 $src/apps/man/cor-info.1 \
    $src/apps/man/cor-pvm.1 $src/apps/man/pvm-bench.1 $src/libgm-compat/tools/gm-info.1 \
    $src/libgm-compat/tools/gm-pingpong.1"
for p in $man1; do basename "$p" .1; done >"$dir/names1"
for p in $man1 $(for q in $pages; do echo "$m3/$q"; done); do
    name=$(basename "$p")
    name=${name%.[13]}
    sed -n '/^\.SH SEE ALSO/,/^\.SH /p' "$p" | grep -E '^\.BR ' >"$dir/$name.refs"
    [ -s "$dir/$name.refs" ] || fail "$name: SEE ALSO names no page"
    while read -r _ r sec _; do
        r=$(printf '%s' "$r" | sed 's/\\-/-/g')
        case $sec in
        "(3)"*) grep -q "^$r " "$dir/names" && continue ;;
        "(1)"*) grep -qx "$r" "$dir/names1" && continue ;;
        *) fail "$name: SEE ALSO entry '$r $sec' is not NAME (SECTION)"; continue ;;
        esac
        sec=${sec#(}
        sec=${sec%%)*}
        man -w "$sec" "$r" >/dev/null 2>&1 && continue
        # pvm(1) comes with pvm-dev, which a build without PVM may not have
        [ "$r" = pvm ] && [ ! -x "$top/apps/cor-pvm" ] && continue
        fail "$name: SEE ALSO $r($sec), which is neither our page nor one man finds"
    done <"$dir/$name.refs"
done
for p in $pages; do
    name=$(basename "$p" .3)
    LC_ALL=C MANWIDTH=80 timeout -k 10 30 man --warnings -l "$m3/$p" >"$dir/$name.3.txt" 2>"$dir/$name.3.err"
    if [ -s "$dir/$name.3.err" ]; then
        fail "$p: man -l warns:"
        cat "$dir/$name.3.err"
    fi
    want="NAME SYNOPSIS DESCRIPTION SEE_ALSO"
    [ "$name" = cor ] || want="$want RETURN_VALUE"
    for section in $want; do
        grep -q "^$(echo "$section" | tr _ ' ')" "$dir/$name.3.txt" || fail "$p: no $section section"
    done
    grep -q '^\.BR [A-Za-z_]* (3)' "$dir/$name.refs" || fail "$p: SEE ALSO names no section 3 page"
done
# every page is reached from cor(3) by SEE ALSO and the pages cor(3) lists
reached=" cor "
todo=cor
for round in $(seq 1 30); do
    next=
    for n in $todo; do
        [ -f "$m3/$n.3" ] || continue
        for r in $(grep -oE '^\.BR [A-Za-z_]+ (\(3\)|"\(3\), ")' "$m3/$n.3" | awk '{print $2}'; \
            grep -oE '^\.BR [a-z_]+ "\(3\), " [a-z_]+ \(3\)' "$m3/$n.3" | awk '{print $4}'); do
            case $reached in *" $r "*) ;; *) reached="$reached$r " next="$next $r" ;; esac
        done
    done
    [ -n "$next" ] || break
    todo=$next
done
for p in $pages; do
    case $reached in *" $(basename "$p" .3) "*) ;; *) fail "$p: not reached from cor(3)" ;; esac
done

# the public calls of the headers (and the macros users look up): each must be a name
route_h=$src/include/cor/route.h
[ -f "$route_h" ] || route_h=$src/cor/core/route.h
{
    grep -hE '^COR_API' "$src"/include/cor/cor.h "$src"/include/cor/raw.h "$src"/include/cor/dsm.h \
        "$src"/include/cor/pvm.h
    grep -hE '^static inline [a-z_ ]+ \**cor_idp_[a-z]+\(' "$src"/include/cor/cor.h
    grep -hE '^int pvm_cor_[a-z_]+\(' "$src"/include/cor/pvm.h
    grep -hE '^GM_ENTRY_POINT' "$src"/libgm-compat/include/gm_compat.h
    # gm.h's own additions to GM 2.0 follow a comment saying so
    awk '/libgm-compat extension/ {want = 1} want && /^GM_ENTRY_POINT/ {print; want = 0}' \
        "$src"/libgm-compat/include/gm.h
} | sed -E 's/\(.*//; s/.*[ *]//' >"$dir/calls"
grep -hoE '^#define (PvmRouteDirect[A-Za-z]+|COR_ROUTE_DECLARE)' "$src"/include/cor/pvm.h "$route_h" |
    awk '{print $2}' >>"$dir/calls"
ncalls=$(wc -l <"$dir/calls")
[ "$ncalls" -ge 100 ] || fail "man3: found only $ncalls public calls in the headers (parser broken?)"
while read -r c; do
    grep -q "^$c " "$dir/names" || fail "man3: $c is public but no page names it"
done <"$dir/calls"

# installed: `man NAME` finds a page for every name and shows its group's page
if make -s -C "$top/man" install DESTDIR="$dir/inst3" >"$dir/install3.log" 2>&1; then
    mp=$(find "$dir/inst3" -type d -name man3 | head -n 1)
    if [ -z "$mp" ]; then
        fail "make -C man install put no man3 folder"
    else
        mp=$(dirname "$mp")
        nlinks=0 shown=" " missing=" "
        while read -r n page; do
            if [ ! -f "$mp/man3/$page.3" ]; then
                # only the pages of a part this build leaves out may be missing
                case $page in
                pvm_*) [ -x "$top/apps/cor-pvm" ] || continue ;;
                gm_*) [ -x "$top/libgm-compat/tools/gm-info" ] || continue ;;
                esac
                case $missing in *" $page "*) ;; *)
                    missing="$missing$page "
                    fail "make -C man install did not install $page.3 (man/Makefile.am)" ;;
                esac
                continue
            fi
            f=$(man -w -M "$mp" 3 "$n" 2>/dev/null) || { fail "man 3 $n: not found after make install"; continue; }
            # the link page itself, or (man-db may follow it) the page
            if [ "$f" != "$mp/man3/$page.3" ] && [ "$(cat "$f")" != ".so man3/$page.3" ]; then
                fail "man 3 $n finds $f, not a link to $page.3"
            fi
            nlinks=$((nlinks + 1))
            # one name of each page shown through man, the link followed (0.3 s each)
            case $shown in *" $page "*) continue ;; esac
            [ "$n" = "$page" ] && continue
            shown="$shown$page "
            LC_ALL=C MANWIDTH=80 timeout -k 10 30 man --warnings -M "$mp" 3 "$n" >"$dir/as-$n.txt" 2>"$dir/as-$n.err" ||
                fail "man 3 $n failed"
            [ -s "$dir/as-$n.err" ] && fail "man 3 $n warns: $(cat "$dir/as-$n.err")"
            cmp -s "$dir/as-$n.txt" "$dir/$page.3.txt" || fail "man 3 $n does not show $page(3)"
        done <"$dir/names"
        echo "ok: man3 ($(echo "$pages" | wc -w) pages, $nlinks names, $ncalls public calls named)"
    fi
else
    fail "make -C man install failed: $(cat "$dir/install3.log")"
fi

[ "$fails" -eq 0 ] || exit 1
