# The Catch2 program lists its test cases, or the build fails: a program that crashes as it loads
# (a sanitizer's report, a missing library) would otherwise give catch_discover_tests no cases,
# and ctest would run none of them without a word.
#   cmake -DPROGRAM=<cnn_tests> -P check_test_listing.cmake
# With -DCTEST_DIR=<build folder> -DSPEC=<Catch2 test spec> (scripts/test.sh, the sanitized
# build): every case PROGRAM lists for SPEC must be a ctest test of that build folder.
execute_process(COMMAND ${PROGRAM} ${SPEC} --list-test-names-only
  RESULT_VARIABLE rc OUTPUT_VARIABLE listed ERROR_VARIABLE errors)
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${PROGRAM} --list-test-names-only failed (${rc}): no test case would run:\n${listed}${errors}")
endif()
# A line a list element: ';' and '[' ']' (which would split or join elements of a CMake list)
# replaced alike on both sides of the comparison.
function(lines_of text out)
  string(REPLACE ";" "{,}" text "${text}")
  string(REPLACE "[" "{(" text "${text}")
  string(REPLACE "]" ")}" text "${text}")
  string(REGEX REPLACE "\n+$" "" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
lines_of("${listed}" names)
list(LENGTH names count)
# Catch2 v2 exits with the number of cases it listed, at most 255; a sanitizer's report exits 1.
set(listed_rc ${count})
if(count GREATER 255)
  set(listed_rc 255)
endif()
if(count EQUAL 0 OR NOT rc EQUAL listed_rc)
  message(FATAL_ERROR "${PROGRAM} --list-test-names-only listed ${count} cases but exited ${rc}: no test case "
                      "would run:\n${listed}${errors}")
endif()
if(NOT CTEST_DIR)
  return()
endif()

execute_process(COMMAND ${CMAKE_CTEST_COMMAND} -N WORKING_DIRECTORY ${CTEST_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE shown ERROR_VARIABLE errors)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest -N in ${CTEST_DIR} failed (${rc}):\n${errors}")
endif()
lines_of("${shown}" shown)
set(registered "")
foreach(line IN LISTS shown)
  if(line MATCHES "^ *Test +#[0-9]+: (.*)$")
    list(APPEND registered "${CMAKE_MATCH_1}")
  endif()
endforeach()
set(missing "")
foreach(name IN LISTS names)
  list(FIND registered "${name}" at)
  if(at EQUAL -1)
    list(APPEND missing "${name}")
  endif()
endforeach()
list(LENGTH missing missing_count)
if(missing_count GREATER 0)
  list(JOIN missing "\n  " missing_text)
  message(FATAL_ERROR "${missing_count} of the ${count} test cases of ${PROGRAM} ${SPEC} are not ctest tests in "
                      "${CTEST_DIR} (its discovery failed or is stale: rebuild cnn_tests):\n  ${missing_text}")
endif()
message(STATUS "all ${count} test cases of ${PROGRAM} ${SPEC} are ctest tests in ${CTEST_DIR}")
