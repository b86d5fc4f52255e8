// Gradient-norm clipping that stays on the device: torch.nn.utils.clip_grad_norm_'s arithmetic
// (2-norm of the per-parameter 2-norms, coefficient max_norm / (norm + 1e-6) clamped to 1), but
// returning the norm as a tensor. LibTorch 1.13's C++ clip_grad_norm_ returns total_norm.item(),
// a host read (a device synchronisation) in every training step.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace scaffold::train {

// Drops the gradient of every parameter `optimizer` holds (PyTorch 2's zero_grad(set_to_none=True),
// LibTorch 1.13's zero_grad() writes zeros): the next backward's gradient is then taken as the
// parameter's .grad instead of being added to zeros, which saves a write and a read-modify-write of
// every gradient per step (about 1.5 GB for a 124M-parameter model). A parameter that backward
// does not reach keeps no gradient, and optimizers skip it, as PyTorch's do.
void clear_gradients(torch::optim::Optimizer& optimizer);

// Multiplies `grads` by coef (a () tensor on their device), or, where `optimizer` is one of the
// fused CPU optimizers (kernels::GradientScaling) and every gradient is float32 on the CPU, hands
// it the factor for its next step instead (the same arithmetic without a pass over the
// gradients, which then stay unscaled). coef is rounded to the gradients' type first either way
// (a () tensor is anyway; a float64 (1) tensor would make mul_ compute in float64).
void scale_gradients(const std::vector<at::Tensor>& grads, const at::Tensor& coef,
                     torch::optim::Optimizer* optimizer);

// Scales the gradients of `parameters` so their total 2-norm is at most max_norm (through
// scale_gradients: `optimizer` may take the factor instead). Returns the total norm before
// clipping, a () tensor on the gradients' device (undefined when no parameter has a gradient).
// The step that follows is bit-identical to one after torch::nn::utils::clip_grad_norm_ (norm
// type 2).
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm,
                          torch::optim::Optimizer* optimizer = nullptr);

}  // namespace scaffold::train
