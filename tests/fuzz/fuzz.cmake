# Registers the fuzz targets with ctest (label `fuzz`), included from tests/CMakeLists.txt: one
# test builds tests/fuzz with clang (a separate build tree: libFuzzer needs clang, the main tree
# is GCC), then each target runs for SCAFFOLD_FUZZ_SECONDS on a corpus seeded from
# tests/fuzz/corpus/<target>. New inputs that find coverage stay in the build tree's corpus, not
# the repository. A crash fails the test and leaves crash-<sha1> in the build tree: add it to the
# target's corpus folder and as a regression test of the reader.
find_program(SCAFFOLD_FUZZ_CXX NAMES clang++-14 clang++)
# 10 s a target keeps the whole test command within its time on 2 cores; a longer session is
# -DSCAFFOLD_FUZZ_SECONDS=600 (or the command in tests/fuzz/CMakeLists.txt).
set(SCAFFOLD_FUZZ_SECONDS 10 CACHE STRING "seconds each fuzz target runs under ctest")
if(NOT SCAFFOLD_FUZZ_CXX)
  message(STATUS "No clang++: the fuzz targets are not registered")
  return()
endif()
set(fuzz_src ${PROJECT_SOURCE_DIR}/tests/fuzz)
set(fuzz_bin ${PROJECT_BINARY_DIR}/fuzz)
set(fuzz_launcher "")
if(CCACHE_PROGRAM)
  set(fuzz_launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE_PROGRAM})
endif()
add_test(NAME fuzz.build
         COMMAND sh -c "${CMAKE_COMMAND} -S ${fuzz_src} -B ${fuzz_bin} -DCMAKE_CXX_COMPILER=${SCAFFOLD_FUZZ_CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo ${fuzz_launcher} >/dev/null && ${CMAKE_COMMAND} --build ${fuzz_bin} -j2")
set_tests_properties(fuzz.build PROPERTIES LABELS fuzz FIXTURES_SETUP scaffold_fuzz_build TIMEOUT 900)
foreach(name config npy train_stats step_csv sysfs checkpoint megatron_index memory_estimate)
  add_test(NAME fuzz.${name}
           COMMAND sh -c "mkdir -p ${fuzz_bin}/corpus/${name} && cd ${fuzz_bin} && ./fuzz_${name} -max_total_time=${SCAFFOLD_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 corpus/${name} ${fuzz_src}/corpus/${name}")
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz FIXTURES_REQUIRED scaffold_fuzz_build
                       TIMEOUT 300)
endforeach()
