# lowbit_check_listed(TARGET GLOBS FILE...): every file of the calling folder that matches GLOBS (a
# ;-list, relative to the folder) is among FILE... exactly once, and every FILE exists; configuring
# fails otherwise, so a new source or header cannot silently miss its library or the install.
function(lowbit_check_listed target globs)
  file(GLOB present RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} CONFIGURE_DEPENDS ${globs})
  set(listed ${ARGN})
  foreach(f IN LISTS present)
    list(LENGTH listed n)
    list(REMOVE_ITEM listed ${f})
    list(LENGTH listed m)
    math(EXPR times "${n} - ${m}")
    if(NOT times EQUAL 1)
      file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
      message(FATAL_ERROR "${folder}/${f} is listed ${times} times in ${folder}/CMakeLists.txt; "
                          "list it exactly once in ${target}'s sources or headers")
    endif()
  endforeach()
  if(listed)
    message(FATAL_ERROR "${CMAKE_CURRENT_SOURCE_DIR}/CMakeLists.txt lists files that do not exist: ${listed}")
  endif()
endfunction()
