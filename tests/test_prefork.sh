#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_prefork.sh PREFORK_SERVER: examples/prefork-server end to end.
#
# Starts its own redis-server on a free loopback port and two prefork-servers
# (2 workers each) that share it, then:
#   1. fires concurrent payments at the same orders, through both servers: each
#      order is paid exactly once, the other requests answer "already paid";
#   2. pays different orders at once: they run in parallel, not one by one;
#   3. a payment that cannot get its order's lock in time answers 409;
#   4. GET /locks shows the maintenance lock with its fence and renewals,
#      and GET /metrics this worker's stats in Prometheus text format;
#   5. SIGKILLs the worker that is in the middle of a maintenance run: the
#      next run starts once its lease ran out, the master starts a new worker;
#   6. SIGSTOPs the worker in the middle of a run for longer than the lease,
#      then SIGCONTs it: its lost callback stops the run, and Redis refused
#      whatever it still tried to write with its old fence;
# and checks the maintenance log in Redis: no two runs ever overlapped.
#
# Every process it signals is one it started (or a worker of one it started),
# by pid. Needs redis-server, redis-cli and curl (scripts/lib.sh installs
# them); LEASH_REDIS_SERVER picks another redis-server.
set -euo pipefail

# shellcheck source=tests/support/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/support/redis.sh"

server_bin=${1:?usage: test_prefork.sh PREFORK_SERVER}
redis_bin=${LEASH_REDIS_SERVER:-redis-server}
for tool in "$redis_bin" redis-cli curl; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "FAIL: $tool is missing (scripts/lib.sh installs it)"
        exit 1
    }
done

LEASE_MS=600
PAY_MS=300
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-prefork.XXXXXX")
started=() # pids of what this test started: the redis-server, the masters
masters=()
ports=()
stopped_pid=
passed=0

