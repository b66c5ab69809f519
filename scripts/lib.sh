# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# The set-up shared by scripts/test, scripts/demo and scripts/bench: sourced,
# never run. It checks for the Debian packages the build and the tests need
# (installing them when run as root), then configures and builds with CMake.
#
# Environment read here:
#   CC                compiler (default: cc); a change of compiler in an
#                     existing build folder starts that folder's cache afresh
#   LEASH_SANITIZE    sanitizers, e.g. address,undefined (default: none)
#   LEASH_BUILD_DIR   build folder (default: build/, or build-san/ with
#                     LEASH_SANITIZE)
#   LEASH_BUILD_TYPE  CMAKE_BUILD_TYPE (default: RelWithDebInfo, or Debug with
#                     LEASH_SANITIZE so that the debug-only checks run too)
#   LEASH_CMAKE_ARGS  extra arguments for the configure step (split on spaces)
#   LEASH_SKIP_DEPS   1 skips the package check
#
# Functions: leash_setup (the three below, in order), leash_ensure_packages
# [EXTRA_PACKAGE...], leash_configure, leash_build. After leash_setup,
# LEASH_BUILD_DIR names the (absolute) build folder.

LEASH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CC=${CC:-cc}
LEASH_SANITIZE=${LEASH_SANITIZE:-}

leash_say() { printf '==> %s\n' "$*" >&2; }
leash_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# True when the Debian package $1 is installed (false without dpkg).
leash__dpkg_has() {
    command -v dpkg-query >/dev/null 2>&1 &&
        [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]
}

# True when the compiler can build and link a program with the sanitizers.
leash__sanitizers_link() {
    local dir rc=0
    dir=$(mktemp -d "${TMPDIR:-/tmp}/leash-probe.XXXXXX")
    printf 'int main(void) { return 0; }\n' >"$dir/probe.c"
    "$CC" "-fsanitize=$LEASH_SANITIZE" "$dir/probe.c" -o "$dir/probe" >/dev/null 2>&1 || rc=1
    rm -rf "$dir"
    return "$rc"
}

# Prints the packages (one a line) that are missing for this build, plus
# those of the arguments that are missing (checked by dpkg, or as a command).
leash_missing_packages() {
    local cc_name pkg
    cc_name=$(basename "$CC")

    command -v cmake >/dev/null 2>&1 || echo cmake
    command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || echo make
    command -v pkg-config >/dev/null 2>&1 || echo pkg-config
    case $cc_name in
    clang*) command -v "$CC" >/dev/null 2>&1 || echo clang ;;
    gcc* | cc | c99) command -v "$CC" >/dev/null 2>&1 || echo gcc ;;
    esac
    # gcc only recommends the C library headers.
    leash__dpkg_has libc6-dev || [[ -f /usr/include/stdio.h ]] || echo libc6-dev
    leash__dpkg_has libhiredis-dev || [[ -f /usr/include/hiredis/async.h ]] || echo libhiredis-dev
    leash__dpkg_has libev-dev || [[ -f /usr/include/ev.h ]] || echo libev-dev
    # Host names are resolved with c-ares (src/wire/resolve.c).
    leash__dpkg_has libc-ares-dev || [[ -f /usr/include/ares.h ]] || echo libc-ares-dev
    # TLS (src/wire/tls.c), and the openssl command that makes the tests'
    # and the demo's certificates.
    leash__dpkg_has libssl-dev || [[ -f /usr/include/openssl/ssl.h ]] || echo libssl-dev
    command -v openssl >/dev/null 2>&1 || echo openssl
    # The libevent and libuv adapters' tests and examples (built only when
    # these are there, but the CI must run them).
    leash__dpkg_has libevent-dev || [[ -f /usr/include/event2/event.h ]] || echo libevent-dev
    leash__dpkg_has libuv1-dev || [[ -f /usr/include/uv.h ]] || echo libuv1-dev
    command -v redis-server >/dev/null 2>&1 || echo redis-server
    command -v redis-cli >/dev/null 2>&1 || echo redis-tools
    # tests/test_prefork.sh sends its HTTP requests with curl.
    command -v curl >/dev/null 2>&1 || echo curl
    # tests/test_cli.sh reads the leash tool's JSON with jq.
    command -v jq >/dev/null 2>&1 || echo jq
    # tests/test_manpages.sh renders the manual pages with groff (man-db's
    # `man --warnings` when it is there).
    command -v groff >/dev/null 2>&1 || echo groff-base
    # The nginx module (cmake/LeashNginx.cmake: nginx-dev's source tree and
    # the libraries its configure checks for) and tests/test_nginx.sh
    # (Debian's nginx, and python3 for its backend).
    leash__dpkg_has nginx-dev || [[ -f /usr/share/nginx/src/conf_flags ]] || echo nginx-dev
    [[ -x /usr/sbin/nginx ]] || echo nginx
    command -v python3 >/dev/null 2>&1 || echo python3
    # The network lab of the fault tests (tests/support/netlab.h): network
    # namespaces, veth links and a bridge (iproute2), rules on it (nftables).
    [[ -x /usr/sbin/ip ]] || echo iproute2
    [[ -x /usr/sbin/nft ]] || echo nftables
    # clang's sanitizer runtimes are only a recommendation of clang.
    if [[ -n $LEASH_SANITIZE && $cc_name == clang* ]]; then
        if ! command -v "$CC" >/dev/null 2>&1 || ! leash__sanitizers_link; then
            echo libclang-rt-dev
        fi
    fi
    for pkg in "$@"; do
        leash__dpkg_has "$pkg" || command -v "$pkg" >/dev/null 2>&1 || echo "$pkg"
    done
}

