// Keyed random streams: reproducible, distinct per key, uniform doubles in [0, 1).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/rng.hpp"

namespace scaffold::core {
namespace {

TEST(Rng, SameKeySameStreamDifferentKeyDifferentStream) {
  Xoshiro256p a(stream_key({42, 1, 7})), b(stream_key({42, 1, 7})), c(stream_key({42, 1, 8}));
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const uint64_t va = a.next();
    EXPECT_EQ(va, b.next());
    differ += va != c.next();
  }
  EXPECT_GT(differ, 95);
  // Key order matters: (a, b) and (b, a) are different streams.
  EXPECT_NE(stream_key({1, 2}), stream_key({2, 1}));
  EXPECT_NE(stream_key({0}), stream_key({0, 0}));
}

TEST(Rng, UniformDoublesCoverUnitIntervalWithRightMoments) {
  Xoshiro256p rng(stream_key({3}));
  const int n = 200000;
  double sum = 0, sq = 0, lo = 1, hi = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform01();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);  // sd of the mean ~ 0.00065
  EXPECT_NEAR(var, 1.0 / 12.0, 0.002);
  EXPECT_LT(lo, 1e-3);
  EXPECT_GT(hi, 1 - 1e-3);
  EXPECT_EQ(bits_to_unit_double(0), 0.0);
  EXPECT_LT(bits_to_unit_double(~uint64_t{0}), 1.0);
}

}  // namespace
}  // namespace scaffold::core

namespace scaffold::core {
namespace {

TEST(Rng, BelowIsInRangeAndUniform) {
  Xoshiro256p rng(stream_key({11}));
  EXPECT_EQ(rng.below(1), 0u);
  for (uint64_t bound : {2ull, 3ull, 7ull, 1000ull, (1ull << 63) + 5}) {
    for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.below(bound), bound);
  }
  // Chi-square over 3 buckets: 30000 draws, expected 10000 each; 13.8 is the 0.1% critical value.
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 30000; ++i) counts[rng.below(3)]++;
  double chi2 = 0;
  for (int c : counts) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 13.8) << counts[0] << " " << counts[1] << " " << counts[2];
}

}  // namespace
}  // namespace scaffold::core
