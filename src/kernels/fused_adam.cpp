#include "kernels/fused_adam.hpp"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>

#include "kernels/parallel_check.hpp"
#include "kernels/simd.hpp"

namespace scaffold::train {
namespace {

// 1 - beta is taken in double before rounding to float, as LibTorch's alpha arguments are: in
// float 1 - 0.999f is 1.3e-5 away (relative) from 0.001.
struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, weight_decay, eps, step_size,
      sqrt_bias_correction2;
};

// Elements begin .. end of one parameter; plain loops that each ISA clone vectorises.
SCAFFOLD_SIMD_CLONES void adam_update(float* p, const float* g, float* m, float* v, int64_t begin,
                                      int64_t end, AdamCoefficients k) {
  for (int64_t i = begin; i < end; ++i) {
    const float grad = k.weight_decay != 0.f ? g[i] + k.weight_decay * p[i] : g[i];
    const float mi = m[i] * k.beta1 + k.one_minus_beta1 * grad;
    const float vi = v[i] * k.beta2 + k.one_minus_beta2 * grad * grad;
    m[i] = mi;
    v[i] = vi;
    p[i] -= k.step_size * (mi / (std::sqrt(vi) / k.sqrt_bias_correction2 + k.eps));
  }
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

}  // namespace

bool FusedAdam::fusable() const {
  for (const auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    if (options.amsgrad()) return false;
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const at::Tensor& g = p.grad();
      const auto it = state().find(key_of(p));
      if (it == state().end()) {
        // The moments will be zeros_like(p) (the parameter's layout): only p and g matter.
        if (!dense_alike(p, {&g})) return false;
        continue;
      }
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      if (!dense_alike(p, {&g, &s.exp_avg(), &s.exp_avg_sq()})) return false;
    }
  }
  return true;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  last_step_fused_ = fusable();
  if (!last_step_fused_) return torch::optim::Adam::step(std::move(closure));
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state()[key_of(p)];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
      s.step(s.step() + 1);
      const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
      const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(s.step()));
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(s.step()));
      const AdamCoefficients k{static_cast<float>(beta1),
                               static_cast<float>(1 - beta1),
                               static_cast<float>(beta2),
                               static_cast<float>(1 - beta2),
                               static_cast<float>(options.weight_decay()),
                               static_cast<float>(options.eps()),
                               static_cast<float>(options.lr() / bias_correction1),
                               static_cast<float>(std::sqrt(bias_correction2))};
      float* pp = p.data_ptr<float>();
      const float* gp = p.grad().data_ptr<float>();
      float* mp = s.exp_avg().data_ptr<float>();
      float* vp = s.exp_avg_sq().data_ptr<float>();
      at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
        adam_update(pp, gp, mp, vp, begin, end, k);
      });
    }
  }
  return loss;
}

}  // namespace scaffold::train
