// dnnl_linear (oneDNN's sgemm for a linear layer's three products) and chosen_linear (each product
// on its own kernel: at::mm, oneDNN's or our sgemm) against LibTorch's at::linear in float64 on the
// same float32 inputs: output, input, weight and bias gradients within 1e-5 of the reference's
// largest magnitude (float32 sums of up to 300 terms, in another order), for 2-D and 3-D inputs,
// with and without a bias, odd extents, an input that needs no gradient. Also what it refuses, the
// probe's bookkeeping and verdicts, and which kernel kernels::linear runs for each choice. And
// bf16_linear (autocast's bf16 linear with float32 products, for CPUs without bf16 ones) against
// float64 products of the bf16-rounded operands, rounded to bf16 as autocast rounds, and against
// LibTorch's own bf16 linear under autocast; bf16_gemm (oneDNN's bf16 matmul) and the bf16 node
// on it (CPUs with bf16 products) against float64 products of the bf16 operands and against
// LibTorch's bf16 linear.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/bf16_gemm.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/kernel_use.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"
#include "unit/kernels/forced_bf16_products.hpp"
#include "unit/kernels/probe_expectations.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::ForcedBf16Products;
using model::test::tensors_close;
using model::test::within_a_bf16_step;

struct Result {
  at::Tensor y, dx, dw, db;
};

// y = op(x, w, b) and the gradients of sum(y * g).
template <typename Op>
Result run(const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0, const at::Tensor& g,
           bool x_grad, Op op) {
  const at::Tensor x = x0.detach().requires_grad_(x_grad), w = w0.detach().requires_grad_(true);
  const at::Tensor b = b0.defined() ? b0.detach().requires_grad_(true) : at::Tensor();
  const at::Tensor y = op(x, w, b);
  std::vector<at::Tensor> inputs{w};
  if (b.defined()) inputs.push_back(b);
  if (x_grad) inputs.push_back(x);
  const auto grads = torch::autograd::grad({y}, inputs, {g});
  Result r{y, at::Tensor(), grads[0], b.defined() ? grads[1] : at::Tensor()};
  if (x_grad) r.dx = grads.back();
  return r;
}

class DnnlLinearShapes
    : public ::testing::TestWithParam<std::tuple<std::vector<int64_t>, int64_t, bool, bool>> {};

