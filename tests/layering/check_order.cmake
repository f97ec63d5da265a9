# cnn_check_order (cmake/CnnOrder.cmake) in script mode, for the layering tests:
#   -DEDGE=<from>><to>   one link between the library's targets, held against docs/design.md;
#   -DTABLE_OLD=<text> -DTABLE_NEW=<text> (optional) check a copy of docs/design.md with that
#                        text replaced, written under WORK_DIR.
cmake_minimum_required(VERSION 3.22)
include(${SOURCE_DIR}/cmake/CnnOrder.cmake)
set(design ${SOURCE_DIR}/docs/design.md)
if(TABLE_OLD)
  file(READ ${design} text)
  string(FIND "${text}" "${TABLE_OLD}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the test's edit does not apply: \"${TABLE_OLD}\" is not in ${design}")
  endif()
  string(REPLACE "${TABLE_OLD}" "${TABLE_NEW}" text "${text}")
  set(design ${WORK_DIR}/design.md)
  file(WRITE ${design} "${text}")
endif()
cnn_check_order(${design} "${EDGE}")
message(STATUS "${EDGE}: allowed by ${design}")
