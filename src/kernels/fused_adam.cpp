#include "kernels/fused_adam.hpp"

#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

// 1 - beta is taken in double before rounding to float, as LibTorch's alpha arguments are: in
// float 1 - 0.999f is 1.3e-5 away (relative) from 0.001. l2 is Adam's coupled weight decay,
// decay AdamW's factor 1 - lr weight_decay (1: none), grad_scale GradientScaling's factor (a
// multiplication by 1 changes no bit, so it is always applied).
struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, l2, decay, eps, step_size,
      sqrt_bias_correction2, grad_scale;
};

AdamCoefficients coefficients(double lr, double beta1, double beta2, double eps, double l2,
                              double decoupled_decay, int64_t step, float grad_scale) {
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  return {static_cast<float>(beta1),
          static_cast<float>(1 - beta1),
          static_cast<float>(beta2),
          static_cast<float>(1 - beta2),
          static_cast<float>(l2),
          static_cast<float>(1 - lr * decoupled_decay),
          static_cast<float>(eps),
          static_cast<float>(lr / bias_correction1),
          static_cast<float>(std::sqrt(bias_correction2)),
          grad_scale};
}

// Elements begin .. end of one parameter; plain loops that each ISA clone vectorises (the two
// branches are loop-invariant: the compiler unswitches them).
SCAFFOLD_SIMD_CLONES void adam_update(float* p, const float* g, float* m, float* v, int64_t begin,
                                      int64_t end, AdamCoefficients k) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] * k.grad_scale;
    const float grad = k.l2 != 0.f ? gi + k.l2 * p[i] : gi;
    const float mi = m[i] * k.beta1 + k.one_minus_beta1 * grad;
    const float vi = v[i] * k.beta2 + k.one_minus_beta2 * grad * grad;
    m[i] = mi;
    v[i] = vi;
    const float pi = k.decay != 1.f ? p[i] * k.decay : p[i];
    p[i] = pi - k.step_size * (mi / (std::sqrt(vi) / k.sqrt_bias_correction2 + k.eps));
  }
}

void run_update(float* p, const float* g, float* m, float* v, int64_t n,
                const AdamCoefficients& k) {
  kernels::parallel_for(
      0, n, 1 << 15, [&](int64_t begin, int64_t end) { adam_update(p, g, m, v, begin, end, k); });
}

// Whether a and b (same sizes) put every element at the same offset: their strides agree on
// every dimension of size > 1 (a size-1 dimension's stride is arbitrary: a channels-last 1x1
// convolution weight and its gradient can differ there and still be the same memory).
bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// p, and every tensor of `others`, a dense float32 CPU tensor laid out as p is.
bool dense_alike(const at::Tensor& p, std::initializer_list<const at::Tensor*> others) {
  if (!p.device().is_cpu() || p.scalar_type() != at::kFloat || !p.is_non_overlapping_and_dense())
    return false;
  for (const at::Tensor* t : others)
    if (!t->defined() || t->is_sparse() || !t->device().is_cpu() ||
        t->scalar_type() != at::kFloat || !t->is_non_overlapping_and_dense() || !same_layout(*t, p))
      return false;
  return true;
}

// LibTorch 1.13 keys an optimizer's per-parameter state by the parameter's TensorImpl address.
std::string key_of(const at::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

// Whether every parameter with a gradient is a dense float32 CPU tensor with its gradient and
// its state's tensors (`state_tensors(state)`, an array of pointers) laid out as it is. A
// parameter without state yet gets it allocated in its own layout: only p and g matter.
template <typename State, typename StateTensors>
bool all_dense_alike(const torch::optim::Optimizer& opt, const StateTensors& state_tensors) {
  for (const auto& group : opt.param_groups()) {
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!dense_alike(p, {&p.grad()})) return false;
      const auto it = opt.state().find(key_of(p));
      if (it == opt.state().end()) continue;
      for (const at::Tensor* t : state_tensors(static_cast<const State&>(*it->second)))
        if (!dense_alike(p, {t})) return false;
    }
  }
  return true;
}