TEST_P(DnnlLinearShapes, EqualsFloat64LinearInOutputAndGradients) {
  if (!dnnl_conv3d_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  const auto& [x_shape, out, bias, x_grad] = GetParam();
  at::manual_seed(5);
  const at::Tensor x = at::randn(x_shape), w = at::randn({out, x_shape.back()}) * 0.1;
  const at::Tensor b = bias ? at::randn({out}) : at::Tensor();
  std::vector<int64_t> y_shape = x_shape;
  y_shape.back() = out;
  const at::Tensor g = at::randn(y_shape);
  ASSERT_TRUE(dnnl_linear_supported(x, w));
  const Result got =
      run(x, w, b, g, x_grad, [](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
        return dnnl_linear(a, c, d);
      });
  const Result ref =
      run(x.to(at::kDouble), w.to(at::kDouble), bias ? b.to(at::kDouble) : b, g.to(at::kDouble),
          x_grad, [](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
            return at::linear(a, c, d);
          });
  EXPECT_EQ(got.y.scalar_type(), at::kFloat);
  EXPECT_TRUE(tensors_close(got.y, ref.y, 1e-5, "output"));
  EXPECT_TRUE(tensors_close(got.dw, ref.dw, 1e-5, "weight gradient"));
  if (bias) {
    EXPECT_TRUE(tensors_close(got.db, ref.db, 1e-5, "bias gradient"));
  }
  if (x_grad) {
    EXPECT_TRUE(tensors_close(got.dx, ref.dx, 1e-5, "input gradient"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DnnlLinearShapes,
    ::testing::Values(std::make_tuple(std::vector<int64_t>{7, 5}, int64_t{3}, true, true),
                      std::make_tuple(std::vector<int64_t>{2, 9, 33}, int64_t{48}, true, true),
                      std::make_tuple(std::vector<int64_t>{2, 9, 33}, int64_t{48}, false, true),
                      std::make_tuple(std::vector<int64_t>{64, 300}, int64_t{17}, true, false),
                      std::make_tuple(std::vector<int64_t>{1, 1, 16}, int64_t{1}, false, true)));

TEST(DnnlLinear, RefusesWhatItCannotTakeAndSaysWhy) {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({3, 8});
  EXPECT_FALSE(dnnl_linear_supported(x.to(at::kDouble), w.to(at::kDouble)));
  EXPECT_FALSE(dnnl_linear_supported(x, at::randn({3, 7})));
  {
    nn::AutocastState state = nn::AutocastState::current();
    state.cpu_enabled = true;
    const nn::AutocastGuard autocast(state);
    EXPECT_FALSE(dnnl_linear_supported(x, w));
  }
  try {
    dnnl_linear(x.to(at::kDouble), w.to(at::kDouble), at::Tensor());
    FAIL() << "float64 was taken";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dnnl_conv3d_built() ? "not float32" : "no oneDNN"),
              std::string::npos)
        << e.what();
  }
}

// Each product's kernel on its own: every mix of the three kernels gives at::linear's output and
// gradients (float64 reference, as above), with a bias and an input gradient, at a shape with
// ragged edges for our sgemm's tiles (29 rows, 37 outputs, 70 inputs).
TEST(ChosenLinear, EveryMixOfKernelsEqualsFloat64Linear) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({29, 70}), w = at::randn({37, 70}) * 0.1, b = at::randn({37});
  const at::Tensor g = at::randn({29, 37});
  const Result ref = run(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble), g.to(at::kDouble),
                         true, [](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
                           return at::linear(a, c, d);
                         });
  std::vector<GemmChoice::Kernel> kernels = {GemmChoice::LibTorch, GemmChoice::Native};
  if (dnnl_gemm_built()) kernels.push_back(GemmChoice::OneDnn);
  for (const auto y : kernels)
    for (const auto dx : kernels)
      for (const auto dw : kernels) {
        const GemmChoice choice{y, dx, dw};
        const Result got = run(x, w, b, g, true,
                               [&](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
                                 return chosen_linear(a, c, d, choice);
                               });
        const std::string what = choice.name();
        EXPECT_TRUE(tensors_close(got.y, ref.y, 1e-5, "output " + what));
        EXPECT_TRUE(tensors_close(got.dx, ref.dx, 1e-5, "input gradient " + what));
        EXPECT_TRUE(tensors_close(got.dw, ref.dw, 1e-5, "weight gradient " + what));
        EXPECT_TRUE(tensors_close(got.db, ref.db, 1e-5, "bias gradient " + what));
      }
}

TEST(GemmChoice, NamesAndParsesVerdictsAndRefusesOthers) {
  const GemmChoice mixed{GemmChoice::LibTorch, GemmChoice::OneDnn, GemmChoice::Native};
  EXPECT_EQ(mixed.name(), "y=libtorch dx=onednn dw=native");
  const GemmChoice back = GemmChoice::parse("y=libtorch dx=onednn dw=native");
  EXPECT_EQ(back.code(), mixed.code());
  EXPECT_EQ(GemmChoice::from_code(mixed.code()).name(), mixed.name());
  // One name for all three: what the probe writes when they agree, and what a checkpoint written
  // before the per-product choice holds.
  EXPECT_EQ(GemmChoice::all(GemmChoice::Native).name(), "native");
  EXPECT_EQ(GemmChoice::parse("onednn").code(), GemmChoice::all(GemmChoice::OneDnn).code());
  EXPECT_TRUE(GemmChoice::parse("libtorch").all_libtorch());
  for (const std::string bad : {"mkl", "y=libtorch dx=onednn", "y=libtorch dx=onednn dw=mkl",
                                "dx=libtorch y=onednn dw=native", "y=native dx=native dw=native x"})
    EXPECT_THROW(GemmChoice::parse(bad), core::Error) << bad;
}

