# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Install layout and the Debian package. Included at the end of the top-level CMakeLists.txt.
#
#   cmake -S . -B build/pkg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
#         -DKVRELAY_BUILD_TESTS=OFF -DKVRELAY_BUILD_BENCH=OFF
#   cmake --build build/pkg -j2 && (cd build/pkg && cpack -G DEB)      → kvrelay_<v>-1_<arch>.deb
#   DESTDIR=/tmp/stage cmake --install build/pkg                         → a staged tree
#
# cpack runs the install step, which builds `all` first: configure the package build without tests
# and benchmarks (scripts/image.sh and scripts/release.sh do). Installed (prefix /usr):
#   bin/kvrelay                                   the daemon
#   bin/kvrelay-capture, bin/kvrelay-replay       record an engine's stream / play it back
#   bin/kvrelay-route-probe                       ask the policy server what a router gets back
#     (the tools install themselves from tools/*/CMakeLists.txt; the fake engine and the demo
#     policy server are test tools, component `test-tools`, installed only on request:
#     cmake --install build/pkg --component test-tools)
#   /etc/kvrelay/kvrelay.toml                     default config, a dpkg conffile
#   lib/systemd/system/kvrelay.service            hardened unit (deploy/systemd)
#   share/doc/kvrelay/copyright                   deploy/debian/copyright (machine-readable)
#   share/doc/kvrelay/examples/*.toml             config/examples
#   share/doc/kvrelay/kubernetes/                 deploy/kubernetes
#   share/doc/kvrelay/*.md                        README, CHANGELOG and docs/
# With prefix /usr the config goes to /etc, with /opt/<x> to /etc/opt/<x> (absolute: stage with
# DESTDIR, not --prefix), otherwise to <prefix>/etc; the unit's paths are rewritten to match.

if(NOT TARGET kvrelay_bin)
  return()  # core-only and fuzz builds have no daemon to install
endif()

include(GNUInstallDirs)

set(_kvrelay_deploy "${PROJECT_SOURCE_DIR}/deploy")
# GNUInstallDirs puts the config outside the prefix for /usr (/etc) and /opt/<x> (/etc/opt/<x>):
# install there by absolute path; under the prefix (/usr/local/etc) by relative path.
string(FIND "${CMAKE_INSTALL_FULL_SYSCONFDIR}/" "${CMAKE_INSTALL_PREFIX}/" _under_prefix)
if(_under_prefix EQUAL 0)
  set(_kvrelay_confdir "${CMAKE_INSTALL_SYSCONFDIR}/kvrelay")
else()
  set(_kvrelay_confdir "${CMAKE_INSTALL_FULL_SYSCONFDIR}/kvrelay")
endif()
set(_kvrelay_conffile "${CMAKE_INSTALL_FULL_SYSCONFDIR}/kvrelay/kvrelay.toml")

# -- the unit: deploy/systemd/kvrelay.service names the .deb's paths; follow the real prefix -------
set(_unit_src "${_kvrelay_deploy}/systemd/kvrelay.service")
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_unit_src}")
file(READ "${_unit_src}" _unit)
string(REPLACE "/usr/bin/kvrelay" "${CMAKE_INSTALL_FULL_BINDIR}/kvrelay" _unit "${_unit}")
string(REPLACE "/etc/kvrelay/kvrelay.toml" "${_kvrelay_conffile}" _unit "${_unit}")
string(REPLACE "/usr/share/doc/kvrelay" "${CMAKE_INSTALL_FULL_DOCDIR}" _unit "${_unit}")
# Written verbatim (no @VAR@ substitution: the unit has @system-service); copied only on change.
file(WRITE "${PROJECT_BINARY_DIR}/packaging/kvrelay.service.tmp" "${_unit}")
configure_file("${PROJECT_BINARY_DIR}/packaging/kvrelay.service.tmp"
               "${PROJECT_BINARY_DIR}/packaging/kvrelay.service" COPYONLY)

