// The chaos game: origin first, point count, runaway detection, and the fast interleaved
// kernel bit-identical to the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "fractal_util.hpp"
#include "workloads/scaffold/fractal/chaos_game.hpp"

namespace scaffold::fractal {
namespace {

TEST(ChaosGame, StartsAtOriginAndFillsEveryPoint) {
  const IfsParams p = test::diagonal_category(0.5, -0.5);
  const int64_t n = 1000;
  std::vector<double> out(3 * n + 3, -7.0);  // one sentinel point past the end
  const bool runaway = chaos_game_reference(p, 11, n, out.data());
  EXPECT_FALSE(runaway);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 0.0);
  for (int64_t i = 1; i < n; ++i) ASSERT_NE(out[3 * i], -7.0) << i;
  EXPECT_EQ(out[3 * n], -7.0) << "wrote past point_num";
  // Point 1 is one map applied to the origin: its translation.
  EXPECT_TRUE((out[3] == 0.1 && out[4] == 0.2) || (out[3] == -0.4 && out[4] == 0.1));
}

TEST(ChaosGame, BothMapsAreUsedInProportionToProbability) {
  // x' = 0.5 x + 0.1 or x' = -0.5 x - 0.4: count which translation each step applied.
  IfsParams p = test::diagonal_category(0.5, 0.5, 0.5, 0.5);
  p.maps[0][kProbabilityColumn] = 0.8;
  p.maps[1][kProbabilityColumn] = 0.2;
  const int64_t n = 20000;
  std::vector<double> out(3 * n);
  chaos_game_reference(p, 5, n, out.data());
  int map0 = 0;
  for (int64_t i = 1; i < n; ++i) map0 += out[3 * i] == 0.5 * out[3 * (i - 1)] + 0.1;
  EXPECT_NEAR(map0 / static_cast<double>(n - 1), 0.8, 0.02);
}

TEST(ChaosGame, FlagsRunawayAboveLimitWithoutStopping) {
  const IfsParams p = test::diagonal_category(1.5, 1.5);  // |x| grows ~1.5^n: 1e10 by n ~ 60
  const int64_t n = 500;
  std::vector<double> out(3 * n, 0.0);
  EXPECT_TRUE(chaos_game_reference(p, 1, n, out.data()));
  EXPECT_GT(std::fabs(out[3 * (n - 1)]), 1e10) << "generation went on to the last point";
  EXPECT_FALSE(chaos_game_reference(p, 1, 20, out.data())) << "1.5^20 is far below 1e10";
}

TEST(ChaosGame, InterleavedLanesEqualReferenceBitForBit) {
  const int64_t n = 4099;
  const IfsParams cats[kLanes] = {sample_candidate(42, 0), sample_candidate(42, 1),
                                  test::diagonal_category(1.5, 1.2),
                                  test::diagonal_category(0.7, -0.6)};
  std::vector<double> lanes_out[kLanes];
  const IfsParams* params[kLanes];
  uint64_t keys[kLanes];
  double* outs[kLanes];
  bool runaway[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    lanes_out[l].assign(3 * n, 0.0);
    params[l] = &cats[l];
    keys[l] = candidate_points_key(42, 100 + l);
    outs[l] = lanes_out[l].data();
  }
  chaos_game_lanes(params, keys, n, outs, runaway);
  for (int l = 0; l < kLanes; ++l) {
    std::vector<double> ref(3 * n);
    const bool ref_runaway = chaos_game_reference(cats[l], keys[l], n, ref.data());
    EXPECT_EQ(runaway[l], ref_runaway) << "lane " << l;
    ASSERT_EQ(std::memcmp(ref.data(), lanes_out[l].data(), ref.size() * sizeof(double)), 0)
        << "lane " << l << " differs from the reference";
  }
  EXPECT_TRUE(runaway[2]);
  EXPECT_FALSE(runaway[3]);
}

TEST(ChaosGame, PaddedLanesRepeatingLaneZeroAreHarmless) {
  const int64_t n = 257;
  const IfsParams cat = sample_candidate(9, 9);
  std::vector<double> out(3 * n), ref(3 * n);
  const IfsParams* params[kLanes] = {&cat, &cat, &cat, &cat};
  const uint64_t key = 77;
  const uint64_t keys[kLanes] = {key, key, key, key};
  double* outs[kLanes] = {out.data(), out.data(), out.data(), out.data()};
  bool runaway[kLanes];
  chaos_game_lanes(params, keys, n, outs, runaway);
  chaos_game_reference(cat, key, n, ref.data());
  EXPECT_EQ(std::memcmp(ref.data(), out.data(), ref.size() * sizeof(double)), 0);
}

}  // namespace
}  // namespace scaffold::fractal
