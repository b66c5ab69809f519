#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_compensation.sh PROGRAM: runs examples/compensation against a
# redis-server of its own, twice over.
#  1. takeover: job "first" is frozen (SIGSTOP) after its second step; job
#     "second" waits for the lock, gets it once first's lease has run out,
#     and finishes; then first is resumed (SIGCONT). First must say it lost
#     the lock and compensated, every undo it sent refused by the store's
#     fence check; the store must be second's version, whole, and untouched
#     by first's late writes.
#  2. crash, then alone: job "crashed" is killed (SIGKILL) after its fourth
#     step, leaving its parts behind; job "third" gets the lock once the
#     crashed one's lease has run out, and its begin must put those parts
#     back. Then third is frozen after its second step for longer than its
#     lease, with nobody else about, and resumed: it loses the lock, its undos
#     are accepted, and the store is second's version again, whole (which it
#     would not be without begin's repair: third undoes fewer parts than the
#     crashed job left).
# Needs redis-server and redis-cli; LEASH_REDIS_SERVER picks another
# redis-server. Only processes this script started are signalled, by pid.
set -euo pipefail

# shellcheck source=tests/support/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/support/redis.sh"

[[ $# == 1 ]] || {
    echo "usage: test_compensation.sh PROGRAM"
    exit 2
}
program=$1
store=leash-example:compensation:store
lease_ms=1000 # LEASE_MS in examples/compensation.c
parts=6       # PARTS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-compensation.XXXXXX")
redis_pid=
jobs_started=()
cleanup() {
    local pid
    for pid in "${jobs_started[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -CONT "$pid" 2>/dev/null || true
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
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
url=redis://127.0.0.1:$redis_port
rcli() {
    redis-cli -p "$redis_port" "$@"
}

failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}
now_ms() {
    date +%s%3N
}

# Starts job NAME in the background, its output in $tmp/NAME.out; its pid
# in $started.
start_job() {
    "$program" --name "$1" "$url" >"$tmp/$1.out" 2>&1 &
    started=$!
    jobs_started+=("$started")
}

# Waits up to $3 s for a line of $tmp/$1.out that matches the extended
# regular expression $2; 1 if none came.
wait_line() {
    local deadline=$(($(now_ms) + $3 * 1000))
    while ! grep -Eq -- "$2" "$tmp/$1.out"; do
        (($(now_ms) < deadline)) || return 1
        sleep 0.02
    done
}

# Waits up to $2 s for pid $1 to end; its exit status in $status (124 and
# a KILL when it did not end).
wait_exit() {
    local deadline=$(($(now_ms) + $2 * 1000))
    while kill -0 "$1" 2>/dev/null && [[ $(ps -o stat= -p "$1" 2>/dev/null) != Z* ]]; do
        if (($(now_ms) >= deadline)); then
            kill -KILL "$1" 2>/dev/null || true
            wait "$1" 2>/dev/null || true
            status=124
            return
        fi
        sleep 0.02
    done
    status=0
    wait "$1" || status=$?
}

# Checks that $tmp/$1.out has lines matching the regular expressions, in
# this order.
in_order() {
    local file=$tmp/$1.out at=1 n re
    shift
    for re in "$@"; do
        n=$(awk -v from="$at" -v re="$re" 'NR >= from && $0 ~ re { print NR; exit }' "$file")
        if [[ -z $n ]]; then
            fail "$(basename "$file" .out): no line matching /$re/ after line $at"
            return
        fi
        at=$((n + 1))
    done
}

count() {
    grep -Ec -- "$2" "$tmp/$1.out" || true
}

fence_of() {
    sed -n 's/.*: got the lock, fence \([0-9][0-9]*\)$/\1/p' "$tmp/$1.out"
}

# The store as "field=value" lines, sorted, without the refusal count.
snapshot() {
    rcli hgetall "$store" | paste - - | grep -v '^rejected' | tr '\t' '=' | sort
}

# Checks that every part equals committed and committed is $1.
check_whole() {
    local committed i part
    committed=$(rcli hget "$store" committed)
    [[ $committed == "$1" ]] || fail "committed is '$committed', not '$1'"
    for i in $(seq "$parts"); do
        part=$(rcli hget "$store" "part:$i")
        [[ $part == "$committed" ]] || fail "part:$i is '$part', committed is '$committed'"
    done
}

# Freezes job $1 (pid $2) once it applied its second part; 1 if it never
# got there, or got to its commit first (nothing left to freeze mid-job).
freeze_mid_job() {
    wait_line "$1" "step 2/$parts applied" 20 || return 1
    kill -STOP "$2"
    frozen_at=$(now_ms)
    if grep -q 'committed ' "$tmp/$1.out"; then
        echo "$1 committed before it could be frozen (a very slow machine?)"
        return 1
    fi
}

dump() {
    local name
    for name in "$@"; do
        [[ -e $tmp/$name.out ]] || continue
        echo "--- $name said:"
        sed 's/^/    /' "$tmp/$name.out"
    done
    echo "--- the store:"
    rcli hgetall "$store" | paste - - | sed 's/^/    /'
}

# --- 1. takeover ------------------------------------------------------------
start_job first
first_pid=$started
wait_line first 'got the lock, fence' 20 || fail "first did not get the lock"
start_job second
second_pid=$started
if [[ $failed == 0 ]] && freeze_mid_job first "$first_pid"; then
    echo "froze first (pid $first_pid) after its second step"
    wait_exit "$second_pid" 30
    second_status=$status
    frozen_ms=$(($(now_ms) - frozen_at))
    before=$(snapshot)
    kill -CONT "$first_pid"
    echo "resumed first after $frozen_ms ms (lease $lease_ms ms); second exited $second_status"
    wait_exit "$first_pid" 20
    first_status=$status

    ((frozen_ms > lease_ms)) || fail "first was frozen $frozen_ms ms, not past its lease"
    [[ $second_status == 0 ]] || fail "second exited with status $second_status, not 0"
    [[ $first_status == 3 ]] || fail "first exited with status $first_status, not 3 (compensated)"
    f1=$(fence_of first)
    f2=$(fence_of second)
    if [[ -z $f1 || -z $f2 ]] || ((f2 <= f1)); then
        fail "fences: first '$f1', second '$f2'"
    fi
    in_order second 'got the lock, fence' \
        "begin: .* [1-9] parts? an earlier holder left put back" \
        "step $parts/$parts applied" "committed second@$f2" 'released the lock: success'
    in_order first "step 2/$parts applied" 'LOST the lock \((unreachable|expired)\)' \
        'compensating: undoing [2-9] applied parts' \
        'compensated: 0 parts undone, [2-9] undos refused by the fence check'
    applied=$(sed -n 's/.*compensating: undoing \([0-9]*\) applied.*/\1/p' "$tmp/first.out")
    refused_undos=$(count first 'undo of part [0-9] REFUSED by the store.s fence check')
    [[ $refused_undos == "$applied" ]] ||
        fail "first applied $applied parts, $refused_undos of its undos were refused"
    [[ $(count first 'back to the committed version') == 0 ]] || fail "an undo of first landed"
    refused=$(count first 'REFUSED by the store.s fence check')
    [[ $(rcli hget "$store" rejected) == "$refused" ]] ||
        fail "the store refused $(rcli hget "$store" rejected) writes, first says $refused"
    check_whole "second@$f2"
    [[ $(rcli hget "$store" fence) == "$f2" ]] || fail "the store's fence is not second's"
    [[ $(snapshot) == "$before" ]] || fail "first's late writes changed the store"
    (($(rcli pttl "$store") > 0)) || fail "the store has no TTL"
else
    fail "could not freeze first mid-job"
fi
if [[ $failed != 0 ]]; then
    dump first second
    exit 1
fi
echo "PASS takeover: first (fence $f1) lost the lock after $applied parts, its $refused_undos" \
    "undos refused; the store is second's (fence $f2), whole"

# --- 2. crash, then alone --------------------------------------------------
rejected_before=$(rcli hget "$store" rejected)
start_job crashed
crashed_pid=$started
if wait_line crashed "step 4/$parts applied" 20; then
    kill -KILL "$crashed_pid"
    wait "$crashed_pid" 2>/dev/null || true
    dirty=$(rcli hgetall "$store" | grep -c '^crashed@' || true)
    if grep -q 'committed ' "$tmp/crashed.out"; then
        fail "crashed committed before it could be killed (a very slow machine?)"
    elif ((dirty < 4)); then
        fail "the crashed job left $dirty parts, not 4 or more"
    fi
else
    fail "crashed did not apply 4 parts"
fi
start_job third
third_pid=$started
if [[ $failed == 0 ]] && freeze_mid_job third "$third_pid"; then
    sleep 2.5 # the lease (1 s) and then some: the hold is over in Redis too
    kill -CONT "$third_pid"
    echo "resumed third after $(($(now_ms) - frozen_at)) ms with nobody else about"
    wait_exit "$third_pid" 20
    [[ $status == 3 ]] || fail "third exited with status $status, not 3 (compensated)"
    in_order third "begin: .* $dirty parts an earlier holder left put back" \
        'LOST the lock \((unreachable|expired)\)' \
        'compensating: undoing [2-9] applied parts' 'undo of part [0-9]: back to the committed' \
        'compensated: [2-9] parts undone, 0 undos refused'
    applied=$(sed -n 's/.*compensating: undoing \([0-9]*\) applied.*/\1/p' "$tmp/third.out")
    [[ $(count third 'back to the committed version') == "$applied" ]] ||
        fail "third applied $applied parts and did not undo them all"
    check_whole "second@$f2"
    f3=$(fence_of third)
    [[ $(rcli hget "$store" fence) == "$f3" ]] || fail "the store's fence is not third's"
    [[ $(rcli hget "$store" rejected) == "$rejected_before" ]] || fail "a write of third was refused"
else
    fail "could not freeze third mid-job"
fi
if [[ $failed != 0 ]]; then
    dump crashed third
    exit 1
fi
echo "PASS crash, then alone: third (fence $f3) put back the $dirty parts the crashed job" \
    "left, lost the lock after $applied parts and undid them; the store is second's again, whole"
rcli del "$store" >/dev/null
