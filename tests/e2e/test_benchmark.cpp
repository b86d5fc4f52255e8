// End-to-end tests of `scaffold benchmark` at a tiny scale: it trains to a target Dice within a
// bounded number of epochs, writes the run folder the spec describes, and a run interrupted after
// epoch k and restarted through restart.sh writes the same rows as an uninterrupted run; a
// failed first write leaves no run folder, and a damaged reused dataset is refused before training.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>
#include <regex>
#include <sstream>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "fs_test_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::kBinary;
using test::run_command;
using test::TempDir;

const char* kHeader =
    "epoch,epoch_loss,overall_loss,val_loss_epoch,val_loss_avg,train_dice,val_dice,epoch_duration,"
    "optimizer_steps,total_optimizer_steps";

TEST(Benchmark, TrainsToTheTargetDiceAndWritesTheRunFolder) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path(), "target_dice: 0.9\nepochs: 60\n");
  const auto r = run_command(kBinary + " benchmark -c " + cfg.string() + " --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Trained to >= 0.9 validation dice score in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("FOM = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("phase wall times: fractals"), std::string::npos) << r.output;

  const fs::path run = test::only_run_dir(dir.path());
  EXPECT_TRUE(std::regex_match(run.filename().string(), std::regex(R"(benchmark_\d{8}-\d{6})")))
      << run;
  for (const char* f : {"config.yaml", "overrides.yaml", "base_config.yaml", "restart.sh",
                        "train_stats.csv", "figures/train_loss.png", "figures/val_dice.png",
                        "figures/val_loss.png"})
    EXPECT_TRUE(fs::is_regular_file(run / f)) << f;
  EXPECT_EQ(core::read_file(run / "base_config.yaml"), core::read_file(cfg));

  const auto rows = test::csv_rows(run / "train_stats.csv");
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(core::read_file(run / "train_stats.csv").substr(0, std::string(kHeader).size()), kHeader);
  const auto& last = rows.back();
  ASSERT_EQ(last.size(), 10u);
  EXPECT_GE(std::stod(last[6]), 0.9) << "the last row is the converging epoch";
  for (std::size_t i = 1; i + 1 < rows.size(); ++i) EXPECT_LT(std::stod(rows[i][6]), 0.9) << "row " << i;
  EXPECT_EQ(std::stoll(last[0]), static_cast<long long>(rows.size() - 1));
  // 16 volumes: 12 training in 6 steps of batch 2 per epoch.
  EXPECT_EQ(std::stoll(last[8]), 6);
  EXPECT_EQ(std::stoll(last[9]), 6 * std::stoll(last[0]));

  // config.yaml reloads as a config (here: to reuse the same dataset).
  const auto reload = run_command(kBinary + " generate_dataset -c " + (run / "config.yaml").string());
  EXPECT_EQ(reload.exit_code, 0) << reload.output;
  EXPECT_NE(reload.output.find("dataset: reusing"), std::string::npos) << reload.output;
}

TEST(Benchmark, RestartFromACheckpointContinuesTheSameRun) {
  TempDir full_dir, cut_dir;
  const std::string common = "checkpoint_interval: 1\ntarget_dice: 0.999\n";
  // Uninterrupted: 4 epochs.
  auto full = run_command(kBinary + " benchmark --threads 1 --epochs 4 -c " +
                          test::write_tiny_benchmark_config(full_dir.path(), common).string());
  ASSERT_EQ(full.exit_code, 0) << full.output;
  // Interrupted after epoch 2, then resumed by restart.sh up to epoch 4.
  auto cut = run_command(kBinary + " benchmark --threads 1 --epochs 2 -c " +
                         test::write_tiny_benchmark_config(cut_dir.path(), common).string());
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const fs::path run = test::only_run_dir(cut_dir.path());
  EXPECT_TRUE(fs::is_regular_file(run / "checkpoints" / "checkpoint_last"));
  const auto resumed = run_command("bash " + (run / "restart.sh").string() + " --epochs 4");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;

  const auto a = test::csv_rows(test::only_run_dir(full_dir.path()) / "train_stats.csv");
  const auto b = test::csv_rows(run / "train_stats.csv");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u) << core::read_file(run / "train_stats.csv");
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t c = 0; c < a[i].size(); ++c) {
      if (i > 0 && c == 7) continue;  // epoch_duration is a wall time
      EXPECT_EQ(a[i][c], b[i][c]) << "row " << i << " column " << c;
    }
}

