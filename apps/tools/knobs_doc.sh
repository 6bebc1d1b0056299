#!/bin/sh
# The READMEs' knob tables are generated from the knob tables the code reads (the core's,
# each route plugin's, apps/tools/knobs.h): each block between "<!-- knobs MODULE -->" and
# "<!-- /knobs -->" must be exactly `cor-info --knobs-markdown MODULE`.
#   make check runs it as a test;  apps/tools/knobs_doc.sh --update  rewrites the blocks
#   (COR_BUILDDIR, COR_SRCDIR and COR_ROUTE_PATH as make check sets them).
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
src=${COR_SRCDIR:?run me through make check}
update=0
[ "${1:-}" = --update ] && update=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0 blocks=0
for readme in "$src/README.md" "$src/cor/routes/udp/README.md" "$src/cor/routes/gm/README.md"; do
    [ -f "$readme" ] || continue
    : >"$tmp/new"
    state=out
    while IFS= read -r line; do
        case $state:$line in
        out:'<!-- knobs '*' -->')
            mod=${line#<!-- knobs }
            mod=${mod% -->}
            printf '%s\n' "$line" >>"$tmp/new"
            if ! "$b/cor-info" --knobs-markdown "$mod" >>"$tmp/new" 2>"$tmp/err"; then
                echo "FAIL: $readme: cor-info --knobs-markdown $mod: $(cat "$tmp/err")"
                fails=$((fails + 1))
            fi
            blocks=$((blocks + 1))
            state=in
            ;;
        in:'<!-- /knobs -->')
            printf '%s\n' "$line" >>"$tmp/new"
            state=out
            ;;
        in:*) ;;
        *) printf '%s\n' "$line" >>"$tmp/new" ;;
        esac
    done <"$readme"
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
[ $blocks -ge 3 ] || { echo "FAIL: only $blocks generated knob tables found (expected core, udp, gm)"; fails=$((fails + 1)); }
[ $fails -eq 0 ] || exit 1
echo "ok: $blocks knob tables match the code's"