TEST(DnnlLinear, TheProbeTimesEveryKernelOnEachProductOnceAndKeepsTheFastest) {
  const std::size_t before = probe_verdicts().measurements().size();
  const at::Tensor x = at::randn({40, 24}), w = at::randn({56, 24});
  const GemmChoice first = gemm_choice(x, w);
  const GemmChoice again = gemm_choice(at::randn({40, 24}), at::randn({56, 24}));  // same shape
  EXPECT_EQ(first.code(), again.code());
  const auto probes = probe_verdicts().measurements();
  ASSERT_EQ(probes.size(), before + 1);  // measured once, remembered after
  const ProbeMeasurement& p = probes.back();
  EXPECT_EQ(p.key, "gemm 40x24 by 56x24");
  EXPECT_EQ(p.result.verdict, first.name());
  std::vector<std::string> kernels = {"libtorch", "native"};
  if (dnnl_gemm_built()) kernels.insert(kernels.begin() + 1, "onednn");
  ASSERT_EQ(p.result.timings.size(), 3 * kernels.size()) << p.line();
  const GemmChoice::Kernel chosen[3] = {first.y, first.dx, first.dw};
  const char* products[3] = {"y", "dx", "dw"};
  for (std::size_t product = 0; product < 3; ++product) {
    // The product's timings in order, at::mm's first; the kernel kept is the fastest of those
    // below kGemmMargin times at::mm's, else at::mm.
    const std::size_t at = product * kernels.size();
    std::string expected = "libtorch";
    double best = kGemmMargin * p.result.timings[at].ms;
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const ProbeTiming& t = p.result.timings[at + i];
      EXPECT_EQ(t.kernel, std::string(products[product]) + " " + kernels[i]) << p.line();
      EXPECT_GT(t.ms, 0.0) << p.line();
      if (i > 0 && t.ms < best) {
        best = t.ms;
        expected = kernels[i];
      }
    }
    EXPECT_EQ(to_string(chosen[product]), expected) << p.line();
  }
  EXPECT_EQ(p.line().rfind("gemm 40x24 by 56x24: y libtorch ", 0), 0u) << p.line();
}

TEST(DnnlLinear, LinearRunsTheChosenKernelAndCountsIt) {
  const at::Tensor x = at::randn({6, 8}), w = at::randn({5, 8}), b = at::randn({5});
  const at::Tensor ref = at::linear(x, w, b);
  KernelUse use;
  use.chose("gemm", {"libtorch"});
  EXPECT_TRUE(at::allclose(linear(x, w, b, GemmKernel::LibTorch, &use), ref));
  EXPECT_EQ(use.summary(), std::vector<std::string>{"gemm=libtorch x1"});
  if (!dnnl_conv3d_built()) return;
  KernelUse onednn;
  onednn.chose("gemm", {"onednn"});
  EXPECT_TRUE(at::allclose(linear(x, w, b, GemmKernel::OneDnn, &onednn), ref, 1e-5, 1e-5));
  // float64 cannot go to oneDNN: LibTorch takes it, a fallback recorded with its reason.
  linear(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble), GemmKernel::OneDnn, &onednn);
  EXPECT_EQ(onednn.summary(), std::vector<std::string>{"gemm=onednn x1, libtorch x1"});
  ASSERT_EQ(onednn.fallbacks().size(), 1u);
  EXPECT_NE(onednn.fallbacks()[0].find("not float32"), std::string::npos) << onednn.fallbacks()[0];
}

at::Tensor bf16_rounded(const at::Tensor& t) {
  return t.to(at::kBFloat16).to(at::kDouble);
}

// CPU autocast to bf16 on the calling thread for the guard's lifetime.
nn::AutocastState bf16_autocast() {
  nn::AutocastState state = nn::AutocastState::current();
  state.cpu_enabled = true;
  state.cpu_dtype = at::kBFloat16;
  return state;
}

// A bf16 layer's dtypes: a bf16 output, the input gradient in the input's dtype, a float32 weight
// gradient (the weight's).
void expect_bf16_layer_dtypes(const Result& got, at::ScalarType x_dtype, const std::string& what) {
  EXPECT_EQ(got.y.scalar_type(), at::kBFloat16) << what;
  EXPECT_EQ(got.dx.scalar_type(), x_dtype) << what;
  EXPECT_EQ(got.dw.scalar_type(), at::kFloat) << what;
}

