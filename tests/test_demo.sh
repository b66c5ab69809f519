#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_demo.sh PROGRAM [--cluster | --redlock | --sentinel | --tls]: runs scripts/demo in that
# mode with PROGRAM as its leash-demo (LEASH_DEMO_PROGRAM: no package check,
# no build) and checks the story: the run ends "result: OK" with status 0,
# nothing marked "!!", the key lines of the mode in their order, the
# script's cleanup line, and, once the script is gone, none of the servers
# it started is left, nor its folder.
# Needs redis-server and redis-cli.
set -euo pipefail

usage() {
    echo "usage: test_demo.sh PROGRAM [--cluster | --redlock | --sentinel | --tls]"
    exit 2
}
[[ $# -ge 1 && $# -le 2 ]] || usage
program=$1
mode=${2:-}
[[ $mode == "" || $mode == --cluster || $mode == --redlock || $mode == --sentinel ||
    $mode == --tls ]] || usage
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-test-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

status=0
# The script's own folder goes into ours (TMPDIR), where its removal is seen.
TMPDIR=$tmp LEASH_DEMO_PROGRAM=$program timeout 120 "$root/scripts/demo" ${mode:+"$mode"} \
    >"$tmp/out" 2>&1 || status=$?

failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

# The number of the first line at or after line $1 that matches the
# extended regular expression $2, or 0.
line_of() {
    awk -v from="$1" -v re="$2" 'NR >= from && $0 ~ re { print NR; found = 1; exit }
        END { if (!found) print 0 }' "$tmp/out"
}

# Checks that the lines matching the regular expressions come in this
# order, each after the one before.
in_order() {
    local at=1 n re
    for re in "$@"; do
        n=$(line_of "$at" "$re")
        if [[ $n == 0 ]]; then
            fail "no line matching /$re/ after line $at"
            return
        fi
        at=$((n + 1))
    done
}

[[ $status == 0 ]] || fail "scripts/demo ${mode} exited with status $status"
# The demo's last line, then the script's cleanup.
in_order '^result: OK$' '^==> cleanup: stopped redis-server pids [0-9 ]+'
[[ $(grep -c '^result: ' "$tmp/out") == 1 ]] || fail "not one \"result:\" line"
if grep -n '!!' "$tmp/out" >"$tmp/problems"; then
    fail "problems marked !!: $(cat "$tmp/problems")"
fi

case $mode in
--tls)
    # The one-server story, over TLS to the server's TLS port.
    in_order '^==> certificates of a CA of its own in ' \
        '^==> demo: .* rediss://127\.0\.0\.1:[0-9]+\?ca=.*/certs/ca\.pem' \
        'ACQUIRED, fence [0-9]+' \
        'parent +SIGSTOP w[1-3] \(pid [0-9]+\): frozen mid-job' \
        'parent +SIGCONT w[1-3]' \
        'w[1-3] +LOST \([a-z]+\)' \
        'the run is over, workers stop' \
        '^summary$'
    ;;
"")
    in_order 'ACQUIRED, fence [0-9]+' \
        'parent +SIGSTOP w[1-3] \(pid [0-9]+\): frozen mid-job' \
        'parent +SIGCONT w[1-3]' \
        'w[1-3] +LOST \([a-z]+\)' \
        'the run is over, workers stop' \
        '^summary$'
    ;;
--cluster)
    in_order 'ACQUIRED, fence [0-9]+' \
        'parent +SIGKILL 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\)' \
        'won the election' \
        'the run is over, workers stop' \
        '^summary$'
    ;;
