// The FNO figures (workloads/fno/metrics.hpp) on a fixture whose values are worked out by hand
// here, by CARAML's definitions (operator_learning's train_fno.py, docs/fno.md): TotalComputeTime
// = training + validation passes, TotalEpochTime = whole epochs (with reporting and checkpoints),
// Timesteps/s over TotalComputeTime, warm-up epochs excluded. Also epoch_stats.csv line by line
// and its reader's refusals, and the forward FLOP count against a hand count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "workloads/fno/metrics.hpp"

namespace scaffold::fno {
namespace {

namespace fs = std::filesystem;

std::vector<EpochRow> fixture() {
  EpochRow w;  // a warm-up epoch: in no figure
  w.epoch = 1;
  w.warmup = true;
  w.duration_s = 100.0;
  w.train_s = 90.0;
  w.validation_s = 10.0;
  w.monitor_s = 5.0;
  w.checkpoint_s = 7.0;
  w.train_samples = 1000;
  w.val_samples = 1000;
  EpochRow a;
  a.epoch = 2;
  a.duration_s = 10.5;  // 8 train + 2 validation + 0.5 LR step and loop bookkeeping
  a.train_s = 8.0;
  a.validation_s = 2.0;
  a.monitor_s = 0.25;
  a.checkpoint_s = 1.0;
  a.train_samples = 40;
  a.val_samples = 10;
  a.train_rel_l2 = 0.5;
  a.val_rel_l2 = 0.6;
  EpochRow b = a;
  b.epoch = 3;
  b.duration_s = 12.5;
  b.train_s = 10.0;
  b.validation_s = 2.0;
  b.monitor_s = 0.75;
  b.checkpoint_s = 0.0;
  b.train_rel_l2 = 0.25;
  b.val_rel_l2 = 0.3;
  return {w, a, b};
}

TEST(FnoMetrics, FiguresFollowCaramlsDefinitionsOnAFixture) {
  // 2 time steps per example, F = 1e9 FLOP per example forward, 0.5 Wh.
  const FnoFigures f = fno_figures(fixture(), 2, 1e9, 0.5);
  const double tol = 1e-12;
  EXPECT_EQ(f.timed_epochs, 2);
  EXPECT_NEAR(f.total_train_time_s, 18.0, tol);      // 8 + 10
  EXPECT_NEAR(f.total_compute_time_s, 22.0, tol);    // (8 + 2) + (10 + 2)
  EXPECT_NEAR(f.total_monitor_time_s, 1.0, tol);     // 0.25 + 0.75
  EXPECT_NEAR(f.total_checkpoint_time_s, 1.0, tol);  // 1 + 0
  EXPECT_NEAR(f.total_epoch_time_s, 25.0, tol);      // (10.5 + 0.25 + 1) + (12.5 + 0.75 + 0)
  EXPECT_NEAR(f.train_time_per_epoch_min, 18.0 / 2 / 60, tol);  // 0.15 min
  EXPECT_NEAR(f.train_timesteps, 160.0, tol);                   // 80 training examples x 2
  EXPECT_NEAR(f.timesteps, 200.0, tol);                         // 100 examples x 2
  EXPECT_NEAR(f.train_timesteps_per_s, 160.0 / 18.0, tol);
  EXPECT_NEAR(f.timesteps_per_s, 200.0 / 22.0, tol);
  // (3 x 80 + 20) x 1e9 FLOP over 2 epochs = 130 GFLOP = 0.13 TFLOP per epoch.
  EXPECT_NEAR(f.tflop_per_epoch, 0.13, tol);
  EXPECT_NEAR(f.achieved_flop_per_s, 260e9 / 22.0, 1e-3);
  EXPECT_NEAR(f.val_rel_l2, 0.3, tol);  // the last timed epoch
  EXPECT_NEAR(f.train_rel_l2, 0.25, tol);
  ASSERT_TRUE(f.timesteps_per_wh.has_value());
  EXPECT_NEAR(*f.timesteps_per_wh, 400.0, tol);
  EXPECT_FALSE(fno_figures(fixture(), 2, 1e9, std::nullopt).timesteps_per_wh.has_value());
}

// operator_learning's eager MeanCompileTime: the mean training pass of every epoch after the run's
// first (its compile_times[1:]), the warm-up epoch 1 left out: epochs 2 and 3 train 8 s and 10 s.
TEST(FnoMetrics, MeanCompileTimeIsTheMeanTrainingPassAfterTheFirstEpoch) {
  EXPECT_NEAR(fno_figures(fixture(), 2, 1e9, std::nullopt).mean_compile_time_s, 9.0, 1e-12);
  std::vector<EpochRow> one{fixture()[1]};
  one[0].epoch = 1;  // a single epoch: nothing after the first
  EXPECT_EQ(fno_figures(one, 2, 1e9, std::nullopt).mean_compile_time_s, 0.0);
}

// The learning-rate schedules against values worked out here. StepLR: lr x gamma^floor(n / step).
// CosineAnnealingLR (eta_min 0): lr x (1 + cos(pi n / T)) / 2, checked through the identity
// (1 + cos 2x) / 2 = cos^2 x, and at the points where it is exact: 1, 1/2 at T/2, 0 at T.
TEST(FnoMetrics, LearningRateSchedulesAgainstTheirClosedForms) {
  LrSchedule step;
  step.kind = "step";
  step.initial = 1e-3;
  step.step_size = 100;
  step.gamma = 0.5;
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 0), 1e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 99), 1e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 100), 5e-4);
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 250), 2.5e-4);

  LrSchedule cos;
  cos.kind = "cosine";
  cos.initial = 1e-4;  // configs/fno.yml: operator_learning's lr 1e-4, T_max 50000
  cos.t_max = 50000;
  EXPECT_DOUBLE_EQ(scheduled_lr(cos, 0), 1e-4);
  EXPECT_NEAR(scheduled_lr(cos, 25000), 5e-5, 1e-18);
  EXPECT_NEAR(scheduled_lr(cos, 50000), 0.0, 1e-18);
  const double pi = std::acos(-1.0);
  for (int64_t n : {1, 2, 3, 4, 5, 1000, 37500}) {
    const double half = std::cos(pi * static_cast<double>(n) / (2.0 * 50000.0));
    EXPECT_NEAR(scheduled_lr(cos, n), 1e-4 * half * half, 1e-16) << "epoch " << n;
  }
  // The five epochs of configs/fno.yml barely move it: after 4, 1e-4 x cos^2(pi 4 / 100000).
  EXPECT_NEAR(scheduled_lr(cos, 4), 9.99999984e-5, 1e-13);
  // Past T_max it rises again (PyTorch's closed form is periodic).
  EXPECT_NEAR(scheduled_lr(cos, 75000), 5e-5, 1e-18);
  LrSchedule bad;
  bad.kind = "linear";
  EXPECT_THROW(scheduled_lr(bad, 1), core::Error);
}

