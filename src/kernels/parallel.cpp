#include "kernels/parallel.hpp"

#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <exception>

#if AT_PARALLEL_OPENMP
// libgomp's C entry points (stable since GCC 4.9): the region call GCC emits for
// `#pragma omp parallel` (num_threads 0: the runtime's default, which at::set_num_threads sets)
// and the two queries <omp.h> declares. Declared here so that no compiler's OpenMP is needed.
extern "C" {
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
int omp_get_num_threads() noexcept;
int omp_get_thread_num() noexcept;
}
#endif

namespace scaffold::kernels {

#if AT_PARALLEL_OPENMP
namespace {

struct Region {
  Region(int64_t b, int64_t e, int64_t g, c10::function_ref<void(int64_t, int64_t)> fn)
      : begin(b), end(e), grain(g), f(fn) {}
  int64_t begin, end, grain;
  c10::function_ref<void(int64_t, int64_t)> f;
  std::atomic_flag failed = ATOMIC_FLAG_INIT;
  std::exception_ptr error;
};

// Every thread of the region: its chunk, as ATen's OpenMP invoke_parallel splits the range.
void run_chunk(void* data) {
  auto& r = *static_cast<Region*>(data);
  int64_t threads = omp_get_num_threads();
  if (r.grain > 0) threads = std::min(threads, (r.end - r.begin + r.grain - 1) / r.grain);
  const int64_t tid = omp_get_thread_num();
  const int64_t chunk = (r.end - r.begin + threads - 1) / threads;
  const int64_t first = r.begin + tid * chunk;
  if (first >= r.end) return;
  try {
    at::internal::ThreadIdGuard guard(static_cast<int>(tid));
    r.f(first, std::min(r.end, first + chunk));
  } catch (...) {
    if (!r.failed.test_and_set()) r.error = std::current_exception();
  }
}

}  // namespace
#endif

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  c10::function_ref<void(int64_t, int64_t)> f) {
  if (begin >= end) return;
#if AT_PARALLEL_OPENMP
  at::internal::lazy_init_num_threads();
  const int64_t n = end - begin;
  if (n <= grain || n == 1 || at::in_parallel_region() || at::get_num_threads() == 1) {
    at::internal::ThreadIdGuard guard(0);
    f(begin, end);
    return;
  }
  Region r(begin, end, grain, f);
  GOMP_parallel(&run_chunk, &r, 0, 0);
  if (r.error) std::rethrow_exception(r.error);
#else
  // A LibTorch on its own thread pool (not OpenMP): its parallel_for is compiled code already.
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { f(b, e); });
#endif
}

}  // namespace scaffold::kernels
