// The one training loop every workload uses: epochs of train -> validate -> LR step until a
// stopping rule holds, with the parts that do not vary by workload written once — an untimed
// warm-up that is undone exactly, CARAML-style warm-up epochs excluded by name, resume and the
// checkpoint cadence, the gradient reducer and the initial broadcast, DDP's buffer broadcast,
// the replica check, the watchdog, step timing and profile regions. A workload fills in a
// TrainingTask (data, forward + loss, metric sums, epoch metrics); it never writes files or
// logs results: epochs are reported through a callback.
// Megatron-style runs (the LLM workload) use the same loop by iterations: an "epoch" is a fixed
// number of optimizer steps over an endless sample stream, with gradient accumulation, a
// per-step learning rate, a step cap and a wall-clock deadline (LoopOptions, second block).
// Legend: B batch; sums are per-pass partial sums kept on the device until the epoch ends.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/watchdog.hpp"
#include "data/batch_loader.hpp"
#include "dist/communicator.hpp"
#include "dist/grad_reducer.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "profile/profiler.hpp"
#include "train/checkpoint.hpp"
#include "train/device_stream.hpp"
#include "train/loop_result.hpp"
#include "train/sharded_adam.hpp"

namespace scaffold::train {

// A workload's output for one training batch.
struct TrainForward {
  at::Tensor loss;  // () the loss to back-propagate
  at::Tensor sums;  // (S) this batch's metric sums (training_sum_names order), detached
};

// An optimizer step's micro-batches, handed to LoopOptions::forward_backward.
struct MicroBatchRun {
  std::vector<data::Batch> batches;  // on the training device, in the loader's order
  // Each micro-batch's loss is multiplied by this before its backward: 1 / accumulation_steps,
  // times the loss scale when loss scaling is on.
  double loss_multiplier = 1.0;
  // To call once, right before the step's last backward pass (it arms the data-parallel
  // gradient reducer, whose buckets then carry the gradients accumulated before).
  std::function<void()> before_last_backward;
};

// What a workload gives the loop. Called on every rank; all calls are collective where the
// model's forward is (spatial parallelism).
class TrainingTask {
 public:
  virtual ~TrainingTask() = default;
  // The model that is trained, reduced, broadcast and checkpointed.
  virtual torch::nn::Module& module() = 0;
  virtual const data::ExampleSource& training_set() const = 0;
  virtual const data::ExampleSource& validation_set() const = 0;
  virtual std::vector<std::string> training_sum_names() const = 0;
  virtual std::vector<std::string> validation_sum_names() const = 0;
  // Forward and loss of a training batch whose fields are on the training device (train mode).
  virtual TrainForward train_forward(const data::Batch& batch) = 0;
  // The metric sums (validation_sum_names order) of a validation batch (eval, inference mode).
  virtual at::Tensor validation_sums(const data::Batch& batch) = 0;
  // After each optimiser step and after each validation pass (e.g. to clear autocast's cache).
  virtual void after_step() {}
  virtual void after_validation() {}
  // Ranks that hold a part of the same samples (spatial shards of one replica): their world
  // sums count each sample that many times, so the loop divides by it.
  virtual int sum_multiplicity() const { return 1; }
  // The epoch's metrics from the reduced sums; throws core::Error when training diverged. When
  // the sums are not finite, the loop adds to that error where they first turned so and whether
  // the input data of that batch held NaN or Inf (train/nonfinite.hpp), the same on every rank.
  virtual EpochMetrics epoch_metrics(int64_t epoch, const PassSums& train,
                                     const PassSums& val) const = 0;
};

struct LoopOptions {
  int64_t local_batch_size = 1;
  // Examples per validation batch on each replica; 0: local_batch_size (CARAML's FNO: 1).
  int64_t validation_batch_size = 0;
  // Stopping rule: stop once stop_value >= target (when set), after max_epochs timed epochs
  // (-1: no cap), or after the epoch in which the timed time passed time_budget_s (0: none).
  std::optional<double> target;
  int64_t max_epochs = -1;
  double time_budget_s = 0.0;
  int64_t warmup_batches = 0;  // untimed steps + a validation pass, undone exactly (ScaFFold)
  int64_t warmup_epochs = 0;   // real epochs before the timed ones, excluded by name (CARAML)
  std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>
      make_optimizer;
  std::function<double(int64_t epochs_completed)> lr_after;  // per epoch
  double grad_clip_norm = 0.0;                               // <= 0: no clipping
  int64_t checkpoint_interval = -1;                          // <= 0: no checkpoints
  std::filesystem::path checkpoint_dir;
  bool async_save = false;  // write checkpoint files on a background thread (ScaFFold's async_save)
  uint64_t seed = 42;       // data order and augmentation per epoch
  // torch DataLoader's drop_last for the training pass: a last partial batch is not trained on
  // (BatchNorm cannot train on one example; every step then has the configured batch).
  bool drop_last = false;
  int loader_workers = 1;
  // DDP's broadcast_buffers: rank 0's buffers (BatchNorm running statistics) before every step.
  bool broadcast_buffers = false;
  // Dynamic loss scaling: the loss times the scale, the gradients divided by it. A step whose
  // gradients are not finite is skipped, the good-step count restarts and the hysteresis count
  // falls by one; once it is <= 0 the scale is halved (never below loss_scale_min, when > 0).
  // After loss_scale_growth_interval good steps in a row the scale doubles and the hysteresis
  // count is reset. Megatron's DynamicGradScaler (growth_interval = loss_scale_window); with the
  // defaults (hysteresis 1, no minimum) it is torch.cuda.amp.GradScaler (2^16, 2000).
  bool loss_scaling = false;
  double loss_scale_init = 65536.0;
  int64_t loss_scale_growth_interval = 2000;
  double loss_scale_min = 0.0;        // 0: none (GradScaler); else <= loss_scale_init (Megatron)
  int64_t loss_scale_hysteresis = 1;  // overflows before the first halving (Megatron's hysteresis)
  // Whether a resumed run continues with the checkpoint's scale and counts (Megatron restores its
  // grad scaler) or starts again from loss_scale_init (CARAML's image classification, whose
  // trainer saves no scaler). Checkpoints hold the state either way; the warm-up restores it.
  bool loss_scale_resumed = false;
  // The module's parameters differ from rank to rank (tensor parallelism: each rank holds its
  // slice): every rank writes and reads its own checkpoint files, as for a sharded optimizer.
  // Without it rank 0's file is written and every rank would resume rank 0's slices.
  bool per_rank_checkpoints = false;
  profile::Profiler* profiler = nullptr;  // named regions and the per-batch step; null: off
  core::Watchdog* watchdog = nullptr;     // told of every finished step and validation batch

