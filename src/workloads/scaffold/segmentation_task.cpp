#include "workloads/scaffold/segmentation_task.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/fused_adam.hpp"
#include "nn/autocast.hpp"
#include "nn/memory_format.hpp"
#include "train/schedule.hpp"
#include "workloads/scaffold/loss.hpp"

namespace scaffold::benchmark {

namespace {

// An optimizer whose steps are counted in the run's kernel tally: "optimizer" fused when
// FusedAdam took its one pass, libtorch when it fell back to LibTorch's step or is LibTorch's.
template <typename Optimizer>
class Counted : public Optimizer {
 public:
  template <typename Options>
  Counted(const std::vector<at::Tensor>& params, const Options& options,
          model::KernelChoice kernels)
      : Optimizer(params, options), kernels_(std::move(kernels)) {}
  at::Tensor step(typename Optimizer::LossClosure closure = nullptr) override {
    at::Tensor loss = Optimizer::step(std::move(closure));
    if constexpr (std::is_base_of_v<kernels::FusedAdam, Optimizer>)
      kernels_.ran("optimizer", this->last_step_fused() ? "fused" : "libtorch",
                   "a parameter it does not fuse (not a dense float32 CPU tensor)");
    else
      kernels_.ran("optimizer", "libtorch");
    return loss;
  }

