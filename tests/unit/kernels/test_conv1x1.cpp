// kernels::conv1x1_as_gemm (a 1x1 stride-1 convolution of a channels-last input as the linear
// layer of its pixels) against LibTorch's conv2d in float64 on the same float32 inputs: output and
// the input and weight gradients within 1e-5 of the reference's largest magnitude (float32 sums of
// up to 96 terms, or of the N H W pixels for the weight gradient, in another order); what it
// refuses; and choose_conv1x1's probe: its key, both timings, the verdict the times give, asked
// once per shape.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "kernels/conv1x1.hpp"
#include "kernels/dnnl_linear.hpp"
#include "kernels/probe_verdicts.hpp"
#include "nn/autocast.hpp"
#include "unit/kernels/conv_grads.hpp"
#include "unit/kernels/probe_expectations.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::kernels {
namespace {

using model::test::conv_grads;
using model::test::ConvGrads;
using model::test::expect_decided_by_times;
using model::test::tensors_close;

at::Tensor channels_last(const at::Tensor& t) {
  return t.contiguous(at::MemoryFormat::ChannelsLast);
}

// Shapes with ragged edges for the GEMM kernels' tiles (odd pixel counts, channels not multiples
// of 16) and ResNet-like ones; incoming gradients channels-last and contiguous.
TEST(Conv1x1AsGemm, EqualsFloat64ConvolutionInOutputAndGradients) {
  at::manual_seed(31);
  struct Shape {
    int64_t n, c, o, h, w;
  };
  for (const Shape s : {Shape{3, 24, 40, 7, 5}, Shape{2, 64, 256, 14, 14}, Shape{1, 96, 17, 3, 9}})
    for (const bool cl_grad : {true, false}) {
      const at::Tensor x = channels_last(at::randn({s.n, s.c, s.h, s.w}));
      const at::Tensor w = at::randn({s.o, s.c, 1, 1}) * 0.2;
      at::Tensor g = at::randn({s.n, s.o, s.h, s.w});
      if (cl_grad) g = channels_last(g);
      const ConvGrads ref =
          conv_grads(x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
                     [](const at::Tensor& a, const at::Tensor& b) { return at::conv2d(a, b); });
      const ConvGrads got = conv_grads(
          x, w, g, [](const at::Tensor& a, const at::Tensor& b) { return conv1x1_as_gemm(a, b); });
      const std::string what = fmt::format("{}x{}x{}x{} to {} channels, {} gradient", s.n, s.c, s.h,
                                           s.w, s.o, cl_grad ? "nhwc" : "nchw");
      EXPECT_TRUE(got.y.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
      EXPECT_TRUE(tensors_close(got.y, ref.y, 1e-5, "output " + what));
      EXPECT_TRUE(tensors_close(got.dx, ref.dx, 1e-5, "input gradient " + what));
      EXPECT_TRUE(tensors_close(got.dw, ref.dw, 1e-5, "weight gradient " + what));
    }
}

TEST(Conv1x1AsGemm, RefusesWhatItCannotTakeAndSaysWhy) {
  const at::Tensor x = channels_last(at::randn({2, 16, 5, 5})), w = at::randn({8, 16, 1, 1});
  EXPECT_EQ(conv1x1_gemm_unsupported(x, w), "");
  EXPECT_EQ(conv1x1_gemm_unsupported(x.contiguous(), w), "the input is not channels-last");
  EXPECT_EQ(conv1x1_gemm_unsupported(x.to(at::kBFloat16), w), "not float32");
  EXPECT_EQ(conv1x1_gemm_unsupported(x, at::randn({8, 16, 3, 3})),
            "not a 1x1 convolution of a 4-D input");
  EXPECT_EQ(conv1x1_gemm_unsupported(x, at::randn({8, 12, 1, 1})),
            "not a 1x1 convolution of a 4-D input");
  {
    nn::AutocastState state = nn::AutocastState::current();
    state.cpu_enabled = true;
    const nn::AutocastGuard autocast(state);
    EXPECT_EQ(conv1x1_gemm_unsupported(x, w), "under CPU autocast");
  }
  try {
    conv1x1_as_gemm(x.contiguous(), w);
    ADD_FAILURE() << "an NCHW input was taken";
  } catch (const core::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2x16x5x5"), std::string::npos) << what;
    EXPECT_NE(what.find("not channels-last"), std::string::npos) << what;
  }
}

// Validation runs in inference mode: the products take inference tensors, and a shape first met
// there is probed on a copy (an inference tensor cannot take part in the probe's autograd).
TEST(Conv1x1AsGemm, RunsAndIsProbedInInferenceMode) {
  at::manual_seed(32);
  const c10::InferenceMode inference;
  const at::Tensor x = channels_last(at::randn({3, 32, 6, 6})), w = at::randn({48, 32, 1, 1});
  EXPECT_TRUE(tensors_close(conv1x1_as_gemm(x, w), at::conv2d(x, w), 1e-5, "output"));
  const std::string chosen = choose_conv1x1(x, w);
  EXPECT_TRUE(chosen == "gemm" || chosen == "libtorch") << chosen;
  EXPECT_EQ(probe_verdicts().measurements().back().key, "conv1x1 x 3x32x6x6 w 48x32x1x1");
}

// One measurement per shape, decided by its times with the GEMM margin; asked again (other values,
// autograd inputs): remembered. An input it does not take is LibTorch's without a measurement.
TEST(Conv1x1Probe, TimesBothOncePerShapeAndChoosesByTheTimes) {
  const auto measured = [] { return probe_verdicts().measurements(); };
  const at::Tensor x = channels_last(at::randn({2, 48, 9, 9})), w = at::randn({80, 48, 1, 1});
  const std::size_t before = measured().size();
  const std::string chosen = choose_conv1x1(x, w);
  const auto probes = measured();
  ASSERT_GE(probes.size(), before + 1);  // (and the GEMM probe of the shape, if not asked before)
  const ProbeMeasurement& p = probes.back();
  EXPECT_EQ(p.key, "conv1x1 x 2x48x9x9 w 80x48x1x1");
  expect_decided_by_times(p, "gemm", "libtorch", kGemmMargin);
  EXPECT_EQ(chosen, p.result.verdict);
  EXPECT_EQ(choose_conv1x1(channels_last(at::randn({2, 48, 9, 9})).requires_grad_(true), w),
            chosen);
  EXPECT_EQ(measured().size(), probes.size());
  EXPECT_EQ(choose_conv1x1(x.contiguous(), w), "libtorch");
  EXPECT_EQ(measured().size(), probes.size());
}

}  // namespace
}  // namespace scaffold::kernels
