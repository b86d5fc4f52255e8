// End-to-end tests of `scaffold fno` at a tiny size (1-D Burgers, 64 points, generated in situ):
// the run learns (the held-out relative L2 error falls below a stated bound), the second run
// reuses the cached dataset, summary.json's figures are recomputed here from epoch_stats.csv by
// CARAML's definitions, `scaffold report` prints CARAML's columns with the same numbers, a
// sharded run (tp_size 2 on 2 ranks) gives the losses of one process, the warning signal stops
// cleanly with complete files and restart.sh resumes, and bad input is one clear error with no
// run folder.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
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

// Burgers (nu 0.1) on 64 points, solved on 128: 128 training and 16 held-out examples; an FNO of
// 2 layers, 8 modes, width 16; 1 warm-up and 30 timed epochs of batch 4, validation batch 1.
fs::path write_tiny_config(const fs::path& dir, const std::string& extra = "") {
  const fs::path cfg = dir / "tiny_fno.yml";
  std::ofstream(cfg)
      << "problem: burgers1d\ngrid: [64]\ntrain_samples: 128\nval_samples: 16\n"
      << "burgers_solver_refinement: 2\nburgers_dt: 0.002\n"
      << "modes: [8]\nwidth: 16\nlayers: 2\nprojection_channels: 32\n"
      << "epochs: 30\nwarmup_epochs: 1\nlearning_rate: 0.003\nlr_step_size: 10\nlr_gamma: 0.5\n"
      << "dataloader_num_workers: 1\nprogress_timeout_s: 600\n"
      << "data_dir: " << (dir / "data").string() << "\n"
      << "base_run_dir: " << (dir / "runs").string() << "\n"
      << extra;
  return cfg;
}

double counter(const nlohmann::json& summary, const std::string& name) {
  for (const auto& c : summary.at("counters"))
    if (c.at("name") == name)
      return c.at("value").is_null() ? std::nan("") : c.at("value").get<double>();
  ADD_FAILURE() << "no counter " << name;
  return 0.0;
}

std::string param(const nlohmann::json& summary, const std::string& name) {
  for (const auto& [k, v] : summary.at("params").items())
    if (k == name) return v.get<std::string>();
  ADD_FAILURE() << "no param " << name;
  return "";
}

// epoch_stats.csv columns: epoch,warmup,train_rel_l2,val_rel_l2,val_mse,lr,duration_s,train_s,
// validation_s,monitor_s,checkpoint_s,train_samples,val_samples,median_step_s
enum Col {
  kEpoch,
  kWarmup,
  kTrainL2,
  kValL2,
  kValMse,
  kLr,
  kDuration,
  kTrain,
  kVal,
  kMonitor,
  kCheckpoint,
  kTrainSamples,
  kValSamples,
  kMedianStep,
  kColumns
};

// The held-out error the tiny run must reach (measured: best epoch 0.018-0.024 of 30, 2 threads;
// the first epoch's is about 0.5).
constexpr double kTinyRelL2Bound = 0.05;
// The recurrent two-step rollout of the same problem, 15 timed epochs (measured: warm-up 0.097,
// last 0.023 on 2 threads; the direct 2-output model ends at 0.066 on the same schedule).
constexpr int kRecurrentEpochs = 15;
constexpr double kRecurrentRelL2Bound = 0.05;

std::vector<double> val_errors(const fs::path& run) {
  std::vector<double> v;
  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  for (std::size_t i = 1; i < rows.size(); ++i) v.push_back(std::stod(rows[i][kValL2]));
  return v;
}

// At lr 3e-3 on 128 examples the held-out error of this tiny run swings up to 10x from one epoch
// to the next (0.02 to 0.22 in the last epochs), so the last epoch's value is luck: a one-ulp
// change upstream (a fused optimiser, another CPU's kernels) moves it across any bound. Learning
// is judged by the best timed epoch, which must reach the bound, and by the median of the last
// `late` epochs, which must stay within twice the bound or half the warm-up epoch's error,
// whichever is larger: a model that stopped learning stays near the warm-up's error. (Measured:
// 0.067 and 0.081 over the last 10 of 30 epochs with two optimisers on one machine, 0.12 on an
// AMD Zen 4 whose warm-up epoch gave 0.50, with single epochs from 0.014 to 0.35 among the last
// 10; 0.045 over the last 5 of the recurrent run's 15.)
void expect_learned(const std::vector<double>& errors, std::size_t late, double bound) {
  ASSERT_GT(errors.size(), late);
  const double best = *std::min_element(errors.begin() + 1, errors.end());
  std::vector<double> tail(errors.end() - static_cast<std::ptrdiff_t>(late), errors.end());
  std::nth_element(tail.begin(), tail.begin() + tail.size() / 2, tail.end());
  const double late_median = tail[tail.size() / 2];
  EXPECT_LT(best, bound) << "best held-out relative L2 of the timed epochs";
  EXPECT_LT(late_median, std::max(2 * bound, 0.5 * errors.front()))
      << "median held-out relative L2 of the last " << late
      << " epochs (the warm-up epoch's: " << errors.front() << ")";
}