// Options: AdamOptions or AdamWOptions; State: AdamParamState or AdamWParamState (the same
// fields under two names in LibTorch).
template <typename Options, typename State>
bool fusable(const torch::optim::Optimizer& opt) {
  for (const auto& group : opt.param_groups())
    if (static_cast<const Options&>(group.options()).amsgrad()) return false;
  return all_dense_alike<State>(opt, [](const State& s) {
    return std::array<const at::Tensor*, 2>{&s.exp_avg(), &s.exp_avg_sq()};
  });
}

// The skeleton every optimizer's step shares: the closure, if any, under grad mode, then
// update(options, p) without autograd for each parameter with a gradient, group by group.
template <typename Options, typename Update>
at::Tensor step_each_parameter(torch::optim::Optimizer& opt,
                               const torch::optim::Optimizer::LossClosure& closure,
                               const Update& update) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : opt.param_groups()) {
    const auto& o = static_cast<const Options&>(group.options());
    for (at::Tensor& p : group.params())
      if (p.grad().defined()) update(o, p);
  }
  return loss;
}

template <typename Options, typename State>
at::Tensor fused_step(torch::optim::Optimizer& opt,
                      const torch::optim::Optimizer::LossClosure& closure, bool decoupled,
                      float grad_scale) {
  return step_each_parameter<Options>(opt, closure, [&](const Options& o, at::Tensor& p) {
    auto& slot = opt.state()[key_of(p)];
    if (!slot) {
      auto fresh = std::make_unique<State>();
      fresh->step(0);
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    auto& s = static_cast<State&>(*slot);
    s.step(s.step() + 1);
    const AdamCoefficients k =
        coefficients(o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(),
                     decoupled ? 0.0 : o.weight_decay(), decoupled ? o.weight_decay() : 0.0,
                     s.step(), grad_scale);
    const at::Tensor &m = s.exp_avg(), &v = s.exp_avg_sq();
    run_update(p.data_ptr<float>(), p.grad().data_ptr<float>(), m.data_ptr<float>(),
               v.data_ptr<float>(), p.numel(), k);
  });
}

// --- SGD.

// 1 - dampening in double before rounding, as LibTorch's alpha argument is.
struct SgdCoefficients {
  float weight_decay, momentum, one_minus_dampening, lr, grad_scale;
  bool first, nesterov;
};

// Elements begin .. end of one parameter, buf its momentum buffer (unused without momentum; not
// read on the first step, which writes it). The branches are loop-invariant (unswitched).
SCAFFOLD_SIMD_CLONES void sgd_update(float* p, const float* g, float* buf, int64_t begin,
                                     int64_t end, SgdCoefficients k) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] * k.grad_scale;
    const float d = k.weight_decay != 0.f ? gi + k.weight_decay * p[i] : gi;
    float update = d;
    if (k.momentum != 0.f) {
      const float b = k.first ? d : buf[i] * k.momentum + k.one_minus_dampening * d;
      buf[i] = b;
      update = k.nesterov ? d + k.momentum * b : b;
    }
    p[i] = p[i] + -k.lr * update;
  }
}

bool sgd_fusable(const torch::optim::SGD& opt) {
  return all_dense_alike<torch::optim::SGDParamState>(
      opt, [](const torch::optim::SGDParamState& s) {
        return std::array<const at::Tensor*, 1>{&s.momentum_buffer()};
      });
}

