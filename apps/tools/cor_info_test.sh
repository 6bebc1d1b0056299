#!/bin/sh
# cor-info: the text and --json reports hold what they should (routes with capabilities, a
# broken plugin with the loader's message, libgm-compat, knobs with their current values);
# the JSON is checked by json_check (no python or jq needed); and the knob table is exactly
# the COR_*/GM_* names the sources read, so neither can drift.
set -u
b=${COR_BUILDDIR:?run me through make check}/apps
src=${COR_SRCDIR:?run me through make check}
. "$src/apps/check_lib.sh"
# libgm-compat's shm endpoints and lock files stay inside this test
GM_SHM_NAMESPACE=corinfo$$
TMPDIR=$dir
export GM_SHM_NAMESPACE TMPDIR

# A plugin that cannot load: the report lists it with the loader's message.
mkdir "$dir/plugins"
echo 'not a shared object' >"$dir/plugins/cor_route_broken.so"
COR_ROUTE_PATH=$dir/plugins:${COR_ROUTE_PATH:-}
COR_CREDITS=7
export COR_ROUTE_PATH COR_CREDITS

# --- text ---
if ! timeout -k 10 60 "$b/cor-info" >"$dir/text" 2>"$dir/text.err"; then
    fail "cor-info exited with an error:"
    cat "$dir/text" "$dir/text.err"
fi
for want in '^CoR [0-9]' '^  plugin folder ' '^routes:' '^  udp  .*cor_route_udp.so' \
    'frame max [0-9][0-9]* B, eager limit [0-9][0-9]* B' \
    '^  broken   NOT LOADED: .*cor_route_broken.so' '^libgm-compat:' '^  provider ' \
    '^knobs' '^  COR_CREDITS  *core  *32  *7 '; do
    grep -q -- "$want" "$dir/text" || fail "text report lacks /$want/"
done
if grep -q '^  gm ' "$dir/text"; then # built with the gm route
    grep -A1 '^  gm ' "$dir/text" | grep -q 'frame max' ||
        fail "the gm route's capabilities are missing:"
    grep -q '^  nodes      [1-9][0-9]* in use, this process is node [1-9]' "$dir/text" ||
        fail "libgm-compat's node map is missing"
fi
[ -s "$dir/text.err" ] && fail "cor-info wrote to stderr: $(cat "$dir/text.err")"
echo "ok: text report"

# --- JSON ---
timeout -k 10 60 "$b/cor-info" --json >"$dir/json" 2>"$dir/json.err" || fail "cor-info --json failed"
if ! "$b/json_check" <"$dir/json" >"$dir/paths"; then
    fail "cor-info --json is not valid JSON:"
    cat "$dir/json"
fi
for want in '^\.version=[0-9]' '^\.plugin_dir=/' '^\.routes\[[0-9]*\]\.name=udp$' \
    '^\.libgm\.provider=' '^\.knobs\[[0-9]*\]\.name=COR_CREDITS$'; do
    grep -q -- "$want" "$dir/paths" || fail "JSON lacks /$want/"
done
# the fields of one route, found by its index
field() { # field ROUTE KEY: the value of .routes[i].KEY for the route named ROUTE
    i=$(sed -n "s/^\.routes\[\([0-9]*\)\]\.name=$1\$/\1/p" "$dir/paths")
    sed -n "s/^\.routes\[$i\]\.$2=//p" "$dir/paths"
}
[ "$(field udp loaded)" = true ] || fail "udp not loaded in JSON"
[ "$(field udp frame_max)" -gt 0 ] 2>/dev/null || fail "udp frame_max not positive"
[ "$(field udp eager_limit)" -gt 0 ] 2>/dev/null || fail "udp eager_limit not positive"
[ "$(field udp ports_max)" -ge 1 ] 2>/dev/null || fail "udp ports_max missing"
[ "$(field broken loaded)" = false ] || fail "the broken plugin is not reported as unloaded"
[ -n "$(field broken error)" ] || fail "the broken plugin has no loader message"
k=$(sed -n 's/^\.knobs\[\([0-9]*\)\]\.name=COR_CREDITS$/\1/p' "$dir/paths")
grep -q "^\.knobs\[$k\]\.value=7\$" "$dir/paths" || fail "COR_CREDITS's current value is not 7"
grep -q "^\.knobs\[$k\]\.default=32\$" "$dir/paths" || fail "COR_CREDITS's default is not 32"
echo "ok: JSON report"

