# The include check (check_includes.cmake) on a scratch tree of two sources whose includes go
# against the order, with the repository's docs/design.md and cmake/: it must name both.
# Invoked by ctest (layering_includes_refuses_an_include_against_the_order) with -DSOURCE_DIR
# and -DWORK_DIR.
set(tree ${WORK_DIR}/include_against_order)
file(REMOVE_RECURSE ${tree})
file(COPY ${SOURCE_DIR}/docs ${SOURCE_DIR}/cmake DESTINATION ${tree})
file(WRITE ${tree}/engine/core/network.cpp "#include \"layers/conv2d.hpp\"\n")
file(WRITE ${tree}/backends/cpu/detail/kernel.cpp "#include \"data/detail/open_file.hpp\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${tree} -P ${CMAKE_CURRENT_LIST_DIR}/check_includes.cmake
                RESULT_VARIABLE failed ERROR_VARIABLE said)
message("${said}")
if(NOT failed)
  message(FATAL_ERROR "the include check passed a tree with includes against the order")
endif()