  // ---- Iterations instead of dataset epochs (Megatron). The defaults keep the behaviour above.
  // > 0: an epoch is this many optimizer steps over an endless stream of the training set in
  // Megatron's order (data::stream_indices), continuing from the optimizer steps already
  // taken, so a resumed run reads on where it stopped. drop_last does not apply.
  int64_t train_batches_per_epoch = -1;
  // Micro-batches per optimizer step: each micro-batch's loss is divided by it and gradients
  // accumulate; the bucketed all-reduce, clipping and the step run on the last one only. The
  // global batch is local_batch_size x accumulation_steps x replicas. Dataset epochs are cut to
  // a whole number of optimizer steps.
  int64_t accumulation_steps = 1;
  // The LR of optimizer step `step` (0-based over the whole run), set before that step;
  // lr_after (per epoch) is then not needed.
  std::function<double(int64_t step)> lr_at_step;
  // When set, replaces torch's clip_grad_norm_ (e.g. a norm over tensor-parallel shards); it is
  // called before every optimizer step with grad_clip_norm (<= 0: measure, do not clip) and the
  // optimizer about to step (which may take the clipping factor: train::scale_gradients), and must
  // not wait for the device (the hot-path rule).
  std::function<void(double max_norm, torch::optim::Optimizer& optimizer)> clip_gradients;
  // When set, called once the data-parallel gradient reduction has finished and before the
  // gradients are unscaled, checked, clipped or applied: the model-parallel reductions the
  // data-parallel reducer does not do (the sequence-parallel LayerNorm gradients).
  std::function<void()> finish_gradients;
  // When set, runs the forward and backward passes of an optimizer step's micro-batches in its own
  // order (a pipeline schedule: Megatron's forward_backward_func) instead of the loop's one
  // micro-batch after another: the loop collects the step's accumulation_steps micro-batches and
  // calls it once, after the last has arrived. Returns the step's metric sums
  // (training_sum_names order) added up over its micro-batches; task_.train_forward is not used.
  std::function<at::Tensor(MicroBatchRun& run)> forward_backward;
  int64_t max_steps = -1;  // optimizer steps in all, warm-up epochs included (-1: no cap)
  // A time on the steady clock (core::monotonic_s) after which the run ends once the step in
  // flight is done (agreed by every rank); the partial epoch is validated and reported like a
  // whole one (Megatron's exit_duration_in_mins). 0: none.
  double deadline_mono_s = 0.0;
  int64_t validation_batches = -1;  // local batches per validation pass (-1: the whole set)
  int64_t validation_every = 1;     // validate after epochs that are multiples of it (0: never)
};

// How this rank takes part in a multi-rank run. The defaults are a world of one.
struct LoopParallelism {
  // Gradient reduction and the initial broadcast, over every rank (null or one rank: none).
  // Gradients are summed over it and divided by the grid's replicas.
  std::shared_ptr<dist::TensorComm> world;
  std::size_t bucket_bytes = std::size_t{16} << 20;
  // Model-parallel runs (tensor parallelism): `world` is then this rank's data-parallel group
  // and these are the ranks whose parameters must be identical (the replica check); the check's
  // verdict and the fp16 loss scaler's are still agreed over every rank. Null: every rank.
  dist::Communicator* replica_comm = nullptr;
};

class TrainingLoop {
 public:
  TrainingLoop(TrainingTask& task, LoopOptions options, c10::Device device,
               dist::Communicator& comm, const dist::ProcessGrid& grid,
               LoopParallelism parallel = {});
  ~TrainingLoop();

