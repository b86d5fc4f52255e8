#include "workloads/fno/task.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "nn/autocast.hpp"

namespace scaffold::fno {

at::Tensor error_sums(const at::Tensor& pred, const at::Tensor& target, const FftShard& shard) {
  const int64_t b = pred.size(0);
  const at::Tensor p = pred.to(at::kDouble).reshape({b, -1});
  const at::Tensor t = target.to(at::kDouble).reshape({b, -1});
  const at::Tensor points = at::full({b}, static_cast<double>(p.size(1)), p.options());
  const at::Tensor local =
      at::stack({(p - t).square().sum(1), t.square().sum(1), points}, 1);  // (B, 3)
  return shard_sum(local, shard);
}

at::Tensor relative_l2(const at::Tensor& pred, const at::Tensor& target, const FftShard& shard) {
  const at::Tensor s = error_sums(pred, target, shard);
  return (s.select(1, 0) / s.select(1, 1)).sqrt();
}

at::Tensor field_relative_l2(const at::Tensor& pred, const at::Tensor& target,
                             const FftShard& shard) {
  const int64_t b = pred.size(0), c = pred.size(1);
  const at::Tensor p = pred.to(at::kDouble).reshape({b, c, -1});
  const at::Tensor t = target.to(at::kDouble).reshape({b, c, -1});
  const at::Tensor s =
      shard_sum(at::stack({(p - t).square().sum(2), t.square().sum(2)}, 2), shard);  // (B, C, 2)
  return (s.select(2, 0) / s.select(2, 1)).sqrt().mean(1);
}

at::Tensor FnoTask::relative_error(const at::Tensor& pred, const at::Tensor& target,
                                   const FftShard& shard) const {
  return options_.field_relative ? field_relative_l2(pred, target, shard)
                                 : relative_l2(pred, target, shard);
}

at::Tensor shard_slab(const at::Tensor& field, const FftShard* shard) {
  if (shard == nullptr || shard->parts() == 1) return field;
  SCAFFOLD_CHECK(field.size(2) == shard->extent,
                 fmt::format("an example's first grid dimension has {} points, the shard layout {}",
                             field.size(2), shard->extent));
  const IndexRange r = shard->local();
  return field.narrow(2, r.start, r.length).contiguous();
}

FnoTask::FnoTask(Fno model, const data::ExampleSource& train_set,
                 const data::ExampleSource& val_set, c10::Device device, FnoTaskOptions options)
    : model_(std::move(model)),
      train_set_(train_set),
      val_set_(val_set),
      device_(device),
      options_(std::move(options)) {
  if (options_.precision != "fp32" && options_.precision != "bf16")
    throw core::Error(fmt::format("precision: '{}' is not one of fp32, bf16", options_.precision));
  if (device_.is_cuda()) {
    // fp32 means fp32: no TF32 in the pointwise matrix products.
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  model_->set_shard(options_.shard);
  if (options_.rollout_steps < 0 || options_.step_channels < 1)
    throw core::Error(
        fmt::format("FnoTask: rollout_steps {} and step_channels {} (expected >= 0 and >= 1)",
                    options_.rollout_steps, options_.step_channels));
}

namespace {
// Autocast's bf16 outputs as float32; float32 and float64 as they are.
at::Tensor full_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t;
}
}  // namespace

at::Tensor FnoTask::predict(const at::Tensor& input) {
  nn::AutocastState s = nn::AutocastState::current().disabled();
  if (options_.precision == "bf16") {
    (device_.is_cuda() ? s.cuda_enabled : s.cpu_enabled) = true;
    (device_.is_cuda() ? s.cuda_dtype : s.cpu_dtype) = at::kBFloat16;
  }
  nn::AutocastGuard amp(s);
  at::Tensor x = shard_slab(input, options_.shard.get());
  if (options_.rollout_steps == 0) return full_precision(model_->forward(x));
  // The rollout: each step's prediction becomes the newest input step, the oldest is dropped.
  const int64_t c = options_.step_channels;
  SCAFFOLD_CHECK(x.size(1) % c == 0 && x.size(1) >= c,
                 fmt::format("the input has {} channels, not a multiple of the {} per time step",
                             x.size(1), c));
  std::vector<at::Tensor> steps;
  steps.reserve(static_cast<std::size_t>(options_.rollout_steps));
  for (int64_t t = 0; t < options_.rollout_steps; ++t) {
    at::Tensor y = full_precision(model_->forward(x));  // (B, c, *slab)
    x = at::cat({x.narrow(1, c, x.size(1) - c).to(y.scalar_type()), y}, 1);
    steps.push_back(std::move(y));
  }
  return at::cat(steps, 1);
}

train::TrainForward FnoTask::train_forward(const data::Batch& batch) {
  at::Tensor out;
  {
    SCAFFOLD_PROFILE_REGION(options_.profiler, "predict");
    out = predict(batch.fields[0]);  // (B, C_out, *slab)
  }
  SCAFFOLD_PROFILE_REGION(options_.profiler, "calculate_loss");
  const FftShard none;
  const FftShard& shard = options_.shard ? *options_.shard : none;
  const at::Tensor target = shard_slab(batch.fields[1], options_.shard.get());
  const at::Tensor rel = relative_error(out, target, shard);  // (B), the whole trajectory
  if (options_.rollout_steps == 0)
    return {rel.mean().to(at::kFloat), rel.detach().sum().reshape({1})};
  // Recurrent: the paper's objective, the sum over the steps of each step's relative L2 error.
  const int64_t c = options_.step_channels;
  at::Tensor per_step = at::zeros({out.size(0)}, out.options().dtype(at::kDouble));
  for (int64_t t = 0; t < options_.rollout_steps; ++t)
    per_step =
        per_step + relative_error(out.narrow(1, t * c, c), target.narrow(1, t * c, c), shard);
  return {per_step.mean().to(at::kFloat), rel.detach().sum().reshape({1})};
}

at::Tensor FnoTask::validation_sums(const data::Batch& batch) {
  const at::Tensor out = predict(batch.fields[0]);
  const FftShard none;
  const FftShard& shard = options_.shard ? *options_.shard : none;
  const at::Tensor target = shard_slab(batch.fields[1], options_.shard.get());
  const at::Tensor s = error_sums(out, target, shard);
  const at::Tensor rel = options_.field_relative ? field_relative_l2(out, target, shard)
                                                 : (s.select(1, 0) / s.select(1, 1)).sqrt();
  const at::Tensor mse = s.select(1, 0) / s.select(1, 2);
  return at::stack({rel.sum(), mse.sum()});
}

void FnoTask::after_step() {
  at::autocast::clear_cache();
}

void FnoTask::after_validation() {
  at::autocast::clear_cache();
}

train::EpochMetrics FnoTask::epoch_metrics(int64_t epoch, const train::PassSums& train,
                                           const train::PassSums& val) const {
  const double n_train = std::max(train.samples, 1.0), n_val = std::max(val.samples, 1.0);
  if (!std::isfinite(train.sums[0]) || !std::isfinite(val.sums[0]))
    throw core::Error(
        fmt::format("training diverged at epoch {}: training relative L2 {}, validation {} (lower "
                    "learning_rate, or use fp32)",
                    epoch, train.sums[0] / n_train, val.sums[0] / n_val));
  train::EpochMetrics m;
  m.values = {{"train_rel_l2", train.sums[0] / n_train},
              {"val_rel_l2", val.sums[0] / n_val},
              {"val_mse", val.sums[1] / n_val}};
  m.stop_value = val.sums[0] / n_val;
  m.val_loss = val.sums[0] / n_val;
  return m;
}

}  // namespace scaffold::fno
