#include "kernels/dnnl_linear.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#if SCAFFOLD_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/kernel_use.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"

namespace scaffold::kernels {
namespace {

#if SCAFFOLD_WITH_DNNL
// C (m x n) = op(A) op(B) (+ C when accumulate), row-major, oneDNN's sgemm.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.f, a,
                                          lda, b, ldb, accumulate ? 1.f : 0.f, c, ldc);
  if (status != dnnl_success)
    throw core::Error(
        fmt::format("oneDNN sgemm {}x{}x{} failed (status {})", m, n, k, static_cast<int>(status)));
}

// y (m x n) = x (m x k) w^T, w (n x k); with a bias, y starts as b and the product adds to it.
at::Tensor forward_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  at::Tensor y =
      b.defined() ? b.reshape({1, n}).expand({m, n}).contiguous() : at::empty({m, n}, x.options());
  sgemm(false, true, m, n, k, x.data_ptr<float>(), k, w.data_ptr<float>(), k, y.data_ptr<float>(),
        n, b.defined());
  return y;
}
// dx (m x k) = dy (m x n) w (n x k).
at::Tensor input_gradient(const at::Tensor& dy, const at::Tensor& w) {
  const int64_t m = dy.size(0), n = dy.size(1), k = w.size(1);
  at::Tensor dx = at::empty({m, k}, dy.options());
  sgemm(false, false, m, k, n, dy.data_ptr<float>(), n, w.data_ptr<float>(), k,
        dx.data_ptr<float>(), k, false);
  return dx;
}
// dw (n x k) = dy^T (n x m) x (m x k).
at::Tensor weight_gradient(const at::Tensor& dy, const at::Tensor& x) {
  const int64_t m = dy.size(0), n = dy.size(1), k = x.size(1);
  at::Tensor dw = at::empty({n, k}, dy.options());
  sgemm(true, false, n, k, m, dy.data_ptr<float>(), n, x.data_ptr<float>(), k, dw.data_ptr<float>(),
        k, false);
  return dw;
}

// The 2-D linear as an autograd function: x (m x k), w (n x k), and with a bias b (n). (Two
// functions: an undefined tensor cannot be an input of LibTorch's autograd function.)
template <bool kBias>
struct DnnlLinear : public torch::autograd::Function<DnnlLinear<kBias>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor& b) {
    ctx->save_for_backward({x, w});
    return forward_product(x, w, b);
  }
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w) {
    return forward(ctx, x, w, at::Tensor());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = input_gradient(dy, w);
    if (ctx->needs_input_grad(1)) dw = weight_gradient(dy, x);
    if constexpr (kBias) return {dx, dw, ctx->needs_input_grad(2) ? dy.sum(0) : at::Tensor()};
    return {dx, dw};
  }
};

#endif

std::string linear_describe(const at::Tensor& x, const at::Tensor& w) {
  return fmt::format("x {} {} {}, w {} {}", fmt::join(x.sizes(), "x"),
                     c10::toString(x.scalar_type()), x.device().str(), fmt::join(w.sizes(), "x"),
                     c10::toString(w.scalar_type()));
}

// Why dnnl_linear does not take these ("" when it does).
std::string linear_unsupported(const at::Tensor& x, const at::Tensor& w) {
#if SCAFFOLD_WITH_DNNL
  if (!x.defined() || !w.defined()) return "an undefined tensor";
  if (!x.device().is_cpu() || !w.device().is_cpu()) return "not on the CPU";
  if (x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat) return "not float32";
  if (x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(1)) return "shapes do not match";
  if (nn::AutocastState::current().cpu_enabled) return "under CPU autocast";
  return "";
#else
  (void)x, (void)w;
  return "this build has no oneDNN";
#endif
}

}  // namespace

const char* to_string(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::OneDnn:
      return "onednn";
    case GemmKernel::Probe:
      return "probe";
    case GemmKernel::LibTorch:
      break;
  }
  return "libtorch";
}

bool dnnl_gemm_built() {
  return SCAFFOLD_WITH_DNNL != 0;
}

bool dnnl_linear_supported(const at::Tensor& x, const at::Tensor& w) {
  return linear_unsupported(x, w).empty();
}

namespace {

// The (rows x k) contiguous matrix a linear layer multiplies: x with its leading dimensions merged.
at::Tensor as_matrix(const at::Tensor& x, int64_t k) {
  return x.reshape({-1, k}).contiguous();
}

// dnnl_linear without its check, on x as_matrix already: for callers that ran
// linear_unsupported. The output has x's leading dimensions.
at::Tensor apply_linear(const at::Tensor& x, const at::Tensor& x2, const at::Tensor& w,
                        const at::Tensor& b) {
#if SCAFFOLD_WITH_DNNL
  const at::Tensor bias = b.defined() ? b.to(at::kFloat).contiguous() : at::Tensor();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  const at::Tensor y = b.defined() ? DnnlLinear<true>::apply(x2, w.contiguous(), bias)
                                   : DnnlLinear<false>::apply(x2, w.contiguous());
  return y.view(shape);
#else
  (void)x, (void)x2, (void)w, (void)b;
  return at::Tensor();
#endif
}

}  // namespace

at::Tensor dnnl_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const std::string why = linear_unsupported(x, w);
  if (!why.empty())
    throw core::Error(
        fmt::format("oneDNN linear: unsupported arguments ({}): {}", linear_describe(x, w), why));
  return apply_linear(x, as_matrix(x, w.size(1)), w, b);
}

bool dnnl_gemm_pays(const at::Tensor& x, const at::Tensor& w) {
#if SCAFFOLD_WITH_DNNL
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  // The key is the start of the probe's system.json line.
  const std::string key = fmt::format("gemm {}x{} by {}x{}", m, k, n, k);
  return probe_verdicts().choose(key, [&] {
    const at::NoGradGuard no_grad;
    // The output gradient is the forward's output: values of the run's scale, no new input.
    const at::Tensor dy = forward_product(x, w, at::Tensor());
    const double onednn_ms = core::best_time_ms([&] {
      forward_product(x, w, at::Tensor());
      input_gradient(dy, w);
      weight_gradient(dy, x);
    });
    const double libtorch_ms = core::best_time_ms([&] {
      at::mm(x, w.t());
      at::mm(dy, w);
      at::mm(dy.t(), x);
    });
    return ProbeResult{onednn_ms < kGemmMargin * libtorch_ms ? "onednn" : "libtorch",
                       {{"onednn", onednn_ms}, {"libtorch", libtorch_ms}}};
  }) == "onednn";
#else
  (void)x, (void)w;
  return false;
#endif
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, GemmKernel kernel,
                  KernelUse* use) {
  if (kernel != GemmKernel::LibTorch) {
    const std::string why = linear_unsupported(x, w);
    if (why.empty()) {
      const at::Tensor x2 = as_matrix(x, w.size(1));
      if (kernel == GemmKernel::OneDnn || dnnl_gemm_pays(x2, w.contiguous())) {
        if (use) use->ran("gemm", "onednn");
        return apply_linear(x, x2, w, b);  // checked above: once per call, not twice
      }
    }
    if (use) use->ran("gemm", "libtorch", kernel == GemmKernel::OneDnn ? why : std::string());
  } else if (use) {
    use->ran("gemm", "libtorch");
  }
  return at::linear(x, w, b);
}

}  // namespace scaffold::kernels
