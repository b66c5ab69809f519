# SPDX-License-Identifier: MIT
# The nginx module (nginx/, docs/nginx.md "nginx"): built by nginx's own configure
# and make from the source tree of Debian's nginx-dev, with the flags of the
# distribution's nginx, so that it loads into /usr/sbin/nginx. It links
# leash statically: it needs no library path.
set(LEASH_NGINX_SRC "/usr/share/nginx/src" CACHE PATH
    "nginx source tree with conf_flags (Debian's nginx-dev)")
if(EXISTS "${LEASH_NGINX_SRC}/configure" AND EXISTS "${LEASH_NGINX_SRC}/conf_flags")
  set(_leash_nginx_default ON)
else()
  set(_leash_nginx_default OFF)
endif()
option(LEASH_NGINX "Build ngx_http_leash_module (needs nginx-dev)" ${_leash_nginx_default})

if(LEASH_NGINX)
  if(NOT EXISTS "${LEASH_NGINX_SRC}/conf_flags")
    message(FATAL_ERROR "LEASH_NGINX: no nginx source tree at ${LEASH_NGINX_SRC} "
                        "(install nginx-dev or set LEASH_NGINX_SRC)")
  endif()
  find_program(LEASH_NGINX_BIN nginx PATHS /usr/sbin NO_DEFAULT_PATH)
  find_program(LEASH_NGINX_BIN nginx)

  set(LEASH_NGINX_DIR "${PROJECT_BINARY_DIR}/nginx")
  set(LEASH_NGINX_MODULE "${LEASH_NGINX_DIR}/ngx_http_leash_module.so")
  string(REPLACE ";" " " _leash_ngx_libs
         "$<TARGET_FILE:leash_static>;${HIREDIS_LINK_LIBRARIES};${CARES_LINK_LIBRARIES};${OPENSSL_LINK_LIBRARIES}")
  set(_leash_ngx_cc_opt "")
  set(_leash_ngx_ld_opt "")
  # With the sanitizers the module is instrumented too; Debian's nginx is
  # not, so it must load the sanitizer's runtime first (LD_PRELOAD):
  # LEASH_NGINX_PRELOAD is that runtime, for test_nginx.
  set(LEASH_NGINX_PRELOAD "")
  if(LEASH_SANITIZE)
    set(_leash_ngx_cc_opt "-fsanitize=${LEASH_SANITIZE} -fno-omit-frame-pointer")
    set(_leash_ngx_ld_opt "-fsanitize=${LEASH_SANITIZE}")
    # The module defines its own ngx_modules[] (nginx's generated
    # *_modules.c), which the binary's exported one of the same name
    # interposes: ASan would register the binary's array with the module's
    # size and report the binary's own reads of it (on a reload) as an
    # overflow. So ASan leaves the globals of what nginx compiles alone;
    # libleash.a keeps full instrumentation.
    if(CMAKE_C_COMPILER_ID MATCHES "Clang")
      set(_leash_rt "libclang_rt.ubsan_standalone-${CMAKE_SYSTEM_PROCESSOR}.so")
      if(LEASH_SANITIZE MATCHES "address")
        set(_leash_rt "libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so")
        string(APPEND _leash_ngx_cc_opt " -mllvm -asan-globals=0")
      endif()
    else()
      set(_leash_rt "libubsan.so")
      if(LEASH_SANITIZE MATCHES "address")
        set(_leash_rt "libasan.so")
        string(APPEND _leash_ngx_cc_opt " --param=asan-globals=0")
      endif()
    endif()
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${_leash_rt}
                    OUTPUT_VARIABLE LEASH_NGINX_PRELOAD OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  # Flags of the distribution for the module, which nginx's configure takes
  # as --with-cc-opt and --with-ld-opt (debian/rules passes Debian's
  # CPPFLAGS and LDFLAGS: _FORTIFY_SOURCE, -z relro -z now).
  set(LEASH_NGINX_CC_OPT "" CACHE STRING "Extra compiler flags for the nginx module")
  set(LEASH_NGINX_LD_OPT "" CACHE STRING "Extra linker flags for the nginx module")
  string(STRIP "${_leash_ngx_cc_opt} ${LEASH_NGINX_CC_OPT}" _leash_ngx_cc_opt)
  string(STRIP "${_leash_ngx_ld_opt} ${LEASH_NGINX_LD_OPT}" _leash_ngx_ld_opt)
  file(GLOB _leash_ngx_sources CONFIGURE_DEPENDS
       "${PROJECT_SOURCE_DIR}/nginx/*.c" "${PROJECT_SOURCE_DIR}/nginx/*.h")
  # leash_metrics writes with metrics/prometheus.c (nginx/config).
  list(APPEND _leash_ngx_sources "${PROJECT_SOURCE_DIR}/metrics/prometheus.c"
       "${PROJECT_SOURCE_DIR}/metrics/prometheus.h")
  # nginx's Makefile knows no leash header: a module object compiled
  # against an older leash/url.h (a smaller leash_url) would overflow what
  # it allocates. The module's objects are compiled again whenever the
  # command runs (three files).
  file(GLOB _leash_ngx_headers CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/include/leash/*.h")
  add_custom_command(
    OUTPUT "${LEASH_NGINX_MODULE}"
    COMMAND bash -c "rm -f \"$0\"/nginx-src/objs/addon/*/*.o" "${LEASH_NGINX_DIR}"
    COMMAND ${CMAKE_COMMAND} -E env
            "LEASH_NGX_INCS=${PROJECT_SOURCE_DIR}/include"
            "LEASH_NGX_LIBS=${_leash_ngx_libs}"
            bash "${PROJECT_SOURCE_DIR}/nginx/build.sh" "${LEASH_NGINX_SRC}" "${LEASH_NGINX_DIR}"
            "${PROJECT_SOURCE_DIR}/nginx" "${CMAKE_C_COMPILER}" "${_leash_ngx_cc_opt}"
            "${_leash_ngx_ld_opt}"
    DEPENDS leash_static ${_leash_ngx_sources} ${_leash_ngx_headers}
            "${PROJECT_SOURCE_DIR}/nginx/config"
            "${PROJECT_SOURCE_DIR}/nginx/build.sh"
    COMMENT "Building ngx_http_leash_module.so with nginx's configure"
    VERBATIM)
  add_custom_target(leash_nginx_module ALL DEPENDS "${LEASH_NGINX_MODULE}")
  install(FILES "${LEASH_NGINX_MODULE}" DESTINATION lib/nginx/modules)
endif()
