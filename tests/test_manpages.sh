#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_manpages.sh SOURCE_DIR: the manual pages under man/ (man/README)
# against the public headers they document.
#
#   1. every function the public headers export (leash.h, url.h, loop.h:
#      LEASH_EXPORT declarations, static inline functions, function-like
#      macros named leash_*; adapters/*.h: their static inline functions;
#      names ending in '_' are adapter internals) has man/man3/NAME.3,
#      which is its page or a `.so` to it, and that page names it in NAME;
#   2. every `.so` leads to a page that exists and is no `.so` itself;
#   3. the SYNOPSIS of a function's page carries the header's prototype
#      (whitespace aside), so a changed signature fails here until its page
#      follows;
#   4. every page of section 3 has the sections NAME, SYNOPSIS,
#      DESCRIPTION, RETURN VALUE, ERRORS, CALLBACKS, THREADS, EXAMPLE and
#      SEE ALSO; every LEASH_E* code any page names is one leash.h's
#      LEASH_STATUS_MAP defines, and an ERRORS section names nothing else
#      (no LEASH_OK, no lost reason); every other LEASH_* name a page of
#      section 3 or 7 gives is defined in a public header;
#   5. every page, leash.1 with the version filled in as CMake does,
#      renders without a warning: `man --warnings -E UTF-8 -l` at 80
#      columns, as lintian runs it (or `groff -man -ww -z` without man-db).
#
# Nothing here is a list of names: a new call in a header fails step 1
# until its page (or its `.so` to a group's page) is written.
set -euo pipefail

src=$(cd "${1:?usage: test_manpages.sh SOURCE_DIR}" && pwd)
man=$src/man
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

[[ -d $man/man3 && -f $man/man7/leash.7 && -f $man/man1/leash.1.in ]] ||
    {
        echo "FAIL: no man/man3, man/man7/leash.7 or man/man1/leash.1.in in $src"
        exit 1
    }
command -v perl >/dev/null 2>&1 || {
    echo "FAIL: perl is missing (Debian's perl-base)"
    exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-manpages.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- 1-4: the headers against the pages (perl reads both) ----

if ! perl - "$src" <<'PERL'; then
use strict;
use warnings;

my $src = shift;
my $man = "$src/man";
my $fails = 0;
sub fail { print "FAIL: @_\n"; $fails++; }

sub slurp {
    my ($f) = @_;
    open(my $fh, '<', $f) or die "$f: $!";
    local $/;
    my $s = <$fh>;
    close $fh;
    return $s;
}

# Whitespace and the place of '*' do not count; `(name)` is `name`.
sub norm {
    my ($s) = @_;
    $s =~ s/\((leash_\w+)\)\s*\(/ $1(/g;
    $s =~ s/\s+/ /g;
    $s =~ s/\s*([(),*;])\s*/$1/g;
    $s =~ s/^\s+|\s+$//g;
    return $s;
}

# roff to text: the arguments of .B/.BI/.BR/.I... joined, escapes gone.
sub roff_text {
    my ($line) = @_;
    if ($line =~ /^\.(B|I|BI|IB|BR|RB|IR|RI)\s+(.*)$/) {
        my ($macro, $args) = ($1, $2);
        my @parts;
        while ($args =~ /\G\s*(?:"((?:[^"]|"")*)"|(\S+))/gc) {
            push @parts, defined $1 ? $1 : $2;
        }
        # .B and .I set their words apart; the others alternate fonts
        # between words set together.
        $line = join(length($macro) == 1 ? ' ' : '', @parts);
    } elsif ($line =~ /^\./) {
        return '';
    }
    $line =~ s/\\f[BIRP]//g;
    $line =~ s/\\-/-/g;
    $line =~ s/\\e/\\/g;
    $line =~ s/\\&//g;
    return $line;
}

# The sections of a page: name => text (roff lines).
sub sections {
    my ($text) = @_;
    my (%sec, $cur);
    for my $line (split /\n/, $text) {
        if ($line =~ /^\.SH\s+"?([^"]+?)"?\s*$/) {
            $cur = $1;
            $sec{$cur} = '';
            next;
        }
        $sec{$cur} .= "$line\n" if defined $cur;
    }
    return \%sec;
}

