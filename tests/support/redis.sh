# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# shellcheck disable=SC2034 # redis_pid and redis_port are for the sourcing script
# Sourced by the shell tests: starts a redis-server of the test's own on a
# free loopback port. Needs redis-server and redis-cli; LEASH_REDIS_SERVER
# picks another redis-server.
#
#   test_redis_start DIR   the server's dir and log; sets redis_pid and
#                          redis_port, or returns 1 when none came up after
#                          20 ports. The caller stops redis_pid (it started
#                          it, so it knows the pid is its own).
#                          With redis_tls_dir set (a folder made by
#                          scripts/make-certs) the server also serves TLS,
#                          with its server.pem, on redis_tls_port.

#   test_redis_version     prints the version of that redis-server as one
#                          number, major * 10000 + minor * 100 + patch
#                          (60216 for 6.2.16), as tests/support/redis_server.h
#                          does; 0 when it cannot tell.
test_redis_version() {
    local v
    v=$("${LEASH_REDIS_SERVER:-redis-server}" --version 2>/dev/null |
        sed -n 's/.* v=\([0-9]*\)\.\([0-9]*\)\.\([0-9]*\).*/\1 \2 \3/p')
    # shellcheck disable=SC2086 # three numbers, or none
    set -- $v
    if (($# == 3)); then
        echo $((10#$1 * 10000 + 10#$2 * 100 + 10#$3))
    else
        echo 0
    fi
}

test_redis_start() {
    local dir=$1 bin=${LEASH_REDIS_SERVER:-redis-server} port pid tls=()
    redis_pid=
    redis_port=
    redis_tls_port=
    for _ in $(seq 20); do
        port=$((20000 + RANDOM % 40000))
        if [[ -n ${redis_tls_dir:-} ]]; then
            redis_tls_port=$((20000 + RANDOM % 40000))
            tls=(--tls-port "$redis_tls_port" --tls-cert-file "$redis_tls_dir/server.pem"
                --tls-key-file "$redis_tls_dir/server.key"
                --tls-ca-cert-file "$redis_tls_dir/ca.pem" --tls-auth-clients no)
        fi
        "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$dir" --logfile "$dir/redis.log" "${tls[@]}" &
        pid=$!
        for _ in $(seq 50); do
            if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
                redis_pid=$pid
                redis_port=$port
                return 0
            fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    return 1
}

#   test_redis_cluster_start DIR N   N masters (no replicas) on free loopback
#                          ports, each in DIR/<port>, made one cluster with
#                          redis-cli --cluster create; sets cluster_pids and
#                          cluster_ports (arrays), or returns 1. The caller
#                          stops every pid of cluster_pids, as above.
test_redis_cluster_start() {
    local dir=$1 n=$2 bin=${LEASH_REDIS_SERVER:-redis-server} port pid i addrs=()
    cluster_pids=()
    cluster_ports=()
    for i in $(seq "$n"); do
        for _ in $(seq 20); do
            port=$((20000 + RANDOM % 30000))
            # The cluster bus listens on port + 10000: both must be free.
            mkdir -p "$dir/$port"
            "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
                --cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf" \
                --dir "$dir/$port" --logfile "$dir/$port/redis.log" &
            pid=$!
            for _ in $(seq 50); do
                redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.05
            done
            if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
                cluster_pids+=("$pid")
                cluster_ports+=("$port")
                addrs+=("127.0.0.1:$port")
                break
            fi
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        done
        ((${#cluster_ports[@]} == i)) || return 1
    done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
        >"$dir/create.log" 2>&1 || return 1
    for _ in $(seq 200); do
        local ok=0
        for port in "${cluster_ports[@]}"; do
            redis-cli -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' &&
                ok=$((ok + 1))
        done
        ((ok == n)) && return 0
        sleep 0.05
    done
    return 1
}
