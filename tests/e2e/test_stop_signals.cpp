// --stop-signals on every CARAML workload: a run told to stop on SIGUSR1 (a signal that is
// neither default) stops after the step in flight with exit 3, records status time_limit, and its
// restart.sh resumes it. Both spellings of the flag are used: the spaced one before the
// subcommand (`scaffold --stop-signals USR1 fno ...`, once read as a subcommand named USR1) and
// `--stop-signals=USR1` after it. Before the fix, llm_training and fno installed the default
// signals whatever the flag said, so SIGUSR1 killed them (WIFSIGNALED) instead.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using test::run_command;
using test::TempDir;

struct Workload {
  std::string name;
  std::string config;     // a tiny configuration, below base_run_dir and data_dir lines
  std::string stats_csv;  // the per-step or per-epoch file whose rows show progress
  std::string longer;     // the flag that makes the run long, and the one restart.sh gets
  bool spaced_before;     // `--stop-signals USR1 <workload>`, else `<workload> --stop-signals=USR1`
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  w.push_back({"llm_training",
               "model_size: tiny\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"
               "seq_length: 32\nvocab_size: 500\nmicro_batch_size: 2\nglobal_batch_size: 4\n"
               "exit_duration_in_mins: 0\nlog_interval: 2\ntiming_warmup_iters: 2\n"
               "eval_interval: 10\neval_iters: 1\nlr_warmup_samples: 8\nlr_decay_samples: 40\n"
               "synthetic_train_samples: 256\nsynthetic_valid_samples: 16\nsave_interval: 4\n"
               "precision: fp32\n",
               "iteration_stats.csv", "--train-iters", true});
  w.push_back({"fno",
               "problem: burgers1d\ngrid: [64]\ntrain_samples: 32\nval_samples: 8\n"
               "burgers_solver_refinement: 2\nburgers_dt: 0.002\nmodes: [8]\nwidth: 8\nlayers: 2\n"
               "projection_channels: 16\nwarmup_epochs: 1\ncheckpoint_interval: 1\n",
               "epoch_stats.csv", "--epochs", true});
#ifdef SCAFFOLD_TEST_IMAGE_CLASSIFICATION
  w.push_back({"image_classification",
               "model: resnet18\nnum_classes: 4\nimage_size: 32\ndataset: synthetic\n"
               "synthetic_train_images: 64\nsynthetic_val_images: 32\nglobal_batch_size: 32\n"
               "warmup_epochs: 1\nchannels_last: 0\ncheckpoint_interval: 1\n",
               "epoch_stats.csv", "--epochs", false});
#endif
  return w;
}

class StopSignals : public ::testing::TestWithParam<Workload> {};

TEST_P(StopSignals, ANonDefaultSignalStopsCleanlyAndRestartShResumes) {
  const Workload& w = GetParam();
  TempDir dir;
  const fs::path cfg = dir.path() / "tiny.yml";
  std::ofstream(cfg) << w.config << "dataloader_num_workers: 1\n"
                     << "base_run_dir: " << (dir.path() / "runs").string() << "\n"
                     << (w.name == "fno" ? "data_dir: " + (dir.path() / "data").string() + "\n"
                                         : "");
  std::vector<std::string> args;
  if (w.spaced_before)
    args = {"--stop-signals", "USR1", w.name};
  else
    args = {w.name, "--stop-signals=USR1"};
  for (const std::string& a : {std::string("--threads"), std::string("1"), w.longer,
                               std::string("100000"), std::string("-c"), cfg.string()})
    args.push_back(a);
  const pid_t pid = test::spawn_scaffold(args);
  ASSERT_GT(pid, 0);
  const fs::path run =
      test::wait_for_csv_lines(dir.path(), w.stats_csv, 3, std::chrono::seconds(180));
  ASSERT_FALSE(run.empty());
  const int status = test::signal_and_wait(pid, SIGUSR1);
  ASSERT_TRUE(WIFEXITED(status)) << w.name << " was ended by signal " << WTERMSIG(status)
                                 << " instead of stopping on it";
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(s.at("status"), "time_limit");
  const auto rows = test::csv_rows(run / w.stats_csv);
  ASSERT_GE(rows.size(), 3u);
  // restart.sh repeats the command line, --stop-signals included, and continues the run.
  const std::string restart = core::read_file(run / "restart.sh");
  EXPECT_NE(restart.find("USR1"), std::string::npos) << restart;
  const long long done = std::stoll(rows.back()[0]);
  const long long more = w.name == "llm_training" ? done + 2 : static_cast<long long>(rows.size());
  const auto resumed = run_command("bash " + (run / "restart.sh").string() + " " + w.longer + " " +
                                   std::to_string(more));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  const auto after = test::csv_rows(run / w.stats_csv);
  EXPECT_GT(after.size(), rows.size()) << core::read_file(run / w.stats_csv);
  for (std::size_t i = 1; i < rows.size(); ++i)
    EXPECT_EQ(after[i], rows[i]) << "row " << i << " kept";
}

INSTANTIATE_TEST_SUITE_P(Workloads, StopSignals, ::testing::ValuesIn(workloads()),
                         [](const ::testing::TestParamInfo<Workload>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace scaffold