TEST(Fno, LearnsAndRecordsCaramlsFigures) {
  TempDir dir;
  const auto r =
      run_command(kBinary + " fno --threads 2 -c " + write_tiny_config(dir.path()).string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data: generated"), std::string::npos) << r.output;
  const fs::path run = test::only_run_dir(dir.path());
  for (const char* f : {"config.yaml", "overrides.yaml", "base_config.yaml", "restart.sh",
                        "system.json", "summary.json", "epoch_stats.csv"})
    EXPECT_TRUE(fs::is_regular_file(run / f)) << f;
  // system.json names the spectral mode mixing, the transforms, the projection and the pointwise
  // branches the run used (the defaults on a CPU), and the transforms' probe: one shape in
  // training and validation.
  const nlohmann::json sys = nlohmann::json::parse(core::read_file(run / "system.json"));
  EXPECT_EQ(sys.at("kernels"),
            nlohmann::json::array({"spectral_mixing=real", "spectral_transform=probe",
                                   "projection=fused", "pointwise=fused"}))
      << sys.dump();
  const auto probes = sys.at("kernel_probes").get<std::vector<std::string>>();
  ASSERT_FALSE(probes.empty()) << sys.dump();
  for (const std::string& p : probes)
    EXPECT_TRUE(p.rfind("spectral x ", 0) == 0 &&
                (p.find("-> dft") != std::string::npos || p.find("-> fft") != std::string::npos))
        << p;

  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 1u + 31u) << core::read_file(run / "epoch_stats.csv");
  ASSERT_EQ(rows[0].size(), static_cast<std::size_t>(kColumns));
  // The loss falls (expect_learned: the best epoch reaches the bound, the late ones stay low).
  expect_learned(val_errors(run), 10, kTinyRelL2Bound);
  EXPECT_LT(std::stod(rows.back()[kTrainL2]), std::stod(rows[1][kTrainL2]));

  // CARAML's figures, recomputed from the timed rows (train_fno.py's definitions).
  double epoch_s = 0, train_s = 0, compute_s = 0, monitor_s = 0, checkpoint_s = 0, train_n = 0,
         val_n = 0;
  int timed = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& c = rows[i];
    EXPECT_EQ(c[kWarmup], i == 1 ? "1" : "0");
    if (c[kWarmup] == "1") continue;
    ++timed;
    epoch_s += std::stod(c[kDuration]) + std::stod(c[kMonitor]) + std::stod(c[kCheckpoint]);
    train_s += std::stod(c[kTrain]);
    compute_s += std::stod(c[kTrain]) + std::stod(c[kVal]);
    monitor_s += std::stod(c[kMonitor]);
    checkpoint_s += std::stod(c[kCheckpoint]);
    train_n += std::stod(c[kTrainSamples]);
    val_n += std::stod(c[kValSamples]);
    EXPECT_EQ(c[kTrainSamples], "128");
    EXPECT_EQ(c[kValSamples], "16");
  }
  // StepLR(10, 0.5) over all epochs (warm-up included): epochs 1-10 at lr, 11-20 at lr / 2, ...
  EXPECT_NEAR(std::stod(rows[10][kLr]), 0.003, 1e-12);
  EXPECT_NEAR(std::stod(rows[11][kLr]), 0.0015, 1e-12);
  EXPECT_NEAR(std::stod(rows[31][kLr]), 0.000375, 1e-12);

  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  const auto near = [](double got, double want) {
    EXPECT_NEAR(got, want, 1e-9 * std::max(1.0, std::abs(want)));
  };
  EXPECT_EQ(s.at("workload"), "fno");
  EXPECT_EQ(s.at("status"), "completed");
  EXPECT_EQ(s.at("global_batch"), 4);
  EXPECT_EQ(s.at("epochs"), timed);
  near(counter(s, "total_epoch_time_s"), epoch_s);
  near(counter(s, "total_train_time_s"), train_s);
  near(counter(s, "total_compute_time_s"), compute_s);
  near(counter(s, "total_monitor_time_s"), monitor_s);
  near(counter(s, "total_checkpoint_time_s"), checkpoint_s);
  near(counter(s, "train_time_per_epoch_min"), train_s / timed / 60);
  near(counter(s, "timesteps"), train_n + val_n);  // one predicted time step per example
  near(counter(s, "train_timesteps"), train_n);
  near(counter(s, "timesteps_per_s"), (train_n + val_n) / compute_s);
  near(counter(s, "train_timesteps_per_s"), train_n / train_s);
  near(counter(s, "val_rel_l2"), std::stod(rows.back()[kValL2]));
  // The paper's 1-D FNO: lift 16 x (1 + 1) + 16, 2 layers of 16 x 16 x 8 complex weights (x2) and
  // 16 x 16 + 16 pointwise, projection 32 x 16 + 32 and 1 x 32 + 1.
  EXPECT_EQ(counter(s, "parameters"), 48 + 2 * (2 * 16 * 16 * 8 + 272) + 544 + 33);
  const double flops = counter(s, "forward_flop_per_example");
  near(counter(s, "tflop_per_epoch"), (3 * train_n + val_n) * flops / timed / 1e12);
  EXPECT_EQ(param(s, "problem"), "burgers1d");
  EXPECT_EQ(param(s, "grid"), "64");
  EXPECT_EQ(param(s, "viscosity"), "0.1");
  EXPECT_LT(r.output.rfind("Timesteps/s: "), r.output.size()) << "the headline line";

  // scaffold report: CARAML's columns with the same numbers.
  const auto rep = run_command(kBinary + " report --format csv " + run.string());
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  std::istringstream lines(rep.output);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_EQ(
      header.rfind(
          "JobID,System,Version,Queue,Nodes,TotalDevices,DataParallel,GridShards,Problem,Config,"
          "ModelParam (Million),ModelSize "
          "(MB),Grid,GlobalBatchSize,LocalBatchSize,MicroBatchSize,GAS,"
          "InputShape,Runtime (min),Epochs,MixedPrecision,ComplexMixedPrecision,CompileMode,"
          "MeanCompileTime (s),TrainTime/Epoch (min),TotalEpochTime (s),TotalTrainTime (s),"
          "TotalComputeTime (s),TotalMonitorTime (s),TotalCheckpointTime (s),Timesteps,"
          "Timesteps/second,TrainTimesteps,TrainTimesteps/second,PeakFwdMem (MB),PersistentMem "
          "(MB),"
          "ActivationMem (MB),TFLOPs,Energy/GPU (Wh),TotalEnergy (Wh)",
          0),
      0u)
      << header;
  EXPECT_NE(row.find(",1,1,1,1,burgers1d,tiny_fno.yml,"), std::string::npos) << header << "\n"
                                                                             << row;
  EXPECT_NE(row.find(fmt::format(",{:.0f},", train_n + val_n)), std::string::npos) << row;

  // A second run with the same data keys reuses the cached dataset.
  const auto again = run_command(kBinary + " fno --threads 2 --epochs 1 --job-name again -c " +
                                 write_tiny_config(dir.path()).string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("data: reused"), std::string::npos) << again.output;
}

