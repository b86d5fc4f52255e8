#include "kernels/dnnl_linear.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/custom_function.h>

#if SCAFFOLD_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/error.hpp"
#include "core/sysinfo.hpp"
#include "core/timer.hpp"
#include "kernels/bf16_gemm.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/kernel_use.hpp"
#include "kernels/probe_verdicts.hpp"
#include "kernels/sgemm.hpp"
#include "nn/autocast.hpp"

namespace scaffold::kernels {
namespace {

// C (m x n) = op(A) op(B) (+ C when accumulate), row-major: the signature of the three kernels a
// linear layer's products may run on.
using Sgemm = void (*)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                       bool accumulate);

#if SCAFFOLD_WITH_DNNL
// oneDNN's sgemm.
void dnnl_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  bool accumulate) {
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.f, a,
                                          lda, b, ldb, accumulate ? 1.f : 0.f, c, ldc);
  if (status != dnnl_success)
    throw core::Error(
        fmt::format("oneDNN sgemm {}x{}x{} failed (status {})", m, n, k, static_cast<int>(status)));
}
#endif

// LibTorch's at::mm (its BLAS) on the same buffers, viewed as tensors.
void libtorch_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                      bool accumulate) {
  const auto view = [](const float* p, int64_t rows, int64_t cols, int64_t ld, bool trans) {
    const at::Tensor t =
        at::from_blob(const_cast<float*>(p), {trans ? cols : rows, trans ? rows : cols}, {ld, 1},
                      at::TensorOptions().dtype(at::kFloat));
    return trans ? t.t() : t;
  };
  at::Tensor out = at::from_blob(c, {m, n}, {ldc, 1}, at::TensorOptions().dtype(at::kFloat));
  if (accumulate)
    out.addmm_(view(a, m, k, lda, trans_a), view(b, k, n, ldb, trans_b));
  else
    at::mm_out(out, view(a, m, k, lda, trans_a), view(b, k, n, ldb, trans_b));
}

// The kernels by GemmChoice's codes.
Sgemm product_kernel(GemmChoice::Kernel kernel) {
  switch (kernel) {
    case GemmChoice::Native:
      return &sgemm;
#if SCAFFOLD_WITH_DNNL
    case GemmChoice::OneDnn:
      return &dnnl_product;
#endif
    default:
      return &libtorch_product;
  }
}

// fn(first row, rows) for each block of m rows: the three products below take the rows (tokens,
// pixels) in blocks of at most kGemmRowsPerProduct (dnnl_linear.hpp).
template <typename Fn>
void for_row_blocks(int64_t m, Fn fn) {
  for (int64_t first = 0; first < m; first += kGemmRowsPerProduct)
    fn(first, std::min(kGemmRowsPerProduct, m - first));
}

// y (m x n) = x (m x k) w^T, w (n x k); with a bias, y starts as b and the product adds to it.
at::Tensor forward_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                           Sgemm product) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  at::Tensor y =
      b.defined() ? b.reshape({1, n}).expand({m, n}).contiguous() : at::empty({m, n}, x.options());
  for_row_blocks(m, [&](int64_t first, int64_t rows) {
    product(false, true, rows, n, k, x.data_ptr<float>() + first * k, k, w.data_ptr<float>(), k,
            y.data_ptr<float>() + first * n, n, b.defined());
  });
  return y;
}
// dx (m x k) = dy (m x n) w (n x k).
at::Tensor input_gradient(const at::Tensor& dy, const at::Tensor& w, Sgemm product) {
  const int64_t m = dy.size(0), n = dy.size(1), k = w.size(1);
  at::Tensor dx = at::empty({m, k}, dy.options());
  for_row_blocks(m, [&](int64_t first, int64_t rows) {
    product(false, false, rows, k, n, dy.data_ptr<float>() + first * n, n, w.data_ptr<float>(), k,
            dx.data_ptr<float>() + first * k, k, false);
  });
  return dx;
}
// dw (n x k) = dy^T (n x m) x (m x k).
at::Tensor weight_gradient(const at::Tensor& dy, const at::Tensor& x, Sgemm product) {
  const int64_t m = dy.size(0), n = dy.size(1), k = x.size(1);
  at::Tensor dw = at::empty({n, k}, dy.options());
  if (m == 0) return dw.zero_();
  for_row_blocks(m, [&](int64_t first, int64_t rows) {
    product(true, false, n, k, rows, dy.data_ptr<float>() + first * n, n,
            x.data_ptr<float>() + first * k, k, dw.data_ptr<float>(), k, first > 0);
  });
  return dw;
}

