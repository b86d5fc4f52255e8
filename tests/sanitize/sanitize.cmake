# Sanitizer runs of a subset of the suite under ctest, included from tests/CMakeLists.txt. Each
# kind builds this project again in a tree of its own (SCAFFOLD_SANITIZE, see
# cmake/ScaffoldTarget.cmake) but only the test binaries listed here, the torch-free ones whose
# code reads untrusted files or runs threads, then runs them:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer: core (npy, fs, sha256, watchdog),
#         config (the YAML loader), report (train_stats.csv, restart.sh), the run folder and its
#         lock, the dataset plan/cache/manifest, energy (sysfs, sampler thread)   label asan
#   tsan  ThreadSanitizer: core's parallel_for and watchdog, the energy sampler thread  label tsan
# -Werror is off there: GCC 12 reports false maybe-uninitialized warnings under the sanitizers.
# The trees are built at -O1 with line tables only (-g1): the sanitizers' recommended level, and
# about a third less compile time than RelWithDebInfo, whose build alone took 565 s of the 1200 s
# limit on the 2-core machine and timed out in CI beside the container image's build. Each build
# has a high COST, so that ctest starts it first on a fresh clone (no timing history yet), while
# the machine is least loaded; its limit is 2400 s.
# The LibTorch loader's prefetch threads are not in the TSan run: LibTorch itself is not built
# with TSan, and its thread pool then reports races that are not ours.
set(SCAFFOLD_SANITIZE_SUITES ON CACHE BOOL "register the sanitizer runs (labels asan, tsan) with ctest")
if(NOT SCAFFOLD_SANITIZE_SUITES OR SCAFFOLD_SANITIZE)
  return()  # not from inside a sanitizer tree itself
endif()
set(asan_binaries test_core test_config test_report test_run_folder test_dataset test_energy)
set(tsan_binaries test_core test_energy)
foreach(kind asan tsan)
  if(kind STREQUAL "asan")
    set(flags address,undefined)
    set(env "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
  else()
    set(flags thread)
    set(env "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1")
  endif()
  set(tree ${PROJECT_BINARY_DIR}/sanitize-${kind})
  set(targets ${${kind}_binaries})
  list(JOIN targets " " target_words)
  # Without the precompiled LibTorch header: these trees are built once per CI run from ccache,
  # whose objects of them predate it, and a sanitizer's flags would need a header of their own.
  add_test(NAME sanitize.${kind}.build
           COMMAND sh -c "${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR} -B ${tree} -DCMAKE_BUILD_TYPE=Debug \"-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1\" -DSCAFFOLD_SANITIZE=${flags} -DSCAFFOLD_BUILD_BENCH=OFF -DSCAFFOLD_SANITIZE_SUITES=OFF -DSCAFFOLD_WERROR=OFF -DSCAFFOLD_PCH=OFF >/dev/null && ${CMAKE_COMMAND} --build ${tree} -j2 --target ${target_words}")
  set_tests_properties(sanitize.${kind}.build PROPERTIES LABELS ${kind} FIXTURES_SETUP scaffold_${kind}_build
                       TIMEOUT 2400 COST 100000)
  foreach(binary ${targets})
    set(binary_env "${env}")
    # test_run_folder starts MPI: Open MPI's initialisation leaks in plugins it has unloaded by
    # exit (frames LeakSanitizer cannot name, so no suppression can match them). Addresses and
    # undefined behaviour are still checked there; leaks in every other binary.
    if(kind STREQUAL "asan" AND binary STREQUAL "test_run_folder")
      string(REPLACE "detect_leaks=1" "detect_leaks=0" binary_env "${env}")
    endif()
    add_test(NAME sanitize.${kind}.${binary}
             COMMAND ${tree}/tests/unit/${binary} --gtest_brief=1)
    set_tests_properties(sanitize.${kind}.${binary} PROPERTIES LABELS ${kind}
                         FIXTURES_REQUIRED scaffold_${kind}_build TIMEOUT 600
                         ENVIRONMENT "${SCAFFOLD_TEST_ENV};${binary_env}")
  endforeach()
endforeach()
