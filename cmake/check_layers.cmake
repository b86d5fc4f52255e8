# Script mode: cmake -DSCAFFOLD_EDGES="from|folder|to|folder;..." -P cmake/check_layers.cmake
# runs scaffold_check_edges (ScaffoldLayers.cmake) on the given edges: exit 0, or the error.
include(${CMAKE_CURRENT_LIST_DIR}/ScaffoldLayers.cmake)
scaffold_check_edges("${SCAFFOLD_EDGES}")
message(STATUS "layers: ${SCAFFOLD_EDGES}: no back arrow")
