#include "kernels/gelu.hpp"

#include <c10/util/BFloat16.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr int64_t kGrain = 1 << 14;

using simd::exp_approx;
using simd::from_bf16;
using simd::to_bf16;

// sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
SCAFFOLD_SIMD_INLINE float gate(float x) {
  const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + exp_approx(-2.0f * u));
}

// d gelu / dx.
SCAFFOLD_SIMD_INLINE float slope(float x) {
  const float s = gate(x);
  return s + 2.0f * x * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
}

SCAFFOLD_SIMD_CLONES void forward_f32(const float* x, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = x[i] * gate(x[i]);
}

SCAFFOLD_SIMD_CLONES void backward_f32(const float* g, const float* x, float* dx, int64_t begin,
                                       int64_t end) {
  for (int64_t i = begin; i < end; ++i) dx[i] = g[i] * slope(x[i]);
}

SCAFFOLD_SIMD_CLONES void forward_bf16(const uint16_t* x, uint16_t* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float v = from_bf16(x[i]);
    y[i] = to_bf16(v * gate(v));
  }
}

SCAFFOLD_SIMD_CLONES void backward_bf16(const uint16_t* g, const uint16_t* x, uint16_t* dx,
                                        int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dx[i] = to_bf16(from_bf16(g[i]) * slope(from_bf16(x[i])));
}

template <typename T>
T* data(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

at::Tensor run_forward(const at::Tensor& x) {
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  kernels::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (bf16)
      forward_bf16(data<const uint16_t>(x), data<uint16_t>(y), begin, end);
    else
      forward_f32(data<const float>(x), data<float>(y), begin, end);
  });
  return y;
}

at::Tensor run_backward(const at::Tensor& g, const at::Tensor& x) {
  at::Tensor dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  kernels::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (bf16)
      backward_bf16(data<const uint16_t>(g), data<const uint16_t>(x), data<uint16_t>(dx), begin,
                    end);
    else
      backward_f32(data<const float>(g), data<const float>(x), data<float>(dx), begin, end);
  });
  return dx;
}

class GeluTanhFunction : public torch::autograd::Function<GeluTanhFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in) {
    const at::Tensor x = x_in.contiguous();
    ctx->save_for_backward({x});
    return run_forward(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor g = grad_outputs.at(0).to(x.scalar_type()).contiguous();
    return {run_backward(g, x)};
  }
};

}  // namespace

bool gelu_tanh_supported(const at::Tensor& x) {
  return x.defined() && x.device().is_cpu() &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
}

at::Tensor gelu_tanh(const at::Tensor& x) {
  if (!gelu_tanh_supported(x))
    throw core::Error(fmt::format(
        "gelu_tanh: unsupported input ({} {} on {}); it takes float32 or bfloat16 CPU tensors",
        fmt::join(x.sizes(), "x"), c10::toString(x.scalar_type()), x.device().str()));
  return GeluTanhFunction::apply(x);
}

}  // namespace scaffold::kernels
