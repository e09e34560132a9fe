# Adds every direct sub-folder of the current source folder that has a CMakeLists.txt, so a new
# actor, tool or test area is picked up without editing its parent.
function(kvrelay_add_subdirs)
  file(GLOB _entries LIST_DIRECTORIES true CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*")
  list(SORT _entries)
  foreach(_entry IN LISTS _entries)
    if(IS_DIRECTORY "${_entry}" AND EXISTS "${_entry}/CMakeLists.txt")
      add_subdirectory("${_entry}")
    endif()
  endforeach()
endfunction()
