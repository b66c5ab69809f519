#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the peer that bench/peers/redlock.js measures (node-redlock 5 and
# ioredis 5) with npm into a cache directory outside the repository,
# LEASH_PEERS_DIR (default /var/cache/leash-peers). It checks before it
# writes: when both packages are there at the wanted major versions it does
# nothing; otherwise it runs one `npm install` there (the npm registry, as
# npm is set up on the machine). Prints the directory.
set -euo pipefail

dir=${LEASH_PEERS_DIR:-/var/cache/leash-peers}
redlock=5.0.0-beta.2 # node-redlock's v5 line is published as beta
ioredis=5

have() { # have PACKAGE MAJOR: 0 when node_modules/PACKAGE is there at MAJOR.x
    local pj=$dir/node_modules/$1/package.json
    [[ -f $pj ]] && node -e 'process.exit(require(process.argv[1]).version.replace(/^v/, "").split(".")[0] === process.argv[2] ? 0 : 1)' "$pj" "$2"
}

command -v node >/dev/null || { echo "install.sh: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "install.sh: npm is not installed" >&2; exit 1; }
if have redlock 5 && have ioredis 5; then
    echo "$dir"
    exit 0
fi
mkdir -p "$dir"
[[ -f $dir/package.json ]] || echo '{"name": "leash-peers", "private": true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "redlock@$redlock" "ioredis@$ioredis" >&2
if ! have redlock 5 || ! have ioredis 5; then
    echo "install.sh: npm did not install redlock 5 and ioredis 5 in $dir" >&2
    exit 1
fi
echo "$dir"