// CARAML's JUBE patterns for the FNO benchmark (operator_benchmark/fno_benchmark.yaml,
// patternset perf_patterns), transcribed with JUBE's macros expanded to their definitions
// (jube2/pattern.py): $jube_pat_int = ([+-]?\d+), $jube_pat_fp =
// ([+-]?(?:\d*\.?\d+(?:[eE][-+]?\d+)?|\d+\.)).
const std::string kInt = R"(([+-]?\d+))";
const std::string kFp = R"(([+-]?(?:\d*\.?\d+(?:[eE][-+]?\d+)?|\d+\.)))";
const std::map<std::string, std::string>& caraml_patterns() {
  static const std::map<std::string, std::string> p = {
      {"epochs", "NumEpochs: *" + kInt},
      {"epochtime", R"(TotalEpochTime \(s\): *)" + kFp},
      {"monitortime", R"(TotalMonitorTime \(s\): *)" + kFp},
      {"checkpointtime", R"(TotalCheckpointTime \(s\): *)" + kFp},
      {"computetime", R"(TotalComputeTime \(s\): *)" + kFp},
      {"traintime", R"(TotalTrainTime \(s\): *)" + kFp},
      {"traintimeepoch", R"(Train Epoch\s*[0-9]+\s*time\s*\[min\]:\s*)" + kFp},
      {"compiletime", R"(Eager train time \(epoch\s*[0-9]+\):\s*)" + kFp + R"(\s*s)"},
      {"trainsamples", "TotalTrainTimesteps: *" + kInt},
      {"trainsamples_per_sec", R"(TrainTimesteps/s: *(\d+))"},
      {"samples", "TotalTimesteps: *" + kInt},
      {"samples_per_sec", R"(Timesteps/s: *(\d+))"},
      {"grid", R"(-- grid shape\s*:\s*(\([^)]+\)))"},
      {"globalbs", "Using GlobalBatchSize: *" + kInt},
      {"effective_dp", "Using an effective DDP size: *" + kInt},
      {"tp", "Input sharding with *" + kInt},
      {"model_param", "Total number of model parameters: *" + kFp},
      {"fwd_mem", "CUDA Memory for Fwd Pass - Allocated per Epoch: *" + kFp},
      {"bwd_mem", "CUDA Memory for Bwd Pass - Allocated per Epoch: *" + kFp},
      {"act_mem", "Estimate Activations Memory per Epoch: *" + kFp},
      {"tflops", "Total TFLOPs per epoch = " + kFp}};
  return p;
}