// The products of bf16 operands (contiguous bf16 matrices) on a CPU with bf16 products, on the
// kernel `kernel`: bf16_gemm (oneDNN's matmul, float32 sums, writing `out` directly) or LibTorch's
// at::mm on the bf16 tensors (its output bf16, widened where float32 is asked for).
const uint16_t* bf16_bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
}
Bf16GemmOut gemm_out(at::ScalarType out) {
  return out == at::kBFloat16 ? Bf16GemmOut::BFloat16 : Bf16GemmOut::Float32;
}
// y (m x n) = x (m x k) w^T (+ b), w (n x k), b (n) bf16 or undefined.
at::Tensor bf16_forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                        at::ScalarType out, GemmChoice::Kernel kernel) {
  if (kernel != GemmChoice::OneDnn) {
    const at::Tensor y = b.defined() ? at::addmm(b, x, w.t()) : at::mm(x, w.t());
    return y.to(out);
  }
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  at::Tensor y = at::empty({m, n}, x.options().dtype(out));
  bf16_gemm(false, true, m, n, k, bf16_bits(x), k, bf16_bits(w), k, y.data_ptr(), n, gemm_out(out),
            false, b.defined() ? bf16_bits(b) : nullptr);
  return y;
}
// dx (m x k) = dy (m x n) w (n x k).
at::Tensor bf16_input_gradient(const at::Tensor& dy, const at::Tensor& w, at::ScalarType out,
                               GemmChoice::Kernel kernel) {
  if (kernel != GemmChoice::OneDnn) return at::mm(dy, w).to(out);
  const int64_t m = dy.size(0), n = dy.size(1), k = w.size(1);
  at::Tensor dx = at::empty({m, k}, dy.options().dtype(out));
  bf16_gemm(false, false, m, k, n, bf16_bits(dy), n, bf16_bits(w), k, dx.data_ptr(), k,
            gemm_out(out));
  return dx;
}
// dw (n x k, float32) = dy^T (n x m) x (m x k).
at::Tensor bf16_weight_gradient(const at::Tensor& dy, const at::Tensor& x,
                                GemmChoice::Kernel kernel) {
  if (kernel != GemmChoice::OneDnn) return at::mm(dy.t(), x).to(at::kFloat);
  const int64_t m = dy.size(0), n = dy.size(1), k = x.size(1);
  at::Tensor dw = at::empty({n, k}, dy.options().dtype(at::kFloat));
  bf16_gemm(true, false, n, k, m, bf16_bits(dy), n, bf16_bits(x), k, dw.data_ptr<float>(), k,
            Bf16GemmOut::Float32);
  return dw;
}

// The 2-D linear as an autograd function: x (m x k), w (n x k), and with a bias b (n); each
// product on the kernel `choice` (GemmChoice::code()) names. (Two functions: an undefined tensor
// cannot be an input of LibTorch's autograd function.)
template <bool kBias>
struct ChosenLinear : public torch::autograd::Function<ChosenLinear<kBias>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor& b, int64_t choice) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["choice"] = choice;
    return forward_product(x, w, b, product_kernel(GemmChoice::from_code(choice).y));
  }
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, int64_t choice) {
    return forward(ctx, x, w, at::Tensor(), choice);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const GemmChoice choice = GemmChoice::from_code(ctx->saved_data["choice"].toInt());
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = input_gradient(dy, w, product_kernel(choice.dx));
    if (ctx->needs_input_grad(1)) dw = weight_gradient(dy, x, product_kernel(choice.dw));
    if constexpr (kBias)
      return {dx, dw, ctx->needs_input_grad(2) ? dy.sum(0) : at::Tensor(), at::Tensor()};
    return {dx, dw, at::Tensor()};
  }
};

