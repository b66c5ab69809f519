# SPDX-License-Identifier: MIT
# Install rules: headers, adapters, libraries, leash.pc, leash-config.cmake,
# the manual pages of sections 3 and 7.
#
# After `cmake --install`, a program outside the tree finds leash either way:
#   find_package(leash CONFIG REQUIRED)  ->  leash::leash, leash::leash_static
#   pkg-config --cflags --libs leash
# Both recreate the dependencies on hiredis, c-ares and OpenSSL through their
# own .pc files. All three are private: the shared library links them
# itself; a program that links the static one links them too.
#
# Everything lands relative to the prefix given at install time, so
# `cmake --install build --prefix DIR` works as well as CMAKE_INSTALL_PREFIX.
include(CMakePackageConfigHelpers)

option(LEASH_INSTALL "Add the install rules" ${LEASH_TOP_LEVEL})
if(NOT LEASH_INSTALL)
  return()
endif()

set(LEASH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/leash
    CACHE STRING "Where leash-config.cmake is installed (relative to the prefix)")
set(LEASH_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    CACHE STRING "Where leash.pc is installed (relative to the prefix)")

# Public headers: <leash/*.h>, and the header-only adapters as
# <leash/adapters/*.h>, the same paths as in the build tree.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/leash/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/leash
        COMPONENT Development
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/adapters/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/leash/adapters
        COMPONENT Development
        FILES_MATCHING PATTERN "*.h")

# The manual (man/README): a page per call in section 3, leash(7) the
# overview; `man leash_acquire` once installed. leash(1) goes with the tool
# (tools/CMakeLists.txt).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/man/man3 ${PROJECT_SOURCE_DIR}/man/man7
        DESTINATION ${CMAKE_INSTALL_MANDIR}
        COMPONENT Development
        FILES_MATCHING PATTERN "*.3" PATTERN "*.7")

install(TARGETS leash_shared leash_static EXPORT leash-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
                COMPONENT Runtime
                NAMELINK_COMPONENT Development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
                COMPONENT Development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
                COMPONENT Runtime)

# leash-targets.cmake: the imported targets leash::leash (shared) and
# leash::leash_static. The static one names PkgConfig::HIREDIS,
# PkgConfig::CARES and PkgConfig::OPENSSL for its link, which
# leash-config.cmake creates before it includes this file.
install(EXPORT leash-targets
        FILE leash-targets.cmake
        NAMESPACE leash::
        DESTINATION ${LEASH_INSTALL_CMAKEDIR}
        COMPONENT Development)

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/leash-config.cmake.in
  ${PROJECT_BINARY_DIR}/leash-config.cmake
  INSTALL_DESTINATION ${LEASH_INSTALL_CMAKEDIR})
# Which versions find_package(leash X.Y) accepts follows the soname rule
# (CMakeLists.txt, leash.h "Structs that grow"): before 1.0 every minor
# version may change the ABI, so 0.4.x satisfies a request for 0.4 and
# nothing else; from 1.0 on, any later version of the same major one does.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_leash_compatibility SameMinorVersion)
else()
  set(_leash_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/leash-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY ${_leash_compatibility})
install(FILES ${PROJECT_BINARY_DIR}/leash-config.cmake
              ${PROJECT_BINARY_DIR}/leash-config-version.cmake
        DESTINATION ${LEASH_INSTALL_CMAKEDIR}
        COMPONENT Development)

# leash.pc. The prefix is only known for sure at install time (cmake --install
# --prefix overrides CMAKE_INSTALL_PREFIX), so the file is written then; the
# install(FILES) right after it still records it in install_manifest.txt.
foreach(_leash_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_leash_dir}}")
    set(_leash_pc_${_leash_dir} "${CMAKE_INSTALL_${_leash_dir}}")
  else()
    set(_leash_pc_${_leash_dir} "\${prefix}/${CMAKE_INSTALL_${_leash_dir}}")
  endif()
endforeach()
set(_leash_pc_out ${PROJECT_BINARY_DIR}/pkgconfig/leash.pc)
install(CODE "
  set(LEASH_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(LEASH_PC_LIBDIR [==[${_leash_pc_LIBDIR}]==])
  set(LEASH_PC_INCLUDEDIR [==[${_leash_pc_INCLUDEDIR}]==])
  set(LEASH_PC_DESCRIPTION [==[${PROJECT_DESCRIPTION}]==])
  set(LEASH_PC_VERSION [==[${PROJECT_VERSION}]==])
  configure_file([==[${PROJECT_SOURCE_DIR}/cmake/leash.pc.in]==]
                 [==[${_leash_pc_out}]==] @ONLY)
" COMPONENT Development)
install(FILES ${_leash_pc_out}
        DESTINATION ${LEASH_INSTALL_PKGCONFIGDIR}
        COMPONENT Development)
