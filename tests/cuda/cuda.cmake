# The CUDA-only sources (the NCCL backend, the CUDA device-memory report, the CUDA-event step clock
# with its copy-stream feeder, the NVTX ranges) are part of the executable only where LibTorch has
# CUDA. On a CPU machine they are compiled here instead, as real object files with the project's
# warnings and -Werror, against the CUDA toolkit's and NCCL's headers (scripts/cuda-headers fetches
# them from Debian's archive) and LibTorch's c10/cuda and ATen/cuda headers, so that a compile
# error in the GPU path fails the build on every machine that has the headers, CI included.
# Nothing is linked: the CPU LibTorch has no libc10_cuda, and Debian 12 has no CUDA LibTorch.
#
#   SCAFFOLD_CUDA_CHECK    AUTO (default: compile when the headers are found), REQUIRED (a missing
#                          header is a configure error: scripts/test), OFF
#   SCAFFOLD_CUDA_HEADERS  the headers' folder (default: $SCAFFOLD_CUDA_HEADERS, then
#                          scripts/cuda-headers' cache folder, then /usr/local/cuda/include)
#   SCAFFOLD_ROCM_HEADERS  HIP's and RCCL's (default: $SCAFFOLD_ROCM_HEADERS, then
#                          scripts/cuda-headers --rocm's cache folder, then /opt/rocm/include)
# The ROCm side is compiled the same way: the RCCL backend and a ROCm LibTorch's device choice.
#
# Test build.cuda_check_catches_a_planted_error builds a copy of the NCCL backend with two
# arguments of one call swapped, and passes only when the compiler names that line: the check
# sees real declarations, not stand-ins.
set(SCAFFOLD_CUDA_CHECK AUTO CACHE STRING "Compile the CUDA-only sources on a CPU build: AUTO, REQUIRED or OFF")
set_property(CACHE SCAFFOLD_CUDA_CHECK PROPERTY STRINGS AUTO REQUIRED OFF)
set(SCAFFOLD_CUDA_HEADERS "" CACHE PATH "Folder with cuda_runtime_api.h, nccl.h and nvtx3/ (scripts/cuda-headers)")
set(SCAFFOLD_ROCM_HEADERS "" CACHE PATH "Folder with hip/ and rccl/ (scripts/cuda-headers --rocm)")

set(scaffold_cuda_only_sources
    ${PROJECT_SOURCE_DIR}/src/dist/nccl_tensor_comm.cpp
    ${PROJECT_SOURCE_DIR}/src/train/device_memory_cuda.cpp
    ${PROJECT_SOURCE_DIR}/src/train/device_stream_cuda.cpp
    ${PROJECT_SOURCE_DIR}/src/profile/nvtx_cuda.cpp)

