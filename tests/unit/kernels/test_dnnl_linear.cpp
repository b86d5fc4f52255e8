// dnnl_linear (oneDNN's sgemm for a linear layer's three products) and chosen_linear (each product
// on its own kernel: at::mm, oneDNN's or our sgemm) against LibTorch's at::linear in float64 on the
// same float32 inputs: output, input, weight and bias gradients within 1e-5 of the reference's
// largest magnitude (float32 sums of up to 300 terms, in another order), for 2-D and 3-D inputs,
// with and without a bias, odd extents, an input that needs no gradient. Also what it refuses, the
// probe's bookkeeping and verdicts, and which kernel kernels::linear runs for each choice.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/dnnl_conv.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/kernel_use.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"
#include "unit/kernels/probe_expectations.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::tensors_close;

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

}  // namespace
}  // namespace scaffold::kernels