// Every match's first group, in order (JUBE keeps them all: _last, _avg, ...).
std::vector<std::string> matches(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1].str());
  return out;
}

// operator_learning's printed lines on stdout (the logger's lines are on stderr): every CARAML
// pattern matches, and each value agrees with summary.json and epoch_stats.csv within the
// printed rounding (round(x, 3) for the totals, 4 decimals for the eager train times, int() for
// the rates). The run also exercises configs/fno.yml's new keys: the update target scaled by
// 1000, no biases, the per-field relative loss, and cosine annealing with T_max 4, whose learning
// rates epoch_stats.csv must show (lr x (1 + cos(pi (epoch - 1) / 4)) / 2).
TEST(Fno, PrintsOperatorLearningsLinesForCaramlsPatterns) {
  TempDir dir;
  const fs::path err = dir.path() / "stderr.txt";
  const auto r = run_command("(" + kBinary + " fno --threads 2 --epochs 3 --target update " +
                             "--target-scaling 1000 --bias 0 --lr-scheduler cosine --lr-t-max 4 " +
                             "--loss field_relative_l2 " + "-c " +
                             write_tiny_config(dir.path()).string() + " 2>" + err.string() + ")");
  ASSERT_EQ(r.exit_code, 0) << r.output << core::read_file(err);
  const std::string& out = r.output;  // stdout only
  EXPECT_EQ(out.find("][rank="), std::string::npos) << "no logger line on stdout\n" << out;
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& [name, pattern] : caraml_patterns()) {
    got[name] = matches(out, pattern);
    EXPECT_FALSE(got[name].empty()) << name << ": " << pattern << " not found in\n" << out;
  }
  if (::testing::Test::HasFailure()) return;
  const fs::path run = test::only_run_dir(dir.path());
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 1u + 4u);
  const auto num = [&](const char* name) { return std::stod(got.at(name).back()); };
  const double rounding = 5e-4 + 1e-9;  // round(x, 3)
  EXPECT_EQ(num("epochs"), s.at("epochs").get<double>());
  EXPECT_EQ(num("epochs"), 3);
  EXPECT_NEAR(num("epochtime"), counter(s, "total_epoch_time_s"), rounding);
  EXPECT_NEAR(num("monitortime"), counter(s, "total_monitor_time_s"), rounding);
  EXPECT_NEAR(num("checkpointtime"), counter(s, "total_checkpoint_time_s"), rounding);
  EXPECT_NEAR(num("computetime"), counter(s, "total_compute_time_s"), rounding);
  EXPECT_NEAR(num("traintime"), counter(s, "total_train_time_s"), rounding);
  EXPECT_EQ(num("trainsamples"), counter(s, "train_timesteps"));
  EXPECT_EQ(num("samples"), counter(s, "timesteps"));
  EXPECT_EQ(num("trainsamples_per_sec"), std::floor(counter(s, "train_timesteps_per_s")));
  // 'Timesteps/s: *(\d+)' also matches the TrainTimesteps/s line; CARAML takes the last match.
  EXPECT_EQ(num("samples_per_sec"), std::floor(counter(s, "timesteps_per_s")));
  EXPECT_EQ(got.at("grid").back(), "(64)");
  EXPECT_EQ(num("globalbs"), s.at("global_batch").get<double>());
  EXPECT_EQ(num("effective_dp"), 1);
  EXPECT_EQ(num("tp"), 1);
  EXPECT_EQ(num("model_param"), counter(s, "parameters"));
  // No biases: the first test's model less its 16 + 2 x 16 + 32 + 1 biases.
  EXPECT_EQ(counter(s, "parameters"), 48 + 2 * (2 * 16 * 16 * 8 + 272) + 544 + 33 - 81);
  EXPECT_NEAR(num("fwd_mem"), counter(s, "peak_forward_memory_mb"), 0.005 + 1e-9);
  EXPECT_NEAR(num("bwd_mem"), counter(s, "persistent_memory_mb"), 0.005 + 1e-9);
  EXPECT_NEAR(num("act_mem"), counter(s, "activation_memory_mb"), 0.005 + 1e-9);
  // One eager train time, train time [min] and TFLOPs line per epoch, warm-up included, each
  // from that epoch's row; MeanCompileTime (eager) is the mean after the first epoch.
  ASSERT_EQ(got.at("compiletime").size(), 4u);
  ASSERT_EQ(got.at("traintimeepoch").size(), 4u);
  ASSERT_EQ(got.at("tflops").size(), 4u);
  const double flops = counter(s, "forward_flop_per_example");
  double later = 0.0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const double train_s = std::stod(rows[i][kTrain]);
    EXPECT_NEAR(std::stod(got.at("compiletime")[i - 1]), train_s, 5e-5 + 1e-9) << "epoch " << i;
    EXPECT_NEAR(std::stod(got.at("traintimeepoch")[i - 1]), train_s / 60, 1e-9) << "epoch " << i;
    EXPECT_NEAR(std::stod(got.at("tflops")[i - 1]),
                3 * flops * std::stod(rows[i][kTrainSamples]) / train_s / 1e12,
                1e-6 * std::stod(got.at("tflops")[i - 1]))
        << "epoch " << i;
    if (i > 1) later += train_s;
    // CosineAnnealingLR(T_max 4) stepped once per epoch from 0.003.
    const double pi = std::acos(-1.0);
    EXPECT_NEAR(std::stod(rows[i][kLr]),
                0.003 * (1 + std::cos(pi * static_cast<double>(i - 1) / 4.0)) / 2, 1e-12)
        << "epoch " << i;
  }
  EXPECT_NEAR(counter(s, "mean_compile_time_s"), later / 3, 1e-9);
  const auto mean_line = matches(out, R"(MeanCompileTime \(s\): *)" + kFp);
  ASSERT_EQ(mean_line.size(), 1u) << out;
  EXPECT_NEAR(std::stod(mean_line[0]), later / 3, rounding);
  EXPECT_EQ(param(s, "target"), "update");
  EXPECT_EQ(param(s, "bias"), "0");
  EXPECT_EQ(param(s, "lr_scheduler"), "cosine");
  EXPECT_EQ(param(s, "loss"), "field_relative_l2");
  // The update target is learnable: the held-out relative L2 error of the update falls.
  EXPECT_LT(std::stod(rows.back()[kValL2]), std::stod(rows[1][kValL2]));
}

