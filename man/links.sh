#!/bin/sh
# The link pages of the section 3 manual: every name in a page's NAME section other than the
# page's own gets a one-line page ".so man3/PAGE.3", so `man cor_sendI` finds cor_sendI.3's
# group page. The NAME sections are the one list of names (Debian's dh_installman turns these
# pages into symbolic links).
#   links.sh names PAGE...                  print "name page" for every link a page makes
#   links.sh install DIR SRCDIR PAGE...     write the link pages into DIR
#   links.sh uninstall DIR SRCDIR PAGE...   remove them
set -eu

# names PAGE: the names of its NAME section (before "\-"), one a line.
names() {
    sed -n '/^\.SH NAME/,/^\.SH /p' "$1" | sed '1d;$d' | tr '\n' ' ' |
        sed 's/ \\-.*//' | tr ',' '\n' | sed 's/^ *//;s/ *$//' | grep -v '^$'
}

mode=${1:-}
[ $# -ge 1 ] && shift
case $mode in
names)
    for page in "$@"; do
        base=$(basename "$page" .3)
        names "$page" | while read -r n; do
            [ "$n" = "$base" ] || echo "$n $base"
        done
    done
    ;;
install | uninstall)
    [ $# -ge 2 ] || { echo "links.sh: $mode needs DIR SRCDIR PAGE..." >&2; exit 2; }
    dir=$1 srcdir=$2
    shift 2
    for page in "$@"; do
        [ -f "$page" ] || page=$srcdir/$page
        base=$(basename "$page" .3)
        for n in $(names "$page"); do
            [ "$n" = "$base" ] && continue
            if [ "$mode" = install ]; then
                echo ".so man3/$base.3" >"$dir/$n.3"
            else
                rm -f "$dir/$n.3"
            fi
        done
    done
    ;;
*)
    echo "usage: links.sh names PAGE... | install|uninstall DIR SRCDIR PAGE..." >&2
    exit 2
    ;;
esac
