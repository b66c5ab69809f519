#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_release.sh SRC WORK HOLDER: the last tagged release beside this
# build, on the same lock names of one redis-server of its own.
#
# SRC is the source tree (a git checkout), WORK a folder the release is
# built in (kept, so that the next run only checks it), HOLDER this build's
# tests/cli_holder. The release is the newest tag v<version> merged into
# HEAD that is not HEAD itself (LEASH_RELEASE_TAG picks another); its
# cli_holder, with the static library under it and nothing else, is built
# from `git archive` of the tag (5-15 s the first time). Exit 77 (skipped)
# without git history or such a tag.
#
# For each kind (mutex, fair lock, read-write lock both ways, semaphore of
# one permit) one side holds a name and the other side asks for it with
# two handles of one client that wait; both ways round; and a mutex whose
# key carries a queued waiter of this tree. Each asking handle must end as
# CHANGELOG.md ("Layouts") says for the two trees' layouts
# (LEASH_LAYOUT_VERSION in include/leash/leash.h; a tree without it is
# layout 1):
#   excluded  it waited and was not let in (LEASH_ETIMEDOUT)
#   refused   LEASH_EREDIS at once (a WRONGTYPE the user sees), and the
#             holder's hash has the same fields as before
# and never granted while the other side holds. The holders keep their
# holds (no lost) and release them. Where the layouts exclude each other
# on a mutex, a release of either wakes the other's waiter (let in within
# HANDOFF_MS + TEST_SLACK_MS of it, not at the lease's end).
#
# Needs redis-server, redis-cli, git, cmake; LEASH_REDIS_SERVER picks
# another redis-server. Only processes this script started are stopped,
# by pid.
set -euo pipefail

# shellcheck source=tests/support/redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/support/redis.sh"

[[ $# == 3 ]] || {
    echo "usage: test_release.sh SRC WORK HOLDER"
    exit 2
}
src=$1
work=$2
new_holder=$3

skip() {
    echo "SKIP: $*"
    exit 77
}

# --- the release --------------------------------------------------------------
command -v git >/dev/null || skip "no git: the release test builds the last tag from git history"
git -C "$src" rev-parse --git-dir >/dev/null 2>&1 ||
    skip "$src is not a git checkout (a source tarball?): no tags to build a release from"
head=$(git -C "$src" rev-parse HEAD)
tag=${LEASH_RELEASE_TAG:-}
if [[ -z $tag ]]; then
    while read -r t; do
        if [[ $(git -C "$src" rev-parse "$t^{commit}") != "$head" ]]; then
            tag=$t
            break
        fi
    done < <(git -C "$src" tag --merged HEAD --list 'v[0-9]*' --sort=-v:refname)
fi
[[ -n $tag ]] || skip "no release tag v* before HEAD (git fetch --tags; or nothing is tagged yet)"
commit=$(git -C "$src" rev-parse "$tag^{commit}") || {
    echo "FAIL: no commit for tag $tag"
    exit 1
}

layout_of() { # the LEASH_LAYOUT_VERSION of leash.h on stdin, 1 without one
    local v
    v=$(sed -n 's/^#define LEASH_LAYOUT_VERSION \([0-9][0-9]*\).*/\1/p')
    echo "${v:-1}"
}
old_layout=$(git -C "$src" show "$commit:include/leash/leash.h" | layout_of)
new_layout=$(layout_of <"$src/include/leash/leash.h")

rel=$work/$tag-${commit:0:12}
start=$(date +%s)
if [[ ! -f $rel/build/CMakeCache.txt ]]; then
    rm -rf "$rel"
    mkdir -p "$rel/src"
    git -C "$src" archive "$commit" | tar -x -C "$rel/src"
    gen=()
    if command -v ninja >/dev/null; then gen=(-G Ninja); fi
    if ! cmake -S "$rel/src" -B "$rel/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DLEASH_BUILD_EXAMPLES=OFF -DLEASH_BUILD_BENCH=OFF -DLEASH_BUILD_TESTS=ON \
        -DLEASH_BUILD_TOOLS=ON >"$rel/configure.log" 2>&1; then
        echo "FAIL: $tag does not configure:"
        tail -n 20 "$rel/configure.log"
        rm -rf "$rel/build"
        exit 1
    fi
fi
if ! cmake --build "$rel/build" -j2 --target cli_holder >"$rel/build.log" 2>&1; then
    echo "FAIL: $tag's cli_holder does not build:"
    tail -n 20 "$rel/build.log"
    exit 1
fi
old_holder=$rel/build/tests/cli_holder
# Layout 1 (0.3) grants with SET ... NX ... GET: Redis 7.0 or later.
v=$(test_redis_version)
if ((old_layout == 1 && v > 0 && v < 70000)); then
    skip "$tag (layout 1) needs Redis 7.0 or later; this redis-server is $v"
fi
echo "release $tag ($commit, layout $old_layout) built in $(($(date +%s) - start)) s;" \
    "this tree: layout $new_layout"

# --- what CHANGELOG.md promises -----------------------------------------------
# want KIND HOLDER_LAYOUT ASKER_LAYOUT: excluded or refused. KIND: mutex,
# tail (a mutex whose key carries a starving waiter's queue), fair, rw, sem.
want() {
    local kind=$1 h=$2 a=$3
    if [[ $h == "$a" ]]; then
        echo excluded
        return
    fi
    case "$kind:$h:$a" in
    mutex:1:2 | mutex:2:1 | tail:2:2) echo excluded ;;
    tail:2:1) echo refused ;;
    fair:1:2 | rw:1:2 | sem:1:2 | fair:2:1 | rw:2:1 | sem:2:1) echo refused ;;
    *)
        echo "FAIL: no promise for $kind held by layout $h, asked by layout $a:" \
            "say it in CHANGELOG.md and here" >&2
        echo unknown
        ;;
    esac
}

