// relu(group_norm(x)) as one autograd node with hand-written CPU loops (issue 17): forward reads x
// twice (moments, then the output) and writes y once; backward reads x and dy twice and writes dx
// once, with ReLU's mask recomputed from x and the saved statistics (nothing extra is stored). The
// unfused composition (torch's group_norm, then relu) stays the reference it is tested against.
// Not here: CUDA, channels-last layouts, affine-free GroupNorm (callers fall back for those).
// Legend: N batch, C channels, G groups, S = D*H*W voxels per channel; tensors are NCDHW.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/spatial.hpp"

namespace scaffold::model {

// Which GroupNorm + ReLU a DoubleConv runs (config key `groupnorm_kernel`): `fused` is
// group_norm_relu wherever it supports the input (the unfused composition elsewhere), `unfused`
// is torch's group_norm (or group_norm_global) followed by relu.
enum class NormKernel { Unfused, Fused };
const char* to_string(NormKernel kernel);
// The key's value (auto | fused | unfused) for a run on the CPU or not, in channels-last or not:
// auto is unfused (the fused kernel measured slower in whole steps); fused where it cannot run is a
// core::Error naming the key, as is any other value.
NormKernel choose_norm_kernel(const std::string& value, bool cpu, bool channels_last);

// "" when group_norm_relu runs this input, else why not (for the caller's fallback): x must be a
// CPU tensor of >= 3 dims, contiguous NCDHW..., float32 or bfloat16; weight and bias float32 (C);
// groups must divide C.
std::string group_norm_relu_unsupported(const at::Tensor& x, int64_t groups,
                                        const at::Tensor& weight, const at::Tensor& bias);

// relu(group_norm(x, groups, weight, bias, eps)) in float32 (weight's dtype), differentiable in x,
// weight and bias; dx comes back in x's dtype. `global` null: each sample's own statistics (the
// local view of the whole tensor); otherwise the statistics and backward's gradient sums are
// all-reduced over global->group exactly as group_norm_global does (global_group_statistics), so a
// sharded model computes what the unsharded one does. Statistics are float64 per (sample, group).
// Throws core::Error (group_norm_relu_unsupported's reason) for an input it does not run.
//   x (N, C, ...) ; weight, bias (C) ; returns (N, C, ...) float32
at::Tensor group_norm_relu(const at::Tensor& x, int64_t groups, const at::Tensor& weight,
                           const at::Tensor& bias, double eps,
                           const std::shared_ptr<const SpatialContext>& global = nullptr);

}  // namespace scaffold::model