# -- install rules (the binaries' are next to their targets) ----------------------------------------
if(IS_ABSOLUTE "${_kvrelay_confdir}")
  # `cmake --install --prefix X` on a /usr build would still write the real /etc: refuse it.
  install(CODE "
    if(NOT CMAKE_INSTALL_PREFIX STREQUAL \"${CMAKE_INSTALL_PREFIX}\")
      message(FATAL_ERROR \"kvrelay was configured for prefix ${CMAKE_INSTALL_PREFIX}, whose config \"
        \"directory is ${_kvrelay_confdir} (absolute); --prefix \${CMAKE_INSTALL_PREFIX} would still \"
        \"write there. Stage with DESTDIR=... instead, or configure with \"
        \"-DCMAKE_INSTALL_PREFIX=\${CMAKE_INSTALL_PREFIX}.\")
    endif()")
endif()
install(FILES "${_kvrelay_deploy}/kvrelay.toml" DESTINATION "${_kvrelay_confdir}"
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(FILES "${PROJECT_BINARY_DIR}/packaging/kvrelay.service"
        DESTINATION lib/systemd/system
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/config/examples/" DESTINATION "${CMAKE_INSTALL_DOCDIR}/examples"
        FILES_MATCHING PATTERN "*.toml")
install(DIRECTORY "${_kvrelay_deploy}/kubernetes/" DESTINATION "${CMAKE_INSTALL_DOCDIR}/kubernetes")
file(GLOB _kvrelay_docs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES "${PROJECT_SOURCE_DIR}/README.md" "${PROJECT_SOURCE_DIR}/CHANGELOG.md" ${_kvrelay_docs}
        DESTINATION "${CMAKE_INSTALL_DOCDIR}")
# Debian policy 12.5: the licence in /usr/share/doc/<package>/copyright (DEP-5 format).
install(FILES "${_kvrelay_deploy}/debian/copyright" DESTINATION "${CMAKE_INSTALL_DOCDIR}"
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# -- CPack: the .deb -----------------------------------------------------------------------------------
# The Maintainer field: who answers for this build of the package, "Name <email>" (Debian policy
# 5.6.2). Taken, in order, from -DKVRELAY_PACKAGE_MAINTAINER, from DEBFULLNAME/DEBEMAIL (the
# variables dch and debmake read), or from git's user.name/user.email in the source tree.
# scripts/release.sh refuses a placeholder (an .invalid or example address).
if(NOT KVRELAY_PACKAGE_MAINTAINER)
  set(_maint "")
  if(DEFINED ENV{DEBFULLNAME} AND DEFINED ENV{DEBEMAIL})
    set(_maint "$ENV{DEBFULLNAME} <$ENV{DEBEMAIL}>")
  else()
    find_package(Git QUIET)
    if(GIT_FOUND)
      execute_process(COMMAND "${GIT_EXECUTABLE}" config user.name WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                      OUTPUT_VARIABLE _gname OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      execute_process(COMMAND "${GIT_EXECUTABLE}" config user.email WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                      OUTPUT_VARIABLE _gmail OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_gname AND _gmail)
        set(_maint "${_gname} <${_gmail}>")
      endif()
    endif()
  endif()
  if(NOT _maint)
    set(_maint "kvrelay maintainers <kvrelay@example.invalid>")
    message(STATUS "kvrelay: no maintainer known (set DEBFULLNAME and DEBEMAIL, or "
                   "-DKVRELAY_PACKAGE_MAINTAINER); the .deb says ${_maint}")
  endif()
  set(KVRELAY_PACKAGE_MAINTAINER "${_maint}" CACHE STRING "Maintainer field of the .deb")
endif()
set(KVRELAY_PACKAGE_RELEASE "1" CACHE STRING "Debian revision of the .deb (<version>-<release>)")

set(CPACK_PACKAGE_NAME "kvrelay")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${KVRELAY_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "relays inference engines' KV-cache events to a cache-policy server")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "kvrelay subscribes to the KV-cache event streams of LLM inference engines (vLLM, SGLang and\n"
    "engines using their wire format) over ZeroMQ, fingerprints the stored blocks, and reports\n"
    "which replica holds which prefix to a cache-aware router's policy server over gRPC. It is a\n"
    "drop-in replacement for the Go kvevent-subscriber (same flags), with replay, tiers, LoRA\n"
    "partitions and many engines per daemon.")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_STRIP_FILES ON)  # RelWithDebInfo binaries are ~40 MB each with their debug info
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE "${KVRELAY_PACKAGE_RELEASE}")
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Depends from the binaries' real shared-library needs (dpkg-shlibdeps, from dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# TLS to the policy server verifies against the system roots when server.ca_file is not set.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates")
file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/packaging/conffiles" CONTENT "${_kvrelay_conffile}\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_BINARY_DIR}/packaging/conffiles"
    "${_kvrelay_deploy}/debian/postinst"
    "${_kvrelay_deploy}/debian/prerm"
    "${_kvrelay_deploy}/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR "DEB")
set(CPACK_SOURCE_GENERATOR "TGZ")
set(CPACK_SOURCE_IGNORE_FILES "/build/" "/\\\\.git/")
include(CPack)