# shellcheck disable=SC2120 # extra packages are optional
# Installs what is missing when root; otherwise prints the apt-get line to
# run and exits 1.
leash_ensure_packages() {
    local missing
    [[ ${LEASH_SKIP_DEPS:-0} == 1 ]] && return 0
    mapfile -t missing < <(leash_missing_packages "$@" | awk '!seen[$0]++')
    if [[ ${#missing[@]} -eq 0 ]]; then
        leash__check_cc
        return 0
    fi

    if [[ $(id -u) -ne 0 ]]; then
        printf 'error: leash needs these packages: %s\n' "${missing[*]}" >&2
        printf 'Install them as root (after an apt-get update on a fresh machine):\n\n' >&2
        printf '    sudo apt-get install -y --no-install-recommends %s\n\n' "${missing[*]}" >&2
        exit 1
    fi
    command -v apt-get >/dev/null 2>&1 ||
        leash_die "missing packages (${missing[*]}) and no apt-get to install them"
    leash_say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -q update </dev/null
    apt-get -q install -y --no-install-recommends "${missing[@]}" </dev/null

    mapfile -t missing < <(leash_missing_packages "$@")
    [[ ${#missing[@]} -eq 0 ]] || leash_die "still missing after apt-get install: ${missing[*]}"
    leash__check_cc
}

leash__check_cc() {
    command -v "$CC" >/dev/null 2>&1 || leash_die "CC=$CC: no such compiler"
}

leash_configure() {
    local args=() cache cached_cc want_cc build_type extra=()

    if [[ -n ${LEASH_BUILD_DIR:-} ]]; then
        mkdir -p "$LEASH_BUILD_DIR"
        LEASH_BUILD_DIR=$(cd "$LEASH_BUILD_DIR" && pwd)
    elif [[ -n $LEASH_SANITIZE ]]; then
        LEASH_BUILD_DIR=$LEASH_ROOT/build-san
    else
        LEASH_BUILD_DIR=$LEASH_ROOT/build
    fi
    export LEASH_BUILD_DIR

    # CMake reads CC only when it creates a cache; start afresh when the
    # compiler asked for is not the one this folder was configured with.
    cache=$LEASH_BUILD_DIR/CMakeCache.txt
    if [[ -f $cache ]]; then
        cached_cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache")
        want_cc=$(command -v "$CC")
        if [[ -n $cached_cc && $(readlink -f "$cached_cc") != $(readlink -f "$want_cc") ]]; then
            leash_say "$LEASH_BUILD_DIR was configured with $cached_cc, not $want_cc: reconfiguring"
            rm -rf "$cache" "$LEASH_BUILD_DIR/CMakeFiles"
        fi
    fi
    if [[ ! -f $cache ]] && command -v ninja >/dev/null 2>&1; then
        args+=(-G Ninja)
    fi

    if [[ -n ${LEASH_BUILD_TYPE:-} ]]; then
        build_type=$LEASH_BUILD_TYPE
    elif [[ -n $LEASH_SANITIZE ]]; then
        build_type=Debug
    else
        build_type=RelWithDebInfo
    fi
    # shellcheck disable=SC2206 # split on spaces, as documented
    extra=(${LEASH_CMAKE_ARGS:-})

    leash_say "configure $LEASH_BUILD_DIR (CC=$CC, $build_type${LEASH_SANITIZE:+, sanitize=$LEASH_SANITIZE})"
    cmake -S "$LEASH_ROOT" -B "$LEASH_BUILD_DIR" "${args[@]}" \
        -DCMAKE_BUILD_TYPE="$build_type" \
        -DLEASH_WERROR=ON \
        -DLEASH_SANITIZE="$LEASH_SANITIZE" \
        "${extra[@]}"
}

leash_build() {
    leash_say "build $LEASH_BUILD_DIR"
    cmake --build "$LEASH_BUILD_DIR" --parallel "$(nproc 2>/dev/null || echo 2)"
}

leash_setup() {
    # shellcheck disable=SC2119 # no extra packages here
    leash_ensure_packages
    leash_configure
    leash_build
}
