// Voxelisation on hand-made clouds, and the fast path against the plain reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/rng.hpp"
#include "workloads/scaffold/dataset/voxelize.hpp"

namespace scaffold::dataset {
namespace {

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

TEST(Voxelize, LongestAxisSpansTheGridOthersAreCentred) {
  // x spans 10 (longest), y spans 2.5, z is flat. G = 8: voxel size ~10/8 = 1.25.
  const std::vector<float> pts{0, 0, 0, 10, 2.5f, 0, 5, 1.25f, 0};
  const int64_t g = 8;
  const auto idx = voxelize_reference(pts.data(), 3, g);
  ASSERT_EQ(idx.size(), 3u);
  std::vector<std::array<int64_t, 3>> cells;
  for (int64_t v : idx) cells.push_back({v / (g * g), (v / g) % g, v % g});
  // x: 0 -> 0, 10 -> 7 (clipped from the top edge), 5 -> 3 or 4 (middle).
  EXPECT_EQ(cells.front()[0], 0);
  EXPECT_EQ(cells.back()[0], 7);
  // y: span 2.5 / 1.25 = 2 voxels, offset (8 - 2) / 2 = 3: values 3, 4, 5.
  std::set<int64_t> ys, zs;
  for (const auto& c : cells) {
    ys.insert(c[1]);
    zs.insert(c[2]);
  }
  EXPECT_EQ(*ys.begin(), 3);
  EXPECT_EQ(*ys.rbegin(), 4);  // 3 + floor(2.5 / (10.000001 / 8)) = 3 + 1 (just under 2)
  // z: flat -> span 0, offset 4: the middle plane.
  EXPECT_EQ(zs, std::set<int64_t>{4});
}

TEST(Voxelize, IndicesStayInsideTheGrid) {
  core::Xoshiro256p rng(9);
  std::vector<float> pts(3 * 5000);
  for (float& v : pts) v = static_cast<float>(rng.uniform(-1e3, 1e3));
  for (int64_t g : {1, 2, 16, 33}) {
    for (int64_t v : voxelize_reference(pts.data(), 5000, g)) {
      ASSERT_GE(v, 0);
      ASSERT_LT(v, g * g * g);
    }
  }
}

TEST(Voxelize, FastPathHasTheReferenceIndexSet) {
  core::Xoshiro256p rng(4);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng.below(3000));
    std::vector<float> pts(3 * n);
    const double scale = std::pow(10.0, rng.uniform(-3, 4));
    for (float& v : pts) v = static_cast<float>(rng.uniform(-scale, scale));
    if (trial % 4 == 0)
      for (int64_t i = 0; i < n; ++i) pts[3 * i + 1] = 0.5f;  // a flat axis
    for (int64_t g : {8, 32, 128}) {
      std::vector<int64_t> fast;
      voxelize(pts.data(), n, g, &fast);
      ASSERT_EQ(fast.size(), static_cast<std::size_t>(n));
      ASSERT_EQ(sorted_unique(fast), voxelize_reference(pts.data(), n, g))
          << "trial " << trial << " grid " << g;
    }
  }
}

}  // namespace
}  // namespace scaffold::dataset
