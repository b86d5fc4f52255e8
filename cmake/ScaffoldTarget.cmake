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

# LibTorch's headers take 3-12 s to parse in every file that includes them (docs/performance.md,
# "Build time"): they are precompiled once, in scaffold_torch_pch, and every library that links
# LibTorch reuses that header. A file whose flags make the precompiled header invalid for it (GCC
# checks, e.g. a macro such as -fno-math-errno's) parses the headers as before: same result, no
# gain.
option(SCAFFOLD_PCH "Precompile LibTorch's headers once for the libraries that use them" ON)
# A precompiled header that does not fit a file's flags is only a slower compile (CMake adds
# -Winvalid-pch): a warning, never an error, in builds the PCH was not checked against (ROCm's
# __HIP_PLATFORM_AMD__, say).
function(scaffold_pch_not_an_error target)
  if(SCAFFOLD_WERROR)
    target_compile_options(${target} PRIVATE -Wno-error=invalid-pch)
  endif()
endfunction()

# scaffold_torch_pch_target(name [LINKS ...]): the precompiled header target `name`, built with
# LibTorch and LINKS (whose flags a reusing target must share).
function(scaffold_torch_pch_target name)
  if(TARGET ${name})
    return()
  endif()
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
  target_link_libraries(${name} PUBLIC ${TORCH_LIBRARIES} ${ARGN})
  scaffold_target_defaults(${name})
  scaffold_pch_not_an_error(${name})
  # Clang stamps a precompiled header with its headers' times unless told not to; ccache needs
  # it not to (the sloppiness in CMakeLists.txt covers the rest).
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${name} PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endif()
  target_precompile_headers(${name} PRIVATE
    <ATen/ATen.h> <torch/nn/module.h> <torch/optim/optimizer.h> <torch/optim/adam.h>
    <torch/csrc/autograd/custom_function.h>)
endfunction()

# scaffold_use_torch_threads(target): a library whose kernels split work with
# kernels::parallel_for links the OpenMP runtime LibTorch runs on (SCAFFOLD_GOMP_LIBRARY).
function(scaffold_use_torch_threads target)
  target_link_libraries(${target} PRIVATE ${SCAFFOLD_GOMP_LIBRARY})
endfunction()

# The libraries that link LibTorch spend most of each file's compile on the same templates
# (LibTorch's operators, tensors, modules), instantiated again in every file: compiled as one
# translation unit per batch of files they are instantiated once (a unity build; docs/performance.md,
# "Build time"). Names in one file's anonymous namespace must then not repeat in another's of the
# same library; a file that cannot share sets SKIP_UNITY_BUILD_INCLUSION.
option(SCAFFOLD_UNITY "Compile the LibTorch libraries' files in batches (unity build)" ON)
set(SCAFFOLD_UNITY_BATCH 8 CACHE STRING "Files per batch of a unity-built library")

# scaffold_library(name SOURCES ... LINKS ...): one module = one static library under src/<name>.
function(scaffold_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS" ${ARGN})
  add_library(scaffold_${name} STATIC ${ARG_SOURCES})
  add_library(scaffold::${name} ALIAS scaffold_${name})
  set_property(GLOBAL APPEND PROPERTY SCAFFOLD_LIBRARIES scaffold_${name})
  target_include_directories(scaffold_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(scaffold_${name} PUBLIC ${ARG_LINKS})
  scaffold_target_defaults(scaffold_${name})
  if("torch" IN_LIST ARG_LINKS)
    set_property(GLOBAL APPEND PROPERTY SCAFFOLD_TORCH_LIBRARIES scaffold::${name})
  endif()
  if(SCAFFOLD_PCH AND "torch" IN_LIST ARG_LINKS)
    scaffold_torch_pch_target(scaffold_torch_pch)
    target_precompile_headers(scaffold_${name} REUSE_FROM scaffold_torch_pch)
    scaffold_pch_not_an_error(scaffold_${name})
  endif()
  if(SCAFFOLD_UNITY AND "torch" IN_LIST ARG_LINKS)
    set_target_properties(scaffold_${name} PROPERTIES UNITY_BUILD ON
                                                      UNITY_BUILD_BATCH_SIZE ${SCAFFOLD_UNITY_BATCH})
  endif()
endfunction()

# scaffold_torch_pch_if_linked(target): a test or benchmark executable that links LibTorch or
# one of the libraries built with it reuses the precompiled LibTorch header too (its files parse
# LibTorch's headers like the libraries' do). Executables whose files need no LibTorch keep
# plain compiles: loading the header would only cost them.
# scaffold_links_torch(target out): out is TRUE when target links LibTorch or one of scaffold's
# libraries that do (directly, as its LINK_LIBRARIES name them).
function(scaffold_links_torch target out)
  get_property(torch_libraries GLOBAL PROPERTY SCAFFOLD_TORCH_LIBRARIES)
  get_target_property(links ${target} LINK_LIBRARIES)
  foreach(link IN LISTS links)
    if(link IN_LIST torch_libraries OR link IN_LIST TORCH_LIBRARIES)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

function(scaffold_torch_pch_if_linked target)
  if(NOT SCAFFOLD_PCH)
    return()
  endif()
  scaffold_links_torch(${target} links_torch)
  if(links_torch)
    scaffold_torch_pch_target(scaffold_torch_pch)
    target_precompile_headers(${target} REUSE_FROM scaffold_torch_pch)
    scaffold_pch_not_an_error(${target})
  endif()
endfunction()

# Executables get tcmalloc first in their link line so it wins over glibc malloc.
function(scaffold_executable_defaults target)
  scaffold_target_defaults(${target})
  if(SCAFFOLD_TCMALLOC AND NOT SCAFFOLD_SANITIZE)
    target_link_libraries(${target} PRIVATE ${SCAFFOLD_TCMALLOC})
  endif()
endfunction()