// Output and gradients: the bf16 operands multiplied in float64 and each result rounded to bf16,
// as autocast's bf16 products round theirs; the incoming gradient is rounded to bf16 first (a bf16
// output's gradient is bf16). Every kernel, float32 and bf16 inputs, 2-D and 3-D, with and without
// a bias, ragged edges for our sgemm's tiles.
TEST(Bf16Linear, EqualsFloat64ProductsOfTheBf16OperandsRoundedToBf16) {
  at::manual_seed(12);
  for (const GemmKernel kernel : {GemmKernel::LibTorch, GemmKernel::OneDnn, GemmKernel::Probe})
    for (const bool bias : {true, false})
      for (const at::ScalarType x_dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = at::randn({2, 13, 70}).to(x_dtype), w = at::randn({37, 70}) * 0.1;
        const at::Tensor b = bias ? at::randn({37}) : at::Tensor(), g = at::randn({2, 13, 37});
        const Result got = run(x, w, b, g, true,
                               [&](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
                                 return bf16_linear(a, c, d, kernel);
                               });
        const at::Tensor xb = bf16_rounded(x), wb = bf16_rounded(w), gb = bf16_rounded(g);
        const std::string what =
            fmt::format("{} bias {} x {}", to_string(kernel), bias, c10::toString(x_dtype));
        expect_bf16_layer_dtypes(got, x_dtype, what);
        EXPECT_TRUE(within_a_bf16_step(
            got.y, bf16_rounded(at::linear(xb, wb, bias ? bf16_rounded(b) : at::Tensor())),
            "output " + what));
        EXPECT_TRUE(
            within_a_bf16_step(got.dx, bf16_rounded(at::matmul(gb, wb)), "input gradient " + what));
        EXPECT_TRUE(within_a_bf16_step(
            got.dw, bf16_rounded(at::matmul(gb.reshape({-1, 37}).t(), xb.reshape({-1, 70}))),
            "weight gradient " + what));
        if (bias) {
          EXPECT_TRUE(within_a_bf16_step(got.db, bf16_rounded(gb.sum(at::IntArrayRef{0, 1})),
                                         "bias gradient " + what));
        }
      }
}

// A bf16 layer against LibTorch's under autocast: the output within a bf16 step, the gradients
// within two and in the same dtypes.
void expect_like_libtorchs_autocast_linear(const Result& got, const Result& ref) {
  EXPECT_TRUE(within_a_bf16_step(got.y, ref.y, "output"));
  for (const auto& [mine, theirs, what] : {std::make_tuple(got.dx, ref.dx, "input gradient"),
                                           std::make_tuple(got.dw, ref.dw, "weight gradient"),
                                           std::make_tuple(got.db, ref.db, "bias gradient")}) {
    EXPECT_EQ(mine.scalar_type(), theirs.scalar_type()) << what;
    EXPECT_TRUE(tensors_close(mine, theirs, 2.0 / 128, what));
  }
}

// The same layer as LibTorch computes it under CPU autocast (its bf16 products: oneDNN's on an
// AVX-512 CPU, which sum in float32; reference loops elsewhere, which sum in bf16: a product with a
// 4096-long reduction was 11.5 % off float64 there, measured on a Zen 3), an implementation
// independent of ours, on a short reduction (40) where both land within a bf16 step of each other;
// the gradients within two (autocast's are its bf16 products rounded, ours too, but the sums may
// round apart). This checks autocast's semantics (which tensors are rounded, the gradients'
// dtypes); the float64 test above checks the values.
TEST(Bf16Linear, MatchesLibTorchsLinearUnderAutocast) {
  at::manual_seed(13);
  const at::Tensor x = at::randn({3, 5, 40}), w = at::randn({24, 40}) * 0.2, b = at::randn({24});
  const at::Tensor g = at::randn({3, 5, 24}).to(at::kBFloat16);
  const Result got =
      run(x, w, b, g, true, [](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
        return bf16_linear(a, c, d, GemmKernel::Probe);
      });
  const Result ref =
      run(x, w, b, g, true, [](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
        const nn::AutocastGuard autocast(bf16_autocast());
        return at::linear(a, c, d);
      });
  EXPECT_EQ(ref.y.scalar_type(), at::kBFloat16);
  expect_like_libtorchs_autocast_linear(got, ref);
}

// A weight given as a (transposed) view gives what its contiguous copy gives, to the bit: the
// products read row-major operands.
TEST(Bf16Linear, TakesAWeightGivenAsAView) {
  at::manual_seed(14);
  const at::Tensor x = at::randn({9, 20}), w = at::randn({20, 11}).t();
  ASSERT_FALSE(w.is_contiguous());
  for (const GemmKernel kernel : {GemmKernel::LibTorch, GemmKernel::Probe})
    EXPECT_TRUE(
        at::equal(bf16_linear(x, w, {}, kernel), bf16_linear(x, w.contiguous(), {}, kernel)))
        << to_string(kernel);
}

