// `scaffold benchmark` on 2 ranks (docs/distributed.md): a spatially sharded and a data-parallel
// run of a tiny config reach the target Dice with rank 0's train_stats.csv shaped like a
// single-process run's; a rank that fails ends every rank within seconds; invalid layouts stop
// before anything runs.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::mpiexec;
using test::run_command;
using test::TempDir;

// Rank 0's train_stats.csv (only_run_dir checks that there is exactly one run folder).
std::vector<std::vector<std::string>> train_stats(const fs::path& dir) {
  const fs::path run = test::only_run_dir(dir);
  return run.empty() ? std::vector<std::vector<std::string>>{}
                     : test::csv_rows(run / "train_stats.csv");
}

// The checks every converged run's CSV passes: ScaFFold's header, one row per epoch numbered from
// 1, the last row the first to reach the target, 6 optimizer steps of global batch 2 per epoch.
void expect_converged_csv(const std::vector<std::vector<std::string>>& rows,
                          const std::vector<std::string>& header) {
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0], header);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), header.size()) << "row " << i;
    EXPECT_EQ(std::stoll(rows[i][0]), static_cast<long long>(i));
    EXPECT_EQ(std::stoll(rows[i][8]), 6) << "row " << i;
    EXPECT_EQ(std::stoll(rows[i][9]), 6 * static_cast<long long>(i)) << "row " << i;
    if (i + 1 < rows.size()) {
      EXPECT_LT(std::stod(rows[i][6]), 0.9) << "row " << i;
    }
  }
  EXPECT_GE(std::stod(rows.back()[6]), 0.9);
}

TEST(DistributedBenchmark, SpatialAndDataParallelRunsReachTheTargetLikeOneProcess) {
  const std::string extra = "target_dice: 0.9\nepochs: 60\n";
  TempDir single_dir, spatial_dir, data_dir;
  const auto single =
      run_command(kBinary + " benchmark --threads 1 -c " +
                  test::write_tiny_benchmark_config(single_dir.path(), extra).string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto reference = train_stats(single_dir.path());
  ASSERT_GE(reference.size(), 2u);
  const std::vector<std::string> header = reference[0];
  expect_converged_csv(reference, header);

  // One sample split in two along D: global batch 2, as the single process.
  // -v: every rank logs, each line naming its rank. Global GroupNorm (not the default, local):
  // the option that makes the sharded model compute what the unsharded one does.
  const auto spatial =
      run_command(mpiexec(2) + kBinary +
                  " benchmark -v --threads 1 --dc-num-shards 2 1 1 "
                  "--dc-groupnorm global -c " +
                  test::write_tiny_benchmark_config(spatial_dir.path(), extra).string());
  ASSERT_EQ(spatial.exit_code, 0) << spatial.output;
  EXPECT_NE(
      spatial.output.find("[rank=1][DEBUG] replica 0, shard 1 of 2: D/H/W shard index [1, 0, 0]"),
      std::string::npos)
      << spatial.output;
  EXPECT_NE(
      spatial.output.find("2 ranks on 1 node(s) = 1 data-parallel replica(s) x 2 spatial shard(s)"),
      std::string::npos)
      << spatial.output;
  const auto spatial_rows = train_stats(spatial_dir.path());
  expect_converged_csv(spatial_rows, header);
  // Global GroupNorm and summed losses make it the same computation up to rounding: the first
  // epoch's training loss agrees closely (a per-shard loss or GroupNorm would not).
  ASSERT_GE(spatial_rows.size(), 2u);
  EXPECT_NEAR(std::stod(spatial_rows[1][1]), std::stod(reference[1][1]),
              0.02 * std::stod(reference[1][1]));

  // Two replicas of local batch 1: global batch 2, so the same steps per epoch.
  const auto data =
      run_command(mpiexec(2) + kBinary + " benchmark --threads 1 --local-batch-size 1 -c " +
                  test::write_tiny_benchmark_config(data_dir.path(), extra).string());
  ASSERT_EQ(data.exit_code, 0) << data.output;
  EXPECT_NE(data.output.find("2 data-parallel replica(s) x 1 spatial shard(s)"), std::string::npos)
      << data.output;
  expect_converged_csv(train_stats(data_dir.path()), header);
}

TEST(DistributedBenchmark, AFailingRankEndsEveryRankWithinSeconds) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 throws at its 4th step (the warm-up has 2): rank 0 is then inside a collective.
  const auto r =
      run_command("SCAFFOLD_FAIL_AT=1:4 " + mpiexec(2) + "-x SCAFFOLD_FAIL_AT " + kBinary +
                  " benchmark --threads 1 --epochs 3 --dc-num-shards 2 1 1 -c " +
                  test::write_tiny_benchmark_config(dir.path()).string());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("injected failure (SCAFFOLD_FAIL_AT) at training step 4 on rank 1"),
            std::string::npos)
      << r.output;
  EXPECT_LT(seconds, 60.0) << "data generation and 4 steps take seconds; a hang would not end";
  EXPECT_EQ(r.output.find("Trained to"), std::string::npos) << r.output;
}