// (Below: the kernels a GemmKernel gives a shape's products, in float32 and in bf16.)
GemmChoice products_of(GemmKernel kernel, const at::Tensor& x2, const at::Tensor& w2);
GemmChoice bf16_products_of(GemmKernel kernel);

// The output layer and its cross-entropy as one node: x (N x k), w (V x k), labels (N); the
// forward's product, on the y kernel `kernel` gives the shape, writes the logits, which
// cross_entropy_rows turns into the per-token losses and, in place, their gradient D (softmax minus
// one-hot). The backward with incoming per-token gradients g: dx = diag(g) (D w) and dw = D^T
// (diag(g) x), so the N x V floats are read by the two products only (the row scalings are N x k).
// With `bf16` (CPU autocast to bf16 on a CPU with bf16 products) x and w are rounded to bf16 and
// multiplied on the bf16 kernels (float32 logits: the sums are not rounded), D is kept in bf16 for
// the two products, and the gradients are float32 sums returned in x's and w's dtypes.
struct LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor& labels, GemmKernel kernel,
                            bool bf16) {
    const at::Tensor xs = bf16 ? x.to(at::kBFloat16).contiguous() : x;
    const at::Tensor ws = bf16 ? w.to(at::kBFloat16).contiguous() : w;
    const GemmChoice c = bf16 ? bf16_products_of(kernel) : products_of(kernel, x, w);
    at::Tensor d = bf16 ? bf16_forward(xs, ws, at::Tensor(), at::kFloat, c.y)
                        : forward_product(x, w, at::Tensor(), product_kernel(c.y));  // (N, V)
    at::Tensor losses = at::empty({x.size(0)}, d.options());
    cross_entropy_rows(d.data_ptr<float>(), d.size(0), d.size(1), labels.data_ptr<int64_t>(),
                       losses.data_ptr<float>());
    if (bf16) d = d.to(at::kBFloat16);
    ctx->save_for_backward({xs, ws, d});
    ctx->saved_data["choice"] = c.code();
    ctx->saved_data["bf16"] = bf16;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = w.scalar_type();
    return losses;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor& d = saved[2];
    const GemmChoice choice = GemmChoice::from_code(ctx->saved_data["choice"].toInt());
    const at::Tensor g = grads[0].to(at::kFloat).contiguous().unsqueeze(1);  // (N, 1)
    at::Tensor dx, dw;
    if (ctx->saved_data["bf16"].toBool()) {
      if (ctx->needs_input_grad(0))
        dx = bf16_input_gradient(d, w, at::kFloat, choice.dx)
                 .mul_(g)
                 .to(ctx->saved_data["x_dtype"].toScalarType());
      if (ctx->needs_input_grad(1))
        dw = bf16_weight_gradient(d, (x.to(at::kFloat) * g).to(at::kBFloat16), choice.dw)
                 .to(ctx->saved_data["w_dtype"].toScalarType());
    } else {
      if (ctx->needs_input_grad(0)) dx = input_gradient(d, w, product_kernel(choice.dx)).mul_(g);
      if (ctx->needs_input_grad(1)) dw = weight_gradient(d, x * g, product_kernel(choice.dw));
    }
    return {dx, dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// A 2-D linear of operands rounded to bf16, as CPU autocast to bf16 computes it: x (m x k) float32
// or bf16, w (n x k), and with a bias b (n); bf16 output. Saves the bf16 operands.
// - `native` (a CPU with bf16 products): the products on the bf16 kernels bf16_products_of gives;
//   the input and weight gradients are their float32 sums, rounded to bf16 only where
//   the operand is bf16 (autocast rounds them, then widens them again for a float32 operand).
// - otherwise: the bf16 values multiplied in float32 on the kernels `kernel` gives the shape in
//   float32 (products_of, on the forward's float32 copies); the gradients rounded to bf16 as
//   autocast's are, returned in x's, w's and b's dtypes. The float32 copies live for one product.
// The kernels chosen are written to `chosen`.
template <bool kBias>
struct Bf16Linear : public torch::autograd::Function<Bf16Linear<kBias>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, const at::Tensor& b, GemmKernel kernel,
                            bool native, GemmChoice* chosen) {
    // (The products read row-major operands: a weight given as a view is copied.)
    const at::Tensor xb = x.to(at::kBFloat16).contiguous(), wb = w.to(at::kBFloat16).contiguous();
    ctx->save_for_backward({xb, wb});
    ctx->saved_data["native"] = native;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = w.scalar_type();
    ctx->saved_data["b_dtype"] = b.defined() ? b.scalar_type() : w.scalar_type();
    at::Tensor y;
    if (native) {
      *chosen = bf16_products_of(kernel);
      y = bf16_forward(xb, wb, b.defined() ? b.to(at::kBFloat16).contiguous() : at::Tensor(),
                       at::kBFloat16, chosen->y);
    } else {
      const at::Tensor xf = xb.to(at::kFloat), wf = wb.to(at::kFloat);
      *chosen = products_of(kernel, xf, wf);
      y = forward_product(xf, wf, bf16_rounded(b), product_kernel(chosen->y)).to(at::kBFloat16);
    }
    ctx->saved_data["choice"] = chosen->code();
    return y;
  }
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w, GemmKernel kernel, bool native,
                            GemmChoice* chosen) {
    return forward(ctx, x, w, at::Tensor(), kernel, native, chosen);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const GemmChoice choice = GemmChoice::from_code(ctx->saved_data["choice"].toInt());
    const auto dtype = [&](const char* name) { return ctx->saved_data[name].toScalarType(); };
    at::Tensor dx, dw, db;
    if (ctx->saved_data["native"].toBool()) {
      const at::Tensor dy = grads[0].to(at::kBFloat16).contiguous();
      if (ctx->needs_input_grad(0))
        dx = bf16_input_gradient(dy, saved[1], dtype("x_dtype"), choice.dx);
      if (ctx->needs_input_grad(1))
        dw = bf16_weight_gradient(dy, saved[0], choice.dw).to(dtype("w_dtype"));
      if (kBias && ctx->needs_input_grad(2))
        db = at::sum(dy, {0}, false, at::kFloat).to(dtype("b_dtype"));
    } else {
      // The output's gradient as autocast's bf16 product would take it.
      const at::Tensor dy = bf16_rounded(grads[0]).contiguous();
      const auto as_bf16_gradient = [&](const at::Tensor& g, const char* name) {
        return g.to(at::kBFloat16).to(dtype(name));
      };
      if (ctx->needs_input_grad(0))
        dx = as_bf16_gradient(
            input_gradient(dy, saved[1].to(at::kFloat), product_kernel(choice.dx)), "x_dtype");
      if (ctx->needs_input_grad(1))
        dw = as_bf16_gradient(
            weight_gradient(dy, saved[0].to(at::kFloat), product_kernel(choice.dw)), "w_dtype");
      if (kBias && ctx->needs_input_grad(2)) db = as_bf16_gradient(dy.sum(0), "b_dtype");
    }
    // (None for the kernel, `native` and `chosen`.)
    if constexpr (kBias) return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor()};
    return {dx, dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::string linear_describe(const at::Tensor& x, const at::Tensor& w) {
  return fmt::format("x {} {} {}, w {} {}", fmt::join(x.sizes(), "x"),
                     c10::toString(x.scalar_type()), x.device().str(), fmt::join(w.sizes(), "x"),
                     c10::toString(w.scalar_type()));
}

// Why the chosen products do not take these ("" when they do).
std::string linear_unsupported(const at::Tensor& x, const at::Tensor& w) {
  if (!x.defined() || !w.defined()) return "an undefined tensor";
  if (!x.device().is_cpu() || !w.device().is_cpu()) return "not on the CPU";
  if (x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat) return "not float32";
  if (x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(1)) return "shapes do not match";
  if (nn::AutocastState::current().cpu_enabled) return "under CPU autocast";
  return "";
}

// Why dnnl_linear does not take these ("" when it does).
std::string dnnl_unsupported(const at::Tensor& x, const at::Tensor& w) {
  if (SCAFFOLD_WITH_DNNL == 0) return "this build has no oneDNN";
  return linear_unsupported(x, w);
}

constexpr const char* kProductNames[3] = {"y", "dx", "dw"};

}  // namespace