at::Tensor sgd_fused_step(torch::optim::SGD& opt,
                          const torch::optim::Optimizer::LossClosure& closure, float grad_scale) {
  using Options = torch::optim::SGDOptions;
  return step_each_parameter<Options>(opt, closure, [&](const Options& o, at::Tensor& p) {
    SgdCoefficients k{static_cast<float>(o.weight_decay()),
                      static_cast<float>(o.momentum()),
                      static_cast<float>(1 - o.dampening()),
                      static_cast<float>(o.lr()),
                      grad_scale,
                      /*first=*/false,
                      o.nesterov()};
    float* buf = nullptr;
    if (o.momentum() != 0) {
      auto& slot = opt.state()[key_of(p)];
      if (!slot) {  // LibTorch's first step: the buffer is a copy of d, laid out as p
        auto fresh = std::make_unique<torch::optim::SGDParamState>();
        fresh->momentum_buffer(at::empty_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
        k.first = true;
      }
      buf = static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer().data_ptr<float>();
    }
    float* pp = p.data_ptr<float>();
    const float* g = p.grad().data_ptr<float>();
    kernels::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      sgd_update(pp, g, buf, begin, end, k);
    });
  });
}

// LibTorch's step, when not fused, takes the factor as a pass over the gradients first.
void multiply_gradients(torch::optim::Optimizer& opt, float factor) {
  if (factor == 1.f) return;
  torch::NoGradGuard no_grad;
  for (auto& group : opt.param_groups())
    for (at::Tensor& p : group.params())
      if (p.grad().defined()) p.mutable_grad().mul_(factor);
}

// Squares of x[0, n) summed in float: four 16-float accumulators, then their lanes in double.
SCAFFOLD_SIMD_CLONES double block_sum_of_squares(const float* x, int64_t n) {
  using simd::loadv;
  using simd::v16;
  v16 acc[4] = {};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int a = 0; a < 4; ++a) {
      const v16 v = loadv(x + i + int64_t{16} * a).v;
      acc[a] += v * v;
    }
  }
  const v16 lanes = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  double sum = 0;
  for (int l = 0; l < 16; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// 8192 floats a block: 128 float additions per accumulator lane at most.
constexpr int64_t kSquaresBlock = 8192;

}  // namespace

double sum_of_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const int64_t blocks = (n + kSquaresBlock - 1) / kSquaresBlock;
  std::vector<double> partial(static_cast<std::size_t>(blocks));
  kernels::parallel_for(0, blocks, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kSquaresBlock;
      partial[static_cast<std::size_t>(b)] =
          block_sum_of_squares(x + first, std::min(kSquaresBlock, n - first));
    }
  });
  double sum = 0;
  for (const double p : partial) sum += p;
  return sum;
}

torch::Tensor FusedSGD::step(LossClosure closure) {
  const float grad_scale = take_gradient_scale();
  last_step_fused_ = sgd_fusable(*this);
  if (last_step_fused_) return sgd_fused_step(*this, closure, grad_scale);
  multiply_gradients(*this, grad_scale);
  return torch::optim::SGD::step(std::move(closure));
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  using Options = torch::optim::AdamOptions;
  using State = torch::optim::AdamParamState;
  const float grad_scale = take_gradient_scale();
  last_step_fused_ = fusable<Options, State>(*this);
  if (last_step_fused_)
    return fused_step<Options, State>(*this, closure, /*decoupled=*/false, grad_scale);
  multiply_gradients(*this, grad_scale);
  return torch::optim::Adam::step(std::move(closure));
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  using Options = torch::optim::AdamWOptions;
  using State = torch::optim::AdamWParamState;
  const float grad_scale = take_gradient_scale();
  last_step_fused_ = fusable<Options, State>(*this);
  if (last_step_fused_)
    return fused_step<Options, State>(*this, closure, /*decoupled=*/true, grad_scale);
  multiply_gradients(*this, grad_scale);
  return torch::optim::AdamW::step(std::move(closure));
}

void adamw_update(float* p, const float* g, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWStep& s) {
  run_update(
      p, g, exp_avg, exp_avg_sq, n,
      coefficients(s.lr, s.beta1, s.beta2, s.eps, 0.0, s.weight_decay, s.step, s.grad_scale));
}

}  // namespace scaffold::kernels
