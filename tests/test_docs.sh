#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_docs.sh SOURCE_DIR: README.md, docs/*.md and man/README hold together.
#
#   1. every relative link, [text](path) or [text](path#anchor) or
#      [text](#anchor), outside code blocks and code spans, leads to a file
#      or directory of the tree, and an #anchor to a heading of the target
#      page as GitHub names it (lower case; punctuation but '-' and '_'
#      dropped; spaces to '-'; a repeated heading gets -1, -2, ...);
#   2. every C program the pages show is a file of examples/, which CI
#      builds: a block that follows the line `<!-- example: PATH -->` must
#      be PATH byte for byte (so the docs cannot drift from examples/), and
#      a ```c block with a main() and no such line fails.
#
# Prints one FAIL line per fault and exits 1 if there was any.
set -euo pipefail
export LC_ALL=C

src=$(cd "${1:?usage: test_docs.sh SOURCE_DIR}" && pwd)
cd "$src"
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

pages=(README.md docs/*.md man/README)
for p in "${pages[@]}"; do
    [[ -f $p ]] || fail "$p: missing"
done
[[ -f docs/guide.md ]] || fail "docs/guide.md: missing"

# The anchors of a markdown page, one a line, as GitHub makes them.
anchors() {
    awk '
        /^[ \t]*(```|~~~)/ { fence = !fence; next }
        fence { next }
        /^#+[ \t]/ && match($0, /^#+/) && RLENGTH <= 6 {
            h = $0
            sub(/^#+[ \t]+/, "", h)
            sub(/[ \t]+#*[ \t]*$/, "", h)
            h = tolower(h)
            gsub(/[^a-z0-9 _-]/, "", h)
            gsub(/ /, "-", h)
            n = seen[h]++
            print (n ? h "-" n : h)
        }
    ' "$1"
}

# The links of a markdown page: LINE<TAB>TARGET, outside code.
links() {
    awk '
        /^[ \t]*(```|~~~)/ { fence = !fence; next }
        fence { next }
        {
            line = $0
            gsub(/`[^`]*`/, "", line) # code spans
            while (match(line, /\]\([^)]*\)/)) {
                t = substr(line, RSTART + 2, RLENGTH - 3)
                sub(/[ \t].*$/, "", t) # a "title" after the target
                print NR "\t" t
                line = substr(line, RSTART + RLENGTH)
            }
        }
    ' "$1"
}

checked=0
for p in "${pages[@]}"; do
    [[ -f $p ]] || continue
    dir=$(dirname "$p")
    while IFS=$'\t' read -r n target; do
        case $target in
        http://* | https://* | mailto:*) continue ;;
        esac
        checked=$((checked + 1))
        path=${target%%#*}
        anchor=
        [[ $target == *'#'* ]] && anchor=${target#*#}
        if [[ -z $path ]]; then
            file=$p
        else
            file=$dir/$path
            if [[ ! -e $file ]]; then
                fail "$p:$n: link to $target: no such file ($file)"
                continue
            fi
        fi
        if [[ -n $anchor ]]; then
            if [[ $file != *.md ]]; then
                fail "$p:$n: link to $target: an anchor into a file that is not markdown"
            elif ! grep -qxF -- "$anchor" <<<"$(anchors "$file")"; then
                fail "$p:$n: link to $target: no heading in $file makes #$anchor"
            fi
        fi
    done < <(links "$p")
done
echo "links: $checked relative links checked in ${#pages[@]} pages"

# The C blocks of a markdown page. For each, prints a header line
# "@@ LINE EXAMPLE" (EXAMPLE: the path of the marker before it, or -) and
# then the block's lines, each prefixed with '|'.
blocks() {
    awk '
        /^<!-- example: [^ ]+ -->$/ { ex = $3; exline = NR; next }
        !fence && /^```/ {
            fence = 1
            lang = substr($0, 4)
            mark = (ex != "" && exline == NR - 1) ? ex : "-"
            ex = ""
            if (lang == "c" || mark != "-")
                print "@@ " NR " " mark " " lang
            incode = (lang == "c" || mark != "-")
            next
        }
        fence && /^```[ \t]*$/ { fence = 0; incode = 0; next }
        incode { print "|" $0 }
    ' "$1"
}

programs=0
for p in README.md docs/*.md; do
    [[ -f $p ]] || continue
    tmp=$(mktemp)
    blocks "$p" >"$tmp"
    # split into one file per block
    starts=$(grep -n '^@@ ' "$tmp" | cut -d: -f1 || true)
    for s in $starts; do
        read -r _ line example _ < <(sed -n "${s}p" "$tmp")
        body=$(mktemp)
        # (awk reads to the end: no reader that quits early, no SIGPIPE)
        awk -v from="$((s + 1))" 'NR < from { next } /^@@ / { done = 1 } !done { print substr($0, 2) }' "$tmp" >"$body"
        if [[ $example != - ]]; then
            programs=$((programs + 1))
            if [[ ! -f $example ]]; then
                fail "$p:$line: the block shows $example, which does not exist"
            elif ! cmp -s "$body" "$example"; then
                fail "$p:$line: the block differs from $example:"
                diff "$example" "$body" >"$body.diff" || true
                head -n 10 "$body.diff" | sed "s/^/      /"
                rm -f "$body.diff"
            fi
        elif grep -Eq '^(int|static int) +main *\(' "$body"; then
            fail "$p:$line: a C program (it has main) that is not taken from examples/: put <!-- example: examples/FILE.c --> before it"
        fi
        rm -f "$body"
    done
    rm -f "$tmp"
done
echo "programs: $programs blocks compared with examples/"

if [[ $fails -gt 0 ]]; then
    echo "test_docs: $fails failures"
    exit 1
fi
echo "test_docs: OK"
