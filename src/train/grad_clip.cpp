// clip_grad_norm: the LibTorch 1.13 implementation's operations in the same order (so results are
// bit-identical on the CPU), without its final item().
#include "train/grad_clip.hpp"

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

namespace scaffold::train {

at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
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
  for (at::Tensor& g : grads) g.data().mul_(coef);
  return total;
}

}  // namespace scaffold::train
