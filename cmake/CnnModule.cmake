# One target per folder, and an include path that holds only the folders it may use.
#
#   cnn_module(<target> FOLDER <folder> [PUBLIC <targets>...] [PRIVATE <targets>...])
#
# builds the folder's sources (its top level and detail/) as an OBJECT library. A header is
# included by its path from the repository's root, "<folder>/<file>.hpp", so an editor, grep or
# any tool finds it in the tree as it is checked out. The build reaches it through a *view*: a
# directory in the build tree whose only entry, <folder>, links to the folder. A target's include
# path is its own view and the views of the targets it links, never the source root, so including
# a folder that is not linked fails to compile (docs/design.md, "How the order is enforced").
# The view holds the folder a second time under cnnengine/, as it is installed: a public header
# is included as <cnnengine/<folder>/<file>.hpp> in the tree as in an application.
#
# PUBLIC: what the folder's public headers include (users of the folder need it too).
# PRIVATE: what only its sources use.

set(CNN_VIEWS_DIR ${PROJECT_BINARY_DIR}/views)

# The view directory of `name`, whose <path> links to `source` (a folder or a file).
function(cnn_make_view name path source out_dir)
  set(view ${CNN_VIEWS_DIR}/${name})
  set(link ${view}/${path})
  get_filename_component(parent ${link} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT IS_SYMLINK ${link})
    file(CREATE_LINK ${source} ${link} SYMBOLIC)
  endif()
  set(${out_dir} ${view} PARENT_SCOPE)
endfunction()

function(cnn_module target)
  cmake_parse_arguments(M "" "FOLDER" "PUBLIC;PRIVATE" ${ARGN})
  set(folder ${PROJECT_SOURCE_DIR}/${M_FOLDER})
  file(GLOB sources CONFIGURE_DEPENDS ${folder}/*.cpp ${folder}/detail/*.cpp)
  add_library(${target} OBJECT ${sources})
  cnn_make_view(${target} ${M_FOLDER} ${folder} view)
  cnn_make_view(${target} cnnengine/${M_FOLDER} ${folder} view)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${view}>)
  target_link_libraries(${target} PUBLIC ${M_PUBLIC} PRIVATE ${M_PRIVATE})
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${CNN_CXX_FLAGS}>")
  set_property(GLOBAL APPEND PROPERTY CNN_MODULES ${target})
  set_property(GLOBAL APPEND PROPERTY CNN_MODULE_FOLDERS ${M_FOLDER})
endfunction()
