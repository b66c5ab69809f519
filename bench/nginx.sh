#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/nginx.sh NGINX MODULE_SO: the nginx module under wrk (scripts/bench
# runs it when the module is built), printing a markdown table:
#   1. requests/s of a small static file through one nginx worker, without a
#      lock and with `leash_lock $request_id` (a new key per request,
#      uncontended): target at least 0.5 x;
#   2. 64 requests at once on one key (leash_lock), 32 through each of two
#      nginx instances, a 1 ms backend: the handoff at the backend, from the
#      answer of one request written to the next request read: target p50
#      under 1 ms (the backend stamps an answer's end after writing it, in a
#      thread a loaded machine may pause: a negative gap, "overlapping by
#      the stamps", is not two requests at once; "at most N at once" is the
#      backend's own count, 1 while the lock holds);
#   3. a semaphore of 8 with 64 requests at once (32 per instance), a 10 ms
#      backend: the share of the 8 slots in use at the backend while
#      requests queue: target at least 0.9;
#   4. the fleet: 64 closed-loop clients (tests/support/fleet.py, one
#      keep-alive connection each, 32 per instance) on one key with
#      leash_lock, through two more instances of 2 workers each, a 1 ms
#      backend, BENCH_FLEET_SECONDS (default 10): requests served per
#      client, fewest and most, clients never served, other answers:
#      target every client served, no error, most at most 2 x fewest.
# Each nginx has one worker; its own redis-server and the backend
# (examples/nginx/backend.py) run beside them on loopback, unpinned (the
# machine's other load decides which CPU is free). nginx keeps its
# connections to the backend open (upstream keepalive): a new connection
# and thread per request would be the backend's cost, not the lock's, and
# would leave a slot idle between requests. BENCH_SECONDS (default 5) is
# the length of each wrk run. Needs wrk, redis-server, redis-cli, curl and
# python3.
set -euo pipefail

nginx_bin=${1:?usage: bench/nginx.sh NGINX MODULE_SO}
module=${2:?usage: bench/nginx.sh NGINX MODULE_SO}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${BENCH_SECONDS:-5}
# shellcheck source=tests/support/redis.sh
source "$root/tests/support/redis.sh"
for tool in wrk redis-server redis-cli curl python3; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "bench/nginx.sh: $tool is missing" >&2
        exit 1
    }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-bench-nginx.XXXXXX")
