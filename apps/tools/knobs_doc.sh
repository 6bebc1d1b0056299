#!/bin/sh
# The READMEs' knob tables are generated from the knob tables the code reads (the core's, each
# route plugin's, libcordsm's, libcorpvm's, libgm-compat's): each block between
# "<!-- knobs MODULE -->" and "<!-- /knobs -->" must be exactly `cor-info --knobs-markdown
# MODULE`. A module configured away (cor-info exits 3) keeps its block as it is.
#   make check runs it as a test;  apps/tools/knobs_doc.sh --update  rewrites the blocks
#   (COR_BUILDDIR, COR_SRCDIR and COR_ROUTE_PATH as make check sets them).
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
src=${COR_SRCDIR:?run me through make check}
update=0
[ "${1:-}" = --update ] && update=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0 blocks=0 skipped=0
for readme in README.md cor/routes/udp/README.md cor/routes/gm/README.md cor/dsm/README.md \
    cor/pvmcompat/README.md libgm-compat/README.md; do
    readme=$src/$readme
    [ -f "$readme" ] || continue
    : >"$tmp/new"
    state=out
    while IFS= read -r line; do
        case $state:$line in
        out:'<!-- knobs '*' -->')
            mod=${line#<!-- knobs }
            mod=${mod% -->}
            printf '%s\n' "$line" >>"$tmp/new"
            "$b/cor-info" --knobs-markdown "$mod" >"$tmp/table" 2>"$tmp/err"
            rc=$?
            if [ $rc = 0 ]; then
                cat "$tmp/table" >>"$tmp/new"
                state=in
            elif [ $rc = 3 ]; then # not built here: keep the block
                echo "skipped: $readme: $mod is not built"
                skipped=$((skipped + 1))
                state=keep
            else
                echo "FAIL: $readme: cor-info --knobs-markdown $mod: $(cat "$tmp/err")"
                fails=$((fails + 1))
                state=in
            fi
            blocks=$((blocks + 1))
            ;;
        in:'<!-- /knobs -->' | keep:'<!-- /knobs -->')
            printf '%s\n' "$line" >>"$tmp/new"
            state=out
            ;;
        in:*) ;;
        *) printf '%s\n' "$line" >>"$tmp/new" ;;
        esac
    done <"$readme"
    [ $state = out ] || { echo "FAIL: $readme: a knob block has no <!-- /knobs -->"; fails=$((fails + 1)); }
    if ! cmp -s "$readme" "$tmp/new"; then
        if [ $update = 1 ]; then
            cp "$tmp/new" "$readme" && echo "updated: $readme"
        else
            echo "FAIL: $readme: its knob table differs from the code's (apps/tools/knobs_doc.sh --update):"
            diff "$readme" "$tmp/new" | head -20
            fails=$((fails + 1))
        fi
    fi
done
# core, udp, gm, dsm, pvm, libgm: one block each
[ $blocks -ge 6 ] || { echo "FAIL: only $blocks generated knob tables found (expected 6)"; fails=$((fails + 1)); }
[ $fails -eq 0 ] || exit 1
echo "ok: $((blocks - skipped)) knob tables match the code's ($skipped of modules not built)"