// The grid split over 2 ranks (CARAML's input sharding, distributed FFT): the same model, the
// same batches, the same errors as one process over the warm-up and 2 epochs. Later epochs are
// not compared: at lr 3e-3 this tiny run is chaotic enough that the roundoff of the two
// summation orders (a partial DFT per rank vs one FFT) passes 1e-4 by its 4th epoch; the sharded
// model itself equals the unsharded one to 1e-5 in outputs and gradients (test_fno_sharded_mpi).
TEST(Fno, ShardedRunOnTwoRanksGivesTheErrorsOfOneProcess) {
  TempDir dir;
  const std::string cfg = write_tiny_config(dir.path()).string() + " --epochs 2";
  const auto one = run_command(kBinary + " fno --threads 1 --job-name one -c " + cfg);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = run_command(test::mpiexec(2) + kBinary +
                               " fno --threads 1 --tp-size 2 --job-name tp2 -c " + cfg);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  std::map<std::string, fs::path> runs;
  for (const auto& e : fs::directory_iterator(dir.path() / "runs"))
    runs[e.path().filename().string().substr(0, 3)] = e.path();
  ASSERT_EQ(runs.size(), 2u);
  const auto a = val_errors(runs.at("one")), b = val_errors(runs.at("tp2"));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(b[i], a[i], 1e-4 * a[i]) << "epoch " << i + 1;
  const nlohmann::json s = nlohmann::json::parse(core::read_file(runs.at("tp2") / "summary.json"));
  EXPECT_EQ(s.at("ranks"), 2);
  EXPECT_EQ(param(s, "tp_size"), "2");
  EXPECT_EQ(param(s, "data_parallel"), "1");
  EXPECT_GT(counter(s, "dist_fft_bytes"), 0);
}