# --- the knob table against the sources, both ways ---
# Every module's table is listed (none "not listed": a library cor-info could not load).
grep -q '^\.knobs_unlisted\[' "$dir/paths" && fail "cor-info could not list some knobs: $(grep '^\.knobs_unlisted' "$dir/paths")"
sed -n 's/^\.knobs\[[0-9]*\]\.name=//p' "$dir/paths" | sort -u >"$dir/table"
# The sources of modules configured away (cor-info --knobs-markdown exits 3) are left out.
skip_pvm=-false skip_gm=-false
"$b/cor-info" --knobs-markdown pvm >/dev/null 2>&1
[ $? = 3 ] && skip_pvm="-path */cor/pvmcompat/* -o -name cor-pvm.in"
"$b/cor-info" --knobs-markdown libgm >/dev/null 2>&1
[ $? = 3 ] && skip_gm="-path */libgm-compat/* -o -path */cor/routes/gm/*"
set -f # the skip expressions' patterns are find's, not the shell's
{
    # shellcheck disable=SC2086 # the skip expressions are words on purpose
    find "$src/cor" "$src/libgm-compat/src" "$src/libgm-compat/tools" "$src/apps" \
        -name '*.[ch]' ! -path '*/examples/*' ! \( $skip_pvm \) ! \( $skip_gm \) -exec cat {} + |
        grep -oE '"(COR|GM)_[A-Z0-9_]+[="]' | tr -d '"='
    case $skip_pvm in -false) grep -oE '\b(COR|GM)_[A-Z0-9_]+' "$src/apps/tools/cor-pvm.in" ;; esac
} | sort -u >"$dir/sources"
set +f
missing=$(comm -13 "$dir/table" "$dir/sources")
stale=$(comm -23 "$dir/table" "$dir/sources")
[ -z "$missing" ] || fail "knobs read by the sources but not listed by cor-info (each module's table: cor/core/knobs.h, the routes' *_knobs.h, cor/dsm/dsm_knobs.h, cor/pvmcompat/knobs.h, libgm-compat/src/knobs.h): $missing"
[ -z "$stale" ] || fail "knobs listed by cor-info that no source reads: $stale"
[ "$(wc -l <"$dir/table")" -ge 50 ] || fail "the knob table has fewer than 50 names"
echo "ok: knob table matches the sources ($(wc -l <"$dir/table") names)"

# --- bootstrap backends: pmix is listed only when its plugin loads ---
# With the build's plugin (libcor's folder), when libcor was built with PMIx.
pmix_built=false
[ -f "$COR_BUILDDIR/cor/core/.libs/cor_boot_pmix.so" ] && pmix_built=true
if $pmix_built; then
    grep -q '^  bootstrap        cor-run pmix none$' "$dir/text" ||
        fail "pmix is built and its plugin is there, but not listed: $(grep '^  bootstrap' "$dir/text")"
    grep -q '^  not available    -$' "$dir/text" ||
        fail "a backend reported unavailable: $(grep '^  not available' "$dir/text")"
    grep -q '^\.bootstrap_unavailable=$' "$dir/paths" || fail "JSON: bootstrap_unavailable not empty"
fi
# Without it: libcor copied to a folder of its own, which the loader searches first (then the
# installed folder beside the route plugins', which must not hold one for this case).
real=$b/.libs/lt-cor-info
[ -x "$real" ] || real=$b/.libs/cor-info
bootdir=$(sed -n 's/^  plugin folder    \(.*\)\/routes$/\1/p' "$dir/text")
if [ ! -x "$real" ]; then
    echo "skip: no uninstalled cor-info binary to run beside a copy of libcor"
elif [ -f "$bootdir/cor_boot_pmix.so" ]; then
    echo "skip: an installed cor_boot_pmix.so in $bootdir would serve"
else
    mkdir "$dir/lib"
    cp "$COR_BUILDDIR/cor/core/.libs/libcor.so.0" "$dir/lib/"
    LD_LIBRARY_PATH="$dir/lib:$COR_BUILDDIR/cor/dsm/.libs:${LD_LIBRARY_PATH:-}" \
        timeout -k 10 60 "$real" >"$dir/noplugin" 2>"$dir/noplugin.err" ||
        fail "cor-info without the pmix plugin failed: $(cat "$dir/noplugin.err")"
    grep -q '^  bootstrap        cor-run none$' "$dir/noplugin" ||
        fail "without its plugin, pmix is still listed: $(grep '^  bootstrap' "$dir/noplugin")"
    if $pmix_built; then
        why="cor_boot_pmix.so is in neither $dir/lib nor $bootdir"
    else
        why="built without PMIx"
    fi
    grep -q "^  not available    pmix: .*$why" "$dir/noplugin" ||
        fail "without its plugin, the report does not say pmix is unavailable because '$why': $(grep '^  not available' "$dir/noplugin")"
    echo "ok: pmix listed only with its plugin ($(grep '^  not available' "$dir/noplugin"))"
fi

# --- bad input ---
"$b/cor-info" --bogus >/dev/null 2>"$dir/bad.err"
[ $? -eq 2 ] && grep -q "unknown argument '--bogus'" "$dir/bad.err" ||
    fail "cor-info --bogus: expected exit 2 and a message"
echo '{"a": [1, 2,]}' | "$b/json_check" >/dev/null 2>&1 && fail "json_check accepted bad JSON"
"$b/cor-info" --no-open --json | "$b/json_check" | grep -q '^\.libgm\.opened=false$' ||
    fail "cor-info --no-open still opened a GM port"
echo "ok: bad input"

[ "$fails" -eq 0 ] || exit 1