TEST(Bf16Linear, RefusesWhatItCannotTakeAndSaysWhy) {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({3, 8});
  const auto refused = [](const std::function<void()>& call, const std::string& why) {
    try {
      call();
    } catch (const core::Error& e) {
      return std::string(e.what()).find(why) != std::string::npos
                 ? ::testing::AssertionSuccess()
                 : ::testing::AssertionFailure() << e.what();
    }
    return ::testing::AssertionFailure() << "taken";
  };
  EXPECT_TRUE(refused([&] { bf16_linear(x.to(at::kDouble), w, {}, GemmKernel::Probe); },
                      "not float32 or bf16"));
  EXPECT_TRUE(refused(
      [&] {
        bf16_linear(x, at::randn({3, 7}), {}, GemmKernel::Probe);
      },
      "shapes do not match"));
  EXPECT_TRUE(refused([&] { bf16_linear(x, w, at::randn({4}), GemmKernel::Probe); },
                      "shapes do not match"));
}

// Under autocast to bf16, linear() hands a call to bf16_linear only where the CPU has no bf16
// products (forced either way here) and the kernel is not LibTorch (the reference), and counts it
// as "<kernel>_fp32", a departure from the chosen kernels logged with its reason.
TEST(Bf16Linear, LinearTakesItUnderBf16AutocastWhereTheCpuHasNoBf16Products) {
  const at::Tensor x = at::randn({6, 8}), w = at::randn({5, 8}), b = at::randn({5});
  const nn::AutocastGuard autocast(bf16_autocast());
  const ForcedBf16Products forced(0);
  KernelUse use;
  use.chose("gemm", {"onednn", "libtorch", "native"});
  const at::Tensor y = linear(x, w, b, GemmKernel::Probe, &use);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  ASSERT_EQ(use.counts().size(), 1u);
  EXPECT_NE(use.counts()[0].kernel.find("_fp32"), std::string::npos) << use.counts()[0].kernel;
  ASSERT_EQ(use.fallbacks().size(), 1u);
  EXPECT_NE(use.fallbacks()[0].find("no bf16 matrix products"), std::string::npos)
      << use.fallbacks()[0];
  KernelUse reference;
  linear(x, w, b, GemmKernel::LibTorch, &reference);
  forced.set(1);
  linear(x, w, b, GemmKernel::LibTorch, &reference);
  EXPECT_EQ(reference.summary(), std::vector<std::string>{"gemm=libtorch x2"});
  // With bf16 products, the bf16 node: counted by its kernel, no departure.
  KernelUse native;
  native.chose("gemm", {"onednn", "libtorch", "native"});
  EXPECT_EQ(linear(x, w, b, GemmKernel::Probe, &native).scalar_type(), at::kBFloat16);
  EXPECT_EQ(native.summary(),
            std::vector<std::string>{std::string("gemm=") +
                                     (bf16_gemm_available() ? "onednn" : "libtorch") + " x1"});
  EXPECT_TRUE(native.fallbacks().empty());
}

