// The kernels' clones (kernels/simd.hpp): the one a CPU with FMA runs fuses the kernels'
// multiply-adds (target_clones' "avx2" clone did not: AVX2 does not imply FMA).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/timer.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
TEST(SimdClones, TheCloneRoundsAMultiplyAddOnceWhereTheCpuHasFma) {
  // a * a = 1 + 2^-11 + 2^-24 exactly: half an ulp above 1 + 2^-11, so rounding the product first
  // (ties to even) gives 1 + 2^-11 and the sum 0; fused, the sum is the exact 2^-24.
  const float a = 1.0f + std::ldexp(1.0f, -12), c = -(1.0f + std::ldexp(1.0f, -11));
  float as[16], cs[16], out[16];
  for (int i = 0; i < 16; ++i) {
    as[i] = a;
    cs[i] = c;
  }
  simd::fused_multiply_add(as, as, cs, out);
  __builtin_cpu_init();
  const float expected = __builtin_cpu_supports("fma") ? std::ldexp(1.0f, -24) : 0.0f;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], expected) << "element " << i;
}
#endif

// The peak is an upper bound for any float32 product: LibTorch's matrix product (OpenBLAS's or
// oneDNN's kernels, typically 80-95 % of it) must not beat it, or the peak was undercounted (a
// lost factor of 2, spilled chains). On one thread, alternating, the best of each kept, both timed
// in windows of about a millisecond: with ctest running other tests beside this one, a longer
// window is more often shared with another process than a short one, and the best of many short
// windows finds the core alone for either. The 25 % margin is for what noise remains. And no core
// does more than 2 AVX-512 multiply-adds a cycle at 6 GHz (384 GFLOP/s): a gross overcount fails.
TEST(FmaPeak, NoMatrixProductBeatsItAndItIsNoMoreThanACoreCanDo) {
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  const int64_t n = 384;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  double peak = 0, mm_ms = std::numeric_limits<double>::infinity();
  for (int round = 0; round < 5; ++round) {
    peak = std::max(peak, simd::fma_peak_gflops(1, 0.002));
    mm_ms = std::min(mm_ms, core::best_time_ms([&] { const at::Tensor c = at::mm(a, b); }, 0, 5));
  }
  const double mm = 2.0 * static_cast<double>(n * n * n) / mm_ms / 1e6;
  at::set_num_threads(saved);
  EXPECT_GT(peak, 0.0);
  EXPECT_LE(mm, 1.25 * peak) << "at::mm " << mm << " GFLOP/s, peak " << peak;
  EXPECT_LE(peak, 384.0);
}

}  // namespace
}  // namespace scaffold::kernels
