#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_package.sh SOURCE_DIR: leash's Debian packages, installed into this
# machine the way a user installs them, used, and removed again.
#
#   1. builds the packages with scripts/package (lintian included), or takes
#      them from LEASH_PACKAGE_DEBS (a folder of .deb files);
#   2. apt-get install ./libleash0.4_*.deb ./libleash-dev_*.deb
#      ./leash-tools_*.deb ./libnginx-mod-http-leash_*.deb, and checks the
#      files, the module's link in /etc/nginx/modules-enabled and its
#      dependency on the ABI of the installed nginx;
#   3. compiles a program outside the tree (tests/install/consumer) against
#      the installed library with `pkg-config --cflags --libs leash` and with
#      CMake's find_package(leash), shared and static, and runs them;
#   4. runs `leash --help`, `leash --version` and `man leash` (its version
#      the build's), then `man leash_acquire`, `man leash_cancel` (a .so
#      to it) and `man 7 leash` from libleash-dev's pages;
#   5. starts Debian's nginx (/usr/sbin/nginx) with a configuration of its
#      own that loads modules only through
#      `include /etc/nginx/modules-enabled/*.conf` (no load_module line),
#      against a redis-server of its own on a free loopback port, and asks a
#      location with leash_lock twice: $leash_status is granted, the fence
#      grows, the lock is free afterwards;
#   6. apt-get purge of the four packages (and of any package apt pulled in
#      for them): dpkg knows none of them, no file is left (module, its
#      modules-enabled link, headers, libraries, CMake and pkg-config files,
#      the tool, its man page, the docs), the package list is what it was;
#   7. nginx still starts: nginx -t with the same configuration less its
#      leash server (which nginx now refuses: unknown directive), and a
#      request served.
#
# It installs packages system-wide, so it runs only when asked to
# (LEASH_TEST_PACKAGES=1, as .ci/run does), as root, with dpkg-buildpackage
# and apt-get at hand; otherwise it exits 77, which ctest reports as
# skipped. It also skips, touching nothing, when a leash package or a leash
# installed by hand is already there: it must leave the machine as it found
# it. One run at a time (a lock file), whatever the worktree.
#
# Environment: LEASH_TEST_PACKAGES, LEASH_PACKAGE_DEBS, LEASH_TEST_KEEP (1
# keeps the temporary folder; the packages are purged all the same).
set -euo pipefail

SKIP=77
src=$(cd "${1:?usage: test_package.sh SOURCE_DIR}" && pwd)
test_start=$SECONDS

skip() {
    echo "SKIP: $*"
    exit "$SKIP"
}
fail() {
    echo "FAIL: $*"
    exit 1
}
pass() { echo "PASS $*"; }
step() { printf '\n=== package test (%ds): %s\n' $((SECONDS - test_start)) "$*"; }

# ---- when to run at all: every check before the first write ----

[[ ${LEASH_TEST_PACKAGES:-0} == 1 ]] ||
    skip "installs packages into this machine; set LEASH_TEST_PACKAGES=1 to run it (.ci/run does)"
[[ $(id -u) -eq 0 ]] || skip "needs root (apt-get install, apt-get purge)"
command -v apt-get >/dev/null 2>&1 || skip "no apt-get"
if [[ -z ${LEASH_PACKAGE_DEBS:-} ]]; then
    command -v dpkg-buildpackage >/dev/null 2>&1 ||
        skip "no dpkg-buildpackage (apt-get install dpkg-dev), and no LEASH_PACKAGE_DEBS"
fi
for tool in redis-server redis-cli curl pkg-config cmake cc man /usr/sbin/nginx flock pgrep; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing"
done

version_part() {
    sed -n "s/^#define LEASH_VERSION_$1 \\([0-9][0-9]*\\)\$/\\1/p" "$src/include/leash/leash.h"
}
major=$(version_part MAJOR)
minor=$(version_part MINOR)
version=$major.$minor.$(version_part PATCH)
if [[ $major == 0 ]]; then soversion=$major.$minor; else soversion=$major; fi
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
packages=("libleash$soversion" libleash-dev leash-tools libnginx-mod-http-leash)