// bf16_gemm against float64 products of its bf16 operands: every transposition, float32 and bf16
// outputs, accumulating, with a bias, leading dimensions wider than the rows; float32 sums of 70
// products within 1e-5 of the largest magnitude, a bf16 output within a bf16 step (2^-8) of the
// float64 result (its float32 sum rounded once).
TEST(Bf16Gemm, EqualsFloat64ProductsOfItsBf16Operands) {
  if (!bf16_gemm_available()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU or build";
  at::manual_seed(15);
  const int64_t m = 13, n = 37, k = 70;
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true})
      for (const int variant : {0, 1, 2, 3}) {  // float32, bf16, accumulating, with a bias
        const bool bf16_out = variant == 1, accumulate = variant == 2, bias = variant == 3;
        // Row-major storage with 3 spare columns: op(A) = A^T reads A (k x m) when transposed.
        const at::Tensor a_store =
            at::randn({trans_a ? k : m, (trans_a ? m : k) + 3}).to(at::kBFloat16);
        const at::Tensor b_store =
            at::randn({trans_b ? n : k, (trans_b ? k : n) + 3}).to(at::kBFloat16);
        const at::Tensor a = a_store.narrow(1, 0, trans_a ? m : k);
        const at::Tensor b = b_store.narrow(1, 0, trans_b ? k : n);
        const at::Tensor bias_v = at::randn({n}).to(at::kBFloat16);
        const at::Tensor start = at::randn({m, n + 5});
        at::Tensor c = bf16_out ? at::zeros({m, n + 5}, at::kBFloat16) : start.clone();
        bf16_gemm(trans_a, trans_b, m, n, k, reinterpret_cast<const uint16_t*>(a_store.data_ptr()),
                  a_store.size(1), reinterpret_cast<const uint16_t*>(b_store.data_ptr()),
                  b_store.size(1), c.data_ptr(), n + 5,
                  bf16_out ? Bf16GemmOut::BFloat16 : Bf16GemmOut::Float32, accumulate,
                  bias ? reinterpret_cast<const uint16_t*>(bias_v.data_ptr()) : nullptr);
        const at::Tensor a64 = (trans_a ? a.t() : a).to(at::kDouble);
        const at::Tensor b64 = (trans_b ? b.t() : b).to(at::kDouble);
        at::Tensor expected = at::mm(a64, b64);
        if (accumulate) expected += start.narrow(1, 0, n).to(at::kDouble);
        if (bias) expected += bias_v.to(at::kDouble);
        const std::string what =
            fmt::format("trans_a {} trans_b {} variant {}", trans_a, trans_b, variant);
        const at::Tensor got = c.narrow(1, 0, n);
        if (bf16_out)
          EXPECT_TRUE(within_a_bf16_step(got, expected, what));
        else
          EXPECT_TRUE(tensors_close(got, expected, 1e-5, what));
        // The spare columns are not written.
        const at::Tensor spare = c.narrow(1, n, 5).to(at::kFloat);
        EXPECT_TRUE(at::equal(spare, bf16_out ? at::zeros({m, 5}) : start.narrow(1, n, 5))) << what;
      }
  try {
    float c = 0;
    const uint16_t one = 0x3f80;
    bf16_gemm(false, false, 1, 1, 1, &one, 1, &one, 1, &c, 1, Bf16GemmOut::BFloat16, true);
    ADD_FAILURE() << "a bf16 output was accumulated";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("accumulating needs a float32 output"), std::string::npos)
        << e.what();
  }
}

