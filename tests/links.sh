#!/bin/sh
# Every relative link in the tree's Markdown files ([text](path) and [text](path#anchor)) names
# a file or folder that exists, and an anchor, when given, names a heading of that Markdown
# file (GitHub's rule: lower case, punctuation dropped, spaces as dashes). Web links are not
# followed. Moving a measurement or a README out of place fails here, naming the link.
set -u
top=${COR_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "links: SKIP: python3 missing"; exit 77; }
[ "${COR_SANITIZED:-}" = yes ] && { echo "links: SKIP: sanitizer build (same files)"; exit 77; }
# A distribution tarball holds the docs a user needs, not every file a README links to.
[ -e "$top/.git" ] || { echo "links: SKIP: not a git checkout (a distribution tarball)"; exit 77; }
exec python3 - "$top" <<'PY'
import os, re, sys
top = sys.argv[1]
link = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
        elif not fence and line.startswith('#'):
            t = line.lstrip('#').strip().lower()
            t = re.sub(r'[^\w\- ]', '', t).replace(' ', '-')
            out.add(t)
    return out
bad, n = [], 0
skip_dirs = {'.git', 'build', 'build-asan', 'build-tsan', 'autom4te.cache', 'figures', 'debian'}
for root, dirs, files in os.walk(top):
    rel_root = os.path.relpath(root, top)
    dirs[:] = [d for d in dirs if d not in skip_dirs and not d.startswith('cor-')
               and not (rel_root == '.' and d.startswith('_'))]
    for f in files:
        if not f.endswith('.md'):
            continue
        path = os.path.join(root, f)
        fence = False
        for no, line in enumerate(open(path, encoding='utf-8'), 1):
            if line.startswith('```'):
                fence = not fence
                continue
            if fence:
                continue
            for target in link.findall(line):
                if re.match(r'^[a-z]+:', target):
                    continue
                n += 1
                file, _, anchor = target.partition('#')
                dest = path if file == '' else os.path.normpath(os.path.join(root, file))
                where = f'{os.path.relpath(path, top)}:{no}: {target}'
                if not os.path.exists(dest):
                    bad.append(where + ' (no such file)')
                elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                    bad.append(where + ' (no such heading)')
if bad:
    print(f'links: FAIL: {len(bad)} of {n} relative links lead nowhere:', file=sys.stderr)
    for b in bad:
        print('  ' + b, file=sys.stderr)
    sys.exit(1)
print(f'links: PASS: {n} relative links in the Markdown files lead somewhere')
PY
