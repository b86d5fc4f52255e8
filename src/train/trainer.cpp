#include "train/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "model/autocast.hpp"
#include "model/memory_format.hpp"
#include "train/fused_adam.hpp"
#include "train/loss.hpp"
#include "train/schedule.hpp"

namespace scaffold::train {

namespace {

// The autocast state of a forward pass: bf16 on the training device when amp is on, else off.
model::AutocastState forward_autocast(const c10::Device& device, bool amp_bf16) {
  model::AutocastState s = model::AutocastState::current().disabled();
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

}  // namespace

// The U-Net on the fractal volumes: training sums (loss x B, soft Dice), validation sums
// (loss x B, hard Dice), over the spatial group when samples are sharded.
class Trainer::SegmentationTask : public TrainingTask {
 public:
  SegmentationTask(model::UNet3d model, const TrainerOptions& options,
                   const dataset::FractalDataset& train_set, const dataset::FractalDataset& val_set,
                   c10::Device device, const Parallelism& parallel)
      : model_(std::move(model)),
        options_(options),
        train_set_(train_set),
        val_set_(val_set),
        device_(device) {
    if (parallel.spatial) {
      spatial_sum_ = [ctx = parallel.spatial](const at::Tensor& t) {
        return model::spatial_sum(t, ctx);
      };
    }
    if (options_.channels_last) model::set_memory_format(*model_, at::MemoryFormat::ChannelsLast3d);
  }

  // The image in the model's memory format (a layout change on the device, no copy to the host).
  at::Tensor input(const at::Tensor& image) const {
    return options_.channels_last ? image.contiguous(at::MemoryFormat::ChannelsLast3d) : image;
  }

  torch::nn::Module& module() override { return *model_; }
  const dataset::ExampleSource& training_set() const override { return train_set_; }
  const dataset::ExampleSource& validation_set() const override { return val_set_; }
  std::vector<std::string> training_sum_names() const override {
    return {"loss_x_batch", "soft_dice"};
  }
  std::vector<std::string> validation_sum_names() const override {
    return {"loss_x_batch", "hard_dice"};
  }
  int sum_multiplicity() const override { return multiplicity_; }

  TrainForward train_forward(const dataset::Batch& batch) override {
    profile::Profiler* prof = options_.profiler;
    const at::Tensor image = input(batch.fields[0]);  // (B, 3, D, H, W)
    const at::Tensor& mask = batch.fields[1];         // (B, D, H, W)
    at::Tensor logits;
    {
      SCAFFOLD_PROFILE_REGION(prof, "predict");
      model::AutocastGuard amp(forward_autocast(device_, options_.amp_bf16));
      logits = model_->forward(image);
    }
    SCAFFOLD_PROFILE_REGION(prof, "calculate_loss");
    const LossTerms terms =
        segmentation_loss(logits, mask, class_weights_tensor_, spatial_sum_, options_.fused_loss);
    const double b = static_cast<double>(image.size(0));
    return {terms.loss, at::stack({terms.loss.detach() * b, terms.soft_dice.sum().detach()})};
  }

  at::Tensor validation_sums(const dataset::Batch& batch) override {
    const at::Tensor image = input(batch.fields[0]);
    const at::Tensor& mask = batch.fields[1];
    at::Tensor logits;
    {
      model::AutocastGuard amp(forward_autocast(device_, options_.amp_bf16));
      logits = model_->forward(image);
    }
    const LossTerms terms =
        segmentation_loss(logits, mask, class_weights_tensor_, spatial_sum_, options_.fused_loss);
    const at::Tensor hard = hard_dice_per_sample(logits, mask, options_.n_classes, spatial_sum_);
    const double b = static_cast<double>(image.size(0));
    return at::stack({terms.loss * b, hard.sum()});
  }

  void after_step() override { at::autocast::clear_cache(); }  // as leaving PyTorch's autocast
  void after_validation() override { at::autocast::clear_cache(); }  // context does

