// checkpoint() against running the same block plainly: output, gradients of tensor inputs and of
// parameters (also when no tensor input requires grad), autograd::grad not touching .grad, the
// autocast state replayed in the recompute, and AutocastGuard restoring the previous state.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/modules/conv.h>
#include <torch/utils.h>

#include <vector>

#include "nn/autocast.hpp"
#include "nn/checkpoint.hpp"
#include "unit/tensor_compare.hpp"

namespace scaffold::model {
namespace {

using test::tensors_close;

constexpr double kRelTol = 1e-6;

// y = relu(conv(x)) * s: two tensor inputs and two parameters.
struct TwoInputBlock {
  TwoInputBlock() {
    torch::manual_seed(3);
    conv = torch::nn::Conv3d(torch::nn::Conv3dOptions(2, 3, 3).padding(1));
  }
  nn::CheckpointBlock fn() const {
    return [c = conv.ptr()](at::TensorList in) { return c->forward(in[0]).relu() * in[1]; };
  }
  torch::nn::Conv3d conv{nullptr};
};

struct Grads {
  at::Tensor out, x, s, weight, bias;
};

Grads run(TwoInputBlock& block, bool use_checkpoint, bool x_requires_grad) {
  torch::manual_seed(11);
  const at::Tensor x = at::randn({2, 2, 4, 4, 4}).requires_grad_(x_requires_grad);
  const at::Tensor s = at::randn({2, 3, 4, 4, 4}).requires_grad_(true);
  const at::Tensor g = at::randn({2, 3, 4, 4, 4});
  block.conv->zero_grad();
  const at::Tensor out = use_checkpoint
                             ? nn::checkpoint(block.fn(), {x, s}, block.conv->parameters())
                             : block.fn()({x, s});
  torch::autograd::backward({(out * g).sum()});
  return {out.detach(), x.grad(), s.grad(), block.conv->weight.grad().clone(),
          block.conv->bias.grad().clone()};
}

TEST(Checkpoint, TwoInputBlockMatchesPlainOutputAndGradients) {
  TwoInputBlock block;
  const Grads plain = run(block, false, true);
  const Grads ckpt = run(block, true, true);
  EXPECT_TRUE(tensors_close(ckpt.out, plain.out, kRelTol, "output"));
  EXPECT_TRUE(tensors_close(ckpt.x, plain.x, kRelTol, "grad x"));
  EXPECT_TRUE(tensors_close(ckpt.s, plain.s, kRelTol, "grad s"));
  EXPECT_TRUE(tensors_close(ckpt.weight, plain.weight, kRelTol, "grad conv.weight"));
  EXPECT_TRUE(tensors_close(ckpt.bias, plain.bias, kRelTol, "grad conv.bias"));
}

// The first U-Net block sees the image, which does not require grad: its parameters must still
// get gradients (PyTorch's reentrant checkpoint would silently give none).
TEST(Checkpoint, ParametersGetGradientsWhenInputDoesNotRequireGrad) {
  TwoInputBlock block;
  const Grads plain = run(block, false, false);
  const Grads ckpt = run(block, true, false);
  EXPECT_FALSE(ckpt.x.defined());
  EXPECT_TRUE(tensors_close(ckpt.weight, plain.weight, kRelTol, "grad conv.weight"));
  EXPECT_TRUE(tensors_close(ckpt.bias, plain.bias, kRelTol, "grad conv.bias"));
}

TEST(Checkpoint, AutogradGradComputesInputGradientWithoutTouchingParameterGrads) {
  TwoInputBlock block;
  const Grads plain = run(block, false, true);
  block.conv->zero_grad();
  torch::manual_seed(11);
  const at::Tensor x = at::randn({2, 2, 4, 4, 4}).requires_grad_(true);
  const at::Tensor s = at::randn({2, 3, 4, 4, 4}).requires_grad_(true);
  const at::Tensor g = at::randn({2, 3, 4, 4, 4});
  const at::Tensor out = nn::checkpoint(block.fn(), {x, s}, block.conv->parameters());
  const auto grads = torch::autograd::grad({(out * g).sum()}, {x});
  EXPECT_TRUE(tensors_close(grads.at(0), plain.x, kRelTol, "grad x"));
  const at::Tensor weight_grad = block.conv->weight.grad();
  EXPECT_TRUE(!weight_grad.defined() || weight_grad.abs().max().item<double>() == 0.0)
      << "autograd::grad w.r.t. x accumulated into conv.weight.grad";
}

TEST(Checkpoint, GradModeOffRunsTheBlockOnceWithoutGraph) {
  int calls = 0;
  const at::Tensor w = at::ones({3}).requires_grad_(true);
  const nn::CheckpointBlock block = [&](at::TensorList in) {
    ++calls;
    return in[0] * w;
  };
  torch::autograd::AutoGradMode no_grad(false);
  const at::Tensor out = nn::checkpoint(block, {at::ones({3})}, {w});
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(out.requires_grad());
}

TEST(Checkpoint, RecomputeRunsUnderTheForwardsAutocastState) {
  std::vector<nn::AutocastState> seen;
  const nn::CheckpointBlock block = [&](at::TensorList in) {
    seen.push_back(nn::AutocastState::current());
    return in[0] * 3.0;
  };
  const at::Tensor x = at::ones({4}).requires_grad_(true);
  at::Tensor out;
  {
    nn::AutocastState on = nn::AutocastState::current();
    on.cpu_enabled = true;
    on.cpu_dtype = at::kBFloat16;
    nn::AutocastGuard autocast(on);
    out = nn::checkpoint(block, {x}, {});
  }
  ASSERT_FALSE(nn::AutocastState::current().cpu_enabled) << "AutocastGuard did not restore";
  torch::autograd::backward({out.sum()});
  ASSERT_EQ(seen.size(), 2u) << "forward + one recompute expected";
  for (const nn::AutocastState& s : seen) {
    EXPECT_TRUE(s.cpu_enabled);
    EXPECT_EQ(s.cpu_dtype, at::kBFloat16);
    EXPECT_FALSE(s.cuda_enabled);
    EXPECT_FALSE(s.cache_enabled) << "the weight-cast cache must be off inside the block";
  }
  EXPECT_FALSE(nn::AutocastState::current().cpu_enabled) << "recompute leaked its autocast state";
  EXPECT_TRUE(nn::AutocastState::current().cache_enabled);
  EXPECT_TRUE(tensors_close(x.grad(), at::full({4}, 3.0), 0.0, "grad x"));
}

TEST(AutocastGuard, RestoresThePreviousStateWhenNested) {
  const nn::AutocastState before = nn::AutocastState::current();
  {
    nn::AutocastState on = before;
    on.cpu_enabled = true;
    on.cpu_dtype = at::kBFloat16;
    nn::AutocastGuard outer(on);
    EXPECT_TRUE(nn::AutocastState::current().cpu_enabled);
    {
      nn::AutocastGuard inner(nn::AutocastState::current().disabled());
      EXPECT_FALSE(nn::AutocastState::current().cpu_enabled);
      EXPECT_EQ(nn::AutocastState::current().cpu_dtype, at::kBFloat16);
    }
    EXPECT_TRUE(nn::AutocastState::current().cpu_enabled);
  }
  const nn::AutocastState after = nn::AutocastState::current();
  EXPECT_EQ(after.cpu_enabled, before.cpu_enabled);
  EXPECT_EQ(after.cpu_dtype, before.cpu_dtype);
  EXPECT_EQ(after.cuda_enabled, before.cuda_enabled);
  EXPECT_EQ(after.cache_enabled, before.cache_enabled);
}

}  // namespace
}  // namespace scaffold::model