// Extents over 16 384 are split into pieces, each a product of its own: a long reduction (its
// pieces added to C, after C's own contents when accumulating, the bias once), many rows, many
// columns (the bias's pieces with them); against float64, float32 sums within 1e-5 of the largest
// magnitude. A bf16 C keeps its reduction whole (within a bf16 step).
TEST(Bf16Gemm, SplitsLongExtentsIntoPiecesThatAddUp) {
  if (!bf16_gemm_available()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU or build";
  at::manual_seed(18);
  const auto bits = [](const at::Tensor& t) {
    return reinterpret_cast<const uint16_t*>(t.data_ptr());
  };
  struct Case {
    int64_t m, n, k;
    bool accumulate, bias, bf16_out;
  };
  for (const Case cs :
       {Case{5, 7, 20000, false, true, false}, Case{5, 7, 20000, true, false, false},
        Case{5, 7, 20000, false, false, true}, Case{20000, 6, 9, false, true, false},
        Case{4, 20000, 9, true, true, false}}) {
    const at::Tensor a = at::randn({cs.m, cs.k}).to(at::kBFloat16);
    const at::Tensor b = at::randn({cs.n, cs.k}).to(at::kBFloat16);  // read transposed
    const at::Tensor bias = at::randn({cs.n}).to(at::kBFloat16);
    const at::Tensor start = at::randn({cs.m, cs.n});
    at::Tensor c = cs.bf16_out ? at::empty({cs.m, cs.n}, at::kBFloat16) : start.clone();
    bf16_gemm(false, true, cs.m, cs.n, cs.k, bits(a), cs.k, bits(b), cs.k, c.data_ptr(), cs.n,
              cs.bf16_out ? Bf16GemmOut::BFloat16 : Bf16GemmOut::Float32, cs.accumulate,
              cs.bias ? bits(bias) : nullptr);
    at::Tensor expected = at::mm(a.to(at::kDouble), b.to(at::kDouble).t());
    if (cs.accumulate) expected += start.to(at::kDouble);
    if (cs.bias) expected += bias.to(at::kDouble);
    const std::string what = fmt::format("{}x{}x{} accumulate {} bias {} bf16 {}", cs.m, cs.n, cs.k,
                                         cs.accumulate, cs.bias, cs.bf16_out);
    EXPECT_TRUE(cs.bf16_out ? within_a_bf16_step(c, expected, what)
                            : tensors_close(c, expected, 1e-5, what));
  }
}

// The bf16 node on a CPU with bf16 products (linear() under autocast to bf16, the CPU's answer
// forced), against float64 products of the bf16-rounded operands: the output within a bf16 step
// (one rounding of float32 sums); a float32 input's gradient and the weight and bias gradients
// are float32 sums (not rounded to bf16, unlike autocast's), within 1e-5 of the largest magnitude;
// a bf16 input's gradient within a bf16 step. Where oneDNN has no bf16 matmul (an AVX2 CPU) the
// node's products are at::mm's, which there sum in bf16: the test below covers that path.
TEST(Bf16Linear, NodeWithBf16ProductsEqualsFloat64ProductsOfTheBf16Operands) {
  if (!bf16_gemm_available()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU or build";
  const ForcedBf16Products forced(1);
  at::manual_seed(16);
  for (const GemmKernel kernel : {GemmKernel::OneDnn, GemmKernel::Probe})
    for (const bool bias : {true, false})
      for (const at::ScalarType x_dtype : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = at::randn({2, 13, 70}).to(x_dtype), w = at::randn({37, 70}) * 0.1;
        const at::Tensor b = bias ? at::randn({37}) : at::Tensor();
        const at::Tensor g = at::randn({2, 13, 37}).to(at::kBFloat16);
        const Result got = run(x, w, b, g, true,
                               [&](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
                                 const nn::AutocastGuard autocast(bf16_autocast());
                                 return linear(a, c, d, kernel);
                               });
        const at::Tensor xb = bf16_rounded(x), wb = bf16_rounded(w), gb = g.to(at::kDouble);
        const std::string what =
            fmt::format("{} bias {} x {}", to_string(kernel), bias, c10::toString(x_dtype));
        expect_bf16_layer_dtypes(got, x_dtype, what);
        EXPECT_TRUE(within_a_bf16_step(
            got.y, at::linear(xb, wb, bias ? bf16_rounded(b) : at::Tensor()), "output " + what));
        const at::Tensor dx = at::matmul(gb, wb);
        EXPECT_TRUE(x_dtype == at::kFloat
                        ? tensors_close(got.dx, dx, 1e-5, "input gradient " + what)
                        : within_a_bf16_step(got.dx, dx, "input gradient " + what));
        EXPECT_TRUE(tensors_close(got.dw,
                                  at::matmul(gb.reshape({-1, 37}).t(), xb.reshape({-1, 70})), 1e-5,
                                  "weight gradient " + what));
        if (bias)
          EXPECT_TRUE(
              tensors_close(got.db, gb.sum(at::IntArrayRef{0, 1}), 1e-5, "bias gradient " + what));
      }
}

// The same node against LibTorch's bf16 linear under autocast (an implementation independent of
// ours), on every CPU: with oneDNN's matmul, or with at::mm of the bf16 tensors where it has none.
// A short reduction (40), where the two land within a bf16 step of each other; the gradients within
// two (autocast rounds them to bf16, ours are float32 sums).
TEST(Bf16Linear, NodeWithBf16ProductsMatchesLibTorchsLinearUnderAutocast) {
  const ForcedBf16Products forced(1);
  at::manual_seed(17);
  const at::Tensor x = at::randn({3, 5, 40}), w = at::randn({24, 40}) * 0.2, b = at::randn({24});
  const at::Tensor g = at::randn({3, 5, 24}).to(at::kBFloat16);
  const auto under_autocast = [](GemmKernel kernel) {
    return [kernel](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) {
      const nn::AutocastGuard autocast(bf16_autocast());
      return linear(a, c, d, kernel);
    };
  };
  const Result got = run(x, w, b, g, true, under_autocast(GemmKernel::Probe));
  const Result ref = run(x, w, b, g, true, under_autocast(GemmKernel::LibTorch));
  expect_like_libtorchs_autocast_linear(got, ref);
}

}  // namespace
}  // namespace scaffold::kernels