const char* to_string(GemmChoice::Kernel kernel) {
  switch (kernel) {
    case GemmChoice::OneDnn:
      return "onednn";
    case GemmChoice::Native:
      return "native";
    case GemmChoice::LibTorch:
      break;
  }
  return "libtorch";
}

GemmChoice GemmChoice::from_code(int64_t code) {
  const auto kernel = [](int64_t bits) { return static_cast<Kernel>(bits & 3); };
  return {kernel(code), kernel(code >> 2), kernel(code >> 4)};
}

std::string GemmChoice::name() const {
  if (y == dx && dx == dw) return to_string(y);
  return fmt::format("y={} dx={} dw={}", to_string(y), to_string(dx), to_string(dw));
}

GemmChoice GemmChoice::parse(const std::string& text) {
  const auto kernel = [&](const std::string& name) {
    for (const Kernel k : {LibTorch, OneDnn, Native})
      if (name == to_string(k)) return k;
    throw core::Error(
        fmt::format("gemm verdict '{}': '{}' is not a kernel (expected libtorch, onednn or native)",
                    text, name));
  };
  if (text.find('=') == std::string::npos) return all(kernel(text));
  GemmChoice c;
  Kernel* slots[3] = {&c.y, &c.dx, &c.dw};
  std::size_t at = 0;
  for (int p = 0; p < 3; ++p) {
    const std::string prefix = std::string(kProductNames[p]) + "=";
    const std::size_t end = at < text.size() ? std::min(text.find(' ', at), text.size()) : at;
    if (at >= text.size() || text.compare(at, prefix.size(), prefix) != 0 ||
        end <= at + prefix.size())
      throw core::Error(fmt::format(
          "gemm verdict '{}': expected a kernel name or 'y=<kernel> dx=<kernel> dw=<kernel>'",
          text));
    *slots[p] = kernel(text.substr(at + prefix.size(), end - at - prefix.size()));
    at = end + 1;
  }
  if (at < text.size())
    throw core::Error(fmt::format("gemm verdict '{}': text after dw=<kernel>", text));
  return c;
}

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
  return dnnl_unsupported(x, w).empty();
}

