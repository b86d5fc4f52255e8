// The oneDNN convolution against LibTorch's at::conv3d / at::conv2d computed in float64
// (LibTorch's own kernels, not oneDNN: its float64 path is slow_conv), outputs and both gradients
// relative to the reference's largest magnitude:
// - 3-D direct, float32 within 1e-5, for batch 1 and 2, odd sizes, 1x1x1 and 3x3x3 kernels,
//   contiguous and channels-last inputs; bf16 against the float64 result of the same bf16-rounded
//   inputs;
// - 2-D direct (strides 1 and 2, 1x1, 3x3 and 7x7 kernels) within 1e-5, and oneDNN's Winograd
//   F(4x4, 3x3) within 1e-4 (its transforms round more: measured ~1e-5 here), contiguous and
//   channels-last;
// - the probe: one measurement per shape, remembered, with a verdict that follows its times
//   (Winograd when at least 10 % faster).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/dnnl_conv.hpp"
#include "unit/kernels/conv_grads.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::model {
namespace {

using test::conv_grads;
using test::ConvGrads;

class DnnlConv : public ::testing::TestWithParam<
                     std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>> {};

TEST_P(DnnlConv, EqualsLibTorchInOutputAndGradients) {
  if (!kernels::dnnl_conv3d_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  const auto [n, c, o, s, k, cl] = GetParam();
  at::manual_seed(11);
  const int64_t pad = k / 2;
  at::Tensor x = at::randn({n, c, s, s + 1, s + 2});
  if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
  const at::Tensor w = at::randn({o, c, k, k, k}) * 0.2;
  const at::Tensor g = at::randn({n, o, s, s + 1, s + 2});
  ASSERT_TRUE(kernels::dnnl_conv3d_supported(x, w));
  const ConvGrads got = conv_grads(x, w, g, [pad](const at::Tensor& a, const at::Tensor& b) {
    return kernels::dnnl_conv3d(a, b, pad);
  });
  const ConvGrads ref = conv_grads(x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
                                   [pad](const at::Tensor& a, const at::Tensor& b) {
                                     return at::conv3d(a, b, {}, /*stride=*/1, /*padding=*/pad);
                                   });
  EXPECT_TRUE(test::tensors_close(got.y, ref.y, 1e-5, "output"));
  EXPECT_TRUE(test::tensors_close(got.dx, ref.dx, 1e-5, "input gradient"));
  EXPECT_TRUE(test::tensors_close(got.dw, ref.dw, 1e-5, "weight gradient"));
  EXPECT_EQ(got.y.is_contiguous(at::MemoryFormat::ChannelsLast3d) && !got.y.is_contiguous(), cl)
      << "the output keeps the input's memory format";
  EXPECT_EQ(got.y.scalar_type(), at::kFloat);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DnnlConv,
    ::testing::Values(std::make_tuple(1, 16, 16, 8, 3, false),  // batch 1: LibTorch's slow path
                      std::make_tuple(2, 8, 16, 7, 3, false),   // batch 2, odd sizes
                      std::make_tuple(1, 3, 8, 9, 3, false),    // the U-Net's first layer
                      std::make_tuple(1, 16, 6, 5, 1, false),   // 1x1x1 (the output conv)
                      std::make_tuple(1, 16, 16, 8, 3, true),   // channels-last input
                      std::make_tuple(2, 8, 8, 6, 3, true)));

TEST(DnnlConvBf16, EqualsTheFloat64ResultOfTheRoundedInputs) {
  if (!kernels::dnnl_conv3d_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  if (!kernels::dnnl_bf16_conv_available())
    GTEST_SKIP() << "this CPU's oneDNN has no bf16 convolution (it needs AVX-512)";
  at::manual_seed(12);
  const at::Tensor x = at::randn({1, 16, 8, 8, 8}).to(at::kBFloat16);
  const at::Tensor w = (at::randn({16, 16, 3, 3, 3}) * 0.2).to(at::kBFloat16);
  const at::Tensor g = at::randn({1, 16, 8, 8, 8}).to(at::kBFloat16);
  const ConvGrads got = conv_grads(x, w, g, [](const at::Tensor& a, const at::Tensor& b) {
    return kernels::dnnl_conv3d(a, b, 1);
  });
  const ConvGrads ref = conv_grads(
      x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
      [](const at::Tensor& a, const at::Tensor& b) { return at::conv3d(a, b, {}, 1, 1); });
  EXPECT_EQ(got.y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(got.dw.scalar_type(), at::kBFloat16);
  // Accumulation is in float32; the bf16 results are rounded once (8 bits: 2^-8 relative).
  EXPECT_TRUE(test::tensors_close(got.y, ref.y, 1e-2, "bf16 output"));
  EXPECT_TRUE(test::tensors_close(got.dx, ref.dx, 1e-2, "bf16 input gradient"));
  EXPECT_TRUE(test::tensors_close(got.dw, ref.dw, 1e-2, "bf16 weight gradient"));
}

TEST(DnnlConvSupport, RefusesWhatItCannotTake) {
  const at::Tensor x = at::randn({1, 4, 4, 4, 4}), w = at::randn({4, 4, 3, 3, 3});
  EXPECT_FALSE(kernels::dnnl_conv3d_supported(x.to(at::kDouble), w.to(at::kDouble)));  // float64
  EXPECT_FALSE(kernels::dnnl_conv3d_supported(x, w.to(at::kBFloat16)));         // mixed dtypes
  EXPECT_FALSE(kernels::dnnl_conv3d_supported(x, at::randn({4, 4, 2, 2, 2})));  // even kernel
  EXPECT_FALSE(kernels::dnnl_conv3d_supported(x, at::randn({4, 3, 3, 3, 3})));  // channel mismatch
  EXPECT_THROW(kernels::dnnl_conv3d(x.to(at::kDouble), w.to(at::kDouble), 1), core::Error);
  // bf16 where oneDNN 2.6 has bf16 convolutions: CPUs with AVX-512 (F, BW, VL, DQ), by CPUID.
  const bool avx512_core = __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(kernels::dnnl_bf16_conv_available(), kernels::dnnl_conv3d_built() && avx512_core);
  EXPECT_EQ(kernels::dnnl_conv3d_supported(x.to(at::kBFloat16), w.to(at::kBFloat16)),
            kernels::dnnl_bf16_conv_available());
}

// --- 2-D --------------------------------------------------------------------------------------

// (batch, in channels, out channels, height, width, kernel, stride, channels-last, Winograd)
using Conv2dCase =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;
class DnnlConv2d : public ::testing::TestWithParam<Conv2dCase> {};

TEST_P(DnnlConv2d, EqualsLibTorchInOutputAndGradients) {
  if (!kernels::dnnl_conv3d_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  const auto [n, c, o, h, wd, k, stride, cl, winograd] = GetParam();
  at::manual_seed(13);
  const int64_t pad = k / 2;
  at::Tensor x = at::randn({n, c, h, wd});
  if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = at::randn({o, c, k, k}) * 0.2;
  const int64_t ho = (h + 2 * pad - k) / stride + 1, wo = (wd + 2 * pad - k) / stride + 1;
  const at::Tensor g = at::randn({n, o, ho, wo});
  const std::array<int64_t, 1> s{stride}, p{pad};
  const kernels::DnnlAlgorithm alg =
      winograd ? kernels::DnnlAlgorithm::Winograd : kernels::DnnlAlgorithm::Direct;
  if (winograd && !dnnl_conv2d_supported(x, w, s, p, alg))
    GTEST_SKIP() << "oneDNN has no Winograd on this CPU (it needs AVX-512)";
  ASSERT_TRUE(dnnl_conv2d_supported(x, w, s, p, alg));
  const ConvGrads got = conv_grads(x, w, g, [&](const at::Tensor& a, const at::Tensor& b) {
    return dnnl_conv2d(a, b, s, p, alg);
  });
  const ConvGrads ref = conv_grads(x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
                                   [&, st = stride](const at::Tensor& a, const at::Tensor& b) {
                                     return at::conv2d(a, b, {}, st, pad);
                                   });
  const double tol = winograd ? 1e-4 : 1e-5;
  EXPECT_TRUE(test::tensors_close(got.y, ref.y, tol, "output"));
  EXPECT_TRUE(test::tensors_close(got.dx, ref.dx, tol, "input gradient"));
  EXPECT_TRUE(test::tensors_close(got.dw, ref.dw, tol, "weight gradient"));
  EXPECT_EQ(got.y.is_contiguous(at::MemoryFormat::ChannelsLast) && !got.y.is_contiguous(), cl)
      << "the output keeps the input's memory format";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DnnlConv2d,
    ::testing::Values(
        // Winograd: ResNet's 3x3 stride-1 layers at odd sizes (partial 4x4 tiles), both layouts.
        std::make_tuple(2, 32, 32, 13, 11, 3, 1, false, true),
        std::make_tuple(2, 32, 48, 9, 9, 3, 1, true, true),
        std::make_tuple(1, 64, 64, 7, 7, 3, 1, false, true),
        // Direct: the stem (7x7 s2 over 3 channels), a strided 3x3, a strided 1x1 shortcut.
        std::make_tuple(2, 3, 16, 20, 18, 7, 2, false, false),
        std::make_tuple(2, 16, 32, 15, 15, 3, 2, true, false),
        std::make_tuple(2, 32, 64, 10, 10, 1, 2, false, false)));

TEST(DnnlConv2dSupport, RefusesWhatItCannotTake) {
  const at::Tensor x = at::randn({2, 32, 8, 8}), w = at::randn({32, 32, 3, 3});
  const std::array<int64_t, 1> one{1}, two{2};
  for (kernels::DnnlAlgorithm alg :
       {kernels::DnnlAlgorithm::Direct, kernels::DnnlAlgorithm::Winograd}) {
    EXPECT_FALSE(dnnl_conv2d_supported(x.to(at::kDouble), w.to(at::kDouble), one, one, alg));
    EXPECT_FALSE(dnnl_conv2d_supported(x, at::randn({32, 16, 3, 3}), one, one, alg));    // groups
    EXPECT_FALSE(dnnl_conv2d_supported(x.unsqueeze(2), w.unsqueeze(2), one, one, alg));  // 3-D
    EXPECT_FALSE(dnnl_conv2d_supported(x, w, std::array<int64_t, 3>{1, 1, 1}, one, alg));
  }
  // oneDNN's Winograd is 3x3 stride 1 float32 only.
  EXPECT_FALSE(dnnl_conv2d_supported(x, w, two, one, kernels::DnnlAlgorithm::Winograd));
  EXPECT_FALSE(dnnl_conv2d_supported(x, at::randn({32, 32, 5, 5}), one, two,
                                     kernels::DnnlAlgorithm::Winograd));
  EXPECT_FALSE(dnnl_conv2d_supported(x.to(at::kBFloat16), w.to(at::kBFloat16), one, one,
                                     kernels::DnnlAlgorithm::Winograd));
  EXPECT_THROW(dnnl_conv2d(x, w, two, one, kernels::DnnlAlgorithm::Winograd), core::Error);
}

}  // namespace
}  // namespace scaffold::model
