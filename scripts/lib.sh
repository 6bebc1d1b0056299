# Shared by scripts/demo, scripts/test and scripts/bench: installs what is missing, builds out of
# tree. Sourced, not run; expects `set -euo pipefail` in the caller.

# The repository root, whatever the caller's working directory.
COR_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian packages the build, the tests and the sanitizer runs need.
COR_PACKAGES=(build-essential autoconf automake libtool pkg-config libcunit1-dev libfabric-dev
    libfabric-bin pvm-dev pvm pvm-examples iproute2 clang clang-format libclang-rt-14-dev python3
    man-db groff-base util-linux gnuplot-nox gdb)
# What scripts/package-test adds (the full tier): the Debian packaging tools and the build
# dependencies of debian/control that the list above lacks.
COR_PACKAGING_PACKAGES=(debhelper dpkg-dev fakeroot lintian git libpmix-dev)

say() { printf '\n=== %s\n' "$*"; }

# Installs the packages dpkg does not know as installed; apt-get update only when needed.
cor_install_missing() {
    cor_install_packages "${COR_PACKAGES[@]}"
}

# cor_install_packages PACKAGE...: the same for any list (scripts/bench's OpenSHMEM peer).
cor_install_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing Debian packages: ${missing[*]}; run as root or install them first" >&2
        return 1
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Regenerates configure when it is missing or older than its inputs.
cor_autogen() {
    local stale=
    if [ ! -x "$COR_TOP/configure" ]; then
        stale=1
    elif [ -n "$(find "$COR_TOP" -path "$COR_TOP/build*" -prune -o \
            \( -name configure.ac -o -name Makefile.am -o -name '*.inc' \) \
            -newer "$COR_TOP/configure" -print | head -n 1)" ]; then
        stale=1
    fi
    if [ -n "$stale" ]; then
        say "autogen"
        "$COR_TOP/autogen.sh"
    fi
}

# cor_configure DIR [configure options...]: configures an out-of-tree build in $COR_TOP/DIR
# (again when the options changed).
cor_configure() {
    local dir=$COR_TOP/$1 opts
    shift
    opts="$*"
    mkdir -p "$dir"
    if [ ! -f "$dir/Makefile" ] || [ "$(cat "$dir/.cor-configure-opts" 2>/dev/null)" != "$opts" ]; then
        say "configure $(basename "$dir") $opts"
        (cd "$dir" && "$COR_TOP/configure" -q "$@")
        printf '%s' "$opts" >"$dir/.cor-configure-opts"
    fi
}

# Route plugins of a build (DIR in $COR_TOP, or an absolute path), found without `make install`.
cor_route_path() {
    local d=$1
    case $d in /*) ;; *) d=$COR_TOP/$d ;; esac
    echo "$d/cor/routes/udp/.libs:$d/cor/routes/gm/.libs"
}

# cor_prepare DIR [configure options]: packages, configure script, configure, make.
cor_prepare() {
    local dir=$1
    shift
    cor_install_missing
    cor_autogen
    cor_configure "$dir" "$@"
    say "make -j2 in $dir"
    make -s -j2 -C "$COR_TOP/$dir"
}
