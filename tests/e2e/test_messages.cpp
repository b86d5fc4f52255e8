// The messages of issue 16 ("Messages to sharpen"), through the real binary as a user meets them:
// each names what is wrong (the subcommand, the flag and the value as typed, the file and line,
// the file and voxel, the file that held a NaN, the keys that size the model) and what to do,
// with a non-zero exit. The reference for each is the input the test planted, not scaffold's
// output. Also the disk estimate that refuses an absurd library or dataset before writing it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "missing: " << (needle) << "\nin:\n"                      \
      << (haystack)

// The longest run of digits in `text` (a range printed as the largest double has 309).
std::size_t longest_digit_run(const std::string& text) {
  std::size_t best = 0, run = 0;
  for (const char c : text) {
    run = (c >= '0' && c <= '9') ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

// The one file below `root` whose path ends with `suffix`.
fs::path find_file(const fs::path& root, const std::string& suffix) {
  std::vector<fs::path> found;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string p = e.path().string();
    if (e.is_regular_file() && p.size() >= suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      found.push_back(e.path());
  }
  EXPECT_EQ(found.size(), 1u) << suffix << " below " << root;
  return found.empty() ? fs::path() : found.front();
}

// Overwrites the last `bytes.size()` bytes of `file` (the end of a .npy's data; the header stays
// valid).
void overwrite_tail(const fs::path& file, const std::string& bytes) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-static_cast<std::streamoff>(bytes.size()), std::ios::end);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(Messages, AnUnknownSubcommandIsNamedWithTheChoices) {
  const auto r = run_command(kBinary + " benchmrk -c x.yml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_CONTAINS(r.output, "unknown subcommand 'benchmrk'; available: benchmark, ");
}

TEST(Messages, BoundsAreShortAndNameTheFlag) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  const auto threads = run_command(kBinary + " benchmark -c " + cfg.string() + " --threads 100000");
  EXPECT_EQ(threads.exit_code, 2) << threads.output;
  EXPECT_CONTAINS(threads.output, "--threads: 100000: expected an integer from 1 to 1024");
  EXPECT_LT(longest_digit_run(threads.output), 8u) << threads.output;
  const auto interval = run_command(kBinary + " power --interval 0 -- true");
  EXPECT_EQ(interval.exit_code, 2) << interval.output;
  EXPECT_CONTAINS(interval.output,
                  "--interval: 0: expected milliseconds above 0 and at most 3600000");
  EXPECT_LT(longest_digit_run(interval.output), 8u) << interval.output;
}

TEST(Messages, AnOutOfRangeIntegerIsShownAsTyped) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  const auto flag = run_command(
      kBinary + " benchmark -c " + cfg.string() +
      " --epochs 99999999999999999999 --problem-scale 4294967300 --warmup-batches 1e20");
  EXPECT_EQ(flag.exit_code, 1) << flag.output;
  EXPECT_CONTAINS(flag.output,
                  "--epochs: epochs = 99999999999999999999: expected -1 (until target_dice) or an "
                  "integer >= 1 (beyond the 64-bit integer range)");
  EXPECT_CONTAINS(flag.output,
                  "--problem-scale: problem_scale = 4294967300: expected an integer in [3, 15]");
  EXPECT_CONTAINS(flag.output,
                  "--warmup-batches: warmup_batches = 1e20: expected an integer >= 0 (got a "
                  "non-integer number)");
  EXPECT_EQ(flag.output.find("9223372036854775807"), std::string::npos) << flag.output;
  std::ofstream(dir.path() / "big.yml") << "epochs: 99999999999999999999\n";
  const auto file = run_command(kBinary + " benchmark -c " + cfg.string() + " -c " +
                                (dir.path() / "big.yml").string());
  EXPECT_EQ(file.exit_code, 1) << file.output;
  EXPECT_CONTAINS(file.output, "big.yml:1: epochs = 99999999999999999999: expected");
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

TEST(Messages, TooDeepNestingNamesTheLevelsAndTheLine) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  std::ofstream(dir.path() / "deep.yml")
      << "seed: 3\ndc_num_shards: " << std::string(40, '[') << std::string(40, ']') << "\n";
  const auto r = run_command(kBinary + " benchmark -c " + cfg.string() + " -c " +
                             (dir.path() / "deep.yml").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(
      r.output, (dir.path() / "deep.yml").string() + ":2: values nested more than 32 levels deep");
  EXPECT_EQ(r.output.find("bad file"), std::string::npos) << r.output;
}

TEST(Messages, ATooWideModelNamesTheKeysThatSizeIt) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  // 100000 base channels: the second convolution's weight is 100000 x 100000 x 27 float32 =
  // 1.08e12 bytes. The address-space limit makes the allocation fail on any machine, whatever
  // its memory overcommit policy; on the CPU, where the limit applies.
  const auto r = run_command("ulimit -v 16000000; " + kBinary + " benchmark -c " + cfg.string() +
                             " --unet-base-channels 100000 --epochs 1 --device cpu");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output,
                  "not enough memory on cpu to build the model: an allocation of 1005.8 GiB "
                  "(1080000000000 bytes) failed");
  EXPECT_CONTAINS(r.output, "unet_base_channels = 100000");
  EXPECT_CONTAINS(r.output, "problem_scale = 4 (16^3 voxels per volume)");
  EXPECT_CONTAINS(r.output, "local_batch_size = 2");
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << "LibTorch's backtrace:\n" << r.output;
}

