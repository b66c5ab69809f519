#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_examples.sh PROGRAM...: runs each minimal example (minimal, and
# minimal_libevent / minimal_libuv where they were built) against a
# redis-server of its own: each must take the lock, work, release it and
# exit 0. Needs redis-server and redis-cli; LEASH_REDIS_SERVER picks another
# redis-server.
set -euo pipefail

# shellcheck source=tests/support/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/support/redis.sh"

[[ $# -gt 0 ]] || {
    echo "usage: test_examples.sh PROGRAM..."
    exit 2
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-examples.XXXXXX")
redis_pid=
cleanup() {
    if [[ -n $redis_pid ]]; then
        kill -TERM "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

test_redis_start "$tmp" || {
    echo "FAIL: no redis-server came up"
    exit 1
}

passed=0
failed=0
for program in "$@"; do
    name=$(basename "$program")
    status=0
    out=$(timeout 30 "$program" "redis://127.0.0.1:$redis_port" 2>&1) || status=$?
    if [[ $status == 0 && $out == *"got the lock, fence"* &&
        $out == *"job done, lock released: success"* ]]; then
        echo "PASS $name"
        passed=$((passed + 1))
    else
        echo "FAIL $name (exit status $status):"
        printf '%s\n' "$out" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
# Nothing of theirs is left in Redis.
if [[ $(redis-cli -p "$redis_port" exists leash:report) != 0 ]]; then
    echo "FAIL the lock key leash:report is still there"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
