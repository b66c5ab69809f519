#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_demo_nginx.sh NGINX MODULE_SO: runs `scripts/demo --nginx` with that
# nginx and module (LEASH_DEMO_NGINX, LEASH_DEMO_NGINX_MODULE: no package
# check, no build) and checks its story: status 0, "result: OK", nothing
# marked "!!", every request answered 200 with $leash_status granted, each
# report id served 6 times one at a time with growing fences, /fragile/
# served 12 times 3 at once, the access log lines, then the script's two
# cleanup lines, and, once the script is gone, none of the processes it
# started is left, nor its folders.
# Needs redis-server, redis-cli, curl and python3.
set -euo pipefail

nginx_bin=${1:?usage: test_demo_nginx.sh NGINX MODULE_SO}
module=${2:?usage: test_demo_nginx.sh NGINX MODULE_SO}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-test-demo-nginx.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

status=0
# The script's folders go into ours (TMPDIR), where their removal is seen.
TMPDIR=$tmp LEASH_DEMO_NGINX=$nginx_bin LEASH_DEMO_NGINX_MODULE=$module \
    timeout 120 "$root/scripts/demo" --nginx >"$tmp/out" 2>&1 || status=$?

failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

# Checks that lines matching the extended regular expressions come in this
# order, each after the one before.
in_order() {
    local at=1 n re
    for re in "$@"; do
        n=$(awk -v from="$at" -v re="$re" 'NR >= from && $0 ~ re { print NR; exit }' "$tmp/out")
        if [[ -z $n ]]; then
            fail "no line matching /$re/ after line $at"
            return
        fi
        at=$((n + 1))
    done
}

[[ $status == 0 ]] || fail "scripts/demo --nginx exited with status $status"
if grep -n '!!' "$tmp/out" >"$tmp/problems"; then
    fail "problems marked !!: $(cat "$tmp/problems")"
fi
# shellcheck disable=SC2016 # regular expressions, not expansions
in_order '^==> backend on 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\)' \
    '^==> nginx a on 127\.0\.0\.1:[0-9]+ \(master pid [0-9]+, 2 workers\)' \
    '^==> nginx b on 127\.0\.0\.1:[0-9]+ \(master pid [0-9]+, 2 workers\)' \
    '^burst: 18 requests for report ids 1-3' \
    '^answers: 30 x 200 granted \(status, \$leash_status\)' \
    '^  report:1 +6  1 +[0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+ \(growing\)$' \
    '^  report:2 +6  1 ' \
    '^  report:3 +6  1 ' \
    '^  [0-9.]+ "GET /(report\?id=[1-3]|fragile/job)[^"]*" 200 leash=granted fence=[0-9]* waited=[0-9]+ms$' \
    '^result: OK$' \
    '^==> cleanup: stopped the backend and nginx pids [0-9]+ [0-9]+ [0-9]+, removed ' \
    '^==> cleanup: stopped redis-server pids [0-9]+, removed '
grep -Eq '^  fragile +12  3 ' "$tmp/out" || fail "no line: fragile served 12, 3 at once"

# Every process the script started is gone (the backend, the masters with
# their workers, redis-server), and so are its folders.
pids=$(sed -n -e 's/^==> cleanup: stopped .* pids \([0-9 ]*\),.*/\1/p' "$tmp/out")
[[ -n $pids ]] || fail "the script did not say which processes it stopped"
for pid in $pids; do
    if [[ -e /proc/$pid ]] && grep -qE 'redis|nginx|backend' "/proc/$pid/cmdline" 2>/dev/null; then
        fail "pid $pid still runs: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
    fi
done
if compgen -G "$tmp/leash-demo*" >/dev/null; then
    fail "the script's folders are still there: $(echo "$tmp"/leash-demo*)"
fi

if [[ $failed != 0 ]]; then
    echo "--- scripts/demo --nginx said:"
    sed 's/^/    /' "$tmp/out"
    exit 1
fi
echo "PASS scripts/demo --nginx: $(grep -c . "$tmp/out") lines, result: OK"
