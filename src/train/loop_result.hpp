// What the training loop reports, without LibTorch: the counters a checkpoint carries, one
// epoch's sums and metrics (LoopEpoch), the result of a run (LoopResult) and where communication
// went (CommTimes). The suite's driver and the workloads' reports read these; only the loop
// itself (train/loop.hpp) and the checkpoints (train/checkpoint.hpp) need LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace scaffold::train {

struct TrainCounters {
  int64_t epoch = 0;                  // last completed epoch (0: none)
  int64_t total_optimizer_steps = 0;  // continued across restarts
  double stop_value = 0.0;     // of the last completed epoch: what the stopping rule compares
                               // (ScaFFold's val_dice; "val_dice" in checkpoints before it)
  double val_loss_avg = 0.0;   // of the last completed epoch
  double best_val_loss = 0.0;  // lowest val_loss_avg so far (checkpoint_best)
  // Dynamic loss scaling's state (train/loop.hpp), as Megatron's grad scaler saves it. loss_scale
  // 0: none stored (a run without loss scaling, or a checkpoint of an older scaffold).
  double loss_scale = 0.0;
  int64_t loss_scale_good_steps = 0;
  int64_t loss_scale_hysteresis_left = 0;
};

// One pass's sums after the reduction over data-parallel replicas.
struct PassSums {
  std::vector<double> sums;     // task-defined, in the task's *_sum_names order
  double samples = 0.0;         // examples seen (each replica's counted once)
  int64_t steps = 0;            // batches on this rank (micro-batches with gradient accumulation)
  int64_t optimizer_steps = 0;  // training: optimizer steps (steps / accumulation_steps)
  // This rank's first batch after which the pass's running sums were no longer finite (0-based,
  // micro-batches) and its examples' indices in the source; -1 and empty while they are finite.
  int64_t first_nonfinite_batch = -1;
  std::vector<int64_t> first_nonfinite_examples;
  uint64_t draw_key = 0;  // the pass's augmentation key, to read those examples again
};

// The metrics of one epoch as the task defines them.
struct EpochMetrics {
  std::vector<std::pair<std::string, double>> values;  // named, in the task's order
  double stop_value = 0.0;  // what the stopping rule compares with the target (e.g. val_dice)
  double val_loss = 0.0;    // lower is better: chooses checkpoint_best
};

// Where communication went in this process's timed training steps, cumulative.
struct CommTimes {
  // Each communication counter's seconds (dist/comm_counters.hpp: "halo", "tensor_parallel",
  // ...) within the timed steps; a counter that never moved is absent or 0.
  std::map<std::string, double> counter_s;
  double gradient_wait_s = 0.0;  // waiting for gradient all-reduces after backward
  // counter_s[name], 0 when absent.
  double seconds_of(const std::string& name) const {
    const auto it = counter_s.find(name);
    return it == counter_s.end() ? 0.0 : it->second;
  }
};

struct LoopEpoch {
  int64_t epoch = 0;
  bool warmup = false;  // a warm-up epoch: trained, reported, excluded from every figure
  EpochMetrics metrics;
  PassSums train, val;
  double duration_s = 0.0;  // epoch start .. after validation and the LR step
  double train_s = 0.0;
  double validation_s = 0.0;
  double next_lr = 0.0;
  double median_step_s = 0.0;
  int64_t optimizer_steps = 0;
  int64_t total_optimizer_steps = 0;
  bool validated = true;  // false: validation_every skipped this epoch (val sums are zeros)
  std::vector<double> step_times_s;  // this epoch's optimizer steps on this rank
  // The same windows on the steady clock (core::monotonic_s), for energy measured alongside.
  double start_mono_s = 0.0;
  double validation_start_mono_s = 0.0;
  double end_mono_s = 0.0;
};

struct LoopResult {
  bool converged = false;  // the target was set and reached
  // A stop was requested (core/stop.hpp: the scheduler's warning signal) and agreed by every
  // rank: the step in flight finished, the rest of that epoch was not run and is not reported.
  bool stopped = false;
  int stop_signal = 0;
  bool deadline_reached = false;  // LoopOptions::deadline_mono_s passed (the run still completed)
  int64_t skipped_steps = 0;      // steps the loss scaler skipped (non-finite gradients)
  int64_t epochs_run = 0;         // epochs in this process, warm-up epochs included
  int64_t timed_epochs = 0;
  int64_t last_epoch = 0;
  int64_t total_optimizer_steps = 0;
  double final_stop_value = 0.0;
  double timed_s = 0.0;              // sum of the timed epochs' durations in this process
  std::vector<double> step_times_s;  // every timed training step of this process
};

}  // namespace scaffold::train
