#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_nginx.sh NGINX MODULE_SO: ngx_http_leash_module in real nginx processes.
#
# Starts its own redis-server on a free loopback port, a slow backend that
# records per key how many requests it serves at once and the X-Fence each
# brought (examples/nginx/backend.py), and two nginx instances with two
# workers each, from temporary prefixes, then:
#   1. requests for one key, through both instances at once, reach the
#      backend one at a time, with fences that grow;
#   2. requests for different keys run side by side;
#   3. leash_wait 0 answers the busy status at once while the key is held;
#   4. a semaphore of 3 lets exactly 3 requests in at once;
#   5. the fair lock serves waiters in arrival order across both instances;
#   6. a client that hangs up while it waits never reaches the backend and
#      delays nobody;
#   7. a SIGHUP reload while a request holds a lock and another waits for
#      it: both complete, the old workers exit within a second after them,
#      new workers serve;
#   8. an internal redirect goes on with the lock the request has;
#      leash_metrics answers the worker's stats in Prometheus text;
#   9. a key over the length limit answers 500 and the error log names it;
#  10. with Redis down, leash_fail closed answers the busy status and
#      leash_fail open lets the request through, by leash_wait; once Redis
#      is back the locks work again;
#  11. a lock lost mid-request (Redis frozen past the lease) ends the
#      request within the lease, with an error-log line, and aborts the
#      backend's request: 500 when nothing was sent yet, the connection
#      closed mid-answer otherwise;
#  12. nginx -t refuses each bad configuration with a message naming the
#      directive and the problem;
#  13. a graceful stop (QUIT) while a request holds a lock: the request
#      completes, nginx exits right after it, the lock is free;
#  14. keepalive: a request's lock ends with it although its connection
#      stays open, the next request on the connection takes its own;
#  15. HTTP/2: two streams of one connection take one key in turn, a stream
#      that hangs up while it waits delays nobody;
#  16. a subrequest into a location with a lock goes on under its main
#      request's lock (mirror), and fails (500, logged) without one
#      (auth_request);
#  18. a request that deny refuses answers at once, never waiting for the
#      lock; satisfy any does not skip the lock;
#  17. a fast stop (TERM) while requests hold locks: a lock whose backend
#      still works runs out its lease, one whose work is over is released
#      on the way out, long before its lease ends;
#  33. worker_shutdown_timeout closes a request whose backend still works:
#      its lock runs out its lease;
#  19. the lock inherits into if, limit_except and nested locations, for
#      the mutex, the fair lock and the semaphore;
#  20. a request that lost its lock reaches no backend again, whatever
#      error_page does next: 500; its mirror's upstream is stopped too;
#  21. a typo in leash_cluster or leash_redlock fails nginx -t and a reload
#      (the running workers go on serving); a database Redis refuses leaves
#      the workers up, answering by leash_fail;
#  22. the lock goes with the answer, not after lingering_timeout, while
#      nginx discards a request body the client never finishes;
#  23. return (the rewrite phase) answers without the lock;
#  26. slices and SSI includes keep the lock until they end; auth_request
#      into a nested location that inherits a lock goes on without it;
#  24. busy statuses that close the connection (408, 444, 499) fail nginx -t;
#  25. leash_fail open does not open on a misconfigured lock (two permit
#      counts, two kinds on one name): 500;
#  29. the lock covers the backend's work: a client that hangs up, a 504
#      (proxy_read_timeout) and a timed-out try of proxy_next_upstream leave
#      it to run out its lease, so the next request comes after the work
#      (the backend does not notice closed connections);
#  30. proxy_cache: a HEAD answered at the header holds the lock until the
#      body is in the cache;
#  31. slice with a client that reads slowly: the lock stays between slices;
#      a cache's background update holds it until it ends;
#  32. an internal redirect into a location with another lock: 500, logged;
#  28. the mutex starves nobody: 32 closed-loop clients on one key, 16
#      through each instance, a 1 ms backend, 3 s: every client served,
#      no 503, the most-served at most twice the least, one at a time;
#  34. leash_pubsub off: an instance whose waiters poll and one that
#      subscribes take one key in turn, one at a time, every request served;
# and checks that no worker exited on a signal, nginx logged no alert, no
# sanitizer spoke and no log line holds the Redis password.
#
# Every process it signals is one it started (or a worker of one), by pid.
# Needs redis-server, redis-cli, curl and python3. TEST_SLACK_MS (default
# 300) widens upper time bounds on a loaded machine. LEASH_NGINX_PRELOAD: a
# sanitizer runtime that nginx (not instrumented) loads first, for a module
# built with the sanitizers (cmake/LeashNginx.cmake sets it).
set -euo pipefail

# shellcheck source=tests/support/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/support/redis.sh"

nginx_bin=${1:?usage: test_nginx.sh NGINX MODULE_SO}
module=${2:?usage: test_nginx.sh NGINX MODULE_SO}
backend_py="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/examples/nginx/backend.py"
for tool in "${LEASH_REDIS_SERVER:-redis-server}" redis-cli curl python3; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "FAIL: $tool is missing"
        exit 1
    }
done
SLACK_MS=${TEST_SLACK_MS:-300}
PASSWORD=s3cr3t-pw

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-nginx.XXXXXX")
chmod 755 "$tmp" # the workers (user nobody) read a static file in it (22)
started=() # pids of what this test started: redis-server, backend, nginx masters
masters=()
passed=0