  // Untimed warm-up steps and a validation pass; afterwards model, optimiser, counters and RNG
  // are exactly as before. Returns the wall time spent.
  double warmup();
  int64_t warmup_steps() const { return warmup_steps_; }
  double warmup_start_mono_s() const { return warmup_start_mono_s_; }
  double warmup_end_mono_s() const { return warmup_end_mono_s_; }

  // Resumes from a checkpoint (last, falling back to best; a corrupt file is renamed *.corrupt).
  // With a sharded optimizer (train/sharded_adam.hpp) each rank reads its own <name>.rank<R>,
  // collectively: a file is taken only when every rank could read its own, none is renamed, and
  // a shard of another data-parallel size is refused on every rank.
  TrainCounters resume(const std::filesystem::path& checkpoint_dir);

  // The epoch loop from the resume point (or epoch 1). on_epoch runs after each epoch, before
  // that epoch's checkpoint, outside the timed region.
  LoopResult run(const std::function<void(const LoopEpoch&)>& on_epoch);

  const TrainCounters& counters() const { return counters_; }
  const CommTimes& comm_times() const { return comm_times_; }
  void set_watchdog(core::Watchdog* watchdog) { options_.watchdog = watchdog; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  const LoopOptions& options() const { return options_; }
  const dist::ProcessGrid& grid() const { return grid_; }
  double loss_scale() const { return loss_scale_; }
  // Wall time this process spent writing checkpoints so far (CARAML's TotalCheckpointTime).
  double checkpoint_seconds() const { return checkpoint_s_; }
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  double learning_rate_after(int64_t epochs_completed) const;
  int64_t validation_batch() const {
    return options_.validation_batch_size > 0 ? options_.validation_batch_size
                                              : options_.local_batch_size;
  }
  void set_learning_rate(double lr);
  // One micro-batch, the one `feeder` prefetched (train/device_stream.hpp): forward and backward;
  // the first clears the gradients, the last reduces, clips and steps (both for
  // accumulation_steps 1). No host wait for the device in here: tests/unit/train/test_hot_path.cpp
  // checks the source and counts host reads.
  void train_step(DeviceFeeder& feeder, bool first, bool last, at::Tensor* sums);
  PassSums validate(int64_t max_batches);
  PassSums train_epoch(int64_t epoch, int64_t max_batches, std::vector<double>* step_times);
  void save(const std::string& name);
  // Rank-local state (a ShardedOptimizer, or LoopOptions::per_rank_checkpoints): every rank
  // writes and reads its own checkpoint files, <name>.rank<R>; otherwise rank 0 writes <name>.
  bool per_rank_state() const;
  // The counters with the loss scaler's state (what checkpoints and the warm-up snapshot hold),
  // and taking it back from counters_ after a load.
  TrainCounters with_scaler() const;
  void adopt_scaler(bool from_checkpoint);
  std::filesystem::path checkpoint_file(const std::filesystem::path& dir,
                                        const std::string& name) const;
  TrainCounters resume_per_rank(const std::filesystem::path& dir);
  void check_replicas_agree(int64_t epoch);
  void broadcast_buffers();
  // Whether any rank was asked to stop or passed the deadline (collective on multi-rank runs:
  // one small all-reduce).
  bool stop_agreed();
  // Loss scaling: false (and the scale lowered) when a gradient is not finite; else unscales them.
  bool unscale_gradients();
  // Collective, only when an epoch's reduced sums are not finite: which rank's batch first turned
  // them so (optimizer step, examples) and whether its input data held NaN or Inf.
  std::string nonfinite_origin(int64_t epoch, const LoopEpoch& st, int64_t first_step);

  TrainingTask& task_;
  LoopOptions options_;
  c10::Device device_;
  dist::Communicator& comm_;
  dist::ProcessGrid grid_;
  LoopParallelism parallel_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  // The optimizer when it is a distributed one that reduce-scatters the gradients itself (no
  // reducer_ then; the optimizer is rebuilt on resume and after the warm-up), else null.
  ShardedOptimizer* gradient_owner() const;
  double reduce_scatter_s_ = 0.0;
  double gradient_wait_s() const {
    return (reducer_ ? reducer_->wait_s() : 0.0) + reduce_scatter_s_;
  }
  std::vector<data::Batch> step_batches_;  // forward_backward: the step's micro-batches so far
  int64_t fail_at_step_ = -1;              // test hook SCAFFOLD_FAIL_AT (loop.cpp); -1: never
  bool hang_at_step_ = false;              // the hook hangs instead of throwing
  int64_t steps_taken_ = 0;
  CommTimes comm_times_;
  bool warned_replica_drift_ = false;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  CheckpointWriter
      checkpoint_writer_;  // rank 0's checkpoint files, in the background with async_save
  TrainCounters counters_;
  int64_t warmup_steps_ = 0;
  double loss_scale_ = 65536.0;
  double checkpoint_s_ = 0.0;
  int64_t good_steps_ = 0;       // since the loss scale last changed
  int64_t hysteresis_left_ = 1;  // overflows still tolerated before the scale falls
  int64_t skipped_steps_ = 0;
  int stop_signal_ = 0;            // agreed stop request (0: none)
  bool deadline_reached_ = false;  // agreed: LoopOptions::deadline_mono_s passed
  // The state after the last completed epoch that no checkpoint holds yet (checkpoint_interval
  // > 1), so a stop mid-epoch can still save it; empty otherwise.
  std::string unsaved_epoch_state_;
  double warmup_start_mono_s_ = 0.0;
  double warmup_end_mono_s_ = 0.0;
};

// Multi-rank: whether `params` are the same on every rank of `comm` (collective). Throws
// dist::AgreedError on every rank when their checksums differ by more than 1e-6 relative; a smaller
// difference (an all-reduce not bitwise identical on every rank) is logged once through *warned.
// `when` completes the messages ("after epoch 3").
void check_same_parameters(dist::Communicator& comm, const std::vector<at::Tensor>& params,
                           const std::string& when, bool* warned);

}  // namespace scaffold::train