  EpochMetrics epoch_metrics(int64_t epoch, const PassSums& train,
                             const PassSums& val) const override {
    const double n_train = std::max(train.samples, 1.0), n_val = std::max(val.samples, 1.0);
    EpochMetrics m;
    m.values = {{"epoch_loss", train.sums[0]},           {"overall_loss", train.sums[0] / n_train},
                {"train_dice", train.sums[1] / n_train}, {"val_loss_epoch", val.sums[0]},
                {"val_loss_avg", val.sums[0] / n_val},   {"val_dice", val.sums[1] / n_val}};
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

  void estimate_class_weights(dist::Communicator& comm) {
    const auto n_train = static_cast<int64_t>(train_set_.size());
    const auto indices = ce_weight_sample_indices(n_train, options_.ce_weight_sample_fraction);
    std::vector<int64_t> counts(static_cast<std::size_t>(options_.n_classes), 0);
    dist::run_agreed(comm, [&] {
      for (int64_t i : indices) {
        const auto local =
            class_counts(train_set_.get(static_cast<std::size_t>(i)).mask, options_.n_classes);
        for (std::size_t c = 0; c < counts.size(); ++c) counts[c] += local[c];
      }
    });
    // Spatial shards of one sample hold disjoint voxels and replicas read the same samples, so the
    // world sum over-counts each voxel `replicas` times: the ratios, and so the weights, are
    // unchanged.
    comm.allreduce_sum(counts.data(), counts.size());
    const at::Tensor w = ce_class_weights(counts);
    class_weights_.assign(w.data_ptr<float>(), w.data_ptr<float>() + w.numel());
    class_weights_tensor_ = w.to(device_);
    LOG_INFO("CE class weights from {} of {} training masks: background {:.4g}, foreground {:.4g}",
             indices.size(), n_train, class_weights_[0],
             class_weights_.size() > 1 ? class_weights_[1] : 0.0);
  }

  model::UNet3d model_;
  const TrainerOptions& options_;
  const dataset::FractalDataset& train_set_;
  const dataset::FractalDataset& val_set_;
  c10::Device device_;
  std::function<at::Tensor(const at::Tensor&)> spatial_sum_;  // empty: whole samples here
  int multiplicity_ = 1;
  std::vector<double> class_weights_;
  at::Tensor class_weights_tensor_;  // (K) float32 on device
};

Trainer::Trainer(model::UNet3d model, TrainerOptions options,
                 const dataset::FractalDataset& train_set, const dataset::FractalDataset& val_set,
                 c10::Device device, dist::Communicator& comm, const dist::ProcessGrid& grid,
                 Parallelism parallel)
    : options_(std::move(options)), comm_(comm) {
  task_ = std::make_unique<SegmentationTask>(std::move(model), options_, train_set, val_set, device,
                                             parallel);
  task_->multiplicity_ = grid.spatial_size();  // the shards of a sample each add its sums
  LoopOptions lo;
  lo.local_batch_size = options_.local_batch_size;
  lo.target = options_.target_dice;
  lo.max_epochs = options_.epochs;
  lo.warmup_batches = options_.warmup_batches;
  const std::string optimizer = options_.optimizer;
  const double lr = options_.learning_rate;
  lo.make_optimizer =
      [optimizer,
       lr](const std::vector<at::Tensor>& params) -> std::unique_ptr<torch::optim::Optimizer> {
    if (optimizer == "ADAM")
      return std::make_unique<FusedAdam>(params, torch::optim::AdamOptions(lr));
    if (optimizer == "SGD")
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
    return std::make_unique<torch::optim::RMSprop>(
        params, torch::optim::RMSpropOptions(lr).alpha(0.99).eps(1e-8));
  };
  const TrainerOptions o = options_;
  lo.lr_after = [o](int64_t epochs_completed) {
    if (o.disable_scheduler) return o.learning_rate;
    return CosineWarmRestarts(o.learning_rate, o.min_learning_rate, o.T_0, o.T_mult)
        .lr_after(epochs_completed);
  };
  lo.grad_clip_norm = options_.grad_clip_norm;
  lo.checkpoint_interval = options_.checkpoint_interval;
  lo.checkpoint_dir = options_.checkpoint_dir;
  lo.async_save = options_.async_save;
  lo.seed = options_.seed;
  lo.loader_workers = options_.loader_workers;
  lo.profiler = options_.profiler;
  lo.watchdog = options_.watchdog;
  LoopParallelism lp;
  lp.world = parallel.world;
  lp.bucket_bytes = parallel.bucket_bytes;
  loop_ = std::make_unique<TrainingLoop>(*task_, std::move(lo), device, comm, grid, std::move(lp));
}

Trainer::~Trainer() = default;

model::UNet3d& Trainer::model() {
  return task_->model_;
}

const std::vector<double>& Trainer::class_weights() const {
  return task_->class_weights_;
}

void Trainer::estimate_class_weights() {
  task_->estimate_class_weights(comm_);
}

double Trainer::warmup() {
  return loop_->warmup();
}

TrainCounters Trainer::resume(const std::filesystem::path& checkpoint_dir) {
  return loop_->resume(checkpoint_dir);
}

TrainResult Trainer::run(const std::function<void(const EpochStats&)>& on_epoch) {
  const LoopResult r = loop_->run([&](const LoopEpoch& e) {
    EpochStats st;
    st.epoch = e.epoch;
    const auto& v = e.metrics.values;  // SegmentationTask's order
    st.epoch_loss = v[0].second;
    st.overall_loss = v[1].second;
    st.train_dice = v[2].second;
    st.val_loss_epoch = v[3].second;
    st.val_loss_avg = v[4].second;
    st.val_dice = v[5].second;
    st.duration_s = e.duration_s;
    st.optimizer_steps = e.optimizer_steps;
    st.total_optimizer_steps = e.total_optimizer_steps;
    st.next_lr = e.next_lr;
    st.median_step_s = e.median_step_s;
    st.train_s = e.train_s;
    st.validation_s = e.validation_s;
    st.start_mono_s = e.start_mono_s;
    st.validation_start_mono_s = e.validation_start_mono_s;
    st.end_mono_s = e.end_mono_s;
    on_epoch(st);
  });
  TrainResult result;
  result.converged = r.converged;
  result.stopped = r.stopped;
  result.stop_signal = r.stop_signal;
  result.epochs_run = r.epochs_run;
  result.last_epoch = r.last_epoch;
  result.total_optimizer_steps = r.total_optimizer_steps;
  result.final_val_dice = r.final_stop_value;
  result.step_times_s = r.step_times_s;
  return result;
}

}  // namespace scaffold::train