// A rank that stops without an error (here: sleeps forever in its 4th step) leaves the others
// blocked in a collective; the progress watchdog ends every rank.
TEST(DistributedBenchmark, AStuckRankEndsEveryRankAfterTheProgressTimeout) {
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_command(
      "SCAFFOLD_FAIL_AT=1:4:hang " + mpiexec(2) + "-x SCAFFOLD_FAIL_AT " + kBinary +
      " benchmark --threads 1 --epochs 3 --dc-num-shards 2 1 1 -c " +
      test::write_tiny_benchmark_config(dir.path(), "progress_timeout_s: 3\n").string());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("injected hang (SCAFFOLD_FAIL_AT) at training step 4 on rank 1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no training progress for"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 60.0);
  EXPECT_EQ(r.output.find("Trained to"), std::string::npos) << r.output;
}

TEST(DistributedBenchmark, InvalidLayoutsAreRejectedBeforeAnythingRuns) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  auto nothing_written = [&] {
    EXPECT_FALSE(fs::exists(dir.path() / "runs"));
    EXPECT_FALSE(fs::exists(dir.path() / "lib"));
    EXPECT_FALSE(fs::exists(dir.path() / "data"));
  };
  // 3 ranks cannot form spatial groups of 2.
  const auto odd_world = run_command(
      mpiexec(3) + kBinary + " benchmark --threads 1 --dc-num-shards 2 1 1 -c " + cfg.string());
  EXPECT_NE(odd_world.exit_code, 0);
  EXPECT_NE(odd_world.output.find("the number of ranks must be a multiple of 2"), std::string::npos)
      << odd_world.output;
  nothing_written();
  // 8 shards of a 16-voxel side leave 2 voxels: odd after one pooling of the 2-layer U-Net.
  const auto odd_extent =
      run_command(kBinary + " benchmark --threads 1 --dc-num-shards 8 1 1 -c " + cfg.string());
  EXPECT_NE(odd_extent.exit_code, 0);
  EXPECT_NE(odd_extent.output.find("dc_num_shards"), std::string::npos) << odd_extent.output;
  EXPECT_NE(odd_extent.output.find("stays even at every U-Net level"), std::string::npos)
      << odd_extent.output;
  nothing_written();
  // The GroupNorm mode is global or local.
  const auto bad_mode =
      run_command(kBinary + " benchmark --threads 1 --dc-groupnorm shard -c " + cfg.string());
  EXPECT_NE(bad_mode.exit_code, 0);
  EXPECT_NE(bad_mode.output.find("dc_groupnorm = shard"), std::string::npos) << bad_mode.output;
  nothing_written();
  // 2 replicas x local batch 3 = 6 samples per step, more than the 4 validation volumes.
  const auto big_batch = run_command(
      mpiexec(2) + kBinary + " benchmark --threads 1 --local-batch-size 3 -c " + cfg.string());
  EXPECT_NE(big_batch.exit_code, 0);
  EXPECT_NE(big_batch.output.find("global batch 6"), std::string::npos) << big_batch.output;
  EXPECT_NE(big_batch.output.find("is larger than the validation split (4 volumes)"),
            std::string::npos)
      << big_batch.output;
  nothing_written();
}

// Ranks of one job given different command lines (MPMD: one rank gets another seed, or a config
// file that does not exist) used to run rank 0's configuration with exit 0. Every rank now loads
// its own and the job stops, naming the rank and the key or file, before anything is written.
TEST(DistributedBenchmark, RanksGivenDifferentConfigurationsAreRefusedNamingTheRankAndKey) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  const std::string launcher =
      std::string(SCAFFOLD_MPIEXEC) + " --oversubscribe --allow-run-as-root ";
  const std::string rank0 = "-n 1 " + kBinary + " benchmark --threads 1 -c " + cfg.string();
  const auto other_seed = run_command(launcher + rank0 + " : -n 1 " + kBinary +
                                      " benchmark --threads 1 --seed 12345 -c " + cfg.string());
  EXPECT_NE(other_seed.exit_code, 0);
  EXPECT_NE(other_seed.output.find("rank 1's configuration differs from rank 0's"),
            std::string::npos)
      << other_seed.output;
  EXPECT_NE(other_seed.output.find("seed: 12345"), std::string::npos) << other_seed.output;
  // (A file that does not exist is refused by the command-line parser on that rank, before MPI.)
  const fs::path sweep = dir.path() / "sweep.yml";
  std::ofstream(sweep) << "seed: [1, 2]\n";
  const auto broken =
      run_command(launcher + rank0 + " : -n 1 " + kBinary + " benchmark --threads 1 -c " +
                  cfg.string() + " -c " + sweep.string());
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_NE(broken.output.find("rank 1 could not load its configuration"), std::string::npos)
      << broken.output;
  EXPECT_NE(broken.output.find(sweep.string()), std::string::npos) << broken.output;
  EXPECT_FALSE(fs::exists(dir.path() / "runs"));
  // The same command line on both ranks still runs (the check compares, it does not refuse MPI).
  const auto same = run_command(launcher + rank0 + " --epochs 1 : -n 1 " + kBinary +
                                " benchmark --threads 1 -c " + cfg.string() + " --epochs 1");
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

}  // namespace
}  // namespace scaffold
