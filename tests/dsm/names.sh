#!/bin/sh
# libcordsm's names: every symbol one of its object files defines for the others carries a
# prefix (cor_ for the API, dsm_ for the pure modules, dsm__ for the runtime's shared names);
# nothing unprefixed (call, grant, service, ...) is visible between its files.
# Usage: names.sh [DIR]   (DIR: the folder of libcordsm's .o files; default the build's)
set -u
dir=${1:-${COR_BUILDDIR:?run me through make check}/cor/dsm/.libs}
objs=$(ls "$dir"/*.o 2>/dev/null)
[ -n "$objs" ] || { echo "FAIL: no object files in $dir"; exit 1; }
bad=$(for o in $objs; do nm -g --defined-only "$o" | awk -v f="${o##*/}" 'NF >= 3 { print $3 " (" f ")" }'; done |
    grep -Ev '^(cor_|dsm_|__odr_asan|__asan|__tsan|__ubsan)' || true)
if [ -n "$bad" ]; then
    echo "FAIL: libcordsm defines unprefixed names for its other files:"
    echo "$bad"
    exit 1
fi
echo "ok: $(echo "$objs" | wc -l) object files, every shared name prefixed"
