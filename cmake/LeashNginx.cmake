# The nginx module (nginx/, README "nginx"): built by nginx's own configure
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
  string(REPLACE ";" " " _leash_ngx_libs "$<TARGET_FILE:leash_static>;${HIREDIS_LINK_LIBRARIES}")
  set(_leash_ngx_cc_opt "")
  set(_leash_ngx_ld_opt "")
  if(LEASH_SANITIZE)
    set(_leash_ngx_cc_opt "-fsanitize=${LEASH_SANITIZE} -fno-omit-frame-pointer")
    set(_leash_ngx_ld_opt "-fsanitize=${LEASH_SANITIZE}")
  endif()
  file(GLOB _leash_ngx_sources CONFIGURE_DEPENDS
       "${PROJECT_SOURCE_DIR}/nginx/*.c" "${PROJECT_SOURCE_DIR}/nginx/*.h")
  add_custom_command(
    OUTPUT "${LEASH_NGINX_MODULE}"
    COMMAND ${CMAKE_COMMAND} -E env
            "LEASH_NGX_INCS=${PROJECT_SOURCE_DIR}/include"
            "LEASH_NGX_LIBS=${_leash_ngx_libs}"
            bash "${PROJECT_SOURCE_DIR}/nginx/build.sh" "${LEASH_NGINX_SRC}" "${LEASH_NGINX_DIR}"
            "${PROJECT_SOURCE_DIR}/nginx" "${CMAKE_C_COMPILER}" "${_leash_ngx_cc_opt}"
            "${_leash_ngx_ld_opt}"
    DEPENDS leash_static ${_leash_ngx_sources} "${PROJECT_SOURCE_DIR}/nginx/config"
            "${PROJECT_SOURCE_DIR}/nginx/build.sh"
    COMMENT "Building ngx_http_leash_module.so with nginx's configure"
    VERBATIM)
  add_custom_target(leash_nginx_module ALL DEPENDS "${LEASH_NGINX_MODULE}")
  install(FILES "${LEASH_NGINX_MODULE}" DESTINATION lib/nginx/modules)
endif()
