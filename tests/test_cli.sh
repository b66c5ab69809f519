#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_cli.sh MODE LEASH HOLDER: the `leash` tool (tools/) end to end on
# MODE single (one redis-server), cluster (3 masters), redlock (3
# servers) or tls (one server, every command over rediss://) of its own. HOLDER (tests/cli_holder.c) takes locks of every
# kind through the library; the test checks what ls, show, watch and
# release --force say and do about them, human and --json (read with jq),
# and every exit code: 0 found/done, 1 not found, 2 usage, 3 unreachable.
# Needs redis-server, redis-cli and jq; LEASH_REDIS_SERVER picks another
# redis-server. Only processes this script started are stopped, by pid.
set -euo pipefail

# shellcheck source=tests/support/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/support/redis.sh"

[[ $# == 3 ]] || {
    echo "usage: test_cli.sh single|cluster|redlock|tls LEASH HOLDER"
    exit 2
}
mode=$1
leash=$2
holder=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-cli.XXXXXX")
servers=()
started=()
cleanup() {
    local pid
    for pid in "${started[@]}" "${servers[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}
now_ms() {
    date +%s%3N
}

# --- servers ----------------------------------------------------------------
ports=()
cli_tls=() # what redis-cli needs for the servers the tool names
case $mode in
single)
    test_redis_start "$tmp" || {
        echo "FAIL: no redis-server came up"
        exit 1
    }
    servers=("$redis_pid")
    ports=("$redis_port")
    conn=(-u "redis://127.0.0.1:$redis_port")
    hconn=("redis://127.0.0.1:$redis_port")
    bad=(-u redis://127.0.0.1:1)
    ;;
tls)
    # Certificates of the test's own; the plain port stays for redis-cli.
    certs=$tmp/certs
    "$(dirname "${BASH_SOURCE[0]}")/../scripts/make-certs" "$certs"
    redis_tls_dir=$certs test_redis_start "$tmp" || {
        echo "FAIL: no redis-server came up"
        exit 1
    }
    servers=("$redis_pid")
    ports=("$redis_port")
    conn=(-u "rediss://127.0.0.1:$redis_tls_port?ca=$certs/ca.pem")
    hconn=("rediss://127.0.0.1:$redis_tls_port?ca=$certs/ca.pem")
    bad=(-u "rediss://127.0.0.1:1?ca=$certs/ca.pem")
    cli_tls=(--tls --cacert "$certs/ca.pem")
    ;;
cluster)
    if ! test_redis_cluster_start "$tmp" 3; then
        servers=("${cluster_pids[@]}")
        echo "FAIL: no cluster came up"
        exit 1
    fi
    servers=("${cluster_pids[@]}")
    ports=("${cluster_ports[@]}")
    list=$(printf '127.0.0.1:%s,' "${ports[@]}")
    conn=(--cluster "127.0.0.1:${ports[0]}")
    hconn=(--cluster "${list%,}")
    bad=(--cluster 127.0.0.1:1)
    ;;
redlock)
    for i in 1 2 3; do
        mkdir -p "$tmp/$i"
        test_redis_start "$tmp/$i" || {
            echo "FAIL: no redis-server came up"
            exit 1
        }
        servers+=("$redis_pid")
        ports+=("$redis_port")
    done
    list=$(printf '127.0.0.1:%s,' "${ports[@]}")
    conn=(--redlock "${list%,}")
    hconn=(--redlock "${list%,}")
    bad=(--redlock "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3")
    ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac

L() {
    "$leash" "${conn[@]}" "$@"
}

# expect_rc N CMD...: runs CMD (stdin from /dev/null), its output in $out.
expect_rc() {
    local want=$1 rc=0
    shift
    out=$("$@" </dev/null 2>&1) || rc=$?
    [[ $rc == "$want" ]] || fail "$* exited $rc, not $want; it said: $out"
}