 private:
  model::KernelChoice kernels_;
};

// The autocast state of a forward pass: bf16 on the training device when amp is on, else off.
nn::AutocastState forward_autocast(const c10::Device& device, bool amp_bf16) {
  nn::AutocastState s = nn::AutocastState::current().disabled();
  if (amp_bf16) {
    if (device.is_cuda()) {
      s.cuda_enabled = true;
      s.cuda_dtype = at::kBFloat16;
    } else {
      s.cpu_enabled = true;
      s.cpu_dtype = at::kBFloat16;
    }
  }
  return s;
}

// epoch_metrics' names, in its order (epoch_stats reads them by these names).
constexpr const char* kEpochLoss = "epoch_loss";
constexpr const char* kOverallLoss = "overall_loss";
constexpr const char* kTrainDice = "train_dice";
constexpr const char* kValLossEpoch = "val_loss_epoch";
constexpr const char* kValLossAvg = "val_loss_avg";
constexpr const char* kValDice = "val_dice";

double metric(const train::EpochMetrics& m, const char* name) {
  for (const auto& [key, value] : m.values)
    if (key == name) return value;
  throw core::Error(fmt::format("the segmentation's epoch metrics have no '{}'", name));
}

}  // namespace

EpochStats epoch_stats(const train::LoopEpoch& e) {
  EpochStats st;
  st.epoch = e.epoch;
  st.epoch_loss = metric(e.metrics, kEpochLoss);
  st.overall_loss = metric(e.metrics, kOverallLoss);
  st.train_dice = metric(e.metrics, kTrainDice);
  st.val_loss_epoch = metric(e.metrics, kValLossEpoch);
  st.val_loss_avg = metric(e.metrics, kValLossAvg);
  st.val_dice = metric(e.metrics, kValDice);
  st.duration_s = e.duration_s;
  st.optimizer_steps = e.optimizer_steps;
  st.total_optimizer_steps = e.total_optimizer_steps;
  st.next_lr = e.next_lr;
  st.median_step_s = e.median_step_s;
  st.train_s = e.train_s;
  st.validation_s = e.validation_s;
  return st;
}

// The U-Net on the fractal volumes: training sums (loss x B, soft Dice), validation sums
// (loss x B, hard Dice), over the spatial group when samples are sharded.
SegmentationTask::SegmentationTask(model::UNet3d model, SegmentationOptions options,
                                   const dataset::FractalDataset& train_set,
                                   const dataset::FractalDataset& val_set, c10::Device device,
                                   std::shared_ptr<const model::SpatialContext> spatial,
                                   int multiplicity)
    : model_(std::move(model)),
      options_(std::move(options)),
      train_set_(train_set),
      val_set_(val_set),
      device_(device),
      multiplicity_(multiplicity) {
  if (spatial) {
    spatial_sum_ = [ctx = std::move(spatial)](const at::Tensor& t) {
      return model::spatial_sum(t, ctx);
    };
  }
  if (options_.channels_last) nn::set_memory_format(*model_, at::MemoryFormat::ChannelsLast3d);
}

// The image in the model's memory format (a layout change on the device, no copy to the host).
at::Tensor SegmentationTask::input(const at::Tensor& image) const {
  return options_.channels_last ? image.contiguous(at::MemoryFormat::ChannelsLast3d) : image;
}

at::Tensor SegmentationTask::logits_of(const at::Tensor& image) {
  nn::AutocastGuard amp(forward_autocast(device_, options_.amp_bf16));
  return model_->forward(image);
}

std::vector<std::string> SegmentationTask::training_sum_names() const {
  return {"loss_x_batch", "soft_dice"};
}

std::vector<std::string> SegmentationTask::validation_sum_names() const {
  return {"loss_x_batch", "hard_dice"};
}

train::TrainForward SegmentationTask::train_forward(const data::Batch& batch) {
  profile::Profiler* prof = options_.profiler;
  const at::Tensor image = input(batch.fields[0]);  // (B, 3, D, H, W)
  const at::Tensor& mask = batch.fields[1];         // (B, D, H, W)
  at::Tensor logits;
  {
    SCAFFOLD_PROFILE_REGION(prof, "predict");
    logits = logits_of(image);
  }
  SCAFFOLD_PROFILE_REGION(prof, "calculate_loss");
  const train::LossTerms terms = train::segmentation_loss(
      logits, mask, class_weights_tensor_, spatial_sum_,
      options_.kernels.loss == model::LossKernel::Fused, options_.kernels.use.get());
  const double b = static_cast<double>(image.size(0));
  return {terms.loss, at::stack({terms.loss.detach() * b, terms.soft_dice.sum().detach()})};
}

at::Tensor SegmentationTask::validation_sums(const data::Batch& batch) {
  const at::Tensor image = input(batch.fields[0]);
  const at::Tensor& mask = batch.fields[1];
  const at::Tensor logits = logits_of(image);
  const train::LossTerms terms = train::segmentation_loss(
      logits, mask, class_weights_tensor_, spatial_sum_,
      options_.kernels.loss == model::LossKernel::Fused, options_.kernels.use.get());
  const at::Tensor hard =
      train::hard_dice_per_sample(logits, mask, options_.n_classes, spatial_sum_);
  const double b = static_cast<double>(image.size(0));
  return at::stack({terms.loss * b, hard.sum()});
}

// As leaving PyTorch's autocast context does.
void SegmentationTask::after_step() {
  at::autocast::clear_cache();
}
void SegmentationTask::after_validation() {
  at::autocast::clear_cache();
}

train::EpochMetrics SegmentationTask::epoch_metrics(int64_t epoch, const train::PassSums& train,
                                                    const train::PassSums& val) const {
  const double n_train = std::max(train.samples, 1.0), n_val = std::max(val.samples, 1.0);
  train::EpochMetrics m;
  m.values = {{kEpochLoss, train.sums[0]},           {kOverallLoss, train.sums[0] / n_train},
              {kTrainDice, train.sums[1] / n_train}, {kValLossEpoch, val.sums[0]},
              {kValLossAvg, val.sums[0] / n_val},    {kValDice, val.sums[1] / n_val}};
  if (!std::isfinite(train.sums[0]) || !std::isfinite(val.sums[0]))
    throw core::Error(
        fmt::format("training diverged at epoch {}: training loss {}, validation loss {}", epoch,
                    train.sums[0], val.sums[0]));
  m.stop_value = val.sums[1] / n_val;
  if (std::isnan(m.stop_value))
    throw core::Error(fmt::format("validation Dice is NaN at epoch {}", epoch));
  m.val_loss = val.sums[0] / n_val;
  return m;
}

void SegmentationTask::estimate_class_weights(dist::Communicator& comm) {
  const auto n_train = static_cast<int64_t>(train_set_.size());
  const auto indices = train::ce_weight_sample_indices(n_train, options_.ce_weight_sample_fraction);
  std::vector<int64_t> counts(static_cast<std::size_t>(options_.n_classes), 0);
  dist::run_agreed(comm, [&] {
    for (int64_t i : indices) {
      const auto local =
          train::class_counts(train_set_.get(static_cast<std::size_t>(i)).mask, options_.n_classes);
      for (std::size_t c = 0; c < counts.size(); ++c) counts[c] += local[c];
    }
  });
  // Spatial shards of one sample hold disjoint voxels and replicas read the same samples, so the
  // world sum over-counts each voxel `replicas` times: the ratios, and so the weights, are
  // unchanged.
  comm.allreduce_sum(counts.data(), counts.size());
  const at::Tensor w = train::ce_class_weights(counts);
  class_weights_.assign(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
  class_weights_tensor_ = w.to(device_);
  LOG_INFO("CE class weights from {} of {} training masks: background {:.4g}, foreground {:.4g}",
           indices.size(), n_train, class_weights_[0],
           class_weights_.size() > 1 ? class_weights_[1] : 0.0);
}

train::LoopOptions segmentation_loop_options(const SegmentationOptions& o) {
  train::LoopOptions lo;
  lo.local_batch_size = o.local_batch_size;
  lo.target = o.target_dice;
  lo.max_epochs = o.epochs;
  lo.warmup_batches = o.warmup_batches;
  lo.make_optimizer =
      [optimizer = o.optimizer, lr = o.learning_rate, kernels = o.kernels](
          const std::vector<at::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
    if (optimizer == "ADAM") {
      if (kernels.optimizer == model::OptimizerKernel::Fused)
        return std::make_unique<Counted<kernels::FusedAdam>>(params, torch::optim::AdamOptions(lr),
                                                             kernels);
      return std::make_unique<Counted<torch::optim::Adam>>(params, torch::optim::AdamOptions(lr),
                                                           kernels);
    }
    if (optimizer == "SGD")
      return std::make_unique<Counted<torch::optim::SGD>>(params, torch::optim::SGDOptions(lr),
                                                          kernels);
    return std::make_unique<Counted<torch::optim::RMSprop>>(
        params, torch::optim::RMSpropOptions(lr).alpha(0.99).eps(1e-8), kernels);
  };
  lo.lr_after = [o](int64_t epochs_completed) {
    if (o.disable_scheduler) return o.learning_rate;
    return train::CosineWarmRestarts(o.learning_rate, o.min_learning_rate, o.T_0, o.T_mult)
        .lr_after(epochs_completed);
  };
  lo.grad_clip_norm = o.grad_clip_norm;
  lo.checkpoint_interval = o.checkpoint_interval;
  lo.checkpoint_dir = o.checkpoint_dir;
  lo.async_save = o.async_save;
  lo.seed = o.seed;
  lo.loader_workers = o.loader_workers;
  lo.profiler = o.profiler;
  return lo;
}

SegmentationTraining make_segmentation_training(model::UNet3d model,
                                                const SegmentationOptions& options,
                                                const dataset::FractalDataset& train_set,
                                                const dataset::FractalDataset& val_set,
                                                c10::Device device, dist::Communicator& comm,
                                                const dist::ProcessGrid& grid,
                                                Parallelism parallel) {
  SegmentationTraining t;
  t.task = std::make_unique<SegmentationTask>(std::move(model), options, train_set, val_set, device,
                                              parallel.spatial, grid.spatial_size());
  train::LoopParallelism lp;
  lp.world = std::move(parallel.world);
  lp.bucket_bytes = parallel.bucket_bytes;
  t.loop = std::make_unique<train::TrainingLoop>(*t.task, segmentation_loop_options(options),
                                                 device, comm, grid, std::move(lp));
  return t;
}

}  // namespace scaffold::benchmark
