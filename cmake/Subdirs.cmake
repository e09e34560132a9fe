# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# kvrelay_add_subdirs([EXCLUDE name...]): adds every direct sub-folder of the current source folder
# that has a CMakeLists.txt, so a new actor, tool or test area is picked up without editing its
# parent.
function(kvrelay_add_subdirs)
  cmake_parse_arguments(S "" "" "EXCLUDE" ${ARGN})
  file(GLOB _entries LIST_DIRECTORIES true CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*")
  list(SORT _entries)
  foreach(_entry IN LISTS _entries)
    get_filename_component(_name "${_entry}" NAME)
    if(IS_DIRECTORY "${_entry}" AND EXISTS "${_entry}/CMakeLists.txt"
       AND NOT _name IN_LIST S_EXCLUDE)
      add_subdirectory("${_entry}")
    endif()
  endforeach()
endfunction()