--sentinel)
    # The master killed mid-hold: the sentinels see it down and promote a
    # replica, the workers follow it, and a waiter takes over there.
    in_order 'sentinels ready: each knows the other two and both replicas' \
        'ACQUIRED, fence [0-9]+' \
        'parent +SIGKILL 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\), the master mymaster' \
        'parent +a quorum of sentinels agree that 127\.0\.0\.1:[0-9]+ is down: \+odown' \
        'parent +\+switch-master: the sentinels name 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\) the master mymaster' \
        'the run is over, workers stop' \
        '^summary$' \
        '^  failover +127\.0\.0\.1:[0-9]+ \(pid [0-9]+\) killed' \
        '^  next holder +w[1-3], fence [0-9]+ > w[1-3].s [0-9]+, from the promoted master'
    # The workers follow the new master, before or after the parent sees it.
    in_order 'parent +SIGKILL 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\), the master mymaster' \
        'leash warning: sentinel: master mymaster is at 127\.0\.0\.1:[0-9]+'
    ;;
--redlock)
    # The job goes on with two of five servers killed; the next holder
    # takes over while they are down; with a third killed, the holder's
    # lost callback stops its job, and the waiters wait until the end (a
    # grant or a renewal with no majority, or a lost callback after the
    # validity, is a problem the demo marks "!!").
    in_order 'waiting for the lock' 'ACQUIRED, fence [0-9]+'
    in_order 'ACQUIRED, fence [0-9]+' \
        'parent +SIGKILL 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\) and 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\): 3 of 5 servers left, still a majority; w[1-3] holds fence [0-9]+' \
        'w[1-3] +RENEWED by the 3 servers that run, a majority' \
        'w[1-3] +ACQUIRED, fence [0-9]+: woken .*granted by the 3 servers that run \(2 of 5 down\)' \
        'parent +SIGKILL 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\): 2 of 5 servers left, no majority' \
        'w[1-3] +LOST \(unreachable\), [0-9.]+ s after the kill, [0-9]+ ms after its last write: the lost callback stops the job at [1-8]/9, before its next write' \
        'parent +[0-9.]+ s since the kill, 2 of 5 servers run: nobody can get the lock; w1, w2 and w3 still wait' \
        'no majority: the run is over, workers stop \(waiters first\)' \
        'stops waiting \(acquire canceled\)' \
        '^summary$' \
        '^  the holder +w[1-3] KEPT the lock: renewed [0-9]+ times by the 3 left' \
        '^  next holder +w[1-3], fence [0-9]+ > w[1-3].s [0-9]+, granted by the 3 left' \
        '^  the holder +w[1-3] LOST the lock \(unreachable\)'
    # The holder's release: its line may come just after the next holder's
    # grant (a waiter woken by the first server's message can be granted
    # before the release's callback runs; the demo says so).
    in_order 'w[1-3] +RENEWED by the 3 servers that run, a majority' \
        'job done -> released by the 3 servers that run' \
        'parent +SIGKILL 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\): 2 of 5 servers left, no majority'
    # Three of the five were killed; the script stops the other two.
    in_order '^==> cleanup: stopped redis-server pids [0-9]+ [0-9]+ \([0-9]+ [0-9]+ [0-9]+ were gone already\), removed '
    ;;
esac

# The cleanup: every server the script started is gone, and its folder.
started=$(sed -n 's/^==> [0-9]* redis-servers\{0,1\} (port:pid \([0-9:,]*\)) in .*/\1/p' "$tmp/out")
[[ -n $started ]] || fail "the script did not say which servers it started"
for port_pid in ${started//,/ }; do
    pid=${port_pid#*:}
    if [[ -e /proc/$pid ]] && grep -q redis "/proc/$pid/cmdline" 2>/dev/null; then
        fail "redis-server pid $pid (port ${port_pid%%:*}) still runs"
    fi
done
if compgen -G "$tmp/leash-demo*" >/dev/null; then
    fail "the script's folder is still there: $(echo "$tmp"/leash-demo*)"
fi

if [[ $failed != 0 ]]; then
    echo "--- scripts/demo ${mode} said:"
    sed 's/^/    /' "$tmp/out"
    exit 1
fi
echo "PASS scripts/demo ${mode:-(one server)}: $(grep -c . "$tmp/out") lines, result: OK"
