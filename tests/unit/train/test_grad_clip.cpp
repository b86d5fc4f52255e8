// train::clip_grad_norm against LibTorch's torch::nn::utils::clip_grad_norm_ (norm type 2): the
// clipped gradients and the returned norm bit for bit (tolerance 0), with and without clipping
// taking effect, parameters without gradients skipped, and the norm left on the device as a ()
// tensor rather than returned to the host. With a fused optimizer taking the factor
// (train::scale_gradients), the step that follows is bit for bit the step after clipping the
// gradients themselves, fused or in LibTorch's fallback, and the factor lasts one step.
// clear_gradients: a step after it is bit for bit a step after zero_grad.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>  // torch::Tensor, which clip_grad.h uses without including
#include <torch/nn/utils/clip_grad.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/fused_adam.hpp"
#include "train/grad_clip.hpp"
#include "unit/train/tensor_identical.hpp"

namespace scaffold::train {
namespace {

std::vector<at::Tensor> parameters_with_grads(uint64_t seed, double grad_scale) {
  at::manual_seed(seed);
  std::vector<at::Tensor> ps;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{8, 3, 3, 3, 3}, {8}, {5, 8}, {1}}) {
    at::Tensor p = at::randn(shape).requires_grad_();
    p.mutable_grad() = at::randn(shape) * grad_scale;
    ps.push_back(p);
  }
  ps.push_back(at::randn({4}).requires_grad_());  // no gradient: skipped by both
  return ps;
}

std::vector<at::Tensor> clone_with_grads(const std::vector<at::Tensor>& ps) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : ps) {
    at::Tensor c = p.detach().clone().requires_grad_();
    if (p.grad().defined()) c.mutable_grad() = p.grad().clone();
    out.push_back(c);
  }
  return out;
}

TEST(ClipGradNorm, EqualsLibTorchsBitForBitAndKeepsTheNormAsATensor) {
  for (double scale : {10.0, 1e-3}) {  // clipped, and left alone (coefficient clamped to 1)
    for (double max_norm : {1.0, 0.25}) {
      const auto ours = parameters_with_grads(3, scale);
      const auto theirs = clone_with_grads(ours);
      const at::Tensor norm = clip_grad_norm(ours, max_norm);
      const double expected_norm = torch::nn::utils::clip_grad_norm_(theirs, max_norm);
      ASSERT_TRUE(norm.defined());
      EXPECT_EQ(norm.dim(), 0);
      EXPECT_EQ(norm.device(), ours[0].device());
      EXPECT_EQ(norm.item<double>(), expected_norm)
          << "scale " << scale << ", max_norm " << max_norm;
      for (std::size_t i = 0; i < ours.size(); ++i) {
        ASSERT_EQ(ours[i].grad().defined(), theirs[i].grad().defined());
        if (ours[i].grad().defined()) {
          EXPECT_TRUE(
              test::identical(ours[i].grad(), theirs[i].grad(), "gradient " + std::to_string(i)));
        }
      }
    }
  }
}

TEST(ClipGradNorm, NoGradientsGivesAnUndefinedNorm) {
  std::vector<at::Tensor> ps{at::randn({3}).requires_grad_()};
  EXPECT_FALSE(clip_grad_norm(ps, 1.0).defined());
}

// Parameters with gradients, all float32 (a fused step takes every one of them).
std::vector<at::Tensor> float_parameters(uint64_t seed, double grad_scale) {
  std::vector<at::Tensor> ps = parameters_with_grads(seed, grad_scale);
  ps.pop_back();
  return ps;
}

using MakeOptimizer =
    std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>;