# A holder process of its own, fed through a fifo: start_holder NAME, then
# tell NAME "command", and wait_line NAME REGEX SECONDS.
declare -A holder_fd
start_holder() {
    local fd
    mkfifo "$tmp/$1.in"
    "$holder" "${hconn[@]}" <"$tmp/$1.in" >"$tmp/$1.out" 2>&1 &
    started+=("$!")
    exec {fd}>"$tmp/$1.in"
    holder_fd[$1]=$fd
}
tell() {
    echo "$2" >&"${holder_fd[$1]}"
}
wait_line() {
    local deadline=$(($(now_ms) + $3 * 1000))
    while ! grep -Eq -- "$2" "$tmp/$1.out"; do
        if (($(now_ms) >= deadline)); then
            fail "$1 did not say /$2/ in $3 s"
            sed 's/^/    /' "$tmp/$1.out"
            return 1
        fi
        sleep 0.02
    done
}
fence_of() { # NAME ID
    sed -n "s/^$2 granted fence \\([0-9]*\\) .*/\\1/p" "$tmp/$1.out" | tail -1
}

# --- usage, help, unreachable ----------------------------------------------
expect_rc 2 "$leash"
expect_rc 2 "$leash" frobnicate
expect_rc 2 L show
expect_rc 2 L ls --timeout 0
expect_rc 2 L --bogus ls
expect_rc 2 "$leash" -u http://x ls
expect_rc 0 "$leash" --help
[[ $out == *"release --force NAME"* && $out == *"Exit status"* ]] || fail "--help: $out"
expect_rc 0 "$leash" watch --help
[[ $out == *"--interval MS"* ]] || fail "watch --help: $out"
expect_rc 2 "$leash" help frobnicate
expect_rc 2 "$leash" frobnicate --help
expect_rc 3 "$leash" "${bad[@]}" --timeout 500 ls
# A release refused on its arguments is refused before any server is
# asked: 2 whether Redis answers or not.
expect_rc 2 "$leash" "${bad[@]}" --timeout 500 release --force x
expect_rc 2 "$leash" "${bad[@]}" --timeout 500 release --yes x
expect_rc 3 "$leash" "${bad[@]}" --timeout 500 show x

# --- nothing there ----------------------------------------------------------
expect_rc 1 L ls
expect_rc 1 L show nothing
expect_rc 1 L release --force --yes nothing

# --- locks of every kind ----------------------------------------------------
start_holder a
wait_line a '^ready' 10
tell a "new 0 mutex job:1"
tell a "acquire 0"
wait_line a '^0 granted' 10
tell a "acquire 0"
wait_line a '^0 granted .* count 2' 10
f0=$(fence_of a 0)
family=0
if [[ $mode != redlock ]]; then
    family=1
    tell a "new 1 fair q"
    tell a "acquire 1"
    tell a "new 2 read rw"
    tell a "acquire 2"
    tell a "new 3 read rw"
    tell a "acquire 3"
    tell a "new 4 sem pool 5"
    tell a "acquire 4"
    wait_line a '^4 granted' 10
    wait_line a '^3 granted' 10
    tell a "new 5 write rw"
    tell a "acquire 5 60000"
    # The writer queues behind the two readers.
    for _ in $(seq 100); do
        [[ $(L show rw --json | jq '.waiters | length') == 1 ]] && break
        sleep 0.05
    done
fi

expect_rc 0 L ls
ls_out=$out
echo "$ls_out"
# Redlock: each server gives its own fence; the holder's is the largest of
# the first majority to grant, which the tool can only bound (">=lo").
fence_re=$f0
[[ $mode == redlock ]] && fence_re='(>=)?[0-9]+'
grep -Eq '^job:1 +mutex +[0-9a-f]{12}\.\. +2 +[0-9.]+m?s +'"$fence_re"' ' <<<"$ls_out" ||
    fail "ls: no job:1 line with 2 holds and fence $f0"
if [[ $family == 1 ]]; then
    grep -Eq '^rw +rwlock +2 readers +2 .* 1 *$' <<<"$ls_out" || fail "ls: rw"
    grep -Eq '^pool +semaphore +1/5 permits +1 ' <<<"$ls_out" || fail "ls: pool"
    grep -Eq '^q +fair +[0-9a-f]{12}\.\. +1 ' <<<"$ls_out" || fail "ls: q"
