// Adam with one pass over memory per parameter on the CPU. LibTorch 1.13's Adam::step runs six
// to eight whole-tensor operations per parameter (mul_, add_, mul_, addcmul_, sqrt, div, add_,
// addcdiv_), each a pass over the parameter's size; FusedAdam reads the parameter, its gradient
// and both moments once and writes the parameter and the moments once. Same options, same
// per-parameter state (AdamParamState: step, exp_avg, exp_avg_sq) and the same save()/load(), so
// checkpoints are interchangeable with torch::optim::Adam's; the update is LibTorch's formula:
//   g += weight_decay p;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// A step in which any parameter is not a dense float32 CPU tensor (with its gradient and moments
// in its memory layout), or with amsgrad or a sparse gradient, is torch::optim::Adam::step as it
// is.
#pragma once

#include <torch/optim/adam.h>

namespace scaffold::train {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Whether the last step() took the fused path (for tests and the run's kernel report).
  bool last_step_fused() const { return last_step_fused_; }

 private:
  bool fusable() const;

  bool last_step_fused_ = false;
};

}  // namespace scaffold::train