namespace {

// The (rows x k) contiguous matrix a linear layer multiplies: x with its leading dimensions merged.
at::Tensor as_matrix(const at::Tensor& x, int64_t k) {
  return x.reshape({-1, k}).contiguous();
}

// chosen_linear without its check, on x as_matrix already: for callers that ran
// linear_unsupported. The output has x's leading dimensions.
at::Tensor apply_linear(const at::Tensor& x, const at::Tensor& x2, const at::Tensor& w,
                        const at::Tensor& b, GemmChoice choice) {
  const at::Tensor bias = b.defined() ? b.to(at::kFloat).contiguous() : at::Tensor();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  const at::Tensor y = b.defined()
                           ? ChosenLinear<true>::apply(x2, w.contiguous(), bias, choice.code())
                           : ChosenLinear<false>::apply(x2, w.contiguous(), choice.code());
  return y.view(shape);
}

// apply_linear after the check: `why` (the check's answer) empty, else a core::Error naming
// `what`, the arguments and the reason.
at::Tensor checked_linear(const char* what, const std::string& why, const at::Tensor& x,
                          const at::Tensor& w, const at::Tensor& b, GemmChoice choice) {
  if (!why.empty())
    throw core::Error(
        fmt::format("{}: unsupported arguments ({}): {}", what, linear_describe(x, w), why));
  return apply_linear(x, as_matrix(x, w.size(1)), w, b, choice);
}

}  // namespace

