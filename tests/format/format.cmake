# The clang-format check (ctest label format), included from tests/CMakeLists.txt: every file in
# tests/format/clean_files.txt must be as .clang-format writes it.
find_program(SCAFFOLD_CLANG_FORMAT NAMES clang-format-14 clang-format)
if(NOT SCAFFOLD_CLANG_FORMAT)
  message(STATUS "No clang-format: the format check is not registered")
  return()
endif()
add_test(NAME format.clang_format
         COMMAND sh -c "grep -v '^#' tests/format/clean_files.txt | xargs ${SCAFFOLD_CLANG_FORMAT} --dry-run --Werror"
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(format.clang_format PROPERTIES LABELS format TIMEOUT 300)
