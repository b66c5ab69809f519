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

test_redis_start() {
    local dir=$1 bin=${LEASH_REDIS_SERVER:-redis-server} port pid
    redis_pid=
    redis_port=
    for _ in $(seq 20); do
        port=$((20000 + RANDOM % 40000))
        "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$dir" --logfile "$dir/redis.log" &
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