fi
expect_rc 0 L ls --full 'job*'
[[ $(wc -l <<<"$out") == 2 ]] || fail "ls job*: $out"
grep -Eq ' [0-9a-f]{32} ' <<<"$out" || fail "ls --full: no whole token: $out"
expect_rc 1 L ls 'nomatch*'
expect_rc 1 L --prefix other: ls

expect_rc 0 L ls --json
json=$out
jq -e . >/dev/null <<<"$json" || fail "ls --json is not JSON: $json"
if [[ $mode == redlock ]]; then
    # A majority granted it: a server slower than the other two (or not
    # connected yet) may have been left out.
    jq -e --argjson f "$f0" '.[] | select(.name == "job:1") |
        .kind == "mutex" and .majority.servers >= 2 and .majority.of == 3 and
        .majority.fence <= $f and $f <= .majority.fence_max and
        ([.servers[].holders[0].fence] | max) == .majority.fence_max and
        ([.servers[].holders[0].count | values] | unique) == [2]' <<<"$json" >/dev/null ||
        fail "ls --json, job:1: $json"
else
    jq -e --argjson f "$f0" '.[] | select(.name == "job:1") |
        .kind == "mutex" and .key == "leash:job:1" and .holders[0].count == 2 and
        .holders[0].fence == $f and .fence == $f and .ttl_ms > 0 and .ttl_ms <= 3000' \
        <<<"$json" >/dev/null || fail "ls --json, job:1: $json"
    jq -e '.[] | select(.name == "rw") | .kind == "rwlock" and
        ([.holders[].mode] == ["read", "read"]) and .waiters[0].mode == "write" and
        .waiters[0].place > 0' <<<"$json" >/dev/null || fail "ls --json, rw: $json"
    jq -e '.[] | select(.name == "pool") | .kind == "semaphore" and .permits == 5 and
        (.holders | length) == 1' <<<"$json" >/dev/null || fail "ls --json, pool: $json"
    # Each lock was read where it lives.
    while read -r name server; do
        [[ $(redis-cli "${cli_tls[@]}" -h "${server%:*}" -p "${server##*:}" \
            exists "leash:$name") == 1 ]] ||
            fail "ls --json says $name is on $server, it is not"
    done < <(jq -r '.[] | "\(.name) \(.server)"' <<<"$json")
fi

expect_rc 0 L show job:1
echo "$out"
grep -Eq "^  [0-9a-f]{32}  holds 2  fence $fence_re  ttl " <<<"$out" || fail "show job:1: $out"
if [[ $mode == redlock ]]; then
    grep -Eq '^majority  [0-9a-f]{32} on [23] of 3 servers \(2 needed\): held, fence [0-9]+\.\.[0-9]+$' \
        <<<"$out" ||
        fail "show job:1, majority: $out"
    [[ $(grep -c '^server ' <<<"$out") == 3 ]] || fail "show job:1: not 3 servers: $out"
fi
expect_rc 0 L show job:1 --json
jq -e '.name == "job:1"' <<<"$out" >/dev/null || fail "show --json: $out"
# A mutex's waiters: another process waits for job:1, and show counts it
# on the lock's channel (every server of Redlock: it subscribes on each).
start_holder w
wait_line w '^ready' 10
tell w "new 0 mutex job:1"
tell w "acquire 0 3000"
for _ in $(seq 100); do
    out=$(L show job:1 --json) || true
    [[ $(jq '[.subscribers // .servers[].subscribers] | min' <<<"$out") == 1 ]] && break
    sleep 0.02
done
jq -e '[.subscribers // .servers[].subscribers] | min == 1' <<<"$out" >/dev/null ||
    fail "show job:1 --json: no subscriber while w waits: $out"
# (Redlock: every server's queue; a server that the grant's copy never
# reached has no key, so no "waiters" at all.)
jq -e '(.waiters // ([.servers[] | .waiters // []] | add)) == []' <<<"$out" >/dev/null ||
    fail "show job:1 --json: no queue expected: $out"
expect_rc 0 L show job:1
grep -Eq '^waiters   0 queued ' <<<"$out" || fail "show job:1: no queue line: $out"
grep -Eq '^waiting   1 subscribed to its channel' <<<"$out" || fail "show job:1: waiting: $out"
wait_line w '^0 status ' 10
tell w quit
if [[ $family == 1 ]]; then
    expect_rc 0 L show rw
    echo "$out"
    grep -Eq '^  1\. [0-9a-f]{32}  w  place ttl ' <<<"$out" || fail "show rw: $out"
