#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Redlock side by side with node-redlock, in one harness shape: five
# redis-servers pinned to CPU 0 (taskset), the client on CPU 1, the client
# connected to each of the five, W try-once acquire -> release cycles in
# flight on keys of their own, Redis calls per cycle from INFO commandstats
# deltas summed over the five. First node-redlock 5 (bench/peers/redlock.js
# on servers this script starts), then leash (leash-bench-throughput
# --redlock, which starts and pins its own five the same way).
#
#   bash bench/peers/run.sh [BUILD_DIR] [INFLIGHT] [SECONDS]
#   (defaults: build, 1,64, 3; LEASH_REDIS_SERVER picks the redis-server)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
inflight=${2:-1,64}
seconds=${3:-3}
server=${LEASH_REDIS_SERVER:-$(command -v redis-server)}
bench=$build/bench/leash-bench-throughput
[[ -x $bench ]] || { echo "run.sh: no $bench (cmake --build $build --target leash-bench-throughput)" >&2; exit 1; }
dir=$(bash "$root/bench/peers/install.sh")
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# Five servers on free loopback ports, on CPU 0.
ports=()
port=$((20000 + RANDOM % 20000))
while [[ ${#ports[@]} -lt 5 ]]; do
    port=$((port + 1))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        taskset -c 0 "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$tmp" --logfile "$tmp/$port.log" >/dev/null 2>&1 &
        pids+=($!)
        ports+=("$port")
    fi
done
for port in "${ports[@]}"; do
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.05
    done
done
echo "## Redlock beside node-redlock ($(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $("$server" --version | grep -o 'v=[0-9.]*'))"
echo
LEASH_PEERS_DIR=$dir taskset -c 1 node "$root/bench/peers/redlock.js" \
    --ports "$(IFS=,; echo "${ports[*]}")" --inflight "$inflight" --seconds "$seconds"
cleanup
pids=()
trap - EXIT
echo
echo "leash (load average $(cut -d' ' -f1-3 /proc/loadavg)):"
echo
"$bench" -i 1 -s "$seconds" --memory-seconds 0 --rb-requests 20000 --rb-keyspace 20000 \
    --redlock --redlock-inflight "$inflight" |
    grep -E '^\| (Redlock|one server) \| [0-9]|^\| Redlock, 5 servers \||^\|---|^- Redlock'
