// relu(group_norm(x)) as one autograd node with hand-written CPU loops (issue 17): forward reads x
// twice (moments, then the output) and writes y once; backward reads x and dy twice and writes dx
// once, with ReLU's mask recomputed from x and the saved statistics (nothing extra is stored). The
// unfused composition (torch's group_norm, then relu) stays the reference it is tested against.
// Not here: CUDA, channels-last layouts, affine-free GroupNorm (callers fall back for those).
// Legend: N batch, C channels, G groups, S = D*H*W voxels per channel; tensors are NCDHW.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>

namespace scaffold::kernels {

// A group's statistics over every part of a sample, (N, G) float64.
struct GroupStatistics {
  at::Tensor mean;   // (N, G) over the whole sample
  at::Tensor rstd;   // (N, G) 1 / sqrt(biased variance + eps)
  at::Tensor count;  // (N, G) elements per group over all parts
};

// How the statistics of a sample split over several ranks become the whole sample's. The kernel
// knows no process group: its caller supplies both sums (the U-Net's spatial group,
// model::group_norm_reduction). Empty: the tensor is the whole sample.
struct GroupNormReduction {
  // The whole sample's statistics from this part's per-(sample, group) mean and
  // sum of (x - local mean)^2 (N, G) float64 over `local_count` elements.
  std::function<GroupStatistics(const at::Tensor& local_mean, const at::Tensor& local_m2,
                                double local_count, double eps)>
      statistics;
  // Backward's per-group gradient sums (any float64 tensor) summed over the parts, in place.
  std::function<void(at::Tensor& sums)> sum;
  explicit operator bool() const { return static_cast<bool>(statistics); }
};

// "" when group_norm_relu runs this input, else why not (for the caller's fallback): x must be a
// CPU tensor of >= 3 dims, contiguous NCDHW..., float32 or bfloat16; weight and bias float32 (C);
// groups must divide C.
std::string group_norm_relu_unsupported(const at::Tensor& x, int64_t groups,
                                        const at::Tensor& weight, const at::Tensor& bias);

// relu(group_norm(x, groups, weight, bias, eps)) in float32 (weight's dtype), differentiable in x,
// weight and bias; dx comes back in x's dtype. `global` empty: each sample's own statistics (the
// local view of the whole tensor); otherwise the statistics and backward's gradient sums go
// through it (the U-Net's: all-reduced over its spatial group exactly as group_norm_global does),
// so a sharded model computes what the unsharded one does. Statistics are float64 per (sample,
// group). Throws core::Error (group_norm_relu_unsupported's reason) for an input it does not run.
//   x (N, C, ...) ; weight, bias (C) ; returns (N, C, ...) float32
at::Tensor group_norm_relu(const at::Tensor& x, int64_t groups, const at::Tensor& weight,
                           const at::Tensor& bias, double eps,
                           const GroupNormReduction& global = {});

}  // namespace scaffold::kernels