// SIGTERM (or the scheduler's warning signal) mid-epoch: the step in flight finishes, the run
// exits 3 with train_stats.csv and summary.json complete up to the last finished epoch, whose
// state is saved although checkpoint_interval (3) did not fall on it; restart.sh then writes the
// same rows as an uninterrupted run.
TEST(Benchmark, ASignalStopsCleanlyAndTheRestartEqualsAnUninterruptedRun) {
  TempDir full_dir, cut_dir;
  const std::string common = "checkpoint_interval: 3\ntarget_dice: 0.999\n";
  auto full = run_command(kBinary + " benchmark --threads 1 --epochs 4 -c " +
                          test::write_tiny_benchmark_config(full_dir.path(), common).string());
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const pid_t pid = test::spawn_scaffold(
      {"benchmark", "--threads", "1", "-c", test::write_tiny_benchmark_config(cut_dir.path(), common).string()});
  ASSERT_GT(pid, 0);
  fs::path run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(cut_dir.path() / "runs"))
      for (const auto& e : fs::directory_iterator(cut_dir.path() / "runs")) run = e.path();
    if (!run.empty() && fs::exists(run / "train_stats.csv") && test::csv_rows(run / "train_stats.csv").size() >= 3)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(run.empty());
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const auto cut = test::csv_rows(run / "train_stats.csv");
  ASSERT_GE(cut.size(), 3u);
  ASSERT_LE(cut.size(), 4u) << "stopped in epoch 3 or just after it";
  EXPECT_NE(core::read_file(run / "summary.json").find("\"status\": \"time_limit\""), std::string::npos)
      << core::read_file(run / "summary.json");
  const auto resumed = run_command("bash " + (run / "restart.sh").string() + " --epochs 4");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto a = test::csv_rows(test::only_run_dir(full_dir.path()) / "train_stats.csv");
  const auto b = test::csv_rows(run / "train_stats.csv");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u) << core::read_file(run / "train_stats.csv");
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t c = 0; c < a[i].size(); ++c) {
      if (i > 0 && c == 7) continue;  // epoch_duration is a wall time
      EXPECT_EQ(a[i][c], b[i][c]) << "row " << i << " column " << c;
    }
}

TEST(Benchmark, EnergyOverTheTimedWindowsAndAProfileTrace) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path(), "epochs: 2\n");
  // The GH200 fixture: two modules at 412.5 + 398.0 W, constant, so energy = 810.5 W x duration.
  const std::string fixture = std::string(SCAFFOLD_SOURCE_DIR) + "/tests/fixtures/energy/gh200/hwmon";
  const auto r = run_command("SCAFFOLD_HWMON_ROOT=" + fixture +
                             " SCAFFOLD_POWERCAP_ROOT=/nonexistent PROFILE_TORCH=on " + kBinary +
                             " benchmark --threads 1 -c " + cfg.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("energy of the epochs:"), std::string::npos) << r.output;
  const fs::path run = test::only_run_dir(dir.path());
  const auto rows = test::csv_rows(run / "energy_stats.csv");
  ASSERT_EQ(rows.size(), 1u + 1u + 2u * 2u) << "header, warm-up, train + validation per epoch";
  EXPECT_EQ(rows[1][0], "warmup");
  EXPECT_EQ(rows[2][0], "train");
  EXPECT_EQ(rows[3][0], "validation");
  EXPECT_EQ(rows[5][1], "2");
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const double duration = std::stod(rows[i][3]), energy = std::stod(rows[i][4]);
    EXPECT_NEAR(energy, 810.5 * duration, 1e-6 * energy + 1e-9) << "row " << i;
    EXPECT_NEAR(std::stod(rows[i][6]), 810.5, 1e-6) << "average power, row " << i;
  }
  // The train windows' durations add up with the validation ones to the epoch durations.
  const auto stats = test::csv_rows(run / "train_stats.csv");
  for (int e = 1; e <= 2; ++e)
    EXPECT_NEAR(std::stod(rows[2 * e][3]) + std::stod(rows[2 * e + 1][3]), std::stod(stats[e][7]), 0.05)
        << "epoch " << e;
  // PROFILE_TORCH=on: a Chrome trace with the named regions.
  std::vector<fs::path> traces;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("torch-", 0) == 0) traces.push_back(e.path());
  ASSERT_EQ(traces.size(), 1u);
  const std::string trace = core::read_file(traces.front());
  for (const char* region : {"\"traceEvents\"", "\"run_training_batch\"", "\"predict\"", "\"backward\"",
                             "\"step_and_update\"", "\"init_model\"", "\"warmup\""})
    EXPECT_NE(trace.find(region), std::string::npos) << region;
  EXPECT_TRUE(fs::is_regular_file(run / "system.json"));

  // Without a power source and with PROFILE_TORCH=off: no energy file, no trace, one message.
  TempDir plain;
  const auto q = run_command("SCAFFOLD_HWMON_ROOT=/nonexistent SCAFFOLD_POWERCAP_ROOT=/nonexistent "
                             "PROFILE_TORCH=off " + kBinary + " benchmark --threads 1 -c " +
                             test::write_tiny_benchmark_config(plain.path(), "epochs: 1\n").string());
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_NE(q.output.find("no power source found"), std::string::npos) << q.output;
  const fs::path plain_run = test::only_run_dir(plain.path());
  EXPECT_FALSE(fs::exists(plain_run / "energy_stats.csv"));
  for (const auto& e : fs::directory_iterator(plain_run))
    EXPECT_NE(e.path().filename().string().rfind("torch-", 0), 0u) << e.path();
}

