// The acceptance test on hand-made clouds: accepted, and each rejection reason.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/rng.hpp"
#include "workloads/scaffold/fractal/acceptance.hpp"

namespace scaffold::fractal {
namespace {

std::vector<double> uniform_cube(int n) {
  core::Xoshiro256p rng(123);
  std::vector<double> pts(3 * n);
  for (double& v : pts) v = rng.uniform(-3.0, 5.0);
  return pts;
}

TEST(Acceptance, UniformCubeIsAcceptedWithVarianceOneThird) {
  const auto pts = uniform_cube(20000);
  CloudStats stats;
  EXPECT_EQ(check_cloud(pts.data(), 20000, false, 0.15, 1.0, &stats), Verdict::Accepted);
  // Normalised to [-1, 1]: a uniform variable there has variance 1/3.
  for (double v : stats.variance) EXPECT_NEAR(v, 1.0 / 3.0, 0.01);
}

TEST(Acceptance, TwoPointCloudHasExactVariance) {
  // Points (-1,-2,0) and (1,2,10): every normalised axis is {-1, +1}, variance exactly 1.
  const std::vector<double> pts{-1, -2, 0, 1, 2, 10};
  CloudStats stats;
  EXPECT_EQ(check_cloud(pts.data(), 2, false, 0.15, 1.0, &stats), Verdict::Accepted);
  for (double v : stats.variance) EXPECT_DOUBLE_EQ(v, 1.0);
  // normalize scales the half-range: normalize 0.25 gives variance 0.0625, below 0.15.
  EXPECT_EQ(check_cloud(pts.data(), 2, false, 0.15, 0.25, &stats), Verdict::LowVariance);
  EXPECT_DOUBLE_EQ(stats.variance[0], 0.0625);
}

TEST(Acceptance, RunawayFlagRejects) {
  const auto pts = uniform_cube(100);
  EXPECT_EQ(check_cloud(pts.data(), 100, true, 0.15, 1.0), Verdict::Runaway);
}

TEST(Acceptance, NonFiniteOrDegenerateIsInvalid) {
  auto pts = uniform_cube(100);
  pts[37] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(check_cloud(pts.data(), 100, false, 0.15, 1.0), Verdict::InvalidValue);
  pts = uniform_cube(100);
  pts[40] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(check_cloud(pts.data(), 100, false, 0.15, 1.0), Verdict::InvalidValue);
  pts = uniform_cube(100);
  for (int i = 0; i < 100; ++i) pts[3 * i + 1] = 2.0;  // the y axis has zero range
  EXPECT_EQ(check_cloud(pts.data(), 100, false, 0.15, 1.0), Verdict::InvalidValue);
}

TEST(Acceptance, ConcentratedAxisFailsVariance) {
  // One axis: all points at 0 except two extremes -> tiny normalised variance on that axis only.
  auto pts = uniform_cube(1000);
  for (int i = 0; i < 1000; ++i) pts[3 * i + 2] = 0.0;
  pts[2] = -1.0;
  pts[5] = 1.0;
  CloudStats stats;
  EXPECT_EQ(check_cloud(pts.data(), 1000, false, 0.15, 1.0, &stats), Verdict::LowVariance);
  EXPECT_LT(stats.variance[2], 0.01);
  EXPECT_GT(stats.variance[0], 0.15);
  // The rule is "every variance > threshold", so with threshold 0.001 the same cloud passes.
  EXPECT_EQ(check_cloud(pts.data(), 1000, false, 0.001, 1.0), Verdict::Accepted);
}

}  // namespace
}  // namespace scaffold::fractal