# One run at a time on this machine: two would install and purge the same
# packages under each other.
exec {lock_fd}>"${TMPDIR:-/tmp}/leash-test-package.lock"
flock -w 900 "$lock_fd" || fail "another package test held the lock for 15 minutes"

# What is here already is not ours to remove.
status_of() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true; }
found=()
for pkg in $( (printf '%s\n' "${packages[@]}" && dpkg-query -W -f='${Package}\n' 'libleash*' 2>/dev/null) |
    sort -u); do
    st=$(status_of "$pkg")
    [[ -n $st && $st != not-installed ]] && found+=("$pkg ($st)")
done
[[ ${#found[@]} -eq 0 ]] ||
    skip "already on this machine: ${found[*]}; remove them (apt-get purge) to run this test, it will not clobber them"
leftovers() {
    local f
    for f in /usr/include/leash /usr/lib/*/libleash* /usr/lib/*/cmake/leash \
        /usr/lib/*/pkgconfig/leash.pc /usr/local/include/leash /usr/local/lib/libleash* \
        /usr/local/lib/*/libleash* /usr/bin/leash /usr/share/man/man1/leash.1* \
        /usr/share/man/man3/leash_* /usr/share/man/man7/leash.7* \
        /usr/lib/nginx/modules/ngx_http_leash_module.so \
        /usr/share/nginx/modules-available/mod-http-leash.conf \
        /etc/nginx/modules-enabled/*leash* \
        /usr/share/doc/libleash* /usr/share/doc/leash-tools /usr/share/doc/libnginx-mod-http-leash; do
        [[ -e $f || -L $f ]] && echo "$f"
    done
    return 0
}
before=$(leftovers)
[[ -z $before ]] ||
    skip "leash files installed by hand are here (e.g. cmake --install): $(echo "$before" | tr '\n' ' ')— not touching them"

debs_dir=${LEASH_PACKAGE_DEBS:-}
if [[ -n $debs_dir ]]; then
    [[ -d $debs_dir ]] || fail "LEASH_PACKAGE_DEBS=$debs_dir is no folder"
    debs_dir=$(cd "$debs_dir" && pwd)
fi

# ---- the run ----

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-package-test.XXXXXX")
chmod 755 "$tmp" # nginx's workers (user nobody) read a file in it
started=()       # pids this test started: redis-server, nginx masters
installed=0
pkgs_before=$(dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Status}\n' | sort)
modules_enabled_before=$(ls -A /etc/nginx/modules-enabled 2>/dev/null || true)

apt() {
    DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 "$@" </dev/null
}
# The packages apt installed for ours (dependencies), besides ours.
pulled_in() {
    comm -13 <(echo "$pkgs_before") \
        <(dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Status}\n' | sort) |
        awk '$2 == "installed" { sub(/:.*/, "", $1); print $1 }' |
        grep -vxF -f <(printf '%s\n' "${packages[@]}") || true
}
purge() {
    local extra=()
    mapfile -t extra < <(pulled_in)
    apt purge -y "${packages[@]}" "${extra[@]}"
}
cleanup() {
    local rc=$? pid i workers=()
    # nginx's workers outlive a master that was killed: stop them too.
    for pid in "${started[@]}"; do
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
    # A run that failed half-way still leaves the machine as it found it.
    if [[ $installed == 1 ]]; then
        echo "cleanup: purging the packages this test installed"
        purge >/dev/null 2>&1 || echo "cleanup: apt-get purge failed: purge ${packages[*]} by hand"
    fi
    if [[ ${LEASH_TEST_KEEP:-0} == 1 ]]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR

# 1. The packages.
if [[ -z $debs_dir ]]; then
    step "build the packages (scripts/package)"
    debs_dir=$tmp/debs
    build_start=$SECONDS
    "$src/scripts/package" -o "$debs_dir" >"$tmp/package.log" 2>&1 || {
        tail -n 60 "$tmp/package.log"
        fail "scripts/package failed"
    }
    cat "$tmp/package.log"
    pass "scripts/package built the packages, lintian has no error or warning ($((SECONDS - build_start)) s)"
fi
debs=()
for pkg in "${packages[@]}"; do
    deb=$debs_dir/${pkg}_${version}_$arch.deb
    [[ -f $deb ]] || fail "no $deb"
    debs+=("$deb")
done
ls -l "${debs[@]}"

# 2. Install them as a user would.
step "apt-get install ${debs[*]##*/}"
installed=1
apt install -y --no-install-recommends "${debs[@]}"
for pkg in "${packages[@]}"; do
    [[ $(status_of "$pkg") == installed ]] || fail "$pkg is not installed"
done
[[ -n $(pulled_in) ]] && echo "apt also installed (to be purged with them): $(pulled_in | tr '\n' ' ')"
for f in \
    "/usr/lib/$multiarch/libleash.so.$soversion" \
    "/usr/lib/$multiarch/libleash.so" \
    "/usr/lib/$multiarch/libleash.a" \
    "/usr/lib/$multiarch/pkgconfig/leash.pc" \
    "/usr/lib/$multiarch/cmake/leash/leash-config.cmake" \
    /usr/include/leash/leash.h /usr/include/leash/loop.h /usr/include/leash/url.h \
    /usr/include/leash/adapters/libev.h /usr/include/leash/adapters/libevent.h \
    /usr/include/leash/adapters/libuv.h \
    /usr/bin/leash /usr/share/man/man1/leash.1.gz \
    /usr/share/man/man3/leash_acquire.3.gz /usr/share/man/man7/leash.7.gz \
    /usr/lib/nginx/modules/ngx_http_leash_module.so \
    /usr/share/nginx/modules-available/mod-http-leash.conf; do
    [[ -e $f ]] || fail "missing $f"
done
soname=$(objdump -p "/usr/lib/$multiarch/libleash.so.$soversion" | awk '$1 == "SONAME" { print $2 }')
[[ $soname == "libleash.so.$soversion" ]] || fail "SONAME $soname, package libleash$soversion"
[[ $(cat /usr/share/nginx/modules-available/mod-http-leash.conf) == \
    "load_module modules/ngx_http_leash_module.so;" ]] ||
    fail "mod-http-leash.conf says: $(cat /usr/share/nginx/modules-available/mod-http-leash.conf)"
link=/etc/nginx/modules-enabled/50-mod-http-leash.conf
[[ -L $link && $(readlink "$link") == /usr/share/nginx/modules-available/mod-http-leash.conf ]] ||
    fail "the module is not enabled: $(ls -l /etc/nginx/modules-enabled)"
abi=$(dpkg-query -W -f='${Provides}' nginx | tr ',' '\n' | sed -n 's/^ *\(nginx-abi-[^ ]*\).*/\1/p')
depends=$(dpkg-query -W -f='${Depends}' libnginx-mod-http-leash)
[[ -n $abi && $depends == *"$abi"* ]] ||
    fail "libnginx-mod-http-leash depends on '$depends', the installed nginx provides '$abi'"
pass "installed: files in place, module enabled by $link, depends on $abi"

# 3. A program outside the tree, against the installed library.
step "compile against the installed library"
cp -r "$src/tests/install/consumer" "$tmp/consumer"
pc_version=$(pkg-config --modversion leash)
[[ $pc_version == "$version" ]] || fail "pkg-config --modversion leash: $pc_version"
read -ra pc_flags <<<"$(pkg-config --cflags --libs leash)"
echo "pkg-config --cflags --libs leash: ${pc_flags[*]}"
cc -Wall -Wextra -Werror "$tmp/consumer/consumer.c" -o "$tmp/consumer-pc" "${pc_flags[@]}" -lev
cmake -S "$tmp/consumer" -B "$tmp/consumer-cmake" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DLEASH_EXPECTED_VERSION="$version" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cmake.log" 2>&1 || {
    cat "$tmp/cmake.log"
    fail "find_package(leash) did not configure"
}
cmake --build "$tmp/consumer-cmake" >>"$tmp/cmake.log" 2>&1 || {
    cat "$tmp/cmake.log"
    fail "the find_package(leash) consumer did not build"
}
found_dir=$(sed -n 's/^leash_DIR:PATH=//p' "$tmp/consumer-cmake/CMakeCache.txt")
[[ $found_dir == "/usr/lib/$multiarch/cmake/leash" ]] || fail "find_package found leash in $found_dir"
for bin in "$tmp/consumer-pc" "$tmp/consumer-cmake/consumer" "$tmp/consumer-cmake/consumer_static"; do
    out=$("$bin") || fail "$bin exited with $?"
    [[ $out == "leash $version" ]] || fail "$bin printed '$out'"
done
for bin in "$tmp/consumer-pc" "$tmp/consumer-cmake/consumer"; do
    libs=$(ldd "$bin")
    [[ $libs == *"/lib/$multiarch/libleash.so.$soversion"* ]] ||
        fail "${bin#"$tmp"/} does not load the installed libleash.so.$soversion: $libs"
done
pass "pkg-config and find_package(leash) ($found_dir) consumers build and run, shared and static"

# 4. The tool and its man page.
step "leash --help, man leash"
help=$(leash --help) || fail "leash --help exited with $?"
[[ $help == *"release"* && $help == *"watch"* ]] || fail "leash --help says: $help"
[[ $(leash --version) == "leash $version" ]] || fail "leash --version says $(leash --version)"
[[ $(man -w leash) == /usr/share/man/man1/leash.1.gz ]] || fail "man -w leash: $(man -w leash)"
# Rendered from the installed file (man -l), not through man's cache of
# formatted pages: a cat page an earlier install left in /var/cache/man
# has the same clamped date as this build's page (SOURCE_DATE_EPOCH), so
# `man leash` would show the old text (it did: "leash 0.2").
render() { MANWIDTH=80 MANPAGER=cat man -l "$(man -w "$@")"; }
page=$(render leash 2>"$tmp/man.err") || fail "man leash exited with $?"
[[ ! -s $tmp/man.err ]] || fail "man leash complained: $(cat "$tmp/man.err")"
[[ $page == *LEASH\(1\)* && $page == *NAME* && $page == *SYNOPSIS* && $page == *"distributed locks"* ]] ||
    fail "man leash renders as: ${page:0:400}"
[[ $page == *"leash $version"* ]] || fail "man leash does not carry the version $version"
pass "leash --help, leash --version ($version), man leash ($(wc -l <<<"$page") lines)"
# The library's manual, from libleash-dev.
[[ $(man -w leash_acquire) == /usr/share/man/man3/leash_acquire.3.gz ]] ||
    fail "man -w leash_acquire: $(man -w leash_acquire 2>&1)"
for topic in leash_acquire leash_cancel "7 leash"; do
    # shellcheck disable=SC2086 # "7 leash" is two words
    page=$(render $topic 2>"$tmp/man.err") || fail "man $topic exited with $?"
    [[ ! -s $tmp/man.err ]] || fail "man $topic complained: $(cat "$tmp/man.err")"
    [[ $page == *NAME* && $page == *SYNOPSIS* && $page == *"SEE ALSO"* ]] ||
        fail "man $topic renders as: ${page:0:400}"
done
page=$(render leash_cancel)
[[ $page == *"LEASH_ACQUIRE(3)"* && $page == *"int leash_cancel(leash_lock *l);"* ]] ||
    fail "man leash_cancel does not show leash_acquire's page"
pass "man leash_acquire, man leash_cancel (.so), man 7 leash"

# 5. Debian's nginx with the packaged module, enabled by the package only.
step "nginx with the packaged module, a locked location"
# shellcheck source=tests/support/redis.sh
source "$src/tests/support/redis.sh"
test_redis_start "$tmp" || fail "no redis-server came up"
started+=("$redis_pid")
free_port() {
    local port
    for _ in $(seq 50); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}
lock_port=$(free_port)
plain_port=$(free_port)
[[ $lock_port != "$plain_port" ]] || plain_port=$(free_port)
ngx=$tmp/nginx
mkdir -p "$ngx/conf.d" "$ngx/html"
echo "locked page" >"$ngx/html/page.txt"
echo "plain page" >"$ngx/html/plain.txt"
# nginx runs with its own prefix (/usr/share/nginx, where modules/ leads to
# /usr/lib/nginx/modules), as Debian's does: every path below is absolute.
cat >"$ngx/nginx.conf" <<EOF
# Modules come in as in Debian's /etc/nginx/nginx.conf: from modules-enabled.
include /etc/nginx/modules-enabled/*.conf;
worker_processes 1;
error_log $ngx/error.log info;
pid $ngx/nginx.pid;
daemon off;
events { worker_connections 64; }
http {
    access_log $ngx/access.log;
    client_body_temp_path $ngx/body;
    proxy_temp_path $ngx/proxy;
    fastcgi_temp_path $ngx/fastcgi;
    uwsgi_temp_path $ngx/uwsgi;
    scgi_temp_path $ngx/scgi;
    include $ngx/conf.d/*.conf;
}
EOF
cat >"$ngx/conf.d/leash.conf" <<EOF
leash_redis redis://127.0.0.1:$redis_port/0;
server {
    listen 127.0.0.1:$lock_port;
    location /locked {
        leash_lock pkgtest:\$arg_key;
        leash_wait 5s;
        add_header X-Leash-Status \$leash_status always;
        add_header X-Leash-Fence \$leash_fence always;
        alias $ngx/html/page.txt;
    }
}
EOF
cat >"$ngx/conf.d/plain.conf" <<EOF
server {
    listen 127.0.0.1:$plain_port;
    location / { root $ngx/html; }
}
EOF
! grep -rqE '^[[:space:]]*load_module' "$ngx" || fail "the test's own configuration has a load_module line"
/usr/sbin/nginx -t -c "$ngx/nginx.conf" >"$tmp/nginx-t.log" 2>&1 || {
    cat "$tmp/nginx-t.log"
    fail "nginx -t refused the configuration with the packaged module"
}
# (Into a variable first: grep -q leaving early would kill nginx -T with
# SIGPIPE and fail the pipeline at random.)
dump=$(/usr/sbin/nginx -T -c "$ngx/nginx.conf" 2>/dev/null)
grep -q '^load_module modules/ngx_http_leash_module.so;' <<<"$dump" ||
    fail "nginx -T shows no load_module of the leash module from modules-enabled"
start_nginx() {
    /usr/sbin/nginx -c "$ngx/nginx.conf" >"$ngx/stdout" 2>"$ngx/stderr" &
    started+=("$!")
    nginx_pid=$!
    for _ in $(seq 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$1/plain.txt" && return 0
        kill -0 "$nginx_pid" 2>/dev/null || break
        sleep 0.05
    done
    cat "$ngx/stderr" "$ngx/error.log" 2>/dev/null | tail -n 20
    fail "nginx did not start"
}
stop_nginx() {
    kill -QUIT "$nginx_pid"
    for _ in $(seq 100); do
        kill -0 "$nginx_pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$nginx_pid" 2>/dev/null && fail "nginx $nginx_pid did not stop on QUIT"
    wait "$nginx_pid" 2>/dev/null || true
    # Gone: the cleanup must not signal its pid, which may be reused.
    local pid left=()
    for pid in "${started[@]}"; do
        [[ $pid == "$nginx_pid" ]] || left+=("$pid")
    done
    started=("${left[@]}")
}
start_nginx "$plain_port"
fences=()
for i in 1 2; do
    headers=$(curl -s -D - -o "$tmp/body" "http://127.0.0.1:$lock_port/locked?key=k1") ||
        fail "request $i to /locked failed"
    status=$(sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' <<<"$headers")
    leash_status=$(tr -d '\r' <<<"$headers" | sed -n 's/^X-Leash-Status: //Ip')
    fence=$(tr -d '\r' <<<"$headers" | sed -n 's/^X-Leash-Fence: //Ip')
    [[ $status == 200 && $leash_status == granted && $(cat "$tmp/body") == "locked page" ]] ||
        fail "request $i: status $status, \$leash_status '$leash_status', body '$(cat "$tmp/body")'"
    [[ $fence =~ ^[0-9]+$ ]] || fail "request $i: \$leash_fence '$fence'"
    fences+=("$fence")
done
((fences[1] > fences[0])) || fail "the fence did not grow: ${fences[*]}"
# Released with the answer: the installed leash tool finds the lock free.
sleep 0.2
shown=$(leash --url "redis://127.0.0.1:$redis_port" --json show pkgtest:k1 2>&1) || true
echo "leash show pkgtest:k1: $shown"
[[ $shown == *'"holders":[]'* ]] || fail "the lock is still held after the answers: $shown"
grep -q '\[alert\]\|\[emerg\]' "$ngx/error.log" && fail "nginx logged: $(grep '\[alert\]\|\[emerg\]' "$ngx/error.log")"
stop_nginx
pass "Debian's nginx with the module from modules-enabled: \$leash_status granted, fences ${fences[*]}"

# 6. Remove them.
step "apt-get purge ${packages[*]}"
purge
installed=0
for pkg in "${packages[@]}"; do
    st=$(status_of "$pkg")
    [[ -z $st || $st == not-installed ]] || fail "$pkg is still known to dpkg as $st"
    if dpkg -L "$pkg" >/dev/null 2>&1; then
        fail "dpkg -L $pkg still lists files: $(dpkg -L "$pkg" | head)"
    fi
done
remaining=$(leftovers)
[[ -z $remaining ]] || fail "left behind after the purge: $remaining"
[[ $(ls -A /etc/nginx/modules-enabled 2>/dev/null || true) == "$modules_enabled_before" ]] ||
    fail "/etc/nginx/modules-enabled differs from before: $(ls -A /etc/nginx/modules-enabled)"
pkgs_after=$(dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Status}\n' | sort)
[[ $pkgs_after == "$pkgs_before" ]] ||
    fail "the package list differs from before: $(diff <(echo "$pkgs_before") <(echo "$pkgs_after") || true)"
pass "purged: dpkg knows none of them, no file left, the package list is as before"

# 7. nginx still starts.
step "nginx after the purge"
if /usr/sbin/nginx -t -c "$ngx/nginx.conf" >"$tmp/nginx-t.log" 2>&1; then
    fail "nginx -t still accepts leash_redis after the purge"
fi
grep -q 'unknown directive "leash_redis"' "$tmp/nginx-t.log" ||
    fail "nginx -t after the purge: $(cat "$tmp/nginx-t.log")"
rm "$ngx/conf.d/leash.conf"
/usr/sbin/nginx -t -c "$ngx/nginx.conf" >"$tmp/nginx-t.log" 2>&1 || {
    cat "$tmp/nginx-t.log"
    fail "nginx -t fails after the purge"
}
start_nginx "$plain_port"
[[ $(curl -sf "http://127.0.0.1:$plain_port/plain.txt") == "plain page" ]] || fail "nginx serves nothing"
stop_nginx
pass "nginx -t and nginx start with the same configuration, less its leash server"

echo
echo "package test passed in $((SECONDS - test_start)) s"
