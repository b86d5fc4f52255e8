// Loss, Dice and CE weights (docs/benchmark.md), transcribed from ScaFFold's losses.py and
// dice_score.py. Labels are compared against the foreground class ids as bool masks instead of a
// float one-hot of the full volume: 1 byte per voxel and class is kept for backward instead of 4,
// and the background Dice, which nothing reads, is never formed. No communication happens here.
#include "workloads/scaffold/loss.hpp"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "kernels/kernel_use.hpp"
#include "workloads/scaffold/fused_loss.hpp"

namespace scaffold::train {
namespace {

constexpr double kDiceEps = 1e-6;
constexpr int64_t kDhw[] = {2, 3, 4};  // D, H, W of a (B, K, D, H, W) tensor

// Autocast off for the scope, the previous state restored on exit. Excluding the autocast
// dispatch keys is what at::autocast::set_enabled/set_cpu_enabled (1.13) and
// set_autocast_enabled (2.4+) do underneath; the guard form needs no version switch and none of
// the calls 2.4 deprecated (a warning, so an error here).
class NoAutocast {
 public:
  NoAutocast()
      : guard_(
            c10::DispatchKeySet({c10::DispatchKey::AutocastCPU, c10::DispatchKey::AutocastCUDA})) {}

 private:
  c10::impl::ExcludeDispatchKeyGuard guard_;
};

std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

at::Tensor sum_over_shards(const SpatialSum& spatial_sum, const at::Tensor& local) {
  return spatial_sum ? spatial_sum(local) : local;
}

// logits (B, K, D, H, W), target (B, D, H, W) int64 on the same device; returns K.
int64_t check_inputs(const at::Tensor& logits, const at::Tensor& target, const char* caller) {
  SCAFFOLD_CHECK(logits.dim() == 5 && c10::isFloatingType(logits.scalar_type()),
                 fmt::format("{}: logits must be floating (B, K, D, H, W), got {} {}", caller,
                             c10::toString(logits.scalar_type()), shape_of(logits)));
  SCAFFOLD_CHECK(target.dim() == 4 && target.scalar_type() == at::kLong,
                 fmt::format("{}: target must be int64 (B, D, H, W), got {} {}", caller,
                             c10::toString(target.scalar_type()), shape_of(target)));
  SCAFFOLD_CHECK(
      logits.size(0) == target.size(0) && logits.sizes().slice(2) == target.sizes().slice(1),
      fmt::format("{}: logits {} and target {} disagree on B, D, H, W", caller, shape_of(logits),
                  shape_of(target)));
  SCAFFOLD_CHECK(logits.device() == target.device(),
                 fmt::format("{}: logits on {} but target on {}", caller, logits.device().str(),
                             target.device().str()));
  const int64_t n_classes = logits.size(1);
  // One channel leaves no foreground class to average over (ScaFFold rejects n_categories < 1).
  SCAFFOLD_CHECK(n_classes >= 2,
                 fmt::format("{}: need at least 2 classes, got {}", caller, n_classes));
  return n_classes;
}

// Foreground-class masks: (B, K-1, D, H, W) bool, true where target == c for c = 1..K-1.
at::Tensor foreground_masks(const at::Tensor& labels /*(B, D, H, W) int64*/, int64_t n_classes) {
  const at::Tensor classes =
      at::arange(1, n_classes, labels.options()).view({1, n_classes - 1, 1, 1, 1});
  return labels.unsqueeze(1).eq(classes);
}

// The Dice formula on globally summed I and S, both (B, K-1). Returns (B, K-1).
at::Tensor dice_from_sums(const at::Tensor& local_intersection, const at::Tensor& local_set_sum,
                          const SpatialSum& spatial_sum) {
  const at::Tensor global =
      sum_over_shards(spatial_sum, at::stack({local_intersection, local_set_sum}));
  const at::Tensor intersection = global.select(0, 0);
  const at::Tensor set_sum_raw = global.select(0, 1);
  // Empty in both prediction and target: S = 0, and S := I = 0 makes the score eps/eps = 1.
  const at::Tensor set_sum = at::where(set_sum_raw.eq(0), intersection, set_sum_raw);
  return (intersection + kDiceEps) / (set_sum + kDiceEps);
}

}  // namespace

LossTerms segmentation_loss(const at::Tensor& logits, const at::Tensor& target,
                            const at::Tensor& class_weights, const SpatialSum& spatial_sum,
                            bool fused, kernels::KernelUse* use) {
  const int64_t n_classes = check_inputs(logits, target, "segmentation_loss");
  SCAFFOLD_CHECK(class_weights.dim() == 1 && class_weights.size(0) == n_classes,
                 fmt::format("segmentation_loss: class_weights must be ({}), got {}", n_classes,
                             shape_of(class_weights)));
  NoAutocast no_autocast;

  // float32 at least: bf16 logits from an autocast forward are upcast before anything else.
  const at::ScalarType dtype = logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor x = logits.to(dtype);  // (B, K, D, H, W)

  const double tiny = dtype == at::kDouble ? std::numeric_limits<double>::epsilon()
                                           : std::numeric_limits<float>::epsilon();
  at::Tensor ce_sums, intersection, set_sum;
  const bool fused_runs = fused && softmax_loss_sums_supported(x);
  if (use)
    use->ran("loss", fused_runs ? "fused" : "libtorch", fused ? "logits it does not take" : "");
  if (fused_runs) {
    // The same local sums from one pass over the logits (fused_loss.hpp).
    const int64_t b = x.size(0), fg = n_classes - 1;
    const at::Tensor sums =
        softmax_loss_sums(x, target, class_weights.to(x.device(), dtype).contiguous());
    ce_sums = sum_over_shards(spatial_sum, sums.narrow(0, 0, 2));
    intersection = 2.0 * sums.narrow(0, 2, b * fg).view({b, fg});
    set_sum = sums.narrow(0, 2 + b * fg, b * fg).view({b, fg}) +
              sums.narrow(0, 2 + 2 * b * fg, b * fg).view({b, fg});
  } else {
    // Weighted CE = Σ w[y]·(−log p_y) / Σ w[y] over every voxel of every sample.
    const at::Tensor log_p = x.log_softmax(1);
    const at::Tensor labels = target.reshape({-1});                                      // (N)
    const at::Tensor log_p_y = log_p.gather(1, target.unsqueeze(1)).reshape({-1});       // (N)
    const at::Tensor w_y = class_weights.to(x.device(), dtype).index_select(0, labels);  // (N)
    ce_sums = sum_over_shards(spatial_sum, at::stack({(-log_p_y * w_y).sum(), w_y.sum()}));
    // Soft Dice on the foreground classes. p is the separate softmax ScaFFold computes, not
    // exp(log_p), to keep its rounding.
    const at::Tensor p_fg = x.softmax(1).narrow(1, 1, n_classes - 1);  // (B, K-1, D, H, W)
    const at::Tensor g_fg = foreground_masks(target, n_classes);       // (B, K-1, D, H, W) bool
    intersection = 2.0 * (p_fg * g_fg).sum(kDhw);                      // (B, K-1)
    set_sum = p_fg.sum(kDhw) + g_fg.sum(kDhw, false, dtype);
  }
  const at::Tensor ce = ce_sums.select(0, 0) / ce_sums.select(0, 1).clamp_min(tiny);
  const at::Tensor dice = dice_from_sums(intersection, set_sum, spatial_sum);  // (B, K-1)

  LossTerms terms;
  terms.loss = ce + (1.0 - dice.mean());
  terms.ce = ce.detach();
  terms.soft_dice = dice.detach().mean(1);
  return terms;
}

at::Tensor hard_dice_per_sample(const at::Tensor& logits, const at::Tensor& target,
                                int64_t n_classes, const SpatialSum& spatial_sum) {
  const int64_t channels = check_inputs(logits, target, "hard_dice_per_sample");
  SCAFFOLD_CHECK(channels == n_classes,
                 fmt::format("hard_dice_per_sample: logits have {} channels, n_classes is {}",
                             channels, n_classes));
  NoAutocast no_autocast;

  // argmax is the same on bf16 logits and on their float32 upcast, so no cast is needed.
  const at::Tensor predicted = foreground_masks(logits.argmax(1), n_classes);  // (B, K-1, D, H, W)
  const at::Tensor truth = foreground_masks(target, n_classes);                // (B, K-1, D, H, W)
  const at::Tensor intersection = 2.0 * predicted.logical_and(truth).sum(kDhw, false, at::kFloat);
  const at::Tensor set_sum =
      predicted.sum(kDhw, false, at::kFloat) + truth.sum(kDhw, false, at::kFloat);
  return dice_from_sums(intersection, set_sum, spatial_sum).mean(1);
}

std::vector<int64_t> ce_weight_sample_indices(int64_t n_train, double fraction) {
  if (n_train < 0)
    throw core::Error(
        fmt::format("ce_weight_sample_indices: n_train must be >= 0, got {}", n_train));
  if (!std::isfinite(fraction))
    throw core::Error(
        fmt::format("ce_weight_sample_fraction must be a finite number, got {}", fraction));
  if (n_train == 0) return {};
  const double wanted = std::ceil(static_cast<double>(n_train) * fraction);
  const auto k =
      static_cast<int64_t>(std::min(std::max(wanted, 1.0), static_cast<double>(n_train)));
  // numpy.linspace: i·step with step = (stop − start)/(k − 1), the last value set to stop exactly.
  std::vector<int64_t> indices(static_cast<std::size_t>(k));
  const double step = k > 1 ? static_cast<double>(n_train - 1) / static_cast<double>(k - 1) : 0.0;
  for (int64_t i = 0; i < k; ++i)
    indices[static_cast<std::size_t>(i)] = static_cast<int64_t>(static_cast<double>(i) * step);
  indices.back() = k > 1 ? n_train - 1 : 0;
  return indices;
}

std::vector<int64_t> class_counts(const at::Tensor& mask, int64_t n_classes) {
  if (n_classes < 1)
    throw core::Error(fmt::format("class_counts: n_classes must be >= 1, got {}", n_classes));
  if (!c10::isIntegralType(mask.scalar_type(), /*includeBool=*/false))
    throw core::Error(fmt::format("class_counts: mask must hold integer labels, got {}",
                                  c10::toString(mask.scalar_type())));
  std::vector<int64_t> counts(static_cast<std::size_t>(n_classes), 0);
  if (mask.numel() == 0) return counts;
  const at::Tensor labels = mask.reshape({-1}).to(at::kLong);
  // Checked first: bincount would silently grow its output for a label >= n_classes.
  for (const int64_t extreme : {labels.min().item<int64_t>(), labels.max().item<int64_t>()}) {
    if (extreme < 0 || extreme >= n_classes)
      throw core::Error(
          fmt::format("mask holds label {}, outside the classes [0, {})", extreme, n_classes));
  }
  const at::Tensor bins = labels.bincount({}, n_classes).to(at::kCPU).contiguous();
  const int64_t* data = bins.data_ptr<int64_t>();
  counts.assign(data, data + n_classes);
  return counts;
}

at::Tensor ce_class_weights(const std::vector<int64_t>& counts) {
  if (counts.empty()) throw core::Error("ce_class_weights: no class counts");
  int64_t foreground = 0;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] < 0)
      throw core::Error(
          fmt::format("ce_class_weights: class {} has a negative count {}", c, counts[c]));
    if (c > 0) foreground += counts[c];
  }
  const int64_t background = counts[0];
  const auto n_classes = static_cast<int64_t>(counts.size());
  at::Tensor weights = at::ones({n_classes}, at::kFloat);
  if (background == 0 || foreground == 0) return weights;
  // Python's int / int: the double quotient, then stored into a float32 tensor.
  const double total = static_cast<double>(background + foreground);
  float* w = weights.data_ptr<float>();
  w[0] = static_cast<float>(total / static_cast<double>(background));
  for (int64_t c = 1; c < n_classes; ++c)
    w[c] = static_cast<float>(total / static_cast<double>(foreground));
  return weights;
}

}  // namespace scaffold::train
