// Thread count policy and a minimal parallel-for over index ranges (std::thread, no pool):
// enough for coarse work items (one fractal cloud, one volume) where spawn cost is negligible.
#pragma once

#include <cstddef>
#include <functional>

namespace scaffold::core {

// OMP_NUM_THREADS when set to a positive integer, else the CPUs this process may run on.
int default_thread_count();

// Calls body(worker, index) for every index in [0, count) on up to `threads` threads. Indices are
// handed out dynamically; body must not depend on which worker runs an index. The first exception
// thrown by any body is rethrown in the caller after all threads have stopped.
void parallel_for(std::size_t count, int threads,
                  const std::function<void(int worker, std::size_t index)>& body);

}  // namespace scaffold::core
