# Shared settings for scaffold's own targets: warnings, sanitizers, the allocator.

function(scaffold_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(SCAFFOLD_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(SCAFFOLD_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${SCAFFOLD_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${SCAFFOLD_SANITIZE})
  endif()
endfunction()

# scaffold_library(name SOURCES ... LINKS ...): one module = one static library under src/<name>.
function(scaffold_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS" ${ARGN})
  add_library(scaffold_${name} STATIC ${ARG_SOURCES})
  add_library(scaffold::${name} ALIAS scaffold_${name})
  set_property(GLOBAL APPEND PROPERTY SCAFFOLD_LIBRARIES scaffold_${name})
  target_include_directories(scaffold_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(scaffold_${name} PUBLIC ${ARG_LINKS})
  scaffold_target_defaults(scaffold_${name})
endfunction()

# Executables get tcmalloc first in their link line so it wins over glibc malloc.
function(scaffold_executable_defaults target)
  scaffold_target_defaults(${target})
  if(SCAFFOLD_TCMALLOC AND NOT SCAFFOLD_SANITIZE)
    target_link_libraries(${target} PRIVATE ${SCAFFOLD_TCMALLOC})
  endif()
endfunction()