// A tiny dataset to damage: generated once per test in dir/data.
fs::path tiny_dataset(const fs::path& dir, const fs::path& cfg) {
  const auto r = run_command(kBinary + " generate_dataset -c " + cfg.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return find_file(dir / "data", "meta.yaml").parent_path();
}

TEST(Messages, AMaskLabelOutsideTheClassesNamesTheFileAndTheVoxel) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  const fs::path data = tiny_dataset(dir.path(), cfg);
  const fs::path mask = data / "masks" / "training" / "3_shard000000_mask.npy";
  ASSERT_TRUE(fs::exists(mask));
  overwrite_tail(
      mask, std::string("\x09\x00", 2));  // the last voxel (15, 15, 15): label 9 of classes 0..2
  const auto r = run_command(kBinary + " benchmark -c " + cfg.string() + " --epochs 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, mask.string() +
                                ": voxel (z, y, x) = (15, 15, 15) of this shard holds label 9, "
                                "outside this run's classes 0 to 2");
  EXPECT_CONTAINS(r.output, "delete the dataset folder " + data.string());
}

TEST(Messages, TrainingDivergedNamesTheFileThatHeldTheNaN) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  const fs::path data = tiny_dataset(dir.path(), cfg);
  const fs::path volume = data / "volumes" / "training" / "5_shard000000.npy";
  ASSERT_TRUE(fs::exists(volume));
  const float nan = std::nanf("");
  std::string bytes(sizeof nan, '\0');
  std::memcpy(bytes.data(), &nan, sizeof nan);
  overwrite_tail(volume, bytes);  // image (3, 16, 16, 16): element [2, 15, 15, 15]
  const auto r =
      run_command(kBinary + " benchmark -c " + cfg.string() + " --epochs 1 --warmup-batches 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "training diverged at epoch 1");
  EXPECT_CONTAINS(r.output, "the training sums first turned non-finite in optimizer step");
  EXPECT_CONTAINS(r.output, volume.string() + " holds NaN (field 0, element [2, 15, 15, 15])");
  EXPECT_CONTAINS(r.output, "replace or regenerate the data");
}

TEST(Messages, TrainingDivergedOnFiniteDataSaysSo) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  tiny_dataset(dir.path(), cfg);
  const auto r = run_command(
      kBinary + " benchmark -c " + cfg.string() +
      " --epochs 1 --warmup-batches 0 --starting-learning-rate 1e30 --min-learning-rate 1e29");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_CONTAINS(r.output, "training diverged at epoch 1");
  EXPECT_CONTAINS(r.output, "is finite, so the model diverged, not the data");
  EXPECT_EQ(r.output.find("holds NaN"), std::string::npos) << r.output;
}