# --- the server and four clients ----------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/leash-release.XXXXXX")
started=()
cleanup() {
    local pid
    for pid in "${started[@]}"; do
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

test_redis_start "$tmp" || {
    echo "FAIL: no redis-server came up"
    exit 1
}
started+=("$redis_pid")
R() {
    redis-cli -p "$redis_port" "$@"
}

# A client of its own, fed through a fifo: start NAME BINARY, then
# tell NAME "command", and wait_line NAME REGEX SECONDS.
declare -A fd_of
start() {
    local fd
    mkfifo "$tmp/$1.in"
    "$2" "redis://127.0.0.1:$redis_port" <"$tmp/$1.in" >"$tmp/$1.out" 2>&1 &
    started+=("$!")
    exec {fd}>"$tmp/$1.in"
    fd_of[$1]=$fd
}
tell() {
    echo "$2" >&"${fd_of[$1]}"
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

# Clients: oh and nh hold (the release's and this tree's), oa and na ask.
start oh "$old_holder"
start nh "$new_holder"
start oa "$old_holder"
start na "$new_holder"
for c in oh nh oa na; do wait_line "$c" '^ready' 10; done

# Each holder takes its names, o.* (the release) and n.* (this tree):
# handle kind name [permits]; the asker's kind (the rw names cross).
holds=("0 mutex mutex" "1 fair fair" "2 write rw.w" "3 read rw.r" "4 sem sem 1"
    "5 mutex tail")
for c in oh nh; do
    p=${c:0:1}
    for h in "${holds[@]}"; do
        read -r id kind name permits <<<"$h"
        tell "$c" "new $id $kind $p.$name $permits"
        tell "$c" "acquire $id 0"
    done
    for h in "${holds[@]}"; do
        wait_line "$c" "^${h%% *} granted" 10 || exit 1
    done
done

# The tail: this tree's own key written as a starving waiter of it would
# (dialect/leash.c, "Starving waiters"), when this tree has that queue.
if ((new_layout >= 2)); then
    v=$(R get leash:n.tail)
    [[ $v =~ ^[0-9a-f]{32}:[01]:1:[0-9]+$ ]] || fail "n.tail holds '$v', not a mutex hold"
    v=${v%%:*}:1:${v#*:?:} # a waiter found it busy
    R set leash:n.tail "$v:0123456789abcdef0123456789abcdef:$(now_ms)" XX KEEPTTL >/dev/null
fi

# The field names of a lock's hash but seq and queued, which a holder's own
# renewal may write as 0; and every key there is.
fields() {
    R hkeys "leash:$1" | grep -Ev '^(seq|queued)$' | sort | tr '\n' ' '
}
keys() {
    R --scan | sort | tr '\n' ' '
}
declare -A before
before[keys]=$(keys)
for p in o n; do
    for k in fair rw.w rw.r sem; do
        before[$p.$k]=$(fields "$p.$k")
        [[ ${before[$p.$k]} == *fence* ]] || fail "$p.$k is no family lock: ${before[$p.$k]}"
    done
done

# Each asker: two handles a name (the second after the first is queued),
# each waiting WAIT_MS.
WAIT_MS=1500
asks=("mutex mutex mutex" "fair fair fair" "rw read rw.w" "rw write rw.r" "sem sem sem 1")
for c in oa na; do
    other=n
    [[ $c == na ]] && other=o
    id=0
    for a in "${asks[@]}"; do
        read -r _ kind name permits <<<"$a"
        tell "$c" "new $id $kind $other.$name $permits"
        tell "$c" "new $((id + 1)) $kind $other.$name $permits"
        id=$((id + 2))
    done
    if [[ $c == oa ]]; then
        tell "$c" "new $id mutex n.tail"
    fi
done
for c in oa na; do
    for id in $(seq 0 2 8); do tell "$c" "acquire $id $WAIT_MS"; done
    [[ $c == oa ]] && tell "$c" "acquire 10 $WAIT_MS"
done
sleep 0.3
for c in oa na; do
    for id in $(seq 1 2 9); do tell "$c" "acquire $id $WAIT_MS"; done
done

# verdict ASKER ID KIND HOLDER_LAYOUT ASKER_LAYOUT WHAT
verdict() {
    local c=$1 id=$2 kind=$3 h=$4 a=$5 what=$6 expect line
    expect=$(want "$kind" "$h" "$a")
    wait_line "$c" "^$id (granted|status)" $((WAIT_MS / 1000 + 10)) || return 0
    line=$(grep -E "^$id (granted|status)" "$tmp/$c.out" | head -1)
    case "$expect:$line" in
    excluded:"$id status LEASH_ETIMEDOUT" | refused:"$id status LEASH_EREDIS") ;;
    *"granted"*)
        fail "$what: layout $a was let in while layout $h holds ($line): co-holding"
        ;;
    *) fail "$what: layout $a's handle said '$line', CHANGELOG.md says $expect" ;;
    esac
}
for c in oa na; do
    if [[ $c == oa ]]; then h=$new_layout a=$old_layout who="release asks, this tree holds"; else
        h=$old_layout a=$new_layout who="this tree asks, the release holds"
    fi
    id=0
    for k in "${asks[@]}"; do
        read -r kind what _ <<<"$k"
        verdict "$c" "$id" "$kind" "$h" "$a" "$who: $what ($id)"
        verdict "$c" "$((id + 1))" "$kind" "$h" "$a" "$who: $what ($((id + 1)))"
        id=$((id + 2))
    done
