# Third-party libraries: the package's own CMake config when it is installed (Debian's -dev
# packages), else a plain search for its header and library under CMAKE_PREFIX_PATH, wrapped in
# an imported target of the same name, so the rest of the build never knows the difference.

function(scaffold_fallback_target target header)
  cmake_parse_arguments(ARG "" "" "LIBRARY" ${ARGN})
  find_path(${target}_INCLUDE ${header})
  if(NOT ${target}_INCLUDE)
    message(FATAL_ERROR "${target}: neither its CMake package nor ${header} was found; install its "
                        "Debian -dev package or stage it (scripts/gpu-benchmark --stage)")
  endif()
  if(ARG_LIBRARY)
    find_library(${target}_LIB NAMES ${ARG_LIBRARY})
    if(NOT ${target}_LIB)
      message(FATAL_ERROR "${target}: header found but not the library ${ARG_LIBRARY}")
    endif()
    add_library(${target} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION ${${target}_LIB})
  else()
    add_library(${target} INTERFACE IMPORTED GLOBAL)
  endif()
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${${target}_INCLUDE})
endfunction()

find_package(yaml-cpp QUIET)
if(NOT TARGET yaml-cpp)
  scaffold_fallback_target(yaml-cpp yaml-cpp/yaml.h LIBRARY yaml-cpp)
endif()
# libyaml (Debian libyaml-dev): the strict syntax pass before yaml-cpp reads a config
# (config/yaml_strict.cpp). No CMake package; header and library found directly.
scaffold_fallback_target(scaffold_libyaml yaml.h LIBRARY yaml)
find_package(CLI11 QUIET)
if(NOT TARGET CLI11::CLI11)
  scaffold_fallback_target(scaffold_cli11 CLI/CLI.hpp)
  add_library(CLI11::CLI11 ALIAS scaffold_cli11)
endif()
find_package(nlohmann_json 3 QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  scaffold_fallback_target(scaffold_nlohmann_json nlohmann/json.hpp)
  add_library(nlohmann_json::nlohmann_json ALIAS scaffold_nlohmann_json)
endif()
find_package(fmt QUIET)
if(NOT TARGET fmt::fmt)
  scaffold_fallback_target(scaffold_fmt fmt/format.h LIBRARY fmt)
  add_library(fmt::fmt ALIAS scaffold_fmt)
endif()
# OpenSSL's libcrypto for SHA-256 (core/sha256.cpp). CMake's FindOpenSSL already searches
# CMAKE_PREFIX_PATH, so a staged copy (scripts/gpu-benchmark --stage) needs no fallback here.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# libhdf5's C library (Debian libhdf5-dev) for jpwr's HDF5 files; optional (see src/CMakeLists.txt).
# Through pkg-config: CMake's FindHDF5 needs the C language, which this project does not enable.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(SCAFFOLD_HDF5 QUIET IMPORTED_TARGET GLOBAL hdf5)
endif()
if(TARGET PkgConfig::SCAFFOLD_HDF5)
  add_library(HDF5::HDF5 ALIAS PkgConfig::SCAFFOLD_HDF5)
  message(STATUS "HDF5 ${SCAFFOLD_HDF5_VERSION}: scaffold power writes jpwr's h5 files")
else()
  message(STATUS "HDF5 not found (libhdf5-dev): scaffold power --df-filetype h5 will be refused")
endif()