started=() # redis-server, the backend, the nginx masters: stopped by pid
cleanup() {
    local pid
    for pid in "${started[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${started[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

test_redis_start "$tmp" || {
    echo "bench/nginx.sh: no redis-server came up" >&2
    exit 1
}
started+=("$redis_pid")
python3 "$root/examples/nginx/backend.py" "$tmp/backend.port" </dev/null &
started+=("$!")
for _ in $(seq 100); do
    [[ -s $tmp/backend.port ]] && break
    sleep 0.05
done
backend=127.0.0.1:$(<"$tmp/backend.port")
# Workers started by root run as nobody: they read the static file.
chmod 755 "$tmp"
mkdir -p "$tmp/www"
head -c 512 /dev/zero | tr '\0' x >"$tmp/www/small.txt"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

ports=()
# start_nginx NAME [WORKERS]: an instance of WORKERS worker processes (1).
start_nginx() {
    local dir=$tmp/$1 port pid
    port=$(free_port)
    mkdir -p "$dir"
    cat >"$dir/nginx.conf" <<CONF
load_module $module;
worker_processes ${2:-1};
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    leash_redis redis://127.0.0.1:$redis_port/0;
    leash_wait 10s;
    upstream backend {
        server $backend;
        keepalive 64;
    }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    # wrk hangs up on its requests when its time is over: the backend's
    # requests then still finish under their lock, so the backend never
    # sees more than the lock allows.
    proxy_ignore_client_abort on;
    server {
        listen 127.0.0.1:$port backlog=1024;
        root $tmp/www;
        location = /small.txt { }
        location = /locked.txt { leash_lock \$request_id; alias $tmp/www/small.txt; }
        location = /one { leash_lock one; proxy_pass http://backend; }
        location = /sem { leash_semaphore sem 8; proxy_pass http://backend; }
    }
}
CONF
    env ${LEASH_NGINX_PRELOAD:+LD_PRELOAD="$LEASH_NGINX_PRELOAD"} \
        "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" </dev/null 2>"$dir/stderr" &
    pid=$!
    started+=("$pid")
    for _ in $(seq 100); do
        if curl -sf -o /dev/null "http://127.0.0.1:$port/small.txt"; then
            ports+=("$port")
            return 0
        fi
        sleep 0.05
    done
    echo "bench/nginx.sh: nginx $1 did not start: $(cat "$dir/stderr")" >&2
    exit 1
}
start_nginx a
start_nginx b

# wrk_run NAME SECONDS URL: one wrk run, 32 connections, into $tmp/wrk-NAME.
wrk_run() {
    wrk -t 1 -c 32 -d "${2}s" --timeout 15s "$3" >"$tmp/wrk-$1" 2>&1
}
rps() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/wrk-$1"; }
# Non-2xx answers and socket errors of a run, or nothing.
errors() {
    grep -hE 'Non-2xx|Socket errors' "$tmp/wrk-$1" | tr -s ' ' | paste -sd ';' || true
}

a=http://127.0.0.1:${ports[0]}
b=http://127.0.0.1:${ports[1]}

# The static file twice each, in the order plain, locked, locked, plain:
# the other load of a shared machine drifts, and this order gives both
# variants the same share of it.
wrk_run plain1 "$seconds" "$a/small.txt"
wrk_run locked1 "$seconds" "$a/locked.txt"
wrk_run locked2 "$seconds" "$a/locked.txt"
wrk_run plain2 "$seconds" "$a/small.txt"

curl -sf -o /dev/null "$backend/reset"
wrk_run one-a "$seconds" "$a/one?key=one&ms=1" &
wrk_run one-b "$seconds" "$b/one?key=one&ms=1"
wait "$!"
one=$(curl -sf "$backend/analyse?key=one&slots=1")
one_peak=$(curl -sf "$backend/stats" | sed -n 's/^one peak=\([0-9]*\).*/\1/p')

curl -sf -o /dev/null "$backend/reset"
wrk_run sem-a "$seconds" "$a/sem?key=sem&ms=10" &
wrk_run sem-b "$seconds" "$b/sem?key=sem&ms=10"
wait "$!"
sem=$(curl -sf "$backend/analyse?key=sem&slots=8")
sem_peak=$(curl -sf "$backend/stats" | sed -n 's/^sem peak=\([0-9]*\).*/\1/p')

# 4. The fleet, on two instances of 2 workers each.
start_nginx c 2
start_nginx d 2
fleet=$(python3 "$root/tests/support/fleet.py" "${BENCH_FLEET_SECONDS:-10}" 64 "/one?key=fleet&ms=1" \
    "${ports[2]}" "${ports[3]}")
served() { tr ' ' '\n' <<<"$fleet" | cut -d/ -f1; }
fleet_least=$(served | sort -n | head -n 1)
fleet_most=$(served | sort -n | tail -n 1)
fleet_unserved=$(served | awk '$1 == 0 { n++ } END { print n + 0 }')
fleet_served=$(served | awk '{ n += $1 } END { print n + 0 }')
fleet_other=$(tr ' ' '\n' <<<"$fleet" | cut -d/ -f2 | awk '{ n += $1 } END { print n + 0 }')

field() { sed -n "s/.*$2=\([^ ]*\).*/\1/p" <<<"$1"; }
plain=$(awk -v x="$(rps plain1)" -v y="$(rps plain2)" 'BEGIN { print (x + y) / 2 }')
locked=$(awk -v x="$(rps locked1)" -v y="$(rps locked2)" 'BEGIN { print (x + y) / 2 }')
ratio=$(awk -v l="$locked" -v p="$plain" 'BEGIN { printf "%.2f", (p > 0 ? l / p : 0) }')

echo "## nginx module (bench/nginx.sh, wrk ${seconds} s per run, one worker per nginx)"
echo
echo "| what | figure | target |"
echo "|---|---|---|"
printf '| 512-byte static file, no lock, 32 connections (mean of 2 runs, in the order no lock, lock, lock, no lock) | %.0f req/s | |\n' "$plain"
# shellcheck disable=SC2016 # markdown backticks, not a command
printf '| the same with `leash_lock %s` (a new key per request) | %.0f req/s, **%s x** | at least 0.5 x |\n' \
    "\$request_id" "$locked" "$ratio"
printf '| one key, 64 requests at once over 2 instances, 1 ms backend: handoff at the backend (one answer written -> the next request line read) | p50 %s µs, p99 %s µs (%s handoffs, %s overlapping by the stamps, at most %s at once, %.0f req/s) | p50 under 1 ms |\n' \
    "$(field "$one" p50_us)" "$(field "$one" p99_us)" "$(field "$one" handoffs)" "$(field "$one" overlaps)" "$one_peak" \
    "$(awk -v x="$(rps one-a)" -v y="$(rps one-b)" 'BEGIN { print x + y }')"
printf '| semaphore of 8, 64 requests at once over 2 instances, 10 ms backend: slots in use at the backend | **%s** of 8 (peak %s, %.0f req/s) | at least 0.9 |\n' \
    "$(field "$sem" busy)" "$sem_peak" \
    "$(awk -v x="$(rps sem-a)" -v y="$(rps sem-b)" 'BEGIN { print x + y }')"
# shellcheck disable=SC2016 # markdown backticks, not a command
printf '| the fleet: 64 closed-loop clients on one key with `leash_lock`, 2 instances x 2 workers, 1 ms backend, %s s: requests served per client | fewest **%s**, most **%s**, never served %s, other answers %s (%s served in all) | every client served, no error, most at most 2 x fewest |\n' \
    "${BENCH_FLEET_SECONDS:-10}" "$fleet_least" "$fleet_most" "$fleet_unserved" "$fleet_other" "$fleet_served"
echo
for run in plain1 locked1 locked2 plain2 one-a one-b sem-a sem-b; do
    e=$(errors "$run")
    [[ -z $e ]] || echo "- wrk run $run: $e"
done
if grep -h 'exited on signal' "$tmp"/a/error.log "$tmp"/b/error.log; then
    echo "- an nginx worker exited on a signal"
fi
