// The FNO figures, by CARAML's definitions (docs/fno.md; its trainer, operator_learning's
// train_fno.py), from the rows of epoch_stats.csv over the timed epochs (warm-up epochs excluded
// by name, as CARAML skips its first): TotalTrainTime = the training passes, TotalComputeTime =
// training + validation passes, TotalMonitorTime = reporting, TotalCheckpointTime = saving,
// TotalEpochTime = the whole epochs (passes, LR step, reporting, saving);
// TrainTimesteps/s = training timesteps / TotalTrainTime and Timesteps/s = (training + validation)
// timesteps / TotalComputeTime, a timestep being one predicted time step of one example
// (examples x timesteps per example; CARAML's problems predict one, so its timesteps are its
// samples). Also TFLOP per epoch from the model's FLOP count, timesteps per Wh, and the model's
// forward FLOPs. No LibTorch: the report and the tests use it on plain rows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/step_csv.hpp"

namespace scaffold::fno {

inline constexpr const char* kEpochStatsFileName = "epoch_stats.csv";

// One row of epoch_stats.csv.
struct EpochRow {
  int64_t epoch = 0;
  bool warmup = false;
  double train_rel_l2 = 0.0, val_rel_l2 = 0.0, val_mse = 0.0;  // means over examples
  double lr = 0.0;                                             // the learning rate of this epoch
  double duration_s = 0.0;                                     // training + validation + LR step
  double train_s = 0.0;                                        // the training pass
  double validation_s = 0.0;                                   // the validation pass
  double monitor_s = 0.0;     // reporting the epoch (log line, energy windows; CARAML's monitor())
  double checkpoint_s = 0.0;  // writing the checkpoints after this epoch (CARAML's save())
  int64_t train_samples = 0, val_samples = 0;  // over all replicas
  double median_step_s = 0.0;                  // rank 0's median training step
};

// The columns of epoch_stats.csv, declared once: its header, lines and reader follow from them.
const report::StepCsvColumns<EpochRow>& epoch_stats_columns();
std::string epoch_stats_header();
std::string epoch_stats_line(const EpochRow& row);
// Parses epoch_stats.csv; a different header or a malformed row is a core::FileError naming the
// file and line.
std::vector<EpochRow> read_epoch_stats(const std::filesystem::path& path);

// The model's shape, for its FLOP count.
struct FnoShape {
  int64_t in_channels = 1, out_channels = 1;
  std::vector<int64_t> grid, modes;  // the whole grid; modes per dimension
  int64_t width = 32, layers = 4, projection_channels = 128;
  int64_t lifting_layers = 1, projection_layers = 2;  // FnoOptions' depths
  bool grid_coordinates = true;
};

// FLOPs of one example's forward: the pointwise maps (lifting, each layer's linear path,
// projection) at 2 per multiply-add, each layer's mode mixing at 8 per complex multiply-add, and
// its forward and inverse real FFTs at 2.5 N log2 N per channel each (half the usual 5 N log2 N
// of a complex FFT of N points). Biases and GELU are not counted.
double fno_forward_flops(const FnoShape& shape);

struct FnoFigures {
  int64_t timed_epochs = 0;
  double total_epoch_time_s = 0.0;        // TotalEpochTime: durations + monitoring + checkpoints
  double total_train_time_s = 0.0;        // TotalTrainTime
  double total_compute_time_s = 0.0;      // TotalComputeTime: training + validation
  double total_monitor_time_s = 0.0;      // TotalMonitorTime
  double total_checkpoint_time_s = 0.0;   // TotalCheckpointTime
  double train_time_per_epoch_min = 0.0;  // TrainTime/Epoch (min)
  double train_timesteps = 0.0;        // TrainTimesteps: training examples x timesteps_per_example
  double timesteps = 0.0;              // Timesteps: training + validation
  double train_timesteps_per_s = 0.0;  // TrainTimesteps / TotalTrainTime
  double timesteps_per_s = 0.0;        // Timesteps / TotalComputeTime (the headline)
  double tflop_per_epoch = 0.0;        // (3 F x train + F x val examples) / epochs / 1e12
  double achieved_flop_per_s = 0.0;    // the same FLOPs / TotalComputeTime
  // operator_learning's MeanCompileTime in eager mode: the mean training pass of every epoch
  // but the run's first (its compile_times[1:]); 0 when there is no later epoch.
  double mean_compile_time_s = 0.0;
  double val_rel_l2 = 0.0, train_rel_l2 = 0.0;  // of the last timed epoch
  std::optional<double> timesteps_per_wh;       // Timesteps / energy of the timed epochs
};

// The learning-rate schedule, stepped once per epoch (warm-up epochs included), as
// operator_learning's and the paper's loops step theirs (scheduler.step() after each epoch's
// training pass).
struct LrSchedule {
  std::string kind = "step";  // step: StepLR; cosine: CosineAnnealingLR with eta_min 0
  double initial = 1e-3;
  int64_t step_size = 100;  // step: epochs between decays
  double gamma = 0.5;       // step: decay factor
  int64_t t_max = 50000;    // cosine: T_max
};

// The learning rate after `epochs_done` epochs (the rate epoch epochs_done + 1 runs at). step:
// initial x gamma^floor(done / step_size); cosine: PyTorch's closed form
// initial x (1 + cos(pi done / t_max)) / 2 (periodic past t_max, as PyTorch's). Throws
// core::Error for an unknown kind.
double scheduled_lr(const LrSchedule& schedule, int64_t epochs_done);

// `rows`: every epoch (warm-up ones are skipped); `forward_flops_per_example`: F; `energy_wh`:
// the timed epochs' energy when measured. Throws core::Error when no epoch is timed.
FnoFigures fno_figures(const std::vector<EpochRow>& rows, int64_t timesteps_per_example,
                       double forward_flops_per_example, std::optional<double> energy_wh);

}  // namespace scaffold::fno