fi

# A Redisson RLock (the hash its scripts write) is recognised.
rs_key='leash:rs'
rs_field='8d4f6a6e-1c1e-4c4b-9d3a-2f0c5b8e9a10:1'
rcli=(redis-cli -p "${ports[0]}")
[[ $mode == cluster ]] && rcli=(redis-cli -c -p "${ports[0]}")
"${rcli[@]}" hset "$rs_key" "$rs_field" 2 >/dev/null
"${rcli[@]}" pexpire "$rs_key" 30000 >/dev/null
expect_rc 0 L show rs --json
jq -e --arg t "$rs_field" '(.kind // .servers[0].kind) == "redisson" and
    ((.holders // .servers[0].holders)[0] | .token == $t and .count == 2)' <<<"$out" \
    >/dev/null || fail "show rs: $out"
expect_rc 2 L release --force --yes rs
# A Redisson read-write lock (RReadWriteLock's hash): its mode and holders.
rrw_key='leash:rrw'
"${rcli[@]}" hset "$rrw_key" mode read "$rs_field" 2 "${rs_field%:1}:2" 1 >/dev/null
"${rcli[@]}" pexpire "$rrw_key" 30000 >/dev/null
expect_rc 0 L show rrw
grep -Eq '^kind      redisson-rw$' <<<"$out" || fail "show rrw: kind: $out"
grep -Eq '^mode      read$' <<<"$out" || fail "show rrw: mode: $out"
grep -Fq "  $rs_field  r  holds 2" <<<"$out" || fail "show rrw: holder: $out"
"${rcli[@]}" del "$rrw_key" >/dev/null
"${rcli[@]}" hset "$rrw_key" mode write "${rs_field}:write" 1 >/dev/null
expect_rc 0 L show rrw --json
jq -e --arg t "$rs_field" '(.kind // .servers[0].kind) == "redisson-rw" and
    (.mode // .servers[0].mode) == "write" and
    ((.holders // .servers[0].holders) == [{"token": $t, "mode": "write", "count": 1, "ttl_ms": -1}])' \
    <<<"$out" >/dev/null || fail "show rrw --json: $out"
expect_rc 2 L release --force --yes rrw
"${rcli[@]}" del "$rrw_key" >/dev/null
# watch hears Redisson's own unlock message (on its channel, sharded in a
# cluster of Redis 7.0 or later as Redisson sends it), long before its next
# poll.
"$leash" "${conn[@]}" watch rs --json --interval 10000 >"$tmp/watch-rs.out" 2>&1 &
watch_pid=$!
started+=("$watch_pid")
for _ in $(seq 100); do
    [[ -s $tmp/watch-rs.out ]] && break
    sleep 0.02
done
"${rcli[@]}" del "$rs_key" >/dev/null
rs_pub=publish
[[ $mode == cluster ]] && (($(test_redis_version) >= 70000)) && rs_pub=spublish
"${rcli[@]}" "$rs_pub" "redisson_lock__channel:{$rs_key}" 0 >/dev/null
for _ in $(seq 50); do
    grep -q '"source":"channel"' "$tmp/watch-rs.out" && break
    sleep 0.02
done
kill -TERM "$watch_pid"
wait "$watch_pid" || true
jq -se '.[1].event == "released" and .[1].source == "channel" and .[1].message == "0"' \
    "$tmp/watch-rs.out" >/dev/null || fail "watch rs: Redisson's unlock message unheard: $(cat "$tmp/watch-rs.out")"
# A prefix with glob characters matches itself only.
"${rcli[@]}" set 'p[1]:m' 0123456789abcdef0123456789abcdef:0:1:42 px 30000 >/dev/null
"${rcli[@]}" set 'p1:m' 0123456789abcdef0123456789abcdef:0:1:43 px 30000 >/dev/null
expect_rc 0 L --prefix 'p[1]:' ls --json
jq -e 'length == 1 and .[0].name == "m" and (.[0].fence // .[0].servers[0].fence) == 42' \
    <<<"$out" >/dev/null ||
    fail "ls --prefix 'p[1]:': $out"
"${rcli[@]}" del 'p[1]:m' >/dev/null
"${rcli[@]}" del 'p1:m' >/dev/null
"${rcli[@]}" set leash:plain hello >/dev/null
expect_rc 1 L show plain
"${rcli[@]}" del leash:plain >/dev/null
# A hash with a fence but no held field is a WRONGTYPE to the family's
# scripts (a force release fails), so it is no lock to the tool either.
"${rcli[@]}" hset leash:nohold fence 5 h0123456789abcdef0123456789abcdef \
    f:1:5:0123456789abcdef0123456789abcdef:99999999999999 >/dev/null
expect_rc 1 L show nohold
"${rcli[@]}" del leash:nohold >/dev/null
# The counts of a key of anyone's add up without wrapping round.
"${rcli[@]}" hset leash:huge "${rs_field%:1}:1" 9223372036854775807 \
    "${rs_field%:1}:2" 9223372036854775807 >/dev/null
expect_rc 0 L ls 'huge*'
[[ $out == *" 9223372036854775807 "* && $out != *" -2 "* ]] || fail "ls huge: $out"
"${rcli[@]}" del leash:huge >/dev/null

# A name that is not UTF-8 still makes JSON that a strict reader takes.
printf 'SET "leash:bin\\xff\\xc3(" 0123456789abcdef0123456789abcdef:0:1:7 PX 30000\n' |
    "${rcli[@]}" >/dev/null
expect_rc 0 L ls 'bin*' --json
iconv -f UTF-8 -t UTF-8 <<<"$out" >/dev/null 2>&1 || fail "ls --json is not UTF-8: $out"
expect_rc 0 L show $'bin\xff\xc3(' --json
iconv -f UTF-8 -t UTF-8 <<<"$out" >/dev/null 2>&1 || fail "show --json is not UTF-8: $out"
jq -e '.name == "bin\ufffd\ufffd("' <<<"$out" >/dev/null || fail "show --json, bin: $out"
printf 'DEL "leash:bin\\xff\\xc3("\n' | "${rcli[@]}" >/dev/null

if [[ $mode != redlock ]]; then
    # watch in a pipeline stops once its reader is gone (SIGPIPE is
    # ignored: the failed write stops it).
    (
        for i in $(seq 200); do
            "${rcli[@]}" set leash:piped "0123456789abcdef0123456789abcdef:0:1:$i" px 30000 \
                >/dev/null 2>&1 || break
            sleep 0.05
        done
    ) &
    writer=$!
    started+=("$writer")
    "$leash" "${conn[@]}" watch piped --interval 20 > >(head -1 >/dev/null) 2>&1 &
    watch_pid=$!
    started+=("$watch_pid")
    for _ in $(seq 160); do
        kill -0 "$watch_pid" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "$watch_pid" 2>/dev/null; then
        fail "watch | head -1 still runs 8 s after head left"
        kill -TERM "$watch_pid"
    fi
    watch_rc=0
    wait "$watch_pid" || watch_rc=$?
    [[ $watch_rc == 0 ]] || fail "watch | head -1 exited $watch_rc"
    kill "$writer" 2>/dev/null || true
    wait "$writer" 2>/dev/null || true
    "${rcli[@]}" del leash:piped >/dev/null
fi

if [[ $mode == redlock ]]; then
    # A server that accepts connections but never answers costs one
    # timeout, not one per lock.
    for p in "${ports[@]:0:2}"; do
        redis-cli -p "$p" eval "for i = 1, 30 do redis.call('set', 'leash:hung' .. i,
            '0123456789abcdef0123456789abcdef:0:1:' .. i, 'px', 30000) end" 0 >/dev/null
    done
    kill -STOP "${servers[2]}"
    t0=$(now_ms)
    expect_rc 0 L --timeout 300 ls 'hung*'
    t1=$(now_ms)
    kill -CONT "${servers[2]}"
    [[ $(grep -c '^hung' <<<"$out") == 30 ]] || fail "ls with a server stopped: $out"
    ((t1 - t0 < 3000)) || fail "ls with a server stopped took $((t1 - t0)) ms"
    for p in "${ports[@]:0:2}"; do
        redis-cli -p "$p" eval "for i = 1, 30 do redis.call('del', 'leash:hung' .. i) end" 0 \
            >/dev/null
    done
fi

# --- watch ------------------------------------------------------------------
start_holder b
wait_line b '^ready' 10
"$leash" "${conn[@]}" watch job2 --json --interval 50 >"$tmp/watch.out" 2>&1 &
watch_pid=$!
started+=("$watch_pid")
sleep 0.5
tell b "new 0 mutex job2"
tell b "acquire 0"
wait_line b '^0 granted' 10
# A waiter marks the key: the holder's renewals and release then publish.
tell b "new 1 mutex job2"
tell b "acquire 1 20000"
sleep 1.6 # one renewal (every 1 s) and more
tell b "release 0"
wait_line b '^1 granted' 10
sleep 0.3
tell b "release 1"
wait_line b '^1 released LEASH_OK' 10
sleep 0.4
kill -TERM "$watch_pid"
watch_rc=0
wait "$watch_pid" || watch_rc=$?
[[ $watch_rc == 0 ]] || fail "watch exited $watch_rc after SIGTERM"
echo "--- watch --json said:"
cat "$tmp/watch.out"
fb0=$(fence_of b 0)
fb1=$(fence_of b 1)
if ! jq -e . "$tmp/watch.out" >/dev/null; then
    fail "watch --json: not JSON lines"
else
    # is($f): the event is about the hold of fence $f (Redlock: a range).
    jq -se --argjson f0 "$fb0" --argjson f1 "$fb1" '
        def is($f): .fence == $f or (.fence_max != null and .fence <= $f and $f <= .fence_max);
        (.[0].event == "state" and .[0].kind == "none") and
        (map(select(.event == "acquired" and is($f0))) | length) == 1 and
        (map(select(.event == "renewed" and .source == "poll" and is($f0))) | length) >= 1 and
        (map(select(.event == "renewed" and .source == "channel")) | length) >= 1 and
        (map(select(.event == "released" and .source == "channel")) | length) >= 1 and
        (map(select(.event == "released" and .source == "poll" and is($f0))) | length) == 1 and
        (map(select(.event == "acquired" and is($f1))) | length) == 1 and
        (map(select(.event == "released" and .source == "poll" and is($f1))) | length) == 1 and
        (map(.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$")) | all)' \
        "$tmp/watch.out" >/dev/null || fail "watch --json: events missing or wrong"
    # Events in the order they happened.
    order=$(jq -r --argjson f0 "$fb0" '
        select(.source == "poll" and .event != "state" and .event != "agree") |
        "\(.event)-\(if .fence <= $f0 then 0 else 1 end)"' "$tmp/watch.out" | tr '\n' ' ')
    [[ $order == *"acquired-0 "*"released-0 "*"acquired-1 "*"released-1 "* ]] ||
        fail "watch: events out of order: $order"
fi
expect_rc 0 L watch job2 --events 1 --seconds 2
[[ $out == *"  state      free"* ]] || fail "watch --seconds: $out"

# --- release --force --------------------------------------------------------
# tty_run ANSWER CMD...: runs CMD on a terminal of script(1)'s, typing
# ANSWER; its exit status in $rc, what it printed in $out.
tty_run() {
    local answer=$1 cmd
    shift
    printf -v cmd '%q ' "$@"
    rc=0
    out=$(printf '%s\n' "$answer" | script -qec "$cmd" /dev/null 2>&1) || rc=$?
}
tty_run n "$leash" "${conn[@]}" release --force job:1
[[ $rc == 2 && $out == *'Force-release mutex lock "job:1"'*'[y/N]'*'not released'* ]] ||
    fail "release on a terminal, answered n: exit $rc: $out"
expect_rc 0 L show job:1
if [[ $family == 1 ]]; then
    tty_run y "$leash" "${conn[@]}" release --force q
    [[ $rc == 0 && $out == *'Force-release fair lock "q"'*'released q'* ]] ||
        fail "release on a terminal, answered y: exit $rc: $out"
    wait_line a '^1 lost expired' 5
fi
expect_rc 2 L release job:1 --yes
expect_rc 2 L release --force job:1 # stdin is not a terminal, no --yes
expect_rc 0 L release --force --yes job:1
[[ $out == "released job:1" ]] || fail "release: $out"
wait_line a '^0 lost expired' 5
if [[ $mode == redlock ]]; then
    # A server that the force release did not reach (it completes once any
    # server removed the hold) keeps the lost hold until its lease ends;
    # a minority, which holds nothing.
    for _ in $(seq 100); do
        L show job:1 >/dev/null 2>&1 || break
        out=$(L show job:1 --json) || true
        jq -e '.majority.holder == null' <<<"$out" >/dev/null ||
            fail "a majority still holds job:1 after the force release: $out"
        sleep 0.05
    done
fi
expect_rc 1 L show job:1
expect_rc 1 L release --force --yes job:1
expect_rc 1 L ls job:1
if [[ $family == 1 ]]; then
    # A family lock watched through it: the readers go, the queued writer
    # comes in, a reader queues behind it.
    "$leash" "${conn[@]}" watch rw --json --interval 50 >"$tmp/watch-rw.out" 2>&1 &
    watch_pid=$!
    started+=("$watch_pid")
    sleep 0.3
    expect_rc 0 L release --force --yes --json rw
    jq -e '.released == true and .status == "LEASH_OK"' <<<"$out" >/dev/null ||
        fail "release --json: $out"
    wait_line a '^2 lost expired' 5
    wait_line a '^3 lost expired' 5
    # The force release let the queued writer in.
    wait_line a '^5 granted' 5
    expect_rc 0 L show rw --json
    jq -e '.holders[0].mode == "write" and (.waiters | length) == 0' <<<"$out" >/dev/null ||
        fail "show rw after the force release: $out"
    tell b "new 5 read rw"
    tell b "acquire 5 30000"
    sleep 0.4
    kill -TERM "$watch_pid"
    wait "$watch_pid" || fail "watch rw exited $?"
    fw=$(fence_of a 5)
    jq -se --argjson fw "$fw" '
        (map(select(.event == "released" and .mode == "r")) | length) == 2 and
        (map(select(.event == "acquired" and .mode == "w" and .fence == $fw)) | length) == 1 and
        (map(select(.event == "queued" and .mode == "r" and .place > 0)) | length) == 1' \
        "$tmp/watch-rw.out" >/dev/null || {
        fail "watch rw: events missing or wrong"
        cat "$tmp/watch-rw.out"
    }
fi
tell a quit
tell b quit

# --- ls over 100 000 locks: every one listed, in seconds ------------------
# (It took 27 s when each key was read alone with four round trips and
# de-duplicated by a linear search; bench figures in the README.)
if [[ $mode == single ]]; then
    redis-cli -p "${ports[0]}" eval "for i = 1, 100000 do redis.call('set', 'leash:many:' .. i,
        '0123456789abcdef0123456789abcdef:0:1:' .. i, 'px', 300000) end" 0 >/dev/null
    t0=$(now_ms)
    n=$(L ls 'many:*' --json | jq length)
    t1=$(now_ms)
    [[ $n == 100000 ]] || fail "ls of 100 000 locks listed $n"
    ((t1 - t0 < 15000)) || fail "ls of 100 000 locks took $((t1 - t0)) ms"
    echo "ls of 100 000 locks: $((t1 - t0)) ms"
    redis-cli -p "${ports[0]}" eval "for i = 1, 100000 do redis.call('del', 'leash:many:' .. i) end" 0 >/dev/null
fi

# --- credentials -------------------------------------------------------------
if [[ $mode == single ]]; then
    redis-cli -p "${ports[0]}" config set requirepass s3cret >/dev/null
    expect_rc 3 L show nothing
    LEASH_PASSWORD=s3cret expect_rc 1 L show nothing
    expect_rc 1 "$leash" -u "redis://:s3cret@127.0.0.1:${ports[0]}" show nothing
    expect_rc 3 "$leash" -u "redis://:n0pe-xyz@127.0.0.1:${ports[0]}" show nothing
    [[ $out == *"AUTH refused"* && $out != *n0pe-xyz* ]] || fail "wrong password: $out"
    # An ACL user whose password stays off the command line (channel rules
    # are Redis 6.2: before, every user has every channel).
    channels=('&*')
    (($(test_redis_version) >= 60200)) || channels=()
    redis-cli -p "${ports[0]}" -a s3cret --no-auth-warning \
        acl setuser ops on '>0ps-pw' '~*' "${channels[@]}" '+@all' >/dev/null
    LEASH_USER=ops LEASH_PASSWORD=0ps-pw expect_rc 1 L show nothing
    LEASH_USER=ops LEASH_PASSWORD=wrong-pw expect_rc 3 L show nothing
fi

# --- TLS refused, and the options of the command line -----------------------
if [[ $mode == tls ]]; then
    tls_at="127.0.0.1:$redis_tls_port"
    expect_rc 1 "$leash" -u "rediss://$tls_at" --tls-ca "$certs/ca.pem" show nothing
    expect_rc 1 "$leash" -u "rediss://localhost:$redis_tls_port" --tls-ca "$certs/ca.pem" \
        --tls-cert "$certs/client.pem" --tls-key "$certs/client.key" show nothing
    expect_rc 3 "$leash" -u "rediss://$tls_at" --tls-ca "$certs/other-ca.pem" show nothing
    [[ $out == *"certificate verify failed"* ]] || fail "another CA: $out"
    expect_rc 3 "$leash" -u "rediss://$tls_at" --tls-ca "$certs/ca.pem" --tls-sni other.example \
        show nothing
    [[ $out == *"hostname mismatch"* ]] || fail "another name: $out"
    expect_rc 1 "$leash" -u "rediss://$tls_at" --insecure show nothing
    [[ $out == *"TLS without verification"* ]] || fail "--insecure warns: $out"
    expect_rc 3 "$leash" -u "rediss://$tls_at" --tls-ca "$tmp/missing.pem" show nothing
    [[ $out == *"missing.pem"* ]] || fail "a missing CA file: $out"
    expect_rc 3 "$leash" -u "redis://127.0.0.1:${ports[0]}" --tls-ca "$certs/ca.pem" \
        --timeout 300 show nothing
    [[ $out == *"is this port TLS?"* ]] || fail "TLS to the plain port: $out"
    expect_rc 2 "$leash" -u "rediss://$tls_at" --tls-cert "$certs/client.pem" show nothing
fi

# --- a cluster with a master down: what the others hold is listed ---------
if [[ $mode == cluster ]]; then
    for i in $(seq 30); do
        redis-cli -c -p "${ports[0]}" set "leash:kp:$i" \
            "0123456789abcdef0123456789abcdef:0:1:$i" px 30000 >/dev/null
    done
    on_down=$(redis-cli -p "${ports[2]}" --scan --pattern 'leash:kp:*' | wc -l)
    kill -TERM "${servers[2]}"
    wait "${servers[2]}" 2>/dev/null || true
    rc=0
    L --timeout 500 ls 'kp:*' >"$tmp/ls-down.out" 2>"$tmp/ls-down.err" || rc=$?
    listed=$(grep -c '^kp:' "$tmp/ls-down.out" || true)
    [[ $rc == 3 && $listed == $((30 - on_down)) && $on_down -gt 0 ]] ||
        fail "ls, one master down: exit $rc, $listed of $((30 - on_down)) listed: $(cat "$tmp/ls-down.out" "$tmp/ls-down.err")"
    grep -q "127.0.0.1:${ports[2]}" "$tmp/ls-down.err" ||
        fail "ls, one master down: stderr does not name it: $(cat "$tmp/ls-down.err")"
fi

# --- unreachable halfway: the servers go away ------------------------------
for pid in "${servers[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
servers=()
expect_rc 3 L --timeout 500 ls
expect_rc 3 L --timeout 500 show q
expect_rc 3 L --timeout 500 release --force --yes q

if [[ $failed != 0 ]]; then
    for f in a b; do
        echo "--- holder $f said:"
        sed 's/^/    /' "$tmp/$f.out"
    done
    exit 1
fi
echo "PASS test_cli $mode"