TEST(Benchmark, UsageAndRestartErrors) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path());
  EXPECT_EQ(run_command(kBinary + " benchmark -c " + cfg.string() + " --restart").exit_code, 2);
  const auto missing = run_command(kBinary + " benchmark -c " + cfg.string() + " --run-dir " +
                                   (dir.path() / "nowhere").string());
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("cannot restart"), std::string::npos) << missing.output;
}

// A run whose first write fails (a file-size limit standing in for a full disk; issue 16, item
// 11) ends with exit 1 and one error naming the file and the reason, and leaves neither its run
// folder nor a temporary behind.
TEST(Benchmark, AFirstWriteThatFailsLeavesNoRunFolder) {
  TempDir dir;
  // A config larger than the limit: its copy, base_config.yaml, is the run's first write.
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path(), "# " + std::string(600, '-') + "\n");
  const auto r = run_command("prlimit --fsize=512 " + kBinary + " benchmark -c " + cfg.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/base_config.yaml: write failed: File too large"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((dir.path() / "runs").string()), std::string::npos) << r.output;
  ASSERT_TRUE(fs::is_directory(dir.path() / "runs"));
  EXPECT_TRUE(fs::is_empty(dir.path() / "runs")) << "the empty run folder was left behind";
  EXPECT_TRUE(test::temporaries_below(dir.path()).empty());
}

// A reused dataset that lost a training volume is refused before training (issue 16, item 6):
// exit 1, the missing file named, no epoch trained.
TEST(Benchmark, ADatasetMissingAVolumeIsRefusedBeforeTraining) {
  TempDir dir;
  const fs::path cfg = test::write_tiny_benchmark_config(dir.path(), "epochs: 1\n");
  const auto prepared = run_command(kBinary + " generate_dataset -c " + cfg.string());
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  fs::path volume;
  for (const auto& e : fs::recursive_directory_iterator(dir.path() / "data"))
    if (e.path().parent_path().filename() == "training" && e.path().parent_path().parent_path().filename() == "volumes")
      volume = e.path();
  ASSERT_FALSE(volume.empty());
  fs::remove(volume);
  const auto r = run_command(kBinary + " benchmark -c " + cfg.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("missing volumes/training/" + volume.filename().string()), std::string::npos)
      << r.output;
  const fs::path run = test::only_run_dir(dir.path());
  EXPECT_FALSE(fs::exists(run / "train_stats.csv")) << "training started on the damaged dataset";
}

}  // namespace
}  // namespace scaffold
