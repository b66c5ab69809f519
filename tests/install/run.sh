#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Proves that a program outside the tree builds against an installed leash,
# both ways a user would do it:
#   1. builds the leash tree (no tests, examples or benchmarks) in a temporary
#      folder and installs it with `cmake --install --prefix` into another;
#   2. checks the installed files (the leash tool and its man page too);
#   3. builds consumer/ with find_package(leash) (CMAKE_PREFIX_PATH=prefix),
#      against the shared and the static library, and checks that
#      find_package(leash) for the previous minor version (from 1.0: major)
#      does not accept this one, as the soname would not;
#   4. builds consumer.c with `cc ... $(pkg-config --cflags --libs leash) -lev`;
#   5. runs the three programs, which print "leash VERSION".
#
# Usage: run.sh SOURCE_DIR
# Environment:
#   CC              compiler for everything (default: cc)
#   LEASH_SANITIZE  sanitizers of the outer build, e.g. address,undefined; the
#                   inner build and the consumers use the same, so that they
#                   link with the same runtime
#   CMAKE_GENERATOR read by cmake itself
#   LEASH_KEEP_TMP  1 keeps the temporary folder for a look afterwards
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 SOURCE_DIR" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cc=${CC:-cc}
sanitize=${LEASH_SANITIZE:-}
jobs=$(nproc 2>/dev/null || echo 2)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-install.XXXXXX")
cleanup() {
    if [[ ${LEASH_KEEP_TMP:-0} == 1 ]]; then
        echo "run.sh: kept $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT

# Configured with one prefix, installed into another: the installed files
# must follow the prefix given at install time.
configured_prefix=$tmp/configured-prefix
prefix=$tmp/prefix

step() { printf '\n=== install test: %s\n' "$*"; }
fail() {
    printf 'install test FAILED: %s\n' "$*" >&2
    exit 1
}

# The version the tree announces, from the same macros CMake reads.
version_part() {
    sed -n "s/^#define LEASH_VERSION_$1 \\([0-9][0-9]*\\)\$/\\1/p" "$src/include/leash/leash.h"
}
major=$(version_part MAJOR)
minor=$(version_part MINOR)
version=$major.$minor.$(version_part PATCH)
# The soname: MAJOR.MINOR before 1.0 (every minor may change the ABI), MAJOR after.
if [[ $major == 0 ]]; then soversion=$major.$minor; else soversion=$major; fi
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "no version in include/leash/leash.h"

# Flags for the consumers: warnings as errors (the installed headers must be
# clean in a user's build) and the outer build's sanitizers.
consumer_cflags=(-Wall -Wextra -Werror)
consumer_ldflags=()
if [[ -n $sanitize ]]; then
    consumer_cflags+=("-fsanitize=$sanitize" -fno-omit-frame-pointer)
    consumer_ldflags+=("-fsanitize=$sanitize")
fi

step "build leash ($cc${sanitize:+, sanitize=$sanitize})"
cmake -S "$src" -B "$tmp/build" \
    -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX="$configured_prefix" \
    -DCMAKE_INSTALL_LIBDIR=lib \
    -DLEASH_BUILD_TESTS=OFF \
    -DLEASH_BUILD_EXAMPLES=OFF \
    -DLEASH_BUILD_BENCH=OFF \
    -DLEASH_SANITIZE="$sanitize"
cmake --build "$tmp/build" --parallel "$jobs"

step "install into $prefix"
cmake --install "$tmp/build" --prefix "$prefix"

step "check the installed files"
for f in \
    include/leash/leash.h \
    include/leash/loop.h \
    include/leash/url.h \
    include/leash/adapters/libev.h \
    lib/libleash.a \
    "lib/libleash.so.$soversion" \
    lib/cmake/leash/leash-config.cmake \
    lib/cmake/leash/leash-config-version.cmake \
    lib/cmake/leash/leash-targets.cmake \
    lib/pkgconfig/leash.pc \
    bin/leash \
    share/man/man1/leash.1 \
    share/man/man3/leash_acquire.3 \
    share/man/man3/leash_cancel.3 \
    share/man/man7/leash.7; do
    [[ -f $prefix/$f ]] || fail "missing $f"
done
[[ $("$prefix/bin/leash" --version) == "leash $version" ]] ||
    fail "bin/leash --version says '$("$prefix/bin/leash" --version)', not 'leash $version'"
grep -q "^\.TH LEASH 1 .*\"leash $version\"" "$prefix/share/man/man1/leash.1" ||
    fail "share/man/man1/leash.1 does not carry the version $version: $(grep '^\.TH' "$prefix/share/man/man1/leash.1")"
[[ -L $prefix/lib/libleash.so ]] || fail "missing the link lib/libleash.so"
soname=$(objdump -p "$prefix/lib/libleash.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }') ||
    true
if [[ -n $soname && $soname != "libleash.so.$soversion" ]]; then
    fail "SONAME is $soname, expected libleash.so.$soversion"
fi
# Nothing installed may point back at the build, the sources or the prefix
# that was configured but not used.
for leak in "$configured_prefix" "$tmp/build" "$src"; do
    if grep -rlF "$leak" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
        fail "the files above name $leak"
    fi
done
echo "ok: headers, adapters, libraries, leash.pc, leash-config*.cmake, bin/leash, the man pages"

step "consumer with find_package(leash)"
cmake -S "$here/consumer" -B "$tmp/consumer-cmake" \
    -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_C_FLAGS="${consumer_cflags[*]}" \
    -DCMAKE_EXE_LINKER_FLAGS="${consumer_ldflags[*]}" \
    -DLEASH_EXPECTED_VERSION="$version"
cmake --build "$tmp/consumer-cmake" --parallel "$jobs"
found_dir=$(sed -n 's/^leash_DIR:PATH=//p' "$tmp/consumer-cmake/CMakeCache.txt")
[[ $found_dir == "$prefix/lib/cmake/leash" ]] ||
    fail "find_package found leash in '$found_dir', not in the prefix"

step "find_package refuses a version the ABI rule excludes"
# Before 1.0 every minor version may change the ABI (the soname says so):
# a request for the previous minor version must not find this one. From
# 1.0 on, the previous major version must not.
older=""
if [[ $major != 0 ]]; then
    older=$((major - 1)).0
elif [[ $minor != 0 ]]; then
    older=0.$((minor - 1))
fi
if [[ -n $older ]]; then
    if cmake -S "$here/consumer" -B "$tmp/consumer-older" \
        -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DLEASH_EXPECTED_VERSION="$older" >"$tmp/consumer-older.log" 2>&1; then
        fail "find_package(leash $older) accepted leash $version"
    fi
    grep -q "requested version \"$older\"" "$tmp/consumer-older.log" ||
        fail "find_package(leash $older) failed for another reason: $(cat "$tmp/consumer-older.log")"
    echo "ok: find_package(leash $older) does not accept leash $version"
else
    echo "skipped: no earlier version than $version to ask for"
fi

step "consumer with pkg-config"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pc_version=$(pkg-config --modversion leash)
[[ $pc_version == "$version" ]] || fail "leash.pc says version $pc_version, expected $version"
read -ra pc_flags <<<"$(pkg-config --cflags --libs leash)"
echo "pkg-config --cflags --libs leash: ${pc_flags[*]}"
mkdir -p "$tmp/consumer-pc"
(
    set -x
    "$cc" "${consumer_cflags[@]}" "$here/consumer/consumer.c" -o "$tmp/consumer-pc/consumer" \
        "${pc_flags[@]}" -lev "${consumer_ldflags[@]}"
)

step "run the consumers"
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for bin in \
    "$tmp/consumer-cmake/consumer" \
    "$tmp/consumer-cmake/consumer_static" \
    "$tmp/consumer-pc/consumer"; do
    out=$("$bin") || fail "$bin exited with $?"
    [[ $out == "leash $version" ]] || fail "$bin printed '$out', expected 'leash $version'"
    echo "ok: ${bin#"$tmp"/}: $out"
done
# The shared builds must have run with the installed library.
for bin in "$tmp/consumer-cmake/consumer" "$tmp/consumer-pc/consumer"; do
    # Not "ldd | grep -q": under pipefail, grep leaving early makes ldd die
    # of SIGPIPE and the pipeline fail at random.
    libs=$(ldd "$bin")
    [[ $libs == *"$prefix/lib/libleash.so.$soversion"* ]] ||
        fail "${bin#"$tmp"/} does not load $prefix/lib/libleash.so.$soversion"
done
echo
echo "install test passed: find_package and pkg-config consumers of leash $version"
