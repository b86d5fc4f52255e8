// Gradient-norm clipping that stays on the device: torch.nn.utils.clip_grad_norm_'s arithmetic
// (2-norm of the per-parameter 2-norms, coefficient max_norm / (norm + 1e-6) clamped to 1), but
// returning the norm as a tensor. LibTorch 1.13's C++ clip_grad_norm_ returns total_norm.item(),
// a host read (a device synchronisation) in every training step.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace scaffold::train {

// Scales the gradients of `parameters` in place so their total 2-norm is at most max_norm.
// Returns the total norm before clipping, a () tensor on the gradients' device (undefined when
// no parameter has a gradient). Bit-identical to torch::nn::utils::clip_grad_norm_ (norm type 2).
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace scaffold::train
