// The k2 s2 transposed convolution and the 1x1x1 convolution as matrix products against
// LibTorch's at::conv_transpose3d and at::conv3d in float64 (slow_conv_transpose3d and
// slow_conv3d, independent implementations): output and the gradients of input, weight and bias
// within 1e-5 of the reference's largest magnitude in float32.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <tuple>

#include "core/error.hpp"
#include "kernels/conv_transpose.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::model {
namespace {

using Layer = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&);

// `ours` in float32 against `reference` in float64: output and the gradients of x, w and (with a
// bias) b for the output gradient g.
void expect_matches(Layer ours, Layer reference, const at::Tensor& x0, const at::Tensor& w0,
                    const at::Tensor& b0, const at::Tensor& g, bool with_bias) {
  auto run = [&](at::ScalarType t, Layer layer) {
    const at::Tensor x = x0.to(t).detach().requires_grad_(true),
                     w = w0.to(t).detach().requires_grad_(true),
                     b = b0.to(t).detach().requires_grad_(true);
    const at::Tensor y = layer(x, w, with_bias ? b : at::Tensor());
    const auto grads = torch::autograd::grad(
        {y}, with_bias ? std::vector<at::Tensor>{x, w, b} : std::vector<at::Tensor>{x, w},
        {g.to(t)});
    return std::make_pair(y, grads);
  };
  const auto [y, grads] = run(at::kFloat, ours);
  const auto [ry, rgrads] = run(at::kDouble, reference);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_EQ(y.is_contiguous(at::MemoryFormat::ChannelsLast3d),
            x0.is_contiguous(at::MemoryFormat::ChannelsLast3d) && !x0.is_contiguous());
  EXPECT_TRUE(test::tensors_close(y, ry, 1e-5, "output"));
  EXPECT_TRUE(test::tensors_close(grads[0], rgrads[0], 1e-5, "input gradient"));
  EXPECT_TRUE(test::tensors_close(grads[1], rgrads[1], 1e-5, "weight gradient"));
  if (with_bias) {
    EXPECT_TRUE(test::tensors_close(grads[2], rgrads[2], 1e-5, "bias gradient"));
  }
}

// (batch, C_in, C_out, bias, channels-last)
using Case = std::tuple<int64_t, int64_t, int64_t, bool, bool>;

at::Tensor input_of(const Case& c) {
  const auto [n, c_in, c_out, with_bias, channels_last] = c;
  at::manual_seed(21);
  const at::Tensor x = at::randn({n, c_in, 3, 4, 5});
  return channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast3d) : x;
}

class ConvTransposeK2S2 : public ::testing::TestWithParam<Case> {};

TEST_P(ConvTransposeK2S2, EqualsLibTorchInOutputAndGradients) {
  const auto [n, c_in, c_out, with_bias, channels_last] = GetParam();
  const at::Tensor x0 = input_of(GetParam());
  const at::Tensor w0 = at::randn({c_in, c_out, 2, 2, 2}), b0 = at::randn({c_out});
  expect_matches(
      kernels::conv_transpose3d_k2s2,
      [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        return at::conv_transpose3d(x, w, b, /*stride=*/2);
      },
      x0, w0, b0, at::randn({n, c_out, 6, 8, 10}), with_bias);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTransposeK2S2,
                         ::testing::Values(std::make_tuple(1, 8, 4, true, false),
                                           std::make_tuple(2, 6, 3, true, false),
                                           std::make_tuple(1, 4, 4, false, false),
                                           std::make_tuple(2, 8, 4, true, true)));

// The 1x1x1 convolution (the U-Net's head) against at::conv3d in float64.
class Conv1x1x1 : public ::testing::TestWithParam<Case> {};

TEST_P(Conv1x1x1, EqualsLibTorchInOutputAndGradients) {
  const auto [n, c_in, c_out, with_bias, channels_last] = GetParam();
  const at::Tensor x0 = input_of(GetParam());
  const at::Tensor w0 = at::randn({c_out, c_in, 1, 1, 1}), b0 = at::randn({c_out});
  expect_matches(
      kernels::conv3d_1x1x1,
      [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        return at::conv3d(x, w, b);
      },
      x0, w0, b0, at::randn({n, c_out, 3, 4, 5}), with_bias);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv1x1x1,
                         ::testing::Values(std::make_tuple(1, 16, 6, true, false),
                                           std::make_tuple(3, 8, 2, true, false),
                                           std::make_tuple(2, 5, 3, false, false),
                                           std::make_tuple(1, 16, 6, true, true),
                                           std::make_tuple(3, 8, 2, false, true)));

TEST(Conv1x1x1Shape, OtherKernelsAndBiasesAreAnError) {
  const at::Tensor x = at::randn({1, 4, 3, 3, 3});
  EXPECT_THROW(kernels::conv3d_1x1x1(x, at::randn({2, 4, 3, 3, 3}), at::Tensor()), core::Error);
  EXPECT_THROW(kernels::conv3d_1x1x1(x, at::randn({2, 5, 1, 1, 1}), at::Tensor()), core::Error);
  EXPECT_THROW(kernels::conv3d_1x1x1(x, at::randn({2, 4, 1, 1, 1}), at::randn({3})), core::Error);
  EXPECT_THROW(kernels::conv3d_1x1x1(x, at::randn({2, 4, 1, 1, 1}).to(at::kDouble), at::Tensor()),
               core::Error);
}

TEST(ConvTransposeK2S2Shape, OtherKernelsAreAnError) {
  EXPECT_THROW(kernels::conv_transpose3d_k2s2(at::randn({1, 4, 3, 3, 3}),
                                              at::randn({4, 2, 3, 3, 3}), at::Tensor()),
               core::Error);
  EXPECT_THROW(kernels::conv_transpose3d_k2s2(at::randn({1, 4, 3, 3, 3}),
                                              at::randn({5, 2, 2, 2, 2}), at::Tensor()),
               core::Error);
}

}  // namespace
}  // namespace scaffold::model
