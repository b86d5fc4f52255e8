# Dependencies point one way (docs/architecture.md, "Dependency direction"): a library under
# src/<folder>/ may link libraries of its own layer or a lower one, never a higher one. Layers,
# lowest first:
#   0 core
#   1 config data nn kernels dist report energy profile   (the generic layers)
#   2 train
#   3 suite
#   4 workloads
#   5 cli
# scaffold_check_layers() runs at the end of src/CMakeLists.txt over every scaffold_library
# target and stops the configure step naming each back arrow; check_layers.cmake runs the same
# check in script mode on a given edge list (the tests use it).

set(SCAFFOLD_LAYER_core 0)
foreach(folder config data nn kernels dist report energy profile)
  set(SCAFFOLD_LAYER_${folder} 1)
endforeach()
set(SCAFFOLD_LAYER_train 2)
set(SCAFFOLD_LAYER_suite 3)
set(SCAFFOLD_LAYER_workloads 4)
set(SCAFFOLD_LAYER_cli 5)

# The layer of a folder name; FATAL_ERROR for a folder with none (a new top-level folder must be
# placed in a layer here).
function(scaffold_layer_of folder out)
  if(NOT DEFINED SCAFFOLD_LAYER_${folder})
    message(FATAL_ERROR "src/${folder}/ has no layer in cmake/ScaffoldLayers.cmake: add it there")
  endif()
  set(${out} ${SCAFFOLD_LAYER_${folder}} PARENT_SCOPE)
endfunction()

# `edges`: items "from_target|from_folder|to_target|to_folder". Every edge to a higher layer is
# listed in one FATAL_ERROR.
function(scaffold_check_edges edges)
  set(bad "")
  foreach(edge IN LISTS edges)
    string(REPLACE "|" ";" parts "${edge}")
    list(GET parts 0 from)
    list(GET parts 1 from_folder)
    list(GET parts 2 to)
    list(GET parts 3 to_folder)
    scaffold_layer_of(${from_folder} from_layer)
    scaffold_layer_of(${to_folder} to_layer)
    if(to_layer GREATER from_layer)
      string(APPEND bad "\n  ${from} (src/${from_folder}/, layer ${from_layer}) links ${to} "
                        "(src/${to_folder}/, layer ${to_layer})")
    endif()
  endforeach()
  if(bad)
    message(FATAL_ERROR "back arrow(s) between scaffold's layers (cmake/ScaffoldLayers.cmake):${bad}\n"
                        "A library may link its own layer or lower ones only: move the code down, "
                        "or pass what it needs in from above.")
  endif()
endfunction()

# The folder under src/ of a scaffold_library target: that of its first source.
function(scaffold_target_folder target out)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  list(GET sources 0 first)
  if(NOT IS_ABSOLUTE "${first}")
    set(first "${source_dir}/${first}")
  endif()
  file(RELATIVE_PATH first "${PROJECT_SOURCE_DIR}/src" "${first}")
  string(REGEX MATCH "^[^/]+" folder "${first}")
  set(${out} ${folder} PARENT_SCOPE)
endfunction()

function(scaffold_check_layers)
  get_property(libraries GLOBAL PROPERTY SCAFFOLD_LIBRARIES)
  set(edges "")
  foreach(lib IN LISTS libraries)
    scaffold_target_folder(${lib} from_folder)
    get_target_property(links ${lib} LINK_LIBRARIES)
    foreach(link IN LISTS links)
      if(link MATCHES "^scaffold::(.+)$")
        set(to scaffold_${CMAKE_MATCH_1})
      elseif(link MATCHES "^scaffold_")
        set(to ${link})
      else()
        continue()
      endif()
      if(to IN_LIST libraries AND NOT to STREQUAL lib)
        scaffold_target_folder(${to} to_folder)
        list(APPEND edges "${lib}|${from_folder}|${to}|${to_folder}")
      endif()
    endforeach()
  endforeach()
  scaffold_check_edges("${edges}")
endfunction()