at::Tensor dnnl_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return checked_linear("oneDNN linear", dnnl_unsupported(x, w), x, w, b,
                        GemmChoice::all(GemmChoice::OneDnn));
}

at::Tensor chosen_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                         GemmChoice choice) {
  return checked_linear("linear", linear_unsupported(x, w), x, w, b, choice);
}

GemmChoice gemm_choice(const at::Tensor& x_all, const at::Tensor& w) {
  const int64_t m = x_all.size(0), k = x_all.size(1), n = w.size(0);
  // The products run in blocks of rows: one block is what is timed.
  const at::Tensor x = x_all.narrow(0, 0, std::min(m, kGemmRowsPerProduct));
  // The key is the start of the probe's system.json line.
  const std::string key = fmt::format("gemm {}x{} by {}x{}", m, k, n, k);
  return GemmChoice::parse(probe_verdicts().choose(key, [&] {
    const at::NoGradGuard no_grad;
    std::vector<GemmChoice::Kernel> kernels = {GemmChoice::LibTorch, GemmChoice::Native};
    if (dnnl_gemm_built()) kernels.insert(kernels.begin() + 1, GemmChoice::OneDnn);
    // The output gradient is the forward's output: values of the run's scale, no new input.
    const at::Tensor dy = forward_product(x, w, at::Tensor(), &libtorch_product);
    ProbeResult result;
    GemmChoice choice;
    GemmChoice::Kernel* slots[3] = {&choice.y, &choice.dx, &choice.dw};
    for (int p = 0; p < 3; ++p) {
      double reference_ms = 0, best_ms = 0;
      for (const GemmChoice::Kernel kernel : kernels) {
        const Sgemm product = product_kernel(kernel);
        const double ms = core::best_time_ms([&] {
          if (p == 0) forward_product(x, w, at::Tensor(), product);
          if (p == 1) input_gradient(dy, w, product);
          if (p == 2) weight_gradient(dy, x, product);
        });
        result.timings.push_back({fmt::format("{} {}", kProductNames[p], to_string(kernel)), ms});
        if (kernel == GemmChoice::LibTorch) {
          reference_ms = ms;
        } else if (ms < kGemmMargin * reference_ms && (best_ms == 0 || ms < best_ms)) {
          best_ms = ms;
          *slots[p] = kernel;
        }
      }
    }
    result.verdict = choice.name();
    return result;
  }));
}

