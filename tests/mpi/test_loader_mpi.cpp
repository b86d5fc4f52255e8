// The data loader under 2 ranks forming one spatial group of layout [2, 1, 1] (docs/dataset.md):
// each rank opens only the files of its own shard, and ranks that list different samples all
// throw.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "core/npy.hpp"
#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "mpi_test_main.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/dataset/layout.hpp"

namespace scaffold::dataset {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSide = 8;
constexpr int64_t kD = 4, kH = 8, kW = 8;  // one shard of [2, 1, 1] over dims [2, 3, 4]
const std::vector<int> kVolumes{0, 1, 2, 3, 10};

float image_value(int volume, int shard, int64_t flat) {
  return static_cast<float>(volume * 10000 + shard * 1000 + flat);
}

void write_sample(const DatasetPaths& paths, int volume, int shard) {
  std::vector<float> image(static_cast<std::size_t>(3 * kD * kH * kW));
  for (std::size_t i = 0; i < image.size(); ++i)
    image[i] = image_value(volume, shard, static_cast<int64_t>(i));
  core::write_npy(paths.volume_file(Split::Training, volume, shard), core::DType::Float32,
                  {3, kD, kH, kW}, image.data());
  const std::vector<uint16_t> mask(static_cast<std::size_t>(kD * kH * kW),
                                   static_cast<uint16_t>(volume + shard));
  core::write_npy(paths.mask_file(Split::Training, volume, shard), core::DType::UInt16,
                  {kD, kH, kW}, mask.data());
}

// Rank 0 writes both shards of every volume into a fresh directory and tells everyone its name.
// Anything that can fail on one rank only is agreed on before the next collective, so a failure
// ends the test on every rank instead of leaving the others waiting.
class LoaderMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dist::Communicator& comm = test::world();
    std::string root;
    if (comm.rank() == 0)
      root = (fs::temp_directory_path() / ("scaffold-loader-mpi-" + std::to_string(::getpid()) +
                                           "-" + std::to_string(std::random_device{}())))
                 .string();
    comm.broadcast(root, 0);
    paths_.root = root;
    dist::run_agreed(comm, [&] {
      if (comm.rank() != 0) return;
      core::create_directories(paths_.volumes_dir(Split::Training));
      core::create_directories(paths_.masks_dir(Split::Training));
      for (int v : kVolumes)
        for (int shard = 0; shard < 2; ++shard) write_sample(paths_, v, shard);
    });
  }
  void TearDown() override {
    test::world().barrier();  // nobody still reading
    if (test::world().rank() == 0) fs::remove_all(paths_.root);
  }

  DatasetPaths paths_;
};

TEST_F(LoaderMpi, EachRankOpensOnlyItsOwnShard) {
  dist::Communicator& comm = test::world();
  if (comm.size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  const dist::ProcessGrid grid(comm.size(), comm.rank(), {2, 1, 1}, {2, 3, 4});
  EXPECT_EQ(grid.shard_id(), comm.rank());
  std::unique_ptr<FractalDataset> opened;
  dist::run_agreed(comm, [&] {
    opened = std::make_unique<FractalDataset>(paths_, Split::Training,
                                              ShardLayout(grid.num_shards(), grid.shard_dims()),
                                              grid.shard_id(), kSide);
  });
  FractalDataset& ds = *opened;
  EXPECT_NO_THROW(check_same_ids(comm, ds));  // the last collective: local checks follow
  std::vector<std::string> log;
  ds.set_open_log(&log);
  EXPECT_EQ(ds.ids(), (std::vector<std::string>{"0", "1", "10", "2", "3"}));

  for (std::size_t i = 0; i < ds.size(); ++i) {
    const Sample s = ds.get(i);
    const int volume = std::stoi(s.id);
    ASSERT_EQ(s.image.sizes().vec(), (std::vector<int64_t>{3, kD, kH, kW}));
    // First and last element: this rank's shard, not the other one.
    EXPECT_EQ(s.image.data_ptr<float>()[0], image_value(volume, grid.shard_id(), 0));
    EXPECT_EQ(s.image.data_ptr<float>()[3 * kD * kH * kW - 1],
              image_value(volume, grid.shard_id(), 3 * kD * kH * kW - 1));
    EXPECT_EQ(s.mask.data_ptr<int64_t>()[0], volume + grid.shard_id());
  }
  ASSERT_EQ(log.size(), 2 * ds.size());
  const std::string mine = "_shard00000" + std::to_string(comm.rank());
  const std::string other = "_shard00000" + std::to_string(1 - comm.rank());
  for (const std::string& path : log) {
    EXPECT_NE(path.find(mine), std::string::npos) << "rank " << comm.rank() << " opened " << path;
    EXPECT_EQ(path.find(other), std::string::npos) << "rank " << comm.rank() << " opened " << path;
  }
}

TEST_F(LoaderMpi, RanksListingDifferentSamplesAllThrow) {
  dist::Communicator& comm = test::world();
  if (comm.size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  // A volume that exists only as shard 1: rank 1 lists 6 ids, rank 0 lists 5.
  dist::run_agreed(comm, [&] {
    if (comm.rank() == 1) write_sample(paths_, 7, 1);
  });
  const dist::ProcessGrid grid(comm.size(), comm.rank(), {2, 1, 1}, {2, 3, 4});
  std::unique_ptr<FractalDataset> opened;
  dist::run_agreed(comm, [&] {
    opened = std::make_unique<FractalDataset>(
        paths_, Split::Training, ShardLayout({2, 1, 1}, {2, 3, 4}), grid.shard_id(), kSide);
  });
  const FractalDataset& ds = *opened;
  EXPECT_EQ(ds.size(), comm.rank() == 0 ? 5u : 6u);
  try {
    check_same_ids(comm, ds);
    FAIL() << "rank " << comm.rank() << " did not throw";
  } catch (const dist::AgreedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0: 5 ids"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1: 6 ids"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace scaffold::dataset
