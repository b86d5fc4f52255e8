// The training loss and the Dice metrics (docs/benchmark.md): class-weighted cross-entropy plus
// (1 - mean soft foreground Dice), the hard (argmax) Dice of validation, and the CE class weights
// estimated from a few training masks. Every sum over D,H,W goes through a SpatialSum, so a
// spatially sharded run gets the unsharded value; this file does no communication itself.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace scaffold::kernels {
class KernelUse;
}

namespace scaffold::train {

// Sums a tensor of local partial sums over the ranks that hold the other spatial shards of the
// same samples, and returns the global sums (same shape, dtype and device). The loss and Dice
// route every sum over D,H,W through it, once per quantity group: CE stacks its numerator and
// denominator into one (2) tensor, each Dice stacks I and S into one (2, B, K-1) tensor. In
// training it must be an identity in backward (the gradient of a global sum w.r.t. a local
// partial sum is 1), as ScaFFold's SpatialAllReduce is. Empty (the default): the identity, for a
// single process or an unsharded volume.
using SpatialSum = std::function<at::Tensor(const at::Tensor&)>;

struct LossTerms {
  at::Tensor loss;  // () differentiable: ce + (1 - mean over batch and fg classes of soft Dice)
  at::Tensor ce;    // () detached: class-weighted cross-entropy
  at::Tensor soft_dice;  // (B) detached: per-sample mean soft Dice over classes 1..K-1
};

// Loss of one batch. Computed in float32 whatever the logits dtype (float64 logits stay float64,
// which the gradient check uses), with autocast off inside and restored on return.
//   logits:        (B, K, D, H, W) any floating dtype, the local spatial shard
//   target:        (B, D, H, W) int64 labels in [0, K), same device
//   class_weights: (K) float32 (moved to the logits' device if it is not there)
//   fused:         float32 CPU logits take the one-pass kernel of fused_loss.hpp for the voxel
//                  sums; false (or other logits): LibTorch's operators, the reference
//   use:           counts the call as "loss" fused or libtorch (the run's kernels_run), if set
LossTerms segmentation_loss(const at::Tensor& logits, const at::Tensor& target,
                            const at::Tensor& class_weights, const SpatialSum& spatial_sum = {},
                            bool fused = true, kernels::KernelUse* use = nullptr);

// Hard Dice per sample: one-hot(argmax logits) against one-hot(target), I = 2·Σ pred·true and
// S = Σ pred + Σ true summed over D,H,W through spatial_sum, (I + 1e-6)/(S + 1e-6) with S := I
// where S == 0 (a class absent from both scores 1), averaged over classes 1..n_classes-1.
//   logits: (B, K, D, H, W) any floating dtype, K == n_classes;  target: (B, D, H, W) int64
// Returns (B) float32 on the logits' device; not differentiable.
at::Tensor hard_dice_per_sample(const at::Tensor& logits, const at::Tensor& target,
                                int64_t n_classes, const SpatialSum& spatial_sum = {});

// Indices of the training samples whose masks estimate the CE weights: k = min(max(ceil(n_train ·
// fraction), 1), n_train) values linspace(0, n_train-1, k) truncated to integers, as
// numpy.linspace(...).astype(int) computes them. Empty when n_train == 0.
std::vector<int64_t> ce_weight_sample_indices(int64_t n_train, double fraction);

// Voxels per class in `mask` (a bincount over n_classes bins).
//   mask: (...) integer labels, any device. A label outside [0, n_classes) throws core::Error
//   naming it.
std::vector<int64_t> class_counts(const at::Tensor& mask, int64_t n_classes);

// CE class weights from class counts already summed over every mask and rank: with bg = counts[0],
// fg = Σ counts[1:] and T = bg + fg, w[0] = T/bg and w[1:] = T/fg (every foreground class shares
// one weight); all ones when bg or fg is 0. Returns (K) float32 on the CPU.
at::Tensor ce_class_weights(const std::vector<int64_t>& counts);

}  // namespace scaffold::train