namespace {

// The kernel of each of the three products that `kernel` gives a layer of input x2 (a contiguous
// matrix) and weight w2: the probe's verdict for the shape, or one kernel for all three (oneDNN's
// falls to at::mm in a build without oneDNN: product_kernel).
GemmChoice products_of(GemmKernel kernel, const at::Tensor& x2, const at::Tensor& w2) {
  if (kernel == GemmKernel::Probe) return gemm_choice(x2, w2);
  return GemmChoice::all(kernel == GemmKernel::OneDnn ? GemmChoice::OneDnn : GemmChoice::LibTorch);
}

// The same for bf16 operands on a CPU with bf16 products: oneDNN's matmul for all three where it
// runs here (bf16_gemm_available) and `kernel` is not LibTorch's, with no probe. at::mm of bf16
// tensors reaches the same library's kernels through LibTorch's ideep layer, which writes bf16
// only; timed alone the two were level at the GPT's shapes (within 5 %, either way), while the
// whole bf16 GPT step was 7-11 % faster on the matmul (docs/llm.md, "bf16 products on oneDNN's
// matmul"): a probe timing one product at a time would have chosen by noise.
GemmChoice bf16_products_of(GemmKernel kernel) {
  return GemmChoice::all(kernel != GemmKernel::LibTorch && bf16_gemm_available()
                             ? GemmChoice::OneDnn
                             : GemmChoice::LibTorch);
}

// Why bf16_linear does not take these ("" when it does).
std::string bf16_linear_unsupported(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (!x.defined() || !w.defined()) return "an undefined tensor";
  if (!x.device().is_cpu() || !w.device().is_cpu() || (b.defined() && !b.device().is_cpu()))
    return "not on the CPU";
  const auto floating = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16;
  };
  if (!floating(x) || !floating(w) || (b.defined() && !floating(b))) return "not float32 or bf16";
  if (x.dim() < 1 || w.dim() != 2 || x.size(-1) != w.size(1) ||
      (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0))))
    return "shapes do not match";
  return "";
}

}  // namespace

std::string linear_cross_entropy_unsupported(const at::Tensor& x, const at::Tensor& w,
                                             const at::Tensor& labels) {
  std::string why;
  const nn::AutocastState autocast = nn::AutocastState::current();
  if (autocast.cpu_enabled) {
    // The bf16 node: bf16 products of float32 or bf16 operands.
    if (autocast.cpu_dtype != at::kBFloat16)
      why = fmt::format("under CPU autocast to {}", c10::toString(autocast.cpu_dtype));
    else if (!cpu_has_bf16_products())
      why = "under CPU autocast on a CPU without bf16 products";
    else
      why = bf16_linear_unsupported(x, w, at::Tensor());
  } else {
    why = linear_unsupported(x, w);
  }
  if (why.empty() && x.dim() != 2) why = "the input is not a matrix";
  if (why.empty() && (!labels.defined() || labels.scalar_type() != at::kLong || labels.dim() != 1 ||
                      labels.size(0) != x.size(0)))
    why = "the labels are not one int64 per input row";
  if (why.empty() && !labels.device().is_cpu()) why = "the labels are not on the CPU";
  return why;
}

at::Tensor linear_cross_entropy(const at::Tensor& x, const at::Tensor& w, const at::Tensor& labels,
                                GemmKernel kernel) {
  const std::string why = linear_cross_entropy_unsupported(x, w, labels);
  if (!why.empty())
    throw core::Error(fmt::format("linear cross-entropy: unsupported arguments ({}): {}",
                                  linear_describe(x, w), why));
  const int64_t vocab = w.size(0);
  const at::Tensor l = labels.contiguous();
  if (l.numel() > 0) {
    const int64_t* first = l.data_ptr<int64_t>();
    const auto [low, high] = std::minmax_element(first, first + l.numel());
    if (*low < 0 || *high >= vocab)
      throw core::Error(
          fmt::format("linear cross-entropy: a label outside [0, {}) (labels from {} to {})", vocab,
                      *low, *high));
  }
  const at::Tensor x2 = x.contiguous(), w2 = w.contiguous();
  const bool bf16 = nn::AutocastState::current().cpu_enabled;  // (checked: bf16 products)
  const nn::AutocastGuard no_autocast(nn::AutocastState::current().disabled());
  return LinearCrossEntropy::apply(x2, w2, l, kernel, bf16);
}

