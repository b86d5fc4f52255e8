// The voxel sums of the segmentation loss (loss.hpp) in one pass over the logits, and their
// backward in one more: the softmax of each voxel is computed once, in registers, instead of
// LibTorch's log_softmax, softmax, gather, index_select, masks and products, each a pass over
// (B, K, D, H, W) that also keeps its result for the backward. Float32 CPU logits only; the
// composition of LibTorch operators in loss.cpp is the reference it is tested against.
#pragma once

#include <ATen/core/Tensor.h>

namespace scaffold::train {

// Whether softmax_loss_sums takes these logits (float32 on the CPU, 5-D).
bool softmax_loss_sums_supported(const at::Tensor& logits);

// logits (B, K, D, H, W) float32 CPU, target (B, D, H, W) int64 labels in [0, K) (core::Error
// otherwise), class_weights (K) float32 CPU. With p = softmax over K and y the label of a voxel,
// returns float32 (2 + 3 B (K-1)):
//   [0]  Σ w[y] (-log p_y) over all voxels        [1]  Σ w[y]
//   then I (B, K-1), P (B, K-1), G (B, K-1) for the foreground classes k = 1..K-1:
//   I[b,k] = Σ p_k [y = k],  P[b,k] = Σ p_k,  G[b,k] = Σ [y = k]  over the voxels of sample b.
// Differentiable in the logits ([1] and G do not depend on them). Sums are taken in chunks of
// voxels and the chunks added in a fixed order: the result does not depend on the thread count.
at::Tensor softmax_loss_sums(const at::Tensor& logits, const at::Tensor& target,
                             const at::Tensor& class_weights);

}  // namespace scaffold::train