cleanup() {
    local pid i
    [[ -n $stopped_pid ]] && kill -CONT "$stopped_pid" 2>/dev/null
    for pid in "${started[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${started[@]}"; do
        for i in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
# A command that fails unexpectedly (set -e) says where.
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR

fail() {
    local f
    echo "FAIL: $*"
    for f in "$tmp"/server-*.err; do
        [[ -f $f ]] || continue
        echo "--- last lines of $(basename "$f")"
        tail -n 30 "$f"
    done
    exit 1
}
pass() {
    echo "PASS $*"
    passed=$((passed + 1))
}

now_ms() { date +%s%3N; }

# ---- Redis ----

test_redis_start "$tmp" || fail "no redis-server came up"
started+=("$redis_pid")
rcli() { redis-cli -p "$redis_port" --raw "$@"; }

# ---- two servers ----

start_server() {
    local name=$1 port=
    : >"$tmp/server-$name.out" # there before the server's shell opens it
    "$server_bin" --port 0 --workers 2 --redis-port "$redis_port" --lease-ms "$LEASE_MS" \
        --wait-ms 3000 --pay-ms "$PAY_MS" --job-every-ms 100 --job-steps 6 --step-ms 100 \
        >"$tmp/server-$name.out" 2>"$tmp/server-$name.err" &
    started+=("$!")
    masters+=("$!")
    for _ in $(seq 100); do
        port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/server-$name.out" || true)
        [[ -n $port ]] && break
        sleep 0.05
    done
    [[ -n $port ]] || fail "server $name did not start"
    ports+=("$port")
}
start_server a
start_server b
for port in "${ports[@]}"; do
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port/locks" >/dev/null && break
        sleep 0.05
    done
done
echo "redis on $redis_port, servers on ${ports[*]} (masters ${masters[*]})"

for i in $(seq 1 10); do rcli hset "shop:order:same-$i" state unpaid amount 100 >/dev/null; done
for i in $(seq 1 8); do rcli hset "shop:order:par-$i" state unpaid amount 100 >/dev/null; done
rcli hset shop:order:busy state unpaid amount 100 >/dev/null

# pay ORDER SERVER_INDEX TAG [QUERY]: one request in the background; its
# status code and body land in $tmp/pay-TAG.{code,body}.
pay() {
    curl -s -o "$tmp/pay-$3.body" -w '%{http_code}' -X POST \
        "http://127.0.0.1:${ports[$2]}/orders/$1/pay${4:-}" >"$tmp/pay-$3.code" &
    inflight+=("$!")
}
inflight=()
# Waits for the requests of pay() (a plain `wait` would wait for the servers).
wait_pays() {
    local pid
    for pid in "${inflight[@]}"; do wait "$pid" || true; done
    inflight=()
}

# ---- 1. the same orders, many requests at once, through both servers ----

for i in $(seq 1 10); do
    for j in $(seq 1 6); do
        pay "same-$i" $((j % 2)) "same-$i-$j"
    done
done
wait_pays
for i in $(seq 1 10); do
    paid=0
    for j in $(seq 1 6); do
        code=$(cat "$tmp/pay-same-$i-$j.code")
        body=$(cat "$tmp/pay-same-$i-$j.body")
        [[ $code == 200 ]] || fail "same-$i request $j: HTTP $code: $body"
        if [[ $body == *'"result":"paid"'* ]]; then
            paid=$((paid + 1))
        elif [[ $body != *'"result":"already paid"'* ]]; then
            fail "same-$i request $j: $body"
        fi
    done
    [[ $paid == 1 ]] || fail "order same-$i: $paid requests paid it"
    payments=$(rcli hget "shop:order:same-$i" payments)
    [[ $payments == 1 ]] || fail "order same-$i was paid $payments times in Redis"
done
pass "60 concurrent payments of 10 orders through 2 servers: each order paid once"

# ---- 2. different orders run in parallel ----

t0=$(now_ms)
for i in $(seq 1 8); do pay "par-$i" $((i % 2)) "par-$i"; done
wait_pays
took=$(($(now_ms) - t0))
for i in $(seq 1 8); do
    [[ $(cat "$tmp/pay-par-$i.code") == 200 ]] || fail "par-$i: $(cat "$tmp/pay-par-$i.body")"
    [[ $(rcli hget "shop:order:par-$i" payments) == 1 ]] || fail "order par-$i not paid once"
done
# One after the other they would take 8 x PAY_MS.
((took < 4 * PAY_MS)) || fail "8 different orders took $took ms: not in parallel"
pass "8 different orders paid in parallel in $took ms (one by one: $((8 * PAY_MS)) ms)"

# ---- 3. a wait that runs out answers 409 ----

pay busy 0 busy-first
sleep 0.05
code=$(curl -s -o "$tmp/busy.body" -w '%{http_code}' -X POST \
    "http://127.0.0.1:${ports[1]}/orders/busy/pay?wait_ms=50")
[[ $code == 409 ]] || fail "a 50 ms wait on an order being paid: HTTP $code: $(cat "$tmp/busy.body")"
wait_pays
[[ $(cat "$tmp/pay-busy-first.body") == *'"result":"paid"'* ]] ||
    fail "the first payment of busy: $(cat "$tmp/pay-busy-first.body")"
[[ $(rcli hget shop:order:busy payments) == 1 ]] || fail "order busy not paid once"
pass "a payment whose wait ran out answered 409 (the other server was paying the order)"

# ---- 4. GET /locks ----

seen=
for _ in $(seq 300); do
    for port in "${ports[@]}"; do
        body=$(curl -s "http://127.0.0.1:$port/locks")
        if [[ $body =~ \"name\":\"maintenance\",\"fence\":[0-9]+,\"valid_ms\":[0-9]+,\"renewals\":[1-9] ]]; then
            seen=$body
            break 2
        fi
    done
    sleep 0.02
done
[[ -n $seen ]] || fail "no GET /locks showed the maintenance lock with a renewal"
[[ $seen =~ \"holds\":[1-9] && $seen =~ ^\{\"pid\":[0-9]+,\"held\":[1-9] ]] ||
    fail "GET /locks without the handle's and the client's stats: $seen"
pass "GET /locks: $seen"

# ---- 4b. GET /metrics ----

# Prometheus text from whichever worker answers: every one has granted
# acquires (payments, maintenance runs); the one that holds the
# maintenance lock shows it held and renewed.
metrics_seen=
for _ in $(seq 300); do
    for port in "${ports[@]}"; do
        curl -s -D "$tmp/metrics.head" -o "$tmp/metrics.body" "http://127.0.0.1:$port/metrics"
        if grep -Eq '^leash_locks_held\{pid="[0-9]+"\} [1-9]' "$tmp/metrics.body" &&
            grep -Eq '^leash_renewals_total\{pid="[0-9]+",result="ok"\} [1-9]' "$tmp/metrics.body"; then
            metrics_seen=1
            break 2
        fi
    done
    sleep 0.02
done
[[ -n $metrics_seen ]] || fail "no GET /metrics showed a held, renewed lock: $(cat "$tmp/metrics.body")"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/metrics.head" ||
    fail "GET /metrics content type: $(cat "$tmp/metrics.head")"
for line in '# TYPE leash_acquires_total counter' '# TYPE leash_locks_held gauge' \
    '# HELP leash_lost_total '; do
    grep -q "^$line" "$tmp/metrics.body" || fail "GET /metrics has no '$line'"
done
grep -Eq '^leash_acquires_total\{pid="[0-9]+",result="granted"\} [1-9][0-9]*$' "$tmp/metrics.body" ||
    fail "GET /metrics: no granted acquires: $(cat "$tmp/metrics.body")"
grep -Eq '^leash_lost_total\{pid="[0-9]+",reason="unreachable"\} [0-9]+$' "$tmp/metrics.body" ||
    fail "GET /metrics: no lost counter by reason"
grep -Eq '^leash_hold_seconds_max\{pid="[0-9]+"\} [0-9]+\.[0-9]{6}$' "$tmp/metrics.body" ||
    fail "GET /metrics: hold time not in seconds"
# Nothing but comments and samples: a scraper would refuse the rest.
bad=$(grep -Ev '^(# (HELP|TYPE) leash_[a-z_]+ .+|leash_[a-z_]+\{pid="[0-9]+"(,[a-z]+="[a-z_]+")?\} [0-9]+(\.[0-9]+)?)$' \
    "$tmp/metrics.body" || true)
[[ -z $bad ]] || fail "GET /metrics: lines that are not Prometheus text: $bad"
pass "GET /metrics: $(grep -c '^leash_' "$tmp/metrics.body") samples, e.g. $(grep '^leash_locks_held' "$tmp/metrics.body")"

# ---- the maintenance log ----

# The parent of a process (its comm, field 2, has no spaces here).
parent_of() {
    local _pid _comm _state ppid
    read -r _pid _comm _state ppid _ <"/proc/$1/stat" 2>/dev/null || return 0
    echo "$ppid"
}

# The entry "<kind> <fence> <pid> <step>" of the run in progress, once one is
# at step <= 2 (so that it is mid-run when we act on it).
run_in_progress() {
    local entry kind fence pid step ppid m
    for _ in $(seq 400); do
        entry=$(rcli lindex '{shop:maint}:log' -1)
        read -r kind fence pid step <<<"$entry"
        if [[ ($kind == start || $kind == step) && $step -le 2 ]]; then
            # Ours: a worker of one of the masters we started.
            ppid=$(parent_of "$pid")
            for m in "${masters[@]}"; do
                if [[ $ppid == "$m" ]]; then
                    echo "$fence $pid $m"
                    return 0
                fi
            done
        fi
        sleep 0.01
    done
    return 1
}

# Waits for a run whose fence is above $1; prints its fence.
next_run_after() {
    local entry kind fence rest
    for _ in $(seq 500); do
        while read -r kind fence rest; do
            if [[ $kind == start && $fence -gt $1 ]]; then
                echo "$fence"
                return 0
            fi
        done < <(rcli lrange '{shop:maint}:log' -20 -1)
        sleep 0.01
    done
    return 1
}

worker_count() {
    local n=0 d
    for d in /proc/[0-9]*; do
        [[ $(parent_of "${d#/proc/}") == "$1" ]] && n=$((n + 1))
    done
    echo "$n"
}

# ---- 5. SIGKILL the worker in the middle of a run ----

read -r killed_fence killed_pid killed_master < <(run_in_progress) ||
    fail "no maintenance run in progress"
t0=$(now_ms)
kill -KILL "$killed_pid"
next=$(next_run_after "$killed_fence") || fail "no run started after run $killed_fence was killed"
took=$(($(now_ms) - t0))
rcli lrange '{shop:maint}:log' 0 -1 | grep -q "^end $killed_fence " &&
    fail "run $killed_fence ended although its worker was killed mid-run"
((took <= LEASE_MS + 1000)) || fail "the next run started $took ms after the kill"
for _ in $(seq 100); do
    [[ $(worker_count "$killed_master") == 2 ]] && break
    sleep 0.05
done
[[ $(worker_count "$killed_master") == 2 ]] || fail "the master did not replace worker $killed_pid"
pass "killed worker $killed_pid mid-run (run $killed_fence): run $next started $took ms later, the master started a new worker"

# ---- 6. SIGSTOP the worker in the middle of a run, longer than the lease ----

read -r stopped_fence stopped_pid _ < <(run_in_progress) || fail "no maintenance run in progress"
kill -STOP "$stopped_pid"
next=$(next_run_after "$stopped_fence") ||
    fail "no run started while run $stopped_fence was frozen"
sleep 0.3
kill -CONT "$stopped_pid"
pid=$stopped_pid
stopped_pid=
for _ in $(seq 200); do
    grep -q "\[worker $pid\] maintenance: run $stopped_fence lost its lock" "$tmp"/server-*.err &&
        break
    sleep 0.01
done
grep -q "\[worker $pid\] maintenance: run $stopped_fence lost its lock" "$tmp"/server-*.err ||
    fail "worker $pid never reported run $stopped_fence lost"
pass "froze worker $pid mid-run (run $stopped_fence): run $next took over, the thawed worker's lost callback stopped its run"

# Let a few more runs go by, with payments flowing meanwhile.
for i in $(seq 1 6); do
    rcli hset "shop:order:late-$i" state unpaid amount 100 >/dev/null
    for j in 1 2 3; do pay "late-$i" $((j % 2)) "late-$i-$j"; done
done
wait_pays
for i in $(seq 1 6); do
    [[ $(rcli hget "shop:order:late-$i" payments) == 1 ]] || fail "order late-$i not paid once"
done
sleep 1

# ---- no overlap, from the log ----

open=
runs=0
declare -A pids_seen=()
last_fence=0
while read -r kind fence pid step; do
    case $kind in
    start)
        if [[ -n $open && $open != "$killed_fence" && $open != "$stopped_fence" ]]; then
            fail "run $fence started while run $open was still going"
        fi
        ((fence > last_fence)) || fail "run $fence started after run $last_fence"
        last_fence=$fence
        open=$fence
        pids_seen[$pid]=1
        ;;
    step | end | lost)
        [[ $fence == "$open" ]] || fail "run $fence wrote '$kind $step' while run ${open:-none} held the lock"
        if [[ $kind != step ]]; then
            open=
            [[ $kind == end ]] && runs=$((runs + 1))
        fi
        ;;
    *) fail "unexpected log entry: $kind $fence $pid $step" ;;
    esac
done < <(rcli lrange '{shop:maint}:log' 0 -1)
while read -r kind fence pid step; do
    [[ -z $kind ]] && continue
    [[ $fence == "$stopped_fence" ]] ||
        fail "Redis refused '$kind $fence $pid $step': a stale writer other than the frozen run"
done < <(rcli lrange '{shop:maint}:rejected' 0 -1)
((runs >= 3)) || fail "only $runs maintenance runs completed"
((${#pids_seen[@]} >= 2)) || fail "all the runs were in one worker"
pass "$runs maintenance runs completed in ${#pids_seen[@]} workers, none overlapped; refused late writes: $(rcli llen '{shop:maint}:rejected') (all of the frozen run)"

# ---- orders, once more, all of them ----

for key in $(rcli --scan --pattern 'shop:order:*'); do
    [[ $(rcli hget "$key" state) == paid ]] || fail "$key is not paid"
    [[ $(rcli hget "$key" payments) == 1 ]] || fail "$key paid $(rcli hget "$key" payments) times"
done
pass "every order paid exactly once"

# ---- a clean stop ----

for m in "${masters[@]}"; do kill -TERM "$m"; done
for m in "${masters[@]}"; do
    status=0
    wait "$m" || status=$?
    [[ $status == 0 ]] || fail "master $m exited with status $status"
done
pass "both servers stopped cleanly on SIGTERM"

# Nothing crashed on the way: no sanitizer report, and the only worker that
# did not exit with status 0 is the one killed on purpose.
if grep -E "Sanitizer|runtime error:" "$tmp"/server-*.err; then
    fail "a sanitizer reported an error in a server (above)"
fi
if grep -E "\[master\] worker [0-9]+ (exited with status [1-9]|killed by signal)" \
    "$tmp"/server-*.err | grep -v "worker $killed_pid killed by signal 9"; then
    fail "a worker died (above)"
fi
pass "no worker crashed, no sanitizer report"
echo "$passed passed, 0 failed"
