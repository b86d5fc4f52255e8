// The k2 s2 transposed convolution as a matrix product against LibTorch's at::conv_transpose3d
// in float64 (slow_conv_transpose3d, an independent implementation): output and the gradients
// of input, weight and bias within 1e-5 of the reference's largest magnitude in float32.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <tuple>

#include "core/error.hpp"
#include "model/conv_transpose.hpp"
#include "tensor_compare.hpp"

namespace scaffold::model {
namespace {

class ConvTransposeK2S2
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, bool, bool>> {};

TEST_P(ConvTransposeK2S2, EqualsLibTorchInOutputAndGradients) {
  const auto [n, c_in, c_out, with_bias, channels_last] = GetParam();
  at::manual_seed(21);
  at::Tensor x0 = at::randn({n, c_in, 3, 4, 5});
  if (channels_last) x0 = x0.contiguous(at::MemoryFormat::ChannelsLast3d);
  const at::Tensor w0 = at::randn({c_in, c_out, 2, 2, 2}), b0 = at::randn({c_out});
  const at::Tensor g = at::randn({n, c_out, 6, 8, 10});
  auto run = [&](at::ScalarType t, bool reference) {
    const at::Tensor x = x0.to(t).detach().requires_grad_(true),
                     w = w0.to(t).detach().requires_grad_(true),
                     b = b0.to(t).detach().requires_grad_(true);
    const at::Tensor bias = with_bias ? b : at::Tensor();
    const at::Tensor y = reference ? at::conv_transpose3d(x, w, bias, /*stride=*/2)
                                   : conv_transpose3d_k2s2(x, w, bias);
    const auto grads = torch::autograd::grad(
        {y}, with_bias ? std::vector<at::Tensor>{x, w, b} : std::vector<at::Tensor>{x, w},
        {g.to(t)});
    return std::make_pair(y, grads);
  };
  const auto [y, grads] = run(at::kFloat, false);
  const auto [ry, rgrads] = run(at::kDouble, true);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_TRUE(test::tensors_close(y, ry, 1e-5, "output"));
  EXPECT_TRUE(test::tensors_close(grads[0], rgrads[0], 1e-5, "input gradient"));
  EXPECT_TRUE(test::tensors_close(grads[1], rgrads[1], 1e-5, "weight gradient"));
  if (with_bias) {
    EXPECT_TRUE(test::tensors_close(grads[2], rgrads[2], 1e-5, "bias gradient"));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTransposeK2S2,
                         ::testing::Values(std::make_tuple(1, 8, 4, true, false),
                                           std::make_tuple(2, 6, 3, true, false),
                                           std::make_tuple(1, 4, 4, false, false),
                                           std::make_tuple(2, 8, 4, true, true)));

TEST(ConvTransposeK2S2Shape, OtherKernelsAreAnError) {
  EXPECT_THROW(
      conv_transpose3d_k2s2(at::randn({1, 4, 3, 3, 3}), at::randn({4, 2, 3, 3, 3}), at::Tensor()),
      core::Error);
  EXPECT_THROW(
      conv_transpose3d_k2s2(at::randn({1, 4, 3, 3, 3}), at::randn({5, 2, 2, 2, 2}), at::Tensor()),
      core::Error);
}

}  // namespace
}  // namespace scaffold::model
