// The ScaFFold workload's training (docs/benchmark.md): SegmentationTask is the U-Net's
// train::TrainingTask (the fractal volumes, weighted CE + soft Dice, hard Dice in validation, CE
// class weights), run by the shared train::TrainingLoop like every workload's task: an untimed
// warm-up undone exactly, then epochs until val Dice >= target (or the epoch cap), with
// checkpoints. Multi-rank runs (docs/distributed.md) plug in through Parallelism: parameters
// broadcast from rank 0, gradients reduced in buckets during backward, loss and Dice sums taken
// over the spatial group.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_loader.hpp"
#include "dist/communicator.hpp"
#include "dist/process_grid.hpp"
#include "dist/tensor_comm.hpp"
#include "profile/profiler.hpp"
#include "train/loop.hpp"
#include "workloads/scaffold/dataset/fractal_dataset.hpp"
#include "workloads/scaffold/model/spatial.hpp"
#include "workloads/scaffold/model/unet.hpp"

namespace scaffold::benchmark {

struct SegmentationOptions {
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
  bool amp_bf16 = true;  // bf16 autocast for the forward passes
  // The run's kernels (model::resolve_kernel_choice): its loss and optimizer entries pick the
  // loss's voxel sums and Adam's step, and its tally counts what they ran. The default: the fused
  // loss and Adam (each falls back to LibTorch's where it does not run), nothing counted.
  model::KernelChoice kernels = [] {
    model::KernelChoice k;
    k.loss = model::LossKernel::Fused;
    k.optimizer = model::OptimizerKernel::Fused;
    return k;
  }();
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

// One epoch's results, in the units of train_stats.csv (docs/benchmark.md): the task's metrics
// of a train::LoopEpoch by name.
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
};
EpochStats epoch_stats(const train::LoopEpoch& e);

class SegmentationTask : public train::TrainingTask {
 public:
  // `multiplicity`: the spatial shards of a sample, each of which adds the sample's sums.
  SegmentationTask(model::UNet3d model, SegmentationOptions options,
                   const dataset::FractalDataset& train_set, const dataset::FractalDataset& val_set,
                   c10::Device device, std::shared_ptr<const model::SpatialContext> spatial,
                   int multiplicity);

  // CE class weights from ce_weight_sample_fraction of the training masks (docs/benchmark.md),
  // summed over the world. Call before the loop's warm-up and run.
  void estimate_class_weights(dist::Communicator& comm);
  const std::vector<double>& class_weights() const { return class_weights_; }
  model::UNet3d& model() { return model_; }

  torch::nn::Module& module() override { return *model_; }
  const data::ExampleSource& training_set() const override { return train_set_; }
  const data::ExampleSource& validation_set() const override { return val_set_; }
  std::vector<std::string> training_sum_names() const override;
  std::vector<std::string> validation_sum_names() const override;
  int sum_multiplicity() const override { return multiplicity_; }
  train::TrainForward train_forward(const data::Batch& batch) override;
  at::Tensor validation_sums(const data::Batch& batch) override;
  void after_step() override;
  void after_validation() override;
  train::EpochMetrics epoch_metrics(int64_t epoch, const train::PassSums& train,
                                    const train::PassSums& val) const override;

 private:
  at::Tensor input(const at::Tensor& image) const;  // in the model's memory format
  at::Tensor logits_of(const at::Tensor& image);    // the forward pass under the run's autocast

  model::UNet3d model_;
  SegmentationOptions options_;
  const dataset::FractalDataset& train_set_;
  const dataset::FractalDataset& val_set_;
  c10::Device device_;
  std::function<at::Tensor(const at::Tensor&)> spatial_sum_;  // empty: whole samples here
  int multiplicity_ = 1;
  std::vector<double> class_weights_;
  at::Tensor class_weights_tensor_;  // (K) float32 on device
};

// The loop's options for the segmentation: the optimiser (ADAM is the fused Adam), the cosine
// schedule with warm restarts (or a constant LR), clipping, checkpoints and data order.
train::LoopOptions segmentation_loop_options(const SegmentationOptions& options);

// The task and the shared loop that runs it, as the benchmark and the tests build them.
struct SegmentationTraining {
  std::unique_ptr<SegmentationTask> task;  // before loop: the loop keeps a reference
  std::unique_ptr<train::TrainingLoop> loop;
};
SegmentationTraining make_segmentation_training(model::UNet3d model,
                                                const SegmentationOptions& options,
                                                const dataset::FractalDataset& train_set,
                                                const dataset::FractalDataset& val_set,
                                                c10::Device device, dist::Communicator& comm,
                                                const dist::ProcessGrid& grid,
                                                Parallelism parallel = {});

}  // namespace scaffold::benchmark
