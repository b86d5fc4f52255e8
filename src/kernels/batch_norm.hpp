// relu(batch_norm(x) [+ residual]) in training mode as one autograd node with hand-written CPU
// loops (issue 29), for the ResNet's BatchNorm + ReLU pairs and the residual blocks' last
// BatchNorm + add + ReLU. LibTorch runs these as two or three operators, each a pass over the
// activation (its channels-last BatchNorm reads x three times: mean, variance, output; ReLU and
// the add read and write it again), and a backward of three more (ReLU's mask, BatchNorm's sums,
// its input gradient). Here the forward reads x twice (moments, then the output, the residual
// added and ReLU applied as it is written) and the backward reads x and dy twice, ReLU's mask
// recomputed from x with the saved statistics or, with a residual, read from the output (which
// the next layer keeps): nothing is stored beyond what the composition keeps. The composition
// (at::batch_norm, add, relu) stays the reference it is tested against.
//
// Not here: CUDA, NCHW (contiguous) inputs, evaluation mode, bfloat16 (callers fall back).
//
// Legend: N batch, C channels, H/W spatial sizes; M = N*H*W values per channel; tensors are
// channels-last (N, C, H, W), i.e. (M, C) row-major in memory.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace scaffold::kernels {

// "" when batch_norm_relu runs these tensors, else why not (for the caller's fallback): x a
// float32 CPU tensor of 4 dims, contiguous channels-last, with more than one value per channel;
// weight and bias float32 contiguous (C); running_mean and running_var float32 contiguous (C) or
// both undefined; residual undefined or of x's shape, dtype and layout.
std::string batch_norm_relu_unsupported(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias, const at::Tensor& running_mean,
                                        const at::Tensor& running_var, const at::Tensor& residual);

// relu(at::batch_norm(x, weight, bias, running_mean, running_var, /*training=*/true, momentum,
// eps) + residual) (residual undefined: no add), differentiable in x, weight, bias and residual.
// The batch's statistics normalise (biased variance); running_mean and running_var, when defined,
// are updated in place as at::batch_norm does (momentum, unbiased variance). Statistics are
// float64 per channel, from two-pass moments over cache-sized blocks merged with Chan's formula.
// Throws core::Error (batch_norm_relu_unsupported's reason) for tensors it does not run.
//   x, residual (N, C, H, W) channels-last ; weight, bias, running_* (C) ; returns x's shape
at::Tensor batch_norm_relu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var,
                           double momentum, double eps, const at::Tensor& residual = {});

}  // namespace scaffold::kernels
