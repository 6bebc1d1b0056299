# Sourced by the apps' check scripts: a scratch folder removed on exit, and fail(), which
# counts the failed cases (the script ends with `[ "$fails" -eq 0 ] || exit 1`).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