// Recurrent time stepping (the paper's FNO-2D rollout) on Burgers u(0) -> u(T/2), u(T): the
// model predicts one step (the parameters of a one-output model), is fed its prediction, learns
// the two-step trajectory, and its FLOPs per example are the two forwards of a rollout (eval
// mode's TFLOP against a direct one-step eval of the same model size).
TEST(Fno, RecurrentTimeSteppingLearnsATwoStepRollout) {
  TempDir dir;
  const std::string cfg = write_tiny_config(dir.path()).string();
  const auto r =
      run_command(kBinary + " fno --threads 2 --time-stepping recurrent --t-out 2 --epochs " +
                  std::to_string(kRecurrentEpochs) + " --job-name rec -c " + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("a rollout of 2 one-step forwards"), std::string::npos) << r.output;
  const fs::path run = test::only_run_dir(dir.path());
  const auto errors = val_errors(run);
  ASSERT_EQ(errors.size(), 1u + kRecurrentEpochs);
  expect_learned(errors, 5, kRecurrentRelL2Bound);
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(param(s, "time_stepping"), "recurrent");
  EXPECT_EQ(param(s, "t_out"), "2");
  // One output channel: the first test's one-step model, not a 2-output one (+ 32 + 1).
  EXPECT_EQ(counter(s, "parameters"), 48 + 2 * (2 * 16 * 16 * 8 + 272) + 544 + 33);
  // Timesteps count both predicted steps of every example.
  EXPECT_NEAR(counter(s, "timesteps"), 2.0 * (128 + 16) * kRecurrentEpochs, 1e-9);

  const std::string eval =
      kBinary + " fno --threads 1 --mode eval --eval-iterations 2 --eval-warmup 0 -c " + cfg;
  const auto direct = run_command(eval + " --job-name evd");
  const auto rollout = run_command(eval + " --job-name evr --time-stepping recurrent --t-out 2");
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  ASSERT_EQ(rollout.exit_code, 0) << rollout.output;
  std::map<std::string, fs::path> runs;
  for (const auto& e : fs::directory_iterator(dir.path() / "runs"))
    runs[e.path().filename().string().substr(0, 3)] = e.path();
  const auto tflop = [&](const char* name) {
    return counter(nlohmann::json::parse(core::read_file(runs.at(name) / "summary.json")),
                   "eval_tflop");
  };
  EXPECT_NEAR(tflop("evr"), 2.0 * tflop("evd"), 1e-9 * tflop("evd")) << "two forwards per example";
}

