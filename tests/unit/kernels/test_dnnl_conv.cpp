// The oneDNN convolution against LibTorch's at::conv3d computed in float64 (LibTorch's own
// kernels, not oneDNN: its float64 path is slow_conv3d): outputs and both gradients within
// 1e-5 of the reference's largest magnitude in float32, for batch 1 and 2, odd sizes, 1x1x1
// and 3x3x3 kernels, contiguous and channels-last inputs; bf16 against the float64 result of
// the same bf16-rounded inputs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "kernels/dnnl_conv.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::model {
namespace {

struct Grads {
  at::Tensor y, dx, dw;
};

// y = conv(x, w) and the gradients of sum(y * g) by autograd.
template <typename Conv>
Grads run(const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& g, Conv conv) {
  const at::Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true);
  const at::Tensor y = conv(x, w);
  const auto grads = torch::autograd::grad({y}, {x, w}, {g.to(y.scalar_type())});
  return {y, grads[0], grads[1]};
}

class DnnlConv : public ::testing::TestWithParam<
                     std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>> {};

TEST_P(DnnlConv, EqualsLibTorchInOutputAndGradients) {
  if (!dnnl_conv3d_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  const auto [n, c, o, s, k, cl] = GetParam();
  at::manual_seed(11);
  const int64_t pad = k / 2;
  at::Tensor x = at::randn({n, c, s, s + 1, s + 2});
  if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
  const at::Tensor w = at::randn({o, c, k, k, k}) * 0.2;
  const at::Tensor g = at::randn({n, o, s, s + 1, s + 2});
  ASSERT_TRUE(dnnl_conv3d_supported(x, w));
  const Grads got = run(
      x, w, g, [pad](const at::Tensor& a, const at::Tensor& b) { return dnnl_conv3d(a, b, pad); });
  const Grads ref = run(x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
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
  if (!dnnl_conv3d_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  at::manual_seed(12);
  const at::Tensor x = at::randn({1, 16, 8, 8, 8}).to(at::kBFloat16);
  const at::Tensor w = (at::randn({16, 16, 3, 3, 3}) * 0.2).to(at::kBFloat16);
  const at::Tensor g = at::randn({1, 16, 8, 8, 8}).to(at::kBFloat16);
  const Grads got =
      run(x, w, g, [](const at::Tensor& a, const at::Tensor& b) { return dnnl_conv3d(a, b, 1); });
  const Grads ref =
      run(x.to(at::kDouble), w.to(at::kDouble), g.to(at::kDouble),
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
  EXPECT_FALSE(dnnl_conv3d_supported(x.to(at::kDouble), w.to(at::kDouble)));  // float64
  EXPECT_FALSE(dnnl_conv3d_supported(x, w.to(at::kBFloat16)));                // mixed dtypes
  EXPECT_FALSE(dnnl_conv3d_supported(x, at::randn({4, 4, 2, 2, 2})));         // even kernel
  EXPECT_FALSE(dnnl_conv3d_supported(x, at::randn({4, 3, 3, 3, 3})));         // channel mismatch
  EXPECT_THROW(dnnl_conv3d(x.to(at::kDouble), w.to(at::kDouble), 1), core::Error);
}

}  // namespace
}  // namespace scaffold::model
