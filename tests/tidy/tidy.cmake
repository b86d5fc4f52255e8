# The clang-tidy check (ctest label tidy), included from tests/CMakeLists.txt: scripts/tidy
# --fast --torch-free over this build's compile commands (the bugprone and performance checks on
# the sources compiled without LibTorch), failing on any warning. The static analyzer's checks and
# the files that include LibTorch take too long for every run: scripts/tidy (no options) checks
# everything on request.
find_program(SCAFFOLD_CLANG_TIDY NAMES clang-tidy-14 clang-tidy)
if(NOT SCAFFOLD_CLANG_TIDY)
  message(STATUS "No clang-tidy: the tidy check is not registered")
  return()
endif()
add_test(NAME tidy.clang_tidy
         COMMAND ${CMAKE_COMMAND} -E env BUILD_DIR=${CMAKE_BINARY_DIR} JOBS=2
                 CLANG_TIDY=${SCAFFOLD_CLANG_TIDY} ${PROJECT_SOURCE_DIR}/scripts/tidy --fast --torch-free
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(tidy.clang_tidy PROPERTIES LABELS tidy TIMEOUT 600)
# scripts/tidy-run's cache of clean files (skipped until their preprocessed source, flags or the
# checks change) on a two-file project of its own.
add_test(NAME tidy.cache
         COMMAND ${PROJECT_SOURCE_DIR}/tests/tidy/test_tidy_cache.sh ${SCAFFOLD_CLANG_TIDY}
                 ${CMAKE_CXX_COMPILER})
set_tests_properties(tidy.cache PROPERTIES LABELS tidy TIMEOUT 120 PASS_REGULAR_EXPRESSION
                     "checked, skipped and re-checked as expected")