done
if ((new_layout >= 2)); then
    verdict oa 10 tail "$new_layout" "$old_layout" \
        "release asks, this tree holds: mutex with a waiter's queue in its key (10)"
fi

# No key came or went (a waiter of either layout writes into the lock's
# own key), and a refused asker wrote nothing into the holder's hash.
now=$(keys)
[[ $now == "${before[keys]}" ]] || fail "the keys changed under the asks: ${before[keys]}-> $now"
for p in o n; do
    h=$old_layout a=$new_layout
    [[ $p == n ]] && h=$new_layout a=$old_layout
    for k in fair rw.w rw.r sem; do
        [[ $(want "${k%.*}" "$h" "$a") == refused ]] || continue
        now=$(fields "$p.$k")
        [[ $now == "${before[$p.$k]}" ]] ||
            fail "$p.$k's fields changed under the other side's asks: ${before[$p.$k]}-> $now"
    done
done

# The holders still hold, and give their holds back.
for c in oh nh; do
    if grep -q ' lost ' "$tmp/$c.out"; then
        fail "$c lost a hold: $(grep ' lost ' "$tmp/$c.out" | tr '\n' ' ')"
    fi
    for h in "${holds[@]}"; do tell "$c" "release ${h%% *}"; done
    for h in "${holds[@]}"; do
        wait_line "$c" "^${h%% *} released LEASH_OK" 10 || true
    done
