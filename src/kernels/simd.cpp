// The clone check and the multiply-add peak declared in simd.hpp.
#include "kernels/simd.hpp"

#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "core/timer.hpp"
#include "kernels/parallel.hpp"

namespace scaffold::kernels::simd {
namespace {

// Cloned like the kernels' own hot functions: internal, with no earlier declaration lacking the
// attribute (clang 14 then emits one unresolved function, the first clone, under the plain name).
SCAFFOLD_SIMD_CLONES void multiply_add_clone(const float* a, const float* b, const float* c,
                                             float* out) {
  storev(out, loadv(a).v * loadv(b).v + loadv(c).v);
}

// `chains` independent accumulators, each `iterations` dependent multiply-adds x = x m + a, whose
// fixed point (a / (1 - m) = 1) keeps them finite; their sum goes to `sink` so none is dropped.
template <int kChains>
SCAFFOLD_SIMD_INLINE void multiply_add_chains(int64_t iterations, float* sink) {
  v16 x[kChains];
  v16 m, a;
  for (int i = 0; i < kVec; ++i) {
    m[i] = 0.9999999f;
    a[i] = 1e-7f;
  }
  for (int c = 0; c < kChains; ++c) x[c] = m * static_cast<float>(c) * 0.01f;
  for (int64_t it = 0; it < iterations; ++it)
    for (int c = 0; c < kChains; ++c) x[c] = x[c] * m + a;
  v16 sum = x[0];
  for (int c = 1; c < kChains; ++c) sum = sum + x[c];
  storev(sink, sum);
}

SCAFFOLD_SIMD_CLONES void multiply_add_run(int64_t iterations, bool wide, float* sink) {
  if (wide)
    multiply_add_chains<12>(iterations, sink);
  else
    multiply_add_chains<6>(iterations, sink);
}

}  // namespace

void fused_multiply_add(const float* a, const float* b, const float* c, float* out) {
  multiply_add_clone(a, b, c, out);
}

double fma_peak_gflops(int threads, double seconds) {
  const int saved = at::get_num_threads();
  if (threads > 0) at::set_num_threads(threads);
  const int n = at::get_num_threads();
  const bool wide = wide_registers();
  const int64_t chains = wide ? 12 : 6;
  std::vector<float> sink(static_cast<std::size_t>(kVec * n));  // one v16 per thread
  // One parallel run of `iterations` per thread.
  const auto run = [&](int64_t iterations) {
    parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        multiply_add_run(iterations, wide, sink.data() + kVec * t);
    });
  };
  // Double the run until it takes half of `seconds` (a short first run would be mostly the
  // threads' wake-up, and sizing from its rate made later runs short too), then the best of 5.
  int64_t iterations = int64_t{1} << 14;
  const auto seconds_of = [&](int64_t it) {
    const core::Stopwatch clock;
    run(it);
    return clock.elapsed_s();
  };
  while (seconds_of(iterations) < seconds / 2 && iterations < (int64_t{1} << 40)) iterations *= 2;
  const double best_ms = core::best_time_ms([&] { run(iterations); }, 0, 5);
  const double best = 2.0 * kVec * static_cast<double>(chains * iterations * n) / best_ms / 1e6;
  if (threads > 0) at::set_num_threads(saved);
  return best;
}

}  // namespace scaffold::kernels::simd
