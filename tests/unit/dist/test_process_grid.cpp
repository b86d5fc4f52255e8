// The process grid: consecutive ranks form a spatial group; groups are data-parallel replicas.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "dist/process_grid.hpp"

namespace scaffold::dist {
namespace {

TEST(ProcessGrid, ConsecutiveRanksFormOneSpatialGroup) {
  // 8 ranks, shards [2, 2, 1]: groups {0..3} and {4..7}; within a group, row-major coords.
  for (int rank = 0; rank < 8; ++rank) {
    const ProcessGrid g(8, rank, {2, 2, 1}, {2, 3, 4});
    EXPECT_EQ(g.spatial_size(), 4);
    EXPECT_EQ(g.replicas(), 2);
    EXPECT_EQ(g.replica(), rank / 4);
    EXPECT_EQ(g.shard_id(), rank % 4);
    const std::vector<int> expected{(rank % 4) / 2, rank % 2, 0};
    EXPECT_EQ(g.shard_coords(), expected) << "rank " << rank;
  }
  const ProcessGrid single(1, 0, {1, 1, 1}, {2, 3, 4});
  EXPECT_EQ(single.replicas(), 1);
  EXPECT_EQ(single.shard_coords(), (std::vector<int>{0, 0, 0}));
}

TEST(ShardCoords, RowMajorOverTheGivenOrderLastEntryFastest) {
  // Counts {2, 3, 4}: strides 12, 4, 1, so id = 12 a + 4 b + c.
  const std::vector<int> counts{2, 3, 4};
  EXPECT_EQ(shard_coords(0, counts), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(shard_coords(1, counts), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(shard_coords(4, counts), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(shard_coords(12, counts), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(shard_coords(17, counts), (std::vector<int>{1, 1, 1}));  // 12 + 4 + 1
  EXPECT_EQ(shard_coords(23, counts), (std::vector<int>{1, 2, 3}));  // the last shard
  EXPECT_EQ(shard_id_at({1, 2, 3}, counts), 23);
  EXPECT_EQ(shard_id_at({0, 2, 1}, counts), 9);  // 8 + 1
  for (int id = 0; id < 24; ++id)
    EXPECT_EQ(shard_id_at(shard_coords(id, counts), counts), id) << id;

  EXPECT_EQ(shard_coords(3, {5}), (std::vector<int>{3}));
  EXPECT_EQ(shard_coords(0, {1, 1, 1}), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(shard_coords(0, {}), (std::vector<int>{}));  // unsharded: one shard, no entries
}

TEST(ShardCoords, TheProcessGridUsesThem) {
  // 6 ranks in one group over counts {3, 2}: rank r has the coordinates of shard id r.
  for (int rank = 0; rank < 6; ++rank) {
    const ProcessGrid g(6, rank, {3, 2}, {4, 2});
    EXPECT_EQ(g.shard_coords(), (std::vector<int>{rank / 2, rank % 2})) << "rank " << rank;
  }
}

TEST(ProcessGrid, RejectsWorldsThatAreNotAMultipleOfTheShards) {
  try {
    ProcessGrid(6, 0, {4, 1, 1}, {2, 3, 4});
    FAIL();
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ProcessGrid(4, 0, {2, 2}, {2, 3, 4}), core::Error);
  EXPECT_THROW(ProcessGrid(4, 0, {0, 1, 1}, {2, 3, 4}), core::Error);
}

}  // namespace
}  // namespace scaffold::dist
