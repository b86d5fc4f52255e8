#include "kernels/fused_adam.hpp"

#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>

#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

// 1 - beta is taken in double before rounding to float, as LibTorch's alpha arguments are: in
// float 1 - 0.999f is 1.3e-5 away (relative) from 0.001. l2 is Adam's coupled weight decay,
// decay AdamW's factor 1 - lr weight_decay (1: none).
struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, l2, decay, eps, step_size,
      sqrt_bias_correction2;
};

AdamCoefficients coefficients(double lr, double beta1, double beta2, double eps, double l2,
                              double decoupled_decay, int64_t step) {
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
          static_cast<float>(std::sqrt(bias_correction2))};
}

// Elements begin .. end of one parameter; plain loops that each ISA clone vectorises (the two
// branches are loop-invariant: the compiler unswitches them).
SCAFFOLD_SIMD_CLONES void adam_update(float* p, const float* g, float* m, float* v, int64_t begin,
                                      int64_t end, AdamCoefficients k) {
  for (int64_t i = begin; i < end; ++i) {
    const float grad = k.l2 != 0.f ? g[i] + k.l2 * p[i] : g[i];
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

// p, and every tensor of `others`, a dense float32 CPU tensor laid out as p is.
bool dense_alike(const at::Tensor& p, std::initializer_list<const at::Tensor*> others) {
  if (!p.device().is_cpu() || p.scalar_type() != at::kFloat || !p.is_non_overlapping_and_dense())
    return false;
  for (const at::Tensor* t : others)
    if (!t->defined() || t->is_sparse() || !t->device().is_cpu() ||
        t->scalar_type() != at::kFloat || t->strides() != p.strides() || t->sizes() != p.sizes())
      return false;
  return true;
}

// LibTorch 1.13 keys an optimizer's per-parameter state by the parameter's TensorImpl address.
std::string key_of(const at::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

// Options: AdamOptions or AdamWOptions; State: AdamParamState or AdamWParamState (the same
// fields under two names in LibTorch).
template <typename Options, typename State>
bool fusable(const torch::optim::Optimizer& opt) {
  for (const auto& group : opt.param_groups()) {
    if (static_cast<const Options&>(group.options()).amsgrad()) return false;
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& g = p.grad();
      const auto it = opt.state().find(key_of(p));
      if (it == opt.state().end()) {
        // The moments will be zeros_like(p) (the parameter's layout): only p and g matter.
        if (!dense_alike(p, {&g})) return false;
        continue;
      }
      const auto& s = static_cast<const State&>(*it->second);
      if (!dense_alike(p, {&g, &s.exp_avg(), &s.exp_avg_sq()})) return false;
    }
  }
  return true;
}

template <typename Options, typename State>
at::Tensor fused_step(torch::optim::Optimizer& opt,
                      const torch::optim::Optimizer::LossClosure& closure, bool decoupled) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : opt.param_groups()) {
    const auto& o = static_cast<const Options&>(group.options());
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
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
      const AdamCoefficients k = coefficients(
          o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(),
          decoupled ? 0.0 : o.weight_decay(), decoupled ? o.weight_decay() : 0.0, s.step());
      const at::Tensor &m = s.exp_avg(), &v = s.exp_avg_sq();
      run_update(p.data_ptr<float>(), p.grad().data_ptr<float>(), m.data_ptr<float>(),
                 v.data_ptr<float>(), p.numel(), k);
    }
  }
  return loss;
}

}  // namespace

torch::Tensor FusedAdam::step(LossClosure closure) {
  using Options = torch::optim::AdamOptions;
  using State = torch::optim::AdamParamState;
  last_step_fused_ = fusable<Options, State>(*this);
  if (!last_step_fused_) return torch::optim::Adam::step(std::move(closure));
  return fused_step<Options, State>(*this, closure, /*decoupled=*/false);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  using Options = torch::optim::AdamWOptions;
  using State = torch::optim::AdamWParamState;
  last_step_fused_ = fusable<Options, State>(*this);
  if (!last_step_fused_) return torch::optim::AdamW::step(std::move(closure));
  return fused_step<Options, State>(*this, closure, /*decoupled=*/true);
}

void adamw_update(float* p, const float* g, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWStep& s) {
  run_update(p, g, exp_avg, exp_avg_sq, n,
             coefficients(s.lr, s.beta1, s.beta2, s.eps, 0.0, s.weight_decay, s.step));
}

}  // namespace scaffold::kernels
