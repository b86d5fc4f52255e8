// Shard geometry: cutting a rendered volume into shards and concatenating them back along the
// sharded dimensions reproduces the unsharded volume byte for byte.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/dataset/render.hpp"

namespace scaffold::dataset {
namespace {

RenderedVolume random_volume(int64_t g) {
  core::Xoshiro256p rng(g);
  RenderedVolume v;
  v.grid = g;
  v.image.resize(static_cast<std::size_t>(3 * g * g * g));
  v.mask.resize(static_cast<std::size_t>(g * g * g));
  for (float& x : v.image) x = static_cast<float>(rng.uniform01());
  for (uint16_t& m : v.mask) m = static_cast<uint16_t>(rng.below(6));
  return v;
}

// Pastes every shard back into an empty volume at its box; returns the reassembled volume.
RenderedVolume reassemble(const RenderedVolume& src, const ShardLayout& layout) {
  const int64_t g = src.grid;
  RenderedVolume out;
  out.grid = g;
  out.image.assign(src.image.size(), -1.0f);
  out.mask.assign(src.mask.size(), 999);
  std::vector<float> img;
  std::vector<uint16_t> msk;
  int64_t covered = 0;
  for (int s = 0; s < layout.count(); ++s) {
    const auto box = layout.box(s, g);
    extract_shard(src, box, &img, &msk);
    const int64_t d = box[0].size(), h = box[1].size(), w = box[2].size();
    EXPECT_EQ(img.size(), static_cast<std::size_t>(3 * d * h * w));
    covered += d * h * w;
    for (int64_t z = 0; z < d; ++z)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t dst = ((box[0].begin + z) * g + box[1].begin + y) * g + box[2].begin + x;
          const int64_t local = (z * h + y) * w + x;
          out.mask[dst] = msk[local];
          for (int64_t c = 0; c < 3; ++c)
            out.image[c * g * g * g + dst] = img[c * d * h * w + local];
        }
  }
  EXPECT_EQ(covered, g * g * g) << "shards must tile the volume exactly";
  return out;
}

void expect_round_trip(int64_t g, std::vector<int> shards, std::vector<int> dims) {
  const ShardLayout layout(shards, dims);
  const RenderedVolume v = random_volume(g);
  const RenderedVolume back = reassemble(v, layout);
  EXPECT_EQ(std::memcmp(v.image.data(), back.image.data(), v.image.size() * 4), 0);
  EXPECT_EQ(v.mask, back.mask);
}

TEST(Shards, ConcatenatedShardsEqualTheVolume) {
  expect_round_trip(16, {1, 1, 1}, {2, 3, 4});
  expect_round_trip(16, {2, 1, 1}, {2, 3, 4});
  expect_round_trip(16, {1, 2, 2}, {2, 3, 4});
  expect_round_trip(16, {2, 2, 2}, {2, 3, 4});
  expect_round_trip(16, {4, 2}, {4, 2});       // dims in another order
  expect_round_trip(7, {2, 3, 1}, {2, 3, 4});  // uneven: 4 + 3 and 3 + 3 + 1
}

TEST(Shards, ChunkRangesLikeTorchChunk) {
  EXPECT_EQ(chunk_range(7, 2, 0).size(), 4);
  EXPECT_EQ(chunk_range(7, 2, 1).begin, 4);
  EXPECT_EQ(chunk_range(7, 2, 1).end, 7);
  EXPECT_EQ(chunk_range(7, 3, 2).size(), 1);
  // torch.chunk(5 elements, 4) gives only 3 chunks: a 4-shard layout leaves one empty.
  EXPECT_EQ(chunk_range(5, 4, 3).size(), 0);
  EXPECT_THROW(ShardLayout({4, 1, 1}, {2, 3, 4}).check_extent(5), core::Error);
  EXPECT_NO_THROW(ShardLayout({4, 1, 1}, {2, 3, 4}).check_extent(8));
}

TEST(Shards, ShardIdsAreRowMajorOverTheGivenOrder) {
  const ShardLayout layout({2, 3}, {4, 2});  // W in 2 (slowest), D in 3 (fastest)
  EXPECT_EQ(layout.count(), 6);
  EXPECT_EQ(layout.axis_coords(0), (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(layout.axis_coords(1), (std::array<int, 3>{1, 0, 0}));
  EXPECT_EQ(layout.axis_coords(3), (std::array<int, 3>{0, 0, 1}));
  EXPECT_EQ(layout.axis_coords(5), (std::array<int, 3>{2, 0, 1}));
  EXPECT_EQ(volume_file_name(12, 5), "12_shard000005.npy");
  EXPECT_EQ(mask_file_name(0, 0), "0_shard000000_mask.npy");
  EXPECT_THROW(ShardLayout({2, 2}, {2, 2}), core::Error);
  EXPECT_THROW(ShardLayout({2}, {5}), core::Error);
  EXPECT_THROW(ShardLayout({2, 1}, {2}), core::Error);
}

TEST(Render, LaterFractalsOverwriteEarlierOnes) {
  // Two identical clouds of different categories: the second one wins everywhere.
  const std::vector<float> cloud{0, 0, 0, 1, 1, 1, 0.5f, 0.2f, 0.9f};
  const std::vector<Fractal> fractals{{0, 0}, {2, 0}};
  const std::vector<std::array<float, 3>> colors{{0.1f, 0.2f, 0.3f}, {0, 0, 0}, {0.7f, 0.8f, 0.9f}};
  RenderedVolume v;
  render_volume(fractals, {cloud, cloud}, colors, 4, &v);
  int painted = 0;
  for (std::size_t i = 0; i < v.mask.size(); ++i) {
    if (v.mask[i] == 0) {
      EXPECT_EQ(v.image[i], 0.0f);
      continue;
    }
    ++painted;
    EXPECT_EQ(v.mask[i], 3);
    EXPECT_EQ(v.image[i], 0.7f);
    EXPECT_EQ(v.image[64 + i], 0.8f);
    EXPECT_EQ(v.image[128 + i], 0.9f);
  }
  EXPECT_EQ(painted, 3);
}

}  // namespace
}  // namespace scaffold::dataset