namespace {

std::atomic<int> bf16_products_forced{-1};

// Whether linear() hands this call to the bf16 node: CPU autocast to bf16, arguments it takes.
bool bf16_autocast_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const nn::AutocastState autocast = nn::AutocastState::current();
  return autocast.cpu_enabled && autocast.cpu_dtype == at::kBFloat16 &&
         bf16_linear_unsupported(x, w, b).empty();
}

}  // namespace

bool cpu_has_bf16_products() {
  const int forced = bf16_products_forced.load();
  if (forced >= 0) return forced != 0;
  static const bool has = core::cpu_has_bf16_products();
  return has;
}

void force_bf16_products(int has) {
  bf16_products_forced.store(has);
}

bool bf16_linear_in_float32(const c10::Device& device, GemmKernel kernel) {
  return device.is_cpu() && kernel != GemmKernel::LibTorch && !cpu_has_bf16_products();
}

bool bf16_linear_on_onednn(const c10::Device& device, GemmKernel kernel) {
  return device.is_cpu() && kernel != GemmKernel::LibTorch && cpu_has_bf16_products() &&
         bf16_gemm_available();
}

at::Tensor bf16_rounded(const at::Tensor& t) {
  return t.defined() ? t.to(at::kBFloat16).to(at::kFloat) : t;
}

bool bf16_products_emulated() {
  const nn::AutocastState autocast = nn::AutocastState::current();
  return autocast.cpu_enabled && autocast.cpu_dtype == at::kBFloat16 && !cpu_has_bf16_products();
}

namespace {

// The bf16 node (native: on bf16 products), after its check, and the kernels its products ran on.
at::Tensor checked_bf16_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                               GemmKernel kernel, bool native, GemmChoice& choice) {
  // The node casts its operands itself; autocast must not turn its float32 products (the
  // emulated path) into bf16 ones.
  const nn::AutocastGuard no_autocast(nn::AutocastState::current().disabled());
  const at::Tensor x2 = as_matrix(x, w.size(1));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  const at::Tensor y = b.defined() ? Bf16Linear<true>::apply(x2, w, b, kernel, native, &choice)
                                   : Bf16Linear<false>::apply(x2, w, kernel, native, &choice);
  return y.view(shape);
}

}  // namespace

at::Tensor bf16_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                       GemmKernel kernel) {
  const std::string why = bf16_linear_unsupported(x, w, b);
  if (!why.empty())
    throw core::Error(
        fmt::format("bf16 linear: unsupported arguments ({}): {}", linear_describe(x, w), why));
  GemmChoice choice;
  return checked_bf16_linear(x, w, b, kernel, false, choice);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, GemmKernel kernel,
                  KernelUse* use) {
  if (kernel != GemmKernel::LibTorch && bf16_autocast_linear(x, w, b)) {
    const bool native = cpu_has_bf16_products();
    GemmChoice choice;
    at::Tensor y = checked_bf16_linear(x, w, b, kernel, native, choice);
    if (use) {
      if (native)
        use->ran("gemm", to_string(choice.y));
      else
        use->ran("gemm", std::string(to_string(choice.y)) + "_fp32",
                 "bf16 operands multiplied in float32: this CPU has no bf16 matrix products");
    }
    return y;
  }
  if (kernel != GemmKernel::LibTorch) {
    const std::string why =
        kernel == GemmKernel::OneDnn ? dnnl_unsupported(x, w) : linear_unsupported(x, w);
    if (why.empty()) {
      const at::Tensor x2 = as_matrix(x, w.size(1));
      const GemmChoice choice = products_of(kernel, x2, w.contiguous());
      if (!choice.all_libtorch()) {
        if (use) use->ran("gemm", to_string(choice.y));
        return apply_linear(x, x2, w, b, choice);  // checked above: once per call, not twice
      }
    }
    if (use) use->ran("gemm", "libtorch", kernel == GemmKernel::OneDnn ? why : std::string());
  } else if (use) {
    use->ran("gemm", "libtorch");
  }
  return at::linear(x, w, b);
}

}  // namespace scaffold::kernels
