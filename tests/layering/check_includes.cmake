# Includes that would walk around the views (docs/design.md, "How the order is enforced"):
# - the library's project includes are written by their path from the repository's root,
#   "<folder>/<file>.hpp", and name a file of the tree (so a reader, an editor or a tool follows
#   them without the build); a relative one ("../layers/x.hpp", or a neighbour's bare name) would
#   find a file without the include path;
# - a public header (cmake/CnnPublicHeaders.cmake) is included everywhere through the installed
#   prefix, <cnnengine/<folder>/<file>.hpp>, and only a public one: one file, one name, as an
#   application sees it;
# - each folder includes only from the folders its row of docs/design.md reaches, read from the
#   sources alone (the build's views enforce it only as far as the links do);
# - the applications in examples/ include public headers only (train_images also those its list
#   in cmake/CnnPublicHeaders.cmake names), never a detail/ one.
# Invoked by ctest (layering_includes_by_full_name) with -DSOURCE_DIR=<the repository>.
cmake_minimum_required(VERSION 3.22)
include(${SOURCE_DIR}/cmake/CnnOrder.cmake)
cnn_read_design_order(${SOURCE_DIR}/docs/design.md order)
include(${SOURCE_DIR}/cmake/CnnPublicHeaders.cmake)

# An include line's path from the root ("engine/core/network.hpp" from "engine/core/network.hpp"
# in quotes or from <cnnengine/engine/core/network.hpp>), into `out`; a problem where a public
# header is named without the prefix or another through it.
set(problems "")
function(cnn_included line source out)
  if(line MATCHES "<cnnengine/([^>]*)>")
    set(included ${CMAKE_MATCH_1})
    if(NOT included IN_LIST CNN_PUBLIC_HEADERS)
      set(problems "${problems}  ${source}: <cnnengine/${included}> is not a public header: include it in quotes\n"
          PARENT_SCOPE)
    endif()
  else()
    string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*$" "\\1" included "${line}")
    if(included IN_LIST CNN_PUBLIC_HEADERS)
      set(problems "${problems}  ${source}: the public header \"${included}\" is included as <cnnengine/${included}>\n"
          PARENT_SCOPE)
    endif()
  endif()
  set(${out} ${included} PARENT_SCOPE)
endfunction()
set(table_folders "")
foreach(target IN LISTS order_TARGETS)
  list(APPEND table_folders ${order_FOLDER_${target}})
endforeach()

# The first parts of the table's folders ("engine" for engine/core): where a project include starts.
set(roots "")
foreach(folder IN LISTS table_folders)
  string(REGEX REPLACE "/.*$" "" root "${folder}")
  list(APPEND roots ${root})
endforeach()

