// Thread count policy and a minimal parallel-for over index ranges (std::thread, no pool):
// enough for coarse work items (one fractal cloud, one volume) where spawn cost is negligible.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace scaffold::core {

// The most compute threads per process that --threads or OMP_NUM_THREADS may ask for. The
// largest nodes have a few hundred hardware threads; beyond that more threads only add
// switching, and a typo like 100000 would start 100000 OS threads (each with its own stack) in
// OpenMP and in parallel_for and hang the run instead of failing.
inline constexpr int kMaxThreads = 1024;

// OMP_NUM_THREADS when set to an integer in [1, kMaxThreads], else the CPUs this process may
// run on (see omp_num_threads_warning for a value that is set but not used).
int default_thread_count();

// Why OMP_NUM_THREADS is not used, naming its value ("" when it is unset or used).
std::string omp_num_threads_warning();

// Calls body(worker, index) for every index in [0, count) on up to `threads` threads. Indices are
// handed out dynamically; body must not depend on which worker runs an index. The first exception
// thrown by any body is rethrown in the caller after all threads have stopped.
void parallel_for(std::size_t count, int threads,
                  const std::function<void(int worker, std::size_t index)>& body);

}  // namespace scaffold::core
