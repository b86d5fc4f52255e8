#include "kernels/conv1x1.hpp"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"

namespace scaffold::kernels {

at::Tensor probe_leaf(const at::Tensor& t) {
  return (t.is_inference() ? t.clone(at::MemoryFormat::Preserve) : t.detach()).requires_grad_(true);
}

std::string conv1x1_gemm_unsupported(const at::Tensor& x, const at::Tensor& w) {
  if (!x.defined() || !w.defined()) return "an undefined tensor";
  if (!x.device().is_cpu() || !w.device().is_cpu()) return "not on the CPU";
  if (x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat) return "not float32";
  if (nn::AutocastState::current().cpu_enabled) return "under CPU autocast";
  if (x.dim() != 4 || w.dim() != 4 || w.size(2) != 1 || w.size(3) != 1 || w.size(1) != x.size(1))
    return "not a 1x1 convolution of a 4-D input";
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast)) return "the input is not channels-last";
  return "";
}

namespace {

// The linear layer of x's pixels ((N H W) x C, x's memory as it is) by w (O x C) on `choice`.
at::Tensor gemm_conv(const at::Tensor& x, const at::Tensor& w, GemmChoice choice) {
  const int64_t n = x.size(0), h = x.size(2), width = x.size(3), o = w.size(0);
  const at::Tensor pixels = x.permute({0, 2, 3, 1}).reshape({-1, x.size(1)});
  const at::Tensor y = chosen_linear(pixels, w.reshape({o, w.size(1)}), {}, choice);
  return y.view({n, h, width, o}).permute({0, 3, 1, 2});  // (N, O, H, W), channels-last
}

GemmChoice gemm_choice_for(const at::Tensor& x, const at::Tensor& w) {
  const at::NoGradGuard no_grad;
  return gemm_choice(x.permute({0, 2, 3, 1}).reshape({-1, x.size(1)}),
                     w.reshape({w.size(0), w.size(1)}).contiguous());
}

}  // namespace

at::Tensor conv1x1_as_gemm(const at::Tensor& x, const at::Tensor& w) {
  const std::string why = conv1x1_gemm_unsupported(x, w);
  if (!why.empty())
    throw core::Error(
        fmt::format("1x1 convolution as a matrix product: unsupported arguments (x "
                    "{} {}, w {} {}): {}",
                    fmt::join(x.sizes(), "x"), c10::toString(x.scalar_type()),
                    fmt::join(w.sizes(), "x"), c10::toString(w.scalar_type()), why));
  return gemm_conv(x, w, gemm_choice_for(x, w));
}

std::string choose_conv1x1(const at::Tensor& x_in, const at::Tensor& w_in) {
  if (!conv1x1_gemm_unsupported(x_in, w_in).empty()) return "libtorch";
  // The products' kernels first: the GEMM probe is a probe of its own (a probe must not ask the
  // store again while it runs).
  const GemmChoice choice = gemm_choice_for(x_in, w_in);
  // The key is the start of the probe's system.json line.
  const std::string key =
      fmt::format("conv1x1 x {} w {}", fmt::join(x_in.sizes(), "x"), fmt::join(w_in.sizes(), "x"));
  return probe_verdicts().choose(key, [&] {
    // Forward and backward of each, also when first asked in validation (probe_leaf).
    const c10::InferenceMode normal(false);
    const c10::AutoGradMode grad_on(true);
    // The images whose pixels fill one block of the products' rows (kGemmRowsPerProduct): the
    // GEMM runs block by block, and the probe's outputs and gradients, allocated while the first
    // step's activations are alive, stay that size.
    const int64_t images =
        std::clamp<int64_t>(kGemmRowsPerProduct / (x_in.size(2) * x_in.size(3)), 1, x_in.size(0));
    const at::Tensor x = probe_leaf(x_in.narrow(0, 0, images)), w = probe_leaf(w_in);
    const auto step_ms = [&](auto conv) {
      return core::best_time_ms([&] {
        const at::Tensor y = conv();
        torch::autograd::grad({y}, {x, w}, {y.detach()});
      });
    };
    const double gemm_ms = step_ms([&] { return gemm_conv(x, w, choice); });
    const double libtorch_ms = step_ms([&] { return at::conv2d(x, w); });
    return ProbeResult{gemm_ms < kGemmMargin * libtorch_ms ? "gemm" : "libtorch",
                       {{"gemm", gemm_ms}, {"libtorch", libtorch_ms}}};
  });
}

}  // namespace scaffold::kernels