// The scheduler's warning signal mid-run: the epoch in flight finishes, the epochs done are
// complete on disk, summary.json says time_limit with its figures, the exit status is 3, and
// restart.sh continues after the last epoch with the earlier rows kept.
TEST(Fno, AWarningSignalStopsCleanlyAndRestartResumes) {
  TempDir dir;
  const fs::path cfg = write_tiny_config(dir.path(), "checkpoint_interval: 1\n");
  const pid_t pid =
      test::spawn_scaffold({"fno", "--threads", "1", "--epochs", "100000", "-c", cfg.string()});
  ASSERT_GT(pid, 0);
  const fs::path run =
      test::wait_for_csv_lines(dir.path(), "epoch_stats.csv", 4, std::chrono::seconds(120));
  ASSERT_FALSE(run.empty());
  const int status = test::signal_and_wait(pid, SIGUSR2);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by a signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_GE(rows.size(), 4u);
  const long long done = std::stoll(rows.back()[kEpoch]);
  EXPECT_EQ(done, static_cast<long long>(rows.size() - 1)) << "consecutive epochs";
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(s.at("status"), "time_limit");
  EXPECT_EQ(s.at("epochs"), done - 1) << "timed epochs: all but the warm-up";
  EXPECT_GT(counter(s, "timesteps_per_s"), 0);
  EXPECT_GT(counter(s, "total_checkpoint_time_s"), 0) << "a checkpoint after every epoch";

  // Resume: 2 more timed epochs after the last completed one.
  const auto resumed = run_command("bash " + (run / "restart.sh").string() + " --epochs " +
                                   std::to_string(done - 1 + 2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  const auto after = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(after.size(), rows.size() + 2) << core::read_file(run / "epoch_stats.csv");
  EXPECT_EQ(std::stoll(after.back()[kEpoch]), done + 2);
  // Every row written before the stop, the last one (epoch `done`, with its checkpoint time)
  // included, survives the resume unchanged.
  for (std::size_t i = 1; i < rows.size(); ++i)
    EXPECT_EQ(after[i], rows[i]) << "row " << i << " kept";
}

TEST(Fno, AnEditedCachedFileIsRefusedBeforeTraining) {
  TempDir dir;
  const std::string cmd = kBinary + " fno -c " + write_tiny_config(dir.path()).string() +
                          " --epochs 1 --warmup-epochs 0 --train-samples 8 --val-samples 2";
  const auto first = run_command(cmd);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  fs::path file;
  for (const auto& e : fs::recursive_directory_iterator(dir.path() / "data"))
    if (e.path().filename() == "000003_target.npy") file = e.path();
  ASSERT_FALSE(file.empty());
  {  // one float of the data, in place: same size, finite
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    const float value = 0.5f;
    f.write(reinterpret_cast<const char*>(&value), sizeof value);
  }
  const auto r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("train/000003_target.npy"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("timed epochs after"), std::string::npos) << "refused before training\n"
                                                                    << r.output;
}

// CARAML's RBC3D through the whole benchmark at a tiny size: configs/fno_rbc3d.yml (its 3-D FNO,
// 5 fields, next-state target) on 3-D Rayleigh-Benard data generated in situ (16 x 16 x 9, Ra 1e4,
// 2 + 1 trajectories of 9 states), 6 timed epochs of batch 2 at lr 1e-2. The data's layout, the
// model's shape, CARAML's grid line and the eval mode's input shape come from the 3-D problem,
// and the model learns (measured: the held-out error falls from 0.997 to 0.66; the test asks for
// 0.9 of the first epoch's).
TEST(Fno, Rbc3dTrainsTheThreeDimensionalModelOnThreeDimensionalConvection) {
  TempDir dir;
  const fs::path cfg = dir.path() / "tiny_rbc3d.yml";
  std::ofstream(cfg) << "grid: [16, 16, 9]\ntrain_samples: 16\nval_samples: 8\n"
                     << "rbc_rayleigh: 1.0e+4\nrbc_aspect: 2.0\nrbc_dt: 0.05\n"
                     << "rbc_spinup_time: 2.0\nrbc_states: 9\nrbc_record_steps: 2\n"
                     << "rbc_noise_amplitude: 0.1\nmodes: [4, 4, 3]\nwidth: 8\n"
                     << "projection_channels: 16\nepochs: 6\nwarmup_epochs: 1\n"
                     << "batch_size: 2\nlearning_rate: 0.01\ncheckpoint_interval: 0\n"
                     << "data_dir: " << (dir.path() / "data").string() << "\n"
                     << "base_run_dir: " << (dir.path() / "runs").string() << "\n";
  const std::string configs =
      " -c " + std::string(SCAFFOLD_SOURCE_DIR) + "/configs/fno_rbc3d.yml -c " + cfg.string();
  const auto r = run_command(kBinary + " fno --threads 2" + configs + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(matches(r.output, R"(-- grid shape\s*:\s*(\([^)]+\)))"),
            std::vector<std::string>{"(16, 16, 9)"})
      << r.output;
  const fs::path run = test::only_run_dir(dir.path());
  const nlohmann::json s = nlohmann::json::parse(core::read_file(run / "summary.json"));
  EXPECT_EQ(param(s, "problem"), "rbc3d");
  EXPECT_EQ(param(s, "grid"), "16x16x9");
  // The data: one (states, 5, 16, 16, 9) file per trajectory.
  std::vector<fs::path> metas;
  for (const auto& e : fs::recursive_directory_iterator(dir.path() / "data"))
    if (e.path().filename() == "meta.json") metas.push_back(e.path());
  ASSERT_EQ(metas.size(), 1u);
  const nlohmann::json meta = nlohmann::json::parse(core::read_file(metas[0]));
  EXPECT_EQ(meta.at("layout").at("files_per_sample").at(0).at("shape"),
            (std::vector<int64_t>{9, 5, 16, 16, 9}));
  // 5 fields in and out, widened to 8, 4 x 4 x 3 modes: the model's parameter count by hand.
  // Lifting 4 layers 5 -> 16 -> 16 -> 16 -> 8, two Fourier layers (complex weights 8 x 8 x
  // (2 x 4) x (2 x 4) x 3, counted twice, plus the 8 x 8 pointwise path), projection 4 layers
  // 8 -> 16 -> 16 -> 16 -> 5; no biases (configs/fno_rbc3d.yml).
  const double lifting = 5 * 16 + 16 * 16 + 16 * 16 + 16 * 8;
  const double fourier = 2 * (2 * 8 * 8 * 8 * 8 * 3 + 8 * 8);
  const double projection = 8 * 16 + 16 * 16 + 16 * 16 + 16 * 5;
  EXPECT_EQ(counter(s, "parameters"), lifting + fourier + projection);
  const auto rows = test::csv_rows(run / "epoch_stats.csv");
  ASSERT_EQ(rows.size(), 1u + 7u);
  EXPECT_LT(std::stod(rows.back()[kValL2]), 0.9 * std::stod(rows[1][kValL2]));
  // eval: CARAML's input shape for RBC3D is [20, 5, 64, 64, 32]; here the tiny grid's.
  const auto e = run_command(kBinary + " fno --mode eval --eval-batch-size 2 --eval-iterations 1" +
                             " --eval-warmup 0 --threads 2" + configs + " 2>&1");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("[2, 5, 16, 16, 9]"), std::string::npos) << e.output;
}

TEST(Fno, BadInputIsOneClearErrorAndNoRunFolder) {
  TempDir dir;
  const std::string cfg = write_tiny_config(dir.path()).string();
  struct Case {
    std::string flags, needle;
  };
  for (const Case& c :
       std::vector<Case>{{"--modes 40", "modes"},
                         {"--problem heat", "one of burgers1d, navier_stokes2d, rbc2d"},
                         {"--grid 64 64", "one even entry [N] for burgers1d"},
                         {"--problem rbc3d --grid 64 32", "three entries [nx, ny, nz] for rbc3d"},
                         {"--problem rbc2d --grid 64 64 32", "two entries [nx, nz] for rbc2d"},
                         {"--burgers-dt 0.3", "burgers_dt"},
                         {"--tp-size 0", "tp_size"}}) {
    const auto r = run_command(kBinary + " fno " + c.flags + " -c " + cfg);
    EXPECT_NE(r.exit_code, 0) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.flags << "\n" << r.output;
  }
  {
    const fs::path bad = dir.path() / "typo.yml";
    std::ofstream(bad) << "batch_sise: 4\n";
    const auto r = run_command(kBinary + " fno -c " + cfg + " -c " + bad.string());
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("batch_sise"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("typo.yml"), std::string::npos) << r.output;
  }
  const auto tp = run_command(test::mpiexec(2) + kBinary + " fno --tp-size 4 --grid 64 -c " + cfg);
  EXPECT_NE(tp.exit_code, 0) << tp.output;
  EXPECT_NE(tp.output.find("tp_size 4 does not divide the 2 rank(s)"), std::string::npos)
      << tp.output;
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << "nothing written before the checks";
  EXPECT_FALSE(fs::exists(dir.path() / "data")) << "no data generated before the checks";
}

}  // namespace
}  // namespace scaffold

namespace scaffold {
namespace {

// A grid, width or batch that cannot fit is refused by name before any PDE data is generated
// or the run folder exists.
TEST(Fno, ASizeThatCannotFitIsRefusedByNameBeforeAnyDataIsMade) {
  TempDir dir;
  const std::string cfg = write_tiny_config(dir.path()).string();
  const auto r = run_command(
      kBinary +
      " fno --problem navier_stokes2d --grid 8192 8192 --modes 4 --width 4096 --batch-size 64 -c " +
      cfg);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("needs at least"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grid"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "runs")) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "data")) << "no PDE data generated before the check";
}

}  // namespace
}  // namespace scaffold