TEST(FnoMetrics, OnlyWarmupEpochsIsAnError) {
  std::vector<EpochRow> rows{fixture()[0]};
  EXPECT_THROW(fno_figures(rows, 1, 1.0, std::nullopt), core::Error);
}

TEST(FnoMetrics, EpochStatsLinesAndRoundTrip) {
  const auto rows = fixture();
  EXPECT_EQ(epoch_stats_header(),
            "epoch,warmup,train_rel_l2,val_rel_l2,val_mse,lr,duration_s,train_s,validation_s,"
            "monitor_s,checkpoint_s,"
            "train_samples,val_samples,median_step_s");
  EXPECT_EQ(epoch_stats_line(rows[1]), "2,0,0.5,0.6,0.0,0.0,10.5,8.0,2.0,0.25,1.0,40,10,0.0");
  const fs::path path =
      fs::temp_directory_path() / ("scaffold_test_fno_metrics_" + std::to_string(::getpid()));
  {
    std::ofstream out(path);
    out << epoch_stats_header() << "\n";
    for (const auto& r : rows) out << epoch_stats_line(r) << "\n";
  }
  const auto back = read_epoch_stats(path);
  ASSERT_EQ(back.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(epoch_stats_line(back[i]), epoch_stats_line(rows[i]));
  // A row with a column missing names the file.
  {
    std::ofstream out(path);
    out << epoch_stats_header() << "\n2,0,0.5,0.6,0.0,0.0,10.5,8.0,2.0,0.25,40,10,0.0\n";
  }
  try {
    read_epoch_stats(path);
    ADD_FAILURE() << "a short row was accepted";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.filename().string()), std::string::npos) << e.what();
  }
  fs::remove(path);
}

TEST(FnoMetrics, ForwardFlopsAgainstAHandCount) {
  // 1-D, 8 points, 3 modes, width 2, 1 layer, projection 4, 1 -> 1 channels, coordinates on:
  //   lift      2 x (1 + 1) x 2 x 8            =  64
  //   layer     pointwise 2 x 2 x 2 x 8 = 64; spectral 8 x 2 x 2 x 3 = 96 (complex multiply-add);
  //             FFTs 2 x 2 x (2.5 x 8 x log2 8 = 60) = 240                 = 400
  //   project   2 x 2 x 4 x 8                  = 128
  //   output    2 x 4 x 1 x 8                  =  64
  FnoShape s;
  s.grid = {8};
  s.modes = {3};
  s.width = 2;
  s.layers = 1;
  s.projection_channels = 4;
  EXPECT_DOUBLE_EQ(fno_forward_flops(s), 656.0);
  // 2-D: the first axis keeps both corners (2 x 3), the last 3: 18 modes.
  s.grid = {8, 8};
  s.modes = {3, 3};
  const double points = 64, fft = 2.5 * 64 * 6;
  const double expect = 2 * 3 * 2 * points + (2 * 4 * points + 8 * 4 * 18 + 2 * 2 * fft) +
                        2 * 2 * 4 * points + 2 * 4 * points;
  EXPECT_DOUBLE_EQ(fno_forward_flops(s), expect);
  // Deeper lifting and projection (operator_learning's P and Q), back on the 1-D shape: lifting
  // 3 layers 2 -> 4 -> 4 -> 2 = 2 x (2 x 4 + 4 x 4 + 4 x 2) x 8 = 512 instead of 64; projection
  // 3 layers 2 -> 4 -> 4 -> 1 adds one 4 x 4 layer, 2 x 4 x 4 x 8 = 256.
  s.grid = {8};
  s.modes = {3};
  s.lifting_layers = 3;
  s.projection_layers = 3;
  EXPECT_DOUBLE_EQ(fno_forward_flops(s), 656.0 - 64 + 512 + 256);
}

}  // namespace
}  // namespace scaffold::fno
