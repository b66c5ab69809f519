#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds ngx_http_leash_module.so with nginx's own build system, from the
# nginx source tree Debian's nginx-dev ships, configured with the flags the
# distribution's nginx was built with (its conf_flags), so that the module
# loads into that nginx. cmake/LeashNginx.cmake runs it; by hand:
#
#   nginx/build.sh NGINX_SRC WORK_DIR MODULE_DIR CC CC_OPT LD_OPT
#
# with LEASH_NGX_INCS and LEASH_NGX_LIBS in the environment (see
# nginx/config). NGINX_SRC is only read: it is copied into WORK_DIR, and
# configured again when the arguments, the environment or nginx/config
# change.
set -euo pipefail

src=$1 work=$2 module=$3 cc=$4 cc_opt=$5 ld_opt=$6
tree=$work/nginx-src
want="$src|$module|$cc|$cc_opt|$ld_opt|${LEASH_NGX_INCS:-}|${LEASH_NGX_LIBS:-}|$(cksum <"$module/config")"

if [ ! -f "$tree/objs/Makefile" ] || [ "$(cat "$work/configured" 2>/dev/null)" != "$want" ]; then
    rm -rf "$tree"
    mkdir -p "$work"
    cp -r "$src" "$tree"
    cd "$tree"
    # shellcheck disable=SC1091 # the array the distribution's nginx was built with
    . ./conf_flags
    CC=$cc ./configure "${NGX_CONF_FLAGS[@]}" --with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt" \
        --add-dynamic-module="$module" >"$work/configure.log" 2>&1 || {
        tail -n 30 "$work/configure.log" >&2
        exit 1
    }
    printf '%s\n' "$want" >"$work/configured"
fi
cd "$tree"
# The link rule does not know libleash.a: link again every time (it is quick).
rm -f objs/ngx_http_leash_module.so
make -s -f objs/Makefile modules
# A new file, not the old one overwritten: a running nginx maps the old one.
cp objs/ngx_http_leash_module.so "$work/ngx_http_leash_module.so.tmp"
mv -f "$work/ngx_http_leash_module.so.tmp" "$work/ngx_http_leash_module.so"
