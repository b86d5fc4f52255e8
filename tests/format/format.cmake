# The clang-format check (ctest label format), included from tests/CMakeLists.txt: every C++ file
# of src/, tests/ and bench/ must be as .clang-format writes it (clang-format-14 --dry-run
# --Werror). Format a file with clang-format-14 -i FILE. The list is globbed at configure time
# and again whenever a folder's files change (CONFIGURE_DEPENDS), so a new file is checked too.
find_program(SCAFFOLD_CLANG_FORMAT NAMES clang-format-14 clang-format)
if(NOT SCAFFOLD_CLANG_FORMAT)
  message(STATUS "No clang-format: the format check is not registered")
  return()
endif()
set(format_globs)
foreach(dir src tests bench)
  foreach(ext cpp hpp h)
    list(APPEND format_globs ${PROJECT_SOURCE_DIR}/${dir}/*.${ext})
  endforeach()
endforeach()
file(GLOB_RECURSE format_files CONFIGURE_DEPENDS ${format_globs})
add_test(NAME format.clang_format
         COMMAND ${SCAFFOLD_CLANG_FORMAT} --dry-run --Werror ${format_files}
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(format.clang_format PROPERTIES LABELS format TIMEOUT 300)
