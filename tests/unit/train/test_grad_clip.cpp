// train::clip_grad_norm against LibTorch's torch::nn::utils::clip_grad_norm_ (norm type 2): the
// clipped gradients and the returned norm bit for bit (tolerance 0), with and without clipping
// taking effect, parameters without gradients skipped, and the norm left on the device as a ()
// tensor rather than returned to the host.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>  // torch::Tensor, which clip_grad.h uses without including
#include <torch/nn/utils/clip_grad.h>

#include <vector>

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

}  // namespace
}  // namespace scaffold::train