foreach(target IN LISTS order_TARGETS)
  set(folder ${order_FOLDER_${target}})
  cnn_folders_reached(order ${target} allowed)
  file(GLOB_RECURSE sources ${SOURCE_DIR}/${folder}/*.hpp ${SOURCE_DIR}/${folder}/*.cpp
                            ${SOURCE_DIR}/${folder}/*.cu ${SOURCE_DIR}/${folder}/*.cuh)
  foreach(source IN LISTS sources)
    file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*(\"|<cnnengine/)")
    foreach(line IN LISTS lines)
      cnn_included("${line}" ${source} included)
      if(included STREQUAL "stb_image.h")
        continue()
      endif()
      string(REGEX REPLACE "/.*$" "" root "${included}")
      if(included MATCHES "\\.\\." OR NOT included MATCHES "/" OR NOT root IN_LIST roots)
        string(APPEND problems "  ${source}: #include \"${included}\" is not a path from the repository's root\n")
        continue()
      endif()
      if(NOT EXISTS ${SOURCE_DIR}/${included})
        string(APPEND problems "  ${source}: #include \"${included}\" names no file of the tree\n")
      endif()
      string(REGEX REPLACE "^(.*)/[^/]*$" "\\1" from "${included}")
      string(REGEX REPLACE "/detail(/.*)?$" "" from "${from}")
      if(from IN_LIST table_folders AND NOT from IN_LIST allowed)
        string(APPEND problems "  ${source}: ${folder}/ may not include from ${from}/: ${line}\n")
      endif()
    endforeach()
  endforeach()
endforeach()

# Everything else (tests, benchmarks, examples, fuzzers) includes by a path from its own folder or
# from the root, so that every include of the tree resolves without the build.
file(GLOB_RECURSE other_sources ${SOURCE_DIR}/tests/*.hpp ${SOURCE_DIR}/tests/*.cpp ${SOURCE_DIR}/benchmarks/*.hpp
     ${SOURCE_DIR}/benchmarks/*.cpp ${SOURCE_DIR}/examples/*.hpp ${SOURCE_DIR}/examples/*.cpp
     ${SOURCE_DIR}/fuzz/*.hpp ${SOURCE_DIR}/fuzz/*.cpp)
foreach(source IN LISTS other_sources)
  get_filename_component(here ${source} DIRECTORY)
  file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*(\"|<cnnengine/)")
  foreach(line IN LISTS lines)
    cnn_included("${line}" ${source} included)
    if(NOT EXISTS ${here}/${included} AND NOT EXISTS ${SOURCE_DIR}/${included})
      string(APPEND problems "  ${source}: #include \"${included}\" is found neither beside it nor from the root\n")
    endif()
  endforeach()
endforeach()

# The applications include the public headers alone (cmake/CnnPublicHeaders.cmake), or their own;
# train_images also the few of the tree that its list there names.
file(GLOB_RECURSE app_sources ${SOURCE_DIR}/examples/*.hpp ${SOURCE_DIR}/examples/*.cpp)
foreach(source IN LISTS app_sources)
  get_filename_component(here ${source} DIRECTORY)
  set(may_include ${CNN_PUBLIC_HEADERS})
  if(source MATCHES "^${SOURCE_DIR}/examples/train_images/")
    list(APPEND may_include ${CNN_TRAIN_IMAGES_HEADERS})
  endif()
  file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[^\"<]*[\"<](cnnengine/)?([^\">]*)[\">].*$" "\\2" included "${line}")
    if(EXISTS ${SOURCE_DIR}/${included} AND NOT IS_DIRECTORY ${SOURCE_DIR}/${included}
       AND NOT EXISTS ${here}/${included}
       AND NOT included IN_LIST may_include)
      string(APPEND problems "  ${source}: a header that is not public in an application: ${line}\n")
    endif()
  endforeach()
endforeach()

# The facade includes every public header but the kernel contract (CNN_FACADE_LEAVES_OUT), so
# that <cnnengine/cnnengine.hpp> is the whole public surface of a program that trains and
# predicts (a scratch tree of the layering tests has no facade).
if(EXISTS ${SOURCE_DIR}/cnnengine.hpp)
  file(STRINGS ${SOURCE_DIR}/cnnengine.hpp facade_lines REGEX "^#include <cnnengine/")
  string(REGEX REPLACE "#include <cnnengine/([^>]*)>" "\\1" facade_includes "${facade_lines}")
  foreach(header IN LISTS CNN_PUBLIC_HEADERS)
    if(header IN_LIST CNN_FACADE_LEAVES_OUT)
      if(header IN_LIST facade_includes)
        string(APPEND problems "  cnnengine.hpp includes ${header}, which it leaves out (CNN_FACADE_LEAVES_OUT)\n")
      endif()
    elseif(NOT header STREQUAL "cnnengine.hpp" AND NOT header IN_LIST facade_includes)
      string(APPEND problems "  cnnengine.hpp does not include the public header ${header}\n")
    endif()
  endforeach()
endif()

if(problems)
  message(FATAL_ERROR "includes against the layering:\n${problems}")
endif()
message(STATUS "every include is a path from the root and within the order of docs/design.md, a public "
               "header's through <cnnengine/...>; the applications include public headers only, and the facade every one")
