# The folder order of docs/design.md, held against the build's link graph.
#
#   cnn_check_order(<design.md> <edges>)
#
# reads the table of docs/design.md's "Folders and their order" (its rows: | # | `folder/` |
# `target` | holds | uses |) and stops the configure, naming the edge, when a link between two
# of the library's targets is not in the table's "uses" column, or when a folder would use one
# at its own level or above (a cycle). <edges> is a list of "from>to" target pairs. The table is
# the one description of the order: the build follows it, and the views (CnnModule.cmake) keep
# every include within the links.
#
# Runs at configure time (the top-level CMakeLists.txt, over every target's LINK_LIBRARIES) and
# in script mode (the test layering_order_refuses_an_edge, with an edge against the order).

# Parses the table into <prefix>_TARGETS and, for each target, <prefix>_RANK_<target>,
# <prefix>_FOLDER_<target> and <prefix>_USES_<target> (the targets it may link).
function(cnn_read_design_order design prefix)
  file(STRINGS ${design} rows ENCODING UTF-8 REGEX "^\\| *[0-9]+ *\\| *`[^`]+` *\\| *`cnn_[a-z_]+`")
  set(targets "")
  foreach(row IN LISTS rows)
    string(REGEX MATCH "^\\| *([0-9]+) *\\| *`([^`]+)` *\\| *`(cnn_[a-z_]+)`[^|]*\\|[^|]*\\| *([^|]*)\\|" _ "${row}")
    # Each REGEX call resets CMAKE_MATCH_<n>: keep them first.
    set(rank ${CMAKE_MATCH_1})
    set(folder ${CMAKE_MATCH_2})
    set(target ${CMAKE_MATCH_3})
    set(uses "${CMAKE_MATCH_4}")
    string(REGEX REPLACE "/$" "" folder "${folder}")
    set(rank_${target} ${rank})
    set(folder_${target} ${folder})
    string(REGEX REPLACE "[ `]" "" uses "${uses}")
    string(REPLACE "," ";" uses_${target} "${uses}")
    list(APPEND targets ${target})
  endforeach()
  if(NOT targets)
    message(FATAL_ERROR "${design}: no rows in the table of \"Folders and their order\"")
  endif()
  # "uses" names folders by their last part (cpu for backends/cpu); "nothing" is none.
  foreach(target IN LISTS targets)
    set(used_targets "")
    foreach(name IN LISTS uses_${target})
      if(name STREQUAL "nothing")
        continue()
      endif()
      set(found "")
      foreach(other IN LISTS targets)
        get_filename_component(short ${folder_${other}} NAME)
        if(short STREQUAL name)
          set(found ${other})
        endif()
      endforeach()
      if(NOT found)
        message(FATAL_ERROR "${design}: ${folder_${target}}/ uses \"${name}\", which is no folder of the table")
      endif()
      if(NOT rank_${found} LESS rank_${target})
        message(FATAL_ERROR "${design}: ${folder_${target}}/ (level ${rank_${target}}) uses ${folder_${found}}/ "
                            "(level ${rank_${found}}): a folder may use only those below it")
      endif()
      list(APPEND used_targets ${found})
    endforeach()
    set(${prefix}_RANK_${target} ${rank_${target}} PARENT_SCOPE)
    set(${prefix}_FOLDER_${target} ${folder_${target}} PARENT_SCOPE)
    set(${prefix}_USES_${target} ${used_targets} PARENT_SCOPE)
  endforeach()
  set(${prefix}_TARGETS ${targets} PARENT_SCOPE)
endfunction()

function(cnn_check_order design edges)
  cnn_read_design_order(${design} order)
  foreach(edge IN LISTS edges)
    string(REPLACE ">" ";" ends "${edge}")
    list(GET ends 0 from)
    list(GET ends 1 to)
    foreach(end IN ITEMS ${from} ${to})
      if(NOT end IN_LIST order_TARGETS)
        message(FATAL_ERROR "${end} is a target of the library but not in the table of ${design} "
                            "(\"Folders and their order\"): add its row first")
      endif()
    endforeach()
    if(NOT to IN_LIST order_USES_${from})
      set(allowed "")
      foreach(used IN LISTS order_USES_${from})
        list(APPEND allowed "${order_FOLDER_${used}}/")
      endforeach()
      string(REPLACE ";" ", " allowed "${allowed}")
      message(FATAL_ERROR "${from} links ${to}: ${order_FOLDER_${from}}/ may not use ${order_FOLDER_${to}}/ "
                          "(${design}, \"Folders and their order\", lets it use ${allowed})")
    endif()
  endforeach()
endfunction()

# The "from>to" links among `targets` (LINK_LIBRARIES, generator expressions included).
function(cnn_module_links targets out)
  set(edges "")
  foreach(target IN LISTS targets)
    get_target_property(links ${target} LINK_LIBRARIES)
    if(NOT links)
      continue()
    endif()
    string(REGEX MATCHALL "cnn_[a-z_]+" named "${links}")
    foreach(other IN LISTS named)
      if(other IN_LIST targets AND NOT other STREQUAL target)
        list(APPEND edges "${target}>${other}")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES edges)
  set(${out} ${edges} PARENT_SCOPE)
endfunction()
