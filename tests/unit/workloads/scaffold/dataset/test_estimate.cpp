// The disk estimate made before the fractal library or a dataset is written (issue 16): its
// sizes against files written by core::write_npy (the writer the generators use), and the check
// that refuses above the limits or the free space, naming the flag that confirms.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/npy.hpp"
#include "core/resources.hpp"
#include "test_util.hpp"
#include "workloads/scaffold/dataset/estimate.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/fractal/library.hpp"

namespace scaffold::dataset {
namespace {
namespace fs = std::filesystem;

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "missing: " << (needle) << "\nin: " << (haystack)

TEST(DiskEstimate, AnInstanceCostsTheSizeOfItsNpyFile) {
  test::TempDir dir;
  const fractal::LibraryLayout layout =
      fractal::library_layout(dir.path(), 0.15, 42, /*point_num=*/2048);
  const std::vector<float> points(2048 * 3, 0.5f);
  const fs::path file = dir.path() / "instance.npy";
  core::write_npy(file, core::DType::Float32, {2048, 3}, points.data());
  const DiskEstimate one = library_estimate(layout, 0, 1), three = library_estimate(layout, 0, 3);
  EXPECT_EQ(one.files, 1.0);
  EXPECT_EQ(three.files, 3.0);
  EXPECT_EQ(one.bytes, static_cast<double>(fs::file_size(file)));
  EXPECT_EQ(three.bytes, 3 * static_cast<double>(fs::file_size(file)));
  // n_categories 100000: the 14.5 million instance files, plus the category files.
  const DiskEstimate huge = library_estimate(layout, 100000, 100000 * 145);
  EXPECT_EQ(huge.files, 14600000.0);
  EXPECT_CONTAINS(huge.what, "100000 category files, 14500000 instance files of 2048 points");
}

TEST(DiskEstimate, AVolumeCostsItsShardAndMaskFiles) {
  test::TempDir dir;
  DatasetKey key;
  key.problem_scale = 4;
  key.n_fracts_per_vol = 3;
  key.dc_num_shards = {2, 2, 1};
  key.dc_shard_dims = {2, 3, 4};
  const ShardLayout layout(key.dc_num_shards, key.dc_shard_dims);
  // One volume's files as the generator writes them, shard by shard.
  double written = 0;
  for (int s = 0; s < layout.count(); ++s) {
    const auto box = layout.box(s, 16);
    const int64_t voxels = box[0].size() * box[1].size() * box[2].size();
    const std::vector<float> image(static_cast<std::size_t>(3 * voxels), 0.0f);
    const std::vector<uint16_t> mask(static_cast<std::size_t>(voxels), 0);
    const fs::path image_file = dir.path() / ("v" + std::to_string(s) + ".npy");
    const fs::path mask_file = dir.path() / ("m" + std::to_string(s) + ".npy");
    core::write_npy(image_file, core::DType::Float32,
                    {3, box[0].size(), box[1].size(), box[2].size()}, image.data());
    core::write_npy(mask_file, core::DType::UInt16, {box[0].size(), box[1].size(), box[2].size()},
                    mask.data());
    written += static_cast<double>(fs::file_size(image_file) + fs::file_size(mask_file));
  }
  key.n_categories = 1;
  key.n_instances_used_per_fractal = 3;  // 1 volume
  const DiskEstimate one = dataset_estimate(key, dir.path());
  key.n_categories = 2;  // 2 volumes
  const DiskEstimate two = dataset_estimate(key, dir.path());
  EXPECT_EQ(two.files - one.files, 2.0 * layout.count());
  // The tables grow by a few bytes per volume; the estimate allows 64.
  EXPECT_NEAR(two.bytes - one.bytes, written, 64.0);
  EXPECT_GE(two.bytes - one.bytes, written);
  // An absurd config is counted without overflowing: 100000 categories x 48 volumes at scale 11.
  key.n_categories = 100000;
  key.n_instances_used_per_fractal = 145;
  key.problem_scale = 11;
  const DiskEstimate absurd = dataset_estimate(key, dir.path());
  EXPECT_NEAR(absurd.bytes, 4.8e6 * 14.0 * 2048.0 * 2048.0 * 2048.0, 1e-6 * absurd.bytes);
}

TEST(DiskEstimateProblem, WithinTheLimitsAndTheFreeSpaceIsFine) {
  test::TempDir dir;
  EXPECT_EQ(disk_estimate_problem({{"small", dir.path(), 100, 1e6}}), "");
  EXPECT_EQ(disk_estimate_problem({}), "");
  EXPECT_EQ(disk_estimate_problem({{"nothing to write", dir.path(), 0, 0}}, {0, 0}), "");
}

TEST(DiskEstimateProblem, AboveALimitNamesTheEstimateAndTheFlag) {
  test::TempDir dir;
  const std::string files =
      disk_estimate_problem({{"the library", dir.path(), 11, 1000}}, {10, 1e18});
  EXPECT_CONTAINS(files, "this would write 11 files");
  EXPECT_CONTAINS(files, "more than 10 files");
  EXPECT_CONTAINS(files, "the library: 11 files, 1000 B (1000 bytes)");
  EXPECT_CONTAINS(files, "free on the file system of " + dir.path().string());
  EXPECT_CONTAINS(files, kAllowLargeDataFlag);
  const std::string bytes =
      disk_estimate_problem({{"the dataset", dir.path(), 5, 2048}}, {1e9, 1024});
  EXPECT_CONTAINS(bytes, "more than 1.0 KiB");
  EXPECT_EQ(bytes.find("more than 1000000000 files"), std::string::npos) << bytes;
}

TEST(DiskEstimateProblem, MoreThanTheFreeSpaceCountsTargetsOnOneFileSystemTogether) {
  test::TempDir dir;
  fs::create_directories(dir.path() / "a");
  const auto space = core::file_system_space(dir.path());
  ASSERT_TRUE(space.has_value());
  const double free = static_cast<double>(space->free_bytes);
  const DiskLimits unlimited{1e30, 1e30};
  // Each alone fits; together (one file system) they do not.
  const DiskEstimate lib{"library", dir.path() / "a", 1, 0.6 * free};
  const DiskEstimate data{"dataset", dir.path() / "b" / "c", 1, 0.6 * free};
  EXPECT_EQ(disk_estimate_problem({lib}, unlimited), "");
  EXPECT_EQ(disk_estimate_problem({data}, unlimited), "");
  const std::string both = disk_estimate_problem({lib, data}, unlimited);
  EXPECT_CONTAINS(both, "free on the file system of " + dir.path().string());
  EXPECT_CONTAINS(both, "more than the " + core::human_bytes(free));
  if (space->files_known && space->free_files < 1e12) {
    const std::string inodes = disk_estimate_problem(
        {{"many files", dir.path(), static_cast<double>(space->free_files) + 1e6, 1}}, unlimited);
    EXPECT_CONTAINS(inodes, "more files than the");
    EXPECT_CONTAINS(inodes, "inodes free");
  }
}

TEST(DiskLimits, DefaultsAndTheTestHook) {
  ::unsetenv("SCAFFOLD_DISK_LIMITS");
  EXPECT_EQ(disk_limits().max_files, 1e6);
  EXPECT_EQ(disk_limits().max_bytes, 50.0 * 1024 * 1024 * 1024);
  ::setenv("SCAFFOLD_DISK_LIMITS", "5:100", 1);
  EXPECT_EQ(disk_limits().max_files, 5.0);
  EXPECT_EQ(disk_limits().max_bytes, 100.0);
  ::setenv("SCAFFOLD_DISK_LIMITS", "5", 1);
  EXPECT_THROW(disk_limits(), core::Error);
  ::setenv("SCAFFOLD_DISK_LIMITS", "5:100x", 1);
  EXPECT_THROW(disk_limits(), core::Error);
  ::unsetenv("SCAFFOLD_DISK_LIMITS");
}

}  // namespace
}  // namespace scaffold::dataset