cleanup() {
    local pid i workers=()
    # An nginx worker outlives a master that was killed: stop them too.
    for pid in "${masters[@]}"; do
        mapfile -t -O "${#workers[@]}" workers < <(pgrep -P "$pid" || true)
    done
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
    for pid in "${workers[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    [[ -n ${LEASH_TEST_KEEP:-} ]] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR

fail() {
    local f
    echo "FAIL: $*"
    for f in "$tmp"/*/error.log; do
        [[ -f $f ]] || continue
        echo "--- last lines of $f"
        tail -n 20 "$f"
    done
    exit 1
}
pass() {
    echo "PASS $*"
    passed=$((passed + 1))
}
now_ms() { date +%s%3N; }
# nginx ARGS...: Debian's nginx, with the sanitizer runtime of the module;
# exec, so that "(nginx ...) &" leaves $! the master's pid.
nginx() {
    if [[ -n ${LEASH_NGINX_PRELOAD:-} ]]; then
        export LD_PRELOAD=$LEASH_NGINX_PRELOAD ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1}
    fi
    exec "$nginx_bin" "$@"
}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- Redis (with a password, to see that no log line shows it) and the backend ----

# The server also speaks TLS on a port of its own (27).
"$(dirname "${BASH_SOURCE[0]}")/../scripts/make-certs" "$tmp/certs" >/dev/null
redis_tls_dir=$tmp/certs
test_redis_start "$tmp" || fail "no redis-server came up"
started+=("$redis_pid")
redis-cli -p "$redis_port" config set requirepass "$PASSWORD" >/dev/null

python3 "$backend_py" "$tmp/backend.port" &
started+=("$!")
for _ in $(seq 100); do
    [[ -s $tmp/backend.port ]] && break
    sleep 0.05
done
backend_port=$(cat "$tmp/backend.port")
stats() { curl -sf "http://127.0.0.1:$backend_port/stats" | grep "^$1 " || true; }
stat_of() { stats "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }

# ---- nginx ----

# conf DIR PORT [HTTP_EXTRA [H2PORT [SLOWPORT]]]: writes DIR/nginx.conf; the
# module needs the http block's leash_redis unless HTTP_EXTRA replaces it;
# H2PORT is a second port, for HTTP/2 without TLS; SLOWPORT a third, with a
# small send buffer, where a client that does not read blocks nginx (29).
conf() {
    local dir=$1 port=$2 redis=${3-"leash_redis redis://:$PASSWORD@127.0.0.1:$redis_port/0;"}
    local h2=${4:+"listen 127.0.0.1:$4 http2;"} slow=${5:+"listen 127.0.0.1:$5 sndbuf=8k;"}
    local proxy="proxy_set_header X-Fence \$leash_fence; proxy_pass http://127.0.0.1:$backend_port;
            add_header X-Leash \"\$leash_status \$leash_wait_ms\" always;"
    local k lock blocks=""
    # 19: one location per kind and block: /Kif, /Klx, /Knest/ (K = l, f, s).
    for k in l f s; do
        case $k in
        l) lock="leash_lock inh:\$arg_key" ;;
        f) lock="leash_fair_lock inhf:\$arg_key" ;;
        s) lock="leash_semaphore inhs:\$arg_key 1" ;;
        esac
        blocks+="
        location /${k}if { $lock; leash_wait 10s; if (\$arg_debug) { set \$dbg 1; } $proxy }
        location /${k}lx { $lock; leash_wait 10s; limit_except GET { allow 127.0.0.1; deny all; } $proxy }
        location /${k}nest/ { $lock; leash_wait 10s; $proxy location /${k}nest/inner { $proxy } }"
    done
    mkdir -p "$dir/ssi"
    echo "static file" >"$dir/static.txt"
    printf 'head <!--# include virtual="/ssi/part?key=ssi-inc&ms=300" --> tail\n' >"$dir/ssi/page.html"
    cat >"$dir/nginx.conf" <<EOF
load_module $module;
worker_processes 2;
error_log $dir/error.log ${NGX_LOG_LEVEL:-info};
pid $dir/nginx.pid;
daemon off;
events { worker_connections 256; }
http {
    access_log $dir/access.log;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    proxy_cache_path $dir/cache keys_zone=lc:1m;
    $redis
    leash_lease 1s;
    # 29: the same backend twice, for proxy_next_upstream.
    upstream twice {
        server 127.0.0.1:$backend_port max_fails=0;
        server 127.0.0.1:$backend_port max_fails=0;
    }
    server {
        listen 127.0.0.1:$port;
        $h2
        $slow
        location /one { leash_lock one:\$arg_key; leash_wait 10s; $proxy }
        location /try { leash_lock one:\$arg_key; leash_wait 0; leash_busy_status 429; $proxy }
        location /sem { leash_semaphore sem:\$arg_key 3; leash_wait 10s; $proxy }
        location /fair { leash_fair_lock fair:\$arg_key; leash_wait 10s; $proxy }
        location /closed { leash_lock down:\$arg_key; leash_wait 1s; $proxy }
        location /open { leash_lock down:\$arg_key; leash_wait 1s; leash_fail open; $proxy }
        location /long { leash_lock \$arg_key; $proxy }
        location /redirect { leash_lock ir:\$arg_key; leash_wait 1s; root /nonexistent; try_files /none @named; }
        location @named { leash_lock ir:\$arg_key; leash_wait 1s; $proxy }
        location = /metrics { leash_metrics; }
        location /free { $proxy }
        location /authsub { auth_request /authlock; $proxy }
        location /denied { deny all; leash_lock one:\$arg_key; leash_wait 10s; $proxy }
        location /any {
            satisfy any; allow 127.0.0.1; deny all;
            leash_lock one:\$arg_key; leash_wait 0; leash_busy_status 429; $proxy
        }
        location /mirrored { leash_lock held:\$arg_key; mirror /authlock; $proxy }
        $blocks
        location /ep2 { leash_lock one:\$arg_key; error_page 500 = @retry; $proxy }
        location @retry { leash_lock one:\$arg_key; $proxy }
        location /mlost { leash_lock one:\$arg_key; mirror /mslow; $proxy }
        location = /mslow { internal; proxy_pass http://127.0.0.1:$backend_port/m?key=\$arg_key-mirror&ms=2000; }
        location /static { leash_lock one:\$arg_key; alias $dir/static.txt; }
        location /sl {
            leash_lock one:\$arg_key; slice 100; proxy_set_header Range \$slice_range; $proxy
        }
        location /ssi/ {
            leash_lock one:\$arg_key; ssi on; default_type text/html; alias $dir/ssi/;
            location /ssi/part { $proxy }
        }
        location /app/ {
            leash_lock one:\$arg_key; auth_request /app/auth; $proxy
            location = /app/auth {
                internal; proxy_pass http://127.0.0.1:$backend_port/auth?key=auth-nested&ms=1;
            }
        }
        location /ret { leash_lock one:\$arg_key; return 200 "returned\\n"; }
        location /rto { leash_lock one:\$arg_key; proxy_read_timeout 300ms; $proxy }
        location /nxt {
            leash_lock one:\$arg_key; proxy_read_timeout 300ms; proxy_next_upstream error timeout;
            proxy_set_header X-Fence \$leash_fence; proxy_pass http://twice;
        }
        location /cached {
            leash_lock one:\$arg_key; proxy_cache lc; proxy_cache_valid 200 1m; $proxy
        }
        location /slbig {
            leash_lock one:\$arg_key; slice 256k; proxy_set_header Range \$slice_range; $proxy
        }
        location /bgup {
            leash_lock one:\$arg_key; proxy_cache lc; proxy_cache_key \$arg_key;
            proxy_cache_valid 200 1s; proxy_cache_use_stale updating;
            proxy_cache_background_update on; $proxy
        }
        location /pact { leash_lock one:\$arg_key; post_action /pafter; $proxy }
        location = /pafter { internal; leash_lock one:\$arg_key; $proxy }
        location /mfast { leash_lock one:\$arg_key; mirror /mquick; $proxy }
        location = /mquick { internal; proxy_pass http://127.0.0.1:$backend_port/m?key=\$arg_key-mirror&ms=50; }
        location /icpt {
            leash_lock one:\$arg_key; proxy_intercept_errors on; error_page 501 = @icpt; $proxy
        }
        location @icpt { return 200 "intercepted\\n"; }
        location /xar { leash_lock one:\$arg_key; $proxy }
        location /files/ { internal; leash_lock files:\$arg_key; $proxy }
        location /semopen { leash_semaphore semo:\$arg_key 3; leash_wait 1s; leash_fail open; $proxy }
        location /semopen4 { leash_semaphore semo:\$arg_key 4; leash_wait 1s; leash_fail open; $proxy }
        location /kindopen { leash_fair_lock one:\$arg_key; leash_wait 1s; leash_fail open; $proxy }
        location = /authlock {
            leash_lock sub:fixed; leash_wait 10s;
            set \$args key=authlock&ms=300;
            proxy_pass http://127.0.0.1:$backend_port;
        }
    }
}
EOF
}

ports=()
h2ports=()
slowports=()
start_nginx() {
    local name=$1 port h2port slowport
    port=$(free_port)
    h2port=$(free_port)
    h2ports+=("$h2port")
    slowport=$(free_port)
    slowports+=("$slowport")
    conf "$tmp/$name" "$port" "leash_redis redis://:$PASSWORD@127.0.0.1:$redis_port/0;" "$h2port" \
        "$slowport"
    (nginx -p "$tmp/$name" -c "$tmp/$name/nginx.conf" >"$tmp/$name/stdout" 2>"$tmp/$name/stderr") &
    started+=("$!")
    masters+=("$!")
    ports+=("$port")
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/free?key=warmup&ms=1" && return 0
        sleep 0.05
    done
    fail "nginx $name did not start: $(cat "$tmp/$name/stderr")"
}
start_nginx a
start_nginx b
echo "redis on $redis_port, backend on $backend_port, nginx on ${ports[*]} (masters ${masters[*]})"
# Its worker processes (not proxy_cache_path's cache manager and loader).
workers_of() { pgrep -P "$1" -f 'worker process' | sort; }

# req NAME INSTANCE PATH: one request in the background; its status code
# and X-Leash header go to $tmp/req-NAME.
req() {
    curl -s -o /dev/null -D "$tmp/req-$1.h" -w '%{http_code}\n' \
        "http://127.0.0.1:${ports[$2]}$3" >"$tmp/req-$1" 2>/dev/null &
    reqs+=("$!")
}
reqs=()
# Waits for the requests in the background (not for the servers).
wait_reqs() {
    local pid
    for pid in "${reqs[@]}"; do
        wait "$pid" || true
    done
    reqs=()
}
code_of() { head -n 1 "$tmp/req-$1"; }
leash_of() { sed -n 's/^X-Leash: \([^\r]*\)\r*$/\1/p' "$tmp/req-$1.h"; }

# ---- 1. one key, one request at a time across the fleet, growing fences ----

t0=$(now_ms)
for i in $(seq 1 8); do
    req "ser-$i" $((i % 2)) "/one?key=ser&ms=150"
done
wait_reqs
t1=$(now_ms)
for i in $(seq 1 8); do
    [[ $(code_of "ser-$i") == 200 ]] || fail "serial request $i: $(code_of "ser-$i") $(leash_of "ser-$i")"
    [[ $(leash_of "ser-$i") == granted* ]] || fail "serial request $i: \$leash_status $(leash_of "ser-$i")"
done
[[ $(stat_of ser peak) == 1 ]] || fail "one key: the backend saw $(stats ser)"
[[ $(stat_of ser served) == 8 ]] || fail "one key: the backend saw $(stats ser)"
fences=$(stat_of ser fences)
sorted=$(tr , '\n' <<<"$fences" | sort -n | paste -sd,)
uniq=$(tr , '\n' <<<"$fences" | sort -nu | paste -sd,)
[[ $fences == "$sorted" && $fences == "$uniq" && $fences != *none* ]] ||
    fail "one key: fences not growing: $fences"
((t1 - t0 >= 8 * 150)) || fail "one key: 8 x 150 ms took $((t1 - t0)) ms"
pass "one key: 8 requests through 2 instances x 2 workers one at a time, fences grow ($((t1 - t0)) ms)"

# ---- 2. different keys side by side ----

t0=$(now_ms)
for i in $(seq 1 6); do
    req "par-$i" $((i % 2)) "/one?key=par-$i&ms=400"
done
wait_reqs
t1=$(now_ms)
for i in $(seq 1 6); do
    [[ $(code_of "par-$i") == 200 ]] || fail "key par-$i: $(code_of "par-$i")"
done
((t1 - t0 < 3 * 400 + SLACK_MS)) || fail "6 keys x 400 ms took $((t1 - t0)) ms: not side by side"
pass "different keys run side by side (6 x 400 ms in $((t1 - t0)) ms)"

# ---- 34. leash_pubsub off: waiting requests poll, one at a time still ----

pport=$(free_port)
conf "$tmp/poll" "$pport" "leash_redis redis://:$PASSWORD@127.0.0.1:$redis_port/0;
    leash_pubsub off;"
(nginx -p "$tmp/poll" -c "$tmp/poll/nginx.conf" >"$tmp/poll/stdout" 2>"$tmp/poll/stderr") &
poll_master=$!
started+=("$poll_master")
masters+=("$poll_master")
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$pport/free?key=warmup&ms=1" && break
    sleep 0.05
done
pids=()
for i in $(seq 1 6); do
    if ((i % 2)); then
        url="http://127.0.0.1:$pport/one?key=pollk&ms=100"
    else
        url="http://127.0.0.1:${ports[0]}/one?key=pollk&ms=100"
    fi
    curl -s -o /dev/null -D "$tmp/poll-$i.h" -w '%{http_code}\n' "$url" >"$tmp/poll-$i" &
    pids+=("$!")
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
for i in $(seq 1 6); do
    [[ $(head -n 1 "$tmp/poll-$i") == 200 ]] && grep -q '^X-Leash: granted' "$tmp/poll-$i.h" ||
        fail "leash_pubsub off: request $i: $(head -n 1 "$tmp/poll-$i") $(grep X-Leash "$tmp/poll-$i.h")"
done
[[ $(stat_of pollk peak) == 1 && $(stat_of pollk served) == 6 ]] ||
    fail "leash_pubsub off: the backend saw $(stats pollk)"
pass "leash_pubsub off: a polling and a subscribing instance take one key in turn"

# ---- 29. the lock covers the backend's work, not the client's connection ----

# The backend (like most) does not notice a closed proxy connection: a
# request nginx gave up on works on to its end. Where nginx stops an
# upstream that may still work, the lock is not released but runs out its
# lease (1 s here), so the next request for the key comes after that
# work (each case's work is shorter than the lease).

# settled KEY N: waits until the backend ended N requests of KEY.
settled() {
    local n s a
    for _ in $(seq 250); do
        # Nothing yet for a key that has not reached the backend (a slow
        # client under load): 0, not an arithmetic error that ends the wait.
        s=$(stat_of "$1" served)
        a=$(stat_of "$1" aborted)
        n=$((${s:-0} + ${a:-0}))
        ((n >= $2)) && return 0
        sleep 0.02
    done
    fail "the backend ended $n of $2 requests of $1: $(stats "$1")"
}
# arrived KEY N: waits until N requests of KEY reached the backend.
arrived() {
    for _ in $(seq 250); do
        (($(stats "$1" | sed -n 's/.* fences=\([^ ]*\) .*/\1/p' | tr , '\n' | grep -c .) >= $2)) &&
            return 0
        sleep 0.02
    done
    fail "$1 never reached the backend: $(stats "$1")"
}
# next_after KEY: a request for KEY through the other instance, at once;
# it must wait until the backend's work ends.
next_after() {
    code=$(curl -s -o /dev/null -D "$tmp/next-$1.h" -w '%{http_code}' \
        "http://127.0.0.1:${ports[1]}/one?key=$1&ms=1&n=next")
    [[ $code == 200 ]] || fail "$1: the next request answered $code"
}

# The client hangs up 0.1 s into a 500 ms backend request (default config).
curl -s -o /dev/null "http://127.0.0.1:${ports[0]}/one?key=hup&ms=500&n=first" &
hup=$!
arrived hup 1
sleep 0.1
kill "$hup"
wait "$hup" || true
next_after hup
settled hup 2
[[ $(stat_of hup peak) == 1 && $(stat_of hup order) == first,next ]] ||
    fail "client hang-up: the next request ran beside the backend's work: $(stats hup)"
grep -q 'leash: the backend may still work on "/one" .*the lock "one:hup" runs out its lease' \
    "$tmp"/a/error.log || fail "client hang-up: no log line for the abandoned lock"
pass "a client that hangs up leaves the lock to run out its lease: the next request comes after the backend's work"

# proxy_read_timeout (300 ms) before a 600 ms backend answers: 504.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/rto?key=rto&ms=600&n=first")
[[ $code == 504 ]] || fail "proxy_read_timeout: $code"
next_after rto
settled rto 2
[[ $(stat_of rto peak) == 1 ]] || fail "proxy_read_timeout: the next request ran beside the backend's work: $(stats rto)"
# proxy_next_upstream: the first server times out, the second answers.
code=$(curl -s -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:${ports[0]}/nxt?key=nxt&ms=600&retry=1&n=first")
[[ $code == 200 ]] || fail "proxy_next_upstream: $code"
next_after nxt
settled nxt 3
[[ $(stat_of nxt peak) == 1 ]] ||
    fail "proxy_next_upstream: the next request ran beside the timed-out try: $(stats nxt)"
pass "a 504 (proxy_read_timeout) and a timed-out try of proxy_next_upstream leave the lock to run out its lease"

# ---- 30. proxy_cache: a HEAD is answered at the header, the body goes on into the cache ----

# stream=1: the backend sends its header and most of the body at once, the
# end 600 ms later; nginx converts the HEAD to a GET and fills the cache.
t0=$(now_ms)
code=$(curl -s -o /dev/null -I -w '%{http_code}' "http://127.0.0.1:${ports[0]}/cached?key=chd&ms=600&stream=1&n=first")
t1=$(now_ms)
[[ $code == 200 ]] || fail "proxy_cache HEAD: $code"
next_after chd
settled chd 2
[[ $(stat_of chd peak) == 1 && $(stat_of chd order) == first,next ]] ||
    fail "proxy_cache HEAD (answered in $((t1 - t0)) ms): the lock went before the cache fill: $(stats chd)"
pass "proxy_cache: a HEAD answered at once holds the lock until the body is in the cache"

# Where nginx takes the backend's header for its whole answer and reads no
# body (a mirror's header-only answer; an error it intercepts: the backend
# answers PUT 501), the header ends the backend's work: the lock is
# released at the request's end, not left to run out its lease.
for what in "mirror GET /mfast" "intercepted PUT /icpt"; do
    read -r name method path <<<"$what"
    code=$(curl -s -o /dev/null -X "$method" -w '%{http_code}' "http://127.0.0.1:${ports[0]}$path?key=$name&ms=1")
    t0=$(now_ms)
    [[ $code == 200 ]] || fail "$name: $code"
    while [[ $(redis-cli -p "$redis_port" -a "$PASSWORD" --no-auth-warning exists "leash:one:$name") != 0 ]]; do
        (($(now_ms) - t0 < 100 + SLACK_MS)) ||
            fail "$name: the lock is still there $(($(now_ms) - t0)) ms after the answer"
        sleep 0.01
    done
done
pass "a mirror's header-only answer and an intercepted error release the lock at the request's end"

# ---- 31. slice with a client that reads slowly ----

# 8 slices of 256 KB; the client reads nothing for 1.5 s (nginx's send
# buffer on this port is 8 KB), so the slice filter waits for it between
# slices. Another request for the key comes 0.5 s in: it must wait for
# the last slice.
python3 - "${slowports[0]}" >"$tmp/slbig.out" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /slbig?key=slb&ms=50&size=2097152&n=slice HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
time.sleep(1.5)
got = 0
while True:
    d = s.recv(65536)
    if not d:
        break
    got += len(d)
print(got)
PY
slow=$!
arrived slb 1
sleep 0.5
next_after slb
wait "$slow"
(($(cat "$tmp/slbig.out") > 2097152)) || fail "slice, slow client: got $(cat "$tmp/slbig.out") bytes"
[[ $(stat_of slb peak) == 1 && $(stat_of slb order) == slice,slice,slice,slice,slice,slice,slice,slice,next ]] ||
    fail "slice, slow client: the lock went between slices: $(stats slb)"
pass "slice with a client that reads slowly: the lock stays between slices"

# A cache's background update: the stale answer goes out at once, the
# update (a subrequest) still works at the backend under the lock.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/bgup?key=bgup&ms=1&n=fill")
[[ $code == 200 ]] || fail "background update: the fill answered $code"
sleep 2.1 # proxy_cache_valid 1s, counted in whole seconds: stale after 2 s at most
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/bgup?key=bgup&ms=500&n=update")
[[ $code == 200 ]] || fail "background update: the stale answer was $code"
next_after bgup
settled bgup 3
[[ $(stat_of bgup peak) == 1 && $(stat_of bgup order) == fill,update,next ]] ||
    fail "background update: the lock went before the update ended: $(stats bgup)"
pass "a cache's background update holds the lock until it ends"

# post_action runs after the answer, which released the lock: into a
# location with a lock it is refused, with a log line (its 500 shows in
# the access log only).
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/pact?key=pact&ms=1")
[[ $code == 200 ]] || fail "post_action: $code"
for _ in $(seq 100); do
    grep -q 'leash: "/pafter" refused: the request answered and released its lock "one:pact"' \
        "$tmp"/a/error.log && break
    sleep 0.02
done
grep -q 'leash: "/pafter" refused: the request answered and released its lock "one:pact"' \
    "$tmp"/a/error.log || fail "post_action into a locked location: no log line"
[[ -z $(stats pafter) ]] || fail "post_action into a locked location reached the backend: $(stats pafter)"
pass "post_action into a location with a lock, after the lock went with the answer: refused, logged"

# ---- 32. an internal redirect into a location with another lock ----

# X-Accel-Redirect from /xar (one:KEY) into /files/ (files:KEY): refused,
# logged (before, two requests of two keys ran at once on files:xf).
for i in 1 2; do
    req "xar-$i" "$((i % 2))" "/xar?key=xa$i&ms=1&xar=/files/f%3Fkey%3Dxf%26ms%3D300"
done
wait_reqs
[[ $(code_of xar-1) == 500 && $(code_of xar-2) == 500 && -z $(stats xf) ]] ||
    fail "X-Accel-Redirect into another lock: $(code_of xar-1) $(code_of xar-2), backend $(stats xf)"
grep -q 'leash: "/files/f" refused: its lock is not "one:xa1", the lock the request holds' \
    "$tmp"/*/error.log || fail "X-Accel-Redirect into another lock: no log line"
pass "an internal redirect into a location with another lock is refused (500), logged"

# ---- 27. TLS: rediss:// with leash_tls_ca; another CA fails closed ----

# tls_conf NAME CA: an instance on the TLS port, trusting CA.
tls_conf() {
    conf "$tmp/$1" "$(free_port)" "leash_redis rediss://:$PASSWORD@127.0.0.1:$redis_tls_port/0;
    leash_tls_ca $tmp/certs/$2;"
    (nginx -p "$tmp/$1" -c "$tmp/$1/nginx.conf" >"$tmp/$1/stdout" 2>"$tmp/$1/stderr") &
    started+=("$!")
    masters+=("$!")
    tls_port=$(sed -n 's/^ *listen 127.0.0.1:\([0-9]*\);$/\1/p' "$tmp/$1/nginx.conf" | head -n 1)
    for _ in $(seq 100); do
        curl -s -o /dev/null "http://127.0.0.1:$tls_port/free?key=warmup&ms=1" && return 0
        sleep 0.05
    done
    fail "nginx $1 did not start: $(cat "$tmp/$1/stderr")"
}
tls_conf t ca.pem
code=$(curl -s -o /dev/null -D "$tmp/tls.h" -w '%{http_code}' "http://127.0.0.1:$tls_port/one?key=tls&ms=1")
[[ $code == 200 ]] && grep -q '^X-Leash: granted' "$tmp/tls.h" ||
    fail "TLS: $code $(grep X-Leash "$tmp/tls.h")"
tls_conf u other-ca.pem
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$tls_port/closed?key=tls-bad&ms=1")
[[ $code == 503 ]] || fail "TLS with another CA: $code"
grep -q 'leash: no lock "down:tls-bad": TLS handshake or certificate check failed' "$tmp/u/error.log" ||
    fail "TLS with another CA: no error line: $(tail -n 5 "$tmp/u/error.log")"
pass "rediss:// with leash_tls_ca: granted; another CA: 503 (leash_fail closed), logged"

# ---- 3. leash_wait 0 answers the busy status at once ----

req busy-holder 0 "/one?key=busy&ms=1000"
for _ in $(seq 100); do
    [[ $(stat_of busy served) == 0 ]] && break
    sleep 0.02
done
[[ $(stat_of busy served) == 0 ]] || fail "the holder of key busy never reached the backend"
t0=$(now_ms)
code=$(curl -s -o /dev/null -D "$tmp/busy.h" -w '%{http_code}' "http://127.0.0.1:${ports[1]}/try?key=busy&ms=1")
t1=$(now_ms)
[[ $code == 429 ]] || fail "leash_wait 0 on a held key answered $code"
grep -q '^X-Leash: busy' "$tmp/busy.h" || fail "leash_wait 0: $(grep X-Leash "$tmp/busy.h")"
((t1 - t0 < SLACK_MS)) || fail "leash_wait 0 took $((t1 - t0)) ms"
wait_reqs
[[ $(code_of busy-holder) == 200 ]] || fail "the holder of key busy: $(code_of busy-holder)"
pass "leash_wait 0 answers 429 (leash_busy_status) in $((t1 - t0)) ms while the key is held"

# ---- 4. a semaphore of 3 ----

for i in $(seq 1 9); do
    req "sem-$i" $((i % 2)) "/sem?key=z&ms=300"
done
wait_reqs
for i in $(seq 1 9); do
    [[ $(code_of "sem-$i") == 200 ]] || fail "semaphore request $i: $(code_of "sem-$i")"
done
[[ $(stat_of z peak) == 3 && $(stat_of z served) == 9 ]] || fail "semaphore 3: the backend saw $(stats z)"
pass "a semaphore of 3 peaks at exactly 3 (9 requests, 2 instances)"

# ---- 5. the fair lock serves waiters in arrival order across the fleet ----

# Requests of the fair lock's queue: its hash's count of waiters.
fair_queued() {
    redis-cli -p "$redis_port" -a "$PASSWORD" --no-auth-warning eval \
        "return tonumber(redis.call('hget', KEYS[1], 'queued') or 0)" 1 leash:fair:f
}
req fair-0 0 "/fair?key=f&ms=1200&n=0"
sleep 0.1
for i in $(seq 1 6); do
    req "fair-$i" $((i % 2)) "/fair?key=f&ms=50&n=$i"
    # The next one arrives once this one is queued, on a busy machine too.
    for _ in $(seq 100); do
        (($(fair_queued) >= i)) && break
        sleep 0.02
    done
    (($(fair_queued) >= i)) || fail "fair lock request $i not queued within 2 s"
done
wait_reqs
for i in $(seq 0 6); do
    [[ $(code_of "fair-$i") == 200 ]] || fail "fair lock request $i: $(code_of "fair-$i")"
done
[[ $(stat_of f order) == 0,1,2,3,4,5,6 && $(stat_of f peak) == 1 ]] ||
    fail "fair lock: the backend saw $(stats f)"
pass "the fair lock serves waiters in arrival order across both instances"

# ---- 28. the mutex starves nobody across the fleet ----

fleet=$(python3 "$(dirname "${BASH_SOURCE[0]}")/support/fleet.py" 3 32 "/one?key=fleet&ms=1" "${ports[@]}")
least=$(tr ' ' '\n' <<<"$fleet" | cut -d/ -f1 | sort -n | head -n 1)
most=$(tr ' ' '\n' <<<"$fleet" | cut -d/ -f1 | sort -n | tail -n 1)
others=$(tr ' ' '\n' <<<"$fleet" | cut -d/ -f2 | awk '{ n += $1 } END { print n + 0 }')
((least > 0 && others == 0 && most <= 2 * least)) ||
    fail "fleet: 32 clients on one key, served/other per client: $fleet"
[[ $(stat_of fleet peak) == 1 ]] || fail "fleet: the backend saw $(stats fleet | cut -c1-200)"
pass "the mutex starves nobody: 32 clients on one key through 2 instances x 2 workers, 3 s: each served $least-$most times, no error"

# ---- 6. a client that hangs up while it waits ----

req hang-holder 0 "/one?key=hang&ms=800"
sleep 0.2
t0=$(now_ms)
curl -s -o /dev/null --max-time 0.3 "http://127.0.0.1:${ports[1]}/one?key=hang&ms=1" || true
req hang-next 0 "/one?key=hang&ms=1"
wait_reqs
t1=$(now_ms)
[[ $(code_of hang-holder) == 200 && $(code_of hang-next) == 200 ]] ||
    fail "hang-up: holder $(code_of hang-holder), next $(code_of hang-next)"
[[ $(stat_of hang served) == 2 ]] || fail "hang-up: the backend saw $(stats hang)"
((t1 - t0 < 600 + 2 * SLACK_MS)) || fail "hang-up: the next request ended $((t1 - t0)) ms later"
pass "a client that hangs up while waiting never reaches the backend and delays nobody"

# ---- 7. reload while a request holds a lock ----

old=$(workers_of "${masters[0]}")
req reload 0 "/one?key=reload&ms=1500"
for _ in $(seq 100); do
    [[ $(stat_of reload served) == 0 ]] && break
    sleep 0.02
done
req reload-wait 0 "/one?key=reload&ms=1"
sleep 0.1
kill -HUP "${masters[0]}"
sleep 0.5
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/one?key=after-reload&ms=1")
[[ $code == 200 ]] || fail "reload: a new request answered $code"
wait_reqs
t_done=$(now_ms)
[[ $(code_of reload) == 200 ]] || fail "reload: the request that held the lock: $(code_of reload)"
[[ $(code_of reload-wait) == 200 && $(stat_of reload served) == 2 ]] ||
    fail "reload: the request that waited: $(code_of reload-wait), backend $(stats reload)"
gone=0
while ((!gone && $(now_ms) - t_done < 1000 + SLACK_MS)); do
    gone=1
    for pid in $old; do
        kill -0 "$pid" 2>/dev/null && gone=0
    done
    sleep 0.05
done
((gone)) || fail "reload: old workers $old (done at $t_done) still there $(($(now_ms) - t_done)) ms after their last request"
pass "SIGHUP with a lock held and a request waiting: both complete, old workers exit after them, new ones serve"

# ---- 8. an internal redirect does not take the lock again ----

code=$(curl -s -o /dev/null -D "$tmp/ir.h" -w '%{http_code}' "http://127.0.0.1:${ports[0]}/redirect?key=ir&ms=1")
[[ $code == 200 ]] || fail "internal redirect: $code $(grep X-Leash "$tmp/ir.h")"
grep -q '^X-Leash: granted' "$tmp/ir.h" || fail "internal redirect: $(grep X-Leash "$tmp/ir.h")"
pass "an internal redirect to a location with the same lock goes on with the lock it has"

# ---- 8b. leash_metrics: this worker's stats ----

metrics=$(curl -s -D "$tmp/metrics.h" "http://127.0.0.1:${ports[0]}/metrics")
grep -qi '^Content-Type: text/plain; version=0.0.4' "$tmp/metrics.h" ||
    fail "leash_metrics: $(cat "$tmp/metrics.h")"
granted=$(sed -n 's/^leash_acquires_total{pid="[0-9]*",result="granted"} \([0-9]*\)$/\1/p' <<<"$metrics")
[[ -n $granted && $granted -gt 0 ]] || fail "leash_metrics: no grants in $metrics"
grep -q '^# TYPE leash_locks_held gauge$' <<<"$metrics" || fail "leash_metrics: $metrics"
pass "leash_metrics answers this worker's stats in Prometheus text ($granted grants)"

# ---- 9. a key over LEASH_NAME_MAX: 500 and a log line naming it ----

long=$(printf 'k%.0s' $(seq 513))
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/long?key=$long")
[[ $code == 500 ]] || fail "a key of 513 bytes answered $code"
grep -q "leash: the key \"$long\" of \"leash_lock\" is 513 bytes" "$tmp"/a/error.log ||
    fail "no error line names the long key"
pass "a key over 512 bytes answers 500 and the error log names it"

# ---- 10. Redis down: leash_fail closed and open; back: service resumes ----

kill -TERM "$redis_pid"
wait "$redis_pid" 2>/dev/null || true
t0=$(now_ms)
req down-closed 0 "/closed?key=d&ms=1"
req down-open 1 "/open?key=d&ms=1"
wait_reqs
t1=$(now_ms)
[[ $(code_of down-closed) == 503 ]] || fail "Redis down, leash_fail closed: $(code_of down-closed) $(leash_of down-closed)"
[[ $(code_of down-open) == 200 && $(leash_of down-open) == error* ]] ||
    fail "Redis down, leash_fail open: $(code_of down-open) $(leash_of down-open)"
((t1 - t0 < 1000 + 2 * SLACK_MS)) || fail "Redis down: the answers took $((t1 - t0)) ms (leash_wait 1s)"
"${LEASH_REDIS_SERVER:-redis-server}" --port "$redis_port" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$tmp" --logfile "$tmp/redis.log" --requirepass "$PASSWORD" &
redis_pid=$!
started+=("$redis_pid")
code=
for _ in $(seq 60); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/closed?key=back&ms=1")
    [[ $code == 200 ]] && break
    sleep 0.1
done
[[ $code == 200 ]] || fail "Redis back: still $code"
pass "Redis down: closed answers 503, open goes on with \$leash_status error, both by leash_wait; Redis back: served"

# ---- 11. lost mid-request: Redis frozen past the lease ----

# lost NAME QUERY [h2] [PATH]: a request of key NAME (over HTTP/2 with h2)
# to PATH (default /one)
# reaches the backend (which answers by QUERY), then Redis freezes past the
# lease; the request must end within it, logged, and the backend's request
# is aborted. Its curl exit status goes to $tmp/req-NAME.rc.
lost() {
    local name=$1 query=$2 code port=${ports[0]} opts=() path=${4:-/one}
    if [[ ${3:-} == h2 ]]; then
        port=${h2ports[0]}
        opts=(--http2-prior-knowledge)
    fi
    (
        rc=0
        curl -s "${opts[@]}" -o "$tmp/req-$name.body" -D "$tmp/req-$name.h" -w '%{http_code}\n' \
            "http://127.0.0.1:$port$path?key=$name&ms=2000$query" >"$tmp/req-$name" 2>/dev/null ||
            rc=$?
        echo "$rc" >"$tmp/req-$name.rc"
    ) &
    reqs+=("$!")
    for _ in $(seq 100); do
        [[ $(stat_of "$name" served) == 0 ]] && break
        sleep 0.02
    done
    [[ $(stat_of "$name" served) == 0 ]] || fail "lost: $name never reached the backend"
    kill -STOP "$redis_pid"
    t0=$(now_ms)
    wait_reqs
    t1=$(now_ms)
    kill -CONT "$redis_pid"
    ((t1 - t0 < 1000 + SLACK_MS)) || fail "lost: $name ended $((t1 - t0)) ms after Redis froze (lease 1s)"
    grep -q "leash: lost the lock \"one:$name\" mid-request (unreachable)" "$tmp"/a/error.log ||
        fail "lost: no error line for $name: $(grep lost "$tmp"/a/error.log | tail -n 3)"
    # The backend works on to the end of its 2 s before it finds nginx gone
    # (past the lease and the slack the request had to end in).
    for _ in $(seq 250); do
        [[ $(stat_of "$name" aborted) == 1 ]] && break
        sleep 0.02
    done
    [[ $(stat_of "$name" aborted) == 1 && $(stat_of "$name" served) == 0 ]] ||
        fail "lost: the backend's request of $name was not aborted: $(stats "$name")"
    code=
    for _ in $(seq 60); do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[1]}/one?key=$name&ms=1")
        [[ $code == 200 ]] && break
        sleep 0.1
    done
    [[ $code == 200 ]] || fail "lost: the key $name stays unusable ($code)"
}

# Nothing sent yet: the client gets 500, with $leash_status lost.
lost lost ""
[[ $(code_of lost) == 500 && $(leash_of lost) == lost* ]] ||
    fail "lost before the answer: $(code_of lost) $(leash_of lost) (curl $(cat "$tmp/req-lost.rc"))"
pass "lost before the backend answered: logged, 500 within the lease ($((t1 - t0)) ms), the backend's request aborted"

lost lost-h2 "" h2
[[ $(code_of lost-h2) == 500 ]] || fail "lost before the answer, HTTP/2: $(code_of lost-h2)"
lost lost-h2-stream "&stream=1" h2
[[ $(code_of lost-h2-stream) == 200 && $(cat "$tmp/req-lost-h2-stream.rc") != 0 ]] ||
    fail "lost mid-answer, HTTP/2: $(code_of lost-h2-stream), curl $(cat "$tmp/req-lost-h2-stream.rc")"
pass "lost over HTTP/2: 500 before the answer, the stream reset after it"

# Headers and part of the body sent: the connection is closed mid-body.
lost lost-stream "&stream=1"
size=$(stat -c %s "$tmp/req-lost-stream.body")
[[ $(code_of lost-stream) == 200 && $(cat "$tmp/req-lost-stream.rc") == 18 && $size -lt 4096 ]] ||
    fail "lost mid-answer: $(code_of lost-stream), curl $(cat "$tmp/req-lost-stream.rc"), $size bytes"
pass "lost mid-answer: logged, the connection closed within the lease ($((t1 - t0)) ms, $size of 4096 bytes), the backend's request aborted"

# ---- 12. nginx -t refuses bad configurations ----

refuse() {
    local what=$1 expect=$2 out
    conf "$tmp/bad" 1 "$3"
    if [[ -n ${4:-} ]]; then
        sed -i "s|location /free { |location /free { $4 |" "$tmp/bad/nginx.conf"
    fi
    # nginx itself leaves its configuration's pool behind when it refuses
    # one (it exits at once): no leak report here, only other errors.
    if out=$( (ASAN_OPTIONS=abort_on_error=1:detect_leaks=0 nginx -t -p "$tmp/bad" \
        -c "$tmp/bad/nginx.conf") 2>&1); then
        fail "nginx -t accepted $what"
    fi
    grep -qF -- "$expect" <<<"$out" || fail "nginx -t on $what said: $out"
    if grep -qE 'Sanitizer|runtime error:' <<<"$out"; then
        fail "nginx -t on $what: $out"
    fi
    if grep -qF "$PASSWORD" <<<"$out"; then
        fail "nginx -t on $what showed the password: $out"
    fi
}
refuse "an unknown scheme" '"leash_redis": ' "leash_redis http://:$PASSWORD@127.0.0.1:6379;"
refuse "a bad port" '"leash_redis": ' "leash_redis redis://:$PASSWORD@127.0.0.1:99999;"
refuse "leash_lock without Redis" '"leash_lock" needs a Redis' ""
refuse "two topologies" '"leash_cluster": Redis is already set by "leash_redis"' \
    "leash_redis redis://127.0.0.1:1; leash_cluster 127.0.0.1:7000;"
refuse "0 permits" '"leash_semaphore": permits must be 1..1000000' \
    "leash_redis redis://127.0.0.1:1;" "leash_semaphore k 0;"
refuse "too many permits" '"leash_semaphore": permits must be 1..1000000' \
    "leash_redis redis://127.0.0.1:1;" "leash_semaphore k 1000001;"
refuse "a wait too long" 'must be 0ms..3600000ms' "leash_redis redis://127.0.0.1:1;" "leash_wait 2h;"
refuse "a lease too long" 'must be 100ms..3600000ms' "leash_redis redis://127.0.0.1:1; leash_lease 2h;"
refuse "leash_pubsub neither on nor off" 'in "leash_pubsub" directive, it must be "on" or "off"' \
    "leash_redis redis://127.0.0.1:1; leash_pubsub poll;"
refuse "a queue on Redlock" 'does not work with leash_redlock (a queue needs one server' \
    "leash_redlock 127.0.0.1:1 127.0.0.1:2 127.0.0.1:3;"
refuse "a Sentinel block without a master name" "\"leash_sentinel\": the master's name comes first" \
    "leash_sentinel 127.0.0.1:26379 127.0.0.1:26380;"
refuse "a Sentinel URL without a master name" '"leash_redis": the master' \
    "leash_redis redis+sentinel://:$PASSWORD@127.0.0.1:26379;"
refuse "Sentinel credentials without Sentinel" '"leash_sentinel_password" goes with Redis Sentinel' \
    "leash_redis redis://127.0.0.1:1; leash_sentinel_password $PASSWORD;"
refuse "a Sentinel user without a password" 'sentinel_username given without a sentinel_password' \
    "leash_sentinel mymaster 127.0.0.1:26379; leash_sentinel_user watcher;"
conf "$tmp/good" 1 "leash_cluster 127.0.0.1:7000 127.0.0.1:7001;"
(nginx -t -p "$tmp/good" -c "$tmp/good/nginx.conf") >/dev/null 2>&1 ||
    fail "nginx -t refused leash_cluster"
for sentinel in "leash_sentinel mymaster 127.0.0.1:26379 127.0.0.1:26380;" \
    "leash_sentinel mymaster 127.0.0.1:26379; leash_sentinel_user w; leash_sentinel_password p;" \
    "leash_redis redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster/1;"; do
    conf "$tmp/good" 1 "$sentinel"
    (nginx -t -p "$tmp/good" -c "$tmp/good/nginx.conf") >/dev/null 2>&1 ||
        fail "nginx -t refused $sentinel"
done
conf "$tmp/good" 1
(nginx -t -p "$tmp/good" -c "$tmp/good/nginx.conf") >/dev/null 2>&1 ||
    fail "nginx -t refused the good configuration"
pass "nginx -t refuses bad schemes, ports, a lock without Redis, two topologies, permits, wait, lease, a queue on Redlock, Sentinel without a master name, Sentinel credentials without Sentinel or without a password"

# ---- 14. keepalive: each request on a connection takes and ends its own lock ----

curl -s -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' \
    "http://127.0.0.1:${ports[0]}/one?key=ka&ms=1" \
    "http://127.0.0.1:${ports[0]}/free?key=ka-next&ms=800" >"$tmp/ka" &
reqs+=("$!")
for _ in $(seq 100); do
    [[ $(stat_of ka-next served) == 0 ]] && break
    sleep 0.02
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[1]}/try?key=ka&ms=1")
wait_reqs
[[ $(tr '\n' ' ' <"$tmp/ka") == "200 1 200 0 " ]] || fail "keepalive: $(cat "$tmp/ka")"
[[ $code == 200 ]] || fail "keepalive: the lock of a request that ended stays taken on its open connection ($code)"
out=$(curl -s -o /dev/null -o /dev/null -w '%{http_code} ' "http://127.0.0.1:${ports[0]}/one?key=kb&ms=1" \
    "http://127.0.0.1:${ports[0]}/try?key=kb&ms=1")
fences=$(stat_of kb fences)
[[ $out == "200 200 " && $fences =~ ^[0-9]+,[0-9]+$ && ${fences%,*} -lt ${fences#*,} ]] ||
    fail "keepalive: two requests for one key on one connection: $out, fences $fences"
pass "keepalive: a request's lock ends with it, the next request on the connection takes its own"

# ---- 15. HTTP/2: streams wait, take and end their own locks ----

h2() { curl -s --http2-prior-knowledge "$@"; }
out=$(h2 -o /dev/null -o /dev/null -w '%{http_code} %{http_version}\n' --parallel --parallel-immediate \
    "http://127.0.0.1:${h2ports[0]}/one?key=h2&ms=300" "http://127.0.0.1:${h2ports[0]}/one?key=h2&ms=300")
[[ $(tr '\n' ' ' <<<"$out") == "200 2 200 2 " ]] || fail "HTTP/2: two streams for one key: $out"
[[ $(stat_of h2 peak) == 1 && $(stat_of h2 served) == 2 ]] || fail "HTTP/2: the backend saw $(stats h2)"
req h2-holder 0 "/one?key=h2-hang&ms=800"
sleep 0.2
t0=$(now_ms)
h2 -o /dev/null --max-time 0.3 "http://127.0.0.1:${h2ports[1]}/one?key=h2-hang&ms=1" || true
req h2-next 0 "/one?key=h2-hang&ms=1"
wait_reqs
t1=$(now_ms)
[[ $(code_of h2-holder) == 200 && $(code_of h2-next) == 200 && $(stat_of h2-hang served) == 2 ]] ||
    fail "HTTP/2 hang-up: holder $(code_of h2-holder), next $(code_of h2-next), backend $(stats h2-hang)"
((t1 - t0 < 600 + 2 * SLACK_MS)) || fail "HTTP/2 hang-up: the next request ended $((t1 - t0)) ms later"
pass "HTTP/2: two streams of one connection take one key in turn; a stream that hangs up while waiting delays nobody"

# ---- 16. a subrequest into a location with a lock ----

# It cannot wait for the lock (the connection's events are not its own);
# letting it through would break the lock: without a lock of its main
# request (auth_request runs before the main request takes its lock) it
# fails, logged; a mirror of a request that holds one goes on under it.
req sub-1 0 "/authsub?key=authsub&ms=1"
req sub-2 1 "/authsub?key=authsub&ms=1"
wait_reqs
[[ $(stat_of authlock served) == "" ]] ||
    fail "subrequest: the locked location reached the backend without the lock: $(stats authlock)"
[[ $(code_of sub-1) == 500 && $(code_of sub-2) == 500 ]] ||
    fail "subrequest: $(code_of sub-1) $(code_of sub-2)"
grep -q 'leash: "leash_lock" in a subrequest ("/authlock") whose main request holds no lock: refused' \
    "$tmp"/[ab]/error.log || fail "subrequest: no error line"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/mirrored?key=mirrored&ms=1")
for _ in $(seq 50); do
    [[ $(stat_of authlock served) == 1 ]] && break
    sleep 0.02
done
[[ $code == 200 && $(stat_of authlock served) == 1 ]] ||
    fail "subrequest of a main request with a lock: $code, $(stats authlock)"
pass "a subrequest into a location with a lock goes on under the main request's lock, fails (500, logged) without one"

# ---- 18. access checks come before the lock ----

req den-holder 1 "/one?key=den&ms=800"
for _ in $(seq 100); do
    [[ $(stat_of den served) == 0 ]] && break
    sleep 0.02
done
t0=$(now_ms)
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[1]}/denied?key=den&ms=1")
t1=$(now_ms)
[[ $code == 403 ]] || fail "deny all with a lock: $code"
((t1 - t0 < SLACK_MS)) || fail "deny all: a denied request waited $((t1 - t0)) ms for the lock"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[1]}/any?key=den&ms=1")
[[ $code == 429 ]] || fail "satisfy any: a request allowed by address went past a held lock ($code)"
wait_reqs
pass "a request that allow/deny refuses never waits for the lock; satisfy any does not skip it"

# ---- 19. the lock inherits into if, limit_except and nested locations ----

# reqm NAME INSTANCE METHOD PATH: req with another method.
reqm() {
    curl -s -o /dev/null -D "$tmp/req-$1.h" -w '%{http_code}\n' -X "$3" \
        "http://127.0.0.1:${ports[$2]}$4" >"$tmp/req-$1" 2>/dev/null &
    reqs+=("$!")
}
# For each kind, a holder in the location itself, then a request that
# lands in its if block, its limit_except block or its nested location:
# the second must wait for the first.
for k in l f s; do
    req "inh-$k-if-0" 0 "/${k}if?key=$k-if&ms=1500"
    req "inh-$k-lx-0" 0 "/${k}lx?key=$k-lx&ms=1500"
    req "inh-$k-nest-0" 0 "/${k}nest/?key=$k-nest&ms=1500"
done
for _ in $(seq 250); do
    [[ $(stats '[lfs]-\(if\|lx\|nest\)' | grep -c ' served=0 ') == 9 ]] && break
    sleep 0.02
done
[[ $(stats '[lfs]-\(if\|lx\|nest\)' | grep -c ' served=0 ') == 9 ]] ||
    fail "inheritance: not every holder reached the backend: $(stats '[lfs]-\(if\|lx\|nest\)')"
for k in l f s; do
    req "inh-$k-if-1" 1 "/${k}if?key=$k-if&ms=1&debug=1"
    reqm "inh-$k-lx-1" 1 DELETE "/${k}lx?key=$k-lx&ms=1"
    req "inh-$k-nest-1" 1 "/${k}nest/inner?key=$k-nest&ms=1"
done
wait_reqs
for k in l f s; do
    for b in if lx nest; do
        for i in 0 1; do
            [[ $(code_of "inh-$k-$b-$i") == 200 && $(leash_of "inh-$k-$b-$i") == granted* ]] ||
                fail "inheritance $k $b request $i: $(code_of "inh-$k-$b-$i") $(leash_of "inh-$k-$b-$i")"
        done
        # The second waited for the first (a grant after 0 ms: it came late).
        waited=$(leash_of "inh-$k-$b-1")
        ((${waited#granted } > 0)) || fail "inheritance $k $b: the second request did not wait ($waited)"
        [[ $(stat_of "$k-$b" peak) == 1 && $(stat_of "$k-$b" served) == 2 ]] ||
            fail "inheritance $k $b: the backend saw $(stats "$k-$b")"
    done
done
pass "if, limit_except (DELETE) and nested locations take their location's lock: mutex, fair lock, semaphore"

# ---- 20. lost, then error_page: no backend sees the request again ----

lost ep2 "" "" /ep2
[[ $(code_of ep2) == 500 && $(leash_of ep2) == lost* ]] ||
    fail "lost then error_page: $(code_of ep2) $(leash_of ep2)"
[[ $(stat_of ep2 fences) != *none* && $(stat_of ep2 fences) != *empty* ]] ||
    fail "lost then error_page: a request reached the backend without a fence: $(stats ep2)"
grep -q 'leash: "/ep2" refused: the request lost its lock "one:ep2"' "$tmp"/a/error.log ||
    fail "lost then error_page: no error line for @retry"
pass "a request that lost its lock and is sent on by error_page reaches no backend: 500"

# A mirror (a background subrequest) of a request that loses its lock:
# its upstream is stopped with the request's.
lost mlost "" "" /mlost
[[ $(code_of mlost) == 500 ]] || fail "lost with a mirror: $(code_of mlost)"
for _ in $(seq 250); do
    [[ $(stat_of mlost-mirror aborted) == 1 ]] && break
    sleep 0.02
done
[[ $(stat_of mlost-mirror aborted) == 1 && $(stat_of mlost-mirror served) == 0 ]] ||
    fail "lost with a mirror: the mirror's backend request goes on: $(stats mlost-mirror)"
pass "a lost lock stops the upstream of the request's mirror too"

# ---- 21. typos fail nginx -t and a reload; a refused database does not stop workers ----

refuse "a bad cluster node" '"leash_cluster": leash_client_new: nodes[1] is not' \
    "leash_cluster 127.0.0.1:6379 127.0.0.1:7001x;"
refuse "a bad Redlock node" '"leash_redlock": leash_client_new: nodes[0] is not' \
    "leash_redlock garbage:xx 127.0.0.1:2 127.0.0.1:3;"
cport=$(free_port)
conf "$tmp/c" "$cport" "leash_redis redis://:$PASSWORD@127.0.0.1:$redis_port/99999;"
(nginx -p "$tmp/c" -c "$tmp/c/nginx.conf" >"$tmp/c/stdout" 2>"$tmp/c/stderr") &
started+=("$!")
cmaster=$!
masters+=("$cmaster")
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$cport/free?key=warmup&ms=1" && break
    sleep 0.05
done
cworkers=$(workers_of "$cmaster")
closed=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cport/closed?key=db&ms=1")
open=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$cport/open?key=db&ms=1")
[[ $closed == 503 && $open == 200 ]] || fail "a database Redis refuses: closed $closed, open $open"
[[ $(workers_of "$cmaster") == "$cworkers" && $(wc -w <<<"$cworkers") == 2 ]] ||
    fail "a database Redis refuses: workers $cworkers became $(workers_of "$cmaster")"
sed -i "s|leash_redis redis://[^;]*;|leash_cluster 127.0.0.1:6379 127.0.0.1:7001x;|" "$tmp/c/nginx.conf"
kill -HUP "$cmaster"
sleep 1
code=$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://127.0.0.1:$cport/free?key=c&ms=1" || true)
[[ $code == 200 && $(workers_of "$cmaster") == "$cworkers" ]] ||
    fail "a reload with a typo: $code, workers $cworkers became $(workers_of "$cmaster")"
grep -q '"leash_cluster": leash_client_new: nodes\[1\] is not' "$tmp/c/error.log" ||
    fail "a reload with a typo: no line names it"
pass "typos in leash_cluster/leash_redlock fail nginx -t and a reload (workers serve on); a refused database answers by leash_fail"

# ---- 22. the lock goes with the answer while nginx discards a body ----

# A GET (and a HEAD: a header-only answer has no last buffer) that
# announces 1000 bytes of body and sends 10, then stays: nginx answers (a
# static file) and waits lingering_timeout for the rest.
for method in GET HEAD; do
gone=$(python3 - "${ports[0]}" "$redis_port" "$PASSWORD" "$method" <<'PY'
import socket, subprocess, sys, time
port, rport, pw, method = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", int(port)))
s.sendall(method.encode() + b" /static?key=body HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789")
got = b""
end = b"static file\n" if method == "GET" else b"\r\n\r\n"
while end not in got:
    d = s.recv(4096)
    if not d:
        break
    got += d
t0 = time.monotonic()
ms = -1
while time.monotonic() - t0 < 2.0:
    out = subprocess.run(["redis-cli", "-p", rport, "-a", pw, "--no-auth-warning", "exists",
                          "leash:one:body"], capture_output=True, text=True).stdout.strip()
    if out == "0":
        ms = int((time.monotonic() - t0) * 1000)
        break
    time.sleep(0.02)
print("%s %d" % (got.split(b"\r\n")[0].decode(), ms))
s.close()
PY
)
[[ $gone == "HTTP/1.1 200 OK "* && ${gone##* } -ge 0 && ${gone##* } -lt $SLACK_MS ]] ||
    fail "discarded body, $method: the lock went $gone ms after the answer (-1: still held after 2 s)"
done
pass "the lock goes with the answer (GET and HEAD, ${gone##* } ms), not when nginx gives up on a body"

# ---- 26. what works under the lock after the main answer, and auth_request ----

# slice: the main request's answer is only the first slice; the others are
# subrequests the slice filter starts after it: the lock stays until the
# last (another request for the key waits; the backend never sees two).
req sl-main 0 "/sl?key=sl&ms=300&size=500"
sleep 0.45
req sl-other 1 "/one?key=sl&ms=1"
wait_reqs
[[ $(code_of sl-main) == 200 && $(code_of sl-other) == 200 ]] ||
    fail "slice: $(code_of sl-main) $(code_of sl-other)"
[[ $(stat_of sl peak) == 1 && $(stat_of sl served) == 6 ]] || fail "slice: the backend saw $(stats sl)"
# SSI: the include runs under the main request's lock, after its file.
body=$(curl -s "http://127.0.0.1:${ports[0]}/ssi/page.html?key=ssi")
[[ $body == "head ok"*" tail" && $(stat_of ssi-inc served) == 1 ]] ||
    fail "SSI include under the lock: '$body', $(stats ssi-inc)"
# auth_request into a nested location that inherits the lock: it runs
# before the lock is asked for, and goes on without it.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/app/x?key=app&ms=1")
[[ $code == 200 && $(stat_of auth-nested served) == 1 ]] ||
    fail "auth_request into a nested location: $code, $(stats auth-nested)"
pass "slices and SSI includes keep the lock until they end; auth_request into an inheriting block goes on"

# ---- 23. return answers without the lock ----

req ret-holder 0 "/one?key=ret&ms=1500"
for _ in $(seq 100); do
    [[ $(stat_of ret served) == 0 ]] && break
    sleep 0.02
done
t0=$(now_ms)
body=$(curl -s -D "$tmp/ret.h" "http://127.0.0.1:${ports[1]}/ret?key=ret")
t1=$(now_ms)
wait_reqs
[[ $body == returned && $((t1 - t0)) -lt 1000 ]] ||
    fail "return in a locked location: '$body' after $((t1 - t0)) ms"
pass "return answers in the rewrite phase, before the lock (as docs/nginx.md says)"

# ---- 24. busy statuses that close the connection ----

for st in 408 444 499; do
    refuse "leash_busy_status $st" "$st closes the connection without an answer" \
        "leash_redis redis://127.0.0.1:1;" "leash_busy_status $st;"
done
pass "leash_busy_status 408, 444 and 499 fail nginx -t"
refuse "a CA file that cannot be read" '"leash_tls_ca": cannot read "/nonexistent/ca.pem"' \
    "leash_redis redis://127.0.0.1:1; leash_tls_ca /nonexistent/ca.pem;"
refuse "a tls_name too long" '"leash_redis": leash_client_new: tls_server_name must be' \
    "leash_redis redis://127.0.0.1:1; leash_tls_name $(printf 'n%.0s' $(seq 300));"
pass "nginx -t refuses a TLS file it cannot read and a name leash_client_new refuses"

# ---- 25. leash_fail open does not open on a misconfigured lock ----

req semo-holder 0 "/semopen?key=m&ms=1500"
req kind-holder 0 "/one?key=kd&ms=1500"
for _ in $(seq 100); do
    [[ $(stat_of m served) == 0 && $(stat_of kd served) == 0 ]] && break
    sleep 0.02
done
semo=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[1]}/semopen4?key=m&ms=1")
kind=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[1]}/kindopen?key=kd&ms=1")
wait_reqs
[[ $semo == 500 && $(stat_of m served) == 1 ]] ||
    fail "fail open, two permit counts: $semo, the backend saw $(stats m)"
[[ $kind == 500 && $(stat_of kd served) == 1 ]] ||
    fail "fail open, two kinds: $kind, the backend saw $(stats kd)"
grep -q 'leash: no lock "semo:m": invalid argument (a lock misconfigured: 500' "$tmp"/b/error.log ||
    fail "fail open, two permit counts: no error line"
pass "leash_fail open answers 500 for a misconfigured lock (two permit counts, two kinds)"

# ---- 13. graceful stop (QUIT) while a request holds a lock ----

req quit 1 "/one?key=quit&ms=800"
for _ in $(seq 100); do
    [[ $(stat_of quit served) == 0 ]] && break
    sleep 0.02
done
kill -QUIT "${masters[1]}"
wait_reqs
t_done=$(now_ms)
[[ $(code_of quit) == 200 ]] || fail "QUIT: the request that held the lock: $(code_of quit)"
while kill -0 "${masters[1]}" 2>/dev/null && (($(now_ms) - t_done < 1000 + SLACK_MS)); do
    sleep 0.05
done
if kill -0 "${masters[1]}" 2>/dev/null; then
    fail "QUIT: nginx b still runs $(($(now_ms) - t_done)) ms after its last request"
fi
wait "${masters[1]}" || fail "QUIT: nginx b exited with status $?"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ports[0]}/try?key=quit&ms=1")
[[ $code == 200 ]] || fail "QUIT: the lock stays taken after nginx b stopped ($code)"
pass "QUIT with a lock held: the request completes, nginx exits right after it, the lock is free"

# ---- 17. a fast stop (TERM) while requests hold locks ----

# TERM (nginx -s stop, systemd's stop) exits without ending the requests.
# One request's backend still works (3 s, the lease is 1 s): its lock must
# run out its lease, not be released, or the next request for the key would
# run beside that work. Another's backend answered whole while its client
# reads slowly (a mirror keeps the lock to the request's end): its lock is
# released on the way out, long before its lease ends.
rcli() { redis-cli -p "$redis_port" -a "$PASSWORD" --no-auth-warning "$@"; }
python3 - "${slowports[0]}" <<'PY' >/dev/null 2>&1 &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /mfast?key=tover&ms=1&size=2097152 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
time.sleep(10)
PY
slow=$!
req term 0 "/one?key=term&ms=3000"
settled tover 1
settled tover-mirror 1
arrived term 1
sleep 0.2 # nginx reads the rest of tover's answer and ends its upstream
pttl_over=$(rcli pttl leash:one:tover)
((pttl_over > 0)) || fail "TERM: the lock of the slow client's request is not in Redis ($pttl_over)"
pttl=$(rcli pttl leash:one:term)
((pttl > 0)) || fail "TERM: the lock of the running request is not in Redis ($pttl)"
pttl_over=$(rcli pttl leash:one:tover)
t0=$(now_ms)
kill -TERM "${masters[0]}"
wait "${masters[0]}" || fail "TERM: nginx a exited with status $?"
t_exit=$(now_ms)
pttl=$(rcli pttl leash:one:term)
kill "$slow"
wait "$slow" || true
[[ -z $(stat_of term served) || $(stat_of term served) == 0 ]] ||
    fail "TERM: the backend's work ended before nginx did: $(stats term)"
((pttl > 0)) ||
    fail "TERM: the lock of a request whose backend still works is gone ($pttl) after nginx exited"
grep -q 'leash: the backend may still work on "/one" .*the lock "one:term" runs out its lease' \
    "$tmp"/a/error.log || fail "TERM: no log line for the abandoned lock"
while [[ $(rcli exists leash:one:tover) == 1 ]] && (($(now_ms) - t0 < 2000)); do
    sleep 0.01
done
t1=$(now_ms)
[[ $(rcli exists leash:one:tover) == 0 ]] || fail "TERM: the slow client's lock outlived its lease"
((t1 - t0 + 50 < pttl_over)) ||
    fail "TERM: the slow client's lock went $((t1 - t0)) ms after TERM, with $pttl_over ms of lease left: not released"
while [[ $(rcli exists leash:one:term) == 1 ]] && (($(now_ms) - t_exit < 1000 + SLACK_MS)); do
    sleep 0.02
done
[[ $(rcli exists leash:one:term) == 0 ]] || fail "TERM: the abandoned lock outlived its lease"
wait_reqs
pass "TERM: a lock whose backend still works runs out its lease ($pttl ms left at exit); one whose work is over is released ($((t1 - t0)) ms)"

# ---- 33. worker_shutdown_timeout closes a request whose backend works ----

# A graceful stop (QUIT) waits for the request, until worker_shutdown_timeout
# (1 s) closes it: its upstream still works at the backend (3 s), so its
# lock runs out its lease (1 s), as on a client's hang-up.
conf "$tmp/w" "$(free_port)"
sed -i 's/^worker_processes 2;$/&\nworker_shutdown_timeout 1s;/' "$tmp/w/nginx.conf"
(nginx -p "$tmp/w" -c "$tmp/w/nginx.conf" >"$tmp/w/stdout" 2>"$tmp/w/stderr") &
wpid=$!
started+=("$wpid")
masters+=("$wpid")
wport=$(sed -n 's/^ *listen 127.0.0.1:\([0-9]*\);$/\1/p' "$tmp/w/nginx.conf" | head -n 1)
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$wport/free?key=warmup&ms=1" && break
    sleep 0.05
done
curl -s -o /dev/null "http://127.0.0.1:$wport/one?key=wst&ms=3000" &
reqs+=("$!")
arrived wst 1
kill -QUIT "$wpid"
wait "$wpid" || fail "worker_shutdown_timeout: nginx w exited with status $?"
t_exit=$(now_ms)
pttl=$(rcli pttl leash:one:wst)
[[ $(stat_of wst served) == 0 && $(stat_of wst aborted) == 0 ]] ||
    fail "worker_shutdown_timeout: the backend's work ended before nginx did: $(stats wst)"
((pttl > 0)) || fail "worker_shutdown_timeout: the lock of a request whose backend still works is gone ($pttl)"
grep -q 'leash: the backend may still work on "/one" .*the lock "one:wst" runs out its lease' \
    "$tmp"/w/error.log || fail "worker_shutdown_timeout: no log line for the abandoned lock"
while [[ $(rcli exists leash:one:wst) == 1 ]] && (($(now_ms) - t_exit < 1000 + SLACK_MS)); do
    sleep 0.02
done
[[ $(rcli exists leash:one:wst) == 0 ]] || fail "worker_shutdown_timeout: the abandoned lock outlived its lease"
wait_reqs
pass "worker_shutdown_timeout closing a request whose backend works leaves its lock to run out its lease ($pttl ms left)"

# ---- the logs ----

if grep -hE 'exited on signal|exited with code [1-9]|\[(alert|crit|emerg)\]' "$tmp"/[ab]/error.log; then
    fail "a worker exited on a signal or with an error, or nginx logged an alert"
fi
if grep -hE 'Sanitizer|runtime error:' "$tmp"/[ab]/stderr "$tmp"/[ab]/error.log; then
    fail "a sanitizer spoke"
fi
if grep -lF "$PASSWORD" "$tmp"/a/*.log "$tmp"/a/stderr "$tmp"/b/*.log "$tmp"/b/stderr; then
    fail "the password is in a log"
fi
pass "no worker exited on a signal, no alert, no sanitizer report, no log holds the password"

echo "all $passed nginx checks passed"
