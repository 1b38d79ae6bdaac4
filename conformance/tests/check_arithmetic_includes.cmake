# cmake -DCXX=... -DHEADERS=<list> -DSOURCES=<list> -DROOT=<reference/> -DWORK=<dir> -P check_arithmetic_includes.cmake
# The arithmetic library (lowbit::reference) must stand on Boost alone. Its headers are copied, alone,
# into WORK/include/lowbit; each header and source is then preprocessed (-M: every file it includes)
# against that folder and ROOT (reference/, where the sources include their private headers by family
# folder, "fast/fast_ops.hpp") only, so an engine header (case.hpp, formats.hpp, ...) is not found and fails
# the test, and the list of included files must name none of the engine's dependencies (they sit in
# /usr/include beside Boost, so the include path alone cannot keep them out).
set(forbidden "nlohmann/|openssl/|/eigen3/|/Eigen/|/omp\\.h|/fmt/|/CLI/|doctest")

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/include/lowbit)
file(COPY ${HEADERS} DESTINATION ${WORK}/include/lowbit)
set(staged)
foreach(h IN LISTS HEADERS)
  get_filename_component(name ${h} NAME)
  list(APPEND staged ${WORK}/include/lowbit/${name})
endforeach()

set(failures 0)
foreach(f IN LISTS staged SOURCES)
  execute_process(COMMAND ${CXX} -std=c++20 -M -I${WORK}/include -I${ROOT} -x c++ ${f}
                  OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(SEND_ERROR "${f}: does not preprocess with only the arithmetic headers (an engine header?): ${err}")
    math(EXPR failures "${failures} + 1")
  elseif(deps MATCHES "[^ \n]*(${forbidden})[^ \n]*")
    message(SEND_ERROR "${f}: includes ${CMAKE_MATCH_0}, a dependency of the engine, not of the arithmetic")
    math(EXPR failures "${failures} + 1")
  endif()
endforeach()
list(LENGTH staged nh)
list(LENGTH SOURCES ns)
if(failures EQUAL 0)
  message(STATUS "arithmetic includes: ${nh} headers and ${ns} sources include only the arithmetic headers, Boost and the standard library")
endif()
