// The ScaFFold workload's training (docs/benchmark.md): SegmentationTask is the U-Net's
// TrainingTask (the fractal volumes, weighted CE + soft Dice, hard Dice in validation, CE class
// weights), and Trainer drives it with the shared TrainingLoop (train/loop.hpp): an untimed
// warm-up undone exactly, then epochs until val Dice >= target (or the epoch cap), with
// checkpoints. Multi-rank runs (docs/distributed.md) plug in through Parallelism: parameters
// broadcast from rank 0, gradients reduced in buckets during backward, loss and Dice sums taken
// over the spatial group.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/watchdog.hpp"
#include "dataset/loader.hpp"
#include "dist/communicator.hpp"
#include "dist/grad_reducer.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "model/spatial.hpp"
#include "model/unet.hpp"
#include "profile/profiler.hpp"
#include "train/checkpoint.hpp"
#include "train/loop.hpp"

namespace scaffold::train {

struct TrainerOptions {
  int64_t local_batch_size = 1;
  int64_t epochs = -1;  // -1: until target_dice
  double target_dice = 0.95;
  int64_t warmup_batches = 64;
  std::string optimizer = "ADAM";  // ADAM | RMSProp | SGD
  double learning_rate = 1e-3;
  double min_learning_rate = 1e-4;
  int64_t T_0 = 10;
  int64_t T_mult = 2;
  bool disable_scheduler = false;
  bool amp_bf16 = true;        // bf16 autocast for the forward passes
  bool fused_loss = true;      // the loss's one-pass CPU kernel (loss_kernel, train/loss.hpp)
  bool channels_last = false;  // ChannelsLast3d weights and inputs (train::use_channels_last)
  double grad_clip_norm = 1.0;
  int64_t checkpoint_interval = -1;  // <= 0: no checkpoints
  std::filesystem::path checkpoint_dir;
  bool async_save = false;  // checkpoint files written on a background thread
  uint64_t seed = 42;       // data order per epoch
  int64_t n_classes = 6;
  double ce_weight_sample_fraction = 0.1;
  int loader_workers = 1;
  profile::Profiler* profiler = nullptr;  // named regions and the per-batch step; null: off
  core::Watchdog* watchdog = nullptr;     // told of every finished step and validation batch
};

// How this rank takes part in a multi-rank run. The defaults are a world of one.
struct Parallelism {
  // Gradient reduction and the initial parameter broadcast, over every rank (null or one rank:
  // none). Gradients are summed over it and divided by the grid's replicas: summed over the
  // spatial shards of a sample, averaged over data-parallel replicas (docs/distributed.md).
  std::shared_ptr<dist::TensorComm> world;
  // Set when samples are split in space: the model's context, whose group sums the loss and Dice.
  std::shared_ptr<const model::SpatialContext> spatial;
  std::size_t bucket_bytes = std::size_t{16} << 20;
};

// One epoch's results, in the units of train_stats.csv (docs/benchmark.md).
struct EpochStats {
  int64_t epoch = 0;
  double epoch_loss = 0.0;    // sum over training samples of the batch-mean loss x batch size
  double overall_loss = 0.0;  // epoch_loss / training samples
  double val_loss_epoch = 0.0;
  double val_loss_avg = 0.0;
  double train_dice = 0.0;  // mean soft foreground Dice per training sample
  double val_dice = 0.0;    // mean hard foreground Dice per validation sample
  double duration_s = 0.0;  // epoch start .. after validation and the LR step
  int64_t optimizer_steps = 0;
  int64_t total_optimizer_steps = 0;
  double next_lr = 0.0;        // the learning rate for the next epoch
  double median_step_s = 0.0;  // median training step (forward, backward, optimiser) this epoch
  double train_s = 0.0;        // training part of the epoch
  double validation_s = 0.0;   // validation part of the epoch
  // The same windows on the steady clock (core::monotonic_s), for energy measured alongside.
  double start_mono_s = 0.0;
  double validation_start_mono_s = 0.0;
  double end_mono_s = 0.0;
};

struct TrainResult {
  bool converged = false;
  bool stopped = false;  // stopped early by a signal (core/stop.hpp); see LoopResult
  int stop_signal = 0;
  int64_t epochs_run = 0;  // epochs in this process (after a restart: since it)
  int64_t last_epoch = 0;
  int64_t total_optimizer_steps = 0;
  double final_val_dice = 0.0;
  std::vector<double> step_times_s;  // every timed training step of this process
};

class Trainer {
 public:
  Trainer(model::UNet3d model, TrainerOptions options, const dataset::FractalDataset& train_set,
          const dataset::FractalDataset& val_set, c10::Device device, dist::Communicator& comm,
          const dist::ProcessGrid& grid, Parallelism parallel = {});
  ~Trainer();

  // CE class weights from ce_weight_sample_fraction of the training masks (docs/benchmark.md),
  // summed over the world. Call before warmup() and run().
  void estimate_class_weights();
  const std::vector<double>& class_weights() const;

  // Untimed warm-up steps and a validation pass; afterwards model, optimiser and RNG are exactly
  // as before. Returns the wall time spent.
  double warmup();
  int64_t warmup_steps() const { return loop_->warmup_steps(); }
  // The last warm-up's window on the steady clock (core::monotonic_s).
  double warmup_start_mono_s() const { return loop_->warmup_start_mono_s(); }
  double warmup_end_mono_s() const { return loop_->warmup_end_mono_s(); }

  // Resumes from a checkpoint (last, falling back to best; a corrupt file is renamed *.corrupt).
  // Returns the counters restored; throws core::FileError when neither is usable.
  TrainCounters resume(const std::filesystem::path& checkpoint_dir);

  // The epoch loop from the resume point (or epoch 1). on_epoch runs after each epoch, before
  // the checkpoint of that epoch, outside the timed region.
  TrainResult run(const std::function<void(const EpochStats&)>& on_epoch);

  const TrainCounters& counters() const { return loop_->counters(); }
  const CommTimes& comm_times() const { return loop_->comm_times(); }
  void set_watchdog(core::Watchdog* watchdog) { loop_->set_watchdog(watchdog); }
  model::UNet3d& model();
  torch::optim::Optimizer& optimizer() { return loop_->optimizer(); }

 private:
  class SegmentationTask;
  TrainerOptions options_;  // before task_: the task keeps a reference
  dist::Communicator& comm_;
  std::unique_ptr<SegmentationTask> task_;
  std::unique_ptr<TrainingLoop> loop_;
};

}  // namespace scaffold::train
