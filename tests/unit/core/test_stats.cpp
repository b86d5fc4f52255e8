// median() and spread() against values worked out by hand (in the comments): odd and even counts,
// unsorted input, the empty and one-value cases, and a sample standard deviation of values near
// 1e9 that a one-pass sum of squares would lose. Tolerances are stated where a value is irrational.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/stats.hpp"

namespace scaffold::core {
namespace {

TEST(Median, OddCountIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(median({7.0}), 7.0);
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);             // sorted 1 2 3
  EXPECT_DOUBLE_EQ(median({5.0, -1.0, 4.0, 4.0, 0.5}), 4.0);  // sorted -1 0.5 4 4 5
}

TEST(Median, EvenCountIsTheAverageOfTheTwoMiddleValues) {
  // numpy.median([4, 1, 3, 2]) = 2.5; the upper middle would give 3, the lower 2.
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(median({1.0, 2.0}), 1.5);
  EXPECT_DOUBLE_EQ(median({0.1, 0.3, 0.2, 10.0, 0.4, 0.5}), 0.35);  // (0.3 + 0.4) / 2
}

TEST(Median, EmptyIsZeroAndTheInputIsNotReordered) {
  EXPECT_DOUBLE_EQ(median({}), 0.0);
  const std::vector<double> values{3.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(median(values), 2.0);
  EXPECT_EQ(values, (std::vector<double>{3.0, 1.0, 2.0}));
}

TEST(Spread, TextbookExample) {
  // 2 4 4 4 5 5 7 9: n 8, mean 40 / 8 = 5, median (4 + 5) / 2 = 4.5, squared deviations
  // 9+1+1+1+0+0+4+16 = 32, sample variance 32 / 7, stddev sqrt(32 / 7) = 2.1380899352993950.
  const Spread s = spread({9.0, 2.0, 5.0, 4.0, 4.0, 7.0, 4.0, 5.0});
  constexpr double kTolerance = 1e-15;
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.stddev, 2.1380899352993950, kTolerance);
}

TEST(Spread, OddCountUsesTheMiddleValue) {
  // 1 2 3 4 10: mean 4, median 3, squared deviations 9+4+1+0+36 = 50, stddev sqrt(50 / 4).
  const Spread s = spread({10.0, 1.0, 3.0, 2.0, 4.0});
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
  EXPECT_NEAR(s.stddev, 3.5355339059327378, 1e-15);
}

TEST(Spread, EmptyAndSingleValue) {
  const Spread none = spread({});
  EXPECT_EQ(none.n, 0u);
  EXPECT_EQ(none.median, 0.0);
  EXPECT_EQ(none.min, 0.0);
  EXPECT_EQ(none.max, 0.0);
  EXPECT_EQ(none.mean, 0.0);
  EXPECT_EQ(none.stddev, 0.0);

  const Spread one = spread({0.25});
  EXPECT_EQ(one.n, 1u);
  EXPECT_EQ(one.median, 0.25);
  EXPECT_EQ(one.min, 0.25);
  EXPECT_EQ(one.max, 0.25);
  EXPECT_EQ(one.mean, 0.25);
  EXPECT_EQ(one.stddev, 0.0);  // no n - 1 = 0 division
}

TEST(Spread, LargeOffsetKeepsTheStandardDeviation) {
  // 1e9 + {4, 7, 13, 16}: deviations from the mean 1e9 + 10 are -6 -3 3 6, squared 90, sample
  // variance 30, stddev sqrt(30) = 5.4772255750516612. Sum-of-squares minus n * mean^2 would be
  // a difference of two numbers near 4e18, where a double's spacing is 512.
  const Spread s = spread({1e9 + 4, 1e9 + 16, 1e9 + 7, 1e9 + 13});
  EXPECT_DOUBLE_EQ(s.mean, 1e9 + 10);
  EXPECT_DOUBLE_EQ(s.median, 1e9 + 10);
  EXPECT_NEAR(s.stddev, 5.4772255750516612, 1e-9);
}

}  // namespace
}  // namespace scaffold::core