# ---- what the headers export ----
my (%exports, %protos, %defined);
my @headers = map { "$src/include/leash/$_" } qw(leash.h url.h loop.h);
push @headers, glob("$src/adapters/*.h");
my $all_headers = '';
for my $h (@headers) {
    my $text = slurp($h);
    $all_headers .= $text;
    (my $code = $text) =~ s{/\*.*?\*/}{ }gs;
    $code =~ s{//[^\n]*}{}g;
    # The export macro's own definitions are not declarations.
    $code =~ s/^[ \t]*#[ \t]*define[ \t]+LEASH_EXPORT\b[^\n]*$//mg;
    my $in_adapter = $h =~ m{/adapters/};
    while ($code =~ /^[ \t]*#[ \t]*define[ \t]+(leash_\w+)\(/mg) {
        $exports{$1} = $h;
    }
    # Declarations: LEASH_EXPORT ... name(...); and static inline ... name(...) {
    while ($code =~ /(LEASH_EXPORT|static\s+inline)\b([^;{}#]*?)\(?\s*\b(leash_\w+)\s*\)?\s*\(([^;{}]*?)\)\s*([;{])/g) {
        my ($kind, $type, $name, $args) = ($1, $2, $3, $4);
        next if $name =~ /_$/;
        $exports{$name} = $h;
        $protos{$name} = norm("$type $name($args);");
        $protos{$name} = norm("static inline$type $name($args);") if $kind ne 'LEASH_EXPORT';
    }
}
while ($all_headers =~ /\b(LEASH_[A-Z0-9_]*[A-Z0-9])\b/g) {
    $defined{$1} = 1;
}
fail("found no exported functions in the headers: the parser is broken")
    if keys(%exports) < 40;

# ---- the status codes ----
my $leash_h = slurp("$src/include/leash/leash.h");
my %codes;
$codes{"LEASH_$1"} = 1 while $leash_h =~ /^\s*X\((E[A-Z]+),\s*-\d+,/mg;
fail("found no LEASH_E* codes in LEASH_STATUS_MAP") if keys(%codes) < 10;

# ---- the pages ----
my %page_text;     # man3/x.3 => text (after following a .so)
my %page_of;       # name => the page file its NAME section is in
my @main3;
for my $f (sort glob("$man/man3/*.3")) {
    my $text = slurp($f);
    (my $rel = $f) =~ s{^\Q$man\E/}{};
    if ($text =~ /^\.so\s+(\S+)\s*$/m) {
        my $to = $1;
        if (!-f "$man/$to") {
            fail("$rel: .so $to: no such page");
            next;
        }
        if (slurp("$man/$to") =~ /^\.so\s/m) {
            fail("$rel: .so $to, which is a .so itself");
            next;
        }
        fail("$rel: a .so page holds nothing else") if $text =~ /^(?!\.so|\.\\")\S/m;
        next;
    }
    push @main3, $rel;
    $page_text{$rel} = $text;
}
for my $rel (@main3) {
    my $sec = sections($page_text{$rel});
    for my $want ('NAME', 'SYNOPSIS', 'DESCRIPTION', 'RETURN VALUE', 'ERRORS', 'CALLBACKS',
                  'THREADS', 'EXAMPLE', 'SEE ALSO') {
        fail("$rel: no section $want") unless exists $sec->{$want};
    }
    next unless exists $sec->{NAME};
    (my $names = $sec->{NAME}) =~ s/\\-.*//s;
    for my $n (split /[\s,]+/, $names) {
        next if $n eq '';
        fail("$rel: NAME lists $n twice across pages ($page_of{$n} too)")
            if exists $page_of{$n};
        $page_of{$n} = $rel;
    }
}

for my $name (sort keys %exports) {
    my $file = "$man/man3/$name.3";
    my $where = $exports{$name};
    $where =~ s{^\Q$src\E/}{};
    if (!-f $file) {
        fail("$name ($where) has no man/man3/$name.3 (a page, or a .so to its group's)");
        next;
    }
    my $text = slurp($file);
    my $page = $text =~ /^\.so\s+(\S+)/m ? $1 : "man3/$name.3";
    if (!exists $page_of{$name}) {
        fail("$name ($where): no page names it in NAME");
        next;
    }
    if ($page_of{$name} ne $page) {
        fail("$name: man3/$name.3 leads to $page, but $page_of{$name} names it");
        next;
    }
    next unless exists $protos{$name};
    my $syn = sections($page_text{$page})->{SYNOPSIS} // '';
    my $flat = norm(join(' ', map { roff_text($_) } split /\n/, $syn));
    fail("$page: SYNOPSIS lacks the prototype of $name as $where declares it: $protos{$name}")
        unless $flat =~ /(?<![\w])\Q$protos{$name}\E/;
}
for my $n (sort keys %page_of) {
    fail("$page_of{$n} names $n in NAME, which no header exports")
        unless exists $exports{$n};
}

# ---- error codes and other names in every page ----
my @all = (@main3, 'man7/leash.7', 'man1/leash.1.in');
for my $rel (@all) {
    my $text = $page_text{$rel} // slurp("$man/$rel");
    (my $plain = $text) =~ s/\\f[BIRP]//g;
    $plain =~ s/^\.TH[^\n]*//m;
    while ($plain =~ /\b(LEASH_E[A-Z0-9_]*[A-Z0-9])(?![A-Z0-9_*])/g) {
        fail("$rel: $1 is no status code of leash.h") unless exists $codes{$1};
    }
    if ($rel !~ /^man1/) {
        while ($plain =~ /\b(LEASH_[A-Z0-9_]*[A-Z0-9])(?![A-Z0-9_*])/g) {
            fail("$rel: $1 is defined in no public header") unless exists $defined{$1};
        }
    }
    # What ERRORS lists: the tag of each .TP item, one code or several.
    my $errors = sections($plain)->{ERRORS};
    next unless defined $errors;
    while ($errors =~ /^\.TP[^\n]*\n([^\n]*)/mg) {
        my $tag = roff_text($1);
        my @listed = $tag =~ /\b(LEASH_\w+)/g;
        fail("$rel: an ERRORS item lists no LEASH_E* code: $tag") unless @listed;
        for my $c (@listed) {
            fail("$rel: ERRORS lists $c, which is no LEASH_E* code of leash.h")
                unless exists $codes{$c};
        }
        (my $rest = $tag) =~ s/\bLEASH_\w+//g;
        fail("$rel: an ERRORS item lists more than codes: $tag") if $rest =~ /[^\s,]/;
    }
}

my @every3 = glob("$man/man3/*.3");
printf "checked %d exported names, %d pages of section 3 (and %d .so), leash.7, leash.1\n",
    scalar(keys %exports), scalar(@main3), scalar(@every3) - scalar(@main3);
exit($fails ? 1 : 0);
PERL
    fails=$((fails + 1))
fi

# ---- 5: rendering, as lintian does ----

version=$(sed -n 's/^#define LEASH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
    "$src/include/leash/leash.h" | paste -sd.)
mkdir -p "$tmp/man1" "$tmp/man3" "$tmp/man7"
sed "s/@PROJECT_VERSION@/$version/g" "$man/man1/leash.1.in" >"$tmp/man1/leash.1"
grep -q '@[A-Z_]*@' "$tmp/man1/leash.1" && fail "leash.1.in has a @VAR@ CMake does not fill"
cp "$man"/man3/*.3 "$tmp/man3/"
cp "$man"/man7/*.7 "$tmp/man7/"

if command -v man >/dev/null 2>&1; then
    render() { LC_ALL=C.UTF-8 MANWIDTH=80 MANROFFSEQ='' man --warnings -E UTF-8 -l -Tutf8 -Z "$1"; }
    how="man --warnings"
elif command -v groff >/dev/null 2>&1; then
    render() { LC_ALL=C.UTF-8 groff -s -man -ww -z -Tutf8 "$1"; }
    how="groff -ww"
else
    echo "FAIL: neither man (man-db) nor groff (groff-base) is installed"
    exit 1
fi
pages=0
cd "$tmp" # a .so names its page from the top of the tree
for f in man1/*.1 man3/*.3 man7/*.7; do
    out=$(render "$f" 2>&1 >/dev/null) || fail "$f: $how exited with $?"
    [[ -z $out ]] || fail "$f: $how says: $out"
    pages=$((pages + 1))
done
echo "rendered $pages pages with $how"

if ((fails > 0)); then
    echo "$fails failure(s)"
    exit 1
fi
echo "PASS"