# Every source that includes a CUDA, NCCL or NVTX header is in the list above: a new one cannot
# slip past the check.
file(GLOB_RECURSE scaffold_all_sources ${PROJECT_SOURCE_DIR}/src/*.cpp)
foreach(source ${scaffold_all_sources})
  file(STRINGS ${source} cuda_includes REGEX "^#include <(c10/cuda/|ATen/cuda/|cuda[a-z_]*\\.h|nccl\\.h|nvtx3/|hip/|rccl/)")
  if(cuda_includes AND NOT source IN_LIST scaffold_cuda_only_sources)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${source})
    message(FATAL_ERROR "${rel} includes a CUDA header (${cuda_includes}) but is not in the CUDA-only "
                        "list of tests/cuda/cuda.cmake: add it there so CPU builds compile it")
  endif()
endforeach()

if(TORCH_CUDA_LIBRARIES OR SCAFFOLD_CUDA_CHECK STREQUAL "OFF")
  return()  # a CUDA build compiles these sources into the executable itself
endif()

# The folders searched for one kind's headers (cuda or rocm), in order: SCAFFOLD_<KIND>_HEADERS,
# the environment variable of that name, scripts/cuda-headers' cache folder, then `fallback`.
function(scaffold_gpu_header_hints out kind fallback)
  string(TOUPPER ${kind} upper)
  set(hints ${SCAFFOLD_${upper}_HEADERS} $ENV{SCAFFOLD_${upper}_HEADERS})
  if(DEFINED ENV{XDG_CACHE_HOME})
    list(APPEND hints $ENV{XDG_CACHE_HOME}/scaffold/${kind}-headers)
  endif()
  list(APPEND hints $ENV{HOME}/.cache/scaffold/${kind}-headers ${fallback})
  set(${out} ${hints} PARENT_SCOPE)
endfunction()

# Headers not found: a configure error under SCAFFOLD_CUDA_CHECK=REQUIRED, else a status line.
function(scaffold_gpu_headers_missing why)
  if(SCAFFOLD_CUDA_CHECK STREQUAL "REQUIRED")
    message(FATAL_ERROR "SCAFFOLD_CUDA_CHECK=REQUIRED but ${why}")
  endif()
  message(STATUS "${why}")
endfunction()

# scaffold_gpu_object_library(name SOURCES ... DEFINITIONS ... INCLUDES ...)
function(scaffold_gpu_object_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEFINITIONS;INCLUDES" ${ARGN})
  add_library(${name} OBJECT ${ARG_SOURCES})
  target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_include_directories(${name} SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS} ${ARG_INCLUDES})
  target_link_libraries(${name} PRIVATE fmt::fmt)
  scaffold_target_defaults(${name})
  target_compile_options(${name} PRIVATE -Werror)
endfunction()

# The ROCm side: the RCCL twin of the NCCL backend (the same file under SCAFFOLD_WITH_RCCL) and
# the device choice of a ROCm LibTorch, against HIP's and RCCL's headers (scripts/cuda-headers
# --rocm). A ROCm LibTorch's own build compiles them into the executable.
if(NOT SCAFFOLD_TORCH_ROCM)
  scaffold_gpu_header_hints(rocm_hints rocm /opt/rocm/include)
  find_path(SCAFFOLD_ROCM_CHECK_HIP_INCLUDE hip/hip_runtime_api.h PATHS ${rocm_hints} NO_DEFAULT_PATH)
  find_path(SCAFFOLD_ROCM_CHECK_RCCL_INCLUDE rccl/rccl.h PATHS ${rocm_hints} NO_DEFAULT_PATH)
  if(SCAFFOLD_ROCM_CHECK_HIP_INCLUDE AND SCAFFOLD_ROCM_CHECK_RCCL_INCLUDE)
    message(STATUS "ROCm-only sources compiled against ${SCAFFOLD_ROCM_CHECK_HIP_INCLUDE}")
    scaffold_gpu_object_library(scaffold_rocm_compile_check
      SOURCES ${PROJECT_SOURCE_DIR}/src/dist/nccl_tensor_comm.cpp ${PROJECT_SOURCE_DIR}/src/train/device.cpp
      DEFINITIONS SCAFFOLD_WITH_NCCL SCAFFOLD_WITH_RCCL SCAFFOLD_TORCH_ROCM __HIP_PLATFORM_AMD__
      INCLUDES ${SCAFFOLD_ROCM_CHECK_HIP_INCLUDE} ${SCAFFOLD_ROCM_CHECK_RCCL_INCLUDE})
  else()
    string(CONCAT why "the ROCm-only sources are not compiled: no HIP or RCCL headers (looked in "
                  "${rocm_hints}; scripts/cuda-headers --rocm fetches them)")
    scaffold_gpu_headers_missing("${why}")
  endif()
endif()

scaffold_gpu_header_hints(hints cuda /usr/local/cuda/include)
find_path(SCAFFOLD_CUDA_CHECK_CUDART_INCLUDE cuda_runtime_api.h PATHS ${hints} NO_DEFAULT_PATH)
find_path(SCAFFOLD_CUDA_CHECK_NCCL_INCLUDE nccl.h PATHS ${hints} ENV NCCL_HOME PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(SCAFFOLD_CUDA_CHECK_NVTX3_INCLUDE nvtx3/nvToolsExt.h PATHS ${hints} NO_DEFAULT_PATH)
find_path(SCAFFOLD_CUDA_CHECK_C10_CUDA c10/cuda/CUDAStream.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
set(missing)
foreach(var CUDART NCCL NVTX3)
  if(NOT SCAFFOLD_CUDA_CHECK_${var}_INCLUDE)
    list(APPEND missing ${var})
  endif()
endforeach()
if(NOT SCAFFOLD_CUDA_CHECK_C10_CUDA)
  list(APPEND missing "LibTorch's c10/cuda")
endif()
if(missing)
  string(CONCAT why "the CUDA-only sources are not compiled: no headers for ${missing} (looked in "
                "${hints}; scripts/cuda-headers fetches them)")
  scaffold_gpu_headers_missing("${why}")
  return()
endif()
message(STATUS "CUDA-only sources compiled against ${SCAFFOLD_CUDA_CHECK_CUDART_INCLUDE}")

# c10/cuda/impl/cuda_cmake_macros.h is generated by LibTorch's own CUDA build; the CPU package
# lacks it, and an empty one is what a shared-library build of c10_cuda would define nothing in.
set(stub ${CMAKE_CURRENT_BINARY_DIR}/cuda_check_stub)
file(WRITE ${stub}/c10/cuda/impl/cuda_cmake_macros.h "#pragma once\n")

function(scaffold_cuda_object_library name)
  scaffold_gpu_object_library(${name} SOURCES ${ARGN} DEFINITIONS SCAFFOLD_WITH_NCCL
    INCLUDES ${stub} ${SCAFFOLD_CUDA_CHECK_CUDART_INCLUDE} ${SCAFFOLD_CUDA_CHECK_NCCL_INCLUDE}
             ${SCAFFOLD_CUDA_CHECK_NVTX3_INCLUDE})
endfunction()

# Part of `all`: a compile error here fails scripts/build.
scaffold_cuda_object_library(scaffold_cuda_compile_check ${scaffold_cuda_only_sources})

# The planted error: ncclSend's peer and data type swapped (an int where ncclDataType_t belongs).
file(READ ${PROJECT_SOURCE_DIR}/src/dist/nccl_tensor_comm.cpp nccl_source)
set(good_call "ncclSend(t.data_ptr(), bytes(t), ncclUint8, peer,")
string(FIND "${nccl_source}" "${good_call}" at)
if(at EQUAL -1)
  add_test(NAME build.cuda_check_catches_a_planted_error
           COMMAND ${CMAKE_COMMAND} -E echo "the call '${good_call}' is no longer in src/dist/nccl_tensor_comm.cpp: update tests/cuda/cuda.cmake")
  set_tests_properties(build.cuda_check_catches_a_planted_error PROPERTIES WILL_FAIL TRUE LABELS cuda)
else()
  string(REPLACE "${good_call}" "ncclSend(t.data_ptr(), bytes(t), peer, ncclUint8," planted "${nccl_source}")
  set(planted_file ${CMAKE_CURRENT_BINARY_DIR}/planted/nccl_tensor_comm_planted.cpp)
  file(WRITE ${planted_file} "${planted}")
  scaffold_cuda_object_library(scaffold_cuda_planted_error ${planted_file})
  set_target_properties(scaffold_cuda_planted_error PROPERTIES EXCLUDE_FROM_ALL TRUE)
  add_test(NAME build.cuda_check_catches_a_planted_error
           COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target scaffold_cuda_planted_error)
  # Passes only on the compiler's error at the planted call, whatever the exit code: GCC's
  # "invalid conversion from 'int' to 'ncclDataType_t'", clang's "no matching function for call
  # to 'ncclSend'" (its note names the type).
  set_tests_properties(build.cuda_check_catches_a_planted_error PROPERTIES
                       PASS_REGULAR_EXPRESSION "nccl_tensor_comm_planted\\.cpp:[0-9]+:[0-9]+: error: ([^\n]*ncclDataType_t|no matching function for call to 'ncclSend')"
                       LABELS cuda TIMEOUT 300)
endif()
