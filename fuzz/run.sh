#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fuzz/run.sh [SECONDS]: builds the libFuzzer targets with clang into
# build-fuzz/ and runs fuzz_replies for SECONDS (default 60), then fuzz_url
# (the URL parser: small, so LEASH_FUZZ_URL_SECONDS, default 10), each on a
# scratch copy of its seed corpus (fuzz/corpus/, fuzz/corpus-url/; only
# read). A crash leaves its input in build-fuzz/fuzz-artifacts/ and fails
# the run; replay it with
#   build-fuzz/fuzz/fuzz_replies build-fuzz/fuzz-artifacts/crash-...
# Environment: LEASH_FUZZ_BUILD_DIR (build folder), LEASH_FUZZ_JOBS
# (parallel fuzzing processes, default 1).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
build=${LEASH_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${LEASH_FUZZ_JOBS:-1}

# clang and its sanitizer / libFuzzer runtimes (libclang-rt-dev), and what
# the build needs: installed when root, else the apt-get line is printed.
export CC=clang
LEASH_SANITIZE=address,undefined
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"
leash_ensure_packages

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLEASH_BUILD_FUZZ=ON -DLEASH_BUILD_TESTS=OFF -DLEASH_BUILD_EXAMPLES=OFF \
    -DLEASH_BUILD_BENCH=OFF -DLEASH_WERROR=ON >/dev/null
cmake --build "$build" --target fuzz_replies fuzz_url --parallel "$(nproc 2>/dev/null || echo 2)"

work=$(mktemp -d "${TMPDIR:-/tmp}/leash-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/fuzz-artifacts"
rm -f "$build"/fuzz-artifacts/crash-* "$build"/fuzz-artifacts/leak-* "$build"/fuzz-artifacts/timeout-* \
    "$build"/fuzz-artifacts/oom-*
parallel=()
if [[ $jobs -gt 1 ]]; then
    parallel=(-jobs="$jobs" -workers="$jobs")
fi

# fuzz TARGET SECONDS CORPUS: runs build-fuzz/fuzz/TARGET on a copy of CORPUS.
fuzz() {
    local target=$1 secs=$2 status=0
    mkdir -p "$work/$target/corpus"
    cp "$3"/* "$work/$target/corpus/"
    echo "$target: ${secs} s, corpus $(ls "$work/$target/corpus" | wc -l) seeds"
    cd "$work/$target"
    # Progress lines (new coverage) are many and say little here.
    "$build/fuzz/$target" "$work/$target/corpus" "${parallel[@]}" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/" 2>&1 |
        grep -v $'^#[0-9]*\t\(NEW\|REDUCE\|pulse\)' || status=${PIPESTATUS[0]}
    if [[ $jobs -gt 1 ]]; then
        cat fuzz-*.log 2>/dev/null | grep -E 'ERROR|SUMMARY|Test unit written' || true
    fi
    if [[ $status -ne 0 ]] || [[ -n $(ls "$build/fuzz-artifacts") ]]; then
        echo "$target: FAILED (status $status); inputs in $build/fuzz-artifacts/" >&2
        exit 1
    fi
    echo "$target: no crash in ${secs} s"
}

fuzz fuzz_replies "$seconds" "$root/fuzz/corpus"
fuzz fuzz_url "${LEASH_FUZZ_URL_SECONDS:-10}" "$root/fuzz/corpus-url"