done
# Where the two layouts exclude each other on a mutex, one's release wakes
# the other's waiter: it is let in within HANDOFF_MS of the release, not
# when the released hold's lease (3 s, renewed each second) would have run
# out. A waiter of one client per direction, on a name of its own.
HANDOFF_MS=1000
SLACK_MS=${TEST_SLACK_MS:-300}
if [[ $(want mutex "$old_layout" "$new_layout") == excluded &&
    $(want mutex "$new_layout" "$old_layout") == excluded ]]; then
    for c in oh nh; do
        tell "$c" "new 6 mutex ${c:0:1}.hand"
        tell "$c" "acquire 6 0"
        wait_line "$c" '^6 granted' 10 || exit 1
    done
    tell na "new 10 mutex o.hand"
    tell na "acquire 10 20000"
    tell oa "new 11 mutex n.hand"
    tell oa "acquire 11 20000"
    sleep 0.5 # each waiter asked, found the name held, and sleeps
    for c in oh nh; do tell "$c" "release 6"; done
    t0=$(now_ms)
    declare -A at=()
    while [[ -z ${at[na]:-} || -z ${at[oa]:-} ]] && (($(now_ms) < t0 + 25000)); do
        if [[ -z ${at[na]:-} ]] && grep -Eq '^10 (granted|status)' "$tmp/na.out"; then
            at[na]=$(now_ms)
        fi
        if [[ -z ${at[oa]:-} ]] && grep -Eq '^11 (granted|status)' "$tmp/oa.out"; then
            at[oa]=$(now_ms)
        fi
        sleep 0.02
    done
    for w in "na 10 this tree's waiter, the release's hold" "oa 11 the release's waiter, this tree's hold"; do
        read -r c id what <<<"$w"
        line=$(grep -E "^$id (granted|status)" "$tmp/$c.out" | head -1 || true)
        if [[ $line != "$id granted"* ]]; then
            fail "mutex handoff, $what: the waiter said '${line:-nothing}' in 25 s"
        elif ((at[$c] - t0 > HANDOFF_MS + SLACK_MS)); then
            fail "mutex handoff, $what: let in $((at[$c] - t0)) ms after the release" \
                "(at most $((HANDOFF_MS + SLACK_MS))): the release did not wake it"
        fi
        tell "$c" "release $id"
    done
    echo "mutex handoff across the layouts: $((at[na] - t0)) ms to this tree's waiter," \
        "$((at[oa] - t0)) ms to the release's"
fi
for c in oh nh oa na; do tell "$c" quit; done

if ((failed)); then
    for c in oh nh oa na; do
        echo "--- $c said:"
        sed 's/^/    /' "$tmp/$c.out"
    done
    exit 1
fi
echo "ok: $tag (layout $old_layout) and this tree (layout $new_layout) as CHANGELOG.md says"