TEST(DataEstimate, AnAbsurdLibraryOrDatasetIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  // 100000 categories: 100000 category files and 145 instances each, 16 points per instance.
  const auto lib =
      run_command(kBinary + " generate_fractals -c " + cfg.string() + " --n-categories 100000");
  EXPECT_EQ(lib.exit_code, 1) << lib.output;
  EXPECT_CONTAINS(lib.output, "this would write 14.6 million files");
  EXPECT_CONTAINS(lib.output, "100000 category files, 14500000 instance files of 16 points");
  EXPECT_CONTAINS(lib.output, "more than 1.0 million files");
  EXPECT_CONTAINS(lib.output, "free on the file system of");
  EXPECT_CONTAINS(lib.output, "give --allow-large-data to go ahead");
  // The benchmark adds the dataset: 100000 x 8 volumes, a volume and a mask file each.
  const auto bench =
      run_command(kBinary + " benchmark -c " + cfg.string() + " --n-categories 100000");
  EXPECT_EQ(bench.exit_code, 1) << bench.output;
  EXPECT_CONTAINS(bench.output,
                  "(800000 volumes of 16^3 voxels, 1 shard file(s) and as many masks each): 1.6 "
                  "million files");
  EXPECT_FALSE(fs::exists(dir.path() / "lib"));
  EXPECT_FALSE(fs::exists(dir.path() / "data"));
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
}

// The estimate against what generation then writes: limits lowered by the test hook, so the tiny
// dataset crosses them; refused without the flag, written with it, and the files on disk agree
// with the estimate the warning printed.
TEST(DataEstimate, TheFlagGoesAheadAndTheEstimateMatchesTheFilesWritten) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  const std::string env = "SCAFFOLD_DISK_LIMITS=10:1e12 ";
  const auto refused = run_command(env + kBinary + " generate_dataset -c " + cfg.string());
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_CONTAINS(refused.output, "more than 10 files");
  EXPECT_FALSE(fs::exists(dir.path() / "lib"));
  const auto ok =
      run_command(env + kBinary + " generate_dataset -c " + cfg.string() + " --allow-large-data");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_CONTAINS(ok.output, "--allow-large-data confirms a large write");
  const std::regex line(R"((fractal library|dataset in) [^:]*: (\d+) files, [^(]*\((\d+) bytes\))");
  std::map<std::string, std::pair<double, double>> estimate;  // files, bytes
  for (std::sregex_iterator it(ok.output.begin(), ok.output.end(), line), end; it != end; ++it)
    estimate.emplace((*it)[1], std::make_pair(std::stod((*it)[2]),
                                              std::stod((*it)[3])));  // the first, up-front one
  ASSERT_EQ(estimate.size(), 2u) << ok.output;
  const auto measure = [](const fs::path& root) {
    double files = 0, bytes = 0;
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file() && e.path().extension() != ".lock") {  // the (empty) generation locks
        ++files;
        bytes += static_cast<double>(e.file_size());
      }
    return std::make_pair(files, bytes);
  };
  // The library: 2 category files (estimated at most 2 KiB each) and 290 instance files.
  const auto [lib_files, lib_bytes] = measure(dir.path() / "lib");
  EXPECT_EQ(estimate["fractal library"].first, lib_files);
  EXPECT_GE(estimate["fractal library"].second, lib_bytes);
  EXPECT_LE(estimate["fractal library"].second - lib_bytes, 2 * 2048.0);
  // The dataset: 16 volumes and masks exactly, the tables within the estimate's allowance.
  const auto [data_files, data_bytes] =
      measure(find_file(dir.path() / "data", "meta.yaml").parent_path());
  EXPECT_EQ(estimate["dataset in"].first, data_files);
  EXPECT_GE(estimate["dataset in"].second, data_bytes);
  EXPECT_LE(estimate["dataset in"].second - data_bytes, 16 * 64 + 4096.0);
}

}  // namespace
}  // namespace scaffold