// Two steps, the first clipped (scale 10: the factor is < 1), the second not: through the factor
// handed to `make`'s optimizer against clipping the gradients themselves before the same kind of
// optimizer steps. Returns whether the first step was fused.
bool expect_folded_equals_multiplied(const MakeOptimizer& make) {
  const auto ours = float_parameters(4, 10.0);
  const auto theirs = clone_with_grads(ours);
  auto folding = make(ours);
  auto multiplying = make(theirs);
  auto* scaling = dynamic_cast<kernels::GradientScaling*>(folding.get());
  EXPECT_NE(scaling, nullptr);
  std::vector<at::Tensor> before;
  for (const at::Tensor& p : ours) before.push_back(p.grad().clone());
  EXPECT_TRUE(test::identical(clip_grad_norm(ours, 1.0, folding.get()), clip_grad_norm(theirs, 1.0),
                              "norm"));
  // The factor is waiting in the optimizer; the gradients are as they were.
  EXPECT_LT(scaling->next_gradient_scale(), 1.f);
  for (std::size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(test::identical(ours[i].grad(), before[i], "unscaled " + std::to_string(i)));
  folding->step();
  multiplying->step();
  EXPECT_EQ(scaling->next_gradient_scale(), 1.f);
  for (std::size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(test::identical(ours[i], theirs[i], "step 1, parameter " + std::to_string(i)));
  // The same gradients on both sides and no factor: both step on them as they are.
  for (std::size_t i = 0; i < ours.size(); ++i) theirs[i].mutable_grad() = ours[i].grad().clone();
  folding->step();
  multiplying->step();
  for (std::size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(test::identical(ours[i], theirs[i], "step 2, parameter " + std::to_string(i)));
  bool fused = false;
  if (auto* o = dynamic_cast<kernels::FusedAdamW*>(folding.get())) fused = o->last_step_fused();
  if (auto* o = dynamic_cast<kernels::FusedAdam*>(folding.get())) fused = o->last_step_fused();
  if (auto* o = dynamic_cast<kernels::FusedSGD*>(folding.get())) fused = o->last_step_fused();
  return fused;
}

TEST(ClipGradNorm, AFusedOptimizerTakingTheFactorStepsAsAfterClippingTheGradients) {
  EXPECT_TRUE(expect_folded_equals_multiplied([](const std::vector<at::Tensor>& ps) {
    return std::make_unique<kernels::FusedAdamW>(ps, torch::optim::AdamWOptions(1e-2));
  }));
  EXPECT_TRUE(expect_folded_equals_multiplied([](const std::vector<at::Tensor>& ps) {
    return std::make_unique<kernels::FusedAdam>(ps,
                                                torch::optim::AdamOptions(1e-2).weight_decay(0.1));
  }));
  EXPECT_TRUE(expect_folded_equals_multiplied([](const std::vector<at::Tensor>& ps) {
    return std::make_unique<kernels::FusedSGD>(
        ps, torch::optim::SGDOptions(1e-2).momentum(0.9).weight_decay(1e-4));
  }));
  // amsgrad is not fused: LibTorch's step, after a pass that applies the factor.
  EXPECT_FALSE(expect_folded_equals_multiplied([](const std::vector<at::Tensor>& ps) {
    return std::make_unique<kernels::FusedAdamW>(ps,
                                                 torch::optim::AdamWOptions(1e-2).amsgrad(true));
  }));
}

TEST(ClipGradNorm, OtherOptimizersAndOtherTypesGetTheGradientsClipped) {
  // LibTorch's own optimizer takes no factor.
  const auto ps = float_parameters(5, 10.0);
  const auto expected = clone_with_grads(ps);
  torch::optim::AdamW plain(ps, torch::optim::AdamWOptions(1e-2));
  clip_grad_norm(ps, 1.0, &plain);
  torch::nn::utils::clip_grad_norm_(expected, 1.0);
  for (std::size_t i = 0; i < ps.size(); ++i)
    EXPECT_TRUE(test::identical(ps[i].grad(), expected[i].grad(), "AdamW " + std::to_string(i)));
  // A float64 gradient: the fused optimizer's factor is float32 only.
  std::vector<at::Tensor> wide{at::randn({6}, at::kDouble).requires_grad_()};
  wide[0].mutable_grad() = at::full({6}, 10.0, at::kDouble);
  const auto wide_expected = clone_with_grads(wide);
  kernels::FusedAdamW fused(wide, torch::optim::AdamWOptions(1e-2));
  clip_grad_norm(wide, 1.0, &fused);
  torch::nn::utils::clip_grad_norm_(wide_expected, 1.0);
  EXPECT_EQ(fused.next_gradient_scale(), 1.f);
  EXPECT_TRUE(test::identical(wide[0].grad(), wide_expected[0].grad(), "float64"));
}

TEST(ClearGradients, DropsEveryGradientAndTheNextStepIsAsAfterZeroGrad) {
  at::manual_seed(9);
  const at::Tensor x = at::randn({16, 5});
  std::vector<at::Tensor> ours{at::randn({5, 3}).requires_grad_(), at::randn({3}).requires_grad_()};
  std::vector<at::Tensor> theirs{ours[0].detach().clone().requires_grad_(),
                                 ours[1].detach().clone().requires_grad_()};
  kernels::FusedAdamW a(ours, torch::optim::AdamWOptions(1e-2));
  kernels::FusedAdamW b(theirs, torch::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    clear_gradients(a);
    for (const at::Tensor& p : ours) EXPECT_FALSE(p.grad().defined());
    b.zero_grad();
    (at::matmul(x, ours[0]) + ours[1]).tanh().square().sum().backward();
    (at::matmul(x, theirs[0]) + theirs[1]).tanh().square().sum().backward();
    a.step();
    b.step();
    for (std::size_t i = 0; i < ours.size(); ++i)
      EXPECT_TRUE(test::identical(ours[i], theirs[i], "step " + std::to_string(step)));
  }
}

}  // namespace
}  // namespace scaffold::train
