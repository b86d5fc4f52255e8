// Adam and AdamW with one pass over memory per parameter on the CPU. LibTorch 1.13's Adam::step
// and AdamW::step run six to eight whole-tensor operations per parameter (mul_, add_, mul_,
// addcmul_, sqrt, div, add_, addcdiv_), each a pass over the parameter's size; FusedAdam and
// FusedAdamW read the parameter, its gradient and both moments once and write the parameter and
// the moments once. Same options, same per-parameter state (step, exp_avg, exp_avg_sq) and the
// same save()/load(), so checkpoints are interchangeable with LibTorch's; the updates are
// LibTorch's formulas:
//   Adam:  g += weight_decay p                       (L2, coupled)
//   AdamW: p *= 1 - lr weight_decay                  (decoupled, before the update)
//   both:  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//          p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// A step in which any parameter is not a dense float32 CPU tensor (with its gradient and moments
// in its memory layout), or with amsgrad or a sparse gradient, is LibTorch's step as it is.
// SGD (FusedSGD) likewise: LibTorch's SGD::step runs up to five whole-tensor operations per
// parameter (weight decay's add, mul_ and add_ on the momentum buffer, the update's add_, and a
// clone on the first step); FusedSGD reads the parameter, its gradient and the momentum buffer
// once and writes the buffer and the parameter once, with SGD's state (momentum_buffer) and
// save()/load(). Its formulas, LibTorch's:
//   d = g + weight_decay p;  buf = d (first step) or momentum buf + (1 - dampening) d
//   p -= lr (nesterov ? d + momentum buf : buf)     (p -= lr d without momentum)
// The same fallback: any parameter not dense float32 on the CPU (with its gradient and buffer in
// its layout), or a sparse gradient, and the step is LibTorch's as it is.
#pragma once

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cstdint>

namespace scaffold::kernels {

// A factor for every gradient, taken into the next step's one pass: gradient clipping's
// coefficient without the pass that multiplies the gradients first (g.mul_(factor) before the
// step is the same arithmetic, to the bit: each gradient element is multiplied by the float
// factor as it is read). The gradients themselves are left as they are.
class GradientScaling {
 public:
  // Replaces any factor set since the last step (1: none).
  void scale_next_gradients(float factor) { gradient_scale_ = factor; }
  float next_gradient_scale() const { return gradient_scale_; }

 protected:
  // The factor for this step; the next starts at 1 again.
  float take_gradient_scale() {
    const float f = gradient_scale_;
    gradient_scale_ = 1.f;
    return f;
  }

 private:
  float gradient_scale_ = 1.f;
};

class FusedAdam : public torch::optim::Adam, public GradientScaling {
 public:
  using torch::optim::Adam::Adam;

  torch::Tensor step(LossClosure closure = nullptr) override;

  // Whether the last step() took the fused path (for tests and the run's kernel report).
  bool last_step_fused() const { return last_step_fused_; }

 private:
  bool last_step_fused_ = false;
};

class FusedAdamW : public torch::optim::AdamW, public GradientScaling {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override;

  bool last_step_fused() const { return last_step_fused_; }

 private:
  bool last_step_fused_ = false;
};

class FusedSGD : public torch::optim::SGD, public GradientScaling {
 public:
  using torch::optim::SGD::SGD;

  torch::Tensor step(LossClosure closure = nullptr) override;

  bool last_step_fused() const { return last_step_fused_; }

 private:
  bool last_step_fused_ = false;
};

// One AdamW step (the formula above, decoupled decay) over n contiguous float32 elements whose
// moments the caller keeps: the kernel FusedAdamW runs, for ShardedAdamW's slices. `step` is the
// step count after this update (1 on the first).
struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
  float grad_scale = 1.f;  // GradientScaling's factor for g
};
void adamw_update(float* p, const float* g, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWStep& s);

// The sum of the squares of n floats (a gradient's squared 2-norm, for clipping) in one pass on
// LibTorch's threads: float sums over fixed blocks of elements, added in double in block order,
// so the result does not depend on the number of threads. LibTorch 1.13's norm() reads memory at
// 12-14 GB/s on a Zen 3 where this reads at the multiply's bandwidth (docs/llm.md).
double sum_of_squares(const float* x, int64_t n);

}  // namespace scaffold::kernels
